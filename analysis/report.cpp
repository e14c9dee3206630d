// Probe tables, onset detection and gnuplot figures.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "data/hdf5.hpp"
#include "data/prompt_io.hpp"

namespace icl::analysis {

namespace fs = std::filesystem;

const arma::cube* ProbeResults::Find(const std::string& t, const std::string& p,
                                     const std::string& s, const std::string& m) const {
  const auto it = metric.find(t + "/" + p + "/" + s + "/" + m);
  return it == metric.end() ? nullptr : &it->second;
}

ProbeResults ReadProbeResults(const std::string& path) {
  const h5::File f = h5::File::Open(path);
  data::CheckFormat(f, "iclprobe-probes");
  ProbeResults r;
  r.path = path;
  const auto task = nlohmann::json::parse(f.GetString("task_config"));
  r.d = task.at("d").get<int>();
  r.n = task.at("n").get<int>();
  r.layers = nlohmann::json::parse(f.GetString("layers")).get<std::vector<int>>();
  r.ks = nlohmann::json::parse(f.GetString("ks")).get<std::vector<int>>();
  r.seeds = static_cast<int>(f.GetInt("seeds"));
  r.sources = nlohmann::json::parse(f.GetString("sources")).get<std::vector<std::string>>();
  const hsize_t L = r.layers.size(), K = r.ks.size(), S = r.seeds;
  if (!f.Exists("metrics")) throw std::invalid_argument("'" + path + "': no /metrics group");
  for (const auto& t : f.OpenGroup("metrics").Members()) {
    r.targets.push_back(t);
    for (const auto& p : f.OpenGroup("metrics/" + t).Members()) {
      if (std::find(r.probes.begin(), r.probes.end(), p) == r.probes.end()) r.probes.push_back(p);
      for (const auto& s : f.OpenGroup("metrics/" + t + "/" + p).Members())
        for (const char* m : {"mse", "nmse", "r2"}) {
          const h5::Dataset ds = f.OpenDataset("metrics/" + t + "/" + p + "/" + s + "/" + m);
          ds.ExpectDims({L, K, S});
          arma::cube c(S, K, L);  // column-major (seed, k, layer) == row-major [L, K, S]
          ds.Read(c.memptr());
          r.metric[t + "/" + p + "/" + s + "/" + m] = std::move(c);
        }
    }
  }
  // Canonical probe order.
  std::vector<std::string> order;
  for (const char* p : {"ridge", "linear", "mlp"})
    if (std::find(r.probes.begin(), r.probes.end(), p) != r.probes.end()) order.push_back(p);
  r.probes = order;
  if (f.Exists("alpha"))
    for (const auto& t : f.OpenGroup("alpha").Members())
      for (const auto& p : f.OpenGroup("alpha/" + t).Members())
        for (const auto& s : f.OpenGroup("alpha/" + t + "/" + p).Members()) {
          const h5::Dataset ds = f.OpenDataset("alpha/" + t + "/" + p + "/" + s);
          const auto dims = ds.dims();  // [L, K, S, T]
          const std::vector<double> raw = ds.ReadAll<double>();
          const hsize_t T = dims.at(3);
          arma::mat a(T, L * K, arma::fill::zeros);
          for (hsize_t cell = 0; cell < L * K; ++cell)
            for (hsize_t s = 0; s < S; ++s)
              for (hsize_t t = 0; t < T; ++t)
                a(t, cell) += raw[(cell * S + s) * T + t] / double(S);
          r.alpha[t + "/" + p + "/" + s] = std::move(a);
        }
  return r;
}

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

std::vector<Onset> FindOnsets(const ProbeResults& r, int k, const OnsetRule& rule) {
  const auto kit = std::find(r.ks.begin(), r.ks.end(), k);
  if (kit == r.ks.end())
    throw std::invalid_argument("report: k=" + std::to_string(k) + " was not probed");
  const arma::uword ki = kit - r.ks.begin();
  std::vector<Onset> out;
  for (const auto& t : r.targets)
    for (const auto& p : r.probes) {
      const arma::cube* model = r.Find(t, p, "model", "r2");
      if (!model) continue;
      Onset o;
      o.target = t;
      o.probe = p;
      o.k = k;
      o.best_r2 = -arma::datum::inf;
      for (arma::uword li = 0; li < r.layers.size(); ++li) {
        const double v = OverSeeds(*model, ki, li).mean;
        if (v > o.best_r2) o.best_r2 = v, o.best_layer = r.layers[li];
      }
      o.threshold = rule.threshold >= 0 ? rule.threshold : rule.relative * o.best_r2;
      for (arma::uword li = 0; li < r.layers.size() && o.layer < 0; ++li) {
        const double v = OverSeeds(*model, ki, li).mean;
        if (v < o.threshold || v <= 0) continue;
        bool selective = true;
        for (std::size_t s = 1; s < r.sources.size(); ++s) {
          const arma::cube* c = r.Find(t, p, r.sources[s], "r2");
          if (c && v - OverSeeds(*c, ki, li).mean <= rule.margin) selective = false;
        }
        if (selective) o.layer = r.layers[li];
      }
      for (std::size_t s = 1; s < r.sources.size(); ++s) {
        const arma::cube* c = r.Find(t, p, r.sources[s], "r2");
        if (!c) continue;
        int first = -1;
        for (arma::uword li = 0; li < r.layers.size() && first < 0; ++li)
          if (OverSeeds(*c, ki, li).mean >= o.threshold && o.threshold > 0) first = r.layers[li];
        o.controls.emplace_back(r.sources[s], first);
      }
      out.push_back(o);
    }
  return out;
}

void PrintOnsets(std::ostream& os, const std::vector<Onset>& onsets, const OnsetRule& rule) {
  if (onsets.empty()) return;
  os << fmt::format(
      "Decodability onset at k = {} (rule: R2 >= {} and selectivity > {:g} over every control):\n",
      onsets[0].k,
      rule.threshold >= 0
          ? fmt::format("{:g}", rule.threshold)
          : fmt::format("{:g} x the best layer's R2 of that target and probe", rule.relative),
      rule.margin);
  std::set<std::string> targets;
  for (const auto& o : onsets)
    targets.insert(o.target);
  for (const auto& t : std::vector<std::string>(targets.begin(), targets.end())) {
    std::vector<std::string> found, missing;
    std::map<std::string, std::vector<std::string>> control;
    for (const auto& o : onsets) {
      if (o.target != t) continue;
      const std::string best = fmt::format("best R2 {:.3f} at layer {}", o.best_r2, o.best_layer);
      if (o.layer >= 0)
        found.push_back(fmt::format("layer {} ({}, {})", o.layer, o.probe, best));
      else
        missing.push_back(fmt::format("{} ({})", o.probe, best));
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
  for (const auto& t : r.targets) {
    std::vector<Column> cols;
    for (int k : ks) {
      const auto kit = std::find(r.ks.begin(), r.ks.end(), k);
      if (kit == r.ks.end())
        throw std::invalid_argument("--k: k=" + std::to_string(k) + " was not probed in '" +
                                    r.path + "'");
      for (const auto& p : r.probes)
        for (const auto& s : r.sources)
          if (const arma::cube* c = r.Find(t, p, s, metric))
            cols.push_back({k, arma::uword(kit - r.ks.begin()), p, s, c});
    }
    auto cell = [&](const Column& c, arma::uword li) {
      const Summary s = OverSeeds(*c.c, c.ki, li);
      if (r.seeds == 1) return fmt::format("{:.3f}", s.mean);
      return format == TableFormat::kLatex ? fmt::format("{:.3f} $\\pm$ {:.3f}", s.mean, s.half)
                                           : fmt::format("{:.3f} ± {:.3f}", s.mean, s.half);
    };
    if (format == TableFormat::kCsv) {
      for (const auto& c : cols)
        for (arma::uword li = 0; li < r.layers.size(); ++li) {
          const Summary s = OverSeeds(*c.c, c.ki, li);
          os << fmt::format("{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{}\n", t, c.probe, c.source,
                            r.layers[li], c.k, metric, s.mean, s.mean - s.half, s.mean + s.half,
                            r.seeds);
        }
      continue;
    }
    const std::string label = MetricLabel(metric, format);
    const std::string note =
        r.seeds > 1 ? fmt::format(", mean ± 95% interval over {} seeds", r.seeds) : "";
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

bool WritePlots(const ProbeResults& r, const std::vector<Onset>& onsets, const std::string& dir,
                const std::string& gnuplot) {
  fs::create_directories(dir);
  const int k = onsets.empty() ? r.ks.back() : onsets[0].k;
  const arma::uword ki = std::find(r.ks.begin(), r.ks.end(), k) - r.ks.begin();
  std::ofstream gp(dir + "/plots.gp");
  gp << "# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp\n";
  gp << "set datafile separator ','\nset key outside right top\nset grid\n";
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  for (const auto& t : r.targets) {
    // R2 against layer: a line per probe family, controls dashed.
    std::ofstream dat(dir + "/" + t + "_r2_by_layer.csv");
    dat << "layer";
    std::vector<std::pair<std::string, std::string>> series;
    for (const auto& p : r.probes)
      for (const auto& s : r.sources)
        if (r.Find(t, p, s, "r2")) series.emplace_back(p, s), dat << "," << p << "/" << s;
    dat << "\n";
    for (arma::uword li = 0; li < r.layers.size(); ++li) {
      dat << r.layers[li];
      for (const auto& [p, s] : series)
        dat << fmt::format(",{:.6g}", OverSeeds(*r.Find(t, p, s, "r2"), ki, li).mean);
      dat << "\n";
    }
    for (const char* term : {"pngcairo size 900,560", "svg size 900,560"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      gp << fmt::format("set terminal {}\nset output '{}_r2_by_layer.{}'\n", term, t, ext);
      gp << fmt::format(
          "set title '{}: test R^2 by layer (k = {})' noenhanced\nset xlabel 'layer (0 = "
          "embedding)'\n"
          "set ylabel 'R^2'\nset yrange [*:1.05]\nset xtics 1\n",
          t, k);
      gp << "plot ";
      for (std::size_t i = 0; i < series.size(); ++i) {
        const auto& [p, s] = series[i];
        const std::size_t pi = std::find(r.probes.begin(), r.probes.end(), p) - r.probes.begin();
        gp << fmt::format(
            "{}'{}_r2_by_layer.csv' using 1:{} with linespoints lw 2 dt {} lc rgb '{}' title '{} "
            "{}' noenhanced",
            i ? ", " : "", t, i + 2,
            s == "model"
                ? 1
                : 2 + int(std::find(r.sources.begin(), r.sources.end(), s) - r.sources.begin()) % 4,
            colors[pi % 5], p, s);
      }
      gp << "\n";
    }
    // Heatmap of R2 over (layer, k) for the model, per probe.
    for (const auto& p : r.probes) {
      const arma::cube* c = r.Find(t, p, "model", "r2");
      if (!c) continue;
      std::ofstream hm(dir + "/" + t + "_" + p + "_heatmap.dat");
      for (std::size_t kk = 0; kk < r.ks.size(); ++kk) {
        for (arma::uword li = 0; li < r.layers.size(); ++li)
          hm << r.layers[li] << " " << r.ks[kk] << " " << OverSeeds(*c, kk, li).mean << "\n";
        hm << "\n";
      }
      for (const char* term : {"pngcairo size 800,560", "svg size 800,560"}) {
        const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
        gp << fmt::format(
            "set terminal {}\nset output '{}_{}_heatmap.{}'\nset datafile separator whitespace\n",
            term, t, p, ext);
        gp << fmt::format(
            "set title '{} ({}): test R^2 over layer and k' noenhanced\nset xlabel 'layer'\nset "
            "ylabel 'k (examples)'\n"
            "set yrange [*:*]\nset cbrange [0:1]\nset palette rgb 33,13,10\nset view map\n"
            "plot '{}_{}_heatmap.dat' using 1:2:3 with image notitle\nset datafile separator ','\n",
            t, p, t, p);
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
    std::ofstream dat(dir + "/" + stem + ".csv");
    dat << "position,alpha\n";
    for (arma::uword t = 0; t < a.n_elem; ++t)
      dat << t << "," << a(t) << "\n";
    for (const char* term : {"pngcairo size 800,480", "svg size 800,480"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      gp << fmt::format(
          "set terminal {}\nset output '{}.{}'\nset title '{} ({}): pooling weights at layer {}, k "
          "= {}' noenhanced\n"
          "set xlabel 'position (state after k examples = 2k-1)'\nset ylabel 'alpha'\nset yrange "
          "[0:*]\nset style fill solid\n"
          "plot '{}.csv' using 1:2 with boxes lc rgb '#1f77b4' notitle\n",
          term, stem, ext, o.target, o.probe, o.layer, o.k, stem);
    }
  }
  gp.close();
  const std::string cmd = "cd '" + dir + "' && '" + gnuplot + "' plots.gp >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace icl::analysis
