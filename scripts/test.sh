#!/usr/bin/env bash
# The test command (README "Tests"): checks the GGUF reference vectors against PyPI's gguf,
# builds the device code from source for all eight
# architectures (PTX and cubins, plus the sm_100 and sm_120 config probes), checks every kernel
# with ptxas, checks that the packaged artifacts are exactly what the sources build, runs every
# test, then packages the crates and builds a downstream crate on stable Rust alone
# (scripts/check-package.sh). GPU tests are
# #[ignore]d without a GPU (they are counted as skipped, never as passed); on a GPU machine run
# `cargo test --release -p cukernels-tests --test gpu_sgemm -- --ignored`.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
vectors=$(mktemp -d)
trap 'rm -rf "$log" "$vectors"' EXIT
# The GGUF reference vectors (PyPI gguf): the committed file is exactly what its generator
# writes, and a fresh seed's file is handed to the quantization tests as well.
python3 tests/data/make_gguf_vectors.py "$vectors/committed.bin"
cmp "$vectors/committed.bin" tests/data/gguf_vectors.bin || { echo "tests/data/gguf_vectors.bin is not what make_gguf_vectors.py writes" >&2; exit 1; }
python3 tests/data/make_gguf_vectors.py "$vectors/fresh.bin" --seed "$(date +%s)"
CUKERNELS_GGUF_VECTORS="$vectors/fresh.bin" cargo test --release --locked --workspace 2>&1 | tee "$log"
cargo build --release --locked --workspace --benches
cargo run --release --locked -p cukernels-bench -- report
bash scripts/check-package.sh
# One closing line over every test binary and doc-test run above.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^ignored/) s += $(i-1) } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
