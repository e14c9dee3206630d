// Probe tables, onset detection and gnuplot figures.
#include "analysis/report.hpp"
#include "data/errors.hpp"

#include <fmt/format.h>
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

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/hdf5.hpp"
#include "data/json.hpp"
#include "data/names.hpp"
#include "data/output.hpp"
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

int RunProgram(const std::string& program, const std::vector<std::string>& args,
               const std::string& workdir, std::string* output) {
  // fork/exec: no shell between us and the program, so no argument or folder name is parsed
  // as a command. Its stdout and stderr go to a file we read back for the message.
  const std::string log_path = workdir + "/.program-output";
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start '" + program + "': " + std::strerror(errno));
  if (pid == 0) {
    if (::chdir(workdir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(".program-output", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("cannot wait for '" + program + "'");
  if (output) {
    std::ifstream in(log_path);
    std::string line;
    while (std::getline(in, line) && output->size() < 300)
      *output += (output->empty() ? "" : " ") + line;
  }
  std::error_code ec;
  fs::remove(log_path, ec);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
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
        throw data::InputError("report", "k",
                               "k=" + std::to_string(k) + " was not probed in '" + r.path + "'");
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

PlotFiles PlanPlots(const ProbeResults& r, const std::vector<Onset>& onsets) {
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
  for (const auto& t : r.targets) {
    // R2 against layer: a line per probe family, controls dashed.
    std::ostringstream dat;
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
    files.data[t + "_r2_by_layer.csv"] = dat.str();
    for (const char* term : {"pngcairo size 900,560", "svg size 900,560"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      files.images.push_back(t + "_r2_by_layer." + ext);
      gp << fmt::format("set terminal {}\nset output {}\n", term, q(files.images.back()));
      gp << fmt::format(
          "set title {} noenhanced\nset xlabel 'layer (0 = "
          "embedding)'\n"
          "set ylabel 'R^2'\nset yrange [*:1.05]\nset xtics 1\n",
          q(fmt::format("{}: test R^2 by layer (k = {})", t, k)));
      gp << "plot ";
      for (std::size_t i = 0; i < series.size(); ++i) {
        const auto& [p, s] = series[i];
        const std::size_t pi = std::find(r.probes.begin(), r.probes.end(), p) - r.probes.begin();
        gp << fmt::format(
            "{}{} using 1:{} with linespoints lw 2 dt {} lc rgb '{}' title {} noenhanced",
            i ? ", " : "", q(t + "_r2_by_layer.csv"), i + 2,
            s == "model"
                ? 1
                : 2 + int(std::find(r.sources.begin(), r.sources.end(), s) - r.sources.begin()) % 4,
            colors[pi % 5], q(p + " " + s));
      }
      gp << "\n";
    }
    // Heatmap of R2 over (layer, k) for the model, per probe.
    for (const auto& p : r.probes) {
      const arma::cube* c = r.Find(t, p, "model", "r2");
      if (!c) continue;
      std::ostringstream hm;
      for (std::size_t kk = 0; kk < r.ks.size(); ++kk) {
        for (arma::uword li = 0; li < r.layers.size(); ++li)
          hm << r.layers[li] << " " << r.ks[kk] << " " << OverSeeds(*c, kk, li).mean << "\n";
        hm << "\n";
      }
      files.data[t + "_" + p + "_heatmap.dat"] = hm.str();
      for (const char* term : {"pngcairo size 800,560", "svg size 800,560"}) {
        const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
        files.images.push_back(t + "_" + p + "_heatmap." + ext);
        gp << fmt::format("set terminal {}\nset output {}\nset datafile separator whitespace\n",
                          term, q(files.images.back()));
        gp << fmt::format(
            "set title {} noenhanced\nset xlabel 'layer'\nset "
            "ylabel 'k (examples)'\n"
            "set yrange [*:*]\nset cbrange [0:1]\nset palette rgb 33,13,10\nset view map\n"
            "plot {} using 1:2:3 with image notitle\nset datafile separator ','\n",
            q(fmt::format("{} ({}): test R^2 over layer and k", t, p)),
            q(t + "_" + p + "_heatmap.dat"));
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
    throw std::runtime_error("report: cannot create a folder in '" + dir +
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
    data::WriteFileChecked(tmp + "/" + name, content);
  std::string log;
  const int status = RunProgram(gnuplot, {"plots.gp"}, tmp, &log);
  if (status != 0)
    throw std::runtime_error("report: gnuplot '" + gnuplot + "' failed (exit status " +
                             std::to_string(status) + ")" + (log.empty() ? "" : ": " + log));
  for (const auto& image : files.images) {
    const std::string path = tmp + "/" + image;
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec || size == 0)
      throw std::runtime_error("report: gnuplot wrote no '" + image + "' (disk full?)" +
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
      throw std::runtime_error("report: '" + image + "' written by gnuplot is not a complete " +
                               (png ? "PNG" : "SVG") + " image (disk full?)");
    data::SyncPath(path);
  }
  for (const auto& name : files.All()) {
    std::error_code ec;
    fs::rename(tmp + "/" + name, fs::path(dir) / name, ec);
    if (ec)
      throw std::runtime_error("report: cannot move '" + name + "' into '" + dir +
                               "': " + ec.message());
  }
  data::SyncPath(dir);
}

}  // namespace icl::analysis
