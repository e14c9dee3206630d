#!/usr/bin/env bash
# Is what the probes read *used*? Per learner of the family: ridge probes of w_ols and
# X'y at k = d and k = 8, then interchange interventions along each probe's direction at every
# layer (edits at the probed y-token, and through the query), with the random-direction
# control; the slopes by layer next to the probe R2, per learner and over the family.
source "$(dirname "$0")/lib.sh"
setup_out intervene
if [ "$PROFILE" = full ]; then
  LEARNERS=("$ROOT/checkpoints/d4_l8_h64.h5" "$ROOT/checkpoints/family/d4_l8_h64_s2.h5"
            "$ROOT/checkpoints/family/d4_l8_h64_s3.h5" "$ROOT/checkpoints/family/d4_l8_h64_s4.h5")
  SEEDS=(1 2 3 4); P=10000; PAIRS=1000; KS=4,8
else
  LEARNERS=(); SEEDS=(1); P=600; PAIRS=60; KS=4
  run "$ICLPROBE" train --d 4 --n 12 --layers 2 --hidden 16 --heads 2 --steps 20 --batch 32 --warmup 2 \
    --seed 1 --threads 1 --eval-prompts 100 --eval-every 20 --save-every 20 --quiet --force \
    --out "$RUNS/learner_s1.h5" > /dev/null
  LEARNERS+=("$RUNS/learner_s1.h5")
fi
TARGETS=(w_ols xty); SPANS=(probed through-query)
# A learner's outputs are reused when its stamp (checkpoint digest and the profile's sizes)
# matches, so the summary can be redrawn without running the learners again.
stamp() { echo "$(sha256sum < "$1" | cut -c1-64) P=$P PAIRS=$PAIRS KS=$KS"; }
for i in "${!LEARNERS[@]}"; do
  L="s${SEEDS[$i]}"; mkdir -p "$OUT/$L"
  want=$(stamp "${LEARNERS[$i]}")
  if [ -f "$OUT/$L/stamp" ] && [ "$(cat "$OUT/$L/stamp")" = "$want" ] && [ -f "$OUT/$L/commands.txt" ]; then
    echo "experiments/intervene: $L: reusing outputs made from the same checkpoint" >&2; continue
  fi
  rm -f "$OUT/$L/stamp"; CMDS="$OUT/$L/commands.txt"; : > "$CMDS"
  run "$ICLPROBE" extract -c "${LEARNERS[$i]}" --prompts $P --seed 7 --threads 1 --quiet --force \
    --out "$RUNS/acts_$L.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_$L.h5" --targets w_ols,xty --probes ridge --k $KS --threads 1 \
    --quiet --force --out "$OUT/$L/probes.h5" --csv "$OUT/$L/probes.csv" > /dev/null
  rm -f "$RUNS/acts_$L.h5"
  for t in "${TARGETS[@]}"; do
    for s in "${SPANS[@]}"; do
      # X'y's response: the learners behave like OLS at noise 0 (results/noiseless), so a change
      # d(X'y) should move the prediction by x_q^T (X'X)^+ d(X'y).
      resp=weights; [ $t = xty ] && resp=ols
      run "$ICLPROBE" intervene -c "${LEARNERS[$i]}" --probes "$OUT/$L/probes.h5" --target $t \
        --response $resp --k $KS --pairs $PAIRS --span $s --seed 11 --threads 1 --quiet --force \
        --out "$OUT/$L/intervene_${t}_$s.h5" > "$OUT/$L/intervene_${t}_$s.txt"
    done
  done
  echo "$want" > "$OUT/$L/stamp"; unset CMDS
done
for i in "${!LEARNERS[@]}"; do cat "$OUT/s${SEEDS[$i]}/commands.txt" >> "$OUT/commands.txt"; done
# The first learner's figures: slopes by layer next to the probe R2.
IV=(); for t in "${TARGETS[@]}"; do for s in "${SPANS[@]}"; do IV+=(--interventions "$OUT/s${SEEDS[0]}/intervene_${t}_$s.h5"); done; done
rm -rf "$OUT/figs"
run "$ICLPROBE" report --probes "$OUT/s${SEEDS[0]}/probes.h5" --k ${KS##*,} "${IV[@]}" --plot-dir "$OUT/figs" \
  --force > /dev/null
# Over the family: per target, span, k and layer, each learner's slope [95% interval], the mean
# probe R2 and the random control's range.
{
  echo "${#LEARNERS[@]} learner(s) (seeds ${SEEDS[*]}), ridge probes on $P prompts (seed 7), $PAIRS pairs"
  echo "(seed 11) per (layer, k); slope of the observed on the predicted change of the prediction"
  echo "with its 95% bootstrap interval over pairs (1 = the model responds as the algorithm would,"
  echo "0 = the edit is ignored); the random control is an edit of the same norm in a random direction."
  echo "† marks a learner whose median edit is larger than the state itself (|dh| > |h|): the probe"
  echo "reads little there, the edit takes the state far from anything the model saw, and the slope"
  echo "says little either way."
  for t in "${TARGETS[@]}"; do for s in "${SPANS[@]}"; do for k in ${KS//,/ }; do
    echo; echo "### $t, edits at $s, k = $k"; echo
    for i in "${!LEARNERS[@]}"; do echo "s${SEEDS[$i]} $OUT/s${SEEDS[$i]}/intervene_${t}_$s.csv"; done |
      awk -v k=$k -F, '
        NF == 2 || /^s[0-9]/ { split($0, a, " "); name[++n] = a[1]; file[n] = a[2]; next }
        END {
          for (i = 1; i <= n; i++) {
            while ((getline line < file[i]) > 0) {
              # target,response,span,metric,layer,k,control,pairs,slope,slope_lo,slope_hi,
              # correlation,probe_r2,mean_abs_predicted,mean_abs_observed,median_edit_rel
              split(line, f, ","); if (f[1] == "target" || f[6] != k) continue
              l = f[5]; layers[l] = 1
              if (f[7] == "probe") { cell[l, i] = sprintf("%.2f [%.2f, %.2f]%s", f[9], f[10], f[11], f[16] > 1 ? " †" : ""); r2[l] += f[13]; rel[l] += f[16] }
              else { if (!((l) in rlo) || f[9] < rlo[l]) rlo[l] = f[9]; if (!((l) in rhi) || f[9] > rhi[l]) rhi[l] = f[9] }
            }
          }
          printf "| layer | probe R2 (mean) | edit / state (median, mean) |"; for (i = 1; i <= n; i++) printf " %s slope |", name[i]; print " random slopes (range) |"
          printf "|---:|---:|---:|"; for (i = 1; i <= n; i++) printf "---:|"; print "---:|"
          for (l = 0; l <= 64; l++) if (l in layers) {
            printf "| %d | %.3f | %.3g |", l, r2[l] / n, rel[l] / n
            for (i = 1; i <= n; i++) printf " %s |", cell[l, i]
            printf " %.2f .. %.2f |\n", rlo[l], rhi[l]
          }
        }'
  done; done; done
} > "$OUT/summary.md"
finish "Is it used? Interventions along probe directions" "$OUT/summary.md"
