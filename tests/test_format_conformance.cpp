// A file conforms to its schema (formats/conformance.hpp): the check itself on a small schema,
// with each fault it names known in advance; then the files of the four formats whose owners
// declare their schemas (prompt set, checkpoint, activations, probes), written by the real
// writers at tiny sizes, conform, together use every declaration of their schema, and a copy
// with an undeclared dataset or a wrong label does not; the version-1 files of
// tests/fixtures/formats conform to the schemas of their kinds, and those of an earlier binary
// (tests/fixtures/compat) lack only the dimension labels.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "construct/construct.hpp"
#include "core/errors.hpp"
#include "core/hdf5.hpp"
#include "core/thread_pool.hpp"
#include "data/prompt_io.hpp"
#include "data/shift.hpp"
#include "data/task_family.hpp"
#include "extract/activations_schema.hpp"
#include "extract/extract.hpp"
#include "formats/conformance.hpp"
#include "formats/schemas.hpp"
#include "formats/writer.hpp"
#include "learners/checkpoint.hpp"
#include "learners/trainer.hpp"
#include "probes/probes_file.hpp"
#include "probes/probes_schema.hpp"
#include "probes/runner.hpp"
#include "tests/test_util.hpp"

namespace icl {
namespace {

namespace fs = std::filesystem;
using formats::AttrType;
using test::TempDir;

std::string Lines(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems)
    out += p + "\n";
  return out;
}

std::vector<std::string> Problems(const std::string& path, const formats::Schema& schema) {
  return formats::ConformanceOf(path, schema).problems;
}

// A copy of `from` named `name` in `tmp`, changed by `edit`.
std::string Edited(const TempDir& tmp, const std::string& from, const std::string& name,
                   const std::function<void(h5::File&)>& edit) {
  const std::string to = tmp / name;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  h5::File f = h5::File::Open(to, h5::File::Mode::kReadWrite);
  edit(f);
  f.Close();
  return to;
}

// What the files of one schema matched, added up: the declarations none of them used.
class Coverage {
 public:
  explicit Coverage(const formats::Schema& schema)
      : schema_(schema), matched_(schema.datasets.size(), 0) {}
  // Checks that `path` conforms and counts what it matched.
  void Add(const std::string& path) {
    const formats::Conformance c = formats::ConformanceOf(path, schema_);
    EXPECT_TRUE(c.problems.empty()) << path << "\n" << Lines(c.problems);
    for (std::size_t i = 0; i < matched_.size(); ++i)
      matched_[i] += c.matched[i];
  }
  std::vector<std::string> Unused() const {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < matched_.size(); ++i)
      if (matched_[i] == 0)
        out.push_back("/" + schema_.datasets[i].path + " " +
                      formats::ShapeText(schema_.datasets[i].shape) + " " +
                      schema_.datasets[i].element);
    return out;
  }

 private:
  const formats::Schema& schema_;
  std::vector<std::size_t> matched_;
};

// A small schema of its own: root attributes (one of fixed text), a table, a bound with a fixed
// attribute, a per-name group with an attribute, per-name datasets whose names hold two
// placeholders, and a square.
const formats::Schema& SmallSchema() {
  static const formats::Schema s = [] {
    formats::Schema s;
    s.format = "iclprobe-conformance-test";
    s.title = "A test format.";
    s.owner = "`tests/test_format_conformance.cpp`";
    s.sizes = {{"layer", "layers"}, {"k", "ks"}, {"m", "ms"}};
    s.attrs = {formats::Attr("name", AttrType::kString, "a name"),
               formats::Attr("ks", AttrType::kIntList, "the ks"),
               formats::Attr("rule", AttrType::kString, "a rule", "", "x = 1"),
               formats::AttrOn("group/<who>", "scale", AttrType::kDouble, "a scale")};
    s.datasets = {formats::Data("table", {"layer", "k"}, {"layer", "k"}, "a table"),
                  formats::Data("bound_lo", {"layer", "2"}, {"layer", "side"}, "a bound",
                                formats::Values::kFiniteOrNaN, {{"undefined", "NaN: undefined"}}),
                  formats::Data("group/<who>/row", {"k"}, {"k"}, "a row", formats::Values::kFinite,
                                {}, "sometimes"),
                  formats::Data("cells/state_<layer>_m_<m>", {"m", "2"}, {"m", "side"}, "a cell",
                                formats::Values::kFinite, {}, "sometimes"),
                  formats::Data("squares/<name>", {"k", "k"}, {"row", "column"}, "a square",
                                formats::Values::kFinite, {}, "sometimes")};
    return s;
  }();
  return s;
}

void WriteSmallFile(const std::string& path) {
  const formats::Sizes sizes = {{"layer", 2}, {"k", 3}, {"m", 1}};
  formats::Writer w(path, SmallSchema());
  w.SetAttr("name", "x");
  w.SetAttr("ks", std::vector<int>{1, 2, 3});
  w.Write("table", sizes, {1, 2, 3, 4, 5, 6});
  w.Write("bound_lo", sizes, {1, NAN, 3, 4});
  w.Write("group/<who>/row", sizes, {7, 8, 9}, {{"who", "a"}});
  w.SetAttr("scale", 0.5, "group/<who>", {{"who", "a"}});
  w.Write("cells/state_<layer>_m_<m>", sizes, {1, 2}, {{"layer", "2"}, {"m", "1"}});
  w.Close();
}

TEST(FormatConformance, PlaceholdersStandForPartsOfOneSegment) {
  EXPECT_TRUE(formats::PathMatches("hidden/layer_<layer>", "hidden/layer_07"));
  EXPECT_FALSE(formats::PathMatches("hidden/layer_<layer>", "hidden/layer_"));
  EXPECT_FALSE(formats::PathMatches("hidden/layer_<layer>", "hidden/a/layer_07"));
  EXPECT_FALSE(formats::PathMatches("hidden/layer_<layer>", "hidden/layer_07/x"));
  EXPECT_TRUE(formats::PathMatches("params/<parameter>", "params/blocks.0.fc1.weight"));
  EXPECT_TRUE(formats::PathMatches("bases/state_<layer>_m_<m>", "bases/state_2_m_13"));
  EXPECT_FALSE(formats::PathMatches("bases/state_<layer>_m_<m>", "bases/state__m_13"));
  EXPECT_FALSE(formats::PathMatches("bases/state_<layer>_m_<m>", "bases/state_2_m_"));
  EXPECT_TRUE(formats::PathMatches("table", "table"));
  EXPECT_FALSE(formats::PathMatches("table", "tables"));
  EXPECT_TRUE(formats::HasPlaceholder("a/<b>"));
  EXPECT_FALSE(formats::HasPlaceholder("a/b"));
}

TEST(FormatConformance, AFileAsItsWriterWroteItConforms) {
  TempDir tmp;
  WriteSmallFile(tmp / "a.h5");
  const formats::Conformance c = formats::ConformanceOf(tmp / "a.h5", SmallSchema());
  EXPECT_TRUE(c.problems.empty()) << Lines(c.problems);
  EXPECT_EQ(c.matched, (std::vector<std::size_t>{1, 1, 1, 1, 0}));
  EXPECT_NO_THROW(formats::CheckConforms(tmp / "a.h5", SmallSchema()));
}

// Each fault, added to a copy of a good file, is named in one line.
TEST(FormatConformance, EachFaultIsNamed) {
  TempDir tmp;
  const std::string good = tmp / "a.h5";
  WriteSmallFile(good);
  struct Case {
    std::string name;
    std::function<void(h5::File&)> edit;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {"extra dataset", [](h5::File& f) { f.CreateDataset<double>("extra", {1}, {"x"}); },
       "/extra: a dataset the schema does not declare"},
      {"extra group", [](h5::File& f) { f.CreateGroup("other"); },
       "/other: a group the schema does not declare"},
      {"wrong label",
       [](h5::File& f) {
         f.OpenDataset("table").SetDimLabels({"layer", "prompt"});
       },
       "/table: dimension labels (layer, prompt), declared (layer, k)"},
      {"wrong rank",
       [](h5::File& f) {
         f.CreateDataset<double>("group/b/row", {2, 3}, {"k", "k"});
         f.OpenGroup("group/b").SetAttr("scale", 1.0);
       },
       "/group/b/row: has 2 dimensions [2, 3], declared 1 [k]"},
      {"wrong element type",
       [](h5::File& f) {
         f.CreateDataset<std::int64_t>("cells/state_1_m_2", {2, 2}, {"m", "side"});
       },
       "/cells/state_1_m_2: holds int64, declared float64"},
      {"wrong fixed size",
       [](h5::File& f) {
         f.CreateDataset<double>("cells/state_1_m_3", {3, 3}, {"m", "side"});
       },
       "/cells/state_1_m_3: dimension 1 has size 3, declared 2"},
      {"a size named twice",
       [](h5::File& f) {
         f.CreateDataset<double>("squares/a", {2, 3}, {"row", "column"});
       },
       "/squares/a: dimensions 0 and 1 (both k) have sizes 2 and 3"},
      {"attribute of another type", [](h5::File& f) { f.SetAttr("name", 3); },
       "/: attribute 'name' is int64, declared string"},
      {"list as a JSON string", [](h5::File& f) { f.SetAttr("ks", "[1, 2, 3]"); },
       "/: attribute 'ks' is string, declared int64 list"},
      {"undeclared attribute", [](h5::File& f) { f.SetAttr("extra", 1.5); },
       "/: attribute 'extra' is not declared"},
      {"fixed text changed", [](h5::File& f) { f.SetAttr("rule", "x = 2"); },
       "/: attribute 'rule' is not the declared text \"x = 1\""},
      {"dataset's fixed text changed",
       [](h5::File& f) { f.OpenDataset("bound_lo").SetAttr("undefined", "NaN"); },
       "/bound_lo: attribute 'undefined' is not the declared text \"NaN: undefined\""},
      {"attribute missing on an object",
       [](h5::File& f) { f.CreateDataset<double>("group/z/row", {3}, {"k"}); },
       "/group/z: lacks attribute 'scale', declared for every such object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string bad = Edited(tmp, good, "bad.h5", c.edit);
    EXPECT_EQ(Problems(bad, SmallSchema()), std::vector<std::string>{c.problem});
  }
  // What the schema requires and the file lacks; a file of another format.
  formats::Schema more = SmallSchema();
  more.datasets.push_back(formats::Data("needed", {"k"}, {"k"}, "a dataset every file has"));
  more.attrs.push_back(formats::Attr("needed", AttrType::kInt, "an attribute every file has"));
  EXPECT_EQ(Problems(good, more),
            (std::vector<std::string>{
                "/: lacks attribute 'needed', declared for every iclprobe-conformance-test file",
                "no dataset /needed, declared for every iclprobe-conformance-test file"}));
  formats::Schema other = SmallSchema();
  other.format = "iclprobe-other";
  EXPECT_EQ(Problems(good, other),
            std::vector<std::string>{"has format 'iclprobe-conformance-test', expected "
                                     "'iclprobe-other'"});
  const std::string bad =
      Edited(tmp, good, "bad.h5", [](h5::File& f) { f.CreateDataset<double>("extra", {1}); });
  try {
    formats::CheckConforms(bad, SmallSchema());
    ADD_FAILURE() << "accepted";
  } catch (const core::InputError& e) {
    EXPECT_EQ(std::string(e.what()), "'" + bad +
                                         "': is not what the iclprobe-conformance-test schema "
                                         "declares: /extra: a dataset the schema does not declare");
  }
}

// --- The four formats whose owners declare their schemas, written by their writers ---

TEST(FormatConformance, PromptSetsConform) {
  TempDir tmp;
  data::TaskConfig task = test::Task(3, 5);
  data::SavePromptSet(tmp / "plain.h5", data::SamplePrompts(task, 1, 0, 4), false);
  task.query_shift = data::ParseShift("orthogonal", "query_shift");
  data::SavePromptSet(tmp / "queries.h5", data::SamplePrompts(task, 2, 3, 4), false);
  Coverage all(data::PromptSetSchema());
  all.Add(tmp / "plain.h5");
  all.Add(tmp / "queries.h5");
  EXPECT_EQ(all.Unused(), std::vector<std::string>{});

  const std::string extra = Edited(tmp, tmp / "plain.h5", "extra.h5", [](h5::File& f) {
    f.CreateDataset<double>("prompts/z", {4, 3}, {"prompt", "feature"});
  });
  EXPECT_EQ(Problems(extra, data::PromptSetSchema()),
            std::vector<std::string>{"/prompts/z: a dataset the schema does not declare"});
  const std::string label = Edited(tmp, tmp / "plain.h5", "label.h5", [](h5::File& f) {
    f.OpenDataset("prompts/y").SetDimLabels({"prompt", "k"});
  });
  EXPECT_EQ(Problems(label, data::PromptSetSchema()),
            std::vector<std::string>{
                "/prompts/y: dimension labels (prompt, k), declared (prompt, example)"});
}

learners::ModelConfig TinyModel() {
  learners::ModelConfig c;
  c.d = 2;
  c.n_max = 4;
  c.layers = 1;
  c.hidden = 8;
  c.heads = 2;
  c.mlp_ratio = 2;
  return c;
}

learners::TrainConfig TinyTraining() {
  learners::TrainConfig t;
  t.task = test::Task(2, 4);
  t.steps = 2;
  t.batch = 4;
  t.shards = 1;
  t.warmup = 1;
  t.eval_every = 1;
  t.eval_prompts = 8;
  t.save_every = 2;
  return t;
}

// A constructed gd learner with every disguise that stores a map, rotated.
construct::Construction DisguisedGd() {
  construct::Disguise g;
  g.decoy = "xty";
  g.decoy_noise = 0.1;
  g.nuisance = 0.1;
  g.seed = 4;
  construct::Construction c = construct::BuildProgram(construct::ParseProgram("gd"), 2, 4, 0.05, g);
  c.rotation_seed = 3;
  return c;
}

TEST(FormatConformance, CheckpointsConform) {
  TempDir tmp;
  core::ThreadPool serial(1);
  learners::TrainRequest train;
  train.model = TinyModel();
  train.train = TinyTraining();
  train.out = tmp / "trained.h5";
  learners::Train(train, serial);
  learners::WriteInitCheckpoint(TinyModel(), TinyTraining(), tmp / "init.h5");
  construct::WriteConstruction(tmp / "gd.h5", construct::GdProgram(2, 4, 0.05), {});
  construct::WriteConstruction(tmp / "disguised.h5", DisguisedGd(), {});
  Coverage all(construct::CheckpointSchema());
  for (const char* name : {"trained.h5", "init.h5", "gd.h5", "disguised.h5"})
    all.Add(tmp / name);
  EXPECT_EQ(all.Unused(), std::vector<std::string>{});
  // learners/ alone declares no /construction: a constructed learner is more than it knows.
  EXPECT_TRUE(Problems(tmp / "trained.h5", learners::CheckpointSchema()).empty());
  const std::vector<std::string> constructed =
      Problems(tmp / "gd.h5", learners::CheckpointSchema());
  ASSERT_FALSE(constructed.empty());
  EXPECT_EQ(constructed[0], "/construction: a group the schema does not declare");

  const std::string extra = Edited(tmp, tmp / "trained.h5", "extra.h5", [](h5::File& f) {
    f.CreateDataset<float>("train_state/exp_avg_sq/extra", {2, 2, 2}, {"a", "b", "c"});
  });
  EXPECT_EQ(Problems(extra, construct::CheckpointSchema()),
            std::vector<std::string>{
                "/train_state/exp_avg_sq/extra: matches none of its 2 declarations; the nearest: "
                "has 3 dimensions [2, 2, 2], declared 2 [output, input]"});
  const std::string label = Edited(tmp, tmp / "gd.h5", "label.h5", [](h5::File& f) {
    f.OpenDataset("params/pos_embed").SetDimLabels({"output", "input"});
  });
  EXPECT_EQ(Problems(label, construct::CheckpointSchema()),
            std::vector<std::string>{"/params/pos_embed: dimension labels (output, input), "
                                     "declared (position, feature)"});
}

// Extracts `prompts` prompts of `checkpoint` with `task` to `out`.
void Extract(const std::string& checkpoint, const std::string& out, data::TaskConfig task,
             std::int64_t prompts, const std::function<void(extract::ExtractConfig&)>& more = {}) {
  extract::ExtractConfig cfg;
  cfg.checkpoint = checkpoint;
  cfg.out = out;
  cfg.task = task;
  cfg.prompts = prompts;
  cfg.seed = 5;
  if (more) more(cfg);
  cfg.Validate(learners::ReadCheckpointInfo(checkpoint).model);
  core::ThreadPool serial(1);
  ASSERT_TRUE(extract::Extract(cfg, {}, serial).finished);
}

// A noisy task whose w_ridge is the Bayes posterior mean (so probes of w have a ceiling), with
// a learner target; half precision on y-positions of a pool task; a noise-mix task.
struct ActivationFiles {
  TempDir tmp;
  ActivationFiles() {
    construct::WriteConstruction(tmp / "gd.h5", construct::GdProgram(2, 4, 0.05), {});
    data::TaskConfig noisy = test::Task(2, 4);
    noisy.noise = 0.5;
    Extract(tmp / "gd.h5", tmp / "acts.h5", noisy, 200, [&](extract::ExtractConfig& c) {
      c.ridge_lambda = noisy.BayesLambda();
      c.learner_targets = extract::CanonicalLearnerSpecs({"gd:0.05:2"}, noisy);
    });
    data::TaskConfig pool = test::Task(2, 4);
    pool.family = data::ParseTaskFamily("pool:2:1");
    Extract(tmp / "gd.h5", tmp / "half.h5", pool, 40, [](extract::ExtractConfig& c) {
      c.float16 = true;
      c.positions = extract::Positions::kY;
      c.layers = {0, 2};
      c.compress = true;
    });
    data::TaskConfig mix = test::Task(2, 4);
    mix.family = data::ParseTaskFamily("noise-mix:0.1,0.5");
    Extract(tmp / "gd.h5", tmp / "mix.h5", mix, 40);
  }
};

TEST(FormatConformance, ActivationsConform) {
  const ActivationFiles files;
  const TempDir& tmp = files.tmp;
  const formats::Schema& schema = extract::schema::ActivationsSchema();
  Coverage all(schema);
  for (const char* name : {"acts.h5", "half.h5", "mix.h5"})
    all.Add(tmp / name);
  EXPECT_EQ(all.Unused(), std::vector<std::string>{});

  const std::string extra = Edited(tmp, tmp / "mix.h5", "extra.h5", [](h5::File& f) {
    f.CreateDataset<double>("targets/sigma_squared", {40, 1}, {"prompt", "feature"});
  });
  EXPECT_EQ(Problems(extra, schema),
            std::vector<std::string>{"/targets/sigma_squared: a dataset the schema does "
                                     "not declare"});
  const std::string label = Edited(tmp, tmp / "mix.h5", "label.h5", [](h5::File& f) {
    f.OpenDataset(extract::schema::Hidden(1)).SetDimLabels({"prompt", "token", "feature"});
  });
  EXPECT_EQ(Problems(label, schema),
            std::vector<std::string>{
                "/hidden/layer_01: matches none of its 2 declarations; the nearest: dimension "
                "labels (prompt, token, feature), declared (prompt, position, feature)"});
}

TEST(FormatConformance, ProbesConform) {
  const ActivationFiles files;
  const TempDir& tmp = files.tmp;
  probes::ProbeRequest req;
  req.activations = tmp / "acts.h5";
  req.targets = {"xty", "w"};
  req.families = {probes::Family::kRidge, probes::Family::kLinear};
  req.gradient.max_epochs = 2;
  req.shuffle_control = true;
  req.ks = {2};
  req.layers = {0, 2};
  req.bootstrap = 100;
  req.codelength = true;
  req.codelength_fractions = {0.25, 0.5, 1};  // blocks of the 160 training rows
  core::ThreadPool serial(1);
  const probes::ProbeOutput out = probes::RunProbes(probes::PlanProbes(req), serial);
  probes::WriteProbesFile(tmp / "probes.h5", req, out);
  const formats::Schema& schema = probes::schema::ProbesSchema();
  Coverage all(schema);
  all.Add(tmp / "probes.h5");
  EXPECT_EQ(all.Unused(), std::vector<std::string>{});

  const std::string extra = Edited(tmp, tmp / "probes.h5", "extra.h5", [](h5::File& f) {
    f.CreateDataset<double>("metrics/xty/ridge/model/r2_median", {2, 1, 1}, {"layer", "k", "seed"});
  });
  EXPECT_EQ(Problems(extra, schema),
            std::vector<std::string>{"/metrics/xty/ridge/model/r2_median: a dataset the "
                                     "schema does not declare"});
  const std::string label = Edited(tmp, tmp / "probes.h5", "label.h5", [](h5::File& f) {
    f.OpenDataset("ridge/w/model/lambda").SetDimLabels({"layer", "k", "split"});
  });
  EXPECT_EQ(Problems(label, schema),
            std::vector<std::string>{"/ridge/w/model/lambda: dimension labels (layer, k, split), "
                                     "declared (layer, k, seed)"});
}

// The version-1 files of tests/fixtures/formats (made by the iclprobe of their time, as the
// golden test reproduces them) conform to the schemas of their kinds.
TEST(FormatConformance, VersionOneFixturesConform) {
  const std::string dir = std::string(ICL_FIXTURES) + "/formats/";
  const std::vector<std::pair<std::string, const formats::Schema*>> files = {
      {"gd.h5", &construct::CheckpointSchema()},
      {"probes.h5", &probes::schema::ProbesSchema()},
      {"interventions.h5", &formats::InterventionsSchema()},
      {"swaps.h5", &formats::SwapsSchema()},
      {"erasure.h5", &formats::ErasureSchema()},
      {"das.h5", &formats::DasSchema()},
      {"trace.h5", &formats::TraceSchema()}};
  for (const auto& [name, schema] : files) {
    SCOPED_TRACE(name);
    EXPECT_EQ(Lines(Problems(dir + name, *schema)), "");
  }
}

// The files of an earlier iclprobe (tests/fixtures/compat, written before datasets had dimension
// labels) differ from the schemas in their labels alone: every dataset is declared, of its rank,
// sizes and element type, and every attribute is there.
TEST(FormatConformance, FilesOfAnEarlierBinaryLackOnlyTheLabels) {
  const std::string dir = std::string(ICL_FIXTURES) + "/compat/";
  const std::vector<std::pair<std::string, const formats::Schema*>> files = {
      {"init.h5", &construct::CheckpointSchema()},
      {"run.h5", &construct::CheckpointSchema()},
      {"acts_partial.h5", &extract::schema::ActivationsSchema()}};
  for (const auto& [name, schema] : files) {
    SCOPED_TRACE(name);
    const std::vector<std::string> problems = Problems(dir + name, *schema);
    EXPECT_FALSE(problems.empty());
    for (const std::string& p : problems)
      EXPECT_TRUE(p.find("has no dimension labels, declared") != std::string::npos) << p;
  }
}

}  // namespace
}  // namespace icl
