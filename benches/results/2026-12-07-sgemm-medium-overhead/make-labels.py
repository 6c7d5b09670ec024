#!/usr/bin/env python3
"""Writes changed-labels.txt: of the randomized SGEMM sweeps of seeds 11-60 (the generator of
benches/src/sgemm_bench.rs, ported in ../2026-12-07-h200-attention-ab-third-seed/make-labels.py),
the shapes whose choice differs between the dispatcher rules `current` and
`before-medium-overhead` of scripts/sgemm-regret.py (stop 56: `medium`'s own block overhead,
`large` weighed at a short k). None of these seeds was used to fit the rule. Run from the
repository root."""
import importlib.util
import sys

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

regret = load("regret", "scripts/sgemm-regret.py")
sys.argv = ["x"]
src = open("benches/results/2026-12-07-h200-attention-ab-third-seed/make-labels.py").read()
ns = {"__name__": "labels"}
exec(src.split("\ndef changed(s):")[0], ns)  # sweep() and label() only
HERE = "benches/results/2026-12-07-sgemm-medium-overhead/"
with open(HERE + "changed-labels.txt", "w") as f:
    for seed in range(11, 61):
        for s in ns["sweep"](seed):
            m, n = regret.canonical(s)
            ops = regret.canonical_operands(s)
            if regret.RULES["current"](m, n, s["k"], s["batch"], ops) != regret.RULES["before-medium-overhead"](m, n, s["k"], s["batch"], ops):
                f.write(f"{seed} {ns['label'](s)}\n")
