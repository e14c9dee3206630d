// Running another program without a shell (core/subprocess.hpp).
#include "core/subprocess.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace icl::core {

namespace fs = std::filesystem;

std::string FindProgram(const std::string& name, const char* env_override) {
  if (const char* env = env_override ? std::getenv(env_override) : nullptr)
    return fs::exists(env) ? fs::absolute(env).string() : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const auto candidate = fs::path(dir) / name;
    if (fs::is_regular_file(candidate) && ::access(candidate.c_str(), X_OK) == 0)
      return fs::absolute(candidate).string();
  }
  return "";
}

int RunProgram(const std::string& program, const std::vector<std::string>& args,
               const std::string& workdir, std::string* output) {
  // fork/exec: no shell between us and the program, so no argument or folder name is parsed
  // as a command. Its stdout and stderr go to a file we read back for the message.
  const std::string log_path = workdir + "/.program-output";
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start '" + program + "': " + std::strerror(errno));
  if (pid == 0) {
    if (::chdir(workdir.c_str()) != 0) ::_exit(126);
    const int fd = ::open(".program-output", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("cannot wait for '" + program + "'");
  if (output) {
    std::ifstream in(log_path);
    std::string line;
    while (std::getline(in, line) && output->size() < 300)
      *output += (output->empty() ? "" : " ") + line;
  }
  std::error_code ec;
  fs::remove(log_path, ec);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace icl::core
