//! # Merging split-key partial results (flash-decoding's second step)
//!
//! A split launch leaves, for every (split `s`, row), the row's output over that split's keys,
//! already normalized (`O_s`, f32), and its log-sum-exp `lse_s`. The row's result is
//! `O = Σ_s 2^(lse_s − LSE)·O_s` with `LSE = log Σ_s e^(lse_s)` (plus the head's sink logit in
//! the sum, when there is one). One block per row: every thread first computes the same LSE
//! from the `splits` values (they are few), then the threads stride over `D_v`, adding the
//! splits in order `0, 1, …`: the same bits on every run, whatever the scheduling.

use super::super::ptx::{block_idx_x, thread_idx_x};
use crate::abi::AttentionParams;
use crate::attention_config::MERGE_THREADS;
use crate::attention_flags::{SINKS, VARLEN, WRITE_LSE};

/// e^x in f32 (`ex2` of `x·log2 e`).
#[inline(always)]
fn exp(x: f32) -> f32 {
    super::exp2(x * super::LOG2E)
}

/// Merges one row (block `blockIdx.x` = `h · total_q + q_global`).
///
/// Safety: the host validated the parameters and ran the split launch before this one.
#[inline(always)]
pub(super) unsafe fn merge<const BF16: bool>(p: &AttentionParams) {
    let row_id = block_idx_x() as usize;
    let total_q = p.total_q as usize;
    let (h, q_global) = (row_id / total_q, row_id % total_q);
    let rows_all = p.heads_q as usize * total_q;
    let splits = p.splits as usize;
    let lse_of = |s: usize| *p.partial_lse.ptr().add(s * rows_all + row_id);

    let mut top = f32::NEG_INFINITY;
    for s in 0..splits {
        top = top.max(lse_of(s));
    }
    let sink = if p.flags & SINKS != 0 { *p.sinks.ptr().add(h) } else { f32::NEG_INFINITY };
    top = top.max(sink);
    let reference = if top == f32::NEG_INFINITY { 0.0 } else { top };
    let mut sum = exp(sink - reference);
    for s in 0..splits {
        sum += exp(lse_of(s) - reference);
    }
    // Row LSE (natural log); a row that saw no key and has no sink: −inf, output 0.
    let lse = if sum > 0.0 { reference + super::log2(sum) * super::LN2 } else { f32::NEG_INFINITY };

    let (o_row, lse_at) = if p.flags & VARLEN != 0 {
        (q_global * p.o_seq_stride as usize, q_global)
    } else {
        let (b, q) = (q_global / p.seqlen_q as usize, q_global % p.seqlen_q as usize);
        (b * p.o_batch_stride as usize + q * p.o_seq_stride as usize, b * p.lse_batch_stride as usize + q)
    };
    let out = p.o.ptr_mut().add(o_row + h * p.o_head_stride as usize);
    let dv = p.dv as usize;
    let mut d = thread_idx_x() as usize;
    while d < dv {
        let mut acc = 0.0f32;
        for s in 0..splits {
            let weight = if sum > 0.0 { exp(lse_of(s) - lse) } else { 0.0 };
            acc += weight * *p.partial_o.ptr().add((s * rows_all + row_id) * dv + d);
        }
        *out.add(d) = (super::pack::<BF16>(acc, 0.0) & 0xffff) as u16;
        d += MERGE_THREADS as usize;
    }
    if p.flags & WRITE_LSE != 0 && thread_idx_x() == 0 {
        *p.lse.ptr_mut().add(lse_at + h * p.lse_head_stride as usize) = lse;
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
