//! # MoE quantized matmul (ggml's `mul_mat_id`): quantize, route, multiply
//!
//! `y[t][s] = W[ids[t][s]] · x[t][s or 0]` with the weights `W[experts, n, k]` in a GGUF block
//! format, in two launches on one stream, neither of which waits for the host (the whole op can
//! be captured in a CUDA graph). The first, `prepare`, does steps 1 and 2 side by side (they
//! are independent): block 0 routes, the other blocks quantize; at decode batches a launch is
//! a fair part of the call, so the two share one.
//!
//! 1. **Quantize** (`quantize`, blocks 1 ..): every 32 activations become a q8_1 block, int8
//!    values `q = round(x / d)` with `d = max|x| / 127`, exactly as the host's `quantize_q8_1`
//!    rounds them; the values go to `x_q` (4 to a word, a row's words contiguous so that a K
//!    step of a row is 1 KB of 16-byte loads) and the scale, kept in f32, to `x_d`. Eight
//!    threads share a block (4 values each, the maximum by 3 shuffles).
//! 2. **Route** (`route`, block 0, 1024 threads): counts the slots routed to each expert
//!    (shared-memory atomics; an id outside `0..experts` lowers `error[0]` to its slot and is never used
//!    again, so a bad id cannot become an out-of-bounds read), turns the counts into prefix sums
//!    of rows (`row_start`) and of tiles (`tiles_before`, tiles of the matmul's `tile_rows`),
//!    then scatters every slot into its expert's segment of `slot_list`. The order of slots
//!    within a segment depends on scheduling; the results do not, because every output row is
//!    computed on its own with the same arithmetic wherever its slot lands.
//! 3. **Multiply** (`mul_mat_id`): block `(x, y)` takes gathered tile `x` and features
//!    `y · F_block ..`. The host launches an upper bound of tiles (`⌈slots / rows⌉ + experts`,
//!    known without reading the counts); a block past the routed total returns at once, and a
//!    block finds its expert by a warp-wide search in `tiles_before` (`gathered_tile`). An expert with no rows owns no
//!    tile and costs nothing; a duplicated id is two rows of its expert.
//!
//! ## The direct path (a few tokens): no routing
//! With a few slots (decode of one to a few tokens) the router's one-block pass and each
//! block's tile search are a large part of a call that reads a few MB. The direct path skips
//! them: the prepare launch only quantizes (`QUANTIZE_ONLY`: every block a quantizer), and
//! in the matmul (`mul_mat_id_direct`) block `(s, y)` reads slot `s`'s id itself and streams
//! features `y · F_block ..` of that expert's weights against the slot's q8_1 row, read from
//! global memory (every block of a slot reads the same row: it stays in L1 and L2). Warp 0
//! of block `(0, 0)` writes the bad-id record the router would have written, and a bad id's
//! block returns before reading anything. Each slot reads its expert's weights itself, so the
//! host takes this path only for a few slots (`direct_max_slots`).
//!
//! On sm_90 and newer the matmul is a *programmatic dependent* of the quantizer: the quantizer
//! lets it launch (`griddepcontrol.launch_dependents`) once the quantizer has itself waited
//! for the launch before it, its blocks prefetch their first weights into L2, and only then
//! wait for the quantizer's results (`griddepcontrol.wait`); so the second launch's start and
//! the first weights' latency hide behind the quantizer. Every launch of a call (the prepare
//! launch too, and the routed matmuls, which wait at once) is such a dependent of the launch
//! before it, so its launch is prepared while that one drains. No other launch lets its
//! dependent start early: a whole grid dispatched beside running blocks was placed two blocks
//! to some SMs and none to others, and a grid of under one wave then ran up to 1.4x slower
//! (NOTES "Launch overlap"); the implicit trigger at block exit dispatches it onto idle SMs. (A
//! first version quantized the row in every block, into shared memory, to save the launch:
//! at 8 tokens that quantization was over half of the kernel's instructions.)
//!
//! ## The matmul tile
//! A tile is `ROWS` rows of one expert × `WARPS · FEATURES` output features. K is walked in
//! steps of 32 chunks of 32 weights ([`MOE_CHUNKS_PER_STEP`]): all threads first copy the
//! step's q8_1 values and scales of the tile's rows into shared memory (only rows that exist,
//! only chunks inside K), then lane `l` of every warp decodes chunk `l` of each of its features'
//! weight rows ([`BlockFormat::chunk`], read straight from global memory, so a K-quant lane
//! reads only its 32 weights' bytes) and adds its dot product with every row's chunk
//! ([`chunk_dot`]: 8 `dp4a` against the q8_1 values, scaled per 16 weights). Each lane thus
//! holds `ROWS × FEATURES` partial sums over its chunks; at the end a butterfly sums them
//! over the warp and lane `r` writes row `r`'s results to its slot's output row.
//!
//! Every weight is read once per tile. The decode path (few rows per expert) uses small tiles
//! and many blocks to keep memory busy; sm_70's tiled path uses 32-row tiles so that each
//! decoded chunk serves 32 rows.
//!
//! ## The tensor-core tile (tiled path, sm_75 and newer)
//! With many rows per expert the work is a small int8 GEMM per expert, which `mma` does 8-16x
//! faster than `dp4a` (`mul_mat_id_mma`). A block takes 32 rows × 64 or 128 features and
//! walks K in steps of 256 weights (one K-quant super-block, eight 32-weight blocks):
//! 1. all threads decode the step's weights once into shared memory, int8 values plus an f32
//!    scale and offset per 16 weights (what [`BlockFormat::chunk`] gives: the only
//!    format-specific code), and copy the rows' q8_1 values, scales and `d · Σq` sums (on
//!    sm_80 and newer by `cp.async`, issued before the decode, so that the two overlap);
//! 2. each warp owns 16 or 32 features × all rows, as 16×8 accumulator fragments; per 32-weight
//!    chunk it loads its fragments from shared memory by `ldmatrix` (a weight fragment or two
//!    row fragments per instruction; rows padded to 68 words: no bank conflicts), takes the exact integer dot products on the tensor cores (`m16n8k32`; two
//!    `m16n8k16` for the formats with a scale per 16 weights; pairs of `m8n8k16` on sm_75),
//!    and adds `scale · d_x · dot + offset · d_x · Σq` to its f32 accumulators, the same
//!    arithmetic as [`chunk_dot`] in another order of rounding.
//!
//! The per-chunk f32 scaling is the price of q8_1's scale per 32 activations: each
//! accumulator takes one multiply-add per chunk, so the CUDA cores, not the tensor cores, bound
//! this loop, and it is written to take three float instructions per accumulator and chunk:
//! the integer dot becomes a float in one subtract (the `mma` starts its accumulator at the
//! bits of 1.5 · 2^23, [`MAGIC`], so it returns the float 1.5 · 2^23 + dot; the quarter-rate
//! `cvt` would cost more than the rest), one multiply forms `scale_w · d_x`, and one explicit
//! `fma` adds the product (Rust never contracts `a * b + c` by itself: written so, it is a
//! multiply and an add).
//!
//! Tall tiles (`MoePath::TiledTall`: 64 rows, the same kernel) serve experts with many rows:
//! each decoded chunk then serves twice the rows. The host takes them from 32 rows per expert
//! on average while their grid still fills the GPU ([`crate::moe_config::MoeArchConfig::path`]).
//!
//! Each step, before decoding, the block asks L2 for the next step's weights
//! (`prefetch.global.L2`), so the step after waits on L2 rather than on DRAM.

use crate::abi::{moe_params_entry, MoeParams};
use crate::device::ptx::{
    allow_dependent_launch, ballot, block_idx_x, block_idx_y, cp_async_16, cp_async_4, cp_async_commit, cp_async_wait, dp4a, dynamic_smem, f16_to_f32, fma, ldmatrix_x4, load_global_u32x4, prefetch_global_l2, shared_address, wait_for_prerequisite_grid, mma_m16n8k16_s8, mma_m16n8k32_s8, mma_m8n8k16_s8, shfl_up_u32, Opaque, shfl_xor_f32, sync_threads,
    thread_idx_x,
};
use crate::device::BUILD_CONFIG;
use crate::moe_config::{moe_config, MoeEngine, MoePath, MOE_CHUNKS_PER_STEP, MOE_MMA_ROW_WORDS, MOE_MMA_STEP_CHUNKS, MOE_PREPARE_THREADS, MOE_QUANTIZE_VALUES_PER_THREAD,
    MOE_ROUTE_EXPERTS_PER_PASS, MOE_ROUTE_SMEM_BYTES,
};
use crate::moe_flags::{QUANTIZE_ONLY, X_BF16, X_F16};
use crate::quant::{chunk_dot, BlockFormat, Chunk, GgufFormat, QK};
#[allow(unused_imports)]
use crate::quant::{
    BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0,
};
use core::sync::atomic::Ordering;
use super::atomic;

const LANES: u32 = 32;
/// sm_80 and newer copy the tiled path's activations with `cp.async`.
const HAS_CP_ASYNC: bool = BUILD_CONFIG.limits().has_cp_async;
const STEP_CHUNKS: usize = MOE_CHUNKS_PER_STEP as usize;
/// Words of q8_1 values per chunk.
const CHUNK_WORDS: usize = QK / 4;

/// 16 bytes, for vector loads and stores (`ld.v4.u32`): the alignment tells LLVM it may.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Words4([u32; 4]);

// -------------------------------------------------------------------------------------------
// 1. Quantize
// -------------------------------------------------------------------------------------------

/// Activation `index` (of the flat `[tokens · x_rows · k]` array) as f32.
///
/// Safety: `index` lies inside `x`.
#[inline(always)]
unsafe fn activation(p: &MoeParams, index: u64) -> f32 {
    if p.flags & X_F16 != 0 {
        f16_to_f32(*(p.x.ptr() as *const u16).add(index as usize) as u32)
    } else if p.flags & X_BF16 != 0 {
        f32::from_bits((*(p.x.ptr() as *const u16).add(index as usize) as u32) << 16)
    } else {
        *(p.x.ptr() as *const f32).add(index as usize)
    }
}

/// The q8_1 quantization of one 32-value block held by 8 lanes (`MOE_QUANTIZE_VALUES_PER_THREAD`
/// values each, lanes `8b .. 8b + 8` of the warp): this lane's values as a word of int8 and the
/// block's scale `d`. As the host's `quantize_q8_1`: `d = max|x| / 127`, `q = round(x · (1/d))`,
/// all zeros for an all-zero block. Every lane of the warp calls it together (the maximum
/// takes 3 shuffles).
#[inline(always)]
fn quantize_q8_1_part(v: [f32; MOE_QUANTIZE_VALUES_PER_THREAD as usize]) -> (u32, f32) {
    const THREADS_PER_BLOCK_OF_32: u32 = QK as u32 / MOE_QUANTIZE_VALUES_PER_THREAD;
    let mut amax = v.iter().fold(0f32, |a, x| a.max(x.abs()));
    let mut mask = 1;
    while mask < THREADS_PER_BLOCK_OF_32 {
        amax = amax.max(shfl_xor_f32(amax, mask));
        mask *= 2;
    }
    let d = amax / 127.0;
    let inverse = if d == 0.0 { 0.0 } else { 1.0 / d };
    let mut word = 0u32;
    for (i, &x) in v.iter().enumerate() {
        let q = core::intrinsics::roundf32(x * inverse) as i32 as i8;
        word |= (q as u8 as u32) << (8 * i);
    }
    (word, d)
}

/// The `MOE_QUANTIZE_VALUES_PER_THREAD` activations from flat index `first` on, as f32, or
/// zeros when `active` is false.
///
/// Safety: when `active`, `first .. first + 4` lie inside `x`.
#[inline(always)]
unsafe fn activations(p: &MoeParams, first: u64, active: bool) -> [f32; MOE_QUANTIZE_VALUES_PER_THREAD as usize] {
    let mut v = [0f32; MOE_QUANTIZE_VALUES_PER_THREAD as usize];
    if active {
        for (i, value) in v.iter_mut().enumerate() {
            *value = activation(p, first + i as u64);
        }
    }
    v
}

/// Thread `8b + i` of quantizing block `block` quantizes values `4i .. 4i + 4` of q8_1 block
/// `block · 128 + b` (a row's blocks are consecutive, and `k` is a multiple of 32, so the
/// flat array's 32-value blocks are exactly the rows' blocks).
///
/// Safety: the host sized `x`, `x_q` and `x_d` for `tokens · x_rows · k` values.
#[inline(always)]
unsafe fn quantize(p: &MoeParams, block: u32) {
    const PER_THREAD: u32 = MOE_QUANTIZE_VALUES_PER_THREAD;
    const THREADS_PER_BLOCK_OF_32: u32 = QK as u32 / PER_THREAD;
    let tid = thread_idx_x();
    let total_blocks = p.tokens as u64 * p.x_rows as u64 * (p.k / QK as u32) as u64;
    let q8_block = block as u64 * (MOE_PREPARE_THREADS / THREADS_PER_BLOCK_OF_32) as u64 + (tid / THREADS_PER_BLOCK_OF_32) as u64;
    let part = tid % THREADS_PER_BLOCK_OF_32;
    // Groups past the end still take part in the shuffles (on zeros) but store nothing.
    let active = q8_block < total_blocks;
    let v = activations(p, q8_block * QK as u64 + (part * PER_THREAD) as u64, active);
    let (word, d) = quantize_q8_1_part(v);
    if active {
        *p.x_q.ptr_mut().add((q8_block * THREADS_PER_BLOCK_OF_32 as u64 + part as u64) as usize) = word;
        if part == 0 {
            *p.x_d.ptr_mut().add(q8_block as usize) = d;
        }
    }
}

// -------------------------------------------------------------------------------------------
// 2. Route
// -------------------------------------------------------------------------------------------

/// Inclusive prefix sums over the warp of two values at once.
#[inline(always)]
fn warp_inclusive_scan(mut a: u32, mut b: u32, lane: u32) -> (u32, u32) {
    let mut delta = 1;
    while delta < LANES {
        let (up_a, up_b) = (shfl_up_u32(a, delta), shfl_up_u32(b, delta));
        if lane >= delta {
            a += up_a;
            b += up_b;
        }
        delta *= 2;
    }
    (a, b)
}

/// The whole routing in one block (see the module docs). The experts are taken
/// [`MOE_ROUTE_EXPERTS_PER_PASS`] at a time (one pass for every model in use; more only past
/// that many experts), their counts kept in shared memory: the counting and scatter atomics
/// are then shared-memory atomics, and nothing waits on a global-memory round trip between
/// the id loads and the slot stores. Shared memory: the 32 warps' row and tile totals, the
/// running totals of earlier experts, then the pass's counts (which become its scatter
/// cursors).
///
/// Safety: one block of [`MOE_PREPARE_THREADS`] threads with [`MOE_ROUTE_SMEM_BYTES`] of
/// dynamic shared memory; the host sized `row_start` and `tiles_before` (`experts + 1`),
/// `slot_list` (`tokens · n_used`), `error` (1).
#[inline(always)]
unsafe fn route(p: &MoeParams) {
    const THREADS: u32 = MOE_PREPARE_THREADS;
    const PASS: u32 = MOE_ROUTE_EXPERTS_PER_PASS;
    const _: () = assert!(MOE_PREPARE_THREADS == 32 * LANES, "the scan gives each of 32 warps' totals to one lane of warp 0");
    const _: () = assert!(MOE_ROUTE_SMEM_BYTES == (2 * 32 + 2 + PASS) * 4, "the router's shared memory is laid out as below");
    let tid = thread_idx_x();
    let (warp, lane) = (tid / LANES, tid % LANES);
    let smem = dynamic_smem() as *mut u32;
    let (warp_rows, warp_tiles, carry, counts) = (smem, smem.add(32), smem.add(64), smem.add(66));
    let slots = p.tokens * p.n_used;
    let experts = p.experts;
    let ids = p.ids.ptr();
    if tid == 0 {
        *p.error.ptr_mut() = u32::MAX;
        *carry = 0;
        *carry.add(1) = 0;
    }
    let routed = |id: i32| id as u32 >= p.expert_first && (id as u32) < p.expert_last;

    let mut pass_first = 0;
    while pass_first < experts {
        let pass_experts = PASS.min(experts - pass_first);
        // The pass's expert of an id, if it is one of them and computed here.
        let in_pass = |id: i32| {
            let e = (id as u32).wrapping_sub(pass_first);
            (id >= 0 && e < pass_experts && routed(id)).then_some(e as usize)
        };
        let mut e = tid;
        while e < pass_experts {
            *counts.add(e as usize) = 0;
            e += THREADS;
        }
        sync_threads();

        // Count (and, in the first pass, flag bad ids).
        let mut i = tid;
        while i < slots {
            let id = *ids.add(i as usize);
            if pass_first == 0 && (id < 0 || id as u32 >= experts) {
                atomic(p.error.ptr_mut()).fetch_min(i, Ordering::Relaxed);
            } else if let Some(e) = in_pass(id) {
                atomic(counts.add(e)).fetch_add(1, Ordering::Relaxed);
            }
            i += THREADS;
        }
        sync_threads();

        // Exclusive prefix sums of rows and tiles, THREADS experts at a time.
        let mut base = 0;
        while base < pass_experts {
            let e = base + tid;
            let rows = if e < pass_experts { *counts.add(e as usize) } else { 0 };
            let tiles = rows.div_ceil(p.tile_rows);
            let (rows_incl, tiles_incl) = warp_inclusive_scan(rows, tiles, lane);
            if lane == LANES - 1 {
                *warp_rows.add(warp as usize) = rows_incl;
                *warp_tiles.add(warp as usize) = tiles_incl;
            }
            sync_threads();
            if warp == 0 {
                let (r, t) = (*warp_rows.add(lane as usize), *warp_tiles.add(lane as usize));
                let (ri, ti) = warp_inclusive_scan(r, t, lane);
                *warp_rows.add(lane as usize) = ri - r;
                *warp_tiles.add(lane as usize) = ti - t;
            }
            sync_threads();
            let row_first = *carry + *warp_rows.add(warp as usize) + rows_incl - rows;
            let tile_first = *carry.add(1) + *warp_tiles.add(warp as usize) + tiles_incl - tiles;
            if e < pass_experts {
                *p.row_start.ptr_mut().add((pass_first + e) as usize) = row_first;
                *p.tiles_before.ptr_mut().add((pass_first + e) as usize) = tile_first;
                // From here on, the count is the expert's scatter cursor.
                *counts.add(e as usize) = row_first;
            }
            sync_threads();
            if tid == THREADS - 1 {
                *carry = row_first + rows;
                *carry.add(1) = tile_first + tiles;
            }
            sync_threads();
            base += THREADS;
        }

        // Scatter each routed slot of the pass's experts into its expert's segment.
        let mut i = tid;
        while i < slots {
            if let Some(e) = in_pass(*ids.add(i as usize)) {
                let at = atomic(counts.add(e)).fetch_add(1, Ordering::Relaxed);
                *p.slot_list.ptr_mut().add(at as usize) = i;
            }
            i += THREADS;
        }
        // The next pass reuses the counts.
        sync_threads();
        pass_first += pass_experts;
    }
    if tid == 0 {
        *p.row_start.ptr_mut().add(experts as usize) = *carry;
        *p.tiles_before.ptr_mut().add(experts as usize) = *carry.add(1);
    }
}

// -------------------------------------------------------------------------------------------
// 3. Multiply
// -------------------------------------------------------------------------------------------

/// The rows of one expert that block `blockIdx.x` multiplies.
struct GatheredTile {
    expert: u32,
    /// Index in `slot_list` of the tile's first row.
    first_row: u32,
    /// Rows that exist (`1 ..= tile_rows`).
    rows: usize,
}

/// Finds block `blockIdx.x`'s tile of `tile_rows` rows, or `None` past the routed total (the
/// host launches an upper bound of tiles): the expert `e` with
/// `tiles_before[e] ≤ tile < tiles_before[e + 1]`, i.e. the last `e` with
/// `tiles_before[e] ≤ tile`. Each warp searches by itself, 32 candidates per round: lane `l`
/// tests `lo + l · stride`, and since the prefix sums never decrease, the lanes that pass form
/// a prefix whose last lane narrows the range to one stride. Two rounds of loads up to 1024
/// experts, three up to 32768 (a binary search waits for log₂ E loads one after the other, and
/// at decode batches that wait is a large part of a block's life).
///
/// Safety: the router filled `tiles_before` and `row_start` with this `tile_rows`; every lane
/// of the warp calls it together.
#[inline(always)]
unsafe fn gathered_tile(p: &MoeParams, tile_rows: u32) -> Option<GatheredTile> {
    let tile = block_idx_x();
    let tiles_before = p.tiles_before.ptr();
    let experts = p.experts;
    if tile >= *tiles_before.add(experts as usize) {
        return None;
    }
    let lane = thread_idx_x() % LANES;
    // Invariant: tiles_before[lo] ≤ tile (true for lo = 0: the sums start at 0), and the
    // answer lies in lo .. lo + span.
    let (mut lo, mut span) = (0u32, experts);
    while span > 1 {
        let stride = span.div_ceil(LANES);
        let candidate = lane * stride;
        let passes = candidate < span && *tiles_before.add((lo + candidate) as usize) <= tile;
        // Lane 0 tests lo itself, so at least one bit is set.
        let last = LANES - 1 - ballot(passes).leading_zeros();
        lo += last * stride;
        span = stride.min(span - last * stride);
    }
    let expert = lo;
    let row_start = p.row_start.ptr();
    let first_row = *row_start.add(expert as usize) + (tile - *tiles_before.add(expert as usize)) * tile_rows;
    let rows = (*row_start.add(expert as usize + 1) - first_row).min(tile_rows) as usize;
    Some(GatheredTile { expert, first_row, rows })
}

/// Chunks (32 weights) per block of format `B`.
const fn chunks_per_block<B: BlockFormat>() -> usize {
    B::FORMAT.block_elements() / QK
}

/// The block of the weight row at `row` that holds chunk `kc`.
///
/// Safety: `row` points at a weight row of blocks `B` with chunk `kc` inside it.
#[inline(always)]
unsafe fn block_of_chunk<B: BlockFormat>(row: *const u8, kc: usize) -> *const B {
    row.add(kc / chunks_per_block::<B>() * core::mem::size_of::<B>()) as *const B
}

/// Chunk `kc` (32 weights) of the weight row at `row`, decoded from global memory with the
/// format's widest loads ([`BlockFormat::chunk_at`]; with `STORED`, its values as stored,
/// [`BlockFormat::stored_chunk_at`]).
///
/// Safety: `row` points at a weight row of blocks `B` in global memory, aligned to the
/// format's `block_alignment`, with chunk `kc` inside it.
#[inline(always)]
unsafe fn weight_chunk<B: BlockFormat, const STORED: bool>(row: *const u8, kc: usize) -> Chunk {
    let (block, c) = (block_of_chunk::<B>(row, kc), kc % chunks_per_block::<B>());
    if STORED {
        B::stored_chunk_at(block, c)
    } else {
        B::chunk_at(block, c)
    }
}

/// The activation row (of `x_q`) that slot `slot` reads.
#[inline(always)]
fn x_row_of_slot(p: &MoeParams, slot: usize) -> usize {
    if p.x_rows == 1 { slot / p.n_used as usize } else { slot }
}

/// The matmul of one gathered tile (see the module docs). Shared memory: the step's q8_1
/// values `[ROWS][32 chunks][8 words]`, their scales `[ROWS][32]`, the rows' slots `[ROWS]`
/// and activation rows `[ROWS]`.
///
/// Safety: launched by the host after `quantize` and `route` on the same stream, with
/// `THREADS = 32 · WARPS` threads, `ROWS · MOE_SMEM_BYTES_PER_ROW` bytes of dynamic shared
/// memory, `tile_rows = ROWS`, and buffers sized for the parameters; `weights` is aligned
/// for `B`.
#[inline(always)]
unsafe fn mul_mat_id<B: BlockFormat, const ROWS: usize, const WARPS: usize, const FEATURES: usize>(p: &MoeParams) {
    const { assert!(ROWS <= LANES as usize, "lane r writes row r") };
    let threads = WARPS * LANES as usize;
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / LANES as usize, tid % LANES as usize);
    let Some(GatheredTile { expert, first_row, rows }) = gathered_tile(p, ROWS as u32) else {
        return;
    };

    let k_chunks = (p.k / QK as u32) as usize;
    let words_per_row = p.k as usize / 4;
    let row_bytes = p.row_bytes as usize;
    let expert_weights = p.weights.ptr().add(expert as usize * p.expert_bytes as usize);
    let feature0 = block_idx_y() as usize * WARPS * FEATURES + warp * FEATURES;

    let smem_q = dynamic_smem() as *mut u32;
    let smem_d = smem_q.add(ROWS * STEP_CHUNKS * CHUNK_WORDS) as *mut f32;
    let smem_slot = smem_d.add(ROWS * STEP_CHUNKS) as *mut u32;
    // Each row's activation row too, found once here rather than by a division in every
    // staging copy.
    let smem_x_row = smem_slot.add(ROWS);
    if tid < rows {
        let slot = *p.slot_list.ptr().add(first_row as usize + tid);
        *smem_slot.add(tid) = slot;
        *smem_x_row.add(tid) = x_row_of_slot(p, slot as usize) as u32;
    }
    sync_threads();

    let mut acc = [[0f32; ROWS]; FEATURES];

    let mut step = 0;
    while step * STEP_CHUNKS < k_chunks {
        // Stage the step: ROWS × 32 chunks × two 16-byte halves.
        let mut piece = tid;
        while piece < ROWS * STEP_CHUNKS * 2 {
            let (r, c, half) = (piece / (2 * STEP_CHUNKS), piece / 2 % STEP_CHUNKS, piece % 2);
            let kc = step * STEP_CHUNKS + c;
            if r < rows && kc < k_chunks {
                let x_row = *smem_x_row.add(r) as usize;
                let src = p.x_q.ptr().add(x_row * words_per_row + kc * CHUNK_WORDS + half * 4) as *const Words4;
                *(smem_q.add((r * STEP_CHUNKS + c) * CHUNK_WORDS + half * 4) as *mut Words4) = *src;
                if half == 0 {
                    *smem_d.add(r * STEP_CHUNKS + c) = *p.x_d.ptr().add(x_row * k_chunks + kc);
                }
            }
            piece += threads;
        }
        sync_threads();

        let kc = step * STEP_CHUNKS + lane;
        if kc < k_chunks {
            // A feature past `n` decodes row n − 1 (in bounds) and adds nothing: no branch
            // around the decode, so the chunks stay in registers.
            let valid: [bool; FEATURES] = core::array::from_fn(|f| feature0 + f < p.n as usize);
            let chunks: [Chunk; FEATURES] = core::array::from_fn(|f| {
                let j = (feature0 + f).min(p.n as usize - 1);
                weight_chunk::<B, false>(expert_weights.add(j * row_bytes), kc)
            });
            for r in 0..ROWS {
                if r < rows {
                    let at = (r * STEP_CHUNKS + lane) * CHUNK_WORDS;
                    let (lo_words, hi_words) = (*(smem_q.add(at) as *const Words4), *(smem_q.add(at + 4) as *const Words4));
                    let words = [lo_words.0[0], lo_words.0[1], lo_words.0[2], lo_words.0[3], hi_words.0[0], hi_words.0[1], hi_words.0[2], hi_words.0[3]];
                    let dx = *smem_d.add(r * STEP_CHUNKS + lane);
                    for f in 0..FEATURES {
                        if valid[f] {
                            acc[f][r] += chunk_dot(&chunks[f], 0, B::HAS_OFFSET, &words, dx);
                        }
                    }
                }
            }
        }
        sync_threads();
        step += 1;
    }

    // Sum each partial over the warp; lane r stores row r.
    for f in 0..FEATURES {
        for r in 0..ROWS {
            if r < rows {
                let mut mask = 1;
                while mask < LANES {
                    acc[f][r] += shfl_xor_f32(acc[f][r], mask);
                    mask *= 2;
                }
            }
        }
    }
    for r in 0..ROWS {
        if r < rows && lane == r {
            let out = p.y.ptr_mut().add(*smem_slot.add(r) as usize * p.n as usize);
            for f in 0..FEATURES {
                let j = feature0 + f;
                if j < p.n as usize {
                    *out.add(j) = acc[f][r];
                }
            }
        }
    }
}

// -------------------------------------------------------------------------------------------
// 3b. Multiply on the int8 tensor cores
// -------------------------------------------------------------------------------------------

/// 1.5 · 2^23, and its bits: for an integer `|i| < 2^22`, the bits `MAGIC_BITS + i` are the
/// float `MAGIC + i` exactly. A 32-weight chunk's product is at most 32 · 128 · 127 < 2^19 in
/// magnitude, so an integer dot product taken with the accumulator starting at `MAGIC_BITS`
/// (the `mma`'s C operand: free) becomes a float with one subtract ([`biased_dot_to_f32`])
/// instead of `cvt.rn.f32.s32`, which runs at a quarter of the float rate or less.
const MAGIC: f32 = 12_582_912.0;
const MAGIC_BITS: i32 = 0x4B40_0000;
const MAGIC_ACC: [i32; 4] = [MAGIC_BITS; 4];

/// The dot product `biased − MAGIC_BITS` as f32, exactly (see [`MAGIC`]).
#[inline(always)]
fn biased_dot_to_f32(biased: i32) -> f32 {
    f32::from_bits(biased as u32) - MAGIC
}

/// The 16×8 product over 16 of k (`a` = rows g and g + 8, `b` = column g, `c` as
/// `mma_m16n8k16_s8`): one `m16n8k16`, or on sm_75 two `m8n8k16` (its only int8 shape), one
/// for each 8 rows.
#[inline(always)]
fn mma_k16<const M8N8K16: bool>(a: [u32; 2], b: u32, c: [i32; 4]) -> [i32; 4] {
    if M8N8K16 {
        let top = mma_m8n8k16_s8(a[0], b, [c[0], c[1]]);
        let bottom = mma_m8n8k16_s8(a[1], b, [c[2], c[3]]);
        [top[0], top[1], bottom[0], bottom[1]]
    } else {
        mma_m16n8k16_s8(a, b, c)
    }
}

/// The 16×8 product over a whole 32-weight chunk plus `c`: one `m16n8k32`, or two k16 halves.
#[inline(always)]
fn mma_k32<const M8N8K16: bool>(a: [u32; 4], b: [u32; 2], c: [i32; 4]) -> [i32; 4] {
    if M8N8K16 {
        let low = mma_k16::<true>([a[0], a[1]], b[0], c);
        mma_k16::<true>([a[2], a[3]], b[1], low)
    } else {
        mma_m16n8k32_s8(a, b, c)
    }
}

/// The matmul of one gathered tile on the int8 tensor cores (see the module docs): `ROWS`
/// rows × `WARPS · FEATURES` features, warp `w` computing features `w · FEATURES ..` of all
/// rows as `FEATURES / 16 × ROWS / 8` fragments of 16 features × 8 rows.
///
/// Each K step of [`MOE_MMA_STEP_CHUNKS`] chunks is staged whole, then multiplied:
/// - the block decodes every weight chunk of the step once ([`BlockFormat::chunk`]) into int8
///   values (rows of [`MOE_MMA_ROW_WORDS`] words: conflict-free fragment loads) and an f32
///   scale and offset per 16 weights; a feature past `n` decodes row `n − 1` (in bounds, never
///   stored), a chunk past `k` is zeros;
/// - it copies the tile's q8_1 rows (only rows that exist, zeros for the rest) with their scale
///   per chunk and `d · Σq` per 16 values (what the offsets multiply); on sm_80 and newer the
///   copies are `cp.async`s issued before the decode, so their latency hides behind its loads;
/// - for each chunk, each warp loads its A fragments (weights) and B fragments (activations)
///   and takes the integer products: one k32 `mma` per fragment pair, or, for the formats with
///   a scale per 16 weights ([`BlockFormat::HALF_SCALES`]), two k16 ones; then every
///   accumulator adds `scale_w · d_x · dot (+ offset_w · d_x · Σq_x)` in f32, as
///   [`chunk_dot`] does for a lane.
///
/// Accumulator element `e` of fragment `(m, n)` in lane `4g + t` is feature
/// `16m + g + 8·(e / 2)` of the warp, row `8n + 2t + e % 2`.
///
/// Safety: as [`mul_mat_id`], with [`crate::moe_config::MoeTile::smem_bytes`] of dynamic
/// shared memory; `M8N8K16` only on sm_75 and newer, otherwise sm_80 and newer.
#[inline(always)]
unsafe fn mul_mat_id_mma<B: BlockFormat, const ROWS: usize, const WARPS: usize, const FEATURES: usize, const M8N8K16: bool>(p: &MoeParams) {
    const STEP: usize = MOE_MMA_STEP_CHUNKS as usize;
    const ROW_WORDS: usize = MOE_MMA_ROW_WORDS as usize;
    // Weight chunks a thread decodes at once. Each byte the decode reads takes a register
    // until its chunk is assembled: 4 chunks fit the 168 registers of sm_90's three blocks per
    // SM for every format but q3_K, whose chunk reads 54 bytes (all 32 of its high-bit mask):
    // with 2 in flight it needed 254 registers and spilled 104 bytes there (ptxas 12.9), so it
    // takes 1.
    let chunks_in_flight: usize = const { if matches!(B::FORMAT, GgufFormat::Q3K) { 1 } else { 4 } };
    let m_tiles = FEATURES / 16;
    let n_tiles = ROWS / 8;
    let block_features = WARPS * FEATURES;
    let threads = WARPS * LANES as usize;
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / LANES as usize, tid % LANES as usize);
    let (g, t) = (lane / 4, lane % 4);
    let Some(GatheredTile { expert, first_row, rows }) = gathered_tile(p, ROWS as u32) else {
        return;
    };

    // Shared memory, in the order MoeTile::smem_bytes counts it.
    let w_q = dynamic_smem() as *mut u32;
    // The scales are stored chunk-major, [chunk (and half)][feature or row], so that the 8
    // lanes of a fragment row read 8 consecutive words; one word of padding per line keeps
    // the staging threads (which write one feature's or row's chunks) off a single bank.
    let w_stride = block_features + 1;
    let x_stride = ROWS + 1;
    let w_scale = w_q.add(block_features * ROW_WORDS) as *mut f32;
    let w_offset = w_scale.add(2 * STEP * w_stride);
    let x_q = w_offset.add(2 * STEP * w_stride) as *mut u32;
    let x_d = x_q.add(ROWS * ROW_WORDS) as *mut f32;
    let x_sum = x_d.add(STEP * x_stride);
    let smem_slot = x_sum.add(2 * STEP * x_stride) as *mut u32;
    if tid < rows {
        *smem_slot.add(tid) = *p.slot_list.ptr().add(first_row as usize + tid);
    }
    sync_threads();

    let n = p.n as usize;
    let k_chunks = (p.k / QK as u32) as usize;
    let words_per_row = p.k as usize / 4;
    let expert_weights = p.weights.ptr().add(expert as usize * p.expert_bytes as usize);
    let feature_base = block_idx_y() as usize * block_features;
    let warp_feature = warp * FEATURES;
    // The 8-row fragments that hold existing rows: an expert's last tile is often short.
    let live_n_tiles = rows.div_ceil(8);
    // Staging piece -> (row, chunk, half) of the step's activations.
    let x_piece = |piece: usize| (piece / (2 * STEP), piece / 2 % STEP, piece % 2);
    // Indexed [m < FEATURES / 16][n < ROWS / 8] (array lengths cannot divide a const
    // parameter; the unused entries are never touched and cost nothing once unrolled).
    let mut acc = [[[0f32; 4]; ROWS]; FEATURES];

    let row_bytes = p.row_bytes as usize;

    let mut chunk0 = 0;
    while chunk0 < k_chunks {
        let step_chunks = STEP.min(k_chunks - chunk0);
        // Decode the step's weights: feature f, chunk c (8 neighbouring threads read one
        // feature's consecutive blocks), `FEATURES / 4` chunks per thread (at most STEP: the
        // config check allows at most 32 features per warp). The chunks of a batch are all
        // decoded before any is stored: with no shared-memory store between them (which might
        // alias, as far as the compiler knows), their global loads are issued together, and
        // the thread waits for memory once per batch instead of once per chunk.
        let per_thread = block_features * STEP / threads;
        // The next step's weights go to L2 now, while this step is decoded and multiplied
        // (one line per chunk: the byte of the row where chunk kc's share of it starts).
        if chunk0 + STEP < k_chunks {
            for i in 0..per_thread {
                let piece = tid + i * threads;
                let (f, kc) = (piece / STEP, chunk0 + STEP + piece % STEP);
                if kc < k_chunks {
                    let j = (feature_base + f).min(n - 1);
                    prefetch_global_l2(expert_weights.add(j * row_bytes + kc * B::FORMAT.block_bytes() / chunks_per_block::<B>()));
                }
            }
        }
        // The step's activations (row r, chunk c, half h: 16 bytes, and the chunk's scale with
        // h = 0) go to shared memory by cp.async before the weights are decoded, so that their
        // latency overlaps the decode's loads; rows that do not exist and chunks past K are
        // zero-filled (a source size of 0 reads nothing).
        if HAS_CP_ASYNC {
            let mut piece = tid;
            while piece < ROWS * STEP * 2 {
                let (r, c, h) = x_piece(piece);
                let inside = r < rows && c < step_chunks;
                let (mut words, mut scale) = (p.x_q.ptr(), p.x_d.ptr());
                if inside {
                    let (x_row, kc) = (x_row_of_slot(p, *smem_slot.add(r) as usize), chunk0 + c);
                    words = words.add(x_row * words_per_row + kc * CHUNK_WORDS + h * 4);
                    scale = scale.add(x_row * k_chunks + kc);
                }
                let bytes = if inside { 16 } else { 0 };
                cp_async_16(shared_address(x_q.add(r * ROW_WORDS + c * CHUNK_WORDS + h * 4) as *const f32), words as *const f32, bytes);
                if h == 0 {
                    cp_async_4(shared_address(x_d.add(c * x_stride + r)), scale, bytes / 4);
                }
                piece += threads;
            }
            cp_async_commit();
        }
        let mut batch_start = 0;
        while batch_start < per_thread {
            let mut chunks = [Chunk { values: [0; 8], scale: [0.0; 2], offset: [0.0; 2] }; 4];
            // Constant trip counts (the array stays in registers), the batch size as a guard.
            #[allow(clippy::needless_range_loop)]
            for b in 0..4 {
                let piece = tid + (batch_start + b) * threads;
                let (f, c) = (piece / STEP, piece % STEP);
                let kc = chunk0 + c;
                if b < chunks_in_flight && batch_start + b < per_thread && c < step_chunks {
                    let j = (feature_base + f).min(n - 1);
                    chunks[b] = weight_chunk::<B, false>(expert_weights.add(j * row_bytes), kc);
                }
            }
            #[allow(clippy::needless_range_loop)]
            for b in 0..4 {
                if b >= chunks_in_flight || batch_start + b >= per_thread {
                    continue;
                }
                let chunk = &chunks[b];
                let piece = tid + (batch_start + b) * threads;
                let (f, c) = (piece / STEP, piece % STEP);
                let v = &chunk.values;
                let dst = w_q.add(f * ROW_WORDS + c * CHUNK_WORDS);
                *(dst as *mut Words4) = Words4([v[0], v[1], v[2], v[3]]);
                *(dst.add(4) as *mut Words4) = Words4([v[4], v[5], v[6], v[7]]);
                let at = 2 * c * w_stride + f;
                *w_scale.add(at) = chunk.scale[0];
                *w_scale.add(at + w_stride) = chunk.scale[1];
                if B::HAS_OFFSET {
                    *w_offset.add(at) = chunk.offset[0];
                    *w_offset.add(at + w_stride) = chunk.offset[1];
                }
            }
            // Hidden from the optimizer, so that the batches stay iterations of a loop: unrolled,
            // their loads would all be hoisted together, past the register budget.
            batch_start = ((batch_start + chunks_in_flight) as u32).opaque() as usize;
        }
        if HAS_CP_ASYNC {
            // The activations' copies were issued before the decode; wait for this thread's,
            // then (formats with offsets) form each half's `d · Σq` from shared memory once
            // every thread's have landed.
            cp_async_wait(0);
            if B::HAS_OFFSET {
                sync_threads();
                let mut piece = tid;
                while piece < ROWS * STEP * 2 {
                    let (r, c, h) = x_piece(piece);
                    let words = *(x_q.add(r * ROW_WORDS + c * CHUNK_WORDS + h * 4) as *const Words4);
                    *x_sum.add((2 * c + h) * x_stride + r) = scaled_half_sum(&words.0, *x_d.add(c * x_stride + r));
                    piece += threads;
                }
            }
        } else {
            // Stage the step's activations with plain loads (no cp.async before sm_80).
            let mut piece = tid;
            while piece < ROWS * STEP * 2 {
                let (r, c, h) = x_piece(piece);
                let kc = chunk0 + c;
                let (mut words, mut d) = ([0u32; 4], 0.0);
                if r < rows && c < step_chunks {
                    let x_row = x_row_of_slot(p, *smem_slot.add(r) as usize);
                    words = load_global_u32x4(p.x_q.ptr().add(x_row * words_per_row + kc * CHUNK_WORDS + h * 4));
                    d = *p.x_d.ptr().add(x_row * k_chunks + kc);
                }
                *(x_q.add(r * ROW_WORDS + c * CHUNK_WORDS + h * 4) as *mut Words4) = Words4(words);
                if B::HAS_OFFSET {
                    *x_sum.add((2 * c + h) * x_stride + r) = scaled_half_sum(&words, d);
                }
                if h == 0 {
                    *x_d.add(c * x_stride + r) = d;
                }
                piece += threads;
            }
        }
        sync_threads();

        // The fragments of rows that exist, taken without a branch between them (see
        // `multiply_step`): the whole tile, or its first half when the rest is empty. The
        // formats with a scale per 16 weights (q2_K, q3_K, q6_K) keep a branch per fragment on
        // the 64-row tile: unbranched, their two products per fragment in flight and their wide
        // decodes took more than the 168 registers of three blocks per SM (ptxas 12.9: q3_K
        // and q6_K spilled 40 and 56 bytes on sm_90, q2_K 40 on sm_100).
        let smem = MmaSmem { w_q, w_scale, w_offset, x_q, x_d, x_sum, w_stride, x_stride };
        if const { ROWS > 32 && B::HALF_SCALES } {
            multiply_step::<B, ROWS, FEATURES, M8N8K16, false, true>(&mut acc, &smem, step_chunks, warp_feature, g, t, live_n_tiles);
        } else if 2 * live_n_tiles <= n_tiles {
            multiply_step::<B, ROWS, FEATURES, M8N8K16, true, false>(&mut acc, &smem, step_chunks, warp_feature, g, t, live_n_tiles);
        } else {
            multiply_step::<B, ROWS, FEATURES, M8N8K16, false, false>(&mut acc, &smem, step_chunks, warp_feature, g, t, live_n_tiles);
        }
        sync_threads();
        chunk0 += STEP;
    }

    for m in 0..m_tiles {
        for nt in 0..n_tiles {
            for e in 0..4 {
                let r = 8 * nt + 2 * t + e % 2;
                let j = feature_base + warp_feature + 16 * m + g + 8 * (e / 2);
                if r < rows && j < n {
                    *p.y.ptr_mut().add(*smem_slot.add(r) as usize * n + j) = acc[m][nt][e];
                }
            }
        }
    }
}

/// The tile's shared memory as [`mul_mat_id_mma`] lays it out for one K step.
#[derive(Clone, Copy)]
struct MmaSmem {
    w_q: *mut u32,
    w_scale: *mut f32,
    w_offset: *mut f32,
    x_q: *mut u32,
    x_d: *mut f32,
    x_sum: *mut f32,
    /// Words from one chunk's (or half's) weight scales to the next: features + 1 of padding.
    w_stride: usize,
    /// The same for the rows' scales and sums: rows + 1.
    x_stride: usize,
}

/// `d · Σq` of half a chunk of q8_1 activations (16 signed bytes in four words, scale `d`):
/// the term that formats with an offset per block multiply by their offset.
#[inline(always)]
fn scaled_half_sum(words: &[u32; 4], d: f32) -> f32 {
    const ONES: u32 = 0x0101_0101;
    d * words.iter().fold(0, |s, &w| dp4a(ONES, w, s)) as f32
}

/// One K step's products of [`mul_mat_id_mma`]: for each staged chunk, this warp's fragments
/// from shared memory, the integer `mma`s and their f32 scaling into `acc`.
///
/// The fragment loop has no branch: every fragment of the first `ROWS / 8` (with
/// `FIRST_HALF`, `ROWS / 16`) row fragments is taken, whether its rows exist or not (rows past
/// the tile's count were staged as zeros, and their sums are never stored). A branch per
/// fragment cost more than the products it skipped: each `mma` sat in a basic block of its own
/// with its scaling right behind it, so `ptxas` could not overlap one `mma`'s latency with the
/// next, and every warp waited out the tensor pipe's latency once per fragment. The caller
/// takes the half variant when the tile's rows fit in its first half, so a short last tile
/// does not pay for a full one. With `SKIP_EMPTY`, fragments from `live_n_tiles` on are
/// skipped after all, each behind its own branch (for the decodes too wide to leave the
/// registers that unbranched products hold).
///
/// Safety: called by every thread of the block together, between the barriers that close the
/// step's staging and open the next; `smem` as `mul_mat_id_mma` lays it out.
#[inline(always)]
unsafe fn multiply_step<B: BlockFormat, const ROWS: usize, const FEATURES: usize, const M8N8K16: bool, const FIRST_HALF: bool, const SKIP_EMPTY: bool>(
    acc: &mut [[[f32; 4]; ROWS]; FEATURES],
    smem: &MmaSmem,
    step_chunks: usize,
    warp_feature: usize,
    g: usize,
    t: usize,
    live_n_tiles: usize,
) {
    const ROW_WORDS: usize = MOE_MMA_ROW_WORDS as usize;
    let MmaSmem { w_q, w_scale, w_offset, x_q, x_d, x_sum, w_stride, x_stride } = *smem;
    let m_tiles = FEATURES / 16;
    let n_tiles = if FIRST_HALF { ROWS / 16 } else { ROWS / 8 };
    const { assert!(ROWS % 32 == 0, "the row fragments are loaded in pairs, the half tile's too") };
    // The fragments come from shared memory by `ldmatrix.x4`, four 8 × 16-byte matrices per
    // instruction, lanes 8j .. 8j + 7 giving the rows of matrix j (one instruction where four
    // word loads took one word each). A fragment (16 features × 32 bytes): matrix j is
    // features 8·(j % 2) .., bytes 16·(j / 2) .. of the chunk, so lane 4g + t receives words
    // (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4): the mma's A operand. B fragments
    // (8 rows × 32 bytes) go two to an instruction: matrix j is row fragment 2p + j / 2,
    // bytes 16·(j % 2) ... Rows of 68 words put the 8 rows of a matrix in 8 different groups of
    // 4 banks: no conflicts.
    let lane = 4 * g + t;
    let (matrix, matrix_row) = (lane / 8, lane % 8);
    // One base address each; fragment m (pair p) lies a constant distance further, which the
    // instructions take as an immediate offset (an address per fragment held across the loop
    // cost the registers that made q6_K's tile spill).
    let a_row = shared_address(w_q.add((warp_feature + 8 * (matrix % 2) + matrix_row) * ROW_WORDS + 4 * (matrix / 2)) as *const f32);
    let b_row = shared_address(x_q.add((8 * (matrix / 2) + matrix_row) * ROW_WORDS + 4 * (matrix % 2)) as *const f32);
    const FRAGMENT_BYTES: u32 = 16 * ROW_WORDS as u32 * 4;
    for c in 0..step_chunks {
        let chunk_bytes = (4 * c * CHUNK_WORDS) as u32;
        let a: [[u32; 4]; FEATURES] = core::array::from_fn(|m| if m < m_tiles { ldmatrix_x4(a_row + chunk_bytes + m as u32 * FRAGMENT_BYTES) } else { [0; 4] });
        let mut b = [[0u32; 2]; ROWS];
        for pair in 0..n_tiles / 2 {
            if SKIP_EMPTY && 2 * pair >= live_n_tiles {
                continue;
            }
            let [low0, high0, low1, high1] = ldmatrix_x4(b_row + chunk_bytes + pair as u32 * FRAGMENT_BYTES);
            b[2 * pair] = [low0, high0];
            b[2 * pair + 1] = [low1, high1];
        }
        for m in 0..m_tiles {
            // This lane's two features (g and g + 8 of the fragment), per half.
            let f = [warp_feature + 16 * m + g, warp_feature + 16 * m + g + 8];
            let w_s: [[f32; 2]; 2] = core::array::from_fn(|i| core::array::from_fn(|h| *w_scale.add((2 * c + h) * w_stride + f[i])));
            let w_o: [[f32; 2]; 2] = core::array::from_fn(|i| core::array::from_fn(|h| if B::HAS_OFFSET { *w_offset.add((2 * c + h) * w_stride + f[i]) } else { 0.0 }));
            for nt in 0..n_tiles {
                if SKIP_EMPTY && nt >= live_n_tiles {
                    continue;
                }
                // This lane's two rows (2t and 2t + 1 of the fragment).
                let r = [8 * nt + 2 * t, 8 * nt + 2 * t + 1];
                let d: [f32; 2] = core::array::from_fn(|j| *x_d.add(c * x_stride + r[j]));
                let sums: [[f32; 2]; 2] = core::array::from_fn(|j| core::array::from_fn(|h| if B::HAS_OFFSET { *x_sum.add((2 * c + h) * x_stride + r[j]) } else { 0.0 }));
                let out = &mut acc[m][nt];
                if B::HALF_SCALES {
                    let low = mma_k16::<M8N8K16>([a[m][0], a[m][1]], b[nt][0], MAGIC_ACC);
                    let high = mma_k16::<M8N8K16>([a[m][2], a[m][3]], b[nt][1], MAGIC_ACC);
                    for e in 0..4 {
                        let (i, j) = (e / 2, e % 2);
                        let halves = fma(w_s[i][1], biased_dot_to_f32(high[e]), w_s[i][0] * biased_dot_to_f32(low[e]));
                        out[e] = fma(d[j], halves, out[e]);
                        if B::HAS_OFFSET {
                            out[e] = fma(w_o[i][0], sums[j][0], fma(w_o[i][1], sums[j][1], out[e]));
                        }
                    }
                } else {
                    let dot = mma_k32::<M8N8K16>(a[m], b[nt], MAGIC_ACC);
                    for e in 0..4 {
                        let (i, j) = (e / 2, e % 2);
                        out[e] = fma(w_s[i][0] * d[j], biased_dot_to_f32(dot[e]), out[e]);
                        if B::HAS_OFFSET {
                            out[e] = fma(w_o[i][0], sums[j][0] + sums[j][1], out[e]);
                        }
                    }
                }
            }
        }
    }
}

// -------------------------------------------------------------------------------------------
// 3c. The direct path: no routing
// -------------------------------------------------------------------------------------------

/// Writes `error[0]` as the router does: the first slot whose id lies outside `0..experts`, or
/// `u32::MAX`. One warp, 32 slots per round by ballot: the first round with a bad slot holds
/// the first one.
///
/// Safety: every lane of one warp calls it together; `ids` holds `tokens · n_used` ids.
#[inline(always)]
unsafe fn record_first_bad_id(p: &MoeParams, lane: u32) {
    let slots = p.tokens as u64 * p.n_used as u64;
    let mut first = u32::MAX;
    let mut base = 0u64;
    while base < slots {
        let i = base + lane as u64;
        // A negative id is a huge u32: one comparison flags both ends.
        let bad = i < slots && *p.ids.ptr().add(i as usize) as u32 >= p.experts;
        let mask = ballot(bad);
        if mask != 0 {
            first = (base + mask.trailing_zeros() as u64) as u32;
            break;
        }
        base += LANES as u64;
    }
    if lane == 0 {
        *p.error.ptr_mut() = first;
    }
}

/// The direct path (few tokens; see the module docs): block `(s, y)` computes features
/// `y · WARPS · FEATURES ..` of slot `s`'s output row from its expert's weights, with no
/// routing:
/// 1. warp 0 of block `(0, 0)` writes the bad-id record; a block whose slot's id is bad or
///    outside the expert range returns (its row is left as it was);
/// 2. each warp streams its `FEATURES` weight rows over the whole of K, lane `l` taking chunks
///    `l, l + 32, ..` of every row at once (`FEATURES` chunk loads in flight), and
///    [`chunk_dot`]s each with the slot's q8_1 chunk, read from the quantizer's output (two
///    16-byte loads and the scale); before its wait for the quantizer, which nothing else
///    depends on, it asks L2 for its first chunks;
/// 3. a butterfly sums each feature over the warp and lane `f` stores feature `f`.
///
/// An expert chosen by several slots is read once per slot: that is why the host takes this
/// path only for a few slots.
///
/// Safety: launched by the host after the quantizing prepare launch on the same stream (as
/// its programmatic dependent on sm_90 and newer), with `32 · WARPS` threads, grid
/// `(tokens · n_used, feature blocks)`, buffers sized for the parameters and `weights`
/// aligned for `B`.
#[inline(always)]
unsafe fn mul_mat_id_direct<B: BlockFormat, const WARPS: usize, const FEATURES: usize>(p: &MoeParams) {
    let tid = thread_idx_x() as usize;
    let (warp, lane) = (tid / LANES as usize, tid % LANES as usize);
    let slot = block_idx_x() as usize;
    if slot == 0 && block_idx_y() == 0 && warp == 0 {
        record_first_bad_id(p, lane as u32);
    }
    // The host keeps expert_first ≤ expert_last ≤ experts, so this also rejects every bad id
    // (a negative one is a huge u32).
    let expert = *p.ids.ptr().add(slot) as u32;
    if expert >= p.experts || expert < p.expert_first || expert >= p.expert_last {
        return;
    }

    let n = p.n as usize;
    let k_chunks = p.k as usize / QK;
    let feature0 = block_idx_y() as usize * WARPS * FEATURES + warp * FEATURES;
    let expert_weights = p.weights.ptr().add(expert as usize * p.expert_bytes as usize);
    // A feature past `n` reads row n − 1 (in bounds) and is never stored: no branch around
    // the decode, so the chunks stay in registers.
    let row_bytes = p.row_bytes as usize;
    let rows: [*const u8; FEATURES] = core::array::from_fn(|f| expert_weights.add((feature0 + f).min(n - 1) * row_bytes));
    let x_row = x_row_of_slot(p, slot);
    let x_q = p.x_q.ptr().add(x_row * (p.k as usize / 4));
    let x_d = p.x_d.ptr().add(x_row * k_chunks);

    // The weights and ids are inputs of earlier launches; only x_q and x_d come from the
    // quantizer. While it runs, the lane's first two passes of weights go to L2 (two passes:
    // a long row's whole prefetch would evict what other blocks are reading).
    for pass in 0..2 {
        let kc = lane + pass * LANES as usize;
        if kc < k_chunks {
            for row in rows {
                prefetch_global_l2(block_of_chunk::<B>(row, kc) as *const u8);
            }
        }
    }
    wait_for_prerequisite_grid();

    let mut acc = [0f32; FEATURES];
    let mut kc = lane;
    while kc < k_chunks {
        // The values as stored: their bias comes off the integer dots (`chunk_dot`), against
        // the slot's activation sums, one for every feature.
        let chunks: [Chunk; FEATURES] = core::array::from_fn(|f| weight_chunk::<B, true>(rows[f], kc));
        let (lo, hi) = (load_global_u32x4(x_q.add(kc * CHUNK_WORDS)), load_global_u32x4(x_q.add(kc * CHUNK_WORDS + 4)));
        let words = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
        let dx = *x_d.add(kc);
        for f in 0..FEATURES {
            acc[f] += chunk_dot(&chunks[f], B::VALUE_BIAS, B::HAS_OFFSET, &words, dx);
        }
        kc += LANES as usize;
    }
    let out = p.y.ptr_mut().add(slot * n);
    for (f, sum) in acc.iter_mut().enumerate() {
        let mut mask = 1;
        while mask < LANES {
            *sum += shfl_xor_f32(*sum, mask);
            mask *= 2;
        }
        if lane == f && feature0 + f < n {
            *out.add(feature0 + f) = *sum;
        }
    }
}

/// The body of a tiled entry point: the tile `$tile` (a const expression) on its engine.
macro_rules! tiled_matmul {
    ($block:ident, $tile:expr, $params:expr) => {{
        const T: crate::moe_config::MoeTile = $tile;
        const ROWS: usize = T.rows as usize;
        const WARPS: usize = T.warps as usize;
        const FEATURES: usize = T.features_per_warp as usize;
        // Every arm is instantiated; the dp4a tile takes at most 32 rows, so its arm gets a
        // stand-in when an mma tile has more (that arm never runs).
        const DP4A_ROWS: usize = if ROWS <= LANES as usize { ROWS } else { LANES as usize };
        match T.engine {
            MoeEngine::Dp4a | MoeEngine::Dp4aRow => mul_mat_id::<$block, DP4A_ROWS, WARPS, FEATURES>($params),
            MoeEngine::MmaM8n8k16 => mul_mat_id_mma::<$block, ROWS, WARPS, FEATURES, true>($params),
            MoeEngine::MmaM16n8k32 => mul_mat_id_mma::<$block, ROWS, WARPS, FEATURES, false>($params),
        }
    }};
}

macro_rules! define_moe_entries {
    (matmul: [$(($decode:ident, $tiled:ident, $tall:ident, $direct:ident, $format:ident, $block:ident)),*], prepare: $prepare:ident) => {
        $(
            moe_params_entry!(
                /// MoE matmul, decode path (see the module docs).
                ///
                /// # Safety
                /// Launched by the host's `mul_mat_id` after the quantizer and the router.
                $decode,
                |params| {
                    const T: crate::moe_config::MoeTile = moe_config(BUILD_CONFIG).tile(MoePath::Decode, GgufFormat::$format);
                    // The router's and the quantizer's results are read from the first instruction on: wait for
                    // the prepare grid (sm_90+; the implicit trigger at block exit serves the next launch).
                    wait_for_prerequisite_grid();
                    mul_mat_id::<$block, { T.rows as usize }, { T.warps as usize }, { T.features_per_warp as usize }>(&params)
                }
            );
            moe_params_entry!(
                /// MoE matmul, tiled path (see the module docs).
                ///
                /// # Safety
                /// As the decode entry point.
                $tiled,
                |params| {
                    wait_for_prerequisite_grid();
                    tiled_matmul!($block, moe_config(BUILD_CONFIG).tile(MoePath::Tiled, GgufFormat::$format), &params)
                }
            );
            moe_params_entry!(
                /// MoE matmul, tiled path with tall tiles (experts with many rows).
                ///
                /// # Safety
                /// As the decode entry point.
                $tall,
                |params| {
                    wait_for_prerequisite_grid();
                    tiled_matmul!($block, moe_config(BUILD_CONFIG).tile(MoePath::TiledTall, GgufFormat::$format), &params)
                }
            );
            moe_params_entry!(
                /// MoE matmul, direct path (see the module docs).
                ///
                /// # Safety
                /// Launched by the host's `mul_mat_id` after the quantizing prepare launch, grid
                /// `(slots, feature blocks)`, no shared memory.
                $direct,
                |params| {
                    const T: crate::moe_config::MoeTile = moe_config(BUILD_CONFIG).tile(MoePath::Direct, GgufFormat::$format);
                    mul_mat_id_direct::<$block, { T.warps as usize }, { T.features_per_warp as usize }>(&params)
                }
            );
        )*
        moe_params_entry!(
            /// Routing (block 0) and q8_1 quantization (the other blocks; see the module docs),
            /// or with `QUANTIZE_ONLY` quantization alone (every block).
            ///
            /// # Safety
            /// `MOE_PREPARE_THREADS` threads per block, `1 + ⌈q8_1 blocks / 128⌉` blocks (or
            /// `⌈q8_1 blocks / 128⌉` with `QUANTIZE_ONLY`), the router's shared memory; buffers
            /// sized by the host.
            $prepare,
            |params| {
                // On sm_90+ this launch is a programmatic dependent of the launch before it:
                // wait for that grid before reading x or the ids. Only then may the direct
                // matmul start (it reads the ids and prefetches weights before its own wait, for
                // this grid's x_q). A routed matmul, a whole grid that reads nothing before its
                // wait, gets the implicit trigger at block exit: dispatched beside this grid's
                // blocks, the dense T = 128 tall grid (64 blocks) ran 0.80x.
                wait_for_prerequisite_grid();
                if params.flags & QUANTIZE_ONLY != 0 {
                    allow_dependent_launch();
                }
                // The branch is uniform over each block, so the router's barriers hold.
                match block_idx_x() {
                    block if params.flags & QUANTIZE_ONLY != 0 => quantize(&params, block),
                    0 => route(&params),
                    block => quantize(&params, block - 1),
                }
            }
        );
    };
}
crate::with_moe_kernels!(define_moe_entries);
