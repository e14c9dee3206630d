// The option registry (apps/options.hpp).
#include "apps/options.hpp"

#include <stdexcept>

#include "apps/cli.hpp"

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

std::map<std::string, std::vector<OptionSpec>> OptionRegistry() {
  return {{"baselines", BaselinesOptions()}, {"train", TrainOptions()},
          {"inspect", InspectOptions()},     {"extract", ExtractOptions()},
          {"probe", ProbeOptions()},         {"compare", CompareOptions()},
          {"report", ReportOptions()},       {"construct", ConstructOptions()},
          {"import", ImportOptions()},       {"intervene", InterveneOptions()},
          {"trace", TraceOptions()},         {"swap", SwapOptions()},
          {"erase", EraseOptions()},         {"das", DasOptions()}};
}

}  // namespace icl::cli
