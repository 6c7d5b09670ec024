#!/usr/bin/env bash
# Stop 53, the first device call (stop 52's staged call, which got no GPU, with full timeouts,
# plus the whole gpu_sgemm of main). In order:
# 1. gpu_attention's five tests whose code changed in stop 51 (UntrackedAllocations; every
#    architecture's config);
# 2. with main's bench (every candidate timed): the randomized SGEMM sweep of a third seed (3,
#    all 160 shapes: seed3-labels.txt), and of seeds 4-10 the 95 shapes where stop 52's
#    dispatcher rules (HUGE_MIN_K, GEMV_MIN_COLUMN_USE, tiny yielding to a k split) change the
#    choice (seeds4-10-changed-labels.txt), so that the rules, fitted to the two seeds of
#    2026-12-06, can be replayed out of sample (`scripts/sgemm-regret.py --rule
#    before-huge-min-k --recorded-with current`). The shapes come from the sweep's generator
#    ported to Python (checked against both recorded seeds); no timing of them was known;
# 3. an A/B of launch overlap on the two attention rows that ran slower on 12-06 (main's sm_90
#    bench built once more with EXPERIMENT_NO_PDL turning the programmatic-dependent attribute
#    off; same kernels), two rounds;
# 4. gpu_sgemm (main's host code: the dispatcher of stop 52) in the time left.
# Staging (stop 53): gpu_attention and gpu_sgemm from `scripts/stage-device.sh` at main, in
# device-stage-c; device-stage-a/nopdl/cukernels-bench from main with
# ../2026-12-06-h200-pdl-full-bench/nopdl.patch, `CUKERNELS_ARCHS=sm_90 cargo build --release
# -p cukernels-bench` (without EXPERIMENT_NO_PDL it is main's bench: it runs the sweeps too).
S=device-stage-c   # main: gpu_attention, gpu_sgemm
B=device-stage-a/nopdl   # main's sm_90 bench (+ EXPERIMENT_NO_PDL)
echo "commit $(cat $S/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >> $OUT/summary.txt
start=$(date +%s)
changed=(bad_device_cumulative_lengths_are_reported_not_followed chained_launches_read_what_the_launch_before_wrote split_decode_can_be_captured_in_a_cuda_graph a_capture_before_the_module_is_loaded_is_an_error paged_decode_with_device_tables_replays_in_a_cuda_graph)
t=$(date +%s); timeout 90 $S/gpu_attention --ignored --test-threads=1 "${changed[@]}" > $OUT/gpu_attention-changed.log 2>&1; rc=$?
echo "gpu_attention (the five changed tests): exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_attention-changed.log)" | tee -a $OUT/summary.txt
D=benches/results/2026-12-07-h200-attention-ab-third-seed
for seed in ${SEEDS:-3 4 5 6 7 8 9 10}; do
  shapes=()
  if [ $seed = 3 ]; then while read -r l; do shapes+=(--shape "$l"); done < $D/seed3-labels.txt
  else while read -r s l; do [ "$s" = $seed ] && shapes+=(--shape "$l"); done < $D/seeds4-10-changed-labels.txt; fi
  t=$(date +%s); CUKERNELS_SWEEP_SEED=$seed timeout $(( seed == 3 ? 150 : 20 )) $B/cukernels-bench sgemm --reps 15 "${shapes[@]}" --out $OUT/sgemm-seed$seed.jsonl > $OUT/sgemm-seed$seed.log 2>&1
  echo "sgemm seed $seed ($(( ${#shapes[@]} / 2 )) shapes): exit $? in $(( $(date +%s) - t )) s: $(grep -E 'random:' $OUT/sgemm-seed$seed.log)" | tee -a $OUT/summary.txt
done
# PART=sweeps stops here (steps 1 and 2 only: a short device budget; SEEDS="4 5" picks seeds).
if [ "${PART:-all}" = all ]; then
att=(--shape "decode b16 q1 k131072" --shape "decode b16 q1 k32768 h32/8 d128 f16" --shape "decode b16 q1 k8192 h32/8 d128 f16" --shape "decode b1 q1 k131072 h32/8 d128 f16" --shape "prefill b4 q4096 k4096 h16/16 d128 f16" --shape "prefill b4 q4096 k4096 h16/16 d128 causal f16" --shape "prefill b4 q4096 k4096 h8/8 d256 f16")
for round in 1 2; do for side in pdl nopdl; do
  if [ $side = nopdl ]; then export EXPERIMENT_NO_PDL=1; else unset EXPERIMENT_NO_PDL; fi
  timeout 45 $B/cukernels-bench attention --config sm_90 --reps 11 "${att[@]}" --out $OUT/att-$side.jsonl > /dev/null 2>&1 || echo "att $side $round failed"
done; done
unset EXPERIMENT_NO_PDL
python3 - <<'PY' | tee $OUT/pdl-ab.txt
import json,os,statistics as st
out=os.environ['OUT']; d={}
for side in ('pdl','nopdl'):
    for l in open(f"{out}/att-{side}.jsonl"):
        r=json.loads(l); e=d.setdefault(r['label'],{}).setdefault(side,[[],[]]); e[0].append(r['ours_ms']*1000); e[1].append((r['graph_ms'] or 0)*1000)
print("us per call, each round's median (back to back | graph); PDL on / off")
for k,v in d.items():
    f=lambda s,i: ' '.join(f"{x:8.1f}" for x in v.get(s,[[],[]])[i])
    print(f"{k:52s} on {f('pdl',0)} | {f('pdl',1)}   off {f('nopdl',0)} | {f('nopdl',1)}")
PY
echo "A/B done at $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
t=$(date +%s); timeout $(( 570 - (t - start) )) $S/gpu_sgemm --ignored --test-threads=1 > $OUT/gpu_sgemm.log 2>&1; rc=$?
echo "gpu_sgemm: exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_sgemm.log)" | tee -a $OUT/summary.txt
grep -hE "panicked|FAILED|wrong of" -A3 $OUT/gpu_sgemm.log | head -20
fi
grep -hE "^test " $OUT/gpu_attention-*.log | tee -a $OUT/summary.txt
grep -hE "panicked|FAILED|wrong of" -A3 $OUT/gpu_attention-*.log | head -20
cd $OUT && tar czf logs.tgz --remove-files *.log $(ls att-*.jsonl 2>/dev/null)
