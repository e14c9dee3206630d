// Task families: their specs, ranges, pool members and per-prompt draws.
#include "data/task_family.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "data/task.hpp"

namespace icl::data {

namespace {

// The pool's members come from their own streams of the pool seed, far from any prompt index.
constexpr std::uint64_t kPoolStream = std::uint64_t(1) << 62;

[[noreturn]] void Fail(const std::string& text) {
  throw core::InputError("task", "task_family", text);
}

std::vector<double> NumberList(const std::string& text, const std::string& what,
                               const std::string& spec) {
  std::vector<double> out;
  for (const std::string& item : core::SplitList("task", "task_family", text)) {
    const auto v = core::ParseNumber(item);
    if (!v) Fail("in '" + spec.substr(0, 120) + "', expected " + what + ", got '" + item + "'");
    out.push_back(*v);
  }
  return out;
}

}  // namespace

std::string TaskFamily::Spec() const {
  switch (kind) {
    case Kind::kGaussian:
      return "gaussian";
    case Kind::kPool:
      return fmt::format("pool:{}:{}", pool_size, pool_seed);
    case Kind::kNoiseMix:
      return probs.empty()
                 ? fmt::format("noise-mix:{}", fmt::join(sigmas, ","))
                 : fmt::format("noise-mix:{}:{}", fmt::join(sigmas, ","), fmt::join(probs, ","));
    case Kind::kSparse:
      return fmt::format("sparse:{}", sparsity);
  }
  return "?";
}

void TaskFamily::Validate(int used_d) const {
  switch (kind) {
    case Kind::kGaussian:
      return;
    case Kind::kPool:
      if (pool_size < 1 || pool_size > kMaxPoolSize)
        Fail(fmt::format("pool:M needs M in 1..{} (2^20), got {}", kMaxPoolSize, pool_size));
      return;
    case Kind::kNoiseMix: {
      if (sigmas.empty() || int(sigmas.size()) > kMaxNoiseLevels)
        Fail(fmt::format("noise-mix needs 1..{} noise levels, got {}", kMaxNoiseLevels,
                         sigmas.size()));
      for (double s : sigmas)
        if (!(s >= 0) || !std::isfinite(s) || s > 1e6)
          Fail(fmt::format("noise-mix: each sigma must be a finite number in [0, 1e+06], got {}",
                           s));
      if (!probs.empty()) {
        if (probs.size() != sigmas.size())
          Fail(fmt::format("noise-mix: {} probabilities for {} noise levels", probs.size(),
                           sigmas.size()));
        double sum = 0;
        for (double p : probs) {
          if (!(p >= 0 && p <= 1)) Fail(fmt::format("noise-mix: probability {} not in [0, 1]", p));
          sum += p;
        }
        // Probabilities written as decimals add up to 1 to their rounding.
        if (std::abs(sum - 1) > 1e-9)
          Fail(fmt::format("noise-mix: the probabilities sum to {}, not 1", sum));
      }
      return;
    }
    case Kind::kSparse:
      if (sparsity < 1 || sparsity > used_d)
        Fail(fmt::format("sparse:S needs S in 1..{} (the dimensions the task uses), got {}", used_d,
                         sparsity));
      return;
  }
}

bool operator==(const TaskFamily& a, const TaskFamily& b) {
  return a.kind == b.kind && a.pool_size == b.pool_size &&
         (a.kind != TaskFamily::Kind::kPool || a.pool_seed == b.pool_seed) &&
         a.sigmas == b.sigmas && a.probs == b.probs && a.sparsity == b.sparsity;
}

TaskFamily ParseTaskFamily(const std::string& text) {
  const core::Spec spec = core::ParseSpec(text);
  const std::string expected =
      "expected gaussian, pool:M[:SEED], noise-mix:S1,S2,...[:P1,P2,...] or sparse:S, got '" +
      text.substr(0, 120) + "'";
  TaskFamily f;
  if (spec.name == "gaussian" && spec.args.empty()) return f;
  if (spec.name == "pool" && (spec.args.size() == 1 || spec.args.size() == 2)) {
    f.kind = TaskFamily::Kind::kPool;
    const auto m = spec.Integer(0, 0, std::int64_t(1) << 40);
    if (!m) Fail("pool:M needs a whole M, got '" + text.substr(0, 120) + "'");
    f.pool_size = *m;
    if (spec.args.size() == 2) {
      const auto seed = spec.Integer(1, 0, std::numeric_limits<long long>::max());
      if (!seed) Fail("pool:M:SEED needs a whole SEED >= 0, got '" + text.substr(0, 120) + "'");
      f.pool_seed = std::uint64_t(*seed);
    }
  } else if (spec.name == "noise-mix" && (spec.args.size() == 1 || spec.args.size() == 2)) {
    f.kind = TaskFamily::Kind::kNoiseMix;
    f.sigmas = NumberList(spec.args[0], "noise levels sigma", text);
    if (spec.args.size() == 2) f.probs = NumberList(spec.args[1], "probabilities", text);
  } else if (spec.name == "sparse" && spec.args.size() == 1) {
    f.kind = TaskFamily::Kind::kSparse;
    const auto s = spec.Integer(0, 0, kMaxD);
    if (!s) Fail("sparse:S needs a whole S, got '" + text.substr(0, 120) + "'");
    f.sparsity = int(*s);
  } else {
    Fail(expected);
  }
  return f;
}

void PoolMember(const TaskFamily& family, int d, int used, double w_scale, std::int64_t m,
                double* w) {
  Rng rng(family.pool_seed, kPoolStream + std::uint64_t(m));
  for (int i = 0; i < d; ++i) {
    const double z = rng.Normal();
    w[i] = i >= used ? 0.0 : w_scale * z;
  }
}

arma::mat PoolMembers(const TaskFamily& family, int d, int used, double w_scale) {
  arma::mat w(std::size_t(d), std::size_t(family.pool_size));
  for (std::int64_t m = 0; m < family.pool_size; ++m)
    PoolMember(family, d, used, w_scale, m, w.colptr(arma::uword(m)));
  return w;
}

FamilyDraw DrawFromFamily(const TaskFamily& family, int used, Rng& rng) {
  FamilyDraw out;
  if (family.kind == TaskFamily::Kind::kPool) {
    out.index = std::min<std::int64_t>(family.pool_size - 1,
                                       std::int64_t(rng.Uniform() * double(family.pool_size)));
  } else if (family.kind == TaskFamily::Kind::kNoiseMix) {
    const double u = rng.Uniform();
    const std::size_t C = family.sigmas.size();
    // u beyond the probabilities' rounded sum: the last level that has a probability.
    out.index = std::int64_t(C) - 1;
    while (!family.probs.empty() && out.index > 0 && !(family.probs[std::size_t(out.index)] > 0))
      --out.index;
    double cum = 0;
    for (std::size_t c = 0; c < C; ++c) {
      cum += family.probs.empty() ? 1.0 / double(C) : family.probs[c];
      if (u < cum) {
        out.index = std::int64_t(c);
        break;
      }
    }
  } else if (family.kind == TaskFamily::Kind::kSparse) {
    // A partial Fisher-Yates shuffle of 0..used-1: its first S entries are a uniform S-subset.
    std::vector<int> order(std::size_t(used), 0);
    for (int i = 0; i < used; ++i)
      order[std::size_t(i)] = i;
    for (int i = 0; i < family.sparsity; ++i) {
      const int j = i + std::min(used - 1 - i, int(rng.Uniform() * double(used - i)));
      std::swap(order[std::size_t(i)], order[std::size_t(j)]);
    }
    out.support.assign(order.begin(), order.begin() + family.sparsity);
    std::sort(out.support.begin(), out.support.end());
  }
  return out;
}

}  // namespace icl::data
