//! # Tiny SGEMM (`tiny`): many problems per block, or a short k
//!
//! Two kinds of call leave the block-tile kernels with little to do per block:
//! - **batches of small products** (tens of thousands of 8×8 or 6×5 matrices): a 64×64 tile
//!   computes a 6×5 C with 1% of its FMAs, and a block per problem spends its time starting;
//! - **a short k** (k ≤ 16, say): each element of C is a few products, so the work is writing
//!   C, and a tile kernel's pipeline (fill, barriers, shared-memory staging) is overhead.
//!
//! This kernel has no tiles in shared memory and no barriers. C is cut into pieces of
//! `TINY_TILE × TINY_TILE` (4×4) elements, numbered across the whole batch (problem by problem,
//! row of pieces by row of pieces), and the grid walks that numbering: thread `g` takes piece
//! `g`, so one block of 256 threads covers many small problems at once, and consecutive
//! threads take consecutive pieces of a row, whose stores coalesce into one run of C.
//!
//! ## A piece
//! A thread keeps its piece's 16 sums in registers and reads A's 4 rows and B's 4 columns
//! straight from global memory (L1 and L2 serve the reuse: neighbouring threads read the same
//! rows of A). A row of the piece is one 16-byte load where the operand runs along it
//! (A m-contiguous, B n-contiguous) and the host has proved 16-byte alignment (`A_VECTOR`,
//! `B_VECTOR`), else 4 loads of a float. `unroll` k-steps of loads are issued before their
//! FMAs, so that many loads are in flight per lane.
//!
//! ## A team of lanes per piece
//! A team of 1 to 32 consecutive lanes can share a piece: lane `t` of the team takes k = t,
//! t + lanes, ..., so a team's loads of a k-contiguous operand are consecutive floats, while
//! one lane per piece makes the warp's loads of an m- or n-contiguous operand consecutive (and
//! its loads of A the same rows wherever the warp's pieces share a row of pieces). The host
//! picks the team that touches the fewest memory lines per load, larger where the pieces alone
//! are too few threads for the GPU ([`TinyConfig::team_lanes`]), and passes it in `flags`.
//! A butterfly of shuffles then adds the lanes' partial sums; every lane ends with the same
//! bits (each level adds the same two values in either order), so the result is the same on
//! every run.
//!
//! ## Edges
//! A piece that reaches past m (n) reads its last row (column) again instead of the rows past
//! the edge, so every load lies inside the operand and no lane branches around loads; the
//! rows and columns past the edge are not stored. The walk over pieces is a loop whose
//! condition is the same for the whole warp (the shuffles need every lane), so lanes past the
//! last piece compute the last piece again and store nothing.

use super::ptx::{block_idx_x, fma, grid_dim_x, shfl_idx, shfl_xor_f32, thread_idx_x};
use super::sgemm::{outer_product, COutput, Float4, Problem};
use crate::sgemm_config::{TinyConfig, TINY_TILE};
use crate::sgemm_flags::{A_VECTOR, BETA_ZERO, B_VECTOR, C_VECTOR, TINY_LANES_MASK, TINY_LANES_SHIFT};

const T: usize = TINY_TILE as usize;

/// `x / d` and `x % d` for a divisor that fits 32 bits: a 64-bit division is a long software
/// routine on the GPU, so the 32-bit one where `x` fits too (every launch but the largest).
#[inline(always)]
fn div_rem(x: u64, d: u32) -> (u64, u32) {
    if x <= u32::MAX as u64 {
        let x = x as u32;
        ((x / d) as u64, x % d)
    } else {
        (x / d as u64, (x % d as u64) as u32)
    }
}

/// Where one piece of C sits: its problem's C and its first row and column.
struct Piece {
    c: *mut f32,
    row0: u32,
    col0: u32,
}

/// One operand's `T` lines of a piece (A's rows, B's columns) as a lane walks k: the address
/// of each line's element at the lane's current k, and the distance to its next k. Whichever
/// way the operand is stored, a line's next element is one fixed step away (`lanes` floats
/// along a k-contiguous line, `lanes` leading dimensions across the other), so the k loop only
/// adds that step.
struct Lines {
    at: [*const f32; T],
    step: usize,
    /// The `T` lines are contiguous, 16-byte aligned and inside the operand: one 16-byte load.
    vector: bool,
}

impl Lines {
    /// Lines `index[0..T]` of an operand whose element (line `i`, k `p`) is at
    /// `base[i·ld + p]` (`K_CONTIGUOUS`) or `base[p·ld + i]`, from k = `first_k` on in steps of
    /// `lanes`.
    #[inline(always)]
    fn new<const K_CONTIGUOUS: bool>(base: *const f32, ld: u64, index: &[u32; T], first_k: u32, lanes: u32, vector: bool) -> Lines {
        let mut at = [base; T];
        for i in 0..T {
            let offset = if K_CONTIGUOUS { index[i] as u64 * ld + first_k as u64 } else { first_k as u64 * ld + index[i] as u64 };
            at[i] = base.wrapping_add(offset as usize);
        }
        let step = if K_CONTIGUOUS { lanes as usize } else { lanes as usize * ld as usize };
        Lines { at, step, vector }
    }

    /// The lines' values `steps` steps ahead of the current k.
    #[inline(always)]
    unsafe fn load(&self, steps: usize) -> [f32; T] {
        if self.vector {
            (*(self.at[0].add(steps * self.step) as *const Float4)).0
        } else {
            let mut v = [0.0f32; T];
            for i in 0..T {
                v[i] = *self.at[i].add(steps * self.step);
            }
            v
        }
    }

    #[inline(always)]
    fn advance(&mut self, steps: usize) {
        for i in 0..T {
            self.at[i] = self.at[i].wrapping_add(steps * self.step);
        }
    }
}

/// The tiny kernel (see the module docs). `config` is this build's row, a constant.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(super) unsafe fn tiny<const UNROLL: usize, const A_K_CONTIGUOUS: bool, const B_K_CONTIGUOUS: bool>(p: &Problem, config: TinyConfig) {
    let lanes_log2 = (p.flags >> TINY_LANES_SHIFT) & TINY_LANES_MASK;
    let lanes = 1u32 << lanes_log2;
    let tid = thread_idx_x();
    let team_lane = tid % lanes;
    let pieces_m = p.m.div_ceil(TINY_TILE);
    let pieces_n = p.n.div_ceil(TINY_TILE);
    // Fits 32 bits: the host checks it.
    let pieces_per_problem = pieces_m * pieces_n;
    let pieces = p.batch as u64 * pieces_per_problem as u64;
    let items = pieces * lanes as u64;
    let threads = config.threads() as u64;
    let stride = grid_dim_x() as u64 * threads;

    // The warp's first item decides whether the warp runs this round (see the module docs).
    let mut warp_item = block_idx_x() as u64 * threads + (tid - tid % 32) as u64;
    while warp_item < items {
        let item = (warp_item + (tid % 32) as u64).min(items - 1);
        let owner = warp_item + ((tid % 32) as u64) < items;
        let (problem, in_problem) = div_rem(item >> lanes_log2, pieces_per_problem);
        let (piece_row, piece_col) = (in_problem / pieces_n, in_problem % pieces_n);
        let piece = Piece {
            c: p.c.ptr_mut().wrapping_add((problem * p.stride_c) as usize),
            row0: piece_row * TINY_TILE,
            col0: piece_col * TINY_TILE,
        };
        let mut rows = [0u32; T];
        let mut cols = [0u32; T];
        for i in 0..T {
            rows[i] = (piece.row0 + i as u32).min(p.m - 1);
            cols[i] = (piece.col0 + i as u32).min(p.n - 1);
        }
        // 16-byte lines only in pieces that lie wholly inside, along the operand's contiguous
        // direction (their first row or column is a multiple of 4, so the host's alignment
        // proof covers them).
        let a_vector = !A_K_CONTIGUOUS && p.flags & A_VECTOR != 0 && piece.row0 + TINY_TILE <= p.m;
        let b_vector = !B_K_CONTIGUOUS && p.flags & B_VECTOR != 0 && piece.col0 + TINY_TILE <= p.n;
        let a = p.a.ptr().wrapping_add((problem * p.stride_a) as usize);
        let b = p.b.ptr().wrapping_add((problem * p.stride_b) as usize);
        let mut a_lines = Lines::new::<A_K_CONTIGUOUS>(a, p.lda, &rows, team_lane, lanes, a_vector);
        let mut b_lines = Lines::new::<B_K_CONTIGUOUS>(b, p.ldb, &cols, team_lane, lanes, b_vector);

        let mut acc = [[0.0f32; T]; T];
        let mut kk = team_lane;
        while kk + (UNROLL as u32 - 1) * lanes < p.k {
            let mut steps = [([0.0f32; T], [0.0f32; T]); UNROLL];
            for u in 0..UNROLL {
                steps[u] = (a_lines.load(u), b_lines.load(u));
            }
            for u in 0..UNROLL {
                outer_product::<T, T>(&steps[u].0, &steps[u].1, &mut acc);
            }
            a_lines.advance(UNROLL);
            b_lines.advance(UNROLL);
            kk += UNROLL as u32 * lanes;
        }
        while kk < p.k {
            outer_product::<T, T>(&a_lines.load(0), &b_lines.load(0), &mut acc);
            a_lines.advance(1);
            b_lines.advance(1);
            kk += lanes;
        }
        // The team's partial sums, added by a butterfly in a fixed order.
        let mut level = lanes / 2;
        while level > 0 {
            for r in 0..T {
                for c in 0..T {
                    acc[r][c] += shfl_xor_f32(acc[r][c], level);
                }
            }
            level /= 2;
        }
        let c_out = COutput::<false> { base: piece.c, m_start: 0, n_start: 0, vector: p.flags & C_VECTOR != 0, beta_zero: p.flags & BETA_ZERO != 0, transposed: false };
        if config.stores_across_lanes && lanes == 1 && !c_out.vector {
            // (The same for the whole launch: every lane takes this branch or none.)
            store_piece_across_lanes(p, &c_out, &piece, owner, &acc);
        } else {
            // Row r of the piece is stored by lane r mod `lanes` of the team, as the tile
            // kernels store a row of four (16 bytes where C is aligned and the four are inside).
            for r in 0..T {
                let row = piece.row0 + r as u32;
                if owner && r as u32 % lanes == team_lane && c_out.owns_row(p, row) {
                    c_out.store4(p, c_out.row(p, row), piece.col0, acc[r]);
                }
            }
        }
        warp_item += stride;
    }
}

/// Stores a warp's pieces (one lane per piece) where C's rows are not 16-byte aligned, so that
/// each store instruction writes consecutive floats. Lane `l`'s row `r` is four consecutive
/// floats; stored by their owner, four scalar stores put the warp's 32 lanes 16 bytes apart,
/// and each instruction touched 16 sectors for 128 bytes (ncu at 9 × (1821 × 12311 × 4) on the
/// H100: 16.5 sectors per store request against cuBLAS's 4.9, and twice its time). Here, for
/// each row `r` of the pieces, store `e` of lane `l` is element `l mod 4` of lane
/// `8e + l / 4`'s four (taken by shuffles, with that lane's address and count of columns
/// inside C): where the warp's pieces are consecutive pieces of a row of C, as they are in
/// all but the smallest problems, each instruction writes 128 contiguous bytes. The values
/// are `alpha·acc + beta·C`, the same operations as [`COutput::store4`], so the same bits.
///
/// Safety: every lane of the warp calls it together (the shuffles); `piece.c` and C's
/// leading dimension address the piece's rows that lie inside C.
#[inline(always)]
unsafe fn store_piece_across_lanes(p: &Problem, c_out: &COutput<false>, piece: &Piece, owner: bool, acc: &[[f32; T]; T]) {
    let lane = thread_idx_x() % 32;
    let element = lane % 4;
    for (r, sums) in acc.iter().enumerate() {
        let row = piece.row0 + r as u32;
        // The columns of this lane's four inside C (0: the row is not stored).
        let inside = if owner && c_out.owns_row(p, row) { (p.n - piece.col0).min(T as u32) } else { 0 };
        let first = c_out.row(p, row).wrapping_add(piece.col0 as usize).expose_provenance() as u64;
        for e in 0..T as u32 {
            let from = 8 * e + lane / 4;
            // Every lane shuffles every element: lane l keeps the one it stores.
            let values: [u32; T] = core::array::from_fn(|j| shfl_idx(sums[j].to_bits(), from));
            // (Selects: an array indexed by a lane-dependent value would live in local memory.)
            let mut value = values[0];
            for (j, &v) in values.iter().enumerate().skip(1) {
                if element == j as u32 {
                    value = v;
                }
            }
            let value = f32::from_bits(value);
            let address = (shfl_idx(first as u32, from) as u64) | (shfl_idx((first >> 32) as u32, from) as u64) << 32;
            if element < shfl_idx(inside, from) {
                let dst = core::ptr::with_exposed_provenance_mut::<f32>(address as usize).add(element as usize);
                let out = p.alpha * value;
                *dst = if c_out.beta_zero { out } else { fma(p.beta, *dst, out) };
            }
        }
    }
}
