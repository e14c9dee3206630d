#!/bin/bash
# Speed figure: DAS for one layer of the shipped learner (L = 8, H = 64; state 1, the
# costliest to run on from: 7 blocks forward and back per step), 10,000 training pairs, m = d,
# the w counterfactual under OLS at the query, until the held-out IIA stops improving (the
# command's stopping rule: an epoch gaining < 0.001 halves the learning rate, twice, then it
# stops). Prints the wall time of the whole command (goal: under a minute on two cores), the
# epochs, the IIA it reached with its interval, and the GEMM rate beside it: each epoch is about
# 10,000 x (7/8 of a 20 MFLOP forward) x 3 (forward and backward) ~ 0.5 TFLOP, plus the held-out
# passes.
#
# Usage: bench/das.sh [TRAIN_PAIRS=10000] [THREADS=2]   (repository root, after a build; pause
# any training job first: kill -STOP)
set -euo pipefail
P=${1:-10000}
T=${2:-2}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
CK=checkpoints/d4_l8_h64.h5
[ -x "$B" ] || { echo "das.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
[ -f "$CK" ] || { echo "das.sh: run from the repository root ($CK not found)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive
echo "# DAS, shipped learner, state 1, m = 4, $P training pairs, $(date -u +%F), $(nproc) cores, $T thread(s)"
[ -x build/bench/bench_train ] && build/bench/bench_train 1 0 | head -1
start=$(date +%s.%N)
"$B" das -c "$CK" --quantity w --algorithm ols --layers 1 --m 4 --train-pairs "$P" \
  --test-pairs 1000 --threads "$T" --quiet --out "$TMP/das.h5" > "$TMP/out.txt"
end=$(date +%s.%N)
awk -F, 'NR > 1 && $6 == "pooled" { printf "IIA %.4f [%.4f, %.4f] after %s epochs (random subspace %.4f, no interchange %.4f)\n", $8, $9, $10, $16, $11, $14 }' "$TMP/das.csv"
echo "wall $(echo "$end - $start" | bc) s (goal < 60 s)"
