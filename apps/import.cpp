// iclprobe import: a learner trained elsewhere, written as an ordinary iclprobe checkpoint.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "core/hdf5.hpp"
#include "core/output.hpp"
#include "core/sha256.hpp"
#include "interop/garg.hpp"
#include "interop/safetensors.hpp"
#include "interop/torch_archive.hpp"
#include "learners/checkpoint.hpp"

namespace icl::cli {

namespace {

// What the input file is, from its first bytes.
std::string SniffFormat(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[4] = {0};
  f.read(head, 4);
  if (f.gcount() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4)
    return "torch.save";
  return "safetensors";
}

}  // namespace

namespace {

// What the command line sets.
struct ImportArgs {
  std::string in, out, format;
  interop::GargShape shape;
  int d_effective = 0;
};

void DeclareImportOptions(OptionTable& t, ImportArgs& a) {
  // clang-format off
  t.Optional("in", &a.in, "in", "the learner's tensors (also the first positional argument): a "
       "torch.save file of its state dict (bare, or under 'model_state_dict' as Garg et al.'s "
       "training script saves it) or a .safetensors file, with Garg et al.'s names");
  t.Optional("format,f", &a.format, "format", "the learner's layout: garg (Garg et al. 2022: read-in, GPT-2 "
       "backbone fed by embeddings, read-out; y-token [y, 0, ..., 0])");
  t.Optional("heads", &a.shape.heads, "shape.heads", "attention heads (required: the tensors do not say; Garg "
       "et al.'s released linear-regression learner has 8)");
  t.Optional("d", &a.shape.d, "shape.d", "input dimension (default: the read-in's width; checked against it)");
  t.Optional("n", &a.shape.n, "shape.n", "examples per prompt (default: all the learned positions allow, "
       "n_positions)");
  t.Optional("d-effective", &a.d_effective, "d_effective", "input dimensions the task uses (default: all d); "
       "x and w are zero beyond them, as in Garg et al.'s curriculum, for a learner trained or "
       "probed on fewer dimensions than its width");
  t.Optional("out,o", &a.out, "out", "the iclprobe checkpoint to write (required)");
  t.Switch("force", "overwrite an existing --out file");
  // clang-format on
  t.Input("in").Output("out");
}

}  // namespace

std::vector<OptionSpec> ImportOptions() {
  return SpecsOf("import", &DeclareImportOptions);
}

int RunImport(int argc, char** argv) {
  ImportArgs a;
  auto& in = a.in;
  auto& out = a.out;
  auto& format = a.format;
  auto& shape = a.shape;
  auto& d_effective = a.d_effective;
  OptionTable t("import");
  DeclareImportOptions(t, a);
  po::options_description& opts = t.description();
  po::positional_options_description pos;
  pos.add("in", 1);
  opts.add_options()("help,h", "show this help and exit");
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout
        << "Usage: iclprobe import --format garg IN --heads M --out learner.h5\n\n"
           "Writes a learner trained elsewhere as an iclprobe checkpoint, so that extract, probe,\n"
           "baselines, compare and report work on it unchanged. garg: Garg et al.'s GPT-2\n"
           "in-context learner, whose computation iclprobe's transformer reproduces exactly (the\n"
           "width-d token layout is folded into the input projection; GPT-2's Conv1D weights are\n"
           "transposed). Its task: x ~ N(0, I_d), w ~ N(0, I_d), y = x'w, noiseless.\n\n"
        << opts
        << "\nExample:\n  iclprobe import --format garg state.pt --heads 8 --out "
           "garg.h5\n";
    return 0;
  }
  po::notify(vm);
  if (in.empty()) throw std::invalid_argument("--in: required (the learner's tensors)");
  interop::ParseImportLayout(format);  // the one layout so far: Garg et al.'s
  if (out.empty()) throw std::invalid_argument("--out: required (the checkpoint to write)");
  if (vm.count("heads") == 0)
    throw std::invalid_argument(
        "--heads: required (the number of attention heads is not stored in the tensors)");
  if (shape.heads < 1) throw std::invalid_argument("--heads: expected a positive count");
  if (vm.count("d") && shape.d < 1) throw std::invalid_argument("--d: expected a positive size");
  if (vm.count("n") && shape.n < 1) throw std::invalid_argument("--n: expected a positive count");
  if (vm.count("d-effective") && d_effective < 1)
    throw std::invalid_argument("--d-effective: expected a positive count");
  core::RequireRegularInput(in, "in");
  learners::SaveOptions so;
  so.force = vm.count("force") > 0;
  so.inputs = InputPaths(t.specs(), vm);
  // The lock first, held to the end: nothing touches the output's names (its partial file
  // among them) while another run may be writing them.
  const core::OutputLock lock(out, "out");
  so.lock = false;
  {  // every check on the output path before any work
    core::AtomicOutput check(out, "out",
                             core::OutputOptions{so.force, so.inputs, false, /*lock=*/false});
  }
  const std::string kind = SniffFormat(in);
  interop::NamedTensors tensors;
  std::optional<std::int64_t> train_step;
  std::string stored_as = kind;
  if (kind == "torch.save") {
    interop::TorchSaveContents contents = interop::ReadTorchSave(in, "in");
    tensors = std::move(contents.tensors);
    train_step = contents.train_step;
    if (!contents.key.empty()) stored_as += ", under '" + contents.key + "'";
  } else {
    // Anything else is read as safetensors, whose reader says precisely what does not fit.
    tensors = interop::ReadSafetensors(in, "in");
  }
  learners::ModelConfig mc;
  learners::Transformer model = interop::FromGarg(tensors, shape, "in", &mc);
  // The imported learner's task, as Garg et al. trained it; nothing is trained here.
  learners::TrainConfig tc;
  tc.task.d = mc.d;
  tc.task.n = mc.n_max;
  tc.task.noise = 0;
  tc.task.w_scale = 1;
  if (d_effective > mc.d)
    throw std::invalid_argument(fmt::format(
        "--d-effective: {} exceeds the learner's input dimension d = {}", d_effective, mc.d));
  tc.task.d_effective = d_effective == mc.d ? 0 : d_effective;
  tc.steps = 1;
  tc.Validate();
  const std::string sha = core::Sha256File(in);
  so.extra = [&](h5::File& f) {
    namespace layout = learners::checkpoint_layout;
    f.SetAttr(layout::kImportedFrom, in);
    f.SetAttr(layout::kImportedSha256, sha);
    f.SetAttr(layout::kImportedFormat, "garg (" + stored_as + ")");
    if (train_step) f.SetAttr(layout::kImportedTrainStep, static_cast<std::int64_t>(*train_step));
  };
  learners::SaveCheckpoint(out, model, tc, /*step=*/tc.steps, /*optimizer=*/nullptr, so);
  std::cout << fmt::format(
      "imported {} ({}, {} tensors{}): d={}{} n={} L={} H={} M={}, {} parameters; wrote {}\n", in,
      stored_as, tensors.size(),
      train_step ? fmt::format(", trained {} steps", *train_step) : std::string(), mc.d,
      d_effective ? fmt::format(" (task on the first {})", d_effective) : std::string(), mc.n_max,
      mc.layers, mc.hidden, mc.heads, learners::CountParameters(*model), out);
  return 0;
}

}  // namespace icl::cli
