#!/bin/sh
# `pip install .` into a fresh virtual environment (python3 -m venv --system-site-packages, so
# that Debian's numpy is seen), reusing the suite's build folder so that nothing is compiled
# anew; then the module imports from another folder without PYTHONPATH, computes a known answer,
# `pip show` gives the program's version, and `pip uninstall` removes it. Exits 77 (ctest:
# skipped) with the reason when python3-venv is missing.
#   tests/python/test_pip_install.sh SOURCE_DIR BUILD_DIR ICLPROBE_BIN PYTHON3
set -eu
src=$1 build=$2 bin=$3 python=$4
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if ! "$python" -m venv --system-site-packages "$scratch/env" >"$scratch/venv.log" 2>&1; then
  echo "SKIP: python3 -m venv failed (install python3-venv): $(tail -n 1 "$scratch/venv.log")"
  exit 77
fi
env="$scratch/env/bin"
# A copy of the tracked sources (less the learners and results, which the build does not read), as
# a clean clone would have them: pip writes its scratch
# (build-pip/) beside setup.py, which must not touch the tree the suite runs from.
git -C "$src" ls-files -z -- . ":!checkpoints" ":!results" | (cd "$src" && xargs -0 tar -cf -) | tar -xf - -C "$scratch" --one-top-level=src
ICLPROBE_BUILD_DIR=$build "$env/pip" install --no-build-isolation --no-index --no-deps -q \
  "$scratch/src" >"$scratch/pip.log" 2>&1 || { cat "$scratch/pip.log"; exit 1; }
cd "$scratch"
unset PYTHONPATH
"$env/python" - <<'PY'
import os, sys
import numpy as np
import iclprobe
here = os.path.dirname(iclprobe.__file__)
assert "site-packages" in here, "iclprobe imported from %s, not the environment" % here
# A known answer: x'y of planted prompts, through the installed extension.
rng = np.random.default_rng(0)
x = rng.standard_normal((5, 6, 3))
w = rng.standard_normal((5, 3))
y = np.einsum("ind,id->in", x, w)
t = iclprobe.targets(x, y)
want = np.einsum("ind,in->id", x[:, :4], y[:, :4])
assert np.allclose(t["xty"][:, 3], want, rtol=1e-12, atol=1e-12), "x'y differs"
print("installed iclprobe", iclprobe.__version__, "from", here)
PY
shown=$("$env/pip" show iclprobe | sed -n 's/^Version: //p')
program=$("$bin" --version | awk '{print $2}')
[ "$shown" = "$program" ] || { echo "pip show says $shown, iclprobe --version says $program"; exit 1; }
"$env/pip" uninstall -y -q iclprobe
if "$env/python" -c "import iclprobe" 2>/dev/null; then
  echo "iclprobe still imports after pip uninstall"; exit 1
fi
echo "pip install, show ($shown) and uninstall work"
