#!/usr/bin/env bash
# Clean and incremental build times of a source tree on this machine, the figures
# docs/performance.md quotes: configure a fresh build folder (Release, ccache off, so that every
# object is compiled), build with JOBS parallel jobs, then touch one .cpp of probes/
# (probes/ridge.cpp) and build again. Run it with nothing else on the cores (pause training with
# kill -STOP). Usage: bench/build_time.sh SOURCE_TREE [JOBS]  (JOBS: default the cores)
# Prints one line per figure: what, seconds, the tree's commit and the machine.
set -euo pipefail
src=$(cd "${1:?usage: bench/build_time.sh SOURCE_TREE [JOBS]}" && pwd)
jobs=${2:-$(nproc)}
[ -f "$src/CMakeLists.txt" ] && [ -f "$src/probes/ridge.cpp" ] ||
  { echo "build_time: '$src' is not an iclprobe source tree (no CMakeLists.txt or probes/ridge.cpp)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "no git")
cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)
machine="$(nproc) cores of $cpu, $jobs jobs"
t0=$(date +%s.%N)
cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DICLPROBE_CCACHE=OFF > "$out.configure.log" 2>&1 ||
  { echo "build_time: configure failed (log: $out.configure.log)" >&2; exit 1; }
t1=$(date +%s.%N)
cmake --build "$out" -j "$jobs" > "$out.build.log" 2>&1 ||
  { echo "build_time: build failed (log: $out.build.log)" >&2; exit 1; }
t2=$(date +%s.%N)
touch "$src/probes/ridge.cpp"
cmake --build "$out" -j "$jobs" > "$out.incr.log" 2>&1 ||
  { echo "build_time: incremental build failed (log: $out.incr.log)" >&2; exit 1; }
t3=$(date +%s.%N)
rm -f "$out.configure.log" "$out.build.log" "$out.incr.log"
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v commit="$commit" -v m="$machine" 'BEGIN {
  printf "configure %.0f s  (commit %s; %s)\n", b - a, commit, m
  printf "clean build %.0f s\n", c - b
  printf "incremental build after touching probes/ridge.cpp %.0f s\n", d - c }'
