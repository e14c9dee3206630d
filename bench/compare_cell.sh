#!/bin/bash
# Speed figure: `compare` of one cell (three seeds of the d = 4, L = 8, H = 64 recipe)
# against the same work on one of its checkpoints, with fitted families, on 2,000 prompts: the
# classical learners' predictions are computed once per task and shared by the seeds; the
# transformer's forward passes and the fits are per seed. Medians of REPS whole commands, on one
# thread, and the ratio (goal: at most 1.5x). Also the parts: the fixed references alone
# (`baselines`-like work, via a compare with no fitted learner) and the GEMM rate that bounds
# the forward passes (bench_train).
#
# Usage: bench/compare_cell.sh [REPS=3] [PROMPTS=2000] [A,S2,S3]   (repository root, after a
# build; pause any training job first: kill -STOP). The third argument names another cell of
# three d = 4, n = 12 checkpoints (default: the shipped learner and its family's seeds 2 and 3;
# e.g. a noise level's cell, whose newer arithmetic makes its forward passes cheaper).
set -euo pipefail
REPS=${1:-3}
N=${2:-2000}
CELL=${3:-checkpoints/d4_l8_h64.h5,checkpoints/family/d4_l8_h64_s2.h5,checkpoints/family/d4_l8_h64_s3.h5}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
[ -x "$B" ] || { echo "compare_cell.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
IFS=, read -r A S2 S3 rest <<< "$CELL"
[ -n "$S3" ] && [ -z "$rest" ] || { echo "compare_cell.sh: the cell is three checkpoints A,S2,S3 (got '$CELL')" >&2; exit 2; }
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
echo "# compare of one cell ($CELL) vs one checkpoint, $(date -u +%F), $(nproc) cores, medians of $REPS, 1 thread"
build/bench/bench_train 1 0 | head -2 | tee "$TMP/gemm.txt"
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
# The bound: a seed's forward passes cannot cost less than their matmul work at the GEMM rate at
# the model's shapes (2 FLOP per parameter per token: LayerNorm and position parameters count
# though they do no matmul, attention scores do not though they do, about 8 times as much work
# at these lengths, so a lower bound), and the shared work is what the one-checkpoint run spends beyond its own per-seed
# part ((cell - one) / 2). With every per-seed cost but the forward passes at 0 and those at the
# bound, the cell could cost no less than (shared + 3 F) / (shared + F) of one checkpoint.
params=$("$B" inspect "$A" | awk '$1 == "parameters" {print $2}')
rate=$(awk -F': ' 'NR == 2 {split($2, a, " "); print a[1]}' "$TMP/gemm.txt")
# d = 4, n = 12: 2n tokens per prompt; an ILWD context is 2n tokens and n * 2(d + 1) queries.
tokens=$(( (N + 500) * 24 + 200 * (24 + 12 * 10) ))
awk -v p="$params" -v t="$tokens" -v r="$rate" -v one="$one" -v cell="$cell" 'BEGIN {
  f = 2 * p * t / 1e9; fb = f / r; per = (cell - one) / 2; shared = one - per
  printf "bound: a seed'"'"'s forward passes %d tokens x %.2f MFLOP = %.1f GFLOP, %.2f s at %.1f GFLOP/s;\n", t, 2 * p / 1e6, f, fb, r
  printf " measured per added seed %.2f s, shared %.2f s; at the bound with free fits the ratio is %.2fx\n", per, shared, (shared + 3 * fb) / (shared + fb)
}'
