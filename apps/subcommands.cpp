// The table of subcommands (apps/subcommands.hpp).
#include "apps/subcommands.hpp"

namespace icl::cli {

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand> table = {
      {"baselines",
       "per-k error of the classical learners (OLS, ridge, GD, SGD, kNN) on seeded prompts",
       BaselinesOptions, RunBaselines, /*shares_ranks=*/false, /*torch_pool=*/true},
      {"train", "train a transformer learner in context and write an HDF5 checkpoint", TrainOptions,
       RunTrain, /*shares_ranks=*/false, /*torch_pool=*/true},
      {"extract", "stream every layer's hidden states and the regression targets to HDF5",
       ExtractOptions, RunExtract, /*shares_ranks=*/true},
      {"probe",
       "fit ridge / linear / MLP readouts of regression quantities per layer, with controls",
       ProbeOptions, RunProbe, /*shares_ranks=*/true},
      {"report", "probe tables by layer, decodability onset, plots", ReportOptions, RunReport},
      {"compare", "which algorithm does a trained learner match? SPD, ILWD and linearity per k",
       CompareOptions, RunCompare, /*shares_ranks=*/false, /*torch_pool=*/true},
      {"inspect", "describe a checkpoint; export a copy without its training state", InspectOptions,
       RunInspect},
      {"construct", "write a transformer whose weights compute a known algorithm (RAW programs)",
       ConstructOptions, RunConstruct},
      {"import", "write a learner trained elsewhere (Garg et al.'s GPT-2 layout) as a checkpoint",
       ImportOptions, RunImport},
      {"intervene",
       "does the model use what a probe reads? edits along probe directions, per layer",
       InterveneOptions, RunIntervene},
      {"trace", "which iterate of GD, Newton or the ridge path does each layer's prediction match?",
       TraceOptions, RunTrace},
      {"swap", "does the query use its context as an algorithm would? B's context under A's query",
       SwapOptions, RunSwap},
      {"erase", "does the model need what a layer carries? LEACE erasure, per layer and k",
       EraseOptions, RunErase},
      {"das", "is there a subspace the model uses as an algorithm says? learned interchanges (DAS)",
       DasOptions, RunDas},
  };
  return table;
}

const Subcommand* FindSubcommand(const std::string& name) {
  for (const Subcommand& s : Subcommands())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace icl::cli
