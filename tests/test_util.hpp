// Helpers shared by the test suites: temporary folders and running the iclprobe binary.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace icl::test {

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Path of the iclprobe binary built alongside the tests.
std::string IclprobeBin();
// Runs `iclprobe <args>` (the binary built alongside the tests) through /bin/sh.
CommandResult RunIclprobe(const std::string& args);
// Runs any shell command, capturing stdout and stderr.
CommandResult RunShell(const std::string& command);
// The same with a file-size limit (RLIMIT_FSIZE, what `ulimit -f` sets) of `max_file_bytes`:
// a write past it fails as on a full disk.
CommandResult RunShellWithFileLimit(const std::string& command, long max_file_bytes);

std::string ReadFile(const std::string& path);
// True when `h5ls -r` output lists `object` (absolute path) as "Dataset {dims}".
bool H5lsHasDataset(const std::string& h5ls_output, const std::string& object,
                    const std::string& dims);
int CountLines(const std::string& s);

// True when f() throws a std::logic_error that is not a std::invalid_argument: a caller's bug
// (an internal invariant), not bad input (EXPECT_THROW(..., std::logic_error) would also accept
// an InputError, which derives from it).
template <class F>
bool ThrowsInternalError(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return false;
  } catch (const std::logic_error&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

}  // namespace icl::test
