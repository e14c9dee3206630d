// Groups (core/hdf5.hpp's Group): paths that follow no link out of the file, and datasets opened
// only when every byte is stored in the file itself.
#include "core/hdf5.hpp"
#include "core/hdf5_internal.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace icl::h5 {

using detail::DimsStr;
using detail::Fail;
using detail::Lock;

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

ObjectType Group::TypeOf(const std::string& path) const {
  const Lock lock;
  const std::string full = Child(path);
  if (!Exists(full)) Fail("'" + file_ + "': no object '" + full + "'");
  Handle h(H5Oopen(id(), full.c_str(), H5P_DEFAULT), H5Oclose);
  if (!h.valid()) Fail("'" + file_ + "': cannot open '" + full + "'");
  switch (H5Iget_type(h.id())) {
    case H5I_GROUP:
      return ObjectType::kGroup;
    case H5I_DATASET:
      return ObjectType::kDataset;
    default:
      return ObjectType::kOther;
  }
}

}  // namespace icl::h5
