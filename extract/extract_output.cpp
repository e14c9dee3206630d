// The output file of the Extract stage: the claim on its names, a partial file created (its
// attributes and datasets) or checked and continued, and the finished file sealed and renamed.
#include "extract/extract.hpp"
#include "extract/extract_internal.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dist.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/output.hpp"
#include "data/prompt_io.hpp"
#include "extract/activations.hpp"
#include "extract/activations_schema.hpp"

namespace icl::extract::detail {

namespace fs = std::filesystem;

namespace {

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
    throw core::InputError("extract", "resume",
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

// Rank 0's file-system checks: the lock, the partial file, the input's identity, free space.
void Extraction::ClaimOutput() {
  dist::OnRoot([&] {
    // The lock before anything looks at the output's names: a partial file may be another
    // run's work in progress, not an interrupted run's.
    lock_.emplace(cfg_.out, "out");
    if (opt_.resume && !fs::exists(partial_))
      throw core::InputError("extract", "resume", "no partial file '" + partial_ + "' to continue");
    if (!opt_.resume && fs::exists(partial_) && !opt_.force)
      throw core::InputError("extract", "out",
                             "'" + partial_ +
                                 "' exists from an interrupted run; pass {resume} to continue "
                                 "it or {force} to start over");
    // Path checks, the input's identity, and the lock against a second writer, before any work;
    // an unfinished partial file is kept for --resume.
    std::vector<std::string> inputs = opt_.inputs;
    inputs.push_back(cfg_.checkpoint);
    output_.emplace(cfg_.out, "out",
                    core::OutputOptions{opt_.force, inputs,
                                        /*keep_partial=*/true,
                                        /*lock=*/false});
    const double have = opt_.resume && fs::exists(partial_) ? double(fs::file_size(partial_)) : 0;
    core::RequireFreeSpace(cfg_.out, RowBytes() * double(cfg_.prompts) * 1.02 - have, "out");
    if (!opt_.resume) {
      std::error_code ec;
      fs::remove(partial_, ec);
    }
  });
}

// Opening or creating is collective; a failure (the same on every rank) stops every rank.
void Extraction::OpenOrCreate() {
  dist::Together([&] {
    if (opt_.resume)
      OpenPartial();
    else
      CreatePartial();
  });
  batch_ = RoundUp(cfg_.batch, chunk_rows_);
}

void Extraction::OpenPartial() {
  auto refuse = [&](const std::string& why) {
    throw core::InputError("extract", "resume", "'" + partial_ + "' " + why);
  };
  try {
    file_ = std::make_unique<h5::File>(h5::File::Open(partial_, h5::File::Mode::kReadWrite,
                                                      h5::File::Durability::kFlushPoints,
                                                      h5::File::Sharing::kAllRanks));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) +
                             "; the partial file was damaged when its run was interrupted; "
                             "start over with {force}");
  }
  h5::File& f = *file_;
  data::CheckFormat(f, kActivationsFormat);
  const std::string file_sha = f.GetString("checkpoint_sha256");
  if (file_sha != sha_)
    refuse("was made from a checkpoint with SHA-256 " + file_sha.substr(0, 12) + "..., but '" +
           cfg_.checkpoint + "' has " + sha_.substr(0, 12) + "...; pass {force} to start over");
  const std::string file_content = f.GetString("extract_config");
  if (file_content != content_)
    refuse("was made with other settings: " + JsonDifference(file_content, content_));
  n_complete_ = f.GetInt("n_complete");
  if (n_complete_ < 0 || n_complete_ > std::int64_t(N_))
    refuse("has n_complete " + std::to_string(n_complete_) + ", outside 0.." + std::to_string(N_));
  const std::int64_t stored_rows = f.GetInt("chunk_rows");
  if (stored_rows < 1 || stored_rows > (1 << 24) || stored_rows % kComputeGroup != 0)
    refuse("has chunk_rows " + std::to_string(stored_rows) + ", expected a multiple of " +
           std::to_string(kComputeGroup));
  chunk_rows_ = static_cast<int>(stored_rows);
  for (int l : cfg_.layers)
    ds_.hidden.push_back(f.OpenDataset(schema::Hidden(l)));
  for (const auto& spec : per_prompt_)
    ds_.by_name.emplace(spec.name, f.OpenDataset(spec.name));
  if (!f.Exists(schema::kGroupDigests))
    refuse("has no row digests (an older iclprobe made it); pass {force} to start over");
  ds_.digests.push_back(f.OpenDataset(schema::kGroupDigests));
  // Parallel HDF5 writes only chunks whose space comes as the dataset grows (files started by
  // several ranks, and uncompressed ones of iclprobe since it ran on ranks).
  if (P_ > 1)
    for (const h5::Dataset* x : {&ds_.hidden.at(0), &ds_[schema::kPredictions]})
      if (x->AllocatesOnWrite())
        refuse(std::string("was started by one process") +
               (cfg_.compress ? " with compressed datasets" : "") +
               ", which several processes cannot continue; resume it without mpirun, or pass "
               "{force} to start over");
  CheckPartial(partial_, ds_, per_prompt_, n_complete_, std::int64_t(N_), T_, H_, hidden_elem_);
  // Rows past n_complete belong to a batch that was interrupted: drop them.
  for (auto& h : ds_.hidden)
    h.Resize(n_complete_);
  for (auto& [name, r] : ds_.by_name)
    r.Resize(n_complete_);
  ds_.digests[0].Resize(Groups(n_complete_));
}

void Extraction::CreatePartial() {
  file_ = std::make_unique<h5::File>(
      h5::File::Create(partial_, /*truncate=*/false, h5::File::Durability::kFlushPoints,
                       h5::File::Sharing::kAllRanks));  // one process: an ordinary file
  WriteAttributes(*file_);
  CreateDatasets(*file_);
  file_->Sync();
}

void Extraction::WriteAttributes(h5::File& f) {
  data::WriteFormatAttrs(f, kActivationsFormat);
  f.SetAttr("model_config", info_.model.ToJson());
  f.SetAttr("task_config", cfg_.task.ToJson());
  f.SetAttr("train_config", info_.train.ToJson());
  f.SetAttr("seed", static_cast<std::int64_t>(cfg_.seed));
  f.SetAttr("prompts", static_cast<std::int64_t>(N_));
  f.SetAttr("checkpoint_sha256", sha_);
  f.SetAttr("checkpoint_path", cfg_.checkpoint);
  f.SetAttr("checkpoint_step", info_.step);
  f.SetAttr("layer_semantics", std::string(schema::kLayerSemantics));
  f.SetAttr("token_layout", std::string(schema::kTokenLayout));
  f.SetAttr("positions", PositionsName(cfg_.positions));
  f.SetAttr("layers", std::vector<std::int64_t>(cfg_.layers.begin(), cfg_.layers.end()));
  f.SetAttr("chunk_rows", static_cast<std::int64_t>(chunk_rows_));
  f.SetAttr("extract_config", content_);
  f.SetAttr("n_complete", std::int64_t{0});
}

void Extraction::CreateDatasets(h5::File& f) {
  h5::Group hidden = f.CreateGroup(schema::kHiddenGroup);
  hidden.SetAttr("positions", PositionsName(cfg_.positions));
  hidden.SetAttr("dtype", cfg_.float16 ? "float16" : "float32");
  hidden.SetAttr("description",
                 std::string("layer_LL [N, T, H] ") + (cfg_.float16 ? "float16" : "float32") +
                     ": state LL of every prompt; T = 2n (all tokens) or n (y-tokens only, "
                     "see positions)" +
                     (cfg_.float16 ? "; computed in float32, rounded to nearest binary16" : ""));
  for (int l : cfg_.layers) {
    const h5::Dims dims = {0, hsize_t(T_), hsize_t(H_)};
    auto opts = Chunked({hsize_t(T_), hsize_t(H_)}, chunk_rows_, hidden_elem_, cfg_.compress);
    opts.labels = schema::kHiddenLabels;
    ds_.hidden.push_back(cfg_.float16 ? f.CreateDataset<h5::Half>(schema::Hidden(l), dims, opts)
                                      : f.CreateDataset<float>(schema::Hidden(l), dims, opts));
    ds_.hidden.back().SetAttr("layer", l);
  }
  for (const auto& spec : per_prompt_) {
    const std::size_t elem = spec.is_float32 ? sizeof(float) : sizeof(double);
    h5::Dims dims = spec.row;
    dims.insert(dims.begin(), 0);
    auto opts = Chunked(spec.row, chunk_rows_, elem, cfg_.compress);
    opts.labels = spec.labels;
    h5::Dataset out = spec.is_float32 ? f.CreateDataset<float>(spec.name, dims, opts)
                                      : f.CreateDataset<double>(spec.name, dims, opts);
    out.SetAttr("description", spec.description);
    if (!spec.learner.empty()) out.SetAttr("learner", spec.learner);
    ds_.by_name.emplace(spec.name, std::move(out));
  }
  ds_[schema::kWRidge].SetAttr("ridge_lambda", cfg_.ridge_lambda);
  ds_[schema::kXtx].SetAttr("symmetric", 1);  // probed as its d(d+1)/2 upper-triangle entries
  h5::DatasetOptions o;
  o.chunk = {1024, 32};
  o.extendible = true;
  o.allocate_on_resize = true;
  o.labels = schema::kDigestLabels;
  ds_.digests.push_back(f.CreateDataset<std::uint8_t>(schema::kGroupDigests, {0, 32}, o));
  ds_.digests[0].SetAttr("description", schema::GroupDigestsDescription(kComputeGroup));
  // The true weights as a target too (k-independent, [N, d]): a second name, no copy.
  f.HardLink(schema::kPromptsW, schema::kW);
  ds_[schema::kPromptsW].SetAttr("per_k", 0);
  if (cfg_.task.family.kind == data::TaskFamily::Kind::kNoiseMix)
    ds_[schema::kSigma].SetAttr("per_k", 0);
  h5::Group targets = f.OpenGroup(schema::kTargetsGroup);
  targets.SetAttr("ridge_lambda", cfg_.ridge_lambda);
  targets.SetAttr("description", std::string(schema::kTargetsDescription));
  namespace ps = data::prompt_set;
  h5::Group prompts = f.OpenGroup(ps::kGroup);
  prompts.SetAttr(ps::kTaskConfig, cfg_.task.ToJson());
  prompts.SetAttr(ps::kSeed, static_cast<std::int64_t>(cfg_.seed));
  prompts.SetAttr(ps::kFirstIndex, std::int64_t{0});
}

// Seals a finished file (its content digest, then the rename) or leaves the partial file.
ExtractResult Extraction::Finish() {
  ExtractResult result;
  result.chunk_rows = chunk_rows_;
  result.batch = static_cast<int>(batch_);
  result.n_complete = n_complete_;
  result.finished = n_complete_ == std::int64_t(N_);
  if (result.finished)
    file_->SetAttr("content_sha256",
                   ContentDigestOf(content_, sha_, ds_.digests[0].ReadAll<std::uint8_t>()));
  ds_ = Datasets();
  file_->Close();
  file_.reset();
  if (result.finished) {
    dist::OnRoot([&] { output_->Commit(); });  // every rank has closed the file
    result.written = cfg_.out;
  } else {
    result.written = partial_;
  }
  return result;
}

}  // namespace icl::extract::detail
