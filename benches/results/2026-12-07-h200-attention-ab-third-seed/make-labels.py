#!/usr/bin/env python3
"""Writes seed3-labels.txt and seeds4-10-changed-labels.txt: the randomized SGEMM sweep's shapes
(`random_sweep` in benches/src/sgemm_bench.rs, ported: splitmix64, log-uniform draws, the work
cap) of seed 3, and of seeds 4-10 those whose choice differs between stop 52's dispatcher rules
(`before-medium-overhead` of scripts/sgemm-regret.py since stop 56) and `before-huge-min-k`.
Checks the port against the two
recorded seeds of 2026-12-06 first. Run from the repository root."""
import importlib.util
import json
import math

spec = importlib.util.spec_from_file_location("regret", "scripts/sgemm-regret.py")
regret = importlib.util.module_from_spec(spec)
spec.loader.exec_module(regret)
MASK = (1 << 64) - 1
HERE = "benches/results/2026-12-07-h200-attention-ab-third-seed/"


def sweep(seed):
    state = [seed]

    def next_bits():
        state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def log_uniform(bits, top):
        return min(max(round(math.exp((bits >> 11) / (1 << 53) * math.log(top))), 1), int(top))

    shapes = []
    while len(shapes) < 160:
        m, n, k = (log_uniform(next_bits(), 16384.0) for _ in range(3))
        batch = log_uniform(next_bits(), 4096.0)
        flags = next_bits()
        s = dict(batch=batch, m=m, n=n, k=k, trans_a=flags & 1 != 0, trans_b=flags & 2 != 0, layout="col" if flags & 4 else "row")
        while s["batch"] * s["m"] * s["n"] * s["k"] > 8589934592 or 4 * s["batch"] * (s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]) > 1073741824:
            if s["batch"] > 1:
                s["batch"] //= 2
            elif s["m"] >= s["n"] and s["m"] >= s["k"]:
                s["m"] //= 2
            elif s["n"] >= s["k"]:
                s["n"] //= 2
            else:
                s["k"] //= 2
        shapes.append(s)
    return shapes


def label(s):
    dims = f"{s['m']}x{s['n']}x{s['k']}" if s["batch"] == 1 else f"{s['batch']}x({s['m']}x{s['n']}x{s['k']})"
    if s["trans_a"] or s["trans_b"]:
        dims += ":" + ("t" if s["trans_a"] else "n") + ("t" if s["trans_b"] else "n")
    return dims + ("@col" if s["layout"] == "col" else "")


def changed(s, rule, before):
    """Whether dispatcher rules `rule` and `before` (scripts/sgemm-regret.py) choose differently."""
    m, n = regret.canonical(s)
    ops = regret.canonical_operands(s)
    return regret.RULES[rule](m, n, s["k"], s["batch"], ops) != regret.RULES[before](m, n, s["k"], s["batch"], ops)


# Importable (stop 56's make-labels.py takes sweep() and label() from here); run as a script, it
# writes the two files. Stop 52's rules are `before-medium-overhead` since stop 56 changed
# `current`.
if __name__ == "__main__":
    for seed, path in [(0x5EED0F5EED, "sgemm.jsonl"), (12648430, "sgemm-seed12648430.jsonl")]:
        recorded = [json.loads(l)["shape"] for l in open("benches/results/2026-12-06-h200-pdl-full-bench/" + path) if '"random"' in l]
        assert recorded == [label(s) for s in sweep(seed)], f"the port does not reproduce seed {seed}"
    with open(HERE + "seed3-labels.txt", "w") as f:
        f.writelines(label(s) + "\n" for s in sweep(3))
    with open(HERE + "seeds4-10-changed-labels.txt", "w") as f:
        f.writelines(f"{seed} {label(s)}\n" for seed in range(4, 11) for s in sweep(seed) if changed(s, "before-medium-overhead", "before-huge-min-k"))
