//! The benchmark and report machinery behind `cukernels-bench` and the criterion benches.
//!
//! - [`resources`]: `ptxas -v` resources of every kernel of every architecture (no GPU needed).
//! - [`report`]: the per-architecture config and resource tables.
//! - [`sgemm_bench`]: our SGEMM against cuBLAS on the same buffers, in the same run.
//! - [`attention_bench`]: our flash attention over the attention issue's shapes (PyTorch's
//!   baselines come from `benches/attention_torch.py` in the same device run).
//! - [`moe_bench`]: our MoE quantized matmul against a cuBLAS f16 GEMM of the same FLOPs.
//! - [`load_bench`]: time from `Cukernels::new` to the end of the first launch, per family,
//!   cubin and PTX, in fresh processes with the JIT cache off.

pub mod attention_bench;
pub mod load_bench;
pub mod moe_bench;
pub mod report;
pub mod resources;
pub mod sgemm_bench;

/// The commit this binary was built from (`git describe`; "-dirty" when the tree had changes).
pub const COMMIT: &str = env!("CUKERNELS_COMMIT");
