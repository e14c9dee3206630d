// Helpers shared by the test suites: temporary folders and running the iclprobe binary.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/task.hpp"

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

// Writes a string attribute of any shape to object `object` ("/" for the root) of the existing
// HDF5 file `path`, replacing one of that name, with the C API (the project's writers make only
// scalars and variable-length lists): `n` < 0 gives a scalar, n >= 0 a list of n entries
// "s0", "s1", ...; `fixed` gives fixed-length strings of 8 bytes instead of variable-length ones.
void WriteStringAttribute(const std::string& path, const std::string& object,
                          const std::string& name, int n, bool fixed);

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

// How f() refuses its input: "SETTING: TEXT" of the core::InputError it throws (the setting a
// library names, and its words); "accepted" when it throws nothing, "not an InputError: ..."
// for any other exception.
template <class F>
std::string InputErrorOf(F&& f) {
  try {
    f();
  } catch (const core::InputError& e) {
    return e.field() + ": " + e.text();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "accepted";
}

// The task of the tests' prompts: d and n, the rest default (x ~ N(0, I), w ~ N(0, I), no noise).
inline data::TaskConfig Task(int d, int n) {
  data::TaskConfig t;
  t.d = d;
  t.n = n;
  return t;
}

// A documented refusal: `iclprobe ARGS` fails with exit 2 and one line on stderr containing
// `message`.
struct Refusal {
  std::string args, message;
};
// Runs each case with `suffix` appended (e.g. " --out DIR/x.h5") and checks its refusal, and
// that nothing was left in `out_dir` (when given).
inline void ExpectEachRefused(const std::vector<Refusal>& cases, const std::string& suffix,
                              const std::filesystem::path& out_dir = {}) {
  for (const Refusal& c : cases) {
    const CommandResult e = RunIclprobe(c.args + suffix);
    EXPECT_EQ(e.exit_code, 2) << c.args;
    EXPECT_NE(e.err.find(c.message), std::string::npos) << c.args << "\n" << e.err;
    EXPECT_EQ(CountLines(e.err), 1) << c.args << "\n" << e.err;
    if (!out_dir.empty()) {
      EXPECT_TRUE(std::filesystem::is_empty(out_dir)) << c.args;
    }
  }
}

}  // namespace icl::test
