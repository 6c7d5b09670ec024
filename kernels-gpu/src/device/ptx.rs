//! The few PTX instructions Rust has no intrinsic for, each wrapped once here, plus thin names
//! over `core::arch::nvptx` so kernels read as plain code.
//!
//! Every `unsafe fn` here is unsafe for the reason its instruction is: it touches memory through
//! raw addresses (the caller guarantees they are valid) or it must be reached by every thread of
//! the block (barriers).

use core::arch::asm;
use core::arch::nvptx;

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reads a special register; no memory access.
    unsafe { nvptx::_thread_idx_x() as u32 }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// `blockIdx.z`.
#[inline(always)]
pub fn block_idx_z() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_z() as u32 }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_block_idx_y() as u32 }
}

/// `gridDim.y`.
#[inline(always)]
pub fn grid_dim_y() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_y() as u32 }
}

/// `gridDim.z`.
#[inline(always)]
pub fn grid_dim_z() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_z() as u32 }
}

/// `__syncthreads()`: every thread of the block must reach it.
#[inline(always)]
pub unsafe fn sync_threads() {
    nvptx::_syncthreads()
}

/// Alignment of the dynamic shared memory region: 128 bytes, what tensor-core (`ldmatrix`,
/// swizzled tiles) and bulk-copy (TMA) paths need; the region is declared with the alignment of
/// the type it is asked for as.
#[repr(C, align(128))]
struct DynamicSharedAlignment;

/// The dynamic shared memory of this block (`extern __shared__`, `.align 128`), as a generic
/// pointer whose loads and stores LLVM lowers to `ld.shared` / `st.shared`.
#[inline(always)]
pub fn dynamic_smem() -> *mut f32 {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<DynamicSharedAlignment>().cast::<f32>()
}

/// The 32-bit shared-state-space address of a generic pointer into shared memory, as
/// `cp.async` and `ldmatrix` take it.
#[inline(always)]
pub fn shared_address(p: *const f32) -> u32 {
    let out: u64;
    // SAFETY: address conversion only; no memory access.
    unsafe {
        asm!("cvta.to.shared.u64 {o}, {i};", o = out(reg64) out, i = in(reg64) p as u64, options(pure, nomem, nostack));
    }
    out as u32
}

/// `fma.rn.f32`: `a * b + c` with one rounding.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::intrinsics::fmaf32(a, b, c)
}

/// Asynchronous copy of 4 bytes global → shared (`cp.async.ca`, sm_80+). Copies `src_bytes`
/// (0 or 4) and zero-fills the rest, so a masked-off element lands in shared memory as 0.0.
///
/// Safety: `smem` is a shared address inside this block's allocation; when `src_bytes > 0`,
/// `global` points to 4 readable, 4-byte aligned bytes.
#[inline(always)]
pub unsafe fn cp_async_4(smem: u32, global: *const f32, src_bytes: u32) {
    asm!("cp.async.ca.shared.global [{s}], [{g}], 4, {n};", s = in(reg32) smem, g = in(reg64) global, n = in(reg32) src_bytes, options(nostack));
}

/// Asynchronous copy of 16 bytes global → shared (`cp.async.cg`, L2 only, sm_80+). Copies
/// `src_bytes` (0..=16) and zero-fills the rest.
///
/// Safety: `smem` and `global` are 16-byte aligned; `smem` lies in this block's allocation;
/// `global` has `src_bytes` readable bytes.
#[inline(always)]
pub unsafe fn cp_async_16(smem: u32, global: *const f32, src_bytes: u32) {
    asm!("cp.async.cg.shared.global [{s}], [{g}], 16, {n};", s = in(reg32) smem, g = in(reg64) global, n = in(reg32) src_bytes, options(nostack));
}

/// [`cp_async_4`] of an element known to be inside the matrix: no source size, no zero-fill.
///
/// Safety: as [`cp_async_4`] with `src_bytes = 4`.
#[inline(always)]
pub unsafe fn cp_async_4_inside(smem: u32, global: *const f32) {
    asm!("cp.async.ca.shared.global [{s}], [{g}], 4;", s = in(reg32) smem, g = in(reg64) global, options(nostack));
}

/// [`cp_async_16`] of a vector known to be inside the matrix: no source size, no zero-fill.
///
/// Safety: as [`cp_async_16`] with `src_bytes = 16`.
#[inline(always)]
pub unsafe fn cp_async_16_inside(smem: u32, global: *const f32) {
    asm!("cp.async.cg.shared.global [{s}], [{g}], 16;", s = in(reg32) smem, g = in(reg64) global, options(nostack));
}

/// Closes the group of `cp.async` copies issued so far by this thread.
#[inline(always)]
pub unsafe fn cp_async_commit() {
    asm!("cp.async.commit_group;", options(nostack));
}

/// Waits until at most `pending` of this thread's committed groups are still in flight (0..=7).
/// Other threads' copies are visible only after a following barrier. `pending` must be a
/// compile-time constant after inlining (the instruction takes an immediate); the match folds
/// away.
#[inline(always)]
pub unsafe fn cp_async_wait(pending: usize) {
    macro_rules! wait {
        ($n:literal) => {
            asm!(concat!("cp.async.wait_group ", $n, ";"), options(nostack))
        };
    }
    match pending {
        0 => wait!(0),
        1 => wait!(1),
        2 => wait!(2),
        3 => wait!(3),
        4 => wait!(4),
        5 => wait!(5),
        6 => wait!(6),
        _ => wait!(7),
    }
}

/// This block's rank in its thread-block cluster (`%cluster_ctarank`, sm_90+): 0 when the
/// kernel was launched without clusters.
#[inline(always)]
pub fn cluster_rank() -> u32 {
    let rank: u32;
    // SAFETY: reads a special register; no memory access.
    unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) rank, options(pure, nomem, nostack)) };
    rank
}

/// A barrier over every thread of every block of the cluster (sm_90+). `arrive` has release and
/// `wait` acquire semantics by default (PTX 7.8 has no modifiers to spell them out), so
/// shared-memory writes made before it by any block of the cluster are visible to every
/// block of the cluster after it. Every thread of the cluster must reach it. Not the
/// `.aligned` form: that one requires every thread of a warp to execute the same instruction,
/// which an `asm!` block (unlike LLVM's convergent barrier intrinsics) does not promise after
/// optimization.
#[inline(always)]
pub unsafe fn cluster_sync() {
    asm!("barrier.cluster.arrive;", "barrier.cluster.wait;", options(nostack));
}

/// The address, in the cluster's shared window, of the same byte `smem` (a shared address of
/// this block) in the shared memory of the cluster's block `rank` (`mapa`, sm_90+).
#[inline(always)]
pub fn cluster_shared_address(smem: u32, rank: u32) -> u32 {
    let out: u32;
    // SAFETY: address arithmetic only; no memory access.
    unsafe {
        asm!("mapa.shared::cluster.u32 {o}, {a}, {r};", o = out(reg32) out, a = in(reg32) smem, r = in(reg32) rank, options(pure, nomem, nostack))
    };
    out
}

/// Reads 16 bytes of another (or this) block's shared memory through the cluster window
/// (`ld.shared::cluster.v4.f32`, sm_90+).
///
/// Safety: `addr` comes from [`cluster_shared_address`], is 16-byte aligned, lies inside that
/// block's allocation, and that block has not exited (a later [`cluster_sync`] keeps it alive).
#[inline(always)]
pub unsafe fn load_cluster_shared_f32x4(addr: u32) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!(
        "ld.shared::cluster.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg32) addr,
        options(nostack, readonly)
    );
    [x, y, z, w]
}

/// Returns `x` unchanged, hidden from the optimizer. An `asm!` without `pure` counts as having
/// side effects, so LLVM neither hoists it out of a loop nor merges two of them. Used on loop
/// inputs of address arithmetic: the few integer instructions are then recomputed each k-step
/// instead of being hoisted and kept live across the whole main loop, where their registers
/// would push the accumulators into local memory.
#[inline(always)]
pub fn opaque<T: Opaque>(x: T) -> T {
    x.opaque()
}

/// Types [`opaque`] handles.
pub trait Opaque: Copy {
    fn opaque(self) -> Self;
}

impl Opaque for u64 {
    #[inline(always)]
    fn opaque(self) -> u64 {
        let out: u64;
        // SAFETY: a register move; no memory access.
        unsafe { asm!("mov.b64 {o}, {i};", o = out(reg64) out, i = in(reg64) self, options(nomem, nostack)) };
        out
    }
}

impl Opaque for u32 {
    #[inline(always)]
    fn opaque(self) -> u32 {
        let out: u32;
        // SAFETY: a register move; no memory access.
        unsafe { asm!("mov.b32 {o}, {i};", o = out(reg32) out, i = in(reg32) self, options(nomem, nostack)) };
        out
    }
}

impl Opaque for *const f32 {
    #[inline(always)]
    fn opaque(self) -> *const f32 {
        (self as u64).opaque() as *const f32
    }
}
