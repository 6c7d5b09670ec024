#!/usr/bin/env python3
"""llama.cpp's MMQ beside ours, from the same device run.

Reads the JSON lines `cukernels-bench moe` wrote and the log of ggml's own benchmark
(`test-backend-ops perf -o MUL_MAT_ID`, built on the same GPU by ../shared/anchors/ggml-anchor.sh),
and writes, for every shape both measured, a line with `baseline: "llama.cpp"`: its time
(`baseline_ms`), its TFLOP/s, and `ratio` = llama.cpp's time / ours (above 1: we are faster).
ggml's cases read one activation row per slot (`b=false`), so only our rows with
`x_rows: "n_used"` are matched. Shapes ggml does not time (T = 2048, our forced-path rows) get
no llama.cpp line.

Usage: python3 benches/moe_llamacpp.py ours.jsonl perf-MUL_MAT_ID.log out.jsonl
"""
import json
import re
import sys

CASE = re.compile(
    r"MUL_MAT_ID\(type_a=(\w+),type_b=f32,n_mats=(\d+),n_used=(\d+),b=(\d),m=(\d+),n=(\d+),k=(\d+)\):\s+(\d+) runs -\s+([\d.]+) us/run"
)


def main(ours_path, log_path, out_path):
    llama = {}
    for line in open(log_path, errors="replace"):
        m = CASE.search(line)
        if m:
            fmt, e, used, b, n, t, k, _, us = m.groups()
            if b == "0":
                llama[(fmt.lower(), int(e), int(used), int(n), int(k), int(t))] = float(us) / 1000.0
    rows = [json.loads(l) for l in open(ours_path) if l.strip()]
    out = []
    for r in rows:
        out.append(r)
        if r["x_rows"] != "n_used" or "forced" in r["label"]:
            continue
        key = (r["format"].lower(), r["experts"], r["n_used"], r["n"], r["k"], r["tokens"])
        if key not in llama:
            continue
        ms = llama[key]
        flops = r["ours_tflops"] * 1e12 * r["ours_ms"] / 1e3
        line = dict(r)
        line.update(
            baseline="llama.cpp",
            baseline_ms=round(ms, 5),
            baseline_tflops=round(flops / (ms / 1e3) / 1e12, 3),
            ratio=round(ms / r["ours_ms"], 4),
        )
        out.append(line)
    with open(out_path, "w") as f:
        for r in out:
            f.write(json.dumps(r) + "\n")
    matched = sum(1 for r in out if r["baseline"] == "llama.cpp")
    print(f"{len(llama)} llama.cpp cases, {matched} matched to our rows")
    for r in out:
        if r["baseline"] == "llama.cpp":
            print(f"{r['label']:<48} ours {r['ours_ms']*1e3:9.1f} us  llama.cpp {r['baseline_ms']*1e3:9.1f} us  ratio {r['ratio']:.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
