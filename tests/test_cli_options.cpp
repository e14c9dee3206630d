// The command line as a whole, read from the option registry (apps/options.hpp): every
// subcommand's options agree where they are shared (same alias, kind and type), an alias means
// one option everywhere, the shared options every runner needs are there, and --help shows the
// registry. Also the option-text parsers of apps/ (lists, lambdas, splits).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "apps/cli.hpp"
#include "apps/subcommands.hpp"
#include "core/errors.hpp"
#include "core/spec.hpp"
#include "learners/classical.hpp"
#include "probes/runner.hpp"
#include "tests/test_util.hpp"

using namespace icl;

namespace {

const std::vector<std::string> kSubcommands = {
    "baselines", "train",  "inspect",   "extract", "probe", "compare", "report",
    "construct", "import", "intervene", "trace",   "swap",  "erase",   "das"};

// The long names --help lists (Boost's lines: "  -o [ --out ] arg   text", "  --d arg (=4)",
// "  --force", "  --fixed-w [=arg(=1)]"), and the default each shows.
std::map<std::string, std::string> HelpDefaults(const std::string& subcommand) {
  const auto r = test::RunIclprobe(subcommand + " --help");
  EXPECT_EQ(r.exit_code, 0) << subcommand;
  std::map<std::string, std::string> out;
  const std::regex line(R"(^  (?:-\w \[ --([\w-]+) \]|--([\w-]+))(?: arg \(=([^)]*)\))?)");
  std::istringstream in(r.out);
  std::string l;
  while (std::getline(in, l)) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    out[m[1].matched ? m[1].str() : m[2].str()] = m[3].matched ? m[3].str() : "";
  }
  return out;
}

}  // namespace

// The registry read directly: every subcommand is there, an option means the same thing
// wherever it appears (alias, kind, value type), a one-letter alias means one option, every
// option says what it does and which setting it fills.
TEST(CliOptions, SharedOptionsAgreeAcrossSubcommands) {
  const auto registry = cli::OptionRegistry();
  for (const auto& s : kSubcommands) {
    ASSERT_EQ(registry.count(s), 1u) << s << " is not in the registry";
    EXPECT_GT(registry.at(s).size(), 1u) << s;
  }
  EXPECT_EQ(registry.size(), kSubcommands.size());
  std::map<std::string, std::pair<std::string, cli::OptionSpec>> first;  // name -> (sub, spec)
  std::map<std::string, std::pair<std::string, std::string>> aliases;    // alias -> (sub, name)
  for (const auto& [sub, specs] : registry)
    for (const auto& o : specs) {
      EXPECT_FALSE(o.help.empty()) << sub << " --" << o.name;
      if (o.kind != cli::OptionSpec::Kind::kSwitch) {
        EXPECT_FALSE(o.field.empty()) << sub << " --" << o.name << " names no setting";
      }
      const auto it = first.find(o.name);
      if (it == first.end()) {
        first[o.name] = {sub, o};
      } else {
        const cli::OptionSpec& p = it->second.second;
        // A value and a repeatable value are the same kind on the command line; int, int64
        // and uint64 are all integers.
        auto kind = [](const cli::OptionSpec& x) {
          return x.kind == cli::OptionSpec::Kind::kList ? std::string("value")
                                                        : cli::KindName(x.kind);
        };
        auto type = [](const cli::OptionSpec& x) {
          return x.type.find("int") != std::string::npos ? std::string("integer") : x.type;
        };
        EXPECT_EQ(kind(o), kind(p))
            << "--" << o.name << " in " << sub << " and " << it->second.first;
        // Known exceptions, kept for the documented recipes: train's --layers is the number of
        // blocks, elsewhere a list of states; report's --metric (-m) is the score (r2, nmse,
        // mse), intervene's the edit's norm.
        if (o.name != "layers" && o.name != "metric") {
          EXPECT_EQ(type(o), type(p))
              << "--" << o.name << " in " << sub << " and " << it->second.first;
        }
        if (o.name != "metric") {
          EXPECT_EQ(o.alias, p.alias)
              << "--" << o.name << ": alias differs between " << sub << " and " << it->second.first;
        }
      }
      if (o.alias.empty()) continue;
      const auto a = aliases.find(o.alias);
      if (a == aliases.end()) {
        aliases[o.alias] = {sub, o.name};
      } else {
        EXPECT_EQ(o.name, a->second.second)
            << "-" << o.alias << " means --" << o.name << " in " << sub << " but --"
            << a->second.second << " in " << a->second.first;
      }
    }
  auto has = [&](const std::string& sub, const std::string& name) {
    for (const auto& o : registry.at(sub))
      if (o.name == name) return true;
    return false;
  };
  // Options every subcommand of a kind must have.
  for (const char* s : {"baselines", "train", "extract", "probe", "compare", "intervene", "trace",
                        "swap", "erase", "das"})
    EXPECT_TRUE(has(s, "threads")) << s << " lacks --threads";
  for (const char* s :
       {"train", "extract", "probe", "compare", "intervene", "trace", "swap", "erase", "das"})
    EXPECT_TRUE(has(s, "quiet")) << s << " lacks --quiet";
  for (const auto& s : kSubcommands)
    EXPECT_TRUE(has(s, "force")) << s << " lacks --force";
  for (const auto& o : registry.at("train"))
    if (o.name == "fixed-w") {  // --fixed-w alone means true everywhere
      EXPECT_EQ(o.kind, cli::OptionSpec::Kind::kImplicit);
    }
}

// The table of subcommands is the one list: the registry holds exactly its option tables,
// `iclprobe --help` lists its names with their summaries in its order, and a name not in it is
// refused.
TEST(CliOptions, TheTableOfSubcommandsIsWhatTheProgramAndTheRegistryList) {
  const auto& table = cli::Subcommands();
  std::vector<std::string> names;
  for (const auto& s : table) {
    names.push_back(s.name);
    EXPECT_FALSE(std::string(s.summary).empty()) << s.name;
    EXPECT_EQ(cli::FindSubcommand(s.name), &s);
  }
  std::vector<std::string> expected = kSubcommands;
  std::sort(names.begin(), names.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  EXPECT_EQ(cli::FindSubcommand("probes"), nullptr);
  const auto registry = cli::OptionRegistry();
  EXPECT_EQ(registry.size(), table.size());
  for (const auto& s : table)
    EXPECT_EQ(registry.count(s.name), 1u) << s.name;
  const auto help = test::RunIclprobe("--help");
  ASSERT_EQ(help.exit_code, 0);
  std::size_t at = help.out.find("Subcommands:\n");
  ASSERT_NE(at, std::string::npos) << help.out;
  for (const auto& s : table) {
    const std::string name = s.name;
    const std::string line = "  " + name + std::string(12 - name.size(), ' ') + s.summary + "\n";
    const std::size_t found = help.out.find(line, at);
    EXPECT_NE(found, std::string::npos) << line;
    if (found != std::string::npos) at = found;
  }
  const auto unknown = test::RunIclprobe("probes --help");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown subcommand 'probes'"), std::string::npos) << unknown.err;
}

// A default is shown as the shortest text that reads back as the same value (extract
// once showed --ridge-lambda (=0.10000000000000001)), and --help, built from the registry, lists
// exactly its options with those defaults.
TEST(CliOptions, HelpShowsTheRegistrysOptionsAndShortestDefaults) {
  const auto registry = cli::OptionRegistry();
  for (const auto& [sub, specs] : registry) {
    const auto help = HelpDefaults(sub);
    for (const auto& o : specs) {
      ASSERT_EQ(help.count(o.name), 1u) << sub << " --help lacks --" << o.name;
      if (o.has_default) {
        EXPECT_EQ(help.at(o.name), o.default_text) << sub << " --" << o.name;
      }
      if (o.type == "double" && o.has_default) {
        // Round trip: the text reads back as a double whose shortest text is the text itself.
        EXPECT_EQ(cli::DefaultText(std::stod(o.default_text)), o.default_text)
            << sub << " --" << o.name;
      }
    }
    // --help adds only itself.
    EXPECT_EQ(help.size(), specs.size() + 1) << sub;
  }
  for (const auto& o : registry.at("extract"))
    if (o.name == "ridge-lambda") {
      EXPECT_EQ(o.default_text, "0.1");
    }
}

TEST(CliOptions, ListParsersRefuseWhatTheyCannotRead) {
  EXPECT_EQ(cli::ParseInts("--k", "0,4,8"), (std::vector<int>{0, 4, 8}));
  EXPECT_THROW(cli::ParseInts("--k", "1,,2"), std::invalid_argument);
  EXPECT_THROW(cli::ParseInts("--k", "1.5"), std::invalid_argument);
  EXPECT_EQ(cli::SplitList("--targets", " a , b"), (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(cli::SplitList("--targets", ","), std::invalid_argument);
  // The grid and split the probes library parses for both front ends.
  EXPECT_THROW(probes::ParseLambdaGrid("1:0.1:3"), std::invalid_argument);
  EXPECT_THROW(probes::ParseLambdaGrid("abc"), std::invalid_argument);
  EXPECT_THROW(probes::ParseLambdaGrid("1e-3:1e5:100000"), std::invalid_argument);
  EXPECT_THROW(probes::ParseLambdaGrid("1e-3:1e5:20:4"), std::invalid_argument);
  EXPECT_EQ(probes::ParseLambdaGrid("1e-2:1e2:5").n_elem, 5u);
  EXPECT_NEAR(probes::ParseLambdaGrid("1e-2:1e2:5")(2), 1.0, 1e-12);  // 10^0 from logspace: ~1 ulp
  EXPECT_EQ(probes::ParseLambdaGrid("0.5, 2").n_elem, 2u);
  EXPECT_THROW(cli::ParseNumbers("--split", "inf,1,1"), std::invalid_argument);
  EXPECT_THROW(probes::SplitFractions({0.8, 0.2}), std::invalid_argument);
}

// ---- The table of inputs -------------------------------------------------------------------

namespace {

// The files every subcommand reads and writes, as the registry marks them: a new file option
// must be classified here too (so a new input cannot be forgotten by --force).
const std::map<std::string, std::pair<std::set<std::string>, std::set<std::string>>> kFiles = {
    {"baselines", {{"checkpoint"}, {"csv"}}},
    {"train", {{}, {"out"}}},
    {"inspect", {{"budget", "checkpoint", "half"}, {"export"}}},
    {"extract", {{"checkpoint"}, {"out"}}},
    {"probe", {{"activations", "control"}, {"out", "csv"}}},
    {"compare", {{"budget", "checkpoint", "cell", "half"}, {"csv", "plot-dir"}}},
    {"report", {{"probes", "interventions", "trace"}, {"out", "plot-dir"}}},
    {"construct", {{}, {"out"}}},
    {"import", {{"in"}, {"out"}}},
    {"intervene", {{"checkpoint", "probes"}, {"out", "csv"}}},
    {"trace", {{"checkpoint", "control", "activations", "control-activations"}, {"out", "csv"}}},
    {"swap", {{"checkpoint"}, {"out", "csv"}}},
    {"erase", {{"checkpoint"}, {"out", "csv"}}},
    {"das", {{"checkpoint"}, {"out", "csv"}}},
};

}  // namespace

TEST(CliOptions, EveryFileOptionIsMarkedInputOrOutput) {
  const auto registry = cli::OptionRegistry();
  ASSERT_EQ(registry.size(), kFiles.size());
  for (const auto& [sub, specs] : registry) {
    SCOPED_TRACE(sub);
    ASSERT_TRUE(kFiles.count(sub));
    std::set<std::string> in, out;
    for (const auto& s : specs) {
      if (s.role == cli::OptionSpec::Role::kInput) in.insert(s.name);
      if (s.role == cli::OptionSpec::Role::kOutput) out.insert(s.name);
      // Only strings name files; a setting's help that speaks of a file to read or write is
      // a file option left unmarked.
      if (s.role != cli::OptionSpec::Role::kSetting) {
        EXPECT_EQ(s.type, "string") << s.name;
      }
    }
    EXPECT_EQ(in, kFiles.at(sub).first);
    EXPECT_EQ(out, kFiles.at(sub).second);
  }
}

TEST(CliOptions, InputPathsListEveryInputWithItsCompanions) {
  EXPECT_EQ(cli::CompanionPath("runs/h.h5", ".train.csv"), "runs/h.train.csv");
  EXPECT_EQ(cli::CompanionPath("runs/h", ".train.csv"), "runs/h.train.csv");
  cli::OptionTable t("compare");
  std::vector<std::string> cks, cells, halves;
  std::string csv;
  t.List("checkpoint,c", &cks, "checkpoints", "").List("cell", &cells, "cells", "");
  t.List("half", &halves, "halves", "").Optional("csv", &csv, "csv", "");
  t.Input("checkpoint").Input("cell", {}, true).Input("half", {".train.csv"}).Output("csv");
  boost::program_options::variables_map vm;
  const char* argv[] = {"compare", "-c",   "a.h5",  "--cell", "x=b.h5,c.h5",
                        "--half",  "h.h5", "--csv", "o.csv"};
  boost::program_options::store(
      boost::program_options::parse_command_line(9, argv, t.description()), vm);
  boost::program_options::notify(vm);
  EXPECT_EQ(cli::InputPaths(t.specs(), vm),
            (std::vector<std::string>{"a.h5", "b.h5", "c.h5", "h.h5", "h.train.csv"}));
  EXPECT_THROW(t.Input("no-such-option"), std::logic_error);
}

// --force replaces an output, never a file the run reads: for every subcommand, every input
// option of the registry (and the files read beside it) given again as each output option.
TEST(CliOptions, ForceNeverReplacesADeclaredInput) {
  test::TempDir dir;
  const auto P = [&](const std::string& name) { return dir / name; };
  const auto ok = [](const std::string& args) {
    const auto r = test::RunIclprobe(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  };
  const std::string tiny =
      "--d 3 --n 5 --layers 2 --hidden 16 --heads 2 --batch 8 --eval-every 5 "
      "--save-every 5 --eval-prompts 16 --threads 1 --quiet ";
  ok("train " + tiny + "--steps 20 --warmup 4 --seed 1 --out " + P("run.h5"));
  ok("train " + tiny + "--steps 20 --warmup 4 --seed 2 --out " + P("run2.h5"));
  ok("train " + tiny + "--steps 10 --warmup 2 --seed 1 --out " + P("half.h5"));
  ok("construct --program gd --alpha 0.05 --d 3 --n 6 --out " + P("gd.h5"));
  ok("construct --program gd --d 3 --n 6 --init-only --seed 2 --out " + P("init.h5"));
  ok("extract -c " + P("gd.h5") + " --prompts 100 --threads 1 --quiet --out " + P("acts.h5"));
  ok("extract -c " + P("init.h5") + " --prompts 100 --threads 1 --quiet --out " + P("ctrl.h5"));
  ok("probe -a " + P("acts.h5") + " --targets xty --probes ridge --k 3 --threads 1 --quiet --out " +
     P("probes.h5"));
  ok("intervene -c " + P("gd.h5") + " --probes " + P("probes.h5") + " --target xty --response " +
     "gd:0.05 --layers 2 --k 3 --pairs 20 --threads 1 --quiet --out " + P("iv.h5"));
  ok("trace -c " + P("gd.h5") + " --algorithms gd:0.05:2 --prompts 40 --bootstrap 20 --quiet " +
     "--out " + P("trace.h5"));
  std::filesystem::copy_file(P("gd.h5"), P("in.pt"));
  // One command per input option (long names, so the inputs can be found in it); outputs are
  // appended by the test.
  const std::vector<std::pair<std::string, std::string>> bases = {
      {"baselines", "baselines --checkpoint " + P("gd.h5") + " --prompts 5 --learners ols"},
      {"inspect",
       "inspect --checkpoint " + P("run.h5") + " --half " + P("half.h5") + " --threads 1"},
      {"extract", "extract --checkpoint " + P("gd.h5") + " --prompts 10 --threads 1 --quiet"},
      {"probe", "probe --activations " + P("acts.h5") + " --control " + P("ctrl.h5") +
                    " --targets xty --k 3 --threads 1 --quiet"},
      {"compare", "compare --checkpoint " + P("run.h5") + " --half " + P("half.h5") +
                      " --prompts 5 --ilwd-prompts 1 --learners ols --threads 1 --quiet"},
      {"inspect",
       "inspect --checkpoint " + P("run.h5") + " --budget " + P("half.h5") + " --threads 1"},
      {"compare", "compare --checkpoint " + P("run.h5") + " --budget " + P("half.h5") +
                      " --prompts 5 --ilwd-prompts 1 --learners ols --threads 1 --quiet"},
      {"compare", "compare --cell c=" + P("run.h5") + "," + P("run2.h5") +
                      " --prompts 5 --ilwd-prompts 1 --learners ols --threads 1 --quiet"},
      {"report", "report --probes " + P("probes.h5") + " --interventions " + P("iv.h5")},
      {"report", "report --trace " + P("trace.h5")},
      {"import", "import --in " + P("in.pt") + " --heads 2"},
      {"intervene", "intervene --checkpoint " + P("gd.h5") + " --probes " + P("probes.h5") +
                        " --target xty --response gd:0.05 --layers 2 --k 3 --pairs 20 "
                        "--threads 1 --quiet"},
      {"trace", "trace --checkpoint " + P("gd.h5") + " --control " + P("init.h5") +
                    " --activations " + P("acts.h5") + " --control-activations " + P("ctrl.h5") +
                    " --algorithms gd:0.05:2 --prompts 20 --fit-prompts 40 --quiet"},
      {"swap", "swap --checkpoint " + P("gd.h5") + " --learners ols --pairs 4 --k 3 --quiet"},
      {"erase", "erase --checkpoint " + P("gd.h5") +
                    " --layers 2 --k 3 --fit-prompts 50 -N 20 "
                    "--quiet"},
      {"das", "das --checkpoint " + P("gd.h5") +
                  " --quantity xty --algorithm gd:0.05 --layers 2 "
                  "--m 1 --k 3 --train-pairs 20 --test-pairs 10 --epochs 1 --quiet"},
  };
  const auto registry = cli::OptionRegistry();
  std::set<std::pair<std::string, std::string>> covered;
  for (const auto& [sub, base] : bases) {
    std::istringstream words(base);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    const auto& specs = registry.at(sub);
    for (const auto& in : specs) {
      if (in.role != cli::OptionSpec::Role::kInput) continue;
      const auto at = std::find(w.begin(), w.end(), "--" + in.name);
      if (at == w.end() || at + 1 == w.end()) continue;
      covered.insert({sub, in.name});
      std::vector<std::string> files;
      std::string value = *(at + 1);
      if (in.named_list) value = value.substr(value.find('=') + 1);
      std::istringstream parts(value);
      for (std::string f; std::getline(parts, f, ',');) {
        files.push_back(f);
        for (const auto& suffix : in.companions)
          files.push_back(cli::CompanionPath(f, suffix));
      }
      for (const auto& file : files)
        for (const auto& out : specs) {
          if (out.role != cli::OptionSpec::Role::kOutput) continue;
          // A command whose --out is required gets a fresh one when another output is tested.
          const bool needs_out =
              out.name != "out" && kFiles.at(sub).second.count("out") && sub != "report";
          const std::string cmd = base + " --force --" + out.name + " " + file +
                                  (needs_out ? " --out " + P("fresh_out.h5") : "");
          const std::string before = test::ReadFile(file);
          const auto r = test::RunIclprobe(cmd);
          EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.err;
          EXPECT_EQ(test::CountLines(r.err), 1) << cmd << "\n" << r.err;
          EXPECT_EQ(test::ReadFile(file), before) << cmd << " replaced its input " << file;
        }
    }
  }
  // Every input option of every subcommand was tried.
  for (const auto& [sub, specs] : registry)
    for (const auto& s : specs)
      if (s.role == cli::OptionSpec::Role::kInput) {
        EXPECT_TRUE(covered.count({sub, s.name})) << sub << " --" << s.name << " has no case";
      }
}

// The one splitter of comma lists refuses an empty entry wherever it is (a stray comma, an unset
// shell variable) and names the setting; every list parser of apps/ and the learner lists of the
// libraries take their entries from it.
TEST(CliOptions, EveryListParserRefusesEmptyEntriesNamingTheOption) {
  const data::TaskConfig task = test::Task(3, 5);
  for (const std::string text : {"1,,2", "1,2,", ",1", "", " , 1"}) {
    // The field the message names: main() prints it as the option ("codelength_blocks" ->
    // "--codelength-blocks").
    const auto field_of = [&](auto&& parse) {
      try {
        parse();
      } catch (const core::InputError& e) {
        EXPECT_TRUE(e.text().find("empty") != std::string::npos) << text << ": " << e.what();
        return e.field();
      } catch (const std::exception& e) {
        return "not an InputError: " + std::string(e.what());
      }
      return std::string("accepted");
    };
    EXPECT_EQ(field_of([&] { core::SplitList("x", "setting", text); }), "setting") << text;
    EXPECT_EQ(field_of([&] { cli::ParseInts("--k", text); }), "k") << text;
    EXPECT_EQ(field_of([&] { cli::SplitList("--algorithms", text); }), "algorithms") << text;
    EXPECT_EQ(field_of([&] { cli::ListEntries("--learner-targets", text); }), "learner_targets")
        << text;
    EXPECT_EQ(field_of([&] { cli::ParseNumbers("--codelength-blocks", text); }),
              "codelength_blocks")
        << text;
    EXPECT_EQ(field_of([&] { probes::ParseLambdaGrid(text); }), "lambdas") << text;
    EXPECT_EQ(field_of([&] { cli::ParseNumbers("--split", text); }), "split") << text;
    // The learner lists of baselines, compare and swap (learners/), with the setting they name.
    EXPECT_EQ(field_of([&] { learners::MakeLearners(text, task); }), "learners") << text;
  }
  EXPECT_EQ(core::SplitList("x", "s", " ols , gd:0.1 "),
            (std::vector<std::string>{"ols", "gd:0.1"}));
}

// A malformed learner spec is named by the setting it came from, not by "learners".
TEST(CliOptions, LearnerSpecErrorsNameTheSettingTheSpecCameFrom) {
  const data::TaskConfig task = test::Task(3, 5);
  for (const std::string spec : {"ridge:-1", "gd:0", "gd:0.1:0", "sgd:-1", "newton:0",
                                 "newton:3:-1", "newton:3:1:-1", "knn:0", "bogus"}) {
    try {
      learners::MakeLearner(spec, task, "algorithm");
      ADD_FAILURE() << spec << " was accepted";
    } catch (const core::InputError& e) {
      EXPECT_EQ(e.field(), "algorithm") << spec << ": " << e.what();
    }
  }
}
