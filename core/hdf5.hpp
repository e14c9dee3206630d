// A small RAII layer over the HDF5 C API: files, groups, chunked extendible datasets and
// attributes (numbers, strings, JSON). Every failure throws std::runtime_error naming the
// file and the object, e.g. "hdf5: 'acts.h5': no dataset '/hidden/layer_09'".
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace icl::h5 {

using Dims = std::vector<hsize_t>;

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  ~Handle() { Reset(); }
  void Reset();
  // Gives up ownership without closing.
  hid_t Release() {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Element types a dataset or attribute can hold.
template <typename T>
hid_t NativeType();

// IEEE 754 binary16, stored and read as its 16 bits (HDF5 1.10 has no predefined half type;
// this one is what h5py reads as float16). Reading such a dataset as float converts exactly.
struct Half {
  std::uint16_t bits;
};

// Base of groups and datasets: an HDF5 object with attributes.
class Object {
 public:
  const std::string& file() const { return file_; }
  const std::string& name() const { return name_; }
  hid_t id() const { return h_.id(); }

  bool HasAttr(const std::string& attr) const;
  // Names of the attributes, in name order (at most 100,000: a file is not trusted).
  std::vector<std::string> AttrNames() const;
  // Whether the attribute is stored as a list (a rank-1 dataspace, even of one entry), as the
  // list setters write it; false for a scalar.
  bool IsListAttr(const std::string& attr) const;
  // The stored element of an attribute in numpy's words (see Dataset::Element) and its number
  // of dimensions: 0 for a scalar, -1 for an empty (null) attribute.
  std::string AttrElement(const std::string& attr) const;
  int AttrRank(const std::string& attr) const;
  void SetAttr(const std::string& attr, const std::string& value);  // UTF-8 string
  void SetAttr(const std::string& attr, const char* value) { SetAttr(attr, std::string(value)); }
  void SetAttr(const std::string& attr, std::int64_t value);
  void SetAttr(const std::string& attr, int value) {
    SetAttr(attr, static_cast<std::int64_t>(value));
  }
  void SetAttr(const std::string& attr, double value);
  // Lists as array attributes (h5py shows numpy arrays): integers and UTF-8 strings.
  void SetAttr(const std::string& attr, const std::vector<std::int64_t>& values);
  void SetAttr(const std::string& attr, const std::vector<std::string>& values);
  std::string GetString(const std::string& attr) const;
  // A list stored as an array attribute or, as older files did, as a JSON array in a string.
  std::vector<std::int64_t> GetIntList(const std::string& attr) const;
  std::vector<std::string> GetStringList(const std::string& attr) const;
  std::int64_t GetInt(const std::string& attr) const;
  double GetDouble(const std::string& attr) const;

  // Describes this object for error messages: "hdf5: 'f.h5' object '/a/b'".
  std::string Where() const;
  std::string Where(const std::string& attr) const;

 protected:
  Object() = default;
  Object(Handle h, std::string file, std::string name)
      : h_(std::move(h)), file_(std::move(file)), name_(std::move(name)) {}
  Handle h_;
  std::string file_;
  std::string name_;  // absolute path inside the file
};

struct DatasetOptions {
  Dims chunk;                         // empty: contiguous (fixed size only)
  bool extendible = false;            // first dimension unlimited (needs chunk)
  int deflate = 0;                    // 0 = off, 1..9 = gzip level
  bool shuffle = false;               // byte shuffle before deflate
  std::size_t chunk_cache_bytes = 0;  // 0 = HDF5 default (1 MiB)
  // Chunks get their space when the dataset grows, not at their first write, and are never
  // pre-filled: what parallel HDF5 needs to write unfiltered chunks of a dataset a single
  // process created (resuming one process's partial file with several ranks).
  bool allocate_on_resize = false;
  // What each axis means ("prompt", "k", "feature"), stored as HDF5 dimension labels (H5DS;
  // h5py shows them as dims[i].label): empty, or one per dimension.
  std::vector<std::string> labels;
};

// A chunk cache smaller than any chunk: HDF5 then reads an unfiltered chunk straight into the
// caller's buffer instead of through the cache (one copy fewer), the right choice for a dataset
// read once, in order; a filtered (compressed) chunk read in parts would be decompressed once per
// part.
inline constexpr std::size_t kNoChunkCache = 1;

class Dataset : public Object {
 public:
  Dataset(Handle h, std::string file, std::string name);
  Dims dims() const;
  hsize_t rows() const { return dims().at(0); }
  // Number of elements in one row (the product of all but the first dimension).
  hsize_t RowSize() const;
  // Whole dataset. Every read and write says how many elements its buffer holds, and the
  // count is checked against the selection before HDF5 touches memory.
  template <typename T>
  void Write(const T* data, std::size_t elements);
  template <typename T>
  void Read(T* data, std::size_t elements) const;
  template <typename T>
  std::vector<T> ReadAll() const;
  // Throws naming the dataset when `elements` values of `element_bytes` would not fit in this
  // machine's memory: a file's shape is its claim (a chunked dataset of 10^12 unwritten
  // elements takes no space on disk), and a read of all of it is refused before allocating.
  void RequireMemoryFor(double elements, std::size_t element_bytes) const;
  // Rows [start, start + count) along the first dimension. In a file opened by every rank
  // (File::kAllRanks) reads and writes are collective: every rank calls, each with its own
  // rows (count 0 for none).
  template <typename T>
  void WriteRows(hsize_t start, hsize_t count, const T* data, std::size_t elements);
  template <typename T>
  void ReadRows(hsize_t start, hsize_t count, T* data, std::size_t elements) const;
  // Grows (or shrinks) the first dimension of an extendible dataset (collective, with the same
  // rows on every rank, in a file opened by every rank).
  void Resize(hsize_t rows);
  // Appends rows at the end of an extendible dataset.
  template <typename T>
  void Append(hsize_t count, const T* data, std::size_t elements);
  // Throws naming this dataset unless its shape equals `expected`.
  void ExpectDims(const Dims& expected) const;
  // Throws naming this dataset unless it has `rank` dimensions.
  void ExpectRank(std::size_t rank) const;
  // The dimension labels (H5DS), one per dimension ("" where none is set).
  std::vector<std::string> DimLabels() const;
  // Sets one label per dimension.
  void SetDimLabels(const std::vector<std::string>& labels);
  // Chunks that get their space at their first write (HDF5's default; see
  // DatasetOptions::allocate_on_resize).
  bool AllocatesOnWrite() const;
  // Whether its chunks pass through filters (deflate, shuffle, ...).
  bool Filtered() const;
  // The stored element: floating point (true/false) and its size in bytes.
  bool IsFloat() const;
  std::size_t ElementSize() const;
  // The stored element in numpy's words: "float16", "float32", "float64", "int8".."int64",
  // "uint8".."uint64", "string", or "other" (compounds, enums, references, ...).
  std::string Element() const;

 private:
  void Io(hid_t type, hsize_t start, hsize_t count, void* data, std::size_t elements,
          bool write) const;
  // std::logic_error unless `elements` == count rows' worth.
  void CheckElements(hsize_t count, std::size_t elements, bool write) const;
  bool collective_ = false;  // in a file every rank opened: collective transfers
};

// What a name in a group stands for.
enum class ObjectType { kGroup, kDataset, kOther };

class Group : public Object {
 public:
  Group(Handle h, std::string file, std::string name)
      : Object(std::move(h), std::move(file), std::move(name)) {}
  bool Exists(const std::string& path) const;
  Group OpenGroup(const std::string& path) const;
  Group CreateGroup(const std::string& path);
  // chunk_cache_bytes: 0 = HDF5's default; kNoChunkCache for a dataset read once in order.
  Dataset OpenDataset(const std::string& path, std::size_t chunk_cache_bytes = 0) const;
  template <typename T>
  Dataset CreateDataset(const std::string& path, const Dims& dims,
                        const DatasetOptions& opts = {}) {
    return CreateDatasetTyped(path, NativeType<T>(), dims, opts);
  }
  // The same with the axes' labels (one per dimension).
  template <typename T>
  Dataset CreateDataset(const std::string& path, const Dims& dims,
                        const std::vector<std::string>& labels, DatasetOptions opts = {}) {
    opts.labels = labels;
    return CreateDatasetTyped(path, NativeType<T>(), dims, opts);
  }
  // Makes `link` a second name of the existing object `target` (no copy).
  void HardLink(const std::string& target, const std::string& link);
  // Names of the direct members, sorted.
  std::vector<std::string> Members() const;
  // Whether `path` (which must exist, as Exists() checks it) is a group, a dataset or another
  // object (a named datatype).
  ObjectType TypeOf(const std::string& path) const;

 private:
  Dataset CreateDatasetTyped(const std::string& path, hid_t type, const Dims& dims,
                             const DatasetOptions& opts);
  std::string Child(const std::string& path) const;
};

class File : public Group {
 public:
  enum class Mode { kRead, kReadWrite };
  // kFlushPoints: the file on disk changes only in Flush()/Sync() (no metadata evictions, no
  // reuse of freed space), so a process killed between flushes leaves the last flushed file.
  // For files written over a long time and resumed (extract's partial file).
  enum class Durability { kDefault, kFlushPoints };
  // kAllRanks: every rank of an MPI run opens the file together (parallel HDF5, MPI-IO);
  // creating and resizing datasets, writing attributes, Flush and Close are then collective,
  // with the same arguments on every rank. With one rank it is kOneProcess.
  enum class Sharing { kOneProcess, kAllRanks };
  // Opens an existing file.
  static File Open(const std::string& path, Mode mode = Mode::kRead,
                   Durability durability = Durability::kDefault,
                   Sharing sharing = Sharing::kOneProcess);
  // Creates a new file; fails if it exists unless `truncate`.
  static File Create(const std::string& path, bool truncate = false,
                     Durability durability = Durability::kDefault,
                     Sharing sharing = Sharing::kOneProcess);
  // A file held in this process's memory only (HDF5's core driver, nothing written to disk):
  // what a format's writer writes, its reader can read back with the same checks. `name`
  // labels it in messages; Sync() and Close() touch no disk. Gone when closed.
  static File CreateInMemory(const std::string& name);
  // Writes every cached byte to the file; throws on a failed write (disk full).
  void Flush();
  // Flush() and fsync: when it returns, what was written is on disk.
  void Sync();
  // Reserves disk space for `bytes` more beyond HDF5's end of allocation (posix_fallocate),
  // throwing std::runtime_error when the disk (or a file-size limit) cannot take them. Called
  // before a block of writes, it makes a full disk fail here, with the file still consistent,
  // instead of in the middle of HDF5's writes, which would leave metadata that points past the
  // end of the file. HDF5 trims the unused reserve when the file is closed. In a file of all
  // ranks, rank 0 reserves and every rank throws when it could not (collective).
  void Reserve(std::uint64_t bytes);
  // Closes now, with every error reported: a written file is synced first, and closing one
  // that still has open groups, datasets or attributes is a programming error (std::logic_error).
  // The destructor closes too, but cannot report failures.
  void Close();

 private:
  File(Handle h, std::string path) : Group(std::move(h), std::move(path), "/") {}
  bool writable_ = false;
  bool shared_ = false;  // opened by every rank
  bool in_memory_ = false;
};

// Silences HDF5's own error printing; iclprobe reports errors through exceptions.
void SilenceErrorStack();

template <>
hid_t NativeType<float>();
template <>
hid_t NativeType<double>();
template <>
hid_t NativeType<std::int32_t>();
template <>
hid_t NativeType<std::int64_t>();
template <>
hid_t NativeType<std::uint8_t>();
template <>
hid_t NativeType<std::uint64_t>();
template <>
hid_t NativeType<Half>();

template <typename T>
void Dataset::Write(const T* data, std::size_t elements) {
  Io(NativeType<T>(), 0, rows(), const_cast<T*>(data), elements, true);
}
template <typename T>
void Dataset::Read(T* data, std::size_t elements) const {
  Io(NativeType<T>(), 0, rows(), data, elements, false);
}
template <typename T>
std::vector<T> Dataset::ReadAll() const {
  RequireMemoryFor(double(rows()) * double(RowSize()), sizeof(T));
  std::vector<T> v(rows() * RowSize());
  Read(v.data(), v.size());
  return v;
}
template <typename T>
void Dataset::WriteRows(hsize_t start, hsize_t count, const T* data, std::size_t elements) {
  Io(NativeType<T>(), start, count, const_cast<T*>(data), elements, true);
}
template <typename T>
void Dataset::ReadRows(hsize_t start, hsize_t count, T* data, std::size_t elements) const {
  Io(NativeType<T>(), start, count, data, elements, false);
}
template <typename T>
void Dataset::Append(hsize_t count, const T* data, std::size_t elements) {
  CheckElements(count, elements, /*write=*/true);  // before the dataset grows
  const hsize_t start = rows();
  Resize(start + count);
  WriteRows(start, count, data, elements);
}

}  // namespace icl::h5
