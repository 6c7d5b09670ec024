#!/usr/bin/env bash
# A copy of ../shared/anchors/ggml-anchor.sh (the device copy of the checkout has no ../shared).
# Build ggml's CUDA backend (sm_90) on the device machine and time llama.cpp's own kernels
# with test-backend-ops perf: the side-by-side anchor for attention and MoE MMQ.
# Usage: ggml-anchor.sh build | perf OPS...
set -u
SRC="${GGML_SRC:-$PWD/.carry/ggml}"; B=/tmp/ggml-build
case "${1:-build}" in
build)
  if [ ! -f "$B/build.ninja" ]; then
    cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF \
      -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
  fi
  timeout ${BUILD_S:-540} ninja -C "$B" -j16 test-backend-ops > $OUT/ninja.log 2>&1; rc=$?
  tail -3 $OUT/ninja.log; echo "ninja rc=$rc"; ls -la "$B/bin/test-backend-ops" 2>/dev/null ;;
perf)
  shift
  for op in "$@"; do
    pat="${op#*:}"; op="${op%%:*}"; [ "$pat" = "$op" ] && pat="."
    "$B/bin/test-backend-ops" perf -o "$op" -b CUDA0 -p "$pat" > "$OUT/perf-$op.log" 2>&1
    echo "== $op: $(grep -c 'runs' "$OUT/perf-$op.log") cases"; grep -E "runs" "$OUT/perf-$op.log" | head -${HEAD:-400}
  done ;;
esac
