#!/usr/bin/env bash
# The constructions as ground truth. Each program (gd:3, newton:3, and the converged
# newton:12 at two lambdas) against its classical learner, and a ridge probe of every iterate
# (a learner target) and of X'X at every state, plain and under several rotations of the
# residual stream; the summary gives each iterate's R2 in the state that writes it and in the
# state before, as the range over the rotation seeds.
source "$(dirname "$0")/lib.sh"
setup_out ground_truth
if [ "$PROFILE" = full ]; then P=2000; ROTATIONS=(1 2 3); KS=2,4,6
  LAMBDAS=(0.25 0.4444444444444444 0.1111111111111111 0.0625)
else P=300; ROTATIONS=(1); KS=4; LAMBDAS=(0.25); fi
D=4; N=12
CSV="$OUT/iterates.csv"
echo "program,basis,target,state,k,r2,r2_lo,r2_hi,r2_state_before" > "$CSV"
probe_iterates() {  # PROGRAM ALPHA_OPTION BASIS ROTATE_OPTION SPECS...
  local program=$1 alpha=$2 basis=$3 rotate=$4; shift 4
  local specs; specs=$(IFS=,; echo "$*")
  run "$ICLPROBE" construct --program "$program" $alpha $rotate --d $D --n $N --check-prompts 0 \
    --force --out "$RUNS/model.h5" > /dev/null
  run "$ICLPROBE" extract -c "$RUNS/model.h5" --prompts $P --threads 1 --quiet --force \
    --learner-targets "$specs" --out "$RUNS/acts.h5" > /dev/null
  local targets=xtx
  for s in "$@"; do targets="$targets,w_$(echo "$s" | tr ':' '_')"; done
  run "$ICLPROBE" probe -a "$RUNS/acts.h5" --targets "$targets" --probes ridge --k $KS \
    --threads 1 --quiet --force --out "$RUNS/probes.h5" --csv "$RUNS/probes.csv" > /dev/null
  # The state that writes each quantity, from the construction's own record.
  local states; states=$("$ICLPROBE" inspect "$RUNS/model.h5" | awk '$1 ~ /^(xtx|w_[0-9]+)$/ {
      split($3, s, "."); print $1 "=" s[1] }')
  local t=0
  for target in xtx "$@"; do
    local name=xtx state
    if [ "$target" != xtx ]; then t=$((t + 1)); name="w_$(echo "$target" | tr ':' '_')"; fi
    state=$(echo "$states" | sed -n "s/^$([ "$target" = xtx ] && echo xtx || echo "w_$t")=//p")
    awk -F, -v name="$name" -v st="$state" -v prog="$program" -v basis="$basis" '
      NR > 1 && $1 == name && $3 == "model" { r2[$4 "," $5] = $9; lo[$4 "," $5] = $10;
        hi[$4 "," $5] = $11; ks[$5] = 1 }
      END { for (k in ks) print prog "," basis "," name "," st "," k "," r2[st "," k] "," \
        lo[st "," k] "," hi[st "," k] "," r2[(st - 1) "," k] }' "$RUNS/probes.csv" >> "$CSV"
  done
}
GD=(gd:0.05 gd:0.05:2 gd:0.05:3)
NEWTON=(newton:1:0.07:0.25 newton:2:0.07:0.25 newton:3:0.07:0.25)
probe_iterates gd:3 "--alpha 0.05" plain "" "${GD[@]}"
probe_iterates newton:3:0.07:0.25 "" plain "" "${NEWTON[@]}"
for r in "${ROTATIONS[@]}"; do
  probe_iterates gd:3 "--alpha 0.05" "rotated" "--rotate $r" "${GD[@]}"
  probe_iterates newton:3:0.07:0.25 "" "rotated" "--rotate $r" "${NEWTON[@]}"
done
# Behaviour: each program against its classical learner (and newton against ridge), max over k.
BEH="$OUT/behaviour.csv"
echo "program,basis,learner,spd_max_over_k,k_at_max" > "$BEH"
for lambda in "${LAMBDAS[@]}"; do
  K=12; [ "$lambda" = 0.1111111111111111 ] || [ "$lambda" = 0.0625 ] && K=14
  for rotate in "" "--rotate 1"; do
    run "$ICLPROBE" construct --program "newton:$K:0.03:$lambda" $rotate --d $D --n $N \
      --force --out "$RUNS/newton.h5" > "$RUNS/construct.txt"
    run "$ICLPROBE" compare -c "$RUNS/newton.h5" --learners "newton:$K:0.03:$lambda,ridge:$lambda" \
      --prompts $P --ilwd-prompts 2 --threads 1 --quiet --force --csv "$RUNS/c.csv" > /dev/null
    awk -F, -v prog="newton:$K:0.03:$lambda" -v basis="${rotate:+rotated}" '
      NR > 1 { if (!($2 in m) || $4 + 0 > m[$2]) { m[$2] = $4 + 0; at[$2] = $3 } }
      END { for (l in m) print prog "," (basis == "" ? "plain" : basis) "," l "," m[l] "," at[l] }' \
      "$RUNS/c.csv" >> "$BEH"
    grep -o '[0-9]* of [0-9]* (prompt, k) pairs' "$RUNS/construct.txt" \
      | sed "s|^|newton:$K:0.03:$lambda ${rotate:+rotated }outside the convergence region: |" \
      >> "$OUT/convergence.txt"
  done
done
# The nuisance: the ridge-probe R2 of X'y in the state after block 2 (where the xty rows hold
# X'y + sigma (P x_k)^2) and after block 3 (removed), by sigma.
NUI="$OUT/nuisance.csv"
echo "program,sigma,k,r2_state_2,r2_state_3" > "$NUI"
if [ "$PROFILE" = full ]; then SIGMAS=(0 4 8 16 32); else SIGMAS=(16); fi
for sigma in "${SIGMAS[@]}"; do
  run "$ICLPROBE" construct --program newton:12:0.03:0.25 --nuisance $sigma --d $D --n $N \
    --check-prompts 0 --force --out "$RUNS/nuisance.h5" > /dev/null
  run "$ICLPROBE" extract -c "$RUNS/nuisance.h5" --prompts $P --layers 2,3 --threads 1 --quiet \
    --force --out "$RUNS/acts.h5" > /dev/null
  run "$ICLPROBE" probe -a "$RUNS/acts.h5" --targets xty --probes ridge --k $KS --threads 1 \
    --quiet --force --out "$RUNS/probes.h5" --csv "$RUNS/probes.csv" > /dev/null
  awk -F, -v s=$sigma 'NR > 1 && $3 == "model" { r[$5 "," $4] = $9; ks[$5] = 1 }
    END { for (k in ks) print "newton:12:0.03:0.25," s "," k "," r[k ",2"] "," r[k ",3"] }' \
    "$RUNS/probes.csv" >> "$NUI"
done
rm -f "$RUNS"/*.h5 "$RUNS"/*.csv "$RUNS"/*.txt
{
  echo "Constructions as ground truth; d = $D, n = $N, $P prompts per run."
  echo
  echo "Behaviour (\`behaviour.csv\`): SPD/d of each compiled newton:K:0.03:lambda from the classical"
  echo "learner of the same spec and from ridge:lambda, max over k = 0..$((N - 1)):"
  echo
  echo '```'
  column -s, -t < "$BEH"
  echo '```'
  echo
  echo '```'
  cat "$OUT/convergence.txt"
  echo '```'
  echo
  echo "Iterates (\`iterates.csv\`): ridge-probe R2 of each iterate w_t (a learner target) and of X'X in"
  echo "the state the construction writes it (\`state\`) and in the state before; rotated rows are one"
  echo "per rotation seed (${ROTATIONS[*]}). r2_lo/r2_hi: the probe's bootstrap interval over test prompts."
  echo
  echo '```'
  column -s, -t < "$CSV"
  echo '```'
  echo
  echo "Nuisance (\`nuisance.csv\`): ridge-probe R2 of X'y after block 2 (X'y + sigma (P x_k)^2 in its"
  echo "rows, and mean_yx corrupted likewise) and after block 3 (removed), newton:12:0.03:0.25:"
  echo
  echo '```'
  column -s, -t < "$NUI"
  echo '```'
} > "$OUT/summary.md"
finish "Ground truth: compiled programs, their iterates, rotated" "$OUT/summary.md"
