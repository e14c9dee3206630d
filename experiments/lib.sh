# Shared by the experiment scripts: profiles, paths, and the Markdown record of a run.
# Each script takes --quick (a profile CI can afford; outputs to $ICLPROBE_OUT or a temp folder)
# or runs the full CPU profile, whose outputs are committed under results/<name>/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ICLPROBE="${ICLPROBE:-$ROOT/build/apps/iclprobe}"
PROFILE=full
if [ "${1:-}" = "--quick" ]; then PROFILE=quick; fi
if [ ! -x "$ICLPROBE" ]; then echo "experiments: build first (scripts/build); no $ICLPROBE" >&2; exit 2; fi

# setup_out NAME: results/NAME for the full profile, a scratch folder for --quick.
setup_out() {
  if [ "$PROFILE" = full ]; then OUT="$ROOT/results/$1"; RUNS="$ROOT/runs/experiments/$1";
  else OUT="${ICLPROBE_OUT:-$(mktemp -d)}/$1"; RUNS="$OUT/runs"; fi
  mkdir -p "$OUT" "$RUNS"
  : > "$OUT/commands.txt"
  START=$(date +%s)
}

# run CMD...: runs and records a command (paths relative to the repository root) in
# $OUT/commands.txt, or in $CMDS where a script keeps a stage's commands apart.
run() {
  echo "${*//$ROOT\//}" | sed -e "s|$ICLPROBE|iclprobe|" -e "s|^${ICLPROBE#$ROOT/} |iclprobe |" >> "${CMDS:-$OUT/commands.txt}"
  "$@"
}

# finish TITLE SUMMARY_FILE: writes README.md with the summary, the commands and the wall time.
finish() {
  local wall=$(( $(date +%s) - START ))
  # The text outputs name files relative to the repository, not as this machine's paths.
  grep -rlZ -F --include='*.txt' --include='*.md' --include='*.csv' "$ROOT/" "$OUT" 2>/dev/null |
    xargs -0 -r sed -i "s|$ROOT/||g" || true  # grep finds nothing: nothing to do
  {
    echo "# $1"
    echo
    local cpu commit
    cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
    commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
    echo "Profile: $PROFILE. Wall time: $((wall / 60)) min $((wall % 60)) s on $(nproc) cores of ${cpu:-an unknown CPU} ($(date -u +%Y-%m-%d), commit $commit)."
    echo
    cat "$2"
    echo
    echo "## Commands"
    echo
    echo '```sh'
    cat "$OUT/commands.txt"
    echo '```'
  } > "$OUT/README.md"
  echo "wrote $OUT/README.md"
}

# finished CKPT: true when the file exists and its run reached its last step.
finished() {
  [ -f "$1" ] && "$ICLPROBE" inspect "$1" | awk '$1 == "step" && $2 == $4 {ok = 1} END {exit !ok}'
}

# finished_seeds CKPT...: the checkpoints, comma-separated, when every one has finished; else
# nothing and status 1 (a cell trained for a longer budget is used once all its seeds are done).
finished_seeds() {
  local f files=""
  for f in "$@"; do finished "$f" || return 1; files="${files:+$files,}$f"; done
  echo "$files"
}

# verdict_table VERDICTS_CSV [CELL]: compare's verdicts (every k, then the window k != d, d+1)
# as a Markdown table, for one cell or every cell of the file but the shorter budgets' (CELL@STEPS):
# the separation rule's verdict (docs/methodology.md, "Verdicts") with the ratio of the nearest
# learner outside the closest one's family to the closest, its 95% interval and basis.
verdict_table() {
  echo "| cell | k | verdict | ratio [95%] | closest | SPD / d | every seed agrees | excess-error curve |"
  echo "|---|---|---|---|---|---:|---|---|"
  awk -F, -v want="${2:-}" 'NR > 1 && (want == "" ? $1 !~ /@[0-9a-z]+$/ : $1 == want) {
      k = ($2 == "window") ? "**window**" : $3
      stable = ($13 == 1) ? "yes" : "no (" $14 ")"
      if ($4 == 1) stable = "(1 seed)"
      among = $22; gsub(/;/, ", ", among)
      nested = $22; sub(/^[^;]*;?/, "", nested); gsub(/;/, ", ", nested)
      verdict = ($21 == 1) ? "follows " $5 (nested == "" ? "" : " (or its nested " nested ")") ", not " $16 : "unresolved among {" among "}"
      if ($23 != "seeds" && $23 != "") verdict = verdict " (" $23 ")"
      ratio = ($16 == "") ? "" : sprintf("%s/%s %.3g [%.3g, %.3g]", $16, $5, $17, $18, $19)
      printf "| %s | %s | %s | %s | %s | %.3g | %s | %s |\n", $1, k, verdict, ratio, $5, $6, stable, $15
    }' "$1"
}

# spd_table CELLS_CSV CELL LEARNER...: SPD / d per k with its 95% interval over seeds and
# prompts, one column per learner.
spd_table() {
  local csv=$1 cell=$2; shift 2
  printf '| k |'; printf ' %s |' "$@"; echo
  printf '|---:|'; printf -- '---|%.0s' "$@"; echo
  awk -F, -v cell="$cell" -v names="$*" 'BEGIN { n = split(names, want, " ") }
    NR > 1 && $1 == cell { v[$3, $2] = sprintf("%.2e [%.2e, %.2e]", $5, $6, $7); if ($3 + 0 > kmax) kmax = $3 + 0 }
    END { for (k = 0; k <= kmax; k++) { printf "| %d |", k; for (j = 1; j <= n; j++) printf " %s |", v[k, want[j]]; printf "\n" } }' "$csv"
}

# train_tiny_cell: the quick profile's cell, two tiny learners (seeds 1 and 2,
# $RUNS/tiny_s1.h5 and tiny_s2.h5) and seed 1's half-budget run ($RUNS/tiny_s1_half.h5).
train_tiny_cell() {
  local s
  for s in 1 2; do
    run "$ICLPROBE" train --d 3 --n 7 --layers 1 --hidden 16 --heads 2 --steps 20 --warmup 2 \
      --batch 8 --eval-every 10 --eval-prompts 20 --save-every 10 --seed $s --threads 1 --quiet \
      --force --out "$RUNS/tiny_s$s.h5" > /dev/null
  done
  run "$ICLPROBE" train --d 3 --n 7 --layers 1 --hidden 16 --heads 2 --steps 10 --warmup 1 \
    --batch 8 --eval-every 10 --eval-prompts 20 --save-every 10 --seed 1 --threads 1 --quiet \
    --force --out "$RUNS/tiny_s1_half.h5" > /dev/null
}

# section HEADING FILE: a report's paragraph that starts with HEADING and the table after it.
section() {
  awk -v t="$1" 'index($0, t) == 1 { on = 1 } on { print; if ($0 ~ /^\|/) seen = 1; else if (seen && $0 == "") exit }' "$2"
}

# convergence_lines COMPARE_TXT: compare's excess-error curve of each run with shorter budgets
# (the run, then the fit or "plateau"), paths relative to the repository and the output folder.
convergence_lines() {
  { grep -E '^(excess error over the Bayes predictor by training budget:|  (excess over Bayes falls|no power law))' "$1" ||
      echo "no shorter budgets: no excess-error curve"; } |
    sed -e "s|$ROOT/||g" -e "s|$OUT/||g"
}

# half_verdict_lines COMPARE_TXT...: compare --budget-verdicts' lines, each cell's verdict against
# its shorter budgets' on the same prompts (does the answer depend on the training length?).
half_verdict_lines() {
  { grep -h '^verdict at a shorter budget' "$@" || echo "no shorter budgets compared"; } |
    sed 's/^verdict at a shorter budget, /- /'
}

# fitted_members COMPARE_TXT: each seed's name and the members its :fit learners fitted.
fitted_members() {
  grep -E '^([a-z]+:fit(:[0-9.]+)?: |[^ ]+ \(noise .*against:$)' "$1" | sed 's/ (noise.*against:$/:/'
}

# pick CSV FILTER COLUMNS: the first row (after the header) where the awk FILTER holds, as
# "v [lo, hi]" from the three columns given.
pick() {
  awk -F, -v c="$3" "NR > 1 && $2 { split(c, i, \" \"); printf \"%.3f [%.3f, %.3f]\", \$i[1], \$i[2], \$i[3]; exit }" "$1"
}

# column_of CSV NAME FILTER: the value of the column named NAME in the first row where FILTER holds.
column_of() {
  awk -F, -v name="$2" "NR == 1 { for (i = 1; i <= NF; i++) h[\$i] = i; next } $3 { printf \"%.1f\", \$h[name]; exit }" "$1"
}

# fitted_table FITTED_CSV: compare's <stem>.fitted.csv as a table: per cell, the fitted lambda of
# ridge:fit and C of newton:fit over its seeds (geometric mean, 95% interval) and whether the cell
# is OLS-like (every seed's fitted member nearer OLS than the learner is to it;
# docs/methodology.md).
fitted_table() {
  echo "| cell | learner | fitted | [95%] | basis | member vs OLS (largest) | learner vs member (smallest) | OLS-like |"
  echo "|---|---|---|---|---|---:|---:|---|"
  awk -F, 'NR > 1 { printf "| %s | %s | %s %.3g | [%.3g, %.3g] | %s | %.2e | %.2e | %s |\n", $1, $2, $3, $7, $8, $9, $10, $11, $12, ($13 == 1 ? "yes" : "no") }' "$1"
}

# finished_among CKPT...: those of the checkpoints that exist and finished their run,
# comma-separated (nothing when none has): a cell of whatever seeds are done so far.
finished_among() {
  local f files=""
  for f in "$@"; do
    if finished "$f"; then files="${files:+$files,}$f"; fi
  done
  echo "$files"
}
