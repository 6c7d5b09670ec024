#!/usr/bin/env bash
# Builds the kernels with rust-cuda (cuda_builder + rustc_codegen_nvvm, LLVM 19 + libNVVM 12.9)
# for sm_100 and sm_120, the recipe of ../shared/RUST-CUDA.md, and reports each kernel's
# resources from ptxas 12.9 beside the nvptx build's (README "rust-cuda").
#   bash scripts/rust-cuda-build.sh          builds the PTX; prints (and writes to
#                                             target/rust-cuda/ptx-dir.txt) its folder, which
#                                             CUKERNELS_RUST_CUDA_PTX_DIR hands the host build
#   bash scripts/rust-cuda-build.sh check    also checks every kernel with ptxas (CI)
#   RUST_CUDA_TARBALL  rust-cuda source (default ../shared/vendor/rust-cuda-af05bcc.tar.gz)
# Installs: LLVM 19 (apt), rust-cuda's nightly with rustc-dev, the libNVVM/ptxas wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/target/rust-cuda
tarball=${RUST_CUDA_TARBALL:-$root/../shared/vendor/rust-cuda-af05bcc.tar.gz}
mkdir -p "$work"

command -v llvm-config-19 >/dev/null || { apt-get update -qq && apt-get install -y -qq llvm-19-dev libclang-19-dev clang-19 libzstd-dev; }
channel=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-cuda/rust-toolchain.toml)
rustup toolchain install "$channel" --profile minimal -c rust-src -c rustc-dev -c llvm-tools-preview
[ -d "$work/rust-cuda-af05bcc" ] || tar -xzf "$tarball" -C "$work"

# A CUDA root from the two wheels (headers, libNVVM, libdevice, ptxas): no toolkit is installed.
cuda=$work/cuda
if [ ! -f "$cuda/nvvm/lib64/libnvvm.so" ]; then
  python3 -m pip download --quiet --disable-pip-version-check --no-deps nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79 -d "$work/wheels"
  rm -rf "$work/x" && mkdir -p "$work/x" && for w in "$work"/wheels/*.whl; do python3 -m zipfile -e "$w" "$work/x"; done
  x=$work/x/nvidia
  mkdir -p "$cuda/include" "$cuda/nvvm/include" "$cuda/nvvm/lib64" "$cuda/nvvm/libdevice" "$cuda/bin"
  cp -r "$x"/cuda_runtime/include/* "$x"/cuda_nvcc/include/* "$cuda/include/"
  cp "$x/cuda_nvcc/nvvm/include/nvvm.h" "$cuda/nvvm/include/"
  cp "$x/cuda_nvcc/nvvm/lib64/libnvvm.so" "$cuda/nvvm/lib64/" && ln -sf libnvvm.so "$cuda/nvvm/lib64/libnvvm.so.4"
  cp "$x/cuda_nvcc/nvvm/libdevice/libdevice.10.bc" "$cuda/nvvm/libdevice/"
  cp "$x/cuda_nvcc/bin/ptxas" "$cuda/bin/" && chmod +x "$cuda/bin/ptxas"
fi
export CUDA_PATH=$cuda LLVM_CONFIG_19=/usr/bin/llvm-config-19 LLVM_LINK_SHARED=1 LIBCLANG_PATH=/usr/lib/llvm-19/lib LD_LIBRARY_PATH=$cuda/nvvm/lib64
( cd rust-cuda && cargo build --release --locked --target-dir "$work/target" )
ptx_dir=$(cd rust-cuda && cargo run --release --locked -q --target-dir "$work/target")
echo "$ptx_dir" > "$work/ptx-dir.txt"
echo "rust-cuda PTX in $ptx_dir"
[ "${1:-}" = check ] || exit 0

# The check (CI): a build embedding the rust-cuda modules beside the nvptx ones of sm_100 and
# sm_120 (and both builds' sm_90 config probes), every kernel checked with ptxas 12.9 against
# its config row exactly as the nvptx build is (tests/ptx_resources.rs; the kernels of
# rust-cuda/known-spills.txt may keep the local memory listed there), and both builds'
# resources side by side.
unset CUDA_PATH LD_LIBRARY_PATH
CUKERNELS_ARCHS=sm_100,sm_120 CUKERNELS_RUST_CUDA_PTX_DIR=$ptx_dir \
  cargo test --release --locked -p cukernels-tests --test ptx_resources --target-dir "$work/host" -- --nocapture 2>&1 \
  | grep -v '^sm_[0-9]* (config' 
exit "${PIPESTATUS[0]}"
