// Test helpers: temp folders and subprocesses.
#include "tests/test_util.hpp"

#include <sys/resource.h>
#include <sys/wait.h>

#include <unistd.h>
#include <csignal>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace icl::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("iclprobe-test-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(counter++) + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool H5lsHasDataset(const std::string& out, const std::string& object, const std::string& dims) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, kind;
    fields >> name >> kind;
    std::string rest;
    std::getline(fields, rest);
    const auto b = rest.find_first_not_of(' ');
    if (name == object && kind == "Dataset" && b != std::string::npos &&
        rest.substr(b) == "{" + dims + "}")
      return true;
  }
  return false;
}

int CountLines(const std::string& s) {
  int lines = 0;
  for (char c : s)
    lines += c == '\n';
  if (!s.empty() && s.back() != '\n') ++lines;
  return lines;
}

CommandResult RunShell(const std::string& command) {
  TempDir tmp;
  const std::string out = tmp / "out", err = tmp / "err";
  const std::string full = "( " + command + " ) >'" + out + "' 2>'" + err + "'";
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

CommandResult RunShellWithFileLimit(const std::string& command, long max_file_bytes) {
  TempDir tmp;
  const std::string out = tmp / "out", err = tmp / "err";
  const std::string full = "( " + command + " ) >'" + out + "' 2>'" + err + "'";
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Set after the redirections' files exist is not possible here; they stay tiny anyway.
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(max_file_bytes);
    ::setrlimit(RLIMIT_FSIZE, &rl);
    ::signal(SIGXFSZ, SIG_IGN);
    ::execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

std::string IclprobeBin() {
  return ICLPROBE_BIN;
}

CommandResult RunIclprobe(const std::string& args) {
  return RunShell(std::string("'") + ICLPROBE_BIN + "' " + args);
}

}  // namespace icl::test
