#!/usr/bin/env bash
# Device call 4 (staged, not run this stop: no GPU could be started): first an A/B of launch overlap in the attention decode (main's sm_90 bench,
# built once more with EXPERIMENT_NO_PDL turning the programmatic-dependent attribute off;
# same kernels), two rounds interleaved; then gpu_attention (every architecture's config) with
# this commit's tests: first the five whose code changed (UntrackedAllocations), then the rest
# in the time left (the kernels are fd2fc50's, whose whole suite passed in stop 50).
# Staging: gpu_attention from `cargo test --release -p cukernels-tests --test gpu_attention --no-run`;
# nopdl/cukernels-bench from fd2fc50 with nopdl.patch, `CUKERNELS_ARCHS=sm_90 cargo build --release
# -p cukernels-bench`.
S=device-stage-a   # gpu_attention, nopdl/cukernels-bench
echo "commit $(cat $S/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >> $OUT/summary.txt
start=$(date +%s)
att=(--shape "decode b16 q1 k131072" --shape "decode b16 q1 k32768 h32/8 d128 f16" --shape "decode b16 q1 k8192 h32/8 d128 f16" --shape "decode b1 q1 k131072 h32/8 d128 f16" --shape "prefill b4 q4096 k4096 h16/16 d128 f16" --shape "prefill b4 q4096 k4096 h16/16 d128 causal f16" --shape "prefill b4 q4096 k4096 h8/8 d256 f16")
for round in 1 2; do for side in pdl nopdl; do
  if [ $side = nopdl ]; then export EXPERIMENT_NO_PDL=1; else unset EXPERIMENT_NO_PDL; fi
  timeout 60 $S/nopdl/cukernels-bench attention --config sm_90 --reps 11 "${att[@]}" --out $OUT/att-$side.jsonl > /dev/null 2>&1 || echo "att $side $round failed"
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
changed=(bad_device_cumulative_lengths_are_reported_not_followed chained_launches_read_what_the_launch_before_wrote split_decode_can_be_captured_in_a_cuda_graph a_capture_before_the_module_is_loaded_is_an_error paged_decode_with_device_tables_replays_in_a_cuda_graph)
t=$(date +%s); timeout $(( 440 - (t - start) )) $S/gpu_attention --ignored --test-threads=1 "${changed[@]}" > $OUT/gpu_attention-changed.log 2>&1; rc=$?
echo "gpu_attention (the five changed tests): exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_attention-changed.log)" | tee -a $OUT/summary.txt
skips=(); for c in "${changed[@]}"; do skips+=(--skip "$c"); done
t=$(date +%s); timeout $(( 585 - (t - start) )) $S/gpu_attention --ignored --test-threads=1 "${skips[@]}" > $OUT/gpu_attention-rest.log 2>&1; rc=$?
echo "gpu_attention (the rest): exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_attention-rest.log)" | tee -a $OUT/summary.txt
grep -hE "^test " $OUT/gpu_attention-*.log | tee -a $OUT/summary.txt
grep -hE "panicked|FAILED|wrong of" -A3 $OUT/gpu_attention-*.log | head -20
cd $OUT && tar czf logs-attention-tests.tgz --remove-files *.log *.jsonl
