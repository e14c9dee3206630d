// Streaming extraction of hidden states, predictions and targets to HDF5.
#include "extract/extract.hpp"
#include "extract/forward.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/dist.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/output.hpp"
#include "core/sha256.hpp"
#include "data/prompt_io.hpp"
#include "data/targets.hpp"
#include "data/tokens_torch.hpp"
#include "extract/activations.hpp"
#include "extract/activations_schema.hpp"
#include "learners/checkpoint.hpp"
#include "learners/classical.hpp"

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
  if (!learner_targets.empty()) j["learner_targets"] = learner_targets;  // absent: none
  return j.dump();
}

namespace {

// The learner of a learner target: a spec that parses and names a linear learner with weights
// (knn has none, zero's are always 0). Both front ends come through here.
std::unique_ptr<learners::ClassicalLearner> StorableLearner(const std::string& spec,
                                                            const data::TaskConfig& task,
                                                            const std::string& field) {
  auto learner = learners::MakeLearner(spec, task, field);
  if (!learner->is_linear() || learner->spec() == "zero")
    throw core::InputError("extract", field,
                           spec +
                               " has no weight vector to store (only linear learners with "
                               "weights: ols, ridge, bayes, gd, sgd, newton)");
  return learner;
}

}  // namespace

void ExtractConfig::Validate(const learners::ModelConfig& model) const {
  const ExtractConfig& c = *this;
  if (c.task.HasQueries())
    throw core::InputError(
        "extract", "query_shift",
        "the activations hold the states of the prompt's own tokens, and a shifted "
        "query has none there; give a context shift (a query shift is for "
        "predictions: baselines, compare)");
  if (c.prompts <= 0)
    throw core::InputError("extract", "prompts",
                           "must be positive, got " + std::to_string(c.prompts));
  if (c.batch <= 0)
    throw core::InputError("extract", "batch", "must be positive, got " + std::to_string(c.batch));
  if (!(c.ridge_lambda >= 0) || !std::isfinite(c.ridge_lambda))
    throw core::InputError("extract", "ridge_lambda", "must be a finite non-negative number");
  if (c.task.d != model.d)
    throw core::InputError(
        "checkpoint '" + c.checkpoint + "'", "",
        "has d=" + std::to_string(model.d) + " but the prompts have d=" + std::to_string(c.task.d));
  if (c.task.n <= 0 || c.task.n > model.n_max)
    throw core::InputError("extract", "n",
                           "the checkpoint '" + c.checkpoint + "' reads 1.." +
                               std::to_string(model.n_max) + " examples, got " +
                               std::to_string(c.task.n));
  c.task.Validate();
  std::set<int> seen;
  for (int l : c.layers) {
    if (l < 0 || l > model.layers)
      throw core::InputError("extract", "layers",
                             "layer " + std::to_string(l) +
                                 " does not exist; the model has states 0.." +
                                 std::to_string(model.layers) + " (0 = embedding)");
    if (!seen.insert(l).second)
      throw core::InputError("extract", "layers",
                             "layer " + std::to_string(l) + " is listed twice");
  }
  std::set<std::string> names;
  for (const auto& s : schema::PerPromptDatasets(c.task.n, c.task.d))
    names.insert(s.name);
  for (const std::string& spec : c.learner_targets) {
    const auto learner = StorableLearner(spec, c.task, "learner_targets");
    if (learner->spec() != spec)
      throw core::InputError("extract", "learner_targets",
                             "write " + spec + " as " + learner->spec() +
                                 " (the spec's canonical form, which names the dataset)");
    if (!names.insert(schema::LearnerTarget(spec)).second)
      throw core::InputError("extract", "learner_targets",
                             spec + ": /" + schema::LearnerTarget(spec) +
                                 " is stored already (listed twice, or a built-in target)");
  }
}

std::vector<std::string> CanonicalLearnerSpecs(const std::vector<std::string>& specs,
                                               const data::TaskConfig& task,
                                               const std::string& field) {
  std::vector<std::string> out;
  for (const std::string& spec : specs)
    out.push_back(StorableLearner(spec, task, field)->spec());
  return out;
}

std::vector<int> ExtractConfig::StatesOf(const learners::ModelConfig& model) const {
  std::vector<int> states = layers;
  if (states.empty())
    for (int l = 0; l <= model.layers; ++l)
      states.push_back(l);
  std::sort(states.begin(), states.end());
  return states;
}

namespace {

// One batch: the prompts, every stored state, the predictions and the targets.
struct Batch {
  std::int64_t count = 0;
  data::PromptSet set;
  std::vector<torch::Tensor> hidden;
  torch::Tensor predictions;
  data::TargetSet targets;
  std::map<std::string, arma::cube> learner_targets;  // dataset name -> d x n x N
  std::vector<std::uint8_t> digests;                  // 32 bytes per group of kComputeGroup prompts
};

// The bytes of one per-prompt dataset in a batch: `elements` values, float32 or float64.
struct RowBlock {
  const void* data;
  std::size_t elements;
  bool is_float32;
};

}  // namespace

// The learner's run gives weights after 0..n-1 examples; a zero example appended (x = 0, y = 0)
// gives the weights after all n without changing the earlier ones.
arma::cube LearnerWeights(const data::PromptSet& set, const std::string& spec) {
  const auto learner = learners::MakeLearner(spec, set.task);
  const int d = set.task.d, n = set.task.n;
  arma::cube out(d, n, set.size());
  arma::mat x(d, n + 1, arma::fill::zeros);
  arma::vec y(n + 1, arma::fill::zeros);
  learners::LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    x.cols(0, n - 1) = set.x.slice(i);
    y.head(n) = set.y.col(i);
    learner->Run(x, y, run);
    out.slice(i) = run.weights.cols(1, n);
    // An iteration outside its convergence region (newton:K:C with C lambda_max(X'X + lambda I)
    // >= 2, gd:ALPHA:K with 2 ALPHA lambda_max(X'X) >= 2) overflows; nothing in the file's
    // schema lets a target be undefined, so the spec is refused rather than stored.
    if (!out.slice(i).is_finite())
      throw core::InputError(
          "extract", "learner_targets",
          fmt::format("{}: the learner's weights are NaN or infinite on prompt {} (its iteration "
                      "diverges there: newton:K:C needs C < 2 / lambda_max(X'X + lambda I), "
                      "gd:ALPHA:K needs ALPHA < 1 / lambda_max(X'X)); choose a smaller step or "
                      "start",
                      spec, set.first_index + i));
  }
  return out;
}

namespace {

// Where each per-prompt dataset of the schema lives in a batch (the one place that maps the
// schema's names onto memory; digests and writes both go through it).
RowBlock BlockOf(const Batch& b, const std::string& name) {
  const data::TargetSet& t = b.targets;
  auto f64 = [](const auto& m) { return RowBlock{m.memptr(), m.n_elem, false}; };  // mat or cube
  if (name == schema::kPredictions)
    return {b.predictions.data_ptr<float>(), std::size_t(b.predictions.numel()), true};
  if (name == schema::kPromptsX) return f64(b.set.x);
  if (name == schema::kPromptsY) return {b.set.y.memptr(), b.set.y.n_elem, false};
  if (name == schema::kPromptsW) return f64(b.set.w);
  if (name == schema::kWOls) return f64(t.w_ols);
  if (name == schema::kWRidge) return f64(t.w_ridge);
  if (name == schema::kXty) return f64(t.xty);
  if (name == schema::kXtx) return f64(t.xtx);
  if (const auto it = b.learner_targets.find(name); it != b.learner_targets.end())
    return f64(it->second);
  throw std::logic_error("extract: the schema's dataset '" + name + "' has no rows in a batch");
}

// One extraction: the model, the output being written and its datasets, and the steps that
// Extract() runs in order.
class Extraction {
 public:
  Extraction(ExtractConfig cfg, const ExtractOptions& opt, core::ThreadPool& pool)
      : cfg_(std::move(cfg)), opt_(opt), pool_(pool), P_(dist::Size()), me_(dist::Rank()) {}

  void LoadModel();
  void ClaimOutput();
  void OpenOrCreate();
  void RunPipeline(const std::function<void(const ExtractProgress&)>& on_batch);
  ExtractResult Finish();

 private:
  void OpenPartial();
  void CreatePartial();
  void WriteAttributes(h5::File& f);
  void CreateDatasets(h5::File& f);
  Batch Compute(std::int64_t first, std::int64_t count);
  void RunModel(Batch& b);
  void CheckFinite(const Batch& b, std::int64_t first) const;
  void DigestGroups(Batch& b);
  void Store(const Batch& b, std::int64_t first, std::int64_t rows);
  std::int64_t Groups(std::int64_t count) const {
    return (count + kComputeGroup - 1) / kComputeGroup;
  }
  // Bytes of one prompt's rows in every dataset.
  double RowBytes() const {
    const double d = cfg_.task.d, n = cfg_.task.n;
    return double(cfg_.layers.size()) * T_ * H_ * hidden_elem_ + n * sizeof(float) +
           (n * d + n + d + 3 * n * d + n * d * d) * 8.0;
  }

  ExtractConfig cfg_;
  const ExtractOptions& opt_;
  core::ThreadPool& pool_;
  const int P_, me_;  // ranks (mpirun): each computes and writes its own rows of the one file
  learners::CheckpointInfo info_;
  learners::Transformer model_{nullptr};
  std::string sha_, content_, partial_;
  int d_ = 0, n_ = 0, H_ = 0, T_ = 0;
  std::size_t hidden_elem_ = sizeof(float);
  hsize_t N_ = 0;
  int chunk_rows_ = 0;
  std::int64_t batch_ = 0;  // prompts per batch, whole chunks
  std::int64_t n_complete_ = 0;
  std::vector<schema::Dataset> per_prompt_;
  std::optional<core::OutputLock> lock_;  // destroyed after output_
  std::optional<core::AtomicOutput> output_;
  std::unique_ptr<h5::File> file_;
  Datasets ds_;
};

void Extraction::LoadModel() {
  dist::Together([&] {
    model_ = learners::LoadCheckpoint(cfg_.checkpoint, &info_);
    cfg_.Validate(info_.model);
    cfg_.layers = cfg_.StatesOf(info_.model);
    sha_ = core::Sha256File(cfg_.checkpoint);
  });
  model_->eval();
  partial_ = cfg_.out + ".partial";
  hidden_elem_ = cfg_.float16 ? sizeof(h5::Half) : sizeof(float);
  content_ = cfg_.ContentJson(info_.model);
  d_ = cfg_.task.d;
  n_ = cfg_.task.n;
  H_ = info_.model.hidden;
  T_ = cfg_.positions == Positions::kAll ? 2 * n_ : n_;
  N_ = cfg_.prompts;
  per_prompt_ = schema::PerPromptDatasets(n_, d_, cfg_.learner_targets);
  // Chunks of about 1 MiB, but no larger than a batch: a batch then always writes whole chunks
  // (the last one of the file aside), so compressed chunks are written once.
  chunk_rows_ = static_cast<int>(std::min<std::int64_t>(
      ChunkRows(std::size_t(T_) * H_ * hidden_elem_), RoundUp(cfg_.batch, kComputeGroup)));
}

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
  f.SetAttr("layer_semantics", std::string(kLayerSemantics));
  f.SetAttr("token_layout", std::string(kTokenLayout));
  f.SetAttr("positions", PositionsName(cfg_.positions));
  f.SetAttr("layers", std::vector<std::int64_t>(cfg_.layers.begin(), cfg_.layers.end()));
  f.SetAttr("chunk_rows", static_cast<std::int64_t>(chunk_rows_));
  f.SetAttr("extract_config", content_);
  f.SetAttr("n_complete", std::int64_t{0});
}

void Extraction::CreateDatasets(h5::File& f) {
  h5::Group hidden = f.CreateGroup("hidden");
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
  ds_.digests[0].SetAttr(
      "description",
      fmt::format("SHA-256 of the rows of each group of {} prompts: every hidden state in "
                  "layer order, then predictions, prompts/x, y, w, targets/w_ols, w_ridge, "
                  "xty, xtx (native little-endian bytes); the root attribute content_sha256 "
                  "is SHA-256 of extract_config (JSON, without compress), a newline, "
                  "checkpoint_sha256, a newline and these digests",
                  kComputeGroup));
  // The true weights as a target too (k-independent, [N, d]): a second name, no copy.
  f.HardLink(schema::kPromptsW, schema::kW);
  ds_[schema::kPromptsW].SetAttr("per_k", 0);
  h5::Group targets = f.OpenGroup("targets");
  targets.SetAttr("ridge_lambda", cfg_.ridge_lambda);
  targets.SetAttr("description",
                  std::string("regression quantities after k examples; index k-1 along the "
                              "second axis is the value after k examples (w, the true "
                              "weights [N, d], is the same for every k)"));
  h5::Group prompts = f.OpenGroup("prompts");
  prompts.SetAttr("task_config", cfg_.task.ToJson());
  prompts.SetAttr("seed", static_cast<std::int64_t>(cfg_.seed));
  prompts.SetAttr("first_index", std::int64_t{0});
}

// The prompts [first, first + count), every stored state, the predictions, the targets and
// the groups' digests.
Batch Extraction::Compute(std::int64_t first, std::int64_t count) {
  Batch b;
  b.count = count;
  // float16 states are computed in float32 and rounded below.
  const auto stored = cfg_.float16 && count == 0 ? torch::kHalf : torch::kFloat32;
  for (std::size_t i = 0; i < cfg_.layers.size(); ++i)
    b.hidden.push_back(torch::empty({count, T_, H_}, stored));
  b.predictions = torch::empty({count, n_});
  if (count == 0) return b;  // a rank with no rows in the last round: empty blocks
  b.set = data::SamplePrompts(cfg_.task, cfg_.seed, first, count);
  // The targets: on a thread of their own while the workers run the model, or after it on
  // one thread (--threads 1 uses one core).
  std::exception_ptr targets_error;
  auto compute_targets = [&] {
    try {
      b.targets = data::ComputeTargets(b.set, cfg_.ridge_lambda);
      for (const auto& spec : cfg_.learner_targets)
        b.learner_targets[schema::LearnerTarget(spec)] = LearnerWeights(b.set, spec);
    } catch (...) {
      targets_error = std::current_exception();
    }
  };
  std::thread targets;
  if (pool_.size() > 1) targets = std::thread(compute_targets);
  try {
    RunModel(b);
  } catch (...) {
    if (targets.joinable()) targets.join();
    throw;
  }
  if (targets.joinable())
    targets.join();
  else
    compute_targets();
  if (targets_error) std::rethrow_exception(targets_error);
  CheckFinite(b, first);
  // float16 storage: rounded to nearest (ties to even) here, so the digests hash the bytes
  // that are stored.
  if (cfg_.float16)
    for (auto& h : b.hidden)
      h = h.to(torch::kHalf).contiguous();
  DigestGroups(b);
  return b;
}

}  // namespace

learners::ForwardResult RunGroup(learners::Transformer& model, const data::PromptSet& set,
                                 std::int64_t g0, std::int64_t g) {
  torch::NoGradGuard no_grad;  // grad mode is per thread
  const int G = kComputeGroup;
  if (g < 1 || g > G) throw std::logic_error("extract: a group of 1..kComputeGroup prompts");
  auto tokens = torch::zeros({G, 2L * set.task.n, set.task.d + 1L});  // padded to a whole group
  tokens.slice(0, 0, g).copy_(data::TokenTensor(set, g0, g));
  auto r = model->Run(tokens, {/*hidden_states=*/true, /*attention=*/false});
  for (auto& h : r.hidden)
    h = h.slice(0, 0, g);
  r.predictions = r.predictions.slice(0, 0, g);
  return r;
}

namespace {

// Groups of G prompts go to the pool's workers. Each group is padded to G rows and run whole,
// so a prompt's states are the same whichever worker, batch size or thread count computed them.
void Extraction::RunModel(Batch& b) {
  const int G = kComputeGroup;
  pool_.For(Groups(b.count), [&](std::int64_t j) {
    const std::int64_t g0 = j * G, g = std::min<std::int64_t>(G, b.count - g0);
    const auto r = RunGroup(model_, b.set, g0, g);
    for (std::size_t i = 0; i < cfg_.layers.size(); ++i) {
      auto h = r.hidden[cfg_.layers[i]];
      if (cfg_.positions == Positions::kY)
        h = h.slice(/*dim=*/1, /*start=*/1, /*end=*/2 * n_, /*step=*/2);
      b.hidden[i].slice(0, g0, g0 + g).copy_(h);
    }
    b.predictions.slice(0, g0, g0 + g).copy_(r.predictions);
  });
}

// A state or prediction that is not finite (or beyond float16's range, 65504, when stored so)
// would be written as inf or NaN and carried into every probe: refused with the batch unwritten
// (the partial file keeps the batches before it).
void Extraction::CheckFinite(const Batch& b, std::int64_t first) const {
  const std::int64_t last = first + b.count - 1;
  for (std::size_t i = 0; i < cfg_.layers.size(); ++i) {
    const double top = b.hidden[i].abs().max().item<double>();
    if (!std::isfinite(top) || (cfg_.float16 && top > 65504.0))
      throw std::runtime_error(fmt::format(
          "extract: state {} of prompts {}..{} reaches |h| = {}, {}", cfg_.layers[i], first, last,
          top,
          std::isfinite(top) ? "beyond float16's largest value 65504: store float32 states"
                             : "not a finite number: the prompts or the model overflow float32"));
  }
  if (!torch::isfinite(b.predictions).all().item<bool>())
    throw std::runtime_error(fmt::format(
        "extract: the model's predictions of prompts {}..{} are not finite numbers", first, last));
}

// Each group's digest over every dataset's rows: the hidden states in layer order, then the
// per-prompt datasets in schema order (schema::kGroupDigests).
void Extraction::DigestGroups(Batch& b) {
  struct Rows {
    const unsigned char* data;
    std::size_t row_bytes;
  };
  std::vector<Rows> blocks;
  for (const auto& h : b.hidden)
    blocks.push_back({static_cast<const unsigned char*>(h.data_ptr()),
                      std::size_t(h.numel()) * h.element_size() / std::size_t(b.count)});
  for (const auto& spec : per_prompt_) {
    const RowBlock r = BlockOf(b, spec.name);
    const std::size_t elem = r.is_float32 ? sizeof(float) : sizeof(double);
    blocks.push_back(
        {static_cast<const unsigned char*>(r.data), r.elements * elem / std::size_t(b.count)});
  }
  const int G = kComputeGroup;
  b.digests.resize(std::size_t(Groups(b.count)) * 32);
  pool_.For(Groups(b.count), [&](std::int64_t j) {
    const std::int64_t g0 = j * G, g = std::min<std::int64_t>(G, b.count - g0);
    core::Sha256 h;
    for (const auto& r : blocks)
      h.Update(r.data + g0 * r.row_bytes, g * r.row_bytes);
    const auto digest = h.Final();
    std::copy(digest.begin(), digest.end(), b.digests.begin() + j * 32);
  });
}

// Stores one batch and then, once its rows are durably on disk, raises n_complete. Runs on the
// writer thread; only it touches the file while batches are in flight. A round: rows [first,
// first + rows) of the file, this rank's batch b among them (P = 1: one batch). Every dataset
// grows to the round's end, then each rank writes its rows (collective).
void Extraction::Store(const Batch& b, std::int64_t first, std::int64_t rows) {
  const std::int64_t count = b.count, end = first + rows;
  const std::int64_t mine = std::min(end, first + me_ * batch_);
  // Room for the whole round before HDF5 writes any of it (see h5::File::Reserve): rows plus a
  // quarter for chunk indexes and headers.
  try {
    file_->Reserve(static_cast<std::uint64_t>(RowBytes() * double(rows) * 1.25) + (1 << 20));
  } catch (const dist::PeerFailed&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + "; " + std::to_string(n_complete_) + " of " +
                             std::to_string(N_) +
                             " prompts are safe in the partial file: free space and run the "
                             "same command with {resume}");
  }
  auto put = [&](h5::Dataset& out, auto* data, std::size_t elements) {
    out.Resize(end);
    out.WriteRows(mine, count, data, elements);
  };
  for (std::size_t i = 0; i < ds_.hidden.size(); ++i) {
    const torch::Tensor& h = b.hidden[i];
    if (cfg_.float16)
      put(ds_.hidden[i], static_cast<const h5::Half*>(h.data_ptr()), h.numel());
    else
      put(ds_.hidden[i], h.data_ptr<float>(), h.numel());
  }
  for (const auto& spec : per_prompt_) {
    const RowBlock r = BlockOf(b, spec.name);
    if (r.is_float32)
      put(ds_[spec.name], static_cast<const float*>(r.data), r.elements);
    else
      put(ds_[spec.name], static_cast<const double*>(r.data), r.elements);
  }
  // Batches start on whole groups, so each rank's digests are its own rows of the dataset.
  ds_.digests[0].Resize(Groups(end));
  ds_.digests[0].WriteRows(mine / kComputeGroup, Groups(count), b.digests.data(), b.digests.size());
  // The rows reach the disk before n_complete says they are there: a failed write (disk full)
  // leaves n_complete at the last batch that is durably on disk, so --resume redoes the failed
  // batch instead of keeping a block of unwritten rows.
  file_->Sync();
  n_complete_ = end;  // every rank's rows of the round are on disk: the minimum over ranks
  file_->SetAttr("n_complete", n_complete_);
  file_->Sync();
}

// A pipeline two batches deep: batch b + 1 is computed while the writer stores batch b, so
// memory stays at two batches whatever N is. A write error surfaces at the next hand-over.
// With several ranks the writer thread makes the collective calls of a round while the main
// thread computes the next; MPI calls never overlap (the hand-over waits for the writer).
void Extraction::RunPipeline(const std::function<void(const ExtractProgress&)>& on_batch) {
  std::future<void> writing;
  std::int64_t next = n_complete_, batches = 0;
  auto hand_over = [&](std::unique_ptr<Batch> b, std::exception_ptr error, std::int64_t first,
                       std::int64_t rows) {
    if (writing.valid()) writing.get();  // rethrows the writer's error
    // A rank whose computation failed stops every rank before the round's collective writes.
    dist::Together([&] {
      if (error) std::rethrow_exception(error);
    });
    if (b)
      writing = std::async(std::launch::async, [&, first, rows,
                                                b = std::shared_ptr<Batch>(std::move(b))] {
        Store(*b, first, rows);
        if (on_batch && dist::IsRoot())
          on_batch({n_complete_, std::int64_t(N_), double(fs::file_size(partial_)) / (1 << 20)});
      });
  };
  try {
    while (next < std::int64_t(N_)) {
      if (opt_.stop_after_batches >= 0 && batches >= opt_.stop_after_batches) break;
      // Round: P batches from `next`; this rank computes the me-th (none past the end).
      const std::int64_t rows = std::min<std::int64_t>(P_ * batch_, N_ - next);
      const std::int64_t first = std::min<std::int64_t>(next + me_ * batch_, next + rows);
      const std::int64_t count = std::min<std::int64_t>(batch_, next + rows - first);
      std::unique_ptr<Batch> b;
      std::exception_ptr error;
      try {
        b = std::make_unique<Batch>(Compute(first, count));
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

}  // namespace

ExtractResult Extract(ExtractConfig cfg, const ExtractOptions& opt, core::ThreadPool& pool,
                      const std::function<void(const ExtractProgress&)>& on_batch) {
  torch::NoGradGuard no_grad;
  Extraction run(std::move(cfg), opt, pool);
  run.LoadModel();
  run.ClaimOutput();
  run.OpenOrCreate();
  run.RunPipeline(on_batch);
  return run.Finish();
}

}  // namespace icl::extract
