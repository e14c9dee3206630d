// Extraction: run a checkpoint over a seeded prompt set and stream every layer's hidden
// states, its predictions and the regression targets to an HDF5 activations file
// (docs/design.md "activations.h5"), resumably and deterministically.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "data/task.hpp"
#include "extract/activations_schema.hpp"
#include "learners/model_config.hpp"

namespace icl::extract {

// The format name and layout live in activations_schema.hpp.
inline constexpr const char* kActivationsFormat = schema::kFormat;
// Prompts run through the model together. Groups are aligned to absolute prompt indices and
// padded, so every prompt is computed in the same group whatever --batch is: the datasets do
// not depend on the batch size.
inline constexpr int kComputeGroup = 32;

enum class Positions { kAll, kY };  // all 2n tokens, or only the y-tokens (states after k examples)
// "all" or "y", as the file's attribute positions names them; core::InputError (setting
// "positions") for anything else.
Positions ParsePositions(const std::string& name);
// The name ParsePositions reads: "all" or "y".
std::string PositionsName(Positions p);
// The storage type of the hidden states: "float32" (false) or "float16" (true); core::InputError
// (setting "dtype") for anything else.
bool ParseFloat16(const std::string& dtype);

struct ExtractConfig {
  std::string checkpoint;
  std::string out;
  data::TaskConfig task;     // the prompts' task (the checkpoint's, with overrides applied)
  std::int64_t prompts = 0;  // N
  std::uint64_t seed = 0;
  std::vector<int> layers;  // states to store, 0 = embedding .. L; empty = all
  Positions positions = Positions::kAll;
  double ridge_lambda = 0.1;
  // Classical learners whose weights after k examples are stored as targets
  // (schema::LearnerTarget), as canonical specs ("gd:0.05:3", "newton:3:0.03:0.25"); each must
  // have weights (knn and zero are refused).
  std::vector<std::string> learner_targets;
  bool float16 = false;   // hidden states stored as IEEE binary16 (half the bytes)
  bool compress = false;  // shuffle + deflate
  int batch = 256;        // prompts per write; rounded up to whole chunks

  // What determines the file's contents (not batch, threads or paths), as JSON.
  std::string ContentJson(const learners::ModelConfig& model) const;
  // Checks every setting against the checkpoint's model before any file is touched; throws
  // core::InputError naming the setting.
  void Validate(const learners::ModelConfig& model) const;
  // The stored states, ascending: `layers`, or every state 0..L when it is empty.
  std::vector<int> StatesOf(const learners::ModelConfig& model) const;
};

struct ExtractOptions {
  bool force = false;                    // replace an existing output or partial file
  bool resume = false;                   // continue <out>.partial from its n_complete
  std::int64_t stop_after_batches = -1;  // testing: stop as if interrupted after K batches
  std::vector<std::string> inputs;       // files read besides the checkpoint: never replaced
};

struct ExtractProgress {
  std::int64_t done = 0, total = 0;
  double megabytes_written = 0;
};

struct ExtractResult {
  std::int64_t n_complete = 0;
  bool finished = false;
  int chunk_rows = 0, batch = 0;
  std::string written;  // the final path, or the partial file when stopped early
};

// The pool's workers compute prompt groups in parallel, each with one intra-op thread (the
// caller sets torch's and OpenBLAS's pools to 1: 64-wide products gain nothing from splitting,
// and two pools on the same cores slow each other down); with more than one worker the targets
// are computed on a thread of their own meanwhile. A separate writer thread stores batch b
// while batch b + 1 is computed. Results do not depend on the pool's size: every group is
// computed whole, padded to kComputeGroup, by single-threaded kernels.
ExtractResult Extract(ExtractConfig config, const ExtractOptions& options, core::ThreadPool& pool,
                      const std::function<void(const ExtractProgress&)>& on_batch = {});

// The canonical spelling of each learner spec (MakeLearner's spec(): "gd:0.050:3" -> "gd:0.05:3"),
// the form ExtractConfig::learner_targets holds; throws core::InputError naming `field` (the
// setting the specs came from) for a spec that does not parse or names a learner without
// weights (knn, zero).
std::vector<std::string> CanonicalLearnerSpecs(const std::vector<std::string>& specs,
                                               const data::TaskConfig& task,
                                               const std::string& field = "learner_targets");

// The weights of a classical learner (a canonical spec) after k = 1..n examples of every prompt
// of `set`: d x n x N (== row-major [N, n, d]), the learner targets extract stores. Throws
// core::InputError (setting "learner_targets") when a prompt's weights are NaN or infinite.
arma::cube LearnerWeights(const data::PromptSet& set, const std::string& spec);

// Rows per chunk for rows of `row_bytes`: about 1 MiB, a multiple of kComputeGroup.
int ChunkRows(std::size_t row_bytes);

}  // namespace icl::extract
