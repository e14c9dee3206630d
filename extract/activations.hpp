// Reading activations files written by extract: their description and blocks of rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/hdf5.hpp"
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
};

// Opens and checks an activations file (format, version, completeness, shapes).
ActivationsInfo ReadActivationsInfo(const std::string& path);

std::string LayerName(int layer);  // "layer_07"

// The content digest of an activations file: SHA-256 over its extract_config (less the storage
// setting compress), its
// checkpoint_sha256 and the per-group row digests of /provenance/group_sha256. extract records
// it as the attribute content_sha256 when it finishes; recomputing it here reads only the
// attributes and the digests (kilobytes), so a reader can check cheaply that neither was
// changed. `VerifyRows` recomputes every group digest from the rows themselves (reads the
// whole file). Both throw data::InputError naming `option` on a mismatch.
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
// data::InputError(command, option) at the first that differs from `stored` (32 bytes a group).
void CheckGroupDigests(const std::string& path, const std::vector<h5::Dataset>& hidden,
                       const std::vector<const h5::Dataset*>& per_prompt,
                       const std::vector<std::uint8_t>& stored, std::int64_t rows,
                       const std::string& command, const std::string& option);

}  // namespace icl::extract
