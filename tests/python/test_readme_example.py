"""The README's Python example (the block after <!-- python-example -->) runs as written, with
Debian's python3-torch; exits 77 (ctest: skipped) with the reason when torch or numpy is missing.
    python3 tests/python/test_readme_example.py README.md"""

import contextlib
import io
import re
import sys

SKIP = 77
try:
    import numpy  # noqa: F401
    import torch  # noqa: F401
except ImportError as e:
    print("SKIP: the README example needs numpy and torch (%s); install python3-torch" % e)
    sys.exit(SKIP)

text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"<!-- python-example -->\s*```python\n(.*?)```", text, re.S)
assert m, "README.md has no python block after <!-- python-example -->"
out = io.StringIO()
scope = {}
with contextlib.redirect_stdout(out):
    exec(compile(m.group(1), "README.md (python example)", "exec"), scope)
lines = out.getvalue().strip().splitlines()
print(out.getvalue())
n = scope["n"]
assert len(lines) == n, "expected one line per k = 1..%d, got %d" % (n, len(lines))
# What the example prints is the module's result: every interval holds its point estimate.
tab, sel = scope["tab"], scope["sel"]
assert all(tab["r2_lo"] <= tab["r2"]) and all(tab["r2"] <= tab["r2_hi"])
assert all(sel["lo"] <= sel["selectivity"]) and all(sel["selectivity"] <= sel["hi"])
print("README example ran")
