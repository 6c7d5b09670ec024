#!/usr/bin/env bash
# Stop 55: the direct path's q8_0 loads, four lanes per chunk (lane 4g + q reads words 2q, 2q + 1
# of chunk g: a warp load covers 8 consecutive blocks) against main's one lane per chunk. Two sm_90
# benches (`CUKERNELS_ARCHS=sm_90 cargo build --release -p cukernels-bench`):
# device-stage-b/main and device-stage-b/q8lanes. Interleaved, 3 rounds, on the T = 1..8 and T16/T32
# rows of q8_0 (the changed kernel) and of q4_0 (unchanged: the control). Then ncu of both on
# Qwen3 q8_0 T8. Then device-stage-b/q8lanes/gpu_moe (the patched suite with every architecture,
# `cargo test --release -p cukernels-tests --test gpu_moe --no-run`) in full, and quick under memcheck.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
shapes=(--shape "q8_0 T1 " --shape "q8_0 T8 " --shape "q8_0 T2 " --shape "q8_0 T4 " --shape "q8_0 T16 " --shape "q8_0 T32 " --shape "q4_0 T1 " --shape "q4_0 T8 ")
for round in 1 2 3; do for side in main q8lanes; do
  t=$(date +%s); timeout 120 device-stage-b/$side/cukernels-bench moe --reps 15 "${shapes[@]}" --out $OUT/moe-$side.jsonl > $OUT/moe-$side-$round.log 2>&1
  echo "moe $side round $round: exit $? in $(( $(date +%s) - t )) s" | tee -a $OUT/summary.txt
done; done
python3 - <<'PY' | tee $OUT/ab.txt
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('main','q8lanes'):
    for l in open(f"{out}/moe-{side}.jsonl"):
        r=json.loads(l); e=d.setdefault(r['label'],{}); e.setdefault(side,[]).append(r['ours_ms']*1000); e['path']=r['path']; e['tb']=r.get('ours_tbps')
print("us per call, each round's median; main | four lanes per q8_0 chunk; speedup (median of rounds)")
for k,v in d.items():
    f=lambda s: ' '.join(f'{x:7.2f}' for x in v.get(s,[]))
    m,q=st.median(v['main']),st.median(v.get('q8lanes',[float('nan')]))
    print(f"{k:56s} {v['path']:8s} {f('main')} | {f('q8lanes')}   {m/q:5.3f}")
PY
for side in main q8lanes; do
  timeout 150 ncu --clock-control none --kernel-name regex:moe_direct_q8_0 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section SourceCounters --section LaunchStats device-stage-b/$side/cukernels-bench moe --reps 1 --shape "qwen3-30b-a3b q8_0 T8 " > $OUT/ncu-$side.txt 2>&1
  echo "ncu $side: exit $?" | tee -a $OUT/summary.txt
done
T=device-stage-b/q8lanes/gpu_moe
t=$(date +%s); timeout 240 $T --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (q8lanes, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" | tee -a $OUT/summary.txt
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 $T --ignored --test-threads=1 > $OUT/memcheck-gpu_moe.log 2>&1
echo "memcheck (quick) gpu_moe (q8lanes): exit $? in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-gpu_moe.log | tail -1); $(grep -E '^test result' $OUT/memcheck-gpu_moe.log)" | tee -a $OUT/summary.txt
grep -hE "^test " $OUT/gpu_moe.log | tee -a $OUT/summary.txt
grep -hE "panicked|FAILED|wrong of" -A3 $OUT/gpu_moe.log $OUT/memcheck-gpu_moe.log | head -20 | tee -a $OUT/summary.txt
cd $OUT && tar czf logs.tgz --remove-files *.log
