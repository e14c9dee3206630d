#!/usr/bin/env bash
# Paper Fig. 3 at CPU scale: learners of depth L in {1, 2, 4, 8} at fixed width (H = 64, d = 4,
# n = 12, noiseless); which classical learner, or fitted family member, each depth matches, at
# every k and over the window k != d, d+1, with intervals over seeds and prompts and each cell's
# convergence evidence.
# Full profile: the depth row of checkpoints/depth/ (L = 1, 2, 4: seeds 1-3, 20,000 steps, and a
# half-budget run each) and the shipped recipe's family for L = 8 (checkpoints/d4_l8_h64.h5 and
# family/d4_l8_h64_s2..s4.h5, the same recipe, with family/d4_l8_h64_half.h5); checkpoints/README.md.
# A depth trained longer (the budget chosen per cell from its learning curve) uses its
# longest budget whose three seeds have all finished, 80,000 then 40,000 steps
# (depth/d4_lL_h64_80k_sS.h5, _40k_sS.h5), the next shorter budget's seed-1 run its half run;
# every shorter seed-1 budget (T/2, T/4, ...) gives the cell's excess-error curve and its
# verdicts at each budget.
source "$(dirname "$0")/lib.sh"
setup_out depth
LEARNERS="ols,ridge:0.1,ridge:fit,gd:fit,gd:fit:1..16,sgd:fit,newton:fit,knn:3"
SHOWN=(ols ridge:fit gd:fit gd:fit:1..16 newton:fit)
CELLS=(); HALVES=(); declare -A STEPS_OF=()
if [ "$PROFILE" = full ]; then
  P=2000; Q=100; FIT=500; CK="$ROOT/checkpoints"
  DESC="H = 64, M = 4, d = 4, n = 12, noiseless, steps per cell below, warmup 5% of the steps, batch 64, lr 1e-3"
  for L in 1 2 4; do
    base="$CK/depth/d4_l${L}_h64"
    if files=$(finished_seeds "${base}_80k_s"{1,2,3}.h5); then half="${base}_40k_s1.h5"; STEPS_OF[L$L]=80000
    elif files=$(finished_seeds "${base}_40k_s"{1,2,3}.h5); then half="${base}_s1.h5"; STEPS_OF[L$L]=40000
    else
      files=""; half="${base}_half.h5"; STEPS_OF[L$L]=20000
      for s in 1 2 3; do
        f="$CK/depth/d4_l${L}_h64_s$s.h5"
        finished "$f" || { echo "experiments/depth: $f is missing or unfinished (experiments/train_queue.sh trains it)" >&2; exit 2; }
        files="${files:+$files,}$f"
      done
    fi
    CELLS+=("L$L=$files"); HALVES+=(--half "$half")
    # Seed 1's shorter budgets below the half run, for the curve and the verdicts at each.
    for b in "20000:${base}_s1.h5" "10000:${base}_half.h5" "5000:${base}_5k_s1.h5"; do
      if [ "${b%%:*}" -lt $((STEPS_OF[L$L] / 2)) ] && [ -f "${b#*:}" ]; then HALVES+=(--budget "${b#*:}"); fi
    done
  done
  STEPS_OF[L8]=20000
  CELLS+=("L8=$CK/d4_l8_h64.h5,$CK/family/d4_l8_h64_s2.h5,$CK/family/d4_l8_h64_s3.h5,$CK/family/d4_l8_h64_s4.h5")
  HALVES+=(--half "$CK/family/d4_l8_h64_half.h5" --budget "$CK/family/d4_l8_h64_5k_s1.h5")
else
  # Two depths, two seeds each and one half-budget run: the pipeline, not the science.
  P=100; Q=5; FIT=20; STEPS=60
  DESC="quick profile: H = 16, M = 2, d = 4, n = 12, noiseless, $STEPS steps"
  for L in 1 2; do
    files=""
    for s in 1 2; do
      run "$ICLPROBE" train --d 4 --n 12 --layers $L --hidden 16 --heads 2 --batch 32 --lr 1e-3 --seed $s \
        --eval-prompts 100 --steps $STEPS --warmup 6 --eval-every 30 --save-every $STEPS \
        --threads 1 --quiet --force --out "$RUNS/l${L}_s$s.h5" > /dev/null
      files="${files:+$files,}$RUNS/l${L}_s$s.h5"
    done
    CELLS+=("L$L=$files")
  done
  run "$ICLPROBE" train --d 4 --n 12 --layers 1 --hidden 16 --heads 2 --batch 32 --lr 1e-3 --seed 1 \
    --eval-prompts 100 --steps $((STEPS / 2)) --warmup 3 --eval-every 30 --save-every $((STEPS / 2)) \
    --threads 1 --quiet --force --out "$RUNS/l1_half.h5" > /dev/null
  HALVES+=(--half "$RUNS/l1_half.h5")
fi
CELLARGS=(); for c in "${CELLS[@]}"; do CELLARGS+=(--cell "$c"); done
run "$ICLPROBE" compare "${CELLARGS[@]}" "${HALVES[@]}" --budget-verdicts --learners "$LEARNERS" --prompts $P --ilwd-prompts $Q \
  --fit-prompts $FIT --seed 11 --threads 1 --quiet --force --plot-dir "$OUT/figs" --csv "$OUT/compare.csv" > "$OUT/compare.txt"
{ echo "Cells: depth L ($DESC); seeds differ only in the training seed:"
  for c in "${CELLS[@]}"; do
    cell=${c%%=*}
    echo "- **$cell**: $(echo "${c#*=}" | tr ',' '\n' | wc -l) seeds${STEPS_OF[$cell]:+ of ${STEPS_OF[$cell]} steps} ($(echo "${c#*=}" | tr ',' '\n' | sed -e "s|$ROOT/||" -e "s|$OUT/||" | paste -sd, | sed 's/,/, /g')); excess-error curve over the budgets: $(awk -F, -v cell="$cell" 'NR > 1 && $1 == cell && $2 == "window" {print $15}' "$OUT/compare.verdicts.csv")."
  done
  echo
  echo "One compare: $P prompts of seed 11 (a prompt seed no earlier depth result used on these learners), reference learners $LEARNERS; the :fit members fitted per seed on the $FIT prompts after the scored ones. Verdicts: the closest learner by mean SPD / d, the runner-up and the paired margin with its 95% interval over seeds, then prompts within a seed (two-stage bootstrap); 'every seed agrees' when each seed's own closest learner is the same. The window leaves out k = d and d + 1, fixed before these learners were scored."
  echo
  echo "Mean SPD / d over the window, per seed (rows: reference learners; * = the seed's minimum with its paired 95% interval over prompts against the runner-up excluding 0, ~ = one that does not):"
  echo; echo '```'; sed -n '/mean SPD \/ d over the window/,/^$/p' "$OUT/compare.txt" | grep -v '^wrote'; echo '```'
  echo; echo "Excess-error curve of each cell's seed with a shorter budget (the same recipe with half the steps and warmup): the excess SPD / d over the Bayes predictor at each budget, the power law fitted or a plateau:"; echo
  echo '```'; convergence_lines "$OUT/compare.txt"; echo '```'
  echo; echo "Verdict at a shorter budget (each shorter run compared as a cell of its own, CELLNAME@STEPS, on the same prompts: does the answer change with the training length?):"; echo
  half_verdict_lines "$OUT/compare.txt"
  echo; echo "Fitted members per seed:"; echo; echo '```'; fitted_members "$OUT/compare.txt"; echo '```'
  echo; echo "The fitted parameter of each family that reaches OLS, over each cell's seeds (compare.fitted.csv):"; echo
  fitted_table "$OUT/compare.fitted.csv"
  echo; echo "Verdict at every k and over the window:"; echo
  verdict_table "$OUT/compare.verdicts.csv"
  for c in "${CELLS[@]}"; do
    cell=${c%%=*}
    echo; echo "SPD / d per k, cell $cell, mean over seeds with its 95% interval (seeds, then prompts):"; echo
    spd_table "$OUT/compare.cells.csv" "$cell" "${SHOWN[@]}"
  done
  echo; echo "SPD / d per k with 95% intervals over seeds and prompts, one figure per cell:"; echo
  for f in "$OUT"/figs/*.png; do echo "![SPD per k](figs/$(basename "$f"))"; done; } > "$OUT/summary.md"
rm -f "$OUT/compare.linearity.csv"
finish "Depth: which learner does a transformer of each depth match?" "$OUT/summary.md"
