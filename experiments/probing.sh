#!/usr/bin/env bash
# Where X'y, w_OLS and X'X become decodable, on a family of independently trained
# learners of one recipe, every score with its 95% bootstrap interval. Per learner: its own
# random-init twin and the shared fixed-w twin as controls; ridge at every k on all prompts,
# attention-pooled linear and MLP probes at k = d and k = n on the first GRAD prompts; then the
# family report (R2 by layer over learners, onset agreement).
source "$(dirname "$0")/lib.sh"
setup_out probing
if [ "$PROFILE" = full ]; then
  # The shipped learner and the family (checkpoints/README.md): same recipe, seeds 1..4.
  LEARNERS=("$ROOT/checkpoints/d4_l8_h64.h5" "$ROOT/checkpoints/family/d4_l8_h64_s2.h5"
            "$ROOT/checkpoints/family/d4_l8_h64_s3.h5" "$ROOT/checkpoints/family/d4_l8_h64_s4.h5")
  SEEDS=(1 2 3 4); FIXEDW="$ROOT/checkpoints/d4_l8_h64_fixedw.h5"
  ARCH="--layers 8 --hidden 64 --heads 4"; P=20000; GRAD=4000; EPOCHS=30; KLOW=1,2,3,11; CLB=""
else
  # Two tiny learners trained here for a few steps: the pipeline, not the science.
  LEARNERS=(); SEEDS=(1 2); ARCH="--layers 2 --hidden 16 --heads 2"
  for s in 1 2; do
    run "$ICLPROBE" train --d 4 --n 12 $ARCH --steps 20 --batch 32 --warmup 2 --seed $s --threads 1 \
      --eval-prompts 100 --eval-every 20 --save-every 20 --quiet --force --out "$RUNS/learner_s$s.h5" > /dev/null
    LEARNERS+=("$RUNS/learner_s$s.h5")
  done
  run "$ICLPROBE" train --d 4 --n 12 $ARCH --steps 20 --batch 32 --warmup 2 --seed 1 --fixed-w --threads 1 \
    --eval-prompts 100 --eval-every 20 --save-every 20 --quiet --force --out "$RUNS/fixedw.h5" > /dev/null
  FIXEDW="$RUNS/fixedw.h5"; P=600; GRAD=300; EPOCHS=3; KLOW=2,3,11; CLB="--codelength-blocks 0.05,0.1,0.25,0.5,1"
fi
for i in "${!LEARNERS[@]}"; do
  ck=${LEARNERS[$i]}
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" ${SEEDS[$i]} "* ]]; then continue; fi
  if "$ICLPROBE" inspect "$ck" | awk '$1 == "step" && $2 != $4 {bad = 1} END {exit !bad}'; then
    echo "experiments/probing: $ck is an unfinished training run; finish it with train --resume" >&2; exit 2
  fi
done
# A learner's probes are reused when its stamp (checkpoint digest and the profile's sizes) matches,
# so a family can be probed learner by learner as its training runs finish (ONLY="1 2" probes
# just those seeds and stops before the family report).
stamp() { echo "$(cat "$1" "$FIXEDW" | sha256sum | cut -c1-64) P=$P GRAD=$GRAD EPOCHS=$EPOCHS ARCH=$ARCH KLOW=$KLOW codelength"; }
fixedw_acts() {  # the fixed-w twin, probed on ordinary tasks (w ~ N(0, I)), extracted once
  [ -f "$RUNS/acts_fixedw.h5" ] && return 0
  run "$ICLPROBE" extract -c "$FIXEDW" --fixed-w false --prompts $P --seed 7 --learner-targets newton:3 --threads 1 --quiet --force \
    --out "$RUNS/acts_fixedw.h5" > /dev/null
}
RIDGE=(); GRADS=()
for i in "${!LEARNERS[@]}"; do
  s=${SEEDS[$i]}; L="s$s"; mkdir -p "$OUT/$L"
  RIDGE+=("$OUT/$L/probes_ridge.h5"); GRADS+=("$OUT/$L/probes_grad.h5")
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $s "* ]]; then continue; fi
  want=$(stamp "${LEARNERS[$i]}")
  # (The ridge probes files are not tracked in git: a fresh clone probes every learner again.)
  if [ -f "$OUT/$L/stamp" ] && [ "$(cat "$OUT/$L/stamp")" = "$want" ] && [ -f "$OUT/$L/commands.txt" ] &&
     [ -f "$OUT/$L/probes_ridge.h5" ] && [ -f "$OUT/$L/probes_grad.h5" ] && [ -f "$OUT/$L/probes_targets.h5" ]; then
    echo "experiments/probing: $L: reusing probes made from the same checkpoint" >&2; continue
  fi
  rm -f "$OUT/$L/stamp"; CMDS="$OUT/$L/commands.txt"; : > "$CMDS"
  fixedw_acts
  run "$ICLPROBE" train --d 4 --n 12 $ARCH --seed $s --init-only --force --out "$RUNS/init_$L.h5" > /dev/null
  run "$ICLPROBE" extract -c "${LEARNERS[$i]}" --prompts $P --seed 7 --learner-targets newton:3 --threads 1 --quiet --force \
    --out "$RUNS/acts_$L.h5" > /dev/null
  run "$ICLPROBE" extract -c "$RUNS/init_$L.h5" --prompts $P --seed 7 --learner-targets newton:3 --threads 1 --quiet --force \
    --out "$RUNS/acts_init_$L.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_$L.h5" --control "$RUNS/acts_init_$L.h5" --control "$RUNS/acts_fixedw.h5" \
    --targets w_ols,xty,xtx --probes ridge --codelength $CLB --threads 1 --quiet --force \
    --out "$OUT/$L/probes_ridge.h5" --csv "$OUT/$L/probes_ridge.csv" > /dev/null
  # Where the hypotheses differ: k < d, where noiseless w_OLS (minimum norm), one GD
  # step (X'y), three Newton steps and ridge(0.1) are different vectors, read at the y-token of
  # example k and at the x-token of example k + 1, where the prediction is read.
  run "$ICLPROBE" probe -a "$RUNS/acts_$L.h5" --control "$RUNS/acts_init_$L.h5" --control "$RUNS/acts_fixedw.h5" \
    --targets w_ols,w_ridge,xty,w_newton_3 --probes ridge --at both --k $KLOW --threads 1 --quiet --force \
    --out "$OUT/$L/probes_targets.h5" --csv "$OUT/$L/probes_targets.csv" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts_$L.h5" --control "$RUNS/acts_init_$L.h5" --control "$RUNS/acts_fixedw.h5" \
    --targets w_ols,xty,xtx --probes linear,mlp --k 4,12 --max-prompts $GRAD --epochs $EPOCHS --threads 1 \
    --quiet --force --out "$OUT/$L/probes_grad.h5" --csv "$OUT/$L/probes_grad.csv" > /dev/null
  rm -f "$RUNS/acts_$L.h5" "$RUNS/acts_init_$L.h5"  # 1.1 GB each in the full profile
  echo "$want" > "$OUT/$L/stamp"; unset CMDS
done
rm -f "$RUNS/acts_fixedw.h5"
if [ -n "${ONLY:-}" ]; then echo "experiments/probing: probed seeds $ONLY; run again without ONLY for the family report" >&2; exit 0; fi
for i in "${!LEARNERS[@]}"; do cat "$OUT/s${SEEDS[$i]}/commands.txt" >> "$OUT/commands.txt"; done
# The single-learner run this replaces (3,000 prompts, no intervals) leaves no stale files.
if [ "$PROFILE" = full ]; then rm -rf "$OUT/probes.h5" "$OUT/probes.csv" "$OUT/figs"; fi
for i in "${!LEARNERS[@]}"; do
  L="s${SEEDS[$i]}"
  run "$ICLPROBE" report --probes "$OUT/$L/probes_ridge.h5" --k d,n --force --out "$OUT/$L/report_ridge.md" > "$OUT/$L/onset_ridge.txt"
  run "$ICLPROBE" report --probes "$OUT/$L/probes_grad.h5" --k d,n --compare-probes linear,mlp --force --out "$OUT/$L/report_grad.md" > "$OUT/$L/onset_grad.txt"
  for k in ${KLOW//,/ }; do
    for at in "" .query; do
      run "$ICLPROBE" report --probes "$OUT/$L/probes_targets.h5" --k $k --compare-targets "w_ols$at,w_ridge$at,xty$at,w_newton_3$at" \
        --force --out "$OUT/$L/report_targets_k$k${at/./_}.md" > "$OUT/$L/targets_k$k${at/./_}.txt"
    done
  done
done
run "$ICLPROBE" report --probes "${RIDGE[@]}" --k n --force --out "$OUT/family_ridge.md" > "$OUT/family_ridge_onset.txt"
run "$ICLPROBE" report --probes "${GRADS[@]}" --k n --force --out "$OUT/family_grad.md" > "$OUT/family_grad_onset.txt"
run "$ICLPROBE" report --probes "${RIDGE[@]}" --k n --format csv --force --out "$OUT/family_ridge.csv" > /dev/null
# The same probes at positions later computation reads (k = 11: the y-token of example 11 and
# the query, the x-token of example 12), from the per-learner CSVs.
LDIRS=(); for i in "${!LEARNERS[@]}"; do LDIRS+=("$OUT/s${SEEDS[$i]}"); done
run python3 "$ROOT/experiments/read_positions.py" "${LDIRS[@]}" --k 11 --force --out "$OUT" > /dev/null
{ echo "${#LEARNERS[@]} learners of one recipe (seeds ${SEEDS[*]}), $P prompts each (seed 7; ridge on all,"
  echo "linear and MLP on the first $GRAD), one probe seed, 95% bootstrap intervals over test prompts."
  echo; echo "## Onset per learner and agreement (k = n)"; echo; echo '```'
  cat "$OUT/family_ridge_onset.txt" "$OUT/family_grad_onset.txt" | grep -v '^wrote'; echo '```'
  echo; echo "## At positions that are read (k = 11)"; echo; cat "$OUT/read_positions.md"
  echo; echo "## Ridge R² by layer over the learners (k = n)"; cat "$OUT/family_ridge.md"
  echo; echo "## Linear and MLP probes over the learners (k = n)"; cat "$OUT/family_grad.md"
  echo; echo "## Linear against MLP on the same prompts, pooling and split (k = d and n)"; echo
  echo "Attention-pooled linear and MLP probes of each learner, paired over the same test prompts; 'beyond' = the MLP's margin exceeds the same margin at the embedding and in both controls, each paired excess excluding 0."; echo
  echo '```'; for i in "${!LEARNERS[@]}"; do L="s${SEEDS[$i]}"; grep '^mlp against linear' "$OUT/$L/onset_grad.txt" | sed "s/^/$L: /"; done; echo '```'
  echo; echo "## Where the hypotheses differ: k < d, state and query"; echo
  echo "At k < d = 4 noiseless minimum-norm w_OLS, ridge(0.1) (w_ridge), one GD step (X'y) and three steps of Fu et al.'s Newton (w_newton_3) are different vectors; at k = 11 they nearly coincide (see each report's 'Where the targets differ'). Ridge probes of all four on the same prompts, read at the y-token of example k (state) and at the x-token of example k + 1 (query, where the prediction of y_{k+1} is read); a target is preferred only when its paired margin over the runner-up exceeds the same margin at the embedding and in both controls."; echo
  echo '```'; for i in "${!LEARNERS[@]}"; do L="s${SEEDS[$i]}"; for k in ${KLOW//,/ }; do for at in "" _query; do grep '^Preferred' "$OUT/$L/targets_k$k$at.txt" | sed "s/^/$L${at:+ (query)}: /"; done; done; done; echo '```'
  for i in "${!LEARNERS[@]}"; do L="s${SEEDS[$i]}"
    for k in ${KLOW//,/ }; do for at in "" _query; do
      pos=state; [ -n "$at" ] && pos=query; echo; echo "### $L, k = $k, $pos"; echo
      section "**Which target each layer carries best**" "$OUT/$L/report_targets_k$k$at.md"
    done; done
  done
  echo; echo "## Codelengths (k = n)"; echo
  echo "Online (prequential) codelength of each target given the layer, ridge probe (Voita & Titov 2020), against each control's (gap > 0: the learner's states code the target shorter)."
  for i in "${!LEARNERS[@]}"; do L="s${SEEDS[$i]}"
    for t in w_ols xty xtx; do echo; echo "### $L"; echo; section "**$t**: online codelength" "$OUT/$L/report_ridge.md"; done
  done
  echo; echo "Each learner's own report (onsets with intervals, tables at k = d and n, codelengths, the linear-MLP comparison, the target comparisons at k < d): \`s<seed>/\`."; } > "$OUT/summary.md"
finish "Probing a family of learners: where each quantity becomes decodable, with intervals" "$OUT/summary.md"
