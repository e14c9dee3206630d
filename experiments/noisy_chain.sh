#!/bin/bash
# The noisy-regime learners of experiments/noisy_regime.sh (full profile), trained in the
# background with the exact commands the script records; resumed where a checkpoint exists.
# Arguments: "sigma:name" pairs (default: all five levels).
cd "$(dirname "$0")/.."
B=${ICLPROBE:-$PWD/build/apps/iclprobe}  # a copy of the binary keeps a rebuild from touching a run
ARCH="--d 4 --n 12 --layers 4 --hidden 64 --heads 4 --batch 64 --shards 1 --lr 1e-3 --seed 1 --eval-prompts 500"
pairs=("$@"); [ ${#pairs[@]} -eq 0 ] && pairs=("0.5:1_4" "0.666666667:4_9" "0:0" "0.25:1_16" "0.333333333:1_9")
for pair in "${pairs[@]}"; do
  sigma=${pair%%:*}; name=${pair##*:}; ck=checkpoints/noisy/noise_$name.h5
  if [ -f $ck ] && $B inspect $ck | grep -q "^resumable *yes"; then
    OMP_WAIT_POLICY=passive $B train --resume --threads 1 --quiet --out $ck >> checkpoints/noisy/noise_$name.log 2>&1
  elif [ ! -f $ck ]; then
    OMP_WAIT_POLICY=passive $B train $ARCH --noise $sigma --steps 20000 --warmup 1000 --eval-every 1000 --save-every 1000 --threads 1 --quiet --out $ck > checkpoints/noisy/noise_$name.log 2>&1
  fi
  echo "$name done rc=$? $(date)"
done
