#!/usr/bin/env bash
# The test command (README "Tests"): builds the PTX of all eight architectures (plus the sm_100
# and sm_120 config probes), checks every kernel with ptxas, and runs every test. GPU tests are
# #[ignore]d without a GPU (they are listed as ignored, never passed); on a GPU machine run
# `cargo test --release -p cukernels-tests --test gpu_sgemm -- --ignored`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --locked --workspace
cargo run --release --locked -p cukernels-bench -- report
