#!/usr/bin/env bash
# Paper Fig. 3 at CPU scale: learners of depth L in {1, 2, 4, 8} at fixed width (H = 64, d = 4,
# n = 12, noiseless); which classical learner, or fitted family member, each depth matches, at
# every k and over the window k != d, d+1, with each learner's convergence evidence.
# Full profile: the H = 64 column of the phase grid (checkpoints/phase/lL_h64.h5, the recipe
# this script used to train; one seed each) and their half-budget runs (lL_h64_half.h5).
source "$(dirname "$0")/lib.sh"
setup_out depth
LEARNERS="ols,ridge:0.1,ridge:fit,gd:fit,gd:fit:1..16,sgd:fit,newton:fit,knn:3"
CKPTS=(); HALVES=()
if [ "$PROFILE" = full ]; then
  P=2000; Q=100; FIT=500; STEPS=6000
  for L in 1 2 4 8; do
    ck="$ROOT/checkpoints/phase/l${L}_h64.h5"
    finished "$ck" || { echo "experiments/depth: $ck is missing or unfinished; run experiments/phase.sh first" >&2; exit 2; }
    CKPTS+=(-c "$ck")
    half="$ROOT/checkpoints/phase/l${L}_h64_half.h5"
    if [ -f "$half" ]; then HALVES+=(--half "$half"); fi
  done
else
  P=100; Q=5; FIT=20; STEPS=60
  for L in 1 2 4 8; do
    ck="$RUNS/l${L}_h64.h5"
    run "$ICLPROBE" train --d 4 --n 12 --layers $L --hidden 64 --heads 4 --batch 64 --lr 1e-3 --seed 1 \
      --eval-prompts 500 --steps $STEPS --warmup $((STEPS / 10)) --eval-every $((STEPS / 4)) --save-every $STEPS \
      --threads 1 --quiet --force --out "$ck" > /dev/null
    CKPTS+=(-c "$ck")
  done
  run "$ICLPROBE" train --d 4 --n 12 --layers 1 --hidden 64 --heads 4 --batch 64 --lr 1e-3 --seed 1 \
    --eval-prompts 500 --steps $((STEPS / 2)) --warmup $((STEPS / 20)) --eval-every $((STEPS / 4)) \
    --save-every $((STEPS / 2)) --threads 1 --quiet --force --out "$RUNS/l1_h64_half.h5" > /dev/null
  HALVES+=(--half "$RUNS/l1_h64_half.h5")
fi
run "$ICLPROBE" compare "${CKPTS[@]}" "${HALVES[@]}" --learners "$LEARNERS" --prompts $P --ilwd-prompts $Q \
  --fit-prompts $FIT --seed 11 --threads 1 --quiet --force --plot-dir "$OUT/figs" --csv "$OUT/compare.csv" > "$OUT/compare.txt"
{ echo "Columns: depth L = 1, 2, 4, 8 (H = 64, M = 4, d = 4, n = 12, noiseless, $STEPS steps each, seed 1: one learner per depth, so every interval is over prompts only)."
  echo "Each compared on $P prompts of seed 11 (a prompt seed no earlier result used) with $LEARNERS; the :fit members fitted per learner on the $FIT prompts after the scored ones."
  echo "Cells: mean SPD / d over the window k = 0..11 except k = d and d+1 (fixed before these learners were scored); * marks the closest learner of each depth when its paired 95% bootstrap interval against the runner-up excludes 0, ~ when it does not."
  echo; echo '```'; sed -n '/mean SPD \/ d over the window/,/^$/p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```'
  echo; echo "Convergence of each learner (its half-budget run: the same recipe with half the steps and warmup; rule: at every k != d, d+1 the half run's held-out error / d within max(5%, the paired 95% interval) of the full run's):"; echo
  echo '```'; { grep -E '^(convergence of|  (not )?converged:)' "$OUT/compare.txt" || echo "no half-budget runs: convergence untested"; } | sed "s|$ROOT/||g"; echo '```'
  echo; echo "Fitted members:"; echo; echo '```'; grep -E '^([a-z]+:fit(:[0-9.]+)?: |[^ ]+ \(noise .*against:$)' "$OUT/compare.txt" | sed 's/ (noise.*against:$/:/'; echo '```'
  echo; echo "Verdict at every k and over the window:"; echo
  verdict_table "$OUT/compare.verdicts.csv"
  echo; echo "SPD / d per k with 95% intervals over prompts, one figure per depth (L = 1, 2, 4, 8):"; echo
  for f in "$OUT"/figs/spd_cell*.png; do echo "![SPD per k](figs/$(basename "$f"))"; done; } > "$OUT/summary.md"
rm -f "$OUT/compare.linearity.csv"
finish "Depth: which learner does a transformer of each depth match?" "$OUT/summary.md"
