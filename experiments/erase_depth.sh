#!/usr/bin/env bash
# LEACE erasure on the depth row (L = 1, 2, 4, H = 64, seeds 1-3; the L = 8 family
# is in results/erase): X'y erased from each state's y-token of example k and query, the
# model run on, error per k against the model's own, the zero predictor's and a random erasure of
# the same rank (95% intervals over prompts). --quick: the compiled one-step gd, in seconds.
source "$(dirname "$0")/lib.sh"
setup_out erase_depth
SUMMARY="$OUT/summary.md"; : > "$SUMMARY"

# erase NAME CHECKPOINT TARGET
erase() {
  run "$ICLPROBE" erase -c "$2" --target "$3" --k "$KS" --fit-prompts $FIT -N $P --bootstrap $B \
    --seed 11 --threads 1 --quiet --force --out "$OUT/$1_$3.h5" > "$OUT/$1_$3.txt"
  { echo "### $1, $3 erased"; echo
    echo "| state | k | rank | model | erased [95%] | random [95%] | zero predictor |"
    echo "|---:|---:|---:|---|---|---|---|"
    awk -F, 'NR > 1 {printf "| %s | %s | %s | %.3g [%.3g, %.3g] | %.3g [%.3g, %.3g] | %.3g [%.3g, %.3g] | %.3g |\n", $2, $3, $5, $6, $7, $8, $9, $10, $11, $15, $16, $17, $21}' "$OUT/$1_$3.csv"
    echo; } >> "$SUMMARY"
}

if [ "$PROFILE" = full ]; then
  P=2000; FIT=4000; B=1000; KS=2,4,6,8,11
  for t in xty; do
    for l in 1 2 4; do
      for s in 1 2 3; do erase "l${l}_s$s" "$ROOT/checkpoints/depth/d4_l${l}_h64_s$s.h5" $t; done
    done
  done
else
  P=500; FIT=1000; B=200; KS=2,4
  run "$ICLPROBE" construct --program gd --alpha 0.05 --d 4 --n 8 --force --out "$RUNS/gd.h5" > /dev/null
  erase gd "$RUNS/gd.h5" xty
fi
finish "LEACE erasure on the depth row" "$SUMMARY"
