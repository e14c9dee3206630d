// The family report: probes files of learners of one configuration, R2 by layer over the
// learners and whether their onsets agree.
#include "analysis/report.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/errors.hpp"
#include "core/json.hpp"

namespace icl::analysis {

namespace fs = std::filesystem;

namespace {

// The files must come from learners of one configuration, probed alike.
void CheckFamily(const std::vector<ProbeResults>& learners) {
  if (learners.size() < 2)
    throw core::InputError("report", "probes", "a family report needs two or more files");
  const ProbeResults& first = learners[0];
  for (const auto& r : learners) {
    auto differs = [&](const std::string& what) {
      throw core::InputError("report", "probes",
                             "'" + r.path + "' is not from a learner of the configuration of '" +
                                 first.path + "' (" + what +
                                 " differ); a family report compares learners of one "
                                 "configuration");
    };
    if (r.model_config.empty() || first.model_config.empty()) differs("model configurations");
    // One architecture; the arithmetic (kernels) may differ between seeds of a family (a run
    // resumed from before kernels existed beside newer ones), at float32 rounding.
    auto architecture = [](const ProbeResults& p) {
      nlohmann::json j = core::json::Parse(p.model_config, "'" + p.path + "' model_config");
      if (j.is_object()) j.erase("kernels");
      return j;
    };
    if (architecture(r) != architecture(first)) differs("model configurations");
    if (r.task_config != first.task_config) differs("task configurations");
    if (r.layers != first.layers || r.ks != first.ks) differs("probed layers or ks");
    if (r.targets != first.targets || r.probes != first.probes) differs("targets or probes");
  }
}

// Each learner's column name: its file stem, its folder and stem where stems collide, or
// learnerN where that is not unique or not safe in a table.
std::vector<std::string> LearnerNames(const std::vector<ProbeResults>& learners) {
  const std::size_t M = learners.size();
  std::vector<std::string> names;
  for (const auto& r : learners)
    names.push_back(fs::path(r.path).stem().string());
  // Files of one name in different folders (s1/probes.h5, s2/probes.h5) are named by folder.
  if (std::set<std::string>(names.begin(), names.end()).size() < M)
    for (std::size_t i = 0; i < M; ++i)
      names[i] =
          (fs::path(learners[i].path).parent_path().filename() / fs::path(learners[i].path).stem())
              .string();
  // A label reaches CSV, Markdown and TeX cells as it is: only letters, digits and _ . - /
  // (a comma, newline, '|', '&' or backslash from a file name would break the table or run TeX).
  const auto safe = [](const std::string& n) {
    if (n.empty() || n.size() > 128) return false;
    for (const char c : n)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
            c == '/'))
        return false;
    return true;
  };
  if (std::set<std::string>(names.begin(), names.end()).size() < M ||
      !std::all_of(names.begin(), names.end(), safe))
    for (std::size_t i = 0; i < M; ++i)
      names[i] = "learner" + std::to_string(i + 1);
  return names;
}

// One (target, probe): R2 by layer over the learners with each learner's interval.
void WriteFamilyTable(std::ostream& os, const std::string& t, const std::string& p, int k,
                      const std::vector<int>& layers, const std::vector<std::string>& names,
                      const arma::mat& v, const std::vector<std::vector<Scorer::Score>>& cell,
                      TableFormat format) {
  const arma::uword L = layers.size();
  const std::size_t M = names.size();
  if (format == TableFormat::kCsv) {
    for (arma::uword li = 0; li < L; ++li)
      for (std::size_t i = 0; i < M; ++i)
        os << fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6g},{:.6g}\n", t,
                          p, layers[li], k, M, arma::mean(v.row(li)), arma::stddev(v.row(li)),
                          v.row(li).min(), v.row(li).max(), names[i], cell[li][i].mean,
                          cell[li][i].lo, cell[li][i].hi);
    return;
  }
  const bool tex = format == TableFormat::kLatex;
  os << fmt::format(
      tex ? "\n% {} {} k={}: test R2 by layer over {} learners\n\\begin{{tabular}}{{r{}}}\n"
            "\\toprule\nlayer & mean & SD & min & max"
          : "\n**{}**, {} probe, k = {}: test R2 by layer over {} learners (mean, SD and "
            "range over learners; each learner's R2 [95% interval]){}\n\n| layer | mean | "
            "SD | min | max |",
      t, p, k, M, tex ? std::string(4 + M, 'r') : "");
  for (const auto& n : names)
    os << (tex ? " & " + n : " " + n + " |");
  os << (tex ? " \\\\\n\\midrule\n" : "\n|---:|---:|---:|---:|---:|");
  if (!tex)
    for (std::size_t i = 0; i < M; ++i)
      os << "---:|";
  if (!tex) os << "\n";
  for (arma::uword li = 0; li < L; ++li) {
    const std::string sep = tex ? " & " : " | ";
    os << (tex ? "" : "| ") << layers[li] << sep
       << fmt::format("{:.3f}{}{:.3f}{}{:.3f}{}{:.3f}", arma::mean(v.row(li)), sep,
                      arma::stddev(v.row(li)), sep, v.row(li).min(), sep, v.row(li).max());
    for (std::size_t i = 0; i < M; ++i)
      os << sep
         << fmt::format("{:.3f} [{:.3f}, {:.3f}]", cell[li][i].mean, cell[li][i].lo,
                        cell[li][i].hi);
    os << (tex ? " \\\\\n" : " |\n");
  }
  if (tex) os << "\\bottomrule\n\\end{tabular}\n";
}

// "w_ols (ridge): learner1 layer 3, learner2 never — the learners disagree"
std::string OnsetAgreement(const std::string& t, const std::string& p,
                           const std::vector<std::string>& names,
                           const std::vector<std::vector<Onset>>& onsets) {
  std::vector<std::string> each;
  std::set<int> layers;
  for (std::size_t i = 0; i < names.size(); ++i)
    for (const auto& o : onsets[i])
      if (o.target == t && o.probe == p) {
        layers.insert(o.layer);
        each.push_back(fmt::format("{} {}", names[i],
                                   o.layer < 0 ? "never" : "layer " + std::to_string(o.layer)));
      }
  return fmt::format(
      "  {} ({}): {} — {}\n", t, p, fmt::join(each, ", "),
      layers.size() == 1
          ? (*layers.begin() < 0 ? "the learners agree: not decodable"
                                 : fmt::format("the learners agree on layer {}", *layers.begin()))
          : "the learners disagree");
}

}  // namespace

void WriteFamilyReport(std::ostream& os, std::ostream& summary,
                       const std::vector<ProbeResults>& learners, int k, const OnsetRule& rule,
                       TableFormat format) {
  CheckFamily(learners);
  const ProbeResults& first = learners[0];
  if (std::find(first.ks.begin(), first.ks.end(), k) == first.ks.end())
    throw core::InputError("report", "k", "k=" + std::to_string(k) + " was not probed");
  const arma::uword ki = std::find(first.ks.begin(), first.ks.end(), k) - first.ks.begin();
  const std::size_t M = learners.size();
  std::vector<std::unique_ptr<Scorer>> scorers;
  std::vector<std::vector<Onset>> onsets;
  for (std::size_t i = 0; i < M; ++i) {
    scorers.push_back(std::make_unique<Scorer>(learners[i]));
    onsets.push_back(FindOnsets(learners[i], k, rule));
  }
  const std::vector<std::string> names = LearnerNames(learners);
  if (format == TableFormat::kCsv)
    os << "target,probe,layer,k,learners,mean,sd,min,max,learner,r2,lo,hi\n";
  std::ostringstream agreement;
  for (const auto& t : first.targets)
    for (const auto& p : first.probes) {
      if (!first.Find(t, p, "model", "r2")) continue;
      const arma::uword L = first.layers.size();
      arma::mat v(L, M);
      std::vector<std::vector<Scorer::Score>> cell(L, std::vector<Scorer::Score>(M));
      for (arma::uword li = 0; li < L; ++li)
        for (std::size_t i = 0; i < M; ++i) {
          cell[li][i] = scorers[i]->R2(t, p, "model", li, ki);
          v(li, i) = cell[li][i].mean;
        }
      WriteFamilyTable(os, t, p, k, first.layers, names, v, cell, format);
      agreement << OnsetAgreement(t, p, names, onsets);
    }
  summary << fmt::format(
                 "Onset per learner at k = {} ({} learners; each by the single-file "
                 "rule):\n",
                 k, M)
          << agreement.str();
}

}  // namespace icl::analysis
