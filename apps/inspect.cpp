// iclprobe inspect: summarises a checkpoint, and exports a copy without /train_state (the
// form in which learners are shipped).
#include <fmt/format.h>
#include <filesystem>
#include <iostream>

#include "apps/cli.hpp"
#include "data/hdf5.hpp"
#include "data/output.hpp"
#include "learners/checkpoint.hpp"

namespace icl::cli {

int RunInspect(int argc, char** argv) {
  std::string checkpoint, export_path;
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("checkpoint,c", po::value(&checkpoint), "checkpoint to describe (also the first positional argument)")
      ("export", po::value(&export_path), "write a copy without /train_state (cannot be resumed; smaller)")
      ("force", "overwrite an existing --export file");
  // clang-format on
  po::positional_options_description pos;
  pos.add("checkpoint", 1);
  opts.add_options()("help,h", "show this help and exit");
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(opts).positional(pos).run(), vm);
  if (vm.count("help")) {
    std::cout
        << "Usage: iclprobe inspect CHECKPOINT [--export OUT]\n\n"
           "Prints a checkpoint's model and training configuration, step and parameter count.\n\n"
        << opts << "\nExample:\n  iclprobe inspect runs/d4l8.h5 --export checkpoints/d4l8.h5\n";
    return 0;
  }
  po::notify(vm);
  if (checkpoint.empty())
    throw std::invalid_argument("inspect: give a checkpoint file (see --help)");
  data::RequireRegularInput(checkpoint, "checkpoint");
  learners::SaveOptions so;
  so.force = vm.count("force") > 0;
  so.inputs = {checkpoint};  // --force never replaces the file being exported
  so.field = "export";
  if (vm.count("export") && export_path.empty())
    throw std::invalid_argument("--export: expected the file to write, got an empty name");
  // The lock first, held to the end: nothing touches the export's names (its partial file
  // among them) while another run may be writing them.
  std::unique_ptr<data::OutputLock> lock;
  if (!export_path.empty()) {
    lock = std::make_unique<data::OutputLock>(export_path, "export");
    so.lock = false;
    // Every check on the export path before any work.
    data::AtomicOutput check(export_path, "export",
                             data::OutputOptions{so.force, so.inputs, false, /*lock=*/false});
  }

  learners::CheckpointInfo info;
  learners::Transformer model = learners::LoadCheckpoint(checkpoint, &info);
  const h5::File f = h5::File::Open(checkpoint);
  std::cout << fmt::format(
      "checkpoint   {}\ncreated_by   {}\nstep         {} of {}\nparameters   {}\nmodel        {}\n"
      "task         {}\ntrain        {}\nresumable    {}\n",
      checkpoint, f.GetString("created_by"), info.step, info.train.steps,
      learners::CountParameters(*model), info.model.ToJson(), info.train.task.ToJson(),
      info.train.ToJson(), info.has_train_state ? "yes (/train_state present)" : "no");
  if (!export_path.empty()) {
    learners::SaveCheckpoint(export_path, model, info.train, info.step, /*optimizer=*/nullptr, so);
    std::cout << "exported " << export_path << " (without /train_state)\n";
  }
  return 0;
}

}  // namespace icl::cli
