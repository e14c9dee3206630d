// MPI for extract and probe across processes (see dist.hpp); one rank without it.
#include "core/dist.hpp"

#include <cstdlib>
#include <exception>
#include <string>

#ifdef ICLPROBE_WITH_MPI
#include <mpi.h>
#endif

namespace icl::dist {

namespace {

bool started = false;
bool failure_shared = false;
int first_failed = 0;
int rank = 0, size = 1, local_size = 1;

// The process count a launcher announces (Open MPI, then PMI/Slurm, MPICH's Hydra).
int LaunchedSize() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 1;
}

#ifdef ICLPROBE_WITH_MPI
void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}
#endif

// Agrees on whether any rank failed (collective); marks a failure as known to all.
bool AnyFailed(bool failed) {
  if (!started) return failed;
#ifdef ICLPROBE_WITH_MPI
  int mine = failed ? rank : size, first = size;
  Check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "agreement");
  if (first < size) {
    failure_shared = true;
    first_failed = first;
  }
  return first < size;
#else
  return failed;
#endif
}

}  // namespace

bool LaunchedInParallel() {
  return LaunchedSize() > 1;
}

bool LaunchedAsRoot() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v) == 0;
  return true;
}

void Init(int* argc, char*** argv) {
  if (!LaunchedInParallel() || started) return;
#ifdef ICLPROBE_WITH_MPI
  int provided = 0;
  Check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  started = true;
  if (provided < MPI_THREAD_SERIALIZED)
    throw std::runtime_error(
        "MPI: this MPI library does not allow calls from several threads "
        "(MPI_THREAD_SERIALIZED)");
  Check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  Check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  MPI_Comm local;
  Check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type");
  Check(MPI_Comm_size(local, &local_size), "MPI_Comm_size");
  MPI_Comm_free(&local);
#else
  (void)argc;
  (void)argv;
  throw std::runtime_error(
      "launched by mpirun with " + std::to_string(LaunchedSize()) +
      " processes, but this iclprobe was built without MPI (ICLPROBE_MPI=OFF); rebuild with "
      "-DICLPROBE_MPI=ON or run one process");
#endif
}

void Finalize() {
#ifdef ICLPROBE_WITH_MPI
  if (started) MPI_Finalize();
#endif
  started = false;
}

bool Started() {
  return started;
}
int Rank() {
  return rank;
}
int Size() {
  return size;
}
int RanksOnThisMachine() {
  return local_size;
}
bool FailureShared() {
  return failure_shared;
}
int FirstFailedRank() {
  return first_failed;
}

void Together(const std::function<void()>& f) {
  std::exception_ptr error;
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  if (AnyFailed(error != nullptr)) {
    if (error) std::rethrow_exception(error);
    throw PeerFailed();
  }
}

void OnRoot(const std::function<void()>& f) {
  Together([&] {
    if (IsRoot()) f();
  });
}

void Sum(double* values, std::size_t count) {
#ifdef ICLPROBE_WITH_MPI
  if (started && count > 0)
    Check(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_DOUBLE, MPI_SUM,
                        MPI_COMM_WORLD),
          "MPI_Allreduce");
#else
  (void)values;
  (void)count;
#endif
}

std::vector<std::uint8_t> Gather(const std::vector<std::uint8_t>& mine) {
  if (!started) return mine;
#ifdef ICLPROBE_WITH_MPI
  if (mine.size() > std::size_t(1) << 30)
    throw std::runtime_error("MPI: more than 1 GiB of results on one rank");
  const int n = static_cast<int>(mine.size());
  std::vector<int> counts(size), offsets(size);
  Check(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  std::int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (total > (std::int64_t(1) << 31) - 1)
    throw std::runtime_error("MPI: more than 2 GiB of results over all ranks");
  std::vector<std::uint8_t> all(total);
  Check(MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), offsets.data(),
                       MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  return all;
#else
  return mine;
#endif
}

Range Share(std::int64_t count) {
  return {count * rank / size, count * (rank + 1) / size};
}

}  // namespace icl::dist
