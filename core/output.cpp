// AtomicOutput: checks before work, a lock against a second writer, partial file, fsync, rename.
#include "core/output.hpp"

#include "core/errors.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace icl::core {

namespace fs = std::filesystem;

namespace {

std::string Errno() {
  return std::strerror(errno);
}

std::string Parent(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

// A non-empty path whose folder exists and is writable: checked by the lock and by the output
// alike, whichever a run takes first.
void RequireOutputFolder(const std::string& path, const std::string& label) {
  if (path.empty()) throw InputError("output", label, "empty output path");
  const std::string parent = Parent(path);
  if (!fs::is_directory(parent))
    throw InputError("output", label, "folder '" + parent + "' does not exist");
  if (::access(parent.c_str(), W_OK) != 0)
    throw InputError("output", label, "folder '" + parent + "' is not writable");
}

std::string GiB(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  return buf;
}

}  // namespace

FileId IdOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

void RequireRegularInput(const std::string& path, const std::string& label) {
  struct stat st;
  if (path.empty()) throw InputError("input", label, "empty path");
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(
        "input", label,
        "'" + path + "': " + (errno == ENOENT ? std::string("no such file") : Errno()));
  if (!S_ISREG(st.st_mode))
    throw InputError("input", label,
                     "'" + path + "' is not a regular file" +
                         (S_ISDIR(st.st_mode) ? " (a folder)" : "") +
                         "; expected a file written by iclprobe");
}

OutputLock::OutputLock(const std::string& path, const std::string& label)
    : lock_path_(path + ".lock") {
  // The lock may be the first thing a run does with its output: the same words as
  // AtomicOutput's for a path that cannot hold one.
  RequireOutputFolder(path, label);
  // Open, lock, then check that the name still points at the locked inode: a writer that
  // finished in between removed the old lock file, and we must not hold a lock on an orphan.
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw InputError("output", label,
                       "cannot create the lock file '" + lock_path_ + "': " + Errno() +
                           " (is the folder writable?)");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      ::close(fd_);
      fd_ = -1;
      if (e == EWOULDBLOCK)
        throw InputError("output", label,
                         "'" + path + "' is being written by another process (lock '" + lock_path_ +
                             "' is held); wait for it or choose another output");
      throw InputError("output", label, "cannot lock '" + lock_path_ + "': " + std::strerror(e));
    }
    struct stat a, b;
    if (::fstat(fd_, &a) == 0 && ::stat(lock_path_.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
      return;
    ::close(fd_);
    fd_ = -1;
  }
  throw InputError("output", label,
                   "cannot take the lock '" + lock_path_ + "' (other processes keep replacing it)");
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still holding it, so nobody locks the removed inode
  ::close(fd_);
}

AtomicOutput::AtomicOutput(std::string path, const std::string& label, const OutputOptions& o)
    : path_(std::move(path)),
      temp_(path_ + ".partial"),
      label_(label),
      keep_partial_(o.keep_partial) {
  RequireOutputFolder(path_, label);
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw InputError("output", label, "'" + path_ + "' is a folder, expected a file path");
    if (!S_ISREG(st.st_mode))
      throw InputError("output", label,
                       "'" + path_ +
                           "' exists and is not a regular file (a device, FIFO or "
                           "socket); iclprobe only replaces regular files");
    if (!o.force)
      throw InputError(
          "output", label,
          "'" + path_ + "' exists; pass {force} to overwrite it or choose another path");
  }
  const FileId out_id = IdOf(path_), temp_id = IdOf(temp_);
  for (const auto& in : o.inputs) {
    const FileId id = IdOf(in);
    if (id == out_id || id == temp_id)
      throw InputError(
          "output", label,
          "'" + path_ + "' is the input '" + in + "'; write the output to another file");
  }
  if (::lstat(temp_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw InputError("output", label, "'" + temp_ + "' exists and is not a regular file");
  if (o.lock) lock_ = std::make_unique<OutputLock>(path_, label);
}

AtomicOutput::~AtomicOutput() {
  if (!committed_ && !keep_partial_) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void SyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open '" + path + "' to sync it: " + Errno());
  const int r = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  // Some file systems cannot sync a folder (EINVAL); files must always sync.
  if (r != 0 && !(e == EINVAL && fs::is_directory(path)))
    throw std::runtime_error("cannot sync '" + path + "' to disk: " + std::strerror(e));
}

void AtomicOutput::Commit() {
  try {
    SyncPath(temp_);
    std::error_code ec;
    fs::rename(temp_, path_, ec);
    if (ec)
      throw std::runtime_error("cannot rename '" + temp_ + "' to '" + path_ + "': " + ec.message());
    committed_ = true;
    SyncPath(Parent(path_));
  } catch (const std::runtime_error& e) {
    if (!committed_) keep_partial_ = false;  // an unsynced partial file is not worth resuming
    throw std::runtime_error("output '" + path_ + "': " + e.what());
  }
}

void WriteFileChecked(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create '" + path + "': " + Errno());
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = w < 0 ? Errno() : "no progress";
      ::close(fd);
      throw std::runtime_error("cannot write '" + path + "': " + why + " (disk full?)");
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const std::string why = Errno();
    ::close(fd);
    throw std::runtime_error("cannot sync '" + path + "': " + why + " (disk full?)");
  }
  if (::close(fd) != 0) throw std::runtime_error("cannot close '" + path + "': " + Errno());
}

void AtomicOutput::WriteText(const std::string& content) {
  try {
    WriteFileChecked(temp_, content);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("output '" + path_ + "': " + e.what());
  }
}

void AtomicOutput::CommitText(const std::string& content) {
  WriteText(content);
  Commit();
}

void RequireDistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outs) {
  for (std::size_t i = 0; i < outs.size(); ++i)
    for (std::size_t j = i + 1; j < outs.size(); ++j) {
      const auto& [la, pa] = outs[i];
      const auto& [lb, pb] = outs[j];
      if (pa.empty() || pb.empty()) continue;
      const bool same = fs::weakly_canonical(pa) == fs::weakly_canonical(pb) ||
                        (IdOf(pa).found && IdOf(pa) == IdOf(pb));
      if (same)
        throw InputError(
            "output", la,
            "names the same file as {" + lb + "} ('" + pa + "'); give each output its own path");
    }
}

void RequireMemory(double bytes, const std::string& module, const std::string& label,
                   const std::string& what) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: the allocator decides
  const double have = double(pages) * double(page);
  if (!(bytes <= 0.8 * have))
    throw InputError(module, label,
                     what + " would take about " + GiB(bytes) + " of memory; this machine has " +
                         GiB(have) + " in all: ask for fewer");
}

void RequireFreeSpace(const std::string& path, double bytes, const std::string& label) {
  std::error_code ec;
  const auto space = fs::space(Parent(path), ec);
  if (ec) return;  // the folder check reports a missing folder
  const double have = static_cast<double>(space.available);
  if (!(bytes <= have))
    throw InputError("output", label,
                     "the output would take about " + GiB(bytes) + " but '" + Parent(path) +
                         "' has " + GiB(have) +
                         " free; free space or write less (fewer prompts, layers or "
                         "positions)");
}

}  // namespace icl::core
