#!/usr/bin/env bash
# What each causal test finds where X'y is used and where it is not, on the
# rotated one-step gd construction (alpha 0.05, d = 4, n = 12) plain, with 64 distractor rows,
# with the unused decoy M X'y, and with the nuisance (sigma = 32: the ridge probe of X'y reads
# it with R2 ~0.3-0.6 where it is written, as the trained learners' probes do). Per variant, the
# state where X'y is used (written there, read by the next block) and one where it is not (the
# prediction is formed: nothing reads X'y any more), per test:
#   probe-direction edit (intervene, X'y's ridge probe, GD response, edits through the query):
#     slope of the model's change on GD's (1 = used as GD would, 0 = ignored);
#   DAS (m = d, X'y under GD at the query): held-out IIA (1 = a subspace carries it as GD uses it;
#     no interchange scores about -0.9 here, the level of "nothing carried");
#   erasure (LEACE of X'y at the y-token and the query): increase of the error over the model's;
#   whole-context swap (gd:0.05 reference): share of GD's change reproduced, at a state before
#     the query has read its context (used) and at the used state (the context is read no more).
# Each with its 95% interval and its control (random direction, random subspace, random erasure).
# The decoy variants add the probe edit of a probe fitted within the decoy's rows alone, and one
# within X'y's rows (intervene --within; the whole state's probe reads and edits both copies),
# and DAS's largest principal angle to X'y's rows. noisydecoy: the decoy carries a nuisance of
# its own (--decoy-noise 2), so that it is not an exact copy across prompts, which no
# interchange could tell from the used one. wide: 34 context distractors (--context-distractors:
# 186 rows of features of the prompt's x's that nothing reads, uncorrelated with X'y), so that
# the state has many independent directions as a trained learner's has, and a random erasure of
# rank 4 can be nearly free. (Not combined with the nuisance: the context rows hold x_k x_k^T at
# the y-token, from which a linear probe subtracts the nuisance sigma (P x_k)^2 exactly.)
source "$(dirname "$0")/lib.sh"
setup_out power
mkdir -p "$RUNS"
SUMMARY="$OUT/summary.md"; : > "$SUMMARY"
if [ "$PROFILE" = full ]; then
  P=4000; PAIRS=500; TRAIN=3000; TEST=500; B=1000
  VARIANTS=(plain distractors decoy noisydecoy nuisance wide)
else
  P=600; PAIRS=60; TRAIN=600; TEST=100; B=100; VARIANTS=(plain)
fi
K=4,8
declare -A FLAGS=([plain]="" [distractors]="--distractors 64" [decoy]="--decoy xty"
  [noisydecoy]="--decoy xty --decoy-noise 2" [nuisance]="--nuisance 32"
  [wide]="--context-distractors 34")
# The state where X'y is written and read next; with the nuisance, state 2 holds X'y + sigma
# (P x_k)^2 in its rows (what block 3 reads, removing the nuisance, before block 4 predicts): the
# used state where a linear probe reads X'y as poorly as the trained learners' probes do. The
# unused state: the last, after the prediction is formed.
declare -A USED=([plain]=2 [distractors]=2 [decoy]=2 [noisydecoy]=2 [nuisance]=2 [wide]=2)
declare -A UNUSED=([plain]=3 [distractors]=3 [decoy]=3 [noisydecoy]=3 [nuisance]=4 [wide]=3)

{
  echo "| variant | probe R2 of X'y at the used state (k = 4, 8) | test | where X'y is used [95%] | where it is not [95%] | control where used [95%] |"
  echo "|---|---|---|---|---|---|"
} >> "$SUMMARY"
for v in "${VARIANTS[@]}"; do
  u=${USED[$v]}; n=${UNUSED[$v]}; ck="$RUNS/gd_$v.h5"
  # shellcheck disable=SC2086
  run "$ICLPROBE" construct --program gd --alpha 0.05 --rotate 7 ${FLAGS[$v]} --d 4 --n 12 --force \
    --out "$ck" > /dev/null
  run "$ICLPROBE" extract -c "$ck" --prompts $P --seed 7 --threads 1 --quiet --force \
    --out "$RUNS/acts_$v.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_$v.h5" --targets xty --probes ridge --k $K --threads 1 \
    --quiet --force --out "$OUT/probes_$v.h5" --csv "$OUT/probes_$v.csv" > /dev/null
  rm -f "$RUNS/acts_$v.h5"
  run "$ICLPROBE" intervene -c "$ck" --probes "$OUT/probes_$v.h5" --target xty --response gd:0.05 \
    --layers $u,$n --k $K --pairs $PAIRS --span through-query --bootstrap $B --seed 11 --threads 1 \
    --quiet --force --out "$OUT/intervene_$v.h5" > /dev/null
  if [[ $v == *decoy ]]; then
    for rows in decoy_xty xty; do
      run "$ICLPROBE" intervene -c "$ck" --probes "$OUT/probes_$v.h5" --target xty --response gd:0.05 \
        --within $rows --layers $u --k $K --pairs $PAIRS --span through-query --bootstrap $B --seed 11 \
        --threads 1 --quiet --force --out "$OUT/intervene_${v}_within_$rows.h5" > /dev/null
    done
  fi
  run "$ICLPROBE" das -c "$ck" --quantity xty --algorithm gd:0.05 --layers $u,$n --m 4 \
    --train-pairs $TRAIN --test-pairs $TEST --bootstrap $B --seed 11 --threads 1 --quiet --force \
    --out "$OUT/das_$v.h5" > /dev/null
  run "$ICLPROBE" erase -c "$ck" --target xty --layers $u,$n --k $K --fit-prompts $P -N $PAIRS \
    --bootstrap $B --seed 11 --threads 1 --quiet --force --out "$OUT/erase_$v.h5" > /dev/null
  run "$ICLPROBE" swap -c "$ck" --learners gd:0.05 --layers 1,$u --k $K --pairs $PAIRS --bootstrap $B \
    --seed 11 --threads 1 --quiet --force --out "$OUT/swap_$v.h5" > /dev/null
  # probes: ...,layer,k,... with r2 columns; the ridge family's test R2 at the used state.
  r2=$(awk -F, -v u=$u 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
    $h["layer"] == u && $h["target"] == "xty" { printf "%s%.2f", s, $h["r2"]; s = ", " }' "$OUT/probes_$v.csv")
  iv="$OUT/intervene_$v.csv"  # target,response,span,metric,layer,k,control,pairs,slope,lo,hi,...
  das="$OUT/das_$v.csv"       # quantity,algorithm,position,layer,m,k,test_pairs,iia,lo,hi,random...
  er="$OUT/erase_$v.csv"      # ...,erased_increase 12-14, ..., random_increase 18-20
  sw="$OUT/swap_$v.csv"       # reference,layer,k,pairs,reproduced 5-7
  for k in 8; do
    echo "| $v | $r2 | probe edit, slope (k = $k) | $(pick "$iv" "\$5 == $u && \$6 == $k && \$7 == \"probe\"" "9 10 11") | $(pick "$iv" "\$5 == $n && \$6 == $k && \$7 == \"probe\"" "9 10 11") | random direction $(pick "$iv" "\$5 == $u && \$6 == $k && \$7 == \"random\"" "9 10 11") |"
    echo "| $v | | erasure, error increase (k = $k) | $(pick "$er" "\$2 == $u && \$3 == $k" "12 13 14") | $(pick "$er" "\$2 == $n && \$3 == $k" "12 13 14") | random erasure $(pick "$er" "\$2 == $u && \$3 == $k" "18 19 20") |"
  done
  echo "| $v | | DAS, held-out IIA (pooled over k) | $(pick "$das" "\$4 == $u && \$6 == \"pooled\"" "8 9 10") | $(pick "$das" "\$4 == $n && \$6 == \"pooled\"" "8 9 10") | random subspace $(pick "$das" "\$4 == $u && \$6 == \"pooled\"" "11 12 13"); no interchange $(awk -F, -v u=$u 'NR > 1 && $4 == u && $6 == "pooled" { printf "%.3f", $14; exit }' "$das") |"
  if [[ $v == *decoy ]]; then
    echo "| $v | | probe edit within X'y's rows / within the decoy's rows, slope (k = 8) | $(pick "$OUT/intervene_${v}_within_xty.csv" "\$6 == 8 && \$7 == \"probe\"" "9 10 11") | $(pick "$OUT/intervene_${v}_within_decoy_xty.csv" "\$6 == 8 && \$7 == \"probe\"" "9 10 11") | — |"
    echo "| $v | | DAS at the used state: largest angle to X'y's rows / smallest to the decoy's (degrees) | $(column_of "$das" angle_max_xty "\$4 == $u && \$6 == \"pooled\"") | $(column_of "$das" angle_min_decoy_xty "\$4 == $u && \$6 == \"pooled\"") | — |"
  fi
  echo "| $v | | swap, share of GD's change (pooled; states 1 and $u) | $(pick "$sw" "\$1 == \"gd:0.05\" && \$2 == 1 && \$3 == \"pooled\"" "5 6 7") | $(pick "$sw" "\$1 == \"gd:0.05\" && \$2 == $u && \$3 == \"pooled\"" "5 6 7") | — |"
done >> "$SUMMARY"
# The same tests on trained ground truth, pooled over the learned seeds of the bottleneck
# learners (experiments/power_trained.sh, run first; each seed's rows are in its folder).
TRAINED="$ROOT/results/power_trained/summary.md"
if [ "$PROFILE" = full ] && grep -q "^Over the learned seeds" "$TRAINED" 2>/dev/null; then
  { echo
    echo "## On trained ground truth"
    echo
    echo "Bottleneck learners (\`train --bottleneck 4\`, d = 4, L = 8): the prediction reads the context only through the y-token of example k at state 4, so w must pass there and is used; the same token's last state (8) is read by nothing. From [power_trained](../power_trained/README.md), which has each seed's rows:"
    echo
    sed -n '/^Over the learned seeds/,$p' "$TRAINED"; } >> "$SUMMARY"
fi
finish "Power of the causal tests on constructions" "$SUMMARY"
