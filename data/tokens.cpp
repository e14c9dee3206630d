// Token layout: fills interleaved x/y tokens for a block of prompts.
#include "data/tokens.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace icl::data {

void FillTokens(const PromptSet& set, std::size_t begin, std::size_t count, float* out,
                int n_used) {
  const int d = set.task.d;
  const int n = n_used > 0 ? n_used : set.task.n;
  if (n > set.task.n)
    throw std::logic_error("tokens: asked for " + std::to_string(n) +
                           " examples but prompts have n=" + std::to_string(set.task.n));
  if (begin + count > set.size())
    throw std::out_of_range("tokens: prompts [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") out of a set of " +
                            std::to_string(set.size()));
  const std::size_t width = d + 1;
  std::fill(out, out + count * 2 * n * width, 0.0f);
  for (std::size_t p = 0; p < count; ++p) {
    const double* x = set.x.slice_memptr(begin + p);
    const double* y = set.y.colptr(begin + p);
    float* prompt = out + p * 2 * n * width;
    for (int j = 0; j < n; ++j) {
      float* xtok = prompt + (2 * j) * width;  // [0, x_j]
      for (int i = 0; i < d; ++i)
        xtok[1 + i] = static_cast<float>(x[j * d + i]);
      float* ytok = prompt + (2 * j + 1) * width;  // [y_j, 0_d]
      ytok[0] = static_cast<float>(y[j]);
    }
  }
}

arma::fmat TokenMatrix(const PromptSet& set, std::size_t begin, std::size_t count, int n_used) {
  const int n = n_used > 0 ? n_used : set.task.n;
  arma::fmat m(set.task.d + 1, 2 * n * count);
  FillTokens(set, begin, count, m.memptr(), n_used);
  return m;
}

}  // namespace icl::data
