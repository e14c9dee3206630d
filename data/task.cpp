// Task configuration (JSON) and the counter-seeded prompt sampler.
#include "data/task.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace icl::data {

namespace {

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::uint64_t Rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

constexpr double kMaxScale = 1e6;  // the messages say 1e+06

void TaskConfig::Validate() const {
  if (d <= 0 || d > kMaxD)
    throw core::InputError(
        "task", "d",
        "must be an integer in 1.." + std::to_string(kMaxD) + ", got " + std::to_string(d));
  if (n <= 0 || n > kMaxN)
    throw core::InputError(
        "task", "n",
        "must be an integer in 1.." + std::to_string(kMaxN) + ", got " + std::to_string(n));
  if (d_effective < 0 || d_effective > d)
    throw core::InputError("task", "d_effective",
                           "must be an integer in 1..d = " + std::to_string(d) + " (0: all), got " +
                               std::to_string(d_effective));
  if (!(w_scale > 0) || !std::isfinite(w_scale))
    throw core::InputError("task", "w_scale",
                           "must be a positive finite number, got " + std::to_string(w_scale));
  if (!(noise >= 0) || !std::isfinite(noise))
    throw core::InputError("task", "noise",
                           "must be a non-negative finite number, got " + std::to_string(noise));
  // Labels of order w_scale * sqrt(d) + noise enter float32 tokens and X'X-type targets whose
  // squares must stay finite (an SVD of infinities fails with no word of why).
  if (w_scale > kMaxScale || noise > kMaxScale)
    throw core::InputError("task", w_scale > kMaxScale ? "w_scale" : "noise",
                           "must be at most 1e+06 (labels must stay finite in float32)");
  family.Validate(EffectiveD());
  if (family.kind != TaskFamily::Kind::kGaussian && fixed_w)
    throw core::InputError("task", "fixed_w",
                           "the fixed-w control is its own task; drop {task_family} " +
                               family.Spec() + " or {fixed_w}");
  if (family.kind == TaskFamily::Kind::kNoiseMix && noise != 0)
    throw core::InputError("task", "noise",
                           "with {task_family} noise-mix the noise levels are the family's; "
                           "leave {noise} at 0");
  context_shift.Validate(/*query=*/false, d, "context_shift");
  query_shift.Validate(/*query=*/true, d, "query_shift");
  if (context_shift.kind == ShiftKind::kYScale && w_scale * context_shift.scale > kMaxScale)
    throw core::InputError("task", "context_shift",
                           "y-scale times w_scale must be at most 1e+06 (labels must stay finite "
                           "in float32)");
}

std::string TaskConfig::ToJson() const {
  nlohmann::json j = {{"d", d},
                      {"n", n},
                      {"w_scale", w_scale},
                      {"noise", noise},
                      {"fixed_w", fixed_w},
                      {"x_distribution", "normal(0, I)"}};
  // Written only when it restricts the task, so files of full-width tasks keep their bytes.
  if (d_effective > 0 && d_effective < d) j["d_effective"] = d_effective;
  if (context_shift.kind != ShiftKind::kNone) j["context_shift"] = context_shift.Spec();
  if (query_shift.kind != ShiftKind::kSame) j["query_shift"] = query_shift.Spec();
  if (family.kind != TaskFamily::Kind::kGaussian) j["family"] = family.Spec();
  return j.dump();
}

TaskConfig TaskConfig::FromJson(const std::string& json, const std::string& what) {
  TaskConfig t;
  const auto j = core::json::Parse(json, what);
  t.d = static_cast<int>(core::json::Int(j, "d", what, 1, kMaxD));
  t.n = static_cast<int>(core::json::Int(j, "n", what, 1, kMaxN));
  t.w_scale = core::json::Number(j, "w_scale", what);
  t.noise = core::json::Number(j, "noise", what);
  t.fixed_w = j.contains("fixed_w") ? core::json::Bool(j, "fixed_w", what) : false;
  t.d_effective = j.contains("d_effective")
                      ? static_cast<int>(core::json::Int(j, "d_effective", what, 1, t.d))
                      : 0;
  if (t.d_effective == t.d) t.d_effective = 0;
  try {
    if (j.contains("context_shift"))
      t.context_shift = ParseShift(core::json::String(j, "context_shift", what), "context_shift");
    if (j.contains("query_shift"))
      t.query_shift = ParseShift(core::json::String(j, "query_shift", what), "query_shift");
    if (j.contains("family")) t.family = ParseTaskFamily(core::json::String(j, "family", what));
    t.Validate();
  } catch (const std::invalid_argument& e) {
    throw core::InputError(what, "", e.what());
  }
  return t;
}

bool operator==(const TaskConfig& a, const TaskConfig& b) {
  return a.d == b.d && a.n == b.n && a.w_scale == b.w_scale && a.noise == b.noise &&
         a.fixed_w == b.fixed_w && a.EffectiveD() == b.EffectiveD() &&
         a.context_shift == b.context_shift && a.query_shift == b.query_shift &&
         a.family == b.family;
}

Rng::Rng(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t sm = seed;
  std::uint64_t key = SplitMix64(sm) ^ (stream * 0xD1B54A32D192ED03ULL);
  std::uint64_t st = key;
  for (auto& s : s_)
    s = SplitMix64(st);
}

std::uint64_t Rng::NextU64() {
  const std::uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() {
  return static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
}

double Rng::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Box-Muller on (0, 1] x [0, 1): u1 > 0 keeps the log finite.
  const double u1 = 1.0 - Uniform();
  const double u2 = Uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

namespace {

bool NeedsBasis(const Shift& s) {
  return s.kind == ShiftKind::kSkewed || s.kind == ShiftKind::kHalfSubspace;
}

// The query after the first k examples (x: d x n, column j = x_{j+1}) for z ~ N(0, I).
// Orthogonal: z minus its projection on span(x_1..x_k), scaled by sqrt(d / (d - rank)) so that
// E|q|^2 = d; where the examples span R^d there is no such direction and the query is drawn like
// a context example.
void QueryX(const TaskConfig& task, const std::vector<double>& basis, const double* x, int k,
            const double* z, double* q) {
  const int d = task.d;
  if (task.query_shift.kind != ShiftKind::kOrthogonal) {
    ShiftX(task.query_shift, d, basis, z, q);
    return;
  }
  // Modified Gram-Schmidt over the examples, then of z against that basis.
  std::vector<double> span;  // rank * d: orthonormal, one vector after another
  int rank = 0;
  for (int j = 0; j < k && rank < d; ++j) {
    const double* xj = x + static_cast<std::size_t>(j) * d;
    double norm0 = 0;
    for (int r = 0; r < d; ++r)
      norm0 += xj[r] * xj[r];
    span.insert(span.end(), xj, xj + d);
    double* v = span.data() + static_cast<std::size_t>(rank) * d;
    const double norm = ProjectOut(d, span.data(), rank, v);
    if (norm <= 1e-20 * norm0 || norm0 == 0) {  // dependent on earlier examples
      span.resize(static_cast<std::size_t>(rank) * d);
      continue;
    }
    for (int r = 0; r < d; ++r)
      v[r] /= std::sqrt(norm);
    ++rank;
  }
  if (rank >= d) {
    ShiftX(task.context_shift, d, basis, z, q);
    return;
  }
  for (int r = 0; r < d; ++r)
    q[r] = z[r];
  ProjectOut(d, span.data(), rank, q);
  const double scale = std::sqrt(static_cast<double>(d) / (d - rank));
  for (int r = 0; r < d; ++r)
    q[r] *= scale;
}

// The generator of a family's own draws: stream index + 2^63 of the same seed, which no prompt
// index reaches, so that the prompt generator's draws stay those of the Gaussian task.
constexpr std::uint64_t kFamilyStream = std::uint64_t(1) << 63;

std::int64_t SamplePromptWith(const TaskConfig& task, const std::vector<double>& basis,
                              std::uint64_t seed, std::uint64_t index, double* x, double* y,
                              double* w, double* qx, double* qy) {
  Rng rng(seed, index);
  const int d = task.d, used = task.EffectiveD();
  const double y_scale =
      task.context_shift.kind == ShiftKind::kYScale ? task.context_shift.scale : 1.0;
  for (int i = 0; i < d; ++i) {
    const double z = rng.Normal();  // drawn even for fixed_w so x and noise match the ordinary task
    w[i] = i >= used ? 0.0 : task.fixed_w ? 1.0 : task.w_scale * z;
  }
  double noise = task.noise;
  FamilyDraw drawn;
  if (task.family.kind != TaskFamily::Kind::kGaussian) {
    Rng side(seed, kFamilyStream + index);
    drawn = DrawFromFamily(task.family, used, side);
    if (task.family.kind == TaskFamily::Kind::kPool)
      PoolMember(task.family, d, used, task.w_scale, drawn.index, w);
    else if (task.family.kind == TaskFamily::Kind::kNoiseMix)
      noise = task.family.sigmas[std::size_t(drawn.index)];
    else  // sparse: the Gaussian draws on the support, 0 elsewhere
      for (int i = 0, s = 0; i < d; ++i) {
        const bool on = s < int(drawn.support.size()) && drawn.support[std::size_t(s)] == i;
        if (on)
          ++s;
        else
          w[i] = 0.0;
      }
  }
  std::vector<double> z(static_cast<std::size_t>(d));
  const auto draw_z = [&] {  // every coordinate drawn: one stream for any d_effective
    for (int i = 0; i < d; ++i) {
      const double v = rng.Normal();
      z[i] = i >= used ? 0.0 : v;
    }
  };
  const auto label = [&](const double* xj, double eps) {
    double dot = 0.0;
    for (int i = 0; i < d; ++i)
      dot += w[i] * xj[i];
    return y_scale * (dot + noise * eps);
  };
  for (int j = 0; j < task.n; ++j) {
    double* xj = x + static_cast<std::size_t>(j) * d;
    draw_z();
    ShiftX(task.context_shift, d, basis, z.data(), xj);
    y[j] = label(xj, rng.Normal());
  }
  if (!task.HasQueries()) return drawn.index;
  if (!qx || !qy) throw std::logic_error("SamplePrompt: a query shift needs qx and qy");
  for (int k = 0; k < task.n; ++k) {
    draw_z();
    double* q = qx + static_cast<std::size_t>(k) * d;
    QueryX(task, basis, x, k, z.data(), q);
    qy[k] = label(q, rng.Normal());
  }
  return drawn.index;
}

std::vector<double> BasisFor(const TaskConfig& task) {
  return NeedsBasis(task.context_shift) || NeedsBasis(task.query_shift) ? ShiftBasis(task.d)
                                                                        : std::vector<double>();
}

}  // namespace

void SamplePrompt(const TaskConfig& task, std::uint64_t seed, std::uint64_t index, double* x,
                  double* y, double* w, double* qx, double* qy, std::int64_t* draw) {
  const std::int64_t drawn = SamplePromptWith(task, BasisFor(task), seed, index, x, y, w, qx, qy);
  if (draw) *draw = drawn;
}

PromptSet SamplePrompts(const TaskConfig& task, std::uint64_t seed, std::uint64_t first_index,
                        std::size_t count) {
  task.Validate();
  PromptSet set;
  set.task = task;
  set.seed = seed;
  set.first_index = first_index;
  set.x.set_size(task.d, task.n, count);
  set.y.set_size(task.n, count);
  set.w.set_size(task.d, count);
  if (task.HasQueries()) {
    set.query_x.set_size(task.d, task.n, count);
    set.query_y.set_size(task.n, count);
  }
  if (task.family.Draws()) set.draw.resize(count);
  const std::vector<double> basis = BasisFor(task);
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t drawn =
        SamplePromptWith(task, basis, seed, first_index + i, set.x.slice_memptr(i), set.y.colptr(i),
                         set.w.colptr(i), task.HasQueries() ? set.query_x.slice_memptr(i) : nullptr,
                         task.HasQueries() ? set.query_y.colptr(i) : nullptr);
    if (task.family.Draws()) set.draw[i] = drawn;
  }
  return set;
}

arma::mat RandomOrthonormal(int rows, int cols, std::uint64_t seed, std::uint64_t stream) {
  if (rows < 0 || cols < 0 || cols > rows)
    throw std::invalid_argument("RandomOrthonormal: expected 0 <= cols <= rows");
  Rng rng(seed, stream);
  arma::mat q(rows, cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i)
      q(i, j) = rng.Normal();
  // Modified Gram-Schmidt, run twice ("twice is enough"): orthonormal to working precision.
  for (int j = 0; j < cols; ++j)
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < j; ++i) {
        double dot = 0;
        for (int r = 0; r < rows; ++r)
          dot += q(r, i) * q(r, j);
        for (int r = 0; r < rows; ++r)
          q(r, j) -= dot * q(r, i);
      }
      double norm = 0;
      for (int r = 0; r < rows; ++r)
        norm += q(r, j) * q(r, j);
      norm = std::sqrt(norm);
      for (int r = 0; r < rows; ++r)
        q(r, j) /= norm;
    }
  return q;
}

}  // namespace icl::data
