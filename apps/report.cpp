// iclprobe report: probe error tables (Markdown, LaTeX, CSV), decodability onset and plots.
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/report.hpp"
#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "core/output.hpp"
#include "core/subprocess.hpp"
#include "intervene/intervene.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct ReportArgs {
  std::vector<std::string> probes_files, interventions, traces;
  std::string format = "md", metric = "r2", k_option = "d,n", plot_dir, out, compare,
              compare_probes;
  analysis::OnsetRule rule;
  bool force = false;
  std::vector<std::string> inputs;  // every file read (InputPaths): never replaced
};

void DeclareReportOptions(OptionTable& t, ReportArgs& a) {
  // clang-format off
  t.List("probes", &a.probes_files, "probes_files", "probes.h5 from iclprobe "
       "probe (required); several (repeat the option or list them) from learners of one "
       "configuration give the family report: R2 by layer over learners and onset agreement", /*multitoken=*/true);
  t.Value("format,f", &a.format, "format", "md (GitHub Markdown), tex (booktabs), csv (tidy)");
  t.Value("metric,m", &a.metric, "metric", "r2, nmse or mse");
  t.Value("k", &a.k_option, "k_option", "numbers of examples to tabulate: d, n, all, or a "
       "comma list (d and n stand for those values); the onset uses the last one");
  t.Optional("threshold", &a.rule.threshold, "rule.threshold", "absolute R2 an onset layer must reach (default: relative, 0.9 x "
       "the best layer's R2 of that target and probe)");
  t.Value("relative", &a.rule.relative, "rule.relative", "the fraction of the best R2 of "
       "the relative rule");
  t.Value("margin", &a.rule.margin, "rule.margin", "selectivity (R2 model - R2 control) "
       "an onset layer needs over every control: the lower end of its paired 95% interval must "
       "exceed it");
  t.Implicit("compare-targets", &a.compare, std::string("auto"), "compare", "also say which of several "
       "targets each layer carries best at the last --k (R2 of each, the best and its paired margin "
       "over the runner-up with a 95% interval): a comma list, or alone for the weight targets "
       "probed (w_ols, w_ridge, w); with --format csv the output is this comparison's tidy CSV");
  t.Optional("compare-probes", &a.compare_probes, "compare_probes", "also compare two probe "
       "families on the same prompts and split, e.g. linear,mlp (the second against the first): "
       "per target, k of --k and layer, the paired margin R2(second) - R2(first) with its 95% "
       "interval, and the same margin in every control; ridge against a pooled linear/MLP probe "
       "is refused (it would mix pooling with the probe); with --format csv the output is this "
       "comparison's tidy CSV");
  t.Optional("plot-dir", &a.plot_dir, "plot_dir", "write PNG and SVG plots (and their data) here");
  t.List("interventions", &a.interventions, "interventions", "interventions files from iclprobe "
       "intervene on this learner (repeatable): their slopes by layer are printed and, with "
       "--plot-dir, drawn next to the probe R2");
  t.List("trace", &a.traces, "traces", "a trace file from iclprobe trace (instead of --probes): "
       "the best iterate per layer with its interval, the excess over the controls and the "
       "rates as tables; with --plot-dir the similarity heat maps and the iterate-vs-layer "
       "curves");
  t.Optional("out,o", &a.out, "out", "write the tables to this file instead of stdout");
  t.Switch("force", "overwrite an existing --out file");
  // clang-format on
  t.Input("probes").Input("interventions").Input("trace").Output("out").Output("plot-dir");
}

// The inputs: regular files, no file twice (the same file twice, or a link to it, would be two
// learners that agree by construction), and options that go with one file only.
void CheckInputs(const ReportArgs& a, const po::variables_map& vm) {
  if (!a.traces.empty()) {
    if (!a.probes_files.empty() || !a.interventions.empty())
      throw std::invalid_argument(
          "--trace: reported alone; run report once for --probes and once for --trace");
    if (a.traces.size() > 1)
      throw std::invalid_argument(
          "--trace: one file per report (a trace file already pools the seeds of a cell)");
    for (const char* o : {"compare-targets", "compare-probes", "threshold"})
      if (vm.count(o))
        throw std::invalid_argument(std::string("--") + o + ": applies to --probes files only");
    core::RequireRegularInput(a.traces[0], "trace");
    return;
  }
  if (a.probes_files.empty())
    throw std::invalid_argument(
        "--probes: required (a probes.h5 file from iclprobe probe), or --trace (a trace file)");
  for (std::size_t i = 0; i < a.probes_files.size(); ++i) {
    core::RequireRegularInput(a.probes_files[i], "probes");
    for (std::size_t j = 0; j < i; ++j)
      if (core::IdOf(a.probes_files[i]) == core::IdOf(a.probes_files[j]))
        throw std::invalid_argument("--probes: '" + a.probes_files[i] + "' and '" +
                                    a.probes_files[j] +
                                    "' are the same file; a family needs one file per learner");
  }
  if (a.probes_files.size() == 1) return;
  if (vm.count("plot-dir"))
    throw std::invalid_argument(
        "--plot-dir: plots are drawn for one --probes file; run report once per learner");
  if (vm.count("compare-targets"))
    throw std::invalid_argument(
        "--compare-targets: compares targets within one --probes file; run report once per "
        "learner");
  if (vm.count("compare-probes"))
    throw std::invalid_argument(
        "--compare-probes: compares probes within one --probes file; run report once per "
        "learner");
  if (!a.interventions.empty())
    throw std::invalid_argument(
        "--interventions: go with one --probes file (the learner they were run on)");
}

// The interventions files, each run on the checkpoint of the probes file.
std::vector<intervene::InterveneResult> ReadEdits(const ReportArgs& a,
                                                  const analysis::ProbeResults& r) {
  std::vector<intervene::InterveneResult> edits;
  for (const auto& path : a.interventions) {
    core::RequireRegularInput(path, "interventions");
    edits.push_back(intervene::ReadInterventionsFile(path));
    if (edits.back().checkpoint_sha256 != r.checkpoint_sha256)
      throw std::invalid_argument("--interventions: '" + path +
                                  "' was run on another checkpoint than the --probes file's");
  }
  return edits;
}

// With --plot-dir: where the figures went, or why there are none.
void SayWherePlotsWent(const po::variables_map& vm, const std::string& gnuplot,
                       const std::string& dir) {
  if (!vm.count("plot-dir")) return;
  if (gnuplot.empty())
    std::cerr << "report: gnuplot not found; tables written, plots skipped (install gnuplot-nox)\n";
  else
    std::cout << "plots in " << dir << "\n";
}

void Emit(const std::string& tables, core::AtomicOutput* file, const std::string& out) {
  if (!file)
    std::cout << tables;
  else
    std::cout << "wrote " << out << "\n";
}

// Several learners of one configuration: R2 by layer over the learners, onset agreement.
int RunFamilyReport(const ReportArgs& a, const std::vector<int>& ks, analysis::TableFormat tf,
                    core::AtomicOutput* file) {
  std::vector<analysis::ProbeResults> family;
  for (const auto& p : a.probes_files)
    family.push_back(analysis::ReadProbeResults(p));
  std::ostringstream tables, summary;
  analysis::WriteFamilyReport(tables, summary, family, ks.back(), a.rule, tf);
  if (file) file->CommitText(tables.str());
  std::cout << summary.str();
  Emit(tables.str(), file, a.out);
  return 0;
}

// One learner: tables, onsets, the target comparison, plots and interventions.
int RunLearnerReport(const ReportArgs& a, const po::variables_map& vm,
                     const analysis::ProbeResults& r, const std::vector<int>& ks,
                     analysis::TableFormat tf, core::AtomicOutput* file) {
  const auto edits = ReadEdits(a, r);
  const auto onsets = analysis::FindOnsets(r, ks.back(), a.rule);
  std::ostringstream tables;
  std::vector<analysis::TargetComparison> comparison;
  if (vm.count("compare-targets")) {
    // auto: the weight targets probed
    const std::vector<std::string> names = a.compare == "auto"
                                               ? std::vector<std::string>{}
                                               : SplitList("--compare-targets", a.compare);
    comparison = analysis::CompareTargets(r, names, ks.back());
  }
  std::vector<analysis::ProbeComparison> probe_comparison;
  if (vm.count("compare-probes")) {
    const auto names = SplitList("--compare-probes", a.compare_probes);
    if (names.size() != 2)
      throw std::invalid_argument(
          "--compare-probes: expected two probe families like "
          "linear,mlp, got '" +
          a.compare_probes.substr(0, 80) + "'");
    probe_comparison = analysis::CompareProbes(r, names[0], names[1], ks);
  }
  if (tf == analysis::TableFormat::kCsv && !comparison.empty() && !probe_comparison.empty())
    throw std::invalid_argument(
        "--format: csv holds one comparison; run --compare-targets and "
        "--compare-probes separately");
  if (tf != analysis::TableFormat::kCsv || (comparison.empty() && probe_comparison.empty())) {
    analysis::WriteTables(tables, r, a.metric, ks, tf);
    analysis::WriteCodelengthTables(tables, r, ks, tf);
    analysis::WriteTargetMaps(tables, r, ks, tf);
  }
  analysis::WriteTargetComparison(tables, comparison, tf);
  analysis::WriteProbeComparison(tables, probe_comparison, tf);
  // Plots are planned, and their paths checked, before anything is written.
  const std::string gnuplot =
      vm.count("plot-dir") ? core::FindProgram("gnuplot", "ICLPROBE_GNUPLOT") : "";
  analysis::PlotFiles plots;
  if (!gnuplot.empty()) {
    plots = analysis::PlanPlots(r, onsets, a.rule);
    for (const auto& e : edits)
      analysis::PlanInterventionPlots(e, plots);
    analysis::PreparePlotFolder(plots, a.plot_dir, a.inputs, a.force, "report");
  }
  // The table is committed only after the plots: a failed gnuplot (or a disk that fills while
  // they are drawn) leaves no table under its final name.
  if (file) file->WriteText(tables.str());
  if (!gnuplot.empty()) analysis::WritePlots(plots, a.plot_dir, gnuplot);
  if (file) file->Commit();
  analysis::PrintOnsets(std::cout, onsets, a.rule);
  analysis::PrintTargetComparison(std::cout, comparison);
  analysis::PrintProbeComparison(std::cout, probe_comparison);
  for (const auto& e : edits)
    intervene::PrintInterventionSummary(std::cout, e);
  Emit(tables.str(), file, a.out);
  SayWherePlotsWent(vm, gnuplot, a.plot_dir);
  return 0;
}

// A trace file: tables of the best iterate per layer and the rates, and their figures.
int RunTraceReport(const ReportArgs& a, const po::variables_map& vm, analysis::TableFormat tf,
                   core::AtomicOutput* file) {
  const analysis::TraceResult r = analysis::ReadTraceFile(a.traces[0]);
  std::ostringstream tables;
  analysis::WriteTraceTables(tables, r, tf);
  const std::string gnuplot =
      vm.count("plot-dir") ? core::FindProgram("gnuplot", "ICLPROBE_GNUPLOT") : "";
  analysis::PlotFiles plots;
  if (!gnuplot.empty()) {
    analysis::PlanTracePlots(r, plots);
    analysis::PreparePlotFolder(plots, a.plot_dir, a.inputs, a.force, "report");
  }
  if (file) file->WriteText(tables.str());
  if (!gnuplot.empty()) analysis::WritePlots(plots, a.plot_dir, gnuplot);
  if (file) file->Commit();
  Emit(tables.str(), file, a.out);
  SayWherePlotsWent(vm, gnuplot, a.plot_dir);
  return 0;
}

}  // namespace

std::vector<OptionSpec> ReportOptions() {
  return SpecsOf("report", &DeclareReportOptions);
}

int RunReport(int argc, char** argv) {
  ReportArgs a;
  OptionTable t("report");
  DeclareReportOptions(t, a);
  po::variables_map vm;
  if (!Parse(argc, argv, t.description(), vm,
             "Usage: iclprobe report --probes FILE [options]\n\n"
             "       iclprobe report --probes A.h5 B.h5 C.h5 [options]   (family report)\n"
             "       iclprobe report --trace trace.h5 [--plot-dir DIR]   (iclprobe trace)\n\n"
             "Turns probe results into tables by layer, says where each target becomes decodable\n"
             "(onset) and plots R2 by layer, R2 over (layer, k) and the pooling weights. Every\n"
             "score carries a 95% bootstrap interval over test prompts (and seeds); the onset is\n"
             "the first layer whose interval lies above the threshold and whose paired margin\n"
             "over every control lies above --margin. With several files (learners of one\n"
             "configuration) it reports R2 by layer over the learners and whether their onsets\n"
             "agree.",
             "iclprobe report --probes probes.h5 --format md --metric r2 --k d,n --plot-dir figs/"))
    return 0;
  a.force = vm.count("force") > 0;
  CheckInputs(a, vm);
  const analysis::TableFormat tf = analysis::ParseTableFormat(a.format);
  analysis::CheckTableMetric(a.metric);
  a.rule.Validate();
  std::unique_ptr<core::AtomicOutput> file;
  a.inputs = InputPaths(t.specs(), vm);
  const std::vector<std::string>& inputs = a.inputs;
  if (vm.count("out"))
    file = std::make_unique<core::AtomicOutput>(a.out, "out",
                                                core::OutputOptions{a.force, inputs, false, true});
  if (vm.count("plot-dir")) {
    if (a.plot_dir.empty()) throw std::invalid_argument("--plot-dir: empty path");
    if (std::filesystem::exists(a.plot_dir) && !std::filesystem::is_directory(a.plot_dir))
      throw std::invalid_argument("--plot-dir: '" + a.plot_dir + "' exists and is not a folder");
  }
  if (!a.traces.empty()) return RunTraceReport(a, vm, tf, file.get());
  const analysis::ProbeResults r = analysis::ReadProbeResults(a.probes_files[0]);
  const std::vector<int> ks = analysis::ResolveKs(r, a.k_option);
  if (a.probes_files.size() > 1) return RunFamilyReport(a, ks, tf, file.get());
  return RunLearnerReport(a, vm, r, ks, tf, file.get());
}

}  // namespace icl::cli
