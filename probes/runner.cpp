// The probing run: each source prepared (splits, targets, the shuffle control), its layers
// probed in groups, then the ceilings, target maps, intervals and the records' order.
#include "probes/runner.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "data/task.hpp"
#include "probes/data_access.hpp"
#include "probes/runner_internal.hpp"
#include "probes/uncertainty.hpp"

namespace icl::probes {

using detail::GatherGradientResults;
using detail::GradientOverLayers;
using detail::LayerJob;
using detail::ProbeRun;
using detail::RidgeOverLayer;
using detail::SourceData;
using detail::SplitSeed;
using detail::Variant;

namespace {

// Target `name` of source `i`: from memory where the plan holds its sources there, else read
// from its file.
Target PlanTarget(const ProbePlan& plan, std::size_t i, const std::string& name) {
  if (plan.memory.empty()) return LoadTarget(plan.infos[i], name);
  return plan.memory[i]->targets.at(name);
}

// The prompts' roles for every seed, the targets, and (shuffle control) the targets permuted
// across training prompts.
SourceData PrepareSource(ProbeRun& run, const std::string& name, std::size_t info_index,
                         bool shuffled) {
  const ProbeRequest& r = run.r;
  SourceData src;
  src.name = name;
  src.info = &run.infos[info_index];
  if (!run.plan.memory.empty()) src.memory = run.plan.memory[info_index].get();
  const std::int64_t N = src.info->prompts;
  for (int s = 0; s < r.seeds; ++s) {
    src.roles.push_back(SplitPrompts(N, r.split, SplitSeed(r.seed, s)));
    src.train.push_back(RoleIndices(src.roles[s], Role::kTrain));
    src.val.push_back(RoleIndices(src.roles[s], Role::kVal));
    src.test.push_back(RoleIndices(src.roles[s], Role::kTest));
    if (r.codelength) {
      const auto ends = CodelengthBlockEnds(r.codelength_fractions, src.train[s].n_elem);
      std::vector<int> block(N, -1);
      int b = 0;
      for (arma::uword j = 0; j < src.train[s].n_elem; ++j) {
        while (std::int64_t(j) >= ends[b])
          ++b;
        block[src.train[s](j)] = b;
      }
      src.code_block.push_back(std::move(block));
      if (name == "model") run.out.code_block_ends.push_back(ends);
    }
    if (name == "model") {
      std::vector<std::uint8_t> r8(N);
      for (std::int64_t i = 0; i < N; ++i)
        r8[i] = static_cast<std::uint8_t>(src.roles[s][i]);
      run.out.roles.push_back(std::move(r8));
    }
  }
  for (const auto& t : r.targets)
    src.targets.push_back(PlanTarget(run.plan, info_index, t));
  for (const auto& t : src.targets)  // src.targets no longer grows: the pointers stay valid
    for (ProbeAt at : r.at) {
      Variant v{at == ProbeAt::kQuery ? QueryTargetName(t.name) : t.name, at, &t, {}};
      if (shuffled) {
        v.shuffled.resize(r.seeds);
        for (int s = 0; s < r.seeds; ++s) {
          data::Rng rng(SplitSeed(r.seed, s), /*stream=*/0x5a0f);
          arma::uvec perm = src.train[s];
          for (arma::uword i = perm.n_elem - 1; i > 0; --i)
            std::swap(perm(i), perm(rng.NextU64() % (i + 1)));
          for (int k = 1; k <= src.info->n; ++k) {
            arma::mat y = t.values[k - 1];
            y.cols(src.train[s]) = t.values[k - 1].cols(perm);
            v.shuffled[s].push_back(std::move(y));
          }
        }
      }
      src.variants.push_back(std::move(v));
    }
  return src;
}

// Layers go in groups: ridge probes layer by layer (each spreads its (k, seed) work over the
// pool), then the group's linear / MLP fits. Memory: the states of one group's layers, up to
// ~1 GiB (at least as many layers as threads).
void ProbeSource(ProbeRun& run, const SourceData& src) {
  const ProbeRequest& r = run.r;
  const bool ridge =
      std::find(r.families.begin(), r.families.end(), Family::kRidge) != r.families.end();
  std::vector<Family> gradient;
  for (auto f : r.families)
    if (f != Family::kRidge) gradient.push_back(f);
  const StatesInfo& info = *src.info;
  const double layer_bytes = 4.0 * info.prompts * info.positions_per_prompt * info.hidden;
  const std::size_t group =
      gradient.empty() ? 1
                       : std::max<std::size_t>(
                             run.pool.size(), static_cast<std::size_t>(1073741824.0 / layer_bytes));
  for (std::size_t g0 = 0; g0 < r.layers.size(); g0 += group) {
    const std::size_t g1 = std::min(r.layers.size(), g0 + group);
    std::deque<HiddenReader> readers;
    std::deque<LayerJob> jobs;
    for (std::size_t li = g0; li < g1; ++li) {
      std::function<arma::fmat(std::int64_t, std::int64_t)> read;
      if (src.memory) {
        const std::int64_t rows = std::int64_t(info.positions_per_prompt) * info.hidden;
        read = [&src, layer = r.layers[li], rows](std::int64_t start, std::int64_t count) {
          return src.memory->Read(layer, rows, start, count);
        };
      } else {
        const HiddenReader& reader = readers.emplace_back(*info.file, r.layers[li]);
        read = [&reader](std::int64_t start, std::int64_t count) {
          return reader.Read(start, count);
        };
      }
      jobs.push_back(LayerJob{run, src, r.layers[li], std::move(read)});
      if (ridge) RidgeOverLayer(jobs.back());
    }
    if (!gradient.empty()) GradientOverLayers(run, jobs, gradient);
  }
}

// Intervals: every record of a seed is resampled with the same draws of its test prompts.
void AddIntervals(ProbeOutput& out, const ProbeRequest& r) {
  if (out.records.empty()) return;
  const Bootstrap boot(out.records[0].sse.n_elem, r.seeds, r.bootstrap, r.seed);
  for (auto& rec : out.records) {
    const Interval i = PercentileInterval(boot.R2(rec.seed, rec.sse, rec.sst));
    rec.r2_lo = i.lo, rec.r2_hi = i.hi;
    rec.nmse_lo = 1.0 - i.hi, rec.nmse_hi = 1.0 - i.lo;
  }
}

// A stable order: target, probe, source, layer, k, seed as requested.
void SortRecords(ProbeOutput& out, const ProbeRequest& r) {
  auto index_of = [](const auto& v, const auto& x) {
    return std::find(v.begin(), v.end(), x) - v.begin();
  };
  std::vector<std::string> fam;
  for (auto f : r.families)
    fam.push_back(FamilyName(f));
  auto key = [&](const ProbeRecord& a) {
    return std::make_tuple(index_of(r.targets, a.target), index_of(fam, a.probe),
                           index_of(out.sources, a.source), index_of(r.layers, a.layer),
                           index_of(r.ks, a.k), a.seed);
  };
  std::sort(out.records.begin(), out.records.end(),
            [&](const ProbeRecord& a, const ProbeRecord& b) { return key(a) < key(b); });
}

// The ceiling of w on the main file (ProbeOutput::ceilings), where it is known: the file's
// w_ridge is the Bayes posterior mean (lambda = sigma^2 / tau^2 on the training distribution of
// w and x), and w varies.
void AddCeilings(ProbeOutput& out, const ProbePlan& plan) {
  const ProbeRequest& r = plan.request;
  const StatesInfo& info = plan.infos[0];
  if (!info.file) return;  // arrays: no task says what w was drawn from
  const data::TaskConfig& task = info.file->task;
  const double lambda = info.file->ridge_lambda;
  const bool bayes =
      lambda >= 0 && std::abs(lambda - task.BayesLambda()) <= 1e-12 * (1 + task.BayesLambda());
  if (std::find(r.targets.begin(), r.targets.end(), "w") == r.targets.end() || !bayes ||
      task.fixed_w || task.context_shift.kind != data::ShiftKind::kNone ||
      std::find(info.targets.begin(), info.targets.end(), "w_ridge") == info.targets.end())
    return;
  const Target w = PlanTarget(plan, 0, "w"), wb = PlanTarget(plan, 0, "w_ridge");
  arma::mat c(r.ks.size(), r.seeds);
  for (int s = 0; s < r.seeds; ++s) {
    const arma::uvec test =
        RoleIndices(SplitPrompts(info.prompts, r.split, SplitSeed(r.seed, s)), Role::kTest);
    for (std::size_t ki = 0; ki < r.ks.size(); ++ki) {
      const arma::mat wt = w.values[r.ks[ki] - 1].cols(test);
      const arma::mat centred = wt.each_col() - arma::vec(arma::mean(wt, 1));
      const double sst = arma::accu(arma::square(centred));
      c(ki, s) = 1 - arma::accu(arma::square(wt - wb.values[r.ks[ki] - 1].cols(test))) / sst;
    }
  }
  for (ProbeAt at : r.at)
    out.ceilings[at == ProbeAt::kQuery ? QueryTargetName("w") : "w"] = c;
}

// ProbeOutput::target_map_r2 on the main file: each target against each other target, per k.
void AddTargetMaps(ProbeOutput& out, const ProbePlan& plan) {
  const ProbeRequest& r = plan.request;
  const StatesInfo& info = plan.infos[0];
  const std::size_t T = r.targets.size();
  if (T < 2) return;
  const auto roles = SplitPrompts(info.prompts, r.split, SplitSeed(r.seed, 0));
  const arma::uvec train = RoleIndices(roles, Role::kTrain), test = RoleIndices(roles, Role::kTest);
  std::vector<Target> targets;
  for (const auto& t : r.targets)
    targets.push_back(PlanTarget(plan, 0, t));
  out.target_map_r2.set_size(T, T, r.ks.size());
  for (std::size_t ki = 0; ki < r.ks.size(); ++ki)
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = 0; j < T; ++j) {
        if (i == j) {
          out.target_map_r2(i, j, ki) = 1;
          continue;
        }
        const arma::mat& a = targets[i].values[r.ks[ki] - 1];
        const arma::mat& b = targets[j].values[r.ks[ki] - 1];
        // Least squares with an intercept on [1; a]: a tiny ridge keeps duplicated entries (the
        // symmetric X'X) and constant ones (w_ols of one example is a multiple of x_1) solvable.
        auto design = [&](const arma::uvec& rows) {
          arma::mat x(a.n_rows + 1, rows.n_elem, arma::fill::ones);
          x.rows(1, a.n_rows) = a.cols(rows);
          return x;
        };
        const arma::mat xt = design(train), xs = design(test);
        arma::mat g = xt * xt.t();
        g.diag() += 1e-9 * (1 + arma::trace(g) / double(g.n_rows));
        const arma::mat coef = arma::solve(g, arma::mat(xt * b.cols(train).t()),
                                           arma::solve_opts::likely_sympd);  // (m_a + 1) x m_b
        const arma::mat bt = b.cols(test);
        const arma::mat centred = bt.each_col() - arma::vec(arma::mean(bt, 1));
        const double sst = arma::accu(arma::square(centred));
        out.target_map_r2(i, j, ki) =
            sst > 0 ? 1 - arma::accu(arma::square(bt - coef.t() * xs)) / sst : arma::datum::nan;
      }
}

}  // namespace

ProbeOutput RunProbes(const ProbePlan& plan, core::ThreadPool& pool,
                      const std::function<void(double, double)>& progress) {
  const ProbeRequest& r = plan.request;
  // (The program keeps BLAS and torch serial meanwhile; libraries do not set thread counts.)
  ProbeRun run(plan, pool, progress);
  run.out.layers = r.layers;
  run.out.ks = r.ks;
  run.out.seeds = r.seeds;
  struct Source {
    std::string name;
    std::size_t info;
    bool shuffled;
  };
  std::vector<Source> sources = {{"model", 0, false}};
  for (std::size_t i = 1; i < plan.infos.size(); ++i)
    sources.push_back({SourceName(plan.infos[i].name), i, false});
  if (r.shuffle_control) sources.push_back({"shuffled", 0, true});
  for (const auto& s : sources)
    run.out.sources.push_back(s.name);
  run.total = double(sources.size()) * r.layers.size() * r.ks.size() * r.families.size();
  for (const auto& s : sources)
    ProbeSource(run, PrepareSource(run, s.name, s.info, s.shuffled));
  GatherGradientResults(run.out);
  AddCeilings(run.out, plan);
  AddTargetMaps(run.out, plan);
  AddIntervals(run.out, r);
  SortRecords(run.out, r);
  return std::move(run.out);
}

}  // namespace icl::probes
