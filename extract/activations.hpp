// Reading activations files written by extract: their description and blocks of rows.
#pragma once

#include <armadillo>

#include <cstdint>
#include <string>
#include <vector>

#include "core/hdf5.hpp"
#include "data/task.hpp"
#include "extract/extract.hpp"
#include "learners/model_config.hpp"

namespace icl::extract {

struct ActivationsInfo {
  std::string path;
  learners::ModelConfig model;
  data::TaskConfig task;
  std::uint64_t seed = 0;
  std::int64_t prompts = 0;  // N (== n_complete: only complete files are accepted)
  std::vector<int> layers;   // stored states, ascending
  Positions positions = Positions::kAll;
  int positions_per_prompt = 0;  // 2n or n
  std::string checkpoint_sha256;
  std::vector<std::string> targets;  // names under /targets
  std::vector<bool> target_per_k;    // false for k-independent targets such as w
  std::string content_sha256;        // recorded by extract ("" in files from before it did)
  double ridge_lambda = -1;          // the lambda of /targets/w_ridge (-1 when not recorded)
  std::vector<std::string> learner_targets;  // specs of the stored learner targets, in order
};

// Opens and checks an activations file (format, version, completeness, shapes).
ActivationsInfo ReadActivationsInfo(const std::string& path);

// One /targets dataset as stored, checked against the file's description: `entries` values
// per prompt and k (d, or d * d for X'X), n blocks of them per prompt when per_k (one block
// for a k-independent target such as w). `symmetric`: a square matrix (X'X), which a reader
// may keep as its upper triangle.
struct StoredTarget {
  std::string name;
  bool per_k = true;
  bool symmetric = false;
  std::size_t side = 0;  // symmetric: the matrix is side x side (entries == side * side)
  std::size_t entries = 0;
  std::vector<double> values;  // row-major [N, n, entries] (per_k) or [N, entries]
};
// Throws core::InputError (setting "targets") for a name the file lacks, and naming the
// dataset for a shape or a symmetric mark that does not fit.
StoredTarget ReadTarget(const ActivationsInfo& info, const std::string& name);

// Blocks of rows of /hidden/<layer>: rows [start, start + count) as a (T * H) x count matrix,
// float32 as stored (column = prompt, entry t * H + h); a non-finite value is an error naming
// the prompt and position.
class HiddenReader {
 public:
  HiddenReader(const ActivationsInfo& info, int layer);
  arma::fmat Read(std::int64_t start, std::int64_t count) const;
  int positions() const { return t_; }
  int hidden() const { return h_; }

 private:
  std::string path_;
  h5::File file_;
  h5::Dataset ds_;
  int layer_, t_, h_;
};

std::string LayerName(int layer);  // "layer_07"
// The first `rows` prompts of the file (/prompts/x, y, w) as a prompt set of its task and seed;
// throws core::InputError naming the file when it holds fewer, a query-shifted task, or a value
// that is not finite.
data::PromptSet ReadActivationPrompts(const ActivationsInfo& info, std::int64_t rows);

// The content digest of an activations file: SHA-256 over its extract_config (less the storage
// setting compress), its
// checkpoint_sha256 and the per-group row digests of /provenance/group_sha256. extract records
// it as the attribute content_sha256 when it finishes; recomputing it here reads only the
// attributes and the digests (kilobytes), so a reader can check cheaply that neither was
// changed. `VerifyRows` recomputes every group digest from the rows themselves (reads the
// whole file). Both throw core::InputError naming `option` on a mismatch.
std::string ContentDigest(const std::string& path);
// The same from its parts: 32 bytes per group, in group order.
std::string ContentDigestOf(const std::string& extract_config, const std::string& checkpoint_sha256,
                            const std::vector<std::uint8_t>& group_digests);
void VerifyContentDigest(const std::string& path, const std::string& option);
void VerifyRows(const std::string& path, const std::string& option);
// SHA-256 (hex) of the first `rows` prompts of a file: /prompts/x, y and w as float64. Two files
// hold the same prompts exactly when these agree: what pairs a control with its model, which
// no attribute (the seed, say) can vouch for.
std::string PromptsDigest(const std::string& path, std::int64_t rows);
// Recomputes the digest of each group of kComputeGroup rows among the first `rows` (the hidden
// states in layer order, then the per-prompt datasets in schema order) and throws
// core::InputError(command, option) at the first that differs from `stored` (32 bytes a group).
void CheckGroupDigests(const std::string& path, const std::vector<h5::Dataset>& hidden,
                       const std::vector<const h5::Dataset*>& per_prompt,
                       const std::vector<std::uint8_t>& stored, std::int64_t rows,
                       const std::string& command, const std::string& option);

}  // namespace icl::extract
