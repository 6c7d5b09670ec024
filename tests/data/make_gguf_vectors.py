#!/usr/bin/env python3
"""Writes tests/data/gguf_vectors.bin: reference results of PyPI's `gguf` package (ggml's own
Python implementation of its block formats) that `tests/cpu_quant.rs` compares ours with, bit
for bit.

Two kinds of record:
- `quantize` (the formats whose quantizer `gguf` implements: q4_0, q4_1, q5_0, q5_1, q8_0,
  mxfp4): f32 input blocks, the blocks `gguf` quantizes them to, and what `gguf` dequantizes
  those blocks to;
- `dequantize` (every format): random block bytes (with finite scales) and what `gguf`
  dequantizes them to.

The inputs are deterministic (fixed seeds), so running this again must reproduce the file byte
for byte: `scripts/test.sh` checks that, and also runs it with a fresh seed into a temporary
file (`--seed`) that the Rust test reads through `CUKERNELS_GGUF_VECTORS`.

File layout (little-endian): b"CKGV", u32 version, u32 record count, then per record:
u8 name length, name (ASCII), u8 kind (0 quantize, 1 dequantize), u32 elements, u32 bytes,
[f32 input; elements] (quantize only), [u8 blocks; bytes], [f32 dequantized; elements].

Usage: python3 tests/data/make_gguf_vectors.py OUT [--seed N]
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGML_QUANT_SIZES
from gguf.quants import quantize, dequantize

VERSION = 1
QUANTIZED = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4"]
ALL = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4"]
# Byte offsets of the f16 fields of each block (they get finite random values).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ4_NL": [0], "IQ4_XS": [0], "MXFP4": [],
}


def input_blocks(rng, n_blocks, block):
    """Blocks of varied shapes: normal at scales from 1e-3 to 1e2, uniform, one outlier,
    all negative, constant, all zero, a single non-zero, ties between +a and -a."""
    out = []
    for b in range(n_blocks):
        kind = b % 10
        scale = 10.0 ** rng.uniform(-3, 2)
        if kind == 0:
            x = np.zeros(block)
        elif kind == 1:
            x = np.full(block, rng.normal() * scale)
        elif kind == 2:
            x = np.zeros(block)
            x[rng.integers(block)] = rng.normal() * scale
        elif kind == 3:
            x = rng.normal(size=block) * scale
            x[rng.integers(block)] = 40 * scale
        elif kind == 4:
            x = -np.abs(rng.normal(size=block)) * scale
        elif kind == 5:
            x = rng.uniform(-1, 1, size=block) * scale
        elif kind == 6:
            x = rng.normal(size=block) * scale
            i, j = rng.choice(block, 2, replace=False)
            x[i], x[j] = 3 * scale, -3 * scale
        else:
            x = rng.normal(size=block) * scale
        out.append(x)
    return np.concatenate(out).astype(np.float32)


def random_blocks(rng, name, n_blocks):
    _, size = GGML_QUANT_SIZES[T[name]]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in F16_FIELDS[name]:
        # Finite scales of either sign, 2^-14 .. 2^1 in magnitude.
        mag = 2.0 ** rng.uniform(-14, 1, size=n_blocks)
        sign = np.where(rng.integers(0, 2, size=n_blocks) == 1, -1.0, 1.0)
        raw[:, off:off + 2] = (mag * sign).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    if name == "MXFP4":
        raw[:, 0] = rng.integers(0, 200, size=n_blocks)  # shared exponents whose products stay finite
    return raw.reshape(-1)


def main():
    args = sys.argv[1:]
    seed = 20261201
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    out_path = args[0]
    rng = np.random.default_rng(seed)
    records = []
    for name in QUANTIZED:
        block, _ = GGML_QUANT_SIZES[T[name]]
        x = input_blocks(rng, 40, block)
        q = quantize(x.reshape(1, -1), T[name]).reshape(-1)
        y = dequantize(q, T[name]).reshape(-1).astype(np.float32)
        records.append((name, 0, x, q, y))
    for name in ALL:
        block, _ = GGML_QUANT_SIZES[T[name]]
        n_blocks = 40 if block == 32 else 6
        q = random_blocks(rng, name, n_blocks)
        y = dequantize(q, T[name]).reshape(-1).astype(np.float32)
        assert np.isfinite(y).all(), name
        records.append((name, 1, None, q, y))
    with open(out_path, "wb") as f:
        f.write(b"CKGV" + struct.pack("<II", VERSION, len(records)))
        for name, kind, x, q, y in records:
            f.write(struct.pack("<B", len(name)) + name.lower().encode() + struct.pack("<BII", kind, y.size, q.size))
            if x is not None:
                f.write(x.astype("<f4").tobytes())
            f.write(q.astype(np.uint8).tobytes())
            f.write(y.astype("<f4").tobytes())


if __name__ == "__main__":
    main()
