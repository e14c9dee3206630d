#!/bin/bash
# Two builds of iclprobe side by side: the same whole commands (extract, ridge and MLP probes,
# 40 training steps) timed with build A and build B in one run, alternating, medians of REPS, on
# the default threads (all cores). For "what did this change buy": A is a build from before it.
#
# Usage: bench/builds.sh A_BIN B_BIN [REPS=3] [PROMPTS=20000]   (from the repository root)
# Example: git worktree add /tmp/old HEAD~3 && (cd /tmp/old && cmake -B build && cmake --build build)
#          bench/builds.sh /tmp/old/build/apps/iclprobe build/apps/iclprobe
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench/builds.sh A_BIN B_BIN [REPS] [PROMPTS]" >&2; exit 2; }
A=$1
B=$2
REPS=${3:-3}
N=${4:-20000}
CK=checkpoints/d4_l8_h64.h5
for bin in "$A" "$B"; do
  [ -x "$bin" ] || { echo "builds.sh: no program at '$bin'" >&2; exit 2; }
done
[ -f "$CK" ] || { echo "builds.sh: run from the repository root ($CK not found)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/lib.sh"

echo "# two builds, $(date -u +%F), $(nproc) cores, default threads, medians of $REPS"
echo "A: $A"
echo "B: $B"
echo
row "work" "A (s)" "B (s)" "A/B"
row "---" "---:" "---:" "---:"
"$B" extract -c "$CK" -N "$N" --quiet --force -o "$TMP/acts.h5" > /dev/null  # the probes' input
TR="train --d 4 --n 12 --layers 8 --hidden 64 --heads 4 --eval-every 1000 --save-every 1000 --quiet --force"
jobs=(
  "train 40 steps (shipped config)|$TR --steps 40 --out $TMP/t.h5"
  "extract $N prompts, every layer|extract -c $CK -N $N --quiet --force -o $TMP/e.h5"
  "ridge probes (xty, 9 layers x 12 k)|probe --activations $TMP/acts.h5 --probes ridge --targets xty --quiet --force --out $TMP/p.h5"
  "MLP probes (w_ols, k=12, 4,000 prompts, 10 epochs)|probe --activations $TMP/acts.h5 --probes mlp --targets w_ols --k 12 --max-prompts 4000 --epochs 10 --quiet --force --out $TMP/m.h5"
)
for job in "${jobs[@]}"; do
  name=${job%%|*}
  args=${job#*|}
  ta=() tb=()
  for _ in $(seq "$REPS"); do  # alternate, so that machine noise falls on both alike
    # shellcheck disable=SC2086
    ta+=("$(REPS=1 med "$A" $args)")
    # shellcheck disable=SC2086
    tb+=("$(REPS=1 med "$B" $args)")
  done
  a=$(printf '%s\n' "${ta[@]}" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  b=$(printf '%s\n' "${tb[@]}" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  row "$name" "$a" "$b" "$(ratio "$a" "$b")"
done
