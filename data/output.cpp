// AtomicOutput: temp file + rename.
#include "data/output.hpp"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace icl::data {

namespace fs = std::filesystem;

AtomicOutput::AtomicOutput(std::string path, bool force, const std::string& option)
    : path_(std::move(path)), temp_(path_ + ".partial") {
  if (path_.empty()) throw std::invalid_argument(option + ": empty output path");
  if (fs::exists(path_) && !force)
    throw std::invalid_argument(option + ": '" + path_ +
                                "' exists; pass --force to overwrite it or choose another path");
  if (fs::is_directory(path_))
    throw std::invalid_argument(option + ": '" + path_ + "' is a folder, expected a file path");
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw std::invalid_argument(option + ": folder '" + parent.string() + "' does not exist");
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void AtomicOutput::Commit() {
  std::error_code ec;
  fs::rename(temp_, path_, ec);
  if (ec)
    throw std::runtime_error("cannot rename '" + temp_ + "' to '" + path_ + "': " + ec.message());
  committed_ = true;
}

}  // namespace icl::data
