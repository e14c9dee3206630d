// RAII wrappers over the HDF5 C API; every error becomes an exception naming file and object.
#include "core/hdf5.hpp"

#include "core/dist.hpp"
#include "core/errors.hpp"
#include "core/json.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <H5DSpublic.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <type_traits>

#ifdef ICLPROBE_WITH_MPI
#include <mpi.h>
#endif

namespace icl::h5 {

namespace {

// The parallel HDF5 library (the MPI build) is not thread-safe, unlike Debian's serial build,
// and iclprobe calls HDF5 from several threads (extract's writer, probe's input records beside
// the probes): every call into HDF5 holds this one lock, as HDF5's thread-safe build does inside.
std::recursive_mutex& Hdf5Mutex() {
  static std::recursive_mutex m;
  return m;
}
struct Lock {
  std::lock_guard<std::recursive_mutex> guard{Hdf5Mutex()};
};

// The longest fixed-length string attribute read (a file is not trusted: the size is its claim).
constexpr std::size_t kMaxFixedString = std::size_t(1) << 24;

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

void EnsureSilenced() {
  const Lock lock;
  static Silencer s;
}

}  // namespace

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

// ---- Object / attributes ------------------------------------------------------------------

std::string Object::Where() const {
  return "'" + file_ + "' object '" + name_ + "'";
}
std::string Object::Where(const std::string& attr) const {
  return "'" + file_ + "' attribute '" + attr + "' of '" + name_ + "'";
}

bool Object::HasAttr(const std::string& attr) const {
  const Lock lock;
  const htri_t r = H5Aexists(id(), attr.c_str());
  if (r < 0) Fail(Where(attr) + ": cannot query");
  return r > 0;
}

std::vector<std::string> Object::AttrNames() const {
  const Lock lock;
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5A_info_t*, void* op) -> herr_t {
    auto* out = static_cast<std::vector<std::string>*>(op);
    if (out->size() >= 100000) return 1;  // stop
    out->emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, cb, &names) < 0)
    Fail(Where() + ": cannot list its attributes");
  return names;
}

namespace {

// Replaces an attribute: HDF5 cannot overwrite one of a different type in place.
Handle NewAttr(const Object& obj, const std::string& attr, hid_t type, hid_t space) {
  const Lock lock;
  if (obj.HasAttr(attr) && H5Adelete(obj.id(), attr.c_str()) < 0)
    Fail(obj.Where(attr) + ": cannot replace");
  Handle a(H5Acreate2(obj.id(), attr.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a.valid()) Fail(obj.Where(attr) + ": cannot create (is the file open for writing?)");
  return a;
}

Handle OpenAttr(const Object& obj, const std::string& attr) {
  const Lock lock;
  if (!obj.HasAttr(attr)) Fail(obj.Where(attr) + ": missing");
  Handle a(H5Aopen(obj.id(), attr.c_str(), H5P_DEFAULT), H5Aclose);
  if (!a.valid()) Fail(obj.Where(attr) + ": cannot open");
  return a;
}

template <typename T>
void SetScalar(Object& obj, const std::string& attr, T value) {
  const Lock lock;
  if (obj.HasAttr(attr)) {
    // Rewrite in place when the stored type is the same (n_complete is updated every batch).
    Handle a(H5Aopen(obj.id(), attr.c_str(), H5P_DEFAULT), H5Aclose);
    Handle type(H5Aget_type(a.id()), H5Tclose);
    Handle space(H5Aget_space(a.id()), H5Sclose);
    if (H5Tequal(type.id(), NativeType<T>()) > 0 &&
        H5Sget_simple_extent_type(space.id()) == H5S_SCALAR) {
      if (H5Awrite(a.id(), NativeType<T>(), &value) < 0) Fail(obj.Where(attr) + ": cannot write");
      return;
    }
  }
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a = NewAttr(obj, attr, NativeType<T>(), space.id());
  if (H5Awrite(a.id(), NativeType<T>(), &value) < 0) Fail(obj.Where(attr) + ": cannot write");
}

// Throws unless the attribute holds exactly one value: a scalar dataspace, or a list of one
// entry (as h5py writes `attrs[name] = [v]`). An H5Aread of a list into one value would write
// past it, so every single-value read checks this first.
void RequireScalarSpace(const Object& obj, hid_t attr_id, const std::string& attr,
                        const char* kind) {
  Handle space(H5Aget_space(attr_id), H5Sclose);
  const H5S_class_t cls = H5Sget_simple_extent_type(space.id());
  if (cls == H5S_SCALAR) return;
  if (cls == H5S_SIMPLE) {
    const hssize_t n = H5Sget_simple_extent_npoints(space.id());
    if (n == 1) return;
    Fail(obj.Where(attr) + ": expected " + kind + ", got a list of " + std::to_string(n) +
         " entries");
  }
  Fail(obj.Where(attr) + ": expected " + kind + ", got an empty (null) attribute");
}

template <typename T>
T GetScalar(const Object& obj, const std::string& attr, const char* kind) {
  const Lock lock;
  Handle a = OpenAttr(obj, attr);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id());
  // An integer is never read from a float attribute: 4.7 must not become 4.
  const bool ok =
      std::is_integral_v<T> ? cls == H5T_INTEGER : (cls == H5T_INTEGER || cls == H5T_FLOAT);
  if (!ok) Fail(obj.Where(attr) + ": expected " + kind);
  // The shape first: reading an array attribute into one value would write past it.
  RequireScalarSpace(obj, a.id(), attr, kind);
  if constexpr (std::is_integral_v<T>) {
    // Unsigned 64-bit values above INT64_MAX would wrap.
    if (H5Tget_sign(type.id()) == H5T_SGN_NONE && H5Tget_size(type.id()) >= sizeof(T)) {
      std::uint64_t u = 0;
      if (H5Aread(a.id(), H5T_NATIVE_UINT64, &u) < 0) Fail(obj.Where(attr) + ": cannot read");
      if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        Fail(obj.Where(attr) + ": value " + std::to_string(u) + " is out of range");
    }
  }
  T v{};
  if (H5Aread(a.id(), NativeType<T>(), &v) < 0) Fail(obj.Where(attr) + ": cannot read " + kind);
  return v;
}

}  // namespace

void Object::SetAttr(const std::string& attr, const std::string& value) {
  const Lock lock;
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id(), H5T_VARIABLE);
  H5Tset_cset(type.id(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a = NewAttr(*this, attr, type.id(), space.id());
  const char* p = value.c_str();
  if (H5Awrite(a.id(), type.id(), &p) < 0) Fail(Where(attr) + ": cannot write");
}

void Object::SetAttr(const std::string& attr, std::int64_t value) {
  const Lock lock;
  SetScalar(*this, attr, value);
}
void Object::SetAttr(const std::string& attr, double value) {
  const Lock lock;
  SetScalar(*this, attr, value);
}
std::int64_t Object::GetInt(const std::string& attr) const {
  const Lock lock;
  return GetScalar<std::int64_t>(*this, attr, "an integer");
}
double Object::GetDouble(const std::string& attr) const {
  const Lock lock;
  return GetScalar<double>(*this, attr, "a number");
}

void Object::SetAttr(const std::string& attr, const std::vector<std::int64_t>& values) {
  const Lock lock;
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a = NewAttr(*this, attr, H5T_NATIVE_INT64, space.id());
  if (n > 0 && H5Awrite(a.id(), H5T_NATIVE_INT64, values.data()) < 0)
    Fail(Where(attr) + ": cannot write");
}

void Object::SetAttr(const std::string& attr, const std::vector<std::string>& values) {
  const Lock lock;
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id(), H5T_VARIABLE);
  H5Tset_cset(type.id(), H5T_CSET_UTF8);
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a = NewAttr(*this, attr, type.id(), space.id());
  std::vector<const char*> p;
  for (const auto& v : values)
    p.push_back(v.c_str());
  if (n > 0 && H5Awrite(a.id(), type.id(), p.data()) < 0) Fail(Where(attr) + ": cannot write");
}

namespace {

// Elements of a rank-1 attribute (at most `limit`), or throws naming it.
hsize_t ListLength(const Object& obj, hid_t attr_id, const std::string& attr) {
  const Lock lock;
  Handle space(H5Aget_space(attr_id), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank != 1)
    Fail(obj.Where(attr) + ": expected a list (rank 1), got rank " + std::to_string(rank));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.id(), &n, nullptr);
  if (n > (1u << 20)) Fail(obj.Where(attr) + ": " + std::to_string(n) + " entries is too many");
  return n;
}

}  // namespace

std::vector<std::int64_t> Object::GetIntList(const std::string& attr) const {
  const Lock lock;
  Handle a = OpenAttr(*this, attr);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id());
  if (cls == H5T_STRING) {
    // A JSON array of integers, as files written before lists were array attributes.
    const auto v = core::json::IntList(GetString(attr), Where(attr), INT32_MIN, INT32_MAX);
    return std::vector<std::int64_t>(v.begin(), v.end());
  }
  if (cls != H5T_INTEGER) Fail(Where(attr) + ": expected a list of integers");
  std::vector<std::int64_t> out(ListLength(*this, a.id(), attr));
  if (!out.empty() && H5Aread(a.id(), H5T_NATIVE_INT64, out.data()) < 0)
    Fail(Where(attr) + ": cannot read");
  return out;
}

std::vector<std::string> Object::GetStringList(const std::string& attr) const {
  const Lock lock;
  Handle a = OpenAttr(*this, attr);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  if (H5Tget_class(type.id()) != H5T_STRING) Fail(Where(attr) + ": expected a list of strings");
  Handle space(H5Aget_space(a.id()), H5Sclose);
  if (H5Sget_simple_extent_type(space.id()) == H5S_SCALAR) {
    // A JSON array of strings in one string, as files written before array attributes.
    return core::json::StringList(GetString(attr), Where(attr));
  }
  const hsize_t n = ListLength(*this, a.id(), attr);
  if (H5Tis_variable_str(type.id()) <= 0) {
    // Fixed-length strings (numpy's 'S' arrays): n entries of `size` bytes, each cut at its NUL.
    const std::size_t size = H5Tget_size(type.id());
    if (size == 0 || size > kMaxFixedString || n * size > kMaxFixedString)
      Fail(Where(attr) + ": " + std::to_string(n) + " fixed-length strings of " +
           std::to_string(size) + " bytes");
    std::string buf(n * size, '\0');
    if (n > 0 && H5Aread(a.id(), type.id(), buf.data()) < 0) Fail(Where(attr) + ": cannot read");
    std::vector<std::string> out;
    for (hsize_t i = 0; i < n; ++i) {
      std::string e = buf.substr(i * size, size);
      e.erase(std::find(e.begin(), e.end(), '\0'), e.end());
      out.push_back(std::move(e));
    }
    return out;
  }
  Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.id(), H5T_VARIABLE);
  H5Tset_cset(mem.id(), H5Tget_cset(type.id()));
  std::vector<char*> p(n, nullptr);
  if (n > 0 && H5Aread(a.id(), mem.id(), p.data()) < 0) Fail(Where(attr) + ": cannot read");
  std::vector<std::string> out;
  for (char* c : p)
    out.emplace_back(c ? c : "");
  if (n > 0) H5Dvlen_reclaim(mem.id(), space.id(), H5P_DEFAULT, p.data());
  return out;
}

bool Object::IsListAttr(const std::string& attr) const {
  const Lock lock;
  Handle a = OpenAttr(*this, attr);
  Handle space(H5Aget_space(a.id()), H5Sclose);
  return H5Sget_simple_extent_type(space.id()) == H5S_SIMPLE &&
         H5Sget_simple_extent_ndims(space.id()) == 1;
}

std::string Object::GetString(const std::string& attr) const {
  const Lock lock;
  Handle a = OpenAttr(*this, attr);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  if (H5Tget_class(type.id()) != H5T_STRING) Fail(Where(attr) + ": expected a string");
  RequireScalarSpace(*this, a.id(), attr, "a string");
  if (H5Tis_variable_str(type.id()) > 0) {
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.id(), H5T_VARIABLE);
    H5Tset_cset(mem.id(), H5Tget_cset(type.id()));
    char* p = nullptr;
    if (H5Aread(a.id(), mem.id(), &p) < 0) Fail(Where(attr) + ": cannot read");
    std::string s = p ? p : "";
    Handle space(H5Aget_space(a.id()), H5Sclose);
    H5Dvlen_reclaim(mem.id(), space.id(), H5P_DEFAULT, &p);
    return s;
  }
  // Fixed-length strings (as written by some other tools).
  const std::size_t size = H5Tget_size(type.id());
  if (size == 0 || size > kMaxFixedString)
    Fail(Where(attr) + ": a fixed-length string of " + std::to_string(size) + " bytes");
  std::string s(size, '\0');
  if (H5Aread(a.id(), type.id(), s.data()) < 0) Fail(Where(attr) + ": cannot read");
  s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
  return s;
}

// ---- Dataset ------------------------------------------------------------------------------

Dims Dataset::dims() const {
  const Lock lock;
  Handle space(H5Dget_space(id()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) Fail(Where() + ": cannot read shape");
  Dims d(rank);
  H5Sget_simple_extent_dims(space.id(), d.data(), nullptr);
  return d;
}

Dataset::Dataset(Handle h, std::string file, std::string name)
    : Object(std::move(h), std::move(file), std::move(name)) {
  const Lock lock;
#ifdef ICLPROBE_WITH_MPI
  Handle f(H5Iget_file_id(id()), H5Fclose);
  Handle fapl(f.valid() ? H5Fget_access_plist(f.id()) : H5I_INVALID_HID, H5Pclose);
  collective_ = fapl.valid() && H5Pget_driver(fapl.id()) == H5FD_MPIO;
#endif
}

hsize_t Dataset::RowSize() const {
  const Lock lock;
  const Dims d = dims();
  return std::accumulate(d.begin() + (d.empty() ? 0 : 1), d.end(), hsize_t{1}, std::multiplies<>());
}

bool Dataset::AllocatesOnWrite() const {
  const Lock lock;
  Handle dcpl(H5Dget_create_plist(id()), H5Pclose);
  H5D_alloc_time_t t = H5D_ALLOC_TIME_DEFAULT;
  if (!dcpl.valid() || H5Pget_alloc_time(dcpl.id(), &t) < 0)
    Fail(Where() + ": cannot read its allocation time");
  return t == H5D_ALLOC_TIME_INCR || t == H5D_ALLOC_TIME_LATE;
}

bool Dataset::Filtered() const {
  const Lock lock;
  Handle dcpl(H5Dget_create_plist(id()), H5Pclose);
  if (!dcpl.valid()) Fail("'" + file() + "': cannot read the storage of '" + name() + "'");
  return H5Pget_nfilters(dcpl.id()) > 0;
}

bool Dataset::IsFloat() const {
  const Lock lock;
  Handle t(H5Dget_type(id()), H5Tclose);
  return H5Tget_class(t.id()) == H5T_FLOAT;
}

std::size_t Dataset::ElementSize() const {
  const Lock lock;
  Handle t(H5Dget_type(id()), H5Tclose);
  return H5Tget_size(t.id());
}

void Dataset::ExpectDims(const Dims& expected) const {
  const Lock lock;
  const Dims d = dims();
  if (d != expected)
    Fail(Where() + ": has shape " + DimsStr(d) + ", expected " + DimsStr(expected));
}

void Dataset::ExpectRank(std::size_t rank) const {
  const Dims d = dims();
  if (d.size() != rank)
    Fail(Where() + ": has " + std::to_string(d.size()) + " dimensions " + DimsStr(d) +
         ", expected " + std::to_string(rank));
}

void Dataset::RequireMemoryFor(double elements, std::size_t element_bytes) const {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: the allocator decides
  const double bytes = elements * double(element_bytes), have = double(pages) * double(page);
  if (!(bytes <= 0.8 * have)) {
    char text[160];
    std::snprintf(text, sizeof text, ": its shape claims %.3g values (%.3g GiB), more than this "
                  "machine's memory (%.3g GiB) can hold", elements, bytes / double(1 << 30),
                  have / double(1 << 30));
    Fail(Where() + text);
  }
}

std::vector<std::string> Dataset::DimLabels() const {
  const Lock lock;
  const Dims d = dims();
  std::vector<std::string> labels;
  for (unsigned i = 0; i < d.size(); ++i) {
    const ssize_t n = H5DSget_label(id(), i, nullptr, 0);
    if (n <= 0 || n > 4096) {
      labels.emplace_back();
      continue;
    }
    std::string label(std::size_t(n) + 1, '\0');
    H5DSget_label(id(), i, label.data(), label.size());
    label.resize(std::size_t(n));
    labels.push_back(label);
  }
  return labels;
}

void Dataset::SetDimLabels(const std::vector<std::string>& labels) {
  const Lock lock;
  const Dims d = dims();
  if (labels.size() != d.size())
    throw std::logic_error(Where() + ": " + std::to_string(labels.size()) + " labels for " +
                           std::to_string(d.size()) + " dimensions");
  for (unsigned i = 0; i < labels.size(); ++i)
    if (H5DSset_label(id(), i, labels[i].c_str()) < 0)
      Fail(Where() + ": cannot label dimension " + std::to_string(i));
}

void Dataset::Resize(hsize_t rows) {
  const Lock lock;
  Dims d = dims();
  if (d.empty()) Fail(Where() + ": cannot resize a scalar");
  d[0] = rows;
  if (H5Dset_extent(id(), d.data()) < 0) Fail(Where() + ": cannot resize (is it extendible?)");
}

void Dataset::CheckElements(hsize_t count, std::size_t elements, bool write) const {
  const Lock lock;
  const hsize_t selected = count * RowSize();
  if (selected != elements)
    throw std::logic_error("hdf5: " + Where() + ": " + (write ? "writing " : "reading ") +
                           std::to_string(selected) + " elements (" + std::to_string(count) +
                           " rows of shape " + DimsStr(dims()) + ") with a buffer of " +
                           std::to_string(elements));
}

void Dataset::Io(hid_t type, hsize_t start, hsize_t count, void* data, std::size_t elements,
                 bool write) const {
  const Lock lock;
  Dims d = dims();
  if (d.empty()) Fail(Where() + ": scalar datasets are not supported");
  if (start + count > d[0])
    Fail(Where() + ": rows [" + std::to_string(start) + ", " + std::to_string(start + count) +
         ") are outside its " + std::to_string(d[0]) + " rows");
  CheckElements(count, elements, write);
  if (count == 0 && !collective_) return;
  Handle file_space(H5Dget_space(id()), H5Sclose);
  Dims offset(d.size(), 0), block = d;
  offset[0] = start;
  block[0] = count;
  // A rank with no rows still joins a collective transfer, with empty selections.
  const hsize_t one = 1;
  Handle mem_space(count > 0
                       ? H5Screate_simple(static_cast<int>(block.size()), block.data(), nullptr)
                       : H5Screate_simple(1, &one, nullptr),
                   H5Sclose);
  if (count > 0) {
    if (H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, offset.data(), nullptr, block.data(),
                            nullptr) < 0)
      Fail(Where() + ": cannot select rows");
  } else if (H5Sselect_none(file_space.id()) < 0 || H5Sselect_none(mem_space.id()) < 0) {
    Fail(Where() + ": cannot select rows");
  }
  // Collective transfers in a file of all ranks; HDF5's defaults otherwise.
  Handle xfer;
#ifdef ICLPROBE_WITH_MPI
  if (collective_) {
    xfer = Handle(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
    if (H5Pset_dxpl_mpio(xfer.id(), H5FD_MPIO_COLLECTIVE) < 0)
      Fail(Where() + ": cannot ask for collective transfers");
  }
#endif
  const hid_t xfer_id = xfer.valid() ? xfer.id() : H5P_DEFAULT;
  unsigned char none[16];  // HDF5 wants a buffer even for an empty selection
  if (count == 0) data = none;
  const herr_t r = write ? H5Dwrite(id(), type, mem_space.id(), file_space.id(), xfer_id, data)
                         : H5Dread(id(), type, mem_space.id(), file_space.id(), xfer_id, data);
  if (r < 0)
    Fail(Where() + (write ? ": write failed (disk full or file read-only?)" : ": read failed"));
}

namespace {

// Refuses a dataset whose bytes are not all in its own file, or that needs a filter iclprobe
// does not write: external storage (raw data in any other file, a device or a FIFO), a virtual
// dataset (a view of other files' datasets), and any filter but deflate and shuffle (a plugin,
// or a built-in one such as szip or scale-offset that iclprobe never writes). Such bytes are
// outside the checkpoint's SHA-256, and reading them could block or leak another file.
void CheckStorage(hid_t dataset, const std::string& file, const std::string& name) {
  const Lock lock;
  Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid()) Fail("'" + file + "': cannot read the storage of '" + name + "'");
  const std::string where = "hdf5: '" + file + "': dataset '" + name + "'";
  const H5D_layout_t layout = H5Pget_layout(dcpl.id());
  if (layout == H5D_VIRTUAL)
    throw std::runtime_error(where +
                             " is a virtual dataset (a view of other files); iclprobe reads only "
                             "datasets stored in the file itself");
  if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED && layout != H5D_COMPACT)
    throw std::runtime_error(where + " has a storage layout iclprobe does not read");
  const int external = H5Pget_external_count(dcpl.id());
  if (external != 0)
    throw std::runtime_error(where +
                             " keeps its data in another file (HDF5 external storage); iclprobe "
                             "reads only datasets stored in the file itself");
  const int filters = H5Pget_nfilters(dcpl.id());
  if (filters < 0) Fail("'" + file + "': cannot read the filters of '" + name + "'");
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t n_values = 0;
    char filter_name[64] = {0};
    unsigned config = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.id(), static_cast<unsigned>(i), &flags, &n_values,
                                           nullptr, sizeof filter_name, filter_name, &config);
    if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE)
      throw std::runtime_error(where + " needs HDF5 filter " + std::to_string(id) +
                               "; iclprobe reads only deflate and shuffle, the filters it writes");
  }
}

}  // namespace

// ---- Group --------------------------------------------------------------------------------

std::string Group::Child(const std::string& path) const {
  if (!path.empty() && path[0] == '/') return path;
  return name_ == "/" ? "/" + path : name_ + "/" + path;
}

bool Group::Exists(const std::string& path) const {
  const Lock lock;
  // Check each component so that a missing parent is "false", not an error, and so that no
  // link is followed out of the file: iclprobe writes only hard links, and a soft, external or
  // user-defined link could name another file (a device, a FIFO, a secret) or a path that does.
  std::string cur;
  std::size_t pos = 0;
  const std::string full = Child(path);
  while (pos != std::string::npos) {
    const std::size_t next = full.find('/', pos + 1);
    cur = full.substr(0, next);
    if (cur != "/" && !cur.empty()) {
      const htri_t r = H5Lexists(id(), cur.c_str(), H5P_DEFAULT);
      if (r <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
      H5L_info_t info;
      if (H5Lget_info(id(), cur.c_str(), &info, H5P_DEFAULT) < 0)
        Fail("'" + file_ + "': cannot read the link '" + cur + "'");
      if (info.type != H5L_TYPE_HARD)
        throw std::runtime_error("hdf5: '" + file_ + "': '" + cur + "' is a " +
                                 (info.type == H5L_TYPE_SOFT       ? "soft link"
                                  : info.type == H5L_TYPE_EXTERNAL ? "link to another file"
                                                                   : "user-defined link") +
                                 "; iclprobe reads only objects stored in the file itself");
    }
    pos = next;
  }
  return true;
}

Group Group::OpenGroup(const std::string& path) const {
  const Lock lock;
  const std::string full = Child(path);
  if (!Exists(full)) Fail("'" + file_ + "': no group '" + full + "'");
  Handle h(H5Gopen2(id(), full.c_str(), H5P_DEFAULT), H5Gclose);
  if (!h.valid()) Fail("'" + file_ + "': '" + full + "' is not a group");
  return Group(std::move(h), file_, full);
}

Group Group::CreateGroup(const std::string& path) {
  const Lock lock;
  const std::string full = Child(path);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.id(), 1);
  Handle h(H5Gcreate2(id(), full.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!h.valid()) Fail("'" + file_ + "': cannot create group '" + full + "'");
  return Group(std::move(h), file_, full);
}

Dataset Group::OpenDataset(const std::string& path, std::size_t chunk_cache_bytes) const {
  const Lock lock;
  const std::string full = Child(path);
  if (!Exists(full)) Fail("'" + file_ + "': no dataset '" + full + "'");
  Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  if (chunk_cache_bytes > 0)
    H5Pset_chunk_cache(dapl.id(), 12421, chunk_cache_bytes, H5D_CHUNK_CACHE_W0_DEFAULT);
  Handle h(H5Dopen2(id(), full.c_str(), dapl.id()), H5Dclose);
  if (!h.valid()) Fail("'" + file_ + "': '" + full + "' is not a dataset");
  CheckStorage(h.id(), file_, full);
  return Dataset(std::move(h), file_, full);
}

Dataset Group::CreateDatasetTyped(const std::string& path, hid_t type, const Dims& dims,
                                  const DatasetOptions& opts) {
  const Lock lock;
  const std::string full = Child(path);
  if (dims.empty()) Fail("'" + file_ + "': dataset '" + full + "' needs at least one dimension");
  Dims maxdims = dims;
  if (opts.extendible) maxdims[0] = H5S_UNLIMITED;
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()),
               H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!opts.chunk.empty()) {
    if (opts.chunk.size() != dims.size())
      Fail("'" + file_ + "': chunk rank of '" + full + "' differs from its rank");
    H5Pset_chunk(dcpl.id(), static_cast<int>(opts.chunk.size()), opts.chunk.data());
    if (opts.shuffle) H5Pset_shuffle(dcpl.id());
    if (opts.deflate > 0) H5Pset_deflate(dcpl.id(), opts.deflate);
    if (opts.allocate_on_resize && (H5Pset_alloc_time(dcpl.id(), H5D_ALLOC_TIME_EARLY) < 0 ||
                                    H5Pset_fill_time(dcpl.id(), H5D_FILL_TIME_NEVER) < 0))
      Fail("'" + file_ + "': cannot set the allocation of '" + full + "'");
  } else if (opts.extendible || opts.deflate > 0) {
    Fail("'" + file_ + "': dataset '" + full +
         "' is extendible or compressed and needs a chunk shape");
  }
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.id(), 1);
  Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  if (opts.chunk_cache_bytes > 0)
    H5Pset_chunk_cache(dapl.id(), 12421, opts.chunk_cache_bytes, H5D_CHUNK_CACHE_W0_DEFAULT);
  Handle h(H5Dcreate2(id(), full.c_str(), type, space.id(), lcpl.id(), dcpl.id(), dapl.id()),
           H5Dclose);
  if (!h.valid())
    Fail("'" + file_ + "': cannot create dataset '" + full + "' of shape " + DimsStr(dims));
  Dataset out(std::move(h), file_, full);
  if (!opts.labels.empty()) out.SetDimLabels(opts.labels);
  return out;
}

void Group::HardLink(const std::string& target, const std::string& link) {
  const Lock lock;
  const std::string t = Child(target), l = Child(link);
  if (H5Lcreate_hard(id(), t.c_str(), id(), l.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
    Fail("'" + file_ + "': cannot link '" + l + "' to '" + t + "'");
}

std::vector<std::string> Group::Members() const {
  const Lock lock;
  std::vector<std::string> names;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
    static_cast<std::vector<std::string>*>(op)->emplace_back(name);
    return 0;
  };
  if (H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names) < 0)
    Fail(Where() + ": cannot list members");
  std::sort(names.begin(), names.end());
  return names;
}

// ---- File ---------------------------------------------------------------------------------

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
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw core::InputError("hdf5", "",
                           "'" + path + "': not an HDF5 file (or its header is damaged)");
  }
  Handle fapl = durability == Durability::kFlushPoints
                    ? FlushOnlyAccess()
                    : Handle(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (UseMpiIo(sharing)) SetMpiIo(fapl.id(), path);
  Handle h(H5Fopen(path.c_str(), mode == Mode::kRead ? H5F_ACC_RDONLY : H5F_ACC_RDWR, fapl.id()),
           H5Fclose);
  if (!h.valid())
    Fail("'" + path + "': cannot open" + (mode == Mode::kRead ? "" : " for writing") +
         " (truncated or damaged, or locked by another process)");
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
