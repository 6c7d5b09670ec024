//! The launch ABI: one `#[repr(C)]` parameter struct per kernel entry point, defined once here
//! for both sides.
//!
//! The host fills the struct and hands `cuLaunchKernel` one pointer per field
//! ([`SgemmParams::kernel_args`]); the device's entry points are generated from the same field
//! list (`sgemm_params_entry!`), one PTX `.param` per field in the same order, and rebuild the
//! struct from them. A field added, removed, retyped or reordered changes both sides at once,
//! so the host's arguments cannot disagree with an entry point's signature.
//!
//! Why one `.param` per field rather than the struct passed by value (one `.param .b8 [N]`):
//! LLVM's NVPTX backend knows that a *pointer parameter* of a kernel points to global memory
//! and emits `ld.global`/`st.global`/`cvta.to.global` for it; a pointer loaded out of a byval
//! struct parameter stays generic (`ld`/`st`, checked with the pinned nightly), which would
//! cost every load and store of the kernels. [`GlobalPtr`] is a pointer on the device
//! (`#[repr(transparent)]`, so a PTX pointer parameter) and a plain `u64` device address on the
//! host: the same 8 bytes.

use core::marker::PhantomData;

/// A device address of global memory holding `T`s: a raw pointer in device code (so the
/// backend sees a kernel pointer parameter), a `u64` in host code (a `CUdeviceptr`).
#[repr(transparent)]
pub struct GlobalPtr<T> {
    #[cfg(target_arch = "nvptx64")]
    ptr: *mut T,
    #[cfg(not(target_arch = "nvptx64"))]
    addr: u64,
    #[cfg(not(target_arch = "nvptx64"))]
    _elements: PhantomData<T>,
}

// Manual impls: derives would require `T: Clone` etc.
impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalPtr<T> {}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> GlobalPtr<T> {
    /// The device address `addr` (a `CUdeviceptr`).
    pub const fn new(addr: u64) -> Self {
        GlobalPtr { addr, _elements: PhantomData }
    }
    /// The device address.
    pub const fn addr(&self) -> u64 {
        self.addr
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl<T> core::fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#x}", self.addr)
    }
}
#[cfg(not(target_arch = "nvptx64"))]
impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.addr == other.addr
    }
}
// SAFETY (host): a `GlobalPtr` on the host is a number, a device address; it gives no access
// to host memory, so sharing or sending it between threads is harmless.
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl<T> Send for GlobalPtr<T> {}
#[cfg(not(target_arch = "nvptx64"))]
unsafe impl<T> Sync for GlobalPtr<T> {}

#[cfg(target_arch = "nvptx64")]
impl<T> GlobalPtr<T> {
    /// The pointer, for reading.
    #[inline(always)]
    pub fn ptr(self) -> *const T {
        self.ptr
    }
    /// The pointer, for writing.
    #[inline(always)]
    pub fn ptr_mut(self) -> *mut T {
        self.ptr
    }
}

/// Defines a launch-parameter struct and, for the device, the macro `$entry!` that defines an
/// entry point taking exactly those fields (see the module docs). `$d` is a literal `$`, which
/// the inner macro's own metavariables need.
macro_rules! define_launch_params {
    ($d:tt $(#[$meta:meta])* pub struct $name:ident, entry $entry:ident { $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        #[cfg_attr(not(target_arch = "nvptx64"), derive(Debug, PartialEq))]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            /// Bytes of each field in declaration order: the sizes of the entry point's PTX
            /// parameters, in order (a CPU test compares them with the PTX).
            pub const FIELD_SIZES: [usize; [$(stringify!($field)),*].len()] = [$(core::mem::size_of::<$ty>()),*];
        }

        #[cfg(not(target_arch = "nvptx64"))]
        impl $name {
            /// One pointer per field, in declaration order: the `kernelParams` array of
            /// `cuLaunchKernel`. The pointers borrow `self`, which must outlive the launch call.
            pub fn kernel_args(&mut self) -> [*mut core::ffi::c_void; [$(stringify!($field)),*].len()] {
                [$(core::ptr::addr_of_mut!(self.$field).cast::<core::ffi::c_void>()),*]
            }
        }

        /// Defines `extern "ptx-kernel" fn $fn_name(<one parameter per field>)`, whose body
        /// sees the fields reassembled as the struct `$p`. Under rust-cuda's libNVVM backend
        /// (`cukernels_backend = "nvvm"`) an entry point is instead an `extern "C"` function
        /// marked `nvvm_internal::kernel`, as its `cuda_std::kernel` macro writes it.
        #[cfg(target_arch = "nvptx64")]
        #[allow(unused_macros)]
        macro_rules! $entry {
            ($d(#[$d attr:meta])* $d fn_name:ident, |$d p:ident| $d body:block) => {
                $d(#[$d attr])*
                #[no_mangle]
                #[allow(clippy::too_many_arguments)]
                #[cfg(not(cukernels_backend = "nvvm"))]
                pub unsafe extern "ptx-kernel" fn $d fn_name($($field: $ty),*) {
                    let $d p = $crate::abi::$name { $($field),* };
                    $d body
                }
                $d(#[$d attr])*
                #[no_mangle]
                #[allow(clippy::too_many_arguments)]
                #[cfg(cukernels_backend = "nvvm")]
                #[nvvm_internal::kernel()]
                pub unsafe extern "C" fn $d fn_name($($field: $ty),*) {
                    let $d p = $crate::abi::$name { $($field),* };
                    $d body
                }
            };
        }
        #[cfg(target_arch = "nvptx64")]
        #[allow(unused_imports)]
        pub(crate) use $entry;
    };
}

define_launch_params! { $
    /// The parameters of every SGEMM entry point (block-tile variants and `gemv`): the
    /// canonical problem of the host's plan (row-major `m × n` C; see
    /// `kernels-gpu/src/device/sgemm.rs`). Strides and leading dimensions count elements.
    /// (Types are written as full paths: the entry points are expanded in other modules.)
    pub struct SgemmParams, entry sgemm_params_entry {
        pub a: crate::abi::GlobalPtr<f32>,
        pub b: crate::abi::GlobalPtr<f32>,
        pub c: crate::abi::GlobalPtr<f32>,
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub lda: u64,
        pub ldb: u64,
        pub ldc: u64,
        pub stride_a: u64,
        pub stride_b: u64,
        pub stride_c: u64,
        pub batch: u32,
        /// [`crate::sgemm_flags`] bits.
        pub flags: u32,
        pub alpha: f32,
        pub beta: f32,
        /// A k split reduced through global memory (`sgemm_flags::SPLIT_WORKSPACE`; else 0):
        /// the partial tile (`BM × BN` floats, row-major) of split `s` of tile `t` of batch
        /// `b` at `((b·tiles + t)·splits + s)·BM·BN`, and one arrival counter per (batch,
        /// tile) at `b·tiles + t` (`tiles`: the grid's x), 0 between launches.
        pub split_partials: crate::abi::GlobalPtr<f32>,
        pub split_counters: crate::abi::GlobalPtr<u32>,
    }
}

define_launch_params! { $
    /// The parameters of every attention entry point (the forward kernels and the merge of
    /// split launches; see `kernels-gpu/src/device/attention/mod.rs`). Q, K, V and O hold
    /// 2-byte elements (f16 or bf16, by entry point); strides count elements; head_dim is
    /// contiguous. Pointers a launch does not use (no mask, no LSE, ...) are 0, and their
    /// [`crate::attention_flags`] bit is clear.
    pub struct AttentionParams, entry attention_params_entry {
        pub q: crate::abi::GlobalPtr<u16>,
        pub k: crate::abi::GlobalPtr<u16>,
        pub v: crate::abi::GlobalPtr<u16>,
        pub o: crate::abi::GlobalPtr<u16>,
        /// Log-sum-exp per row (natural log), f32: `lse[b·lse_batch_stride + h·lse_head_stride + q]`.
        pub lse: crate::abi::GlobalPtr<f32>,
        /// Additive mask `[seq_q, seq_k]` (row stride `mask_row_stride`), f16 or f32 by flag.
        pub mask: crate::abi::GlobalPtr<u8>,
        /// ALiBi slope per query head.
        pub alibi_slopes: crate::abi::GlobalPtr<f32>,
        /// Attention-sink logit per query head.
        pub sinks: crate::abi::GlobalPtr<f32>,
        /// `batch + 1` cumulative query lengths (varlen), else 0.
        pub cu_seqlens_q: crate::abi::GlobalPtr<u32>,
        /// With `KEY_LENGTHS`, sequence `b`'s keys run from `key_starts[b · key_start_step]`
        /// to `key_ends[b]`: cumulative lengths (`key_ends` one entry past `key_starts`, step
        /// 1), or one length per sequence in `key_ends` (step 0, `key_starts` a zero word).
        pub key_starts: crate::abi::GlobalPtr<u32>,
        pub key_ends: crate::abi::GlobalPtr<u32>,
        /// Paged K/V: page `block_table[b·block_table_stride + j / page_size]` holds key `j` of
        /// sequence `b`, at slot `j % page_size`; a page starts at `page · k_batch_stride`.
        pub block_table: crate::abi::GlobalPtr<u32>,
        /// With `CHECK_TABLES`: the record of the first bad table entry
        /// ([`crate::attention_table_error`]); else 0.
        pub table_error: crate::abi::GlobalPtr<u32>,
        /// Split launches: the partial output (f32) and log-sum-exp of every (split, row).
        pub partial_o: crate::abi::GlobalPtr<f32>,
        pub partial_lse: crate::abi::GlobalPtr<f32>,
        pub q_batch_stride: u64,
        pub q_seq_stride: u64,
        pub q_head_stride: u64,
        pub k_batch_stride: u64,
        pub k_seq_stride: u64,
        pub k_head_stride: u64,
        pub v_batch_stride: u64,
        pub v_seq_stride: u64,
        pub v_head_stride: u64,
        pub o_batch_stride: u64,
        pub o_seq_stride: u64,
        pub o_head_stride: u64,
        pub lse_batch_stride: u64,
        pub lse_head_stride: u64,
        pub mask_row_stride: u64,
        pub block_table_stride: u64,
        pub page_size: u32,
        /// See `key_starts`.
        pub key_start_step: u32,
        /// The paged K/V cache's last page (pages − 1): `CHECK_TABLES` checks the block table
        /// against it, and the copies clamp to it.
        pub last_page: u32,
        pub batch: u32,
        /// Query / key length of every sequence (padded batches), else the longest.
        pub seqlen_q: u32,
        pub seqlen_k: u32,
        /// Query rows of all sequences (`batch · seqlen_q`, or of the packed Q and O of
        /// varlen): a device-side cumulative query length past it gives its sequence no rows.
        pub total_q: u32,
        /// Key rows of a packed (varlen, not paged) K and V: a device-side cumulative key range
        /// is cut at it; `u32::MAX` where K/V are not packed.
        pub total_k: u32,
        pub heads_q: u32,
        pub heads_k: u32,
        /// Query heads of one KV head that one block processes together (divides
        /// `heads_q / heads_k`): its rows are (position, head) pairs.
        pub heads_packed: u32,
        /// Width of V and O rows (the merge kernel's row length).
        pub dv: u32,
        /// Blocks each row tile's keys are split over (`gridDim.z`).
        pub splits: u32,
        pub scale: f32,
        /// `cap` of `cap · tanh(x / cap)`; used with `SOFTCAP`.
        pub softcap: f32,
        /// Keys visible to query `i` (aligned bottom-right, `d = i + seqlen_k − seqlen_q`):
        /// `d − window_left ..= d + window_right`; a negative bound is unbounded. Causal is
        /// `window_right = 0`.
        pub window_left: i32,
        pub window_right: i32,
        /// [`crate::attention_flags`] bits.
        pub flags: u32,
    }
}

define_launch_params! { $
    /// The parameters of every `moe` entry point (quantizer, router, matmuls; see
    /// `kernels-gpu/src/device/moe/mod.rs`). The workspace pointers (`x_q` .. `error`) lie in
    /// the caller's workspace, at the offsets of the host's `MoeWorkspaceLayout`.
    pub struct MoeParams, entry moe_params_entry {
        /// `[experts, n, k]` weights in the entry point's block format.
        pub weights: crate::abi::GlobalPtr<u8>,
        /// `[tokens, x_rows, k]` activations, f32, f16 or bf16 ([`crate::moe_flags`]).
        pub x: crate::abi::GlobalPtr<u8>,
        /// `[tokens, n_used]` expert ids.
        pub ids: crate::abi::GlobalPtr<i32>,
        /// `[tokens, n_used, n]` output, f32.
        pub y: crate::abi::GlobalPtr<f32>,
        /// q8_1 values of every activation row, 4 to a word: `[tokens · x_rows, k / 4]`.
        pub x_q: crate::abi::GlobalPtr<u32>,
        /// q8_1 scale of every 32 activations: `[tokens · x_rows, k / 32]`.
        pub x_d: crate::abi::GlobalPtr<f32>,
        /// `experts + 1` prefix sums of the counts: expert `e`'s rows are
        /// `slot_list[row_start[e] .. row_start[e + 1]]`.
        pub row_start: crate::abi::GlobalPtr<u32>,
        /// `experts + 1` prefix sums of the tiles (`⌈count / tile_rows⌉`) per expert.
        pub tiles_before: crate::abi::GlobalPtr<u32>,
        /// The gathered slots (`token · n_used + slot`), grouped by expert.
        pub slot_list: crate::abi::GlobalPtr<u32>,
        /// `error[0]`: the smallest slot whose id is outside `0..experts` (`u32::MAX`: none).
        pub error: crate::abi::GlobalPtr<u32>,
        /// Bytes of one row of weights and of one expert's matrix.
        pub row_bytes: u64,
        pub expert_bytes: u64,
        pub experts: u32,
        pub n: u32,
        pub k: u32,
        pub tokens: u32,
        pub n_used: u32,
        /// Activation rows per token: 1 or `n_used`.
        pub x_rows: u32,
        /// Experts computed: `expert_first .. expert_last`.
        pub expert_first: u32,
        pub expert_last: u32,
        /// Rows per tile of the matmul launched after the router (the router counts tiles of it).
        pub tile_rows: u32,
        /// [`crate::moe_flags`] bits.
        pub flags: u32,
    }
}
