// Option parsing shared by the subcommands.
#include "apps/cli.hpp"

#include <iostream>
#include <sstream>

namespace icl::cli {

bool Parse(int argc, char** argv, po::options_description& options, po::variables_map& vm,
           const std::string& usage, const std::string& example) {
  options.add_options()("help,h", "show this help and exit");
  // No positional arguments: a stray word (a forgotten option name) is an error, not ignored.
  po::positional_options_description none;
  po::store(po::command_line_parser(argc, argv).options(options).positional(none).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << options << "\nExample:\n  " << example << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

std::vector<int> ParseInts(const std::string& option, const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw std::invalid_argument(option + ": expected comma-separated integers like 0,4,8, got '" +
                                  text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw std::invalid_argument(option + ": empty list");
  return out;
}

}  // namespace icl::cli
