#!/usr/bin/env bash
# Builds (here, on the CPU machine) everything the GPU machine runs, and copies it into
# device-stage/ (ignored by git; pass it as `carry` to the device tool). Then, on the device:
#   bash scripts/device-run.sh        # logs and results under $OUT
set -euo pipefail
cd "$(dirname "$0")/.."
stage=device-stage
rm -rf "$stage" && mkdir -p "$stage"

# Test binaries (with every architecture's PTX embedded, plus the sm_100/sm_120 config probes).
cargo test --release -p cukernels-tests --no-run --message-format=json 2>/dev/null \
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
cargo build --release -p cukernels-bench --bin cukernels-bench
cp target/release/cukernels-bench "$stage/"
git describe --always --dirty --abbrev=12 > "$stage/COMMIT"
# Symbols are not needed there, and the device tool carries at most 64 MiB.
strip "$stage"/gpu_* "$stage"/cukernels-bench 2>/dev/null || true
ls -la "$stage"
