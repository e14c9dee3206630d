// The linear / MLP probes of a group of layers: each (k, seed, target, family) one batched
// model over the group's layers, spread over the pool and, under mpirun, over the ranks.
#include <algorithm>
#include <cstring>
#include <tuple>

#include "core/dist.hpp"
#include "probes/runner_internal.hpp"

namespace icl::probes::detail {

namespace {

// The layer's states, streamed into memory block by block: [N, T, H] float32.
torch::Tensor LayerStates(const LayerJob& job) {
  const StatesInfo& info = *job.src.info;
  const std::int64_t N = info.prompts, rows = job.run.r.block_rows;
  const int H = info.hidden, T = info.positions_per_prompt;
  auto states = LargeEmpty({N, T, H});
  for (std::int64_t r0 = 0; r0 < N; r0 += rows) {
    const std::int64_t cnt = std::min<std::int64_t>(rows, N - r0);
    const arma::fmat block = job.read(r0, cnt);
    std::memcpy(states[r0].data_ptr<float>(), block.memptr(), sizeof(float) * block.n_elem);
  }
  return states;
}

// One linear / MLP fit: (k, seed, target, family) of a layer.
struct GradientTask {
  int ki, s, v;
  Family f;
};

std::vector<GradientTask> GradientTasks(const LayerJob& job, const std::vector<Family>& gradient) {
  std::vector<GradientTask> tasks;
  for (int ki = 0; ki < int(job.run.r.ks.size()); ++ki)
    for (int s = 0; s < job.run.r.seeds; ++s)
      for (int v = 0; v < int(job.src.variants.size()); ++v)
        for (auto f : gradient)
          tasks.push_back({ki, s, v, f});
  return tasks;
}

// One (k, seed, target, family) for several layers [j0, j1) of a group, fitted together as one
// batched model (their seed is the same: it depends on k and the seed index, not the layer).
// Runs on one thread: the result does not depend on what runs beside it.
void RunGradientTask(const std::deque<LayerJob>& jobs, const std::vector<torch::Tensor>& states,
                     std::size_t j0, std::size_t j1, const GradientTask& t) {
  const LayerJob& job = jobs[j0];
  const ProbeRequest& r = job.run.r;
  const auto& info = *job.src.info;
  const auto& variants = job.src.variants;
  const auto& test = job.src.test;
  const int T = info.positions_per_prompt, S = r.seeds, V = variants.size();
  const int k = r.ks[t.ki], pos = ProbePosition(info, k, variants[t.v].at);
  // Pooled probes see the states up to and including the one read (after k examples, or the
  // query's x-token).
  std::vector<torch::Tensor> x;
  for (std::size_t j = j0; j < j1; ++j)
    x.push_back(r.pooled ? states[j].slice(1, 0, pos + 1) : states[j].select(1, pos));
  GradientProbeOptions o = r.gradient;
  o.mlp = t.f == Family::kMlp;
  o.pooled = r.pooled;
  o.seed = SplitSeed(r.seed, t.s) * 31 + k;
  // Fit on (possibly shuffled) training targets; test against the real ones.
  arma::mat y = variants[t.v].Y(t.s, k);
  y.cols(test[t.s]) = variants[t.v].values->values[k - 1].cols(test[t.s]);
  const std::vector<GradientFit> fits =
      FitGradientProbes(x, y, job.src.train[t.s], job.src.val[t.s], test[t.s], o);
  std::vector<Codelength> codes;
  if (r.codelength) {
    CodelengthOptions co;
    co.lambdas = r.lambdas.elem(arma::find(r.lambdas > 0));
    co.precision = r.codelength_precision;
    const arma::uvec& train = job.src.train[t.s];  // prompt order
    codes = GradientCodelengths(x, y, train, job.src.val[t.s],
                                CodelengthBlockEnds(r.codelength_fractions, train.n_elem), o, co);
  }
  for (std::size_t j = j0; j < j1; ++j) {
    const GradientFit& fit = fits[j - j0];
    const Codelength* code = codes.empty() ? nullptr : &codes[j - j0];
    job.run.Record(job.src, jobs[j].layer, variants[t.v].target, t.f, k, t.s, fit.test, -1,
                   fit.epochs, code);
    if (code)
      job.run.Keep(ProbeOutput::Code{variants[t.v].target, job.src.name, jobs[j].layer, k, t.s,
                                     *code, FamilyName(t.f)});
    if (r.pooled) {
      arma::vec alpha(T, arma::fill::zeros);
      alpha.head(fit.alpha.n_elem) = fit.alpha;
      job.run.Keep(ProbeOutput::Alpha{variants[t.v].target, FamilyName(t.f), job.src.name,
                                      jobs[j].layer, k, t.s, alpha});
    }
    job.run.Advance(1.0 / (S * V));  // S * V probes make one (layer, k, family) unit
  }
}

}  // namespace

// The linear / MLP fits of a group of layers: each (k, seed, target, family) one batched model
// over the group's layers, spread over the pool (split into as many layer batches as keep
// every thread busy).
void GradientOverLayers(ProbeRun& run, const std::deque<LayerJob>& jobs,
                        const std::vector<Family>& gradient) {
  std::vector<torch::Tensor> states;
  dist::Together([&] {
    for (const LayerJob& job : jobs)
      states.push_back(LayerStates(job));
  });
  const std::vector<GradientTask> per_layer = GradientTasks(jobs[0], gradient);
  const std::size_t parts = std::min<std::size_t>(
      jobs.size(), std::max<std::size_t>(1, std::size_t(run.pool.size()) / per_layer.size()));
  // Under mpirun the fits go round-robin to the ranks (each fit runs whole on one rank, so its
  // result does not depend on the rank count); their results are gathered after the run.
  std::vector<std::tuple<std::size_t, std::size_t, GradientTask>> tasks;
  std::size_t task_index = 0;
  for (std::size_t p = 0; p < parts; ++p)
    for (const GradientTask& t : per_layer)
      if (task_index++ % std::size_t(dist::Size()) == std::size_t(dist::Rank()))
        tasks.emplace_back(p * jobs.size() / parts, (p + 1) * jobs.size() / parts, t);
  dist::Together([&] {
    run.pool.For(tasks.size(), [&](std::int64_t i) {
      const auto& [j0, j1, t] = tasks[std::size_t(i)];
      RunGradientTask(jobs, states, j0, j1, t);
    });
  });
}

}  // namespace icl::probes::detail
