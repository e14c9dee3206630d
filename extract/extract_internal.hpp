// What the files of the Extract stage share (extract.cpp: the run, its batches and their writes;
// extract_output.cpp: the output file, created or continued, and sealed; extract_config.cpp: the
// configuration): one extraction's state and steps. Not part of extract's interface.
#pragma once

#include <torch/torch.h>

#include <armadillo>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dist.hpp"
#include "core/hdf5.hpp"
#include "core/output.hpp"
#include "core/thread_pool.hpp"
#include "data/targets.hpp"
#include "extract/activations_schema.hpp"
#include "extract/extract.hpp"
#include "learners/checkpoint.hpp"

namespace icl::extract::detail {

inline std::int64_t RoundUp(std::int64_t v, std::int64_t m) {
  return (v + m - 1) / m * m;
}

struct Datasets {
  std::vector<h5::Dataset> hidden;             // in the order of the stored layers
  std::map<std::string, h5::Dataset> by_name;  // the per-prompt datasets of the schema
  std::vector<h5::Dataset> digests;            // schema::kGroupDigests (one entry)
  h5::Dataset& operator[](const std::string& name) { return by_name.at(name); }
};

// One batch: the prompts, every stored state, the predictions and the targets.
struct Batch {
  std::int64_t count = 0;
  data::PromptSet set;
  std::vector<torch::Tensor> hidden;
  torch::Tensor predictions;
  data::TargetSet targets;
  std::map<std::string, arma::cube> learner_targets;  // dataset name -> d x n x N
  arma::rowvec family_draws;          // 1 x N: the pool member or noise sigma each prompt drew
  std::vector<std::uint8_t> digests;  // 32 bytes per group of kComputeGroup prompts
};

// The bytes of one per-prompt dataset in a batch: `elements` values, float32 or float64.
struct RowBlock {
  const void* data;
  std::size_t elements;
  bool is_float32;
};

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

}  // namespace icl::extract::detail
