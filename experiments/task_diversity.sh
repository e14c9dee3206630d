#!/usr/bin/env bash
# Task diversity (Raventos, Paul, Chen, Ganguli 2023): learners trained on a finite pool of M
# weight vectors (train --task-family pool:M) behave like the pool's Bayes predictor (dmmse, the
# posterior mean over the pool) when M is small and like ridge, the Bayes predictor of
# w ~ N(0, I), when M is large. Each learner is compared on prompts of its own pool and on fresh
# tasks (--task-family gaussian; dmmse is then the posterior over the learner's training pool,
# read from its checkpoint), against dmmse, bayes (ridge with lambda = sigma^2 / tau^2) and ols.
# The verdict between dmmse and bayes is the separation rule's (docs/methodology.md, "Verdicts"),
# from a compare of those two alone; the transition is the smallest M of the sweep whose learner
# on fresh tasks is resolved closer to bayes than to dmmse.
#
# Full profile: the learners of checkpoints/task_diversity/ (pool_m<M>_10k_s<seed>.h5, every seed
# that has finished), one cell per M. Quick profile: tiny learners trained here on pools of 2 and
# 64 members.
source "$(dirname "$0")/lib.sh"
setup_out task_diversity
if [ "$PROFILE" = full ]; then
  P=1000
  CELLS=()
  for M in 2 8 32 128 512 2048 8192 32768; do
    files=""
    for s in 1 2 3; do
      f="$ROOT/checkpoints/task_diversity/pool_m${M}_10k_s$s.h5"
      if [ -f "$f" ] && finished "$f"; then files="${files:+$files,}$f"; fi
    done
    [ -n "$files" ] && CELLS+=("m$M=$files")
  done
else
  P=60
  CELLS=()
  for M in 2 64; do
    run "$ICLPROBE" train --d 3 --n 7 --layers 1 --hidden 16 --heads 2 --steps 20 --warmup 2 \
      --batch 8 --eval-every 10 --eval-prompts 20 --save-every 10 --seed 1 --noise 0.5 \
      --task-family pool:$M --threads 1 --quiet --force --out "$RUNS/pool_m$M.h5" > /dev/null
    CELLS+=("m$M=$RUNS/pool_m$M.h5")
  done
fi
[ ${#CELLS[@]} -gt 0 ] || { echo "task_diversity: no finished learner in checkpoints/task_diversity/" >&2; exit 2; }

for c in "${CELLS[@]}"; do
  cell=${c%%=*}
  for where in pool fresh; do
    family=()
    [ $where = fresh ] && family=(--task-family gaussian)
    run "$ICLPROBE" compare --cell "$c" --learners dmmse,bayes,ols "${family[@]}" --prompts $P \
      --ilwd-prompts 1 --seed 5 --threads 1 --quiet --force --csv "$OUT/${cell}_$where.csv" \
      > "$OUT/${cell}_$where.txt"
    # The two hypotheses alone, so that the rule's verdict is between them.
    run "$ICLPROBE" compare --cell "$c" --learners dmmse,bayes "${family[@]}" --prompts $P \
      --ilwd-prompts 1 --seed 5 --threads 1 --quiet --force --csv "$OUT/${cell}_${where}_pair.csv" \
      > "$OUT/${cell}_${where}_pair.txt"
  done
done

# One row per cell and prompt source: the rule's verdict between dmmse and bayes over the window
# k != d, d+1, its ratio and interval, and the closest of dmmse, bayes and ols with its SPD / d.
row() {  # PAIR_VERDICTS ALL_VERDICTS M WHERE
  awk -F, -v m="$3" -v where="$4" 'FNR == NR { if (FNR > 1 && $2 == "window") { closest = $5; spd = $6 }; next }
    FNR > 1 && $2 == "window" {
      among = $22; gsub(/;/, ", ", among)
      verdict = ($21 == 1) ? "follows " $5 ", not " $16 : "unresolved between {" among "}"
      if ($23 != "seeds" && $23 != "") verdict = verdict " (" $23 ")"
      ratio = ($16 == "") ? "" : sprintf("%s/%s %.3g [%.3g, %.3g]", $16, $5, $17, $18, $19)
      printf "| %s | %s | %s | %s | %s | %s | %.3g |\n", m, where, $4, verdict, ratio, closest, spd
    }' "$2" "$1"
}
{ echo "Learners: $(for c in "${CELLS[@]}"; do n=$(echo "${c#*=}" | tr ',' '\n' | wc -l); echo -n "${c%%=*} ($n seed(s)); "; done | sed 's/; $//'). Each compared on $P prompts (seed 5) of its own pool and of fresh tasks w ~ N(0, I) (the same x and noise draws), over the window k != d, d+1. The verdict is the separation rule's between dmmse (the posterior mean over the learner's training pool) and bayes (ridge, lambda = sigma^2 / tau^2): 'follows A, not B' needs SPD(B) / SPD(A) >= 2 with the lower end of its 95% interval above 1 and every seed's ratio above 1; with one or two seeds it is labelled so and is a statement about those learners only. 'closest of three': the nearest of dmmse, bayes and ols by SPD / d."
  echo
  echo "| M | prompts | seeds | verdict (dmmse vs bayes) | ratio [95%] | closest of three | SPD / d |"
  echo "|---:|---|---:|---|---|---|---:|"
  for c in "${CELLS[@]}"; do
    cell=${c%%=*}
    for where in pool fresh; do
      row "$OUT/${cell}_${where}_pair.verdicts.csv" "$OUT/${cell}_$where.verdicts.csv" "${cell#m}" \
        "$([ $where = pool ] && echo "its pool" || echo "fresh tasks")"
    done
  done
  echo
  # The first such M, by a loop that stops there (a pipe into head would end the loop with
  # SIGPIPE, which pipefail turns into the script's exit).
  transition=""
  for c in "${CELLS[@]}"; do
    cell=${c%%=*}
    transition=$(awk -F, -v m="${cell#m}" 'FNR > 1 && $2 == "window" && $21 == 1 && $5 == "bayes" { print m; exit }' \
      "$OUT/${cell}_fresh_pair.verdicts.csv")
    [ -z "$transition" ] || break
  done
  if [ -n "$transition" ]; then
    echo "Transition: the smallest M whose learner on fresh tasks is resolved closer to bayes than to dmmse is M = $transition (the rows either side give the verdicts around it)."
  else
    echo "Transition: no M of this sweep has a learner resolved closer to bayes than to dmmse on fresh tasks."
  fi; } > "$OUT/summary.md"
rm -f "$OUT"/*.cells.csv "$OUT"/*.linearity.csv "$OUT"/*.paired.csv "$OUT"/*.fitted.csv
finish "Task diversity: dMMSE or ridge, by the size of the training pool" "$OUT/summary.md"
