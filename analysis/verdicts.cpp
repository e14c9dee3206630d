// Per-k and window verdicts over the seeds of a cell, and the cell's SPD curves.
#include "analysis/verdicts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "core/errors.hpp"
#include "core/names.hpp"
#include "core/stats.hpp"
#include "probes/uncertainty.hpp"

namespace icl::analysis {

namespace {

// The entries of one cell: [learner][seed], learners in the order of the first seed's rows.
struct CellRows {
  std::vector<std::string> learners;
  std::vector<std::vector<const CompareEntry*>> rows;
};

CellRows RowsOf(const CompareResult& r, const Cell& cell) {
  CellRows out;
  for (const auto& e : r.entries)
    if (e.model == cell.models[0]) out.learners.push_back(e.learner);
  out.rows.assign(out.learners.size(), std::vector<const CompareEntry*>(cell.models.size()));
  for (std::size_t s = 0; s < cell.models.size(); ++s)
    for (const auto& e : r.entries)
      if (e.model == cell.models[s])
        for (std::size_t i = 0; i < out.learners.size(); ++i)
          if (e.learner == out.learners[i]) out.rows[i][s] = &e;
  for (std::size_t i = 0; i < out.learners.size(); ++i)
    for (std::size_t s = 0; s < cell.models.size(); ++s)
      if (!out.rows[i][s] || out.rows[i][s]->spd_per_prompt.is_empty())
        throw core::InputError("compare", "cells",
                               "cell '" + cell.name + "': '" + cell.models[s] +
                                   "' has no comparison with " + out.learners[i]);
  return out;
}

// Per-prompt values (N x S) of one learner at k (or the window, k < 0).
arma::mat Values(const std::vector<const CompareEntry*>& seeds, int k) {
  arma::mat v(seeds[0]->spd_prompt.n_elem, seeds.size());
  for (std::size_t s = 0; s < seeds.size(); ++s)
    v.col(s) = k < 0 ? seeds[s]->spd_prompt : arma::vec(seeds[s]->spd_per_prompt.row(k).t());
  return v;
}

// The ratio of B's SPD to A's (the mean over seeds and prompts of each), its 95% interval and
// each seed's own ratio. Three or more seeds: the two-stage bootstrap `boot`, the same
// resamples for both learners. One or two: the seeds' prompts pooled and resampled alone.
struct Ratio {
  double value = arma::datum::nan;
  probes::Interval iv;
  std::vector<double> per_seed;
  bool Separates() const {
    if (!(value >= kSeparationRatio && iv.lo > 1)) return false;
    for (double r : per_seed)
      if (!(r > 1)) return false;
    return true;
  }
};

Ratio RatioOf(const arma::mat& b, const arma::mat& a, const probes::Bootstrap& boot) {
  Ratio r;
  r.value = arma::mean(arma::vectorise(b)) / arma::mean(arma::vectorise(a));
  for (arma::uword s = 0; s < a.n_cols; ++s)
    r.per_seed.push_back(arma::mean(b.col(s)) / arma::mean(a.col(s)));
  arma::mat reps;  // replicates x 2: the means of B and of A on the same resamples
  if (a.n_cols >= 3) {
    std::vector<arma::mat> per;
    for (arma::uword s = 0; s < a.n_cols; ++s)
      per.push_back(arma::join_rows(b.col(s), a.col(s)));
    reps = boot.MeanOverSeeds(per);
  } else {
    const probes::Bootstrap pooled(a.n_elem, 1, boot.replicates(), 0x5e9a7a7e + a.n_cols);
    reps = pooled.MeanOverSeeds(
        std::vector<arma::mat>{arma::join_rows(arma::vectorise(b), arma::vectorise(a))});
  }
  r.iv = probes::PercentileInterval(reps.col(0) / reps.col(1));
  return r;
}

// Fills v's separation fields: A is `order[0]`; B is the nearest learner not nested with A
// (Nested), which decides the verdict; every learner that fails the rule against A joins
// `among`, nested or not.
void Separate(const CellRows& rows, const std::vector<arma::mat>& values,
              const std::vector<std::pair<double, std::size_t>>& order,
              const probes::Bootstrap& boot, Verdict& v) {
  const std::size_t a = order[0].second;
  const int seeds = static_cast<int>(values[a].n_cols);
  v.basis = seeds >= 3 ? "seeds" : seeds == 2 ? "two seeds" : "one seed";
  v.among = {rows.learners[a]};
  bool first = true;
  for (std::size_t o = 1; o < order.size(); ++o) {
    const std::size_t i = order[o].second;
    const Ratio r = RatioOf(values[i], values[a], boot);
    if (Nested(rows.learners[a], rows.learners[i])) {
      // A nested learner cannot decide the verdict; it is listed with A when the rule does
      // not separate it (an OLS-like learner ties OLS and the fitted families).
      if (!r.Separates()) v.among.push_back(rows.learners[i]);
      continue;
    }
    if (first) {
      first = false;
      v.separated_from = rows.learners[i];
      v.ratio = r.value, v.ratio_lo = r.iv.lo, v.ratio_hi = r.iv.hi;
      v.seed_ratios = r.per_seed;
      v.resolved = r.Separates();
    }
    if (!r.Separates()) v.among.push_back(rows.learners[i]);
  }
  // Resolved means separated from the nearest outside learner and so from every farther one;
  // a farther learner that fails the rule (its interval reaches 1) leaves it unresolved.
  if (v.among.size() > 1 && v.resolved) {
    for (std::size_t o = 1; o < v.among.size(); ++o)
      if (!Nested(rows.learners[a], v.among[o])) v.resolved = false;
  }
}

Verdict Judge(const Cell& cell, const CellRows& rows, int k, const probes::Bootstrap& boot) {
  Verdict v;
  v.cell = cell.name;
  v.k = k;
  v.seeds = static_cast<int>(cell.models.size());
  std::vector<std::pair<double, std::size_t>> order;
  std::vector<arma::mat> values(rows.learners.size());
  for (std::size_t i = 0; i < rows.learners.size(); ++i) {
    values[i] = Values(rows.rows[i], k);
    if (values[i].is_finite()) order.emplace_back(arma::mean(arma::vectorise(values[i])), i);
  }
  std::sort(order.begin(), order.end());
  if (order.empty()) return v;
  const std::size_t best = order[0].second;
  v.closest = rows.learners[best];
  v.closest_spd = order[0].first;
  v.stable = true;
  for (std::size_t s = 0; s < cell.models.size(); ++s) {
    std::size_t own = best;
    double own_spd = arma::datum::inf;
    for (const auto& [mean, i] : order) {
      const double m = arma::mean(values[i].col(s));
      if (m < own_spd) own_spd = m, own = i;
    }
    v.per_seed.push_back(rows.learners[own]);
    v.stable = v.stable && own == best;
  }
  if (order.size() < 2) return v;
  const std::size_t second = order[1].second;
  v.runner_up = rows.learners[second];
  v.runner_up_spd = order[1].first;
  const arma::mat gap = values[second] - values[best];
  const probes::Interval iv = probes::PercentileInterval(boot.MeanOverSeeds(gap));
  v.margin = arma::mean(arma::vectorise(gap)), v.lo = iv.lo, v.hi = iv.hi;
  v.significant = iv.lo > 0;
  Separate(rows, values, order, boot, v);
  return v;
}

// The fitted parameters of a cell's families that reach OLS (FittedParameter).
std::vector<FittedParameter> FittedOf(const Cell& cell, const CellRows& rows) {
  std::vector<FittedParameter> out;
  for (std::size_t i = 0; i < rows.learners.size(); ++i) {
    FitSpec f;
    if (!ParseFitSpec(rows.learners[i], &f) || (f.family != "ridge" && f.family != "newton"))
      continue;
    FittedParameter p;
    p.cell = cell.name, p.learner = rows.learners[i], p.name = f.ValueName();
    p.seeds = static_cast<int>(rows.rows[i].size());
    p.basis = p.seeds >= 3 ? "seeds" : p.seeds == 2 ? "two seeds" : "one seed";
    arma::vec logs(p.seeds);
    p.ols_like = true;
    p.member_ols_spd = 0, p.learner_member_spd = arma::datum::inf;
    for (int s = 0; s < p.seeds; ++s) {
      const CompareEntry& e = *rows.rows[i][s];
      p.per_seed.push_back(e.fitted);
      if (f.family == "newton") p.steps.push_back(e.fitted_steps);
      logs(s) = std::log(e.fitted);
      const double own = arma::mean(e.spd_prompt);
      p.member_ols_spd = std::max(p.member_ols_spd, e.member_ols_spd);
      p.learner_member_spd = std::min(p.learner_member_spd, own);
      // NaN (a file without the field, a member that failed) is not OLS-like.
      if (!(e.member_ols_spd <= own)) p.ols_like = false;
    }
    if (!logs.is_finite()) {
      p.ols_like = false;
      out.push_back(std::move(p));
      continue;
    }
    p.center = std::exp(arma::mean(logs));
    if (p.seeds >= 3) {
      const double half =
          core::StudentT975(p.seeds - 1) * arma::stddev(logs) / std::sqrt(double(p.seeds));
      p.lo = std::exp(arma::mean(logs) - half), p.hi = std::exp(arma::mean(logs) + half);
    } else {
      p.lo = std::exp(logs.min()), p.hi = std::exp(logs.max());
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

bool Nested(const std::string& a, const std::string& b) {
  if (a == b) return true;
  // OLS and the two fitted families that reach it (ridge as lambda -> 0, Newton as its steps
  // grow): each contains OLS, so near-ties among them are what an OLS-like learner produces.
  auto ols_like = [](const std::string& s) {
    return s == "ols" || s == "ridge:fit" || s.rfind("newton:fit", 0) == 0;
  };
  if (ols_like(a) && ols_like(b)) return true;
  // A fitted gradient-descent family and a fixed member of it (gd:fit... and gd:ALPHA...,
  // sgd:fit and sgd:ALPHA). A fixed ridge or Newton stays a candidate of its own against the
  // OLS-like family: the fitted lambda or steps say which it is.
  auto base = [](const std::string& s) { return s.substr(0, s.find(':')); };
  auto fitted = [](const std::string& s) { return s.find(":fit") != std::string::npos; };
  return base(a) == base(b) && (base(a) == "gd" || base(a) == "sgd") && fitted(a) != fitted(b);
}

std::vector<Cell> SingleCells(const CompareResult& r) {
  std::vector<Cell> cells;
  for (std::size_t c = 0; c < r.tasks.size(); ++c)
    cells.push_back({r.models[c], {r.models[c]}});
  return cells;
}

CellAnalysis AnalyseCells(const CompareResult& r, const std::vector<Cell>& cells, int replicates) {
  CellAnalysis out;
  out.window = SummaryWindow(r.d, r.n);
  out.replicates = replicates;
  std::map<std::string, std::string> owner;  // model -> its cell
  for (const Cell& cell : cells) {
    if (cell.models.empty())
      throw core::InputError("compare", "cells", "cell '" + cell.name + "' has no learner");
    std::string task;
    for (const std::string& m : cell.models) {
      const auto it = std::find(r.models.begin(), r.models.end(), m);
      const std::size_t c = static_cast<std::size_t>(it - r.models.begin());
      if (it == r.models.end() || c >= r.tasks.size())
        throw core::InputError("compare", "cells",
                               "cell '" + cell.name + "': no learner under test named '" + m + "'");
      if (!owner.emplace(m, cell.name).second)
        throw core::InputError(
            "compare", "cells",
            "'" + m + "' is in cell '" + owner[m] + "' and in '" + cell.name + "'");
      const std::string t = r.tasks[c].ToJson();
      if (task.empty()) task = t;
      if (t != task)
        throw core::InputError("compare", "cells",
                               "cell '" + cell.name +
                                   "' mixes learners compared on different "
                                   "tasks ('" +
                                   cell.models[0] + "' and '" + m +
                                   "'); a seed interval needs one cell's seeds only");
    }
  }
  for (std::size_t ci = 0; ci < cells.size(); ++ci) {
    const Cell& cell = cells[ci];
    const CellRows rows = RowsOf(r, cell);
    for (FittedParameter& p : FittedOf(cell, rows))
      out.fitted.push_back(std::move(p));
    const probes::Bootstrap boot(r.prompts, static_cast<int>(cell.models.size()), replicates,
                                 r.seed + 7 * ci);
    for (int k = 0; k < r.n; ++k)
      out.verdicts.push_back(Judge(cell, rows, k, boot));
    out.verdicts.push_back(Judge(cell, rows, -1, boot));
    for (auto v = out.verdicts.end() - (r.n + 1); v != out.verdicts.end(); ++v)
      v->budget_curve = cell.budget_curve;
    for (std::size_t i = 0; i < rows.learners.size(); ++i) {
      CellCurve c{cell.name,      rows.learners[i], static_cast<int>(cell.models.size()),
                  arma::vec(r.n), arma::vec(r.n),   arma::vec(r.n)};
      for (int k = 0; k < r.n; ++k) {
        const arma::mat v = Values(rows.rows[i], k);
        c.mean(k) = arma::mean(arma::vectorise(v));
        const probes::Interval iv = probes::PercentileInterval(boot.MeanOverSeeds(v));
        c.lo(k) = iv.lo, c.hi(k) = iv.hi;
      }
      out.curves.push_back(std::move(c));
    }
  }
  return out;
}

void WriteVerdictsCsv(std::ostream& os, const CellAnalysis& a) {
  os << "cell,scope,k,seeds,closest,closest_spd,runner_up,runner_up_spd,margin,margin_lo,"
        "margin_hi,significant,stable,per_seed,budget_curve,separated_from,ratio,ratio_lo,ratio_hi,"
        "seed_ratios,resolved,among,basis\n";
  for (const Verdict& v : a.verdicts) {
    std::string per, among, ratios;
    for (const auto& s : v.per_seed)
      per += (per.empty() ? "" : ";") + s;
    for (const auto& s : v.among)
      among += (among.empty() ? "" : ";") + s;
    for (double r : v.seed_ratios)
      ratios += fmt::format("{}{:.6g}", ratios.empty() ? "" : ";", r);
    os << fmt::format("{},{},{},{},{},{:.9g},{},{:.9g},{:.9g},{:.9g},{:.9g},{},{},{},{},",
                      core::CsvField(v.cell), v.k < 0 ? "window" : "k",
                      v.k < 0 ? std::string() : std::to_string(v.k), v.seeds, v.closest,
                      v.closest_spd, v.runner_up, v.runner_up_spd, v.margin, v.lo, v.hi,
                      int(v.significant), int(v.stable), core::CsvField(per), v.budget_curve);
    os << fmt::format("{},{:.6g},{:.6g},{:.6g},{},{},{},{}\n", v.separated_from, v.ratio,
                      v.ratio_lo, v.ratio_hi, core::CsvField(ratios), int(v.resolved),
                      core::CsvField(among), v.basis);
  }
}

void WriteFittedCsv(std::ostream& os, const CellAnalysis& a) {
  os << "cell,learner,parameter,seeds,per_seed,steps,center,lo,hi,basis,member_ols_spd,"
        "learner_member_spd,ols_like\n";
  for (const FittedParameter& p : a.fitted) {
    std::string values, steps;
    for (double v : p.per_seed)
      values += fmt::format("{}{:.6g}", values.empty() ? "" : ";", v);
    for (int t : p.steps)
      steps += fmt::format("{}{}", steps.empty() ? "" : ";", t);
    os << fmt::format("{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6g},{}\n",
                      core::CsvField(p.cell), p.learner, p.name, p.seeds, core::CsvField(values),
                      core::CsvField(steps), p.center, p.lo, p.hi, p.basis, p.member_ols_spd,
                      p.learner_member_spd, int(p.ols_like));
  }
}

void WriteCellCurvesCsv(std::ostream& os, const CellAnalysis& a) {
  os << "cell,learner,k,seeds,spd,spd_lo,spd_hi\n";
  for (const CellCurve& c : a.curves)
    for (arma::uword k = 0; k < c.mean.n_elem; ++k)
      os << fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g}\n", core::CsvField(c.cell), c.learner, k,
                        c.seeds, c.mean(k), c.lo(k), c.hi(k));
}

namespace {

std::string Joined(const std::vector<std::string>& xs, std::size_t from = 0) {
  std::string s;
  for (std::size_t i = from; i < xs.size(); ++i)
    s += (s.empty() ? "" : ", ") + xs[i];
  return s;
}

// The separation rule's verdict: "follows A, not B: ratio R [lo, hi]" or "unresolved among {A,
// B, ...}", with the basis when it is not three seeds or more.
std::string RuleText(const Verdict& v) {
  if (v.separated_from.empty())
    return v.among.size() > 1 ? "unresolved among {" + Joined(v.among) + "} (nested families)"
                              : "no other learner to separate from";
  const std::string ratio =
      fmt::format("{} / {} SPD ratio {:.3g} [{:.3g}, {:.3g}]", v.separated_from, v.closest, v.ratio,
                  v.ratio_lo, v.ratio_hi);
  std::string s;
  if (v.resolved) {
    s = "follows " + v.closest;
    if (v.among.size() > 1) s += " (or its nested {" + Joined(v.among, 1) + "})";
    s += ", not " + v.separated_from + ": " + ratio;
  } else {
    s = "unresolved among {" + Joined(v.among) + "}: " + ratio;
  }
  if (v.basis != "seeds") s += " (" + v.basis + ")";
  return s;
}

std::string VerdictText(const Verdict& v) {
  if (v.closest.empty()) return "no learner with finite SPD";
  std::string s = RuleText(v) + fmt::format("; closest {} {:.3e}", v.closest, v.closest_spd);
  if (!v.runner_up.empty())
    s += fmt::format("; {} {:+.2e} [{:+.2e}, {:+.2e}] farther ({})", v.runner_up, v.margin, v.lo,
                     v.hi,
                     v.significant                             ? "significant"
                     : v.margin == 0 && v.lo == 0 && v.hi == 0 ? "a tie: the same predictions"
                                                               : "within noise");
  if (v.seeds > 1)
    s += v.stable ? fmt::format("; stable: all {} seeds agree", v.seeds)
                  : "; not stable: seeds' closest " + [&] {
                      std::string p;
                      for (const auto& x : v.per_seed)
                        p += (p.empty() ? "" : ", ") + x;
                      return p;
                    }();
  return s;
}

// "fitted ridge:fit: lambda 0.0091 [0.0035, 0.024] over 3 seeds (...): OLS-like".
std::string FittedText(const FittedParameter& p) {
  std::string s =
      fmt::format("fitted {}: {} {:.3g} [{:.3g}, {:.3g}]", p.learner, p.name, p.center, p.lo, p.hi);
  s += p.basis == "seeds" ? fmt::format(" (geometric mean over {} seeds, 95% t interval on log {})",
                                        p.seeds, p.name)
                          : " (" + p.basis + ": the seeds' smallest and largest)";
  if (!p.steps.empty()) {
    const auto [lo, hi] = std::minmax_element(p.steps.begin(), p.steps.end());
    s += *lo == *hi ? fmt::format(", {} steps", *lo) : fmt::format(", {} to {} steps", *lo, *hi);
  }
  if (!std::isfinite(p.member_ols_spd)) return s + "; its distance from OLS is not known";
  s += fmt::format(
      "; fitted member against OLS at most {:.2e}, learner against its member at least "
      "{:.2e} (SPD / d over the window): ",
      p.member_ols_spd, p.learner_member_spd);
  return s + (p.ols_like ? "OLS-like (the fit's departure from OLS is below the learner's "
                           "residual in every seed)"
                         : "not OLS-like (some seed's member lies farther from OLS than the "
                           "learner from it)");
}

std::string WindowText(const std::vector<int>& window) {
  std::string s;
  for (std::size_t i = 0; i < window.size();) {
    std::size_t j = i;
    while (j + 1 < window.size() && window[j + 1] == window[j] + 1)
      ++j;
    s += (s.empty() ? "" : ",") +
         (j == i ? std::to_string(window[i]) : fmt::format("{}-{}", window[i], window[j]));
    i = j + 1;
  }
  return s;
}

}  // namespace

void PrintVerdicts(std::ostream& os, const CellAnalysis& a) {
  std::string last;
  for (const Verdict& v : a.verdicts) {
    if (v.cell != last) {
      last = v.cell;
      os << fmt::format(
          "\nverdicts for {} ({} seed{}, excess-error curve over the budgets: {}; intervals: 95%, "
          "bootstrap over "
          "{}prompts; margin = runner-up - closest, SPD / d)\n",
          v.cell, v.seeds, v.seeds == 1 ? "" : "s", v.budget_curve,
          v.seeds > 1 ? "seeds, then " : "");
      for (const FittedParameter& p : a.fitted)
        if (p.cell == v.cell) os << "  " << FittedText(p) << "\n";
    }
    if (v.k < 0)
      os << fmt::format("  window k in {{{}}}: {}\n", WindowText(a.window), VerdictText(v));
    else
      os << fmt::format("  k={:<3} {}\n", v.k, VerdictText(v));
  }
}

std::vector<BudgetAgreement> CompareWithShorterBudgets(
    const CellAnalysis& a, const std::vector<std::pair<std::string, std::string>>& pairs) {
  // Verdicts of one cell by k (-1: the window).
  auto of = [&](const std::string& cell) {
    std::map<int, const Verdict*> m;
    for (const Verdict& v : a.verdicts)
      if (v.cell == cell) m[v.k] = &v;
    if (m.empty()) throw std::invalid_argument("verdicts: no cell '" + cell + "' was analysed");
    return m;
  };
  std::vector<BudgetAgreement> out;
  for (const auto& [cell, half] : pairs) {
    const auto full = of(cell), short_run = of(half);
    BudgetAgreement h;
    h.cell = cell;
    h.short_cell = half;
    for (const auto& [k, v] : full) {
      const auto it = short_run.find(k);
      if (it == short_run.end()) continue;
      const Verdict& w = *it->second;
      if (k < 0) {
        h.closest = v->closest;
        h.short_closest = w.closest;
        h.significant = v->significant;
        h.short_significant = w.significant;
        h.changes_with_training = !v->closest.empty() && !w.closest.empty() &&
                                  !Nested(v->closest, w.closest) && (v->resolved || w.resolved);
        continue;
      }
      if (v->closest.empty() || w.closest.empty()) continue;
      ++h.ks;
      if (v->closest != w.closest) {
        h.differ.push_back(k);
        if (v->significant && w.significant) h.differ_significant.push_back(k);
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

void PrintBudgetAgreement(std::ostream& os, const std::vector<BudgetAgreement>& h) {
  auto list = [](const std::vector<int>& ks) {
    std::string s;
    for (int k : ks)
      s += (s.empty() ? "" : ",") + std::to_string(k);
    return s;
  };
  auto verdict = [](const std::string& closest, bool significant) {
    return closest.empty() ? std::string("no learner")
                           : closest + (significant ? " (significant)" : " (within noise)");
  };
  for (const BudgetAgreement& x : h) {
    os << fmt::format(
        "\nverdict at a shorter budget, {} against {}: over the window {} at {}, {} for the "
        "cell: {}; per k the same closest learner at {} of {} k",
        x.short_cell, x.cell, verdict(x.short_closest, x.short_significant), x.short_cell,
        verdict(x.closest, x.significant), x.closest == x.short_closest ? "the same" : "different",
        x.ks - static_cast<int>(x.differ.size()), x.ks);
    if (!x.differ.empty())
      os << fmt::format(
          " (differs at k = {}; both verdicts significant at {})", list(x.differ),
          x.differ_significant.empty() ? "none of them" : "k = " + list(x.differ_significant));
    if (x.changes_with_training) os << "; changes with training";
    os << "\n";
  }
}

PlotFiles PlanCellPlots(const CellAnalysis& a) {
  PlotFiles files;
  const auto q = GnuplotQuote;
  std::string& gp = files.data["plots.gp"];  // the script WritePlots runs
  gp = "# gnuplot script written by iclprobe compare; rerun with: gnuplot plots.gp\n"
       "set datafile separator ','\nset key outside right top noenhanced\nset grid\n"
       "set logscale y\nset format y '10^{%L}'\n";
  std::vector<std::string> cells;
  for (const CellCurve& c : a.curves)
    if (std::find(cells.begin(), cells.end(), c.cell) == cells.end()) cells.push_back(c.cell);
  for (std::size_t ci = 0; ci < cells.size(); ++ci) {
    const std::string stem = fmt::format("spd_cell{}", ci);
    std::string dat = "k,spd,spd_lo,spd_hi\n", plot;
    int block = 0, seeds = 0;
    for (const CellCurve& c : a.curves) {
      if (c.cell != cells[ci]) continue;
      seeds = c.seeds;
      // Blocks separated by two blank lines: gnuplot's `index`. Values at or below 0 have no
      // place on a log axis and are left out of the figure (the CSVs keep them).
      if (block) dat += "\n\n";
      for (arma::uword k = 0; k < c.mean.n_elem; ++k)
        if (c.mean(k) > 0 && c.lo(k) > 0)
          dat += fmt::format("{},{:.6g},{:.6g},{:.6g}\n", k, c.mean(k), c.lo(k), c.hi(k));
      plot += fmt::format("{}{} index {} using 1:2:3:4 with yerrorlines lw 2 title {}",
                          block ? ", " : "plot ", q(stem + ".csv"), block, q(c.learner));
      ++block;
    }
    files.data[stem + ".csv"] = dat;
    // The caption: the separation rule's verdict over the window, its ratio and interval, and
    // what the cell's excess-error curve says, as compare prints them.
    std::string caption;
    for (const Verdict& v : a.verdicts)
      if (v.cell == cells[ci] && v.k < 0 && !v.closest.empty())
        caption = fmt::format("window k in {{{}}}: {}; excess-error curve: {}",
                              WindowText(a.window), RuleText(v), v.budget_curve);
    for (const char* term : {"pngcairo size 1000,600", "svg size 1000,600"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      files.images.push_back(stem + "." + ext);
      gp += fmt::format("set terminal {}\nset output {}\n", term, q(files.images.back()));
      gp += fmt::format(
          "set title {} noenhanced\nset xlabel 'k (examples in context)'\nset ylabel 'SPD / d'\n",
          q(fmt::format("{}: SPD / d to each learner ({} seed{}, 95% intervals over {})", cells[ci],
                        seeds, seeds == 1 ? "" : "s",
                        seeds == 1 ? "prompts" : "seeds, then prompts")));
      gp += caption.empty() ? "unset label 1\nset bmargin\n"
                            : fmt::format(
                                  "set bmargin 6\nset label 1 {} at screen 0.01, screen 0.03 "
                                  "left noenhanced font ',9'\n",
                                  q(caption));
      gp += plot + "\n";
    }
  }
  return files;
}

}  // namespace icl::analysis
