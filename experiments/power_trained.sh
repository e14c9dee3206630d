#!/usr/bin/env bash
# The power of the causal tests on trained ground truth: bottleneck learners (train --bottleneck
# 4, checkpoints/bottleneck/), whose prediction at the x-token of example k+1 sees the context
# only through the y-token of example k at state 4 (docs/guide/learners.md). That state must
# carry what the prediction uses of the context, and it is used; the same token's last state
# (8) is read by nothing, a decoy by construction. Per learner, per test, at both states:
#   ridge probe of w_OLS (k = 8), test R2;
#   probe-direction edit (intervene, w_OLS's ridge probe, the response of a prediction x_q'w to
#     its weights, the edit at the y-token of example k): slope of the model's change on that
#     response (1 = used as a linear learner uses w);
#   erasure (LEACE of w_OLS at the y-token and the query): error / d increase over the model's;
#   DAS (w under OLS, m = d, the subspace interchanged at the y-token of example k): held-out IIA;
#   whole-context swap (OLS reference): share of OLS's change reproduced, pooled over k.
# Each with its 95% interval over prompts or pairs and its control (random direction, random
# erasure, random subspace). One row per learner: a learner of the cell is a seed, and the rows
# are not pooled (the cell's seeds learned to different degrees; checkpoints/README.md).
#
# Full profile: every finished cut-4 learner of checkpoints/bottleneck/. Quick profile: a tiny
# bottleneck learner trained here (2 layers, cut 1).
source "$(dirname "$0")/lib.sh"
setup_out power_trained
# A seed counts as learned when its last evaluation's loss is at most 1.5 times the uncut
# learner's of the same recipe at 10,000 steps (checkpoints/family/d4_l8_h64_half.h5: 0.210), the
# factor within which a cut learner is said to still learn (checkpoints/README.md); the seeds'
# table pools only those.
LEARNED_LOSS=0.315
if [ "$PROFILE" = full ]; then
  P=4000; PAIRS=500; TRAIN=3000; TEST=500; B=1000; EPOCHS=30; CUT=4; LAST=8
  LEARNERS=()
  # Per seed its longest finished budget: 20,000 steps where that run exists, else 10,000.
  for s in 1 2 3 4 5; do
    for f in "$ROOT/checkpoints/bottleneck/d4_l8_h64_b4_20k_s$s.h5" \
             "$ROOT/checkpoints/bottleneck/d4_l8_h64_b4_10k_s$s.h5"; do
      if finished "$f"; then LEARNERS+=("$f"); break; fi
    done
  done
else
  P=400; PAIRS=60; TRAIN=200; TEST=60; B=100; EPOCHS=2; CUT=1; LAST=2
  LEARNED_LOSS=10  # the tiny learner has not learned; it counts, so that the seeds' table runs
  run "$ICLPROBE" train --d 4 --n 12 --layers 2 --hidden 16 --heads 2 --bottleneck 1 --steps 20 \
    --warmup 2 --batch 8 --eval-every 10 --eval-prompts 20 --save-every 10 --seed 1 --threads 1 \
    --quiet --force --out "$RUNS/bottleneck_s1.h5" > /dev/null
  LEARNERS=("$RUNS/bottleneck_s1.h5")
fi
[ ${#LEARNERS[@]} -gt 0 ] || { echo "power_trained: no finished learner in checkpoints/bottleneck/" >&2; exit 2; }
K=4,8

# value CSV FILTER V: the column named V in the first row where the awk FILTER holds.
value() {
  awk -F, -v v="$3" "NR == 1 { for (i = 1; i <= NF; i++) h[\$i] = i; next }
    $2 { printf \"%.6f\", \$h[v]; exit }" "$1"
}

# triple CSV FILTER V LO HI: "v [lo, hi]" of the columns named V, LO, HI in the first row where
# the awk FILTER (over h["name"] column indices) holds.
triple() {
  awk -F, -v v="$3" -v lo="$4" -v hi="$5" "NR == 1 { for (i = 1; i <= NF; i++) h[\$i] = i; next }
    $2 { printf \"%.3f [%.3f, %.3f]\", \$h[v], \$h[lo], \$h[hi]; exit }" "$1"
}

SUMMARY="$OUT/summary.md"
SEEDS=""; rm -f "$RUNS/seeds.txt"
{ echo "| learner | eval loss | test | at the bottleneck, state $CUT (used) [95%] | at state $LAST (its y-token read by nothing) [95%] | control at state $CUT [95%] |"
  echo "|---|---:|---|---|---|---|"; } > "$SUMMARY"
for ck in "${LEARNERS[@]}"; do
  L=$(basename "$ck" .h5)
  # The training log's last evaluation (eval loss over its prompts), beside the checkpoint.
  loss=$(awk -F, 'NR > 1 && $4 != "" { e = $4 } END { printf "%.3f", e }' "${ck%.h5}.train.csv" 2>/dev/null || echo "?")
  run "$ICLPROBE" extract -c "$ck" --prompts $P --seed 7 --threads 1 --quiet --force \
    --out "$RUNS/acts_$L.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_$L.h5" --targets w_ols,xty --probes ridge --k $K --threads 1 \
    --quiet --force --out "$OUT/probes_$L.h5" --csv "$OUT/probes_$L.csv" > /dev/null
  rm -f "$RUNS/acts_$L.h5"
  run "$ICLPROBE" intervene -c "$ck" --probes "$OUT/probes_$L.h5" --target w_ols --response weights \
    --layers $CUT,$LAST --k $K --pairs $PAIRS --span probed --bootstrap $B --seed 11 --threads 1 \
    --quiet --force --out "$OUT/intervene_$L.h5" > /dev/null
  run "$ICLPROBE" erase -c "$ck" --target w_ols --layers $CUT,$LAST --k $K --fit-prompts $P -N $PAIRS \
    --bootstrap $B --seed 11 --threads 1 --quiet --force --out "$OUT/erase_$L.h5" > /dev/null
  run "$ICLPROBE" das -c "$ck" --quantity w --algorithm ols --position y-token --layers $CUT,$LAST \
    --m 4 --k $K --train-pairs $TRAIN --test-pairs $TEST --epochs $EPOCHS --bootstrap $B --seed 11 \
    --threads 1 --quiet --force --out "$OUT/das_$L.h5" > /dev/null
  run "$ICLPROBE" swap -c "$ck" --learners ols --layers $CUT,$LAST --k $K --pairs $PAIRS --bootstrap $B \
    --seed 11 --threads 1 --quiet --force --out "$OUT/swap_$L.h5" > /dev/null
  pr="$OUT/probes_$L.csv"; iv="$OUT/intervene_$L.csv"; er="$OUT/erase_$L.csv"
  das="$OUT/das_$L.csv"; sw="$OUT/swap_$L.csv"
  at() { echo "\$h[\"layer\"] == $1 && \$h[\"k\"] == \"$2\""; }
  echo "| $L | $loss | ridge probe of w_OLS, R2 (k = 8) | $(triple "$pr" "$(at $CUT 8) && \$h[\"target\"] == \"w_ols\" && \$h[\"source\"] == \"model\"" r2 r2_lo r2_hi) | $(triple "$pr" "$(at $LAST 8) && \$h[\"target\"] == \"w_ols\" && \$h[\"source\"] == \"model\"" r2 r2_lo r2_hi) | — |"
  echo "| $L | | probe edit, slope on x_q'w's response (k = 8) | $(triple "$iv" "$(at $CUT 8) && \$h[\"control\"] == \"probe\"" slope slope_lo slope_hi) | $(triple "$iv" "$(at $LAST 8) && \$h[\"control\"] == \"probe\"" slope slope_lo slope_hi) | random direction $(triple "$iv" "$(at $CUT 8) && \$h[\"control\"] == \"random\"" slope slope_lo slope_hi) |"
  echo "| $L | | erasure of w_OLS, error / d increase (k = 8) | $(triple "$er" "$(at $CUT 8)" erased_increase erased_increase_lo erased_increase_hi) | $(triple "$er" "$(at $LAST 8)" erased_increase erased_increase_lo erased_increase_hi) | random erasure $(triple "$er" "$(at $CUT 8)" random_increase random_increase_lo random_increase_hi) |"
  echo "| $L | | DAS (w under OLS, y-token, m = 4), held-out IIA (pooled over k) | $(triple "$das" "$(at $CUT pooled)" iia iia_lo iia_hi) | $(triple "$das" "$(at $LAST pooled)" iia iia_lo iia_hi) | random subspace $(triple "$das" "$(at $CUT pooled)" random_iia random_iia_lo random_iia_hi) |"
  echo "| $L | | swap, share of OLS's change (pooled over k) | $(triple "$sw" "$(at $CUT pooled) && \$h[\"reference\"] == \"ols\"" reproduced reproduced_lo reproduced_hi) | $(triple "$sw" "$(at $LAST pooled) && \$h[\"reference\"] == \"ols\"" reproduced reproduced_lo reproduced_hi) | — |"
  if awk -v l="$loss" -v m="$LEARNED_LOSS" 'BEGIN { exit !(l + 0 <= m + 0 && l != "?") }'; then
    # One line per learned seed and test: the estimate at the cut, at the last state, the control.
    SEEDS="$SEEDS $L"
    {
      echo "probe $(value "$pr" "$(at $CUT 8) && \$h[\"target\"] == \"w_ols\" && \$h[\"source\"] == \"model\"" r2) $(value "$pr" "$(at $LAST 8) && \$h[\"target\"] == \"w_ols\" && \$h[\"source\"] == \"model\"" r2) nan"
      echo "edit $(value "$iv" "$(at $CUT 8) && \$h[\"control\"] == \"probe\"" slope) $(value "$iv" "$(at $LAST 8) && \$h[\"control\"] == \"probe\"" slope) $(value "$iv" "$(at $CUT 8) && \$h[\"control\"] == \"random\"" slope)"
      echo "erase $(value "$er" "$(at $CUT 8)" erased_increase) $(value "$er" "$(at $LAST 8)" erased_increase) $(value "$er" "$(at $CUT 8)" random_increase)"
      echo "das $(value "$das" "$(at $CUT pooled)" iia) $(value "$das" "$(at $LAST pooled)" iia) $(value "$das" "$(at $CUT pooled)" random_iia)"
      echo "swap $(value "$sw" "$(at $CUT pooled) && \$h[\"reference\"] == \"ols\"" reproduced) $(value "$sw" "$(at $LAST pooled) && \$h[\"reference\"] == \"ols\"" reproduced) nan"
    } >> "$RUNS/seeds.txt"
  fi
done >> "$SUMMARY"
{ echo
  echo "Each learner was trained at one budget (10,000 or 20,000 steps, in its name); no shorter run of it exists, so it has no excess-error curve (checkpoints/README.md gives each seed's training log)."; } >> "$SUMMARY"

# The trained decoy (train --decoy-layer 4 --decoy-target xty): a head on state 4 of the last
# y-token, which no prediction reads, trained on X'y / n beside the predictions. The ridge probe
# of X'y there (k = n, the last y-token) is what a probe finds in a state nothing uses; at the
# y-token of example 4, which later tokens read, the same encoding is decodable and may be used.
# The causal tests have no prediction to read after the last y-token: every effect there is 0 by
# construction (tests Decoy.HeadChangesNoPredictionAndReadsTheLastState).
if [ "$PROFILE" = full ]; then
  DECOY="$ROOT/checkpoints/decoy/d4_l8_h64_decoy4_xty_10k_s1.h5"; DK=12; DP=2000; DL=4
else
  DECOY="$RUNS/decoy_s1.h5"; DK=11; DP=200; DL=1
  run "$ICLPROBE" train --d 4 --n 11 --layers 2 --hidden 16 --heads 2 --decoy-layer 1 \
    --decoy-target xty --steps 20 --warmup 2 --batch 8 --eval-every 10 --eval-prompts 20 \
    --save-every 10 --seed 1 --threads 1 --quiet --force --out "$DECOY" > /dev/null
fi
if finished "$DECOY"; then
  run "$ICLPROBE" extract -c "$DECOY" --prompts $DP --seed 7 --layers $DL --positions y --threads 1 \
    --quiet --force --out "$RUNS/acts_decoy.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_decoy.h5" --targets xty --probes ridge --k 4,$DK --threads 1 \
    --quiet --force --out "$OUT/probes_decoy.h5" --csv "$OUT/probes_decoy.csv" > /dev/null
  rm -f "$RUNS/acts_decoy.h5"
  d_at() { triple "$OUT/probes_decoy.csv" "\$h[\"layer\"] == $DL && \$h[\"k\"] == $1 && \$h[\"target\"] == \"xty\" && \$h[\"source\"] == \"model\"" r2 r2_lo r2_hi; }
  { echo
    echo "The trained decoy ($(basename "$DECOY" .h5): a head on state $DL of the last y-token, read by no prediction, trained on X'y / n): a ridge probe of X'y at that state (k = $DK) gives R2 $(d_at $DK), where every causal effect is 0 by construction; at state $DL of the y-token of example 4, which later tokens read, R2 $(d_at 4). $DP prompts of seed 7."; } >> "$SUMMARY"
fi

# Over the learned seeds: the mean of the per-seed estimates with a 95% Student-t interval over
# seeds (s - 1 degrees of freedom), so that the power rests on the recipe, not on one seed.
if [ -n "${SEEDS:-}" ] && [ -f "$RUNS/seeds.txt" ]; then
  ns=$(echo $SEEDS | wc -w)
  SEEDS_CSV="$OUT/seeds.csv"
  awk -v ns="$ns" 'function t975(df) { split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262", q, " ");
      return df <= 9 ? q[df] : 1.96 }
    { for (c = 2; c <= 4; c++) if ($c != "nan") { s[$1, c] += $c; ss[$1, c] += $c * $c; n[$1, c]++ }
      if (!($1 in seen)) { seen[$1] = 1; order[++m] = $1 } }
    END { print "test,state,mean,lo,hi,seeds"
      split("cut last control", what, " ")
      for (i = 1; i <= m; i++) for (c = 2; c <= 4; c++) { t = order[i]; k = n[t, c]; if (k == 0) continue
        mu = s[t, c] / k; v = k > 1 ? (ss[t, c] - k * mu * mu) / (k - 1) : 0; if (v < 0) v = 0
        h = k > 1 ? t975(k - 1) * sqrt(v / k) : 0
        printf "%s,%s,%.6f,%.6f,%.6f,%d\n", t, what[c - 1], mu, mu - h, mu + h, k } }' \
    "$RUNS/seeds.txt" > "$SEEDS_CSV"
  cell() { awk -F, -v t="$1" -v s="$2" '$1 == t && $2 == s {
    if ($6 > 1) printf "%.3f [%.3f, %.3f]", $3, $4, $5; else printf "%.3f (one seed: no interval)", $3 }' "$SEEDS_CSV"; }
  { echo
    echo "Over the learned seeds ($ns of them; last evaluation loss at most $LEARNED_LOSS:$SEEDS), the mean of the per-seed estimates with a 95% Student-t interval over seeds:"
    echo
    echo "| test | at the bottleneck, state $CUT (used) | at state $LAST (read by nothing) | control at state $CUT |"
    echo "|---|---|---|---|"
    echo "| ridge probe of w_OLS, R2 (k = 8) | $(cell probe cut) | $(cell probe last) | — |"
    echo "| probe edit, slope (k = 8) | $(cell edit cut) | $(cell edit last) | random direction $(cell edit control) |"
    echo "| erasure of w_OLS, error / d increase (k = 8) | $(cell erase cut) | $(cell erase last) | random erasure $(cell erase control) |"
    echo "| DAS, held-out IIA (pooled over k) | $(cell das cut) | $(cell das last) | random subspace $(cell das control) |"
    echo "| swap, share of OLS's change (pooled over k) | $(cell swap cut) | $(cell swap last) | — |"; } >> "$SUMMARY"
fi
finish "Power of the causal tests on trained bottleneck learners" "$SUMMARY"
