#!/usr/bin/env bash
# Distributed alignment search beyond the one learner of experiments/das.sh. The
# w counterfactual under OLS at the query (A's query with B's OLS weights), m = d = 4, held-out
# IIA pooled over k with 95% intervals, against a random subspace of the same m and no
# interchange, with the ceiling (the model itself on B's examples and A's query):
#   the family: seeds 2-4 of the shipped L = 8 recipe (seed 1 is in results/das), states 1, 3, 5, 7;
#   the depth row: L = 1, 2, 4 (H = 64, seed 1), every state after a block;
#   the curve over m: m = 1, 2, 4, 8 at state 5 of the shipped learner (seed 1).
# --quick: the rotated one-step gd construction with the noisy decoy (X'y under GD), m = 1, 2, 4.
source "$(dirname "$0")/lib.sh"
setup_out das_family
SUMMARY="$OUT/summary.md"; : > "$SUMMARY"

# das NAME CHECKPOINT QUANTITY ALGORITHM LAYERS MS
das() {
  run "$ICLPROBE" das -c "$2" --quantity "$3" --algorithm "$4" --layers "$5" --m "$6" \
    --train-pairs $TRAIN --test-pairs $TEST --bootstrap $B --seed 11 --threads 1 --quiet --force \
    --out "$OUT/$1.h5" > "$OUT/$1.txt"
  { echo "### $1: $3 under $4 at the query, m = $6"; echo
    echo "| state | m | IIA [95%] | random subspace [95%] | no interchange | ceiling | epochs | probe R2 |"
    echo "|---:|---:|---|---|---:|---:|---:|---:|"
    awk -F, 'NR > 1 && $6 == "pooled" {printf "| %s | %s | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] | %.3f | %s | %s | %.3f |\n", $4, $5, $8, $9, $10, $11, $12, $13, $14, $18 == "" ? "—" : sprintf("%.3f", $18), $16, $17}' "$OUT/$1.csv"
    echo; } >> "$SUMMARY"
}

if [ "$PROFILE" = full ]; then
  TRAIN=4000; TEST=1000; B=1000
  for s in 2 3 4; do
    das "l8_s${s}_w_ols" "$ROOT/checkpoints/family/d4_l8_h64_s$s.h5" w ols 1,3,5,7 4
  done
  das l1_s1_w_ols "$ROOT/checkpoints/depth/d4_l1_h64_s1.h5" w ols 1 4
  das l2_s1_w_ols "$ROOT/checkpoints/depth/d4_l2_h64_s1.h5" w ols 1,2 4
  das l4_s1_w_ols "$ROOT/checkpoints/depth/d4_l4_h64_s1.h5" w ols 1,2,3,4 4
  das l8_s1_w_ols_m "$ROOT/checkpoints/d4_l8_h64.h5" w ols 5 1,2,4,8
else
  TRAIN=1500; TEST=200; B=200
  run "$ICLPROBE" construct --program gd --alpha 0.05 --rotate 7 --decoy xty --decoy-noise 2 \
    --d 4 --n 8 --force --out "$RUNS/gd_noisydecoy.h5" > /dev/null
  das gd_noisydecoy_xty "$RUNS/gd_noisydecoy.h5" xty gd:0.05 2 1,2,4
fi
finish "Distributed alignment search on the family, the depth row and over m" "$SUMMARY"
