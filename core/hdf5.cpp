// RAII wrappers over the HDF5 C API: the one lock, the error stack, element types and handles.
// Every error becomes an exception naming file and object; attributes, datasets, groups and
// files are in hdf5_attributes.cpp, hdf5_dataset.cpp, hdf5_group.cpp and hdf5_file.cpp.
#include "core/hdf5.hpp"
#include "core/hdf5_internal.hpp"

#include <mutex>
#include <stdexcept>
#include <string>

namespace icl::h5 {

namespace detail {

std::recursive_mutex& Hdf5Mutex() {
  static std::recursive_mutex m;
  return m;
}

namespace {

// The innermost description HDF5 left on its error stack ("truncated file: eof = ...",
// "No space left on device"), or "" when there is none.
std::string StackDetail() {
  const Lock lock;
  std::string detail;
  auto walk = [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
    auto* s = static_cast<std::string*>(out);
    if (e && e->desc && *e->desc) *s = e->desc;  // the last frame walked is the innermost cause
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail;
}

}  // namespace

[[noreturn]] void Fail(const std::string& what) {
  const std::string detail = StackDetail();
  throw std::runtime_error("hdf5: " + what + (detail.empty() ? "" : " [" + detail + "]"));
}

std::string DimsStr(const Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string ElementName(hid_t type) {
  const Lock lock;
  const std::string bits = std::to_string(8 * H5Tget_size(type));
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      return "float" + bits;
    case H5T_INTEGER:
      return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + bits;
    case H5T_STRING:
      return "string";
    default:
      return "other";
  }
}

namespace {

struct Silencer {
  Silencer() {
    // No library teardown at exit: after a failed write (disk full) HDF5's exit handler would
    // retry flushing the open file and can crash; every file iclprobe finishes is closed
    // explicitly, and an unfinished one is a ".partial" file anyway.
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    // No filter plugin is ever loaded: a file naming a foreign filter could otherwise make
    // HDF5 dlopen a library from HDF5_PLUGIN_PATH. iclprobe writes deflate and shuffle only,
    // which are built in.
    H5PLset_loading_state(0);
  }
};

}  // namespace

void EnsureSilenced() {
  const Lock lock;
  static Silencer s;
}

}  // namespace detail

using detail::EnsureSilenced;
using detail::Lock;

void SilenceErrorStack() {
  const Lock lock;
  EnsureSilenced();
}

template <>
hid_t NativeType<float>() {
  const Lock lock;
  return H5T_NATIVE_FLOAT;
}
template <>
hid_t NativeType<double>() {
  const Lock lock;
  return H5T_NATIVE_DOUBLE;
}
template <>
hid_t NativeType<std::int32_t>() {
  const Lock lock;
  return H5T_NATIVE_INT32;
}
template <>
hid_t NativeType<std::int64_t>() {
  const Lock lock;
  return H5T_NATIVE_INT64;
}
template <>
hid_t NativeType<std::uint8_t>() {
  const Lock lock;
  return H5T_NATIVE_UINT8;
}
template <>
hid_t NativeType<Half>() {
  const Lock lock;
  // Sign bit 15, exponent bits 10..14 (bias 15), mantissa bits 0..9: binary16, little-endian.
  static const hid_t type = [] {
    const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0 || H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
        H5Tset_ebias(t, 15) < 0)
      throw std::runtime_error("hdf5: cannot define the float16 type");
    return t;
  }();
  return type;
}
template <>
hid_t NativeType<std::uint64_t>() {
  const Lock lock;
  return H5T_NATIVE_UINT64;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  const Lock lock;
  if (this != &o) {
    Reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::Reset() {
  const Lock lock;
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = H5I_INVALID_HID;
}

}  // namespace icl::h5
