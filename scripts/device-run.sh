#!/usr/bin/env bash
# Runs on the GPU machine, over the binaries scripts/stage-device.sh built: the GPU test suite
# (every architecture's config; SUITES picks which), compute-sanitizer memcheck and racecheck (quick suites),
# the load-time benchmark (fresh processes, JIT cache off), the SGEMM benchmark against
# cuBLAS, the attention benchmark against PyTorch (flash and cuDNN backends) and the MoE benchmark
# against cuBLAS f16. Everything is logged under $OUT.
# Usage: bash scripts/device-run.sh [tests|sanitize|load|bench|attention|moe|all]...
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

suites=(${SUITES:-gpu_sgemm gpu_attention gpu_moe})
if has tests; then
  for suite in "${suites[@]}"; do
    start=$(date +%s)
    $stage/$suite --ignored --test-threads=1 > "$OUT/$suite.log" 2>&1; rc=$?
    echo "$suite: exit $rc in $(( $(date +%s) - start )) s: $(grep -E '^test result' "$OUT/$suite.log")" | tee -a "$OUT/summary.txt"
    [ $rc -eq 0 ] || { status=1; grep -E "panicked|failing|FAILED|wrong of" -A3 "$OUT/$suite.log" | head -40; }
  done
fi
if has sanitize; then
  # memcheck over the whole suite in one run; racecheck (much slower) over the quick suite, one
  # test per run, so that one slow test cannot take the others' results with it.
  for suite in "${suites[@]}"; do
    start=$(date +%s)
    CUKERNELS_TEST_QUICK=1 timeout 420 compute-sanitizer --tool memcheck --error-exitcode 99 \
      $stage/$suite --ignored --test-threads=1 > "$OUT/memcheck-$suite.log" 2>&1; rc=$?
    echo "compute-sanitizer memcheck (quick) $suite: exit $rc in $(( $(date +%s) - start )) s: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck-$suite.log" | tail -1); $(grep -E '^test result' "$OUT/memcheck-$suite.log")" | tee -a "$OUT/summary.txt"
    [ $rc -eq 0 ] || status=1
    for t in $($stage/$suite --ignored --list 2>/dev/null | sed -n 's/: test$//p'); do
      start=$(date +%s)
      CUKERNELS_TEST_QUICK=1 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 99 \
        $stage/$suite --ignored --test-threads=1 --exact "$t" > "$OUT/racecheck-$t.log" 2>&1; rc=$?
      echo "compute-sanitizer racecheck (quick) $t: exit $rc in $(( $(date +%s) - start )) s: $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck-$t.log" | tail -1)" | tee -a "$OUT/summary.txt"
      [ $rc -eq 0 ] || status=1
    done
  done
fi
if has load; then
  $stage/cukernels-bench load --reps 5 --out "$OUT/load.jsonl" 2>&1 | tee "$OUT/load.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
if has attention; then
  # Ours, then PyTorch's SDPA (flash and cuDNN backends) on the same shapes in the same run.
  $stage/cukernels-bench attention --reps "${ATTN_SAMPLES:-21}" --out "$OUT/attention-ours.jsonl" ${ATTN_SHAPES:-} 2>&1 | tee "$OUT/attention.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
  python3 benches/attention_torch.py "$OUT/attention-ours.jsonl" "$OUT/attention.jsonl" --samples "${ATTN_SAMPLES:-21}" 2>&1 | tee -a "$OUT/attention.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
if has moe; then
  $stage/cukernels-bench moe --reps "${MOE_SAMPLES:-15}" --out "$OUT/moe.jsonl" 2>&1 | tee "$OUT/moe.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
if has bench; then
  $stage/cukernels-bench sgemm --reps "${BENCH_REPS:-100}" --out "$OUT/sgemm.jsonl" 2>&1 | tee "$OUT/bench.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
exit $status
