#!/usr/bin/env bash
# Attention: PDL with the forward's trigger at its start (early) or after its main loop (late),
# against no PDL (the early binary with CUKERNELS_NO_FORWARD_PDL=1). Two rounds.
S=device-stage2
shapes=(--shape "decode b16 q1 k8192 h32/8 d128 f16" --shape "decode b1 q1 k8192 h32/8 d128 f16" --shape "decode b1 q1 k16384 h32/8 d128 f16 splits 16" --shape "decode b1 q1 k20000 h32/2 d256 f16 splits 64")
for round in 1 2; do
  for side in nopdl early late; do
    B=$S/cukernels-bench; [ $side = late ] && B=$S/c/cukernels-bench
    if [ $side = nopdl ]; then export CUKERNELS_NO_FORWARD_PDL=1; else unset CUKERNELS_NO_FORWARD_PDL; fi
    timeout 60 $B attention --config sm_90 --reps 11 "${shapes[@]}" --out $OUT/$side.jsonl > /dev/null 2>&1 || echo "$side $round failed"
  done
done
python3 - <<'PY'
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('nopdl','early','late'):
    for l in open(f"{out}/{side}.jsonl"):
        r=json.loads(l); d.setdefault(r['label'],{}).setdefault(side,[]).append((r['ours_ms']*1000,(r['graph_ms'] or 0)*1000))
print(f"{'shape':60s} {'nopdl':>7s} {'early':>7s} {'late':>7s}   graph: {'nopdl':>7s} {'early':>7s} {'late':>7s}")
for k,v in d.items():
    m=lambda s,i: st.mean(x[i] for x in v.get(s,[(0,0)]))
    print(f"{k:60s} {m('nopdl',0):7.1f} {m('early',0):7.1f} {m('late',0):7.1f}   graph: {m('nopdl',1):7.1f} {m('early',1):7.1f} {m('late',1):7.1f}")
PY
