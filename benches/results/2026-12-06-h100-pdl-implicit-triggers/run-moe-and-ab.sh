#!/usr/bin/env bash
# gpu_moe (every config) and its quick suite under memcheck, side by side; then the A/B of
# main's sm_90 bench (base/) against this build's bench (ab.sh), nothing else on the GPU.
S=device-stage-c   # gpu_moe, this build's bench, base/cukernels-bench (main's sm_90 bench), ab.sh
echo "commit $(cat $S/COMMIT)" > $OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/summary.txt
( t=$(date +%s); timeout 200 $S/gpu_moe --ignored --test-threads=1 > $OUT/gpu_moe.log 2>&1; rc=$?
  echo "gpu_moe: exit $rc in $(( $(date +%s) - t )) s: $(grep -E '^test result' $OUT/gpu_moe.log)" >> $OUT/summary.txt ) &
( t=$(date +%s); CUKERNELS_TEST_QUICK=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 $S/gpu_moe --ignored --test-threads=1 > $OUT/memcheck-gpu_moe.log 2>&1; rc=$?
  echo "memcheck (quick) gpu_moe: exit $rc in $(( $(date +%s) - t )) s: $(grep -E 'ERROR SUMMARY' $OUT/memcheck-gpu_moe.log | tail -1); $(grep -E '^test result' $OUT/memcheck-gpu_moe.log)" >> $OUT/summary.txt ) &
wait
cat $OUT/summary.txt
grep -E "panicked|FAILED|wrong of" -A3 $OUT/gpu_moe.log | head -20
AB_BUDGET=${AB_BUDGET:-470} bash $S/ab.sh $S/base/cukernels-bench $S/cukernels-bench
cd $OUT && tar czf logs.tgz --remove-files *.log *.jsonl
