#!/usr/bin/env bash
# The power of the causal tests on trained ground truth: bottleneck learners (train --bottleneck
# 4, checkpoints/bottleneck/), whose prediction at the x-token of example k+1 sees the context
# only through the y-token of example k at state 4 (docs/guide/learners.md). That state must
# carry what the prediction uses of the context, and it is used; the same token's last state
# (8) is read by nothing, a decoy by construction. Per learner, per test, at states 3, 4, 5 and 8:
#   ridge and MLP probes of w_OLS and the ridge probe of X'y (k = 8), test R2;
#   probe-direction edit (intervene, w_OLS's ridge probe, the response of a prediction x_q'w to
#     its weights, the edit at the y-token of example k): slope of the model's change on that
#     response (1 = used as a linear learner uses w);
#   erasure (LEACE of w_OLS at the y-token and the query): error / d increase over the model's;
#   DAS (w, and X'y, under OLS, m = d, the subspace interchanged at the y-token of example k):
#     held-out IIA;
#   whole-context swap (OLS reference): share of OLS's change reproduced, pooled over k.
# Each with its 95% interval over prompts or pairs and its control (random direction, random
# erasure, random subspace). One row per learner and test (a learner of the cell is a seed), then
# a table over the learned seeds only (the cell's seeds learned to different degrees;
# checkpoints/README.md).
#
# Full profile: every finished cut-4 learner of checkpoints/bottleneck/. Quick profile: a tiny
# bottleneck learner trained here (4 layers, cut 2).
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
  P=400; PAIRS=60; TRAIN=200; TEST=60; B=100; EPOCHS=2; CUT=2; LAST=4
  LEARNED_LOSS=10  # the tiny learner has not learned; it counts, so that the seeds' table runs
  run "$ICLPROBE" train --d 4 --n 12 --layers 4 --hidden 16 --heads 2 --bottleneck 2 --steps 20 \
    --warmup 2 --batch 8 --eval-every 10 --eval-prompts 20 --save-every 10 --seed 1 --threads 1 \
    --quiet --force --out "$RUNS/bottleneck_s1.h5" > /dev/null
  LEARNERS=("$RUNS/bottleneck_s1.h5")
fi
[ ${#LEARNERS[@]} -gt 0 ] || { echo "power_trained: no finished learner in checkpoints/bottleneck/" >&2; exit 2; }
K=4,8
# The states read: the cut, one block before and after it, and the last (read by nothing).
# Before the cut the y-token of example k still attends to the context, so its state BEFORE is
# one of several that block CUT combines; after it, the y-token attends only to itself and the
# x-token of example k+1 has read its state CUT already (docs/guide/learners.md), so an edit at
# AFTER reaches the prediction only through the blocks after it.
BEFORE=$((CUT - 1)); AFTER=$((CUT + 1))
LAYERS="$BEFORE,$CUT,$AFTER,$LAST"
STATES=("$BEFORE" "$CUT" "$AFTER" "$LAST"); LABELS=(before cut after last)

# value CSV FILTER V: the column named V in the first row where the awk FILTER holds ("nan" when
# no row does).
value() {
  awk -F, -v v="$3" "NR == 1 { for (i = 1; i <= NF; i++) h[\$i] = i; next }
    $2 { printf \"%.6f\", \$h[v]; found = 1; exit } END { if (!found) printf \"nan\" }" "$1"
}

# triple CSV FILTER V LO HI: "v [lo, hi]" of the columns named V, LO, HI in the first row where
# the awk FILTER (over h["name"] column indices) holds; "—" when no row does.
triple() {
  awk -F, -v v="$3" -v lo="$4" -v hi="$5" "NR == 1 { for (i = 1; i <= NF; i++) h[\$i] = i; next }
    $2 { printf \"%.3f [%.3f, %.3f]\", \$h[v], \$h[lo], \$h[hi]; found = 1; exit }
    END { if (!found) printf \"—\" }" "$1"
}

# row TEST TITLE CSV FILTER V LO HI [CONTROL_NAME CONTROL_FILTER CV CLO CHI]: one learner's row of
# TEST, the estimate at every state read and the control at the cut; the filters have @L@ where
# the layer goes.
# A learned seed's estimates are appended to seeds.txt as "TEST STATE VALUE" lines.
row() {
  local t="$1" title="$2" csv="$3" f="$4" v="$5" lo="$6" hi="$7" line i
  line="| $L | $loss_cell | $title |"; loss_cell=""
  for i in "${!STATES[@]}"; do
    line="$line $(triple "$csv" "${f//@L@/${STATES[$i]}}" "$v" "$lo" "$hi") |"
    [ "$learned" = 0 ] || echo "$t ${LABELS[$i]} $(value "$csv" "${f//@L@/${STATES[$i]}}" "$v")" >> "$RUNS/seeds.txt"
  done
  if [ $# -gt 7 ]; then
    local cf="${9//@L@/$CUT}"
    line="$line $8 $(triple "$csv" "$cf" "${10}" "${11}" "${12}") |"
    [ "$learned" = 0 ] || echo "$t control $(value "$csv" "$cf" "${10}")" >> "$RUNS/seeds.txt"
  else
    line="$line — |"
  fi
  echo "$line"
}

# The tests, their titles in the tables and their CSV filters (@L@: the layer).
probe_f() { echo "\$h[\"layer\"] == @L@ && \$h[\"k\"] == 8 && \$h[\"target\"] == \"$1\" && \$h[\"probe\"] == \"$2\" && \$h[\"source\"] == \"model\""; }
at() { echo "\$h[\"layer\"] == @L@ && \$h[\"k\"] == \"$1\""; }

SUMMARY="$OUT/summary.md"
SEEDS=""; rm -f "$RUNS/seeds.txt"
HEAD="| state $BEFORE (before the cut) | state $CUT (the bottleneck, used) | state $AFTER (after the cut) | state $LAST (read by nothing) | control at state $CUT |"
{ echo "| learner | eval loss | test $HEAD"
  echo "|---|---:|---|---|---|---|---|---|"; } > "$SUMMARY"
for ck in "${LEARNERS[@]}"; do
  L=$(basename "$ck" .h5)
  # The training log's last evaluation (eval loss over its prompts), beside the checkpoint.
  loss=$(awk -F, 'NR > 1 && $4 != "" { e = $4 } END { printf "%.3f", e }' "${ck%.h5}.train.csv" 2>/dev/null || echo "?")
  learned=0
  if awk -v l="$loss" -v m="$LEARNED_LOSS" 'BEGIN { exit !(l + 0 <= m + 0 && l != "?") }'; then
    learned=1; SEEDS="$SEEDS $L"
  fi
  run "$ICLPROBE" extract -c "$ck" --prompts $P --seed 7 --threads 1 --quiet --force \
    --out "$RUNS/acts_$L.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_$L.h5" --targets w_ols,xty --probes ridge,mlp --k $K --threads 1 \
    --quiet --force --out "$OUT/probes_$L.h5" --csv "$OUT/probes_$L.csv" > /dev/null
  rm -f "$RUNS/acts_$L.h5"
  run "$ICLPROBE" intervene -c "$ck" --probes "$OUT/probes_$L.h5" --target w_ols --response weights \
    --layers $LAYERS --k $K --pairs $PAIRS --span probed --bootstrap $B --seed 11 --threads 1 \
    --quiet --force --out "$OUT/intervene_$L.h5" > /dev/null
  run "$ICLPROBE" erase -c "$ck" --target w_ols --layers $LAYERS --k $K --fit-prompts $P -N $PAIRS \
    --bootstrap $B --seed 11 --threads 1 --quiet --force --out "$OUT/erase_$L.h5" > /dev/null
  run "$ICLPROBE" das -c "$ck" --quantity w --algorithm ols --position y-token --layers $LAYERS \
    --m 4 --k $K --train-pairs $TRAIN --test-pairs $TEST --epochs $EPOCHS --bootstrap $B --seed 11 \
    --threads 1 --quiet --force --out "$OUT/das_$L.h5" > /dev/null
  # X'y under OLS needs k >= d + 2 (the inverse of X'X of the pair's other prompt): k = 8 only.
  run "$ICLPROBE" das -c "$ck" --quantity xty --algorithm ols --position y-token --layers $LAYERS \
    --m 4 --k 8 --train-pairs $TRAIN --test-pairs $TEST --epochs $EPOCHS --bootstrap $B --seed 11 \
    --threads 1 --quiet --force --out "$OUT/das_xty_$L.h5" > /dev/null
  run "$ICLPROBE" swap -c "$ck" --learners ols --layers $LAYERS --k $K --pairs $PAIRS --bootstrap $B \
    --seed 11 --threads 1 --quiet --force --out "$OUT/swap_$L.h5" > /dev/null
  pr="$OUT/probes_$L.csv"; iv="$OUT/intervene_$L.csv"; er="$OUT/erase_$L.csv"
  das="$OUT/das_$L.csv"; dx="$OUT/das_xty_$L.csv"; sw="$OUT/swap_$L.csv"
  loss_cell="$loss"
  row probe "ridge probe of w_OLS, R2 (k = 8)" "$pr" "$(probe_f w_ols ridge)" r2 r2_lo r2_hi
  row probe_mlp "MLP probe of w_OLS, R2 (k = 8)" "$pr" "$(probe_f w_ols mlp)" r2 r2_lo r2_hi
  row probe_xty "ridge probe of X'y, R2 (k = 8)" "$pr" "$(probe_f xty ridge)" r2 r2_lo r2_hi
  row edit "probe edit, slope on x_q'w's response (k = 8)" "$iv" "$(at 8) && \$h[\"control\"] == \"probe\"" \
    slope slope_lo slope_hi "random direction" "$(at 8) && \$h[\"control\"] == \"random\"" slope slope_lo slope_hi
  row erase "erasure of w_OLS, error / d increase (k = 8)" "$er" "$(at 8)" \
    erased_increase erased_increase_lo erased_increase_hi \
    "random erasure" "$(at 8)" random_increase random_increase_lo random_increase_hi
  row das "DAS (w under OLS, y-token, m = 4), held-out IIA (pooled over k)" "$das" "$(at pooled)" \
    iia iia_lo iia_hi "random subspace" "$(at pooled)" random_iia random_iia_lo random_iia_hi
  row das_xty "DAS (X'y under OLS, y-token, m = 4), held-out IIA (k = 8)" "$dx" "$(at pooled)" \
    iia iia_lo iia_hi "random subspace" "$(at pooled)" random_iia random_iia_lo random_iia_hi
  row swap "swap, share of OLS's change (pooled over k)" "$sw" "$(at pooled) && \$h[\"reference\"] == \"ols\"" \
    reproduced reproduced_lo reproduced_hi
done >> "$SUMMARY"
{ echo
  echo "Each learner was trained at one budget (10,000 or 20,000 steps, in its name); no shorter run of it exists, so it has no excess-error curve (checkpoints/README.md gives each seed's training log). The probes read the y-token of example k (the state after k examples); the MLP probe is iclprobe's default (one hidden layer). DAS of X'X is not offered by \`iclprobe das\` (its quantities are w and X'y)."; } >> "$SUMMARY"

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
  # seeds.txt: "TEST STATE VALUE" per learned seed; one CSV row per (test, state), in first-seen order.
  awk 'function t975(df) { split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262", q, " ");
      return df <= 9 ? q[df] : 1.96 }
    { key = $1 "," $2; if (!(key in seen)) { seen[key] = 1; order[++m] = key }
      if ($3 != "nan") { s[key] += $3; ss[key] += $3 * $3; n[key]++ } }
    END { print "test,state,mean,lo,hi,seeds"
      for (i = 1; i <= m; i++) { key = order[i]; k = n[key]; if (k == 0) continue
        mu = s[key] / k; v = k > 1 ? (ss[key] - k * mu * mu) / (k - 1) : 0; if (v < 0) v = 0
        h = k > 1 ? t975(k - 1) * sqrt(v / k) : 0
        printf "%s,%.6f,%.6f,%.6f,%d\n", key, mu, mu - h, mu + h, k } }' \
    "$RUNS/seeds.txt" > "$SEEDS_CSV"
  cell() { awk -F, -v t="$1" -v s="$2" '$1 == t && $2 == s { found = 1
    if ($6 > 1) printf "%.3f [%.3f, %.3f]", $3, $4, $5; else printf "%.3f (one seed: no interval)", $3 }
    END { if (!found) printf "—" }' "$SEEDS_CSV"; }
  line() {  # line TEST TITLE [CONTROL_NAME]
    local l="| $2 |" st
    for st in "${LABELS[@]}"; do l="$l $(cell "$1" "$st") |"; done
    if [ $# -gt 2 ]; then l="$l $3 $(cell "$1" control) |"; else l="$l — |"; fi
    echo "$l"
  }
  { echo
    echo "Over the learned seeds ($ns of them; last evaluation loss at most $LEARNED_LOSS:$SEEDS), the mean of the per-seed estimates with a 95% Student-t interval over seeds:"
    echo
    echo "| test $HEAD"
    echo "|---|---|---|---|---|---|"
    line probe "ridge probe of w_OLS, R2 (k = 8)"
    line probe_mlp "MLP probe of w_OLS, R2 (k = 8)"
    line probe_xty "ridge probe of X'y, R2 (k = 8)"
    line edit "probe edit, slope (k = 8)" "random direction"
    line erase "erasure of w_OLS, error / d increase (k = 8)" "random erasure"
    line das "DAS of w, held-out IIA (pooled over k)" "random subspace"
    line das_xty "DAS of X'y, held-out IIA (k = 8)" "random subspace"
    line swap "swap, share of OLS's change (pooled over k)"; } >> "$SUMMARY"
fi
finish "Power of the causal tests on trained bottleneck learners" "$SUMMARY"
