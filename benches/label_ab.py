#!/usr/bin/env python3
"""Compares two benchmark runs of the same attention or MoE rows, a base and a change, timed in
the same device run (scripts/device-ab.sh with AB_OP=attention or moe): per row label, each
round's time of our kernel (µs) on both sides and base/new of their medians (>1: the change is
faster), with the MoE path the row took. SGEMM has its own comparison, sgemm_ab.py (variants and
the sweep's groups).

Usage: label_ab.py BASE.jsonl... -- NEW.jsonl...
"""
import json
import statistics
import sys


def load(paths):
    """row label -> (its times in µs, one per round; the path it took, or '')."""
    runs = {}
    for path in paths:
        for line in open(path):
            row = json.loads(line)
            times, _ = runs.setdefault(row["label"], ([], row.get("path", "")))
            times.append(row["ours_ms"] * 1000)
    return runs


def main():
    args = sys.argv[1:]
    split = args.index("--")
    base, new = load(args[:split]), load(args[split + 1:])
    labels = [label for label in base if label in new]
    print(f"{len(labels)} rows in both runs; µs per call, each round's median; base | new; base/new of the medians")
    rounds = lambda times: " ".join(f"{t:8.2f}" for t in times)
    for label in labels:
        (b, path), (n, _) = base[label], new[label]
        print(f"{label:58} {path:8} {rounds(b)} | {rounds(n)}   {statistics.median(b) / statistics.median(n):5.3f}")


if __name__ == "__main__":
    main()
