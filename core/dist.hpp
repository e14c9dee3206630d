// The processes of one run: a single process, or the P ranks of `mpirun -np P iclprobe ...`
// (extract and probe). Without mpirun (or in a build with ICLPROBE_MPI=OFF) there is one rank and
// every call below is a no-op, so the single-process program runs exactly as it would without
// this file.
//
// Errors: a collective call that some ranks never reach would hang the others, so work that may
// fail on some ranks only runs inside Together or OnRoot, which agree on failure before anyone
// goes on: where it failed the error is rethrown, elsewhere PeerFailed (which the program exits
// on without printing).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace icl::dist {

// Launched by mpirun (or a Slurm/PMI launcher) with more than one process.
bool LaunchedInParallel();
// Rank 0 of the launch, as the launcher's environment says (true without a launcher): who
// speaks for a run that stops before MPI is started.
bool LaunchedAsRoot();
// Starts MPI when launched in parallel (threads: serialized calls, from any one thread at a
// time). Throws std::runtime_error when launched in parallel by a build without MPI.
void Init(int* argc, char*** argv);
// Ends MPI cleanly (every rank must call it); a no-op when MPI was not started.
void Finalize();
bool Started();

int Rank();                // 0 .. Size() - 1
int Size();                // 1 without mpirun
int RanksOnThisMachine();  // of Size(), those sharing this machine's cores (1 without mpirun)
inline bool IsRoot() {
  return Rank() == 0;
}

// Thrown on the ranks where shared work did not fail, when it failed on another rank.
class PeerFailed : public std::runtime_error {
 public:
  PeerFailed() : std::runtime_error("another rank failed; its error is printed above") {}
};
// True once a failure went through Together/OnRoot: every rank knows of it, so every rank can
// end MPI cleanly.
bool FailureShared();
// The lowest rank where the shared failure happened: the one that reports it.
int FirstFailedRank();

// Runs f on every rank; when it throws on any rank, every rank throws (collective).
void Together(const std::function<void()>& f);
// Runs f on rank 0 only (file-system checks, locks, renames); when it throws, every rank throws
// (collective).
void OnRoot(const std::function<void()>& f);

// Element-wise sums over ranks, in place (every rank gets the sums).
void Sum(double* values, std::size_t count);
// Every rank's bytes, concatenated in rank order, on every rank.
std::vector<std::uint8_t> Gather(const std::vector<std::uint8_t>& mine);

// The contiguous share [lo, hi) of `count` items that this rank takes (rank order = item order).
struct Range {
  std::int64_t lo = 0, hi = 0;
};
Range Share(std::int64_t count);

}  // namespace icl::dist
