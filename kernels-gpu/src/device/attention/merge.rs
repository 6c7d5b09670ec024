//! # Merging split-key partial results (flash-decoding's second step)
//!
//! A split launch leaves, for every (split `s`, row), the row's output over that split's keys,
//! already normalized (`O_s`, f32), and its log-sum-exp `lse_s`. The row's result is
//! `O = Σ_s w_s·O_s` with `w_s = e^(lse_s − LSE)` and `LSE = log Σ_s e^(lse_s)` (plus the head's
//! sink logit in the sum, when there is one).
//!
//! # The one merge order
//! A row is merged in one order of floating-point operations, so that a decode step gives the
//! same bits on every run:
//! 1. **Weights** ([`row_weights`], one warp per row): lane `l` reads `lse_s` of splits
//!    `l, l + 32, …` ([`MAX_KV_SPLITS`] at most: four per lane); the maximum and the sum of
//!    `e^(lse_s − max)` come from a shuffle butterfly per 32-split chunk, the chunks in order;
//!    every `w_s` goes to shared memory.
//! 2. **Columns** ([`group_sum`]): the row's `D_v` floats are `D_v/4` 16-byte columns, and a
//!    column's splits fall into [`merge_groups`]`(D_v)` groups, group `g` holding splits
//!    `g, g + G, g + 2G, …`; each group's sum is a chain of FMAs in split order, and the groups'
//!    sums are added in group order. (The groups keep many loads in flight: the merge of one
//!    long sequence's 66-128 splits was once one thread per column walking every split, and took
//!    a quarter of a decode step.)
//!
//! # The merge launch
//! [`merge`]: one block of [`MERGE_THREADS`] per row after the split launch; warp 0 computes
//! the weights, then thread `(g, c)` sums group `g` of column `c` and the first group adds the
//! others' sums. On sm_90+ builds it is launched as a programmatic dependent of the split
//! launch (PDL): its blocks are scheduled as the split launch drains and wait for its
//! completion in `griddepcontrol.wait`, so no launch gap sits between the two. (A merge inside
//! the split launch, by the last block of a row tile to arrive, was built and measured: one
//! block's merge behind the slowest split was slower than this launch's block per row on every
//! shape measured, and its code cost every decode entry point; `benches/results/NOTES.md`.)
//!
//! # Checking device-side tables
//! With `CHECK_LAUNCH`, the same entry point checks a launch's device-side tables instead
//! ([`check_tables`]): one block per sequence, launched just before the forward kernel (which
//! clamps what it reads, so it need not wait for the check). The check stays out of the
//! forward kernels, whose tightest tiles had no register to spare for it.

use super::super::atomic;
use super::{key_range, query_range};
use super::super::ptx::{
    allow_dependent_launch, block_idx_x, dynamic_smem, fma, load_gpu_coherent_f32, load_gpu_coherent_f32x4, opaque, shfl_xor_f32, sync_threads, thread_idx_x,
    wait_for_prerequisite_grid,
};
use crate::abi::AttentionParams;
use crate::attention_config::{MAX_KV_SPLITS, MERGE_LSE_FLOATS, MERGE_THREADS};
use crate::attention_flags::{CHECK_LAUNCH, KEY_LENGTHS, PAGED, SINKS, VARLEN, WRITE_LSE};
use crate::attention_table_error::PAGE_OUT_OF_RANGE;
use core::sync::atomic::Ordering;

const THREADS: usize = MERGE_THREADS as usize;

/// e^x in f32 (`ex2` of `x·log2 e`).
#[inline(always)]
fn exp(x: f32) -> f32 {
    super::exp2(x * super::LOG2E)
}

/// Column groups of the merge order at `D_v` = `dv` ([`merge_groups`]): as many as the merge
/// launch has threads for, one thread per (group, 16-byte column); at `D_v` 128, eight
/// splits' loads are in flight per column.
#[inline(always)]
pub(super) fn merge_groups(dv: usize) -> usize {
    div_rem(THREADS, dv / 4).0
}

/// `(a / b, a % b)` in 32-bit arithmetic: every row index and count here is below 2^31 (the
/// host bounds `heads_q × total_q` by the grid), and a 64-bit division is a subroutine call
/// whose registers would push the forward kernel's accumulators into local memory.
#[inline(always)]
fn div_rem(a: usize, b: usize) -> (usize, usize) {
    let (a, b) = (a as u32, b as u32);
    ((a / b) as usize, (a % b) as usize)
}

/// Chunks of 32 splits a lane covers in [`row_weights`].
const SPLIT_CHUNKS: usize = (MAX_KV_SPLITS as usize).div_ceil(32);

/// `x` reduced over the warp by `op` (max or sum), a butterfly: every lane ends with the same
/// bits (each step adds the same two values, in either order).
#[inline(always)]
fn warp_reduce(x: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut v = x;
    // (A counted loop: an array of masks to iterate over lands in local memory here.)
    let mut m = 16;
    while m > 0 {
        v = op(v, shfl_xor_f32(v, m));
        m /= 2;
    }
    v
}

/// Step 1 of the merge order (module docs) for row `row_id` (`h · total_q + q_global`), by one
/// whole warp: writes the splits' weights to `weights[0 .. splits]` (this lane's splits only:
/// the caller's barrier publishes them) and returns the row's log-sum-exp (natural log; −inf
/// for a row that saw no key and has no sink, whose weights are then all 0).
///
/// Safety: the split launch's LSEs are stored and ordered before these reads; `weights` holds
/// [`MAX_KV_SPLITS`] floats of shared memory.
#[inline(always)]
unsafe fn row_weights(p: &AttentionParams, row_id: usize, lane: usize, weights: *mut f32) -> f32 {
    let rows_all = p.heads_q as usize * p.total_q as usize;
    let splits = p.splits as usize;
    let mut lse_s = [f32::NEG_INFINITY; SPLIT_CHUNKS];
    let mut top = f32::NEG_INFINITY;
    for c in 0..SPLIT_CHUNKS {
        let s = 32 * c + lane;
        if s < splits {
            lse_s[c] = load_gpu_coherent_f32(p.partial_lse.ptr().add(s * rows_all + row_id));
        }
        if 32 * c < splits {
            top = top.max(warp_reduce(lse_s[c], f32::max));
        }
    }
    let h = div_rem(row_id, p.total_q as usize).0;
    let sink = if p.flags & SINKS != 0 { *p.sinks.ptr().add(h) } else { f32::NEG_INFINITY };
    let top = top.max(sink);
    let reference = if top == f32::NEG_INFINITY { 0.0 } else { top };
    let mut sum = 0.0;
    for c in 0..SPLIT_CHUNKS {
        lse_s[c] = exp(lse_s[c] - reference);
        if 32 * c < splits {
            sum += warp_reduce(lse_s[c], |a, b| a + b);
        }
    }
    sum += exp(sink - reference);
    let inv_sum = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    for c in 0..SPLIT_CHUNKS {
        let s = 32 * c + lane;
        if s < splits {
            *weights.add(s) = lse_s[c] * inv_sum;
        }
    }
    if sum > 0.0 {
        reference + super::log2(sum) * super::LN2
    } else {
        f32::NEG_INFINITY
    }
}

/// Step 2 of the merge order for group `g` of `groups` of column `c` of row `row_id`: the
/// FMA chain, in split order, of the group's splits' partial columns by their weights.
///
/// Safety: as [`row_weights`] for the partial rows; `weights` holds the row's weights.
#[inline(always)]
unsafe fn group_sum(p: &AttentionParams, row_id: usize, c: usize, g: usize, groups: usize, weights: *const f32) -> [f32; 4] {
    let rows_all = p.heads_q as usize * p.total_q as usize;
    let mut acc = [0f32; 4];
    let mut s = g;
    while s < p.splits as usize {
        let part = load_gpu_coherent_f32x4(p.partial_o.ptr().add((s * rows_all + row_id) * p.dv as usize + 4 * c));
        let w = *weights.add(s);
        for e in 0..4 {
            acc[e] = fma(w, part[e], acc[e]);
        }
        // (A step hidden from the optimizer: the build's unroll threshold would otherwise
        // unroll this loop of unknown trip count many times over.)
        s = opaque((s + groups) as u32) as usize;
    }
    acc
}

/// Writes column `c` of merged row `row_id` to O (and, with `with_lse` and `WRITE_LSE`, the
/// row's log-sum-exp).
///
/// Safety: the host validated O's and LSE's extents for every row.
#[inline(always)]
unsafe fn store_merged<const BF16: bool>(p: &AttentionParams, row_id: usize, c: usize, acc: [f32; 4], lse: f32, with_lse: bool) {
    let total_q = p.total_q as usize;
    let (h, q_global) = div_rem(row_id, total_q);
    let (o_row, lse_at) = if p.flags & VARLEN != 0 {
        (q_global * p.o_seq_stride as usize, q_global)
    } else {
        let (b, q) = div_rem(q_global, p.seqlen_q as usize);
        (b * p.o_batch_stride as usize + q * p.o_seq_stride as usize, b * p.lse_batch_stride as usize + q)
    };
    let out = p.o.ptr_mut().add(o_row + h * p.o_head_stride as usize + 4 * c);
    for e in 0..4 {
        *out.add(e) = (super::pack::<BF16>(acc[e], 0.0) & 0xffff) as u16;
    }
    if with_lse && p.flags & WRITE_LSE != 0 {
        *p.lse.ptr_mut().add(lse_at + h * p.lse_head_stride as usize) = lse;
    }
}

/// The merge launch: merges one row (block `blockIdx.x` = `h · total_q + q_global`).
///
/// Safety: the host validated the parameters and ran the split launch before this one (or
/// launched this one as its programmatic dependent).
#[inline(always)]
pub(super) unsafe fn merge<const BF16: bool>(p: &AttentionParams) {
    if p.flags & CHECK_LAUNCH != 0 {
        check_tables(p);
        return;
    }
    // The partial results are the previous grid's: wait for it (a no-op without PDL). The
    // next launch (the next step's forward, a whole grid) gets the implicit trigger at block
    // exit, so that it is dispatched onto idle SMs (the forward's trigger says why).
    wait_for_prerequisite_grid();
    let row_id = block_idx_x() as usize;
    let tid = thread_idx_x() as usize;
    let smem = dynamic_smem();
    let (weights, lse_slot, columns) = (smem, smem.add(MAX_KV_SPLITS as usize), smem.add((MAX_KV_SPLITS + MERGE_LSE_FLOATS) as usize));
    if tid < 32 {
        let lse = row_weights(p, row_id, tid, weights);
        *lse_slot = lse;
    }
    sync_threads();

    // Thread (g, c) sums group g of column c; the first group adds the others' sums in order.
    let cols = p.dv as usize / 4;
    let groups = merge_groups(p.dv as usize);
    let (g, c) = div_rem(tid, cols);
    // (The threads past the last group, at `D_v` 80-112, only take part in the barrier.)
    let mut acc = [0f32; 4];
    if g < groups {
        acc = group_sum(p, row_id, c, g, groups, weights);
        *columns.cast::<[f32; 4]>().add(tid) = acc;
    }
    sync_threads();
    if g != 0 {
        return;
    }
    for other in 1..groups {
        let part = *columns.cast::<[f32; 4]>().add(other * cols + c);
        for e in 0..4 {
            acc[e] += part[e];
        }
    }
    store_merged::<BF16>(p, row_id, c, acc, *lse_slot, c == 0);
}

/// The table check (`CHECK_LAUNCH`, one block per sequence `b`): the sequence's query range
/// (varlen) against `seqlen_q` and `total_q`, its key length against `seqlen_k` (and its key
/// range against `total_k`), then the block table entries of its keys against the cache (threads
/// striding over them); the first bad entry of any block is recorded at `table_error`
/// ([`crate::attention_table_error`]: claimed by compare-and-swap, the first claimant fills it).
///
/// Safety: the host checked that the tables hold `batch` sequences' entries and that
/// `table_error` holds the record.
unsafe fn check_tables(p: &AttentionParams) {
    // The forward kernel does not depend on this launch: let it start now (sm_90+ PDL).
    allow_dependent_launch();
    let b = block_idx_x() as usize;
    let tid = thread_idx_x() as usize;
    let record = |what: u32, index: u32, value: u32| {
        let record = p.table_error.ptr_mut();
        if atomic(record).compare_exchange(0, what, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            *record.add(1) = b as u32;
            *record.add(2) = index;
            *record.add(3) = value;
        }
    };
    // Each range through the forward kernels' own helpers: what is reported is what they did.
    if p.flags & VARLEN != 0 {
        let range = query_range(p, b);
        if range.finding != 0 {
            if tid == 0 {
                record(range.finding, b as u32, range.value);
            }
            return;
        }
    }
    let len_k = if p.flags & KEY_LENGTHS != 0 {
        let range = key_range(p, b);
        if range.finding != 0 && tid == 0 {
            record(range.finding, b as u32, range.value);
        }
        range.len
    } else {
        p.seqlen_k
    };
    if p.flags & PAGED != 0 {
        let columns = len_k.div_ceil(p.page_size) as usize;
        let mut column = tid;
        while column < columns {
            let page = *p.block_table.ptr().add(b * p.block_table_stride as usize + column);
            if page > p.last_page {
                record(PAGE_OUT_OF_RANGE, column as u32, page);
            }
            column += THREADS;
        }
    }
}

/// Defines the merge entry point for `$dtype`.
macro_rules! merge_entry {
    ($name:ident, $dtype:ident) => {
        attention_params_entry!(
            /// Merge of a split attention launch (see `merge.rs`). Arguments are validated by
            /// the host.
            ///
            /// # Safety
            /// Every pointer must cover the elements the parameters address.
            $name,
            |params| { merge::merge::<{ matches!(AttentionDtype::$dtype, AttentionDtype::Bf16) }>(&params) }
        );
    };
}
pub(super) use merge_entry;
