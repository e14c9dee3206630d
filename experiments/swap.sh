#!/usr/bin/env bash
# Whole-context counterfactuals. A's query runs on B's context state at each layer;
# the share of each learner's counterfactual change (B's first k examples, A's query) that the
# model reproduces, per layer, pooled over k = 1..n-1, with 95% intervals over pairs.
# Full profile: the shipped L = 8 family (4 seeds) and its random-init twin (the control: a model
# that learns nothing in context), the depth row L = 1, 2, 4 (3 seeds each).
# --quick: the compiled one-step gd (the method's ground truth), in seconds.
source "$(dirname "$0")/lib.sh"
setup_out swap
SUMMARY="$OUT/summary.md"; : > "$SUMMARY"

# swap NAME CHECKPOINT: one learner's swaps file, CSV and printed table.
swap() {
  run "$ICLPROBE" swap -c "$2" --learners "$LEARNERS" --pairs $P --bootstrap $B --seed 11 \
    --threads 1 --quiet --force --out "$OUT/$1.h5" > "$OUT/$1.txt"
}

# table TITLE NAME...: per layer, the pooled share each learner's run reproduces, one column per
# learner (seed), one table per reference.
table() {
  local title=$1; shift
  { echo "### $title"; echo
    for ref in $REFS; do
      echo "Reference \`$ref\`: share of its counterfactual change reproduced, pooled over k (95% interval over pairs), per learner:"; echo
      printf "| state |"; for n in "$@"; do printf " %s |" "$n"; done; echo
      printf "|---:|"; for _ in "$@"; do printf -- "---|"; done; echo
      for f in "$@"; do awk -F, -v r="$ref" 'NR > 1 && $1 == r && $3 == "pooled" {printf "%s;%.3f [%.3f, %.3f]\n", $2, $5, $6, $7}' "$OUT/$f.csv" > "$RUNS/$f.$ref.col"; done
      paste -d';' $(for f in "$@"; do echo "$RUNS/$f.$ref.col"; done) |
        awk -F';' '{printf "| %s |", $1; for (i = 2; i <= NF; i += 2) printf " %s |", $i; printf "\n"}'
      echo
    done; } >> "$SUMMARY"
}

if [ "$PROFILE" = full ]; then
  P=1000; B=1000; LEARNERS="ols,ridge:1,gd:0.02"; REFS="model ols ridge:1 gd:0.02"
  swap l8_s1 "$ROOT/checkpoints/d4_l8_h64.h5"
  for s in 2 3 4; do swap "l8_s$s" "$ROOT/checkpoints/family/d4_l8_h64_s$s.h5"; done
  swap l8_init "$ROOT/checkpoints/d4_l8_h64_init.h5"
  table "L = 8, H = 64 (the family, 4 seeds, 20,000 steps) and its random-init twin" l8_s1 l8_s2 l8_s3 l8_s4 l8_init
  for L in 1 2 4; do
    for s in 1 2 3; do swap "l${L}_s$s" "$ROOT/checkpoints/depth/d4_l${L}_h64_s$s.h5"; done
    table "L = $L, H = 64 (3 seeds, 20,000 steps)" "l${L}_s1" "l${L}_s2" "l${L}_s3"
  done
else
  P=300; B=200; LEARNERS="gd:0.02,ols"; REFS="model gd:0.02"
  run "$ICLPROBE" construct --program gd --alpha 0.02 --d 4 --n 8 --force --out "$RUNS/gd.h5" > /dev/null
  swap gd "$RUNS/gd.h5"
  table "compiled one-step gd (alpha 0.02, d = 4, n = 8): block 2 reads the context into the query" gd
fi
finish "Whole-context counterfactuals" "$SUMMARY"
