// Test helpers: temp folders and subprocesses.
#include "tests/test_util.hpp"

#include <hdf5.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <unistd.h>
#include <csignal>

#include <algorithm>
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

void WriteStringAttribute(const std::string& path, const std::string& object,
                          const std::string& name, int n, bool fixed) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error("WriteStringAttribute: cannot open " + path);
  const hid_t obj = H5Oopen(file, object.c_str(), H5P_DEFAULT);
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, fixed ? 8 : H5T_VARIABLE);
  const hsize_t dim = hsize_t(std::max(n, 0));
  const hid_t space = n < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, nullptr);
  const hid_t a = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const std::size_t count = n < 0 ? 1 : std::size_t(n);
  std::vector<std::string> values;
  for (std::size_t i = 0; i < count; ++i)
    values.push_back("s" + std::to_string(i));
  herr_t status = 0;
  if (fixed) {
    std::string buf(count * 8, '\0');
    for (std::size_t i = 0; i < count; ++i)
      std::copy(values[i].begin(), values[i].end(), buf.begin() + long(i * 8));
    if (count > 0) status = H5Awrite(a, type, buf.data());
  } else {
    std::vector<const char*> p;
    for (const auto& v : values)
      p.push_back(v.c_str());
    if (count > 0) status = H5Awrite(a, type, p.data());
  }
  const bool ok = obj >= 0 && a >= 0 && status >= 0;
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  H5Oclose(obj);
  H5Fclose(file);
  if (!ok) throw std::runtime_error("WriteStringAttribute: cannot write " + name + " in " + path);
}

}  // namespace icl::test
