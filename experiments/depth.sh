#!/usr/bin/env bash
# Paper Fig. 3 at CPU scale: learners of depth L in {1, 2, 4, 8} at fixed width (H = 64, d = 4),
# noiseless; which classical learner each depth matches best.
source "$(dirname "$0")/lib.sh"
setup_out depth
if [ "$PROFILE" = full ]; then STEPS=6000; P=2000; Q=100; else STEPS=60; P=100; Q=5; fi
CKPTS=()
for L in 1 2 4 8; do
  ck="$RUNS/depth_l$L.h5"
  run "$ICLPROBE" train --d 4 --n 12 --layers $L --hidden 64 --heads 4 --batch 64 --lr 1e-3 --seed 1 \
    --eval-prompts 500 --steps $STEPS --warmup $((STEPS / 10)) --eval-every $((STEPS / 4)) --save-every $STEPS \
    --threads 1 --quiet --force --out "$ck" > "$RUNS/depth_l$L.log"
  CKPTS+=(-c "$ck")
done
run "$ICLPROBE" compare "${CKPTS[@]}" --learners ols,ridge:0.1,ridge:0.5,gd:0.02,gd:0.05,gd:0.1,sgd:0.03,sgd:0.1,knn:3 \
  --prompts $P --ilwd-prompts $Q --seed 3 --quiet --force --csv "$OUT/compare.csv" > "$OUT/compare.txt"
{ echo "Columns: depth L = 1, 2, 4, 8 (H = 64, M = 4, d = 4, n = 12, $STEPS steps each)."
  echo "Cells: mean SPD / d over the window k = 0..11 except k = d and d+1; * marks the closest learner of each depth when its paired 95% bootstrap interval against the runner-up excludes 0, ~ when it does not."
  echo; echo '```'; sed -n '/mean SPD \/ d over the window/,$p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```';
  echo; echo "Per-depth detail (SPD and ILWD, k < d and all k):"; echo; echo '```';
  sed -n '/against:/,/implicit linear fit/p' "$OUT/compare.txt"; echo '```'; } > "$OUT/summary.md"
finish "Depth: which learner does a transformer of each depth match?" "$OUT/summary.md"
