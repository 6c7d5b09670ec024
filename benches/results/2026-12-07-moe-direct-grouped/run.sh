#!/usr/bin/env bash
# Stop 55: the direct path with each expert's slots grouped (prototype, grouped.patch): the block
# of every 4th slot routed to an expert (in slot order, found by the block's own ballot scan of the
# ids) computes up to 4 of its slots, so an expert's weights are read once per 4 slots instead of
# once per slot; the other blocks return. Two sm_90 benches (`CUKERNELS_ARCHS=sm_90 cargo build
# --release -p cukernels-bench`): device-stage-b/main and device-stage-b/grouped. Interleaved,
# 2 rounds, on the rows the direct path takes or is forced on (T = 1..256), q4_0 and q8_0. Then
# device-stage-b/grouped/gpu_moe (the patched suite, every architecture: `cargo test --release -p
# cukernels-tests --test gpu_moe --no-run`), quick, then in full.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
shapes=(--shape "q4_0 T1 " --shape "q4_0 T8 " --shape "q8_0 T1 " --shape "q8_0 T8 " --shape "direct forced" --shape "q4_0 T32 ")
for round in 1 2; do for side in main grouped; do
  t=$(date +%s); timeout 120 device-stage-b/$side/cukernels-bench moe --reps 15 "${shapes[@]}" --out $OUT/moe-$side.jsonl > $OUT/moe-$side-$round.log 2>&1
  echo "moe $side round $round: exit $? in $(( $(date +%s) - t )) s" | tee -a $OUT/summary.txt
done; done
python3 - <<'PY' | tee $OUT/ab.txt
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('main','grouped'):
    for l in open(f"{out}/moe-{side}.jsonl"):
        r=json.loads(l); e=d.setdefault(r['label'],{}); e.setdefault(side,[]).append(r['ours_ms']*1000); e['path']=r['path']
print("us per call, each round's median; main | grouped; speedup (median of rounds)")
for k,v in d.items():
    f=lambda s: ' '.join(f'{x:8.2f}' for x in v.get(s,[]))
    m=st.median(v['main']); g=st.median(v['grouped'])
    print(f"{k:58s} {v['path']:8s} {f('main')} | {f('grouped')}   {m/g:5.3f}")
PY
T=device-stage-b/grouped/gpu_moe
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 150 $T --ignored --test-threads=1 > $OUT/gpu_moe-quick.log 2>&1
echo "gpu_moe quick (grouped, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe-quick.log)" | tee -a $OUT/summary.txt
t=$(date +%s); timeout 150 $T --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (grouped, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" | tee -a $OUT/summary.txt
grep -hE "^test |panicked|FAILED|wrong of" -A3 $OUT/gpu_moe-quick.log $OUT/gpu_moe.log | head -30 | tee -a $OUT/summary.txt
cd $OUT && tar czf logs.tgz --remove-files *.log
