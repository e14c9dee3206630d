// Linear-regression task distributions and the seeded prompt sampler (docs/paper.md
// "Tasks and tokens").
#pragma once

#include <armadillo>
#include <cstdint>
#include <string>
#include <vector>

#include "data/shift.hpp"
#include "data/task_family.hpp"

namespace icl::data {

// Sizes beyond these are refused as input errors (they would exhaust memory long before any
// result): d is the paper's 4..20, n its 40..80.
inline constexpr int kMaxD = 4096;
inline constexpr int kMaxN = 65536;

// x ~ N(0, I_d), w ~ N(0, w_scale^2 I_d) (or w = all ones when fixed_w), y = w.x + noise * eps.
struct TaskConfig {
  int d = 4;             // input dimension
  int n = 12;            // examples per prompt
  double w_scale = 1.0;  // tau
  double noise = 0.0;    // sigma
  bool fixed_w = false;  // the paper's control task: w = (1, ..., 1) for every prompt
  // Dimensions the task uses (0: all d). x and w are zero beyond the first d_effective
  // coordinates (Garg et al.'s curriculum zero-pads them); the random stream is the same.
  int d_effective = 0;
  int EffectiveD() const { return d_effective > 0 ? d_effective : d; }
  // Out-of-distribution prompts (data/shift.hpp): the context examples' x (or labels), and the
  // query predicted after k examples (same: the next context example, as in training).
  Shift context_shift;
  Shift query_shift{ShiftKind::kSame};
  bool HasQueries() const { return query_shift.kind != ShiftKind::kSame; }
  // The family w (and the noise) is drawn from (data/task_family.hpp); Gaussian by default.
  TaskFamily family;

  // Throws core::InputError naming the field when d, n, w_scale or noise is out of range.
  void Validate() const;
  std::string ToJson() const;
  // `what` names the source (file, attribute) in error messages.
  static TaskConfig FromJson(const std::string& json, const std::string& what);
  // lambda = sigma^2 / tau^2, the ridge penalty that is Bayes-optimal for the Gaussian task.
  double BayesLambda() const { return noise * noise / (w_scale * w_scale); }
};

bool operator==(const TaskConfig& a, const TaskConfig& b);
inline bool operator!=(const TaskConfig& a, const TaskConfig& b) {
  return !(a == b);
}

// A block of prompts. Armadillo is column-major, so each member is the same memory as the
// row-major HDF5/torch array named next to it: no copy is needed to move between them.
struct PromptSet {
  TaskConfig task;
  std::uint64_t seed = 0;
  std::uint64_t first_index = 0;  // prompt j here is prompt first_index + j of the seeded stream
  arma::cube x;                   // d x n x N  == row-major [N, n, d]; slice i column j is x_j
  arma::mat y;                    // n x N      == row-major [N, n]
  arma::mat w;                    // d x N      == row-major [N, d]
  // Only when task.HasQueries(): the query after k examples, x in column k of slice i and its
  // label (k, i), in place of example k + 1 (which stays context for later k).
  arma::cube query_x;  // d x n x N == row-major [N, n, d]
  arma::mat query_y;   // n x N
  // Only when task.family.Draws(): per prompt, the pool member or the noise level it drew.
  std::vector<std::int64_t> draw;

  std::size_t size() const { return y.n_cols; }
  // The x whose label is predicted after k examples of prompt i, and that label.
  const double* QueryX(std::size_t i, int k) const {
    return (task.HasQueries() ? query_x : x).slice_memptr(i) + static_cast<std::size_t>(k) * task.d;
  }
  double QueryY(std::size_t i, int k) const { return (task.HasQueries() ? query_y : y)(k, i); }
};

// Prompt `index` of the stream `seed`: depends only on (task, seed, index). Draw order is w,
// then (x_j, eps_j) for j = 1..n, so a prompt with fewer examples is a prefix of a longer one,
// and the fixed-w control task sees the same x and noise as the ordinary task; a context shift
// transforms the same draws. With a query shift the n queries (z, eps) are drawn after them
// into qx (n*d) and qy (n), so the context is the same whatever the query shift.
// A task family's own draws (the pool member, the noise level, the support) come from a second
// generator of (seed, index), so x and the noise draws are those of the Gaussian task; `draw`
// (when given) receives the pool member or noise level (-1 for other families).
void SamplePrompt(const TaskConfig& task, std::uint64_t seed, std::uint64_t index,
                  double* x /*n*d*/, double* y /*n*/, double* w /*d*/, double* qx = nullptr,
                  double* qy = nullptr, std::int64_t* draw = nullptr);

// Prompts first_index .. first_index + count - 1 of the stream `seed`.
PromptSet SamplePrompts(const TaskConfig& task, std::uint64_t seed, std::uint64_t first_index,
                        std::size_t count);

// A counter-seeded generator: xoshiro256** seeded by splitmix64 from (seed, stream), with
// Box-Muller normals. Written out here (not std::normal_distribution) so that streams are
// identical on every platform and standard library.
class Rng {
 public:
  Rng(std::uint64_t seed, std::uint64_t stream);
  std::uint64_t NextU64();
  double Uniform();  // in [0, 1)
  double Normal();   // N(0, 1)

 private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// A rows x cols matrix (cols <= rows) with orthonormal columns: Gram-Schmidt of standard normal
// draws from Rng(seed, stream), filled column by column, i.e. the QR of a Gaussian matrix with
// R's diagonal positive (Haar on O(rows) for a square one). Plain loops, so the bits do not
// depend on a BLAS and are the same on every machine.
arma::mat RandomOrthonormal(int rows, int cols, std::uint64_t seed, std::uint64_t stream);

}  // namespace icl::data
