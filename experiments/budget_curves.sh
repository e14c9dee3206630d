#!/usr/bin/env bash
# Adequacy as a curve: for every committed learner trained at several budgets of one seed (the
# same recipe and seed at T/2^j steps), its excess error over the task's Bayes predictor (OLS
# without noise, the Bayes ridge with Gaussian noise) per budget, and the fit e(T) = a T^-b on a
# log-log line with b's 95% interval and the excess extrapolated to 4T, or "no power law:
# plateau" where a doubling of the steps does not lower it (compare --budget). The excess is the
# mean over the summary window (k != d, d + 1) of SPD / d to the Bayes predictor, on the longest
# run's evaluation prompts (seed 999; 2,000 for every committed learner). Cells with one budget are listed as such.
source "$(dirname "$0")/lib.sh"
setup_out budget_curves
CK="$ROOT/checkpoints"
if [ "$PROFILE" = full ]; then
  # Each cell's seed-1 runs, longest budget first where the names say the steps; the T = 20,000
  # run has no step suffix, T/2 is *_half, T/4 is *_5k_s1.
  CELLS=()
  for w in 8 16 32 64; do
    for l in 1 2 4 8; do
      [ "$l$w" = 864 ] && continue  # the shipped recipe: its own row below
      s="$CK/depth/d4_l${l}_h${w}"
      CELLS+=("L${l}_H${w}=${s}_160k_s1.h5,${s}_80k_s1.h5,${s}_40k_s1.h5,${s}_s1.h5,${s}_half.h5,${s}_5k_s1.h5")
    done
  done
  CELLS+=("L8_H64=$CK/d4_l8_h64.h5,$CK/family/d4_l8_h64_half.h5,$CK/family/d4_l8_h64_5k_s1.h5")
  for nz in 0 1_16 1_9 1_4 4_9; do
    s="$CK/noisy/noise_${nz}"
    CELLS+=("noise_${nz}=${s}_80k_s1.h5,${s}_40k_s1.h5,${s}.h5,${s}_half.h5,${s}_5k_s1.h5")
  done
  b="$CK/behaviour/d8_n40_l8_h64"
  CELLS+=("d8=${b}_s1_40k.h5,${b}_s1.h5,${b}_s1_half.h5")
  CELLS+=("d8_noise_1_4=${b}_noise_1_4_s1.h5,${b}_noise_1_4_half.h5,${b}_noise_1_4_s1_5k.h5")
else
  for steps in 40 20 10; do
    run "$ICLPROBE" train --d 3 --n 7 --layers 1 --hidden 16 --heads 2 --steps $steps \
      --warmup $((steps / 10)) --batch 8 --eval-every 10 --eval-prompts 20 --save-every 10 \
      --seed 1 --threads 1 --quiet --force --out "$RUNS/tiny_${steps}.h5" > /dev/null
  done
  CELLS=("tiny=$RUNS/tiny_40.h5,$RUNS/tiny_20.h5,$RUNS/tiny_10.h5")
fi

FIT="$OUT/budget_fit.csv"
ALL="$OUT/budgets.csv"
SUMMARY="$RUNS/summary.md"
rm -f "$FIT" "$ALL"
{
  echo "Excess error over the Bayes predictor (SPD / d, mean over the window k != d, d + 1, on the"
  echo "longest run's evaluation prompts of seed 999, 2,000 for every committed learner; 95% intervals"
  echo "over the prompts) for every learner trained at several budgets of seed 1. b is the exponent of e(T) = a T^-b"
  echo "(log-log least squares; its interval from the residuals on m - 2 degrees of freedom and the"
  echo "budgets' sampling spread; no interval from two budgets); \"plateau\" when the excess does not"
  echo "fall at some doubling (the paired change's 95% upper end is at or above 0), and then no fit."
  echo
  echo "| cell | budgets (steps) | excess at T [95%] | b [95%] | excess at 4T [95%] |"
  echo "|---|---|---|---|---|"
} > "$SUMMARY"
for cell in "${CELLS[@]}"; do
  name="${cell%%=*}"
  files=()
  IFS=, read -r -a cands <<< "${cell#*=}"
  for f in "${cands[@]}"; do [ -f "$f" ] && files+=("$f"); done
  if [ "${#files[@]}" -lt 2 ]; then
    echo "| $name | ${#files[@]} budget: no curve | | | |" >> "$SUMMARY"
    continue
  fi
  args=(--checkpoint "${files[0]}")
  for f in "${files[@]:1}"; do args+=(--budget "$f"); done
  run "$ICLPROBE" compare "${args[@]}" --learners ols --prompts 20 --ilwd-prompts 2 --threads 1 \
    --quiet --force --csv "$RUNS/$name.csv" > "$RUNS/$name.txt"
  # The per-cell CSVs, with the cell's name first, into one table each.
  for kind in budget_fit budgets; do
    dest="$OUT/$kind.csv"
    [ -f "$dest" ] || sed -n '1s/^/cell,/p' "$RUNS/$name.$kind.csv" > "$dest"
    sed -n "2,\$s/^/$name,/p" "$RUNS/$name.$kind.csv" >> "$dest"
  done
  steps=$(awk -F, 'NR > 1 {printf "%s%s", sep, $2; sep = ", "}' "$RUNS/$name.budgets.csv")
  at_t=$(awk -F, 'END {printf "%.2e [%.2e, %.2e]", $4, $5, $6}' "$RUNS/$name.budgets.csv")
  awk -F, -v name="$name" -v steps="$steps" -v at_t="$at_t" 'NR == 2 {
    if ($3 == 1) fit = sprintf("no power law: plateau (%s) | ", $4)
    else if ($6 == "") fit = sprintf("%.2f (two budgets: no interval) | %.2e", $5, $9)
    else fit = sprintf("%.2f [%.2f, %.2f] | %.2e [%.2e, %.2e]", $5, $6, $7, $9, $10, $11)
    printf "| %s | %s | %s | %s |\n", name, steps, at_t, fit }' "$RUNS/$name.budget_fit.csv" >> "$SUMMARY"
done
finish "Excess-error curves over the training budget" "$SUMMARY"
