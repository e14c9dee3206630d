// The settings of a gradient-trained probe (probes/gradient.hpp), apart from the probe itself:
// a probing request holds them without LibTorch's headers, which only the fitting needs.
#pragma once

#include <cstdint>

namespace icl::probes {

// The widest MLP probe (ProbeRequest::Validate): its first layer alone holds H x mlp_hidden
// weights and their Adam moments per (k, seed) cell; a billion units asked for terabytes.
inline constexpr int kMaxMlpHidden = 65536;

struct GradientProbeOptions {
  bool mlp = true;     // false: FF is linear
  bool pooled = true;  // false: the single y-token state
  int mlp_hidden = 256;
  double lr = 1e-3;
  int batch = 64;
  int max_epochs = 30;
  int patience = 4;  // epochs without validation improvement before stopping
  std::uint64_t seed = 0;
};

}  // namespace icl::probes
