# Shared by the benchmark scripts (sourced): medians of whole commands and a Markdown table.
# Needs REPS (runs per figure) and TMP (a scratch folder) set by the script.

# Median wall seconds of REPS runs of a command (its output discarded).
med() {
  local ts=()
  for _ in $(seq "$REPS"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > "$TMP/last.log" 2>&1 || { echo "$(basename "$0"): failed: $*" >&2; cat "$TMP/last.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    ts+=("$(echo "$t1 - $t0" | bc -l)")
  done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {printf "%.3f", a[int((NR+1)/2)]}'
}
ratio() { echo "$1 / $2" | bc -l | awk '{printf "%.2fx", $1}'; }
# row TEXT A B A/B: one table row, the first column ROW_WIDTH characters wide.
row() { printf "| %-${ROW_WIDTH:-58}s | %9s | %9s | %8s |\n" "$1" "$2" "$3" "$4"; }
