// iclprobe train: trains a transformer learner in context and writes an HDF5 checkpoint, with
// a held-out evaluation log (CSV) beside it.
#include <torch/torch.h>

#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "apps/cli.hpp"
#include "apps/progress.hpp"
#include "apps/subcommands.hpp"
#include "core/output.hpp"
#include "learners/train_log.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace fs = std::filesystem;

namespace {

// What the command line sets.
struct TrainArgs {
  TrainArgs() {
    train.task.d = 4;
    train.task.n = 12;
  }
  learners::ModelConfig model;
  learners::TrainConfig train;
  std::string out, task_family = "gaussian";
  int threads = 0;
  std::int64_t stop_after = -1;
  bool resume = false, init_only = false, force = false, quiet = false;
};

void DeclareTrainOptions(OptionTable& t, TrainArgs& a) {
  learners::ModelConfig& model = a.model;
  learners::TrainConfig& train = a.train;
  std::string& out = a.out;
  std::int64_t& stop_after = a.stop_after;
  // clang-format off
  t.Optional("out,o", &out, "out", "checkpoint to write (required), e.g. runs/d4l8.h5; the "
       "evaluation log goes beside it as <name>.train.csv");
  t.Value("d", &train.task.d, "train.task.d", "input dimension d");
  t.Value("n", &train.task.n, "train.task.n", "examples per training prompt (also the model's n_max)");
  t.Value("layers", &model.layers, "model.layers", "transformer blocks L");
  t.Value("hidden", &model.hidden, "model.hidden", "hidden size H");
  t.Value("heads", &model.heads, "model.heads", "attention heads M");
  t.Value("mlp-ratio", &model.mlp_ratio, "model.mlp_ratio", "MLP width as a multiple of H");
  t.Value("kernels", &model.kernels, "model.kernels", "arithmetic of the passes: 3 = fused GELU and "
       "attention (fastest), 2 = fused GELU, 1 = LibTorch's operators throughout (what runs before this option computed; "
       "pass it to repeat one of them bit for bit)");
  t.Value("bottleneck", &model.bottleneck, "model.bottleneck", "train a bottleneck learner: "
       "masks that let the prediction at example k+1 see the context only through the state after "
       "block N of the y-token of example k (x-tokens see only themselves up to block N, y-tokens "
       "only themselves after it); 1..layers-1, 0 = none");
  t.Value("decoy-layer", &model.decoy_layer, "model.decoy_layer", "train a decoy: a linear head "
       "on state N (1..layers) of the last y-token, which no prediction reads, learns "
       "--decoy-target beside the predictions, so that it is decodable there and used by nothing; "
       "0 = none");
  t.Value("decoy-target", &model.decoy_target, "model.decoy_target", "what the decoy head learns: "
       "xty (X'y / n of the prompt's examples) or sigma (the noise level a noise-mix task drew), "
       "e.g. --decoy-layer 4 --decoy-target xty");
  t.Value("steps", &train.steps, "train.steps", "training steps");
  t.Value("batch", &train.batch, "train.batch", "prompts per step (fresh every step)");
  t.Value("shards", &train.shards, "train.shards", "split each batch into this many shards, computed in parallel on --threads workers and "
       "summed in a fixed order: results do not depend on --threads (at most --batch)");
  t.Value("lr", &train.lr, "train.lr", "peak learning rate");
  t.Value("warmup", &train.warmup, "train.warmup", "linear warmup steps; -1 = steps/5 as in the paper");
  t.Value("beta1", &train.beta1, "train.beta1", "AdamW beta1");
  t.Value("beta2", &train.beta2, "train.beta2", "AdamW beta2 (0.98 as in the paper's code)");
  t.Value("eps", &train.eps, "train.eps", "AdamW epsilon");
  t.Value("weight-decay", &train.weight_decay, "train.weight_decay", "AdamW weight decay");
  t.Value("clip", &train.clip, "train.clip", "max global gradient norm (0 = no clipping)");
  t.Value("noise", &train.task.noise, "train.task.noise", "label noise sigma");
  t.Value("w-scale", &train.task.w_scale, "train.task.w_scale", "weight scale tau");
  t.Implicit("fixed-w", &train.task.fixed_w, true, "train.task.fixed_w", "control task: w = all ones (the paper's probing control)");
  t.Value("task-family", &a.task_family, "task_family", "the family of training tasks: gaussian "
       "(w ~ N(0, tau^2 I)), pool:M[:SEED] (M weight vectors drawn once from SEED, default 1, one "
       "per prompt), noise-mix:S1,S2,...[:P1,P2,...] (each prompt's noise sigma drawn from the "
       "list, probabilities uniform unless given), sparse:S (S non-zero coordinates of w)");
  t.Value("seed", &train.seed, "train.seed", "seed of the initialisation and the training prompts");
  t.Value("eval-every", &train.eval_every, "train.eval_every", "evaluate on held-out prompts every N steps");
  t.Value("eval-prompts", &train.eval_prompts, "train.eval_prompts", "held-out prompts per evaluation");
  t.Value("eval-seed", &train.eval_seed, "train.eval_seed", "seed of the held-out prompts");
  t.Value("save-every", &train.save_every, "train.save_every", "write the checkpoint every N steps");
  t.Switch("resume", "continue the run in --out from its last checkpoint (configuration from the file)");
  t.Switch("init-only", "write an untrained (randomly initialised) checkpoint and stop: the "
       "random-model control");
  t.Optional("stop-after-steps", &stop_after, "stop_after", "stop after this many steps of this call, keeping a checkpoint to --resume");
  t.Switch("force", "overwrite an existing --out");
  t.Switch("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(t, &a.threads);
  // --out is read too with --resume, and it replaces itself: a checkpoint, not an input.
  t.Output("out");
}

// --resume takes the configuration from the checkpoint: an option that would change it is an
// error, not silently ignored.
void CheckResume(const po::variables_map& vm, const std::string& out) {
  for (const char* o : {"d",           "n",           "layers",      "hidden",       "heads",
                        "mlp-ratio",   "steps",       "batch",       "lr",           "warmup",
                        "beta1",       "beta2",       "eps",         "weight-decay", "clip",
                        "noise",       "w-scale",     "seed",        "eval-every",   "eval-prompts",
                        "eval-seed",   "save-every",  "shards",      "kernels",      "bottleneck",
                        "task-family", "decoy-layer", "decoy-target"})
    if (vm.count(o) && !vm[o].defaulted())
      throw std::invalid_argument(
          std::string("--") + o +
          ": --resume takes the configuration from the checkpoint; drop this option");
  if (vm.count("fixed-w"))
    throw std::invalid_argument(
        "--fixed-w: --resume takes the configuration from the checkpoint; drop this option");
  if (!fs::exists(out))
    throw std::invalid_argument("--resume: no checkpoint '" + out + "' to continue");
  core::RequireRegularInput(out, "out");
}

// Checks on the checkpoint path (a regular file or absent, its folder writable) and on the
// log beside it, before any work.
void CheckLog(const TrainArgs& a, const std::string& csv) {
  // A log without its checkpoint is what a run stopped before its first checkpoint leaves:
  // nothing to resume, so a plain re-run replaces it (StartTrainLog) instead of asking for
  // --force, which --resume could not satisfy either.
  const bool leftover = !a.resume && !fs::exists(a.out) && learners::IsTrainLog(csv);
  if (leftover && !a.quiet)
    std::cerr << "iclprobe train: note: replacing '" << csv
              << "', the log of a run stopped before its first checkpoint\n";
  if (!a.resume && !leftover && fs::exists(csv) && !a.force)
    throw std::invalid_argument("--out: the evaluation log '" + csv +
                                "' exists; pass --force to overwrite it or --resume to continue "
                                "its run");
  if (fs::exists(csv) && !fs::is_regular_file(csv))
    throw std::invalid_argument("--out: the evaluation log '" + csv + "' is not a regular file");
}

void PrintRunLine(const TrainArgs& a, int workers, std::int64_t start_step) {
  torch::manual_seed(a.train.seed);
  learners::Transformer model(a.model);
  std::cout << fmt::format(
      "train: {} parameters, d={} n={} L={} H={} M={}, {} steps of {} prompts, lr {:g}, "
      "noise {:g}{}{}{}{}, {} thread(s){}\n",
      learners::CountParameters(*model), a.model.d, a.train.task.n, a.model.layers, a.model.hidden,
      a.model.heads, a.train.steps, a.train.batch, a.train.lr, a.train.task.noise,
      a.train.task.fixed_w ? ", fixed w" : "",
      a.train.task.family.kind == data::TaskFamily::Kind::kGaussian
          ? ""
          : ", task family " + a.train.task.family.Spec(),
      a.model.bottleneck ? fmt::format(", bottleneck at state {}", a.model.bottleneck) : "",
      a.model.decoy_layer ? fmt::format(", decoy {} at state {} of the last y-token",
                                        a.model.decoy_target, a.model.decoy_layer)
                          : "",
      std::min(workers, a.train.shards),
      a.resume ? fmt::format(", resuming at step {}", start_step) : "");
}

// One line per evaluation: the held-out error / d next to the reference's at k = 0, d, n - 1,
// and the largest gap where the reference is the benchmark.
void PrintEvaluation(const learners::EvalRecord& r, int d) {
  const int n = r.model_error.n_elem;
  const bool ols = r.benchmark_from_k > 0;  // the gap counts from there (EvalRecord)
  double gap = 0;
  for (int k = r.benchmark_from_k; k < n; ++k)
    gap = std::max(gap, r.model_error(k) - r.ref_error(k));
  std::cout << fmt::format(
                   "step {:>7}  lr {:.2e}  train {:.4f}  eval {:.4f}  err/d model|{}  k=0 "
                   "{:.3f}|{:.3f}  "
                   "k={} {:.3f}|{:.3f}  k={} {:.3f}|{:.3f}  max gap{} {:.4f}\n",
                   r.step, r.lr, r.train_loss, r.eval_loss, r.ref_name, r.model_error(0),
                   r.ref_error(0), d, r.model_error(std::min(d, n - 1)),
                   r.ref_error(std::min(d, n - 1)), n - 1, r.model_error(n - 1), r.ref_error(n - 1),
                   ols ? " k>d" : "", gap)
            << std::flush;
}

}  // namespace

std::vector<OptionSpec> TrainOptions() {
  return SpecsOf("train", &DeclareTrainOptions);
}

int RunTrain(int argc, char** argv) {
  TrainArgs a;
  OptionTable t("train");
  DeclareTrainOptions(t, a);
  po::variables_map vm;
  if (!Parse(
          argc, argv, t.description(), vm,
          "Usage: iclprobe train --out FILE [options]\n\n"
          "Trains a decoder-only transformer to do linear regression in context (fresh seeded\n"
          "prompts every step, AdamW, linear warmup then cosine decay) and writes an HDF5\n"
          "checkpoint. Every --eval-every steps it prints the held-out per-k error / d next to\n"
          "OLS's on the same prompts and appends it to <out>.train.csv.",
          "iclprobe train --d 4 --n 12 --layers 8 --hidden 64 --heads 4 --steps 20000 --batch 64 "
          "--lr 1e-3 --out runs/d4l8.h5"))
    return 0;
  if (a.out.empty()) throw std::invalid_argument("--out: required (the checkpoint file to write)");
  a.resume = vm.count("resume") > 0;
  a.init_only = vm.count("init-only") > 0;
  a.force = vm.count("force") > 0;
  a.quiet = vm.count("quiet") > 0;
  if (a.resume && a.init_only)
    throw std::invalid_argument("--resume and --init-only exclude each other");
  if (a.resume && a.force) throw std::invalid_argument("--resume and --force exclude each other");
  if (a.resume) {
    CheckResume(vm, a.out);
  } else {
    if (fs::exists(a.out) && !a.force)
      throw std::invalid_argument("--out: '" + a.out +
                                  "' exists; pass --force to overwrite it or --resume to continue "
                                  "it");
    a.model.d = a.train.task.d;
    a.model.n_max = a.train.task.n;
    a.train.task.family = data::ParseTaskFamily(a.task_family);
    a.model.Validate();
    a.train.Validate();
  }
  CheckThreads(a.threads);
  const std::string csv = learners::TrainLogPath(a.out);
  if (a.init_only) {
    learners::SaveOptions so;
    so.force = a.force;
    so.field = "out";
    learners::WriteInitCheckpoint(a.model, a.train, a.out, so);
    std::cout << "wrote untrained checkpoint " << a.out << " (" << a.model.ToJson() << ", seed "
              << a.train.seed << ")\n";
    return 0;
  }
  // The lock that keeps a second run off this output, held until the run ends; the log goes
  // with it.
  core::AtomicOutput guard(a.out, "out", {/*force=*/a.force || a.resume, {}, false, /*lock=*/true});
  CheckLog(a, csv);
  // Parallel over the batch's shards, one intra-op thread each (see learners::Train).
  SetSerialKernels();
  core::ThreadPool pool(ResolveThreads(a.threads));
  std::int64_t start_step = 0;
  if (a.resume) {
    const auto info = learners::ReadCheckpointInfo(a.out);
    start_step = info.step;
    a.train = info.train;
    a.model = info.model;
    learners::TruncateTrainLog(csv, start_step, "out");
  } else {
    learners::StartTrainLog(csv, a.train.task.noise > 0);
  }
  PrintRunLine(a, pool.size(), start_step);

  Progress progress("train", a.train.steps, a.quiet, "steps");
  double last_loss = NAN;
  learners::TrainCallbacks cb;
  cb.on_step = [&](std::int64_t step, std::int64_t, double loss) {
    last_loss = loss;
    progress.Update(step, fmt::format("loss {:.4f}", loss));
  };
  cb.on_note = [](const std::string& note) {
    std::cerr << "iclprobe train: note: " << note << "\n";
  };
  cb.on_eval = [&](const learners::EvalRecord& r) {
    progress.Finish();
    PrintEvaluation(r, a.model.d);
    try {
      learners::AppendTrainLog(csv, r);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(e.what()) + "; the last checkpoint is kept at '" +
                               a.out + "'");
    }
  };
  const learners::TrainRequest req{a.model,       a.train, a.out, a.resume, a.stop_after,
                                   /*lock=*/false};
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = learners::Train(req, pool, cb);
  progress.Finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("{} at step {} of {} in {} (last loss {:.4f}); checkpoint {}, log {}\n",
                           result.finished ? "finished" : "stopped", result.step, a.train.steps,
                           FormatDuration(secs), last_loss, a.out, csv);
  if (!result.finished)
    std::cout << "continue with: iclprobe train --out " << a.out << " --resume\n";
  return 0;
}

}  // namespace icl::cli
