#!/usr/bin/env bash
# Paper Fig. 1 at CPU scale: the shipped noiseless learner (d = 4) against the classical
# learners; expected: OLS / small-lambda ridge closest, kNN furthest.
source "$(dirname "$0")/lib.sh"
setup_out noiseless
if [ "$PROFILE" = full ]; then P=2000; Q=200; else P=100; Q=10; fi
run "$ICLPROBE" compare -c "$ROOT/checkpoints/d4_l8_h64.h5" \
  --learners ols,ridge:0.1,ridge:0.5,gd:0.01,gd:0.02,sgd:0.01,sgd:0.03,knn:3 \
  --prompts $P --ilwd-prompts $Q --seed 3 --quiet --force --csv "$OUT/compare.csv" | tee "$OUT/compare.txt"
{ echo '```'; cat "$OUT/compare.txt"; echo '```'; } > "$OUT/summary.md"
finish "Noiseless regime: which learner does the shipped transformer match?" "$OUT/summary.md"
