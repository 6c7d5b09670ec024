//! # Small-m SGEMM (`gemv`): C has at most a few rows
//!
//! With m ≤ 8 (a decode step's activations times a weight matrix, say) a GEMM is a handful of
//! matrix-vector products: 2·m FLOPs per element of B, which is read exactly once. Its floor is
//! the time to stream B at full memory bandwidth, and block tiles (which pad m to 16 or more
//! and give each block many columns) leave most SMs idle or most FMAs wasted. This kernel is
//! shaped for the stream instead:
//!
//! - **Columns**: a block owns 32 columns of C, one per lane, so a warp reads 32 consecutive
//!   floats of a row of B (one 128-byte line) when B is n-contiguous. When B is k-contiguous
//!   each lane walks its own column, 32 bytes per `UNROLL` steps, and L1 merges the lines.
//! - **k**: the `WARPS` warps of a block split k into contiguous slices. Each warp keeps
//!   `UNROLL` independent loads of B in flight per lane (`UNROLL_NARROW` for m ≤ 2, where
//!   fewer values of A need registers), so a block has `WARPS × UNROLL × 128` bytes in flight: enough, with a few blocks per SM, to cover memory
//!   latency (Little's law) without split-k across blocks (which would need a workspace or
//!   atomics, and lose determinism).
//! - **A**: every lane of a warp reads the same element of A (a broadcast, served by L1).
//! - **Rows**: the accumulators are `M ≤ GEMV_MAX_M` per lane, with M a compile-time constant
//!   chosen at run time from m (one specialized loop per M, no wasted FMAs). Larger m runs in
//!   passes of `GEMV_MAX_M` rows, each streaming B again: correct for any m, fast only for small.
//! - **Reduction**: each warp writes its partial sums to shared memory; warp `i` then adds row
//!   `i`'s partials in a fixed order (deterministic) and applies alpha and beta (C unread when
//!   beta = 0).

use super::ptx::{block_idx_x, block_idx_z, dynamic_smem, fma, grid_dim_z, sync_threads, thread_idx_x};
use super::sgemm::Problem;
use crate::sgemm_config::{GEMV_COLUMNS, GEMV_MAX_M};
use crate::sgemm_flags::BETA_ZERO;

const MAX_M: usize = GEMV_MAX_M as usize;

/// Where one warp's share of the work sits.
#[derive(Clone, Copy)]
struct Slice {
    a: *const f32,
    b: *const f32,
    lda: u64,
    ldb: u64,
    /// First row of C (and of A) of this pass.
    row0: u32,
    col: u32,
    col_ok: bool,
    k_begin: u32,
    k_end: u32,
}

/// The `M` partial dot products of one lane over its warp's k slice.
// Index loops (not iterator chains): with constant bounds LLVM unrolls them completely, which
// keeps `acc` in registers; `iter().enumerate().take(M)` left it in local memory.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn partial_dots<const M: usize, const UNROLL: usize, const A_K_CONTIGUOUS: bool, const B_K_CONTIGUOUS: bool>(
    s: &Slice,
) -> [f32; MAX_M] {
    let mut acc = [0.0f32; MAX_M];
    let b_at = |q: u32| -> f32 {
        let offset = if B_K_CONTIGUOUS { s.col as u64 * s.ldb + q as u64 } else { q as u64 * s.ldb + s.col as u64 };
        *s.b.add(offset as usize)
    };
    let a_at = |i: usize, q: u32| -> f32 {
        let row = (s.row0 + i as u32) as u64;
        let offset = if A_K_CONTIGUOUS { row * s.lda + q as u64 } else { q as u64 * s.lda + row };
        *s.a.add(offset as usize)
    };
    let mut q = s.k_begin;
    while q + UNROLL as u32 <= s.k_end {
        // All loads of B first, so UNROLL of them are in flight together.
        let mut b = [0.0f32; UNROLL];
        if s.col_ok {
            for u in 0..UNROLL {
                b[u] = b_at(q + u as u32);
            }
        }
        for u in 0..UNROLL {
            for i in 0..M {
                acc[i] = fma(a_at(i, q + u as u32), b[u], acc[i]);
            }
        }
        q += UNROLL as u32;
    }
    while q < s.k_end {
        let bv = if s.col_ok { b_at(q) } else { 0.0 };
        for i in 0..M {
            acc[i] = fma(a_at(i, q), bv, acc[i]);
        }
        q += 1;
    }
    acc
}

/// The kernel body (see the module docs); the entry points are defined in `sgemm.rs`.
#[inline(always)]
pub(super) unsafe fn gemv<
    const WARPS: usize,
    const UNROLL: usize,
    const UNROLL_NARROW: usize,
    const A_K_CONTIGUOUS: bool,
    const B_K_CONTIGUOUS: bool,
>(
    p: &Problem,
) {
    let tid = thread_idx_x() as usize;
    let lane = tid % 32;
    let warp = tid / 32;
    let col = block_idx_x() * GEMV_COLUMNS + lane as u32;
    let col_ok = col < p.n;
    let slice_len = p.k.div_ceil(WARPS as u32).next_multiple_of(UNROLL_NARROW as u32);
    let k_begin = (warp as u32 * slice_len).min(p.k);
    let k_end = (k_begin + slice_len).min(p.k);
    // partials[w][i][lane]: warp w's sum for row i of this pass.
    let partials = dynamic_smem();
    let beta_zero = p.flags & BETA_ZERO != 0;

    let mut batch = block_idx_z();
    while batch < p.batch {
        let a = p.a.ptr().wrapping_add((batch as u64 * p.stride_a) as usize);
        let b = p.b.ptr().wrapping_add((batch as u64 * p.stride_b) as usize);
        let c = p.c.ptr_mut().wrapping_add((batch as u64 * p.stride_c) as usize);
        let mut row0 = 0u32;
        while row0 < p.m {
            let rows = (p.m - row0).min(GEMV_MAX_M);
            let s = Slice { a, b, lda: p.lda, ldb: p.ldb, row0, col, col_ok, k_begin, k_end };
            let acc = match rows {
                1 => partial_dots::<1, UNROLL_NARROW, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                2 => partial_dots::<2, UNROLL_NARROW, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                3 => partial_dots::<3, UNROLL, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                4 => partial_dots::<4, UNROLL, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                5 => partial_dots::<5, UNROLL, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                6 => partial_dots::<6, UNROLL, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                7 => partial_dots::<7, UNROLL, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
                _ => partial_dots::<MAX_M, UNROLL, A_K_CONTIGUOUS, B_K_CONTIGUOUS>(&s),
            };
            for (i, v) in acc.iter().enumerate() {
                *partials.add((warp * MAX_M + i) * 32 + lane) = *v;
            }
            sync_threads();
            if (warp as u32) < rows && col_ok {
                let mut sum = 0.0f32;
                for w in 0..WARPS {
                    sum += *partials.add((w * MAX_M + warp) * 32 + lane);
                }
                let dst = c.wrapping_add(((row0 + warp as u32) as u64 * p.ldc + col as u64) as usize);
                *dst = if beta_zero { p.alpha * sum } else { fma(p.beta, *dst, p.alpha * sum) };
            }
            // The next pass (or batch) overwrites the partials.
            sync_threads();
            row0 += GEMV_MAX_M;
        }
        batch += grid_dim_z();
    }
}
