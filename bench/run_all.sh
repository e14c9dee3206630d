#!/bin/bash
# One command for issue 15's figures: each stage of iclprobe timed as a whole command on 1 and on
# 2 threads, next to the plain Python/PyTorch (and scikit-learn) reference programs of bench/, in
# the same invocation, medians of REPS runs, printed as ratios (the figures that count on these
# noisy machines). Also the machine's float32 GEMM rate (bench_train) and the disk's sequential
# write rate (bench_extract).
#
# Usage: bench/run_all.sh [REPS=3] [PROMPTS=20000]      (from the repository root, after a build)
# Needs Debian's python3-torch, python3-h5py and python3-sklearn for the references (skipped,
# with a note, when /usr/bin/python3 lacks them). Writes its scratch files under a temporary
# folder, removed at the end.
set -euo pipefail
REPS=${1:-3}
N=${2:-20000}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
PY=/usr/bin/python3
CK=checkpoints/d4_l8_h64.h5
[ -x "$B" ] || { echo "run_all.sh: no iclprobe at $B (build first, or set ICLPROBE)" >&2; exit 2; }
[ -f "$CK" ] || { echo "run_all.sh: run from the repository root ($CK not found)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive
have_py=1
$PY -c "import torch, h5py, sklearn" 2>/dev/null || have_py=0

source "$(dirname "$0")/lib.sh"

echo "# iclprobe benchmarks, $(date -u +%F), $(nproc) cores, medians of $REPS"
build/bench/bench_train 1 9 | head -1
echo
row "work" "A (s)" "B (s)" "A/B"
row "---" "---:" "---:" "---:"

# Training, shipped config: seconds per step from whole commands, (t(50 steps) - t(20 steps)) / 30
# (start-up, evaluation and saving cancel), 1 vs 2 threads (the same shards: equal results).
TR="train --d 4 --n 12 --layers 8 --hidden 64 --heads 4 --eval-every 1000 --save-every 1000 --quiet --force"
step_time() {  # threads
  local a b
  a=$(med "$B" $TR --steps 20 --threads "$1" --out "$TMP/t.h5")
  b=$(med "$B" $TR --steps 50 --threads "$1" --out "$TMP/t.h5")
  echo "($b - $a) / 30" | bc -l | awk '{printf "%.4f", $1}'
}
t1=$(step_time 1)
t2=$(step_time 2)
row "train, s/step: threads 1 (A) vs 2 (B), speed-up A/B" "$t1" "$t2" "$(ratio "$t1" "$t2")"
if [ $have_py = 1 ]; then
  tp=$($PY bench/train_step_pytorch.py 2 30 | awk '/shipped/ {printf "%.4f", 1 / $(NF - 1)}')
  row "train, s/step: PyTorch 2 threads (A) vs iclprobe 2 (B), A/B" "$tp" "$t2" "$(ratio "$tp" "$t2")"
fi

# Extraction: every layer, all positions, float32, 1 vs 2 threads; PyTorch + h5py reference.
e1=$(med "$B" extract -c "$CK" -N "$N" --threads 1 --quiet --force -o "$TMP/e1.h5")
e2=$(med "$B" extract -c "$CK" -N "$N" --threads 2 --quiet --force -o "$TMP/e.h5")
row "extract $N prompts: threads 1 (A) vs 2 (B), A/B" "$e1" "$e2" "$(ratio "$e1" "$e2")"
if [ $have_py = 1 ]; then
  ep=$(med $PY bench/extract_pytorch.py "$CK" "$N" 2)
  row "extract: PyTorch + h5py 2 threads (A) vs iclprobe 2 (B), A/B" "$ep" "$e2" "$(ratio "$ep" "$e2")"
fi
mb=$(du -m "$TMP/e.h5" | cut -f1)
build/bench/bench_extract 2000 1 "$CK" 2>/dev/null | grep -i "disk" | head -1 || true
echo "  (activations file: $mb MB; iclprobe 2 threads wrote $(echo "$mb / $e2" | bc -l | awk '{printf "%.0f", $1}') MB/s)"

# Ridge probes: xty, every layer and k, 1 vs 2 threads; scikit-learn RidgeCV on the same data.
PR="probe --activations $TMP/e.h5 --probes ridge --targets xty --quiet --force"
p1=$(med "$B" $PR --threads 1 --out "$TMP/p1.h5")
p2=$(med "$B" $PR --threads 2 --out "$TMP/p.h5")
row "ridge probes: threads 1 (A) vs 2 (B), A/B" "$p1" "$p2" "$(ratio "$p1" "$p2")"
if [ $have_py = 1 ]; then
  ps=$($PY bench/probe_ridge_sklearn.py "$TMP/e.h5" "$TMP/p.h5" xty | sed -n 's/.* in \([0-9.]*\) s (.*/\1/p')
  [ -n "$ps" ] && row "ridge: scikit-learn RidgeCV fits (A) vs iclprobe 2 (B), A/B" "$ps" "$p2" "$(ratio "$ps" "$p2")"
fi

# MLP probes: one target, k = 12, every layer, 4,000 prompts, 1 vs 2 threads.
PM="probe --activations $TMP/e.h5 --probes mlp --targets w_ols --k 12 --max-prompts 4000 --epochs 10 --quiet --force"
m1=$(med "$B" $PM --threads 1 --out "$TMP/m1.h5")
m2=$(med "$B" $PM --threads 2 --out "$TMP/m.h5")
row "MLP probes (w_ols, k=12, 9 layers): threads 1 (A) vs 2 (B), A/B" "$m1" "$m2" "$(ratio "$m1" "$m2")"
[ $have_py = 1 ] || echo "(Python references skipped: $PY lacks torch, h5py or sklearn)"
