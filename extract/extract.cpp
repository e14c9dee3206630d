// Streaming extraction of hidden states, predictions and targets to HDF5.
#include "extract/extract.hpp"
#include "data/errors.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "data/dist.hpp"
#include "data/hdf5.hpp"
#include "data/output.hpp"
#include "data/prompt_io.hpp"
#include "data/sha256.hpp"
#include "data/targets.hpp"
#include "data/tokens_torch.hpp"
#include "extract/activations.hpp"
#include "extract/activations_schema.hpp"
#include "learners/checkpoint.hpp"

namespace icl::extract {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kTargetChunkBytes = 1 << 20;

const char* kLayerSemantics =
    "state 0 = embedding (input projection + learned positions); state l = 1..L = residual "
    "stream after transformer block l (pre-LayerNorm blocks; the final LayerNorm is not applied)";
const char* kTokenLayout =
    "tokens interleave x-token [0, x_j] (0-based position 2(j-1)) and y-token [y_j, 0_d] "
    "(position 2j-1), j = 1..n, width d+1. The prediction of y_{k+1} is read at position 2k "
    "(k = 0..n-1); the state after k examples (k = 1..n) is position 2k-1. With positions = y, "
    "hidden index k-1 is the state after k examples.";

std::string PositionsName(Positions p) {
  return p == Positions::kAll ? "all" : "y";
}

std::int64_t RoundUp(std::int64_t v, std::int64_t m) {
  return (v + m - 1) / m * m;
}

// Names the keys whose values differ between two JSON objects.
std::string JsonDifference(const std::string& a, const std::string& b) {
  // `a` comes from a file: what is not a JSON object is said so, not passed on as a parse error.
  const auto ja = nlohmann::json::parse(a, nullptr, /*allow_exceptions=*/false),
             jb = nlohmann::json::parse(b);
  if (!ja.is_object()) return "its extract_config is not a JSON object";
  std::string out;
  std::set<std::string> keys;
  for (auto it = ja.begin(); it != ja.end(); ++it)
    keys.insert(it.key());
  for (auto it = jb.begin(); it != jb.end(); ++it)
    keys.insert(it.key());
  for (const auto& k : keys) {
    const auto va = ja.contains(k) ? ja[k].dump() : "(none)",
               vb = jb.contains(k) ? jb[k].dump() : "(none)";
    if (va != vb)
      out += (out.empty() ? "" : ", ") + k + " " + va + " in the file vs " + vb + " now";
  }
  return out;
}

struct Datasets {
  std::vector<h5::Dataset> hidden;             // in the order of the stored layers
  std::map<std::string, h5::Dataset> by_name;  // the per-prompt datasets of the schema
  std::vector<h5::Dataset> digests;            // schema::kGroupDigests (one entry)
  h5::Dataset& operator[](const std::string& name) { return by_name.at(name); }
};

h5::DatasetOptions Chunked(const h5::Dims& row_dims, hsize_t rows, std::size_t elem,
                           bool compress) {
  h5::DatasetOptions o;
  o.chunk = row_dims;
  o.chunk.insert(o.chunk.begin(), rows);
  o.extendible = true;
  if (compress) {
    o.shuffle = true;
    o.deflate = 4;
  }
  // Unfiltered chunks get their space as the dataset grows, so a partial file of one process
  // can be resumed by several (parallel HDF5 allocates filtered chunks in its collective writes).
  o.allocate_on_resize = !compress;
  // Room for two chunks, so that appends into a partly written chunk never re-read it.
  std::size_t chunk_bytes = rows * elem;
  for (auto d : row_dims)
    chunk_bytes *= d;
  o.chunk_cache_bytes = std::max<std::size_t>(2 * chunk_bytes + 4096, 1 << 20);
  return o;
}

// A partial file is checked before it is continued as a finished one is before it is read: its
// n_complete is a whole number of groups (or all prompts), every dataset holds at least that
// many rows of the schema's shape and element type, and the rows it counts as done match their
// recorded digests. A crafted or damaged partial would otherwise be "finished" around rows of
// zeros, or into a file that probe refuses later.
void CheckPartial(const std::string& partial, const Datasets& ds,
                  const std::vector<schema::Dataset>& per_prompt, std::int64_t n_complete,
                  std::int64_t prompts, int T, int H, std::size_t hidden_elem) {
  auto refuse = [&](const std::string& why) {
    throw data::InputError("extract", "resume",
                           "'" + partial + "' " + why +
                               "; it is not a partial file extract left: pass {force} to start "
                               "over");
  };
  if (n_complete % kComputeGroup != 0 && n_complete != prompts)
    refuse(fmt::format("has n_complete {}, not a multiple of its groups of {} prompts", n_complete,
                       kComputeGroup));
  auto expect = [&](const h5::Dataset& d, const h5::Dims& row, std::size_t elem) {
    const h5::Dims dims = d.dims();
    h5::Dims want_row(dims.begin() + (dims.empty() ? 0 : 1), dims.end());
    if (dims.empty() || want_row != row)
      refuse(fmt::format("has dataset '{}' of another shape than the schema's", d.name()));
    if (!d.IsFloat() || d.ElementSize() != elem)
      refuse(fmt::format("has dataset '{}' of {}-byte elements, {}-byte floats expected", d.name(),
                         d.ElementSize(), elem));
    if (std::int64_t(dims[0]) < n_complete)
      refuse(fmt::format("has {} rows in '{}' but n_complete {}", dims[0], d.name(), n_complete));
  };
  for (const auto& h : ds.hidden)
    expect(h, {hsize_t(T), hsize_t(H)}, hidden_elem);
  std::vector<const h5::Dataset*> rest;
  for (const auto& spec : per_prompt) {
    const h5::Dataset& d = ds.by_name.at(spec.name);
    expect(d, spec.row, spec.is_float32 ? sizeof(float) : sizeof(double));
    rest.push_back(&d);
  }
  const h5::Dataset& digests = ds.digests.at(0);
  const std::int64_t groups = (n_complete + kComputeGroup - 1) / kComputeGroup;
  if (digests.dims() != h5::Dims{digests.rows(), 32} || std::int64_t(digests.rows()) < groups)
    refuse(fmt::format("has {} row digests for n_complete {}", digests.rows(), n_complete));
  std::vector<std::uint8_t> stored(std::size_t(groups) * 32);
  digests.ReadRows(0, hsize_t(groups), stored.data(), stored.size());
  CheckGroupDigests(partial, ds.hidden, rest, stored, n_complete, "extract", "resume");
}

}  // namespace

int ChunkRows(std::size_t row_bytes) {
  const std::int64_t rows =
      std::llround(double(1 << 20) / std::max<std::size_t>(1, row_bytes) / kComputeGroup);
  return static_cast<int>(std::max<std::int64_t>(1, rows) * kComputeGroup);
}

std::string ExtractConfig::ContentJson(const learners::ModelConfig& model) const {
  nlohmann::json j = {{"task", nlohmann::json::parse(task.ToJson())},
                      {"prompts", prompts},
                      {"seed", seed},
                      {"layers", layers},
                      {"positions", PositionsName(positions)},
                      {"ridge_lambda", ridge_lambda},
                      {"compress", compress},
                      {"model", nlohmann::json::parse(model.ToJson())}};
  if (float16) j["hidden_dtype"] = "float16";  // absent: float32 (files from before the option)
  return j.dump();
}

void ValidateConfig(ExtractConfig& c, const learners::ModelConfig& model) {
  if (c.prompts <= 0)
    throw data::InputError("extract", "prompts",
                           "must be positive, got " + std::to_string(c.prompts));
  if (c.batch <= 0)
    throw data::InputError("extract", "batch", "must be positive, got " + std::to_string(c.batch));
  if (!(c.ridge_lambda >= 0) || !std::isfinite(c.ridge_lambda))
    throw data::InputError("extract", "ridge_lambda", "must be a finite non-negative number");
  if (c.task.d != model.d)
    throw std::invalid_argument("checkpoint '" + c.checkpoint +
                                "' has d=" + std::to_string(model.d) +
                                " but the prompts have d=" + std::to_string(c.task.d));
  if (c.task.n <= 0 || c.task.n > model.n_max)
    throw data::InputError("extract", "n",
                           "the checkpoint '" + c.checkpoint + "' reads 1.." +
                               std::to_string(model.n_max) + " examples, got " +
                               std::to_string(c.task.n));
  c.task.Validate();
  if (c.layers.empty())
    for (int l = 0; l <= model.layers; ++l)
      c.layers.push_back(l);
  std::set<int> seen;
  for (int l : c.layers) {
    if (l < 0 || l > model.layers)
      throw data::InputError("extract", "layers",
                             "layer " + std::to_string(l) +
                                 " does not exist; the model has states 0.." +
                                 std::to_string(model.layers) + " (0 = embedding)");
    if (!seen.insert(l).second)
      throw data::InputError("extract", "layers",
                             "layer " + std::to_string(l) + " is listed twice");
  }
  std::sort(c.layers.begin(), c.layers.end());
}

ExtractResult Extract(ExtractConfig cfg, const ExtractOptions& opt,
                      const std::function<void(const ExtractProgress&)>& on_batch) {
  // Several ranks (mpirun): every rank computes and writes its own rows of the one file, in
  // rounds of P batches; file-system checks, the lock and the rename are rank 0's.
  const int P = dist::Size(), me = dist::Rank();
  learners::CheckpointInfo info;
  learners::Transformer model{nullptr};
  std::string sha;
  dist::Together([&] {
    model = learners::LoadCheckpoint(cfg.checkpoint, &info);
    ValidateConfig(cfg, info.model);
    sha = data::Sha256File(cfg.checkpoint);
  });
  model->eval();
  torch::NoGradGuard no_grad;

  const std::string partial = cfg.out + ".partial";
  const std::size_t hidden_elem = cfg.float16 ? sizeof(h5::Half) : sizeof(float);
  std::optional<data::OutputLock> lock;  // destroyed after `output`
  std::optional<data::AtomicOutput> output;
  dist::OnRoot([&] {
    // The lock before anything looks at the output's names: a partial file may be another
    // run's work in progress, not an interrupted run's.
    lock.emplace(cfg.out, "out");
    if (opt.resume && !fs::exists(partial))
      throw data::InputError("extract", "resume", "no partial file '" + partial + "' to continue");
    if (!opt.resume && fs::exists(partial) && !opt.force)
      throw data::InputError("extract", "out",
                             "'" + partial +
                                 "' exists from an interrupted run; pass {resume} to continue "
                                 "it or {force} to start over");
    // Path checks, the input's identity, and the lock against a second writer, before any work;
    // an unfinished partial file is kept for --resume.
    output.emplace(cfg.out, "out",
                   data::OutputOptions{opt.force,
                                       {cfg.checkpoint},
                                       /*keep_partial=*/true,
                                       /*lock=*/false});
    const int T = cfg.positions == Positions::kAll ? 2 * cfg.task.n : cfg.task.n;
    const double d = cfg.task.d, n = cfg.task.n;
    const double row_bytes = double(cfg.layers.size()) * T * info.model.hidden * hidden_elem +
                             n * sizeof(float) + (n * d + n + d + 3 * n * d + n * d * d) * 8.0;
    const double have = opt.resume && fs::exists(partial) ? double(fs::file_size(partial)) : 0;
    data::RequireFreeSpace(cfg.out, row_bytes * double(cfg.prompts) * 1.02 - have, "out");
    if (!opt.resume) {
      std::error_code ec;
      fs::remove(partial, ec);
    }
  });

  const std::string content = cfg.ContentJson(info.model);
  const int d = cfg.task.d, n = cfg.task.n, H = info.model.hidden;
  const int T = cfg.positions == Positions::kAll ? 2 * n : n;
  const hsize_t N = cfg.prompts;

  // Chunks of about 1 MiB, but no larger than a batch: a batch then always writes whole chunks
  // (the last one of the file aside), so compressed chunks are written once.
  int chunk_rows = static_cast<int>(std::min<std::int64_t>(
      ChunkRows(std::size_t(T) * H * hidden_elem), RoundUp(cfg.batch, kComputeGroup)));
  std::int64_t n_complete = 0;
  std::unique_ptr<h5::File> file;
  Datasets ds;
  const std::vector<schema::Dataset> per_prompt = schema::PerPromptDatasets(n, d);
  const auto sharing = h5::File::Sharing::kAllRanks;  // one process: an ordinary file
  // Opening or creating is collective; a failure (the same on every rank) stops every rank.
  dist::Together([&] {
    if (opt.resume) {
      try {
        file = std::make_unique<h5::File>(h5::File::Open(
            partial, h5::File::Mode::kReadWrite, h5::File::Durability::kFlushPoints, sharing));
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string(e.what()) +
                                 "; the partial file was damaged when its run was interrupted; "
                                 "start over with {force}");
      }
      data::CheckFormat(*file, kActivationsFormat);
      const std::string file_sha = file->GetString("checkpoint_sha256");
      if (file_sha != sha)
        throw data::InputError("extract", "resume",
                               "'" + partial + "' was made from a checkpoint with SHA-256 " +
                                   file_sha.substr(0, 12) + "..., but '" + cfg.checkpoint +
                                   "' has " + sha.substr(0, 12) +
                                   "...; pass {force} to start over");
      const std::string file_content = file->GetString("extract_config");
      if (file_content != content)
        throw data::InputError("extract", "resume",
                               "'" + partial + "' was made with other settings: " +
                                   JsonDifference(file_content, content));
      n_complete = file->GetInt("n_complete");
      if (n_complete < 0 || n_complete > std::int64_t(N))
        throw data::InputError("extract", "resume",
                               "'" + partial + "' has n_complete " + std::to_string(n_complete) +
                                   ", outside 0.." + std::to_string(N));
      const std::int64_t stored_rows = file->GetInt("chunk_rows");
      if (stored_rows < 1 || stored_rows > (1 << 24) || stored_rows % kComputeGroup != 0)
        throw data::InputError("extract", "resume",
                               "'" + partial + "' has chunk_rows " + std::to_string(stored_rows) +
                                   ", expected a multiple of " + std::to_string(kComputeGroup));
      chunk_rows = static_cast<int>(stored_rows);
      for (int l : cfg.layers)
        ds.hidden.push_back(file->OpenDataset(schema::Hidden(l)));
      for (const auto& spec : per_prompt)
        ds.by_name.emplace(spec.name, file->OpenDataset(spec.name));
      if (!file->Exists(schema::kGroupDigests))
        throw data::InputError("extract", "resume",
                               "'" + partial +
                                   "' has no row digests (an older iclprobe made it); pass {force} "
                                   "to start over");
      ds.digests.push_back(file->OpenDataset(schema::kGroupDigests));
      // Parallel HDF5 writes only chunks whose space comes as the dataset grows (files started by
      // several ranks, and uncompressed ones of iclprobe since it ran on ranks).
      if (P > 1)
        for (const h5::Dataset* x : {&ds.hidden.at(0), &ds[schema::kPredictions]})
          if (x->AllocatesOnWrite())
            throw data::InputError("extract", "resume",
                                   "'" + partial + "' was started by one process" +
                                       (cfg.compress ? " with compressed datasets" : "") +
                                       ", which several processes cannot continue; resume it "
                                       "without mpirun, or pass {force} to start over");
      CheckPartial(partial, ds, per_prompt, n_complete, std::int64_t(N), T, H, hidden_elem);
      // Rows past n_complete belong to a batch that was interrupted: drop them.
      for (auto& h : ds.hidden)
        h.Resize(n_complete);
      for (auto& [name, r] : ds.by_name)
        r.Resize(n_complete);
      ds.digests[0].Resize((n_complete + kComputeGroup - 1) / kComputeGroup);
    } else {
      file = std::make_unique<h5::File>(h5::File::Create(
          partial, /*truncate=*/false, h5::File::Durability::kFlushPoints, sharing));
      h5::File& f = *file;
      data::WriteFormatAttrs(f, kActivationsFormat);
      f.SetAttr("model_config", info.model.ToJson());
      f.SetAttr("task_config", cfg.task.ToJson());
      f.SetAttr("train_config", info.train.ToJson());
      f.SetAttr("seed", static_cast<std::int64_t>(cfg.seed));
      f.SetAttr("prompts", static_cast<std::int64_t>(N));
      f.SetAttr("checkpoint_sha256", sha);
      f.SetAttr("checkpoint_path", cfg.checkpoint);
      f.SetAttr("checkpoint_step", info.step);
      f.SetAttr("layer_semantics", std::string(kLayerSemantics));
      f.SetAttr("token_layout", std::string(kTokenLayout));
      f.SetAttr("positions", PositionsName(cfg.positions));
      f.SetAttr("layers", std::vector<std::int64_t>(cfg.layers.begin(), cfg.layers.end()));
      f.SetAttr("chunk_rows", static_cast<std::int64_t>(chunk_rows));
      f.SetAttr("extract_config", content);
      f.SetAttr("n_complete", std::int64_t{0});
      h5::Group hidden = f.CreateGroup("hidden");
      hidden.SetAttr("positions", PositionsName(cfg.positions));
      hidden.SetAttr("dtype", cfg.float16 ? "float16" : "float32");
      hidden.SetAttr("description",
                     std::string("layer_LL [N, T, H] ") + (cfg.float16 ? "float16" : "float32") +
                         ": state LL of every prompt; T = 2n (all tokens) or n (y-tokens only, "
                         "see positions)" +
                         (cfg.float16 ? "; computed in float32, rounded to nearest binary16" : ""));
      for (int l : cfg.layers) {
        const h5::Dims dims = {0, hsize_t(T), hsize_t(H)};
        const auto opts = Chunked({hsize_t(T), hsize_t(H)}, chunk_rows, hidden_elem, cfg.compress);
        ds.hidden.push_back(cfg.float16 ? f.CreateDataset<h5::Half>(schema::Hidden(l), dims, opts)
                                        : f.CreateDataset<float>(schema::Hidden(l), dims, opts));
        ds.hidden.back().SetAttr("layer", l);
      }
      for (const auto& spec : per_prompt) {
        const std::size_t elem = spec.is_float32 ? sizeof(float) : sizeof(double);
        h5::Dims dims = spec.row;
        dims.insert(dims.begin(), 0);
        const auto opts = Chunked(spec.row, chunk_rows, elem, cfg.compress);
        h5::Dataset out = spec.is_float32 ? f.CreateDataset<float>(spec.name, dims, opts)
                                          : f.CreateDataset<double>(spec.name, dims, opts);
        out.SetAttr("description", spec.description);
        ds.by_name.emplace(spec.name, std::move(out));
      }
      ds[schema::kWRidge].SetAttr("ridge_lambda", cfg.ridge_lambda);
      ds[schema::kXtx].SetAttr("symmetric", 1);  // probed as its d(d+1)/2 upper-triangle entries
      {
        h5::DatasetOptions o;
        o.chunk = {1024, 32};
        o.extendible = true;
        o.allocate_on_resize = true;
        ds.digests.push_back(f.CreateDataset<std::uint8_t>(schema::kGroupDigests, {0, 32}, o));
        ds.digests[0].SetAttr(
            "description",
            fmt::format("SHA-256 of the rows of each group of {} prompts: every hidden state in "
                        "layer order, then predictions, prompts/x, y, w, targets/w_ols, w_ridge, "
                        "xty, xtx (native little-endian bytes); the root attribute content_sha256 "
                        "is SHA-256 of extract_config (JSON, without compress), a newline, "
                        "checkpoint_sha256, a newline and these digests",
                        kComputeGroup));
      }
      // The true weights as a target too (k-independent, [N, d]): a second name, no copy.
      f.HardLink(schema::kPromptsW, schema::kW);
      ds[schema::kPromptsW].SetAttr("per_k", 0);
      h5::Group targets = f.OpenGroup("targets");
      targets.SetAttr("ridge_lambda", cfg.ridge_lambda);
      targets.SetAttr("description",
                      std::string("regression quantities after k examples; index k-1 along the "
                                  "second axis is the value after k examples (w, the true "
                                  "weights [N, d], is the same for every k)"));
      h5::Group prompts = f.OpenGroup("prompts");
      prompts.SetAttr("task_config", cfg.task.ToJson());
      prompts.SetAttr("seed", static_cast<std::int64_t>(cfg.seed));
      prompts.SetAttr("first_index", std::int64_t{0});
      f.Sync();
    }
  });

  const std::int64_t batch = RoundUp(cfg.batch, chunk_rows);
  const double batch_bytes = double(cfg.layers.size()) * T * H * hidden_elem +
                             double(n) * sizeof(float) +
                             (double(n) * d + n + d + 3.0 * n * d + double(n) * d * d) * 8.0;
  ExtractResult result;
  result.chunk_rows = chunk_rows;
  result.batch = static_cast<int>(batch);
  const int G = kComputeGroup;
  const int workers = std::max(1, cfg.workers);

  // One batch: the prompts, every stored state, the predictions and the targets.
  struct Batch {
    std::int64_t count = 0;
    data::PromptSet set;
    std::vector<torch::Tensor> hidden;
    torch::Tensor predictions;
    data::TargetSet targets;
    std::vector<std::uint8_t> digests;  // 32 bytes per group of kComputeGroup prompts
  };
  auto count_groups = [&](std::int64_t count) { return (count + G - 1) / G; };
  // Runs f(j) for groups j = 0..groups-1 round-robin on the workers (the caller is worker 0),
  // rethrowing the first error after all have stopped.
  auto on_workers = [&](std::int64_t groups, const std::function<void(std::int64_t)>& f) {
    const int used = static_cast<int>(std::min<std::int64_t>(workers, groups));
    std::vector<std::exception_ptr> errors(std::max(used, 1));
    auto run = [&](int w) {
      try {
        torch::NoGradGuard no_grad_here;  // grad mode is per thread
        for (std::int64_t j = w; j < groups; j += workers)
          f(j);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    };
    std::vector<std::thread> threads;
    for (int w = 1; w < used; ++w)
      threads.emplace_back(run, w);
    if (used > 0) run(0);
    for (auto& t : threads)
      t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  };
  // Groups of G prompts go round-robin to the workers; the targets are computed meanwhile on
  // the calling thread. Each group is padded to G rows and run whole, so a prompt's states
  // are the same whichever worker, batch size or thread count computed them.
  auto compute = [&](std::int64_t first, std::int64_t count) {
    Batch b;
    b.count = count;
    // float16 states are computed in float32 and rounded below.
    const auto stored = cfg.float16 && count == 0 ? torch::kHalf : torch::kFloat32;
    for (std::size_t i = 0; i < cfg.layers.size(); ++i)
      b.hidden.push_back(torch::empty({count, T, H}, stored));
    b.predictions = torch::empty({count, n});
    if (count == 0) return b;  // a rank with no rows in the last round: empty blocks
    b.set = data::SamplePrompts(cfg.task, cfg.seed, first, count);
    const std::int64_t groups = count_groups(count);
    // The targets: on a thread of their own while the workers run the model, or after it on
    // one thread (--threads 1 uses one core).
    std::exception_ptr targets_error;
    auto compute_targets = [&] {
      try {
        b.targets = data::ComputeTargets(b.set, cfg.ridge_lambda);
      } catch (...) {
        targets_error = std::current_exception();
      }
    };
    std::thread targets;
    if (workers > 1) targets = std::thread(compute_targets);
    try {
      on_workers(groups, [&](std::int64_t j) {
        const std::int64_t g0 = j * G, g = std::min<std::int64_t>(G, count - g0);
        auto tokens = torch::zeros({G, 2L * n, d + 1L});  // padded to a whole group
        tokens.slice(0, 0, g).copy_(data::TokenTensor(b.set, g0, g));
        const auto r = model->Run(tokens, {/*hidden_states=*/true, /*attention=*/false});
        for (std::size_t i = 0; i < cfg.layers.size(); ++i) {
          auto h = r.hidden[cfg.layers[i]].slice(0, 0, g);
          if (cfg.positions == Positions::kY)
            h = h.slice(/*dim=*/1, /*start=*/1, /*end=*/2 * n, /*step=*/2);
          b.hidden[i].slice(0, g0, g0 + g).copy_(h);
        }
        b.predictions.slice(0, g0, g0 + g).copy_(r.predictions.slice(0, 0, g));
      });
    } catch (...) {
      if (targets.joinable()) targets.join();
      throw;
    }
    if (targets.joinable())
      targets.join();
    else
      compute_targets();
    if (targets_error) std::rethrow_exception(targets_error);
    // float16 storage: rounded to nearest (ties to even) here, so the digests below hash the
    // bytes that are stored.
    // A state or prediction that is not finite (or beyond float16's range, 65504, when stored
    // so) would be written as inf or NaN and carried into every probe: refused with the batch
    // unwritten (the partial file keeps the batches before it).
    for (std::size_t i = 0; i < cfg.layers.size(); ++i) {
      const double top = b.hidden[i].abs().max().item<double>();
      if (!std::isfinite(top) || (cfg.float16 && top > 65504.0))
        throw std::runtime_error(fmt::format(
            "extract: state {} of prompts {}..{} reaches |h| = {}, {}", cfg.layers[i], first,
            first + count - 1, top,
            std::isfinite(top) ? "beyond float16's largest value 65504: store float32 states"
                               : "not a finite number: the prompts or the model overflow float32"));
    }
    if (!torch::isfinite(b.predictions).all().item<bool>())
      throw std::runtime_error(
          fmt::format("extract: the model's predictions of prompts {}..{} are not finite numbers",
                      first, first + count - 1));
    if (cfg.float16)
      for (auto& h : b.hidden)
        h = h.to(torch::kHalf).contiguous();
    // Each group's digest over every dataset's rows, in the order of the schema's description.
    struct Rows {
      const unsigned char* data;
      std::size_t row_bytes;
    };
    auto rows = [&](const void* p, std::size_t total_bytes) {
      return Rows{static_cast<const unsigned char*>(p), total_bytes / std::size_t(count)};
    };
    std::vector<Rows> blocks;
    for (const auto& h : b.hidden)
      blocks.push_back(rows(h.data_ptr(), h.numel() * h.element_size()));
    const data::TargetSet& t = b.targets;
    const std::map<std::string, Rows> named = {
        {schema::kPredictions,
         rows(b.predictions.data_ptr<float>(), b.predictions.numel() * sizeof(float))},
        {schema::kPromptsX, rows(b.set.x.memptr(), b.set.x.n_elem * sizeof(double))},
        {schema::kPromptsY, rows(b.set.y.memptr(), b.set.y.n_elem * sizeof(double))},
        {schema::kPromptsW, rows(b.set.w.memptr(), b.set.w.n_elem * sizeof(double))},
        {schema::kWOls, rows(t.w_ols.memptr(), t.w_ols.n_elem * sizeof(double))},
        {schema::kWRidge, rows(t.w_ridge.memptr(), t.w_ridge.n_elem * sizeof(double))},
        {schema::kXty, rows(t.xty.memptr(), t.xty.n_elem * sizeof(double))},
        {schema::kXtx, rows(t.xtx.memptr(), t.xtx.n_elem * sizeof(double))}};
    for (const auto& spec : per_prompt)
      blocks.push_back(named.at(spec.name));
    b.digests.resize(groups * 32);
    on_workers(groups, [&](std::int64_t j) {
      const std::int64_t g0 = j * G, g = std::min<std::int64_t>(G, count - g0);
      data::Sha256 h;
      for (const auto& r : blocks)
        h.Update(r.data + g0 * r.row_bytes, g * r.row_bytes);
      const auto digest = h.Final();
      std::copy(digest.begin(), digest.end(), b.digests.begin() + j * 32);
    });
    return b;
  };
  // Stores one batch and then, once its rows are durably on disk, raises n_complete. Runs on
  // the writer thread; only it touches the file while batches are in flight.
  // A round: rows [first, first + rows) of the file, this rank's batch b among them (P = 1: one
  // batch). Every dataset grows to the round's end, then each rank writes its rows (collective).
  auto store = [&](const Batch& b, std::int64_t first, std::int64_t rows) {
    const std::int64_t count = b.count, end = first + rows;
    const std::int64_t mine = std::min(end, first + me * batch);
    // Room for the whole round before HDF5 writes any of it (see h5::File::Reserve): rows plus
    // a quarter for chunk indexes and headers.
    try {
      file->Reserve(static_cast<std::uint64_t>(batch_bytes * double(rows) * 1.25) + (1 << 20));
    } catch (const dist::PeerFailed&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(e.what()) + "; " + std::to_string(n_complete) + " of " +
                               std::to_string(N) +
                               " prompts are safe in the partial file: free space and run the "
                               "same command with {resume}");
    }
    auto put = [&](h5::Dataset& out, auto* data, std::size_t elements) {
      out.Resize(end);
      out.WriteRows(mine, count, data, elements);
    };
    for (std::size_t i = 0; i < ds.hidden.size(); ++i) {
      const torch::Tensor& h = b.hidden[i];
      if (cfg.float16)
        put(ds.hidden[i], static_cast<const h5::Half*>(h.data_ptr()), h.numel());
      else
        put(ds.hidden[i], h.data_ptr<float>(), h.numel());
    }
    put(ds[schema::kPredictions], b.predictions.data_ptr<float>(), b.predictions.numel());
    const data::PromptSet& set = b.set;
    const data::TargetSet& t = b.targets;
    put(ds[schema::kPromptsX], set.x.memptr(), set.x.n_elem);
    put(ds[schema::kPromptsY], set.y.memptr(), set.y.n_elem);
    put(ds[schema::kPromptsW], set.w.memptr(), set.w.n_elem);
    put(ds[schema::kWOls], t.w_ols.memptr(), t.w_ols.n_elem);
    put(ds[schema::kWRidge], t.w_ridge.memptr(), t.w_ridge.n_elem);
    put(ds[schema::kXty], t.xty.memptr(), t.xty.n_elem);
    put(ds[schema::kXtx], t.xtx.memptr(), t.xtx.n_elem);
    // Batches start on whole groups, so each rank's digests are its own rows of the dataset.
    ds.digests[0].Resize(count_groups(end));
    ds.digests[0].WriteRows(mine / G, count_groups(count), b.digests.data(), b.digests.size());
    // The rows reach the disk before n_complete says they are there: a failed write (disk
    // full) leaves n_complete at the last batch that is durably on disk, so --resume redoes
    // the failed batch instead of keeping a block of unwritten rows.
    file->Sync();
    n_complete = end;  // every rank's rows of the round are on disk: the minimum over ranks
    file->SetAttr("n_complete", n_complete);
    file->Sync();
    if (on_batch && dist::IsRoot())
      on_batch({n_complete, std::int64_t(N), double(fs::file_size(partial)) / (1 << 20)});
  };

  // A pipeline two batches deep: batch b + 1 is computed while the writer stores batch b, so
  // memory stays at two batches whatever N is. A write error surfaces at the next hand-over.
  // With several ranks the writer thread makes the collective calls of a round while the main
  // thread computes the next; MPI calls never overlap (the hand-over waits for the writer).
  std::future<void> writing;
  std::int64_t next = n_complete, batches = 0;
  auto hand_over = [&](std::unique_ptr<Batch> b, std::exception_ptr error, std::int64_t first,
                       std::int64_t rows) {
    if (writing.valid()) writing.get();  // rethrows the writer's error
    // A rank whose computation failed stops every rank before the round's collective writes.
    dist::Together([&] {
      if (error) std::rethrow_exception(error);
    });
    if (b)
      writing = std::async(
          std::launch::async,
          [&, first, rows, b = std::shared_ptr<Batch>(std::move(b))] { store(*b, first, rows); });
  };
  try {
    while (next < std::int64_t(N)) {
      if (opt.stop_after_batches >= 0 && batches >= opt.stop_after_batches) break;
      // Round: P batches from `next`; this rank computes the me-th (none past the end).
      const std::int64_t rows = std::min<std::int64_t>(P * batch, N - next);
      const std::int64_t first = std::min<std::int64_t>(next + me * batch, next + rows);
      const std::int64_t count = std::min<std::int64_t>(batch, next + rows - first);
      std::unique_ptr<Batch> b;
      std::exception_ptr error;
      try {
        b = std::make_unique<Batch>(compute(first, count));
      } catch (...) {
        error = std::current_exception();
      }
      hand_over(std::move(b), error, next, rows);
      next += rows;
      ++batches;
    }
    hand_over(nullptr, nullptr, 0, 0);
  } catch (...) {
    if (writing.valid()) writing.wait();  // the file is closed only when the writer is done
    throw;
  }
  result.n_complete = n_complete;
  if (n_complete == std::int64_t(N))
    file->SetAttr("content_sha256",
                  ContentDigestOf(content, sha, ds.digests[0].ReadAll<std::uint8_t>()));
  ds = Datasets();
  file->Close();
  file.reset();
  result.finished = n_complete == std::int64_t(N);
  if (result.finished) {
    dist::OnRoot([&] { output->Commit(); });  // every rank has closed the file
    result.written = cfg.out;
  } else {
    result.written = partial;
  }
  return result;
}

}  // namespace icl::extract
