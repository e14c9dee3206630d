// Probe results as a researcher reads them: error tables by layer, the layer where each
// quantity becomes decodable (onset), and plots through gnuplot.
#pragma once

#include <armadillo>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "probes/probes_file.hpp"

namespace icl::analysis {

// The probes file's reader is the probes module's (one owner per format).
using probes::ProbeResults;
inline ProbeResults ReadProbeResults(const std::string& path) {
  return probes::ReadProbesFile(path);
}

// Mean over seeds with a 95% Student-t interval (half-width 0 for one seed).
struct Summary {
  double mean = 0, half = 0;
};
Summary OverSeeds(const arma::cube& c, arma::uword k_index, arma::uword layer_index);

struct OnsetRule {
  double threshold = -1;  // absolute R2 threshold; < 0: relative to the best layer
  double relative = 0.9;  // fraction of the best layer's R2 when relative
  double margin = 0.1;    // required selectivity over every control
};

struct Onset {
  std::string target, probe;
  int k = 0;
  int layer = -1;        // -1: never
  double threshold = 0;  // the R2 that had to be reached
  double best_r2 = 0;
  int best_layer = 0;
  std::vector<std::pair<std::string, int>>
      controls;  // control -> first layer reaching the threshold (-1 never)
};
std::vector<Onset> FindOnsets(const ProbeResults& r, int k, const OnsetRule& rule);
void PrintOnsets(std::ostream& os, const std::vector<Onset>& onsets, const OnsetRule& rule);

enum class TableFormat { kMarkdown, kCsv, kLatex };
// Per target: rows = layers, columns = (k, probe, source); cells = metric mean (+- 95% interval).
void WriteTables(std::ostream& os, const ProbeResults& r, const std::string& metric,
                 const std::vector<int>& ks, TableFormat format);

// The files of a report's figures: data files and the gnuplot script (name -> content), and
// the images gnuplot makes from them (PNG and SVG).
struct PlotFiles {
  std::map<std::string, std::string> data;
  std::vector<std::string> images;
  std::vector<std::string> All() const;  // every file name, data first
};
PlotFiles PlanPlots(const ProbeResults& r, const std::vector<Onset>& onsets);

// Runs `gnuplot` (a path; no shell) over the planned files in a fresh folder inside `dir`, checks
// that every image is complete, then moves every file into `dir`. Throws std::runtime_error
// (nothing moved into `dir`) when gnuplot fails or an image is missing or empty.
void WritePlots(const PlotFiles& files, const std::string& dir, const std::string& gnuplot);

// `text` as a single-quoted gnuplot string (quotes doubled, newlines dropped).
std::string GnuplotQuote(const std::string& text);
// Runs `program` with `args` in `workdir` (fork/exec, no shell); returns its exit status and
// puts the start of what it printed in `output`.
int RunProgram(const std::string& program, const std::vector<std::string>& args,
               const std::string& workdir, std::string* output);

}  // namespace icl::analysis
