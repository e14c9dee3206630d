#!/usr/bin/env bash
# Algorithm selection (Bai, Chen, Wang, Xiong, Mei 2023): a learner trained on a mixture of noise
# levels (train --task-family noise-mix:S1,S2) can pick, per prompt, the ridge that suits that
# prompt's sigma -- the oracle, oracle-ridge: lambda = sigma_c^2 / tau^2 of the level the prompt
# drew -- or run one compromise lambda for every prompt (ridge:fit, the single ridge closest to
# the learner). bayes-mix is the mixture's Bayes predictor (the posterior over the levels, then
# the posterior-weighted ridge).
#
# 1. Pilot, before any learner: on the mixture's prompts, each candidate's error per k
#    (baselines). The oracle is the Bayes predictor given sigma, so a ridge's excess error over
#    it equals its SPD to it in expectation: the best single ridge of the grid is the
#    compromise, and its excess over the oracle is how far apart the two hypotheses are, to be
#    set against a learner's own residual (the separation rule needs a ratio of 2).
# 2. Per cell of learners: compare against oracle-ridge, bayes-mix, ridge:fit and ols, and the
#    separation rule's verdict between oracle-ridge and ridge:fit alone.
# 3. Is sigma decodable, and where: ridge probes of the prompt's drawn sigma (extract's
#    targets/sigma) by layer, with a random-init twin as the control (the first seed of a cell).
#
# Full profile: checkpoints/noise_mix/mix_<levels>_10k_s<seed>.h5 (every finished seed; none may
# exist yet, then the pilot alone). Quick profile: a tiny learner trained here.
source "$(dirname "$0")/lib.sh"
setup_out noise_mix
if [ "$PROFILE" = full ]; then
  MIX="noise-mix:0.1,1"; D=4; N=12; P=2000; PX=4000; ARCH="--layers 8 --hidden 64 --heads 4"
  files=$(finished_among "$ROOT"/checkpoints/noise_mix/mix_0.1_1_10k_s{1,2,3}.h5)
  CELLS=(); [ -n "$files" ] && CELLS+=("mix=$files")
else
  MIX="noise-mix:0.1,1"; D=3; N=7; P=60; PX=200; ARCH="--layers 1 --hidden 16 --heads 2"
  run "$ICLPROBE" train --d $D --n $N $ARCH --steps 20 --warmup 2 --batch 8 --eval-every 10 \
    --eval-prompts 20 --save-every 10 --seed 1 --task-family $MIX --threads 1 --quiet --force \
    --out "$RUNS/mix_s1.h5" > /dev/null
  CELLS=("mix=$RUNS/mix_s1.h5")
fi
GRID="0.003 0.01 0.03 0.1 0.3 1 3"
RIDGES=$(for l in $GRID; do echo -n "ridge:$l,"; done | sed 's/,$//')

# 1. The pilot.
run "$ICLPROBE" baselines --d $D --n $N --task-family $MIX --prompts $P --seed 5 \
  --learners "oracle-ridge,bayes-mix,ols,$RIDGES" --threads 1 --force --csv "$OUT/pilot.csv" \
  > "$OUT/pilot.txt"
# Mean error / d over the window k != d, d+1 per learner (a k in 1..n-1: k = 0 is every
# learner's prior mean), then the compromise and its excess over the oracle.
awk -F, -v d=$D 'NR > 1 && $2 > 0 && $2 != d && $2 != d + 1 { s[$1] += $3; c[$1]++ }
  END { for (l in s) printf "%s %.6g\n", l, s[l] / c[l] }' "$OUT/pilot.csv" | sort > "$OUT/pilot_window.txt"
oracle=$(awk '$1 == "oracle-ridge" {print $2}' "$OUT/pilot_window.txt")
read -r compromise best < <(awk '$1 ~ /^ridge:/ {print $1, $2}' "$OUT/pilot_window.txt" | sort -g -k2 | head -1)

# 2. and 3. per cell.
for c in "${CELLS[@]}"; do
  cell=${c%%=*}
  run "$ICLPROBE" compare --cell "$c" --learners oracle-ridge,bayes-mix,ridge:fit,ols --prompts $P \
    --ilwd-prompts 1 --seed 5 --threads 1 --quiet --force --csv "$OUT/$cell.csv" > "$OUT/$cell.txt"
  run "$ICLPROBE" compare --cell "$c" --learners oracle-ridge,ridge:fit --prompts $P \
    --ilwd-prompts 1 --seed 5 --threads 1 --quiet --force --csv "$OUT/${cell}_pair.csv" \
    > "$OUT/${cell}_pair.txt"
  first=$(echo "${c#*=}" | cut -d, -f1)
  run "$ICLPROBE" train --d $D --n $N $ARCH --seed 1 --task-family $MIX --init-only --force \
    --out "$RUNS/${cell}_init.h5" > /dev/null
  for m in "$first" "$RUNS/${cell}_init.h5"; do
    tag=$([ "$m" = "$first" ] && echo learner || echo init)
    run "$ICLPROBE" extract -c "$m" --prompts $PX --seed 7 --threads 1 --quiet --force \
      --out "$RUNS/${cell}_acts_$tag.h5" > /dev/null
  done
  run "$ICLPROBE" probe -a "$RUNS/${cell}_acts_learner.h5" --control "$RUNS/${cell}_acts_init.h5" \
    --targets sigma --probes ridge --threads 1 --quiet --force --out "$OUT/${cell}_sigma.h5" \
    --csv "$OUT/${cell}_sigma.csv" > /dev/null
  run "$ICLPROBE" report --probes "$OUT/${cell}_sigma.h5" --k $D,$((N - 1)) --force \
    --out "$OUT/${cell}_sigma_report.md" > "$OUT/${cell}_sigma_onset.txt"
  rm -f "$RUNS/${cell}_acts_learner.h5" "$RUNS/${cell}_acts_init.h5"
done

{ echo "Mixture $MIX (d = $D, n = $N). Pilot: $P prompts of seed 5, each learner's error / d averaged over the window k = 1..n-1 but d, d+1:"
  echo
  echo "| learner | error / d |"
  echo "|---|---:|"
  awk '{printf "| %s | %s |\n", $1, $2}' "$OUT/pilot_window.txt"
  echo
  echo "The compromise (the best single ridge of the grid $GRID) is $compromise; its excess over the oracle, which is its SPD / d to the oracle in expectation, is $(awk -v a="$best" -v b="$oracle" 'BEGIN {printf "%.3g", a - b}'). A learner separates the two hypotheses by the rule's ratio of 2 only if its own SPD / d to the nearer one is below about that excess. bayes-mix, the Bayes predictor that is not told sigma and must infer it from the examples, has excess $(awk -v b="$oracle" '$1 == "bayes-mix" {printf "%.3g", $2 - b}' "$OUT/pilot_window.txt") over the oracle: a learner that infers sigma as well as it can sits that far from the oracle."
  echo
  if [ ${#CELLS[@]} -eq 0 ]; then
    echo "No finished learner in checkpoints/noise_mix/ yet: the pilot alone."
  else
    echo "| cell | seeds | verdict (oracle-ridge vs ridge:fit) | ratio [95%] | closest of four | SPD / d |"
    echo "|---|---:|---|---|---|---:|"
    for c in "${CELLS[@]}"; do
      cell=${c%%=*}
      awk -F, 'FNR == NR { if (FNR > 1 && $2 == "window") { closest = $5; spd = $6 }; next }
        FNR > 1 && $2 == "window" {
          among = $22; gsub(/;/, ", ", among)
          verdict = ($21 == 1) ? "follows " $5 ", not " $16 : "unresolved between {" among "}"
          if ($23 != "seeds" && $23 != "") verdict = verdict " (" $23 ")"
          ratio = ($16 == "") ? "" : sprintf("%s/%s %.3g [%.3g, %.3g]", $16, $5, $17, $18, $19)
          printf "| %s | %s | %s | %s | %s | %.3g |\n", $1, $4, verdict, ratio, closest, spd
        }' "$OUT/$cell.verdicts.csv" "$OUT/${cell}_pair.verdicts.csv"
    done
    echo
    echo "Is sigma decodable (ridge probes of the prompt's drawn sigma, the first seed against its random-init twin; onsets at k = d and n - 1, read by later positions):"
    echo; echo '```'
    for c in "${CELLS[@]}"; do cat "$OUT/${c%%=*}_sigma_onset.txt" | grep -v '^wrote'; done
    echo '```'
  fi; } > "$OUT/summary.md"
rm -f "$OUT"/*.cells.csv "$OUT"/*.linearity.csv "$OUT"/*.paired.csv
finish "Noise mixture: one lambda per prompt or a compromise" "$OUT/summary.md"
