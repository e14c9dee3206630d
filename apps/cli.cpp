// Option parsing shared by the subcommands.
#include "apps/cli.hpp"

#include <iostream>

namespace icl::cli {

bool Parse(int argc, char** argv, po::options_description& options, po::variables_map& vm,
           const std::string& usage, const std::string& example) {
  options.add_options()("help,h", "show this help and exit");
  po::store(po::command_line_parser(argc, argv).options(options).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n\n" << options << "\nExample:\n  " << example << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

}  // namespace icl::cli
