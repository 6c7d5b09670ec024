#!/usr/bin/env bash
# Stop 55, second call: the direct path's q8_0 loads, four lanes per chunk (lane 4g + q reads words
# 2q, 2q + 1 of chunk g: a warp load covers 8 consecutive blocks), with the loads of 2 (u2) or 4
# (u4) warp steps issued before their arithmetic, against main's one lane per chunk. The first call
# (one-step/: one warp step at a time) was correct but 0.85-0.92x at T = 8. Three sm_90 benches
# (`CUKERNELS_ARCHS=sm_90 cargo build --release -p cukernels-bench`): device-stage-b/main, u2, u4.
# Interleaved, 2 rounds, on the q8_0 T1/T8/T32 rows and Qwen3 q4_0 T8 (unchanged: the control).
# Then, where u4 is faster than main on Qwen3 q8_0 T8,
# device-stage-b/u4/gpu_moe (u4's suite with every architecture,
# `cargo test --release -p cukernels-tests --test gpu_moe --no-run`) quick under memcheck and in full; then ncu of u4 on Qwen3 q8_0 T8.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
shapes=(--shape "q8_0 T1 " --shape "q8_0 T8 " --shape "q8_0 T32 " --shape "qwen3-30b-a3b q4_0 T8 ")
for round in 1 2; do for side in main u2 u4; do
  t=$(date +%s); timeout 120 device-stage-b/$side/cukernels-bench moe --reps 15 "${shapes[@]}" --out $OUT/moe-$side.jsonl > $OUT/moe-$side-$round.log 2>&1
  echo "moe $side round $round: exit $? in $(( $(date +%s) - t )) s" | tee -a $OUT/summary.txt
done; done
python3 - <<'PY' | tee $OUT/ab.txt
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('main','u2','u4'):
    for l in open(f"{out}/moe-{side}.jsonl"):
        r=json.loads(l); e=d.setdefault(r['label'],{}); e.setdefault(side,[]).append(r['ours_ms']*1000); e['path']=r['path']; e['tb']=r.get('ours_tbps')
print("us per call, each round's median; main | four lanes per q8_0 chunk, loads of 2 | 4 warp steps together; speedup of each (median of rounds)")
for k,v in d.items():
    f=lambda s: ' '.join(f'{x:7.2f}' for x in v.get(s,[]))
    m=st.median(v['main']); r=lambda s: m/st.median(v[s]) if s in v else float('nan')
    print(f"{k:56s} {v['path']:8s} {f('main')} | {f('u2')} | {f('u4')}   {r('u2'):5.3f} {r('u4'):5.3f}")
PY
if python3 -c "
import json,statistics as st,sys
d={s:st.median(json.loads(l)['ours_ms'] for l in open('$OUT/moe-'+s+'.jsonl') if json.loads(l)['label'].startswith('qwen3-30b-a3b q8_0 T8 ')) for s in ('main','u4')}
sys.exit(0 if d['u4']<d['main'] else 1)"; then
T=device-stage-b/u4/gpu_moe
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 $T --ignored --test-threads=1 > $OUT/memcheck-gpu_moe.log 2>&1
echo "memcheck (quick) gpu_moe (u4): exit $? in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-gpu_moe.log | tail -1); $(grep -E '^test result' $OUT/memcheck-gpu_moe.log)" | tee -a $OUT/summary.txt
t=$(date +%s); timeout 200 $T --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (u4, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" | tee -a $OUT/summary.txt
grep -hE "panicked|FAILED|wrong of" -A3 $OUT/gpu_moe.log $OUT/memcheck-gpu_moe.log | head -20 | tee -a $OUT/summary.txt
else echo "u4 not faster on Qwen3 q8_0 T8: its suite not run" | tee -a $OUT/summary.txt; fi
for side in u4; do
  timeout 150 ncu --clock-control none --kernel-name regex:moe_direct_q8_0 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section SourceCounters --section LaunchStats device-stage-b/$side/cukernels-bench moe --reps 1 --shape "qwen3-30b-a3b q8_0 T8 " > $OUT/ncu-$side.txt 2>&1
  echo "ncu $side: exit $?" | tee -a $OUT/summary.txt
done
cd $OUT && tar czf logs.tgz --remove-files *.log
