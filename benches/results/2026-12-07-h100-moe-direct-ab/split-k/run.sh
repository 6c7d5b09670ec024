#!/usr/bin/env bash
# Stop 54, device call: the MoE direct path's K split over warps (../2026-12-07-moe-direct-split-k-wip.patch).
# Staging (CPU machine): device-stage-a/nopdl/cukernels-bench = main's sm_90 bench (+ the unset
# EXPERIMENT_NO_PDL switch); device-stage-b/cukernels-bench = main + the patch, sm_90; both
# `CUKERNELS_ARCHS=sm_90 cargo build --release -p cukernels-bench`; device-stage-b/gpu_moe = the
# patched gpu_moe with every architecture (`cargo test --release -p cukernels-tests --test gpu_moe --no-run`).
# In order: the A/B (main, patched, interleaved, 3 rounds) on the T = 1/2/4/8 rows; the patched
# gpu_moe under memcheck (quick), then the patched gpu_moe in full (every config); then racecheck
# (quick) on two tests that reach the split, in the time left.
A=device-stage-a/nopdl/cukernels-bench
B=device-stage-b/cukernels-bench
T=device-stage-b/gpu_moe
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
start=$(date +%s)
shapes=(--shape T1 --shape T8 --shape "T2 " --shape "T4 ")
for round in 1 2 3; do for side in main ksplit; do
  bin=$A; [ $side = ksplit ] && bin=$B
  t=$(date +%s); timeout 90 $bin moe --reps 15 "${shapes[@]}" --out $OUT/moe-$side.jsonl > $OUT/moe-$side-$round.log 2>&1
  echo "moe $side round $round: exit $? in $(( $(date +%s) - t )) s" | tee -a $OUT/summary.txt
done; done
python3 - <<'PY' | tee $OUT/ab.txt
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('main','ksplit'):
    for l in open(f"{out}/moe-{side}.jsonl"):
        r=json.loads(l); e=d.setdefault(r['label'],{}).setdefault(side,[]); e.append(r['ours_ms']*1000)
        d[r['label']]['base']=r.get('baseline_ms')
print("us per call, the three rounds' medians; main | K split; ratio of the medians of rounds (main/ksplit)")
for k,v in d.items():
    m=v.get('main',[]); s=v.get('ksplit',[])
    r=st.median(m)/st.median(s) if m and s else float('nan')
    print(f"{k:48s} main {' '.join(f'{x:7.2f}' for x in m)} | split {' '.join(f'{x:7.2f}' for x in s)}  {r:5.3f}  base {(v['base'] or 0)*1000:7.2f}")
PY
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 $T --ignored --test-threads=1 > $OUT/memcheck-gpu_moe.log 2>&1
echo "memcheck (quick) gpu_moe (K split): exit $? in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-gpu_moe.log | tail -1); $(grep -E '^test result' $OUT/memcheck-gpu_moe.log)" | tee -a $OUT/summary.txt
t=$(date +%s); timeout 260 $T --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (K split, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" | tee -a $OUT/summary.txt
for tc in long_k_on_every_path expert_ranges_leave_other_slots_untouched; do
  t=$(date +%s); left=$(( 450 - (t - start) )); [ $left -lt 20 ] && break
  CUKERNELS_TEST_QUICK=1 timeout $(( left < 100 ? left : 100 )) compute-sanitizer --tool racecheck --error-exitcode 99 $T --ignored --test-threads=1 --exact $tc > $OUT/racecheck-$tc.log 2>&1
  echo "racecheck (quick) $tc: exit $? in $(( $(date +%s) - t )) s: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck-$tc.log | tail -1)" | tee -a $OUT/summary.txt
done
grep -hE "^test " $OUT/gpu_moe.log | tee -a $OUT/summary.txt
grep -hE "panicked|FAILED|wrong of" -A3 $OUT/gpu_moe.log $OUT/memcheck-gpu_moe.log | head -20
cd $OUT && tar czf logs.tgz --remove-files *.log
