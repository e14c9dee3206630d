#!/usr/bin/python3
"""Reference for the ridge-probe benchmark: scikit-learn's RidgeCV (exact leave-one-out over
the same lambda grid) fit per (layer, k) on the same standardised training prompts that
`iclprobe probe --probes ridge` used (the split is read from probes.h5). Prints its total fit
time and how its selected lambdas and test predictions compare with iclprobe's.

Usage: /usr/bin/python3 bench/probe_ridge_sklearn.py ACTIVATIONS PROBES [TARGET=xty]
"""
import json
import sys
import time

import h5py
import numpy as np
from sklearn.linear_model import RidgeCV


def main():
    acts, probes = sys.argv[1], sys.argv[2]
    target = sys.argv[3] if len(sys.argv) > 3 else "xty"
    with h5py.File(probes, "r") as p:
        roles = p["splits/seed_0"][()]
        # Lists are array attributes (older files: JSON strings).
        as_list = lambda v: json.loads(v) if isinstance(v, (str, bytes)) else [int(x) for x in v]
        layers = as_list(p.attrs["layers"])
        ks = as_list(p.attrs["ks"])
        grid = np.array(json.loads(p["ridge"].attrs["lambdas"]))
        ours_lambda = p[f"ridge/{target}/model/lambda"][()]          # [L, K, S]
        ours_w = p[f"ridge/{target}/model/weights"][()]              # [L, K, S, p, m]
        ours_b = p[f"ridge/{target}/model/intercept"][()]            # [L, K, S, m]
    train, test = roles == 0, roles == 2
    with h5py.File(acts, "r") as a:
        y_all = a[f"targets/{target}"][()]
        if a[f"targets/{target}"].attrs.get("symmetric", 0):
            iu = np.triu_indices(y_all.shape[-1])
            y_all = y_all[..., iu[0], iu[1]]
        fit_seconds, same_lambda, pairs, worst = 0.0, 0, 0, 0.0
        for li, layer in enumerate(layers):
            h = a[f"hidden/layer_{layer:02d}"][()]
            for ki, k in enumerate(ks):
                x = h[:, 2 * k - 1, :].astype(np.float64)
                y = y_all[:, k - 1] if y_all.ndim > 2 else y_all
                mu, sd = x[train].mean(0), x[train].std(0)
                sd[sd <= 1e-6 * max(sd.max(), 1e-300)] = 1.0
                z = (x - mu) / sd
                t0 = time.perf_counter()
                cv = RidgeCV(alphas=grid, fit_intercept=True).fit(z[train], y[train])
                fit_seconds += time.perf_counter() - t0
                theirs = cv.predict(z[test])
                ours = x[test] @ ours_w[li, ki, 0] + ours_b[li, ki, 0]
                worst = max(worst, float(np.abs(theirs - ours).max() / np.abs(theirs).max()))
                same_lambda += int(np.isclose(cv.alpha_, ours_lambda[li, ki, 0], rtol=1e-9))
                pairs += 1
    print(f"scikit-learn RidgeCV (LOO, {len(grid)} lambdas): {pairs} (layer, k) fits of {target} in "
          f"{fit_seconds:.2f} s ({fit_seconds / pairs * 1000:.1f} ms per pair; reading and slicing not counted)")
    print(f"same selected lambda in {same_lambda} of {pairs} pairs; "
          f"max relative difference of test predictions {worst:.2e}")


if __name__ == "__main__":
    main()
