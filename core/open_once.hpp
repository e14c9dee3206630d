// One open per input per run: the scope in which HDF5 files opened for reading are held open
// and shared (core/hdf5_open_once.cpp), and the descriptor the hash reads them through.
#pragma once

#include <string>

namespace icl::h5 {

// One open per input per run. While an OpenOnce object lives (apps/ makes one per subcommand),
// a file opened for reading (one process, default durability) stays open until the object is
// destroyed, and every later File::Open of it for reading shares that open file (H5Freopen: no
// second open of the path), as does Sha256File, which hashes it from the same descriptor. A
// cached file is reopened when its size or modification time has changed, and dropped before the
// same file is opened for writing or created. Outside such a scope every Open opens the path.
class OpenOnce {
 public:
  OpenOnce();
  ~OpenOnce();
  OpenOnce(const OpenOnce&) = delete;
  OpenOnce& operator=(const OpenOnce&) = delete;
};

// The descriptor of `path` when it is held open by the current OpenOnce scope, else -1.
int OpenDescriptor(const std::string& path);

}  // namespace icl::h5
