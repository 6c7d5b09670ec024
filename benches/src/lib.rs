//! The benchmark and report machinery behind `cukernels-bench` and the criterion benches.
//!
//! - [`resources`]: `ptxas -v` resources of every kernel of every architecture (no GPU needed).
//! - [`report`]: the per-architecture config and resource tables.
//! - [`sgemm_bench`]: our SGEMM against cuBLAS on the same buffers, in the same run.

pub mod report;
pub mod resources;
pub mod sgemm_bench;

/// The commit this binary was built from (`git describe`; "-dirty" when the tree had changes).
pub const COMMIT: &str = env!("CUKERNELS_COMMIT");
