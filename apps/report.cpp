// iclprobe report: probe error tables (Markdown, LaTeX, CSV), decodability onset and plots.
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "analysis/intervene.hpp"
#include "analysis/report.hpp"
#include "apps/cli.hpp"
#include "data/output.hpp"

namespace icl::cli {

namespace {

// gnuplot on PATH (or $ICLPROBE_GNUPLOT), or "" when there is none.
std::string FindGnuplot() {
  if (const char* env = std::getenv("ICLPROBE_GNUPLOT"))
    return std::filesystem::exists(env) ? std::filesystem::absolute(env).string() : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const auto candidate = std::filesystem::path(dir) / "gnuplot";
    if (std::filesystem::is_regular_file(candidate) && ::access(candidate.c_str(), X_OK) == 0)
      return std::filesystem::absolute(candidate).string();
  }
  return "";
}

}  // namespace

int RunReport(int argc, char** argv) {
  std::vector<std::string> probes_files;
  std::string probes, format = "md", metric = "r2", k_option = "d,n", plot_dir, out, compare;
  std::vector<std::string> interventions;
  analysis::OnsetRule rule;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("probes", po::value(&probes_files)->multitoken()->composing(), "probes.h5 from iclprobe "
       "probe (required); several (repeat the option or list them) from learners of one "
       "configuration give the family report: R2 by layer over learners and onset agreement")
      ("format,f", po::value(&format)->default_value(format), "md (GitHub Markdown), tex (booktabs), csv (tidy)")
      ("metric,m", po::value(&metric)->default_value(metric), "r2, nmse or mse")
      ("k", po::value(&k_option)->default_value(k_option), "numbers of examples to tabulate: d, n, all, or a "
       "comma list (d and n stand for those values); the onset uses the last one")
      ("threshold", po::value(&rule.threshold), "absolute R2 an onset layer must reach (default: relative, 0.9 x "
       "the best layer's R2 of that target and probe)")
      ("relative", po::value(&rule.relative)->default_value(rule.relative), "the fraction of the best R2 of "
       "the relative rule")
      ("margin", po::value(&rule.margin)->default_value(rule.margin), "selectivity (R2 model - R2 control) "
       "an onset layer needs over every control: the lower end of its paired 95% interval must "
       "exceed it")
      ("compare-targets", po::value(&compare)->implicit_value("auto"), "also say which of several "
       "targets each layer carries best at the last --k (R2 of each, the best and its paired margin "
       "over the runner-up with a 95% interval): a comma list, or alone for the weight targets "
       "probed (w_ols, w_ridge, w); with --format csv the output is this comparison's tidy CSV")
      ("plot-dir", po::value(&plot_dir), "write PNG and SVG plots (and their data) here")
      ("interventions", po::value(&interventions)->composing(), "interventions files from iclprobe "
       "intervene on this learner (repeatable): their slopes by layer are printed and, with "
       "--plot-dir, drawn next to the probe R2")
      ("out,o", po::value(&out), "write the tables to this file instead of stdout")
      ("force", "overwrite an existing --out file");
  // clang-format on
  po::variables_map vm;
  if (!Parse(argc, argv, opts, vm,
             "Usage: iclprobe report --probes FILE [options]\n\n"
             "       iclprobe report --probes A.h5 B.h5 C.h5 [options]   (family report)\n\n"
             "Turns probe results into tables by layer, says where each target becomes decodable\n"
             "(onset) and plots R2 by layer, R2 over (layer, k) and the pooling weights. Every\n"
             "score carries a 95% bootstrap interval over test prompts (and seeds); the onset is\n"
             "the first layer whose interval lies above the threshold and whose paired margin\n"
             "over every control lies above --margin. With several files (learners of one\n"
             "configuration) it reports R2 by layer over the learners and whether their onsets\n"
             "agree.",
             "iclprobe report --probes probes.h5 --format md --metric r2 --k d,n --plot-dir figs/"))
    return 0;
  if (probes_files.empty())
    throw std::invalid_argument("--probes: required (a probes.h5 file from iclprobe probe)");
  probes = probes_files[0];
  analysis::TableFormat tf;
  if (format == "md")
    tf = analysis::TableFormat::kMarkdown;
  else if (format == "tex")
    tf = analysis::TableFormat::kLatex;
  else if (format == "csv")
    tf = analysis::TableFormat::kCsv;
  else
    throw std::invalid_argument("--format: expected md, tex or csv, got '" + format + "'");
  if (metric != "r2" && metric != "nmse" && metric != "mse")
    throw std::invalid_argument("--metric: expected r2, nmse or mse, got '" + metric + "'");
  if (vm.count("threshold") && !(rule.threshold >= 0 && rule.threshold <= 1))
    throw std::invalid_argument("--threshold: expected an R2 in [0, 1]");
  if (!(rule.relative > 0 && rule.relative <= 1))
    throw std::invalid_argument("--relative: expected a fraction in (0, 1], got " +
                                std::to_string(rule.relative));
  if (!(rule.margin >= 0 && rule.margin <= 1))
    throw std::invalid_argument("--margin: expected an R2 difference in [0, 1], got " +
                                std::to_string(rule.margin));
  const bool force = vm.count("force") > 0;
  for (std::size_t i = 0; i < probes_files.size(); ++i) {
    data::RequireRegularInput(probes_files[i], "probes");
    // The same file twice (or a link to it) would be two learners that agree by construction.
    for (std::size_t j = 0; j < i; ++j)
      if (data::IdOf(probes_files[i]) == data::IdOf(probes_files[j]))
        throw std::invalid_argument("--probes: '" + probes_files[i] + "' and '" + probes_files[j] +
                                    "' are the same file; a family needs one file per learner");
  }
  if (probes_files.size() > 1 && vm.count("plot-dir"))
    throw std::invalid_argument(
        "--plot-dir: plots are drawn for one --probes file; run report once per learner");
  std::unique_ptr<data::AtomicOutput> file;
  if (vm.count("out"))
    file = std::make_unique<data::AtomicOutput>(
        out, "out", data::OutputOptions{force, probes_files, false, true});
  std::string gnuplot;
  if (vm.count("plot-dir")) {
    if (plot_dir.empty()) throw std::invalid_argument("--plot-dir: empty path");
    gnuplot = FindGnuplot();
    if (std::filesystem::exists(plot_dir) && !std::filesystem::is_directory(plot_dir))
      throw std::invalid_argument("--plot-dir: '" + plot_dir + "' exists and is not a folder");
  }

  const analysis::ProbeResults r = analysis::ReadProbeResults(probes);
  if (!interventions.empty() && probes_files.size() > 1)
    throw std::invalid_argument(
        "--interventions: go with one --probes file (the learner they were run on)");
  std::vector<analysis::InterveneResult> edits;
  for (const auto& path : interventions) {
    data::RequireRegularInput(path, "interventions");
    edits.push_back(analysis::ReadInterventionsFile(path));
    if (edits.back().checkpoint_sha256 != r.checkpoint_sha256)
      throw std::invalid_argument("--interventions: '" + path +
                                  "' was run on another checkpoint than the --probes file's");
  }
  std::vector<int> ks;
  std::stringstream ss(k_option);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "all") {
      ks.insert(ks.end(), r.ks.begin(), r.ks.end());
      continue;
    }
    int k = 0;
    if (item == "d")
      k = r.d;
    else if (item == "n")
      k = r.n;
    else {
      std::size_t used = 0;
      try {
        k = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || item.empty())
        throw std::invalid_argument("--k: expected d, n, all or numbers, got '" + k_option + "'");
    }
    if (std::find(r.ks.begin(), r.ks.end(), k) == r.ks.end())
      throw std::invalid_argument("--k: k=" + std::to_string(k) + " was not probed in '" + probes +
                                  "'");
    if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
  }
  if (ks.empty()) throw std::invalid_argument("--k: empty list");

  if (probes_files.size() > 1) {
    std::vector<analysis::ProbeResults> family;
    for (const auto& p : probes_files)
      family.push_back(analysis::ReadProbeResults(p));
    std::ostringstream tables, summary;
    analysis::WriteFamilyReport(tables, summary, family, ks.back(), rule, tf);
    if (file) file->CommitText(tables.str());
    std::cout << summary.str();
    if (!file)
      std::cout << tables.str();
    else
      std::cout << "wrote " << out << "\n";
    return 0;
  }
  if (vm.count("compare-targets") && probes_files.size() > 1)
    throw std::invalid_argument(
        "--compare-targets: compares targets within one --probes file; run report once per "
        "learner");
  const auto onsets = analysis::FindOnsets(r, ks.back(), rule);
  std::ostringstream tables;
  std::vector<analysis::TargetComparison> comparison;
  if (vm.count("compare-targets")) {
    std::vector<std::string> names;
    std::stringstream cs(compare == "auto" ? "" : compare);
    for (std::string t; std::getline(cs, t, ',');)
      if (!t.empty()) names.push_back(t);
    comparison = analysis::CompareTargets(r, names, ks.back());
  }
  if (tf != analysis::TableFormat::kCsv || comparison.empty())
    analysis::WriteTables(tables, r, metric, ks, tf);
  analysis::WriteTargetComparison(tables, comparison, tf);
  // Plots are planned, and their paths checked, before anything is written.
  analysis::PlotFiles plots;
  if (vm.count("plot-dir") && !gnuplot.empty()) {
    plots = analysis::PlanPlots(r, onsets);
    for (const auto& e : edits)
      analysis::PlanInterventionPlots(e, plots);
    std::error_code ec;
    std::filesystem::create_directories(plot_dir, ec);
    if (ec)
      throw std::invalid_argument("--plot-dir: cannot create '" + plot_dir + "': " + ec.message());
    const auto probes_id = data::IdOf(probes);
    for (const auto& name : plots.All()) {
      const std::string p = (std::filesystem::path(plot_dir) / name).string();
      if (data::IdOf(p) == probes_id)
        throw std::invalid_argument("--plot-dir: '" + p + "' is the input --probes file");
      if (std::filesystem::exists(p) && (!force || !std::filesystem::is_regular_file(p)))
        throw std::invalid_argument(
            "--plot-dir: '" + p +
            (force ? "' is not a regular file" : "' exists; pass --force to overwrite the plots"));
    }
  }
  // The table is committed only after the plots: a failed gnuplot (or a disk that fills while
  // they are drawn) leaves no table under its final name.
  if (file) file->WriteText(tables.str());
  if (vm.count("plot-dir") && !gnuplot.empty()) analysis::WritePlots(plots, plot_dir, gnuplot);
  if (file) file->Commit();
  analysis::PrintOnsets(std::cout, onsets, rule);
  analysis::PrintTargetComparison(std::cout, comparison);
  for (const auto& e : edits)
    analysis::PrintInterventionSummary(std::cout, e);
  if (!file)
    std::cout << tables.str();
  else
    std::cout << "wrote " << out << "\n";
  if (vm.count("plot-dir")) {
    if (gnuplot.empty())
      std::cerr
          << "report: gnuplot not found; tables written, plots skipped (install gnuplot-nox)\n";
    else
      std::cout << "plots in " << plot_dir << "\n";
  }
  return 0;
}

}  // namespace icl::cli
