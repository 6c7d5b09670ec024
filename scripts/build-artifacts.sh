#!/usr/bin/env bash
# Rebuilds the prebuilt device artifacts that ship with the `cukernels` package
# (host/artifacts: a cubin per architecture, PTX of sm_100 and sm_120, manifest.txt) from the
# device sources, with the pinned nightly and ptxas 12.9 (README "Setup"). Run it after any
# change to kernels-gpu/src or host/build.rs, and commit host/artifacts: the test
# `packaged_artifacts_are_exactly_what_the_sources_build` (CI) fails until then, and a build
# without `from-source` refuses stale artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
unset CUKERNELS_ARCHS CUKERNELS_ARTIFACT_DIR CUKERNELS_RUST_CUDA_PTX_DIR
out_dir=$(cargo build --release --locked -p cukernels --features from-source --message-format=json \
  | python3 -c '
import json, sys
dirs = [m["out_dir"] for m in map(json.loads, sys.stdin)
        if m.get("reason") == "build-script-executed" and m["package_id"].split("#")[0].endswith("/host")]
print(dirs[-1])')
test -f "$out_dir/package/manifest.txt" || { echo "no package set in $out_dir/package" >&2; exit 1; }
rm -rf host/artifacts
cp -r "$out_dir/package" host/artifacts
ls -l host/artifacts
du -sh host/artifacts
