// The attributes of HDF5 objects (core/hdf5.hpp's Object): numbers, strings and lists, each read
// checked against the type and shape it claims.
#include "core/hdf5.hpp"
#include "core/hdf5_internal.hpp"

#include "core/json.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace icl::h5 {

using detail::Fail;
using detail::Lock;

namespace {

// The longest fixed-length string attribute read (a file is not trusted: the size is its claim).
constexpr std::size_t kMaxFixedString = std::size_t(1) << 24;

}  // namespace

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

std::string Object::AttrElement(const std::string& attr) const {
  const Lock lock;
  Handle a = OpenAttr(*this, attr);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  if (!type.valid()) Fail(Where(attr) + ": cannot read its type");
  return detail::ElementName(type.id());
}

int Object::AttrRank(const std::string& attr) const {
  const Lock lock;
  Handle a = OpenAttr(*this, attr);
  Handle space(H5Aget_space(a.id()), H5Sclose);
  const H5S_class_t cls = H5Sget_simple_extent_type(space.id());
  if (cls == H5S_SCALAR) return 0;
  if (cls != H5S_SIMPLE) return -1;
  return H5Sget_simple_extent_ndims(space.id());
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

}  // namespace icl::h5
