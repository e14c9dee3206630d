// What compare reports: the console summary, the tidy CSVs and the paired table of reference
// learners against learners under test.
#include "analysis/compare_run.hpp"
#include "probes/uncertainty.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/names.hpp"
#include "core/spec.hpp"

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

// What the fitted hyperparameter of a fit spec is called (FitSpec::ValueName).
std::string ValueNameOf(const std::string& fit_spec) {
  FitSpec f;
  return ParseFitSpec(fit_spec, &f) ? f.ValueName() : "value";
}

}  // namespace

void WriteCompareCsv(std::ostream& os, const CompareResult& r) {
  os << "model,learner,k,spd,spd_lo,spd_hi,ilwd,fitted,fitted_steps\n";
  for (const auto& e : r.entries)
    for (arma::uword k = 0; k < e.spd.mean.n_elem; ++k)
      os << fmt::format("{},{},{},{:.9g},{:.9g},{:.9g},{},{},{}\n", core::CsvField(e.model),
                        e.learner, k, e.spd.mean(k), e.spd.lo(k), e.spd.hi(k),
                        e.ilwd.is_empty() ? std::string() : fmt::format("{:.9g}", e.ilwd(k)),
                        std::isnan(e.fitted) ? std::string() : fmt::format("{:.9g}", e.fitted),
                        e.fitted_steps > 0 ? std::to_string(e.fitted_steps) : std::string());
}

void WriteLinearityCsv(std::ostream& os, const CompareResult& r) {
  os << "model,k,r2,contexts\n";
  for (std::size_t c = 0; c < r.implicit_r2.size(); ++c)
    for (arma::uword k = 0; k < r.implicit_r2[c].n_rows; ++k) {
      const arma::rowvec row = r.implicit_r2[c].row(k);
      const arma::uvec ok = arma::find_finite(row);
      os << fmt::format("{},{},{},{}\n", core::CsvField(r.models[c]), k,
                        ok.is_empty()
                            ? std::string()
                            : fmt::format("{:.9g}", arma::mean(arma::rowvec(row.cols(ok)))),
                        ok.n_elem);
    }
}

std::string FittedName(const CompareEntry& e) {
  FitSpec f;
  if (std::isnan(e.fitted) || !ParseFitSpec(e.learner, &f)) return e.learner;
  return f.steps_hi > f.steps_lo
             ? fmt::format("{} ({} {:.4g}, {} step{})", e.learner, f.ValueName(), e.fitted,
                           e.fitted_steps, e.fitted_steps == 1 ? "" : "s")
             : fmt::format("{} ({} {:.4g})", e.learner, f.ValueName(), e.fitted);
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
  auto name = [](const CompareEntry* e) { return FittedName(*e); };
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
    const std::string noise =
        c < r.tasks.size()
            ? fmt::format(
                  " (noise {:g}, w_scale {:g}{}{})", r.tasks[c].noise, r.tasks[c].w_scale,
                  r.tasks[c].context_shift.IsIdentity()
                      ? ""
                      : ", context shift " + r.tasks[c].context_shift.Spec(),
                  r.tasks[c].HasQueries() ? ", query shift " + r.tasks[c].query_shift.Spec() : "")
            : "";
    // Which family the prompts come from, and the learner's own when they differ (fresh tasks
    // for a pool-trained learner: dmmse is then the posterior over its training pool).
    std::string family;
    if (c < r.tasks.size()) {
      const data::TaskFamily& on = r.tasks[c].family;
      if (on.kind != data::TaskFamily::Kind::kGaussian) family = ", task family " + on.Spec();
      if (c < r.trained.size() && !(r.trained[c].family == on))
        family += fmt::format(", prompts of {} for a learner trained on {}", on.Spec(),
                              r.trained[c].family.Spec());
    }
    os << fmt::format("\n{}{}{} against:\n{:<16}{:>11}{:>11}{:>11}{:>11}\n", r.models[c], noise,
                      family, "learner", "SPD k<d", "SPD all k", "ILWD k<d", "ILWD all k");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      os << fmt::format("{:<16}", rows[i]->learner);
      for (int j = 0; j < 4; ++j)
        os << Cell(cols[j][i], cols[j][i] == best[j]);
      os << "\n";
    }
    for (const auto* e : rows)
      if (!std::isnan(e->fitted))
        os << fmt::format("{}: {} = {:.4g}{} (SPD / d {:.3e} on the {} fit prompts){}\n",
                          e->learner, ValueNameOf(e->learner), e->fitted,
                          e->fitted_steps > 0 ? fmt::format(", {} steps", e->fitted_steps) : "",
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
    os << fmt::format(
        "\nmean SPD / d over the window k != d, d+1 (rows: learners, columns: checkpoints; * = "
        "column minimum whose paired 95% interval against the runner-up excludes 0, ~ = a "
        "minimum that does not)\n{:<16}",
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
      os << fmt::format("{},{},{:.9g},{},{:.9g},{:.9g},{:.9g},{},{}\n",
                        core::CsvField(t.columns[c]), t.rows[i], x.mean, t.diagonal[c], x.diff,
                        x.lo, x.hi, int(x.minimum), int(x.significant));
    }
}

}  // namespace icl::analysis
