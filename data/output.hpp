// Safe output files: refuse to overwrite without --force, write to "<path>.partial" and
// rename only when complete, so a crash never leaves a file that looks finished.
#pragma once

#include <string>

namespace icl::data {

class AtomicOutput {
 public:
  // Throws std::invalid_argument (naming `option`, e.g. "--csv") when `path` exists and
  // !force, or when its folder does not exist.
  AtomicOutput(std::string path, bool force, const std::string& option);
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  // Removes the temporary file unless Commit() was called.
  ~AtomicOutput();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }
  // Renames the temporary file onto the final path.
  void Commit();

 private:
  std::string path_;
  std::string temp_;
  bool committed_ = false;
};

}  // namespace icl::data
