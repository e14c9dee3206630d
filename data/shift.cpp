// Shifted prompt distributions (data/shift.hpp).
#include "data/shift.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "data/task.hpp"

namespace icl::data {

namespace {

constexpr double kMaxShiftScale = 1e6;
// The basis's own stream: no prompt stream uses this seed's stream d.
constexpr std::uint64_t kBasisSeed = 0x5b1f7ba515ULL;

const char* kExpected =
    "expected none, same (query only), skewed, scale:S, half-subspace[:M], orthant[:+|-], "
    "orthogonal (query only) or y-scale:S (context only)";

}  // namespace

std::string Shift::Spec() const {
  switch (kind) {
    case ShiftKind::kSame:
      return "same";
    case ShiftKind::kNone:
      return "none";
    case ShiftKind::kSkewed:
      return "skewed";
    case ShiftKind::kScale:
      return fmt::format("scale:{:g}", scale);
    case ShiftKind::kHalfSubspace:
      return dims > 0 ? fmt::format("half-subspace:{}", dims) : "half-subspace";
    case ShiftKind::kOrthant:
      return sign > 0 ? "orthant:+" : "orthant:-";
    case ShiftKind::kOrthogonal:
      return "orthogonal";
    case ShiftKind::kYScale:
      return fmt::format("y-scale:{:g}", scale);
  }
  return "none";
}

bool operator==(const Shift& a, const Shift& b) {
  return a.Spec() == b.Spec();
}

Shift ParseShift(const std::string& text, const std::string& field) {
  const core::Spec p = core::ParseSpec(text);
  const auto bad = [&] {
    return core::InputError("task", field,
                            std::string(kExpected) + "; got '" + text.substr(0, 80) + "'");
  };
  Shift s;
  const std::size_t args = p.args.size();
  if (p.name == "none" && args == 0) {
    s.kind = ShiftKind::kNone;
  } else if (p.name == "same" && args == 0) {
    s.kind = ShiftKind::kSame;
  } else if (p.name == "skewed" && args == 0) {
    s.kind = ShiftKind::kSkewed;
  } else if ((p.name == "scale" || p.name == "y-scale") && args == 1) {
    s.kind = p.name == "scale" ? ShiftKind::kScale : ShiftKind::kYScale;
    const auto v = p.Number(0);
    if (!v || !(*v > 0) || *v > kMaxShiftScale)
      throw core::InputError("task", field,
                             p.name +
                                 ":S: the scale must be a positive finite number at most "
                                 "1e+06; got '" +
                                 text.substr(0, 80) + "'");
    s.scale = *v;
  } else if (p.name == "half-subspace" && args <= 1) {
    s.kind = ShiftKind::kHalfSubspace;
    if (args == 1) {
      const auto m = p.Integer(0, 1, kMaxD);
      if (!m)
        throw core::InputError(
            "task", field,
            "half-subspace:M: M must be an integer in 1..d - 1; got '" + text.substr(0, 80) + "'");
      s.dims = static_cast<int>(*m);
    }
  } else if (p.name == "orthant" && args <= 1) {
    s.kind = ShiftKind::kOrthant;
    if (args == 1) {
      if (p.args[0] != "+" && p.args[0] != "-")
        throw core::InputError(
            "task", field, "orthant:SIGN: SIGN must be + or -; got '" + text.substr(0, 80) + "'");
      s.sign = p.args[0] == "+" ? 1 : -1;
    }
  } else if (p.name == "orthogonal" && args == 0) {
    s.kind = ShiftKind::kOrthogonal;
  } else {
    throw bad();
  }
  return s;
}

void Shift::Validate(bool query, int d, const std::string& field) const {
  const std::string spec = Spec();
  if (query && kind == ShiftKind::kYScale)
    throw core::InputError("task", field,
                           "y-scale changes labels, which a prediction never sees at the query; "
                           "give it as the context shift");
  if (!query && (kind == ShiftKind::kSame || kind == ShiftKind::kOrthogonal))
    throw core::InputError("task", field, "'" + spec + "' is a query shift only");
  if ((kind == ShiftKind::kScale || kind == ShiftKind::kYScale) &&
      (!(scale > 0) || !std::isfinite(scale) || scale > kMaxShiftScale))
    throw core::InputError("task", field,
                           fmt::format("the scale must be positive and finite (at most 1e+06), "
                                       "got {}",
                                       scale));
  if (kind == ShiftKind::kHalfSubspace && (Dims(d) < 1 || Dims(d) >= d))
    throw core::InputError("task", field,
                           fmt::format("half-subspace of {} dimensions in d = {}: expected 1..d - "
                                       "1 (and d >= 2)",
                                       Dims(d), d));
  if (kind == ShiftKind::kOrthant && sign != 1 && sign != -1)
    throw core::InputError("task", field, "orthant sign must be +1 or -1");
}

double ProjectOut(int d, const double* basis, int m, double* v) {
  for (int j = 0; j < m; ++j) {
    const double* b = basis + static_cast<std::size_t>(j) * d;
    double dot = 0;
    for (int r = 0; r < d; ++r)
      dot += b[r] * v[r];
    for (int r = 0; r < d; ++r)
      v[r] -= dot * b[r];
  }
  double norm = 0;
  for (int r = 0; r < d; ++r)
    norm += v[r] * v[r];
  return norm;
}

std::vector<double> ShiftBasis(int d) {
  // Modified Gram-Schmidt in a fixed order: the same bits on every IEEE machine. A Gaussian
  // column is independent of the earlier ones with probability 1; a numerically dependent one
  // (residual below 1e-8 of its norm) is redrawn.
  Rng rng(kBasisSeed, static_cast<std::uint64_t>(d));
  std::vector<double> q(static_cast<std::size_t>(d) * d);
  for (int i = 0; i < d; ++i) {
    double* v = q.data() + static_cast<std::size_t>(i) * d;
    for (;;) {
      double norm0 = 0;
      for (int r = 0; r < d; ++r)
        v[r] = rng.Normal(), norm0 += v[r] * v[r];
      const double norm = ProjectOut(d, q.data(), i, v);
      if (norm > 1e-16 * norm0) {
        const double inv = 1 / std::sqrt(norm);
        for (int r = 0; r < d; ++r)
          v[r] *= inv;
        break;
      }
    }
  }
  return q;
}

void ShiftX(const Shift& s, int d, const std::vector<double>& basis, const double* z, double* x) {
  switch (s.kind) {
    case ShiftKind::kSkewed: {
      // x = Q diag(sqrt(lambda)) z, lambda_i = c / (i + 1) with sum lambda_i = d.
      double harmonic = 0;
      for (int i = 0; i < d; ++i)
        harmonic += 1.0 / (i + 1);
      for (int r = 0; r < d; ++r)
        x[r] = 0;
      for (int i = 0; i < d; ++i) {
        const double a = std::sqrt(d / harmonic / (i + 1)) * z[i];
        const double* b = basis.data() + static_cast<std::size_t>(i) * d;
        for (int r = 0; r < d; ++r)
          x[r] += a * b[r];
      }
      return;
    }
    case ShiftKind::kScale:
      for (int r = 0; r < d; ++r)
        x[r] = s.scale * z[r];
      return;
    case ShiftKind::kHalfSubspace: {
      // x = Q_m z_m: a standard normal inside the span of the first m basis vectors.
      for (int r = 0; r < d; ++r)
        x[r] = 0;
      for (int i = 0; i < s.Dims(d); ++i) {
        const double* b = basis.data() + static_cast<std::size_t>(i) * d;
        for (int r = 0; r < d; ++r)
          x[r] += z[i] * b[r];
      }
      return;
    }
    case ShiftKind::kOrthant:
      for (int r = 0; r < d; ++r)
        x[r] = s.sign * std::abs(z[r]);
      return;
    default:
      for (int r = 0; r < d; ++r)
        x[r] = z[r];
  }
}

}  // namespace icl::data
