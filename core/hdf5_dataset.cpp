// Datasets (core/hdf5.hpp's Dataset): shapes, dimension labels, and reads and writes of whole rows
// whose element counts are checked against the selection before HDF5 touches memory.
#include "core/hdf5.hpp"
#include "core/hdf5_internal.hpp"

#include <H5DSpublic.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef ICLPROBE_WITH_MPI
#include <mpi.h>
#endif

namespace icl::h5 {

using detail::DimsStr;
using detail::Fail;
using detail::Lock;

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

std::string Dataset::Element() const {
  const Lock lock;
  Handle t(H5Dget_type(id()), H5Tclose);
  if (!t.valid()) Fail(Where() + ": cannot read its element type");
  return detail::ElementName(t.id());
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
    std::snprintf(text, sizeof text,
                  ": its shape claims %.3g values (%.3g GiB), more than this "
                  "machine's memory (%.3g GiB) can hold",
                  elements, bytes / double(1 << 30), have / double(1 << 30));
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

}  // namespace icl::h5
