#!/usr/bin/env bash
# Builds (here, on the CPU machine) everything the GPU machine runs, and copies it into
# device-stage/ (ignored by git; pass it as `carry` to the device tool). Then, on the device:
#   bash scripts/device-run.sh        # logs and results under $OUT
#
# RUST_CUDA=1: the binaries also embed the rust-cuda build of sm_100 and sm_120 and its sm_90
# config probes (run scripts/rust-cuda-build.sh first), and hold only sm_90's nvptx build and
# the nvptx probes beside it (to stay within what the device tool carries); then
#   bash scripts/device-run.sh rust-cuda   # both builds' GPU suites and benchmarks, same run
set -euo pipefail
cd "$(dirname "$0")/.."
stage=device-stage
rm -rf "$stage" && mkdir -p "$stage"
target_args=()
if [ "${RUST_CUDA:-}" = 1 ]; then
  export CUKERNELS_ARCHS=sm_90,sm_100,sm_120
  export CUKERNELS_RUST_CUDA_PTX_DIR=$(cat target/rust-cuda/ptx-dir.txt)
  target_args=(--target-dir target/rust-cuda/host)
fi

# Test binaries (with every architecture's PTX embedded, plus the sm_100/sm_120 config probes).
cargo test --release -p cukernels-tests "${target_args[@]}" --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        name = m["target"]["name"]
        if name in ("gpu_sgemm", "gpu_attention", "gpu_moe"):
            shutil.copy(m["executable"], "device-stage/" + name)
            print("staged", name)
'
cargo build --release -p cukernels-bench --bin cukernels-bench "${target_args[@]}" --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil
for m in map(json.loads, sys.stdin):
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "cukernels-bench":
        shutil.copy(m["executable"], "device-stage/cukernels-bench")
'
git describe --always --dirty --abbrev=12 > "$stage/COMMIT"
# Symbols are not needed there, and the device tool carries at most 64 MiB.
strip "$stage"/gpu_* "$stage"/cukernels-bench 2>/dev/null || true
ls -la "$stage"
