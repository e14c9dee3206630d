#!/usr/bin/env bash
# The paper's noisy-regime table at CPU scale: learners trained at d = 4 on (sigma/tau)^2 in
# {0, 1/16, 1/9, 1/4, 4/9}, each compared (on prompts of its own noise) with OLS and with
# ridge at every one of those lambdas. Expected: each column's minimum is the Bayes ridge.
# Then the representation: on the 1/4 and 4/9 learners, ridge and MLP probes of w_OLS, the
# Bayes ridge weights w_ridge(lambda = sigma^2) and the true w, and which one each layer
# carries best (paired R2 differences with intervals).
#
# Full profile: the learners live in checkpoints/noisy/ (committed). A finished one is reused,
# an unfinished one (committed with /train_state) is resumed, a missing one is trained.
source "$(dirname "$0")/lib.sh"
setup_out noisy_regime
if [ "$PROFILE" = full ]; then
  STEPS=20000; WARMUP=1000; EVAL=1000; SAVE=1000; P=2000; Q=100; PP=20000; GRAD=4000; EPOCHS=30
  CK="$ROOT/checkpoints/noisy"
else
  STEPS=60; WARMUP=6; EVAL=30; SAVE=60; P=100; Q=5; PP=400; GRAD=200; EPOCHS=2; CK="$RUNS"
fi
mkdir -p "$CK"
# --shards 1: the whole-batch arithmetic of the runs begun before shards existed, for all five.
ARCH="--d 4 --n 12 --layers 4 --hidden 64 --heads 4 --batch 64 --shards 1 --lr 1e-3 --seed 1 --eval-prompts 500"
LEVELS=("0:0" "0.25:1_16" "0.333333333:1_9" "0.5:1_4" "0.666666667:4_9")
CKPTS=()
for pair in "${LEVELS[@]}"; do
  sigma=${pair%%:*}; name=${pair##*:}
  ck="$CK/noise_$name.h5"
  if [ -f "$ck" ] && "$ICLPROBE" inspect "$ck" | awk '$1 == "step" && $2 == $4 {ok = 1} END {exit !ok}'; then
    echo "experiments/noisy_regime: reusing the finished $ck" >&2
    echo "# reused $(basename "$ck"), made by: iclprobe train $ARCH --noise $sigma --steps $STEPS --warmup $WARMUP --eval-every $EVAL --save-every $SAVE --threads 1 --quiet --out ${ck//$ROOT\//}" >> "$OUT/commands.txt"
  elif [ -f "$ck" ]; then
    run "$ICLPROBE" train --resume --threads 1 --quiet --out "$ck" >> "$CK/noise_$name.log"
  else
    run "$ICLPROBE" train $ARCH --noise "$sigma" --steps $STEPS --warmup $WARMUP --eval-every $EVAL \
      --save-every $SAVE --threads 1 --quiet --out "$ck" > "$CK/noise_$name.log"
  fi
  CKPTS+=(-c "$ck")
done
run "$ICLPROBE" compare "${CKPTS[@]}" --learners ols,ridge:0.0625,ridge:0.111111111,ridge:0.25,ridge:0.444444444 \
  --prompts $P --ilwd-prompts $Q --seed 3 --quiet --force --csv "$OUT/compare.csv" > "$OUT/compare.txt"

# Which weight vector the layers carry: w_ols, w_ridge(lambda = sigma^2, the Bayes ridge) or w.
for pair in "0.25:0.5:1_4" "0.444444444:0.666666667:4_9"; do
  lambda=${pair%%:*}; rest=${pair#*:}; name=${rest#*:}
  acts="$RUNS/acts_noise_$name.h5"
  run "$ICLPROBE" extract -c "$CK/noise_$name.h5" --prompts $PP --seed 7 --ridge-lambda "$lambda" \
    --threads 1 --quiet --force --out "$acts" > /dev/null
  run "$ICLPROBE" probe -a "$acts" --targets w_ols,w_ridge,w --probes ridge --threads 1 --quiet --force \
    --out "$OUT/probes_noise_$name.h5" --csv "$OUT/probes_noise_$name.csv" > /dev/null
  run "$ICLPROBE" probe -a "$acts" --targets w_ols,w_ridge,w --probes mlp --k 6,12 --max-prompts $GRAD \
    --epochs $EPOCHS --threads 1 --quiet --force \
    --out "$OUT/probes_mlp_noise_$name.h5" --csv "$OUT/probes_mlp_noise_$name.csv" > /dev/null
  rm -f "$acts"
  for probes in probes_noise probes_mlp_noise; do
    for k in 6 12; do
      run "$ICLPROBE" report --probes "$OUT/${probes}_$name.h5" --k $k --compare-targets --force \
        --out "$OUT/${probes}_${name}_k$k.md" > "$OUT/${probes}_${name}_k$k.txt"
    done
  done
done

{ echo "Learners: d = 4, n = 12, L = 4, H = 64, M = 4, $STEPS steps each (checkpoints/noisy/ in the full profile; their evaluation logs, per k against the Bayes ridge of their own noise, in checkpoints/noisy/*.train.csv)."
  echo
  echo "## Behaviour: mean SPD / d to each reference learner"
  echo
  echo "Columns: training (sigma/tau)^2 = 0, 1/16, 1/9, 1/4, 4/9 (checkpoints noise_0 ... noise_4_9)."
  echo "Cells: mean SPD / d over the window k = 0..11 except k = d and d+1 in every column (fixed before the learners were scored: there OLS's SPD has no finite mean under noise and jumps to 0 without it) against each reference learner, on $P prompts (seed 3) with the column's noise; * = a column minimum whose paired 95% bootstrap interval against the runner-up excludes 0, ~ = one that does not. Below it, each row's paired difference from the column's diagonal ridge."
  echo; echo '```'; sed -n '/mean SPD \/ d over the window/,$p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```'
  echo
  echo "## Representation: which weight vector each layer carries"
  echo
  echo "Ridge probes on $PP prompts (seed 7; 10% test split), MLP probes on the first $GRAD, of the learners trained at (sigma/tau)^2 = 1/4 and 4/9; targets w_ols, w_ridge with lambda = sigma^2 (the Bayes ridge of the task) and the true w. R2 with 95% bootstrap intervals over test prompts; the margin is the paired difference of R2 between the best target and the runner-up."
  for name in 1_4 4_9; do
    for probes in probes_noise probes_mlp_noise; do
      for k in 6 12; do
        echo; echo "### noise_$name, $( [ $probes = probes_noise ] && echo ridge || echo MLP ) probe, k = $k"; echo
        echo '```'; grep '^Best-carried' "$OUT/${probes}_${name}_k$k.txt"; echo '```'
        sed -n '/Which target each layer carries best/,$p' "$OUT/${probes}_${name}_k$k.md"
      done
    done
  done; } > "$OUT/summary.md"
finish "Noisy regime: OLS vs ridge(lambda) against learners trained with label noise, and what their layers carry" "$OUT/summary.md"
