// iclprobe import: a learner trained elsewhere, written as an ordinary iclprobe checkpoint.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "apps/cli.hpp"
#include "data/hdf5.hpp"
#include "data/output.hpp"
#include "data/sha256.hpp"
#include "learners/checkpoint.hpp"
#include "learners/import_garg.hpp"

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

int RunImport(int argc, char** argv) {
  std::string in, out, format;
  learners::GargShape shape;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("in", po::value(&in), "the learner's tensors (also the first positional argument): a "
       ".safetensors file with Garg et al.'s names")
      ("format,f", po::value(&format), "the learner's layout: garg (Garg et al. 2022: read-in, GPT-2 "
       "backbone fed by embeddings, read-out; y-token [y, 0, ..., 0])")
      ("heads", po::value(&shape.heads), "attention heads (required: the tensors do not say; Garg "
       "et al.'s released linear-regression learner has 8)")
      ("d", po::value(&shape.d), "input dimension (default: the read-in's width; checked against it)")
      ("n", po::value(&shape.n), "examples per prompt (default: all the learned positions allow, "
       "n_positions)")
      ("out,o", po::value(&out), "the iclprobe checkpoint to write (required)")
      ("force", "overwrite an existing --out file");
  // clang-format on
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
        << "\nExample:\n  iclprobe import --format garg model.safetensors --heads 8 --out "
           "garg.h5\n";
    return 0;
  }
  po::notify(vm);
  if (in.empty()) throw std::invalid_argument("--in: required (the learner's tensors)");
  if (format != "garg")
    throw std::invalid_argument("--format: expected garg, got '" + format + "'");
  if (out.empty()) throw std::invalid_argument("--out: required (the checkpoint to write)");
  if (vm.count("heads") == 0)
    throw std::invalid_argument(
        "--heads: required (the number of attention heads is not stored in the tensors)");
  if (shape.heads < 1) throw std::invalid_argument("--heads: expected a positive count");
  if (vm.count("d") && shape.d < 1) throw std::invalid_argument("--d: expected a positive size");
  if (vm.count("n") && shape.n < 1) throw std::invalid_argument("--n: expected a positive count");
  data::RequireRegularInput(in, "in");
  learners::SaveOptions so;
  so.force = vm.count("force") > 0;
  so.inputs = {in};
  {  // every check on the output path before any work
    data::AtomicOutput check(out, "out", data::OutputOptions{so.force, so.inputs, false, false});
  }
  const std::string kind = SniffFormat(in);
  if (kind == "torch.save")
    throw std::invalid_argument(
        "--in: '" + in +
        "' is a torch.save archive, which this version cannot read yet; convert it to "
        "safetensors (safetensors.torch.save_file(state_dict, 'model.safetensors'))");
  // Anything else is read as safetensors, whose reader says precisely what does not fit.
  const learners::NamedTensors tensors = learners::ReadSafetensors(in, "in");
  learners::ModelConfig mc;
  learners::Transformer model = learners::FromGarg(tensors, shape, "in", &mc);
  // The imported learner's task, as Garg et al. trained it; nothing is trained here.
  learners::TrainConfig tc;
  tc.task.d = mc.d;
  tc.task.n = mc.n_max;
  tc.task.noise = 0;
  tc.task.w_scale = 1;
  tc.steps = 1;
  tc.Validate();
  const std::string sha = data::Sha256File(in);
  so.extra = [&](h5::File& f) {
    f.SetAttr("imported_from", in);
    f.SetAttr("imported_sha256", sha);
    f.SetAttr("imported_format", std::string("garg (safetensors)"));
  };
  learners::SaveCheckpoint(out, model, tc, /*step=*/tc.steps, /*optimizer=*/nullptr, so);
  std::cout << fmt::format(
      "imported {} ({} tensors): d={} n={} L={} H={} M={}, {} parameters; wrote {}\n", in,
      tensors.size(), mc.d, mc.n_max, mc.layers, mc.hidden, mc.heads,
      learners::CountParameters(*model), out);
  return 0;
}

}  // namespace icl::cli
