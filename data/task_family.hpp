// Task families beyond w ~ N(0, tau^2 I), where the algorithm a learner should run changes: a
// finite pool of weight vectors (Raventos et al. 2023: small pools favour the pool's posterior
// mean, large ones ridge), a mixture of noise levels drawn per prompt (Bai et al. 2023: the
// Bayes predictor picks the ridge of the prompt's noise) and sparse weights (Garg et al. 2022).
// A family is part of a TaskConfig and is written in its JSON as its spec.
#pragma once

#include <armadillo>
#include <cstdint>
#include <string>
#include <vector>

namespace icl::data {

inline constexpr std::int64_t kMaxPoolSize = std::int64_t(1) << 20;
inline constexpr int kMaxNoiseLevels = 64;

struct TaskFamily {
  enum class Kind { kGaussian, kPool, kNoiseMix, kSparse };
  Kind kind = Kind::kGaussian;
  // kPool: M weight vectors w_m = tau z_m, z_m ~ N(0, I) drawn from the pool seed alone (so
  // learners of every training seed share the pool), one drawn uniformly per prompt.
  std::int64_t pool_size = 0;
  std::uint64_t pool_seed = 1;
  // kNoiseMix: the noise levels sigma_c and their probabilities (uniform when not given); the
  // prompt's sigma is drawn, then every label of the prompt has noise sigma_c.
  std::vector<double> sigmas, probs;
  // kSparse: S of the d (or d_effective) coordinates of w, uniformly placed, are N(0, tau^2);
  // the others are 0.
  int sparsity = 0;

  // "gaussian", "pool:M:SEED", "noise-mix:S1,S2,...:P1,P2,..." or "sparse:S": ParseTaskFamily
  // reads it back to the same family.
  std::string Spec() const;
  // Ranges against the task's used dimensions: core::InputError (setting "task_family").
  void Validate(int used_d) const;
  bool Draws() const { return kind == Kind::kPool || kind == Kind::kNoiseMix; }
};
bool operator==(const TaskFamily& a, const TaskFamily& b);

// "gaussian", "pool:M[:SEED]" (SEED default 1), "noise-mix:S1,S2,...[:P1,P2,...]",
// "sparse:S"; core::InputError (setting "task_family") naming what was expected.
TaskFamily ParseTaskFamily(const std::string& spec);

// Member m (0-based) of a pool family, w_scale z with z ~ N(0, I) from the pool's own stream;
// coordinates from `used` on are 0 (d_effective).
void PoolMember(const TaskFamily& family, int d, int used, double w_scale, std::int64_t m,
                double* w);
// Every member of the pool: d x M, column m = PoolMember(m). M d numbers.
arma::mat PoolMembers(const TaskFamily& family, int d, int used, double w_scale);

// What a prompt of the family draws besides w and x, from its own generator (so that x and the
// noise draws are those of the Gaussian task with the same seed and index): the pool member, the
// noise level, or the sparse support, from U[0, 1) draws of `rng`.
struct FamilyDraw {
  std::int64_t index = -1;   // the pool member or the noise level; -1: none
  std::vector<int> support;  // kSparse: the non-zero coordinates, increasing
};
class Rng;
FamilyDraw DrawFromFamily(const TaskFamily& family, int used, Rng& rng);

}  // namespace icl::data
