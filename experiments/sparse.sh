#!/usr/bin/env bash
# Sparse regression (Garg, Tsipras, Liang, Valiant 2022): w with S non-zero coordinates
# (train --task-family sparse:S). Below k = d examples OLS cannot recover w, the lasso can, and
# the Bayes predictor is bayes-sparse, the posterior mean over all supports of size S (not the
# lasso). Per cell of learners: compare against bayes-sparse, lasso:fit (the single lasso lambda
# closest to the learner), ridge:fit and ols, over the window and per k (the k < d rows are
# where the hypotheses differ most), with the separation rule's verdicts; then ridge probes of
# the lasso's weights (at the pilot's lambda) against w_OLS, by layer, for the first seed.
#
# Full profile: d = 8, n = 16, S = 2, sigma = 0.1; checkpoints/sparse/sparse_s2_10k_s<seed>.h5
# (every finished seed; none may exist yet, then the pilot alone). Quick profile: d = 4, n = 8,
# S = 1 and a tiny learner trained here.
source "$(dirname "$0")/lib.sh"
setup_out sparse
if [ "$PROFILE" = full ]; then
  D=8; N=16; S=2; NOISE=0.1; P=2000; PX=4000; ARCH="--layers 8 --hidden 64 --heads 4"
  files=$(finished_among "$ROOT"/checkpoints/sparse/sparse_s2_10k_s{1,2,3}.h5)
  CELLS=(); [ -n "$files" ] && CELLS+=("sparse=$files")
else
  D=4; N=8; S=1; NOISE=0.1; P=60; PX=200; ARCH="--layers 1 --hidden 16 --heads 2"
  run "$ICLPROBE" train --d $D --n $N $ARCH --steps 20 --warmup 2 --batch 8 --eval-every 10 \
    --eval-prompts 20 --save-every 10 --seed 1 --noise $NOISE --task-family sparse:$S --threads 1 \
    --quiet --force --out "$RUNS/sparse_s1.h5" > /dev/null
  CELLS=("sparse=$RUNS/sparse_s1.h5")
fi

# Pilot, before any learner: each candidate's error / d per k on the task's prompts, and the
# lasso lambda of a grid with the least error over k < d (the probe target's lambda).
GRID="0.001 0.003 0.01 0.03 0.1 0.3 1"
LASSOS=$(for l in $GRID; do echo -n "lasso:$l,"; done | sed 's/,$//')
run "$ICLPROBE" baselines --d $D --n $N --noise $NOISE --task-family sparse:$S --prompts $P --seed 5 \
  --learners "bayes-sparse,bayes,ols,$LASSOS" --threads 1 --force --csv "$OUT/pilot.csv" > "$OUT/pilot.txt"
awk -F, -v d=$D 'NR > 1 && $2 > 0 && $2 < d { s[$1] += $3; c[$1]++ }
  END { for (l in s) printf "%s %.6g\n", l, s[l] / c[l] }' "$OUT/pilot.csv" | sort > "$OUT/pilot_below_d.txt"
LASSO=$(awk '$1 ~ /^lasso:/ {print $1, $2}' "$OUT/pilot_below_d.txt" | sort -g -k2 | head -1 | cut -d' ' -f1)
TARGET=w_${LASSO//:/_}

for c in "${CELLS[@]}"; do
  cell=${c%%=*}
  run "$ICLPROBE" compare --cell "$c" --learners bayes-sparse,lasso:fit,ridge:fit,ols --prompts $P \
    --ilwd-prompts 1 --seed 5 --threads 1 --quiet --force --csv "$OUT/$cell.csv" > "$OUT/$cell.txt"
  first=$(echo "${c#*=}" | cut -d, -f1)
  run "$ICLPROBE" train --d $D --n $N $ARCH --seed 1 --noise $NOISE --task-family sparse:$S --init-only \
    --force --out "$RUNS/${cell}_init.h5" > /dev/null
  for m in "$first" "$RUNS/${cell}_init.h5"; do
    tag=$([ "$m" = "$first" ] && echo learner || echo init)
    run "$ICLPROBE" extract -c "$m" --prompts $PX --seed 7 --learner-targets "$LASSO" --threads 1 --quiet \
      --force --out "$RUNS/${cell}_acts_$tag.h5" > /dev/null
  done
  run "$ICLPROBE" probe -a "$RUNS/${cell}_acts_learner.h5" --control "$RUNS/${cell}_acts_init.h5" \
    --targets "w_ols,$TARGET" --probes ridge --threads 1 --quiet --force --out "$OUT/${cell}_probes.h5" \
    --csv "$OUT/${cell}_probes.csv" > /dev/null
  run "$ICLPROBE" report --probes "$OUT/${cell}_probes.h5" --k 1,$((D / 2)),$((N - 1)) \
    --compare-targets "w_ols,$TARGET" --force --out "$OUT/${cell}_probes_report.md" > "$OUT/${cell}_probes_onset.txt"
  rm -f "$RUNS/${cell}_acts_learner.h5" "$RUNS/${cell}_acts_init.h5"
done

{ echo "Sparse task (d = $D, n = $N, S = $S non-zero coordinates, sigma = $NOISE). Pilot: $P prompts of seed 5, each learner's error / d averaged over k = 1..d-1 (where OLS cannot recover w):"
  echo
  echo "| learner | error / d, k < d |"
  echo "|---|---:|"
  awk '{printf "| %s | %s |\n", $1, $2}' "$OUT/pilot_below_d.txt"
  echo
  echo "The grid's best lasso below d is $LASSO (its weights are the probe target $TARGET)."
  echo
  if [ ${#CELLS[@]} -eq 0 ]; then
    echo "No finished learner in checkpoints/sparse/ yet: the pilot alone."
  else
    echo "Verdicts by the separation rule over the window k != d, d+1 and at each k < d (compare's verdicts CSV, \`$cell.verdicts.csv\`):"
    echo
    echo "| cell | scope | k | seeds | verdict | ratio [95%] | closest | SPD / d |"
    echo "|---|---|---:|---:|---|---|---|---:|"
    for c in "${CELLS[@]}"; do
      cell=${c%%=*}
      awk -F, -v d=$D 'FNR > 1 && ($2 == "window" || $3 < d) {
          among = $22; gsub(/;/, ", ", among)
          verdict = ($21 == 1) ? "follows " $5 ", not " $16 : "unresolved among {" among "}"
          if ($23 != "seeds" && $23 != "") verdict = verdict " (" $23 ")"
          ratio = ($16 == "") ? "" : sprintf("%s/%s %.3g [%.3g, %.3g]", $16, $5, $17, $18, $19)
          printf "| %s | %s | %s | %s | %s | %s | %s | %.3g |\n", $1, $2, $3, $4, verdict, ratio, $5, $6
        }' "$OUT/$cell.verdicts.csv"
    done
    echo
    echo "Ridge probes of w_OLS and the lasso's weights (first seed, against its random-init twin):"
    echo; echo '```'
    for c in "${CELLS[@]}"; do grep -v '^wrote' "$OUT/${c%%=*}_probes_onset.txt"; done
    echo '```'
  fi; } > "$OUT/summary.md"
rm -f "$OUT"/*.cells.csv "$OUT"/*.linearity.csv "$OUT"/*.paired.csv
finish "Sparse regression: the lasso, OLS or the posterior over supports" "$OUT/summary.md"
