#!/bin/bash
# Speed figure: iclprobe trace on a learner of Garg et al.'s published shape (d = 20,
# 12 layers, width 256, 8 heads, 41 examples; random weights in their tensor names, imported with
# iclprobe import), 2,000 scored prompts end to end: the ridge readout per layer (Fu et al.'s, on
# 4,000 fit prompts; two passes over them) and the lens, matched to the default algorithms
# (newton:16, gd:ALPHA:256, ridge-path:1000:0.0001:29: 304 iterates), 1,000 bootstrap replicates.
# Goal: within 10 minutes. Printed beside each figure: the forward pass's GEMM bound (24 H^2
# multiply-adds per token and block, 82 tokens, 12 blocks; the attention's 2 x 82 x H per token
# adds under 3%) at the GEMM rate bench_train measures. Implicit weights per layer are not part
# of this figure (the trace does not fit them).
#
# Usage: bench/trace_garg.sh [REPS=1] [THREADS=2]   (repository root, after a build; pause any
# training job first: kill -STOP)
set -euo pipefail
REPS=${1:-1}
T=${2:-2}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
[ -x "$B" ] || { echo "trace_garg.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"
echo "# iclprobe trace on a Garg-shape learner, $(date -u +%F), $(nproc) cores, medians of $REPS, $T thread(s)"
gemm=$(build/bench/bench_train 1 0 | head -1)
echo "$gemm"
python3 "$(dirname "$0")/make_garg_shape.py" "$TMP/garg.safetensors"
"$B" import --format garg "$TMP/garg.safetensors" --heads 8 --out "$TMP/garg.h5" > /dev/null
common=(-c "$TMP/garg.h5" --prompts 2000 --seed 3 --threads "$T" --quiet --force)
ridge=$(med "$B" trace "${common[@]}" --readout ridge --fit-prompts 4000 --out "$TMP/r.h5")
lens=$(med "$B" trace "${common[@]}" --readout lens --out "$TMP/l.h5")
# Forward FLOPs per prompt: 2 x 24 H^2 x 82 tokens x 12 blocks.
fwd=$(echo "2 * 24 * 256 * 256 * 82 * 12" | bc)
rate=$(echo "$gemm" | grep -o '[0-9.]* GFLOP/s' | head -1 | cut -d' ' -f1)
bound() { echo "$1 * $fwd / ($rate * 10^9 * $T)" | bc -l | awk '{printf "%.1f", $1}'; }
ROW_WIDTH=62
row "trace, 2,000 scored prompts (seconds)" "wall" "GEMM bd" "of bound"
row "---" "---" "---" "---"
br=$(bound 10000); bl=$(bound 2000)
row "ridge readout (4,000 fit prompts: 10,000 prompt passes)" "$ridge" "$br" "$(echo "100 * $br / $ridge" | bc -l | awk '{printf "%.0f%%", $1}')"
row "lens (2,000 prompt passes)" "$lens" "$bl" "$(echo "100 * $bl / $lens" | bc -l | awk '{printf "%.0f%%", $1}')"
echo
echo "GEMM bound: forward passes only, at ${rate} GFLOP/s per thread x $T threads (bench_train's one-thread rate; two threads rarely double it)."
