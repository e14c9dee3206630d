"""Bad arguments to the iclprobe Python module raise ValueError naming the argument, never
pybind11's "incompatible function arguments" TypeError or an allocator's text; threads= runs at
most the cores, as the CLI's --threads does, and says how many. Run by ctest:
    python3 tests/python/test_messages.py ICLPROBE_BINARY WORKDIR
Exits 77 (ctest: skipped) when numpy or the module cannot be imported, with the reason."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

try:
    import numpy as np
except ImportError as e:
    print("SKIP: numpy is not importable (%s); install python3-numpy" % e)
    sys.exit(SKIP)
try:
    import iclprobe
except ImportError as e:
    print("SKIP: the iclprobe module is not importable (%s); build with pybind11-dev" % e)
    sys.exit(SKIP)

BINARY = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="iclprobe_msg_", dir=sys.argv[2] if len(sys.argv) > 2 else None)
LIBRARY_TEXT = ("incompatible function arguments", "c10::", "svd(", "pinv(",
                "can't allocate memory")
failures = []


def check(name, fn):
    try:
        fn()
        print("ok   %s" % name)
    except Exception as e:  # noqa: BLE001 (report every failure, then exit non-zero)
        failures.append(name)
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e))


def raises_value_error(fn, *words):
    """fn() raises ValueError whose message holds every word and no library's text."""
    try:
        fn()
    except ValueError as e:
        for w in words:
            assert w in str(e), "message %r lacks %r" % (str(e), w)
        for t in LIBRARY_TEXT:
            assert t not in str(e), "message %r holds %r" % (str(e), t)
        return
    raise AssertionError("no ValueError")


rng = np.random.default_rng(0)
H = rng.standard_normal((200, 1, 8, 16)).astype("f4")
T = {"t": rng.standard_normal((200, 8, 4))}


def test_integer_arguments_out_of_range_name_the_argument():
    for kw, name in [({"seed": -1}, "seed"), ({"seed": 2 ** 64}, "seed"),
                     ({"seeds": 10 ** 12}, "seeds"), ({"threads": 2 ** 40}, "threads"),
                     ({"threads": 0}, "threads"), ({"bootstrap": 2 ** 40}, "bootstrap")]:
        raises_value_error(lambda: iclprobe.ridge_probe(H, T, **kw), name)


def test_a_split_of_two_fractions_names_split():
    raises_value_error(lambda: iclprobe.ridge_probe(H, T, split=(0.9, 0.1)), "split")


def test_an_impossible_mlp_width_names_mlp_hidden():
    raises_value_error(
        lambda: iclprobe.probe(H, T, probes=["mlp"], positions="y", mlp_hidden=10 ** 9),
        "mlp_hidden", "65536")


def test_empty_list_entries_name_the_argument():
    x = rng.standard_normal((4, 5, 3))
    y = rng.standard_normal((4, 5))
    raises_value_error(lambda: iclprobe.targets(x, y, learners=["ols", ""]), "learners", "empty")
    raises_value_error(lambda: iclprobe.targets(x, y, learners="ols,"), "learners", "empty")
    raises_value_error(lambda: iclprobe.probe(H, T, probes="ridge,", positions="y"), "probes",
                       "empty")
    # A str is one list, as on the command line: "ols,gd:0.1:2" is two learners.
    t = iclprobe.targets(x, y, learners="ols,gd:0.1:2")
    assert "ols" in t and "gd:0.1:2" in t, sorted(t)


def cli_cap():
    """The workers the CLI runs for --threads 256 (its documented maximum): the usable cores,
    from its one line on stderr; 256 when it has that many cores and says nothing."""
    ckpt = os.path.join(WORK, "gd.h5")
    r = subprocess.run([BINARY, "construct", "--program", "gd", "--d", "3", "--n", "6", "--out",
                        ckpt], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([BINARY, "extract", "-c", ckpt, "--prompts", "64", "--threads", "256",
                        "--quiet", "--out", os.path.join(WORK, "acts.h5")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = re.search(r"running (\d+) worker", r.stderr)
    return int(m.group(1)) if m else 256


def test_threads_beyond_the_cores_run_on_the_cores_as_the_cli():
    cap = cli_cap()
    assert iclprobe.thread_count(10 ** 6) == cap, (iclprobe.thread_count(10 ** 6), cap)
    assert iclprobe.thread_count(1) == 1
    # A million threads were started one by one before: no answer in a minute.
    res = iclprobe.ridge_probe(H, T, threads=10 ** 6)
    assert res.threads == cap, (res.threads, cap)
    assert len(res.table["r2"]) == 8


for name, fn in list(globals().items()):
    if name.startswith("test_") and callable(fn):
        check(name, fn)
shutil.rmtree(WORK, ignore_errors=True)
if failures:
    print("%d failed: %s" % (len(failures), ", ".join(failures)))
    sys.exit(1)
print("all passed")
