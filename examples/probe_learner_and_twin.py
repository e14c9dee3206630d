"""Notebook-style walk through the Python module on files the CLI made: the shipped learner's
activations and its random-init twin's, probed for X'y and w_OLS at every layer and k, with the
twin as the control; then the same probe on the arrays by hand, to show the two paths agree;
onsets, a saved probes.h5, and the pooled MLP probe.

    iclprobe extract -c checkpoints/d4_l8_h64.h5 --prompts 4000 --seed 7 --out /tmp/acts.h5
    iclprobe extract -c checkpoints/d4_l8_h64_init.h5 --prompts 4000 --seed 7 --out /tmp/acts_init.h5
    PYTHONPATH=build/python OMP_WAIT_POLICY=passive /usr/bin/python3 \
        examples/probe_learner_and_twin.py /tmp/acts.h5 /tmp/acts_init.h5
"""

import sys

import numpy as np

import iclprobe

# %% Open the files: the CLI's reader, its checks, numpy arrays out.
acts, twin = iclprobe.open(sys.argv[1]), iclprobe.open(sys.argv[2])
print(acts)
print("task:", acts.task_config)

# %% The states after k examples at every stored layer: [N, L, K, H].
H = acts.states_after_k()
H_twin = twin.states_after_k()
T = {t: acts.target(t) for t in ("xty", "w_ols")}
print("hidden", H.shape, "targets", {k: v.shape for k, v in T.items()})

# %% Ridge probes, the twin as control (same prompts: same seed and count).
res = iclprobe.ridge_probe(H, T, layers=acts.layers, controls={"twin": H_twin}, seed=0,
                           threads=2)
tab, sel = res.table, res.selectivity

# %% X'y: R2 by layer at k = 4 and k = n, with the twin's and the paired selectivity.
n = acts.task_config["n"]
for k in (4, n):
    print("\nX'y, k = %d" % k)
    print("layer  model R2 [95%]            twin R2   selectivity [95%]")
    for layer in acts.layers:
        row = lambda src: np.flatnonzero((tab["target"] == "xty") & (tab["source"] == src)
                                         & (tab["layer"] == layer) & (tab["k"] == k))[0]
        m, c = row("model"), row("twin")
        j = np.flatnonzero((sel["target"] == "xty") & (sel["layer"] == layer) & (sel["k"] == k))[0]
        print("%5d  %.3f [%.3f, %.3f]   %.3f     %+.3f [%+.3f, %+.3f]" % (
            layer, tab["r2"][m], tab["r2_lo"][m], tab["r2_hi"][m], tab["r2"][c],
            sel["selectivity"][j], sel["lo"][j], sel["hi"][j]))

# %% The fitted readout of one cell predicts the target from the raw state.
w = res.weights("xty", layer=acts.layers[-1], k=n)
pred = H[:, -1, n - 1].astype(np.float64) @ w["weights"] + w["intercept"]
test = res.roles[0] == 2
resid = pred[test] - T["xty"][test, n - 1]
print("\nlast layer, k = n: held-out MSE of the readout %.4g (lambda %.3g)" % (
    np.mean(resid ** 2), w["lambda"]))

# %% Where X'y becomes decodable: report's onset rule on the results in memory (the first layer
# whose R2 interval reaches 0.9 x the best layer's and whose paired margin over the twin exceeds
# 0.1), and the same results saved as the probes.h5 that `iclprobe report` reads.
for o in res.onsets(k=n):
    print("%s: onset layer %s (best layer %d, R2 %.3f)" % (o["target"], o["layer"],
                                                          o["best_layer"], o["best_r2"]))
res.save("/tmp/probes_from_python.h5", force=True)

# %% The paper's pooled MLP probe on the last layer's states of all 2n tokens (attention pooling
# over the tokens up to the state after k examples), at k = 4 and n only being cheap enough here.
last = acts.hidden(acts.layers[-1])  # [N, 2n, H]
mlp = iclprobe.probe(last, {"xty": T["xty"]}, probes=["ridge", "mlp"], layers=[acts.layers[-1]],
                     epochs=10, threads=2, progress=lambda d, t: None)
for p in ("ridge", "mlp"):
    r2 = mlp.metric("xty", probe=p)[0, [3, n - 1], 0]
    print("%-5s X'y R2 at k = 4, n: %.3f, %.3f" % (p, r2[0], r2[1]))
