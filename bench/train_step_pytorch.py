#!/usr/bin/python3
"""Reference for bench_train: the same transformer learner and training step written with
PyTorch's Python front end (Debian's python3-torch), timed the same way (median step time
after 5 warm-up steps). Only for comparison; iclprobe itself never needs Python.

Usage: /usr/bin/python3 bench/train_step_pytorch.py [threads] [steps]
"""
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.hidden, self.heads = hidden, heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * hidden, hidden))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * hidden))
        self.out_proj = nn.Linear(hidden, hidden)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, x):
        B, T, _ = x.shape
        hd = self.hidden // self.heads
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        q, k, v = qkv.view(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1)
        return self.out_proj((attn @ v).transpose(1, 2).reshape(B, T, self.hidden))


class Block(nn.Module):
    def __init__(self, hidden, heads, ratio):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads)
        self.fc1, self.fc2 = nn.Linear(hidden, ratio * hidden), nn.Linear(ratio * hidden, hidden)

    def forward(self, h):
        h = h + self.attn(self.ln1(h))
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h)), approximate="tanh"))


class Transformer(nn.Module):
    def __init__(self, d, n_max, layers, hidden, heads, ratio=4):
        super().__init__()
        self.input_proj = nn.Linear(d + 1, hidden)
        self.pos_embed = nn.Parameter(torch.randn(2 * n_max, hidden) * 0.02)
        self.blocks = nn.ModuleList([Block(hidden, heads, ratio) for _ in range(layers)])
        self.final_ln = nn.LayerNorm(hidden)
        self.readout = nn.Linear(hidden, 1)

    def forward(self, tokens):
        h = self.input_proj(tokens) + self.pos_embed[: tokens.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.readout(self.final_ln(h[:, 0::2])).squeeze(-1)


def tokens_of(x, y):
    """Interleaved x-tokens [0, x_j] and y-tokens [y_j, 0_d]: [B, 2n, d+1] float32."""
    b, n, d = x.shape
    tokens = np.zeros((b, 2 * n, d + 1), dtype=np.float32)
    tokens[:, 0::2, 1:] = x
    tokens[:, 1::2, 0] = y
    return tokens


def sample(rng, b, n, d):
    """b noiseless prompts: x [b, n, d], y [b, n], w [b, d]."""
    w = rng.standard_normal((b, d))
    x = rng.standard_normal((b, n, d))
    return x, np.einsum("bnd,bd->bn", x, w), w


def batch(rng, b, n, d):
    x, y, _ = sample(rng, b, n, d)
    return torch.from_numpy(tokens_of(x, y)), torch.from_numpy(y.astype(np.float32))


def time_training(d, n, layers, hidden, heads, b, steps):
    torch.manual_seed(0)
    model = Transformer(d, n, layers, hidden, heads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), weight_decay=0.0)
    rng = np.random.default_rng(1)
    times = []
    for s in range(steps + 5):
        t0 = time.perf_counter()
        tokens, y = batch(rng, b, n, d)
        opt.zero_grad()
        loss = F.mse_loss(model(tokens), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s >= 5:
            times.append(time.perf_counter() - t0)
    return 1.0 / float(np.median(times))


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads()
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    torch.set_num_threads(threads)
    print(f"PyTorch {torch.__version__} (Python), threads {threads}")
    for name, cfg in [("shipped d=4 n=12 L=8 H=64 M=4", (4, 12, 8, 64, 4)),
                      ("larger  d=8 n=40 L=8 H=128 M=4", (8, 40, 8, 128, 4))]:
        print(f"{name:34s} batch 64  {time_training(*cfg, 64, steps):8.2f} steps/s")


if __name__ == "__main__":
    main()
