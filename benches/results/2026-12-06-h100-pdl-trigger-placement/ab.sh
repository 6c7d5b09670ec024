#!/usr/bin/env bash
# PDL A/B on the GPU machine: base = main's bench (ordinary launches), pdl = the branch's bench,
# both sm_90 builds of the same kernels otherwise. Two rounds, sides alternating.
# Usage: bash ab.sh BASE_BENCH PDL_BENCH   (logs and tables under $OUT)
BASE=$1; NEW=$2
start=$(date +%s)
att=(--shape "decode b1 q1 k8192 h32/8 d128 f16" --shape "decode b1 q1 k16384 h32/8 d128 f16" --shape "decode b1 q1 k131072" --shape "decode b16 q1 k8192" --shape "k20000 h32/2 d256" --shape "paged device, page 64" --shape "paged device, page 16" --shape "prefill b4 q4096 k4096 h32/32 d64 causal f16" --shape "prefill b4 q4096 k4096 h16/16 d128 f16" --shape "prefill b1 q512 k20000 h32/2 d256 f16")
for round in 1 2; do
  for side in base pdl; do
    B=$BASE; [ $side = pdl ] && B=$NEW
    timeout 100 $B attention --config sm_90 --reps 11 "${att[@]}" --out $OUT/att-$side.jsonl >> $OUT/att-$side.log 2>&1 || echo "attention $side $round failed"
    timeout 60 $B moe --reps 15 --shape "T1 " --shape "T8 " --shape "T128 " --out $OUT/moe-$side.jsonl >> $OUT/moe-$side.log 2>&1 || echo "moe $side $round failed"
  done
done
echo "attention and moe A/B done at $(( $(date +%s) - start )) s"
python3 - <<'PY' > $OUT/ab.txt
import json,os,statistics as st
out=os.environ['OUT']
for fam,key in (('att','ours_ms'),('moe','ours_ms')):
    d={}
    for side in ('base','pdl'):
        for l in open(f"{out}/{fam}-{side}.jsonl"):
            r=json.loads(l); d.setdefault(r['label'],{}).setdefault(side,[]).append((r[key]*1000,(r.get('graph_ms') or 0)*1000,(r.get('baseline_ms') or 0)*1000))
    print(f"\n{fam}: medians of each run, mean of the two rounds (us); ratio = base / pdl (above 1: PDL faster)")
    print(f"{'shape':75s} {'base':>8s} {'pdl':>8s} {'ratio':>6s} {'graph b':>8s} {'graph p':>8s} {'ratio':>6s} {'baseline':>8s}")
    for k,v in d.items():
        if len(v)<2: continue
        m=lambda s,i: st.mean(x[i] for x in v[s])
        a,b,ga,gb=m('base',0),m('pdl',0),m('base',1),m('pdl',1)
        print(f"{k:75s} {a:8.1f} {b:8.1f} {a/b:6.3f} {ga:8.1f} {gb:8.1f} {(ga/gb if gb else 0):6.3f} {m('base',2):8.1f}")
PY
cat $OUT/ab.txt
for side in base pdl; do
  B=$BASE; [ $side = pdl ] && B=$NEW
  timeout $(( (${AB_BUDGET:-570} - ($(date +%s) - start)) / 2 )) $B sgemm --out $OUT/sgemm-$side.jsonl > $OUT/sgemm-$side.log 2>&1 || echo "sgemm $side failed/timed out"
  echo "sgemm $side done at $(( $(date +%s) - start )) s"
done
python3 benches/sgemm_ab.py $OUT/sgemm-base.jsonl -- $OUT/sgemm-pdl.jsonl > $OUT/sgemm-ab.txt 2>&1
grep -E "geometric|percentile" $OUT/sgemm-base.log $OUT/sgemm-pdl.log
tail -12 $OUT/sgemm-ab.txt
