#!/usr/bin/env python3
"""Dispatch regret of the randomized SGEMM sweep, and offline what-ifs of the dispatcher's rule.

Reads `cukernels-bench` JSON lines (every candidate kernel timed, `variant_ms`) and, for the
"random" rows, reports the fraction whose chosen kernel is within 10% of the fastest candidate
(regret = chosen ms / best ms - 1), the geomean of chosen/best, and the misses with the
features that matter to the rule (canonical m × n, k, batch, tile use, blocks and waves of
the 64 × 64 tiles, outputs, bytes per output).

The dispatcher (`choose_kernel`, host/src/sgemm.rs) is ported below for the sm_90 row and the
H200's 132 SMs, with the handle's own workspace, so that a rule can be tried against the
recorded timings without a GPU. `--rule current` is the rule in the code now, `--rule
before-k-depth` the one before the `tiny` rule counted the k-step's padding (2026-12-04); a
new rule to try goes beside them. The port is checked against the recorded choice on every
row, with the rule the file was recorded with (`--recorded-with`, default current; da89e30's
runs were recorded before-k-depth, 39569bb's before-turned, stop 46's sweep of the turned
tiles before-turned-tiny-use, stops 47-51's before-huge-min-k, stops 52-55's
before-medium-overhead). Usage:

    python3 scripts/sgemm-regret.py [--rule recorded|current|before-medium-overhead|before-gemv-column-use|before-huge-min-k|before-turned-tiny-use|before-turned|before-k-depth] [--recorded-with RULE] [--all-groups] FILE...

Stdlib only. The port must follow the Rust code: change both together.
"""
import argparse
import json
import math

SMS = 132
GEMV_DISPATCH_MAX = 4
GEMV_MIN_K = 128
GEMV_TINY_OUTPUTS = 16_384
GEMV_COLUMNS = 32
GEMV_MIN_COLUMN_USE = 0.55
TINY_SHORT_K = 16
TINY_SHORT_K_MAX_TILE_USE = 0.8
TINY_MAX_TILE_USE = 0.25
BLOCK_OVERHEAD_K_STEPS = 3.6
MEDIUM_BLOCK_OVERHEAD_K_STEPS = 4.2
SPLIT_OVERHEAD_K_STEPS = 2.1
SPLIT_OVERHEAD_PER_BLOCK_K_STEPS = 0.86
WORKSPACE_SPLIT_OVERHEAD_K_STEPS = 4.0
WORKSPACE_SPLIT_READ_K_STEPS = 4.0
K_SPLIT_CANDIDATES = [2, 3, 5, 7]
WORKSPACE_MIN_K_STEPS_PER_SPLIT = 8
MAX_WORKSPACE_K_SPLITS = 1024
WORKSPACE_BYTES_PER_COUNTER = 2048
WORKSPACE_ALIGN = 256

# The sm_90 row: (bm, bn, bk, tm, tn, blocks_per_sm); every tile up to 64 × 64 splits k
# (over a cluster too: sm_90 has clusters and their partial tiles fit).
TILES = {
    "huge": (128, 256, 16, 8, 16, 1),
    "large": (128, 128, 16, 8, 8, 2),
    "medium": (64, 64, 16, 8, 8, 6),
    "small": (64, 64, 16, 8, 8, 8),
    "skinny": (16, 64, 32, 4, 4, 3),
}
TILED = ["huge", "large", "medium", "small", "skinny"]
TURNABLE = ["skinny"]
SPEED = {"huge": (1.08, 1.5), "large": (0.95, 1.9), "medium": (0.96, 2.1), "small": (0.9, 1.9), "skinny": (0.86, 3.5)}
SHORT_K_TILES = ["small", "medium", "large"]
HUGE_MIN_K = 128
# The cost model before stop 56 (every rule before `current`): `medium` with the common block
# overhead, `large` not weighed at a short k.
OLD = dict(medium_overhead=BLOCK_OVERHEAD_K_STEPS, short_k_tiles=["small", "medium"])


def cdiv(a, b):
    return -(-a // b)


def tile_count(v, m, n):
    bm, bn = TILES[v][:2]
    return cdiv(m, bm) * cdiv(n, bn)


def splits_k(v):
    return TILES[v][0] * TILES[v][1] <= 64 * 64


def layout_of(nbytes):
    counters = nbytes // WORKSPACE_BYTES_PER_COUNTER
    off = min(cdiv(counters * 4, WORKSPACE_ALIGN) * WORKSPACE_ALIGN, nbytes)
    return counters, nbytes - off


def fits(ws, slots, partial):
    counters, pb = layout_of(ws)
    return slots <= counters and partial <= pb


def bytes_for(slots, partial):
    need = partial
    floor = need // (WORKSPACE_BYTES_PER_COUNTER // 4) // WORKSPACE_ALIGN * WORKSPACE_ALIGN
    b = need + floor
    while not fits(b, slots, partial):
        b += WORKSPACE_ALIGN
    return b


def default_workspace():
    slots = partial = 0
    for v in TILED:
        if splits_k(v):
            bm, bn, _, _, _, bps = TILES[v]
            wave = SMS * bps
            slots, partial = max(slots, wave // 2), max(partial, wave * bm * bn * 4)
    return bytes_for(slots, partial)


WORKSPACE = default_workspace()


def tile_uses(m, n, k, turned):
    """Each small tile's use of an m × n (× k) problem: `small`, `skinny` and, with `turned`
    and n < m, `skinny` turned around (on n × m)."""
    shapes = [("small", m, n), ("skinny", m, n)] + ([("skinny", n, m)] if turned and n < m else [])
    for v, rows, cols in shapes:
        bm, bn, bk = TILES[v][:3]
        depth = k / (cdiv(k, bk) * bk) if k is not None and k > 0 else 1.0
        yield rows * cols / (tile_count(v, rows, cols) * bm * bn) * depth


def best_tile_use(m, n, turned=True):
    return max(tile_uses(m, n, None, turned))


def candidates(m, n, k, batch, turned=True):
    out = tile_candidates(TILED, m, n, k, batch)
    if turned and n < m:
        out += [(v, s, r + "t") for v, s, r in tile_candidates(TURNABLE, n, m, k, batch)]
    return out


def tile_candidates(variants, m, n, k, batch):
    out = []
    for v in variants:
        out.append((v, 1, "c"))
        if not splits_k(v):
            continue
        bm, bn, bk, _, _, bps = TILES[v]
        tiles = tile_count(v, m, n) * max(batch, 1)
        resident = SMS * bps
        k_steps = cdiv(k, bk)
        for s in K_SPLIT_CANDIDATES:
            if tiles * s <= resident and k_steps >= 2 * s:
                out.append((v, s, "k"))
        fill = min(resident // max(tiles, 1), k_steps // WORKSPACE_MIN_K_STEPS_PER_SPLIT, MAX_WORKSPACE_K_SPLITS)
        for s in sorted(set(s for s in K_SPLIT_CANDIDATES + [fill // 2, fill] if 2 <= s <= fill)):
            slots = tile_count(v, m, n) * max(batch, 1)
            if fits(WORKSPACE, slots, slots * s * bm * bn * 4):
                out.append((v, s, "w"))
    return out


def name(c):
    """A candidate `(variant, splits, reduction)` as `SgemmChoice` displays it; a reduction
    ending in `t` marks a turned candidate (`skinny/t`, `skinny/t/w6`)."""
    v, s, r = c
    v = v + "/t" if r.endswith("t") else v
    return v if s == 1 else f"{v}/{r[0]}{s}"


def model_cost(c, m, n, k, batch, medium_overhead=MEDIUM_BLOCK_OVERHEAD_K_STEPS):
    v, s, r = c
    if r.endswith("t"):
        m, n, r = n, m, r[0]
    bm, bn, bk, tm, tn, bps = TILES[v]
    blocks = tile_count(v, m, n) * max(batch, 1) * s
    resident = max(min(bps, math.ceil(blocks / SMS)), 1)
    waves = math.ceil(blocks / (SMS * resident))
    k_steps = math.ceil(cdiv(k, bk) / s)
    overhead = medium_overhead if v == "medium" else BLOCK_OVERHEAD_K_STEPS
    if s > 1:
        overhead += SPLIT_OVERHEAD_K_STEPS + SPLIT_OVERHEAD_PER_BLOCK_K_STEPS * s if r == "k" else WORKSPACE_SPLIT_OVERHEAD_K_STEPS + WORKSPACE_SPLIT_READ_K_STEPS / bk * s
    work = resident * bm * bn * bk * (k_steps + overhead)
    peak, half = SPEED[v]
    warps = resident * (bm // tm) * (bn // tn) / 32
    return waves * work / (peak * warps / (warps + half))


def cost_model_choice(m, n, k, batch, turned=True, huge_min_k=HUGE_MIN_K, medium_overhead=MEDIUM_BLOCK_OVERHEAD_K_STEPS, short_k_tiles=SHORT_K_TILES):
    best = (math.inf, None)
    for c in candidates(m, n, k, batch, turned):
        if k <= TINY_SHORT_K and c[0] not in short_k_tiles:
            continue
        if c[0] == "huge" and k < huge_min_k:
            continue
        cost = model_cost(c, m, n, k, batch, medium_overhead)
        if cost < best[0]:
            best = (cost, c)
    return name(best[1])


def choose_before_k_depth(m, n, k, batch):
    """The rule before 2026-12-04: the `tiny` rule's tile use on rows and columns only."""
    small = max(batch, 1) * m * n <= GEMV_TINY_OUTPUTS
    if min(m, n) <= GEMV_DISPATCH_MAX and (k >= GEMV_MIN_K or small):
        return "gemv"
    use = best_tile_use(m, n, turned=False)
    if min(m, n) >= 1 and (use <= TINY_MAX_TILE_USE or (k <= TINY_SHORT_K and use <= TINY_SHORT_K_MAX_TILE_USE)):
        return "tiny"
    return cost_model_choice(m, n, k, batch, turned=False, huge_min_k=0, **OLD)


def best_tile_use_in_k(m, n, k, turned=True):
    return max(tile_uses(m, n, k, turned))


def gemv_column_use(m, n, ops):
    """The fraction of its columns that `gemv` uses: its column body (the streamed operand not
    k-contiguous) runs `GEMV_COLUMNS` of them per block; the dot body is counted as full."""
    left_kc, right_kc = ops
    if (left_kc if n < m else right_kc):
        return 1.0
    cols = max(m, n)
    return cols / (cdiv(cols, GEMV_COLUMNS) * GEMV_COLUMNS)


def choose(m, n, k, batch, ops, turned_candidates, turned_use, huge_min_k=HUGE_MIN_K, gemv_min_use=GEMV_MIN_COLUMN_USE, tiny_yields_to_splits=True, medium_overhead=MEDIUM_BLOCK_OVERHEAD_K_STEPS, short_k_tiles=SHORT_K_TILES):
    """`choose_kernel`: `gemv`'s rule, then `tiny`'s (tile use counted in k too, the padding
    of the tiles' last k-step), then the cost model. `ops`: (left, right) k-contiguous, of the
    canonical problem; `turned_candidates`: the cost model weighs `skinny` turned around where
    n < m; `turned_use`: the `tiny` rule counts its use; `huge_min_k`: the shortest k at which
    it weighs `huge` (0: always); `gemv_min_use`: the least column use for `gemv` (0: any);
    `tiny_yields_to_splits`: `tiny`'s rule gives way where the cost model splits k;
    `medium_overhead`: `medium`'s fixed cost per block; `short_k_tiles`: the tiles weighed at
    k <= TINY_SHORT_K."""
    small = max(batch, 1) * m * n <= GEMV_TINY_OUTPUTS
    if min(m, n) <= GEMV_DISPATCH_MAX and (k >= GEMV_MIN_K or small) and gemv_column_use(m, n, ops) >= gemv_min_use:
        return "gemv"
    model = cost_model_choice(m, n, k, batch, turned_candidates, huge_min_k, medium_overhead, short_k_tiles)
    padded = best_tile_use_in_k(m, n, k, turned_use) <= TINY_MAX_TILE_USE
    if min(m, n) >= 1 and (padded or (k <= TINY_SHORT_K and best_tile_use(m, n, turned_use) <= TINY_SHORT_K_MAX_TILE_USE)):
        splits = "/k" in model or "/w" in model
        return model if tiny_yields_to_splits and splits else "tiny"
    return model


RULES = {
    "current": lambda m, n, k, b, ops: choose(m, n, k, b, ops, True, True),
    "before-medium-overhead": lambda m, n, k, b, ops: choose(m, n, k, b, ops, True, True, **OLD),
    "before-tiny-yields": lambda m, n, k, b, ops: choose(m, n, k, b, ops, True, True, tiny_yields_to_splits=False, **OLD),
    "before-gemv-column-use": lambda m, n, k, b, ops: choose(m, n, k, b, ops, True, True, gemv_min_use=0, tiny_yields_to_splits=False, **OLD),
    "before-huge-min-k": lambda m, n, k, b, ops: choose(m, n, k, b, ops, True, True, 0, 0, False, **OLD),
    "before-turned-tiny-use": lambda m, n, k, b, ops: choose(m, n, k, b, ops, True, False, 0, 0, False, **OLD),
    "before-turned": lambda m, n, k, b, ops: choose(m, n, k, b, ops, False, False, 0, 0, False, **OLD),
    "before-k-depth": lambda m, n, k, b, ops: choose_before_k_depth(m, n, k, b),
}


def canonical(r):
    return (r["n"], r["m"]) if r["layout"] == "col" else (r["m"], r["n"])


def canonical_operands(r):
    """Whether the canonical problem's left (m × k) and right (k × n) operands are
    k-contiguous (`Sgemm::canonical_operands`)."""
    ta, tb = r["trans_a"], r["trans_b"]
    return ((not ta, tb) if r["layout"] != "col" else (not tb, ta))


def features(r):
    m, n = canonical(r)
    k, b = r["k"], r["batch"]
    blocks64 = tile_count("medium", m, n) * b
    return {
        "use": best_tile_use(m, n),
        "blocks64": blocks64,
        "waves64": blocks64 / (SMS * 8),
        "outputs": b * m * n,
        "k_steps": cdiv(k, 16),
    }


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def label(r):
    m, n = canonical(r)
    return f"{r['batch']} x ({m} x {n} x {r['k']})"


def chosen_ms(r, choice):
    ms = r["variant_ms"]
    if choice == r["variant"]:
        return r["ours_ms"]
    if choice not in ms:
        raise SystemExit(f"{label(r)}: {choice} was not timed ({sorted(ms)})")
    return ms[choice]


def report(path, rule, recorded_with, all_groups, show_misses):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in rows if r.get("op", "sgemm") == "sgemm" and (all_groups or r["group"] == "random")]
    mismatches = 0
    ratios, misses, changed = [], [], []
    for r in rows:
        m, n = canonical(r)
        ops = canonical_operands(r)
        cur = RULES[recorded_with](m, n, r["k"], r["batch"], ops)
        if cur != r["variant"]:
            mismatches += 1
            print(f"  port mismatch: {label(r)} recorded {r['variant']}, port {cur}")
        choice = r["variant"] if rule == "recorded" else RULES[rule](m, n, r["k"], r["batch"], ops)
        best = min(r["variant_ms"].values())
        t = chosen_ms(r, choice)
        ratios.append(t / best)
        if choice != r["variant"]:
            changed.append((r, choice, chosen_ms(r, r["variant"]) / t))
        if t / best - 1 > 0.10:
            misses.append((r, choice, t / best - 1))
    near = sum(1 for x in ratios if x - 1 <= 0.10) / len(ratios)
    print(f"{path}: rule {rule}: {len(rows)} shapes; regret <= 10% on {100 * near:.1f}%; "
          f"geomean chosen/best {geomean(ratios):.4f}; port mismatches {mismatches}")
    if show_misses:
        print(f"  {'shape':34} {'lay':>3} {'chosen':>10} {'best':>10} {'regret':>7} {'use':>5} {'blk64':>7} {'waves':>6} {'outputs':>10}")
        for r, choice, reg in sorted(misses, key=lambda x: -x[2]):
            f = features(r)
            best = min(r["variant_ms"], key=r["variant_ms"].get)
            lay = ("t" if r["trans_a"] else "n") + ("t" if r["trans_b"] else "n") + r["layout"][0]
            print(f"  {label(r):34} {lay:>3} {choice:>10} {best:>10} {100 * reg:6.1f}% {f['use']:5.2f} {f['blocks64']:7d} {f['waves64']:6.2f} {f['outputs']:10d}")
    if changed:
        print(f"  {len(changed)} choices changed; geomean speedup over them {geomean([c[2] for c in changed]):.3f}")
        for r, choice, sp in changed:
            print(f"    {label(r):34} {r['variant']:>10} -> {choice:10} {sp:.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rule", choices=["recorded", *RULES], default="recorded")
    ap.add_argument("--recorded-with", choices=list(RULES), default="current", help="the rule the files were recorded with (checks the port)")
    ap.add_argument("--all-groups", action="store_true", help="every group, not only 'random'")
    ap.add_argument("--quiet", action="store_true", help="no list of misses")
    a = ap.parse_args()
    for f in a.files:
        report(f, a.rule, a.recorded_with, a.all_groups, not a.quiet)


if __name__ == "__main__":
    main()
