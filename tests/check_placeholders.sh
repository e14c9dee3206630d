#!/bin/sh
# No message reaches the user with an unrendered or dangling {name} placeholder.
# The program renders {name} in every message as the option --name (apps/main.cpp); this checks,
# on the sources, that every {name} in a string literal of the libraries and apps names an
# option some subcommand really has. Usage: check_placeholders.sh ICLPROBE_BINARY
bin=${1:?usage: check_placeholders.sh ICLPROBE_BINARY}
cd "$(dirname "$0")/.." || exit 2
options=$(mktemp) || exit 2
trap 'rm -f "$options"' EXIT
for sub in $("$bin" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}'); do
  "$bin" "$sub" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sed 's/^--//' >> "$options"
done
[ -s "$options" ] || { echo "placeholders: no options read from $bin --help"; exit 2; }
status=0
# String literals, then {name} in them not written as {{...}} (fmt's escape) or after a
# letter, backslash, '_' or '^' (LaTeX, subscripts).
for f in $(find apps data learners extract probes analysis construct -name '*.cpp' -o -name '*.hpp'); do
  grep -nE '"[^"]*\{[a-z][a-z0-9_-]*\}' "$f" | grep -vE '^[0-9]+:[[:space:]]*//' |
    while IFS= read -r line; do
      printf '%s\n' "$line" | grep -oE '"[^"]*"' |
        grep -oE '(^|[^{\\A-Za-z0-9_^])\{[a-z][a-z0-9_-]*\}' | grep -oE '[a-z][a-z0-9_-]*' |
        while IFS= read -r name; do
          opt=$(printf '%s' "$name" | tr _ -)
          grep -qx -- "$opt" "$options" ||
            echo "placeholders: $f:${line%%:*}: {$name} names no option (--$opt) of any subcommand"
        done
    done
done > "$options.out"
if [ -s "$options.out" ]; then cat "$options.out"; status=1; fi
rm -f "$options.out"
exit $status
