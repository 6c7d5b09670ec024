#!/usr/bin/env bash
# Device call 1: gpu_sgemm and gpu_moe (every architecture's config) and gpu_moe's quick suite
# under compute-sanitizer memcheck, side by side on the one GPU (nothing here is timed).
S=device-stage-a   # gpu_sgemm, gpu_moe
echo "commit $(cat $S/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for suite in gpu_sgemm gpu_moe; do
  ( t=$(date +%s); timeout 400 $S/$suite --ignored --test-threads=1 > $OUT/$suite.log 2>&1; rc=$?
    echo "$suite: exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/$suite.log)" >> $OUT/summary.txt ) &
done
( t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 400 compute-sanitizer --tool memcheck --error-exitcode 99 $S/gpu_moe --ignored --test-threads=1 > $OUT/memcheck-gpu_moe.log 2>&1; rc=$?
  echo "memcheck (quick) gpu_moe: exit $rc in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-gpu_moe.log | tail -1); $(grep -E '^test result' $OUT/memcheck-gpu_moe.log)" >> $OUT/summary.txt ) &
wait
cat $OUT/summary.txt
for f in $OUT/gpu_*.log $OUT/memcheck-*.log; do grep -E "panicked|FAILED|failed|wrong of|Invalid|ERROR" -A3 $f | grep -v "0 errors\|0 failed" | head -20; done
cd $OUT && tar czf logs-tests.tgz --remove-files *.log
