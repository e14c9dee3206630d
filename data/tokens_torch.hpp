// Torch view of the token layout; kept apart from tokens.hpp so that only code that uses
// torch pays for its headers.
#pragma once

#include <torch/torch.h>

#include "data/tokens.hpp"

namespace icl::data {

// Tokens of prompts [begin, begin + count): float32 tensor [count, 2 n_used, d + 1].
inline torch::Tensor TokenTensor(const PromptSet& set, std::size_t begin, std::size_t count,
                                 int n_used = 0) {
  const int n = n_used > 0 ? n_used : set.task.n;
  auto t = torch::empty({static_cast<long>(count), 2L * n, set.task.d + 1L}, torch::kFloat32);
  FillTokens(set, begin, count, t.data_ptr<float>(), n_used);
  return t;
}

}  // namespace icl::data
