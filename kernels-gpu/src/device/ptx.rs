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

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reads a special register.
    unsafe { nvptx::_grid_dim_x() as u32 }
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

/// `__syncwarp()`: the lanes of the warp wait for each other, and each lane's shared-memory
/// writes before it are visible to the other lanes after it. Every lane of the warp must reach
/// it (mask: all 32 lanes).
#[inline(always)]
pub unsafe fn sync_warp() {
    // (Not `nomem`: it orders the shared-memory accesses around it.)
    asm!("bar.warp.sync 0xffffffff;", options(nostack))
}

/// Alignment of the dynamic shared memory region: 128 bytes, what tensor-core (`ldmatrix`,
/// swizzled tiles) and bulk-copy (TMA) paths need; the region is declared with the alignment of
/// the type it is asked for as.
#[repr(C, align(128))]
struct DynamicSharedAlignment;

/// The dynamic shared memory of this block (`extern __shared__`, `.align 128`), as a generic
/// pointer whose loads and stores LLVM lowers to `ld.shared` / `st.shared`.
#[cfg(not(cukernels_backend = "nvvm"))]
#[inline(always)]
pub fn dynamic_smem() -> *mut f32 {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<DynamicSharedAlignment>().cast::<f32>()
}

/// [`dynamic_smem`] under rust-cuda's libNVVM backend, as its `cuda_std` declares it: an
/// extern static in the shared address space, which becomes
/// `.extern .shared .b8 cukernels_dynamic_smem[]` (the backend writes `.align 1` for a
/// zero-sized type; none of our kernels has static shared memory, so the dynamic window starts
/// at the block's shared base, aligned for every access).
#[cfg(cukernels_backend = "nvvm")]
#[inline(always)]
pub fn dynamic_smem() -> *mut f32 {
    unsafe extern "C" {
        #[nvvm_internal::addrspace(3)]
        #[link_name = "cukernels_dynamic_smem"]
        static DYNAMIC_SMEM: core::cell::UnsafeCell<DynamicSharedAlignment>;
    }
    // SAFETY: taking the address of the extern declaration reads nothing.
    unsafe { DYNAMIC_SMEM.get().cast::<f32>() }
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

/// 16 bytes from global memory in one `ld.global.v4.u32` (LLVM splits a 16-byte struct copy
/// into 8-byte loads, and through local memory when the copy is conditional).
///
/// Safety: `ptr` is valid for 16 bytes and 16-byte aligned.
#[inline(always)]
pub unsafe fn load_global_u32x4(ptr: *const u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!(
        "ld.global.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];",
        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) ptr,
        options(nostack, readonly, pure)
    );
    [x, y, z, w]
}

/// A memory fence at GPU scope with acquire and release semantics (`fence.acq_rel.gpu`): the
/// writes this thread made (or saw, through a barrier) before it are visible to any thread of
/// the GPU that synchronizes with a later write of this thread, and the writes of others that
/// this thread synchronized with before it are visible to its reads after it.
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: orders memory accesses; reads and writes nothing itself.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) };
}

/// Counts an arrival at `*counter` and returns the count before it, wrapping to 0 after
/// `last` (`atom.relaxed.gpu.global.inc.u32`: the thread that reads `last` is the last of
/// `last + 1` arrivals, and leaves the counter at 0, ready for the next launch).
///
/// Safety: `counter` is a valid, 4-byte aligned global address that other threads access only
/// atomically.
#[inline(always)]
pub unsafe fn arrive_wrapping_gpu(counter: *mut u32, last: u32) -> u32 {
    let old: u32;
    asm!(
        "atom.relaxed.gpu.global.inc.u32 {o}, [{a}], {b};",
        o = out(reg32) old, a = in(reg64) counter, b = in(reg32) last,
        options(nostack)
    );
    old
}

/// Reads 16 bytes that another block of this grid wrote (`ld.relaxed.gpu.global.v4.f32`: from
/// the GPU's coherent level, never from a line this SM's L1 cached before the write).
///
/// Safety: `ptr` is valid for 16 bytes and 16-byte aligned; the writer's stores are ordered
/// before this read by a fence and an atomic the reader observed ([`fence_gpu`],
/// [`arrive_wrapping_gpu`]).
#[inline(always)]
pub unsafe fn load_gpu_coherent_f32x4(ptr: *const f32) -> [f32; 4] {
    let (x, y, z, w): (f32, f32, f32, f32);
    asm!(
        "ld.relaxed.gpu.global.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];",
        x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w, a = in(reg64) ptr,
        options(nostack, readonly)
    );
    [x, y, z, w]
}

/// Reads a float that another block of this grid wrote (`ld.relaxed.gpu.global.f32`; see
/// [`load_gpu_coherent_f32x4`]).
///
/// Safety: `ptr` is valid and 4-byte aligned; the writer's store is ordered before this read
/// as for [`load_gpu_coherent_f32x4`].
#[inline(always)]
pub unsafe fn load_gpu_coherent_f32(ptr: *const f32) -> f32 {
    let x: f32;
    asm!("ld.relaxed.gpu.global.f32 {x}, [{a}];", x = out(reg32) x, a = in(reg64) ptr, options(nostack, readonly));
    x
}

/// Programmatic dependent launch (sm_90 and newer): the kernels of this build can overlap their
/// start with the end of the launch before them on the stream.
const HAS_PROGRAMMATIC_LAUNCH: bool = super::BUILD_CONFIG.has_programmatic_launch();

/// Lets the next launch on the stream, if the host launched it as a programmatic dependent,
/// start now (`griddepcontrol.launch_dependents`): its blocks then wait in
/// [`wait_for_prerequisite_grid`] for this grid's completion, not for their own launch. A no-op
/// before sm_90 (the dependent is then an ordinary launch that starts after this grid ends).
#[inline(always)]
pub fn allow_dependent_launch() {
    if HAS_PROGRAMMATIC_LAUNCH {
        // SAFETY: a scheduling hint with no memory effect of its own.
        unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) };
    }
}

/// Waits until the grid this one depends on (the launch before it on the stream) has completed
/// and its memory writes are visible (`griddepcontrol.wait`). Returns at once when the kernel
/// was launched normally, and before sm_90, where every launch is. Loads placed before it in
/// the program (of inputs that earlier launches wrote, not the prerequisite grid) are issued
/// before it: the asm counts as touching memory, so the compiler moves no memory access across
/// it.
#[inline(always)]
pub fn wait_for_prerequisite_grid() {
    if HAS_PROGRAMMATIC_LAUNCH {
        // SAFETY: a wait with no memory effect of its own beyond ordering.
        unsafe { asm!("griddepcontrol.wait;", options(nostack)) };
    }
}

/// Asks for the 128-byte line holding `ptr` to be brought into L2 (`prefetch.global.L2`): no
/// register waits for it, and a fault is impossible (a prefetch of an invalid address is
/// dropped), but callers still pass addresses inside their buffers.
#[inline(always)]
pub fn prefetch_global_l2(ptr: *const u8) {
    // SAFETY: a prefetch reads nothing into the program and never faults.
    unsafe { asm!("prefetch.global.L2 [{a}];", a = in(reg64) ptr, options(nostack, readonly, preserves_flags)) };
}

/// Asks `ptxas` not to unroll the loop whose body this opens (`.pragma "nounroll"`, which
/// PTX allows in a loop's header block), where code size matters more than a few instructions
/// of loop overhead. ptxas sees through [`opaque`] (a `mov`), so a loop whose step LLVM was
/// kept from unrolling may still be unrolled there.
#[inline(always)]
pub fn no_unroll() {
    // SAFETY: a compiler directive; no instruction, no memory access.
    unsafe { asm!(".pragma \"nounroll\";", options(nomem, nostack, preserves_flags)) };
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

/// The range of a loop that must stay rolled: one copy of its body (code size, or a body that
/// alternates two register sets by itself). A constant trip count is hidden by the caller with
/// [`opaque`] (`rolled(0..opaque(n))`), else any compiler unrolls the loop whole. The nightly
/// nvptx backend then leaves the loop rolled, and this is the range itself. The rust-cuda
/// pipeline (LLVM 19's `O3` in `rust-cuda/build.rs`, then libNVVM) still unrolled loops of
/// unknown trip count at run time: the SGEMM k loops came out 8 times over with a remainder
/// copy, 18 copies of `compute_stage` in `sgemm_medium_nt` against the nvptx build's 2, and
/// 768 bytes of spills at its register cap (none with this). So under that backend the
/// counter itself goes through [`opaque`] at every trip: no trip count is computable, and no
/// unroller can copy the body.
#[cfg(not(cukernels_backend = "nvvm"))]
#[inline(always)]
pub fn rolled(range: core::ops::Range<u32>) -> core::ops::Range<u32> {
    range
}

/// [`rolled`] under rust-cuda's libNVVM backend.
#[cfg(cukernels_backend = "nvvm")]
#[inline(always)]
pub fn rolled(range: core::ops::Range<u32>) -> RolledRange {
    RolledRange { next: range.start, end: range.end }
}

/// The range [`rolled`] returns under libNVVM: its counter is [`opaque`] after every step.
#[cfg(cukernels_backend = "nvvm")]
pub struct RolledRange {
    next: u32,
    end: u32,
}

#[cfg(cukernels_backend = "nvvm")]
impl Iterator for RolledRange {
    type Item = u32;
    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next = opaque(i + 1);
        Some(i)
    }
}

/// The next value of the counter of a `while` loop that must stay rolled (the same need as
/// [`rolled`], for a loop whose counter is a `usize` index that other code also uses):
/// `i + 1`, so that the nvptx build's code is exactly that of a plain `i += 1`. Under rust-cuda's
/// libNVVM backend, `opaque(i + 1)`: no trip count is computable and no unroller can copy the
/// body (the attention forward's Q·Kᵀ loop with Q from shared memory came out of that pipeline
/// with 120 `mma` where the nvptx build has 88, and spilled at its register cap).
#[cfg(not(cukernels_backend = "nvvm"))]
#[inline(always)]
pub fn rolled_step(i: usize) -> usize {
    i + 1
}

/// [`rolled_step`] under rust-cuda's libNVVM backend.
#[cfg(cukernels_backend = "nvvm")]
#[inline(always)]
pub fn rolled_step(i: usize) -> usize {
    opaque((i + 1) as u64) as usize
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

// ---- Matrix fragments (attention) -------------------------------------------------------
//
// The `mma.m16n8k16` fragment layout, which every attention matrix path shares: lane
// `4·g + t` (g = lane / 4, t = lane % 4) holds, as pairs of 2-byte elements in one `u32`,
// - of A (16×16, row-major): rows g and g + 8, columns 2t, 2t+1 and 2t + 8, 2t + 9
//   (`a[0]` = (g, 2t..), `a[1]` = (g + 8, 2t..), `a[2]` = (g, 2t + 8..), `a[3]` = (g + 8, 2t + 8..));
// - of B (16×8, k × n): column g, rows 2t, 2t+1 (`b[0]`) and 2t + 8, 2t + 9 (`b[1]`);
// - of C (16×8, f32): rows g (`c[0]`, `c[1]`) and g + 8 (`c[2]`, `c[3]`), columns 2t, 2t+1.

/// Defines `$name(a, b, c) -> c + a·b` for the `mma.sync.aligned` instruction `$instr` whose
/// operands are four A registers, two B registers and four C/D registers of type `$acc`:
/// `m16n8k16` with f16/bf16 inputs and f32 accumulators, and `m16n8k32` with s8 inputs and s32
/// accumulators (sm_80+), which have the same fragment shapes (lane layouts above and below).
macro_rules! mma_a4_b2_c4 {
    ($name:ident, $instr:literal, $acc:ty) => {
        #[doc = concat!("`mma.sync.aligned.", $instr, "` (sm_80+): `c + a·b`.")]
        #[inline(always)]
        pub fn $name(a: [u32; 4], b: [u32; 2], c: [$acc; 4]) -> [$acc; 4] {
            let (d0, d1, d2, d3): ($acc, $acc, $acc, $acc);
            // SAFETY: register-only instruction; every lane of the warp executes it together
            // (the kernels call it outside any lane-divergent branch).
            unsafe {
                asm!(
                    concat!("mma.sync.aligned.", $instr, " {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                    d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                    c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                    options(pure, nomem, nostack)
                );
            }
            [d0, d1, d2, d3]
        }
    };
}

/// As [`mma_a4_b2_c4`], for the shapes with two A registers and one B register: `m16n8k8` with
/// f16 inputs (sm_75+) and `m16n8k16` with s8 inputs (sm_80+).
macro_rules! mma_a2_b1_c4 {
    ($name:ident, $instr:literal, $acc:ty, $since:literal) => {
        #[doc = concat!("`mma.sync.aligned.", $instr, "` (", $since, "+): `c + a·b`.")]
        #[inline(always)]
        pub fn $name(a: [u32; 2], b: u32, c: [$acc; 4]) -> [$acc; 4] {
            let (d0, d1, d2, d3): ($acc, $acc, $acc, $acc);
            // SAFETY: as in `mma_a4_b2_c4`.
            unsafe {
                asm!(
                    concat!("mma.sync.aligned.", $instr, " {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}}}, {{{b0}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                    d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], b0 = in(reg32) b,
                    c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                    options(pure, nomem, nostack)
                );
            }
            [d0, d1, d2, d3]
        }
    };
}
mma_a4_b2_c4!(mma_m16n8k16_f16, "m16n8k16.row.col.f32.f16.f16.f32", f32);
mma_a4_b2_c4!(mma_m16n8k16_bf16, "m16n8k16.row.col.f32.bf16.bf16.f32", f32);

// `m16n8k8` (f16): A is 16×8 (`a[0]` = (g, 2t..), `a[1]` = (g + 8, 2t..)), B 8×8 (`b` = rows
// 2t, 2t+1 of column g).
mma_a2_b1_c4!(mma_m16n8k8_f16, "m16n8k8.row.col.f32.f16.f16.f32", f32, "sm_75");

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_75+): lanes 8i..8i+7 give the row addresses
/// of matrix i; each lane receives, of each matrix i, the pair of elements (row lane / 4,
/// columns 2·(lane % 4)..) in `out[i]`.
///
/// Safety: every lane's `addr` is a 16-byte aligned shared address of 16 readable bytes of
/// this block; every lane of the warp executes it together.
#[inline(always)]
pub unsafe fn ldmatrix_x4(addr: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    asm!(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
        r0 = out(reg32) r0, r1 = out(reg32) r1, r2 = out(reg32) r2, r3 = out(reg32) r3, a = in(reg32) addr,
        options(nostack, readonly)
    );
    [r0, r1, r2, r3]
}

/// [`ldmatrix_x4`] with `.trans`: each lane receives of matrix i the elements (rows
/// 2·(lane % 4), 2·(lane % 4) + 1; column lane / 4), i.e. the fragment of the transpose.
///
/// Safety: as [`ldmatrix_x4`].
#[inline(always)]
pub unsafe fn ldmatrix_x4_trans(addr: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    asm!(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
        r0 = out(reg32) r0, r1 = out(reg32) r1, r2 = out(reg32) r2, r3 = out(reg32) r3, a = in(reg32) addr,
        options(nostack, readonly)
    );
    [r0, r1, r2, r3]
}

/// `shfl.sync.idx.b32` over the whole warp: the value of `x` in lane `src`.
#[inline(always)]
pub fn shfl_idx(x: u32, src: u32) -> u32 {
    let out: u32;
    // SAFETY: register exchange within the warp; every lane executes it together.
    unsafe { asm!("shfl.sync.idx.b32 {o}, {x}, {s}, 0x1f, 0xffffffff;", o = out(reg32) out, x = in(reg32) x, s = in(reg32) src, options(nomem, nostack)) };
    out
}

/// `vote.sync.ballot.b32` over the whole warp: bit `l` set where lane `l`'s `predicate` holds.
#[inline(always)]
pub fn ballot(predicate: bool) -> u32 {
    let out: u32;
    // SAFETY: register-only vote within the warp; every lane executes it together.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {o}, p, 0xffffffff; }}",
            o = out(reg32) out, x = in(reg32) predicate as u32, options(nomem, nostack)
        )
    };
    out
}

/// `shfl.sync.bfly.b32` over the whole warp: the value of `x` in lane `lane ^ mask`.
#[inline(always)]
pub fn shfl_xor_f32(x: f32, mask: u32) -> f32 {
    let out: f32;
    // SAFETY: as `shfl_idx`.
    unsafe { asm!("shfl.sync.bfly.b32 {o}, {x}, {m}, 0x1f, 0xffffffff;", o = out(reg32) out, x = in(reg32) x, m = in(reg32) mask, options(nomem, nostack)) };
    out
}

/// `shfl.sync.up.b32` over the whole warp: the value of `x` in lane `lane − delta`, or this
/// lane's own `x` where that lane does not exist (the building block of a warp prefix sum).
#[inline(always)]
pub fn shfl_up_u32(x: u32, delta: u32) -> u32 {
    let out: u32;
    // SAFETY: as `shfl_idx`.
    unsafe { asm!("shfl.sync.up.b32 {o}, {x}, {d}, 0x0, 0xffffffff;", o = out(reg32) out, x = in(reg32) x, d = in(reg32) delta, options(nomem, nostack)) };
    out
}

/// `ex2.approx.ftz.f32`: 2^x (2 ulp; `-inf` gives 0).
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only.
    unsafe { asm!("ex2.approx.ftz.f32 {o}, {x};", o = out(reg32) out, x = in(reg32) x, options(pure, nomem, nostack)) };
    out
}

/// `lg2.approx.ftz.f32`: log2(x).
#[inline(always)]
pub fn log2(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only.
    unsafe { asm!("lg2.approx.ftz.f32 {o}, {x};", o = out(reg32) out, x = in(reg32) x, options(pure, nomem, nostack)) };
    out
}

/// `rcp.approx.ftz.f32`: 1/x.
#[inline(always)]
pub fn rcp(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only.
    unsafe { asm!("rcp.approx.ftz.f32 {o}, {x};", o = out(reg32) out, x = in(reg32) x, options(pure, nomem, nostack)) };
    out
}

// ---- Int8 matrix fragments (MoE) --------------------------------------------------------
//
// `s8 × s8 → s32` products, lane `4·g + t` holding 4 bytes per `u32`:
// - `m16n8k32`: A (16×32, row-major) `a[0]` = (g, 4t..4t+4), `a[1]` = (g + 8, 4t..),
//   `a[2]` = (g, 16 + 4t..), `a[3]` = (g + 8, 16 + 4t..); B (32×8, k × n) `b[0]` = rows
//   4t..4t+4 of column g, `b[1]` = rows 16 + 4t..; C rows g (`c[0]`, `c[1]`) and g + 8
//   (`c[2]`, `c[3]`), columns 2t, 2t + 1.
// - `m16n8k16`: the first 16 of k of the above (`a[0]`, `a[1]`, `b[0]`).
// - `m8n8k16` (sm_75): the top 8 rows of `m16n8k16` (`a[0]`, `b[0]`, `c[0..2]`).
// Without `.satfinite` the sums wrap; the callers' sums are bounded far below 2^31.

mma_a4_b2_c4!(mma_m16n8k32_s8, "m16n8k32.row.col.s32.s8.s8.s32", i32);
mma_a2_b1_c4!(mma_m16n8k16_s8, "m16n8k16.row.col.s32.s8.s8.s32", i32, "sm_80");

/// `mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32` (sm_75+): `c + a·b`.
#[inline(always)]
pub fn mma_m8n8k16_s8(a: u32, b: u32, c: [i32; 2]) -> [i32; 2] {
    let (d0, d1): (i32, i32);
    // SAFETY: as in `mma_a4_b2_c4`.
    unsafe {
        asm!(
            "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {{{d0}, {d1}}}, {{{a0}}}, {{{b0}}}, {{{c0}, {c1}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, a0 = in(reg32) a, b0 = in(reg32) b,
            c0 = in(reg32) c[0], c1 = in(reg32) c[1],
            options(pure, nomem, nostack)
        );
    }
    [d0, d1]
}

/// `dp4a.s32.s32`: `c` plus the dot product of the four signed bytes of `a` and of `b`
/// (sm_61 and newer: every architecture cukernels builds).
#[inline(always)]
pub fn dp4a(a: u32, b: u32, c: i32) -> i32 {
    let out: i32;
    // SAFETY: register-only.
    unsafe { asm!("dp4a.s32.s32 {o}, {a}, {b}, {c};", o = out(reg32) out, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c, options(pure, nomem, nostack)) };
    out
}

/// `shf.r.clamp.b32`: the low 32 bits of the 64-bit `hi:lo` shifted right by `shift`, clamped
/// to 32 (which gives `hi`), in one instruction.
#[inline(always)]
pub fn funnel_shift_right(lo: u32, hi: u32, shift: u32) -> u32 {
    let out: u32;
    // SAFETY: register-only.
    unsafe { asm!("shf.r.clamp.b32 {o}, {lo}, {hi}, {s};", o = out(reg32) out, lo = in(reg32) lo, hi = in(reg32) hi, s = in(reg32) shift, options(pure, nomem, nostack)) };
    out
}

/// f16 (the low 16 bits of `h`) to f32, exactly.
#[inline(always)]
pub fn f16_to_f32(h: u32) -> f32 {
    let out: f32;
    let h16 = h as u16;
    // SAFETY: register-only.
    unsafe { asm!("cvt.f32.f16 {o}, {h};", o = out(reg32) out, h = in(reg16) h16, options(pure, nomem, nostack)) };
    out
}

/// `cvt.rn.{f16,bf16}x2.f32` (one instruction for two values) exists from sm_80 on.
const HAS_PAIR_CONVERT: bool = super::BUILD_CONFIG.sm() >= 80;

/// Two f32 to two f16, rounded to nearest even, packed: `lo` in the low half.
#[inline(always)]
pub fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    if HAS_PAIR_CONVERT {
        let out: u32;
        // SAFETY: register-only. The first source goes to the upper half.
        unsafe { asm!("cvt.rn.f16x2.f32 {o}, {h}, {l};", o = out(reg32) out, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack)) };
        return out;
    }
    let (l, h): (u16, u16);
    // SAFETY: register-only.
    unsafe {
        asm!("cvt.rn.f16.f32 {l}, {x};", l = out(reg16) l, x = in(reg32) lo, options(pure, nomem, nostack));
        asm!("cvt.rn.f16.f32 {h}, {x};", h = out(reg16) h, x = in(reg32) hi, options(pure, nomem, nostack));
    }
    l as u32 | (h as u32) << 16
}

/// Two f32 to two bf16, rounded to nearest even (NaN stays NaN), packed: `lo` in the low
/// half. One instruction from sm_80 on; integer arithmetic before (`cvt.rn.bf16` is sm_80+).
#[inline(always)]
pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    #[inline(always)]
    fn round(x: f32) -> u32 {
        let bits = x.to_bits();
        if x != x {
            return (bits >> 16) | 0x40;
        }
        bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16
    }
    if HAS_PAIR_CONVERT {
        let out: u32;
        // SAFETY: register-only. The first source goes to the upper half.
        unsafe { asm!("cvt.rn.bf16x2.f32 {o}, {h}, {l};", o = out(reg32) out, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack)) };
        return out;
    }
    round(lo) | round(hi) << 16
}

// ---- Warpgroup matrix multiply (`wgmma`, sm_90a only) ---------------------------------------
//
// A warpgroup (4 consecutive warps, 128 threads) multiplies a 64 × 16 tile of A by a 16 × N
// tile of B into a 64 × N f32 accumulator that its 128 threads hold: warp `w` of the group
// holds rows `16w ..`, in exactly the `mma.m16n8k16` C layout of one 16-row tile per 8 columns
// (`acc[n8]` = rows g and g + 8, columns 8·n8 + 2t, + 1). A comes from shared memory (a
// descriptor) or from registers (the `mma.m16n8k16` A fragment of the warp's 16 rows); B always
// from shared memory. The instruction is asynchronous: it is issued by `wgmma.mma_async`,
// closed into a group by [`wgmma_commit`], and its results (and its register inputs) may be
// touched only after [`wgmma_wait`] has waited for that group. Before the first `wgmma` of a
// batch, [`wgmma_fence`] orders the registers' earlier writes before the asynchronous reads.
//
// The accumulators flow through every `asm!` of a batch as `inout` operands (the multiplies
// and, after the wait, [`wgmma_hold`]), so the compiler reads them only after the wait.

/// A shared-memory matrix descriptor of `wgmma` for the 128-byte swizzled layout (PTX ISA,
/// "Matrix Descriptor Format"; swizzle mode 1 in bits 62-63): `addr` is the shared address of
/// the operand's first element (its atoms of 8 rows × 128 bytes at 1024-byte boundaries, so the
/// base offset is 0), `leading` the bytes from one 64-element column of atoms to the next
/// (MN-major operands; unused by K-major ones, whose k-steps move `addr`), `stride` the bytes
/// from one 8-row atom to the next.
#[inline(always)]
pub const fn wgmma_descriptor_sw128(addr: u32, leading: u32, stride: u32) -> u64 {
    ((addr as u64 >> 4) & 0x3fff) | (((leading as u64 >> 4) & 0x3fff) << 16) | (((stride as u64 >> 4) & 0x3fff) << 32) | (1 << 62)
}

/// `wgmma.fence.sync.aligned`: the registers written before it (accumulators, A fragments)
/// are what the following `wgmma`s read. The whole warpgroup executes it together.
#[inline(always)]
pub unsafe fn wgmma_fence() {
    asm!("wgmma.fence.sync.aligned;", options(nostack));
}

/// `wgmma.commit_group.sync.aligned`: closes the `wgmma`s issued since the last commit into one
/// group.
#[inline(always)]
pub unsafe fn wgmma_commit() {
    asm!("wgmma.commit_group.sync.aligned;", options(nostack));
}

/// `wgmma.wait_group.sync.aligned pending`: waits until at most `pending` (0 or 1) of the most
/// recent groups are unfinished. Then [`wgmma_hold`] the accumulators of every finished group
/// before reading them.
#[inline(always)]
pub unsafe fn wgmma_wait(pending: usize) {
    if pending == 0 {
        asm!("wgmma.wait_group.sync.aligned 0;", options(nostack));
    } else {
        asm!("wgmma.wait_group.sync.aligned 1;", options(nostack));
    }
}

/// Passes each accumulator through an empty `asm!` (after [`wgmma_wait`]): no instruction, but
/// the compiler may not read a value the asynchronous multiply writes before this point.
#[inline(always)]
pub fn wgmma_hold(acc: &mut [[f32; 4]]) {
    for fragment in acc.iter_mut() {
        for x in fragment.iter_mut() {
            // SAFETY: emits nothing.
            unsafe { asm!("// {x}", x = inout(reg32) *x, options(nomem, nostack, preserves_flags)) };
        }
    }
}

/// `fence.proxy.async.shared::cta`: this thread's earlier writes to shared memory (ordinary
/// stores and `cp.async`) become visible to the asynchronous proxy that `wgmma` reads through.
/// A barrier after it extends that to the block.
#[inline(always)]
pub fn fence_proxy_async_shared() {
    // SAFETY: a memory fence; no address.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}

/// One `wgmma.mma_async` of width `$n` on the accumulator `$acc` (`[[f32; 4]; $n / 8]`, whose
/// operands `$first`, `$rest` number `0 .. $n/2`): `$types` the input types, `$a` the A operand's
/// text (a descriptor or four registers), `$immediates` what follows the `scale-d` predicate
/// (the A and B scales and transposes), `$operands` the named operands `$a` and `{b}` use.
macro_rules! wgmma_asm {
    ($n:literal, $types:literal, $a:literal, $immediates:literal, [$first:literal $(, $rest:literal)*], $acc:ident, $scale_d:ident, $($operands:tt)*) => {
        asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, {scale_d}, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $types, " {{",
                "{", $first, "}" $(, ", {", $rest, "}")*,
                "}}, ", $a, ", {b}, p, ", $immediates, "; }}"
            ),
            inout(reg32) $acc[$first / 4][$first % 4], $(inout(reg32) $acc[$rest / 4][$rest % 4],)*
            scale_d = in(reg32) $scale_d, $($operands)*
            options(nostack)
        )
    };
}

/// Defines the `wgmma` wrappers of one width `N` (the accumulator `[[f32; 4]; N / 8]`): both
/// operands from shared memory (`$ss`, K-major A and B: `Q·Kᵀ`) and A from registers (`$rs`, B
/// MN-major, i.e. transposed: `P·V` with V as stored), f16 and bf16 inputs. `$indices` number
/// the accumulator operands `0 .. N/2`; `scale_d` 0 overwrites the accumulator (the first
/// k-step of a product), 1 adds to it.
macro_rules! wgmma_width {
    ($n:literal, $ss:ident, $rs:ident, $indices:tt) => {
        /// `wgmma.mma_async` (sm_90a), A and B by descriptor (K-major), f16 (`bf16` false) or
        /// bf16 inputs, f32 accumulators.
        ///
        /// Safety: the descriptors describe shared memory of this block holding the operands,
        /// published to the async proxy ([`fence_proxy_async_shared`] and a barrier); the whole
        /// warpgroup executes it together, between [`wgmma_fence`] and [`wgmma_commit`].
        #[inline(always)]
        pub unsafe fn $ss(acc: &mut [[f32; 4]; $n / 8], a: u64, b: u64, scale_d: u32, bf16: bool) {
            if bf16 {
                wgmma_asm!($n, "bf16.bf16", "{a}", "1, 1, 0, 0", $indices, acc, scale_d, a = in(reg64) a, b = in(reg64) b,)
            } else {
                wgmma_asm!($n, "f16.f16", "{a}", "1, 1, 0, 0", $indices, acc, scale_d, a = in(reg64) a, b = in(reg64) b,)
            }
        }

        /// `wgmma.mma_async` (sm_90a), A from registers (the warp's `mma.m16n8k16` A fragment),
        /// B by descriptor, MN-major (transposed): f16 or bf16 inputs, f32 accumulators.
        ///
        /// Safety: as the shared-memory form; `a` stays untouched until the group is waited for.
        #[inline(always)]
        pub unsafe fn $rs(acc: &mut [[f32; 4]; $n / 8], a: [u32; 4], b: u64, scale_d: u32, bf16: bool) {
            if bf16 {
                wgmma_asm!($n, "bf16.bf16", "{{{a0}, {a1}, {a2}, {a3}}}", "1, 1, 1", $indices, acc, scale_d,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3], b = in(reg64) b,)
            } else {
                wgmma_asm!($n, "f16.f16", "{{{a0}, {a1}, {a2}, {a3}}}", "1, 1, 1", $indices, acc, scale_d,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3], b = in(reg64) b,)
            }
        }
    };
}
wgmma_width!(64, wgmma_m64n64k16_ss, wgmma_m64n64k16_rs, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
wgmma_width!(128, wgmma_m64n128k16_ss, wgmma_m64n128k16_rs, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]);
wgmma_width!(256, wgmma_m64n256k16_ss, wgmma_m64n256k16_rs, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]);

/// The shared-memory `wgmma` of width `8 · N8` (64, 128 or 256): see [`wgmma_m64n64k16_ss`].
///
/// Safety: as [`wgmma_m64n64k16_ss`].
#[inline(always)]
pub unsafe fn wgmma_ss<const N8: usize>(acc: &mut [[f32; 4]; N8], a: u64, b: u64, scale_d: u32, bf16: bool) {
    let acc = acc as *mut [[f32; 4]; N8];
    // SAFETY (of the casts): the match arm's width is N8.
    match N8 {
        8 => wgmma_m64n64k16_ss(&mut *acc.cast(), a, b, scale_d, bf16),
        16 => wgmma_m64n128k16_ss(&mut *acc.cast(), a, b, scale_d, bf16),
        32 => wgmma_m64n256k16_ss(&mut *acc.cast(), a, b, scale_d, bf16),
        _ => panic!("wgmma width"),
    }
}

/// The register-A `wgmma` of width `8 · N8` (64, 128 or 256): see [`wgmma_m64n64k16_rs`].
///
/// Safety: as [`wgmma_m64n64k16_rs`].
#[inline(always)]
pub unsafe fn wgmma_rs<const N8: usize>(acc: &mut [[f32; 4]; N8], a: [u32; 4], b: u64, scale_d: u32, bf16: bool) {
    let acc = acc as *mut [[f32; 4]; N8];
    // SAFETY (of the casts): the match arm's width is N8.
    match N8 {
        8 => wgmma_m64n64k16_rs(&mut *acc.cast(), a, b, scale_d, bf16),
        16 => wgmma_m64n128k16_rs(&mut *acc.cast(), a, b, scale_d, bf16),
        32 => wgmma_m64n256k16_rs(&mut *acc.cast(), a, b, scale_d, bf16),
        _ => panic!("wgmma width"),
    }
}
