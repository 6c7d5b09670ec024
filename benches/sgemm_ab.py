#!/usr/bin/env python3
"""Compares two SGEMM benchmark runs of the same shapes, a base and a change, timed in the same
device run (scripts/device-ab.sh): per shape, the median over rounds of our time and of each
variant's time, new against base; and for each side, the random sweep's figures against cuBLAS
(geometric mean, 10th percentile, lowest ratio), cuBLAS timed in the same process.

Usage: sgemm_ab.py BASE.jsonl... -- NEW.jsonl...
"""
import json
import math
import statistics
import sys


def load(paths):
    """shape label -> list of rows (one per round)."""
    runs = {}
    for path in paths:
        for line in open(path):
            row = json.loads(line)
            if row.get("op") == "sgemm":
                runs.setdefault(row["shape"], []).append(row)
    return runs


def median_of(rows, get):
    values = [v for v in (get(r) for r in rows) if v is not None]
    return statistics.median(values) if values else None


def sweep_figures(runs, group):
    """Ratios vs cuBLAS (median times over rounds) of one group's shapes."""
    ratios = sorted(
        median_of(rows, lambda r: r["baseline_ms"]) / median_of(rows, lambda r: r["ours_ms"])
        for rows in runs.values()
        if rows[0]["group"] == group
    )
    if not ratios:
        return None
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return len(ratios), geomean, ratios[len(ratios) // 10], ratios[0]


def main():
    args = sys.argv[1:]
    split = args.index("--")
    base, new = load(args[:split]), load(args[split + 1:])
    shapes = [s for s in base if s in new]
    print(f"{len(shapes)} shapes in both runs; rounds: base {max(map(len, base.values()))}, new {max(map(len, new.values()))}")
    print(f"{'shape':40} {'variant':>14} {'base ms':>9} {'new ms':>9} {'new/base':>8}   slowest tile variant change")
    speedups = []
    per_variant = {}
    for s in shapes:
        b, n = base[s], new[s]
        b_ms, n_ms = median_of(b, lambda r: r["ours_ms"]), median_of(n, lambda r: r["ours_ms"])
        speedups.append(b_ms / n_ms)
        changes = []
        for v in b[0]["variant_ms"]:
            bv, nv = median_of(b, lambda r: r["variant_ms"].get(v)), median_of(n, lambda r: r["variant_ms"].get(v))
            if bv and nv:
                per_variant.setdefault(v.split("/")[0], []).append(bv / nv)
                changes.append((nv / bv, v))
        worst = max(changes) if changes else (1.0, "-")
        print(f"{s:40} {n[0]['variant']:>14} {b_ms:9.5f} {n_ms:9.5f} {n_ms / b_ms:8.3f}   {worst[1]} {worst[0]:.3f}")
    geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"\nour time, base/new: geometric mean {geo(speedups):.3f} (>1: the change is faster); "
          f"best {max(speedups):.3f}, worst {min(speedups):.3f}")
    for v, xs in sorted(per_variant.items()):
        print(f"variant {v:8}: base/new geometric mean {geo(xs):.3f} over {len(xs)} shape timings (worst {min(xs):.3f}, best {max(xs):.3f})")
    for group in ("random", "square", "batched", "skinny", "odd", "extra"):
        fb, fn = sweep_figures({s: base[s] for s in shapes}, group), sweep_figures({s: new[s] for s in shapes}, group)
        if fb:
            print(f"group {group:7} ({fb[0]} shapes) vs cuBLAS: geomean {fb[1]:.3f} -> {fn[1]:.3f}, "
                  f"p10 {fb[2]:.3f} -> {fn[2]:.3f}, min {fb[3]:.3f} -> {fn[3]:.3f}")


if __name__ == "__main__":
    main()
