#!/usr/bin/env bash
# Which iterate of Newton, GD and the ridge path does each layer's prediction match
# (Fu et al. 2023's comparison), over the seeds of each trained cell, against each seed's
# random-init twin, with two-stage bootstrap intervals over seeds and prompts.
# Full profile: the shipped L = 8 family (4 seeds; ridge readout and the lens), the depth row
# L = 1, 2, 4 (3 seeds each) and the d = 8, n = 40 learners (3 seeds, 40,000 steps).
# --quick: the compiled gd:4 program and its twin (the method's ground truth), in seconds.
source "$(dirname "$0")/lib.sh"
setup_out trace
SUMMARY="$OUT/summary.md"; : > "$SUMMARY"

# twins NAME "TRAIN OPTIONS" SEED...: each seed's random-init twin (train --init-only).
twins() {
  local name=$1 opts=$2; shift 2
  TWINS=()
  for s in "$@"; do
    # shellcheck disable=SC2086
    run "$ICLPROBE" train $opts --seed "$s" --init-only --quiet --force --out "$RUNS/${name}_init_s$s.h5" > /dev/null
    TWINS+=(--control "$RUNS/${name}_init_s$s.h5")
  done
}

# table STEM TITLE: the best iterate per layer (learner) and the rates, as Markdown.
table() {
  { echo "### $2"; echo
    echo "Best iterate per layer (spd similarity, 95% interval over seeds and prompts) and the paired excess of the best match to an iterate t >= 1 over the random-init twins':"; echo
    echo "| algorithm | layer | best iterate [95%] | spd of best [95%] | margin over neighbours [95%] | excess over twin [95%] | twin's best iterate |"
    echo "|---|---:|---|---|---|---|---:|"
    awk -F, 'NR > 1 && $2 == "control" {twin[$1 "," $3] = $4}
      NR > 1 && $2 == "learner" {row[++n] = $0}
      END {for (i = 1; i <= n; i++) {split(row[i], f, ",")
        m = (f[10] == "") ? "—" : sprintf("%+.3f [%+.3f, %+.3f]", f[10], f[11], f[12])
        printf "| %s | %s | %s [%s, %s] | %.3f [%.3f, %.3f] | %s | %+.3f [%+.3f, %+.3f] | %s |\n", f[1], f[3], f[4], f[5], f[6], f[7], f[8], f[9], m, f[13], f[14], f[15], twin[f[1] "," f[3]]}}' "$1.layers.csv"
    echo; echo "Rate (slope of the best iterate over the layers whose best lies strictly inside 1..T-1):"; echo
    echo "| algorithm | model | iterations / layer [95%] | doublings / layer [95%] | layers used |"
    echo "|---|---|---|---|---:|"
    awk -F, 'NR > 1 {r = ($3 == "") ? "—" : sprintf("%.3g [%s, %s]", $3, ($4 == "" ? "—" : sprintf("%.3g", $4)), ($5 == "" ? "—" : sprintf("%.3g", $5)))
      l = ($6 == "") ? "—" : sprintf("%.3g [%s, %s]", $6, ($7 == "" ? "—" : sprintf("%.3g", $7)), ($8 == "" ? "—" : sprintf("%.3g", $8)))
      printf "| %s | %s | %s | %s | %s |\n", $1, $2, r, l, $9}' "$1.rates.csv"
    echo; } >> "$SUMMARY"
}

# cell NAME READOUT "TRAIN OPTIONS OF THE TWINS" "SEEDS" CHECKPOINT...
cell() {
  local name=$1 readout=$2 opts=$3 seeds=$4; shift 4
  local ck=()
  for c in "$@"; do ck+=(-c "$c"); done
  # shellcheck disable=SC2086
  twins "$name" "$opts" $seeds
  local fit=(--fit-prompts "$FIT")
  if [ "$readout" = lens ]; then fit=(); fi
  run "$ICLPROBE" trace "${ck[@]}" "${TWINS[@]}" --readout "$readout" --prompts $P "${fit[@]}" \
    --bootstrap $B --seed 11 --threads 1 --quiet --force --out "$OUT/${name}_$readout.h5" > "$OUT/${name}_$readout.txt"
  table "$OUT/${name}_$readout" "$name, $readout readout ($# learner(s), each against its own random-init twin)"
}

if [ "$PROFILE" = full ]; then
  P=2000; FIT=4000; B=1000
  D4="--d 4 --n 12 --heads 4 --hidden 64"
  FAMILY=("$ROOT/checkpoints/d4_l8_h64.h5" "$ROOT"/checkpoints/family/d4_l8_h64_s{2,3,4}.h5)
  cell l8_family ridge "$D4 --layers 8" "1 2 3 4" "${FAMILY[@]}"
  cell l8_family lens "$D4 --layers 8" "1 2 3 4" "${FAMILY[@]}"
  for L in 1 2 4; do
    cell "l${L}_depth" ridge "$D4 --layers $L" "1 2 3" "$ROOT"/checkpoints/depth/d4_l${L}_h64_s{1,2,3}.h5
  done
  cell d8_n40_l8 ridge "--d 8 --n 40 --heads 4 --hidden 64 --layers 8" "1 2 3" \
    "$ROOT"/checkpoints/behaviour/d8_n40_l8_h64_s{1,2,3}_40k.h5
  # Tables and figures of the L = 8 cells (PNG committed; the SVGs beside them are not).
  for n in l8_family_ridge d8_n40_l8_ridge; do
    run "$ICLPROBE" report --trace "$OUT/$n.h5" --plot-dir "$OUT/figs/$n" --out "$OUT/$n.md" --force > /dev/null
    rm -f "$OUT/figs/$n"/*.svg
  done
else
  P=300; FIT=400; B=200
  run "$ICLPROBE" construct --program gd:4 --alpha 0.02 --d 4 --n 8 --force --out "$RUNS/gd4.h5" > /dev/null
  run "$ICLPROBE" construct --program gd:4 --alpha 0.02 --d 4 --n 8 --init-only --seed 2 --force --out "$RUNS/gd4_init.h5" > /dev/null
  run "$ICLPROBE" trace -c "$RUNS/gd4.h5" --control "$RUNS/gd4_init.h5" --readout lens --algorithms gd:0.02:6,newton:4 \
    --prompts $P --bootstrap $B --seed 11 --threads 1 --quiet --force --out "$OUT/gd4_lens.h5" > "$OUT/gd4_lens.txt"
  table "$OUT/gd4_lens" "compiled gd:4 (alpha 0.02), lens readout"
fi
finish "Which iterate at which layer" "$SUMMARY"
