// Probe results as a researcher reads them: error tables by layer, the layer where each
// quantity becomes decodable (onset), and plots through gnuplot.
#pragma once

#include <armadillo>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/trace_file.hpp"
#include "intervene/intervene.hpp"
#include "probes/probes_file.hpp"
#include "probes/uncertainty.hpp"

namespace icl::analysis {

// The probes file's reader is the probes module's (one owner per format).
using probes::ProbeResults;
inline ProbeResults ReadProbeResults(const std::string& path) {
  return probes::ReadProbesFile(path);
}

enum class TableFormat { kMarkdown, kCsv, kLatex };
// "md", "tex" or "csv"; throws core::InputError (setting "format") for anything else.
TableFormat ParseTableFormat(const std::string& name);
// The scores a table shows, named as the probes file stores them: "r2", "nmse" or "mse";
// throws core::InputError (setting "metric") for anything else.
void CheckTableMetric(const std::string& name);

// Mean over seeds with a 95% Student-t interval (half-width 0 for one seed).
struct Summary {
  double mean = 0, half = 0;
};
Summary OverSeeds(const arma::cube& c, arma::uword k_index, arma::uword layer_index);

// Scores of one probes file's cells with 95% intervals. When the file keeps per-prompt test
// errors, intervals are a bootstrap over test prompts (two-stage over seeds), and differences
// (model vs control, layer vs layer) are paired: the same resamples for both sides. Older files
// without errors get the point estimate (lo = hi = mean) and no pairing.
class Scorer {
 public:
  explicit Scorer(const ProbeResults& r);
  bool intervals() const { return boot_ != nullptr; }
  struct Score {
    double mean = 0, lo = 0, hi = 0;
  };
  // R2 of (target, probe, source) at layer index li, k index ki: mean over seeds.
  Score R2(const std::string& t, const std::string& p, const std::string& s, arma::uword li,
           arma::uword ki) const;
  // R2(source a, layer a) - R2(source b, layer b), paired over the same test prompts.
  Score Difference(const std::string& t, const std::string& p, const std::string& sa,
                   arma::uword la, const std::string& sb, arma::uword lb, arma::uword ki) const;
  // R2 of target a - R2 of target b (same probe, source, layer and k), paired: every target of
  // one file is scored on the same test prompts of each seed's split.
  Score TargetDifference(const std::string& ta, const std::string& tb, const std::string& p,
                         const std::string& s, arma::uword li, arma::uword ki) const;
  // sum_i coef_i R2(cell_i) at k index ki, every cell on the same resamples (a difference of
  // differences, say).
  struct Term {
    double coef;
    std::string target, probe, source;
    arma::uword layer_index;
  };
  Score Combination(const std::vector<Term>& terms, arma::uword ki) const;

 private:
  Score Between(const std::string& ta, const std::string& pa, const std::string& sa, arma::uword la,
                const std::string& tb, const std::string& pb, const std::string& sb, arma::uword lb,
                arma::uword ki) const;
  arma::vec Replicates(const std::string& t, const std::string& p, const std::string& s,
                       arma::uword li, arma::uword ki) const;
  const ProbeResults& r_;
  std::shared_ptr<probes::Bootstrap> boot_;
};

struct OnsetRule {
  double threshold = -1;  // absolute R2 threshold; < 0: relative to the best layer
  double relative = 0.9;  // fraction of the best layer's R2 when relative
  double margin = 0.1;    // required selectivity over every control
  // Throws core::InputError naming the setting (threshold, relative, margin).
  void Validate() const;
};

// The onset: the first layer whose R2 (its interval's lower bound, when the file has
// intervals) reaches the threshold and whose paired margin over every control (its lower bound)
// exceeds the rule's margin.
// Below this best R2 (the point estimate), a quantity is called weakly decodable: an onset
// relative to the best layer is found even when the best layer explains little.
inline constexpr double kWeakR2 = 0.5;

struct Onset {
  std::string target, probe;
  int k = 0;
  int n = 0;  // examples per prompt: at k = n the y-token read is the last token, read by nothing
  int layer = -1;        // -1: never
  double threshold = 0;  // the R2 that had to be reached
  double best_r2 = 0;
  int best_layer = 0;
  std::vector<std::pair<std::string, int>>
      controls;  // control -> first layer reaching the threshold (-1 never)
  // With intervals:
  bool intervals = false, has_previous = false;
  Scorer::Score best, at_onset, over_previous;  // R2 at the best and onset layers; onset - (l-1)
  std::vector<std::pair<std::string, Scorer::Score>> margins;  // at the onset layer
  std::vector<int> indistinguishable;  // layers whose paired gap to the best includes 0
};
std::vector<Onset> FindOnsets(const ProbeResults& r, int k, const OnsetRule& rule);
void PrintOnsets(std::ostream& os, const std::vector<Onset>& onsets, const OnsetRule& rule);

// Several probes files of learners of one configuration (same model and task configuration,
// layers, ks, targets and probes; throws core::InputError naming the file otherwise): per
// target and probe, R2 by layer over the learners (mean, SD, range, each learner's value and
// interval) into `tables`; each learner's onset and whether they agree into `summary`.
void WriteFamilyReport(std::ostream& tables, std::ostream& summary,
                       const std::vector<ProbeResults>& learners, int k, const OnsetRule& rule,
                       TableFormat format);

// Which of several targets a layer carries best, where the comparison can discriminate: only
// targets that are functions of the prompt (ceiling 1: w_ols, w_ridge, learner iterates, X'y,
// X'X), read by linear probes (ridge, linear; an MLP computes any of them from a state that
// holds the prompt). The true w is refused: under noise (or k < d) E[w | prompt] = w_ridge at
// the Bayes lambda, so R2(w) = ceiling(w) x R2(w_ridge) for every representation. Per (probe,
// layer): each target's R2 at k, the best, its paired margin over the runner-up, and that
// margin's excess over the same margin at the embedding (layer 0) and in every control source
// (a paired difference of differences). `preferred` when the margin and every excess exclude 0
// (and there is a baseline: never at the embedding itself).
struct TargetComparison {
  std::string probe;
  int k = 0, layer = 0;
  std::vector<std::pair<std::string, Scorer::Score>> r2;  // in the order asked for
  std::string best, runner_up;
  Scorer::Score margin;  // R2(best) - R2(runner-up), paired
  // "embedding" and each control source -> margin here - the same margin there
  std::vector<std::pair<std::string, Scorer::Score>> over_baselines;
  bool intervals = false, significant = false;  // significant: the margin's interval excludes 0
  bool preferred = false;
};
// w_ols, w_ridge and the learner targets of the file at the state (kept in that order) when
// `targets` is empty; throws core::InputError when fewer than two of the asked targets were
// probed with the model source, a target is not a function of the prompt (w), targets of two
// positions are mixed, or no linear probe was fitted to all of them.
std::vector<TargetComparison> CompareTargets(const ProbeResults& r,
                                             std::vector<std::string> targets, int k);
void WriteTargetComparison(std::ostream& os, const std::vector<TargetComparison>& rows,
                           TableFormat format);

// Probe family b against probe family a on the same prompts, the same split and (linear, mlp)
// the same pooling: per target, k and layer, R2 of each and the paired margin R2(b) - R2(a) (the
// same test prompts, the same resamples), and the same margin in every control source, so that
// a gain that any representation shows is not read as the model's. `b_better` / `a_better`
// when the margin's interval excludes 0 (never without intervals).
struct ProbeComparison {
  std::string target, a, b;
  int k = 0, layer = 0;
  Scorer::Score r2_a, r2_b, margin;
  std::vector<std::pair<std::string, Scorer::Score>> controls;  // the margin in each control
  // "embedding" (layer 0) and each control -> the margin here minus the margin there (paired
  // difference of differences): a gain of b that any representation of the prompt shows (the
  // targets are nonlinear in the tokens) is not the model's.
  std::vector<std::pair<std::string, Scorer::Score>> over_baselines;
  bool intervals = false, b_better = false, a_better = false;
  // b better, and by more than at the embedding and in every control (each excess excludes 0).
  bool b_better_beyond_baselines = false;
};
// Throws core::InputError (setting "compare_probes") when a or b is not a probe of the file,
// a == b, a k was not probed, or ridge (the one state after k examples) is compared with a
// linear/MLP probe that pools over positions (the margin would mix pooling with the probe).
std::vector<ProbeComparison> CompareProbes(const ProbeResults& r, const std::string& a,
                                           const std::string& b, const std::vector<int>& ks);
void WriteProbeComparison(std::ostream& os, const std::vector<ProbeComparison>& rows,
                          TableFormat format);
// One line per target and k: the layers where each probe is the significantly better one.
void PrintProbeComparison(std::ostream& os, const std::vector<ProbeComparison>& rows);
// One line per probe: the layers where each target is the significant best, and the ties.
void PrintTargetComparison(std::ostream& os, const std::vector<TargetComparison>& rows);

// Per target: rows = layers, columns = (k, probe, source); cells = metric mean (+- 95% interval).
// Where the probed targets differ (files with /target_maps): per pair and k, the test R2 of the
// best affine map from one target to the other, both ways.
void WriteTargetMaps(std::ostream& os, const ProbeResults& r, const std::vector<int>& ks,
                     TableFormat format);
// The online codelength of the ridge probes (files from probe --codelength; nothing otherwise):
// per target, layer and k the model's bits and compression, and each control's gap.
void WriteCodelengthTables(std::ostream& os, const ProbeResults& r, const std::vector<int>& ks,
                           TableFormat format);
void WriteTables(std::ostream& os, const ProbeResults& r, const std::string& metric,
                 const std::vector<int>& ks, TableFormat format);

// The files of a report's figures: data files and the gnuplot script (name -> content), and
// the images gnuplot makes from them (PNG and SVG).
struct PlotFiles {
  std::map<std::string, std::string> data;
  std::vector<std::string> images;
  std::vector<std::string> All() const;  // every file name, data first
};
// `rule` marks the heat maps' cells: one whose 95% interval contains the onset threshold of
// its k (rule.threshold, or rule.relative x that k's best layer) is labelled "~".
PlotFiles PlanPlots(const ProbeResults& r, const std::vector<Onset>& onsets,
                    const OnsetRule& rule = {});
// Before anything is drawn: creates `dir` if needed and checks that no planned file would
// replace one of the `inputs` or, without `force`, an existing file (with it, anything but a
// regular file). Throws core::InputError (module `stage`, "report" or "compare"; setting
// "plot_dir").
void PreparePlotFolder(const PlotFiles& files, const std::string& dir,
                       const std::vector<std::string>& inputs, bool force,
                       const std::string& stage);
// Adds to `files` a figure per k of an interventions file: the slope of the probe edit and of
// the random edit per layer, with the probe's R^2 (analysis/intervention_plots.cpp).
void PlanInterventionPlots(const intervene::InterveneResult& result, PlotFiles& files);

// A trace file as tables (analysis/trace_report.cpp): per algorithm the best iterate per layer
// with its interval, the margin over the neighbouring iterates, the excess over the control,
// and the rates. Markdown, or with kCsv the per-layer tidy CSV. LaTeX is refused.
void WriteTraceTables(std::ostream& os, const TraceResult& result, TableFormat format);
// Adds per algorithm a heat map of the similarity over (iterate, layer) for the learners (and
// one for the controls) and the "iterate vs layer" curve with 95% intervals, the controls'
// dashed.
void PlanTracePlots(const TraceResult& result, PlotFiles& files);

// Runs `gnuplot` (a path; no shell) over the planned files in a fresh folder inside `dir`, checks
// that every image is complete, then moves every file into `dir`. Throws std::runtime_error
// (nothing moved into `dir`) when gnuplot fails or an image is missing or empty.
void WritePlots(const PlotFiles& files, const std::string& dir, const std::string& gnuplot);

// The numbers of examples `spec` names among those probed in `r`: a comma list of d, n, all
// or numbers (d and n stand for the file's values), in the order given, each once. Throws
// core::InputError (setting "k").
std::vector<int> ResolveKs(const ProbeResults& r, const std::string& spec);

// `text` as a single-quoted gnuplot string (quotes doubled, newlines dropped).
std::string GnuplotQuote(const std::string& text);

}  // namespace icl::analysis
