// Safe output files. An output is written under "<path>.partial", checked, fsync'ed and renamed
// only when complete, so neither a crash nor a full disk leaves a file that looks finished; an
// existing file is replaced only with `force`, never when it is also an input (same device and
// inode, links resolved) and never when it is not a regular file; one writer at a time holds
// an exclusive lock ("<path>.lock"), so two runs never interleave in one output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace icl::core {

// Identity of a file on disk (device and inode, links followed); found = false when absent.
struct FileId {
  bool found = false;
  std::uint64_t dev = 0, ino = 0;
  bool operator==(const FileId& o) const {
    return found && o.found && dev == o.dev && ino == o.ino;
  }
};
FileId IdOf(const std::string& path);

// Every check below throws core::InputError naming `label`: the setting that names the file
// ("out", "csv", "checkpoint"), which the program shows as its option.
// Throws naming `label` unless `path` is an existing regular file (links
// followed): a FIFO, a device or a folder given as an input would block or make no sense.
void RequireRegularInput(const std::string& path, const std::string& label);

// An exclusive advisory lock on "<path>.lock", held for the object's lifetime; the lock file is
// removed when released. Throws std::runtime_error when another process holds it, and
// core::InputError when the folder does not admit the lock file (missing, read-only).
class OutputLock {
 public:
  OutputLock(const std::string& path, const std::string& label);
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock();

 private:
  std::string lock_path_;
  int fd_ = -1;
};

struct OutputOptions {
  bool force = false;               // replace an existing output
  std::vector<std::string> inputs;  // files this run reads: never replaced, even with force
  bool keep_partial = false;        // leave "<path>.partial" for a resume when not committed
  bool lock = true;                 // take the OutputLock (false: the caller holds it)
};

class AtomicOutput {
 public:
  // Checks everything that can be checked before work starts and throws
  // core::InputError naming `label` (a setting name: "out", "csv"): an empty
  // path, a missing or unwritable folder, an existing path without force, a path that is not a
  // regular file, a path (or its partial file) that is the same file as an input.
  AtomicOutput(std::string path, const std::string& label, const OutputOptions& options);
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  // Removes the partial file unless Commit() was called or keep_partial was asked for.
  ~AtomicOutput();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }
  // fsyncs the partial file, renames it onto the final path and fsyncs the folder; throws
  // std::runtime_error naming the file on any failure (the partial file is then removed).
  void Commit();
  // Writes `content` to the partial file with every write checked and synced (no rename: a
  // run with several outputs writes them all, then commits them all).
  void WriteText(const std::string& content);
  // WriteText, then Commit.
  void CommitText(const std::string& content);

 private:
  std::string path_;
  std::string temp_;
  std::string label_;
  bool keep_partial_ = false;
  bool committed_ = false;
  std::unique_ptr<OutputLock> lock_;
};

// Refuses (core::InputError naming the labels) when two outputs of one run are the same
// path or the same file.
void RequireDistinctOutputs(const std::vector<std::pair<std::string, std::string>>& label_path);

// fsync of a file or folder by path; throws std::runtime_error naming it.
void SyncPath(const std::string& path);

// Writes `content` to `path` (created or truncated) with checked writes and an fsync.
void WriteFileChecked(const std::string& path, const std::string& content);

// Throws core::InputError naming `label` when the file system holding `path` has less
// than `bytes` free: a run that would fill the disk is refused before it starts.
void RequireFreeSpace(const std::string& path, double bytes, const std::string& label);

// Throws core::InputError (module `module`, setting `label`) when holding `bytes` in memory
// would take more than 80% of this machine's physical memory: a request whose arrays cannot fit
// is refused before the allocation, naming what asked for them (`what`, e.g. "the query
// points"), instead of ending in the allocator's "out of memory".
void RequireMemory(double bytes, const std::string& module, const std::string& label,
                   const std::string& what);

}  // namespace icl::core
