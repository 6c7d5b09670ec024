//! # Merging split-key partial results (flash-decoding's second step)
//!
//! A split launch leaves, for every (split `s`, row), the row's output over that split's keys,
//! already normalized (`O_s`, f32), and its log-sum-exp `lse_s`. The row's result is
//! `O = Σ_s w_s·O_s` with `w_s = e^(lse_s − LSE)` and `LSE = log Σ_s e^(lse_s)` (plus the head's
//! sink logit in the sum, when there is one).
//!
//! One block of [`MERGE_THREADS`] per row, in two steps:
//! 1. **Weights.** Thread `s` reads `lse_s` (one split per thread: there are at most
//!    [`MAX_KV_SPLITS`]); the block's maximum and sum come from a shuffle butterfly per warp and
//!    the warps' partials added in warp order; every `w_s` goes to shared memory.
//! 2. **Columns.** The row's `D_v` floats are `D_v/4` 16-byte columns; the threads form
//!    `MERGE_THREADS / (D_v/4)` groups of one thread per column, group `g` adding splits
//!    `g, g + G, g + 2G, …` in order (each thread's loads are independent, so many are in
//!    flight: the merge of one long sequence's 66-128 splits was one thread per column walking
//!    every split, and took a quarter of a decode step). The groups' sums are then added in group
//!    order by the first group, which writes O.
//!
//! Every sum is in a fixed order, so a decode step gives the same bits on every run.
//!
//! # Checking device-side tables
//! With `CHECK_LAUNCH`, the same entry point checks a launch's device-side tables instead
//! ([`check_tables`]): one block per sequence, launched just before the forward kernel (which
//! clamps what it reads, so it need not wait for the check). The check stays out of the
//! forward kernels, whose tightest tiles had no register to spare for it.
//! On sm_90+ builds the merge is launched as a programmatic dependent of the split launch
//! (PDL): its blocks are scheduled as the split launch drains and wait for its completion in
//! `griddepcontrol.wait`, so no launch gap sits between the two.

use super::super::atomic;
use super::super::ptx::{allow_dependent_launch, block_idx_x, dynamic_smem, shfl_xor_f32, sync_threads, thread_idx_x, wait_for_prerequisite_grid};
use crate::abi::AttentionParams;
use crate::attention_config::{MAX_KV_SPLITS, MERGE_THREADS};
use crate::attention_flags::{CHECK_LAUNCH, KEY_LENGTHS, PAGED, SINKS, VARLEN, WRITE_LSE};
use crate::attention_table_error::{KEY_LENGTH_TOO_LONG, PAGE_OUT_OF_RANGE};
use core::sync::atomic::Ordering;

const THREADS: usize = MERGE_THREADS as usize;
const WARPS: usize = THREADS / 32;
const _: () = assert!(MAX_KV_SPLITS as usize <= THREADS, "one split's weight per thread");

/// e^x in f32 (`ex2` of `x·log2 e`).
#[inline(always)]
fn exp(x: f32) -> f32 {
    super::exp2(x * super::LOG2E)
}

/// `x` reduced over the block by `op` (max or sum): a butterfly in each warp, then the warps'
/// results combined in warp order by every thread. `scratch` holds [`WARPS`] floats; the
/// barriers make it reusable right after.
///
/// Safety: every thread of the block calls it; `scratch` lies in this block's shared memory.
#[inline(always)]
unsafe fn block_reduce(x: f32, scratch: *mut f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut v = x;
    for m in [16, 8, 4, 2, 1] {
        v = op(v, shfl_xor_f32(v, m));
    }
    let tid = thread_idx_x() as usize;
    if tid % 32 == 0 {
        *scratch.add(tid / 32) = v;
    }
    sync_threads();
    let mut all = *scratch;
    for w in 1..WARPS {
        all = op(all, *scratch.add(w));
    }
    sync_threads();
    all
}

/// Merges one row (block `blockIdx.x` = `h · total_q + q_global`).
///
/// Safety: the host validated the parameters and ran the split launch before this one (or
/// launched this one as its programmatic dependent).
#[inline(always)]
pub(super) unsafe fn merge<const BF16: bool>(p: &AttentionParams) {
    if p.flags & CHECK_LAUNCH != 0 {
        check_tables(p);
        return;
    }
    // The partial results are the previous grid's: wait for it (a no-op without PDL).
    wait_for_prerequisite_grid();
    let row_id = block_idx_x() as usize;
    let tid = thread_idx_x() as usize;
    let total_q = p.total_q as usize;
    let (h, q_global) = (row_id / total_q, row_id % total_q);
    let rows_all = p.heads_q as usize * total_q;
    let splits = p.splits as usize;
    let smem = dynamic_smem();
    let (weights, scratch, columns) = (smem, smem.add(MAX_KV_SPLITS as usize), smem.add(MAX_KV_SPLITS as usize + WARPS));

    // ---- Weights ----
    let lse_s = if tid < splits { *p.partial_lse.ptr().add(tid * rows_all + row_id) } else { f32::NEG_INFINITY };
    let sink = if p.flags & SINKS != 0 { *p.sinks.ptr().add(h) } else { f32::NEG_INFINITY };
    let top = block_reduce(lse_s, scratch, f32::max).max(sink);
    // A row that saw no key and has no sink: every weight 0, output 0, LSE −inf.
    let reference = if top == f32::NEG_INFINITY { 0.0 } else { top };
    let w = exp(lse_s - reference);
    let sum = block_reduce(w, scratch, |a, b| a + b) + exp(sink - reference);
    let inv_sum = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    if tid < splits {
        *weights.add(tid) = w * inv_sum;
    }
    let lse = if sum > 0.0 { reference + super::log2(sum) * super::LN2 } else { f32::NEG_INFINITY };
    sync_threads();

    // ---- Columns: group g adds splits g, g + G, … of its column ----
    let cols = p.dv as usize / 4;
    let groups = THREADS / cols;
    let (g, c) = (tid / cols, tid % cols);
    let mut acc = [0f32; 4];
    if g < groups {
        let mut s = g;
        while s < splits {
            let part = *p.partial_o.ptr().add((s * rows_all + row_id) * p.dv as usize).cast::<[f32; 4]>().add(c);
            let ws = *weights.add(s);
            for e in 0..4 {
                acc[e] += ws * part[e];
            }
            s += groups;
        }
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
    let (o_row, lse_at) = if p.flags & VARLEN != 0 {
        (q_global * p.o_seq_stride as usize, q_global)
    } else {
        let (b, q) = (q_global / p.seqlen_q as usize, q_global % p.seqlen_q as usize);
        (b * p.o_batch_stride as usize + q * p.o_seq_stride as usize, b * p.lse_batch_stride as usize + q)
    };
    let out = p.o.ptr_mut().add(o_row + h * p.o_head_stride as usize + 4 * c);
    for e in 0..4 {
        *out.add(e) = (super::pack::<BF16>(acc[e], 0.0) & 0xffff) as u16;
    }
    if p.flags & WRITE_LSE != 0 && tid == 0 {
        *p.lse.ptr_mut().add(lse_at + h * p.lse_head_stride as usize) = lse;
    }
}

/// The table check (`CHECK_LAUNCH`, one block per sequence `b`): the sequence's key length
/// against `seqlen_k`, then the block table entries of its keys against the cache (threads
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
    let len_k = if p.flags & KEY_LENGTHS != 0 {
        let len = (*p.key_ends.ptr().add(b)).wrapping_sub(*p.key_starts.ptr().add(b * p.key_start_step as usize));
        if len > p.seqlen_k {
            if tid == 0 {
                record(KEY_LENGTH_TOO_LONG, b as u32, len);
            }
            return;
        }
        len
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
