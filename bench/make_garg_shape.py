#!/usr/bin/env python3
"""A learner of Garg et al.'s published shape for benchmarks (bench/trace_garg.sh): d = 20,
12 GPT-2 blocks of width 256 (8 heads, set at import), 41 learned positions per token kind, in
their tensor names, random weights (GPT-2's initial scale 0.02, unit LayerNorm), written as
safetensors with the Python standard library only (no numpy needed).

Usage: python3 bench/make_garg_shape.py OUT.safetensors [SEED]
"""
import json
import random
import struct
import sys
from array import array

D, N_POSITIONS, H, LAYERS = 20, 41, 256, 12


def shapes():
    s = [("_read_in.weight", (H, D)), ("_read_in.bias", (H,)),
         ("_backbone.wte.weight", (1, H)), ("_backbone.wpe.weight", (2 * N_POSITIONS, H))]
    for i in range(LAYERS):
        p = f"_backbone.h.{i}."
        s += [(p + "ln_1.weight", (H,)), (p + "ln_1.bias", (H,)),
              (p + "attn.c_attn.weight", (H, 3 * H)), (p + "attn.c_attn.bias", (3 * H,)),
              (p + "attn.c_proj.weight", (H, H)), (p + "attn.c_proj.bias", (H,)),
              (p + "ln_2.weight", (H,)), (p + "ln_2.bias", (H,)),
              (p + "mlp.c_fc.weight", (H, 4 * H)), (p + "mlp.c_fc.bias", (4 * H,)),
              (p + "mlp.c_proj.weight", (4 * H, H)), (p + "mlp.c_proj.bias", (H,))]
    s += [("_backbone.ln_f.weight", (H,)), ("_backbone.ln_f.bias", (H,)),
          ("_read_out.weight", (1, H)), ("_read_out.bias", (1,))]
    return s


def main():
    out = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    header, blobs, offset = {}, [], 0
    for name, shape in shapes():
        count = 1
        for n in shape:
            count *= n
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
            values = array("f", [1.0]) * count
        elif name.endswith(".bias"):
            values = array("f", [0.0]) * count
        else:
            values = array("f", (rng.gauss(0.0, 0.02) for _ in range(count)))
        data = values.tobytes()  # little-endian float32 on this machine's architecture
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
