// Splits, target loading and hidden-state blocks.
#include "probes/data_access.hpp"

#include <cmath>

#include <numeric>
#include <stdexcept>

#include "core/errors.hpp"
#include "data/task.hpp"

namespace icl::probes {

std::vector<Role> SplitPrompts(std::int64_t n, const std::array<double, 3>& f, std::uint64_t seed) {
  for (double v : f)
    if (!(v >= 0)) throw core::InputError("probe", "split", "fractions must be non-negative");
  const double total = f[0] + f[1] + f[2];
  if (!(total > 0)) throw core::InputError("probe", "split", "fractions sum to 0");
  const std::int64_t n_train = std::llround(n * f[0] / total),
                     n_val = std::llround(n * f[1] / total);
  const std::int64_t n_test = n - n_train - n_val;
  if (n_train < 2 || n_val < 1 || n_test < 1)
    throw core::InputError("probe", "split",
                           std::to_string(n) + " prompts give " + std::to_string(n_train) +
                               " train / " + std::to_string(n_val) + " validation / " +
                               std::to_string(n_test) +
                               " test prompts; every part needs prompts (train at least 2)");
  // Fisher-Yates with the project's portable generator.
  std::vector<std::int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  data::Rng rng(seed, /*stream=*/0x5b11);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(order[i], order[rng.NextU64() % std::uint64_t(i + 1)]);
  std::vector<Role> roles(n);
  for (std::int64_t j = 0; j < n; ++j)
    roles[order[j]] = j < n_train ? Role::kTrain : (j < n_train + n_val ? Role::kVal : Role::kTest);
  return roles;
}

arma::uvec RoleIndices(const std::vector<Role>& roles, Role role) {
  std::vector<arma::uword> idx;
  for (std::size_t i = 0; i < roles.size(); ++i)
    if (roles[i] == role) idx.push_back(i);
  return arma::uvec(idx);
}

Target LoadTarget(const StatesInfo& info, const std::string& name) {
  if (!info.file) throw std::logic_error("probe: '" + info.name + "' is not a file");
  const extract::StoredTarget stored = extract::ReadTarget(*info.file, name);
  const std::int64_t N = info.prompts;
  const int n = info.n;
  const std::size_t per = stored.entries;
  const std::size_t row = stored.per_k ? per * n : per;  // per prompt
  const arma::uword side = stored.side;
  Target t;
  t.name = name;
  t.dims = stored.symmetric ? side * (side + 1) / 2 : per;
  for (int k = 1; k <= n; ++k) {
    arma::mat m(t.dims, N);
    for (std::int64_t i = 0; i < N; ++i) {
      const double* v = stored.values.data() + i * row + (stored.per_k ? (k - 1) * per : 0);
      if (stored.symmetric) {
        arma::uword e = 0;
        for (arma::uword r = 0; r < side; ++r)
          for (arma::uword c = r; c < side; ++c)
            m(e++, i) = v[r * side + c];
      } else {
        for (arma::uword e = 0; e < per; ++e)
          m(e, i) = v[e];
      }
    }
    if (!m.is_finite()) {
      const arma::uvec bad = arma::find_nonfinite(m);
      throw core::InputError("'" + info.name + "'", "",
                             "/targets/" + name + " has a non-finite value at prompt " +
                                 std::to_string(bad(0) / t.dims) + ", k=" + std::to_string(k));
    }
    t.values.push_back(std::move(m));
  }
  return t;
}

int AfterKPosition(const StatesInfo& info, int k) {
  return info.positions == extract::Positions::kAll ? 2 * k - 1 : k - 1;
}

}  // namespace icl::probes
