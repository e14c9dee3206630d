#!/bin/sh
# Files and functions of one concern: no .cpp of a library folder (apps/ and python/ included)
# is over 600 lines, and no function of theirs is over 120 lines (tools/longest_functions, which
# reads universal-ctags' start and end lines and sees file-scope functions too), save the
# exceptions listed below with their reasons. Run from anywhere; exits 1 with one line per
# offender.
cd "$(dirname "$0")/.." || exit 2
max_file_lines=600
max_function_lines=120
folders="analysis apps construct core data extract formats interop intervene learners probes python"

# file function: functions allowed to be longer, each with its reason.
#   interop/torch_archive.cpp Run: the pickle machine's opcode switch, one case per opcode; the
#   cases read as a table, and splitting it would scatter the one place that says which opcodes
#   a hostile file may use.
allowed_functions="
interop/torch_archive.cpp Run
"

status=0

for dir in $folders; do
  [ -d "$dir" ] || continue
  for f in $(find "$dir" -name '*.cpp' | sort); do
    n=$(wc -l < "$f")
    if [ "$n" -gt "$max_file_lines" ]; then
      echo "code size: $f has $n lines (over $max_file_lines): split it by concern"
      status=1
    fi
  done
done

if ! command -v ctags >/dev/null 2>&1; then
  echo "code size: tools/longest_functions needs universal-ctags (scripts/setup installs it)"
  exit 1
fi
# Every function, longest first: "LENGTH  FILE:LINE  NAME[  note]".
listing=$(tools/longest_functions 1000000 $folders) || {
  echo "code size: tools/longest_functions failed"
  exit 1
}
# A listing of no functions would pass every check: ctags read nothing.
if [ "$(printf '%s\n' "$listing" | grep -c .)" -lt 100 ]; then
  echo "code size: tools/longest_functions listed fewer than 100 functions; ctags read the sources?"
  exit 1
fi
offenders=$(printf '%s\n' "$listing" | awk -v max="$max_function_lines" -v allowed="$allowed_functions" '
  BEGIN {
    n = split(allowed, lines, "\n");
    for (i = 1; i <= n; i++) if (lines[i] != "") ok[lines[i]] = 1;
  }
  $1 + 0 > max {
    file = $2; sub(/:[0-9]+$/, "", file);
    if (!((file " " $3) in ok))
      printf "code size: %s %s is %d lines (over %d): split it into named steps\n", $2, $3, $1, max;
  }')
if [ -n "$offenders" ]; then
  printf '%s\n' "$offenders"
  status=1
fi
exit $status
