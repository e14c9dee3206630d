#!/usr/bin/env bash
# The paper's noisy-regime table at CPU scale: learners trained at d = 4 on (sigma/tau)^2 in
# {0, 1/16, 1/9, 1/4, 4/9}, each compared (on prompts of its own noise) with OLS and with
# ridge at every one of those lambdas. Expected: each column's minimum is the Bayes ridge.
source "$(dirname "$0")/lib.sh"
setup_out noisy_regime
if [ "$PROFILE" = full ]; then STEPS=6000; P=2000; Q=100; else STEPS=60; P=100; Q=5; fi
ARCH="--d 4 --n 12 --layers 4 --hidden 64 --heads 4 --batch 64 --lr 1e-3 --seed 1 --eval-prompts 500"
CKPTS=()
for pair in "0:0" "0.25:1_16" "0.333333333:1_9" "0.5:1_4" "0.666666667:4_9"; do
  sigma=${pair%%:*}; name=${pair##*:}
  ck="$RUNS/noise_$name.h5"
  run "$ICLPROBE" train $ARCH --noise "$sigma" --steps $STEPS --warmup $((STEPS / 10)) --eval-every $((STEPS / 4)) \
    --save-every $STEPS --threads 1 --quiet --force --out "$ck" > "$RUNS/noise_$name.log"
  CKPTS+=(-c "$ck")
done
run "$ICLPROBE" compare "${CKPTS[@]}" --learners ols,ridge:0.0625,ridge:0.111111111,ridge:0.25,ridge:0.444444444 \
  --prompts $P --ilwd-prompts $Q --seed 3 --quiet --force --csv "$OUT/compare.csv" > "$OUT/compare.txt"
{ echo "Columns: training (sigma/tau)^2 = 0, 1/16, 1/9, 1/4, 4/9 (checkpoints noise_0 ... noise_4_9)."
  echo "Cells: mean SPD / d over k = 0..11 (k = d and d+1 left out in noisy columns, where OLS's SPD has no finite mean) against each reference learner, on prompts with the column's noise; * = a column minimum whose paired 95% bootstrap interval against the runner-up excludes 0, ~ = one that does not. Below it, each row's paired difference from the column's diagonal ridge."
  echo; echo '```'; sed -n '/mean SPD \/ d over k/,$p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```'; } > "$OUT/summary.md"
finish "Noisy regime: OLS vs ridge(lambda) against learners trained with label noise" "$OUT/summary.md"
