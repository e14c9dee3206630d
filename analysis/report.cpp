// Probe tables, onset detection and gnuplot figures.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/json.hpp"
#include "core/names.hpp"
#include "core/output.hpp"
#include "core/spec.hpp"
#include "core/subprocess.hpp"
#include "data/prompt_io.hpp"
#include "data/task.hpp"
#include "learners/model_config.hpp"

namespace icl::analysis {

namespace fs = std::filesystem;

Summary OverSeeds(const arma::cube& c, arma::uword ki, arma::uword li) {
  const arma::vec v = c.slice(li).col(ki);
  Summary s;
  s.mean = arma::mean(v);
  if (v.n_elem > 1) {
    // Student-t 97.5% quantiles for 1..30 degrees of freedom.
    static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                               2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                               2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                               2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    const std::size_t df = v.n_elem - 1;
    s.half = (df <= 30 ? t[df - 1] : 1.96) * arma::stddev(v) / std::sqrt(double(v.n_elem));
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
  for (const auto& t : std::vector<std::string>(targets.begin(), targets.end())) {
    std::vector<std::string> found, missing;
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
        found.push_back(fmt::format("layer {} ({}, R2 {}; {}; {})", o.layer, o.probe,
                                    Ci(o.at_onset), fmt::join(m, ", "), best));
      } else if (o.layer >= 0) {
        found.push_back(fmt::format("layer {} ({}, {})", o.layer, o.probe, best));
      } else {
        missing.push_back(fmt::format("{} ({})", o.probe, best));
      }
      for (const auto& [c, l] : o.controls)
        control[c].push_back(l < 0 ? "" : fmt::format("{} from layer {}", o.probe, l));
    }
    os << "  " << t << ": ";
    if (!found.empty()) os << "decodable from " << fmt::format("{}", fmt::join(found, ", "));
    if (!missing.empty())
      os << (found.empty() ? "" : "; ") << "not decodable by "
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

void PreparePlotFolder(const PlotFiles& files, const std::string& dir,
                       const std::vector<std::string>& inputs, bool force,
                       const std::string& stage) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw core::InputError(stage, "plot_dir", "cannot create '" + dir + "': " + ec.message());
  for (const auto& name : files.All()) {
    const std::string p = (fs::path(dir) / name).string();
    for (const auto& input : inputs)
      if (core::IdOf(p) == core::IdOf(input))
        throw core::InputError(stage, "plot_dir",
                               "'" + p + "' is the input file '" + input +
                                   "'; choose another "
                                   "folder");
    if (fs::exists(p) && (!force || !fs::is_regular_file(p)))
      throw core::InputError(stage, "plot_dir",
                             "'" + p +
                                 (force ? "' is not a regular file"
                                        : "' exists; pass {force} to overwrite the plots"));
  }
}

std::string GnuplotQuote(const std::string& text) {
  // In a single-quoted gnuplot string nothing is special but the quote itself, written twice.
  std::string out = "'";
  for (char c : text) {
    if (c == '\n' || c == '\r') continue;
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

namespace {

std::string Escape(const std::string& s, TableFormat f) {
  if (f != TableFormat::kLatex) return s;
  std::string o;
  for (char c : s)
    o += (c == '_' ? std::string("\\_") : std::string(1, c));
  return o;
}

std::string MetricLabel(const std::string& m, TableFormat f) {
  if (m == "r2")
    return f == TableFormat::kLatex ? "$R^2$" : (f == TableFormat::kMarkdown ? "R²" : "R2");
  if (m == "nmse") return "nMSE";
  return "MSE";
}

}  // namespace

void WriteTables(std::ostream& os, const ProbeResults& r, const std::string& metric,
                 const std::vector<int>& ks, TableFormat format) {
  struct Column {
    int k;
    arma::uword ki;
    std::string probe, source;
    const arma::cube* c;
  };
  if (format == TableFormat::kCsv) os << "target,probe,source,layer,k,metric,mean,lo,hi,seeds\n";
  const Scorer scorer(r);
  for (const auto& t : r.targets) {
    std::vector<Column> cols;
    for (int k : ks) {
      const auto kit = std::find(r.ks.begin(), r.ks.end(), k);
      if (kit == r.ks.end())
        throw core::InputError("report", "k",
                               "k=" + std::to_string(k) + " was not probed in '" + r.path + "'");
      for (const auto& p : r.probes)
        for (const auto& s : r.sources)
          if (const arma::cube* c = r.Find(t, p, s, metric))
            cols.push_back({k, arma::uword(kit - r.ks.begin()), p, s, c});
    }
    // Bootstrap intervals (R2, and nMSE = 1 - R2 mirrored) when the file keeps the errors.
    const bool boot = scorer.intervals() && (metric == "r2" || metric == "nmse");
    auto interval = [&](const Column& c, arma::uword li) {
      Scorer::Score v = scorer.R2(t, c.probe, c.source, li, c.ki);
      if (metric == "nmse") v = {1.0 - v.mean, 1.0 - v.hi, 1.0 - v.lo};
      return v;
    };
    auto cell = [&](const Column& c, arma::uword li) {
      if (boot) {
        const Scorer::Score v = interval(c, li);
        return fmt::format("{:.3f} [{:.3f}, {:.3f}]", v.mean, v.lo, v.hi);
      }
      const Summary s = OverSeeds(*c.c, c.ki, li);
      if (r.seeds == 1) return fmt::format("{:.3f}", s.mean);
      return format == TableFormat::kLatex ? fmt::format("{:.3f} $\\pm$ {:.3f}", s.mean, s.half)
                                           : fmt::format("{:.3f} ± {:.3f}", s.mean, s.half);
    };
    if (format == TableFormat::kCsv) {
      for (const auto& c : cols)
        for (arma::uword li = 0; li < r.layers.size(); ++li) {
          const Summary s = OverSeeds(*c.c, c.ki, li);
          Scorer::Score v{s.mean, s.mean - s.half, s.mean + s.half};
          if (boot) v = interval(c, li);
          os << fmt::format("{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{}\n", t, c.probe, c.source,
                            r.layers[li], c.k, metric, v.mean, v.lo, v.hi, r.seeds);
        }
      continue;
    }
    const std::string label = MetricLabel(metric, format);
    std::string note =
        r.seeds > 1 ? fmt::format(", mean ± 95% interval over {} seeds", r.seeds) : "";
    if (boot)
      note = fmt::format(", mean over {} seed(s) [95% bootstrap interval over {} test prompts{}]",
                         r.seeds, r.n_test, r.seeds > 1 ? " and the seeds" : "");
    // A target that is no function of the prompt (w): the most any state can give it, per k.
    if (const auto it = r.ceilings.find(t); it != r.ceilings.end() && metric == "r2") {
      std::vector<std::string> parts;
      for (int k : ks) {
        const arma::uword ki = std::find(r.ks.begin(), r.ks.end(), k) - r.ks.begin();
        parts.push_back(fmt::format("k={} {:.3f}", k, arma::mean(it->second.row(ki))));
      }
      note += fmt::format("; ceiling (R² of E[{} | prompt], the most any state gives): {}",
                          Escape(t, format), fmt::join(parts, ", "));
    }
    if (format == TableFormat::kMarkdown) {
      os << fmt::format("\n**{}**: test {} by layer (0 = embedding){}\n\n| layer |", t, label,
                        note);
      for (const auto& c : cols)
        os << fmt::format(" {} {} k={} |", c.probe, c.source, c.k);
      os << "\n|---:|";
      for (std::size_t i = 0; i < cols.size(); ++i)
        os << "---:|";
      os << "\n";
      for (arma::uword li = 0; li < r.layers.size(); ++li) {
        os << "| " << r.layers[li] << " |";
        for (const auto& c : cols)
          os << " " << cell(c, li) << " |";
        os << "\n";
      }
    } else {
      os << fmt::format("\n% {}: test {} by layer (0 = embedding){}\n", Escape(t, format), metric,
                        note);
      os << "\\begin{tabular}{r" << std::string(cols.size(), 'r') << "}\n\\toprule\nlayer";
      for (const auto& c : cols)
        os << fmt::format(" & {} {} $k={}$", Escape(c.probe, format), Escape(c.source, format),
                          c.k);
      os << " \\\\\n\\midrule\n";
      for (arma::uword li = 0; li < r.layers.size(); ++li) {
        os << r.layers[li];
        for (const auto& c : cols)
          os << " & " << cell(c, li);
        os << " \\\\\n";
      }
      os << "\\bottomrule\n\\end{tabular}\n";
    }
  }
}

void WriteTargetMaps(std::ostream& os, const ProbeResults& r, const std::vector<int>& ks,
                     TableFormat format) {
  const auto& names = r.target_map_names;
  if (names.size() < 2) return;
  std::vector<std::pair<int, arma::uword>> cols;
  for (int k : ks)
    if (const auto it = std::find(r.ks.begin(), r.ks.end(), k); it != r.ks.end())
      cols.emplace_back(k, arma::uword(it - r.ks.begin()));
  if (cols.empty()) return;
  const bool md = format == TableFormat::kMarkdown;
  if (format == TableFormat::kCsv) {
    for (const auto& [k, ki] : cols)
      for (std::size_t i = 0; i < names.size(); ++i)
        for (std::size_t j = 0; j < names.size(); ++j)
          if (i != j)
            os << fmt::format("{},map,from:{},-1,{},r2,{:.6g},{:.6g},{:.6g},1\n", names[j],
                              names[i], k, r.target_map_r2(i, j, ki), r.target_map_r2(i, j, ki),
                              r.target_map_r2(i, j, ki));
    return;
  }
  const std::string arrow = md ? " → " : " $\\to$ ";
  if (md) {
    os << "\n**Where the targets differ**: test R² of the best affine map from one target to "
          "the other on the same prompts (seed 0's split). Near 1 both ways, the two are one "
          "quantity for a linear probe, and no comparison of their probes can tell them apart\n\n"
          "| from → to |";
    for (const auto& [k, ki] : cols)
      os << " k=" << k << " |";
    os << "\n|:---|";
    for (std::size_t c = 0; c < cols.size(); ++c)
      os << "---:|";
    os << "\n";
  } else {
    os << "\n% where the targets differ: test R2 of the best affine map between targets\n"
       << "\\begin{tabular}{l" << std::string(cols.size(), 'r') << "}\n\\toprule\nfrom" << arrow
       << "to";
    for (const auto& [k, ki] : cols)
      os << " & $k=" << k << "$";
    os << " \\\\\n\\midrule\n";
  }
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = 0; j < names.size(); ++j) {
      if (i == j) continue;
      os << (md ? "| " : "") << Escape(names[i], format) << arrow << Escape(names[j], format);
      for (const auto& [k, ki] : cols)
        os << (md ? " | " : " & ") << fmt::format("{:.3f}", r.target_map_r2(i, j, ki));
      os << (md ? " |\n" : " \\\\\n");
    }
  if (!md) os << "\\bottomrule\n\\end{tabular}\n";
}

void WriteCodelengthTables(std::ostream& os, const ProbeResults& r, const std::vector<int>& ks,
                           TableFormat format) {
  if (r.code_fractions.empty()) return;
  auto fmt_summary = [&](const Summary& v, double scale, const char* spec) {
    const std::string m = fmt::format(fmt::runtime(spec), v.mean * scale);
    if (r.seeds == 1) return m;
    return m + (format == TableFormat::kLatex ? " $\\pm$ " : " ± ") +
           fmt::format(fmt::runtime(spec), v.half * scale);
  };
  for (const auto& t : r.targets)
    for (const auto& p : r.probes) {
      const arma::cube* model = r.Find(t, p, "model", "code_bits");
      if (!model) continue;
      struct Column {
        int k;
        arma::uword ki;
        std::string source;  // "model": its bits and compression; a control: the gap
      };
      std::vector<Column> cols;
      for (int k : ks) {
        const arma::uword ki = std::find(r.ks.begin(), r.ks.end(), k) - r.ks.begin();
        if (ki == r.ks.size()) continue;
        for (const auto& src : r.sources)
          if (r.Find(t, p, src, "code_bits")) cols.push_back({k, ki, src});
      }
      const arma::cube& uniform = *r.Find(t, p, "model", "uniform_bits");
      const arma::cube compression = uniform / *model;
      // Per seed, the control's bits minus the model's (the same training rows, blocks and
      // reference code): > 0 where the model's states code the target in fewer bits.
      auto gap = [&](const std::string& src) {
        return arma::cube(*r.Find(t, p, src, "code_bits") - *model);
      };
      if (format == TableFormat::kCsv) {
        for (const auto& c : cols)
          for (arma::uword li = 0; li < r.layers.size(); ++li) {
            std::vector<std::pair<std::string, Summary>> rows;
            if (c.source == "model") {
              rows.push_back({"code_bits", OverSeeds(*model, c.ki, li)});
              rows.push_back({"uniform_bits", OverSeeds(uniform, c.ki, li)});
              rows.push_back({"compression", OverSeeds(compression, c.ki, li)});
            } else {
              rows.push_back(
                  {"code_bits", OverSeeds(*r.Find(t, p, c.source, "code_bits"), c.ki, li)});
              rows.push_back({"code_gap_bits", OverSeeds(gap(c.source), c.ki, li)});
            }
            for (const auto& [name, v] : rows)
              os << fmt::format("{},{},{},{},{},{},{:.8g},{:.8g},{:.8g},{}\n", t, p, c.source,
                                r.layers[li], c.k, name, v.mean, v.mean - v.half, v.mean + v.half,
                                r.seeds);
          }
        continue;
      }
      const std::string note = fmt::format(
          "kbits{}; each target entry to {} x its sd in the first block; {} blocks ending at "
          "{} of the training prompts",
          r.seeds > 1 ? fmt::format(", mean ± 95% t interval over {} seeds", r.seeds)
                      : ", one seed",
          r.code_precision, r.code_fractions.size(), fmt::join(r.code_fractions, ", "));
      std::vector<std::string> head;
      for (const auto& c : cols)
        head.push_back(c.source == "model" ? fmt::format("model k={} (compression)", c.k)
                                           : fmt::format("gap {} k={}", c.source, c.k));
      auto row = [&](arma::uword li) {
        std::vector<std::string> cells;
        for (const auto& c : cols)
          cells.push_back(c.source == "model"
                              ? fmt_summary(OverSeeds(*model, c.ki, li), 1e-3, "{:.2f}") + " (" +
                                    fmt_summary(OverSeeds(compression, c.ki, li), 1, "{:.3f}") + ")"
                              : fmt_summary(OverSeeds(gap(c.source), c.ki, li), 1e-3, "{:+.2f}"));
        return cells;
      };
      if (format == TableFormat::kMarkdown) {
        os << fmt::format(
            "\n**{}**: online codelength of the {} probe by layer (0 = embedding), {}. "
            "Compression = the code without features / the probe's; gap = the control's "
            "codelength minus the model's (> 0: the model's states code it shorter)\n\n| layer |",
            t, p, note);
        for (const auto& h : head)
          os << " " << h << " |";
        os << "\n|---:|";
        for (std::size_t i = 0; i < cols.size(); ++i)
          os << "---:|";
        os << "\n";
        for (arma::uword li = 0; li < r.layers.size(); ++li)
          os << "| " << r.layers[li] << " | " << fmt::format("{}", fmt::join(row(li), " | "))
             << " |\n";
      } else {
        os << fmt::format("\n% {}: online codelength of the {} probe by layer, {}\n",
                          Escape(t, format), p, note);
        os << "\\begin{tabular}{r" << std::string(cols.size(), 'r') << "}\n\\toprule\nlayer";
        for (const auto& h : head)
          os << " & " << Escape(h, format);
        os << " \\\\\n\\midrule\n";
        for (arma::uword li = 0; li < r.layers.size(); ++li)
          os << r.layers[li] << " & " << fmt::format("{}", fmt::join(row(li), " & ")) << " \\\\\n";
        os << "\\bottomrule\n\\end{tabular}\n";
      }
    }
}

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

namespace {

// The files must come from learners of one configuration, probed alike.
void CheckFamily(const std::vector<ProbeResults>& learners) {
  if (learners.size() < 2)
    throw core::InputError("report", "probes", "a family report needs two or more files");
  const ProbeResults& first = learners[0];
  for (const auto& r : learners) {
    auto differs = [&](const std::string& what) {
      throw core::InputError("report", "probes",
                             "'" + r.path + "' is not from a learner of the configuration of '" +
                                 first.path + "' (" + what +
                                 " differ); a family report compares learners of one "
                                 "configuration");
    };
    if (r.model_config.empty() || first.model_config.empty()) differs("model configurations");
    // One architecture; the arithmetic (kernels) may differ between seeds of a family (a run
    // resumed from before kernels existed beside newer ones), at float32 rounding.
    auto architecture = [](const ProbeResults& p) {
      nlohmann::json j = core::json::Parse(p.model_config, "'" + p.path + "' model_config");
      if (j.is_object()) j.erase("kernels");
      return j;
    };
    if (architecture(r) != architecture(first)) differs("model configurations");
    if (r.task_config != first.task_config) differs("task configurations");
    if (r.layers != first.layers || r.ks != first.ks) differs("probed layers or ks");
    if (r.targets != first.targets || r.probes != first.probes) differs("targets or probes");
  }
}

// Each learner's column name: its file stem, its folder and stem where stems collide, or
// learnerN where that is not unique or not safe in a table.
std::vector<std::string> LearnerNames(const std::vector<ProbeResults>& learners) {
  const std::size_t M = learners.size();
  std::vector<std::string> names;
  for (const auto& r : learners)
    names.push_back(fs::path(r.path).stem().string());
  // Files of one name in different folders (s1/probes.h5, s2/probes.h5) are named by folder.
  if (std::set<std::string>(names.begin(), names.end()).size() < M)
    for (std::size_t i = 0; i < M; ++i)
      names[i] =
          (fs::path(learners[i].path).parent_path().filename() / fs::path(learners[i].path).stem())
              .string();
  // A label reaches CSV, Markdown and TeX cells as it is: only letters, digits and _ . - /
  // (a comma, newline, '|', '&' or backslash from a file name would break the table or run TeX).
  const auto safe = [](const std::string& n) {
    if (n.empty() || n.size() > 128) return false;
    for (const char c : n)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
            c == '/'))
        return false;
    return true;
  };
  if (std::set<std::string>(names.begin(), names.end()).size() < M ||
      !std::all_of(names.begin(), names.end(), safe))
    for (std::size_t i = 0; i < M; ++i)
      names[i] = "learner" + std::to_string(i + 1);
  return names;
}

// One (target, probe): R2 by layer over the learners with each learner's interval.
void WriteFamilyTable(std::ostream& os, const std::string& t, const std::string& p, int k,
                      const std::vector<int>& layers, const std::vector<std::string>& names,
                      const arma::mat& v, const std::vector<std::vector<Scorer::Score>>& cell,
                      TableFormat format) {
  const arma::uword L = layers.size();
  const std::size_t M = names.size();
  if (format == TableFormat::kCsv) {
    for (arma::uword li = 0; li < L; ++li)
      for (std::size_t i = 0; i < M; ++i)
        os << fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6g},{:.6g}\n", t,
                          p, layers[li], k, M, arma::mean(v.row(li)), arma::stddev(v.row(li)),
                          v.row(li).min(), v.row(li).max(), names[i], cell[li][i].mean,
                          cell[li][i].lo, cell[li][i].hi);
    return;
  }
  const bool tex = format == TableFormat::kLatex;
  os << fmt::format(
      tex ? "\n% {} {} k={}: test R2 by layer over {} learners\n\\begin{{tabular}}{{r{}}}\n"
            "\\toprule\nlayer & mean & SD & min & max"
          : "\n**{}**, {} probe, k = {}: test R2 by layer over {} learners (mean, SD and "
            "range over learners; each learner's R2 [95% interval]){}\n\n| layer | mean | "
            "SD | min | max |",
      t, p, k, M, tex ? std::string(4 + M, 'r') : "");
  for (const auto& n : names)
    os << (tex ? " & " + n : " " + n + " |");
  os << (tex ? " \\\\\n\\midrule\n" : "\n|---:|---:|---:|---:|---:|");
  if (!tex)
    for (std::size_t i = 0; i < M; ++i)
      os << "---:|";
  if (!tex) os << "\n";
  for (arma::uword li = 0; li < L; ++li) {
    const std::string sep = tex ? " & " : " | ";
    os << (tex ? "" : "| ") << layers[li] << sep
       << fmt::format("{:.3f}{}{:.3f}{}{:.3f}{}{:.3f}", arma::mean(v.row(li)), sep,
                      arma::stddev(v.row(li)), sep, v.row(li).min(), sep, v.row(li).max());
    for (std::size_t i = 0; i < M; ++i)
      os << sep
         << fmt::format("{:.3f} [{:.3f}, {:.3f}]", cell[li][i].mean, cell[li][i].lo,
                        cell[li][i].hi);
    os << (tex ? " \\\\\n" : " |\n");
  }
  if (tex) os << "\\bottomrule\n\\end{tabular}\n";
}

// "w_ols (ridge): learner1 layer 3, learner2 never — the learners disagree"
std::string OnsetAgreement(const std::string& t, const std::string& p,
                           const std::vector<std::string>& names,
                           const std::vector<std::vector<Onset>>& onsets) {
  std::vector<std::string> each;
  std::set<int> layers;
  for (std::size_t i = 0; i < names.size(); ++i)
    for (const auto& o : onsets[i])
      if (o.target == t && o.probe == p) {
        layers.insert(o.layer);
        each.push_back(fmt::format("{} {}", names[i],
                                   o.layer < 0 ? "never" : "layer " + std::to_string(o.layer)));
      }
  return fmt::format(
      "  {} ({}): {} — {}\n", t, p, fmt::join(each, ", "),
      layers.size() == 1
          ? (*layers.begin() < 0 ? "the learners agree: not decodable"
                                 : fmt::format("the learners agree on layer {}", *layers.begin()))
          : "the learners disagree");
}

}  // namespace

void WriteFamilyReport(std::ostream& os, std::ostream& summary,
                       const std::vector<ProbeResults>& learners, int k, const OnsetRule& rule,
                       TableFormat format) {
  CheckFamily(learners);
  const ProbeResults& first = learners[0];
  if (std::find(first.ks.begin(), first.ks.end(), k) == first.ks.end())
    throw core::InputError("report", "k", "k=" + std::to_string(k) + " was not probed");
  const arma::uword ki = std::find(first.ks.begin(), first.ks.end(), k) - first.ks.begin();
  const std::size_t M = learners.size();
  std::vector<std::unique_ptr<Scorer>> scorers;
  std::vector<std::vector<Onset>> onsets;
  for (std::size_t i = 0; i < M; ++i) {
    scorers.push_back(std::make_unique<Scorer>(learners[i]));
    onsets.push_back(FindOnsets(learners[i], k, rule));
  }
  const std::vector<std::string> names = LearnerNames(learners);
  if (format == TableFormat::kCsv)
    os << "target,probe,layer,k,learners,mean,sd,min,max,learner,r2,lo,hi\n";
  std::ostringstream agreement;
  for (const auto& t : first.targets)
    for (const auto& p : first.probes) {
      if (!first.Find(t, p, "model", "r2")) continue;
      const arma::uword L = first.layers.size();
      arma::mat v(L, M);
      std::vector<std::vector<Scorer::Score>> cell(L, std::vector<Scorer::Score>(M));
      for (arma::uword li = 0; li < L; ++li)
        for (std::size_t i = 0; i < M; ++i) {
          cell[li][i] = scorers[i]->R2(t, p, "model", li, ki);
          v(li, i) = cell[li][i].mean;
        }
      WriteFamilyTable(os, t, p, k, first.layers, names, v, cell, format);
      agreement << OnsetAgreement(t, p, names, onsets);
    }
  summary << fmt::format(
                 "Onset per learner at k = {} ({} learners; each by the single-file "
                 "rule):\n",
                 k, M)
          << agreement.str();
}

PlotFiles PlanPlots(const ProbeResults& r, const std::vector<Onset>& onsets,
                    const OnsetRule& rule) {
  PlotFiles files;
  const int k = onsets.empty() ? r.ks.back() : onsets[0].k;
  const arma::uword ki = std::find(r.ks.begin(), r.ks.end(), k) - r.ks.begin();
  std::ostringstream gp;
  // Every name that reaches the script was checked to be a plain identifier on read
  // (CheckName); it is quoted anyway, so that the script stays data whatever it holds.
  const auto q = GnuplotQuote;
  gp << "# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp\n";
  gp << "set datafile separator ','\nset key outside right top\nset grid\n";
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  const Scorer scorer(r);
  for (const auto& t : r.targets) {
    // R2 against layer with 95% intervals: a line per probe family, controls dashed.
    std::ostringstream dat;
    dat << "layer";
    std::vector<std::pair<std::string, std::string>> series;
    for (const auto& p : r.probes)
      for (const auto& s : r.sources)
        if (r.Find(t, p, s, "r2")) {
          series.emplace_back(p, s);
          dat << fmt::format(",{0}/{1},{0}/{1}_lo,{0}/{1}_hi", p, s);
        }
    dat << "\n";
    // Each series: mean and its 95% interval (the mean twice without per-prompt errors).
    for (arma::uword li = 0; li < r.layers.size(); ++li) {
      dat << r.layers[li];
      for (const auto& [p, s] : series) {
        const Scorer::Score v = scorer.R2(t, p, s, li, ki);
        dat << fmt::format(",{:.6g},{:.6g},{:.6g}", v.mean, v.lo, v.hi);
      }
      dat << "\n";
    }
    files.data[t + "_r2_by_layer.csv"] = dat.str();
    for (const char* term : {"pngcairo size 900,560", "svg size 900,560"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      files.images.push_back(t + "_r2_by_layer." + ext);
      gp << fmt::format("set terminal {}\nset output {}\n", term, q(files.images.back()));
      gp << fmt::format(
          "set title {} noenhanced\nset xlabel 'layer (0 = "
          "embedding)'\n"
          "set ylabel 'R^2'\nset yrange [*:1.05]\nset xtics 1\n",
          q(fmt::format("{}: test R^2 by layer (k = {}){}", t, k,
                        scorer.intervals() ? ", 95% intervals" : "")));
      gp << "plot ";
      for (std::size_t i = 0; i < series.size(); ++i) {
        const auto& [p, s] = series[i];
        const std::size_t pi = std::find(r.probes.begin(), r.probes.end(), p) - r.probes.begin();
        gp << fmt::format(
            "{}{} using 1:{}:{}:{} with yerrorlines lw 2 dt {} lc rgb '{}' title {} noenhanced",
            i ? ", " : "", q(t + "_r2_by_layer.csv"), 3 * i + 2, 3 * i + 3, 3 * i + 4,
            s == "model"
                ? 1
                : 2 + int(std::find(r.sources.begin(), r.sources.end(), s) - r.sources.begin()) % 4,
            colors[pi % 5], q(p + " " + s));
      }
      gp << "\n";
    }
    // Heat map of R2 over (layer, k) for the model, per probe: only the probed k, as labelled
    // rows (row j = the j-th probed k, whatever the gaps between them), one column per layer,
    // tight axes, a perceptually uniform palette (viridis-like: lightness rises monotonically,
    // so it reads in grey), each cell labelled with its R2 and "~" where its 95% interval
    // contains the onset threshold of that k (the cell's side of it is not settled).
    for (const auto& p : r.probes) {
      const arma::cube* c = r.Find(t, p, "model", "r2");
      if (!c) continue;
      std::ostringstream hm;
      hm << "# column row layer k r2 r2_lo r2_hi label\n";
      std::string ytics;
      for (std::size_t kk = 0; kk < r.ks.size(); ++kk) {
        double best = -arma::datum::inf;
        for (arma::uword li = 0; li < r.layers.size(); ++li)
          best = std::max(best, OverSeeds(*c, kk, li).mean);
        const double threshold = rule.threshold >= 0 ? rule.threshold : rule.relative * best;
        for (arma::uword li = 0; li < r.layers.size(); ++li) {
          const Scorer::Score v = scorer.R2(t, p, "model", li, kk);
          const bool open = scorer.intervals() && v.lo < threshold && v.hi >= threshold;
          hm << fmt::format("{} {} {} {} {:.6g} {:.6g} {:.6g} \"{:.2f}{}\"\n", li, kk, r.layers[li],
                            r.ks[kk], v.mean, v.lo, v.hi, v.mean, open ? "~" : "");
        }
        hm << "\n";
        ytics += fmt::format("{}'{}' {}", kk ? ", " : "", r.ks[kk], kk);
      }
      std::string xtics;
      for (arma::uword li = 0; li < r.layers.size(); ++li)
        xtics += fmt::format("{}'{}' {}", li ? ", " : "", r.layers[li], li);
      files.data[t + "_" + p + "_heatmap.dat"] = hm.str();
      const double cols = double(r.layers.size()), rows = double(r.ks.size());
      for (const char* term : {"pngcairo size 800,560", "svg size 800,560"}) {
        const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
        files.images.push_back(t + "_" + p + "_heatmap." + ext);
        gp << fmt::format("set terminal {}\nset output {}\nset datafile separator whitespace\n",
                          term, q(files.images.back()));
        gp << fmt::format(
            "set title {} noenhanced\nset xlabel 'layer (0 = embedding)'\n"
            "set ylabel 'k (examples; probed k only)'\nset xtics ({})\nset ytics ({})\n"
            "set xrange [-0.5:{}]\nset yrange [-0.5:{}]\nset cbrange [0:1]\nset cblabel 'R^2'\n"
            "set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', "
            "1 '#fde725')\nunset key\n"
            "plot {} using 1:2:5 with image, '' using 1:2:8:(($5 > 0.6) ? 0 : 16777215) with "
            "labels "
            "font ',9' tc rgb variable\nset datafile separator ','\nunset xrange\nunset yrange\n"
            "set xtics autofreq\nset ytics autofreq\nunset cblabel\n",
            q(fmt::format(
                "{} ({}): test R^2 over layer and k{}", t, p,
                scorer.intervals() ? "; ~: 95% interval contains the onset threshold" : "")),
            xtics, ytics, cols - 0.5, rows - 0.5, q(t + "_" + p + "_heatmap.dat"));
      }
    }
  }
  // Pooling weights at the onset layer.
  for (const auto& o : onsets) {
    const auto it = r.alpha.find(o.target + "/" + o.probe + "/model");
    if (it == r.alpha.end() || o.layer < 0) continue;
    const arma::uword li = std::find(r.layers.begin(), r.layers.end(), o.layer) - r.layers.begin();
    const arma::vec a = it->second.col(li * r.ks.size() + ki);
    const std::string stem = o.target + "_" + o.probe + "_alpha";
    std::ostringstream dat;
    dat << "position,alpha\n";
    for (arma::uword t = 0; t < a.n_elem; ++t)
      dat << t << "," << a(t) << "\n";
    files.data[stem + ".csv"] = dat.str();
    for (const char* term : {"pngcairo size 800,480", "svg size 800,480"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      files.images.push_back(stem + "." + ext);
      gp << fmt::format(
          "set terminal {}\nset output {}\nset title {} noenhanced\n"
          "set xlabel 'position (state after k examples = 2k-1)'\nset ylabel 'alpha'\nset yrange "
          "[0:*]\nset style fill solid\n"
          "plot {} using 1:2 with boxes lc rgb '#1f77b4' notitle\n",
          term, q(files.images.back()),
          q(fmt::format("{} ({}): pooling weights at layer {}, k = {}", o.target, o.probe, o.layer,
                        o.k)),
          q(stem + ".csv"));
    }
  }
  files.data["plots.gp"] = gp.str();
  return files;
}

std::vector<std::string> PlotFiles::All() const {
  std::vector<std::string> all;
  for (const auto& [name, content] : data)
    all.push_back(name);
  all.insert(all.end(), images.begin(), images.end());
  return all;
}

void WritePlots(const PlotFiles& files, const std::string& dir, const std::string& gnuplot) {
  // Everything goes to a fresh folder inside `dir` first; only when gnuplot succeeded and every
  // image is complete do the files move into `dir`. A full disk leaves no empty image behind.
  std::string pattern = (fs::path(dir) / ".iclprobe-plots-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("plots: cannot create a folder in '" + dir +
                             "': " + std::strerror(errno));
  const std::string tmp = pattern;
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } cleanup{tmp};
  for (const auto& [name, content] : files.data)
    core::WriteFileChecked(tmp + "/" + name, content);
  std::string log;
  const int status = core::RunProgram(gnuplot, {"plots.gp"}, tmp, &log);
  if (status != 0)
    throw std::runtime_error("plots: gnuplot '" + gnuplot + "' failed (exit status " +
                             std::to_string(status) + ")" + (log.empty() ? "" : ": " + log));
  for (const auto& image : files.images) {
    const std::string path = tmp + "/" + image;
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec || size == 0)
      throw std::runtime_error("plots: gnuplot wrote no '" + image + "' (disk full?)" +
                               (log.empty() ? "" : ": " + log));
    // A file cut short by a full disk keeps its header: check how it ends (PNG: the IEND
    // chunk and its CRC; SVG: the closing tag).
    std::ifstream in(path, std::ios::binary);
    const bool png = image.size() > 4 && image.substr(image.size() - 4) == ".png";
    const std::size_t tail = png ? 8 : 16;
    std::string end(tail, '\0');
    in.seekg(-static_cast<std::streamoff>(std::min<std::uintmax_t>(tail, size)), std::ios::end);
    in.read(end.data(), static_cast<std::streamsize>(std::min<std::uintmax_t>(tail, size)));
    const bool complete =
        png ? end.compare(0, 4, "IEND") == 0 : end.find("</svg>") != std::string::npos;
    if (!complete)
      throw std::runtime_error("plots: '" + image + "' written by gnuplot is not a complete " +
                               (png ? "PNG" : "SVG") + " image (disk full?)");
    core::SyncPath(path);
  }
  for (const auto& name : files.All()) {
    std::error_code ec;
    fs::rename(tmp + "/" + name, fs::path(dir) / name, ec);
    if (ec)
      throw std::runtime_error("plots: cannot move '" + name + "' into '" + dir +
                               "': " + ec.message());
  }
  core::SyncPath(dir);
}

}  // namespace icl::analysis
