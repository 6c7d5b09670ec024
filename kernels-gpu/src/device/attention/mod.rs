//! # Flash attention, forward: `O = softmax(scale · Q·Kᵀ + bias) · V`
//!
//! ## The algorithm (one pass, online softmax)
//! The scores `S = Q·Kᵀ` of a block's query rows are never stored: the keys are walked in
//! tiles of `BK`, and for each tile the block computes that tile's scores, turns them into
//! probabilities against the running row maximum `m`, and adds `P·V` to an output accumulator.
//! Probabilities are taken against a per-row reference maximum `m` (scores in log2 units, so
//! every exponential is one `ex2`). When a tile's maximum `m'` exceeds `m` by more than
//! [`RESCALE_SLACK`], the row's accumulator and running denominator `l` are rescaled by
//! `2^(m − m')` and `m'` becomes the reference; below that the stale reference is kept
//! (probabilities up to `2^RESCALE_SLACK`, exact all the same: numerator and denominator share
//! it), so after a row's first tiles almost no tile pays for a rescale. At the end the row is
//! divided by `l`, and its log-sum-exp is `m + log2 l` (converted to natural log).
//!
//! ## Instructions per key tile
//! Besides its matrix instructions a warp spends, per tile: one 64-bit add and one `cp.async`
//! per 16-byte chunk it copies; the row maxima (a shuffle pair per row) and one vote; one
//! FFMA + `ex2` + add per score (the softmax scale is folded into the exponent on tiles no
//! mask or bound cuts); one conversion per pair of probabilities. Each of these was once
//! several times larger (benches/results/NOTES.md: 'Attention: issue-bound').
//!
//! ## Rows, warps and fragments
//! A block owns `ROWS = 16 · M_TILES · ROW_WARPS` *rows*; a row is a (query position, query
//! head) pair. Prefill blocks own one head's positions; decode blocks pack the query heads
//! that share a KV head (GQA) into their rows, so the K/V tile in shared memory serves all of
//! them (`heads_packed`). Every row of a block reads the same KV head. Each head size has three
//! entry points (`AttentionTileKind`): one with the prefill tile (many rows per block), one
//! with the decode tile (one 16-row tile whose warps split each key tile, and at the large
//! heads its output columns too, for problems of at most 16 rows: `attention_config.rs`), and
//! a plain prefill entry point without the mask, ALiBi and softcap passes (`BIASES` false),
//! whose fewer registers afford larger tiles where the config gives it one (sm_90: 128-key
//! `wgmma` tiles) and which is empty elsewhere.
//!
//! Warp `w` owns `M_TILES` tiles of 16 rows (row group `w % ROW_WARPS`), the output columns
//! `((w / ROW_WARPS) % DV_SPLIT)·DVW ..` (`DVW = D_v / DV_SPLIT`) and the keys
//! `(w / (ROW_WARPS·DV_SPLIT))·BK/KEY_SPLIT ..` of each key tile. It computes its rows' scores
//! against its keys (warps of one row group and key group computing the same scores when
//! `DV_SPLIT > 1`: the price of fitting `D_v = 512` accumulators in registers).
//! With `KEY_SPLIT > 1` (decode tiles) the warps of one row tile keep their own softmax state
//! over their keys, so no warp repeats another's `Q·Kᵀ`, and are merged once, after the last
//! key tile, through shared memory (as the splits of flash-decoding are, but inside the block). All products use the register
//! fragments of `mma.m16n8k16` (see `ptx.rs`): a thread holds 2 rows × 2 columns of each 16×8
//! score or output tile. The score fragments of two neighbouring 8-key tiles are, once
//! rounded to 16 bits, exactly the A fragment of the `P·V` product: P never leaves registers.
//! Three matrix paths compute a 16×8×16 step on those fragments ([`MatrixPath`]):
//! `mma.m16n8k16` (sm_80+), two `mma.m16n8k8` (sm_75, f16) or lane shuffles and f32 FMAs
//! (bf16 on sm_70/sm_75, and sm_70), so everything else is shared by every architecture.
//!
//! ## The warpgroup path (`wgmma`, sm_90 tiles with `AttentionTile::wgmma`)
//! Four consecutive warps form a warpgroup that owns 64 rows (warp `w` its rows `16w ..`, as
//! one 16-row tile). Per key tile the group issues `D_k/16` asynchronous `wgmma.m64nBKk16`
//! reading Q and K from shared memory through descriptors, waits for them, and finds its score
//! accumulators in exactly the fragment layout above, so masks, softmax and the epilogue are
//! the same code. `P·V` takes P from registers (the `mma` A fragments) and V from shared
//! memory, one instruction per 16 keys. Q, K and V are stored in the 128-byte swizzled layout
//! `wgmma` reads (`chunk_offset`) instead of padded rows, made visible to the asynchronous
//! proxy by a proxy fence before the tile's barrier.
//!
//! ## Shared memory and the pipeline
//! Q (`ROWS × D_k`), and `STAGES` tiles of K (`BK × D_k`) and V (`BK × D_v`), each row padded by
//! [`ATTENTION_SMEM_PAD`] elements so that `ldmatrix` reads are conflict-free. With `cp.async`
//! (sm_80+) the copies of key tiles `t + 1 .. t + STAGES − 1` are in flight while tile `t` is
//! computed (one barrier per tile); sm_70/sm_75
//! copy each tile through registers before computing it (their occupancy hides the latency).
//! Rows past a sequence's end are zero-filled, so a masked key's V row is 0, never garbage
//! (0 · NaN would poison the row).
//!
//! ## Where masks, ALiBi, softcap and sinks enter
//! For each score, in this order (natural-log units):
//! 1. `x = scale · q·k` (the softmax scale; default `1/√D_k` on the host);
//! 2. softcap: `x = cap · tanh(x / cap)`;
//! 3. the additive mask: `x += mask[i][j]` (−inf allowed);
//! 4. ALiBi: `x −= slope_h · |i + L_k − L_q − j|`;
//! 5. visibility: causal and sliding window, aligned bottom-right (query `i` sees key `j` iff
//!    `d − left ≤ j ≤ d + right`, `d = i + L_k − L_q`; causal is `right = 0`), and `j < L_k`:
//!    an invisible key's score is −inf.
//!
//! A tile that no bound can cut and no mask, ALiBi or softcap touches skips all of this (one
//! multiply per score). The key tiles wholly outside every row's window are never visited.
//! Sinks (one logit per head) join the denominator at the end: with `M = max(m, sink)`,
//! `O = Σ 2^(s−M)·v / (Σ 2^(s−M) + 2^(sink−M))`. A row that sees no key gets `O = 0` (and
//! LSE −inf without a sink), never NaN.
//!
//! ## Split keys (flash-decoding)
//! With `splits > 1` (`gridDim.z`), block `z` takes an even share of the row tile's key tiles
//! and writes its normalized partial output (f32) and log-sum-exp to a workspace; the merge
//! kernel (`merge.rs`) combines the splits of each row by their LSEs, in split order, so a
//! decode step gives the same bits on every run. Sinks are applied by the merge.
//!
//! ## Launch overlap (sm_90+)
//! A decode step is two short launches, and the gap between launches is a tenth of it. Every
//! launch is a programmatic dependent (PDL) of the launch before it: the kernel waits for its
//! own prerequisite (`griddepcontrol.wait`) before its first read, so its blocks are resident
//! and set up when the previous grid ends. Only a split forward lets its dependent (the merge)
//! start early (`griddepcontrol.launch_dependents` at its start): the merge is known to wait
//! for it and takes few SMs. Any other forward triggers implicitly at block exit, so that an
//! unknown next kernel is not dispatched onto SMs this one still fills.
//!
//! ## Paged K/V
//! With `PAGED`, key `j` of sequence `b` is slot `j % page_size` of page
//! `block_table[b][j / page_size]`; only the address of each copied row changes. Pages of
//! whole key tiles take one table entry per tile (the tile is one run of a page); in the decode
//! tiles, pages of a power of two shorter than the tile (16 or 32 keys) read the tile's entries
//! once, a lane of each warp per page, and every copied row takes its page from that lane by a
//! shuffle ([`copy_short_pages_tile`]); other page sizes, and short pages in the prefill tiles
//! (`copies_short_pages`), read an entry per row. A table (or
//! a `seqlens_k`) in the caller's device memory, which the host never saw, is checked on the
//! device: the copies clamp a page past the cache to its last page and a length past
//! `seqlen_k` reads no keys, so nothing is read out of bounds, and a check launch before this
//! one (`CHECK_TABLES`, `merge.rs`) records the first bad entry for the host.

mod merge;

use super::ptx::{
    allow_dependent_launch, ballot, block_idx_x, block_idx_y, block_idx_z, cp_async_16, cp_async_commit, cp_async_wait, dynamic_smem, exp2, f16_to_f32,
    fence_proxy_async_shared, fma, ldmatrix_x4, ldmatrix_x4_trans, log2, mma_m16n8k16_bf16, no_unroll, mma_m16n8k16_f16, mma_m16n8k8_f16, opaque, pack_bf16x2, rolled_step,
    pack_f16x2, rcp, shared_address, shfl_idx, shfl_xor_f32, sync_threads, thread_idx_x, wgmma_commit, wgmma_descriptor_sw128, wgmma_fence, wgmma_hold,
    wgmma_rs, wgmma_ss, wgmma_wait, wait_for_prerequisite_grid,
};
use super::BUILD_CONFIG;
use crate::abi::{attention_params_entry, AttentionParams};
use crate::attention_config::{attention_config, copies_short_pages, matrix_path, AttentionDtype, AttentionHead, AttentionTileKind, MatrixPath, ATTENTION_SMEM_PAD};
use crate::attention_flags::{ALIBI, CHECK_TABLES, KEY_LENGTHS, MASK, MASK_F32, O_PAIRS, PAGED, QKV_VECTOR, SINKS, SOFTCAP, SPLIT, VARLEN, WRITE_LSE};
use crate::attention_table_error::{KEY_LENGTH_TOO_LONG, KEY_RANGE_PAST_END, KEY_RANGE_TOO_LONG, QUERY_RANGE_INVALID};

const PAD: usize = ATTENTION_SMEM_PAD as usize;
const LOG2E: f32 = core::f32::consts::LOG2_E;
const LN2: f32 = core::f32::consts::LN_2;
/// How far (log2 units) a tile's row maximum may exceed the row's reference maximum before
/// the accumulators are rescaled (see the online softmax in [`forward`]): probabilities then
/// stay below 2^8 = 256, exact enough in f16 and bf16 and far from overflow in f32 sums, and
/// after a row's first tiles a rescale is rare.
const RESCALE_SLACK: f32 = 8.0;

/// Matrix paths as const-generic values.
const PATH_MMA16816: u8 = 0;
const PATH_MMA1688_PAIR: u8 = 1;
const PATH_SIMT: u8 = 2;
/// Warpgroup products (`wgmma`, sm_90a tiles with `AttentionTile::wgmma`).
const PATH_WGMMA: u8 = 3;

/// Facts of a matrix path known at compile time.
struct Wgmma<const PATH: u8>;

impl<const PATH: u8> Wgmma<PATH> {
    /// The path of `wgmma` tiles, whose shared matrices are in the swizzled layout.
    const CORE: bool = PATH == PATH_WGMMA;
}

const fn path_id(p: MatrixPath) -> u8 {
    match p {
        MatrixPath::Mma16816 => PATH_MMA16816,
        MatrixPath::Mma1688Pair => PATH_MMA1688_PAIR,
        MatrixPath::Simt => PATH_SIMT,
    }
}

/// `ldmatrix` exists from sm_75 on; sm_70 reads fragments with ordinary shared loads.
const HAS_LDMATRIX: bool = BUILD_CONFIG.sm() >= 75;
/// `cp.async` exists from sm_80 on.
const HAS_CP_ASYNC: bool = BUILD_CONFIG.limits().has_cp_async;

/// A matrix in shared memory: its generic pointer (ordinary loads and stores) and its
/// shared-state-space address (`ldmatrix`, `cp.async`). The address is computed once, from the
/// start of the allocation, and every element's address is that plus a plain integer offset,
/// which ptxas folds into the instruction's immediate. (Converting each element's pointer
/// with `cvta` instead gave LLVM one opaque value per fragment, which it hoisted out of the
/// main loop and kept live: some 70 registers.)
#[derive(Clone, Copy)]
struct Shared {
    ptr: *mut u16,
    addr: u32,
}

impl Shared {
    /// The same matrix, its address hidden from the optimizer ([`opaque`]): the fragment
    /// addresses derived from it are then recomputed in each key tile (a few integer adds)
    /// rather than hoisted out of the main loop and kept live across it.
    #[inline(always)]
    fn opaque(self) -> Shared {
        Shared { ptr: opaque(self.ptr as u64) as *mut u16, addr: opaque(self.addr) }
    }

    /// The matrix starting `elements` 2-byte elements further.
    #[inline(always)]
    fn offset(self, elements: usize) -> Shared {
        // SAFETY (of later use): callers stay inside the block's allocation.
        Shared { ptr: self.ptr.wrapping_add(elements), addr: self.addr + 2 * elements as u32 }
    }
}

/// 16 bytes, for vector copies.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Chunk([u32; 4]);

/// Where chunk `c` (elements `8c .. 8c + 8`) of row `r` of a shared matrix of `rows` rows of
/// `D` elements sits, in elements from the matrix's start:
/// - `core` false: rows of `D + PAD` elements, one after the other (`ldmatrix` reads 8 rows'
///   16-byte chunks at once; the padding puts them into 8 different bank groups);
/// - `core` true (`wgmma` tiles): the 128-byte swizzled layout that `wgmma` reads through a
///   descriptor. The matrix is cut into columns of 64 elements (128 bytes), stored one after
///   the other (`rows · 128` bytes apart: V's "leading" offset); in a column, row `r` is 128
///   bytes at `r · 128`, 8 rows make one 1024-byte atom (the "stride" offset of Q, K and V),
///   and the 16-byte chunk `c` of a row sits at chunk `c ^ (r % 8)` of it. That is the XOR
///   `wgmma` itself applies to the address bits (`Swizzle<3,4,3>`), which needs each atom at
///   a 1024-byte boundary; it also spreads the 8 chunks of one row, which 8 consecutive
///   threads copy from 128 contiguous bytes of global memory, over all 32 banks.
#[inline(always)]
const fn chunk_offset<const D: usize>(core: bool, rows: usize, r: usize, c: usize) -> usize {
    if core {
        (c / 8) * rows * 64 + r * 64 + ((c % 8) ^ (r % 8)) * 8
    } else {
        r * (D + PAD) + c * 8
    }
}

/// The A fragment of `P·V` for 16 keys: the score fragments of its two 8-key tiles `lo` and
/// `hi`, rounded to 16 bits (rows g and g + 8 of keys `2t ..` in `lo`, `2t + 8 ..` in `hi`).
#[inline(always)]
fn p_fragment<const BF16: bool>(lo: [f32; 4], hi: [f32; 4]) -> [u32; 4] {
    [pack::<BF16>(lo[0], lo[1]), pack::<BF16>(lo[2], lo[3]), pack::<BF16>(hi[0], hi[1]), pack::<BF16>(hi[2], hi[3])]
}

/// `c + a·b` for one 16×8×16 step, on the shared fragment layout, by the build's path.
#[inline(always)]
fn mma<const PATH: u8, const BF16: bool>(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    match PATH {
        PATH_MMA16816 => {
            if BF16 {
                mma_m16n8k16_bf16(a, b, c)
            } else {
                mma_m16n8k16_f16(a, b, c)
            }
        }
        PATH_MMA1688_PAIR => mma_m16n8k8_f16([a[2], a[3]], b[1], mma_m16n8k8_f16([a[0], a[1]], b[0], c)),
        _ => simt_mma::<BF16>(a, b, c),
    }
}

/// The two 16-bit elements of `x` as f32 (low, high), exactly.
#[inline(always)]
fn unpack<const BF16: bool>(x: u32) -> (f32, f32) {
    if BF16 {
        (f32::from_bits(x << 16), f32::from_bits(x & 0xffff_0000))
    } else {
        (f16_to_f32(x & 0xffff), f16_to_f32(x >> 16))
    }
}

#[inline(always)]
fn pack<const BF16: bool>(lo: f32, hi: f32) -> u32 {
    if BF16 {
        pack_bf16x2(lo, hi)
    } else {
        pack_f16x2(lo, hi)
    }
}

/// A 16×8×16 step without a matrix instruction: lane (g, t) needs row g and g + 8 of A (held
/// by the four lanes of its quad) and columns 2t and 2t + 1 of B (held by the quads 2t and
/// 2t + 1); it fetches them with shuffles, four source lanes at a time, and accumulates in
/// f32 with the inputs converted exactly.
#[inline(always)]
fn simt_mma<const BF16: bool>(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let lane = thread_idx_x() % 32;
    let (g, t) = (lane / 4, lane % 4);
    let mut c = c;
    let dot = |x: u32, y: u32, acc: f32| {
        let (x0, x1) = unpack::<BF16>(x);
        let (y0, y1) = unpack::<BF16>(y);
        acc + x0 * y0 + x1 * y1
    };
    for source in 0..4u32 {
        let a_lane = 4 * g + source;
        let (a0, a1, a2, a3) = (shfl_idx(a[0], a_lane), shfl_idx(a[1], a_lane), shfl_idx(a[2], a_lane), shfl_idx(a[3], a_lane));
        let (n0, n1) = (4 * (2 * t) + source, 4 * (2 * t + 1) + source);
        let (b00, b01, b10, b11) = (shfl_idx(b[0], n0), shfl_idx(b[1], n0), shfl_idx(b[0], n1), shfl_idx(b[1], n1));
        // a0/a1 hold k = 2·source, +1 of rows g / g + 8; a2/a3 k + 8. b?0 hold k = 2·source, +1.
        c[0] = dot(a2, b01, dot(a0, b00, c[0]));
        c[1] = dot(a2, b11, dot(a0, b10, c[1]));
        c[2] = dot(a3, b01, dot(a1, b00, c[2]));
        c[3] = dot(a3, b11, dot(a1, b10, c[3]));
    }
    c
}

/// The A fragment of the 16×16 block at (`row0`, `col0`) of a row-major shared matrix of
/// 2-byte elements with rows of `stride` elements.
///
/// Safety: the block lies inside the shared allocation; the whole warp calls it together.
#[inline(always)]
unsafe fn load_a(m: Shared, stride: usize, row0: usize, col0: usize) -> [u32; 4] {
    let lane = (thread_idx_x() % 32) as usize;
    if HAS_LDMATRIX {
        let row = row0 + lane % 8 + 8 * ((lane / 8) % 2);
        let col = col0 + 8 * (lane / 16);
        ldmatrix_x4(m.offset(row * stride + col).addr)
    } else {
        let (g, t) = (lane / 4, lane % 4);
        let at = |r: usize, c: usize| *m.ptr.add((row0 + r) * stride + col0 + c).cast::<u32>();
        [at(g, 2 * t), at(g + 8, 2 * t), at(g, 2 * t + 8), at(g + 8, 2 * t + 8)]
    }
}

/// The B fragments of two 8-column tiles for `A·Bᵀ` where the shared matrix holds Bᵀ's rows
/// (K: a row per key, `n0 .. n0 + 16`, columns `col0 .. col0 + 16`): `[b0, b1]` of keys
/// `n0 ..`, then of keys `n0 + 8 ..`.
///
/// Safety: as [`load_a`].
#[inline(always)]
unsafe fn load_b_rows(m: Shared, stride: usize, n0: usize, col0: usize) -> [u32; 4] {
    let lane = (thread_idx_x() % 32) as usize;
    if HAS_LDMATRIX {
        let row = n0 + lane % 8 + 8 * (lane / 16);
        let col = col0 + 8 * ((lane / 8) % 2);
        ldmatrix_x4(m.offset(row * stride + col).addr)
    } else {
        let (g, t) = (lane / 4, lane % 4);
        let at = |r: usize, c: usize| *m.ptr.add((n0 + r) * stride + col0 + c).cast::<u32>();
        [at(g, 2 * t), at(g, 2 * t + 8), at(g + 8, 2 * t), at(g + 8, 2 * t + 8)]
    }
}

/// The B fragments of two 8-column tiles for `P·V` where the shared matrix is V itself (a row
/// per key `k0 .. k0 + 16`, columns `col0 .. col0 + 16`): `[b0, b1]` of columns `col0 ..`,
/// then of columns `col0 + 8 ..`.
///
/// Safety: as [`load_a`].
#[inline(always)]
unsafe fn load_b_cols(m: Shared, stride: usize, k0: usize, col0: usize) -> [u32; 4] {
    let lane = (thread_idx_x() % 32) as usize;
    if HAS_LDMATRIX {
        let row = k0 + lane % 8 + 8 * ((lane / 8) % 2);
        let col = col0 + 8 * (lane / 16);
        ldmatrix_x4_trans(m.offset(row * stride + col).addr)
    } else {
        let (g, t) = (lane / 4, lane % 4);
        let at = |r: usize, c: usize| *m.ptr.add((k0 + r) * stride + col0 + c) as u32;
        let pair = |r: usize, c: usize| at(r, c) | at(r + 1, c) << 16;
        [pair(2 * t, g), pair(2 * t + 8, g), pair(2 * t, g + 8), pair(2 * t + 8, g + 8)]
    }
}

/// Copies `ROWS` rows of `D` 2-byte elements into shared memory (rows of `D + PAD`), 16 bytes
/// at a time where `vector` (with `cp.async` on sm_80+, through registers before), else
/// element by element. `row(r)` is the global address of row `r`, or `None` for a row past
/// the data, which is zero-filled.
///
/// Safety: every address `row` returns has `D` readable elements (16-byte aligned when
/// `vector`); `dst` holds `ROWS × (D + PAD)` elements of this block's shared memory.
#[inline(always)]
unsafe fn copy_rows<const ROWS: usize, const D: usize, const THREADS: usize>(core: bool, dst: Shared, vector: bool, row: impl Fn(usize) -> Option<*const u16>) {
    let chunks_per_row = D / 8;
    let mut i = thread_idx_x() as usize;
    while i < ROWS * chunks_per_row {
        let (r, c) = (i / chunks_per_row, i % chunks_per_row);
        let to_shared = dst.offset(chunk_offset::<D>(core, ROWS, r, c));
        let to = to_shared.ptr;
        match row(r) {
            Some(src) => {
                let from = src.add(c * 8);
                if !vector {
                    for e in 0..8 {
                        *to.add(e) = *from.add(e);
                    }
                } else if HAS_CP_ASYNC {
                    cp_async_16(to_shared.addr, from.cast(), 16);
                } else {
                    *to.cast::<Chunk>() = *from.cast::<Chunk>();
                }
            }
            None => *to.cast::<Chunk>() = Chunk([0; 4]),
        }
        i += THREADS;
    }
}

/// Copies a K or V tile of `BK` consecutive keys (16-byte aligned rows, not paged) into
/// shared memory: `first` is the global address of the tile's first key row, `seq_stride`
/// the elements from one key to the next, `keys` how many of the tile's keys exist (1 to
/// `BK`). Thread `i` copies chunk `i % (D/8)` of row `i / (D/8)`, then `THREADS` chunks
/// further. Where a pass of `THREADS` chunks covers whole rows (`D/8` divides `THREADS`: heads
/// 64, 128, 256, 512) a thread's rows are `THREADS / (D/8)` apart, so its source address moves
/// by one 64-bit add per pass; otherwise each pass finds its row and chunk anew. A row past the
/// sequence is zero-filled (with `cp.async`, a source size of 0, its address replaced by the
/// first row's: nothing is read), so no branch sits in the copy.
///
/// Safety: rows `0 .. keys` of `first` have `D` readable elements, 16-byte aligned; `dst`
/// holds `BK × (D + PAD)` elements of this block's shared memory.
#[inline(always)]
unsafe fn copy_key_tile<const BK: usize, const D: usize, const THREADS: usize>(core: bool, dst: Shared, first: *const u16, seq_stride: usize, keys: usize) {
    let chunks_per_row = D / 8;
    let chunks = BK * chunks_per_row;
    // Hidden from the optimizer: each pass's row and chunk would otherwise be computed once,
    // before the main loop, and kept live in registers the accumulators need.
    let tid = opaque(thread_idx_x()) as usize;
    let whole_rows = THREADS % chunks_per_row == 0;
    let rows_per_pass = THREADS / chunks_per_row;
    let (r0, c0) = (tid / chunks_per_row, tid % chunks_per_row);
    let mut from = first.wrapping_add(r0 * seq_stride + c0 * 8);
    for pass in 0..chunks.div_ceil(THREADS) {
        let i = tid + pass * THREADS;
        if chunks % THREADS == 0 || i < chunks {
            let (r, c) = if whole_rows { (r0 + pass * rows_per_pass, c0) } else { (i / chunks_per_row, i % chunks_per_row) };
            if !whole_rows {
                from = first.wrapping_add(r * seq_stride + c * 8);
            }
            let inside = (r as u32) < keys as u32;
            copy_key_chunk(dst.offset(chunk_offset::<D>(core, BK, r, c)), if inside { from } else { first }, inside);
        }
        if whole_rows {
            from = from.wrapping_add(rows_per_pass * seq_stride);
        }
    }
}

/// One 16-byte chunk of a key tile from `source` to `to`, or zeros where the key is not
/// `inside` the sequence (then `source` is any readable chunk: with `cp.async` a source size
/// of 0 reads nothing, and no branch sits in the copy).
///
/// Safety: `source` has 16 readable bytes, 16-byte aligned; `to` is this block's shared memory.
#[inline(always)]
unsafe fn copy_key_chunk(to: Shared, source: *const u16, inside: bool) {
    if HAS_CP_ASYNC {
        cp_async_16(to.addr, source.cast(), if inside { 16 } else { 0 });
    } else {
        // Always a load (from a row that exists), then a mask: a select between two 16-byte
        // values would go through local memory.
        let loaded = *source.cast::<Chunk>();
        let keep = if inside { u32::MAX } else { 0 };
        *to.ptr.cast::<Chunk>() = Chunk(loaded.0.map(|word| word & keep));
    }
}

/// Most pages one key tile may span on the short-page path ([`copy_short_pages_tile`]): one
/// table entry per lane of a warp.
const SHORT_PAGES_PER_TILE: usize = 32;

/// Copies a K or V tile of `BK` keys from a paged cache whose pages are shorter than the tile
/// (`page_size = 1 << page_shift` divides `BK`, so the tile spans `BK >> page_shift` ≤
/// [`SHORT_PAGES_PER_TILE`] whole pages: vLLM's pages of 16 keys, mistral.rs's of 32). The
/// caller read the tile's page table once, lane `l` of every warp holding the tile's page `l`
/// (`lane_page`, a page number; any page that exists for a lane past the tile's keys). Each
/// chunk's row `r` then takes its page from lane `r >> page_shift` by a shuffle, and sits in
/// slot `r % page_size` of it: no table load, and no division, stands between a chunk and its
/// `cp.async`. (Before, every row read its own table entry, through a 64-bit division, and
/// each copy waited on that load: paged decode ran at a quarter of the contiguous speed.)
/// `page_base` is page 0's address of this tensor and KV head, `page_stride` the elements from
/// one page to the next. Thread `i` copies chunk `i % (D/8)` of row `i / (D/8)`, then
/// `THREADS` chunks further, as in [`copy_key_tile`].
///
/// Safety: every page a lane holds is in the cache, whose pages have `page_size` rows of `D`
/// readable elements, 16-byte aligned; rows `0 .. keys` (1 to `BK`) are the sequence's; `dst`
/// holds `BK × (D + PAD)` elements of this block's shared memory; the warp's 32 lanes are
/// converged (the shuffles).
#[inline(always)]
unsafe fn copy_short_pages_tile<const BK: usize, const D: usize, const THREADS: usize>(
    core: bool,
    dst: Shared,
    lane_page: u32,
    page_shift: u32,
    page_base: *const u16,
    page_stride: usize,
    seq_stride: usize,
    keys: usize,
) {
    const { assert!(BK.is_power_of_two() && THREADS % 32 == 0) };
    let chunks_per_row = D / 8;
    let chunks = BK * chunks_per_row;
    let tid = opaque(thread_idx_x()) as usize;
    let slot_mask = (1u32 << page_shift) - 1;
    // A loop, not unrolled (by LLVM: its step hidden by `opaque`; by ptxas: `no_unroll`):
    // unrolled at each of the tile loads of every entry point, these passes added a fifth to
    // the package's cubins.
    let mut pass = 0;
    while pass < chunks.div_ceil(THREADS) {
        no_unroll();
        let i = tid + pass * THREADS;
        // (32-bit arithmetic: a tile holds a few thousand chunks.)
        let (r, c) = ((i as u32 / chunks_per_row as u32) as usize, (i as u32 % chunks_per_row as u32) as usize);
        // Every lane shuffles, also one past the tile's chunks in a last partial pass.
        let page = shfl_idx(lane_page, (r as u32 >> page_shift) % SHORT_PAGES_PER_TILE as u32) as usize;
        if chunks % THREADS == 0 || i < chunks {
            // A row past the sequence still has an address in the cache (a slot of some
            // lane's page), so its zero-fill reads nothing out of bounds.
            let from = page_base.wrapping_add(page * page_stride + (r as u32 & slot_mask) as usize * seq_stride + c * 8);
            copy_key_chunk(dst.offset(chunk_offset::<D>(core, BK, r, c)), from, (r as u32) < keys as u32);
        }
        pass = opaque(pass as u32 + 1) as usize;
    }
}

/// Where a block's sequence lies: its first query and key rows in the tensors, and lengths.
struct Sequence {
    q_start: usize,
    len_q: usize,
    k_start: usize,
    len_k: usize,
}

/// A sequence's range of rows as the caller's device tables give it, and what the table check
/// reports about it: `finding` is a [`crate::attention_table_error`] code (0: none) and `value` the
/// number it names. The forward kernels ([`sequence`]) and the check launch
/// ([`merge::check_tables`]) both read a range through these helpers, so the check reports
/// exactly what the kernels did.
pub(super) struct TableRange {
    pub start: u32,
    /// The rows the forward kernels compute (queries) or read (keys); 0 when refused.
    pub len: u32,
    pub finding: u32,
    pub value: u32,
}

/// Sequence `b`'s rows of packed Q and O (varlen): `cu_seqlens_q[b]` to `cu_seqlens_q[b + 1]`.
/// A range from the caller's device memory may be decreasing (a wrapped length past
/// `seqlen_q`), longer than the grid's rows, or end past Q and O: its sequence then has no rows.
#[inline(always)]
pub(super) unsafe fn query_range(p: &AttentionParams, b: usize) -> TableRange {
    let (start, end) = (*p.cu_seqlens_q.ptr().add(b), *p.cu_seqlens_q.ptr().add(b + 1));
    let len = end.wrapping_sub(start);
    let valid = (len <= p.seqlen_q) & (end <= p.total_q);
    TableRange { start, len: if valid { len } else { 0 }, finding: if valid { 0 } else { QUERY_RANGE_INVALID }, value: start }
}

/// Sequence `b`'s keys (`KEY_LENGTHS`): from `key_starts[b · key_start_step]` to
/// `key_ends[b]`, FA2's cumulative lengths (step 1, the ends one entry on) or lengths per
/// sequence (step 0 on a zero word). A range that ends past packed K and V (`total_k`) is cut
/// there; one whose cut length is past what the launch was planned (and the block table sized)
/// for, or negative, reads no keys. (A cut, not a test: one more test in [`sequence`] made the
/// tightest prefill tile, 112 on sm_90, spill.)
#[inline(always)]
pub(super) unsafe fn key_range(p: &AttentionParams, b: usize) -> TableRange {
    let (start, end) = (*p.key_starts.ptr().add(b * p.key_start_step as usize), *p.key_ends.ptr().add(b));
    let len = end.min(p.total_k).wrapping_sub(start);
    if len > p.seqlen_k {
        let finding = if p.key_start_step != 0 { KEY_RANGE_TOO_LONG } else { KEY_LENGTH_TOO_LONG };
        TableRange { start, len: 0, finding, value: len }
    } else {
        TableRange { start, len, finding: if end > p.total_k { KEY_RANGE_PAST_END } else { 0 }, value: end }
    }
}

#[inline(always)]
unsafe fn sequence(p: &AttentionParams, b: usize) -> Sequence {
    let (q_start, len_q) = if p.flags & VARLEN != 0 {
        let range = query_range(p, b);
        (range.start as usize, range.len as usize)
    } else {
        (0, p.seqlen_q as usize)
    };
    let (k_start, len_k) = if p.flags & KEY_LENGTHS != 0 {
        let range = key_range(p, b);
        (range.start as usize, range.len as usize)
    } else {
        (0, p.seqlen_k as usize)
    };
    // Paged keys are addressed through the block table, not from a start row.
    let k_start = if p.flags & PAGED != 0 || p.flags & VARLEN == 0 { 0 } else { k_start };
    Sequence { q_start, len_q, k_start, len_k }
}

/// Row `row` of a row tile as (query position, query head): a block's rows take the
/// `heads_packed` query heads of head group `group` (one KV head's, for decode tiles; a single
/// head for prefill tiles) for each query position in turn.
#[inline(always)]
fn packed_row(row: u32, heads_packed: u32, group: usize) -> (usize, usize) {
    let q = row / heads_packed;
    (q as usize, group * heads_packed as usize + (row - q * heads_packed) as usize)
}

/// Where query `q` of sequence `b`, head `h`, sits among all of the launch's rows:
/// `h · total_q + q_global`, with `q_global` its row in the packed varlen tensor (else
/// `b · seqlen_q + q`). Split launches store their partial rows, and both merges find them,
/// by this index.
#[inline(always)]
fn launch_row_id(p: &AttentionParams, flags: u32, seq: &Sequence, b: usize, q: usize, h: usize) -> usize {
    let q_global = if flags & VARLEN != 0 { seq.q_start + q } else { b * p.seqlen_q as usize + q };
    h * p.total_q as usize + q_global
}

/// `cap · tanh(x / cap)` from `ex2` (`tanh.approx` is sm_75+): `tanh y = 1 − 2 / (e^{2y} + 1)`.
#[inline(always)]
fn softcap(x: f32, cap: f32, inv_cap: f32) -> f32 {
    let e = exp2(2.0 * LOG2E * x * inv_cap);
    cap * (1.0 - 2.0 * rcp(e + 1.0))
}

/// The forward kernel (see the module docs). `ROWS = 16 · M_TILES · ROW_WARPS`, `K_STEPS = DK / 16`,
/// `S_TILES = BK / KEY_SPLIT / 8` (a warp's keys of a tile), `O_TILES = DV / DV_SPLIT / 8`,
/// `Q_FRAGS = K_STEPS` when Q stays in registers (else 1),
/// `THREADS = 32 · ROW_WARPS · DV_SPLIT · KEY_SPLIT`: stable Rust cannot compute array lengths
/// from const generics. `SHORT_PAGES`: the short-page copy is compiled in
/// ([`copies_short_pages`]).
///
/// Safety: the host validated every address the parameters describe.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn forward<
    const ROWS: usize,
    const DK: usize,
    const DV: usize,
    const M_TILES: usize,
    const ROW_WARPS: usize,
    const DV_SPLIT: usize,
    const KEY_SPLIT: usize,
    const BK: usize,
    const STAGES: usize,
    const Q_IN_REGISTERS: bool,
    const PATH: u8,
    const BF16: bool,
    const BIASES: bool,
    const K_STEPS: usize,
    const S_TILES: usize,
    const O_TILES: usize,
    const Q_FRAGS: usize,
    const THREADS: usize,
    const SHORT_PAGES: bool,
>(
    p: &AttentionParams,
) {
    const { assert!(K_STEPS == DK / 16 && S_TILES * 8 * KEY_SPLIT == BK && S_TILES % 2 == 0 && O_TILES == DV / DV_SPLIT / 8 && THREADS == 32 * ROW_WARPS * DV_SPLIT * KEY_SPLIT) };
    const { assert!(Q_FRAGS == if Q_IN_REGISTERS { K_STEPS } else { 1 } && ROWS == 16 * M_TILES * ROW_WARPS) };
    // On sm_90+ this launch is itself a programmatic dependent of the launch before it on the
    // stream: its blocks may be resident (and their setup done) before that launch ends, and
    // wait here, before the first read of anything it may have written (Q, K, V, the tables,
    // or the split workspace the previous merge read). Except after the table check, which
    // this launch does not depend on (it clamps what the tables point at): it goes on at once.
    if p.flags & CHECK_TABLES == 0 {
        wait_for_prerequisite_grid();
    }
    // A split launch lets its dependent, the merge (a programmatic dependent on sm_90+), be
    // scheduled at once: its few blocks wait for this grid's completion before reading
    // anything, and are ready when the last split ends. Any other launch's dependent is a whole
    // grid (the next call's forward, a GEMM): it gets the implicit trigger at block exit, so
    // that it is dispatched onto idle SMs. Dispatched beside this grid's long blocks, it was
    // placed two blocks to some SMs and none to others: batch 16 x 8k decode ran 11% slower
    // with the trigger here, 3.4% with it after the main loop (H100).
    if p.splits > 1 {
        allow_dependent_launch();
    }
    let rows_per_block = ROWS;
    // `wgmma` tiles: K, V and Q in the swizzled layout (`chunk_offset`), rows unpadded. (A
    // constant, not a local: the copy closure, which LLVM may keep as a function of its own,
    // would capture a local by reference, and its value would then be reloaded at run time.)
    let core = Wgmma::<PATH>::CORE;
    const { assert!(PATH != PATH_WGMMA || (M_TILES == 1 && ROW_WARPS % 4 == 0 && DV_SPLIT == 1 && KEY_SPLIT == 1 && STAGES > 1 && !Q_IN_REGISTERS)) };
    let pad = if core { 0 } else { PAD };
    let (k_row, v_row) = (DK + pad, DV + pad);
    // The plain entry points (`BIASES` false) never see a mask tensor, ALiBi or softcap: with
    // those flags known to be clear, their passes are compiled out.
    let flags = if BIASES { p.flags } else { p.flags & !(MASK | ALIBI | SOFTCAP | MASK_F32) };

    // ---- Which rows and keys this block owns ----
    let heads_packed = p.heads_packed as usize;
    let groups = p.heads_q as usize / heads_packed;
    let (b, group) = (block_idx_y() as usize / groups, block_idx_y() as usize % groups);
    let kv_head = group * heads_packed / (p.heads_q / p.heads_k) as usize;
    let seq = sequence(p, b);
    let rows = seq.len_q * heads_packed;
    let row0 = block_idx_x() as usize * rows_per_block;
    if row0 >= rows {
        return;
    }
    let last_row = if row0 + rows_per_block < rows { row0 + rows_per_block } else { rows } - 1;
    let diag_offset = seq.len_k as i64 - seq.len_q as i64;
    let (left, right) = (p.window_left as i64, p.window_right as i64);
    // Keys some row of the block may see.
    // Query positions of the block's first and last rows. Row arithmetic is 32-bit (the host
    // bounds every length below 2^31): a 64-bit division is a subroutine call whose registers
    // the main loop cannot spare.
    let (q_first, q_last) = ((row0 as u32 / p.heads_packed) as i64, (last_row as u32 / p.heads_packed) as i64);
    let first_key = if left >= 0 { (q_first + diag_offset - left).max(0) } else { 0 };
    let end_key = if right >= 0 { (q_last + diag_offset + right + 1).min(seq.len_k as i64) } else { seq.len_k as i64 };
    let (tile_lo, tile_hi) = if end_key > first_key { (first_key as usize / BK, (end_key as usize).div_ceil(BK)) } else { (0, 0) };
    let splits = p.splits as usize;
    let split = block_idx_z() as usize;
    let n_tiles = tile_hi - tile_lo;
    let my_lo = tile_lo + split * n_tiles / splits;
    let my_hi = tile_lo + (split + 1) * n_tiles / splits;

    // ---- Shared memory ----
    let smem_ptr = dynamic_smem();
    let smem = Shared { ptr: smem_ptr.cast::<u16>(), addr: shared_address(smem_ptr) };
    // The swizzled atoms of `wgmma` tiles start at 1024-byte boundaries (the launch asks for
    // 1024 bytes more: `AttentionTile::smem_bytes`).
    let smem = if core { smem.offset(((1024 - smem.addr % 1024) % 1024 / 2) as usize) } else { smem };
    let q_smem = smem;
    let k_smem = |s: usize| smem.offset(rows_per_block * k_row + s * BK * k_row);
    let v_smem = |s: usize| smem.offset(rows_per_block * k_row + STAGES * BK * k_row + s * BK * v_row);
    let vector = flags & QKV_VECTOR != 0;

    // Global address of row `r` of the block (None past the sequence).
    let row_at = |r: usize| -> Option<(usize, usize)> {
        let row = (row0 + r) as u32;
        (row < rows as u32).then(|| packed_row(row, p.heads_packed, group))
    };
    let q_batch = if flags & VARLEN != 0 { 0 } else { b * p.q_batch_stride as usize };
    copy_rows::<ROWS, DK, THREADS>(core, q_smem, vector, |r| {
        row_at(r).map(|(q, h)| p.q.ptr().add(q_batch + (seq.q_start + q) * p.q_seq_stride as usize + h * p.q_head_stride as usize) as *const u16)
    });
    // Key `j`'s row in K (or V, with that tensor's strides).
    let key_row = |j: usize, base: *const u16, batch_stride: usize, seq_stride: usize, head_stride: usize| -> *const u16 {
        if flags & PAGED != 0 {
            // Clamped into the cache: only a device-side table can point past it (the check
            // launch records it; the host checks its own).
            let page = (*p.block_table.ptr().add(b * p.block_table_stride as usize + j / p.page_size as usize)).min(p.last_page) as usize;
            base.add(page * batch_stride + (j % p.page_size as usize) * seq_stride + kv_head * head_stride)
        } else {
            let batch = if flags & VARLEN != 0 { 0 } else { b * batch_stride };
            base.add(batch + (seq.k_start + j) * seq_stride + kv_head * head_stride)
        }
    };
    // The copy's inputs are hidden from the optimizer (`opaque`), so that each tile's row
    // addresses are computed when the tile is copied instead of once, before the main loop,
    // and kept live in registers the accumulators need.
    // Paged keys take it too where a page holds whole tiles (`page_size` a multiple of `BK`):
    // a tile's keys are then consecutive slots of one page, found by one table entry.
    let contiguous = vector && (flags & PAGED == 0 || p.page_size as usize % BK == 0);
    // Pages shorter than a tile, a power of two that divides it, take the short-page copy:
    // the tile's table entries read once, a lane each, and shared by shuffles.
    let short_pages = SHORT_PAGES && vector && flags & PAGED != 0 && p.page_size.is_power_of_two() && p.page_size < BK as u32 && p.page_size as usize * SHORT_PAGES_PER_TILE >= BK;
    // (Inlined at each call: as a function of its own it would take its captures through
    // local memory.)
    let load_tile = #[inline(always)]
    |tile: usize, stage: usize| {
        let j0 = tile * BK;
        let (k_base, v_base) = (opaque(p.k.ptr() as u64) as *const u16, opaque(p.v.ptr() as u64) as *const u16);
        if short_pages {
            let keys = (seq.len_k - j0).min(BK);
            let page_shift = p.page_size.trailing_zeros();
            // Lane `l` reads the tile's page `l`; a lane past the tile's keys reads its first
            // page (which exists), never a table entry past the sequence's.
            let lane = thread_idx_x() % 32;
            let page_in_tile = if (lane << page_shift) < keys as u32 { lane as usize } else { 0 };
            let column = b * p.block_table_stride as usize + (j0 >> page_shift) + page_in_tile;
            let lane_page = (*p.block_table.ptr().add(column)).min(p.last_page);
            let k_page0 = k_base.wrapping_add(kv_head * p.k_head_stride as usize);
            let v_page0 = v_base.wrapping_add(kv_head * p.v_head_stride as usize);
            copy_short_pages_tile::<BK, DK, THREADS>(Wgmma::<PATH>::CORE, k_smem(stage).opaque(), lane_page, page_shift, k_page0, p.k_batch_stride as usize, opaque(p.k_seq_stride) as usize, keys);
            copy_short_pages_tile::<BK, DV, THREADS>(Wgmma::<PATH>::CORE, v_smem(stage).opaque(), lane_page, page_shift, v_page0, p.v_batch_stride as usize, opaque(p.v_seq_stride) as usize, keys);
            return;
        }
        if contiguous {
            // The common case: one address per tile and tensor (one table entry when paged), a
            // multiply-add per chunk.
            let keys = (seq.len_k - j0).min(BK);
            let first_k = key_row(j0, k_base, p.k_batch_stride as usize, p.k_seq_stride as usize, p.k_head_stride as usize);
            let first_v = key_row(j0, v_base, p.v_batch_stride as usize, p.v_seq_stride as usize, p.v_head_stride as usize);
            copy_key_tile::<BK, DK, THREADS>(Wgmma::<PATH>::CORE, k_smem(stage).opaque(), first_k, opaque(p.k_seq_stride) as usize, keys);
            copy_key_tile::<BK, DV, THREADS>(Wgmma::<PATH>::CORE, v_smem(stage).opaque(), first_v, opaque(p.v_seq_stride) as usize, keys);
            return;
        }
        copy_rows::<BK, DK, THREADS>(Wgmma::<PATH>::CORE, k_smem(stage).opaque(), vector, |r| {
            let j = j0 + r;
            if j < seq.len_k {
                Some(key_row(j, k_base, p.k_batch_stride as usize, opaque(p.k_seq_stride) as usize, p.k_head_stride as usize))
            } else {
                None
            }
        });
        copy_rows::<BK, DV, THREADS>(Wgmma::<PATH>::CORE, v_smem(stage).opaque(), vector, |r| {
            let j = j0 + r;
            if j < seq.len_k {
                Some(key_row(j, v_base, p.v_batch_stride as usize, opaque(p.v_seq_stride) as usize, p.v_head_stride as usize))
            } else {
                None
            }
        });
    };
    // With `STAGES` ≥ 2, tiles t + 1 .. t + STAGES − 1 are in flight while tile t is
    // computed: the prologue issues the first STAGES − 1 tiles, one commit group each (Q rides
    // in the first), and every iteration issues one more. With one stage, each tile is copied
    // (and waited for) before it is computed.
    let prefetch = HAS_CP_ASYNC && STAGES > 1;
    if prefetch && SHORT_PAGES {
        // A loop, not unrolled (`opaque` step, `no_unroll`), where the tile copy has all three
        // paths: one copy of it here serves every prologue tile. (The prefill tiles keep the
        // unrolled prologue: the loop cost one of them, 192/128 on sm_100, 4 bytes of spill.)
        let mut s = 0;
        while s < STAGES - 1 {
            no_unroll();
            if my_lo + s < my_hi {
                load_tile(my_lo + s, s);
            }
            cp_async_commit();
            s = opaque(s as u32 + 1) as usize;
        }
    } else if prefetch {
        for s in 0..STAGES - 1 {
            if my_lo + s < my_hi {
                load_tile(my_lo + s, s);
            }
            cp_async_commit();
        }
    } else if HAS_CP_ASYNC {
        cp_async_commit();
    }

    // ---- This thread's place in the fragments ----
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let warp_row0 = (warp % ROW_WARPS) * 16 * M_TILES;
    // (The 4 warps of a `wgmma` warpgroup compute together: active when its first row is.)
    let warp_active = row0 + if core { warp_row0 / 64 * 64 } else { warp_row0 } < rows;
    let dv_col0 = (warp / ROW_WARPS) % DV_SPLIT * (DV / DV_SPLIT);
    // The warp's keys of every tile: columns `key0 .. key0 + keys_per_warp` of the stage.
    let keys_per_warp = S_TILES * 8;
    let key_group = warp / (ROW_WARPS * DV_SPLIT);
    let key0 = key_group * keys_per_warp;

    let mut q_frags = [[[0u32; 4]; Q_FRAGS]; M_TILES];
    let mut o_acc = [[[0f32; 4]; O_TILES]; M_TILES];
    // Running maximum (log2 units) and this lane's part of the denominator, per
    // (tile, row g or g + 8).
    let mut m_run = [[f32::NEG_INFINITY; 2]; M_TILES];
    let mut l_run = [[0f32; 2]; M_TILES];
    let scale_log2 = p.scale * LOG2E;
    // The raw-score path multiplies maxima by the scale, which must then be positive.
    let general = flags & (MASK | ALIBI | SOFTCAP) != 0 || !(p.scale > 0.0);
    let inv_cap = if flags & SOFTCAP != 0 { 1.0 / p.softcap } else { 0.0 };

    let mut stage = 0;
    let mut tile = my_lo;
    while tile < my_hi {
        // ---- Bring key tile `tile` into shared memory, start the next one ----
        if prefetch {
            // Tile `tile`'s group is complete when at most STAGES − 2 later groups are pending;
            // the barrier then publishes every thread's copies and proves that every warp is
            // done with the stage computed last iteration, which the next copy overwrites.
            cp_async_wait(STAGES - 2);
            if core {
                // The copies (generic proxy) are read by `wgmma` (async proxy).
                fence_proxy_async_shared();
            }
            sync_threads();
            if tile + STAGES - 1 < my_hi {
                load_tile(tile + STAGES - 1, (stage + STAGES - 1) % STAGES);
            }
            cp_async_commit();
        } else {
            sync_threads();
            load_tile(tile, 0);
            if HAS_CP_ASYNC {
                cp_async_commit();
                cp_async_wait(0);
            }
            sync_threads();
        }
        if Q_IN_REGISTERS && tile == my_lo {
            for mt in 0..M_TILES {
                for ks in 0..Q_FRAGS {
                    q_frags[mt][ks] = load_a(q_smem, k_row, warp_row0 + mt * 16, ks * 16);
                }
            }
        }
        let (ks_base, vs_base, qs_base) = (k_smem(stage).opaque(), v_smem(stage).opaque(), q_smem.opaque());

        // A warp whose rows all lie past the sequence (decode: a few packed rows in a block
        // of many) only copies; it computes nothing. (Warp-uniform, and every barrier is
        // outside.)
        if warp_active {
            // ---- S = Q · Kᵀ for this warp's rows and its keys of the tile ----
            let mut s = [[[0f32; 4]; S_TILES]; M_TILES];
            if core {
                // The warpgroup's 64 rows of Q times the tile's BK keys, one `wgmma` per 16
                // dimensions (the first overwrites the accumulator).
                // K-major, 128-byte swizzle: k-step `ks` starts 32 bytes into the rows of its
                // 64-element column (`chunk_offset`); the next 8 rows are 1024 bytes on.
                let q_rows = qs_base.offset(chunk_offset::<DK>(true, ROWS, warp_row0 / 64 * 64, 0));
                wgmma_fence();
                for ks in 0..K_STEPS {
                    let (column, within) = (ks * 16 / 64, ks * 16 % 64);
                    let a = wgmma_descriptor_sw128(q_rows.offset(column * ROWS * 64 + within).addr, 16, 1024);
                    let b = wgmma_descriptor_sw128(ks_base.offset(column * BK * 64 + within).addr, 16, 1024);
                    wgmma_ss(&mut s[0], a, b, (ks > 0) as u32, BF16);
                }
                wgmma_commit();
                wgmma_wait(0);
                wgmma_hold(&mut s[0]);
            }
            // Q from registers: the loop is unrolled (static indices into `q_frags`). Q from shared
            // memory: a rolled loop (its trip count hidden from LLVM, and under libNVVM its
            // counter too: `rolled_step`), so ptxas cannot hoist the fragment reads of every
            // k-step ahead of the first multiply and run out of registers.
            let k_steps = if core { 0 } else if Q_IN_REGISTERS { K_STEPS } else { opaque(K_STEPS as u32) as usize };
            let mut ks = 0;
            while ks < k_steps {
                let mut a = [[0u32; 4]; M_TILES];
                for mt in 0..M_TILES {
                    a[mt] = if Q_IN_REGISTERS { q_frags[mt][ks] } else { load_a(qs_base, k_row, warp_row0 + mt * 16, ks * 16) };
                }
                for np in 0..S_TILES / 2 {
                    let bf = load_b_rows(ks_base, k_row, key0 + np * 16, ks * 16);
                    for mt in 0..M_TILES {
                        s[mt][2 * np] = mma::<PATH, BF16>(a[mt], [bf[0], bf[1]], s[mt][2 * np]);
                        s[mt][2 * np + 1] = mma::<PATH, BF16>(a[mt], [bf[2], bf[3]], s[mt][2 * np + 1]);
                    }
                }
                ks = if Q_IN_REGISTERS { ks + 1 } else { rolled_step(ks) };
            }

            // ---- Scores: scale, softcap, mask, ALiBi, visibility (log2 units) ----
            // The warp's first key (with a key split, possibly past the sequence's end).
            let j0 = tile * BK + key0;
            let uncut = j0 + keys_per_warp <= seq.len_k
                && (right < 0 || (j0 + keys_per_warp - 1) as i64 <= q_first + diag_offset + right)
                && (left < 0 || j0 as i64 >= q_last + diag_offset - left);
            // A tile that nothing cuts or biases keeps its raw products: the scale joins them in
            // the exponent below (one FFMA each instead of a multiply, then a subtraction).
            let raw = uncut && !general;
            let score_scale = if raw { scale_log2 } else { 1.0 };
            if !raw {
                // (A warp-uniform branch: a warp's keys of the tile are cut or not.) One pass per
                // feature, each behind a test of the launch's flags, and no branch inside a
                // pass: every score carries the same straight-line code, in 32-bit integers
                // (a chain of per-element branches, or 64-bit compares, cost ptxas registers
                // that the accumulators hold).
                let scale = p.scale;
                for mt in 0..M_TILES {
                    for nt in 0..S_TILES {
                        for e in 0..4 {
                            s[mt][nt][e] *= scale;
                        }
                    }
                }
                if flags & SOFTCAP != 0 {
                    for mt in 0..M_TILES {
                        for nt in 0..S_TILES {
                            for e in 0..4 {
                                s[mt][nt][e] = softcap(s[mt][nt][e], p.softcap, inv_cap);
                            }
                        }
                    }
                }
                // Key `j0 + col` sits at column `col = nt·8 + 2t + e` of the warp's keys; the
                // last key of the sequence bounds the mask's reads (a column past it is
                // invisible below; negative: every key of the warp is).
                let last_col = seq.len_k as i64 - 1 - j0 as i64;
                for mt in 0..M_TILES {
                    for half in 0..2 {
                        let place = row_at(warp_row0 + mt * 16 + g + 8 * half);
                        let (q, h) = place.unwrap_or((0, 0));
                        // Distance from the tile's first key to the row's diagonal, and the
                        // visible columns [lo, hi] of the tile (empty for a row past the data).
                        let diag = q as i64 + diag_offset - j0 as i64;
                        let clamp_col = |x: i64| x.clamp(-1, keys_per_warp as i64) as i32;
                        let lo = if left >= 0 { clamp_col(diag - left) } else { 0 };
                        let hi = match (place.is_some(), right >= 0) {
                            (false, _) => -1,
                            (true, true) => clamp_col((diag + right).min(last_col)),
                            (true, false) => clamp_col(last_col),
                        };
                        if flags & MASK != 0 && place.is_some() && last_col >= 0 {
                            let mask_row = q * p.mask_row_stride as usize + j0;
                            for nt in 0..S_TILES {
                                for e in 0..2 {
                                    let col = ((nt * 8 + 2 * t + e) as u32).min(last_col as u32) as usize;
                                    s[mt][nt][2 * half + e] += if flags & MASK_F32 != 0 {
                                        *p.mask.ptr().cast::<f32>().add(mask_row + col)
                                    } else {
                                        f16_to_f32(*p.mask.ptr().cast::<u16>().add(mask_row + col) as u32)
                                    };
                                }
                            }
                        }
                        if flags & ALIBI != 0 && place.is_some() {
                            let slope = *p.alibi_slopes.ptr().add(h);
                            let diag32 = diag.clamp(-(1 << 30), 1 << 30) as i32;
                            for nt in 0..S_TILES {
                                for e in 0..2 {
                                    let col = (nt * 8 + 2 * t + e) as i32;
                                    s[mt][nt][2 * half + e] -= slope * (diag32 - col).unsigned_abs() as f32;
                                }
                            }
                        }
                        for nt in 0..S_TILES {
                            for e in 0..2 {
                                let col = (nt * 8 + 2 * t + e) as i32;
                                let x = s[mt][nt][2 * half + e] * LOG2E;
                                s[mt][nt][2 * half + e] = if col >= lo && col <= hi { x } else { f32::NEG_INFINITY };
                            }
                        }
                    }
                }
            }

            // ---- Online softmax: row maxima, a lazy rescale, probabilities ----
            // `m_run` is each row's reference maximum (log2 units): its probabilities are
            // `2^(x − m_run)`. It moves only when a tile's maximum exceeds it by more than
            // `RESCALE_SLACK`, and then the whole warp rescales its accumulators together
            // (a warp-uniform branch); otherwise the tile costs no rescale at all. Numerator and
            // denominator share the reference, so the result is the same; a probability is at
            // most `2^RESCALE_SLACK`, far inside f16's range.
            let mut tile_max = [[f32::NEG_INFINITY; 2]; M_TILES];
            let mut stale = false;
            for mt in 0..M_TILES {
                for half in 0..2 {
                    let mut mx = f32::NEG_INFINITY;
                    for nt in 0..S_TILES {
                        mx = mx.max(s[mt][nt][2 * half]).max(s[mt][nt][2 * half + 1]);
                    }
                    mx = mx.max(shfl_xor_f32(mx, 1));
                    mx = mx.max(shfl_xor_f32(mx, 2));
                    // score_scale > 0 (the host's scale is positive on the raw path).
                    tile_max[mt][half] = mx * score_scale;
                    stale |= tile_max[mt][half] > m_run[mt][half] + RESCALE_SLACK;
                }
            }
            if ballot(stale) != 0 {
                for mt in 0..M_TILES {
                    for half in 0..2 {
                        let old = m_run[mt][half];
                        let new = if tile_max[mt][half] > old + RESCALE_SLACK { tile_max[mt][half] } else { old };
                        // A row that keeps its reference (−inf included) is multiplied by 1.
                        let correction = if new == old { 1.0 } else { exp2(old - new) };
                        m_run[mt][half] = new;
                        l_run[mt][half] *= correction;
                        for ot in 0..O_TILES {
                            o_acc[mt][ot][2 * half] *= correction;
                            o_acc[mt][ot][2 * half + 1] *= correction;
                        }
                    }
                }
            }
            for mt in 0..M_TILES {
                for half in 0..2 {
                    // A row that has seen no visible key yet keeps 0 as its reference, so that
                    // exp2(−inf − reference) is 0, not NaN.
                    let reference = if m_run[mt][half] == f32::NEG_INFINITY { 0.0 } else { m_run[mt][half] };
                    for nt in 0..S_TILES {
                        for e in 0..2 {
                            let prob = exp2(fma(s[mt][nt][2 * half + e], score_scale, -reference));
                            s[mt][nt][2 * half + e] = prob;
                            l_run[mt][half] += prob;
                        }
                    }
                }
            }

            // ---- O += P · V: P's fragments are the score fragments, rounded to 16 bits ----
            if core {
                // One `wgmma` per 16 keys: A is P (the warp's fragments, in registers), B the
                // 16 keys' rows of V as stored (MN-major: `D_v` contiguous).
                wgmma_fence();
                for kk in 0..S_TILES / 2 {
                    let pa = p_fragment::<BF16>(s[0][2 * kk], s[0][2 * kk + 1]);
                    // MN-major, 128-byte swizzle: 16 keys are two 1024-byte atoms; the next 64
                    // columns of V are a column `BK · 128` bytes on.
                    let b = wgmma_descriptor_sw128(vs_base.offset(chunk_offset::<DV>(true, BK, 16 * kk, 0)).addr, (BK * 128) as u32, 1024);
                    wgmma_rs(&mut o_acc[0], pa, b, 1, BF16);
                }
                wgmma_commit();
                wgmma_wait(0);
                wgmma_hold(&mut o_acc[0]);
            }
            for kk in 0..if core { 0 } else { S_TILES / 2 } {
                let mut pa = [[0u32; 4]; M_TILES];
                for mt in 0..M_TILES {
                    pa[mt] = p_fragment::<BF16>(s[mt][2 * kk], s[mt][2 * kk + 1]);
                }
                for dp in 0..O_TILES / 2 {
                    let bf = load_b_cols(vs_base, v_row, key0 + kk * 16, dv_col0 + dp * 16);
                    for mt in 0..M_TILES {
                        o_acc[mt][2 * dp] = mma::<PATH, BF16>(pa[mt], [bf[0], bf[1]], o_acc[mt][2 * dp]);
                        o_acc[mt][2 * dp + 1] = mma::<PATH, BF16>(pa[mt], [bf[2], bf[3]], o_acc[mt][2 * dp + 1]);
                    }
                }
            }
        }
        stage = (stage + 1) % STAGES;
        tile += 1;
    }
    if HAS_CP_ASYNC {
        // No copy may still be writing shared memory when the block exits (or the key
        // split's merge below reuses it).
        cp_async_wait(0);
    }

    // ---- Key split: merge the key groups' softmax states into the first group's warps ----
    // Every warp of a later key group leaves its rows' reference maxima, partial denominators
    // and output accumulators in shared memory (from its start, over Q and the K/V stages: the
    // barrier that opens the merge follows every warp's last read of them and every copy's
    // arrival), in its own fragment layout, lane-major (conflict-free); the first group's warp
    // with the same rows and columns rescales both sides to the larger reference and adds
    // them, then stores the rows as without a split. A side whose reference is still −inf saw no visible key: it
    // holds zeros and weighs 0.
    if KEY_SPLIT > 1 {
        sync_threads();
        let scratch = smem_ptr.cast::<f32>();
        let per_lane = M_TILES * (4 * O_TILES + 4);
        let warp_in_group = warp % (ROW_WARPS * DV_SPLIT);
        // SAFETY: `key_merge_bytes` (part of the launch's shared memory) holds every slot.
        let slot = |group: usize, item: usize| scratch.add((((group - 1) * ROW_WARPS * DV_SPLIT + warp_in_group) * per_lane + item) * 32 + lane);
        if key_group > 0 {
            let mut item = 0;
            for mt in 0..M_TILES {
                for half in 0..2 {
                    *slot(key_group, item) = m_run[mt][half];
                    *slot(key_group, item + 1) = l_run[mt][half];
                    item += 2;
                }
                for ot in 0..O_TILES {
                    for e in 0..4 {
                        *slot(key_group, item) = o_acc[mt][ot][e];
                        item += 1;
                    }
                }
            }
        }
        sync_threads();
        if key_group > 0 {
            return;
        }
        for group in 1..KEY_SPLIT {
            let mut item = 0;
            for mt in 0..M_TILES {
                let mut weights = [[0f32; 2]; 2];
                for half in 0..2 {
                    let (other_m, other_l) = (*slot(group, item), *slot(group, item + 1));
                    item += 2;
                    let own_m = m_run[mt][half];
                    let top = own_m.max(other_m);
                    let weight = |m: f32| if m == f32::NEG_INFINITY { 0.0 } else { exp2(m - top) };
                    weights[half] = [weight(own_m), weight(other_m)];
                    m_run[mt][half] = top;
                    l_run[mt][half] = l_run[mt][half] * weights[half][0] + other_l * weights[half][1];
                }
                for ot in 0..O_TILES {
                    for e in 0..4 {
                        let [own, other] = weights[e / 2];
                        o_acc[mt][ot][e] = o_acc[mt][ot][e] * own + *slot(group, item) * other;
                        item += 1;
                    }
                }
            }
        }
    }

    // ---- Epilogue: normalize, sinks, store O (and LSE, or the split's partials) ----
    let split_mode = flags & SPLIT != 0;
    for mt in 0..M_TILES {
        for half in 0..2 {
            let mut l = l_run[mt][half];
            l += shfl_xor_f32(l, 1);
            l += shfl_xor_f32(l, 2);
            let r = warp_row0 + mt * 16 + g + 8 * half;
            let Some((q, h)) = row_at(r) else { continue };
            let m = m_run[mt][half];
            // factor: what the accumulator is multiplied by; lse: log2-sum-exp of the row.
            let (factor, lse2) = if flags & SINKS != 0 && !split_mode {
                let sink = *p.sinks.ptr().add(h) * LOG2E;
                let top = m.max(sink);
                let kept = exp2(m - top);
                let total = l * kept + exp2(sink - top);
                (kept * rcp(total), top + log2(total))
            } else if l > 0.0 {
                (rcp(l), m + log2(l))
            } else {
                (0.0, f32::NEG_INFINITY)
            };
            if split_mode {
                let row_id = launch_row_id(p, flags, &seq, b, q, h);
                let slot = split * p.heads_q as usize * p.total_q as usize + row_id;
                let out = p.partial_o.ptr_mut().add(slot * DV);
                for ot in 0..O_TILES {
                    let d = dv_col0 + ot * 8 + 2 * t;
                    *out.add(d) = o_acc[mt][ot][2 * half] * factor;
                    *out.add(d + 1) = o_acc[mt][ot][2 * half + 1] * factor;
                }
                if t == 0 && dv_col0 == 0 {
                    *p.partial_lse.ptr_mut().add(slot) = lse2 * LN2;
                }
                continue;
            }
            let o_batch = if flags & VARLEN != 0 { 0 } else { b * p.o_batch_stride as usize };
            let out = p.o.ptr_mut().add(o_batch + (seq.q_start + q) * p.o_seq_stride as usize + h * p.o_head_stride as usize);
            for ot in 0..O_TILES {
                let d = dv_col0 + ot * 8 + 2 * t;
                let packed = pack::<BF16>(o_acc[mt][ot][2 * half] * factor, o_acc[mt][ot][2 * half + 1] * factor);
                if flags & O_PAIRS != 0 {
                    *out.add(d).cast::<u32>() = packed;
                } else {
                    *out.add(d) = packed as u16;
                    *out.add(d + 1) = (packed >> 16) as u16;
                }
            }
            if flags & WRITE_LSE != 0 && t == 0 && dv_col0 == 0 {
                let lse_batch = if flags & VARLEN != 0 { 0 } else { b * p.lse_batch_stride as usize };
                *p.lse.ptr_mut().add(lse_batch + h * p.lse_head_stride as usize + seq.q_start + q) = lse2 * LN2;
            }
        }
    }
}

/// Defines the forward entry point of (`$head`, `$dtype`) with the build's config row and its
/// tile of kind `$kind` (`AttentionTileKind`; `Plain` compiles the mask, ALiBi and softcap
/// passes out).
macro_rules! attention_entry {
    ($name:ident, $head:ident, $dtype:ident, $kind:ident) => {
        attention_params_entry!(
            /// Flash-attention forward entry point (see the module docs). Arguments are
            /// validated by the host.
            ///
            /// # Safety
            /// Every pointer must cover the elements the parameters address.
            $name,
            |params| {
                const HEAD: AttentionHead = AttentionHead::$head;
                const DTYPE: AttentionDtype = AttentionDtype::$dtype;
                const KIND: AttentionTileKind = AttentionTileKind::$kind;
                const T: crate::attention_config::AttentionTile = attention_config(BUILD_CONFIG).tile_of(KIND, HEAD);
                const DK: usize = HEAD.dk() as usize;
                const DV: usize = HEAD.dv() as usize;
                const Q_FRAGS: usize = if T.q_in_registers { DK / 16 } else { 1 };
                // A plain entry point without a tile of its own is never launched: empty.
                if matches!(KIND, AttentionTileKind::Plain) && !attention_config(BUILD_CONFIG).has_plain_tile(HEAD) {
                    return;
                }
                forward::<
                    { T.rows() as usize },
                    DK,
                    DV,
                    { T.m_tiles as usize },
                    { T.row_warps as usize },
                    { T.dv_split as usize },
                    { T.key_split as usize },
                    { T.bk as usize },
                    { T.stages as usize },
                    { T.q_in_registers },
                    { if T.wgmma { PATH_WGMMA } else { path_id(matrix_path(BUILD_CONFIG, DTYPE)) } },
                    { matches!(DTYPE, AttentionDtype::Bf16) },
                    { !matches!(KIND, AttentionTileKind::Plain) },
                    { DK / 16 },
                    { T.keys_per_warp() as usize / 8 },
                    { DV / T.dv_split as usize / 8 },
                    Q_FRAGS,
                    { T.threads() as usize },
                    { copies_short_pages(KIND) },
                >(&params)
            }
        );
    };
}

macro_rules! define_attention_entries {
    (forward: [$(($name:ident, $head:ident, $dtype:ident)),*], decode: [$(($dname:ident, $dhead:ident, $ddtype:ident)),*], plain: [$(($pname:ident, $phead:ident, $pdtype:ident)),*], merge: [$(($mname:ident, $mdtype:ident)),*]) => {
        $(attention_entry!($name, $head, $dtype, Prefill);)*
        $(attention_entry!($dname, $dhead, $ddtype, Decode);)*
        $(attention_entry!($pname, $phead, $pdtype, Plain);)*
        $(merge::merge_entry!($mname, $mdtype);)*
    };
}
crate::with_attention_kernels!(define_attention_entries);
