#!/usr/bin/env python3
"""Prints the README's MoE table from a `cukernels-bench moe` run merged with llama.cpp's
figures (benches/moe_llamacpp.py's output): one row per shape the config chose a path for
(forced-path rows are left out), ours beside the cuBLAS f16 and llama.cpp baselines of the
same run. Usage: moe_table.py RUN-with-llamacpp.jsonl"""
import json
import sys

rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "forced" in r["label"]:
        continue
    rows.setdefault(r["label"], {})[r["baseline"]] = r

print("| shape | path | ours µs | ours | cuBLAS f16 µs | x cuBLAS | llama.cpp µs | x llama.cpp |")
print("|---|---|---|---|---|---|---|---|")
for label, by in rows.items():
    c = by["cublas-f16"]
    ours = f"{c['ours_tbps']:.2f} TB/s" if "ours_tbps" in c else f"{c['ours_tflops']:.1f} TFLOP/s"
    l = by.get("llama.cpp")
    llama = f"{l['baseline_ms'] * 1000:.1f} | {l['ratio']:.2f}" if l else "- | -"
    print(f"| {label} | {c['path']} | {c['ours_ms'] * 1000:.1f} | {ours} | {c['baseline_ms'] * 1000:.1f} | {c['ratio']:.2f} | {llama} |")
