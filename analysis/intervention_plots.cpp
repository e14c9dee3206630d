// The figures of an interventions file (iclprobe report): slope of the probe edit and of the
// random edit per layer, with the probe's R^2, one figure per k.
#include <fmt/format.h>

#include "core/errors.hpp"

#include <sstream>
#include <stdexcept>

#include "analysis/report.hpp"

namespace icl::analysis {

using intervene::EditSpanName;
using intervene::InterveneResult;
using intervene::InterventionCell;

void PlanInterventionPlots(const InterveneResult& res, PlotFiles& files) {
  const auto q = GnuplotQuote;
  std::string& gp = files.data["plots.gp"];
  if (gp.empty())
    gp = "# gnuplot script written by iclprobe report; rerun with: gnuplot plots.gp\n"
         "set datafile separator ','\nset key outside right top\nset grid\n";
  // The target was checked against the known names on read; it is quoted anyway.
  const std::string& t = res.request.target;
  for (std::size_t ki = 0; ki < res.ks.size(); ++ki) {
    const std::string stem =
        fmt::format("intervene_{}_{}_k{}", t, EditSpanName(res.request.span), res.ks[ki]);
    if (files.data.count(stem + ".csv"))
      throw core::InputError(
          "report", "interventions",
          "two interventions files of " + t + " with edits at " + EditSpanName(res.request.span) +
              " at k = " + std::to_string(res.ks[ki]) + " would draw the same figure");
    std::ostringstream dat;
    dat << "layer,slope,slope_lo,slope_hi,random,random_lo,random_hi,probe_r2\n";
    for (std::size_t li = 0; li < res.layers.size(); ++li) {
      const InterventionCell& c = res.Cell(li, ki);
      dat << fmt::format("{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", c.layer,
                         c.slope(0), c.slope_lo(0), c.slope_hi(0), c.slope(1), c.slope_lo(1),
                         c.slope_hi(1), c.probe_r2);
    }
    files.data[stem + ".csv"] = dat.str();
    for (const char* term : {"pngcairo size 900,560", "svg size 900,560"}) {
      const std::string ext = std::string(term).substr(0, 3) == "png" ? "png" : "svg";
      files.images.push_back(stem + "." + ext);
      gp += fmt::format("set terminal {}\nset output {}\n", term, q(files.images.back()));
      gp += fmt::format(
          "set title {} noenhanced\nset xlabel 'layer (0 = embedding)'\nset ylabel 'slope, R^2'\n"
          "set yrange [*:*]\nset xtics 1\nset key inside top left box opaque\n",
          q(fmt::format("is {} used? edits at {}, k = {}, {} pairs (95% intervals)", t,
                        EditSpanName(res.request.span), res.ks[ki], res.request.pairs)));
      gp += fmt::format(
          "plot {0} using 1:2:3:4 with yerrorlines lw 2 lc rgb '#1f77b4' title 'slope, probe "
          "edit', {0} using 1:5:6:7 with yerrorlines lw 2 dt 2 lc rgb '#7f7f7f' title 'slope, "
          "random direction', {0} using 1:8 with linespoints lw 2 lc rgb '#d62728' title 'ridge "
          "probe R^2'\nset key outside right top noopaque nobox\n",
          q(stem + ".csv"));
    }
  }
}

}  // namespace icl::analysis
