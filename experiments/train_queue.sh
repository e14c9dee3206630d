#!/usr/bin/env bash
# The convergence rule's learners (checkpoints/README.md), trained one after another on one core:
# each line of the queue is a run (its output and its train options); a finished run is skipped,
# an unfinished one resumed (train --resume is exact), a missing one started. Safe to stop (kill)
# and start again.
# Runs go to runs/queue/; the finished ones are exported to checkpoints/depth/ by hand (see
# checkpoints/README.md) and skipped from then on; an unfinished one committed when training
# stopped, in checkpoints/depth/resume/, is resumed from there. Usage: experiments/train_queue.sh [QUEUE_FILE]   (default: the queue
# below). A queue file holds lines `NAME OPTIONS`, '#' comments, and may set its own recipe and
# export folder with lines `recipe OPTIONS` and `shipped FOLDER` (relative to the repository).
# Pause for a benchmark with kill -STOP / -CONT on the train process.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ICLPROBE="${ICLPROBE:-$ROOT/build/apps/iclprobe}"
RUNS="$ROOT/runs/queue"
SHIPPED="${SHIPPED:-$ROOT/checkpoints/depth}"  # finished runs, exported; resume/: unfinished ones
mkdir -p "$RUNS"
if [ ! -x "$ICLPROBE" ]; then echo "train_queue: build first (scripts/build); no $ICLPROBE" >&2; exit 2; fi

# The recipe of checkpoints/d4_l8_h64.h5 and its family (seeds 1-4: the L = 8 cell), with only
# the depth or width changed: the depth row L = 1, 2, 4 at H = 64 and the width column
# H = 8, 16, 32 at L = 4, three seeds each, and one half-budget run per cell (seed 1, half the
# steps and warmup, the whole-batch arithmetic of the family's half run).
RECIPE="--d 4 --n 12 --heads 4 --batch 64 --lr 1e-3 --shards 1 --threads 1 --eval-every 500 --save-every 1000 --quiet"
queue() {
  for L in 1 2 4; do
    for S in 1 2 3; do echo "d4_l${L}_h64_s${S} --layers $L --hidden 64 --steps 20000 --warmup 1000 --seed $S"; done
    echo "d4_l${L}_h64_half --layers $L --hidden 64 --steps 10000 --warmup 500 --seed 1"
  done
  for H in 8 16 32; do
    for S in 1 2 3; do echo "d4_l4_h${H}_s${S} --layers 4 --hidden $H --steps 20000 --warmup 1000 --seed $S"; done
    echo "d4_l4_h${H}_half --layers 4 --hidden $H --steps 10000 --warmup 500 --seed 1"
  done
}

finished() {
  [ -f "$1" ] && "$ICLPROBE" inspect "$1" | awk '$1 == "step" && $2 == $4 {ok = 1} END {exit !ok}'
}

if [ $# -gt 0 ]; then
  [ -f "$1" ] || { echo "train_queue: no queue file $1" >&2; exit 2; }
  r=$(sed -n 's/^recipe //p' "$1"); [ -z "$r" ] || RECIPE="$r"
  d=$(sed -n 's/^shipped //p' "$1"); [ -z "$d" ] || SHIPPED="$ROOT/$d"
fi
lines() { if [ $# -gt 0 ]; then grep -v -e '^#' -e '^recipe ' -e '^shipped ' "$1"; else queue; fi; }
lines "$@" | while read -r name opts; do
  [ -n "$name" ] || continue
  out="$RUNS/$name.h5"
  if finished "$out"; then continue; fi
  # Shipped already (exported, on a fresh machine runs/ is empty), or committed resumably when
  # training stopped: skip it, or resume from the committed checkpoint.
  if [ -f "$SHIPPED/$name.h5" ]; then continue; fi
  if [ ! -f "$out" ] && [ -f "$SHIPPED/resume/$name.h5" ]; then
    cp "$SHIPPED/resume/$name.h5" "$out"
    [ -f "$SHIPPED/resume/$name.train.csv" ] && cp "$SHIPPED/resume/$name.train.csv" "$RUNS/$name.train.csv"
    [ -f "$SHIPPED/resume/$name.log" ] && cp "$SHIPPED/resume/$name.log" "$RUNS/$name.log"
  fi
  start=$(date +%s)
  if [ -f "$out" ]; then
    echo "$(date -u +%H:%M) resume $name" >&2
    OMP_WAIT_POLICY=passive "$ICLPROBE" train --resume --threads 1 --quiet --out "$out" < /dev/null >> "$RUNS/$name.log"
  else
    echo "$(date -u +%H:%M) start $name" >&2
    # shellcheck disable=SC2086
    OMP_WAIT_POLICY=passive "$ICLPROBE" train $RECIPE $opts --out "$out" < /dev/null > "$RUNS/$name.log"
  fi
  echo "$(date -u +%H:%M) done $name in $(( ($(date +%s) - start) / 60 )) min" >&2
  echo "$name $(( $(date +%s) - start )) s" >> "$RUNS/wall_times.txt"
done
