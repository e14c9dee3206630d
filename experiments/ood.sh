#!/usr/bin/env bash
# Which algorithm each learner follows when prompts leave the training distribution (Garg et
# al.'s battery): the context's x skewed, scaled, in a half-subspace or an orthant; the query
# apart from the context (scaled, in the opposite orthant, orthogonal to the examples' span);
# labels scaled or noisy. For every cell of seeds and every shift, compare's verdict over the
# fixed window k != d, d+1: the closest reference learner, the paired margin to the runner-up
# with its 95% interval over seeds and prompts (two-stage bootstrap), and whether every seed
# agrees.
#
# Full profile: the committed d = 4 family (4 seeds, checkpoints/d4_l8_h64.h5 and family/) and
# the d = 8, n = 40 behaviour learners (checkpoints/behaviour/*_40k.h5, the seeds finished).
# Quick profile: two tiny learners trained here.
source "$(dirname "$0")/lib.sh"
setup_out ood
LEARNERS="ols,ridge:0.1,ridge:1,gd:0.02,newton:3,knn:3,ridge:fit,gd:fit:1..16"
if [ "$PROFILE" = full ]; then
  P=1000; FIT=200
  CK="$ROOT/checkpoints"
  CELLS=("d4=$CK/d4_l8_h64.h5,$CK/family/d4_l8_h64_s2.h5,$CK/family/d4_l8_h64_s3.h5,$CK/family/d4_l8_h64_s4.h5")
  D8=""
  for s in 1 2 3; do
    f="$CK/behaviour/d8_n40_l8_h64_s${s}_40k.h5"
    if [ -f "$f" ] && "$ICLPROBE" inspect "$f" | awk '$1 == "step" && $2 == $4 {ok = 1} END {exit !ok}'; then
      D8="${D8:+$D8,}$f"
    fi
  done
  [ -n "$D8" ] && CELLS+=("d8=$D8")
  # The convergence rule's half-budget runs: the d = 8 recipe's (seed 1, 20,000 steps) and the
  # shipped recipe's (seed 1, 10,000 steps).
  declare -A HALF=([d8]="$CK/behaviour/d8_n40_l8_h64_s1.h5" [d4]="$CK/family/d4_l8_h64_half.h5")
else
  P=40; FIT=20
  train_tiny_cell
  CELLS=("tiny=$RUNS/tiny_s1.h5,$RUNS/tiny_s2.h5")
  declare -A HALF=([tiny]="$RUNS/tiny_s1_half.h5")
fi
# name|options: one row of the table each.
SHIFTS=(
  "training distribution|"
  "context skewed|--context-shift skewed"
  "context x 0.5|--context-shift scale:0.5"
  "context x 2|--context-shift scale:2"
  "context x 3|--context-shift scale:3"
  "context half-subspace|--context-shift half-subspace"
  "context orthant +, query orthant -|--context-shift orthant:+ --query-shift orthant:-"
  "query x 3|--query-shift scale:3"
  "query orthogonal to the examples|--query-shift orthogonal"
  "labels x 2|--context-shift y-scale:2"
  "label noise 0.5|--noise 0.5"
)
# One compare per cell (a compare reads prompts of one d and n) and shift.
for c in "${CELLS[@]}"; do
  cell=${c%%=*}
  i=0
  for entry in "${SHIFTS[@]}"; do
    opts=${entry#*|}
    # The convergence evidence once per cell (it re-runs the full and half runs on their
    # evaluation prompts), where the cell has a half-budget run.
    half=()
    if [ $i = 0 ] && [ -n "${HALF[$cell]:-}" ]; then half=(--half "${HALF[$cell]}"); fi
    # shellcheck disable=SC2086
    run "$ICLPROBE" compare --cell "$c" "${half[@]}" --learners "$LEARNERS" $opts --prompts $P \
      --fit-prompts $FIT --ilwd-prompts 1 --seed 5 --threads 1 --quiet --force \
      --csv "$OUT/${cell}_shift$i.csv" > "$OUT/${cell}_shift$i.txt"
    i=$((i + 1))
  done
done

{ echo "Cells: $(for c in "${CELLS[@]}"; do n=$(echo "${c#*=}" | tr ',' '\n' | wc -l); echo -n "${c%%=*} ($n seeds); "; done | sed 's/; $//')."
  echo "Each row: compare on $P prompts (seed 5) drawn with the shift, reference learners $LEARNERS (the :fit ones fitted per seed on $FIT further prompts). The verdict is the separation rule's over the window k != d, d+1 (fixed before any learner was scored; docs/methodology.md, \"Verdicts\"): 'follows A, not B' only where the nearest learner B outside A's family has an SPD / d ratio to A of at least 2 with the lower end of its 95% interval over seeds and prompts above 1 and every seed's own ratio above 1; otherwise 'unresolved among' the learners within that separation. 'every seed agrees': each seed's own closest learner is the same; 'excess-error curve': what the excess over the Bayes predictor of the cell's seed with a half-budget run does between the two budgets (falling, plateau, or untested where the cell has none; the curve is in CELL_shift0.txt and CELL_shift0.budgets.csv)."
  echo
  echo "| shift | cell | verdict | ratio [95%] | closest | SPD / d | every seed agrees | excess-error curve |"
  echo "|---|---|---|---|---|---:|---|---|"
  i=0
  for entry in "${SHIFTS[@]}"; do
    name=${entry%%|*}
    for c in "${CELLS[@]}"; do
    cell=${c%%=*}
    awk -F, -v shift="$name" 'FNR == NR { if (FNR > 1 && $2 == "window") conv[$1] = $15; next }
      FNR > 1 && $2 == "window" && $1 !~ /@[0-9a-z]+$/ {
        stable = ($13 == 1) ? "yes" : "no (" $14 ")"
        among = $22; gsub(/;/, ", ", among)
        nested = $22; sub(/^[^;]*;?/, "", nested); gsub(/;/, ", ", nested)
        verdict = ($21 == 1) ? "follows " $5 (nested == "" ? "" : " (or its nested " nested ")") ", not " $16 : "unresolved among {" among "}"
        if ($23 != "seeds" && $23 != "") verdict = verdict " (" $23 ")"
        ratio = ($16 == "") ? "" : sprintf("%s/%s %.3g [%.3g, %.3g]", $16, $5, $17, $18, $19)
        printf "| %s | %s | %s | %s | %s | %.3g | %s | %s |\n", shift, $1, verdict, ratio, $5, $6, stable, conv[$1]
      }' "$OUT/${cell}_shift0.verdicts.csv" "$OUT/${cell}_shift$i.verdicts.csv"
    done
    i=$((i + 1))
  done; } > "$OUT/summary.md"
rm -f "$OUT"/*_shift*.cells.csv "$OUT"/*_shift*.linearity.csv "$OUT"/*_shift*.paired.csv "$OUT"/*_shift*.fitted.csv
finish "Out of distribution: which algorithm under each shift" "$OUT/summary.md"
