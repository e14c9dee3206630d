// One open per input per run (core/hdf5.hpp's OpenOnce): the files a run has opened for reading,
// held open until the run's scope ends, shared by every later reader and by the hash.
#include "core/hdf5.hpp"
#include "core/hdf5_internal.hpp"
#include "core/open_once.hpp"

#include <sys/stat.h>

#include <map>
#include <string>
#include <utility>

namespace icl::h5 {

namespace {

struct Held {
  hid_t id = H5I_INVALID_HID;
  off_t size = 0;
  struct timespec mtime {};
};

struct Registry {
  int scopes = 0;
  std::map<std::pair<dev_t, ino_t>, Held> files;  // by device and inode: one file, any path
};

Registry& Files() {
  static Registry r;
  return r;
}

bool Same(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

void CloseHeld(Held& h) {
  if (h.id >= 0) H5Fclose(h.id);
  h.id = H5I_INVALID_HID;
}

}  // namespace

OpenOnce::OpenOnce() {
  const detail::Lock lock;
  ++Files().scopes;
}

OpenOnce::~OpenOnce() {
  const detail::Lock lock;
  Registry& r = Files();
  if (--r.scopes > 0) return;
  for (auto& [key, held] : r.files)
    CloseHeld(held);
  r.files.clear();
}

namespace detail {

hid_t ReopenHeld(const std::string& path) {
  const Lock lock;
  Registry& r = Files();
  struct stat st {};
  if (r.scopes == 0 || ::stat(path.c_str(), &st) != 0) return H5I_INVALID_HID;
  const auto it = r.files.find({st.st_dev, st.st_ino});
  if (it == r.files.end()) return H5I_INVALID_HID;
  // Changed since it was opened (rewritten by another program): read it afresh.
  if (it->second.size != st.st_size || !Same(it->second.mtime, st.st_mtim)) {
    CloseHeld(it->second);
    r.files.erase(it);
    return H5I_INVALID_HID;
  }
  return H5Freopen(it->second.id);
}

void HoldOpen(const std::string& path, hid_t file) {
  const Lock lock;
  Registry& r = Files();
  struct stat st {};
  if (r.scopes == 0 || ::stat(path.c_str(), &st) != 0) return;
  const hid_t copy = H5Freopen(file);
  if (copy < 0) return;  // not held: the next reader opens the path again
  Held& h = r.files[{st.st_dev, st.st_ino}];
  CloseHeld(h);
  h = Held{copy, st.st_size, st.st_mtim};
}

void ForgetHeld(const std::string& path) {
  const Lock lock;
  Registry& r = Files();
  struct stat st {};
  if (r.files.empty() || ::stat(path.c_str(), &st) != 0) return;
  const auto it = r.files.find({st.st_dev, st.st_ino});
  if (it == r.files.end()) return;
  CloseHeld(it->second);
  r.files.erase(it);
}

}  // namespace detail

int OpenDescriptor(const std::string& path) {
  const detail::Lock lock;
  Registry& r = Files();
  struct stat st {};
  if (r.scopes == 0 || ::stat(path.c_str(), &st) != 0) return -1;
  const auto it = r.files.find({st.st_dev, st.st_ino});
  if (it == r.files.end() || it->second.size != st.st_size || !Same(it->second.mtime, st.st_mtim))
    return -1;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(it->second.id, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  return *static_cast<int*>(handle);  // the sec2 driver's handle is its file descriptor
}

}  // namespace icl::h5
