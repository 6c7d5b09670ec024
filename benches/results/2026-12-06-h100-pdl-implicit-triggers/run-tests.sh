#!/usr/bin/env bash
# The SGEMM and attention GPU suites (every architecture's config) and their quick suites under
# compute-sanitizer memcheck, side by side on the one GPU (nothing here times anything).
S=device-stage-a
echo "commit $(cat $S/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
for suite in gpu_sgemm gpu_attention; do
  ( t=$(date +%s); timeout 540 $S/$suite --ignored --test-threads=1 > $OUT/$suite.log 2>&1; rc=$?
    echo "$suite: exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/$suite.log)" >> $OUT/summary.txt ) &
  ( t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 540 compute-sanitizer --tool memcheck --error-exitcode 99 $S/$suite --ignored --test-threads=1 > $OUT/memcheck-$suite.log 2>&1; rc=$?
    echo "memcheck (quick) $suite: exit $rc in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-$suite.log | tail -1); $(grep -E '^test result' $OUT/memcheck-$suite.log)" >> $OUT/summary.txt ) &
done
wait
cat $OUT/summary.txt
for f in $OUT/gpu_*.log $OUT/memcheck-*.log; do grep -E "panicked|FAILED|failed|wrong of|Invalid|ERROR" -A3 $f | grep -v "0 errors\|0 failed" | head -20; done
cd $OUT && tar czf logs.tgz --remove-files *.log
