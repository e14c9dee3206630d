#!/bin/bash
# Each input of a run is opened once per process: strace counts the open system calls on the
# checkpoint of `extract` and of `swap` (read for the model, again for its hash) and on the
# activations file of `probe` (read for the plan, per target and per layer). Counted, not
# timed. Usage: tests/check_open_once.sh ICLPROBE. Skipped (exit 77) where strace is missing
# or cannot trace (a container without ptrace).
iclprobe=${1:?usage: check_open_once.sh ICLPROBE}
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
if ! command -v strace > /dev/null || ! strace -f -o /dev/null true 2> /dev/null; then
  echo "check_open_once: strace is missing or cannot trace here; skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_WAIT_POLICY=passive
ckpt="$root/checkpoints/d4_l8_h64.h5"
status=0

# Runs "$@" under strace and compares the opens of `file` with one.
opens_once() {
  local name=$1 file=$2
  shift 2
  if ! strace -f -qq -e trace=open,openat,openat2 -o "$tmp/$name.trace" "$@" > "$tmp/$name.out" 2>&1; then
    echo "$name: the run failed:"
    cat "$tmp/$name.out"
    status=1
    return
  fi
  local n
  n=$(grep -cF "\"$file\"" "$tmp/$name.trace")
  if [ "$n" -ne 1 ]; then
    echo "$name: '$file' opened $n times (expected once):"
    grep -F "\"$file\"" "$tmp/$name.trace" | head -20
    status=1
  else
    echo "$name: '$file' opened once"
  fi
}

opens_once extract "$ckpt" "$iclprobe" extract --quiet -c "$ckpt" --prompts 200 --layers 2,4 \
  --out "$tmp/acts.h5"
opens_once probe "$tmp/acts.h5" "$iclprobe" probe --quiet --threads 1 -a "$tmp/acts.h5" \
  --bootstrap 100 --out "$tmp/probes.h5"
opens_once swap "$ckpt" "$iclprobe" swap --quiet -c "$ckpt" --learners ols --pairs 8 --k 3 \
  --bootstrap 50 --out "$tmp/swaps.h5"
exit $status
