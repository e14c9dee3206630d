#!/bin/bash
# Figures for several processes: extract and ridge probes as one process and as mpirun -np 1 / -np 2, in
# one invocation, medians of REPS whole commands, printed as ratios. Beside them: the disk's
# sequential write rate (dd, fdatasync), which bounds extract, and the single-process binary on
# 2 threads (the other way to use two cores).
#
# Usage: bench/mpi.sh [REPS=3] [PROMPTS=20000]      (from the repository root, after a build)
set -euo pipefail
REPS=${1:-3}
N=${2:-20000}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
CK=checkpoints/d4_l8_h64.h5
[ -x "$B" ] || { echo "mpi.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
[ -f "$CK" ] || { echo "mpi.sh: run from the repository root ($CK not found)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "mpi.sh: no mpirun (run scripts/setup)" >&2; exit 2; }
TMP=$(mktemp -d -p "${BENCH_TMP:-$PWD}")  # the disk the outputs go to
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPI="mpirun --oversubscribe --bind-to none"

ROW_WIDTH=62
source "$(dirname "$0")/lib.sh"

echo "# iclprobe under MPI, $(date -u +%F), $(nproc) cores, medians of $REPS"
dd if=/dev/zero of="$TMP/dd" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1 |
  awk '{print "disk, sequential write (dd 1 GiB, fdatasync): " $(NF-1) " " $NF}'
rm -f "$TMP/dd"
echo
row "work" "A (s)" "B (s)" "A/B"
row "---" "---:" "---:" "---:"

X="extract -c $CK --prompts $N --seed 7 --quiet --force --out $TMP/acts.h5"
e1=$(med "$B" $X --threads 1)
m1=$(med $MPI -np 1 "$B" $X --threads 1)
m2=$(med $MPI -np 2 "$B" $X --threads 1)
e2=$(med "$B" $X --threads 2)
mb=$(du -m "$TMP/acts.h5" | cut -f1)
row "extract $N: one process (A) vs mpirun -np 1 (B)" "$e1" "$m1" "$(ratio "$e1" "$m1")"
row "extract $N: one process, 1 thread (A) vs mpirun -np 2 (B)" "$e1" "$m2" "$(ratio "$e1" "$m2")"
row "extract $N: one process, 2 threads (A) vs mpirun -np 2 (B)" "$e2" "$m2" "$(ratio "$e2" "$m2")"
echo "| extract $N writes $mb MiB: $(echo "$mb / $m2" | bc -l | awk '{printf "%.0f", $1}') MiB/s at -np 2 |"

P="probe --activations $TMP/acts.h5 --targets w_ols,xty --probes ridge --quiet --force --out $TMP/p.h5"
p1=$(med "$B" $P --threads 1)
q1=$(med $MPI -np 1 "$B" $P --threads 1)
q2=$(med $MPI -np 2 "$B" $P --threads 1)
p2=$(med "$B" $P --threads 2)
row "ridge probes, 9 layers x 12 k: one process (A) vs mpirun -np 1 (B)" "$p1" "$q1" "$(ratio "$p1" "$q1")"
row "ridge probes: one process, 1 thread (A) vs mpirun -np 2 (B)" "$p1" "$q2" "$(ratio "$p1" "$q2")"
row "ridge probes: one process, 2 threads (A) vs mpirun -np 2 (B)" "$p2" "$q2" "$(ratio "$p2" "$q2")"
