#!/usr/bin/env bash
# Runs on the GPU machine, over the binaries scripts/stage-device.sh built: the GPU test suite
# (every architecture's config; SUITES picks which), compute-sanitizer memcheck and racecheck (quick suites),
# the load-time benchmark (fresh processes, JIT cache off), the SGEMM benchmark against
# cuBLAS, the attention benchmark against PyTorch (flash and cuDNN backends) and the MoE benchmark
# against cuBLAS f16, and llama.cpp's own MUL_MAT_ID beside it ("anchors": ggml's CUDA backend is
# built on the device from .carry/ggml, in the background while the tests run, and its
# `test-backend-ops perf` cases are merged into the MoE results by benches/moe_llamacpp.py).
# Everything is logged under $OUT.
# Usage: bash scripts/device-run.sh [tests|sanitize|load|bench|attention|moe|anchors|rust-cuda|all]...
# ("rust-cuda" needs binaries staged with RUST_CUDA=1; "all" leaves it out.)
# ("anchors" needs ggml's source in .carry/ggml: README "Running on a GPU"; "all" leaves it out.)
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
anchors() { for w in "${what[@]}"; do [ "$w" = anchors ] && return 0; done; return 1; }
if anchors; then
  # The build takes ~250 s on 16 cores; it overlaps the tests (which do not time anything).
  (bash scripts/ggml-anchor.sh build > "$OUT/anchor-build.txt" 2>&1) &
  anchor_build=$!
fi
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
        $stage/$suite --ignored --test-threads=1 --exact "$t" > "$OUT/racecheck-one.log" 2>&1; rc=$?
      echo "compute-sanitizer racecheck (quick) $t: exit $rc in $(( $(date +%s) - start )) s: $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck-one.log" | tail -1)" | tee -a "$OUT/summary.txt"
      # One log for all of them: the device tool brings back only so many files.
      { echo "== $t"; cat "$OUT/racecheck-one.log"; } >> "$OUT/racecheck-$suite.log"; rm -f "$OUT/racecheck-one.log"
      [ $rc -eq 0 ] || status=1
    done
  done
fi
if anchors; then
  # Nothing is timed while ggml compiles.
  wait $anchor_build; cat "$OUT/anchor-build.txt"
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
if anchors; then
  # The issue's formats and batch sizes on llama.cpp's two MoE perf shapes.
  HEAD=100 bash scripts/ggml-anchor.sh perf 'MUL_MAT_ID:type_a=(q4_0|q8_0|q4_K|q6_K),type_b=f32,n_mats=(128|32),n_used=(8|4),b=0,m=(768|1792),n=(1|8|32|128|512),k=2048' || status=1
  if [ -f "$OUT/moe.jsonl" ]; then
    python3 benches/moe_llamacpp.py "$OUT/moe.jsonl" "$OUT/perf-MUL_MAT_ID.log" "$OUT/moe-with-llamacpp.jsonl" 2>&1 | tee "$OUT/moe-llamacpp.log" || status=1
  fi
fi
if [[ " ${what[*]} " == *" rust-cuda "* ]]; then
  # The rust-cuda build (RUST_CUDA=1 scripts/stage-device.sh): its sm_100 config, retargeted to
  # sm_90, through every family's GPU suite; then each family's benchmark with the sm_100 config
  # built by nvptx and by rust-cuda, one after the other in this run (RC_SHAPES: a --shape
  # filter per family, `sgemm|attention|moe`).
  for suite in "${suites[@]}"; do
    start=$(date +%s)
    CUKERNELS_TEST_COMPILER=rust-cuda $stage/$suite --ignored --test-threads=1 > "$OUT/rust-cuda-$suite.log" 2>&1; rc=$?
    echo "rust-cuda $suite: exit $rc in $(( $(date +%s) - start )) s: $(grep -E '^test result' "$OUT/rust-cuda-$suite.log")" | tee -a "$OUT/summary.txt"
    [ $rc -eq 0 ] || { status=1; grep -E "panicked|failing|FAILED|wrong of" -A3 "$OUT/rust-cuda-$suite.log" | head -40; }
  done
  IFS='|' read -r sg at mo <<< "${RC_SHAPES:-||}"
  # (Staged binaries may be carried in two runs: the benchmarks where cukernels-bench came along.)
  [ -x $stage/cukernels-bench ] && for compiler in nvptx rust-cuda; do
    $stage/cukernels-bench sgemm --config sm_100 --compiler $compiler --reps "${BENCH_REPS:-50}" $sg --out "$OUT/rc-sgemm-$compiler.jsonl" > "$OUT/rc-sgemm-$compiler.log" 2>&1 || status=1
    $stage/cukernels-bench attention --config sm_100 --compiler $compiler --reps 21 $at --out "$OUT/rc-attention-$compiler.jsonl" > "$OUT/rc-attention-$compiler.log" 2>&1 || status=1
    $stage/cukernels-bench moe --config sm_100 --compiler $compiler --reps 15 $mo --out "$OUT/rc-moe-$compiler.jsonl" > "$OUT/rc-moe-$compiler.log" 2>&1 || status=1
    echo "benchmarks with the $compiler build: done" | tee -a "$OUT/summary.txt"
  done
fi
if has bench; then
  $stage/cukernels-bench sgemm --reps "${BENCH_REPS:-100}" --out "$OUT/sgemm.jsonl" 2>&1 | tee "$OUT/bench.log"; [ ${PIPESTATUS[0]} -eq 0 ] || status=1
fi
exit $status
