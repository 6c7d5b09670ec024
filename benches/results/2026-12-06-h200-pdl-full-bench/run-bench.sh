#!/usr/bin/env bash
# Device call 2: the SGEMM benchmark (every group: the sweep, GEMV, long k, the randomized
# sweep) against cuBLAS, default seed then the held-out seed 12648430, and the MoE benchmark
# against cuBLAS f16; this build's bench (its SGEMM and MoE kernels are main's, byte for byte).
S=device-stage-b   # cukernels-bench (this build), base/cukernels-bench (main's sm_90 build)
echo "commit $(cat $S/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >> $OUT/summary.txt
start=$(date +%s)
timeout 330 $S/cukernels-bench sgemm --reps 50 --out $OUT/sgemm.jsonl > $OUT/sgemm.log 2>&1; echo "sgemm default seed: exit $? at $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
grep -E "geometric|random:" $OUT/sgemm.log | tee -a $OUT/summary.txt
timeout 120 $S/cukernels-bench moe --reps 15 --out $OUT/moe.jsonl > $OUT/moe.log 2>&1; echo "moe: exit $? at $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
left=$(( 575 - ($(date +%s) - start) ))
[ $left -gt 60 ] && { CUKERNELS_SWEEP_SEED=12648430 timeout $left $S/cukernels-bench sgemm --reps 25 --out $OUT/sgemm-seed12648430.jsonl > $OUT/sgemm-seed.log 2>&1; echo "sgemm held-out seed: exit $? at $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt; grep -E "random:" $OUT/sgemm-seed.log | tee -a $OUT/summary.txt; }
cd $OUT && tar czf logs-bench.tgz --remove-files *.log
