// Token layout of a prompt (docs/design.md "Conventions"): x-token [0, x_j] then y-token
// [y_j, 0_d], width d+1.
#pragma once

#include <armadillo>

#include "data/task.hpp"

namespace icl::data {

inline int TokenWidth(int d) {
  return d + 1;
}
inline int NumTokens(int n) {
  return 2 * n;
}
// Position of the x-token of example j (0-based): the prediction of y_j is read there.
inline int XTokenPos(int j) {
  return 2 * j;
}
// The state "after k examples" (k = 1..n) is the y-token of example k.
inline int AfterKPos(int k) {
  return 2 * k - 1;
}

// Writes the tokens of prompts [begin, begin + count) of `set`, using their first n_used
// examples (n_used <= set.task.n; 0 means all), into `out`: row-major
// [count, 2 n_used, d + 1] float32, which is the column-major (d+1) x (2 n_used count) matrix.
// The one code path behind both views below and the torch view in tokens_torch.hpp.
void FillTokens(const PromptSet& set, std::size_t begin, std::size_t count, float* out,
                int n_used = 0);

// Armadillo view: (d+1) x (2n * count), one column per token, prompts one after another.
arma::fmat TokenMatrix(const PromptSet& set, std::size_t begin, std::size_t count, int n_used = 0);

}  // namespace icl::data
