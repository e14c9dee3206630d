#!/usr/bin/python3
"""Reference for bench_extract: the same extraction (every layer's hidden states, predictions,
prompts and the targets w_ols, w_ridge, X'y, X'X after every k) written with PyTorch's Python
front end and h5py, streaming batches into chunked datasets. It loads iclprobe checkpoints
directly (the parameter names match), so it also checks the C++ model: --check compares its
predictions with an iclprobe activations file.

Usage: /usr/bin/python3 bench/extract_pytorch.py CHECKPOINT [prompts] [threads] [--compress]
       /usr/bin/python3 bench/extract_pytorch.py CHECKPOINT --check ACTIVATIONS
"""
import json
import os
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from train_step_pytorch import Transformer, sample, tokens_of  # noqa: E402


def load(path):
    with h5py.File(path, "r") as f:
        cfg = json.loads(f.attrs["model_config"])
        task = json.loads(f.attrs["task_config"])
        model = Transformer(cfg["d"], cfg["n_max"], cfg["layers"], cfg["hidden"], cfg["heads"], cfg["mlp_ratio"])
        state = {k: torch.from_numpy(f["params"][k][()]) for k in f["params"]}
    model.load_state_dict(state)
    return model.eval(), cfg, task


def forward_all(model, tokens):
    h = model.input_proj(tokens) + model.pos_embed[: tokens.shape[1]]
    states = [h]
    for b in model.blocks:
        h = b(h)
        states.append(h)
    return states, model.readout(model.final_ln(h[:, 0::2])).squeeze(-1)


def targets(x, y, lam):
    """Per-k targets, vectorised over prompts: x [B, n, d], y [B, n]."""
    B, n, d = x.shape
    xtx = np.cumsum(np.einsum("bni,bnj->bnij", x, x), axis=1)
    xty = np.cumsum(x * y[:, :, None], axis=1)
    w_ols = np.empty((B, n, d))
    for k in range(1, n + 1):
        w_ols[:, k - 1] = np.einsum("bij,bj->bi", np.linalg.pinv(x[:, :k]), y[:, :k])
    w_ridge = np.linalg.solve(xtx + lam * np.eye(d), xty[..., None])[..., 0]
    return w_ols, w_ridge, xty, xtx


def extract(ckpt, prompts, out, compress, batch=320):
    model, cfg, task = load(ckpt)
    d, n, L, H = cfg["d"], task["n"], cfg["layers"], cfg["hidden"]
    rng = np.random.default_rng(7)
    kw = dict(compression="gzip", compression_opts=4, shuffle=True) if compress else {}
    with h5py.File(out, "w") as f:
        hid = [f.create_dataset(f"hidden/layer_{l:02d}", (0, 2 * n, H), "f4", maxshape=(None, 2 * n, H),
                                chunks=(batch, 2 * n, H), **kw) for l in range(L + 1)]
        shapes = {"predictions": ((n,), "f4"), "prompts/x": ((n, d), "f8"), "prompts/y": ((n,), "f8"),
                  "prompts/w": ((d,), "f8"), "targets/w_ols": ((n, d), "f8"), "targets/w_ridge": ((n, d), "f8"),
                  "targets/xty": ((n, d), "f8"), "targets/xtx": ((n, d, d), "f8")}
        rest = {k: f.create_dataset(k, (0,) + s, t, maxshape=(None,) + s, chunks=(batch,) + s, **kw)
                for k, (s, t) in shapes.items()}
        done = 0
        with torch.no_grad():
            while done < prompts:
                b = min(batch, prompts - done)
                x, y, w = sample(rng, b, n, d)
                states, pred = forward_all(model, torch.from_numpy(tokens_of(x, y)))
                values = dict(zip(["targets/w_ols", "targets/w_ridge", "targets/xty", "targets/xtx"],
                                  targets(x, y, 0.1)))
                values.update({"predictions": pred.numpy(), "prompts/x": x, "prompts/y": y, "prompts/w": w})
                for ds, s in zip(hid, states):
                    ds.resize(done + b, axis=0)
                    ds[done:] = s.numpy()
                for k, ds in rest.items():
                    ds.resize(done + b, axis=0)
                    ds[done:] = values[k]
                f.flush()
                done += b


def check(ckpt, acts):
    model, _, _ = load(ckpt)
    with h5py.File(acts, "r") as f:
        x, y = f["prompts/x"][:256], f["prompts/y"][:256]
        ours = f["predictions"][:256]
        layer = f["hidden/layer_03"][:256] if "hidden/layer_03" in f else None
    with torch.no_grad():
        states, pred = forward_all(model, torch.from_numpy(tokens_of(x, y)))
    print("max |prediction difference| C++ vs PyTorch:", float(np.abs(pred.numpy() - ours).max()))
    if layer is not None:
        print("max |layer 3 difference|:", float(np.abs(states[3].numpy() - layer).max()))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--check" in sys.argv:
        check(args[0], args[1])
        return
    ckpt = args[0]
    prompts = int(args[1]) if len(args) > 1 else 20000
    threads = int(args[2]) if len(args) > 2 else os.cpu_count()
    compress = "--compress" in sys.argv
    torch.set_num_threads(threads)
    out = os.path.join(tempfile.gettempdir(), "iclprobe-bench-extract-py.h5")
    t0 = time.perf_counter()
    extract(ckpt, prompts, out, compress)
    s = time.perf_counter() - t0
    mb = os.path.getsize(out) / 2**20
    print(f"python {os.path.basename(ckpt):24s} {'deflate' if compress else 'plain':8s} "
          f"{prompts / s:10.0f} prompts/s {mb / s:8.1f} MB/s {mb:9.1f} MB {s:8.2f} s")
    os.remove(out)


if __name__ == "__main__":
    main()
