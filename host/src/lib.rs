//! # cukernels
//!
//! CUDA kernels written in Rust, shipped as a cubin for each of sm_70, sm_75, sm_80, sm_86,
//! sm_89, sm_90, sm_100 and sm_120 plus PTX for newer GPUs, and launched through [`cudarc`] on
//! the caller's stream and buffers. Each architecture's kernels are built with that
//! architecture's tile configuration (the tables in [`cukernels_gpu`]); the host loads, per
//! kernel family and on its first launch, the cubin that fits the device, else the PTX
//! ([`artifacts`]). Depending on this crate needs stable Rust alone.
//!
//! ```no_run
//! use cukernels::{device_context, Cukernels, Sgemm, Transpose};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = device_context(0)?; // an error, not a panic, without a GPU
//! let stream = ctx.default_stream();
//! let kernels = Cukernels::new(&ctx)?;
//!
//! // C (64×32) = A (64×128) · Bᵀ, where B is stored 32×128; all row-major.
//! let (m, n, k) = (64, 32, 128);
//! let a = stream.clone_htod(&vec![1.0f32; m * k])?;
//! let b = stream.clone_htod(&vec![0.5f32; n * k])?;
//! let mut c = stream.alloc_zeros::<f32>(m * n)?;
//! let gemm = Sgemm::new(m, n, k).transpose(Transpose::No, Transpose::Yes);
//! kernels.sgemm(&stream, &gemm, &a, &b, &mut c)?;
//! let c_host = stream.clone_dtoh(&c)?;
//! assert!(c_host.iter().all(|&x| x == 64.0));
//! # Ok(()) }
//! ```
//!
//! Everything a launch needs is checked first and reported as an [`Error`] that names the
//! argument and its value; kernels never read or write outside the buffers they are given.

pub mod artifacts;
pub mod attention;
mod error;
pub mod moe;
pub mod quant;
mod runtime;
pub mod sgemm;
mod workspace;
mod zstd_frame;

pub use cudarc;
pub use artifacts::{Artifact, ArtifactKind, Compiler};
pub use attention::{alibi_slopes, Alibi, Attention, AttentionBuffers, AttentionElement, AttentionExtras, AttentionLengths, AttentionPlan, DeviceTables, MaskBuffer, MaskShape, PagedKv, Strides, TableBuffers, Varlen};
pub use cukernels_gpu::quant::{GgufFormat, QK, QK_K};
pub use cukernels_gpu::{
    attention_config, matrix_path, AttentionArchConfig, AttentionDtype, AttentionHead, AttentionParams, AttentionTile, AttentionTileKind, MatrixPath, ATTENTION_CONFIGS, ATTENTION_KERNELS,
    GlobalPtr, KernelFamily, KernelSpec, SgemmParams, sgemm_config, sgemm_kernel, Arch, ArchLimits, GemvConfig, LaunchShape, SgemmArchConfig, SgemmKernel, SgemmOperands, SgemmTile,
    SgemmVariant, GEMV_COLUMNS, GEMV_DOT_FILL_WARPS, GEMV_DOT_MIN_K_PER_WARP, GEMV_MAX_M, MAX_K_SPLITS, SGEMM_CONFIGS, SGEMM_KERNELS, SMALL_TILE_MAX_ELEMENTS, SMEM_ROW_PAD, k_slice, tile_origin_inside,
    TinyConfig, TINY_K_PER_LANE, TINY_TILE,
};
/// The run-time bits of an SGEMM launch (`SgemmParams::flags`).
pub use cukernels_gpu::sgemm_flags;
pub use cukernels_gpu::moe_flags;
/// The run-time bits of an attention launch (`AttentionParams::flags`), and the record of bad
/// device-side tables.
pub use cukernels_gpu::{attention_flags, attention_table_error};
pub use error::{Error, Result};
pub use moe::{MoeActivation, MoeBuffers, MoeInput, MoeLengths, MoePlan, MoeWorkspaceLayout, MulMatId};
pub use cukernels_gpu::{decode_features_per_warp, direct_features_per_warp, moe_config, MoeArchConfig, MoeEngine, MoeKernel, MoeKernelKind, MoeParams, MoePath, MoeTile, MOE_CONFIGS, MOE_KERNELS};
pub use cukernels_gpu::moe_config::{direct_rereads_pay, MoeDecodeShape, MOE_ROUTE_EXPERTS_PER_PASS};
pub use runtime::{check_kernel_limits, device_context, Cukernels, LoadedKernelAttributes};
pub use sgemm::{best_tile_use, choose_kernel, default_split_workspace_bytes, kernel_candidates, Layout, SgemmWorkspace, SplitReduction, SplitWorkspaceLayout, MAX_WORKSPACE_K_SPLITS, GEMV_DISPATCH_MAX, GEMV_MIN_COLUMN_USE, GEMV_MIN_K, GEMV_TINY_OUTPUTS, HUGE_MIN_K, TINY_GRID_WAVES, TINY_MAX_TILE_USE, TINY_SHORT_K, TINY_SHORT_K_MAX_TILE_USE, SHORT_K_TILES, Sgemm, SgemmBuffers, SgemmChoice, SgemmPlan, Transpose};

/// The README's examples, compiled as doc tests (`no_run`: they need a GPU).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
