#!/bin/sh
# The arrows of docs/design.md "Folders and layering", checked on the sources: each library
# folder includes only the folders below it (docs/ARCHITECTURE.md), libraries do not parse
# command lines, do not name command-line options in their messages, do not set process-wide
# thread counts, and each file format's name is spelled by its one owner.
cd "$(dirname "$0")/.." || exit 2
status=0
fail() { echo "layering: $1"; status=1; }

# folder: the folders it may include (itself included). A folder not listed here is an error:
# a new library must say where it stands.
allowed() {
  case "$1" in
    core) echo "core" ;;
    formats) echo "core formats" ;;
    data) echo "core formats data" ;;
    learners) echo "core formats data learners" ;;
    interop) echo "core formats data learners interop" ;;
    construct) echo "core formats data learners construct" ;;
    extract) echo "core formats data learners extract" ;;
    probes) echo "core formats data learners extract probes" ;;
    intervene) echo "core formats data learners extract probes intervene" ;;
    analysis) echo "core formats data learners extract probes intervene analysis" ;;
    *) echo "" ;;
  esac
}
libs="core formats data learners interop construct extract probes intervene analysis"
for dir in */; do
  dir=${dir%/}
  [ -f "$dir/CMakeLists.txt" ] || continue
  case " $libs apps python tests bench " in *" $dir "*) ;; *) fail "folder $dir/ is a library the check does not know (add it to tests/check_layering.sh)" ;; esac
done
for lib in $libs; do
  ok=$(allowed "$lib")
  for inc in $(grep -rhoE '^#include "[a-z_]+/' "$lib" --include=*.cpp --include=*.hpp | sed 's/#include "//; s/\///' | sort -u); do
    case " $ok " in *" $inc "*) ;; *) fail "$lib/ includes $inc/ (an arrow up or sideways)" ;; esac
  done
done

grep -rn 'boost/program_options' $libs && fail "a library includes Boost.Program_options"
# The headers every subcommand includes stay free of LibTorch: only core/'s headers, the task
# (data/task.hpp) and apps/'s own light headers, none of which includes it.
grep -nE '^#include' apps/cli.hpp apps/options.hpp apps/subcommands.hpp apps/progress.hpp \
  | grep -vE '#include (<(armadillo|array|boost/program_options.hpp|chrono|cmath|cstdint|fmt/format.h|map|stdexcept|string|tuple|type_traits|vector)>|"(core/[a-z_]+|data/task)\.hpp"|"apps/(options|progress)\.hpp")' \
  && fail "a header every subcommand includes includes a library header beyond core/ and the task (LibTorch comes with the others)"
# String literals holding an option ("--name"), outside comments.
grep -rnE '"[^"]*--[a-z]' $libs --include=*.cpp --include=*.hpp | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' \
  && fail "a library message names a command-line option"
# learners/kernel_threads.* holds the one rule for the kernel libraries' pools, for apps/ and
# python/ to carry out their choice; no library calls it.
grep -rnE 'set_num_threads|omp_set_num_threads' $libs --include=*.cpp --include=*.hpp \
  | grep -v '^learners/kernel_threads\.cpp:' \
  | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' && fail "a library sets a process-wide thread count"
grep -rnE 'kernel_threads\.hpp|SetKernelThreads|SetBlasThreads|SerialKernels' $libs --include=*.cpp --include=*.hpp \
  | grep -v '^learners/kernel_threads\.' \
  && fail "a library sets the kernel libraries' thread pools (only apps/ and python/ choose them)"
# One pool of threads per run, made by the app (docs/ARCHITECTURE.md, on threads): no library
# builds a core::ThreadPool (it is handed one) or opens an OpenMP parallel region. (A single
# helper thread that overlaps reading, writing or a block's targets with the pool's work is not
# a pool: extract's writer and targets, the ridge probe's read-ahead.)
grep -rnE 'ThreadPool>\(|ThreadPool [a-z_]+[({]|pragma omp parallel' $libs --include=*.cpp --include=*.hpp \
  | grep -v '^core/thread_pool\.' \
  | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' && fail "a library makes a pool of threads (the app makes the run's one pool and hands it down)"
for f in '"iclprobe-probes"' '"iclprobe-activations"' '"iclprobe-checkpoint"' '"iclprobe-interventions"' \
         '"iclprobe-prompts"' '"iclprobe-trace"' '"iclprobe-swaps"' \
         '"iclprobe-erasure"' '"iclprobe-das"'; do
  n=$(grep -rln "$f" $libs apps --include=*.cpp --include=*.hpp | wc -l)
  [ "$n" -le 1 ] || fail "format $f is spelled in $n files (expected its one owner)"
done
# The activations file's datasets are addressed through its schema and reader (extract/) only.
grep -rnE '"(targets|hidden|prompts)/' $libs apps --include=*.cpp --include=*.hpp | grep -v '^extract/' \
  && fail "an activations dataset is addressed outside extract/ (use its schema and reader)"
exit $status
