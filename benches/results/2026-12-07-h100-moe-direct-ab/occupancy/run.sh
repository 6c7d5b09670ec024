#!/usr/bin/env bash
# Stop 54: the direct MoE kernels' launch bound (DIRECT.blocks_per_sm in kernels-gpu/src/moe_config.rs):
# main's 4 (ptxas takes 64-128 registers, sm_90: 4-8 blocks per SM) against 6 (every direct kernel
# at <= 80 registers, no spills) and 8 (<= 64, no spills). Three sm_90 benches
# (`CUKERNELS_ARCHS=sm_90 cargo build --release -p cukernels-bench`): device-stage-a/nopdl = main,
# device-stage-d/b6 and b8 = main with DIRECT's blocks_per_sm 6 or 8 (and the tile check's
# register estimate skipped for the direct tile, which it would refuse at 6 and 8). Interleaved,
# 2 rounds, on the T = 1/2/4/8 rows (the "T1" filter also takes T16 and T128).
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
shapes=(--shape T1 --shape T8 --shape "T2 " --shape "T4 ")
for round in 1 2; do for side in b4 b6 b8; do
  bin=device-stage-a/nopdl/cukernels-bench; [ $side != b4 ] && bin=device-stage-d/$side/cukernels-bench
  t=$(date +%s); timeout 90 $bin moe --reps 15 "${shapes[@]}" --out $OUT/moe-$side.jsonl > $OUT/moe-$side-$round.log 2>&1
  echo "moe $side round $round: exit $? in $(( $(date +%s) - t )) s" | tee -a $OUT/summary.txt
done; done
python3 - <<'PY' | tee $OUT/ab.txt
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('b4','b6','b8'):
    for l in open(f"{out}/moe-{side}.jsonl"):
        r=json.loads(l); d.setdefault(r['label'],{}).setdefault(side,[]).append(r['ours_ms']*1000)
        if r['path']!='direct': d[r['label']]['other']=r['path']
print("us per call, each round's median; launch bound 4 (main) | 6 | 8 blocks per SM; speedup of 6 and 8 over 4 (medians of rounds)")
for k,v in d.items():
    if 'other' in v: continue
    m=st.median(v['b4']); f=lambda s: ' '.join(f'{x:7.2f}' for x in v.get(s,[]))
    print(f"{k:52s} {f('b4')} | {f('b6')} | {f('b8')}   {m/st.median(v['b6']):5.3f} {m/st.median(v['b8']):5.3f}")
PY
cd $OUT && tar czf logs.tgz --remove-files *.log
