#!/usr/bin/python3
"""Speed figure: the Python module's ridge_probe on arrays against the CLI's ridge on the
same states in a file, and against scikit-learn's RidgeCV on the same arrays (when installed).

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_ridge.py ACTIVATIONS CLI_SECONDS REPS
Prints: the load time of the arrays (not part of the probe), the module's median probe time on
[N, L, K, H] with 2 threads, its ratio to the CLI's whole command (CLI_SECONDS, measured by
bench/python_ridge.sh), and RidgeCV's time and ratio, all on the target xty.
"""
import statistics
import sys
import time

import numpy as np

import iclprobe

acts_path, cli_seconds, reps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
t0 = time.perf_counter()
a = iclprobe.open(acts_path)
H = a.states_after_k()
T = {"xty": a.target("xty")}
load = time.perf_counter() - t0
print("arrays: hidden %s float32 (%.0f MB), loaded in %.2f s" % (H.shape, H.nbytes / 1e6, load))

times = []
for _ in range(reps):
    t0 = time.perf_counter()
    res = iclprobe.ridge_probe(H, T, layers=a.layers, threads=2, bootstrap=1000)
    times.append(time.perf_counter() - t0)
mod = statistics.median(times)
print("module ridge_probe, 2 threads: %.2f s (median of %d); CLI probe command: %.2f s; "
      "module / CLI = %.2fx (goal <= 1.5x)" % (mod, reps, cli_seconds, mod / cli_seconds))

try:
    from sklearn.linear_model import RidgeCV
except ImportError:
    print("scikit-learn: not installed (python3-sklearn); no RidgeCV figure")
    sys.exit(0)
roles = res.roles[0]
train = roles == 0
grid = np.logspace(-3, 5, 20)
t0 = time.perf_counter()
for li in range(H.shape[1]):
    for ki in range(H.shape[2]):
        x = H[train, li, ki].astype(np.float64)
        x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1)
        RidgeCV(alphas=grid).fit(x, T["xty"][train, ki])
sk = time.perf_counter() - t0
print("scikit-learn RidgeCV (exact LOO, same grid, one run): %.2f s; RidgeCV / module = %.1fx"
      % (sk, sk / mod))
