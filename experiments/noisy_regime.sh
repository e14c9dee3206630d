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
  # The convergence rule's half-budget run (the same recipe, 10,000 steps and 500 warmup), where
  # it was trained (checkpoints/noisy/noise_NAME_half.h5).
  if [ -f "$CK/noise_${name}_half.h5" ]; then CKPTS+=(--half "$CK/noise_${name}_half.h5"); fi
done
run "$ICLPROBE" compare "${CKPTS[@]}" --learners ols,ridge:0.0625,ridge:0.111111111,ridge:0.25,ridge:0.444444444 \
  --prompts $P --ilwd-prompts $Q --seed 11 --threads 1 --quiet --force --plot-dir "$OUT/figs" \
  --csv "$OUT/compare.csv" > "$OUT/compare.txt"

# Which weight vector the layers carry: w_ols, w_ridge(lambda = sigma^2, the Bayes ridge) or w.
for pair in "0.25:0.5:1_4" "0.444444444:0.666666667:4_9"; do
  lambda=${pair%%:*}; rest=${pair#*:}; name=${rest#*:}
  acts="$RUNS/acts_noise_$name.h5"
  # The full profile keeps probes newer than their learner (delete them to redo them).
  if [ "$PROFILE" = full ] && [ "$OUT/probes_noise_$name.h5" -nt "$CK/noise_$name.h5" ] &&
     [ "$OUT/probes_mlp_noise_$name.h5" -nt "$CK/noise_$name.h5" ]; then
    echo "# reused results/noisy_regime/probes_noise_$name.h5 and probes_mlp_noise_$name.h5 (newer than their learner; made by the extract and probe commands of this script, prompt seed 7)" >> "$OUT/commands.txt"
  else
  run "$ICLPROBE" extract -c "$CK/noise_$name.h5" --prompts $PP --seed 7 --ridge-lambda "$lambda" \
    --threads 1 --quiet --force --out "$acts" > /dev/null
  run "$ICLPROBE" probe -a "$acts" --targets w_ols,w_ridge,w --probes ridge --threads 1 --quiet --force \
    --out "$OUT/probes_noise_$name.h5" --csv "$OUT/probes_noise_$name.csv" > /dev/null
  run "$ICLPROBE" probe -a "$acts" --targets w_ols,w_ridge,w --probes mlp --k 6,12 --max-prompts $GRAD \
    --epochs $EPOCHS --threads 1 --quiet --force \
    --out "$OUT/probes_mlp_noise_$name.h5" --csv "$OUT/probes_mlp_noise_$name.csv" > /dev/null
  rm -f "$acts"
  fi
  # Targets are compared with linear probes only (report refuses MLP comparisons: an MLP can
  # compute any of them from the prompt); the MLP probes get their tables.
  for k in 6 12; do
    run "$ICLPROBE" report --probes "$OUT/probes_noise_$name.h5" --k $k --compare-targets --force \
      --out "$OUT/probes_noise_${name}_k$k.md" > "$OUT/probes_noise_${name}_k$k.txt"
    run "$ICLPROBE" report --probes "$OUT/probes_mlp_noise_$name.h5" --k $k --force \
      --out "$OUT/probes_mlp_noise_${name}_k$k.md" > "$OUT/probes_mlp_noise_${name}_k$k.txt"
  done
done

{ echo "Learners: d = 4, n = 12, L = 4, H = 64, M = 4, $STEPS steps each (checkpoints/noisy/ in the full profile; their evaluation logs, per k against the Bayes ridge of their own noise, in checkpoints/noisy/*.train.csv)."
  echo
  echo "## Behaviour: mean SPD / d to each reference learner"
  echo
  echo "Columns: training (sigma/tau)^2 = 0, 1/16, 1/9, 1/4, 4/9 (checkpoints noise_0 ... noise_4_9)."
  echo "Cells: mean SPD / d over the window k = 0..11 except k = d and d+1 in every column (fixed before the learners were scored: there OLS's SPD has no finite mean under noise and jumps to 0 without it) against each reference learner, on $P prompts (seed 11, a prompt seed no earlier result used) with the column's noise; * = a column minimum whose paired 95% bootstrap interval against the runner-up excludes 0, ~ = one that does not. Below it, each row's paired difference from the column's diagonal ridge. One learner (seed 1) per column: every interval is over prompts only."
  echo; echo '```'; sed -n '/mean SPD \/ d over the window/,$p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```'
  echo
  echo "The goal (the Bayes ridge, λ = σ²/τ², OLS for noise 0, is the column's minimum with its paired interval against the runner-up excluding 0), column by column:"
  echo
  awk -F, 'NR > 1 { diag[$1] = $4; if ($9 == "1" || $8 == "1") { best[$1] = $2; sig[$1] = $9 } if ($2 != $4) { d = $5 + 0; if (!($1 in near) || d < near[$1]) { near[$1] = d; nearname[$1] = $2; lo[$1] = $6; hi[$1] = $7 } } if (!($1 in order)) { order[$1] = ++n; names[n] = $1 } }
    END { met = 0
      for (i = 1; i <= n; i++) { m = names[i]
        if (best[m] == diag[m] && sig[m] == "1") { met++; printf "- %s: met; the nearest other learner, %s, is farther by %+.2e [%+.2e, %+.2e]\n", m, nearname[m], near[m], lo[m], hi[m] }
        else if (best[m] == diag[m]) printf "- %s: the diagonal %s is the minimum but not significantly (%s farther by %+.2e [%+.2e, %+.2e])\n", m, diag[m], nearname[m], near[m], lo[m], hi[m]
        else printf "- %s: missed; %s is closer than the diagonal %s by %.2e [%.2e, %.2e] (paired)%s\n", m, nearname[m], diag[m], -near[m], -hi[m], -lo[m], (hi[m] >= 0 ? ": a tie, the interval includes 0" : "") }
      printf "\nMet in %d of %d columns (the goal: 4 of 5).\n", met, n }' "$OUT/compare.paired.csv"
  echo
  echo "Convergence of each learner (its half-budget run: the same recipe, half the steps and warmup; rule: at every k != d, d+1 the half run's held-out error / d within max(5%, the paired 95% interval) of the full run's, on its 500 evaluation prompts):"
  echo; echo '```'; { grep -E '^(convergence of|  (not )?converged:)' "$OUT/compare.txt" || echo "no half-budget runs: convergence untested"; } | sed "s|$ROOT/||g"; echo '```'
  echo
  echo "Verdict at every k and over the window, per column (closest reference learner, runner-up, paired margin with its 95% interval over prompts):"
  echo; verdict_table "$OUT/compare.verdicts.csv"
  echo; echo "SPD / d per k with 95% intervals, one figure per column (noise 0, 1/16, 1/9, 1/4, 4/9):"; echo
  for f in "$OUT"/figs/spd_cell*.png; do echo "![SPD per k](figs/$(basename "$f"))"; done
  echo
  echo "## Representation: which weight vector each layer carries"
  echo
  echo "Ridge probes on $PP prompts (seed 7; 10% test split), MLP probes on the first $GRAD, of the learners trained at (sigma/tau)^2 = 1/4 and 4/9; targets w_ols, w_ridge with lambda = sigma^2 (the Bayes ridge of the task) and the true w (its ceiling in the tables). Targets are compared with the ridge probe only (w is not compared: R2(w) = ceiling(w) x R2(w_ridge) for any state); a target is preferred only when its paired margin exceeds the same margin at the embedding (and in any control probed). No control network is probed here yet."
  for name in 1_4 4_9; do
    for k in 6 12; do
      echo; echo "### noise_$name, ridge probe, k = $k"; echo
      echo '```'; grep '^Preferred target' "$OUT/probes_noise_${name}_k$k.txt" || true; echo '```'
      sed -n '/Which target each layer carries best/,$p' "$OUT/probes_noise_${name}_k$k.md"
    done
  done; } > "$OUT/summary.md"
finish "Noisy regime: OLS vs ridge(lambda) against learners trained with label noise, and what their layers carry" "$OUT/summary.md"
