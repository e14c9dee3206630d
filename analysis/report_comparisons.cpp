// Comparisons within one probes file: which target each layer carries best, and one probe
// family against another, as tables and one-line summaries.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <map>

#include "analysis/report_text.hpp"
#include "core/errors.hpp"

namespace icl::analysis {

namespace {

// Why a target cannot enter a target comparison, or "" when it can.
std::string NotComparable(const std::string& target) {
  const auto [base, at] = probes::SplitTargetName(target);
  if (base == "w")
    return "'" + target +
           "' is the prompt's true weights, not a function of the prompt: under label noise (or "
           "k < d) no state holds more of it than E[w | prompt] = w_ridge at the Bayes lambda, "
           "so R2(w) = ceiling(w) x R2(w_ridge) for every representation and the comparison "
           "cannot discriminate; compare w_ols, w_ridge and learner iterates (the tables give w's "
           "ceiling beside its R2)";
  return "";
}

}  // namespace

std::vector<TargetComparison> CompareTargets(const ProbeResults& r,
                                             std::vector<std::string> targets, int k) {
  const auto kit = std::find(r.ks.begin(), r.ks.end(), k);
  if (kit == r.ks.end())
    throw core::InputError("report", "k",
                           "k=" + std::to_string(k) + " was not probed in '" + r.path + "'");
  const arma::uword ki = kit - r.ks.begin();
  auto probed = [&](const std::string& t) {
    return std::find(r.targets.begin(), r.targets.end(), t) != r.targets.end();
  };
  if (targets.empty()) {
    for (const char* t : {"w_ols", "w_ridge"})
      if (probed(t)) targets.push_back(t);
    for (const auto& [name, spec] : r.learner_targets)
      if (probed(name)) targets.push_back(name);
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    if (!probed(t))
      throw core::InputError("report", "compare-targets",
                             "target '" + t + "' was not probed in '" + r.path + "'");
    if (std::find(targets.begin(), targets.begin() + long(i), t) != targets.begin() + long(i))
      throw core::InputError("report", "compare-targets",
                             "target '" + t + "' is listed twice (a target against itself)");
    if (const std::string why = NotComparable(t); !why.empty())
      throw core::InputError("report", "compare-targets", why);
    if (probes::SplitTargetName(t).second != probes::SplitTargetName(targets[0]).second)
      throw core::InputError("report", "compare-targets",
                             "'" + targets[0] + "' and '" + t +
                                 "' are read at different positions (state and query); compare "
                                 "targets at one position");
  }
  if (targets.size() < 2)
    throw core::InputError("report", "compare-targets",
                           "needs two or more targets probed in '" + r.path + "'");
  const Scorer scorer(r);
  const auto layer0 = std::find(r.layers.begin(), r.layers.end(), 0);
  std::vector<TargetComparison> out;
  for (const auto& p : r.probes) {
    if (p == probes::FamilyName(probes::Family::kMlp)) continue;  // linear probes only
    bool all = true;
    for (const auto& t : targets)
      all = all && r.Find(t, p, "model", "r2") != nullptr;
    if (!all) continue;
    for (arma::uword li = 0; li < r.layers.size(); ++li) {
      TargetComparison c;
      c.probe = p, c.k = k, c.layer = r.layers[li], c.intervals = scorer.intervals();
      for (const auto& t : targets)
        c.r2.emplace_back(t, scorer.R2(t, p, "model", li, ki));
      std::vector<std::size_t> order(c.r2.size());
      for (std::size_t i = 0; i < order.size(); ++i)
        order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return c.r2[a].second.mean > c.r2[b].second.mean;
      });
      c.best = c.r2[order[0]].first, c.runner_up = c.r2[order[1]].first;
      c.margin = scorer.TargetDifference(c.best, c.runner_up, p, "model", li, ki);
      c.significant = c.intervals && c.margin.lo > 0;
      // margin(model, layer) - margin(baseline): the same prompts, the same resamples.
      auto over = [&](const std::string& source, arma::uword bl) {
        return scorer.Combination({{1, c.best, p, "model", li},
                                   {-1, c.runner_up, p, "model", li},
                                   {-1, c.best, p, source, bl},
                                   {1, c.runner_up, p, source, bl}},
                                  ki);
      };
      if (layer0 != r.layers.end() && c.layer != 0)
        c.over_baselines.emplace_back("embedding", over("model", layer0 - r.layers.begin()));
      for (const auto& s : r.sources)
        if (s != "model" && r.Find(c.best, p, s, "r2") && r.Find(c.runner_up, p, s, "r2"))
          c.over_baselines.emplace_back(s, over(s, li));
      c.preferred = c.significant && c.layer != 0 && !c.over_baselines.empty();
      for (const auto& [name, v] : c.over_baselines)
        c.preferred = c.preferred && v.lo > 0;
      out.push_back(c);
    }
  }
  if (out.empty())
    throw core::InputError("report", "compare-targets",
                           "no linear probe (ridge, linear) of '" + r.path +
                               "' was fitted to every compared target (an MLP can compute any "
                               "of them from a state that holds the prompt: it cannot tell them "
                               "apart)");
  return out;
}

namespace {

// "embedding +0.012 [+0.004, +0.020]; acts_init +0.030 [...]", or "none probed".
std::string BaselineText(const TargetComparison& c, TableFormat format) {
  if (c.over_baselines.empty()) return c.layer == 0 ? "(the embedding itself)" : "none probed";
  std::vector<std::string> parts;
  for (const auto& [name, v] : c.over_baselines)
    parts.push_back(Escape(name, format) + " " +
                    (c.intervals ? fmt::format("{:+.3f} [{:+.3f}, {:+.3f}]", v.mean, v.lo, v.hi)
                                 : fmt::format("{:+.3f}", v.mean)));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

void WriteTargetComparison(std::ostream& os, const std::vector<TargetComparison>& rows,
                           TableFormat format) {
  if (rows.empty()) return;
  if (format == TableFormat::kCsv) {
    // One row per target and cell, then one per baseline of the cell (target = "over:<name>").
    os << "probe,layer,k,target,r2,r2_lo,r2_hi,best,runner_up,margin,margin_lo,margin_hi,"
          "significant,preferred\n";
    for (const auto& c : rows) {
      auto row = [&](const std::string& t, const Scorer::Score& v) {
        os << fmt::format("{},{},{},{},{:.6g},{:.6g},{:.6g},{},{},{:.6g},{:.6g},{:.6g},{},{}\n",
                          c.probe, c.layer, c.k, t, v.mean, v.lo, v.hi, c.best, c.runner_up,
                          c.margin.mean, c.margin.lo, c.margin.hi, c.significant ? 1 : 0,
                          c.preferred ? 1 : 0);
      };
      for (const auto& [t, v] : c.r2)
        row(t, v);
      for (const auto& [name, v] : c.over_baselines)
        row("over:" + name, v);
    }
    return;
  }
  const bool md = format == TableFormat::kMarkdown;
  std::vector<std::string> names;
  for (const auto& [t, v] : rows[0].r2)
    names.push_back(t);
  const std::string note =
      rows[0].intervals
          ? "R² [95% bootstrap interval]; the margin is R²(best) − R²(runner-up), paired over "
            "the same test prompts; 'over baselines' is that margin minus the same margin at the "
            "embedding and in each control (paired); * preferred: the margin and every excess "
            "exclude 0; ~ not"
          : "R² point estimates (the file keeps no per-prompt errors: no intervals, nothing "
            "preferred)";
  std::string probe;
  for (const auto& c : rows) {
    if (c.probe != probe) {
      probe = c.probe;
      if (md) {
        os << fmt::format("\n**Which target each layer carries best** ({} probe, k = {}): {}\n\n",
                          probe, c.k, note);
        os << "| layer |";
        for (const auto& t : names)
          os << " " << t << " |";
        os << " best | margin over runner-up | over baselines |\n|---:|";
        for (std::size_t i = 0; i < names.size(); ++i)
          os << "---:|";
        os << ":---|---:|:---|\n";
      } else {
        os << fmt::format("\n% which target each layer carries best ({} probe, k = {})\n",
                          Escape(probe, format), c.k);
        os << "\\begin{tabular}{r" << std::string(names.size(), 'r') << "lrl}\n\\toprule\nlayer";
        for (const auto& t : names)
          os << " & " << Escape(t, format);
        os << " & best & margin & over baselines \\\\\n\\midrule\n";
      }
    }
    const std::string sep = md ? " | " : " & ";
    os << (md ? "| " : "") << c.layer;
    for (const auto& [t, v] : c.r2)
      os << sep
         << (c.intervals ? fmt::format("{:.3f} [{:.3f}, {:.3f}]", v.mean, v.lo, v.hi)
                         : fmt::format("{:.3f}", v.mean));
    const std::string mark = !c.intervals ? "" : (c.preferred ? "*" : "~");
    os << sep << Escape(c.best, format) << mark << sep
       << (c.intervals ? fmt::format("{:+.3f} [{:+.3f}, {:+.3f}] over {}", c.margin.mean,
                                     c.margin.lo, c.margin.hi, Escape(c.runner_up, format))
                       : fmt::format("{:+.3f} over {}", c.margin.mean, Escape(c.runner_up, format)))
       << sep << BaselineText(c, format) << (md ? " |\n" : " \\\\\n");
    if (!md && (&c == &rows.back() || (&c + 1)->probe != probe))
      os << "\\bottomrule\n\\end{tabular}\n";
  }
}

std::vector<ProbeComparison> CompareProbes(const ProbeResults& r, const std::string& a,
                                           const std::string& b, const std::vector<int>& ks) {
  auto fail = [](const std::string& text) {
    throw core::InputError("report", "compare_probes", text);
  };
  for (const auto& p : {a, b})
    if (std::find(r.probes.begin(), r.probes.end(), p) == r.probes.end())
      fail("'" + p.substr(0, 80) + "' is not a probe of '" + r.path + "' (it has " +
           fmt::format("{}", fmt::join(r.probes, ", ")) + ")");
  if (a == b) fail("'" + a + "' against itself; name two probe families, like linear,mlp");
  const std::string ridge = probes::FamilyName(probes::Family::kRidge);
  if ((a == ridge || b == ridge) && r.pooling == "attention")
    fail("ridge reads the one state after k examples, but the linear and MLP probes of '" + r.path +
         "' pool over positions (attention pooling): the margin would mix pooling with the "
         "probe; compare linear,mlp, or probe again with position pooling");
  const Scorer scorer(r);
  const auto layer0 = std::find(r.layers.begin(), r.layers.end(), 0);
  std::vector<ProbeComparison> out;
  for (const auto& t : r.targets) {
    if (!r.Find(t, a, "model", "r2") || !r.Find(t, b, "model", "r2")) continue;
    for (int k : ks) {
      const auto kit = std::find(r.ks.begin(), r.ks.end(), k);
      if (kit == r.ks.end())
        throw core::InputError("report", "k",
                               "k=" + std::to_string(k) + " was not probed in '" + r.path + "'");
      const arma::uword ki = kit - r.ks.begin();
      for (arma::uword li = 0; li < r.layers.size(); ++li) {
        ProbeComparison c;
        c.target = t, c.a = a, c.b = b, c.k = k, c.layer = r.layers[li];
        c.intervals = scorer.intervals();
        c.r2_a = scorer.R2(t, a, "model", li, ki);
        c.r2_b = scorer.R2(t, b, "model", li, ki);
        c.margin = scorer.Combination({{1, t, b, "model", li}, {-1, t, a, "model", li}}, ki);
        c.b_better = c.intervals && c.margin.lo > 0;
        c.a_better = c.intervals && c.margin.hi < 0;
        // margin(model, li) - margin(source, layer bl), on the same resamples.
        auto over = [&](const std::string& s, arma::uword bl) {
          return scorer.Combination({{1, t, b, "model", li},
                                     {-1, t, a, "model", li},
                                     {-1, t, b, s, bl},
                                     {1, t, a, s, bl}},
                                    ki);
        };
        if (layer0 != r.layers.end() && c.layer != 0)
          c.over_baselines.emplace_back("embedding", over("model", layer0 - r.layers.begin()));
        for (const auto& s : r.sources)
          if (s != "model" && r.Find(t, a, s, "r2") && r.Find(t, b, s, "r2")) {
            c.controls.emplace_back(s,
                                    scorer.Combination({{1, t, b, s, li}, {-1, t, a, s, li}}, ki));
            c.over_baselines.emplace_back(s, over(s, li));
          }
        c.b_better_beyond_baselines = c.b_better && !c.over_baselines.empty();
        for (const auto& [name, v] : c.over_baselines)
          c.b_better_beyond_baselines = c.b_better_beyond_baselines && v.lo > 0;
        out.push_back(c);
      }
    }
  }
  if (out.empty())
    fail("no target of '" + r.path + "' was probed by both " + a + " and " + b +
         " on the model's states");
  return out;
}

void WriteProbeComparison(std::ostream& os, const std::vector<ProbeComparison>& rows,
                          TableFormat format) {
  if (rows.empty()) return;
  const std::string& a = rows[0].a;
  const std::string& b = rows[0].b;
  auto ci = [&](const Scorer::Score& v, bool sign) {
    const char* f = sign ? "{:+.3f}" : "{:.3f}";
    if (!rows[0].intervals) return fmt::format(fmt::runtime(f), v.mean);
    return fmt::format(fmt::runtime(std::string(f) + " [" + f + ", " + f + "]"), v.mean, v.lo,
                       v.hi);
  };
  if (format == TableFormat::kCsv) {
    // One row per cell and source: the model's margin, then each control's.
    os << "target,k,layer,source,r2_" << a << ",r2_" << b << ",margin,margin_lo,margin_hi,"
       << "better\n";
    for (const auto& c : rows) {
      os << fmt::format("{},{},{},model,{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{}\n", c.target, c.k,
                        c.layer, c.r2_a.mean, c.r2_b.mean, c.margin.mean, c.margin.lo, c.margin.hi,
                        c.b_better ? b : (c.a_better ? a : "tie"));
      for (const auto& [s, v] : c.controls)
        os << fmt::format("{},{},{},{},,,{:.6g},{:.6g},{:.6g},{}\n", c.target, c.k, c.layer, s,
                          v.mean, v.lo, v.hi,
                          v.lo > 0 && c.intervals ? b : (v.hi < 0 && c.intervals ? a : "tie"));
      for (const auto& [s, v] : c.over_baselines)
        os << fmt::format("{},{},{},over:{},,,{:.6g},{:.6g},{:.6g},{}\n", c.target, c.k, c.layer, s,
                          v.mean, v.lo, v.hi,
                          v.lo > 0 && c.intervals ? b : (v.hi < 0 && c.intervals ? a : "tie"));
    }
    return;
  }
  const bool md = format == TableFormat::kMarkdown;
  const std::string note = fmt::format(
      "{}; margin = R²({}) − R²({}), paired over the same test prompts and resamples; the same "
      "margin in each control says whether any representation shows it",
      rows[0].intervals ? "R² [95% bootstrap interval]"
                        : "R² point estimates (no intervals in "
                          "the file)",
      b, a);
  std::string group;
  for (const auto& c : rows) {
    const std::string key = c.target + "/" + std::to_string(c.k);
    if (key != group) {
      if (!md && !group.empty()) os << "\\bottomrule\n\\end{tabular}\n";
      group = key;
      if (md) {
        os << fmt::format("\n**{} against {}**, {}, k = {}: {}\n\n| layer | {} | {} | margin |", b,
                          a, c.target, c.k, note, a, b);
        for (const auto& [s, v] : c.controls)
          os << " margin in " << s << " |";
        os << " margin over baselines |\n|---:|---:|---:|---:|";
        for (std::size_t i = 0; i < c.controls.size(); ++i)
          os << "---:|";
        os << ":---|\n";
      } else {
        os << fmt::format("\n% {} against {}, {}, k = {}\n", Escape(b, format), Escape(a, format),
                          Escape(c.target, format), c.k);
        os << "\\begin{tabular}{rrrr" << std::string(c.controls.size(), 'r')
           << "}\n\\toprule\nlayer & " << Escape(a, format) << " & " << Escape(b, format)
           << " & margin";
        for (const auto& [s, v] : c.controls)
          os << " & " << Escape(s, format);
        os << " \\\\\n\\midrule\n";
      }
    }
    const std::string sep = md ? " | " : " & ";
    const std::string mark = c.b_better ? "*" : (c.a_better ? "†" : "");
    os << (md ? "| " : "") << c.layer << sep << ci(c.r2_a, false) << sep << ci(c.r2_b, false) << sep
       << ci(c.margin, true) << (md ? mark : "");
    for (const auto& [s, v] : c.controls)
      os << sep << ci(v, true);
    if (md) {
      std::vector<std::string> parts;
      for (const auto& [s, v] : c.over_baselines)
        parts.push_back(s + " " + ci(v, true));
      os << sep << (parts.empty() ? std::string("none") : fmt::format("{}", fmt::join(parts, "; ")))
         << (c.b_better_beyond_baselines ? " **beyond**" : "");
    }
    os << (md ? " |\n" : " \\\\\n");
  }
  if (!md) os << "\\bottomrule\n\\end{tabular}\n";
  if (md)
    os << fmt::format(
        "\n(* {} better, † {} better: the margin's interval excludes 0; "
        "**beyond**: {} better by more than at the embedding and in every control, "
        "each paired excess excluding 0)\n",
        b, a, b);
}

void PrintProbeComparison(std::ostream& os, const std::vector<ProbeComparison>& rows) {
  std::string group;
  std::vector<int> b_layers, a_layers, ties, control_b, beyond;
  auto flush = [&](const ProbeComparison& c) {
    auto list = [](const std::vector<int>& v) {
      return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, ","));
    };
    os << fmt::format(
        "{} against {}, {}, k = {}{}: {} better at layers {}; {} better at {}; "
        "tied at {}",
        c.b, c.a, c.target, c.k,
        c.intervals ? "" : " (no intervals in the file: nothing called better)", c.b,
        list(b_layers), c.a, list(a_layers), list(ties));
    if (!c.controls.empty())
      os << fmt::format("; {} better in a control too at layers {}", c.b, list(control_b));
    os << fmt::format("; {} better beyond the embedding and every control at layers {}", c.b,
                      list(beyond));
    os << "\n";
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& c = rows[i];
    (c.b_better ? b_layers : (c.a_better ? a_layers : ties)).push_back(c.layer);
    if (c.b_better_beyond_baselines) beyond.push_back(c.layer);
    for (const auto& [s, v] : c.controls)
      if (c.intervals && v.lo > 0) {
        control_b.push_back(c.layer);
        break;
      }
    const bool last =
        i + 1 == rows.size() || rows[i + 1].target != c.target || rows[i + 1].k != c.k;
    if (last) {
      flush(c);
      b_layers.clear(), a_layers.clear(), ties.clear(), control_b.clear(), beyond.clear();
    }
  }
}

void PrintTargetComparison(std::ostream& os, const std::vector<TargetComparison>& rows) {
  std::vector<std::string> probes;
  for (const auto& c : rows)
    if (std::find(probes.begin(), probes.end(), c.probe) == probes.end()) probes.push_back(c.probe);
  for (const auto& p : probes) {
    std::map<std::string, std::vector<int>> best;  // target (or "" for none) -> layers
    std::vector<std::string> order;
    int k = 0;
    bool intervals = false;
    for (const auto& c : rows) {
      if (c.probe != p) continue;
      k = c.k, intervals = c.intervals;
      const std::string key = c.preferred ? c.best : "";
      if (!best.count(key)) order.push_back(key);
      best[key].push_back(c.layer);
    }
    std::vector<std::string> parts;
    for (const auto& key : order)
      parts.push_back(
          key.empty() ? fmt::format("no target preferred at layers {}", fmt::join(best[key], ","))
                      : fmt::format("{} at layers {}", key, fmt::join(best[key], ",")));
    os << fmt::format(
        "Preferred target, {} probe, k = {} ({}): {}\n", p, k,
        intervals ? "its paired 95% margin over the runner-up, and that margin's excess over the "
                    "embedding's and every control's, exclude 0"
                  : "no intervals in the file: nothing can be preferred",
        fmt::join(parts, "; "));
  }
}

}  // namespace icl::analysis
