#!/usr/bin/env bash
# Runs on the GPU machine, over the binaries scripts/stage-device.sh built: the GPU test suite
# (every architecture's config), compute-sanitizer memcheck (whole suite) and racecheck (quick suite),
# the load-time benchmark (fresh processes, JIT cache off) and the SGEMM benchmark against
# cuBLAS. Everything is logged under $OUT.
# Usage: bash scripts/device-run.sh [tests|sanitize|load|bench|all]...
set -uo pipefail
cd "$(dirname "$0")/.."
stage=device-stage
OUT=${OUT:-/tmp/cukernels-out}
mkdir -p "$OUT"
what=("$@"); [ ${#what[@]} -eq 0 ] && what=(all)
status=0
has() { for w in "${what[@]}"; do [ "$w" = "$1" ] || [ "$w" = all ] && return 0; done; return 1; }

echo "commit $(cat $stage/COMMIT)" | tee "$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee -a "$OUT/summary.txt"

if has tests; then
  start=$(date +%s)
  $stage/gpu_sgemm --ignored --test-threads=1 > "$OUT/gpu_tests.log" 2>&1; rc=$?
  echo "gpu tests: exit $rc in $(( $(date +%s) - start )) s: $(grep -E '^test result' "$OUT/gpu_tests.log")" | tee -a "$OUT/summary.txt"
  [ $rc -eq 0 ] || { status=1; grep -E "panicked|failing|FAILED" "$OUT/gpu_tests.log" | head -20; }
fi
if has sanitize; then
  # memcheck over the whole suite in one run; racecheck (much slower) over the quick suite, one
  # test per run, so that one slow test cannot take the others' results with it.
  start=$(date +%s)
  timeout 420 compute-sanitizer --tool memcheck --error-exitcode 99 \
    $stage/gpu_sgemm --ignored --test-threads=1 > "$OUT/memcheck.log" 2>&1; rc=$?
  echo "compute-sanitizer memcheck: exit $rc in $(( $(date +%s) - start )) s: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1); $(grep -E '^test result' "$OUT/memcheck.log")" | tee -a "$OUT/summary.txt"
  [ $rc -eq 0 ] || status=1
  for t in $($stage/gpu_sgemm --ignored --list 2>/dev/null | sed -n 's/: test$//p'); do
    start=$(date +%s)
    CUKERNELS_TEST_QUICK=1 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 99 \
      $stage/gpu_sgemm --ignored --test-threads=1 --exact "$t" > "$OUT/racecheck-$t.log" 2>&1; rc=$?
    echo "compute-sanitizer racecheck (quick) $t: exit $rc in $(( $(date +%s) - start )) s: $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck-$t.log" | tail -1)" | tee -a "$OUT/summary.txt"
    [ $rc -eq 0 ] || status=1
  done
fi
if has load; then
  $stage/cukernels-bench load --reps 5 --out "$OUT/load.jsonl" 2>&1 | tee "$OUT/load.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
if has bench; then
  $stage/cukernels-bench sgemm --reps "${BENCH_REPS:-100}" --out "$OUT/sgemm.jsonl" 2>&1 | tee "$OUT/bench.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
exit $status
