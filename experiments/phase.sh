#!/usr/bin/env bash
# Issue 19: the paper's third experiment at CPU scale. Learners on a grid of depth L x width H
# (d = 4, n = 12, noiseless), each compared with the best-fitting member of each algorithm
# family (gd:fit, sgd:fit, ridge:fit, fitted per learner on prompts disjoint from the scored
# ones) and with OLS and kNN; the closest family per (L, H), a heat map, and the commands.
# The full profile's learners live in checkpoints/phase/ (committed: a session can end before
# the grid is trained) and are trained, or resumed, only where unfinished.
source "$(dirname "$0")/lib.sh"
setup_out phase
if [ "$PROFILE" = full ]; then
  # PHASE_DEPTHS="8" trains (or compares) a subset of the depths, e.g. two chains on two cores.
  # PHASE_WIDTHS likewise for widths.
  read -ra DEPTHS <<< "${PHASE_DEPTHS:-1 2 4 8}"; read -ra WIDTHS <<< "${PHASE_WIDTHS:-8 16 32 64}"; STEPS=6000; P=2000; Q=100; FIT=500
  CKDIR="$ROOT/checkpoints/phase"
else
  DEPTHS=(1 2); WIDTHS=(8 16); STEPS=20; P=100; Q=5; FIT=50
  CKDIR="$RUNS"
fi
mkdir -p "$CKDIR"
# Training: the recipe of experiments/depth.sh (H = 64 there), M = 4 heads at every width.
for L in "${DEPTHS[@]}"; do
  for H in "${WIDTHS[@]}"; do
    ck="$CKDIR/l${L}_h$H.h5"
    # Training commands are kept beside the learners (the comparison's commands.txt is
    # rewritten by every run).
    CMDS="$CKDIR/commands.txt"
    if [ -f "$ck" ] && ! finished "$ck" && "$ICLPROBE" inspect "$ck" | grep -q "^resumable *yes"; then
      run "$ICLPROBE" train --resume --threads 1 --quiet --out "$ck" >> "$CKDIR/l${L}_h$H.log"
    elif [ ! -f "$ck" ]; then
      run "$ICLPROBE" train --d 4 --n 12 --layers $L --hidden $H --heads 4 --batch 64 --lr 1e-3 --seed 1 \
        --eval-prompts 500 --steps $STEPS --warmup $((STEPS / 10)) --eval-every $((STEPS / 4)) \
        --save-every $(( STEPS >= 1000 ? 500 : STEPS )) --threads 1 --quiet --out "$ck" > "$CKDIR/l${L}_h$H.log"
    fi
    unset CMDS
    if [ -n "${TRAIN_ONLY:-}" ]; then continue; fi
    if "$ICLPROBE" inspect "$ck" | awk '$1 == "step" && $2 != $4 {bad = 1} END {exit !bad}'; then
      echo "experiments/phase: $ck is unfinished; run again to resume it" >&2; exit 2
    fi
  done
done
if [ -n "${TRAIN_ONLY:-}" ]; then echo "experiments/phase: trained; run again without TRAIN_ONLY for the comparison" >&2; exit 0; fi
# Comparison: one compare per learner (each fits its own family members).
LEARNERS="ols,ridge:fit,gd:fit,gd:fit:1..16,sgd:fit,newton:fit,knn:3"
echo "L,H,closest,closest_value,closest_spd,runner_up,runner_up_value,diff,diff_lo,diff_hi,significant,ridge_lambda,converged" > "$OUT/phase.csv"
for L in "${DEPTHS[@]}"; do
  for H in "${WIDTHS[@]}"; do
    ck="$CKDIR/l${L}_h$H.h5"
    # The convergence rule's half-budget run of this cell, where one was trained (the depth row
    # and the L = 4 width column: checkpoints/phase/lL_hH_half.h5).
    half=(); if [ -f "$CKDIR/l${L}_h${H}_half.h5" ]; then half=(--half "$CKDIR/l${L}_h${H}_half.h5"); fi
    cmd=(compare -c "$ck" "${half[@]}" --learners $LEARNERS --prompts $P --ilwd-prompts $Q --fit-prompts $FIT
      --seed 11 --threads 1 --quiet --force --csv "$OUT/compare_l${L}_h$H.csv")
    # The full profile keeps a comparison made by the same command and newer than its learner
    # (delete it to redo it).
    stamp="$OUT/compare_l${L}_h$H.cmd"
    if [ "$PROFILE" = full ] && [ -s "$OUT/compare_l${L}_h$H.txt" ] && [ "$OUT/compare_l${L}_h$H.txt" -nt "$ck" ] &&
       [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${cmd[*]//$ROOT\//}" ]; then
      echo "iclprobe ${cmd[*]//$ROOT\//}" >> "$OUT/commands.txt"
    else
      run "$ICLPROBE" "${cmd[@]}" > "$OUT/compare_l${L}_h$H.txt"
      echo "${cmd[*]//$ROOT\//}" > "$stamp"
    fi
    # One row from the window's verdict and the fitted values (compare's tidy CSVs): a fitted
    # member's value is its lambda or alpha, with its step count where it has several.
    awk -F, -v L=$L -v H=$H 'FNR == NR { if (FNR > 1 && $8 != "") { v = sprintf("%.4g", $8); if ($9 != "" && $9 != 1) v = v " x" $9; val[$2] = v; if ($2 == "ridge:fit") lam = $8 } next }
      FNR > 1 && $2 == "window" {
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%s,%s\n", L, H, $5, val[$5], $6, $7, val[$7], $9, $10, $11, $12, lam, $15
      }' "$OUT/compare_l${L}_h$H.csv" "$OUT/compare_l${L}_h$H.verdicts.csv" >> "$OUT/phase.csv"
  done
done
# The heat map: colour = log10 of the fitted ridge lambda (ridge with lambda far above the
# eigenvalues of X'X predicts like one GD step, x'X'y / lambda; lambda -> 0 is OLS), label = the
# closest family and its fitted value (gnuplot, no shell).
if command -v gnuplot > /dev/null; then
  awk -F, 'NR > 1 {
      f = $3; sub(/:.*/, "", f)
      label = f; if ($4 != "") label = label "\\n" $4; if (!$11) label = label "\\n(~)"; if ($13 == "no") label = label "\\n(not conv.)"
      printf "%d %d %.4f \"%s\"\n", log($2) / log(2) - 3, log($1) / log(2), log($12) / log(10), label
    }' "$OUT/phase.csv" > "$OUT/phase.dat"
  cat > "$OUT/phase.gp" <<'GP'
# gnuplot script written by experiments/phase.sh; rerun with: gnuplot phase.gp
set terminal pngcairo size 760,600 noenhanced
set output 'phase.png'
set title "closest family by depth and width (d = 4, noiseless; ~: runner-up within noise)\ncolour: log10 of the fitted ridge lambda (high: like one GD step; low: like OLS)"
set xlabel 'hidden size H'
set ylabel 'layers L'
set xtics ('8' 0, '16' 1, '32' 2, '64' 3)
set ytics ('1' 0, '2' 1, '4' 2, '8' 3)
set xrange [-0.5:3.5]
set yrange [-0.5:3.5]
set cbrange [-2.2:2.2]
set cblabel 'log10 fitted ridge lambda'
set palette defined (-2.2 '#a63603', -0.5 '#fd8d3c', 0.7 '#fdd0a2', 2.2 '#3182bd')
unset key
plot 'phase.dat' using 1:2:3 with image, '' using 1:2:4 with labels font ',10'
GP
  (cd "$OUT" && gnuplot phase.gp)
fi
{ echo "Learners: depth L in {${DEPTHS[*]}} x width H in {${WIDTHS[*]}} (M = 4 heads, d = 4, n = 12, noiseless,"
  echo "$STEPS steps, seed 1; one learner per cell, so every interval is over prompts only). Each is compared on $P prompts"
  echo "(seed 11, a prompt seed no earlier result used) with OLS, kNN(3) and each family's member closest to it:"
  echo "gd:fit (one GD step), gd:fit:1..16 (step size and number of steps), sgd:fit (one pass), newton:fit"
  echo "(Fu et al.'s iterative Newton, scale and steps), ridge:fit, fitted on the $FIT prompts that follow the scored ones. Closest ="
  echo "least mean SPD / d over the window k = 0..11 except k = d and d+1; the runner-up's paired difference has a 95% bootstrap"
  echo "interval over the $P prompts (significant when it excludes 0). Converged: the convergence rule on the"
  echo "cell's half-budget run (lL_hH_half.h5: the same recipe, half the steps and warmup), trained for the"
  echo "depth row (H = 64) and the width column (L = 4); 'untested' elsewhere."
  echo
  echo "Reading the fitted lambda: ridge(lambda) predicts x'(X'X + lambda I)^-1 X'y. Far above the"
  echo "eigenvalues of X'X (about k(1 +- sqrt(d/k))^2, at most about 30 at k = 12, d = 4) that is"
  echo "x'X'y / lambda to first order, the prediction 2 alpha x'X'y of one GD step from 0 with"
  echo "alpha = 1 / (2 lambda): there the fitted families nearly coincide and a large lambda means"
  echo "GD-like. lambda -> 0 is OLS. The heat map's colour is log10 of the fitted lambda."
  echo; echo '![phase diagram](phase.png)'; echo
  echo '| L | H | closest | fitted value | SPD / d | runner-up | its value | runner-up − closest [95%] | converged |'
  echo '|---:|---:|---|---:|---:|---|---:|---|---|'
  awk -F, 'NR > 1 { printf "| %s | %s | %s | %s | %.3e | %s | %s | %+.2e [%+.2e, %+.2e]%s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 ? "" : " (within noise)", $13 }' "$OUT/phase.csv"
} > "$OUT/summary.md"
{ echo; echo "Training commands (checkpoints/phase/commands.txt; resumed runs appear once per resume):"; echo
  echo '```sh'; sed "s|$ROOT/||g" "$CKDIR/commands.txt" 2>/dev/null; echo '```'; } >> "$OUT/summary.md"
finish "Phase diagram: which algorithm family does a learner of each depth and width match?" "$OUT/summary.md"
