// iclprobe extract: every layer's hidden states, the predictions and the regression targets
// of a checkpoint on a seeded prompt set, streamed to a resumable HDF5 activations file.
#include <fmt/format.h>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/dist.hpp"
#include "core/errors.hpp"
#include "extract/extract.hpp"
#include "learners/checkpoint.hpp"

namespace icl::cli {

namespace {

// What the command line sets.
struct ExtractArgs {
  ExtractArgs() {
    cfg.prompts = 2000;
    cfg.seed = 7;
  }
  extract::ExtractConfig cfg;
  std::string layers = "all", positions = "all", dtype = "float32", learner_targets;
  int threads = 0;
  std::int64_t stop_after = -1;
  int n = 0;
  double noise = -1, w_scale = -1;
  bool fixed_w = false;
  int d_effective = 0;
  ShiftArgs shifts;
};

void DeclareExtractOptions(OptionTable& t, ExtractArgs& a) {
  // clang-format off
  t.Optional("checkpoint,c", &a.cfg.checkpoint, "cfg.checkpoint", "learner checkpoint (required)");
  t.Optional("out,o", &a.cfg.out, "cfg.out", "activations file to write (required); work goes to <out>.partial "
       "and is renamed when complete");
  t.Value("prompts,N", &a.cfg.prompts, "cfg.prompts", "number of prompts");
  t.Value("seed", &a.cfg.seed, "cfg.seed", "prompt-set seed");
  t.Optional("n", &a.n, "n", "examples per prompt (default: the checkpoint's training n; at most its n_max)");
  t.Optional("noise", &a.noise, "noise", "label noise sigma (default: the checkpoint's)");
  t.Optional("w-scale", &a.w_scale, "w_scale", "weight scale tau (default: the checkpoint's)");
  t.Implicit("fixed-w", &a.fixed_w, true, "fixed_w", "w = all ones: true/false (default: the checkpoint's; use false to "
       "probe a --fixed-w control model on ordinary tasks)");
  t.Optional("d-effective", &a.d_effective, "d_effective", "input dimensions the prompts use, 1..d (default: "
       "the checkpoint's, usually all d); x and w are zero beyond them, as in Garg et al.'s "
       "curriculum");
  t.Value("layers", &a.layers, "layers", "states to store: all, or indices like 0,4,8 "
       "(0 = embedding, l = after block l)");
  t.Value("positions", &a.positions, "positions", "all (2n tokens) or y (the n y-tokens, "
       "the states after k examples)");
  t.Value("ridge-lambda", &a.cfg.ridge_lambda, "cfg.ridge_lambda", "lambda of the "
       "w_ridge target");
  t.Optional("learner-targets", &a.learner_targets, "learner_targets", "comma-separated "
       "classical learners whose weights after k examples are stored as targets too, e.g. "
       "gd:0.02:1,gd:0.02:2,newton:3:0.03:0.25 -> /targets/w_gd_0.02_1, ... (':' becomes '_'; "
       "the dataset's attribute learner keeps the spec); linear learners only (not knn, zero)");
  t.Switch("compress", "shuffle + deflate the datasets (smaller, slower)");
  t.Value("dtype", &a.dtype, "dtype", "storage of the hidden states: float32, or "
       "float16 (half the bytes; computed in float32 and rounded; probes read either)");
  t.Value("batch", &a.cfg.batch, "cfg.batch", "prompts per write, rounded up to whole "
       "chunks; memory grows with it, results do not change");
  t.Switch("resume", "continue <out>.partial from where it stopped (same settings required)");
  t.Optional("stop-after-batches", &a.stop_after, "stop_after", "stop after K batches as if interrupted (for tests)");
  t.Switch("force", "overwrite an existing output (or start over from a partial one)");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddShiftOptions(t, &a.shifts, /*query=*/false);
  AddThreadsOption(t, &a.threads);
  t.Input("checkpoint").Output("out");
}

}  // namespace

std::vector<OptionSpec> ExtractOptions() {
  return SpecsOf("extract", &DeclareExtractOptions);
}

int RunExtract(int argc, char** argv) {
  ExtractArgs a;
  auto& cfg = a.cfg;
  auto& layers = a.layers;
  auto& positions = a.positions;
  auto& dtype = a.dtype;
  auto& threads = a.threads;
  auto& stop_after = a.stop_after;
  auto& n = a.n;
  auto& noise = a.noise;
  auto& w_scale = a.w_scale;
  auto& fixed_w = a.fixed_w;
  auto& d_effective = a.d_effective;
  OptionTable t("extract");
  DeclareExtractOptions(t, a);
  po::options_description& opts = t.description();
  po::variables_map vm;
  if (!Parse(
          argc, argv, opts, vm,
          "Usage: iclprobe extract --checkpoint FILE --out FILE [options]\n\n"
          "Runs a learner over a seeded prompt set and writes every layer's hidden states\n"
          "(/hidden/layer_LL [N, 2n, H]), its predictions, the prompts and the regression targets\n"
          "after k examples (/targets/w_ols, w_ridge, xty [N, n, d], xtx [N, n, d, d], w [N, d],\n"
          "and any --learner-targets, w_<spec> [N, n, d]).",
          "iclprobe extract --checkpoint checkpoints/d4_l8_h64.h5 --prompts 20000 --seed 7 --out "
          "acts.h5\n  mpirun -np 4 iclprobe extract ...   (each process computes and writes its "
          "own rows of the one file; the file is the same as one process writes)"))
    return 0;
  if (cfg.checkpoint.empty())
    throw std::invalid_argument("--checkpoint: required (a learner checkpoint file)");
  if (cfg.out.empty())
    throw std::invalid_argument("--out: required (the activations file to write)");
  cfg.positions = extract::ParsePositions(positions);
  if (layers != "all") cfg.layers = ParseInts("--layers", layers);
  cfg.compress = vm.count("compress") > 0;
  cfg.float16 = extract::ParseFloat16(dtype);
  CheckThreads(threads);

  // Under mpirun every rank reads the checkpoint and meets a bad one alike: a refusal of the
  // file (InputError), so one rank reports it, not every rank with its number.
  const auto info = [&] {
    try {
      return learners::ReadCheckpointInfo(cfg.checkpoint);
    } catch (const core::InputError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw core::InputError("extract", "checkpoint", e.what());
    }
  }();
  cfg.task = info.train.task;
  if (vm.count("n")) cfg.task.n = n;
  if (vm.count("noise")) cfg.task.noise = noise;  // checked by the config's Validate (the task's)
  if (vm.count("w-scale")) cfg.task.w_scale = w_scale;
  if (vm.count("fixed-w")) cfg.task.fixed_w = fixed_w;
  ApplyShifts(vm, a.shifts, cfg.task);
  if (vm.count("d-effective")) {
    if (d_effective < 1 || d_effective > cfg.task.d)
      throw std::invalid_argument("--d-effective: expected 1.." + std::to_string(cfg.task.d) +
                                  " (the learner's d), got " + std::to_string(d_effective));
    cfg.task.d_effective = d_effective == cfg.task.d ? 0 : d_effective;
  }
  if (vm.count("learner-targets")) {
    cfg.learner_targets = extract::CanonicalLearnerSpecs(
        ListEntries("--learner-targets", a.learner_targets), cfg.task);
  }
  cfg.Validate(info.model);
  // Parallel over prompt groups, one intra-op thread each (see extract::Extract).
  SetSerialKernels();
  core::ThreadPool pool(ResolveThreads(threads));

  extract::ExtractOptions eo;
  eo.force = vm.count("force") > 0;
  eo.inputs = InputPaths(t.specs(), vm);
  eo.resume = vm.count("resume") > 0;
  eo.stop_after_batches = stop_after;
  // Under mpirun rank 0 reports for all ranks.
  Progress progress("extract", cfg.prompts, vm.count("quiet") > 0 || !dist::IsRoot(), "prompts");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = extract::Extract(cfg, eo, pool, [&](const extract::ExtractProgress& p) {
    progress.Update(p.done, fmt::format("{:.1f} MB written", p.megabytes_written));
  });
  progress.Finish();
  if (!dist::IsRoot()) return 0;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double mb = double(std::filesystem::file_size(r.written)) / (1 << 20);
  std::cout << fmt::format(
      "{} {}: {} of {} prompts, states {}, positions {}, {:.1f} MB, {} ({} prompts/write, "
      "chunks of {})\n",
      r.finished ? "wrote" : "stopped; partial file", r.written, r.n_complete, cfg.prompts, layers,
      positions, mb, FormatDuration(secs), r.batch, r.chunk_rows);
  if (!r.finished) std::cout << "continue with the same command and --resume\n";
  return 0;
}

}  // namespace icl::cli
