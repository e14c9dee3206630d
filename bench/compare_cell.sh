#!/bin/bash
# Issue 31's speed figure: `compare` of one cell (three seeds of the d = 4, L = 8, H = 64 recipe)
# against the same work on one of its checkpoints, with fitted families, on 2,000 prompts: the
# classical learners' predictions are computed once per task and shared by the seeds; the
# transformer's forward passes and the fits are per seed. Medians of REPS whole commands, on one
# thread, and the ratio (goal: at most 1.5x). Also the parts: the fixed references alone
# (`baselines`-like work, via a compare with no fitted learner) and the GEMM rate that bounds
# the forward passes (bench_train).
#
# Usage: bench/compare_cell.sh [REPS=3] [PROMPTS=2000]   (repository root, after a build; pause
# any training job first: kill -STOP)
set -euo pipefail
REPS=${1:-3}
N=${2:-2000}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
[ -x "$B" ] || { echo "compare_cell.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
A=checkpoints/d4_l8_h64.h5
S2=checkpoints/family/d4_l8_h64_s2.h5
S3=checkpoints/family/d4_l8_h64_s3.h5
for f in "$A" "$S2" "$S3"; do
  [ -f "$f" ] || { echo "compare_cell.sh: run from the repository root ($f not found)" >&2; exit 2; }
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive
source "$(dirname "$0")/lib.sh"
FIT="ols,ridge:fit,gd:fit:1..16,newton:fit,sgd:fit,knn:3"
FIXED="ols,ridge:0.1,gd:0.02:4,newton:8:0.02,sgd:0.03,knn:3"
common=(--prompts "$N" --fit-prompts 500 --ilwd-prompts 200 --seed 3 --threads 1 --quiet)
echo "# compare of one cell vs one checkpoint, $(date -u +%F), $(nproc) cores, medians of $REPS, 1 thread"
build/bench/bench_train 1 0 | head -1
one=$(med "$B" compare -c "$A" --learners "$FIT" "${common[@]}")
cell=$(med "$B" compare --cell c="$A,$S2,$S3" --learners "$FIT" "${common[@]}")
one_fixed=$(med "$B" compare -c "$A" --learners "$FIXED" "${common[@]}")
cell_fixed=$(med "$B" compare --cell c="$A,$S2,$S3" --learners "$FIXED" "${common[@]}")
ROW_WIDTH=62
row "work (seconds)" "1 ckpt" "cell of 3" "ratio"
row "---" "---" "---" "---"
row "fitted families ($FIT)" "$one" "$cell" "$(ratio "$cell" "$one")"
row "fixed learners ($FIXED)" "$one_fixed" "$cell_fixed" "$(ratio "$cell_fixed" "$one_fixed")"
echo "(goal: the fitted row's ratio at most 1.5x; the per-seed parts are each seed's forward"
echo " passes over $N + 500 prompts and 200 x 2(d+1) x n queries, and each seed's fits)"
