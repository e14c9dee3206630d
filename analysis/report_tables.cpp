// The probe tables (Markdown, LaTeX, CSV): R2 by layer, maps between targets, codelengths.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <algorithm>

#include "analysis/report_text.hpp"
#include "core/errors.hpp"

namespace icl::analysis {

std::string Escape(const std::string& s, TableFormat f) {
  if (f != TableFormat::kLatex) return s;
  std::string o;
  for (char c : s)
    o += (c == '_' ? std::string("\\_") : std::string(1, c));
  return o;
}

namespace {

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
  CheckTableMetric(metric);  // an unknown one would find no cells and print empty tables
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

}  // namespace icl::analysis
