// The command line's options as data. Every subcommand declares each option once in an
// OptionTable (name, alias, kind, value type, default as shown, help, the setting it fills);
// Boost.Program_options' description is built from it, --help prints it, and OptionRegistry()
// lists every subcommand's table, so that tests (and the Python module) read the options
// directly rather than scraping --help. The check of a value is its configuration's
// Validate() (learners::TrainConfig, probes::ProbeRequest, ...), which files pass too.
#pragma once

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace icl::cli {

namespace po = boost::program_options;

struct OptionSpec {
  enum class Kind {
    kSwitch,    // --force: present or not
    kValue,     // --d 8
    kImplicit,  // --fixed-w, or --fixed-w false
    kList,      // --control A --control B (repeatable)
  };
  std::string name;   // long, kebab-case ("mlp-ratio")
  std::string alias;  // one letter, or ""
  Kind kind = Kind::kSwitch;
  std::string type;          // "int", "int64", "uint64", "double", "bool", "string"
  bool has_default = false;  // a value taken when the option is absent
  std::string default_text;  // as --help shows it (shortest round-trip text for numbers)
  std::string help;
  std::string field;  // the setting it fills, as the program names it ("train.lr"); "" for switches
  // Whether the value names a file the run reads or writes: the table of every subcommand's
  // inputs, from which each run's outputs learn what --force must never replace.
  enum class Role { kSetting, kInput, kOutput };
  Role role = Role::kSetting;
  // Files read beside an input, as suffixes that replace its ".h5" (a run's ".train.csv").
  std::vector<std::string> companions;
  // The value is NAME=FILE,FILE,... (compare --cell): the files are the part after '='.
  bool named_list = false;
};

std::string RoleName(OptionSpec::Role role);  // "setting", "input", "output"

// `path` with its ".h5" extension (if any) replaced by `suffix`: "runs/a.h5" + ".train.csv".
std::string CompanionPath(const std::string& path, const std::string& suffix);

std::string KindName(OptionSpec::Kind kind);  // "switch", "value", "implicit", "list"

// The shortest text that reads back as `v` ("0.1", not "0.10000000000000001").
template <typename T>
std::string DefaultText(const T& v) {
  if constexpr (std::is_same_v<T, std::string>)
    return v;
  else if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else
    return fmt::format("{}", v);
}

template <typename T>
std::string TypeName() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, int>) return "int";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, std::string>) return "string";
  return "?";
}

class OptionTable {
 public:
  explicit OptionTable(std::string subcommand)
      : subcommand_(std::move(subcommand)), description_("Options") {}

  // "out,o": the long name and an optional one-letter alias. `field` names the setting.
  // A value whose default is the target's current value.
  template <typename T>
  OptionTable& Value(const std::string& names, T* target, const std::string& field,
                     const std::string& help) {
    const std::string text = DefaultText(*target);
    description_.add_options()(names.c_str(), po::value(target)->default_value(*target, text),
                               help.c_str());
    Add(names, OptionSpec::Kind::kValue, TypeName<T>(), true, text, help, field);
    return *this;
  }
  // A value with no default: absent unless given (the program then derives it).
  template <typename T>
  OptionTable& Optional(const std::string& names, T* target, const std::string& field,
                        const std::string& help) {
    description_.add_options()(names.c_str(), po::value(target), help.c_str());
    Add(names, OptionSpec::Kind::kValue, TypeName<T>(), false, "", help, field);
    return *this;
  }
  // A value that may be given without one (--fixed-w means --fixed-w true).
  template <typename T>
  OptionTable& Implicit(const std::string& names, T* target, const T& implicit,
                        const std::string& field, const std::string& help) {
    description_.add_options()(names.c_str(),
                               po::value(target)->implicit_value(implicit, DefaultText(implicit)),
                               help.c_str());
    Add(names, OptionSpec::Kind::kImplicit, TypeName<T>(), false, "", help, field);
    return *this;
  }
  // Repeatable (and, with `multitoken`, several values after one option).
  template <typename T>
  OptionTable& List(const std::string& names, std::vector<T>* target, const std::string& field,
                    const std::string& help, bool multitoken = false) {
    auto* v = po::value(target)->composing();
    if (multitoken) v->multitoken();
    description_.add_options()(names.c_str(), v, help.c_str());
    Add(names, OptionSpec::Kind::kList, TypeName<T>(), false, "", help, field);
    return *this;
  }
  OptionTable& Switch(const std::string& names, const std::string& help) {
    description_.add_options()(names.c_str(), help.c_str());
    Add(names, OptionSpec::Kind::kSwitch, "", false, "", help, "");
    return *this;
  }

  // Marks the declared option `name` as naming files the run reads (with the files read beside
  // each: CompanionPath suffixes), or writes. Every file option of a subcommand is marked, so
  // that InputPaths() knows every input (a test checks the table against the registry).
  OptionTable& Input(const std::string& name, std::vector<std::string> companions = {},
                     bool named_list = false);
  OptionTable& Output(const std::string& name);

  const std::string& subcommand() const { return subcommand_; }
  const std::vector<OptionSpec>& specs() const { return specs_; }
  po::options_description& description() { return description_; }

 private:
  void Add(const std::string& names, OptionSpec::Kind kind, const std::string& type,
           bool has_default, const std::string& default_text, const std::string& help,
           const std::string& field);

  std::string subcommand_;
  po::options_description description_;
  std::vector<OptionSpec> specs_;
};

// The specs of a subcommand's table, declared on targets of their own (default-constructed
// arguments), so that reading them sets nothing.
template <typename... Args>
std::vector<OptionSpec> SpecsOf(const std::string& subcommand,
                                void (*declare)(OptionTable&, Args&...)) {
  OptionTable table(subcommand);
  std::tuple<std::decay_t<Args>...> targets;
  std::apply([&](auto&... a) { declare(table, a...); }, targets);
  return table.specs();
}

// Every file the parsed command line names through an input option, with the files read beside
// them: what no output of the run may replace, --force or not.
std::vector<std::string> InputPaths(const std::vector<OptionSpec>& specs,
                                    const po::variables_map& vm);

// Every subcommand's options by its name, from the table of subcommands (apps/subcommands.hpp;
// each option table built with targets of its own, so reading the registry sets nothing).
std::map<std::string, std::vector<OptionSpec>> OptionRegistry();

}  // namespace icl::cli
