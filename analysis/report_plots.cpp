// The report's figures: the plot folder's checks, the gnuplot script and its data
// (R2 by layer, heat maps over layer and k, pooling weights), and running gnuplot.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "core/errors.hpp"
#include "core/output.hpp"
#include "core/subprocess.hpp"

namespace icl::analysis {

namespace fs = std::filesystem;

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

// R2 against layer with 95% intervals: a line per probe family, controls dashed.
void PlotR2ByLayer(PlotFiles& files, std::ostream& gp, const ProbeResults& r, const Scorer& scorer,
                   const std::string& t, int k, arma::uword ki) {
  const auto q = GnuplotQuote;
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
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
}

// Heat map of R2 over (layer, k) for the model, per probe: only the probed k, as labelled
// rows (row j = the j-th probed k, whatever the gaps between them), one column per layer,
// tight axes, a perceptually uniform palette (viridis-like: lightness rises monotonically,
// so it reads in grey), each cell labelled with its R2 and "~" where its 95% interval
// contains the onset threshold of that k (the cell's side of it is not settled).
void PlotHeatmap(PlotFiles& files, std::ostream& gp, const ProbeResults& r, const Scorer& scorer,
                 const OnsetRule& rule, const std::string& t, const std::string& p,
                 const arma::cube& c) {
  const auto q = GnuplotQuote;
  std::ostringstream hm;
  hm << "# column row layer k r2 r2_lo r2_hi label\n";
  std::string ytics;
  for (std::size_t kk = 0; kk < r.ks.size(); ++kk) {
    double best = -arma::datum::inf;
    for (arma::uword li = 0; li < r.layers.size(); ++li)
      best = std::max(best, OverSeeds(c, kk, li).mean);
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
    gp << fmt::format("set terminal {}\nset output {}\nset datafile separator whitespace\n", term,
                      q(files.images.back()));
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
        q(fmt::format("{} ({}): test R^2 over layer and k{}", t, p,
                      scorer.intervals() ? "; ~: 95% interval contains the onset threshold" : "")),
        xtics, ytics, cols - 0.5, rows - 0.5, q(t + "_" + p + "_heatmap.dat"));
  }
}

// Pooling weights at the onset layer.
void PlotPoolingWeights(PlotFiles& files, std::ostream& gp, const ProbeResults& r, const Onset& o,
                        arma::uword ki) {
  const auto q = GnuplotQuote;
  const auto it = r.alpha.find(o.target + "/" + o.probe + "/model");
  if (it == r.alpha.end() || o.layer < 0) return;
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

}  // namespace

PlotFiles PlanPlots(const ProbeResults& r, const std::vector<Onset>& onsets,
                    const OnsetRule& rule) {
  PlotFiles files;
  const int k = onsets.empty() ? r.ks.back() : onsets[0].k;
  const arma::uword ki = std::find(r.ks.begin(), r.ks.end(), k) - r.ks.begin();
  std::ostringstream gp;
  // Every name that reaches the script was checked to be a plain identifier on read
  // (CheckName); it is quoted anyway, so that the script stays data whatever it holds.
  gp << "# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp\n";
  gp << "set datafile separator ','\nset key outside right top\nset grid\n";
  const Scorer scorer(r);
  for (const auto& t : r.targets) {
    PlotR2ByLayer(files, gp, r, scorer, t, k, ki);
    for (const auto& p : r.probes)
      if (const arma::cube* c = r.Find(t, p, "model", "r2"))
        PlotHeatmap(files, gp, r, scorer, rule, t, p, *c);
  }
  for (const auto& o : onsets)
    PlotPoolingWeights(files, gp, r, o, ki);
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
