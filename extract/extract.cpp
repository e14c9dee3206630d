// Streaming extraction of hidden states, predictions and targets to HDF5: the model's forward
// pass over groups of prompts, batches computed while the one before is written, and Extract().
#include "extract/extract.hpp"
#include "extract/extract_internal.hpp"
#include "extract/forward.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/dist.hpp"
#include "core/hdf5.hpp"
#include "core/sha256.hpp"
#include "data/prompt_io.hpp"
#include "data/targets.hpp"
#include "data/tokens_torch.hpp"
#include "extract/activations_schema.hpp"
#include "learners/checkpoint.hpp"

namespace icl::extract {

namespace fs = std::filesystem;

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

namespace detail {

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
  if (name == schema::kPoolMember || name == schema::kSigma) return f64(b.family_draws);
  throw std::logic_error("extract: the schema's dataset '" + name + "' has no rows in a batch");
}

}  // namespace

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
  per_prompt_ = schema::PerPromptDatasets(n_, d_, cfg_.learner_targets, cfg_.task.family);
  // Chunks of about 1 MiB, but no larger than a batch: a batch then always writes whole chunks
  // (the last one of the file aside), so compressed chunks are written once.
  chunk_rows_ = static_cast<int>(std::min<std::int64_t>(
      ChunkRows(std::size_t(T_) * H_ * hidden_elem_), RoundUp(cfg_.batch, kComputeGroup)));
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
  if (cfg_.task.family.Draws()) {
    const data::TaskFamily& f = cfg_.task.family;
    b.family_draws.set_size(std::size_t(count));
    for (std::size_t i = 0; i < b.set.draw.size(); ++i)
      b.family_draws(i) = f.kind == data::TaskFamily::Kind::kPool
                              ? double(b.set.draw[i])
                              : f.sigmas[std::size_t(b.set.draw[i])];
  }
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

}  // namespace detail

ExtractResult Extract(ExtractConfig cfg, const ExtractOptions& opt, core::ThreadPool& pool,
                      const std::function<void(const ExtractProgress&)>& on_batch) {
  torch::NoGradGuard no_grad;
  detail::Extraction run(std::move(cfg), opt, pool);
  run.LoadModel();
  run.ClaimOutput();
  run.OpenOrCreate();
  run.RunPipeline(on_batch);
  return run.Finish();
}

}  // namespace icl::extract
