#!/usr/bin/env python3
"""PyTorch baselines for `cukernels-bench attention`, on the same GPU in the same device run.

Reads the JSON lines our benchmark wrote (one per shape), times
`torch.nn.functional.scaled_dot_product_attention` on each shape with its flash backend
(FlashAttention-2) and its cuDNN backend, the same way ours is timed (median over samples of
back-to-back launches between two CUDA events, a sample lasting about a millisecond), and
writes the lines back with `torch_flash_ms`, `torch_cudnn_ms`, their TFLOP/s or TB/s, and our
ratios (`ratio_flash` = torch flash time / ours: above 1 is faster than FlashAttention-2).

Tensors are [batch, seq, heads, dim] (the layout both libraries read natively), passed to
SDPA as [batch, heads, seq, dim] views. GQA uses `enable_gqa=True`; where a backend refuses a
shape, its field is null and `*_error` says why.

Usage: python3 benches/attention_torch.py ours.jsonl out.jsonl [--samples N]
"""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F


def per_launch_ms(run, samples):
    for _ in range(3):
        run()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    run()
    b.record()
    torch.cuda.synchronize()
    one = max(a.elapsed_time(b), 1e-4)
    inner = int(min(max(1.0 / one, 1), 2000))
    times = []
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)]
    for s, e in events:
        s.record()
        for _ in range(inner):
            run()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) / inner for s, e in events)
    return times[len(times) // 2]


def per_graph_ms(run, samples, inner):
    """Milliseconds per call replayed from a CUDA graph of `inner` calls (no Python or launch
    overhead between them): the GPU's time, where back-to-back calls from Python may time the
    host. Decode rows only, as for ours (`graph_ms`)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph asks
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            run()
    for _ in range(30):
        graph.replay()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)]
    for s, e in events:
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) / inner for s, e in events)
    return times[len(times) // 2]


def time_backend(row, backend, samples, graph=False):
    dtype = torch.float16 if row["dtype"] == "f16" else torch.bfloat16
    b, lq, lk, hq, hk, d = row["batch"], row["seqlen_q"], row["seqlen_k"], row["heads_q"], row["heads_k"], row["head_dim"]
    q = torch.randn(b, lq, hq, d, device="cuda", dtype=dtype).transpose(1, 2)
    k = torch.randn(b, lk, hk, d, device="cuda", dtype=dtype).transpose(1, 2)
    v = torch.randn(b, lk, hk, d, device="cuda", dtype=dtype).transpose(1, 2)
    causal = bool(row["causal"])
    gqa = hq != hk
    with sdpa_kernel([backend]):
        run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        run()
        torch.cuda.synchronize()
        if graph:
            return per_graph_ms(run, samples, int(row.get("graph_inner") or 200))
        return per_launch_ms(run, samples)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    samples = int(sys.argv[sys.argv.index("--samples") + 1]) if "--samples" in sys.argv else 21
    rows = [json.loads(l) for l in open(src) if l.strip()]
    out = []
    for row in rows:
        # Ours with forced splits, paged K/V (SDPA has none) or the merge in the split launch
        # (the same shapes have their baselines in the decode groups): no baseline.
        if row["group"] in ("decode split sweep", "paged decode"):
            out.append(row)
            continue
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                ms = time_backend(row, backend, samples)
                row[f"torch_{name}_ms"] = round(ms, 5)
                row[f"torch_{name}_tflops"] = round(row["flops"] / (ms * 1e-3) / 1e12, 2)
                row[f"torch_{name}_tbps"] = round(row["kv_bytes"] / (ms * 1e-3) / 1e12, 3)
                row[f"ratio_{name}"] = round(ms / row["ours_ms"], 3)
            except Exception as e:  # a backend that refuses the shape
                row[f"torch_{name}_ms"] = None
                row[f"ratio_{name}"] = None
                row[f"torch_{name}_error"] = str(e).splitlines()[0][:200]
            if row.get("graph_ms") is not None:
                try:
                    ms = time_backend(row, backend, samples, graph=True)
                    row[f"torch_{name}_graph_ms"] = round(ms, 5)
                    row[f"ratio_{name}_graph"] = round(ms / row["graph_ms"], 3)
                except Exception as e:
                    row[f"torch_{name}_graph_ms"] = None
                    row[f"torch_{name}_graph_error"] = str(e).splitlines()[0][:200]
            torch.cuda.empty_cache()
        row["torch"] = torch.__version__
        out.append(row)
        print(f"{row['label']:<48} ours {row['ours_ms']:.4f} ms  flash {row.get('torch_flash_ms')}  cudnn {row.get('torch_cudnn_ms')}  "
              f"x{row.get('ratio_flash')} / x{row.get('ratio_cudnn')}  graph: ours {row.get('graph_ms')} flash {row.get('torch_flash_graph_ms')}", flush=True)
    with open(dst, "w") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
