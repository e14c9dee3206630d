// The trace stage: inputs checked together, every input read out per layer, iterates matched
// (trace_run.hpp).
#include "analysis/trace_run.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/errors.hpp"

namespace icl::analysis {

void TraceRequest::Validate() const {
  if (algorithms.empty()) throw core::InputError("trace", "algorithms", "none given");
  if (prompts < 2 || prompts > 1000000)
    throw core::InputError("trace", "prompts", fmt::format("expected 2..1000000, got {}", prompts));
  if (readout == Readout::kRidge && (fit_prompts < 2 || fit_prompts > 1000000))
    throw core::InputError("trace", "fit_prompts",
                           fmt::format("expected 2..1000000, got {}", fit_prompts));
  if (lambdas.is_empty() || !lambdas.is_finite() || lambdas.min() <= 0)
    throw core::InputError("trace", "lambdas", "expected positive finite penalties");
  if (bootstrap < 10 || bootstrap > 100000)
    throw core::InputError("trace", "bootstrap",
                           fmt::format("expected 10..100000 replicates, got {}", bootstrap));
  if (!(level > 0 && level < 1))
    throw core::InputError("trace", "level", fmt::format("expected 0 < level < 1, got {}", level));
  if (batch < 1 || batch > 65536)
    throw core::InputError("trace", "batch", fmt::format("expected 1..65536, got {}", batch));
  if (threads < 1 || threads > 1024)
    throw core::InputError("trace", "threads", fmt::format("expected 1..1024, got {}", threads));
  if (std::set<int>(ks.begin(), ks.end()).size() != ks.size())
    throw core::InputError("trace", "k", "a prompt length is given twice");
  if (std::set<int>(layers.begin(), layers.end()).size() != layers.size())
    throw core::InputError("trace", "layers", "a layer is given twice");
}

std::vector<std::string> DefaultTraceAlgorithms(const data::TaskConfig& task) {
  // Half the step at which GD diverges on a prompt whose X^T X reaches the Marchenko-Pastur edge
  // (sqrt(k) + sqrt(d))^2 of the longest prefix: stable on essentially every prompt.
  const double edge = std::pow(std::sqrt(double(task.n - 1)) + std::sqrt(double(task.d)), 2);
  return {"newton:16", fmt::format("gd:{:.3g}:256", 0.5 / edge), "ridge-path:1000:0.0001:29"};
}

namespace {

// Rows [first, first + count) of `set`.
data::PromptSet Rows(const data::PromptSet& set, std::size_t first, std::size_t count) {
  data::PromptSet out;
  out.task = set.task;
  out.seed = set.seed;
  out.first_index = set.first_index + first;
  if (count == 0) {  // none (the lens fits nothing): an empty set of the task's shape
    out.x.set_size(set.task.d, set.task.n, 0);
    out.y.set_size(set.task.n, 0);
    out.w.set_size(set.task.d, 0);
    return out;
  }
  out.x = set.x.slices(first, first + count - 1);
  out.y = set.y.cols(first, first + count - 1);
  out.w = set.w.cols(first, first + count - 1);
  return out;
}

void CheckInput(const TraceInput& in, const data::TaskConfig& task, std::size_t rows,
                const std::vector<int>& layers) {
  if (in.model->config.d != task.d)
    throw core::InputError(
        "checkpoint '" + in.checkpoint + "'", "",
        fmt::format("reads d = {}, the traced prompts have d = {}", in.model->config.d, task.d));
  if (in.model->config.n_max < task.n)
    throw core::InputError("checkpoint '" + in.checkpoint + "'", "",
                           fmt::format("reads at most {} examples, the prompts have {}",
                                       in.model->config.n_max, task.n));
  for (int l : layers)
    if (l > in.model->config.layers)
      throw core::InputError("trace", "layers",
                             fmt::format("{} is outside 0..{} (the states of '{}')", l,
                                         in.model->config.layers, in.checkpoint));
  if (!in.info) return;
  const extract::ActivationsInfo& a = *in.info;
  if (a.checkpoint_sha256 != in.sha256)
    throw core::InputError("trace", "activations",
                           "'" + a.path + "' was extracted from another checkpoint than '" +
                               in.checkpoint + "' (its checkpoint_sha256 differs)");
  if (a.positions != extract::Positions::kAll)
    throw core::InputError("trace", "activations",
                           "'" + a.path +
                               "' holds the states after k examples only (the "
                               "y-tokens); a trace reads the x-tokens, where predictions are made: "
                               "extract every position");
  if (a.task.d != task.d || a.task.n != task.n)
    throw core::InputError("trace", "activations",
                           fmt::format("'{}' holds prompts of d = {}, n = {}; expected d = {}, "
                                       "n = {}",
                                       a.path, a.task.d, a.task.n, task.d, task.n));
  if (std::int64_t(rows) > a.prompts)
    throw core::InputError(
        "trace", "activations",
        fmt::format("'{}' holds {} prompts; the scored and fit prompts need {} (fewer "
                    "{{prompts}} or {{fit_prompts}})",
                    a.path, a.prompts, rows));
  for (int l : layers)
    if (std::find(a.layers.begin(), a.layers.end(), l) == a.layers.end())
      throw core::InputError("trace", "layers",
                             fmt::format("'{}' holds no state {} (extract {{layers}} stored {} "
                                         "of them)",
                                         a.path, l, a.layers.size()));
}

}  // namespace

TracePrompts PrepareTrace(TraceRequest& req, const data::TaskConfig& task,
                          const std::vector<TraceInput>& learners,
                          const std::vector<TraceInput>& controls) {
  req.Validate();
  if (learners.empty()) throw std::logic_error("trace: no learner");
  if (task.HasQueries())
    throw core::InputError("trace", "task", "query-shifted prompts are not traced");
  if (req.ks.empty())
    for (int k = 1; k < task.n; ++k)
      req.ks.push_back(k);
  for (int k : req.ks)
    if (k < 0 || k >= task.n)
      throw core::InputError("trace", "k",
                             fmt::format("{} is outside 0..{} (the prompts have n = {} examples; "
                                         "the prediction after k examples is of y_(k+1))",
                                         k, task.n - 1, task.n));
  const int L = learners[0].model->config.layers;
  if (req.layers.empty())
    for (int l = 0; l <= L; ++l)
      req.layers.push_back(l);
  for (int l : req.layers)
    if (l < 0) throw core::InputError("trace", "layers", fmt::format("{} is negative", l));
  for (auto& a : req.algorithms)
    a = ParseTraceAlgorithm(a, task).spec;  // every spec checked before any work, as written
  if (std::set<std::string>(req.algorithms.begin(), req.algorithms.end()).size() !=
      req.algorithms.size())
    throw core::InputError("trace", "algorithms", "an algorithm is given twice");
  const std::size_t fit = req.readout == Readout::kRidge ? req.fit_prompts : 0;
  const std::size_t rows = std::size_t(req.prompts) + fit;
  const TraceInput* source = nullptr;
  for (const auto* group : {&learners, &controls})
    for (const auto& in : *group) {
      if (in.model->config.layers != L)
        throw core::InputError("checkpoint '" + in.checkpoint + "'", "",
                               fmt::format("has {} layers, '{}' has {}: a learner and its "
                                           "controls are traced layer by layer",
                                           in.model->config.layers, learners[0].checkpoint, L));
      CheckInput(in, task, rows, req.layers);
      if (in.info && !source) source = &in;
    }
  TracePrompts p;
  data::PromptSet all;
  if (source) {
    // Every activations file must hold the same prompts: the two-stage bootstrap pairs the
    // inputs prompt by prompt.
    const std::string digest = extract::PromptsDigest(source->activations, std::int64_t(rows));
    for (const auto* group : {&learners, &controls})
      for (const auto& in : *group)
        if (in.info && &in != source &&
            extract::PromptsDigest(in.activations, std::int64_t(rows)) != digest)
          throw core::InputError("trace", "activations",
                                 "'" + in.activations + "' and '" + source->activations +
                                     "' hold different prompts; a cell's learners and controls "
                                     "are compared on the same prompts (extract them with one "
                                     "seed)");
    all = extract::ReadActivationPrompts(*source->info, std::int64_t(rows));
    p.from = source->activations;
  } else {
    all = data::SamplePrompts(task, req.seed, 0, rows);
  }
  p.eval = Rows(all, 0, req.prompts);
  p.fit = fit > 0 ? Rows(all, req.prompts, fit) : Rows(all, 0, 0);
  return p;
}

TraceResult RunTrace(const TraceRequest& req, const TracePrompts& prompts,
                     std::vector<TraceInput> learners, std::vector<TraceInput> controls,
                     core::ThreadPool& pool,
                     const std::function<void(long long, long long)>& progress) {
  TraceResult r;
  r.request = req;
  r.task = prompts.eval.task;
  r.prompt_seed = prompts.eval.seed;
  r.prompts_from = prompts.from;
  r.model_layers = learners.at(0).model->config.layers;
  const bool ridge = req.readout == Readout::kRidge;
  r.labels = TraceLabels(prompts.eval, req.ks);
  const arma::mat fit_labels =
      ridge ? TraceLabels(prompts.fit, req.ks) : arma::mat(req.ks.size(), 0);
  const long long per_input =
      (ridge ? 2LL * prompts.fit.size() : 0LL) + static_cast<long long>(prompts.eval.size());
  const long long total = per_input * static_cast<long long>(learners.size() + controls.size());
  long long done = 0;
  const auto predict = [&](TraceInput& in) {
    const QueryStates states =
        in.info ? FileStates(*in.info, prompts.eval.size(), req.ks, req.layers)
                : ModelStates(in.model, prompts.fit, prompts.eval, req.ks, req.layers, &pool);
    return LayerPredictions(states, int(req.layers.size()), &in.model, fit_labels,
                            prompts.eval.size(), req.readout, req.lambdas, req.batch,
                            [&](std::size_t count) {
                              done += static_cast<long long>(count);
                              if (progress) progress(done, total);
                            });
  };
  const auto checked = [](arma::cube c, const TraceInput& in) {
    if (!c.is_finite())
      throw core::InputError("checkpoint '" + in.checkpoint + "'", "",
                             "a layer's prediction is not finite on these prompts");
    return c;
  };
  for (auto& in : learners)
    r.predictions.push_back(checked(predict(in), in));
  for (auto& in : controls)
    r.control_predictions.push_back(checked(predict(in), in));
  for (std::size_t i = 0; i < req.algorithms.size(); ++i) {
    AlgorithmTrace a;
    a.algorithm = ParseTraceAlgorithm(req.algorithms[i], r.task);
    const arma::cube iterates = IteratePredictions(a.algorithm, prompts.eval, req.ks);
    if (!iterates.is_finite())
      throw core::InputError("trace", "algorithms",
                             "'" + a.algorithm.spec +
                                 "' diverges on these prompts (an iterate is not finite): a "
                                 "smaller step, or fewer iterates");
    // One bootstrap seed per algorithm, the same for the learners and their controls.
    const std::uint64_t boot_seed = req.seed * 7919ULL + i;
    if (controls.empty()) {
      a.model = MatchIterates(r.predictions, iterates, r.labels, req.bootstrap, boot_seed,
                              req.level, req.layers);
    } else {
      TracedPair p = MatchWithControls(r.predictions, r.control_predictions, iterates, r.labels,
                                       req.bootstrap, boot_seed, req.level, req.layers);
      a.model = std::move(p.model);
      a.control = std::move(p.control);
    }
    r.algorithms.push_back(std::move(a));
  }
  for (auto* group : {&learners, &controls})
    for (auto& in : *group)
      in.model = learners::Transformer(nullptr);
  r.learners = std::move(learners);
  r.controls = std::move(controls);
  return r;
}

}  // namespace icl::analysis
