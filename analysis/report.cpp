// Probe scores over seeds and test prompts, the decodability onset and the report's settings.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/errors.hpp"
#include "core/spec.hpp"
#include "core/stats.hpp"

namespace icl::analysis {

Summary OverSeeds(const arma::cube& c, arma::uword ki, arma::uword li) {
  const arma::vec v = c.slice(li).col(ki);
  Summary s;
  s.mean = arma::mean(v);
  if (v.n_elem > 1) {
    const int df = static_cast<int>(v.n_elem) - 1;
    s.half = core::StudentT975(df) * arma::stddev(v) / std::sqrt(double(v.n_elem));
  }
  return s;
}

Scorer::Scorer(const ProbeResults& r) : r_(r) {
  if (r.has_errors())
    boot_ = std::make_shared<probes::Bootstrap>(r.n_test, r.seeds, r.bootstrap, r.bootstrap_seed);
}

arma::vec Scorer::Replicates(const std::string& t, const std::string& p, const std::string& s,
                             arma::uword li, arma::uword ki) const {
  const arma::mat* sse = r_.Sse(t, p, s, li, ki);
  const arma::mat* sst = r_.Sst(t, ki);
  if (!sse || !sst)
    throw core::InputError("report", "probes",
                           "'" + r_.path + "' has no per-prompt errors for " + t + "/" + p + "/" +
                               s + "; re-run iclprobe probe");
  return boot_->MeanR2(*sse, *sst);
}

Scorer::Score Scorer::R2(const std::string& t, const std::string& p, const std::string& s,
                         arma::uword li, arma::uword ki) const {
  const arma::cube* c = r_.Find(t, p, s, "r2");
  Score out;
  out.mean = OverSeeds(*c, ki, li).mean;
  out.lo = out.hi = out.mean;
  if (boot_) {
    const probes::Interval i = probes::PercentileInterval(Replicates(t, p, s, li, ki));
    out.lo = i.lo, out.hi = i.hi;
  }
  return out;
}

// R2 of cell a - R2 of cell b (target, probe, source, layer), paired over the same resamples:
// every cell of one file is scored on the same test prompts of each seed's split.
Scorer::Score Scorer::Between(const std::string& ta, const std::string& pa, const std::string& sa,
                              arma::uword la, const std::string& tb, const std::string& pb,
                              const std::string& sb, arma::uword lb, arma::uword ki) const {
  Score out;
  out.mean = OverSeeds(*r_.Find(ta, pa, sa, "r2"), ki, la).mean -
             OverSeeds(*r_.Find(tb, pb, sb, "r2"), ki, lb).mean;
  out.lo = out.hi = out.mean;
  if (boot_) {
    const probes::Interval i =
        probes::PercentileInterval(Replicates(ta, pa, sa, la, ki) - Replicates(tb, pb, sb, lb, ki));
    out.lo = i.lo, out.hi = i.hi;
  }
  return out;
}

Scorer::Score Scorer::Difference(const std::string& t, const std::string& p, const std::string& sa,
                                 arma::uword la, const std::string& sb, arma::uword lb,
                                 arma::uword ki) const {
  return Between(t, p, sa, la, t, p, sb, lb, ki);
}

Scorer::Score Scorer::TargetDifference(const std::string& ta, const std::string& tb,
                                       const std::string& p, const std::string& s, arma::uword li,
                                       arma::uword ki) const {
  return Between(ta, p, s, li, tb, p, s, li, ki);
}

Scorer::Score Scorer::Combination(const std::vector<Term>& terms, arma::uword ki) const {
  Score out;
  arma::vec rep;
  for (const Term& t : terms) {
    out.mean +=
        t.coef * OverSeeds(*r_.Find(t.target, t.probe, t.source, "r2"), ki, t.layer_index).mean;
    if (!boot_) continue;
    const arma::vec x = t.coef * Replicates(t.target, t.probe, t.source, t.layer_index, ki);
    rep = rep.is_empty() ? x : arma::vec(rep + x);
  }
  out.lo = out.hi = out.mean;
  if (boot_ && !rep.is_empty()) {
    const probes::Interval i = probes::PercentileInterval(rep);
    out.lo = i.lo, out.hi = i.hi;
  }
  return out;
}

std::vector<Onset> FindOnsets(const ProbeResults& r, int k, const OnsetRule& rule) {
  const auto kit = std::find(r.ks.begin(), r.ks.end(), k);
  if (kit == r.ks.end())
    throw core::InputError("report", "k", "k=" + std::to_string(k) + " was not probed");
  const arma::uword ki = kit - r.ks.begin();
  const Scorer scorer(r);
  std::vector<Onset> out;
  for (const auto& t : r.targets)
    for (const auto& p : r.probes) {
      const arma::cube* model = r.Find(t, p, "model", "r2");
      if (!model) continue;
      Onset o;
      o.target = t;
      o.probe = p;
      o.k = k;
      o.n = r.n;
      o.intervals = scorer.intervals();
      o.best_r2 = -arma::datum::inf;
      arma::uword best_li = 0;
      for (arma::uword li = 0; li < r.layers.size(); ++li) {
        const double v = OverSeeds(*model, ki, li).mean;
        if (v > o.best_r2) o.best_r2 = v, o.best_layer = r.layers[li], best_li = li;
      }
      o.best = scorer.R2(t, p, "model", best_li, ki);
      o.threshold = rule.threshold >= 0 ? rule.threshold : rule.relative * o.best_r2;
      for (arma::uword li = 0; li < r.layers.size() && o.layer < 0; ++li) {
        const Scorer::Score v = scorer.R2(t, p, "model", li, ki);
        // The lower bound must reach the threshold (the point estimate, without intervals).
        if (v.lo < o.threshold || v.mean <= 0) continue;
        bool selective = true;
        std::vector<std::pair<std::string, Scorer::Score>> margins;
        for (std::size_t s = 1; s < r.sources.size(); ++s) {
          if (!r.Find(t, p, r.sources[s], "r2")) continue;
          const Scorer::Score m = scorer.Difference(t, p, "model", li, r.sources[s], li, ki);
          margins.emplace_back(r.sources[s], m);
          if (m.lo <= rule.margin) selective = false;
        }
        if (!selective) continue;
        o.layer = r.layers[li];
        o.at_onset = v;
        o.margins = margins;
        o.has_previous = li > 0;
        if (li > 0) o.over_previous = scorer.Difference(t, p, "model", li, "model", li - 1, ki);
      }
      if (o.intervals)
        for (arma::uword li = 0; li < r.layers.size(); ++li)
          if (li == best_li || scorer.Difference(t, p, "model", best_li, "model", li, ki).lo <= 0)
            o.indistinguishable.push_back(r.layers[li]);
      for (std::size_t s = 1; s < r.sources.size(); ++s) {
        const arma::cube* c = r.Find(t, p, r.sources[s], "r2");
        if (!c) continue;
        int first = -1;
        for (arma::uword li = 0; li < r.layers.size() && first < 0; ++li)
          if (scorer.R2(t, p, r.sources[s], li, ki).lo >= o.threshold && o.threshold > 0)
            first = r.layers[li];
        o.controls.emplace_back(r.sources[s], first);
      }
      out.push_back(o);
    }
  return out;
}

namespace {

std::string Ci(const Scorer::Score& s, const char* f = "{:.3f}") {
  return fmt::format(fmt::runtime(std::string(f) + " [" + f + ", " + f + "]"), s.mean, s.lo, s.hi);
}

}  // namespace

void PrintOnsets(std::ostream& os, const std::vector<Onset>& onsets, const OnsetRule& rule) {
  if (onsets.empty()) return;
  const std::string threshold =
      rule.threshold >= 0
          ? fmt::format("{:g}", rule.threshold)
          : fmt::format("{:g} x the best layer's R2 of that target and probe", rule.relative);
  if (onsets[0].intervals)
    os << fmt::format(
        "Decodability onset at k = {} (rule: the 95% interval of R2 lies above {} and the "
        "paired margin over every control above {:g}; R2 [95% bootstrap interval over test "
        "prompts and seeds]):\n",
        onsets[0].k, threshold, rule.margin);
  else
    os << fmt::format(
        "Decodability onset at k = {} (rule: R2 >= {} and selectivity > {:g} over every "
        "control; no intervals: the probes file keeps no per-prompt errors):\n",
        onsets[0].k, threshold, rule.margin);
  std::set<std::string> targets;
  bool query = false;
  for (const auto& o : onsets) {
    targets.insert(o.target);
    query = query || probes::SplitTargetName(o.target).second == probes::ProbeAt::kQuery;
  }
  os << (query ? "Positions: a target is read at the y-token of example k (the state after k "
                 "examples); TARGET.query at the x-token of example k+1 (where the prediction "
                 "of y_{k+1} is read).\n"
               : "Position: every target is read at the y-token of example k (the state after "
                 "k examples).\n");
  const int k = onsets[0].k, n = onsets[0].n;
  if (k == n && n > 0)
    os << fmt::format(
        "Read by nothing: at k = n = {} the y-token of example k is the last token of the "
        "prompt; no later position attends to it and no prediction reads it, so what is decodable "
        "there is computed, not shown to be used{}.\n",
        n, query ? " (TARGET.query has no x-token of example k+1 there)" : "");
  else if (k < n)
    os << fmt::format(
        "Read: at k = {} < n = {} later positions attend to the y-token of example k, and the "
        "x-token of example k+1 makes the prediction of y_{{k+1}}.\n",
        k, n);
  for (const auto& t : std::vector<std::string>(targets.begin(), targets.end())) {
    std::vector<std::string> found, weak, missing;
    std::map<std::string, std::vector<std::string>> control;
    for (const auto& o : onsets) {
      if (o.target != t) continue;
      std::string best = fmt::format("best R2 {:.3f} at layer {}", o.best_r2, o.best_layer);
      if (o.intervals)
        best = fmt::format("best R2 {} at layer {}, indistinguishable from it: layers {}",
                           Ci(o.best), o.best_layer, fmt::join(o.indistinguishable, ","));
      if (o.layer >= 0 && o.intervals) {
        std::vector<std::string> m;
        for (const auto& [c, v] : o.margins)
          m.push_back(fmt::format("{:+.3f} [{:+.3f}, {:+.3f}] over {}", v.mean, v.lo, v.hi, c));
        m.push_back(o.has_previous
                        ? fmt::format("{:+.3f} [{:+.3f}, {:+.3f}] over the layer before",
                                      o.over_previous.mean, o.over_previous.lo, o.over_previous.hi)
                        : std::string("the first layer probed"));
        (o.best_r2 < kWeakR2 ? weak : found)
            .push_back(fmt::format("layer {} ({}, R2 {}; {}; {})", o.layer, o.probe, Ci(o.at_onset),
                                   fmt::join(m, ", "), best));
      } else if (o.layer >= 0) {
        (o.best_r2 < kWeakR2 ? weak : found)
            .push_back(fmt::format("layer {} ({}, {})", o.layer, o.probe, best));
      } else {
        missing.push_back(fmt::format("{} ({})", o.probe, best));
      }
      for (const auto& [c, l] : o.controls)
        control[c].push_back(l < 0 ? "" : fmt::format("{} from layer {}", o.probe, l));
    }
    os << "  " << t << ": ";
    if (!found.empty()) os << "decodable from " << fmt::format("{}", fmt::join(found, ", "));
    if (!weak.empty())
      os << (found.empty() ? "" : "; ")
         << fmt::format("weakly decodable (best R2 below {:g}) from {}", kWeakR2,
                        fmt::join(weak, ", "));
    if (!missing.empty())
      os << (found.empty() && weak.empty() ? "" : "; ") << "not decodable by "
         << fmt::format("{}", fmt::join(missing, ", "));
    for (const auto& [c, ls] : control) {
      std::vector<std::string> reached;
      for (const auto& l : ls)
        if (!l.empty()) reached.push_back(l);
      if (reached.empty())
        os << "; never in " << c;
      else
        os << "; " << c << " reaches the threshold too ("
           << fmt::format("{}", fmt::join(reached, ", ")) << ")";
    }
    os << "\n";
  }
}

TableFormat ParseTableFormat(const std::string& name) {
  if (name == "md") return TableFormat::kMarkdown;
  if (name == "tex") return TableFormat::kLatex;
  if (name == "csv") return TableFormat::kCsv;
  throw core::InputError("report", "format", "expected md, tex or csv, got '" + name + "'");
}

void CheckTableMetric(const std::string& name) {
  if (name != "r2" && name != "nmse" && name != "mse")
    throw core::InputError("report", "metric",
                           "expected r2, nmse or mse, got '" + name.substr(0, 40) + "'");
}

void OnsetRule::Validate() const {
  // -1 (the default) selects the relative rule.
  if (!(threshold == -1 || (threshold >= 0 && threshold <= 1)))
    throw core::InputError("report", "threshold", "expected an R2 in [0, 1]");
  if (!(relative > 0 && relative <= 1))
    throw core::InputError("report", "relative",
                           "expected a fraction in (0, 1], got " + std::to_string(relative));
  if (!(margin >= 0 && margin <= 1))
    throw core::InputError("report", "margin",
                           "expected an R2 difference in [0, 1], got " + std::to_string(margin));
}

std::vector<int> ResolveKs(const ProbeResults& r, const std::string& spec) {
  std::vector<int> ks;
  for (const std::string& item : core::SplitList("report", "k", spec)) {
    if (item == "all") {
      for (int k : r.ks)
        if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
      continue;
    }
    int k = 0;
    if (item == "d")
      k = r.d;
    else if (item == "n")
      k = r.n;
    else if (const auto v = core::ParseInteger(item, 0, 1 << 30))
      k = static_cast<int>(*v);
    else
      throw core::InputError("report", "k", "expected d, n, all or numbers, got '" + spec + "'");
    if (std::find(r.ks.begin(), r.ks.end(), k) == r.ks.end())
      throw core::InputError("report", "k",
                             "k=" + std::to_string(k) + " was not probed in '" + r.path + "'");
    if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  }
  if (ks.empty()) throw core::InputError("report", "k", "empty list");
  return ks;
}

}  // namespace icl::analysis
