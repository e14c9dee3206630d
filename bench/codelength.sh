#!/bin/bash
# Speed figure: ridge probes with their online codelength (probe --codelength, every
# layer and k) against the same ridge probes without it, on one activations file of the shipped
# learner: medians of REPS whole commands, and the ratio (goal: at most 3x). The codelength reads
# nothing more (its per-block statistics come from the probes' one pass); what it adds is a Gram
# matrix per block and row and, per block, an eigendecomposition and a Cholesky of a (H+1)^2
# matrix per lambda. Also printed: the GEMM rate (bench_train) and the time to read the file
# once (cat to /dev/null), the bounds of both runs. The MLP probe's code (a refit per block, each
# with the optimiser steps of one fit on every training prompt) is timed on one layer and one k,
# with and without --codelength; its cost per block is the difference over the 10 refitted
# blocks, beside one fit's time.
#
# Usage: bench/codelength.sh [REPS=3] [PROMPTS=20000] [THREADS=2]   (repository root, after a
# build; pause any training job first: kill -STOP)
set -euo pipefail
REPS=${1:-3}
N=${2:-20000}
T=${3:-2}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
CK=checkpoints/d4_l8_h64.h5
[ -x "$B" ] || { echo "codelength.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
[ -f "$CK" ] || { echo "codelength.sh: run from the repository root ($CK not found)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive
source "$(dirname "$0")/lib.sh"
echo "# ridge probes with and without the online codelength, $(date -u +%F), $(nproc) cores, medians of $REPS, $T thread(s)"
build/bench/bench_train 1 0 | head -1
"$B" extract -c "$CK" --prompts "$N" --seed 7 --threads "$T" --quiet --out "$TMP/acts.h5"
read_s=$(med cat "$TMP/acts.h5")
common=(-a "$TMP/acts.h5" --targets xty,w_ols --probes ridge --threads "$T" --quiet --force)
plain=$(med "$B" probe "${common[@]}" --out "$TMP/p.h5")
coded=$(med "$B" probe "${common[@]}" --codelength --out "$TMP/c.h5")
ROW_WIDTH=70
row "work (seconds)" "ridge" "+ code" "ratio"
row "---" "---" "---" "---"
row "X'y and w_OLS, 9 layers x 12 k, 20 lambdas, $N prompts, 11 blocks" "$plain" "$coded" "$(ratio "$coded" "$plain")"
mlp=(-a "$TMP/acts.h5" --targets xty --probes mlp --layers 4 --k 12 --epochs 10 --threads "$T" --quiet --force)
mlp_plain=$(med "$B" probe "${mlp[@]}" --out "$TMP/m.h5")
mlp_coded=$(med "$B" probe "${mlp[@]}" --codelength --out "$TMP/mc.h5")
row "MLP probe of X'y, layer 4, k = 12, 10 epochs" "$mlp_plain" "$mlp_coded" "$(ratio "$mlp_coded" "$mlp_plain")"
echo
echo "MLP codelength: $(echo "($mlp_coded - $mlp_plain) / 10" | bc -l | awk '{printf "%.2f", $1}') s per refitted block (10 blocks after block 0)."
echo "Reading the $(du -h "$TMP/acts.h5" | cut -f1) file once from the page cache: $read_s s."
