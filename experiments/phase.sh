#!/usr/bin/env bash
# The paper's third experiment at CPU scale. Learners on a grid of depth L x width H
# (d = 4, n = 12, noiseless), each compared with the best-fitting member of each algorithm
# family (gd:fit, sgd:fit, ridge:fit, fitted per learner on prompts disjoint from the scored
# ones) and with OLS and kNN; the closest family per (L, H), a heat map, and the commands.
# The full profile's learners live in checkpoints/phase/ (committed: training can stop before
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
# Comparison: one compare per cell (each fits its own family members). The depth row (H = 64)
# and the width column (L = 4) have three seeds of 20,000 steps each and a half-budget run
# (checkpoints/depth/; L = 8, H = 64: the shipped learner and its family); the other cells use
# their single 20,000-step learner of the same recipe where it has been trained (checkpoints/depth/
# d4_lL_hH_s1.h5, with a 10,000-step half run at L = 1, 2), else their single 6,000-step learner
# of checkpoints/phase/ (convergence untested).
LEARNERS="ols,ridge:fit,gd:fit,gd:fit:1..16,sgd:fit,newton:fit,knn:3"
cell_files() {  # L H: the cell's checkpoints (comma-separated), its half run, its steps
  local L=$1 H=$2 f files=""
  if [ "$PROFILE" = full ] && [ "$L" = 8 ] && [ "$H" = 64 ]; then
    echo "$ROOT/checkpoints/d4_l8_h64.h5,$ROOT/checkpoints/family/d4_l8_h64_s2.h5,$ROOT/checkpoints/family/d4_l8_h64_s3.h5,$ROOT/checkpoints/family/d4_l8_h64_s4.h5 $ROOT/checkpoints/family/d4_l8_h64_half.h5 20000"
    return
  fi
  if [ "$PROFILE" = full ] && { [ "$H" = 64 ] || [ "$L" = 4 ]; }; then
    for s in 1 2 3; do
      f="$ROOT/checkpoints/depth/d4_l${L}_h${H}_s$s.h5"
      finished "$f" || { echo "experiments/phase: $f is missing or unfinished (experiments/train_queue.sh trains it)" >&2; exit 2; }
      files="${files:+$files,}$f"
    done
    echo "$files $ROOT/checkpoints/depth/d4_l${L}_h${H}_half.h5 20000"
    return
  fi
  # Off the row and the column: the cell's 20,000-step learners of the row's recipe, once
  # trained — seeds 1-3 where all three are (experiments/queues/phase_more.txt), else seed 1
  # (experiments/queues/phase_rest_20k.txt) — else its 6,000-step phase learner.
  f="$ROOT/checkpoints/depth/d4_l${L}_h${H}_s1.h5"
  if [ "$PROFILE" = full ] && files=$(finished_seeds "$ROOT/checkpoints/depth/d4_l${L}_h${H}_s"{1,2,3}.h5); then
    echo "$files $ROOT/checkpoints/depth/d4_l${L}_h${H}_half.h5 20000"; return
  fi
  if [ "$PROFILE" = full ] && finished "$f"; then
    echo "$f $ROOT/checkpoints/depth/d4_l${L}_h${H}_half.h5 20000"; return
  fi
  echo "$CKDIR/l${L}_h$H.h5 $CKDIR/l${L}_h${H}_half.h5 $STEPS"
}
echo "L,H,seeds,steps,closest,closest_value,closest_spd,runner_up,runner_up_value,diff,diff_lo,diff_hi,significant,stable,ridge_lambda,budget_curve,half_closest,resolved,separated_from,ratio,ratio_lo,ratio_hi,among" > "$OUT/phase.csv"
for L in "${DEPTHS[@]}"; do
  for H in "${WIDTHS[@]}"; do
    read -r files halfrun steps <<< "$(cell_files $L $H)"
    half=(); if [ -f "$halfrun" ]; then half=(--half "$halfrun" --budget-verdicts); fi
    cmd=(compare --cell "l${L}_h$H=$files" "${half[@]}" --learners $LEARNERS --prompts $P --ilwd-prompts $Q --fit-prompts $FIT
      --seed 11 --threads 1 --quiet --force --csv "$OUT/compare_l${L}_h$H.csv")
    # The full profile keeps a comparison made by the same command and newer than its learners
    # (delete it to redo it).
    stamp="$OUT/compare_l${L}_h$H.cmd"
    newer=1; for f in ${files//,/ }; do [ "$OUT/compare_l${L}_h$H.txt" -nt "$f" ] || newer=0; done
    if [ "$PROFILE" = full ] && [ -s "$OUT/compare_l${L}_h$H.txt" ] && [ $newer = 1 ] &&
       [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${cmd[*]//$ROOT\//}" ]; then
      echo "iclprobe ${cmd[*]//$ROOT\//}" >> "$OUT/commands.txt"
    else
      run "$ICLPROBE" "${cmd[@]}" > "$OUT/compare_l${L}_h$H.txt"
      echo "${cmd[*]//$ROOT\//}" > "$stamp"
    fi
    # One row from the window's verdict and the fitted values (compare's tidy CSVs): a fitted
    # member's value is its lambda or alpha (with its step count where it has several), the
    # geometric mean over the cell's seeds with each seed's value after it; the colour is the
    # geometric mean of the fitted ridge lambda.
    # The last column: the closest learner over the window of the cell's half-budget run, compared
    # as a cell of its own on the same prompts (compare --budget-verdicts); empty without one.
    awk -F, -v L=$L -v H=$H -v steps=$steps -v cell="l${L}_h$H" 'FNR == NR { if (FNR > 1 && index($1, cell "/seed") == 1 && $8 != "" && $3 == 0) { n[$2]++; lg[$2] += log($8); v = sprintf("%.3g", $8); if ($9 != "" && $9 != 1) v = v " x" $9; each[$2] = each[$2] (n[$2] > 1 ? "/" : "") v } next }
      function value(m) { if (!(m in n)) return ""; if (n[m] == 1) return each[m]; return sprintf("%.3g (%s)", exp(lg[m] / n[m]), each[m]) }
      FNR > 1 && $1 == cell "@" (steps / 2) && $2 == "window" { half = $5 }
      FNR > 1 && $1 == cell && $2 == "window" {
        row = sprintf("%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%d,%s,%s", L, H, $4, steps, $5, value($5), $6, $7, value($7), $9, $10, $11, $12, $13, exp(lg["ridge:fit"] / n["ridge:fit"]), $15)
        rule = sprintf("%s,%s,%s,%s,%s,%s", $21, $16, $17, $18, $19, $22)
      }
      END { print row "," half "," rule }' "$OUT/compare_l${L}_h$H.csv" "$OUT/compare_l${L}_h$H.verdicts.csv" >> "$OUT/phase.csv"
  done
done
# The heat map: colour = log10 of the fitted ridge lambda (ridge with lambda far above the
# eigenvalues of X'X predicts like one GD step, x'X'y / lambda; lambda -> 0 is OLS), label = the
# closest family and its fitted value (gnuplot, no shell).
if command -v gnuplot > /dev/null; then
  awk -F, 'NR > 1 {
      f = $5; sub(/:.*/, "", f)
      v = $6; sub(/ \(.*/, "", v)
      label = f; if (v != "") label = label "\\n" v; if (!$13) label = label "\\n(~)"; if ($3 > 1 && !$14) label = label "\\n(seeds differ)"
      label = label "\\n" ($3 > 1 ? $3 " seeds" : "1 seed, " $4 / 1000 "k") ($16 == "no" ? ", not conv." : ($16 == "yes" ? ", conv." : ""))
      printf "%d %d %.4f \"%s\"\n", log($2) / log(2) - 3, log($1) / log(2), log($15) / log(10), label
    }' "$OUT/phase.csv" > "$OUT/phase.dat"
  cat > "$OUT/phase.gp" <<'GP'
# gnuplot script written by experiments/phase.sh; rerun with: gnuplot phase.gp
set terminal pngcairo size 980,760 noenhanced
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
plot 'phase.dat' using 1:2:3 with image, '' using 1:2:4 with labels font ',9'
GP
  (cd "$OUT" && gnuplot phase.gp)
fi
{ echo "Learners: depth L in {${DEPTHS[*]}} x width H in {${WIDTHS[*]}} (M = 4 heads, d = 4, n = 12, noiseless)."
  echo "The depth row (H = 64) and the width column (L = 4) are cells of three seeds trained 20,000 steps"
  echo "(checkpoints/depth/; L = 8, H = 64 is the shipped learner and its family, four seeds), each with"
  echo "a half-budget run for its excess-error curve; every other cell is one learner (seed 1), of 20,000"
  echo "steps and the same recipe where it has been trained (checkpoints/depth/d4_lL_hH_s1.h5; a 10,000-step"
  echo "half run at L = 1, 2; none at L = 8, whose convergence is untested), or three (seeds 1-3) where"
  echo "seeds 2 and 3 have been trained too, else of $STEPS steps (checkpoints/phase/, convergence"
  echo "untested); a one-learner cell's interval is over prompts only (phase.csv's seeds and steps columns say which). Each"
  echo "cell is compared on $P prompts (seed 11) with OLS, kNN(3) and each family's member closest to"
  echo "each seed: gd:fit (one GD step), gd:fit:1..16 (step size and number of steps), sgd:fit (one"
  echo "pass), newton:fit (Fu et al.'s iterative Newton, scale and steps), ridge:fit, fitted on the $FIT"
  echo "prompts that follow the scored ones. Closest = least mean SPD / d over the window k = 0..11"
  echo "except k = d and d+1 (fixed before the learners were scored); the runner-up's paired"
  echo "difference has a 95% interval over seeds, then prompts within a seed (two-stage bootstrap;"
  echo "significant when it excludes 0); 'every seed agrees' when each seed's own closest family is the"
  echo "same. A fitted value is the geometric mean over the seeds, each seed's value in brackets."
  echo
  echo "Reading the fitted lambda: ridge(lambda) predicts x'(X'X + lambda I)^-1 X'y. Far above the"
  echo "eigenvalues of X'X (about k(1 +- sqrt(d/k))^2, at most about 30 at k = 12, d = 4) that is"
  echo "x'X'y / lambda to first order, the prediction 2 alpha x'X'y of one GD step from 0 with"
  echo "alpha = 1 / (2 lambda): there the fitted families nearly coincide and a large lambda means"
  echo "GD-like. lambda -> 0 is OLS. The heat map's colour is log10 of the fitted lambda."
  echo; echo '![phase diagram](phase.png)'; echo
  echo "The last column is the closest learner over the window of the cell's half-budget run (seed 1, half"
  echo "the steps), compared as a cell of its own on the same prompts (compare --budget-verdicts): it says"
  echo "whether the answer changes with the training length (each cell's compare_lL_hH.txt has the per-k agreement)."
  echo
  echo '| L | H | seeds | steps | verdict (separation rule) | ratio [95%] | closest | fitted value | SPD / d | runner-up | its value | runner-up − closest [95%] | every seed agrees | excess-error curve | at half the steps |'
  echo '|---:|---:|---:|---:|---|---|---|---:|---:|---|---:|---|---|---|---|'
  awk -F, 'NR > 1 { among = $23; gsub(/;/, ", ", among); verdict = ($18 == 1) ? "follows " among ", not " $19 : "unresolved among {" among "}"; printf "| %s | %s | %s | %s | %s | %.2f [%.2f, %.2f] | %s | %s | %.3e | %s | %s | %+.2e [%+.2e, %+.2e]%s | %s | %s | %s |\n", $1, $2, $3, $4, verdict, $20, $21, $22, $5, $6, $7, $8, $9, $10, $11, $12, $13 ? "" : " (within noise)", ($3 > 1 ? ($14 ? "yes" : "no") : "(1 seed)"), $16, ($17 == "" ? "-" : $17) }' "$OUT/phase.csv"
} > "$OUT/summary.md"
{ echo; echo "Training commands (checkpoints/phase/commands.txt; resumed runs appear once per resume):"; echo
  echo '```sh'; sed "s|$ROOT/||g" "$CKDIR/commands.txt" 2>/dev/null; echo '```'; } >> "$OUT/summary.md"
finish "Phase diagram: which algorithm family does a learner of each depth and width match?" "$OUT/summary.md"
