// The compare pipeline: references on each learner's task, SPD, implicit weights, ILWD.
#include "analysis/compare_run.hpp"
#include "probes/uncertainty.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "learners/trainer.hpp"

namespace icl::analysis {

namespace {

double MeanRange(const arma::vec& v, arma::uword lo, arma::uword hi) {  // mean of v[lo, hi)
  if (hi <= lo || v.is_empty()) return arma::datum::nan;
  return arma::mean(v.subvec(lo, std::min<arma::uword>(hi, v.n_elem) - 1));
}

std::string Cell(double v, bool best) {
  if (std::isnan(v)) return fmt::format("{:>11}", "-");
  return fmt::format("{:>10.3e}{}", v, best ? '*' : ' ');
}

// Reference learners on one task: predictions n x N and, for linear ones, weights d x n x P.
struct References {
  data::PromptSet set;
  std::vector<std::unique_ptr<learners::ClassicalLearner>> learners;
  std::vector<arma::mat> pred;
  std::vector<arma::cube> w;
};

References MakeReferences(const data::TaskConfig& t, const CompareRequest& req, int contexts,
                          const std::string& specs) {
  References r;
  r.set = data::SamplePrompts(t, req.seed, 0, req.prompts);
  r.learners = learners::MakeLearners(specs, t);
  for (const auto& l : r.learners) {
    arma::mat pred(t.n, req.prompts);
    arma::cube w(t.d, t.n, l->is_linear() ? contexts : 0);
    learners::LearnerRun run;
    for (int i = 0; i < req.prompts; ++i) {
      l->Run(r.set.x.slice(i), r.set.y.col(i), run);
      pred.col(i) = run.predictions;
      if (l->is_linear() && i < contexts) w.slice(i) = run.weights;
    }
    r.pred.push_back(std::move(pred));
    r.w.push_back(std::move(w));
  }
  return r;
}

std::vector<std::string> SplitSpecs(const std::string& specs) {
  std::vector<std::string> out;
  std::string item;
  for (const char c : specs + ",") {
    if (c == ',') {
      const auto a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
      out.push_back(a == std::string::npos ? "" : item.substr(a, b - a + 1));
      item.clear();
    } else {
      item += c;
    }
  }
  return out;
}

// Predictions n x N of a classical learner on every prompt of `set`.
arma::mat Predictions(const learners::ClassicalLearner& l, const data::PromptSet& set) {
  arma::mat p(set.task.n, set.size());
  learners::LearnerRun run;
  for (std::size_t i = 0; i < set.size(); ++i) {
    l.Run(set.x.slice(i), set.y.col(i), run);
    p.col(i) = run.predictions;
  }
  return p;
}

}  // namespace

std::string FitSpec::Spec(double value) const {
  std::string s = family + ":" + fmt::format("{:.9g}", value);
  if (family == "gd" && steps > 1) s += ":" + std::to_string(steps);
  return s;
}

bool ParseFitSpec(const std::string& spec, FitSpec* out) {
  const core::Spec p = core::ParseSpec(spec);
  if (p.args.empty() || p.args[0] != "fit") return false;
  const std::string expected =
      "learner spec '" + spec +
      "': expected gd:fit, gd:fit:STEPS (STEPS in 1..1000), sgd:fit or ridge:fit";
  FitSpec f;
  f.family = p.name;
  if (f.family == "gd" && p.args.size() == 2) {
    const auto steps = p.Integer(1, 1, 1000);
    if (!steps) throw core::InputError("compare", "learners", expected);
    f.steps = static_cast<int>(*steps);
  } else if (p.args.size() != 1 || (f.family != "gd" && f.family != "sgd" && f.family != "ridge")) {
    throw core::InputError("compare", "learners", expected);
  }
  // Step sizes from far below any useful one to past divergence for unit-variance inputs;
  // penalties from next to OLS to next to the zero predictor.
  f.lo = 1e-4;
  f.hi = f.family == "ridge" ? 1e4 : 1.0;
  if (out) *out = f;
  return true;
}

void CheckLearnerSpecs(const std::string& specs, const data::TaskConfig& task) {
  const std::vector<std::string> items = SplitSpecs(specs);
  std::string check;
  for (std::size_t i = 0; i < items.size(); ++i) {
    FitSpec f;
    check += (i ? "," : "") + (ParseFitSpec(items[i], &f) ? f.Spec(0.01) : items[i]);
  }
  learners::MakeLearners(check, task);
}

FamilyFit FitFamily(const FitSpec& spec, const data::PromptSet& set, const arma::mat& target,
                    const std::vector<int>& ks) {
  if (ks.empty() || target.n_rows != arma::uword(set.task.n) || target.n_cols != set.size())
    throw std::logic_error("compare: a fit needs predictions n x N and at least one k");
  const arma::uvec rows = arma::conv_to<arma::uvec>::from(ks);
  const int d = set.task.d;
  auto spd = [&](double log_value) {
    const auto l = learners::MakeLearner(spec.Spec(std::exp(log_value)), set.task);
    const double v = arma::mean(arma::vectorise(
                         arma::square(target.rows(rows) - Predictions(*l, set).rows(rows)))) /
                     d;
    return std::isfinite(v) ? v : arma::datum::inf;
  };
  // A grid of 8 points per decade, then golden-section search between the best point's
  // neighbours (the grid keeps the search off a local minimum between far-apart basins).
  const double a = std::log(spec.lo), b = std::log(spec.hi);
  const int points = 1 + static_cast<int>(std::ceil(8 * (b - a) / std::log(10.0)));
  arma::vec grid = arma::linspace(a, b, points), value(points);
  for (int i = 0; i < points; ++i)
    value(i) = spd(grid(i));
  const arma::uword best = value.index_min();
  double lo = grid(best > 0 ? best - 1 : 0), hi = grid(std::min<arma::uword>(best + 1, points - 1));
  const double g = (std::sqrt(5.0) - 1) / 2;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo), f1 = spd(x1), f2 = spd(x2);
  for (int it = 0; it < 40 && hi - lo > 1e-6; ++it) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1, x1 = hi - g * (hi - lo), f1 = spd(x1);
    } else {
      lo = x1, x1 = x2, f1 = f2, x2 = lo + g * (hi - lo), f2 = spd(x2);
    }
  }
  FamilyFit fit;
  const double x = f1 <= f2 ? x1 : x2, fx = std::min(f1, f2);
  // The refinement never ends worse than the grid's best point.
  if (fx <= value(best)) {
    fit.value = std::exp(x), fit.spd = fx;
  } else {
    fit.value = std::exp(grid(best)), fit.spd = value(best);
  }
  fit.at_bound = best == 0 || best + 1 == arma::uword(points);
  if (!std::isfinite(fit.spd))
    throw std::runtime_error("compare: every " + spec.family +
                             " learner of the search range diverges on these prompts");
  return fit;
}

LearnerUnderTest TransformerUnderTest(const std::string& name, const data::TaskConfig& task,
                                      learners::Transformer model) {
  LearnerUnderTest l;
  l.name = name;
  l.task = task;
  l.predict = [model](const data::PromptSet& set) mutable {
    return learners::TransformerPredictions(model, set);
  };
  l.query = [model](const data::PromptSet& set, std::size_t i, const arma::cube& q) mutable {
    return learners::QueryPredictionsAllK(model, set, i, q);  // one forward pass per context
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
  l.query = [learner](const data::PromptSet& set, std::size_t i, const arma::cube& q) {
    learners::LearnerRun run;
    learner->Run(set.x.slice(i), set.y.col(i), run);  // run.weights: d x n, after k = 0..n-1
    arma::mat out(q.n_cols, q.n_slices);
    for (arma::uword k = 0; k < q.n_slices; ++k)
      out.col(k) = q.slice(k).t() * run.weights.col(k);
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
  CheckLearnerSpecs(learner_specs, task);
}

CompareResult RunCompare(const std::vector<LearnerUnderTest>& models, const CompareRequest& req,
                         const std::function<void(long long, long long)>& progress) {
  if (models.empty()) throw core::InputError("compare", "", "no learner to compare");
  CompareResult out;
  out.d = models[0].task.d;
  out.n = models[0].task.n;
  CompareRequest checked = req;  // against the learners' own task
  checked.task = models[0].task;
  checked.Validate();
  for (const auto& m : models)
    if (m.task.d != out.d || m.task.n != out.n)
      throw core::InputError("compare", "",
                             "'" + m.name + "' reads d=" + std::to_string(m.task.d) +
                                 ", n=" + std::to_string(m.task.n) + " but '" + models[0].name +
                                 "' reads d=" + std::to_string(out.d) +
                                 ", n=" + std::to_string(out.n));
  // Fit specs are checked with a placeholder value and fitted per learner under test below.
  const std::vector<std::string> items = SplitSpecs(req.learner_specs);
  std::vector<FitSpec> fits(items.size());
  std::vector<bool> is_fit(items.size(), false);
  CheckLearnerSpecs(req.learner_specs, models[0].task);  // the first learner's task
  for (std::size_t i = 0; i < items.size(); ++i)
    is_fit[i] = ParseFitSpec(items[i], &fits[i]);
  const bool any_fit = std::find(is_fit.begin(), is_fit.end(), true) != is_fit.end();
  if (any_fit && req.all_pairs)
    throw core::InputError(
        "compare", "all_pairs",
        "all pairs compares reference learners with each other; a fitted learner "
        "(gd:fit, sgd:fit, ridge:fit) has a value only against a learner under test");
  if (any_fit && req.fit_prompts < 2)
    throw core::InputError("compare", "fit_prompts", "must be at least 2");
  const int d = out.d, n = out.n;
  out.prompts = req.prompts;
  out.fit_prompts = any_fit ? req.fit_prompts : 0;
  out.seed = req.seed;
  out.queries = req.queries == 0 ? 2 * (d + 1) : req.queries;
  out.contexts = std::min(req.ilwd_prompts, req.prompts);
  const int P = out.contexts, Q = out.queries;
  const long long total = static_cast<long long>(models.size()) * P;
  for (std::size_t c = 0; c < models.size(); ++c) {
    const auto& m = models[c];
    out.models.push_back(m.name);
    out.tasks.push_back(m.task);
    std::vector<int> ks;
    for (int k = 0; k < n; ++k)
      if (m.task.noise == 0 || (k != d && k != d + 1)) ks.push_back(k);
    // Fitted learners: on prompts after the scored ones (disjoint from them), each family's
    // hyperparameter closest to this model.
    std::string specs = req.learner_specs;
    std::vector<FamilyFit> fitted(items.size(), {arma::datum::nan, arma::datum::nan, false});
    if (any_fit) {
      const data::PromptSet fit_set =
          data::SamplePrompts(m.task, req.seed, req.prompts, req.fit_prompts);
      const arma::mat target = m.predict(fit_set);
      specs.clear();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (is_fit[i]) fitted[i] = FitFamily(fits[i], fit_set, target, ks);
        specs += (i ? "," : "") + (is_fit[i] ? fits[i].Spec(fitted[i].value) : items[i]);
      }
    }
    const References ref = MakeReferences(m.task, req, P, specs);
    const arma::mat pred = m.predict(ref.set);
    arma::cube w(d, n, P);
    arma::mat r2(n, P);
    for (int i = 0; i < P; ++i) {
      arma::cube q(d, Q, n);
      for (int k = 0; k < n; ++k)
        q.slice(k) = QueryPoints(d, Q, req.seed, std::uint64_t(i) * n + k);
      const arma::mat yhat = m.query(ref.set, i, q);
      for (int k = 0; k < n; ++k) {
        const auto fit = FitImplicitWeights(q.slice(k), yhat.col(k));
        w.slice(i).col(k) = fit.w;
        r2(k, i) = fit.r2;
      }
      if (progress) progress(static_cast<long long>(c) * P + i + 1, total);
    }
    out.implicit_r2.push_back(r2);
    out.summary_ks.push_back(ks);
    const arma::uvec rows = arma::conv_to<arma::uvec>::from(ks);
    for (std::size_t j = 0; j < ref.learners.size(); ++j) {
      const arma::mat per = arma::square(pred - ref.pred[j]) / d;  // n x N
      out.entries.push_back(
          {m.name, is_fit[j] ? items[j] : ref.learners[j]->spec(), Spd(pred, ref.pred[j], d),
           ref.learners[j]->is_linear() ? Ilwd(w, ref.w[j]) : arma::vec(),
           arma::mean(per.rows(rows), 0).t(), fitted[j].value, fitted[j].spd, fitted[j].at_bound});
    }
  }
  if (req.all_pairs) {
    const References ref = MakeReferences(models[0].task, req, P, req.learner_specs);
    const auto& L = ref.learners;
    for (std::size_t a = 0; a < L.size(); ++a)
      for (std::size_t b = a + 1; b < L.size(); ++b)
        out.entries.push_back(
            {L[a]->spec(), L[b]->spec(), Spd(ref.pred[a], ref.pred[b], d),
             L[a]->is_linear() && L[b]->is_linear() ? Ilwd(ref.w[a], ref.w[b]) : arma::vec(),
             arma::vec()});
    for (const auto& l : L)
      if (std::find(out.models.begin(), out.models.end(), l->spec()) == out.models.end())
        out.models.push_back(l->spec());
  }
  return out;
}

void WriteCompareCsv(std::ostream& os, const CompareResult& r) {
  os << "model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted\n";
  for (const auto& e : r.entries)
    for (arma::uword k = 0; k < e.spd.mean.n_elem; ++k)
      os << fmt::format("{},{},{},{:.9g},{:.9g},{:.9g},{},{}\n", e.model, e.learner, k,
                        e.spd.mean(k), e.spd.lo(k), e.spd.hi(k),
                        e.ilwd.is_empty() ? std::string() : fmt::format("{:.9g}", e.ilwd(k)),
                        std::isnan(e.fitted) ? std::string() : fmt::format("{:.9g}", e.fitted));
}

void WriteLinearityCsv(std::ostream& os, const CompareResult& r) {
  os << "model,k,r2,contexts\n";
  for (std::size_t c = 0; c < r.implicit_r2.size(); ++c)
    for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
      const arma::rowvec row = r.implicit_r2[c].row(k);
      const arma::uvec ok = arma::find_finite(row);
      os << fmt::format("{},{},{},{}\n", r.models[c], k,
                        ok.is_empty()
                            ? std::string()
                            : fmt::format("{:.9g}", arma::mean(arma::rowvec(row.cols(ok)))),
                        ok.n_elem);
    }
}

namespace {

// The closest reference learner by mean per-prompt summary SPD, and how much farther the
// runner-up is: the paired difference over prompts with a 95% bootstrap interval.
void PrintClosest(std::ostream& os, const std::vector<const CompareEntry*>& rows,
                  std::uint64_t seed) {
  std::vector<const CompareEntry*> ranked;
  for (const auto* e : rows)
    if (!e->spd_prompt.is_empty() && e->spd_prompt.is_finite()) ranked.push_back(e);
  if (ranked.size() < 2) return;
  std::sort(ranked.begin(), ranked.end(), [](const CompareEntry* a, const CompareEntry* b) {
    return arma::mean(a->spd_prompt) < arma::mean(b->spd_prompt);
  });
  auto name = [](const CompareEntry* e) {
    return std::isnan(e->fitted)
               ? e->learner
               : fmt::format("{} ({} {:.4g})", e->learner,
                             e->learner.rfind("ridge", 0) == 0 ? "lambda" : "alpha", e->fitted);
  };
  const arma::vec diff = ranked[1]->spd_prompt - ranked[0]->spd_prompt;
  const probes::Bootstrap boot(diff.n_elem, 1, probes::kDefaultReplicates, seed);
  const probes::Interval iv = probes::PercentileInterval(boot.Mean(0, diff));
  os << fmt::format(
      "closest (mean SPD / d over the summary k): {} {:.3e}; runner-up {}: {:+.2e} [{:+.2e}, "
      "{:+.2e}] farther ({})\n",
      name(ranked[0]), arma::mean(ranked[0]->spd_prompt), name(ranked[1]), arma::mean(diff), iv.lo,
      iv.hi, iv.lo > 0 ? "significant" : "within noise");
}

}  // namespace

void PrintCompareSummary(std::ostream& os, const CompareResult& r,
                         [[maybe_unused]] const std::string& specs) {
  const int d = r.d;
  os << fmt::format(
      "compare: d={} n={}, {} prompts (seed {}) of each checkpoint's task, ILWD on {} contexts x "
      "{} queries; values are divided by d\n",
      d, r.n, r.prompts, r.seed, r.contexts, r.queries);
  for (std::size_t c = 0; c < r.models.size(); ++c) {
    std::vector<const CompareEntry*> rows;
    for (const auto& e : r.entries)
      if (e.model == r.models[c]) rows.push_back(&e);
    if (rows.empty()) continue;
    std::array<std::vector<double>, 4> cols;
    for (const auto* e : rows) {
      cols[0].push_back(MeanRange(e->spd.mean, 0, d));
      cols[1].push_back(arma::mean(e->spd.mean));
      cols[2].push_back(MeanRange(e->ilwd, 0, d));
      cols[3].push_back(e->ilwd.is_empty() ? arma::datum::nan : arma::mean(e->ilwd));
    }
    std::array<double, 4> best;
    for (int j = 0; j < 4; ++j) {
      best[j] = arma::datum::inf;
      for (double v : cols[j])
        if (!std::isnan(v)) best[j] = std::min(best[j], v);
    }
    const std::string noise = c < r.tasks.size() ? fmt::format(" (noise {:g}, w_scale {:g})",
                                                               r.tasks[c].noise, r.tasks[c].w_scale)
                                                 : "";
    os << fmt::format("\n{}{} against:\n{:<16}{:>11}{:>11}{:>11}{:>11}\n", r.models[c], noise,
                      "learner", "SPD k<d", "SPD all k", "ILWD k<d", "ILWD all k");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      os << fmt::format("{:<16}", rows[i]->learner);
      for (int j = 0; j < 4; ++j)
        os << Cell(cols[j][i], cols[j][i] == best[j]);
      os << "\n";
    }
    for (const auto* e : rows)
      if (!std::isnan(e->fitted))
        os << fmt::format("{}: {} = {:.4g} (SPD / d {:.3e} on the {} fit prompts){}\n", e->learner,
                          e->learner.rfind("ridge", 0) == 0 ? "lambda" : "alpha", e->fitted,
                          e->fit_spd, r.fit_prompts,
                          e->fit_at_bound ? "; at an end of the search range: the family's "
                                            "closest member may lie beyond it"
                                          : "");
    PrintClosest(os, rows, r.seed);
    if (c < r.implicit_r2.size()) {
      os << "implicit linear fit R2 by k (mean over contexts):";
      for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
        const arma::rowvec row = r.implicit_r2[c].row(k);
        const arma::uvec ok = arma::find_finite(row);
        os << fmt::format(
            " {}", ok.is_empty() ? std::string("-")
                                 : fmt::format("{:.3f}", arma::mean(arma::rowvec(row.cols(ok)))));
      }
      os << "\n";
    }
  }
  os << "* = closest learner in that column\n";
  if (r.tasks.size() > 1) {
    // The paper's noisy-regime layout: rows = reference learners, columns = learners under
    // test, with the paired significance of each column's minimum.
    const PairedTable t = MakePairedTable(r);
    bool dropped = false;
    for (std::size_t c = 0; c < t.columns.size(); ++c)
      dropped = dropped || r.summary_ks[c].size() < std::size_t(r.n);
    os << fmt::format(
        "\nmean SPD / d over k{} (rows: learners, columns: checkpoints; * = column minimum whose "
        "paired 95% interval against the runner-up excludes 0, ~ = a minimum that does not)\n"
        "{:<16}",
        dropped ? ", k = d and d+1 left out for noisy columns (OLS's SPD has no finite mean there)"
                : "",
        "");
    for (const auto& c : t.columns)
      os << fmt::format("{:>24}", c.substr(0, 23));
    os << "\n";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      os << fmt::format("{:<16}", t.rows[i].substr(0, 15));
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const PairedCell& x = t.cells[i][c];
        os << fmt::format("{:>23.3e}{}", x.mean, x.minimum ? (x.significant ? '*' : '~') : ' ');
      }
      os << "\n";
    }
    os << fmt::format(
        "\npaired difference from the diagonal learner (ridge with lambda = the column's "
        "sigma^2/tau^2), mean [95% bootstrap interval over the {} prompts]\n{:<16}",
        r.prompts, "");
    for (std::size_t c = 0; c < t.columns.size(); ++c)
      os << fmt::format(
          "{:>34}",
          (t.columns[c] + " vs " + (t.diagonal[c].empty() ? "-" : t.diagonal[c])).substr(0, 33));
    os << "\n";
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      os << fmt::format("{:<16}", t.rows[i].substr(0, 15));
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        const PairedCell& x = t.cells[i][c];
        os << (std::isnan(x.diff) ? fmt::format("{:>34}", "-")
                                  : fmt::format("{:>34}", fmt::format("{:+.2e} [{:+.2e}, {:+.2e}]",
                                                                      x.diff, x.lo, x.hi)));
      }
      os << "\n";
    }
  }
}

namespace {

// The ridge penalty a reference spec stands for on `task`, or NaN when it is no ridge learner.
double RidgeLambdaOf(const std::string& spec, const data::TaskConfig& task) {
  if (spec == "ols") return 0.0;
  if (spec == "bayes") return task.BayesLambda();
  const core::Spec p = core::ParseSpec(spec);
  if (p.name == "ridge" && p.args.size() == 1)
    if (const auto lambda = p.Number(0)) return *lambda;
  return arma::datum::nan;
}

}  // namespace

PairedTable MakePairedTable(const CompareResult& r, int replicates) {
  PairedTable t;
  t.replicates = replicates;
  const std::size_t C = r.tasks.size();
  for (std::size_t c = 0; c < C; ++c)
    t.columns.push_back(r.models[c]);
  for (const auto& e : r.entries)
    if (e.model == r.models[0]) t.rows.push_back(e.learner);
  t.cells.assign(t.rows.size(), std::vector<PairedCell>(C));
  const probes::Bootstrap boot(r.prompts, 1, replicates, r.seed);
  for (std::size_t c = 0; c < C; ++c) {
    std::vector<const CompareEntry*> col(t.rows.size(), nullptr);
    for (const auto& e : r.entries)
      if (e.model == r.models[c])
        for (std::size_t i = 0; i < t.rows.size(); ++i)
          if (e.learner == t.rows[i]) col[i] = &e;
    // The diagonal: the ridge whose lambda matches this column's noise (relative 1e-6, as
    // printed specs round lambda), preferring `bayes`.
    const double want = r.tasks[c].BayesLambda();
    int diag = -1;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const double l = RidgeLambdaOf(t.rows[i], r.tasks[c]);
      if (!std::isnan(l) && std::abs(l - want) <= 1e-6 * std::max(want, 1e-12) &&
          (diag < 0 || t.rows[i] == "bayes"))
        diag = static_cast<int>(i);
    }
    t.diagonal.push_back(diag < 0 ? "" : t.rows[diag]);
    std::vector<std::pair<double, std::size_t>> order;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      PairedCell& x = t.cells[i][c];
      x.mean = arma::mean(col[i]->spd_prompt);
      x.diff = x.lo = x.hi = arma::datum::nan;
      if (diag >= 0) {
        const arma::vec delta = col[i]->spd_prompt - col[diag]->spd_prompt;
        const probes::Interval ci = probes::PercentileInterval(boot.Mean(0, delta));
        x.diff = arma::mean(delta), x.lo = ci.lo, x.hi = ci.hi;
      }
      order.emplace_back(x.mean, i);
    }
    std::sort(order.begin(), order.end());
    if (order.empty()) continue;
    PairedCell& best = t.cells[order[0].second][c];
    best.minimum = true;
    if (order.size() > 1) {
      const arma::vec gap = col[order[1].second]->spd_prompt - col[order[0].second]->spd_prompt;
      best.significant = probes::PercentileInterval(boot.Mean(0, gap)).lo > 0;
    }
  }
  return t;
}

void WritePairedCsv(std::ostream& os, const PairedTable& t) {
  os << "model,learner,spd_summary,diagonal,diff,diff_lo,diff_hi,minimum,significant\n";
  for (std::size_t c = 0; c < t.columns.size(); ++c)
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const PairedCell& x = t.cells[i][c];
      os << fmt::format("{},{},{:.9g},{},{:.9g},{:.9g},{:.9g},{},{}\n", t.columns[c], t.rows[i],
                        x.mean, t.diagonal[c], x.diff, x.lo, x.hi, int(x.minimum),
                        int(x.significant));
    }
}

}  // namespace icl::analysis
