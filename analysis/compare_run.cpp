// The compare pipeline: references on each learner's task, SPD, implicit weights, ILWD.
#include "analysis/compare_run.hpp"

#include <algorithm>
#include <memory>

#include "core/errors.hpp"
#include "core/output.hpp"
#include "core/spec.hpp"
#include "learners/trainer.hpp"

namespace icl::analysis {

namespace {

// One reference learner on one prompt set: predictions n x N and, for a linear one, weights
// d x n x P on the first P prompts.
struct Reference {
  std::string spec;
  bool linear = false;
  arma::mat pred;
  arma::cube w;
};

Reference RunReference(const learners::ClassicalLearner& l, const data::PromptSet& set,
                       int contexts) {
  const int d = set.task.d, n = set.task.n, N = static_cast<int>(set.size());
  Reference r{l.spec(), l.is_linear(), arma::mat(n, N),
              arma::cube(d, n, l.is_linear() ? contexts : 0)};
  learners::LearnerRun run;
  for (int i = 0; i < N; ++i) {
    learners::RunOnPrompt(l, set, i, run);
    r.pred.col(i) = run.predictions;
    if (r.linear && i < contexts) r.w.slice(i) = run.weights;
  }
  return r;
}

// What every learner under test on one task shares: the scored and fit prompts and the
// references with no fitted hyperparameter (computed once per task, not once per checkpoint).
struct TaskReferences {
  data::PromptSet set, fit_set;
  std::vector<Reference> fixed;  // per spec item; empty Reference for a fit item
  int users = 0;                 // learners under test of this task
  std::vector<std::shared_ptr<const FamilyGrid>> grids;  // per fit item, once two users need it
  arma::mat ols_pred;  // n x N: OLS on `set`, where a fitted family reaches it (ReachesOls)
};

// ridge:fit and newton:fit contain OLS as a limit (lambda -> 0, steps -> infinity).
bool ReachesOls(const FitSpec& f) {
  return f.family == "ridge" || f.family == "newton";
}

// The most a cell's shared fit grids may hold (FamilyGridBytes); a larger one is recomputed per
// learner instead (the same fit, more time).
constexpr std::size_t kMaxSharedGrid = std::size_t(512) << 20;

// The items of --learners (core::SplitList: an empty one is refused, naming the setting).
std::vector<std::string> SplitSpecs(const std::string& specs) {
  return core::SplitList("compare", "learners", specs);
}

// Predictions n x N of a classical learner on every prompt of `set`.
arma::mat Predictions(const learners::ClassicalLearner& l, const data::PromptSet& set) {
  arma::mat p(set.task.n, set.size());
  learners::LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    learners::RunOnPrompt(l, set, i, run);
    p.col(i) = run.predictions;
  }
  return p;
}

}  // namespace

void CheckLearnerSpecs(const std::string& specs, const data::TaskConfig& task,
                       const data::TaskConfig* trained) {
  const std::vector<std::string> items = SplitSpecs(specs);
  std::string check;
  for (std::size_t i = 0; i < items.size(); ++i) {
    FitSpec f;
    check += (i ? "," : "") + (ParseFitSpec(items[i], &f) ? f.Spec(0.01, f.steps_hi) : items[i]);
  }
  learners::MakeLearners(check, task, "learners", trained);
}

LearnerUnderTest TransformerUnderTest(const std::string& name, const data::TaskConfig& task,
                                      learners::Transformer model) {
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [model](const data::PromptSet& set) mutable {
    return learners::TransformerPredictions(model, set);
  };
  l.query = [model](const data::PromptSet& set, std::size_t first, std::size_t count,
                    const arma::cube& q) mutable {
    return learners::QueryPredictionsAllK(model, set, first, count, q);  // batched contexts
  };
  return l;
}

LearnerUnderTest ClassicalUnderTest(const std::string& name, const data::TaskConfig& task,
                                    std::shared_ptr<const learners::ClassicalLearner> learner) {
  if (!learner->is_linear())
    throw core::InputError(
        "compare", "learners",
        "'" + learner->spec() + "' is not linear; only linear learners answer queries here");
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [learner](const data::PromptSet& set) { return Predictions(*learner, set); };
  l.query = [learner](const data::PromptSet& set, std::size_t first, std::size_t count,
                      const arma::cube& q) {
    learners::LearnerRun run;
    const arma::uword n = set.task.n;
    arma::mat out(q.n_cols, q.n_slices);
    for (std::size_t c = 0; c < count; ++c) {
      learner->Run(set.x.slice(first + c), set.y.col(first + c), run);  // weights d x n
      for (arma::uword k = 0; k < n; ++k)
        out.col(c * n + k) = q.slice(c * n + k).t() * run.weights.col(k);
    }
    return out;
  };
  return l;
}

void CompareRequest::Validate() const {
  if (prompts < 1) throw core::InputError("compare", "prompts", "must be positive");
  if (ilwd_prompts < 1) throw core::InputError("compare", "ilwd_prompts", "must be positive");
  if (fit_prompts < 2 || fit_prompts > 1000000)
    throw core::InputError("compare", "fit_prompts",
                           "expected 2..1000000, got " + std::to_string(fit_prompts));
  task.Validate();
  if (queries != 0 && queries < task.d + 1)
    throw core::InputError(
        "compare", "queries",
        "the implicit-weight fit needs at least d+1 = " + std::to_string(task.d + 1) +
            " query points, got " + std::to_string(queries));
  // What the run holds at once, estimated before any allocation: the prompts (x, y and every
  // learner's predictions, about four copies of n (d + 1) numbers each), and the query points
  // of the ILWD contexts with their predictions (d + 2 numbers per query, context and k).
  const double n = task.n, d = task.d;
  core::RequireMemory(8.0 * (double(prompts) + fit_prompts) * n * (d + 1) * 4, "compare", "prompts",
                      "the prompts and their predictions");
  const double q = queries == 0 ? 2 * (d + 1) : queries;
  core::RequireMemory(8.0 * q * std::min(ilwd_prompts, prompts) * n * (d + 2), "compare", "queries",
                      "the query points of the implicit weights");
  CheckLearnerSpecs(learner_specs, task, &trained);
}

std::vector<int> SummaryWindow(int d, int n) {
  std::vector<int> ks;
  for (int k = 0; k < n; ++k)
    if (k != d && k != d + 1) ks.push_back(k);
  return ks;
}

namespace {

// Every learner under test reads prompts of the first one's d and n.
void CheckOneShape(const std::vector<LearnerUnderTest>& models) {
  const int d = models[0].task.d, n = models[0].task.n;
  for (const auto& m : models)
    if (m.task.d != d || m.task.n != n)
      throw core::InputError("compare", "",
                             "'" + m.name + "' reads d=" + std::to_string(m.task.d) +
                                 ", n=" + std::to_string(m.task.n) + " but '" + models[0].name +
                                 "' reads d=" + std::to_string(d) + ", n=" + std::to_string(n));
}

// The implicit weights of `m` (w: d x n x P) and the R2 of their fit (r2: n x P) on the first P
// prompts of `set`, each context and k from Q seeded query points; progress counts contexts
// from `done` of `total`.
void ImplicitWeightsOf(const LearnerUnderTest& m, const data::PromptSet& set, int P, int Q,
                       std::uint64_t seed, long long done, long long total,
                       const std::function<void(long long, long long)>& progress, arma::cube& w,
                       arma::mat& r2) {
  const int d = set.task.d, n = set.task.n;
  constexpr int kContextsPerCall = 64;  // a learner batches its forward passes within
  for (int first = 0; first < P; first += kContextsPerCall) {
    const int count = std::min(kContextsPerCall, P - first);
    arma::cube q(d, Q, static_cast<arma::uword>(count) * n);
    for (int i = first; i < first + count; ++i)
      for (int k = 0; k < n; ++k)
        q.slice((i - first) * n + k) = QueryPoints(d, Q, seed, std::uint64_t(i) * n + k);
    const arma::mat yhat = m.query(set, first, count, q);
    for (int i = first; i < first + count; ++i)
      for (int k = 0; k < n; ++k) {
        const int s = (i - first) * n + k;
        const auto fit = FitImplicitWeights(q.slice(s), yhat.col(s));
        w.slice(i).col(k) = fit.w;
        r2(k, i) = fit.r2;
      }
    if (progress) progress(done + first + count, total);
  }
}

// Every fit item's family member closest to `m` on the fit prompts (fitted) and that member run
// on the scored prompts (fitted_ref, its weights on the first P).
void FitFamilies(const LearnerUnderTest& m, const std::vector<FitSpec>& fits,
                 const std::vector<bool>& is_fit, const std::vector<int>& ks, int P,
                 TaskReferences& ref, std::vector<FamilyFit>& fitted,
                 std::vector<Reference>& fitted_ref) {
  const arma::mat target = m.predict(ref.fit_set);
  for (std::size_t i = 0; i < fits.size(); ++i) {
    if (!is_fit[i]) continue;
    // The grid's predictions are the same for every learner of this task: shared by the
    // seeds of a cell (built at the first that needs them), unless too large to keep.
    if (ref.users > 1 && !ref.grids[i] &&
        FamilyGridBytes(fits[i], ref.fit_set, ks) <= kMaxSharedGrid)
      ref.grids[i] = std::make_shared<const FamilyGrid>(MakeFamilyGrid(fits[i], ref.fit_set, ks));
    fitted[i] = FitFamily(fits[i], ref.fit_set, target, ks, ref.grids[i].get());
    fitted_ref[i] = RunReference(
        *learners::MakeLearner(fits[i].Spec(fitted[i].value, fitted[i].steps), m.task), ref.set, P);
  }
}

// Every pair of reference learners against each other, each reference added as a model.
void AddAllPairs(const std::vector<Reference>& L, int d, CompareResult& out) {
  for (std::size_t a = 0; a < L.size(); ++a)
    for (std::size_t b = a + 1; b < L.size(); ++b) {
      CompareEntry e;
      e.model = L[a].spec, e.learner = L[b].spec;
      e.spd = Spd(L[a].pred, L[b].pred, d);
      if (L[a].linear && L[b].linear) e.ilwd = Ilwd(L[a].w, L[b].w);
      out.entries.push_back(std::move(e));
    }
  for (const auto& l : L)
    if (std::find(out.models.begin(), out.models.end(), l.spec) == out.models.end())
      out.models.push_back(l.spec);
}

}  // namespace

CompareResult RunCompare(const std::vector<LearnerUnderTest>& models, const CompareRequest& req,
                         const std::function<void(long long, long long)>& progress) {
  if (models.empty()) throw core::InputError("compare", "", "no learner to compare");
  CompareResult out;
  out.d = models[0].task.d;
  out.n = models[0].task.n;
  CompareRequest checked = req;  // against the learners' own task
  checked.task = models[0].task;
  checked.trained = models[0].trained;
  checked.Validate();
  CheckOneShape(models);
  // Fit specs are checked with a placeholder value and fitted per learner under test below.
  const std::vector<std::string> items = SplitSpecs(req.learner_specs);
  std::vector<FitSpec> fits(items.size());
  std::vector<bool> is_fit(items.size(), false);
  // Every learner's prompts and training task, before any work (dmmse needs a pool).
  for (const LearnerUnderTest& m : models)
    CheckLearnerSpecs(req.learner_specs, m.task, &m.trained);
  for (std::size_t i = 0; i < items.size(); ++i)
    is_fit[i] = ParseFitSpec(items[i], &fits[i]);
  const bool any_fit = std::find(is_fit.begin(), is_fit.end(), true) != is_fit.end();
  if (any_fit && req.all_pairs)
    throw core::InputError(
        "compare", "all_pairs",
        "all pairs compares reference learners with each other; a fitted learner "
        "(gd:fit, newton:fit, sgd:fit, ridge:fit) has a value only against a learner under test");
  const int d = out.d, n = out.n;
  out.prompts = req.prompts;
  out.fit_prompts = any_fit ? req.fit_prompts : 0;
  out.seed = req.seed;
  out.queries = req.queries == 0 ? 2 * (d + 1) : req.queries;
  out.contexts = std::min(req.ilwd_prompts, req.prompts);
  const int P = out.contexts, Q = out.queries;
  // The one summary window of every column, fixed before any result: k = d and d + 1 left out.
  // There minimum-norm OLS inverts X^T X of at most d + 1 Gaussian examples, whose inverse has
  // no finite mean under noise, and noiseless OLS jumps from its k < d error to 0, so one k
  // there can decide a verdict the other k do not support.
  const std::vector<int> ks = SummaryWindow(d, n);
  const arma::uvec rows = arma::conv_to<arma::uvec>::from(ks);
  std::vector<std::pair<std::string, TaskReferences>> shared;  // by task JSON
  std::vector<std::string> task_keys;
  for (const auto& m : models)
    task_keys.push_back(m.task.ToJson() + m.trained.ToJson());
  // The references of a learner under test's prompts (and, for dmmse, of its training pool).
  auto references_of = [&](const LearnerUnderTest& m) -> TaskReferences& {
    const data::TaskConfig& t = m.task;
    const std::string key = t.ToJson() + m.trained.ToJson();
    for (auto& [k, r] : shared)
      if (k == key) return r;
    TaskReferences r;
    r.users = static_cast<int>(std::count(task_keys.begin(), task_keys.end(), key));
    r.grids.resize(items.size());
    r.set = data::SamplePrompts(t, req.seed, 0, req.prompts);
    if (any_fit) r.fit_set = data::SamplePrompts(t, req.seed, req.prompts, req.fit_prompts);
    const auto learners = learners::MakeLearners(
        [&] {  // the fixed items, with placeholders for fit ones (not run)
          std::string specs;
          for (std::size_t i = 0; i < items.size(); ++i)
            specs += (i ? "," : "") + (is_fit[i] ? fits[i].Spec(0.01, fits[i].steps_hi) : items[i]);
          return specs;
        }(),
        t, "learners", &m.trained);
    for (std::size_t i = 0; i < items.size(); ++i)
      r.fixed.push_back(is_fit[i] ? Reference{} : RunReference(*learners[i], r.set, P));
    for (std::size_t i = 0; i < items.size(); ++i)
      if (is_fit[i] && ReachesOls(fits[i]) && r.ols_pred.is_empty()) {
        // OLS among the fixed items is run already: its predictions serve.
        for (const Reference& f : r.fixed)
          if (f.spec == "ols") r.ols_pred = f.pred;
        if (r.ols_pred.is_empty())
          r.ols_pred = RunReference(*learners::MakeLearner("ols", t), r.set, 0).pred;
      }
    shared.emplace_back(key, std::move(r));
    return shared.back().second;
  };
  const long long total = static_cast<long long>(models.size()) * P;
  for (std::size_t c = 0; c < models.size(); ++c) {
    const auto& m = models[c];
    out.models.push_back(m.name);
    out.tasks.push_back(m.task);
    out.trained.push_back(m.trained);
    TaskReferences& ref = references_of(m);
    // Fitted learners: on prompts after the scored ones (disjoint from them), each family's
    // hyperparameters closest to this model.
    std::vector<FamilyFit> fitted(items.size(), FamilyFit{arma::datum::nan, arma::datum::nan});
    std::vector<Reference> fitted_ref(items.size());
    if (any_fit) FitFamilies(m, fits, is_fit, ks, P, ref, fitted, fitted_ref);
    const arma::mat pred = m.predict(ref.set);
    arma::cube w(d, n, P);
    arma::mat r2(n, P);
    ImplicitWeightsOf(m, ref.set, P, Q, req.seed, static_cast<long long>(c) * P, total, progress, w,
                      r2);
    out.implicit_r2.push_back(r2);
    out.summary_ks.push_back(ks);
    for (std::size_t j = 0; j < items.size(); ++j) {
      const Reference& b = is_fit[j] ? fitted_ref[j] : ref.fixed[j];
      CompareEntry e;
      e.model = m.name;
      e.learner = is_fit[j] ? items[j] : b.spec;
      e.spd = Spd(pred, b.pred, d);
      if (b.linear) e.ilwd = Ilwd(w, b.w);
      e.spd_per_prompt = arma::square(pred - b.pred) / d;  // n x N
      e.spd_prompt = arma::mean(e.spd_per_prompt.rows(rows), 0).t();
      if (is_fit[j]) {
        e.fitted = fitted[j].value, e.fit_spd = fitted[j].spd, e.fitted_spec = b.spec;
        e.fitted_steps = fits[j].family == "gd" || fits[j].family == "newton" ? fitted[j].steps : 0;
        e.fit_at_bound = fitted[j].at_bound || fitted[j].steps_at_bound;
        if (ReachesOls(fits[j]))
          e.member_ols_spd =
              arma::mean(arma::mean(arma::square(b.pred - ref.ols_pred).eval().rows(rows), 0)) / d;
      }
      out.entries.push_back(std::move(e));
    }
  }
  if (req.all_pairs) AddAllPairs(references_of(models[0]).fixed, d, out);
  return out;
}

}  // namespace icl::analysis
