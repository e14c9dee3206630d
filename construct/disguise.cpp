// The disguises of a program (distractors, context distractors, decoy, nuisance): the rows, ops
// and quantities they add to the program's own, drawn from the disguise's seed.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "construct/construct.hpp"
#include "construct/programs_internal.hpp"
#include "core/errors.hpp"

namespace icl::construct::detail {

namespace {

constexpr std::uint64_t kDecoyStream = 0x6465636f79ULL;     // "decoy"
constexpr std::uint64_t kNuisanceStream = 0x6e756973ULL;    // "nuis"
constexpr std::uint64_t kDistractorStream = 0x64697374ULL;  // "dist"
constexpr std::uint64_t kContextStream = 0x63747874ULL;     // "ctxt"

std::vector<double> RowMajor(const arma::mat& m) {
  const arma::mat t = m.t();
  return std::vector<double>(t.begin(), t.end());
}

// M = Q diag(g) with Q Haar and gains g in [1/2, 2]: invertible, condition <= 4, not collinear
// with the identity.
std::vector<double> DecoyMap(int d, std::uint64_t seed) {
  data::Rng rng(seed, kDecoyStream);
  arma::mat m = RandomOrthogonal(d, seed ^ kDecoyStream);
  for (int j = 0; j < d; ++j)
    m.col(j) *= std::exp2(2.0 * rng.Uniform() - 1.0);
  return RowMajor(m);
}

std::vector<double> RandomMap(int rows, int cols, double sd, data::Rng& rng) {
  std::vector<double> m(std::size_t(rows) * cols);
  for (double& v : m)
    v = sd * rng.Normal();
  return m;
}

}  // namespace

// The rows a disguise adds (after the program's own) and the checks of its settings against
// the program's width and quantities.
void AddDisguiseRows(Construction& c, int d) {
  const Disguise& g = c.disguise;
  if (g.distractors < 0)
    throw core::InputError("construct", "distractors",
                           "expected a count >= 0, got " + std::to_string(g.distractors));
  if (!g.decoy.empty() && g.decoy != "xty")
    throw core::InputError("construct", "decoy",
                           "a decoy of '" + g.decoy +
                               "' is not built; the decoy copies xty (X'y, "
                               "which every program computes)");
  if (!(g.nuisance >= 0) || !std::isfinite(g.nuisance))
    throw core::InputError("construct", "nuisance",
                           "expected a finite sigma >= 0, got " + std::to_string(g.nuisance));
  if (g.nuisance > kMaxNuisance)
    throw core::InputError(
        "construct", "nuisance",
        fmt::format("sigma = {:g} is too large to remove: X'y + sigma (P x)^2 is held in float32, "
                    "whose rounding (2^-24 sigma (P x)^2) would swamp X'y and the model would not "
                    "compute its program; at most {:.0f} (construct.hpp's kMaxNuisance)",
                    g.nuisance, std::floor(kMaxNuisance)));
  if (!(g.decoy_noise >= 0) || !std::isfinite(g.decoy_noise))
    throw core::InputError("construct", "decoy_noise",
                           "expected a finite sigma >= 0, got " + std::to_string(g.decoy_noise));
  if (g.decoy_noise > 0 && g.decoy.empty())
    throw core::InputError("construct", "decoy_noise",
                           "is the decoy's own nuisance; it needs a decoy (xty)");
  if (g.decoy == "xty") {
    c.layout.Add("mean_decoy", d);  // mean over positions of M yx
    c.layout.Add("decoy_xty", d);   // M X_k^T y_k, read by nothing
    c.decoy_map = DecoyMap(d, g.seed);
  }
  if (g.decoy_noise > 0) {
    c.layout.Add("decoy_u", d);  // R x_k at the y-token of example k, R x_(k+1) at the next x-token
    c.decoy_noise_map = RowMajor(RandomOrthogonal(d, g.seed ^ (kDecoyStream + 1)));
  }
  if (g.nuisance > 0) {
    c.layout.Add("nuis_u", d);  // P x_k at the y-token of example k
    c.layout.Add("nuis_v", d);  // P' x_k, the nuisance of mean_yx
    c.nuisance_map = RowMajor(RandomOrthogonal(d, g.seed ^ kNuisanceStream));
    c.nuisance_map_mean = RowMajor(RandomOrthogonal(d, g.seed ^ (kNuisanceStream + 1)));
  }
  if (g.context_distractors < 0)
    throw core::InputError("construct", "context_distractors",
                           "expected a count >= 0, got " + std::to_string(g.context_distractors));
  if (g.context_distractors > 0) {
    const int q = g.context_distractors;
    c.layout.Add("ctx_xx", d * d);  // x x^T of the token's example
    c.layout.Add("ctx_u", q);       // U x of the token's example
    c.layout.Add("ctx_v", q);       // V mean(ctx_xx) over the positions so far
    c.layout.Add("ctx_s", q);       // S mean(ctx_xx)
    c.layout.Add("ctx_uv", q);      // u (.) v
    c.layout.Add("ctx_vs", q);      // v (.) s
  }
  if (g.distractors > 0) {
    const int q = g.distractors / 4, r = g.distractors % 4;
    if (q > 0) c.layout.Add("dist_a", q), c.layout.Add("dist_b", q);
    if (r > 0) c.layout.Add("dist_c", r);
    if (q > 0) c.layout.Add("dist_sq", q), c.layout.Add("dist_prod", q);
  }
}

// Extra ops of block 1's MLP: the nuisances' projections and the linear distractors.
void AddBlock1Disguise(Construction& c, int d) {
  const Disguise& g = c.disguise;
  // decoy_u = R x for the x of the token's example: the token's own x at x-tokens (where xprev
  // is 0), x_k at the y-token of example k (where x is 0), so that the decoy's nuisance is
  // there at the query too, where the prediction reads X'y.
  if (g.decoy_noise > 0) {
    for (const char* from : {"x", "xprev"}) {
      Op u = Aff(from, "decoy_u", 1);
      u.matrix = c.decoy_noise_map;
      c.ops.push_back(Parallel(u));
    }
  }
  if (g.nuisance > 0) {
    Op u = Aff("xprev", "nuis_u", 1), v = Aff("xprev", "nuis_v", 1);
    u.matrix = c.nuisance_map;
    v.matrix = c.nuisance_map_mean;
    c.ops.push_back(Parallel(u));
    c.ops.push_back(Parallel(v));
  }
  if (g.distractors > 0) {
    // Entries of variance 9/2 at both kinds of token: sd^2 d = 9/2 from x (x-tokens), and
    // sd^2 E[y^2] = sd^2 d (w ~ N(0, I)) from y (y-tokens).
    data::Rng rng(g.seed, kDistractorStream);
    const double sd = 3.0 / std::sqrt(2.0 * d);
    for (const char* rows : {"dist_a", "dist_b", "dist_c"}) {
      bool present = false;
      for (const auto& [name, r] : c.layout.entries())
        present = present || name == rows;
      if (!present) continue;
      const int size = c.layout[rows].size;
      Op from_x = Aff("x", rows, 1), from_y = Aff("y", rows, 1);
      from_x.matrix = RandomMap(size, d, sd, rng);
      from_y.matrix = RandomMap(size, 1, sd, rng);
      c.ops.push_back(Parallel(from_x));
      c.ops.push_back(Parallel(from_y));
    }
  }
  if (g.context_distractors > 0) {
    // The token's example's x is x at its x-token and xprev at its y-token (the other is 0
    // there, but at position 0, where the mov falls back to the token itself). U has entries of
    // variance 1/d, so each u_j is N(0, 1); |x_j| <= 6 bounds the squares' |a| + |b| by 12.
    data::Rng rng(g.seed, kContextStream);
    const int q = g.context_distractors;
    const std::vector<double> u = RandomMap(q, d, 1.0 / std::sqrt(double(d)), rng);
    for (const char* from : {"x", "xprev"}) {
      c.ops.push_back(Parallel(Mul(from, from, "ctx_xx", 1, 12.0, Op::kOuter)));
      Op a = Aff(from, "ctx_u", 1);
      a.matrix = u;
      c.ops.push_back(Parallel(a));
    }
  }
}

// Extra ops of block 2's attention: the decoy's mean of M yx.
void AddBlock2AttentionDisguise(Construction& c, int d) {
  if (c.disguise.decoy == "xty") {
    Op mean = Mean("yx", "mean_decoy");
    mean.matrix = c.decoy_map;
    c.ops.push_back(Parallel(mean));
  }
  // v and s: q random features each of the prefix's mean of x x^T (entries of V and S of
  // variance 1/d^2, so that v_j, s_j are of order 1: E x x^T = I).
  if (c.disguise.context_distractors > 0) {
    const int q = c.disguise.context_distractors;
    data::Rng rng(c.disguise.seed, kContextStream + 1);
    for (const char* out : {"ctx_v", "ctx_s"}) {
      Op mean = Mean("ctx_xx", out);
      mean.matrix = RandomMap(q, d * d, 1.0 / d, rng);
      c.ops.push_back(Parallel(mean));
    }
  }
}

// Extra ops of block 2's MLP: the decoy, the nuisance, the distractors' products.
void AddBlock2MlpDisguise(Construction& c, double mean_range) {
  const Disguise& g = c.disguise;
  // M's gains are at most 2.
  if (g.decoy == "xty")
    c.ops.push_back(Parallel(Mul("mean_decoy", "count", "decoy_xty", 1, 2.0 * mean_range)));
  // (R x_k)_j ~ N(0, 1) as the nuisance's u below.
  if (g.decoy_noise > 0)
    c.ops.push_back(Parallel(Mul("decoy_u", "decoy_u", "decoy_xty", g.decoy_noise, 12.0)));
  // |u_j| <= 6 but for a 2e-9 fraction of N(0, 1) draws: |a| + |b| <= 12. mean_yx (X'y / 2k at
  // the y-token of example k), read by nothing after this MLP, gets a nuisance of its own (other
  // projections, so that no linear combination of the two copies cancels both), scaled like it.
  if (g.nuisance > 0) {
    c.ops.push_back(Parallel(Mul("nuis_u", "nuis_u", "xty", g.nuisance, 12.0)));
    c.ops.push_back(Parallel(Mul("nuis_v", "nuis_v", "mean_yx", g.nuisance / c.model.n_max, 12.0)));
  }
  // Distractor entries have sd 2.1: |a| + |b| <= 6 sd * 2 ~ 26, bound 30.
  if (g.distractors >= 4) {
    c.ops.push_back(Parallel(Mul("dist_a", "dist_a", "dist_sq", 1, 30.0)));
    c.ops.push_back(Parallel(Mul("dist_a", "dist_b", "dist_prod", 1, 30.0)));
  }
  // |u_j| <= 6; |v_j| and |s_j| are sums of d^2 terms V_ji mean(xx)_i, below 10 but for rare
  // prompts: a bound of 30 keeps the products in the GELU's quadratic range for all but
  // outliers, whose products are merely less exact (nothing reads them).
  if (g.context_distractors > 0) {
    c.ops.push_back(Parallel(Mul("ctx_u", "ctx_v", "ctx_uv", 1, 30.0)));
    c.ops.push_back(Parallel(Mul("ctx_v", "ctx_s", "ctx_vs", 1, 30.0)));
  }
}

// The nuisance's removal, as a parallel op in the first MLP after block 2 (or as an op of its
// own where `own_block`): the same product, subtracted.
void AddNuisanceRemoval(Construction& c, bool own_block) {
  if (!(c.disguise.nuisance > 0)) return;
  const Op remove = Mul("nuis_u", "nuis_u", "xty", -c.disguise.nuisance, 12.0);
  c.ops.push_back(own_block ? remove : Parallel(remove));
}

void AddDisguiseQuantities(Construction& c) {
  const Disguise& g = c.disguise;
  const int d = c.model.d;
  const int context_rows = g.context_distractors > 0 ? d * d + 5 * g.context_distractors : 0;
  const int own = c.layout.width() - g.distractors - context_rows - (g.decoy.empty() ? 0 : 2 * d) -
                  (g.nuisance > 0 ? 2 * d : 0) - (g.decoy_noise > 0 ? d : 0);
  if (g.distractors > kMaxDistractorFactor * own)
    throw core::InputError(
        "construct", "distractors",
        fmt::format("expected 0..{} ({} times the program's width {}), got {}",
                    kMaxDistractorFactor * own, kMaxDistractorFactor, own, g.distractors));
  if (context_rows > kMaxDistractorFactor * own)
    throw core::InputError(
        "construct", "context_distractors",
        fmt::format("expected 0..{} (their d^2 + 5q rows at most {} times the program's width "
                    "{}), got {} ({} rows)",
                    (kMaxDistractorFactor * own - d * d) / 5, kMaxDistractorFactor, own,
                    g.context_distractors, context_rows));
  if (c.disguise.nuisance > 0) {
    for (auto& q : c.quantities)
      if (q.name == "xty") q.layer = 3;
    c.quantities.push_back(
        {"xty_nuisance", 2, "xty", "y-tokens",
         fmt::format("X_k^T y_k + {:g} (P x_k)^2 (elementwise; P in /construction/nuisance_map), "
                     "at the y-token of example k: X'y with a nonlinear nuisance the next MLP "
                     "removes; mean_yx, the state's other linear copy of X'y, carries one too "
                     "(P' in nuisance_map_mean) and is never read again",
                     c.disguise.nuisance),
         2});
  }
  if (c.disguise.decoy == "xty")
    c.quantities.push_back(
        {"decoy_xty", 2, "decoy_xty", "y-tokens",
         c.disguise.decoy_noise > 0
             ? fmt::format("M X_k^T y_k + {:g} (R x)^2 (M in /construction/decoy_map, R in "
                           "decoy_noise_map; elementwise square; x = x_k at the y-token of "
                           "example k, x_(k+1) at the next x-token), an encoding of X'y with a "
                           "nuisance of its own that nothing reads",
                           c.disguise.decoy_noise)
             : "M X_k^T y_k (M in /construction/decoy_map), an encoding of X'y that nothing "
               "reads, at the y-token of example k (and the next x-token)"});
}

}  // namespace icl::construct::detail
