// Tensors read from another program's file, by name, and how their shapes are written in
// messages.
#pragma once

#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace icl::interop {

using NamedTensors = std::map<std::string, torch::Tensor>;

// "[4, 8]"
inline std::string ShapeText(const std::vector<std::int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}
inline std::string ShapeText(const torch::Tensor& t) {
  return ShapeText(std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()));
}

}  // namespace icl::interop
