// Reading activations files written by extract: their description and blocks of rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
};

// Opens and checks an activations file (format, version, completeness, shapes).
ActivationsInfo ReadActivationsInfo(const std::string& path);

std::string LayerName(int layer);  // "layer_07"

}  // namespace icl::extract
