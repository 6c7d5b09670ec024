//! # cukernels-gpu: the device side of cukernels
//!
//! This crate compiles twice:
//! - for the host (any target): the plain types and per-architecture config tables
//!   ([`arch`], [`sgemm_config`]) that the host crate reads to validate and launch, and the
//!   GGUF block formats ([`quant`]) that host and device share;
//! - for `nvptx64-nvidia-cuda` (by `host/build.rs` with the `from-source` feature, once per
//!   kernel family and architecture, with `--cfg cukernels_family="sgemm"` naming the family
//!   and `--cfg cukernels_config="sm_XX"` the config row): the kernels themselves, in
//!   `device` (not compiled for the host).
//!
//! The launch ABI (one `#[repr(C)]` parameter struct per entry point, [`abi`]) is defined here
//! for both sides too.
//!
//! One source for both sides means the tile sizes the host launches with are, by construction,
//! the tile sizes the kernels were compiled with.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch, stdarch_nvptx, core_intrinsics, gpu_intrinsics, stmt_expr_attributes))]
// The rust-cuda backend (`cukernels_backend = "nvvm"`, scripts/rust-cuda-build.sh) pins an
// older nightly without this intrinsic; it declares the dynamic shared memory itself.
#![cfg_attr(all(target_arch = "nvptx64", not(cukernels_backend = "nvvm")), feature(gpu_launch_sized_workgroup_mem))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod abi;
pub mod arch;
pub mod attention_config;
pub mod family;
pub mod moe_config;
pub mod quant;
pub mod sgemm_config;

#[cfg(target_arch = "nvptx64")]
pub mod device;

pub use abi::{AttentionParams, GlobalPtr, MoeParams, SgemmParams};
pub use arch::{Arch, ArchLimits};
pub use attention_config::{
    attention_config, attention_kernel_index, matrix_path, AttentionArchConfig, AttentionDtype, AttentionHead, AttentionKernel, AttentionTile, AttentionTileKind, MatrixPath,
    ATTENTION_CONFIGS, ATTENTION_KERNELS, ATTENTION_SMEM_PAD, DECODE_MAX_PACKED_ROWS, MAX_KV_SPLITS, MERGE_SMEM_BYTES, MERGE_THREADS, MIN_SPLIT_KV_BYTES, copies_short_pages,
};
pub use family::{ArtifactKind, Compiler, KernelFamily, KernelSpec};
pub use moe_config::{
    decode_features_per_warp, direct_features_per_warp, moe_config, moe_kernel_index, MoeArchConfig, MoeEngine, MoeKernel, MoeKernelKind, MoePath, MoeTile, MOE_CHUNKS_PER_STEP, MOE_CONFIGS, MOE_KERNELS, MOE_PREPARE_THREADS,
    MOE_QUANTIZE_VALUES_PER_THREAD,
};
pub use sgemm_config::{
    sgemm_config, sgemm_kernel, sgemm_kernel_index, GemvConfig, LaunchShape, SgemmArchConfig, SgemmKernel, SgemmOperands, SgemmTile, SgemmVariant, GEMV_COLUMNS,
    GEMV_DOT_FILL_WARPS, GEMV_DOT_MIN_K_PER_WARP, GEMV_MAX_M, MAX_K_SPLITS, SGEMM_CONFIGS, SGEMM_KERNELS, SMALL_TILE_MAX_ELEMENTS, SMEM_ROW_PAD, k_slice, tile_origin_inside,
    TinyConfig, TINY_K_PER_LANE, TINY_TILE,
};

/// Bits of the `flags` argument of every SGEMM entry point. The kernel always computes a
/// row-major C (`C[i*ldc + j]`); the host maps column-major and transposed problems onto this
/// canonical form, picks the entry point compiled for the operands' layout
/// ([`SgemmOperands`]), and passes what is only known at run time in these bits.
pub mod sgemm_flags {
    /// A's base, lda and batch stride are multiples of 4 floats (16 bytes): 16-byte copies.
    pub const A_VECTOR: u32 = 1 << 2;
    /// Same for B.
    pub const B_VECTOR: u32 = 1 << 3;
    /// Same for C: 16-byte stores and loads in the epilogue.
    pub const C_VECTOR: u32 = 1 << 4;
    /// beta == 0: C is written without being read (NaN in C must not leak).
    pub const BETA_ZERO: u32 = 1 << 5;
    /// C's element (i, j) is at `C[j*ldc + i]`: the `gemv` kernel computing `Cᵀ = Bᵀ·Aᵀ`, a
    /// product with few columns turned into one with few rows (the host sets it for no other
    /// kernel).
    pub const C_TRANSPOSED: u32 = 1 << 6;
    /// The tile kernels' k split (`gridDim.y` > 1) adds its partial tiles through the
    /// workspace (`split_partials`, `split_counters`) instead of a cluster's shared memory.
    pub const SPLIT_WORKSPACE: u32 = 1 << 7;
    /// `tiny` only: bits 8..11 hold log2 of the lanes that share a piece of C
    /// (`TinyConfig::team_lanes`, chosen by the host).
    pub const TINY_LANES_SHIFT: u32 = 8;
    pub const TINY_LANES_MASK: u32 = 0x7;
}

/// Bits of the `flags` argument of every attention entry point: which optional inputs and
/// outputs a launch has (see `AttentionParams`).
pub mod attention_flags {
    /// `mask` is an additive mask.
    pub const MASK: u32 = 1 << 0;
    /// The mask holds f32 (else f16).
    pub const MASK_F32: u32 = 1 << 1;
    /// `alibi_slopes` is given: the bias `−slope · |i + seqlen_k − seqlen_q − j|` is added.
    pub const ALIBI: u32 = 1 << 2;
    /// Scores pass through `softcap · tanh(x / softcap)`.
    pub const SOFTCAP: u32 = 1 << 3;
    /// `sinks` is given.
    pub const SINKS: u32 = 1 << 4;
    /// `lse` is written.
    pub const WRITE_LSE: u32 = 1 << 5;
    /// Sequences are packed; `cu_seqlens_q` / `cu_seqlens_k` give their bounds.
    pub const VARLEN: u32 = 1 << 6;
    /// K and V live in pages (`block_table`).
    pub const PAGED: u32 = 1 << 7;
    /// The forward kernel writes partial results for the merge kernel.
    pub const SPLIT: u32 = 1 << 8;
    /// Q, K and V rows may be copied in 16-byte vectors (bases and strides multiples of 8
    /// elements); else element by element.
    pub const QKV_VECTOR: u32 = 1 << 9;
    /// O rows may be written 4 bytes at a time (base and strides even).
    pub const O_PAIRS: u32 = 1 << 10;
    /// Each sequence's keys come from `key_starts` / `key_ends` (varlen's cumulative lengths,
    /// or paged sequences of different lengths), else every sequence has `seqlen_k`.
    pub const KEY_LENGTHS: u32 = 1 << 11;
    /// The block table and key lengths are the caller's device memory, never seen by the host.
    /// The forward kernel clamps every page to the cache and reads no keys for a length past
    /// `seqlen_k` (whatever the flag: host tables never need it), so nothing is read out of
    /// bounds; with the flag, a check launch (the merge entry point with `CHECK_LAUNCH`) records
    /// the first bad entry at `table_error` ([`crate::attention_table_error`]).
    pub const CHECK_TABLES: u32 = 1 << 12;
    /// The merge entry point checks the launch's device-side tables instead of merging
    /// (`device/attention/merge.rs`).
    pub const CHECK_LAUNCH: u32 = 1 << 13;
}

/// The record an attention launch with `attention_flags::CHECK_TABLES` keeps of the first bad
/// device-side table entry it met: four `u32` words `[what, sequence, index, value]`, all 0
/// while nothing was found. The first block to find one claims word 0 (compare-and-swap from
/// 0) and writes the other three; later finds leave it as it is until the host reads and
/// clears it.
pub mod attention_table_error {
    /// Words of the record.
    pub const WORDS: usize = 4;
    /// `block_table[sequence][index] = value` is not below the cache's page count.
    pub const PAGE_OUT_OF_RANGE: u32 = 1;
    /// Sequence `sequence`'s key length `value` (from `seqlens_k`) exceeds `seqlen_k`, the
    /// longest the launch was planned for (at most `pages_per_seq × page_size`); `index` is the
    /// sequence again. The forward kernels read no keys for it.
    pub const KEY_LENGTH_TOO_LONG: u32 = 2;
    /// Sequence `sequence`'s cumulative query lengths (`cu_seqlens_q[index]` = `value` and the
    /// entry after it) are decreasing, give a length past `seqlen_q` (the longest the launch
    /// was planned for), or end past the packed Q and O (`total_q`); `index` is the sequence.
    pub const QUERY_RANGE_INVALID: u32 = 3;
    /// Sequence `sequence`'s keys end (`value`, from `cu_seqlens_k`) past the packed K and V
    /// (`total_k`; the forward kernels cut the range there); `index` is the sequence.
    pub const KEY_RANGE_PAST_END: u32 = 4;
    /// Sequence `sequence`'s cumulative key lengths (`cu_seqlens_k[index]` and the entry after
    /// it, cut at `total_k`) give a length `value` past `seqlen_k` or are decreasing; `index`
    /// is the sequence. The forward kernels read no keys for it.
    pub const KEY_RANGE_TOO_LONG: u32 = 5;
}

/// Bits of the `flags` argument of the `moe` entry points.
pub mod moe_flags {
    /// The activations are f16.
    pub const X_F16: u32 = 1 << 0;
    /// The activations are bf16 (neither bit: f32).
    pub const X_BF16: u32 = 1 << 1;
    /// The prepare launch only quantizes (every block; the direct path needs no routing).
    pub const QUANTIZE_ONLY: u32 = 1 << 2;
}
