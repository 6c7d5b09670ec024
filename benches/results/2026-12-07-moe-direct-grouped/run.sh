#!/usr/bin/env bash
# Stop 55: the direct path with each expert's slots grouped (prototype, grouped.patch): the block
# of every 4th slot routed to an expert (in slot order, found by the block's own ballot scan of the
# ids) computes up to 4 of its slots, so an expert's weights are read once per 4 slots instead of
# once per slot; the other blocks return. Two sm_90 benches (`CUKERNELS_ARCHS=sm_90 cargo build
# --release -p cukernels-bench`): device-stage-b/cukernels-bench-base (main) and -new (the patch),
# timed by scripts/device-ab.sh (alternating, 2 rounds) on the rows the direct path takes or is
# forced on (T = 1..256), q4_0 and q8_0. Then device-stage-b/grouped/gpu_moe (the patched suite, every architecture: `cargo test --release -p
# cukernels-tests --test gpu_moe --no-run`), quick, then in full.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
# The labels' trailing spaces keep "T1 " from also taking T16 and T128.
printf '%s\n' "q4_0 T1 " "q4_0 T8 " "q8_0 T1 " "q8_0 T8 " "direct forced" "q4_0 T32 " > /tmp/grouped-shapes.txt
AB_OP=moe AB_ARGS="--reps 15" AB_STAGE=device-stage-b AB_TIMEOUT=120 bash scripts/device-ab.sh /tmp/grouped-shapes.txt
T=device-stage-b/grouped/gpu_moe
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 150 $T --ignored --test-threads=1 > $OUT/gpu_moe-quick.log 2>&1
echo "gpu_moe quick (grouped, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe-quick.log)" | tee -a $OUT/summary.txt
t=$(date +%s); timeout 150 $T --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (grouped, every config): exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" | tee -a $OUT/summary.txt
grep -hE "^test |panicked|FAILED|wrong of" -A3 $OUT/gpu_moe-quick.log $OUT/gpu_moe.log | head -30 | tee -a $OUT/summary.txt
cd $OUT && tar czf logs.tgz --remove-files *.log
