#!/usr/bin/env bash
# The paper's noisy-regime table at CPU scale: learners trained at d = 4 on (sigma/tau)^2 in
# {0, 1/16, 1/9, 1/4, 4/9}, three seeds per level, each compared (on prompts of its own noise)
# with OLS and with ridge at every one of those lambdas, per k and over the window k != d, d+1,
# with intervals over seeds and prompts. Expected: each column's minimum is the Bayes ridge.
# Then the fitted members (ridge:fit's lambda against the Bayes lambda), the paper's own task at
# one noise level (d = 8, n = 40, sigma^2 = 1/4, three seeds), and the representation: on one
# learner at 1/4 and one at 4/9, which weight vector each layer carries (w_ols, the Bayes ridge
# w_ridge, one GD step, three Newton steps; w with its ceiling), at the y-token of example k and
# at the x-token of example k+1, at k < d and beyond, against each learner's random-init twin,
# with ridge codelengths (MDL) and the paired linear-MLP margin.
#
# Full profile: the learners live in checkpoints/noisy/ and checkpoints/behaviour/ (committed;
# experiments/queues/*.txt train them). A level uses its 80,000-step seeds once all three have
# finished (the 40,000-step seed-1 run is then the half-budget run), else its 40,000-step seeds
# (half run: the 20,000-step seed 1), else its 20,000-step ones.
source "$(dirname "$0")/lib.sh"
setup_out noisy_regime
if [ "$PROFILE" = full ]; then
  P=2000; Q=100; FIT=500; PP=20000; GRAD=4000; EPOCHS=30; KS=2,3,6,11; KG=3,6
  CLB=0.001,0.002,0.004,0.008,0.016,0.032,0.0625,0.125,0.25,0.5,1
  DESC="d = 4, n = 12, L = 4, H = 64, M = 4"
  CK="$ROOT/checkpoints/noisy"; LEVELS=("0:0" "0.25:1_16" "0.333333333:1_9" "0.5:1_4" "0.666666667:4_9")
else
  P=100; Q=5; FIT=20; PP=600; GRAD=300; EPOCHS=2; KS=2,6,11; KG=3; CLB=0.05,0.1,0.25,0.5,1
  CK="$RUNS"; LEVELS=("0:0" "0.5:1_4"); DESC="quick profile: d = 4, n = 12, L = 1, H = 16, M = 2"
  for pair in "${LEVELS[@]}"; do
    sigma=${pair%%:*}; name=${pair##*:}
    for s in 1 2; do
      run "$ICLPROBE" train --d 4 --n 12 --layers 1 --hidden 16 --heads 2 --batch 32 --lr 1e-3 --seed $s \
        --eval-prompts 100 --noise "$sigma" --steps 40 --warmup 4 --eval-every 20 --save-every 40 --threads 1 \
        --quiet --force --out "$CK/noise_${name}_s$s.h5" > /dev/null
    done
  done
  run "$ICLPROBE" train --d 4 --n 12 --layers 1 --hidden 16 --heads 2 --batch 32 --lr 1e-3 --seed 1 \
    --eval-prompts 100 --noise 0.5 --steps 20 --warmup 2 --eval-every 20 --save-every 20 --threads 1 \
    --quiet --force --out "$CK/noise_1_4_half.h5" > /dev/null
fi
# A level's learners: "FILES HALF STEPS" (FILES comma-separated).
level_cell() {
  local name=$1 f files=""
  if [ "$PROFILE" = quick ]; then echo "$CK/noise_${name}_s1.h5,$CK/noise_${name}_s2.h5 $CK/noise_${name}_half.h5 40"; return; fi
  if files=$(finished_seeds "$CK/noise_${name}_80k_s"{1,2,3}.h5); then echo "$files $CK/noise_${name}_40k_s1.h5 80000"; return; fi
  if files=$(finished_seeds "$CK/noise_${name}_40k_s"{1,2,3}.h5); then echo "$files $CK/noise_$name.h5 40000"; return; fi
  for f in "$CK/noise_$name.h5" "$CK/noise_${name}_s2.h5" "$CK/noise_${name}_s3.h5"; do
    finished "$f" || { echo "experiments/noisy_regime: $f is missing or unfinished (experiments/queues/noise_seeds.txt trains it)" >&2; exit 2; }
    files="${files:+$files,}$f"
  done
  echo "$files $CK/noise_${name}_half.h5 20000"
}
CELLARGS=(); declare -A STEPS_OF FIRST_OF FILES_OF HALF_OF
for pair in "${LEVELS[@]}"; do
  name=${pair##*:}
  read -r files half steps <<< "$(level_cell "$name")"
  CELLARGS+=(--cell "n$name=$files"); [ -f "$half" ] && CELLARGS+=(--half "$half")
  STEPS_OF[$name]=$steps; FIRST_OF[$name]=${files%%,*}; FILES_OF[$name]=$files; HALF_OF[$name]=$half
done
# The paper's table: OLS and ridge at each training lambda, on a prompt seed (21) no earlier
# result used.
run "$ICLPROBE" compare "${CELLARGS[@]}" --learners ols,ridge:0.0625,ridge:0.111111111,ridge:0.25,ridge:0.444444444 \
  --prompts $P --ilwd-prompts $Q --seed 21 --threads 1 --quiet --force --plot-dir "$OUT/figs" \
  --csv "$OUT/compare.csv" > "$OUT/compare.txt"
# The fitted members: which lambda (and GD / Newton member) each seed is closest to.
# --budget-verdicts: each column's half-budget run compared as a cell of its own on the same prompts
# (does the fitted verdict change with the training length?).
HV=(); for a in "${CELLARGS[@]}"; do [ "$a" = --half ] && HV=(--budget-verdicts); done
run "$ICLPROBE" compare "${CELLARGS[@]}" "${HV[@]}" --learners bayes,ridge:fit,gd:fit:1..16,newton:fit \
  --prompts $P --ilwd-prompts $Q --fit-prompts $FIT --seed 21 --threads 1 --quiet --force \
  --csv "$OUT/compare_fit.csv" > "$OUT/compare_fit.txt"
# The paper's task (d = 8, n = 40) at sigma^2 = 1/4.
D8=""
if [ "$PROFILE" = full ]; then
  B="$ROOT/checkpoints/behaviour"
  D8="d8noisy=$B/d8_n40_l8_h64_noise_1_4_s1.h5,$B/d8_n40_l8_h64_noise_1_4_s2.h5,$B/d8_n40_l8_h64_noise_1_4_s3.h5"
  run "$ICLPROBE" compare --cell "$D8" --half "$B/d8_n40_l8_h64_noise_1_4_half.h5" \
    --learners ols,ridge:0.0625,ridge:0.25,ridge:1,ridge:fit,gd:fit:1..16,newton:fit --prompts $P --ilwd-prompts $Q \
    --fit-prompts $FIT --seed 21 --threads 1 --quiet --force --plot-dir "$OUT/figs_d8" --csv "$OUT/compare_d8.csv" > "$OUT/compare_d8.txt"
fi

# Which weight vector the layers carry, on seed 1 of the 1/4 and 4/9 levels, each against its
# random-init twin (the same initialisation, untrained).
for pair in "0.25:0.5:1_4" "0.444444444:0.666666667:4_9"; do
  lambda=${pair%%:*}; rest=${pair#*:}; sigma=${rest%%:*}; name=${rest#*:}
  ck=${FIRST_OF[$name]:-}; [ -n "$ck" ] || continue
  model=$("$ICLPROBE" inspect "$ck" | sed -n 's/^model *//p')
  arch=$(for key in layers hidden heads; do printf -- '--%s %s ' $key "$(echo "$model" | grep -o "\"$key\":[0-9]*" | cut -d: -f2)"; done)
  stamp="$(sha256sum < "$ck" | cut -c1-64) PP=$PP GRAD=$GRAD EPOCHS=$EPOCHS KS=$KS KG=$KG CLB=$CLB"
  if [ "$PROFILE" = full ] && [ -f "$OUT/stamp_$name" ] && [ "$(cat "$OUT/stamp_$name")" = "$stamp" ] &&
     [ -f "$OUT/probes_noise_$name.h5" ] && [ -f "$OUT/probes_grad_noise_$name.h5" ]; then
    echo "# reused results/noisy_regime/probes_noise_$name.h5 and probes_grad_noise_$name.h5 (made from the same learner by the commands of commands_probes_$name.txt)" >> "$OUT/commands.txt"
  else
    rm -f "$OUT/stamp_$name"; CMDS="$OUT/commands_probes_$name.txt"; : > "$CMDS"
    run "$ICLPROBE" train --d 4 --n 12 $arch --noise "$sigma" --seed 1 --init-only --force --out "$RUNS/init_$name.h5" > /dev/null
    for m in learner init; do
      src=$ck; [ $m = init ] && src="$RUNS/init_$name.h5"
      run "$ICLPROBE" extract -c "$src" --prompts $PP --seed 7 --ridge-lambda "$lambda" \
        --learner-targets gd:0.1,newton:3 --threads 1 --quiet --force --out "$RUNS/acts_${m}_$name.h5" > /dev/null
    done
    run "$ICLPROBE" probe -a "$RUNS/acts_learner_$name.h5" --control "$RUNS/acts_init_$name.h5" \
      --targets w_ols,w_ridge,w_gd_0.1,w_newton_3,w --probes ridge --at both --k $KS --codelength --codelength-blocks $CLB --threads 1 --quiet --force \
      --out "$OUT/probes_noise_$name.h5" --csv "$OUT/probes_noise_$name.csv" > /dev/null
    run "$ICLPROBE" probe -a "$RUNS/acts_learner_$name.h5" --control "$RUNS/acts_init_$name.h5" \
      --targets w_ols,w_ridge,w --probes linear,mlp --k $KG --max-prompts $GRAD --epochs $EPOCHS --threads 1 --quiet --force \
      --out "$OUT/probes_grad_noise_$name.h5" --csv "$OUT/probes_grad_noise_$name.csv" > /dev/null
    rm -f "$RUNS/acts_learner_$name.h5" "$RUNS/acts_init_$name.h5"
    unset CMDS; echo "$stamp" > "$OUT/stamp_$name"
  fi
  cat "$OUT/commands_probes_$name.txt" >> "$OUT/commands.txt"
  for k in ${KS//,/ }; do
    run "$ICLPROBE" report --probes "$OUT/probes_noise_$name.h5" --k $k --compare-targets w_ols,w_ridge,w_gd_0.1,w_newton_3 \
      --force --out "$OUT/probes_noise_${name}_k$k.md" > "$OUT/probes_noise_${name}_k$k.txt"
    run "$ICLPROBE" report --probes "$OUT/probes_noise_$name.h5" --k $k \
      --compare-targets w_ols.query,w_ridge.query,w_gd_0.1.query,w_newton_3.query \
      --force --out "$OUT/probes_noise_${name}_k${k}_query.md" > "$OUT/probes_noise_${name}_k${k}_query.txt"
  done
  for k in ${KG//,/ }; do
    run "$ICLPROBE" report --probes "$OUT/probes_grad_noise_$name.h5" --k $k --compare-probes linear,mlp --force \
      --out "$OUT/probes_grad_noise_${name}_k$k.md" > "$OUT/probes_grad_noise_${name}_k$k.txt"
  done
done
# The files this script wrote before it had seeds, controls and positions.
rm -f "$OUT"/probes_mlp_noise_* "$OUT/compare.linearity.csv" "$OUT/compare_fit.linearity.csv" "$OUT/compare_d8.linearity.csv"

{ echo "## Behaviour: which reference learner each column matches"
  echo
  echo "Columns (cells): training (sigma/tau)^2 = $(for pair in "${LEVELS[@]}"; do printf '%s ' "${pair##*:}"; done)($DESC), seeds differ only in the training seed:"
  for pair in "${LEVELS[@]}"; do name=${pair##*:}; files=${FILES_OF[$name]}; half=${HALF_OF[$name]}
    echo "- **n$name**: $(echo "$files" | tr ',' '\n' | wc -l) seeds of ${STEPS_OF[$name]} steps ($(echo "$files" | tr ',' '\n' | sed -e "s|$ROOT/||" -e "s|$OUT/||" | paste -sd, | sed 's/,/, /g')); excess-error curve over the budgets: $(awk -F, -v cell="n$name" 'NR > 1 && $1 == cell && $2 == "window" {print $15}' "$OUT/compare.verdicts.csv") (half-budget run: $(echo "$half" | sed -e "s|$ROOT/||" -e "s|$OUT/||"))."
  done
  echo
  echo "Each seed compared on $P prompts of seed 21 (a prompt seed no earlier result used) with the column's own noise, against OLS and ridge at each training lambda. Verdicts: the closest learner by mean SPD / d, the runner-up and the paired margin with its 95% interval over seeds, then prompts within a seed (two-stage bootstrap); 'every seed agrees' when each seed's own closest learner is the same. The window is k = 0..11 except k = d and d + 1 in every column, fixed before these learners were scored (there OLS's SPD has no finite mean under noise)."
  echo
  echo "The goal: in each column the Bayes ridge (lambda = sigma^2 / tau^2; OLS for noise 0) is the closest learner over the window, its paired interval against the runner-up excluding 0:"
  echo
  awk -F, 'BEGIN { diag["n0"] = "ols"; diag["n1_16"] = "ridge:0.0625"; diag["n1_9"] = "ridge:0.111111111"; diag["n1_4"] = "ridge:0.25"; diag["n4_9"] = "ridge:0.444444444" }
    NR > 1 && $2 == "window" { n++
      if ($5 == diag[$1] && $12 == 1) { met++; printf "- %s: met; the runner-up %s is farther by %+.2e [%+.2e, %+.2e] over %d seeds%s\n", $1, $7, $9, $10, $11, $4, ($13 == 1 ? ", every seed agreeing" : ", not every seed agreeing (" $14 ")") }
      else if ($5 == diag[$1]) printf "- %s: the Bayes ridge %s is the closest but not significantly: %s is farther by %+.2e [%+.2e, %+.2e] over %d seeds\n", $1, $5, $7, $9, $10, $11, $4
      else printf "- %s: missed: %s is closer than the Bayes ridge %s%s (the closest leads its runner-up %s by %+.2e [%+.2e, %+.2e] over %d seeds)\n", $1, $5, diag[$1], ($7 == diag[$1] ? ", the runner-up" : ""), $7, $9, $10, $11, $4 }
    END { printf "\nMet in %d of %d columns (the goal: 4 of 5).\n", met, n }' "$OUT/compare.verdicts.csv"
  echo
  echo "How far each learner is from the Bayes ridge, where it is not the closest: each column's paired difference (learner - Bayes ridge) per seed is in compare.paired.csv; the per-k SPD / d with intervals over seeds in compare.cells.csv."
  echo
  echo "Mean SPD / d over the window, per seed (* = the seed's minimum with its paired interval over prompts excluding 0, ~ = one that does not):"
  echo; echo '```'; sed -n '/mean SPD \/ d over the window/,/^$/p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```'
  echo
  echo "Excess-error curve over the budgets (each level's seed 1 at half and full budget: the excess SPD / d over the Bayes ridge at each, on its 500 evaluation prompts; the power law fitted, or a plateau):"
  echo; echo '```'; convergence_lines "$OUT/compare.txt"; echo '```'
  echo
  echo "Verdict at every k and over the window, per column:"
  echo; verdict_table "$OUT/compare.verdicts.csv"
  echo; echo "SPD / d per k with 95% intervals over seeds and prompts, one figure per column (noise 0, 1/16, 1/9, 1/4, 4/9):"; echo
  for f in "$OUT"/figs/*.png; do echo "![SPD per k](figs/$(basename "$f"))"; done
  echo
  echo "## Fitted members: which lambda each seed is closest to"
  echo
  echo "The same seeds and prompts against the Bayes ridge (bayes) and the members of three families fitted per seed on the $FIT prompts after the scored ones: ridge:fit (lambda), gd:fit:1..16 (step size and number of steps from 0), newton:fit (Fu et al.'s iteration, scale and steps)."
  echo; echo '```'; fitted_members "$OUT/compare_fit.txt"; echo '```'; echo
  echo "Window verdicts:"; echo
  verdict_table "$OUT/compare_fit.verdicts.csv" | awk 'NR <= 2 || /\*\*window\*\*/'
  echo; echo "At half the steps (each column's half-budget run, seed 1, compared as a cell of its own on the same prompts; its verdict against the column's):"; echo
  half_verdict_lines "$OUT/compare_fit.txt"
  if [ -n "$D8" ]; then
    echo; echo "## The paper's task at sigma^2 = 1/4: d = 8, n = 40"; echo
    echo "Cell d8noisy: L = 8, H = 64, M = 4, 20,000 steps, three seeds ($(echo "${D8#*=}" | tr ',' '\n' | sed "s|$ROOT/||" | paste -sd, | sed 's/,/, /g')); excess-error curve over the budgets: $(awk -F, 'NR > 1 && $2 == "window" {print $15}' "$OUT/compare_d8.verdicts.csv") (half-budget run: checkpoints/behaviour/d8_n40_l8_h64_noise_1_4_half.h5). $P prompts of seed 21 with sigma = 0.5; the Bayes ridge is ridge:0.25; window k = 0..39 except k = 8, 9."
    echo; echo '```'; convergence_lines "$OUT/compare_d8.txt"; fitted_members "$OUT/compare_d8.txt"; echo '```'; echo
    verdict_table "$OUT/compare_d8.verdicts.csv"
    echo; echo "SPD / d per k, mean over seeds with its 95% interval:"; echo
    spd_table "$OUT/compare_d8.cells.csv" d8noisy ols ridge:0.25 ridge:fit gd:fit:1..16 newton:fit
  fi
  echo
  echo "## Representation: which weight vector each layer carries"
  echo
  echo "Seed 1 of the 1/4 and 4/9 columns, $PP prompts each (seed 7; 80/10/10 split), and each learner's random-init twin (the same initialisation, untrained) extracted on the same prompts as its control. Targets: w_ols (minimum-norm OLS), w_ridge (the Bayes ridge, lambda = sigma^2), w_gd_0.1 (one GD step from 0, proportional to X'y), w_newton_3 (three steps of Fu et al.'s iterative Newton), and the true w with its ceiling (w is not compared: for any state, R2(w) = ceiling(w) x R2(w_ridge)). Ridge probes at k = $KS, read at the y-token of example k (state) and at the x-token of example k + 1 (query, where the prediction is read; it does not exist at k = n = 12, hence k = 11); a target is preferred only when its paired margin over the runner-up exceeds the same margin at the embedding and in the control, as a paired difference of differences with its interval. Codelengths: the online (prequential) code of each target given the layer (Voita & Titov 2020), in bits, against the control's. Linear and MLP probes (attention-pooled, first $GRAD prompts, $EPOCHS epochs at most) on the same split give the paired MLP - linear margin, and the same margin in the control."
  for name in 1_4 4_9; do
    [ -f "$OUT/probes_noise_$name.h5" ] && [ -n "${FIRST_OF[$name]:-}" ] || continue
    echo; echo "### noise $name: $(echo "${FIRST_OF[$name]}" | sed -e "s|$ROOT/||" -e "s|$OUT/||")"
    echo; echo "Full reports (R2 of every target by layer with the control and the ceiling of w, where the targets differ, codelengths): probes_noise_${name}_k*.md; linear and MLP: probes_grad_noise_${name}_k*.md."
    for k in ${KS//,/ }; do
      for at in "" _query; do
        where="y-token of example k (state)"; [ -n "$at" ] && where="x-token of example k + 1 (query)"
        echo; echo "#### ridge probes, k = $k, read at the $where"; echo
        echo '```'; grep -E '^Preferred' "$OUT/probes_noise_${name}_k$k$at.txt" || true; echo '```'
        section "**Which target each layer carries best**" "$OUT/probes_noise_${name}_k$k$at.md"
      done
      echo; echo "Codelengths at k = $k (the Bayes ridge weights and OLS, at both positions):"; echo
      for t in w_ridge w_ridge.query w_ols w_ols.query; do
        section "**$t**: online codelength" "$OUT/probes_noise_${name}_k$k.md"
      done
    done
    for k in ${KG//,/ }; do
      echo; echo "#### linear vs MLP (attention-pooled), k = $k"; echo
      echo '```'; grep -E '^mlp against linear' "$OUT/probes_grad_noise_${name}_k$k.txt" || true; echo '```'
    done
  done; } > "$OUT/summary.md"
finish "Noisy regime: OLS vs ridge(lambda) against learners trained with label noise, and what their layers carry" "$OUT/summary.md"
