#!/usr/bin/python3
"""Reference for the MLP-probe benchmark: the attention-pooled MLP probe of `iclprobe probe
--probes mlp` (docs/paper.md "Probing", probes/gradient.hpp) written with PyTorch's Python front end,
fitted one layer after another, on the split that iclprobe used (read from its probes.h5): the
same features (the first 2k positions, standardised with training statistics), standardised
targets, probe (pooling logits scaled by 10, W_v, Linear H->256, tanh-GELU, Linear 256->m), Adam
(lr 1e-3, batch 64), early stopping on the validation MSE (patience 4) and the same epochs.
The initial weights and shuffles come from PyTorch's generator, not iclprobe's, so R2 agrees
with iclprobe's in distribution, not digit for digit; both are printed. Time it as a whole
process, like the iclprobe command. Only for comparison; iclprobe itself never needs Python.

Usage: /usr/bin/python3 bench/probe_mlp_pytorch.py ACTIVATIONS PROBES TARGETS KS EPOCHS [THREADS=2]
(TARGETS and KS comma-separated lists: every layer of each (target, k), one probe after another)
"""
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class PooledMlpProbe(nn.Module):
    def __init__(self, positions, hidden, outputs, width=256):
        super().__init__()
        self.scores = nn.Parameter(torch.zeros(positions))
        self.proj = nn.Linear(hidden, hidden)
        self.fc1 = nn.Linear(hidden, width)
        self.fc2 = nn.Linear(width, outputs)

    def forward(self, x):  # [B, T, H] -> [B, m]
        alpha = torch.softmax(10.0 * self.scores, 0)
        v = self.proj(torch.einsum("bth,t->bh", x, alpha))
        return self.fc2(F.gelu(self.fc1(v), approximate="tanh"))


def fit(x, y, roles, epochs, seed, patience=4, batch=64):
    tr, va, te = (torch.from_numpy(np.flatnonzero(roles == r)) for r in (0, 1, 2))
    xtr = x[tr]
    flat = xtr.reshape(-1, x.shape[-1])
    mu, sd = flat.mean(0), flat.std(0, unbiased=False).clamp_min(1e-6)
    xtr, xva, xte = (xtr - mu) / sd, (x[va] - mu) / sd, (x[te] - mu) / sd
    ymu, ysd = y[tr].mean(0), y[tr].std(0, unbiased=False)
    ysd[ysd <= 1e-12] = 1.0
    ytr, yva = ((y[tr] - ymu) / ysd).float(), ((y[va] - ymu) / ysd).float()
    torch.manual_seed(seed)
    probe = PooledMlpProbe(x.shape[1], x.shape[2], y.shape[1])
    opt = torch.optim.Adam(probe.parameters(), lr=1e-3)
    best, since, best_state = float("inf"), 0, None
    for _ in range(epochs):
        perm = torch.randperm(len(tr))
        for b in range(0, len(tr), batch):
            idx = perm[b:b + batch]
            opt.zero_grad()
            loss = (probe(xtr[idx]) - ytr[idx]).pow(2).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            v = (probe(xva) - yva).pow(2).mean().item()
        if v < best - 1e-7:
            best, since = v, 0
            best_state = {k: t.clone() for k, t in probe.state_dict().items()}
        else:
            since += 1
            if since >= patience:
                break
    probe.load_state_dict(best_state)
    with torch.no_grad():
        pred = probe(xte).double() * ysd + ymu
    yt = y[te]
    return 1 - float(((yt - pred) ** 2).sum() / ((yt - yt.mean(0)) ** 2).sum())


def main():
    acts, probes, targets, ks, epochs = sys.argv[1:6]
    targets, ks, epochs = targets.split(","), [int(k) for k in ks.split(",")], int(epochs)
    torch.set_num_threads(int(sys.argv[6]) if len(sys.argv) > 6 else 2)
    with h5py.File(probes, "r") as p:
        roles = p["splits/seed_0"][()]
        # metrics/<target>/mlp/model/r2: row-major [layer, k, seed] (probes/probes_file.cpp)
        ours = {t: p[f"metrics/{t}/mlp/model/r2"][()] for t in targets}
    n = len(roles)
    with h5py.File(acts, "r") as a:
        layers = sorted(a["hidden"].keys())
        for target in targets:  # one probe after another, as a Python user would write it
            for ki, k in enumerate(ks):
                y = torch.from_numpy(a[f"targets/{target}"][:n, k - 1]).reshape(n, -1)
                r2 = []
                for layer in layers:
                    x = torch.from_numpy(a[f"hidden/{layer}"][:n, : 2 * k, :])
                    r2.append(fit(x, y, roles, epochs, seed=len(r2)))
                print(f"{target} k={k} R2 PyTorch:  " + " ".join(f"{v:+.3f}" for v in r2))
                o = ours[target]
                if o.ndim == 3 and o.shape[0] == len(layers) and o.shape[1] == len(ks):
                    print(f"{target} k={k} R2 iclprobe: " + " ".join(f"{v:+.3f}" for v in o[:, ki, 0]))
    print(f"PyTorch {torch.__version__}: {len(layers) * len(ks) * len(targets)} MLP probes "
          f"({len(layers)} layers, k = {ks}, targets {targets}), one by one")


if __name__ == "__main__":
    main()
