#!/usr/bin/env bash
# Distributed alignment search. Per state, an m = d subspace at the query whose
# interchange from B makes the model output A's query times B's OLS weights (the w
# counterfactual), scored by held-out IIA with 95% intervals, against a random subspace of the
# same size, no interchange and the ridge probe's own directions interchanged.
# Full profile: the shipped L = 8 learner (seed 1) and its random-init twin, at the query and at
# the context positions. --quick: the
# rotated one-step gd construction with its decoy (X'y under GD), in seconds.
source "$(dirname "$0")/lib.sh"
setup_out das
SUMMARY="$OUT/summary.md"; : > "$SUMMARY"

# das NAME CHECKPOINT QUANTITY ALGORITHM LAYERS [POSITION]
das() {
  run "$ICLPROBE" das -c "$2" --quantity "$3" --algorithm "$4" --layers "$5" --m "$M" \
    --position "${6:-query}" \
    --train-pairs $TRAIN --test-pairs $TEST --bootstrap $B --seed 11 --threads 1 --quiet --force \
    --out "$OUT/$1.h5" > "$OUT/$1.txt"
  { echo "### $1: $3 under $4 at the ${6:-query} position(s), m = $M"; echo
    echo "| state | IIA [95%] | random subspace [95%] | no interchange | ceiling | epochs | probe R2 | largest angle to the probe (deg) |"
    echo "|---:|---|---|---:|---:|---:|---:|---:|"
    awk -F, 'NR > 1 && $6 == "pooled" {printf "| %s | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] | %.3f | %s | %s | %.3f | %.1f |\n", $4, $8, $9, $10, $11, $12, $13, $14, $18 == "" ? "—" : sprintf("%.3f", $18), $16, $17, $19}' "$OUT/$1.csv"
    echo; } >> "$SUMMARY"
}

if [ "$PROFILE" = full ]; then
  TRAIN=4000; TEST=1000; B=1000; M=4
  das l8_s1_w_ols "$ROOT/checkpoints/d4_l8_h64.h5" w ols 1,3,5,7
  das l8_init_w_ols "$ROOT/checkpoints/d4_l8_h64_init.h5" w ols 3,7
  # The context the query reads (every position before it): results/swap finds it read through
  # block 7, so a subspace of the context states that carries what the query takes from it
  # should show there.
  das l8_s1_w_ols_context "$ROOT/checkpoints/d4_l8_h64.h5" w ols 1,3,5,7 context
  das l8_init_w_ols_context "$ROOT/checkpoints/d4_l8_h64_init.h5" w ols 3,7 context
else
  TRAIN=1500; TEST=200; B=200; M=4
  run "$ICLPROBE" construct --program gd --alpha 0.05 --rotate 7 --decoy xty --d 4 --n 8 --force \
    --out "$RUNS/gd_decoy.h5" > /dev/null
  das gd_decoy_xty "$RUNS/gd_decoy.h5" xty gd:0.05 2
fi
finish "Distributed alignment search" "$SUMMARY"
