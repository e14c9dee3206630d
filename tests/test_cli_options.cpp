// The command line as a whole: every subcommand's options, read from its --help, agree where
// they are shared (same short alias, same kind: switch or value), a short alias means one
// option everywhere, and the shared options every runner needs are there. Also the option-text
// parsers of apps/ (lists, lambdas, splits).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "apps/cli.hpp"
#include "tests/test_util.hpp"

using namespace icl;

namespace {

struct Option {
  std::string shortname;  // "" when none
  std::string kind;       // "switch", "value", "implicit"
};

std::map<std::string, Option> OptionsOf(const std::string& subcommand) {
  const auto r = test::RunIclprobe(subcommand + " --help");
  EXPECT_EQ(r.exit_code, 0) << subcommand;
  std::map<std::string, Option> out;
  // Boost's help lines: "  -o [ --out ] arg   text", "  --d arg (=4)   text", "  --force   text",
  // "  --fixed-w [=arg(=1)]   text".
  const std::regex line(R"(^  (?:-(\w) \[ --([\w-]+) \]|--([\w-]+))( \[=arg|\s+arg)?)");
  std::istringstream in(r.out);
  std::string l;
  while (std::getline(in, l)) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    const std::string name = m[2].matched ? m[2].str() : m[3].str();
    Option o;
    o.shortname = m[1].matched ? m[1].str() : "";
    o.kind = !m[4].matched ? "switch"
                           : (m[4].str().find('=') != std::string::npos ? "implicit" : "value");
    out[name] = o;
  }
  return out;
}

const std::vector<std::string> kSubcommands = {"baselines", "train",   "extract", "probe",
                                               "report",    "compare", "inspect", "import"};

}  // namespace

TEST(CliOptions, SharedOptionsAgreeAcrossSubcommands) {
  std::map<std::string, std::map<std::string, Option>> all;
  for (const auto& s : kSubcommands) {
    all[s] = OptionsOf(s);
    EXPECT_GT(all[s].size(), 1u) << s;
  }
  std::map<std::string, std::pair<std::string, Option>> first;  // long name -> (subcommand, option)
  std::map<std::string, std::pair<std::string, std::string>> shorts;  // alias -> (subcommand, long)
  for (const auto& [sub, options] : all)
    for (const auto& [name, o] : options) {
      const auto it = first.find(name);
      if (it == first.end()) {
        first[name] = {sub, o};
      } else {
        EXPECT_EQ(o.shortname, it->second.second.shortname)
            << "--" << name << ": short alias differs between " << sub << " and "
            << it->second.first;
        EXPECT_EQ(o.kind, it->second.second.kind)
            << "--" << name << ": " << o.kind << " in " << sub << " but " << it->second.second.kind
            << " in " << it->second.first;
      }
      if (!o.shortname.empty()) {
        const auto s = shorts.find(o.shortname);
        if (s == shorts.end())
          shorts[o.shortname] = {sub, name};
        else
          EXPECT_EQ(name, s->second.second)
              << "-" << o.shortname << " means --" << name << " in " << sub << " but --"
              << s->second.second << " in " << s->second.first;
      }
    }
  // Options every subcommand of a kind must have.
  for (const char* s : {"baselines", "train", "extract", "probe", "compare"})
    EXPECT_EQ(all[s].count("threads"), 1u) << s << " lacks --threads";
  for (const char* s : {"train", "extract", "probe", "compare"})
    EXPECT_EQ(all[s].count("quiet"), 1u) << s << " lacks --quiet";
  for (const auto& s : kSubcommands)
    EXPECT_EQ(all[s].count("force"), 1u) << s << " lacks --force";
  EXPECT_EQ(all["train"]["fixed-w"].kind, "implicit");  // --fixed-w alone means true everywhere
}

TEST(CliOptions, ListParsersRefuseWhatTheyCannotRead) {
  EXPECT_EQ(cli::ParseInts("--k", "0,4,8"), (std::vector<int>{0, 4, 8}));
  EXPECT_THROW(cli::ParseInts("--k", "1,,2"), std::invalid_argument);
  EXPECT_THROW(cli::ParseInts("--k", "1.5"), std::invalid_argument);
  EXPECT_EQ(cli::SplitList("--targets", "a,,b"), (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(cli::SplitList("--targets", ","), std::invalid_argument);
  EXPECT_THROW(cli::ParseLambdas("1:0.1:3"), std::invalid_argument);
  EXPECT_THROW(cli::ParseLambdas("abc"), std::invalid_argument);
  EXPECT_THROW(cli::ParseLambdas("1e-3:1e5:100000"), std::invalid_argument);
  EXPECT_EQ(cli::ParseLambdas("1e-2:1e2:5").n_elem, 5u);
  EXPECT_NEAR(cli::ParseLambdas("1e-2:1e2:5")(2), 1.0, 1e-12);  // 10^0 from logspace: ~1 ulp
  EXPECT_THROW(cli::ParseSplit("inf,1,1"), std::invalid_argument);
  EXPECT_THROW(cli::ParseSplit("0.8,0.2"), std::invalid_argument);
  EXPECT_EQ(cli::ParseFamilies("ridge,mlp").size(), 2u);
  EXPECT_THROW(cli::ParseFamilies("ridge,svm"), std::invalid_argument);
}
