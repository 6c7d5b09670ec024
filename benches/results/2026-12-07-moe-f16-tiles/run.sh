#!/usr/bin/env bash
# Stop 57: the MoE tiled and tall tiles on the f16 tensor cores (prototype, branch moe-f16): each
# step's weights decoded to f16 in shared memory, the activations converted to f16 by the
# prepare launch, one m16n8k16 per fragment and 16 weights, no per-chunk scaling. Two sm_90
# benches (`CUKERNELS_ARCHS=sm_90 cargo build --release -p cukernels-bench`):
# device-stage-b/cukernels-bench-base (main's MoE kernels) and -new (the branch), timed by
# scripts/device-ab.sh (alternating, 2 rounds) on the T = 512 and 2048 rows. First the
# branch's gpu_moe (every architecture: `cargo test --release -p cukernels-tests --test gpu_moe
# --no-run`), quick (the sm_90 and sm_75 configs), which checks the f16 tiles against their own
# f64 reference (f16 activations, f16 weights).
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
T=device-stage-b/gpu_moe
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 120 $T --ignored --test-threads=1 > $OUT/gpu_moe-quick.log 2>&1
echo "gpu_moe quick (sm_90 and sm_75 configs): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe-quick.log)" | tee -a $OUT/summary.txt
grep -hE "^test |panicked|FAILED" -A3 $OUT/gpu_moe-quick.log | head -30 | tee -a $OUT/summary.txt
printf '%s\n' "T512 E" "T2048 E" > /tmp/f16-shapes.txt
AB_OP=moe AB_ARGS="--reps 11" AB_STAGE=device-stage-b AB_TIMEOUT=200 bash scripts/device-ab.sh /tmp/f16-shapes.txt
cd $OUT && tar czf logs.tgz --remove-files *.log
