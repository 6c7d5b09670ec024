# Stop 59: the f16 tall tile for q4_1, q5_1, q2_K, q3_K, q4_K and q6_K on sm_90 (branch
# moe-f16-land), before it lands: the branch's gpu_moe with every architecture's config, the A/B
# of the T = 512 and 2048 rows against main, compute-sanitizer memcheck (quick suite) and
# racecheck (quick, the every-format test). Stage folder (argument, default device-stage-f):
# cukernels-bench-base (main, sm_90), cukernels-bench-new (the branch, sm_90), gpu_moe (the
# branch, every architecture).
S=${1:-device-stage-f}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader > $OUT/summary.txt
t=$(date +%s); timeout 200 $S/gpu_moe --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1
echo "gpu_moe (every config) exit $? in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" >> $OUT/summary.txt
grep -hE "^test |panicked|FAILED" -A3 $OUT/gpu_moe.log | head -30 >> $OUT/summary.txt
cat $OUT/summary.txt
printf '%s\n' "T512 E" "T2048 E" > /tmp/shapes.txt
AB_OP=moe AB_ARGS="--reps 11" AB_STAGE=$S AB_TIMEOUT=60 bash scripts/device-ab.sh /tmp/shapes.txt > /dev/null 2>&1
cat $OUT/ab-summary.txt
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 $S/gpu_moe --ignored --test-threads=1 > $OUT/memcheck-gpu_moe.log 2>&1
echo "memcheck (quick) exit $? in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-gpu_moe.log | tail -1); $(grep -E '^test result' $OUT/memcheck-gpu_moe.log)" | tee -a $OUT/summary.txt
t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 170 compute-sanitizer --tool racecheck --error-exitcode 99 $S/gpu_moe --ignored --test-threads=1 --exact every_format_every_batch_size_every_config > $OUT/racecheck-gpu_moe.log 2>&1
echo "racecheck (quick) every_format_every_batch_size_every_config exit $? in $(( $(date +%s) - t )) s: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck-gpu_moe.log | tail -1)" | tee -a $OUT/summary.txt
