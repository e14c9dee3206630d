// iclprobe compare: which learning algorithm does a trained transformer match? SPD and ILWD per
// k against classical learners, the implicit-fit R2 (how linear it is), and the matrix of the
// paper's noisy-regime table when several checkpoints are given.
#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "analysis/compare.hpp"
#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "data/output.hpp"
#include "learners/checkpoint.hpp"
#include "learners/classical.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace {

struct Entry {  // one row of the comparison: reference A against learner B
  std::string model, learner;
  analysis::Curve spd;
  arma::vec ilwd;  // empty when B (or A) is not linear
};

double MeanRange(const arma::vec& v, arma::uword lo, arma::uword hi) {  // mean of v[lo, hi)
  if (hi <= lo || v.is_empty()) return arma::datum::nan;
  return arma::mean(v.subvec(lo, std::min<arma::uword>(hi, v.n_elem) - 1));
}

std::string Cell(double v, bool best) {
  if (std::isnan(v)) return fmt::format("{:>11}", "-");
  return fmt::format("{:>10.3e}{}", v, best ? '*' : ' ');
}

}  // namespace

int RunCompare(int argc, char** argv) {
  std::vector<std::string> checkpoints;
  std::string learner_specs = "ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3",
              csv;
  int prompts = 2000, queries = 0, ilwd_prompts = 200, threads = 0, n = 0;
  std::uint64_t seed = 3;
  double noise = -1, w_scale = -1;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("checkpoint,c", po::value(&checkpoints)->composing(), "trained learner (repeatable: several give the "
       "matrix learners x checkpoints of mean SPD)")
      ("learners", po::value(&learner_specs)->default_value(learner_specs), "reference learners: ols, "
       "ridge:LAMBDA, bayes, gd:ALPHA, sgd:ALPHA, knn:K[:weighted], zero")
      ("prompts", po::value(&prompts)->default_value(prompts), "prompts for SPD")
      ("seed", po::value(&seed)->default_value(seed), "prompt-set (and query) seed")
      ("queries", po::value(&queries)->default_value(queries), "query points per context for the implicit "
       "weights (0 = 2(d+1); at least d+1)")
      ("ilwd-prompts", po::value(&ilwd_prompts)->default_value(ilwd_prompts), "contexts (the first prompts) "
       "used for ILWD and the implicit-fit R2")
      ("n", po::value(&n), "examples per prompt (default: the first checkpoint's training n)")
      ("noise", po::value(&noise), "label noise sigma (default: the first checkpoint's)")
      ("w-scale", po::value(&w_scale), "weight scale tau (default: the first checkpoint's)")
      ("all-pairs", "also compare every pair of reference learners")
      ("threads", po::value(&threads)->default_value(threads), "intra-op threads (0 = all cores)")
      ("csv", po::value(&csv), "tidy CSV: model,learner,k,spd,spd_lo,spd_hi,ilwd; the implicit-fit R2 goes "
       "to <csv stem>.linearity.csv (model,k,r2,contexts)")
      ("force", "overwrite existing CSV files")
      ("quiet,q", "no progress bar");
  // clang-format on
  po::variables_map vm;
  if (!Parse(
          argc, argv, opts, vm,
          "Usage: iclprobe compare --checkpoint FILE [--checkpoint FILE ...] [options]\n\n"
          "Compares trained learners with classical ones on the same seeded prompts: squared\n"
          "prediction difference (SPD / d) and implicit linear weight difference (ILWD / d) per\n"
          "number of examples k, and how linear each trained learner is (implicit-fit R2).",
          "iclprobe compare --checkpoint checkpoints/d4_l8_h64.h5 --learners "
          "ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3 --prompts 2000 --seed 3 "
          "--csv cmp.csv"))
    return 0;
  if (checkpoints.empty())
    throw std::invalid_argument("--checkpoint: required (a trained learner)");
  RequirePositive("prompts", prompts);
  RequirePositive("ilwd-prompts", ilwd_prompts);
  std::vector<learners::CheckpointInfo> infos;
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    data::RequireRegularInput(checkpoints[i], "--checkpoint");
    for (std::size_t j = 0; j < i; ++j)
      if (data::IdOf(checkpoints[i]) == data::IdOf(checkpoints[j]))
        throw std::invalid_argument("--checkpoint: '" + checkpoints[i] + "' is given twice");
    infos.push_back(learners::ReadCheckpointInfo(checkpoints[i]));
  }
  // Each checkpoint's name in the tables: its file stem, or its path where stems collide.
  std::vector<std::string> names;
  for (const auto& c : checkpoints) {
    const std::string stem = std::filesystem::path(c).stem().string();
    int same = 0;
    for (const auto& o : checkpoints)
      same += std::filesystem::path(o).stem().string() == stem;
    names.push_back(same > 1 ? c : stem);
  }
  data::TaskConfig task = infos[0].train.task;
  task.fixed_w = false;
  if (vm.count("n")) task.n = n;
  if (vm.count("noise")) RequireNonNegative("noise", noise), task.noise = noise;
  if (vm.count("w-scale")) RequirePositive("w-scale", w_scale), task.w_scale = w_scale;
  task.Validate();
  for (const auto& info : infos)
    learners::CheckReadsTask(info, task);
  learners::MakeLearners(learner_specs, task);  // checks the specs before any work
  const int d = task.d;
  if (queries == 0) queries = 2 * (d + 1);
  if (queries < d + 1)
    throw std::invalid_argument(
        "--queries: the implicit-weight fit needs at least d+1 = " + std::to_string(d + 1) +
        " query points, got " + std::to_string(queries));
  CheckThreads(threads);
  const bool force = vm.count("force") > 0;
  std::unique_ptr<data::AtomicOutput> out, lin_out;
  if (vm.count("csv")) {
    std::filesystem::path lp(csv);
    lp.replace_extension("");
    const std::string lin = lp.string() + ".linearity.csv";
    data::RequireDistinctOutputs({{"--csv", csv}, {"--csv (linearity file)", lin}});
    out = std::make_unique<data::AtomicOutput>(
        csv, "--csv", data::OutputOptions{force, checkpoints, false, true});
    lin_out = std::make_unique<data::AtomicOutput>(
        lin, "--csv", data::OutputOptions{force, checkpoints, false, true});
  }
  SetThreads(threads);

  const int N = prompts, P = std::min(ilwd_prompts, prompts);
  // Reference learners on a task: predictions n x N and weights d x n x P.
  struct References {
    data::PromptSet set;
    std::vector<std::unique_ptr<learners::ClassicalLearner>> learners;
    std::vector<arma::mat> pred;
    std::vector<arma::cube> w;
  };
  auto references = [&](const data::TaskConfig& t) {
    References r;
    r.set = data::SamplePrompts(t, seed, 0, prompts);
    r.learners = learners::MakeLearners(learner_specs, t);
    for (const auto& l : r.learners) {
      arma::mat pred(t.n, N);
      arma::cube w(d, t.n, l->is_linear() ? P : 0);
      learners::LearnerRun run;
      for (int i = 0; i < N; ++i) {
        l->Run(r.set.x.slice(i), r.set.y.col(i), run);
        pred.col(i) = run.predictions;
        if (l->is_linear() && i < P) w.slice(i) = run.weights;
      }
      r.pred.push_back(std::move(pred));
      r.w.push_back(std::move(w));
    }
    return r;
  };

  std::vector<Entry> entries;
  std::vector<arma::mat> implicit_r2;  // per checkpoint: n x P
  std::vector<data::TaskConfig> tasks;
  Progress progress("compare", static_cast<long long>(infos.size()) * P, vm.count("quiet") > 0,
                    "contexts");
  for (std::size_t c = 0; c < infos.size(); ++c) {
    // Each checkpoint is compared on prompts of its own training task (noise, scale), unless
    // options override them: the layout of the paper's noisy-regime table.
    data::TaskConfig tc = infos[c].train.task;
    tc.fixed_w = false;
    tc.n = task.n;
    if (vm.count("noise")) tc.noise = task.noise;
    if (vm.count("w-scale")) tc.w_scale = task.w_scale;
    tasks.push_back(tc);
    const References ref = references(tc);
    const data::PromptSet& set = ref.set;
    learners::Transformer model = learners::LoadCheckpoint(infos[c].path);
    const std::string& name = names[c];
    const arma::mat pred = learners::TransformerPredictions(model, set);
    arma::cube w(d, task.n, P);
    arma::mat r2(task.n, P);
    for (int i = 0; i < P; ++i) {
      arma::cube q(d, queries, task.n);
      for (int k = 0; k < task.n; ++k)
        q.slice(k) = analysis::QueryPoints(d, queries, seed, std::uint64_t(i) * task.n + k);
      const arma::mat yhat =
          learners::QueryPredictionsAllK(model, set, i, q);  // one forward pass per context
      for (int k = 0; k < task.n; ++k) {
        const auto fit = analysis::FitImplicitWeights(q.slice(k), yhat.col(k));
        w.slice(i).col(k) = fit.w;
        r2(k, i) = fit.r2;
      }
      progress.Update(static_cast<long long>(c) * P + i + 1);
    }
    implicit_r2.push_back(r2);
    for (std::size_t j = 0; j < ref.learners.size(); ++j)
      entries.push_back({name, ref.learners[j]->spec(), analysis::Spd(pred, ref.pred[j], d),
                         ref.learners[j]->is_linear() ? analysis::Ilwd(w, ref.w[j]) : arma::vec()});
  }
  progress.Finish();
  if (vm.count("all-pairs")) {
    const References ref = references(tasks[0]);  // on the first checkpoint's task
    const auto& L = ref.learners;
    for (std::size_t a = 0; a < L.size(); ++a)
      for (std::size_t b = a + 1; b < L.size(); ++b)
        entries.push_back({L[a]->spec(), L[b]->spec(), analysis::Spd(ref.pred[a], ref.pred[b], d),
                           L[a]->is_linear() && L[b]->is_linear()
                               ? analysis::Ilwd(ref.w[a], ref.w[b])
                               : arma::vec()});
  }

  // Summary per checkpoint: means over the under-determined region (k < d) and over all k.
  std::cout << fmt::format(
      "compare: d={} n={}, {} prompts (seed {}) of each checkpoint's task, ILWD on {} contexts x "
      "{} queries; values are divided by d\n",
      d, task.n, N, seed, P, queries);
  std::vector<std::string> models;
  for (const auto& e : entries)
    if (std::find(models.begin(), models.end(), e.model) == models.end()) models.push_back(e.model);
  for (std::size_t c = 0; c < models.size(); ++c) {
    std::vector<const Entry*> rows;
    for (const auto& e : entries)
      if (e.model == models[c]) rows.push_back(&e);
    std::array<std::vector<double>, 4> cols;
    for (const auto* e : rows) {
      cols[0].push_back(MeanRange(e->spd.mean, 0, d));
      cols[1].push_back(arma::mean(e->spd.mean));
      cols[2].push_back(MeanRange(e->ilwd, 0, d));
      cols[3].push_back(e->ilwd.is_empty() ? arma::datum::nan : arma::mean(e->ilwd));
    }
    std::array<double, 4> best;
    for (int j = 0; j < 4; ++j) {
      best[j] = arma::datum::inf;
      for (double v : cols[j])
        if (!std::isnan(v)) best[j] = std::min(best[j], v);
    }
    const std::string noise = c < tasks.size() ? fmt::format(" (noise {:g}, w_scale {:g})",
                                                             tasks[c].noise, tasks[c].w_scale)
                                               : "";
    std::cout << fmt::format("\n{}{} against:\n{:<16}{:>11}{:>11}{:>11}{:>11}\n", models[c], noise,
                             "learner", "SPD k<d", "SPD all k", "ILWD k<d", "ILWD all k");
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::cout << fmt::format("{:<16}", rows[r]->learner);
      for (int j = 0; j < 4; ++j)
        std::cout << Cell(cols[j][r], cols[j][r] == best[j]);
      std::cout << "\n";
    }
    if (c < implicit_r2.size()) {
      std::cout << "implicit linear fit R2 by k (mean over contexts):";
      for (arma::uword k = 0; k < implicit_r2[c].n_rows; ++k) {
        const arma::rowvec row = implicit_r2[c].row(k);
        const arma::uvec ok = arma::find_finite(row);
        std::cout << fmt::format(
            " {}", ok.is_empty() ? std::string("-")
                                 : fmt::format("{:.3f}", arma::mean(arma::rowvec(row.cols(ok)))));
      }
      std::cout << "\n";
    }
  }
  std::cout << "* = closest learner in that column\n";
  if (infos.size() > 1) {
    // The paper's noisy-regime layout: rows = reference learners, columns = checkpoints, mean SPD
    // over k.
    std::cout << fmt::format(
        "\nmean SPD over k (rows: learners, columns: checkpoints; * = column minimum)\n{:<16}", "");
    for (std::size_t c = 0; c < infos.size(); ++c)
      std::cout << fmt::format("{:>24}", models[c].substr(0, 23));
    std::cout << "\n";
    for (const auto& spec : learners::MakeLearners(learner_specs, task)) {
      const auto& l = spec;
      std::cout << fmt::format("{:<16}", l->spec());
      for (std::size_t c = 0; c < infos.size(); ++c) {
        double v = 0, best = arma::datum::inf;
        for (const auto& e : entries)
          if (e.model == models[c]) {
            const double m = arma::mean(e.spd.mean);
            best = std::min(best, m);
            if (e.learner == l->spec()) v = m;
          }
        std::cout << fmt::format("{:>23.3e}{}", v, v == best ? '*' : ' ');
      }
      std::cout << "\n";
    }
  }

  if (out) {
    {
      std::ostringstream f;
      f << "model,learner,k,spd,spd_lo,spd_hi,ilwd\n";
      for (const auto& e : entries)
        for (arma::uword k = 0; k < e.spd.mean.n_elem; ++k)
          f << fmt::format("{},{},{},{:.9g},{:.9g},{:.9g},{}\n", e.model, e.learner, k,
                           e.spd.mean(k), e.spd.lo(k), e.spd.hi(k),
                           e.ilwd.is_empty() ? std::string() : fmt::format("{:.9g}", e.ilwd(k)));
      out->CommitText(f.str());
      std::ostringstream g;
      g << "model,k,r2,contexts\n";
      for (std::size_t c = 0; c < implicit_r2.size(); ++c)
        for (arma::uword k = 0; k < implicit_r2[c].n_rows; ++k) {
          const arma::rowvec row = implicit_r2[c].row(k);
          const arma::uvec ok = arma::find_finite(row);
          g << fmt::format("{},{},{},{}\n", models[c], k,
                           ok.is_empty()
                               ? std::string()
                               : fmt::format("{:.9g}", arma::mean(arma::rowvec(row.cols(ok)))),
                           ok.n_elem);
        }
      lin_out->CommitText(g.str());
    }
    std::cout << "wrote " << out->path() << " and " << lin_out->path() << "\n";
  }
  return 0;
}

}  // namespace icl::cli
