// The checkpoint's schema with the /construction group of a constructed learner (construct.hpp's
// CheckpointSchema): the whole checkpoint format.
#include <string>

#include "construct/construct.hpp"

namespace icl::construct {

namespace {

namespace cl = construction_layout;
using formats::AttrType;

void AddGroupAttributes(formats::Schema& s) {
  const std::string g = cl::kGroup, layout = g + "/" + cl::kLayout,
                    quantity = g + "/" + cl::kQuantities + "/<name>";
  formats::AttrSpec description =
      formats::AttrOn(g, "description", AttrType::kString, "how to read the group");
  description.value = cl::kDescription;
  formats::AttrSpec rotation_seed = formats::AttrOn(
      g, "rotation_seed", AttrType::kInt, "the seed of the rotation Q of the residual stream");
  rotation_seed.when = "a rotated construction";
  const std::vector<formats::AttrSpec> attrs = {
      formats::AttrOn(g, "program", AttrType::kString,
                      "the program: gd, gd:K or newton:K:C[:LAMBDA]"),
      formats::AttrOn(g, "alpha", AttrType::kDouble, "gd's step size"),
      formats::AttrOn(g, "steps", AttrType::kInt, "the program's steps"),
      formats::AttrOn(g, "start", AttrType::kDouble, "newton's start Y_0 = start I"),
      formats::AttrOn(g, "lambda", AttrType::kDouble, "newton's lambda (A = X'X + lambda I)"),
      description,
      formats::AttrOn(g, "distractors", AttrType::kInt, "the token distractors' count"),
      formats::AttrOn(g, "context_distractors", AttrType::kInt, "the context distractors' count q"),
      formats::AttrOn(g, "decoy", AttrType::kString, "\"\" or the quantity with a decoy (xty)"),
      formats::AttrOn(g, "nuisance", AttrType::kDouble, "the nuisance's sigma (0: none)"),
      formats::AttrOn(g, "decoy_noise", AttrType::kDouble, "the decoy's own nuisance sigma"),
      formats::AttrOn(g, "disguise_seed", AttrType::kInt, "the seed of the disguises' maps"),
      rotation_seed,
      formats::AttrOn(g, "ops", AttrType::kStringList,
                      "each op as compiled: \"mul(a, b) -> out @ block 2 mlp\""),
      formats::AttrOn(layout, "<name>", AttrType::kIntList,
                      "each named row range of the residual stream: [first row, rows]"),
      formats::AttrOn(quantity, "layer", AttrType::kInt, "the first state that holds it"),
      formats::AttrOn(quantity, "last_layer", AttrType::kInt, "the last state that holds it"),
      formats::AttrOn(quantity, "rows", AttrType::kIntList, "its rows: [first row, rows]"),
      formats::AttrOn(quantity, "positions", AttrType::kString,
                      "where it holds: y-tokens, x-tokens or all"),
      formats::AttrOn(quantity, "meaning", AttrType::kString, "what it is"),
  };
  s.attrs.insert(s.attrs.end(), attrs.begin(), attrs.end());
}

void AddDatasets(formats::Schema& s) {
  const std::string g = std::string(cl::kGroup) + "/";
  const std::vector<std::pair<const char*, std::string>> maps = {
      {cl::kDecoyMap, "M: the decoy is M X'y"},
      {cl::kNuisanceMap, "P: the nuisance adds sigma (P x_k)^2 to X'y"},
      {cl::kNuisanceMapMean, "P': the nuisance of the mean of y x"},
      {cl::kDecoyNoiseMap, "R: the decoy's nuisance adds decoy_noise (R x)^2"}};
  const std::vector<std::string> when = {"a decoy", "a nuisance", "a nuisance",
                                         "a decoy with a nuisance of its own"};
  for (std::size_t i = 0; i < maps.size(); ++i)
    s.datasets.push_back(formats::Data(g + maps[i].first, {"d", "d"}, cl::kMapLabels,
                                       maps[i].second + " (row-major)", formats::Values::kFinite,
                                       {}, when[i]));
  s.datasets.push_back(
      formats::Data(g + cl::kRotation, {"hidden", "hidden"}, cl::kRotationLabels,
                    "Q: every hidden state is Q h, h the state of the axis-aligned layout",
                    formats::Values::kFinite, {}, "a rotated construction"));
}

formats::Schema Make() {
  formats::Schema s = learners::CheckpointSchema();
  s.owner =
      "`learners/checkpoint.cpp` (the root attributes, `/params` and `/train_state`; the "
      "attributes of an import are named there and written by `apps/import.cpp`) and "
      "`construct/construct.cpp` (`/construction`, read back by `ReadConstruction`)";
  s.sizes.push_back({"d", "d of model_config"});
  AddGroupAttributes(s);
  AddDatasets(s);
  return s;
}

}  // namespace

const formats::Schema& CheckpointSchema() {
  static const formats::Schema s = Make();
  return s;
}

}  // namespace icl::construct
