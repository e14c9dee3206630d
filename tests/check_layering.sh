#!/bin/sh
# DESIGN.md's arrows, checked on the sources: libraries do not parse command lines, do not name
# command-line options in their messages, do not set process-wide thread counts, and each file
# format's name is spelled by its one owner.
cd "$(dirname "$0")/.." || exit 2
libs="data learners extract probes analysis"
status=0
fail() { echo "layering: $1"; status=1; }
grep -rn 'boost/program_options' $libs && fail "a library includes Boost.Program_options"
# String literals holding an option ("--name"), outside comments.
grep -rnE '"[^"]*--[a-z]' $libs --include=*.cpp --include=*.hpp | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' \
  && fail "a library message names a command-line option"
grep -rnE 'set_num_threads|omp_set_num_threads' $libs --include=*.cpp --include=*.hpp \
  | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' && fail "a library sets a process-wide thread count"
for f in '"iclprobe-probes"' '"iclprobe-activations"' '"iclprobe-checkpoint"'; do
  n=$(grep -rln "$f" $libs apps --include=*.cpp --include=*.hpp | wc -l)
  [ "$n" -le 1 ] || fail "format $f is spelled in $n files (expected its one owner)"
done
exit $status
