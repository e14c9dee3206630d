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
#include "data/output.hpp"
#include "learners/trainer.hpp"

namespace icl::cli {

namespace fs = std::filesystem;

namespace {

std::string CsvPathFor(const std::string& checkpoint) {
  fs::path p(checkpoint);
  if (p.extension() == ".h5") p.replace_extension("");
  return p.string() + ".train.csv";
}

// Keeps the header and the rows of steps <= `step` (rows written after the last checkpoint
// of an interrupted run are evaluated again on resume). The log is rewritten atomically.
void TruncateLog(const std::string& path, std::int64_t step) {
  if (!fs::exists(path)) return;
  data::RequireRegularInput(path, "out");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("training log '" + path + "': cannot read it");
  std::string kept, line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      kept += line + "\n";
      continue;
    }
    if (line.empty()) continue;
    const std::string field = line.substr(0, line.find(','));
    std::size_t used = 0;
    long long s = -1;
    try {
      s = std::stoll(field, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != field.size() || s < 0)
      throw std::invalid_argument("training log '" + path + "' line " + std::to_string(line_no) +
                                  ": expected a step number in the first column, got '" +
                                  field.substr(0, 40) + "'");
    if (s <= step) kept += line + "\n";
  }
  data::AtomicOutput out(path, "out", {/*force=*/true, {}, false, /*lock=*/false});
  out.CommitText(kept);
}

}  // namespace

int RunTrain(int argc, char** argv) {
  learners::ModelConfig model;
  learners::TrainConfig train;
  train.task.d = 4;
  train.task.n = 12;
  std::string out;
  int threads = 0;
  std::int64_t stop_after = -1;

  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("out,o", po::value(&out), "checkpoint to write (required), e.g. runs/d4l8.h5; the "
       "evaluation log goes beside it as <name>.train.csv")
      ("d", po::value(&train.task.d)->default_value(train.task.d), "input dimension d")
      ("n", po::value(&train.task.n)->default_value(train.task.n),
       "examples per training prompt (also the model's n_max)")
      ("layers", po::value(&model.layers)->default_value(model.layers), "transformer blocks L")
      ("hidden", po::value(&model.hidden)->default_value(model.hidden), "hidden size H")
      ("heads", po::value(&model.heads)->default_value(model.heads), "attention heads M")
      ("mlp-ratio", po::value(&model.mlp_ratio)->default_value(model.mlp_ratio),
       "MLP width as a multiple of H")
      ("steps", po::value(&train.steps)->default_value(train.steps), "training steps")
      ("batch", po::value(&train.batch)->default_value(train.batch),
       "prompts per step (fresh every step)")
      ("shards", po::value(&train.shards)->default_value(train.shards),
       "split each batch into this many shards, computed in parallel on --threads workers and "
       "summed in a fixed order: results do not depend on --threads (at most --batch)")
      ("lr", po::value(&train.lr)->default_value(train.lr), "peak learning rate")
      ("warmup", po::value(&train.warmup)->default_value(train.warmup),
       "linear warmup steps; -1 = steps/5 as in the paper")
      ("beta1", po::value(&train.beta1)->default_value(train.beta1), "AdamW beta1")
      ("beta2", po::value(&train.beta2)->default_value(train.beta2),
       "AdamW beta2 (0.98 as in the paper's code)")
      ("eps", po::value(&train.eps)->default_value(train.eps), "AdamW epsilon")
      ("weight-decay", po::value(&train.weight_decay)->default_value(train.weight_decay),
       "AdamW weight decay")
      ("clip", po::value(&train.clip)->default_value(train.clip),
       "max global gradient norm (0 = no clipping)")
      ("noise", po::value(&train.task.noise)->default_value(train.task.noise), "label noise sigma")
      ("w-scale", po::value(&train.task.w_scale)->default_value(train.task.w_scale),
       "weight scale tau")
      ("fixed-w", po::value(&train.task.fixed_w)->implicit_value(true),
       "control task: w = all ones (the paper's probing control)")
      ("seed", po::value(&train.seed)->default_value(train.seed),
       "seed of the initialisation and the training prompts")
      ("eval-every", po::value(&train.eval_every)->default_value(train.eval_every),
       "evaluate on held-out prompts every N steps")
      ("eval-prompts", po::value(&train.eval_prompts)->default_value(train.eval_prompts),
       "held-out prompts per evaluation")
      ("eval-seed", po::value(&train.eval_seed)->default_value(train.eval_seed),
       "seed of the held-out prompts")
      ("save-every", po::value(&train.save_every)->default_value(train.save_every),
       "write the checkpoint every N steps")
      ("resume", "continue the run in --out from its last checkpoint (configuration from the file)")
      ("init-only", "write an untrained (randomly initialised) checkpoint and stop: the "
       "random-model control")
      ("stop-after-steps", po::value(&stop_after),
       "stop after this many steps of this call, keeping a checkpoint to --resume")
      ("force", "overwrite an existing --out")
      ("quiet,q", "no progress bar");
  // clang-format on
  AddThreadsOption(opts, &threads);
  po::variables_map vm;
  if (!Parse(
          argc, argv, opts, vm,
          "Usage: iclprobe train --out FILE [options]\n\n"
          "Trains a decoder-only transformer to do linear regression in context (fresh seeded\n"
          "prompts every step, AdamW, linear warmup then cosine decay) and writes an HDF5\n"
          "checkpoint. Every --eval-every steps it prints the held-out per-k error / d next to\n"
          "OLS's on the same prompts and appends it to <out>.train.csv.",
          "iclprobe train --d 4 --n 12 --layers 8 --hidden 64 --heads 4 --steps 20000 --batch 64 "
          "--lr 1e-3 --out runs/d4l8.h5"))
    return 0;

  if (out.empty()) throw std::invalid_argument("--out: required (the checkpoint file to write)");
  const bool resume = vm.count("resume") > 0, init_only = vm.count("init-only") > 0,
             force = vm.count("force") > 0, quiet = vm.count("quiet") > 0;
  if (resume && init_only)
    throw std::invalid_argument("--resume and --init-only exclude each other");
  if (resume && force) throw std::invalid_argument("--resume and --force exclude each other");
  if (resume) {
    for (const char* o :
         {"d",          "n",     "layers",  "hidden", "heads",      "mlp-ratio",    "steps",
          "batch",      "lr",    "warmup",  "beta1",  "beta2",      "eps",          "weight-decay",
          "clip",       "noise", "w-scale", "seed",   "eval-every", "eval-prompts", "eval-seed",
          "save-every", "shards"})
      if (vm.count(o) && !vm[o].defaulted())
        throw std::invalid_argument(
            std::string("--") + o +
            ": --resume takes the configuration from the checkpoint; drop this option");
    if (vm.count("fixed-w"))
      throw std::invalid_argument(
          "--fixed-w: --resume takes the configuration from the checkpoint; drop this option");
    if (!fs::exists(out))
      throw std::invalid_argument("--resume: no checkpoint '" + out + "' to continue");
    data::RequireRegularInput(out, "out");
  } else {
    if (fs::exists(out) && !force)
      throw std::invalid_argument(
          "--out: '" + out + "' exists; pass --force to overwrite it or --resume to continue it");
    model.d = train.task.d;
    model.n_max = train.task.n;
    RequirePositive("d", train.task.d);
    RequirePositive("n", train.task.n);
    RequirePositive("layers", model.layers);
    RequirePositive("hidden", model.hidden);
    RequirePositive("heads", model.heads);
    RequirePositive("batch", train.batch);
    RequirePositive("shards", train.shards);
    if (train.shards > train.batch)
      throw std::invalid_argument("--shards: " + std::to_string(train.shards) +
                                  " shards of a batch of " + std::to_string(train.batch) +
                                  " prompts; expected at most --batch");
    RequirePositive("lr", train.lr);
    RequireNonNegative("steps", train.steps);
    RequireNonNegative("noise", train.task.noise);
    RequirePositive("w-scale", train.task.w_scale);
    if (model.hidden % model.heads != 0)
      throw std::invalid_argument("--hidden: " + std::to_string(model.hidden) +
                                  " is not a multiple of --heads " + std::to_string(model.heads));
    model.Validate();
    train.Validate();
  }
  CheckThreads(threads);
  const std::string csv = CsvPathFor(out);

  if (init_only) {
    learners::SaveOptions so;
    so.force = force;
    so.field = "out";
    learners::WriteInitCheckpoint(model, train, out, so);
    std::cout << "wrote untrained checkpoint " << out << " (" << model.ToJson() << ", seed "
              << train.seed << ")\n";
    return 0;
  }

  // Checks on the checkpoint path (a regular file or absent, its folder writable), and the lock
  // that keeps a second run off this output, held until the run ends; the log goes with it.
  data::AtomicOutput guard(out, "out", {/*force=*/force || resume, {}, false, /*lock=*/true});
  if (!resume && fs::exists(csv) && !force)
    throw std::invalid_argument("--out: the evaluation log '" + csv +
                                "' exists; pass --force to overwrite it or --resume to continue "
                                "its run");
  if (fs::exists(csv) && !fs::is_regular_file(csv))
    throw std::invalid_argument("--out: the evaluation log '" + csv + "' is not a regular file");
  // Parallel over the batch's shards, one intra-op thread each (see TrainRequest::workers).
  SetSerialKernels();
  const int workers = ResolveThreads(threads);
  std::int64_t start_step = 0;
  if (resume) {
    const auto info = learners::ReadCheckpointInfo(out);
    start_step = info.step;
    train = info.train;
    model = info.model;
    TruncateLog(csv, start_step);
  } else {
    data::AtomicOutput log(csv, "out", {/*force=*/true, {}, false, /*lock=*/false});
    // The reference column: OLS for a noiseless task, the Bayes ridge (lambda = noise^2 /
    // w_scale^2) for a noisy one, where OLS interpolates at k = d and is no benchmark.
    log.CommitText(std::string("step,lr,train_loss,eval_loss,k,model_error,") +
                   (train.task.noise > 0 ? "bayes_error\n" : "ols_error\n"));
  }
  {
    torch::manual_seed(train.seed);
    learners::Transformer probe_model(model);
    std::cout << fmt::format(
        "train: {} parameters, d={} n={} L={} H={} M={}, {} steps of {} prompts, lr {:g}, "
        "noise {:g}{}, {} thread(s){}\n",
        learners::CountParameters(*probe_model), model.d, train.task.n, model.layers, model.hidden,
        model.heads, train.steps, train.batch, train.lr, train.task.noise,
        train.task.fixed_w ? ", fixed w" : "", std::min(workers, train.shards),
        resume ? fmt::format(", resuming at step {}", start_step) : "");
  }

  Progress progress("train", train.steps, quiet, "steps");
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
    const int n = r.model_error.n_elem, d = model.d;
    // OLS is the benchmark only past k = d; the Bayes ridge is optimal at every k.
    const bool ols = r.ref_name == "ols";
    double gap = 0;
    for (int k = ols ? d + 1 : 0; k < n; ++k)
      gap = std::max(gap, r.model_error(k) - r.ref_error(k));
    progress.Finish();
    std::cout << fmt::format(
                     "step {:>7}  lr {:.2e}  train {:.4f}  eval {:.4f}  err/d model|{}  k=0 "
                     "{:.3f}|{:.3f}  "
                     "k={} {:.3f}|{:.3f}  k={} {:.3f}|{:.3f}  max gap{} {:.4f}\n",
                     r.step, r.lr, r.train_loss, r.eval_loss, r.ref_name, r.model_error(0),
                     r.ref_error(0), d, r.model_error(std::min(d, n - 1)),
                     r.ref_error(std::min(d, n - 1)), n - 1, r.model_error(n - 1),
                     r.ref_error(n - 1), ols ? " k>d" : "", gap)
              << std::flush;
    std::ofstream f(csv, std::ios::app);
    for (int k = 0; k < n; ++k)
      f << fmt::format("{},{:.6g},{:.9g},{:.9g},{},{:.9g},{:.9g}\n", r.step, r.lr, r.train_loss,
                       r.eval_loss, k, r.model_error(k), r.ref_error(k));
    f.close();
    if (!f)
      throw std::runtime_error("cannot append to the evaluation log '" + csv +
                               "' (disk full?); the last checkpoint is kept at '" + out + "'");
  };

  learners::TrainRequest req{model, train, out, resume, stop_after, /*lock=*/false, workers};
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = learners::Train(req, cb);
  progress.Finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("{} at step {} of {} in {} (last loss {:.4f}); checkpoint {}, log {}\n",
                           result.finished ? "finished" : "stopped", result.step, train.steps,
                           FormatDuration(secs), last_loss, out, csv);
  if (!result.finished) std::cout << "continue with: iclprobe train --out " << out << " --resume\n";
  return 0;
}

}  // namespace icl::cli
