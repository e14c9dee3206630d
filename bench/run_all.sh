#!/bin/bash
# One command for the speed figures: each stage of iclprobe timed on 1 and on 2 threads (whole
# commands; training per step, from the trainer's own step times), next to the plain
# Python/PyTorch (and scikit-learn) reference programs of bench/, in the same invocation, medians
# of REPS runs, printed as ratios (the figures that count on these noisy machines). Also the
# machine's float32 GEMM rate and OpenBLAS core (bench_train) and the disk's sequential write
# rate (dd).
#
# Then each stage against its physical bound: the GEMM work of its forward (and backward) passes
# at the two-thread 1024^3 GEMM rate measured above, the disk's write rate for what extract
# writes, and for the ridge probes one read of the activations from the page cache plus their
# Gram matrices; also extraction of a Garg-shape learner (d = 20, 12 layers, width 256, 8 heads,
# 41 examples; random weights, bench/make_garg_shape.py, imported), 2,000 prompts.
#
# Usage: bench/run_all.sh [REPS=3] [PROMPTS=20000]      (from the repository root, after a build;
# pause any training job first: kill -STOP, then -CONT)
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
rates1=$(build/bench/bench_train 1 0)
echo "$rates1"
gemm=$(echo "$rates1" | head -1)
gemm2=$(build/bench/bench_train 2 0 | head -1)
echo "$gemm2"
# The rate at the models' own shapes on one thread (a shard of 32 prompts: 768 x 64 x 64..256
# for the shipped model, 2560 x 128 x 128..512 for the larger one): two workers, each on its
# own shard or group on one thread, reach at most twice it.
shape_ship=$(echo "$rates1" | sed -n "s/.*shipped model's shapes.*: \([0-9.]*\) GFLOP.*/\1/p")
shape_large=$(echo "$rates1" | sed -n "s/.*larger model's shapes.*: \([0-9.]*\) GFLOP.*/\1/p")
g1=$(echo "$gemm" | sed -n 's/.*: \([0-9.]*\) GFLOP.*/\1/p')
g2=$(echo "$gemm2" | sed -n 's/.*: \([0-9.]*\) GFLOP.*/\1/p')
echo "(2 threads over 1 on this GEMM: $(ratio "$g2" "$g1"), what bounds the speed-ups below)"
# The Python references run on the OpenBLAS kernels iclprobe picks for this CPU (core/process.hpp),
# so that the ratios compare the programs, not the kernels.
core=$(echo "$gemm" | sed -n 's/.*OpenBLAS core \([A-Za-z0-9]*\).*/\1/p')
echo "(Python references run with OPENBLAS_CORETYPE=$core)"
echo
row "work" "A (s)" "B (s)" "A/B"
row "---" "---:" "---:" "---:"

# Training: seconds per step of the trainer of `iclprobe train` (bench_shards: its own step
# callback, medians over rounds alternating 1 and 2 workers), for the shipped config and a larger
# one, beside the PyTorch (Python) step on 2 threads.
build/bench/bench_shards 12 "$REPS" > "$TMP/shards.txt"
if [ $have_py = 1 ]; then
  OPENBLAS_CORETYPE=$core $PY bench/train_step_pytorch.py 2 30 > "$TMP/pytrain.txt"
fi
for cfg in shipped larger; do
  read -r s1 s2 < <(awk -v c=$cfg '$1 == c {print $(NF - 2), $(NF - 1)}' "$TMP/shards.txt")
  row "train $cfg, s/step: 1 worker (A) vs 2 (B)" "$s1" "$s2" "$(ratio "$s1" "$s2")"
  if [ $have_py = 1 ]; then
    tp=$(awk -v c=$cfg '$1 == c {printf "%.4f", 1 / $(NF - 1)}' "$TMP/pytrain.txt")
    row "train $cfg, s/step: PyTorch 2 threads (A) vs iclprobe 2 (B)" "$tp" "$s2" "$(ratio "$tp" "$s2")"
  fi
done

# Extraction: every layer, all positions, float32, 1 vs 2 threads; PyTorch + h5py reference.
e1=$(med "$B" extract -c "$CK" -N "$N" --threads 1 --quiet --force -o "$TMP/e1.h5")
e2=$(med "$B" extract -c "$CK" -N "$N" --threads 2 --quiet --force -o "$TMP/e.h5")
row "extract $N prompts: threads 1 (A) vs 2 (B), A/B" "$e1" "$e2" "$(ratio "$e1" "$e2")"
if [ $have_py = 1 ]; then
  ep=$(med env OPENBLAS_CORETYPE=$core $PY bench/extract_pytorch.py "$CK" "$N" 2)
  row "extract: PyTorch + h5py 2 threads (A) vs iclprobe 2 (B), A/B" "$ep" "$e2" "$(ratio "$ep" "$e2")"
fi
# The disk's sequential write rate, in the same run: 1 GiB, 1 MiB blocks, flushed (fdatasync).
disk=$(dd if=/dev/zero of="$TMP/dd" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1 |
  awk '{r = $(NF - 1); u = $NF; if (u ~ /^GB/) r *= 1000; if (u ~ /^kB/) r /= 1000; print r}')
rm -f "$TMP/dd"
mb=$(du -m "$TMP/e.h5" | cut -f1)
rate=$(echo "$mb / $e2" | bc -l | awk '{printf "%.0f", $1}')
row "extract, MB/s: disk write rate (A) vs iclprobe 2 threads (B)" "$disk" "$rate" \
  "$(echo "100 * $rate / $disk" | bc -l | awk '{printf "%.0f%%", $1}')"

# Ridge probes: xty, every layer and k, 1 vs 2 threads; scikit-learn RidgeCV on the same data.
PR="probe --activations $TMP/e.h5 --probes ridge --targets xty --quiet --force"
p1=$(med "$B" $PR --threads 1 --out "$TMP/p1.h5")
p2=$(med "$B" $PR --threads 2 --out "$TMP/p.h5")
row "ridge probes: threads 1 (A) vs 2 (B), A/B" "$p1" "$p2" "$(ratio "$p1" "$p2")"
if [ $have_py = 1 ]; then
  ps=$(OPENBLAS_CORETYPE=$core $PY bench/probe_ridge_sklearn.py "$TMP/e.h5" "$TMP/p.h5" xty | sed -n 's/.* in \([0-9.]*\) s (.*/\1/p')
  [ -n "$ps" ] && row "ridge: scikit-learn RidgeCV fits (A) vs iclprobe 2 (B), A/B" "$ps" "$p2" "$(ratio "$ps" "$p2")"
fi

# MLP probes, the batched run of the speed goal: every layer, two targets (w_OLS and X'y), k =
# 4, 8, 12 (54 probes), 4,000 prompts, 10 epochs, 1 vs 2 threads; the reference fits the same 54
# one after another.
PM="probe --activations $TMP/e.h5 --probes mlp --targets w_ols,xty --k 4,8,12 --max-prompts 4000 --epochs 10 --quiet --force"
m1=$(med "$B" $PM --threads 1 --out "$TMP/m1.h5")
m2=$(med "$B" $PM --threads 2 --out "$TMP/m.h5")
row "MLP probes (w_ols and xty, k=4,8,12, 9 layers: 54): threads 1 (A) vs 2 (B), A/B" "$m1" "$m2" "$(ratio "$m1" "$m2")"
if [ $have_py = 1 ]; then
  mp=$(med env OPENBLAS_CORETYPE=$core $PY bench/probe_mlp_pytorch.py "$TMP/e.h5" "$TMP/m.h5" w_ols,xty 4,8,12 10 2)
  row "MLP probes (54): PyTorch one by one 2 threads (A) vs iclprobe 2 (B)" "$mp" "$m2" "$(ratio "$mp" "$m2")"
fi
[ $have_py = 1 ] || echo "(Python references skipped: $PY lacks torch, h5py or sklearn)"

# Forward GEMM FLOP of one prompt: per block and token 2 (4 + 2 r) H^2 for the projections and
# the MLP, and 4 T H for attention's two T x T x H products; L blocks, T = 2n tokens.
fwd_flop() {  # L T H r
  echo "$1 * ($2 * 2 * (4 + 2 * $4) * $3 * $3 + 4 * $2 * $2 * $3)" | bc
}
frac() { echo "100 * $1 / $2" | bc -l | awk '{printf "%.0f%%", $1}'; }
gf() { echo "$1" | bc -l | awk '{printf "%.1f", $1}'; }
# The Garg-shape learner (Python standard library only, no torch).
garg=""
if command -v python3 > /dev/null; then
  python3 bench/make_garg_shape.py "$TMP/garg.safetensors" > /dev/null
  "$B" import --format garg "$TMP/garg.safetensors" --heads 8 --out "$TMP/garg.h5" > /dev/null
  garg=$(med "$B" extract -c "$TMP/garg.h5" -N 2000 --threads 2 --quiet --force -o "$TMP/g.h5")
fi
echo
sb=$(gf "2 * $shape_ship"); lb=$(gf "2 * $shape_large")
echo "Against the bounds (two threads; GEMM at $g2 GFLOP/s at 1024^3 on two threads, and twice the"
echo "one-thread rate at the model's own shapes: $sb GFLOP/s shipped, $lb larger; disk at $disk MB/s):"
echo
ROW_WIDTH=46
row "stage" "GFLOP/s" "bound" "fraction"
row "---" "---:" "---:" "---:"
ship=$(fwd_flop 8 24 64 4); large=$(fwd_flop 8 80 128 4)
for cfg in shipped larger; do
  read -r _ s2b < <(awk -v c=$cfg '$1 == c {print $(NF - 2), $(NF - 1)}' "$TMP/shards.txt")
  f=$ship; b=$sb; [ $cfg = larger ] && { f=$large; b=$lb; }
  r=$(gf "3 * 64 * $f / $s2b / 10^9")
  row "train $cfg, 2 workers (1024^3)" "$r" "$g2" "$(frac "$r" "$g2")"
  row "train $cfg, 2 workers (own shapes)" "$r" "$b" "$(frac "$r" "$b")"
done
r=$(gf "$N * $ship / $e2 / 10^9")
row "extract $N prompts (shipped), 2 threads" "$r" "$g2" "$(frac "$r" "$g2")"
row "extract, against its own shapes" "$r" "$sb" "$(frac "$r" "$sb")"
row "extract $N prompts, MB/s written" "$rate" "$disk" "$(frac "$rate" "$disk")"
if [ -n "$garg" ]; then
  r=$(gf "2000 * $(fwd_flop 12 82 256 4) / $garg / 10^9")
  row "extract 2,000 prompts (Garg shape), 2 threads" "$r" "$g2" "$(frac "$r" "$g2")"
fi
# Ridge: one read of the file (at the disk's rate, the page cache is faster) and one Gram matrix
# of the train rows per (layer, k): 9 x 12 x 2 x 0.8 N x 64^2 FLOP.
gram=$(echo "9 * 12 * 2 * 0.8 * $N * 64 * 64" | bc)
rb=$(echo "$gram / ($g2 * 10^9) + $mb / $disk" | bc -l | awk '{printf "%.2f", $1}')
row "ridge probes, seconds (GEMM + one read)" "$p2" "$rb" "$(frac "$rb" "$p2")"
