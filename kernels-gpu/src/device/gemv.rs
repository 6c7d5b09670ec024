//! # Small-m SGEMM (`gemv`): C has at most a few rows (or, turned around, a few columns)
//!
//! With m ≤ 8 (a decode step's activations times a weight matrix, say) a GEMM is a handful of
//! matrix-vector products: 2·m FLOPs per element of B, which is read exactly once. Its floor is
//! the time to stream B at full memory bandwidth, and block tiles (which pad m to 16 or more
//! and give each block many columns) leave most SMs idle or most FMAs wasted. This kernel is
//! shaped for the stream instead. A product with few *columns* (n ≤ 8: a matrix times a
//! vector) is the same problem turned around: the host computes `Cᵀ = Bᵀ·Aᵀ`, which swaps A
//! and B, and sets `C_TRANSPOSED` so that the kernel stores `C(i, j)` at `C[j·ldc + i]`.
//!
//! How B is stored decides how to stream it, so the entry point has two bodies, picked at
//! compile time by the operand layout it is built for:
//!
//! ## Column body (B n-contiguous: `B[p·ldb + j]`)
//! - **Columns**: a block owns 32 columns of C, one per lane, so a warp reads 32 consecutive
//!   floats of a row of B (one 128-byte line).
//! - **k**: the `WARPS` warps of a block split k into contiguous slices. Each warp keeps
//!   `UNROLL` independent loads of B in flight per lane (`UNROLL_NARROW` for m ≤ 2, where
//!   fewer values of A need registers), so a block has `WARPS × UNROLL × 128` bytes in flight: enough, with a few blocks per SM, to cover memory
//!   latency (Little's law) without split-k across blocks (which would need a workspace or
//!   atomics, and lose determinism).
//! - **A**: every lane of a warp reads the same element of A (a broadcast, served by L1).
//!
//! ## Dot body (B k-contiguous: `B[j·ldb + p]`, weights stored `[out, in]`)
//! Each column of C is the dot product of A's rows with one contiguous row of B, so a warp
//! takes whole rows of B: its lanes read consecutive 16-byte chunks of a row (512 bytes per
//! warp and load), `DOT_UNROLL` chunks of each of its `DOT_COLUMNS` rows in flight, and the
//! matching chunk of each row of A (16-byte loads too, served by L1: every warp of the SM
//! reads the same A). Each lane ends with partial sums over the k it
//! read; a butterfly of shuffles adds the 32 lanes' partials in a fixed order. Where k is
//! long and columns are too few to fill the GPU, [`GemvConfig::dot_k_warps`] warps share a
//! group of columns, each taking a contiguous slice of k, and their sums meet in shared
//! memory, added in warp order. Rows that are not 16-byte aligned (an odd leading dimension),
//! and any row of B when A is m-contiguous (A's M values of one k are contiguous, not its k
//! values of one row), are read a float per lane instead: still 128 contiguous bytes of B per
//! warp and load, with twice the loads in flight. Columns past n in a block's last group re-read the last
//! row of B and are not stored, so no lane branches around the loads.
//!
//! ## Both bodies
//! - **Rows**: the accumulators are `M ≤ GEMV_MAX_M` per lane (and column), with M a
//!   compile-time constant chosen at run time from m (one specialized loop per M, no wasted
//!   FMAs). Larger m runs in passes of `GEMV_MAX_M` rows, each streaming B again: correct for
//!   any m, fast only for small.
//! - **Reduction**: fixed order everywhere (deterministic), then alpha and beta (C unread
//!   when beta = 0).

use super::ptx::{block_idx_x, block_idx_z, dynamic_smem, fma, grid_dim_z, shfl_xor_f32, sync_threads, thread_idx_x};
use super::sgemm::{Float4, Problem};
use crate::sgemm_config::{GemvConfig, GEMV_COLUMNS, GEMV_MAX_M};
use crate::sgemm_flags::{A_VECTOR, BETA_ZERO, B_VECTOR, C_TRANSPOSED};

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
unsafe fn partial_dots<const M: usize, const UNROLL: usize, const A_K_CONTIGUOUS: bool>(
    s: &Slice,
) -> [f32; MAX_M] {
    let mut acc = [0.0f32; MAX_M];
    let b_at = |q: u32| -> f32 {
        *s.b.add((q as u64 * s.ldb + s.col as u64) as usize)
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

/// The column body (see the module docs); the entry points are defined in `sgemm.rs`.
#[inline(always)]
pub(super) unsafe fn gemv<
    const WARPS: usize,
    const UNROLL: usize,
    const UNROLL_NARROW: usize,
    const A_K_CONTIGUOUS: bool,
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
                1 => partial_dots::<1, UNROLL_NARROW, A_K_CONTIGUOUS>(&s),
                2 => partial_dots::<2, UNROLL_NARROW, A_K_CONTIGUOUS>(&s),
                3 => partial_dots::<3, UNROLL, A_K_CONTIGUOUS>(&s),
                4 => partial_dots::<4, UNROLL, A_K_CONTIGUOUS>(&s),
                5 => partial_dots::<5, UNROLL, A_K_CONTIGUOUS>(&s),
                6 => partial_dots::<6, UNROLL, A_K_CONTIGUOUS>(&s),
                7 => partial_dots::<7, UNROLL, A_K_CONTIGUOUS>(&s),
                _ => partial_dots::<MAX_M, UNROLL, A_K_CONTIGUOUS>(&s),
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
                store_c(p, c, row0 + warp as u32, col, sum);
            }
            // The next pass (or batch) overwrites the partials.
            sync_threads();
            row0 += GEMV_MAX_M;
        }
        batch += grid_dim_z();
    }
}

/// Writes `alpha · sum + beta · C(row, col)` to C (not reading C when beta = 0), with C
/// row-major or, under `C_TRANSPOSED`, column-major.
#[inline(always)]
unsafe fn store_c(p: &Problem, c: *mut f32, row: u32, col: u32, sum: f32) {
    let offset = if p.flags & C_TRANSPOSED != 0 { col as u64 * p.ldc + row as u64 } else { row as u64 * p.ldc + col as u64 };
    let dst = c.wrapping_add(offset as usize);
    *dst = if p.flags & BETA_ZERO != 0 { p.alpha * sum } else { fma(p.beta, *dst, p.alpha * sum) };
}

/// Where one warp of the dot body reads: its `R` rows of B (one per column of C, clamped to
/// n − 1: see the module docs) and the pass's rows of A, over the k range `[k_begin, k_end)`.
#[derive(Clone, Copy)]
struct DotSlice<const R: usize> {
    a: *const f32,
    /// The first element of each of the warp's rows of B.
    b_rows: [*const f32; R],
    lda: u64,
    /// First row of C (and of A) of this pass.
    row0: u32,
    k_begin: u32,
    k_end: u32,
    /// A's rows are k-contiguous and 16-byte aligned: 16-byte loads of A too (else four
    /// floats per chunk).
    a_vector: bool,
}

/// Row `i` of this pass of A at k = `q`, `W` consecutive k (16 bytes at once where they can
/// be).
#[inline(always)]
unsafe fn a_chunk<const W: usize, const A_K_CONTIGUOUS: bool, const R: usize>(s: &DotSlice<R>, i: usize, q: u32) -> [f32; W] {
    let row = (s.row0 + i as u32) as u64;
    let mut v = [0.0f32; W];
    if A_K_CONTIGUOUS && W == 4 && s.a_vector {
        let x = *(s.a.add((row * s.lda + q as u64) as usize) as *const Float4);
        for w in 0..W {
            v[w] = x.0[w];
        }
    } else {
        for w in 0..W {
            let p = (q + w as u32) as u64;
            let offset = if A_K_CONTIGUOUS { row * s.lda + p } else { p * s.lda + row };
            v[w] = *s.a.add(offset as usize);
        }
    }
    v
}

/// `W` consecutive floats of a row of B at k = `q` (one 16-byte load for `W` = 4: the caller
/// proved the alignment).
#[inline(always)]
unsafe fn b_chunk<const W: usize>(row: *const f32, q: u32) -> [f32; W] {
    let mut v = [0.0f32; W];
    if W == 4 {
        let x = *(row.add(q as usize) as *const Float4);
        for w in 0..W {
            v[w] = x.0[w];
        }
    } else {
        for w in 0..W {
            v[w] = *row.add(q as usize + w);
        }
    }
    v
}

/// `acc[i][r] += A(i, q..q+W) · B(q..q+W, col r)` for the pass's `M` rows.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn dot_chunk<const M: usize, const R: usize, const W: usize, const A_K_CONTIGUOUS: bool>(
    s: &DotSlice<R>,
    q: u32,
    b: &[[f32; W]; R],
    acc: &mut [[f32; R]; MAX_M],
) {
    for i in 0..M {
        let a = a_chunk::<W, A_K_CONTIGUOUS, R>(s, i, q);
        for r in 0..R {
            for w in 0..W {
                acc[i][r] = fma(a[w], b[r][w], acc[i][r]);
            }
        }
    }
}

/// The sums of one warp of the dot body over its k slice (in every lane): `W` consecutive k
/// per chunk (4: 16-byte loads; 1: a float, for unaligned rows), lanes on consecutive chunks,
/// `U` chunks of each row of B loaded before any is used.
// Index loops (not iterator chains): with constant bounds LLVM unrolls them completely, which
// keeps the arrays in registers.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn dot_partials<const M: usize, const R: usize, const U: usize, const W: usize, const A_K_CONTIGUOUS: bool>(
    s: &DotSlice<R>,
    lane: u32,
) -> [[f32; R]; MAX_M] {
    let mut acc = [[0.0f32; R]; MAX_M];
    let step = 32 * W as u32;
    let mut q = s.k_begin + lane * W as u32;
    while q + (U as u32 - 1) * step + W as u32 <= s.k_end {
        let mut b = [[[0.0f32; W]; R]; U];
        for u in 0..U {
            for r in 0..R {
                b[u][r] = b_chunk::<W>(s.b_rows[r], q + u as u32 * step);
            }
        }
        for u in 0..U {
            dot_chunk::<M, R, W, A_K_CONTIGUOUS>(s, q + u as u32 * step, &b[u], &mut acc);
        }
        q += U as u32 * step;
    }
    while q + W as u32 <= s.k_end {
        let mut b = [[0.0f32; W]; R];
        for r in 0..R {
            b[r] = b_chunk::<W>(s.b_rows[r], q);
        }
        dot_chunk::<M, R, W, A_K_CONTIGUOUS>(s, q, &b, &mut acc);
        q += step;
    }
    if W > 1 {
        // The slice's last k % 4 values (only the last slice of k has any): one per lane.
        let tail = s.k_end - (s.k_end - s.k_begin) % W as u32;
        let q = tail + lane;
        if q < s.k_end {
            let mut b = [[0.0f32; 1]; R];
            for r in 0..R {
                b[r] = b_chunk::<1>(s.b_rows[r], q);
            }
            dot_chunk::<M, R, 1, A_K_CONTIGUOUS>(s, q, &b, &mut acc);
        }
    }
    // Butterfly over the lanes: every lane ends with the warp's sums, added in the same order
    // on every run.
    for i in 0..M {
        for r in 0..R {
            let mut mask = 16;
            while mask > 0 {
                acc[i][r] += shfl_xor_f32(acc[i][r], mask);
                mask /= 2;
            }
        }
    }
    acc
}

/// [`dot_partials`] with `M` fixed at compile time from the pass's row count, and the chunk
/// width from the operands' layout and alignment: 16-byte chunks where A is k-contiguous and
/// B's rows are aligned (`U` chunks in flight, `U_NARROW` for m ≤ 2:
/// [`GemvConfig::dot_unroll_for_rows`]), a float per lane otherwise (`U_SCALAR`:
/// [`GemvConfig::dot_unroll_scalar`]). `b_vector` is a run-time value, uniform across the
/// block. (A's own alignment is tested per chunk: with that test inside, LLVM does not hoist
/// every chunk's loads of A above the FMAs of the chunks before; without it, at m = 8, ptxas
/// spilled 40 bytes on sm_90.)
#[inline(always)]
unsafe fn dot_partials_for<const R: usize, const U: usize, const U_NARROW: usize, const U_SCALAR: usize, const A_K_CONTIGUOUS: bool>(
    s: &DotSlice<R>,
    rows: u32,
    lane: u32,
    b_vector: bool,
) -> [[f32; R]; MAX_M] {
    macro_rules! by_rows {
        ($w:literal, $u:ident, $u_narrow:ident) => {
            match rows {
                1 => dot_partials::<1, R, $u_narrow, $w, A_K_CONTIGUOUS>(s, lane),
                2 => dot_partials::<2, R, $u_narrow, $w, A_K_CONTIGUOUS>(s, lane),
                3 => dot_partials::<3, R, $u, $w, A_K_CONTIGUOUS>(s, lane),
                4 => dot_partials::<4, R, $u, $w, A_K_CONTIGUOUS>(s, lane),
                5 => dot_partials::<5, R, $u, $w, A_K_CONTIGUOUS>(s, lane),
                6 => dot_partials::<6, R, $u, $w, A_K_CONTIGUOUS>(s, lane),
                7 => dot_partials::<7, R, $u, $w, A_K_CONTIGUOUS>(s, lane),
                _ => dot_partials::<MAX_M, R, $u, $w, A_K_CONTIGUOUS>(s, lane),
            }
        };
    }
    if A_K_CONTIGUOUS && b_vector { by_rows!(4, U, U_NARROW) } else { by_rows!(1, U_SCALAR, U_SCALAR) }
}

/// The dot body (see the module docs): B k-contiguous. `R` columns per warp, `U` chunks per
/// column in flight (`U_NARROW` for m ≤ 2, `U_SCALAR` for chunks of a float); the block's warps form `WARPS / k_warps` column groups of `k_warps` warps
/// each ([`GemvConfig::dot_k_warps`]; `config` is this build's row, a constant).
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(super) unsafe fn gemv_dot<const R: usize, const U: usize, const U_NARROW: usize, const U_SCALAR: usize, const A_K_CONTIGUOUS: bool>(
    p: &Problem,
    config: GemvConfig,
) {
    let tid = thread_idx_x();
    let lane = tid % 32;
    let warp = tid / 32;
    let k_warps = config.dot_k_warps(p.n, p.k);
    let group = warp / k_warps;
    let k_rank = warp % k_warps;
    let block_cols = config.dot_columns_per_block(p.n, p.k);
    let col0 = block_idx_x() * block_cols + group * R as u32;
    // Slices of whole 4-wide chunks, so 16-byte loads stay aligned in every slice.
    let slice_len = p.k.div_ceil(k_warps).next_multiple_of(4);
    let k_begin = (k_rank * slice_len).min(p.k);
    let k_end = (k_begin + slice_len).min(p.k);
    let a_vector = p.flags & A_VECTOR != 0;
    let b_vector = p.flags & B_VECTOR != 0;
    // partials[warp][i][r]: a warp's sums for row i and column r of this pass (k_warps > 1).
    let partials = dynamic_smem();

    let mut batch = block_idx_z();
    while batch < p.batch {
        let a = p.a.ptr().wrapping_add((batch as u64 * p.stride_a) as usize);
        let b = p.b.ptr().wrapping_add((batch as u64 * p.stride_b) as usize);
        let c = p.c.ptr_mut().wrapping_add((batch as u64 * p.stride_c) as usize);
        let mut b_rows = [b; R];
        for r in 0..R {
            // n ≥ 1 here (the host launches nothing for an empty C).
            let col = (col0 + r as u32).min(p.n - 1);
            b_rows[r] = b.wrapping_add((col as u64 * p.ldb) as usize);
        }
        let mut row0 = 0u32;
        while row0 < p.m {
            let rows = (p.m - row0).min(GEMV_MAX_M);
            let s = DotSlice { a, b_rows, lda: p.lda, row0, k_begin, k_end, a_vector };
            let acc = dot_partials_for::<R, U, U_NARROW, U_SCALAR, A_K_CONTIGUOUS>(&s, rows, lane, b_vector);
            if k_warps == 1 {
                // Lane i·R + r stores row i, column r.
                for i in 0..MAX_M {
                    for r in 0..R {
                        let col = col0 + r as u32;
                        if lane == (i * R + r) as u32 && (i as u32) < rows && col < p.n {
                            store_c(p, c, row0 + i as u32, col, acc[i][r]);
                        }
                    }
                }
            } else {
                if lane == 0 {
                    for i in 0..MAX_M {
                        for r in 0..R {
                            *partials.add((warp as usize * MAX_M + i) * R + r) = acc[i][r];
                        }
                    }
                }
                sync_threads();
                // The group's first warp adds its warps' sums in warp order; lane i·R + r
                // finishes row i, column r.
                if k_rank == 0 && lane < (MAX_M * R) as u32 {
                    let (i, r) = (lane / R as u32, lane % R as u32);
                    let col = col0 + r;
                    if i < rows && col < p.n {
                        let mut sum = 0.0f32;
                        for w in 0..k_warps {
                            sum += *partials.add((((warp + w) as usize * MAX_M) + i as usize) * R + r as usize);
                        }
                        store_c(p, c, row0 + i, col, sum);
                    }
                }
                // The next pass (or batch) overwrites the partials.
                sync_threads();
            }
            row0 += GEMV_MAX_M;
        }
        batch += grid_dim_z();
    }
}
