// A trace file as a researcher reads it (iclprobe report --trace): tables of the best iterate per
// layer and the rates, heat maps of the similarity and Fu et al.'s "iterate vs layer" curve.
#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "analysis/report.hpp"
#include "core/errors.hpp"

namespace icl::analysis {

namespace {

std::string Interval(double v, double lo, double hi, const char* f) {
  if (!std::isfinite(v)) return "—";
  const auto one = [&](double x) {
    return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : std::string("—");
  };
  return one(v) + " [" + one(lo) + ", " + one(hi) + "]";
}

// A spec as a file name: every character outside [A-Za-z0-9.-] becomes '_'.
std::string FileStem(const std::string& spec) {
  std::string s = spec;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return "trace_" + s;
}

}  // namespace

void WriteTraceTables(std::ostream& os, const TraceResult& r, TableFormat format) {
  if (format == TableFormat::kLatex)
    throw core::InputError("report", "format", "a trace file is tabulated as md or csv");
  if (format == TableFormat::kCsv) {
    WriteTraceLayersCsv(os, r);
    return;
  }
  os << fmt::format(
      "## Which iterate at which layer\n\n{} learner(s){}, {} readout, {} prompts (seed {}), "
      "k = {}..{}; intervals: 95% two-stage bootstrap over seeds and prompts ({} "
      "replicates).\n\n",
      r.learners.size(),
      r.HasControls() ? fmt::format(" against {} control(s)", r.controls.size()) : "",
      ReadoutName(r.request.readout), r.request.prompts, r.prompt_seed, r.request.ks.front(),
      r.request.ks.back(), r.request.bootstrap);
  for (const auto& a : r.algorithms) {
    const IterateMatch& m = a.model;
    os << "### " << a.algorithm.spec << "\n\n| layer | best iterate [95%] | spd of best [95%] | "
       << "margin over neighbours [95%]";
    if (r.HasControls()) os << " | control's best iterate | excess over control [95%]";
    os << " |\n|---:|---|---|---|" << (r.HasControls() ? "---:|---|" : "") << "\n";
    for (arma::uword l = 0; l < m.best.n_elem; ++l) {
      os << fmt::format("| {} | {:g} [{:g}, {:g}] | {} | {}", r.request.layers[l], m.best(l),
                        m.best_lo(l), m.best_hi(l),
                        Interval(m.best_spd(l), m.best_spd_lo(l), m.best_spd_hi(l), "{:.3f}"),
                        Interval(m.margin(l), m.margin_lo(l), m.margin_hi(l), "{:+.3f}"));
      if (r.HasControls())
        os << fmt::format(" | {:g} | {}", a.control.best(l),
                          Interval(m.excess(l), m.excess_lo(l), m.excess_hi(l), "{:+.3f}"));
      os << " |\n";
    }
    os << fmt::format(
        "\nRate over the {} layers whose best iterate lies inside 1..{}: {} "
        "iterations per layer, {} doublings per layer.",
        m.rate_layers, a.algorithm.steps - 1, Interval(m.rate, m.rate_lo, m.rate_hi, "{:.3g}"),
        Interval(m.log2_rate, m.log2_rate_lo, m.log2_rate_hi, "{:.3g}"));
    if (r.HasControls())
      os << fmt::format(" Controls: {} iterations per layer over {} layers.",
                        Interval(a.control.rate, a.control.rate_lo, a.control.rate_hi, "{:.3g}"),
                        a.control.rate_layers);
    os << "\n\n";
  }
}

void PlanTracePlots(const TraceResult& r, PlotFiles& files) {
  const auto q = GnuplotQuote;
  std::string& gp = files.data["plots.gp"];
  if (gp.empty())
    gp = "# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp\n"
         "set datafile separator ','\nset key outside right top\nset grid\n";
  const std::string readout = ReadoutName(r.request.readout);
  for (const auto& a : r.algorithms) {
    // The spec was parsed back on read (numbers and a known family only); quoted anyway.
    const std::string& spec = a.algorithm.spec;
    const std::string stem = FileStem(spec);
    const int T = a.algorithm.steps;
    // Heat maps: the learners' and the controls' distance to each iterate over (iterate, layer),
    // as log10(1 - similarity) (1 - spd is the normalised squared distance; near the top layers
    // every late iterate is within a few percent, which a linear colour scale would hide). GD's
    // iterates on a log axis (iterate t + 1: its matches grow exponentially with depth).
    const bool log_x = a.algorithm.family == "gd" || a.algorithm.family == "sgd";
    std::vector<std::pair<std::string, const IterateMatch*>> maps = {{"learner", &a.model}};
    if (r.HasControls()) maps.emplace_back("control", &a.control);
    for (const auto& [who, m] : maps) {
      std::ostringstream hm;
      hm << "# iterate row layer spd log10_distance\n";
      // pm3d colours the quad between grid points: one more row and column than cells, each
      // cell's value at its lower-left corner (corners2color c1).
      const arma::uword L1 = m->spd.n_rows, T1 = m->spd.n_cols;
      for (arma::uword l = 0; l <= L1; ++l) {
        for (arma::uword t = 0; t <= T1; ++t) {
          const double v = m->spd(std::min(l, L1 - 1), std::min(t, T1 - 1));
          const double x = log_x ? double(t) + 0.5 : double(t) - 0.5;
          hm << fmt::format("{} {} {} {:.6g} {:.4f}\n", x, double(l) - 0.5,
                            r.request.layers[std::min(l, L1 - 1)], v,
                            std::log10(std::max(1.0 - v, 1e-4)));
        }
        hm << "\n";
      }
      const std::string name = stem + "_" + who + "_heatmap";
      files.data[name + ".dat"] = hm.str();
      std::string ytics;
      for (std::size_t l = 0; l < r.request.layers.size(); ++l)
        ytics += fmt::format("{}'{}' {}", l ? ", " : "", r.request.layers[l], l);
      for (const char* term : {"pngcairo size 900,560", "svg size 900,560"}) {
        const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
        files.images.push_back(name + "." + ext);
        gp += fmt::format(
            "set terminal {}\nset output {}\nset datafile separator whitespace\n"
            "set title {} noenhanced\nset xlabel {}\nset ylabel 'layer (0 = embedding)' offset "
            "-3,0\n"
            "set lmargin 12\nset xtics autofreq\nset ytics ({})\n{}set xrange [{}:{}]\nset yrange "
            "[-0.5:{}]\n"
            "set cbrange [-4:0]\nset cblabel 'log10(1 - similarity): lower = closer'\n"
            "set palette defined (0 '#fde725', 0.25 '#5ec962', 0.5 '#21918c', 0.75 '#3b528b', "
            "1 '#440154')\nunset key\nset view map\nset pm3d map corners2color c1\n"
            "splot {} using 1:2:5 with pm3d\nunset pm3d\nset view 60,30\nunset logscale x\n"
            "set datafile separator ','\nunset xrange\nunset yrange\nset ytics autofreq\n"
            "unset cblabel\nunset lmargin\nset ylabel offset 0,0\n",
            term, q(files.images.back()),
            q(fmt::format("{} of {} ({} readout): distance of each layer to each iterate",
                          who == "learner" ? "learners" : "controls", spec, readout)),
            q(log_x ? "iterate t (log scale, iterate 0 at 0.5)" : "iterate t"), ytics,
            log_x ? "set logscale x 2\n" : "unset logscale x\n", log_x ? 0.5 : -0.5,
            T + 0.5 + (log_x ? 1.0 : 0.0), double(r.request.layers.size()) - 0.5, q(name + ".dat"));
      }
    }
    // The curve: best iterate per layer with its interval, learners and controls.
    std::ostringstream dat;
    dat << "layer,best,best_lo,best_hi,control,control_lo,control_hi\n";
    for (arma::uword l = 0; l < a.model.best.n_elem; ++l) {
      dat << fmt::format("{},{:g},{:g},{:g}", r.request.layers[l], a.model.best(l),
                         a.model.best_lo(l), a.model.best_hi(l));
      if (r.HasControls())
        dat << fmt::format(",{:g},{:g},{:g}", a.control.best(l), a.control.best_lo(l),
                           a.control.best_hi(l));
      else
        dat << ",,,";
      dat << "\n";
    }
    files.data[stem + "_curve.csv"] = dat.str();
    // GD matched to a second-order method grows exponentially with depth: log scale (iterate 0,
    // nothing computed yet, is then off the axis).
    const bool log_scale = a.algorithm.family == "gd";
    for (const char* term : {"pngcairo size 900,560", "svg size 900,560"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      files.images.push_back(stem + "_curve." + ext);
      gp += fmt::format("set terminal {}\nset output {}\n", term, q(files.images.back()));
      gp += fmt::format(
          "set title {} noenhanced\nset xlabel 'layer (0 = embedding)'\nset ylabel 'best "
          "iterate{}'\n{}set yrange [{}:{}]\nset xtics 1\nset key inside top left box opaque\n",
          q(fmt::format("{}: best-matching iterate per layer ({} readout; 95% intervals)", spec,
                        readout)),
          log_scale ? " (log scale; 0 not shown)" : "",
          log_scale ? "set logscale y 2\n" : "unset logscale y\n", log_scale ? "0.8" : "-0.5",
          T + 0.5);
      gp += fmt::format(
          "plot {0} using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title "
          "'learners'{1}\nunset logscale y\nunset yrange\n"
          "set key outside right top noopaque nobox\n",
          q(stem + "_curve.csv"),
          r.HasControls() ? fmt::format(", {} using 1:5:6:7 with yerrorlines lw 2 "
                                        "dt 2 lc rgb '#7f7f7f' title 'controls'",
                                        q(stem + "_curve.csv"))
                          : "");
    }
  }
}

}  // namespace icl::analysis
