// The option registry (apps/options.hpp).
#include "apps/options.hpp"

#include <stdexcept>

#include "apps/subcommands.hpp"

namespace icl::cli {

std::string KindName(OptionSpec::Kind kind) {
  switch (kind) {
    case OptionSpec::Kind::kSwitch:
      return "switch";
    case OptionSpec::Kind::kValue:
      return "value";
    case OptionSpec::Kind::kImplicit:
      return "implicit";
    case OptionSpec::Kind::kList:
      return "list";
  }
  return "?";
}

void OptionTable::Add(const std::string& names, OptionSpec::Kind kind, const std::string& type,
                      bool has_default, const std::string& default_text, const std::string& help,
                      const std::string& field) {
  OptionSpec s;
  const auto comma = names.find(',');
  s.name = names.substr(0, comma);
  s.alias = comma == std::string::npos ? "" : names.substr(comma + 1);
  s.kind = kind;
  s.type = type;
  s.has_default = has_default;
  s.default_text = default_text;
  s.help = help;
  s.field = field;
  for (const auto& o : specs_)
    if (o.name == s.name)
      throw std::logic_error(subcommand_ + ": option --" + s.name + " is declared twice");
  specs_.push_back(std::move(s));
}

std::string RoleName(OptionSpec::Role role) {
  switch (role) {
    case OptionSpec::Role::kSetting:
      return "setting";
    case OptionSpec::Role::kInput:
      return "input";
    case OptionSpec::Role::kOutput:
      return "output";
  }
  return "?";
}

std::string CompanionPath(const std::string& path, const std::string& suffix) {
  const std::string h5 = ".h5";
  const bool has_h5 =
      path.size() > h5.size() && path.compare(path.size() - h5.size(), h5.size(), h5) == 0;
  return (has_h5 ? path.substr(0, path.size() - h5.size()) : path) + suffix;
}

namespace {

OptionSpec& Find(std::vector<OptionSpec>& specs, const std::string& subcommand,
                 const std::string& name) {
  for (auto& s : specs)
    if (s.name == name) return s;
  throw std::logic_error(subcommand + ": no option --" + name + " to mark as a file");
}

}  // namespace

OptionTable& OptionTable::Input(const std::string& name, std::vector<std::string> companions,
                                bool named_list) {
  OptionSpec& s = Find(specs_, subcommand_, name);
  s.role = OptionSpec::Role::kInput;
  s.companions = std::move(companions);
  s.named_list = named_list;
  return *this;
}

OptionTable& OptionTable::Output(const std::string& name) {
  Find(specs_, subcommand_, name).role = OptionSpec::Role::kOutput;
  return *this;
}

std::vector<std::string> InputPaths(const std::vector<OptionSpec>& specs,
                                    const po::variables_map& vm) {
  std::vector<std::string> out;
  for (const auto& s : specs) {
    if (s.role != OptionSpec::Role::kInput || !vm.count(s.name)) continue;
    std::vector<std::string> values;
    const auto& v = vm[s.name].value();
    if (const auto* one = boost::any_cast<std::string>(&v))
      values.push_back(*one);
    else if (const auto* many = boost::any_cast<std::vector<std::string>>(&v))
      values = *many;
    else
      throw std::logic_error("--" + s.name + ": an input option holds a file name (a string)");
    for (const auto& value : values) {
      std::vector<std::string> files;
      if (s.named_list) {
        // NAME=FILE,FILE,...: the files after '=' (a malformed value is refused where it is
        // parsed; here every comma-separated part is a candidate file).
        const auto eq = value.find('=');
        std::string rest = eq == std::string::npos ? value : value.substr(eq + 1);
        std::size_t start = 0;
        while (start <= rest.size()) {
          const auto comma = rest.find(',', start);
          files.push_back(
              rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      } else {
        files.push_back(value);
      }
      for (const auto& f : files) {
        if (f.empty()) continue;
        out.push_back(f);
        for (const auto& suffix : s.companions)
          out.push_back(CompanionPath(f, suffix));
      }
    }
  }
  return out;
}

std::map<std::string, std::vector<OptionSpec>> OptionRegistry() {
  std::map<std::string, std::vector<OptionSpec>> registry;
  for (const Subcommand& s : Subcommands())
    registry[s.name] = s.options();
  return registry;
}

}  // namespace icl::cli
