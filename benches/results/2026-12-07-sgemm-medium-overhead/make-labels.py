#!/usr/bin/env python3
"""Writes changed-labels.txt: of the randomized SGEMM sweeps of seeds 11-60 (the generator of
benches/src/sgemm_bench.rs, ported in ../2026-12-07-h200-attention-ab-third-seed/make-labels.py),
the shapes whose choice differs between the dispatcher rules `current` and
`before-medium-overhead` of scripts/sgemm-regret.py (stop 56: `medium`'s own block overhead,
`large` weighed at a short k). None of these seeds was used to fit the rule. Run from the
repository root."""
import importlib.util

spec = importlib.util.spec_from_file_location("labels", "benches/results/2026-12-07-h200-attention-ab-third-seed/make-labels.py")
labels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(labels)  # the sweep port, and scripts/sgemm-regret.py as labels.regret
HERE = "benches/results/2026-12-07-sgemm-medium-overhead/"
with open(HERE + "changed-labels.txt", "w") as f:
    f.writelines(
        f"{seed} {labels.label(s)}\n"
        for seed in range(11, 61)
        for s in labels.sweep(seed)
        if labels.changed(s, "current", "before-medium-overhead")
    )
