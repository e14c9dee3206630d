// Files (core/hdf5.hpp's File): opening and creating (on disk, on every MPI rank, or in memory),
// flushing, reserving space, syncing and closing, each step checked.
#include "core/hdf5.hpp"
#include "core/hdf5_internal.hpp"

#include "core/dist.hpp"
#include "core/errors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#ifdef ICLPROBE_WITH_MPI
#include <mpi.h>
#endif

namespace icl::h5 {

using detail::EnsureSilenced;
using detail::Fail;
using detail::Lock;

namespace {

// Property lists that keep the file on disk as it was at the last flush until the next one:
// metadata is never evicted (so it reaches the disk only in Flush), and freed space is never
// reused (so new data and metadata go past the end of what the disk copy uses). A process
// killed between flushes then leaves the file of the last flush, plus unreferenced bytes.
Handle FlushOnlyAccess() {
  const Lock lock;
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5AC_cache_config_t cfg;
  cfg.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  if (H5Pget_mdc_config(fapl.id(), &cfg) < 0) Fail("cannot read the metadata cache settings");
  cfg.evictions_enabled = false;
  cfg.incr_mode = H5C_incr__off;
  cfg.flash_incr_mode = H5C_flash_incr__off;
  cfg.decr_mode = H5C_decr__off;
  cfg.set_initial_size = true;
  cfg.initial_size = 32 << 20;
  cfg.max_size = std::max<std::size_t>(cfg.max_size, cfg.initial_size);
  cfg.min_size = std::min<std::size_t>(cfg.min_size, cfg.initial_size);
  if (H5Pset_mdc_config(fapl.id(), &cfg) < 0) Fail("cannot set the metadata cache settings");
  return fapl;
}

// Every rank opens the file through MPI-IO (only when there are several ranks).
bool UseMpiIo(File::Sharing sharing) {
  const Lock lock;
  return sharing == File::Sharing::kAllRanks && dist::Size() > 1;
}

void SetMpiIo(hid_t fapl, const std::string& path) {
  const Lock lock;
#ifdef ICLPROBE_WITH_MPI
  if (H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) < 0)
    Fail("'" + path + "': cannot open it with MPI-IO");
#else
  (void)fapl;
  Fail("'" + path + "': this build has no MPI-IO (ICLPROBE_MPI=OFF)");
#endif
}

}  // namespace

File File::Open(const std::string& path, Mode mode, Durability durability, Sharing sharing) {
  const Lock lock;
  EnsureSilenced();
  const bool holdable =
      mode == Mode::kRead && durability == Durability::kDefault && !UseMpiIo(sharing);
  if (holdable) {
    Handle held(detail::ReopenHeld(path), H5Fclose);
    if (held.valid()) return File(std::move(held), path);
  } else {
    detail::ForgetHeld(path);  // HDF5 opens a file once per process: a held read would block
  }
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  // Bad input, found alike by every rank of an MPI run (so reported once, by rank 0).
  if (!std::filesystem::exists(st))
    throw core::InputError("hdf5", "", "'" + path + "': no such file");
  // A FIFO or device would block or stream forever; iclprobe files are regular files.
  if (!std::filesystem::is_regular_file(st))
    throw core::InputError(
        "hdf5", "",
        "'" + path + "': not a regular file (expected an HDF5 file written by iclprobe)");
  Handle fapl = durability == Durability::kFlushPoints
                    ? FlushOnlyAccess()
                    : Handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (UseMpiIo(sharing)) SetMpiIo(fapl.id(), path);
  Handle h(H5Fopen(path.c_str(), mode == Mode::kRead ? H5F_ACC_RDONLY : H5F_ACC_RDWR, fapl.id()),
           H5Fclose);
  if (!h.valid()) {
    // Which fault it was is asked only now, so that a good file is opened once.
    if (H5Fis_hdf5(path.c_str()) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      throw core::InputError("hdf5", "",
                             "'" + path + "': not an HDF5 file (or its header is damaged)");
    }
    Fail("'" + path + "': cannot open" + (mode == Mode::kRead ? "" : " for writing") +
         " (truncated or damaged, or locked by another process)");
  }
  if (holdable) detail::HoldOpen(path, h.id());
  File f(std::move(h), path);
  f.writable_ = mode == Mode::kReadWrite;
  f.shared_ = UseMpiIo(sharing);
  return f;
}

File File::Create(const std::string& path, bool truncate, Durability durability, Sharing sharing) {
  const Lock lock;
  EnsureSilenced();
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  Handle fapl = durability == Durability::kFlushPoints
                    ? FlushOnlyAccess()
                    : Handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (durability == Durability::kFlushPoints &&
      H5Pset_file_space_strategy(fcpl.id(), H5F_FSPACE_STRATEGY_NONE, 0, 1) < 0)
    Fail("'" + path + "': cannot set the file space strategy");
  if (UseMpiIo(sharing)) SetMpiIo(fapl.id(), path);
  if (truncate) detail::ForgetHeld(path);
  Handle h(H5Fcreate(path.c_str(), truncate ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.id(), fapl.id()),
           H5Fclose);
  if (!h.valid())
    Fail("'" + path + "': cannot create (" +
         (!truncate && std::filesystem::exists(path)
              ? "it exists"
              : "is the disk full or the folder read-only?") +
         ")");
  File f(std::move(h), path);
  f.writable_ = true;
  f.shared_ = UseMpiIo(sharing);
  return f;
}

File File::CreateInMemory(const std::string& name) {
  const Lock lock;
  EnsureSilenced();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  // Grows by 1 MiB; backing_store = 0: never written to a file of that name.
  if (H5Pset_fapl_core(fapl.id(), std::size_t(1) << 20, /*backing_store=*/0) < 0)
    Fail("'" + name + "': cannot set up an in-memory file");
  // HDF5 tells open files apart by name, so each in-memory file gets a name of its own.
  static std::atomic<std::uint64_t> serial{0};
  const std::string unique = name + "#memory" + std::to_string(++serial);
  Handle h(H5Fcreate(unique.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.id()), H5Fclose);
  if (!h.valid()) Fail("'" + name + "': cannot create an in-memory file (out of memory?)");
  File f(std::move(h), name);
  f.writable_ = true;
  f.in_memory_ = true;
  return f;
}

void File::Flush() {
  const Lock lock;
  if (H5Fflush(id(), H5F_SCOPE_GLOBAL) < 0) Fail("'" + file_ + "': flush failed (disk full?)");
}

void File::Close() {
  const Lock lock;
  if (!h_.valid()) return;
  if (writable_) {
    // With objects still open H5Fclose only defers the close, and the writes it then makes
    // would go unchecked: a file is closed only when everything in it is.
    const ssize_t open_objects = H5Fget_obj_count(
        id(), H5F_OBJ_LOCAL | H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR);
    if (open_objects != 0)
      throw std::logic_error("hdf5: '" + file_ + "': Close() with " + std::to_string(open_objects) +
                             " object(s) still open");
    Sync();
  }
  haddr_t eoa = 0;
  if (in_memory_) {
    const hid_t id = h_.Release();
    if (H5Fclose(id) < 0) Fail("'" + file_ + "': close failed");
    return;
  }
  if (writable_ && !shared_ && H5Fget_eoa(id(), &eoa) < 0)
    Fail("'" + file_ + "': cannot read its end");
  const hid_t id = h_.Release();
  if (H5Fclose(id) < 0) Fail("'" + file_ + "': close failed (disk full?)");
  // Space reserved past the end (Reserve) and not used is given back (HDF5's MPI-IO driver sets
  // a shared file's size to its end of allocation itself, in every flush and on closing).
  if (shared_) return;
  std::error_code ec;
  if (writable_ && eoa > 0 && std::filesystem::file_size(file_, ec) > eoa && !ec) {
    if (::truncate(file_.c_str(), static_cast<off_t>(eoa)) != 0)
      Fail("'" + file_ + "': cannot trim the unused reserve: " + std::strerror(errno));
    const int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
    const bool synced = fd >= 0 && ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    if (!synced) Fail("'" + file_ + "': sync to disk failed (disk full?)");
  }
}

void File::Reserve(std::uint64_t bytes) {
  const Lock lock;
  if (in_memory_) return;  // memory grows as written
  auto refuse = [&](int error) {
    throw std::runtime_error("hdf5: '" + file_ + "': cannot reserve " + std::to_string(bytes) +
                             " more bytes (" + std::strerror(error) +
                             "): disk full or a file-size limit reached");
  };
  if (shared_) {
    // MPI-IO owns the ranks' descriptors, and HDF5 gives no end of allocation through it: rank 0
    // reserves past the file's size (the end of allocation at the last flush, which sets the
    // size to it) through a descriptor of its own.
    dist::OnRoot([&] {
      const int fd = ::open(file_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) Fail("'" + file_ + "': cannot open it to reserve space: " + std::strerror(errno));
      struct stat st;
      int r = ::fstat(fd, &st) == 0 ? 0 : errno;
      if (r == 0) r = ::posix_fallocate(fd, 0, static_cast<off_t>(st.st_size + bytes));
      ::close(fd);
      if (r != 0) refuse(r);
    });
    return;
  }
  haddr_t eoa = 0;
  if (H5Fget_eoa(id(), &eoa) < 0) Fail("'" + file_ + "': cannot read its end of allocation");
  void* handle = nullptr;
  if (H5Fget_vfd_handle(id(), H5P_DEFAULT, &handle) < 0 || !handle)
    Fail("'" + file_ + "': cannot reach the file descriptor to reserve space");
  const int r = ::posix_fallocate(*static_cast<int*>(handle), 0, static_cast<off_t>(eoa + bytes));
  if (r != 0) refuse(r);
}

void File::Sync() {
  const Lock lock;
  Flush();
  if (shared_ || in_memory_) return;  // MPI-IO syncs in every flush; memory has no disk
  void* handle = nullptr;
  if (H5Fget_vfd_handle(id(), H5P_DEFAULT, &handle) < 0 || !handle)
    Fail("'" + file_ + "': cannot reach the file descriptor to sync it");
  if (::fsync(*static_cast<int*>(handle)) != 0)
    Fail("'" + file_ + "': sync to disk failed (disk full?)");
}

}  // namespace icl::h5
