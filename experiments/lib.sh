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
  {
    echo "# $1"
    echo
    echo "Profile: $PROFILE. Wall time: $((wall / 60)) min $((wall % 60)) s on $(nproc) cores ($(date -u +%Y-%m-%d))."
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
