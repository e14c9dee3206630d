#!/bin/bash
# Speed goal: the Python module's ridge_probe on a [20000, 9, 12, 64] array (the
# shipped L8/H64 learner's 9 states after k = 1..12 examples) within 1.5x of the CLI's ridge on
# the same states in a file, and its speed against scikit-learn's RidgeCV on the same arrays.
# Usage: bench/python_ridge.sh [REPS=3] [PROMPTS=20000]   (from the repository root after a
# build with the module; pause training first: kill -STOP, then -CONT)
set -euo pipefail
REPS=${1:-3}
N=${2:-20000}
B=${ICLPROBE:-$PWD/build/apps/iclprobe}
PY=/usr/bin/python3
[ -x "$B" ] || { echo "python_ridge.sh: no iclprobe at $B (build first)" >&2; exit 2; }
[ -f build/python/iclprobe/__init__.py ] || { echo "python_ridge.sh: no build/python (build with pybind11-dev)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive
source "$(dirname "$0")/lib.sh"
core=$(build/bench/bench_train 1 0 | head -1 || true)
echo "# python_ridge, $(date -u +%F), $(nproc) cores; $core"
"$B" extract -c checkpoints/d4_l8_h64.h5 --prompts "$N" --positions y --threads 2 --quiet --out "$TMP/acts.h5"
# The CLI's whole command, file read included (the page cache holds the file after the first).
cli=$(med "$B" probe -a "$TMP/acts.h5" --targets xty --threads 2 --quiet --force --out "$TMP/p.h5")
# The kernels the CLI picks for itself by re-executing: the module is told before Python starts.
core_type=${OPENBLAS_CORETYPE:-$(PYTHONPATH=build/python $PY -W ignore -c "import iclprobe; print(iclprobe._core.blas_core_advice())")}
[ -z "$core_type" ] || export OPENBLAS_CORETYPE="$core_type"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset: the kernels OpenBLAS chose are right}"
PYTHONPATH=build/python $PY bench/python_ridge.py "$TMP/acts.h5" "$cli" "$REPS"
