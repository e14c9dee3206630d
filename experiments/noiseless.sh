#!/usr/bin/env bash
# Paper Fig. 1 at CPU scale: noiseless learners against the classical ones, per k, with
# intervals over seeds and prompts. Two cells: the shipped recipe (d = 4, n = 12, L8/H64; the
# shipped learner and its family, 4 seeds) and the paper's task (d = 8, n = 40, L8/H64, the
# seeds of checkpoints/behaviour/ that have finished). Each cell's seed 1 at T/2 and T/4 gives
# its excess-error curve and its verdicts at the shorter budgets. The verdict at every k and over the window k != d, d+1 (fixed
# before these learners were scored); the paper's claim to test: SPD / d to OLS below 0.01 at
# every k.
source "$(dirname "$0")/lib.sh"
setup_out noiseless
LEARNERS="ols,ridge:0.1,ridge:fit,gd:0.02,gd:fit,gd:fit:1..16,newton:3,newton:fit,knn:3"
SHOWN=(ols ridge:fit gd:fit gd:fit:1..16 newton:fit knn:3)
if [ "$PROFILE" = full ]; then
  P=2000; Q=200; FIT=500
  CK="$ROOT/checkpoints"
  CELLS=("d4=$CK/d4_l8_h64.h5,$CK/family/d4_l8_h64_s2.h5,$CK/family/d4_l8_h64_s3.h5,$CK/family/d4_l8_h64_s4.h5")
  # Seed 1's shorter budgets: T/2 and T/4 of each cell.
  declare -A HALF=([d4]="$CK/family/d4_l8_h64_half.h5" [d8]="$CK/behaviour/d8_n40_l8_h64_s1.h5")
  declare -A QUARTER=([d4]="$CK/family/d4_l8_h64_5k_s1.h5" [d8]="$CK/behaviour/d8_n40_l8_h64_s1_half.h5")
  D8=""
  for s in 1 2 3; do
    f="$CK/behaviour/d8_n40_l8_h64_s${s}_40k.h5"
    if finished "$f"; then D8="${D8:+$D8,}$f"; fi
  done
  [ -n "$D8" ] && CELLS+=("d8=$D8")
else
  P=60; Q=5; FIT=20
  train_tiny_cell
  CELLS=("tiny=$RUNS/tiny_s1.h5,$RUNS/tiny_s2.h5")
  declare -A HALF=([tiny]="$RUNS/tiny_s1_half.h5") QUARTER=()
fi
# One compare per cell (a compare reads prompts of one d and n).
for c in "${CELLS[@]}"; do
  cell=${c%%=*}
  half=()
  if [ -f "${HALF[$cell]:-}" ]; then half=(--half "${HALF[$cell]}" --budget-verdicts); fi
  if [ -f "${QUARTER[$cell]:-}" ]; then half+=(--budget "${QUARTER[$cell]}"); fi
  run "$ICLPROBE" compare --cell "$c" "${half[@]}" --learners "$LEARNERS" --prompts $P \
    --ilwd-prompts $Q --fit-prompts $FIT --seed 11 --threads 1 --quiet --force \
    --plot-dir "$OUT/figs_$cell" --csv "$OUT/compare_$cell.csv" > "$OUT/compare_$cell.txt"
done

{ echo "Cells (each a recipe; seeds differ only in the training seed):"
  for c in "${CELLS[@]}"; do
    cell=${c%%=*}; n=$(echo "${c#*=}" | tr ',' '\n' | wc -l)
    echo "- **$cell**: $n seeds ($(echo "${c#*=}" | tr ',' '\n' | sed "s|$ROOT/||" | paste -sd, | sed 's/,/, /g')); excess-error curve over the budgets: $(awk -F, -v cell="$cell" 'NR > 1 && $1 == cell && $2 == "window" {print $15}' "$OUT/compare_$cell.verdicts.csv") (shorter budgets of seed 1: ${HALF[$cell]#$ROOT/}${QUARTER[$cell]:+, ${QUARTER[$cell]#$ROOT/}})."
  done
  echo
  echo "Every compare: $P prompts of seed 11 (a prompt seed no earlier result used), reference learners $LEARNERS; the :fit ones are fitted per seed on the $FIT prompts after the scored ones (gd:fit: one step's alpha; gd:fit:1..16: alpha and the number of steps; newton:fit: Fu et al.'s iteration, its scale C and step count). Verdicts follow the separation rule (docs/methodology.md, 'Verdicts'): 'follows A, not B' only when the SPD ratio of the nearest learner B outside A's family to the closest learner A is at least 2, the lower end of its 95% interval (two-stage bootstrap: seeds, then prompts within a seed) above 1 and every seed's own ratio above 1; otherwise 'unresolved among' the learners not separated from A. OLS, ridge:fit and newton:fit contain one another's limits and are never separated by a ratio. 'every seed agrees' when each seed's own closest learner is the same. The window leaves out k = d and d + 1, fixed before these learners were scored."
  for c in "${CELLS[@]}"; do
    cell=${c%%=*}
    echo; echo "## Cell $cell"; echo
    echo "Excess-error curve over the budgets (the excess SPD / d over the Bayes predictor of the seed with a shorter budget, at each budget; the power law fitted, or a plateau):"; echo
    echo '```'; sed -n '/^excess error over the Bayes predictor by training budget/,/^  \(excess over Bayes\|no power law\)/p' "$OUT/compare_$cell.txt" | sed "s|$ROOT/||g"; echo '```'; echo
    echo "Verdict at a shorter budget (the shorter run compared as a cell of its own, $cell@STEPS, on the same prompts: does the answer change with the training length?):"; echo
    half_verdict_lines "$OUT/compare_$cell.txt"; echo
    echo "Fitted members per seed:"; echo; echo '```'; fitted_members "$OUT/compare_$cell.txt"; echo '```'; echo
    echo "The fitted parameter of each family that reaches OLS over the cell's seeds (compare_$cell.fitted.csv):"; echo
    fitted_table "$OUT/compare_$cell.fitted.csv"; echo
    echo "Verdict at every k and over the window:"; echo
    verdict_table "$OUT/compare_$cell.verdicts.csv" "$cell"
    echo; echo "SPD / d per k, mean over seeds with its 95% interval (seeds, then prompts):"; echo
    spd_table "$OUT/compare_$cell.cells.csv" "$cell" "${SHOWN[@]}"
    echo; echo "The paper's criterion (SPD / d to OLS below 0.01 at every k): $(awk -F, -v cell="$cell" 'NR > 1 && $1 == cell && $2 == "ols" { n++; if ($5 >= 0.01) bad = bad " " $3 " (" sprintf("%.3g [%.3g, %.3g]", $5, $6, $7) ")"; else if ($7 >= 0.01) open_ = open_ " " $3 }
      END { if (bad == "") printf "holds at all %d k", n; else printf "fails at k =%s", bad; if (open_ != "") printf "; the interval reaches 0.01 at k =%s", open_ }' "$OUT/compare_$cell.cells.csv")."
    echo; echo "ILWD / d per k (implicit linear weights on the first $Q contexts), mean over seeds:"; echo
    printf '| k |'; printf ' %s |' "${SHOWN[@]::${#SHOWN[@]}-1}"; echo; printf '|---:|'; printf -- '---:|%.0s' "${SHOWN[@]::${#SHOWN[@]}-1}"; echo
    awk -F, -v cell="$cell" -v names="${SHOWN[*]::${#SHOWN[@]}-1}" 'BEGIN { n = split(names, want, " ") }
      NR > 1 && index($1, cell "/seed") == 1 && $7 != "" { s[$3, $2] += $7; c[$3, $2]++; if ($3 + 0 > kmax) kmax = $3 + 0 }
      END { for (k = 0; k <= kmax; k++) { printf "| %d |", k; for (j = 1; j <= n; j++) printf " %s |", c[k, want[j]] ? sprintf("%.2e", s[k, want[j]] / c[k, want[j]]) : "-"; printf "\n" } }' "$OUT/compare_$cell.csv"
    echo; echo "![SPD per k]($(cd "$OUT" && ls figs_$cell/*.png | head -1))"
  done; } > "$OUT/summary.md"
rm -f "$OUT"/compare.csv "$OUT"/compare.linearity.csv "$OUT"/compare.txt
finish "Noiseless regime: which learner do the noiseless transformers match, at every k?" "$OUT/summary.md"
