// Task configuration (JSON) and the counter-seeded prompt sampler.
#include "data/task.hpp"

#include "core/errors.hpp"
#include "core/json.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

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
    t.Validate();
  } catch (const std::invalid_argument& e) {
    throw core::InputError(what, "", e.what());
  }
  return t;
}

bool operator==(const TaskConfig& a, const TaskConfig& b) {
  return a.d == b.d && a.n == b.n && a.w_scale == b.w_scale && a.noise == b.noise &&
         a.fixed_w == b.fixed_w && a.EffectiveD() == b.EffectiveD();
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

void SamplePrompt(const TaskConfig& task, std::uint64_t seed, std::uint64_t index, double* x,
                  double* y, double* w) {
  Rng rng(seed, index);
  const int d = task.d, used = task.EffectiveD();
  for (int i = 0; i < d; ++i) {
    const double z = rng.Normal();  // drawn even for fixed_w so x and noise match the ordinary task
    w[i] = i >= used ? 0.0 : task.fixed_w ? 1.0 : task.w_scale * z;
  }
  for (int j = 0; j < task.n; ++j) {
    double* xj = x + static_cast<std::size_t>(j) * d;
    double dot = 0.0;
    for (int i = 0; i < d; ++i) {
      const double z = rng.Normal();  // drawn for every coordinate: one stream for any d_effective
      xj[i] = i >= used ? 0.0 : z;
      dot += w[i] * xj[i];
    }
    const double eps = rng.Normal();
    y[j] = dot + task.noise * eps;
  }
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
  for (std::size_t i = 0; i < count; ++i) {
    SamplePrompt(task, seed, first_index + i, set.x.slice_memptr(i), set.y.colptr(i),
                 set.w.colptr(i));
  }
  return set;
}

}  // namespace icl::data
