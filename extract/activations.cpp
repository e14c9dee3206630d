// Reading and checking activations files.
#include "extract/activations.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/json.hpp"
#include "core/sha256.hpp"
#include "data/prompt_io.hpp"
#include "extract/activations_schema.hpp"

namespace icl::extract {

Positions ParsePositions(const std::string& name) {
  if (name == "all") return Positions::kAll;
  if (name == "y") return Positions::kY;
  throw core::InputError("extract", "positions",
                         "expected all or y, got '" + name.substr(0, 40) + "'");
}

std::string PositionsName(Positions p) {
  return p == Positions::kAll ? "all" : "y";
}

bool ParseFloat16(const std::string& dtype) {
  if (dtype == "float32") return false;
  if (dtype == "float16") return true;
  throw core::InputError("extract", "dtype",
                         "expected float32 or float16, got '" + dtype.substr(0, 40) + "'");
}

std::string LayerName(int layer) {
  return fmt::format("layer_{:02d}", layer);
}

namespace {

// The learner targets extract_config lists, each checked against its dataset's "learner"
// attribute (a file whose list and datasets disagree was altered).
std::vector<std::string> LearnerTargetsOf(const h5::File& f, const std::string& path) {
  std::vector<std::string> specs;
  if (!f.HasAttr("extract_config")) return specs;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f.GetString("extract_config"));
  } catch (const nlohmann::json::exception&) {
    throw core::InputError("'" + path + "'", "", "attribute 'extract_config' is not JSON");
  }
  if (!j.is_object() || !j.contains("learner_targets")) return specs;
  const auto& list = j["learner_targets"];
  if (!list.is_array())
    throw core::InputError("'" + path + "'", "",
                           "extract_config's learner_targets should be a list of learner specs");
  for (const auto& v : list) {
    if (!v.is_string())
      throw core::InputError("'" + path + "'", "",
                             "extract_config's learner_targets should be a list of learner specs");
    const std::string spec = v.get<std::string>();
    const std::string name = schema::LearnerTarget(spec);
    if (!f.Exists(name) || !f.OpenDataset(name).HasAttr("learner") ||
        f.OpenDataset(name).GetString("learner") != spec)
      throw core::InputError("'" + path + "'", "",
                             "extract_config lists the learner target " + spec.substr(0, 80) +
                                 " but /" + name.substr(0, 80) +
                                 " is missing or names another learner");
    specs.push_back(spec);
  }
  return specs;
}

}  // namespace

ActivationsInfo ReadActivationsInfo(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, kActivationsFormat);
  ActivationsInfo a;
  a.path = path;
  a.model =
      learners::ModelConfig::FromJson(f.GetString("model_config"), "'" + path + "' model_config");
  a.task = data::TaskConfig::FromJson(f.GetString("task_config"), "'" + path + "' task_config");
  const std::int64_t seed = f.GetInt("seed");
  a.seed = static_cast<std::uint64_t>(seed);
  a.prompts = f.GetInt("prompts");
  if (a.prompts < 1)
    throw core::InputError(
        "'" + path + "'", "",
        "attribute 'prompts' is " + std::to_string(a.prompts) + ", expected a positive count");
  const std::int64_t done = f.GetInt("n_complete");
  if (done != a.prompts)
    throw core::InputError("'" + path + "'", "",
                           "is incomplete: " + std::to_string(done) + " of " +
                               std::to_string(a.prompts) +
                               " prompts; finish it with iclprobe extract {resume}");
  a.checkpoint_sha256 = f.GetString("checkpoint_sha256");
  if (f.HasAttr("content_sha256")) a.content_sha256 = f.GetString("content_sha256");
  const std::string pos = f.GetString("positions");
  if (pos != "all" && pos != "y")
    throw core::InputError("'" + path + "'", "", "unknown positions '" + pos + "'");
  a.positions = pos == "all" ? Positions::kAll : Positions::kY;
  a.positions_per_prompt = a.positions == Positions::kAll ? 2 * a.task.n : a.task.n;
  for (const std::int64_t l : f.GetIntList("layers")) {
    if (l < 0 || l > a.model.layers)
      throw core::InputError("'" + path + "'", "",
                             "attribute 'layers' lists state " + std::to_string(l) +
                                 "; the model has states 0.." + std::to_string(a.model.layers));
    a.layers.push_back(static_cast<int>(l));
  }
  if (a.layers.empty() || !std::is_sorted(a.layers.begin(), a.layers.end()) ||
      std::adjacent_find(a.layers.begin(), a.layers.end()) != a.layers.end())
    throw core::InputError("'" + path + "'", "",
                           "attribute 'layers' must list stored states once each, "
                           "ascending");
  const hsize_t N = a.prompts, T = a.positions_per_prompt, H = a.model.hidden, n = a.task.n,
                d = a.task.d;
  for (int l : a.layers) {
    const h5::Dataset h = f.OpenDataset(schema::Hidden(l));
    h.ExpectDims({N, T, H});
    if (!h.IsFloat() || (h.ElementSize() != 2 && h.ElementSize() != 4))
      throw core::InputError("'" + path + "'", "",
                             "/" + schema::Hidden(l) + " should hold float32 or float16 values");
  }
  f.OpenDataset(schema::kPredictions).ExpectDims({N, n});
  f.OpenDataset(schema::kPromptsX).ExpectDims({N, n, d});
  if (f.Exists("targets") && f.OpenGroup("targets").HasAttr("ridge_lambda")) {
    a.ridge_lambda = f.OpenGroup("targets").GetDouble("ridge_lambda");
    if (!(a.ridge_lambda >= 0) || !std::isfinite(a.ridge_lambda))
      throw core::InputError("'" + path + "'", "",
                             "/targets attribute 'ridge_lambda' is " +
                                 std::to_string(a.ridge_lambda) +
                                 ", expected a finite lambda >= 0");
  }
  for (const auto& name : f.OpenGroup("targets").Members()) {
    const h5::Dataset t = f.OpenDataset("targets/" + name);
    const auto dims = t.dims();
    // A target is per k ([N, n, ...]) unless it says per_k = 0 (like w: [N, ...], every k alike).
    const bool per_k = !t.HasAttr("per_k") || t.GetInt("per_k") != 0;
    const bool ok =
        per_k ? dims.size() >= 2 && dims[0] == N && dims[1] == n : !dims.empty() && dims[0] == N;
    if (!ok)
      throw core::InputError("'" + path + "'", "",
                             "/targets/" + name + " should have dims [" + std::to_string(N) +
                                 (per_k ? ", " + std::to_string(n) + ", ...] (per k)" : ", ...]"));
    a.targets.push_back(name);
    a.target_per_k.push_back(per_k);
  }
  a.learner_targets = LearnerTargetsOf(f, path);
  return a;
}

std::string ContentDigestOf(const std::string& extract_config, const std::string& checkpoint_sha256,
                            const std::vector<std::uint8_t>& group_digests) {
  // Storage settings (compression) do not change the content: left out.
  std::string config = extract_config;
  try {
    nlohmann::json j = nlohmann::json::parse(extract_config);
    if (j.is_object()) j.erase("compress");
    config = j.dump();
  } catch (const nlohmann::json::exception&) {
    // Not JSON (a damaged file): hashed as it is, so it cannot match the recorded digest.
  }
  core::Sha256 h;
  h.Update(config.data(), config.size());
  h.Update("\n", 1);
  h.Update(checkpoint_sha256.data(), checkpoint_sha256.size());
  h.Update("\n", 1);
  h.Update(group_digests.data(), group_digests.size());
  const auto d = h.Final();
  return core::Hex(d.data(), d.size());
}

namespace {

// The stored group digests, checked for shape against the file's prompt count.
std::vector<std::uint8_t> GroupDigests(const h5::File& f, const std::string& path,
                                       std::int64_t prompts, const std::string& option) {
  if (!f.Exists(schema::kGroupDigests))
    throw core::InputError("probe", option,
                           "'" + path + "' has no /" + schema::kGroupDigests +
                               " (an older iclprobe made it): re-run extract to get a file "
                               "whose content can be checked");
  const h5::Dataset ds = f.OpenDataset(schema::kGroupDigests);
  ds.ExpectDims({hsize_t((prompts + kComputeGroup - 1) / kComputeGroup), 32});
  return ds.ReadAll<std::uint8_t>();
}

}  // namespace

std::string ContentDigest(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  const std::int64_t prompts = f.GetInt("prompts");
  if (prompts < 1 || prompts > (std::int64_t(1) << 40))
    throw core::InputError("'" + path + "'", "", "attribute 'prompts' is out of range");
  return ContentDigestOf(f.GetString("extract_config"), f.GetString("checkpoint_sha256"),
                         GroupDigests(f, path, prompts, "activations"));
}

void VerifyContentDigest(const std::string& path, const std::string& option) {
  const h5::File f = h5::File::Open(path);
  if (!f.HasAttr("content_sha256"))
    throw core::InputError("probe", option,
                           "'" + path + "' records no content digest (an older iclprobe made it)");
  const std::string stored = f.GetString("content_sha256");
  if (ContentDigest(path) != stored)
    throw core::InputError("probe", option,
                           "'" + path +
                               "': its attributes or row digests no longer match the content "
                               "digest extract recorded; the file was changed after it was "
                               "written: extract it again");
}

void CheckGroupDigests(const std::string& path, const std::vector<h5::Dataset>& hidden,
                       const std::vector<const h5::Dataset*>& per_prompt,
                       const std::vector<std::uint8_t>& stored, std::int64_t rows,
                       const std::string& command, const std::string& option) {
  const auto specs = [&] {
    std::vector<bool> is_float32;
    for (const h5::Dataset* ds : per_prompt)
      is_float32.push_back(ds->ElementSize() == sizeof(float));
    return is_float32;
  }();
  std::vector<float> fbuf;
  std::vector<double> dbuf;
  std::vector<h5::Half> hbuf;
  const std::int64_t G = kComputeGroup;
  if (stored.size() < std::size_t((rows + G - 1) / G) * 32)
    throw core::InputError(command, option,
                           fmt::format("'{}': {} rows but digests for only {} groups of {}", path,
                                       rows, stored.size() / 32, G));
  for (std::int64_t g0 = 0; g0 < rows; g0 += G) {
    const hsize_t count = std::min<std::int64_t>(G, rows - g0);
    core::Sha256 h;
    auto hash_float = [&](const h5::Dataset& ds) {
      if (ds.ElementSize() == sizeof(h5::Half)) {  // float16 hidden states: their stored bits
        hbuf.resize(count * ds.RowSize());
        ds.ReadRows(g0, count, hbuf.data(), hbuf.size());
        h.Update(hbuf.data(), hbuf.size() * sizeof(h5::Half));
        return;
      }
      fbuf.resize(count * ds.RowSize());
      ds.ReadRows(g0, count, fbuf.data(), fbuf.size());
      h.Update(fbuf.data(), fbuf.size() * sizeof(float));
    };
    for (const auto& ds : hidden)
      hash_float(ds);
    for (std::size_t i = 0; i < per_prompt.size(); ++i) {
      if (specs[i]) {
        hash_float(*per_prompt[i]);
        continue;
      }
      dbuf.resize(count * per_prompt[i]->RowSize());
      per_prompt[i]->ReadRows(g0, count, dbuf.data(), dbuf.size());
      h.Update(dbuf.data(), dbuf.size() * sizeof(double));
    }
    const auto d = h.Final();
    if (!std::equal(d.begin(), d.end(), stored.begin() + (g0 / G) * 32))
      throw core::InputError(
          command, option,
          fmt::format("'{}': the rows of prompts {}..{} do not match the digest extract recorded "
                      "for them; the file was changed after it was written: extract it again",
                      path, g0, g0 + count - 1));
  }
}

void VerifyRows(const std::string& path, const std::string& option) {
  VerifyContentDigest(path, option);
  const ActivationsInfo info = ReadActivationsInfo(path);
  const h5::File f = h5::File::Open(path);
  const std::vector<std::uint8_t> stored = GroupDigests(f, path, info.prompts, option);
  std::vector<h5::Dataset> hidden;
  for (int l : info.layers)
    hidden.push_back(f.OpenDataset(schema::Hidden(l)));
  std::vector<h5::Dataset> rest;
  for (const auto& spec :
       schema::PerPromptDatasets(info.task.n, info.task.d, info.learner_targets, info.task.family))
    rest.push_back(f.OpenDataset(spec.name));
  std::vector<const h5::Dataset*> per_prompt;
  for (const auto& ds : rest)
    per_prompt.push_back(&ds);
  CheckGroupDigests(path, hidden, per_prompt, stored, info.prompts, "probe", option);
}

data::PromptSet ReadActivationPrompts(const ActivationsInfo& info, std::int64_t rows) {
  const std::string where = "'" + info.path + "'";
  if (rows < 1 || rows > info.prompts)
    throw core::InputError(
        where, "",
        "holds " + std::to_string(info.prompts) + " prompts, " + std::to_string(rows) + " needed");
  if (info.task.HasQueries()) throw core::InputError(where, "", "holds query-shifted prompts");
  const h5::File f = h5::File::Open(info.path);
  const hsize_t P = info.prompts;
  f.OpenDataset(schema::kPromptsY).ExpectDims({P, hsize_t(info.task.n)});
  f.OpenDataset(schema::kPromptsW).ExpectDims({P, hsize_t(info.task.d)});
  data::PromptSet set;
  set.task = info.task;
  set.seed = info.seed;
  const arma::uword n = info.task.n, d = info.task.d, N = rows;
  set.x.set_size(d, n, N);
  set.y.set_size(n, N);
  set.w.set_size(d, N);
  f.OpenDataset(schema::kPromptsX).ReadRows(0, N, set.x.memptr(), set.x.n_elem);
  f.OpenDataset(schema::kPromptsY).ReadRows(0, N, set.y.memptr(), set.y.n_elem);
  f.OpenDataset(schema::kPromptsW).ReadRows(0, N, set.w.memptr(), set.w.n_elem);
  if (!set.x.is_finite() || !set.y.is_finite() || !set.w.is_finite())
    throw core::InputError(where, "", "/prompts holds a value that is not finite");
  return set;
}

std::string PromptsDigest(const std::string& path, std::int64_t rows) {
  const h5::File f = h5::File::Open(path);
  core::Sha256 h;
  for (const char* name : {schema::kPromptsX, schema::kPromptsY, schema::kPromptsW}) {
    // Hashed by name: a file lacking one (a hand-made fixture) differs from one that has it.
    h.Update(name, std::strlen(name) + 1);
    if (!f.Exists(name)) continue;
    const h5::Dataset ds = f.OpenDataset(name);
    if (std::int64_t(ds.rows()) < rows)
      throw core::InputError(
          "probe", "control",
          fmt::format("'{}': /{} holds {} prompts, {} expected", path, name, ds.rows(), rows));
    std::vector<double> v(std::size_t(rows) * ds.RowSize());
    ds.ReadRows(0, hsize_t(rows), v.data(), v.size());
    h.Update(v.data(), v.size() * sizeof(double));
  }
  const auto d = h.Final();
  return core::Hex(d.data(), d.size());
}

StoredTarget ReadTarget(const ActivationsInfo& info, const std::string& name) {
  const auto it = std::find(info.targets.begin(), info.targets.end(), name);
  if (it == info.targets.end()) {
    std::string have;
    for (const auto& t : info.targets)
      have += (have.empty() ? "" : ", ") + t;
    throw core::InputError("extract", "targets",
                           "'" + name + "' is not in '" + info.path + "' (it has " + have + ")");
  }
  StoredTarget t;
  t.name = name;
  t.per_k = info.target_per_k[it - info.targets.begin()];
  const h5::File f = h5::File::Open(info.path);
  const h5::Dataset ds = f.OpenDataset("targets/" + name);
  const h5::Dims dims = ds.dims();
  const hsize_t N = info.prompts, n = info.task.n;
  // [N, n, entries...] per k, [N, entries...] otherwise; entries a vector or a square matrix.
  const std::size_t lead = t.per_k ? 2 : 1;
  if (dims.size() < lead + 1 || dims.size() > lead + 2 || dims[0] < N || (t.per_k && dims[1] != n))
    throw core::InputError("'" + info.path + "'", "",
                           "/targets/" + name + " has shape " +
                               fmt::format("[{}]", fmt::join(dims, ", ")) + ", expected [" +
                               std::to_string(N) + (t.per_k ? ", " + std::to_string(n) : "") +
                               ", entries] or [..., d, d]");
  t.entries = 1;
  for (std::size_t i = lead; i < dims.size(); ++i)
    t.entries *= dims[i];
  t.symmetric = ds.HasAttr("symmetric") && ds.GetInt("symmetric") != 0;
  if (t.symmetric && (dims.size() != lead + 2 || dims[lead] != dims[lead + 1]))
    throw core::InputError("'" + info.path + "'", "",
                           "/targets/" + name + " is marked symmetric but is not square");
  if (t.symmetric) t.side = dims[lead];
  t.values.resize(std::size_t(N) * (t.per_k ? n : 1) * t.entries);
  ds.ReadRows(0, N, t.values.data(), t.values.size());
  return t;
}

namespace {

// A layer's states are read once, in order, in blocks that need not align with the chunks:
// unfiltered chunks bypass the chunk cache (read straight into the block), compressed ones go
// through one large enough to hold the chunks a block straddles, so each is inflated once.
h5::Dataset OpenHiddenOnce(const h5::File& file, int layer) {
  h5::Dataset ds = file.OpenDataset(schema::Hidden(layer), h5::kNoChunkCache);
  if (!ds.Filtered()) return ds;
  return file.OpenDataset(schema::Hidden(layer), /*chunk_cache_bytes=*/8 << 20);
}

}  // namespace

HiddenReader::HiddenReader(const ActivationsInfo& info, int layer)
    : path_(info.path),
      file_(h5::File::Open(info.path)),
      ds_(OpenHiddenOnce(file_, layer)),
      layer_(layer),
      t_(info.positions_per_prompt),
      h_(info.model.hidden) {
  ds_.ExpectRank(3);
}

arma::fmat HiddenReader::Read(std::int64_t start, std::int64_t count) const {
  arma::fmat buf(std::size_t(t_) * h_, count, arma::fill::none);
  ds_.ReadRows(start, count, buf.memptr(), buf.n_elem);
  if (!buf.is_finite()) {
    const arma::uvec bad = arma::find_nonfinite(buf);
    const arma::uword col = bad(0) / buf.n_rows, pos = (bad(0) % buf.n_rows) / h_;
    throw core::InputError("'" + path_ + "'", "",
                           "/hidden/" + LayerName(layer_) + " has a non-finite value at prompt " +
                               std::to_string(start + col) + ", position " + std::to_string(pos));
  }
  return buf;
}

}  // namespace icl::extract
