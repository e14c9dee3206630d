// What the files of the HDF5 wrapper share (hdf5.cpp, hdf5_attributes.cpp, hdf5_dataset.cpp,
// hdf5_group.cpp, hdf5_file.cpp): the one lock around every HDF5 call and the errors. Not part of
// core's interface.
#pragma once

#include <mutex>
#include <string>

#include "core/hdf5.hpp"

namespace icl::h5::detail {

// The parallel HDF5 library (the MPI build) is not thread-safe, unlike Debian's serial build,
// and iclprobe calls HDF5 from several threads (extract's writer, probe's input records beside
// the probes): every call into HDF5 holds this one lock, as HDF5's thread-safe build does inside.
std::recursive_mutex& Hdf5Mutex();
struct Lock {
  std::lock_guard<std::recursive_mutex> guard{Hdf5Mutex()};
};

// Throws std::runtime_error "hdf5: <what> [<innermost cause on HDF5's error stack>]".
[[noreturn]] void Fail(const std::string& what);

// "[2, 3]".
std::string DimsStr(const Dims& d);

// The element of an HDF5 datatype in numpy's words ("float32", "uint8", "string", "other").
std::string ElementName(hid_t type);

// Turns HDF5's error printing, exit handler and filter plugins off, once per process.
void EnsureSilenced();

// The open-once registry (hdf5_open_once.cpp): a new identifier of the file held open for
// `path` by the current OpenOnce scope, or H5I_INVALID_HID; hold `file` (opened for reading)
// for later readers; drop what is held for `path` before it is written.
hid_t ReopenHeld(const std::string& path);
void HoldOpen(const std::string& path, hid_t file);
void ForgetHeld(const std::string& path);

}  // namespace icl::h5::detail
