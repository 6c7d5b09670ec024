//! An f64 reference of the attention contract (`host/src/attention.rs`), written from the
//! definition: scores materialized per row, softmax in f64, no tiling, no online rescaling.
//! Inputs are the f32 values of the f16/bf16 elements the GPU reads.

use cukernels::{alibi_slopes, Alibi, Attention, Strides};

/// Everything the reference reads, as f32 host arrays laid out as the descriptor says.
pub struct AttentionInputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    /// The additive mask (rows of `desc.mask.row_stride`).
    pub mask: Option<&'a [f32]>,
}

/// The reference result: O in the descriptor's O layout (only the addressed elements are
/// meaningful) and the LSE per (head, packed row) as `lse[h][q_global]`.
pub struct AttentionExpected {
    pub o: Vec<(usize, f64)>,
    /// (index into the LSE buffer, value).
    pub lse: Vec<(usize, f64)>,
}

fn index(s: Strides, b: usize, pos: usize, head: usize) -> usize {
    b * s.batch + pos * s.seq + head * s.head
}

/// The reference of `desc` on `inputs`: for every (sequence, query, head) row, the O row's
/// element indices with their values, and the LSE entries.
pub fn attention_reference(desc: &Attention, inputs: &AttentionInputs) -> AttentionExpected {
    let a = desc;
    let (dk, dv) = (a.head_dim, a.head_dim_v);
    let scale = a.scale.unwrap_or(1.0 / (dk as f32).sqrt()) as f64;
    let slopes: Option<Vec<f32>> = match &a.alibi {
        Some(Alibi::Slopes(s)) => Some(s.clone()),
        Some(Alibi::MaxBias(b)) => Some(alibi_slopes(a.heads_q, *b)),
        None => None,
    };
    let ratio = a.heads_q / a.heads_k;
    let mut o = Vec::new();
    let mut lse = Vec::new();
    let total_q = a.varlen.as_ref().map_or(a.batch * a.seqlen_q, |v| *v.cu_seqlens_q.last().unwrap() as usize);
    for b in 0..a.batch {
        let (q_start, len_q, k_start, len_k) = match &a.varlen {
            Some(v) => {
                let (q0, q1) = (v.cu_seqlens_q[b] as usize, v.cu_seqlens_q[b + 1] as usize);
                let (k0, k1) = (v.cu_seqlens_k[b] as usize, v.cu_seqlens_k[b + 1] as usize);
                (q0, q1 - q0, k0, k1 - k0)
            }
            None => (0, a.seqlen_q, 0, a.paged.as_ref().and_then(|p| p.seqlens_k.as_ref()).map_or(a.seqlen_k, |l| l[b] as usize)),
        };
        let qb = if a.varlen.is_some() { 0 } else { b };
        let diag_offset = len_k as i64 - len_q as i64;
        // Key j's row index in K / V of KV head `kh`.
        let key_index = |s: Strides, j: usize, kh: usize| -> usize {
            match &a.paged {
                Some(p) => {
                    let page = p.block_table[b * p.pages_per_seq + j / p.page_size] as usize;
                    page * s.batch + (j % p.page_size) * s.seq + kh * s.head
                }
                None => index(s, if a.varlen.is_some() { 0 } else { b }, k_start + j, kh),
            }
        };
        for h in 0..a.heads_q {
            let kh = h / ratio;
            for i in 0..len_q {
                let qi = index(a.q_strides, qb, q_start + i, h);
                let d = i as i64 + diag_offset;
                let mut scores: Vec<(usize, f64)> = Vec::new();
                for j in 0..len_k {
                    let jj = j as i64;
                    if let Some(l) = a.window_left {
                        if jj < d - l as i64 {
                            continue;
                        }
                    }
                    let right = if a.causal { Some(a.window_right.map_or(0, |r| r.min(0))) } else { a.window_right };
                    if let Some(r) = right {
                        if jj > d + r as i64 {
                            continue;
                        }
                    }
                    let ki = key_index(a.k_strides, j, kh);
                    let mut dot = 0.0f64;
                    for c in 0..dk {
                        dot += inputs.q[qi + c] as f64 * inputs.k[ki + c] as f64;
                    }
                    let mut x = scale * dot;
                    if let Some(cap) = a.softcap {
                        let cap = cap as f64;
                        x = cap * (x / cap).tanh();
                    }
                    if let (Some(m), Some(shape)) = (inputs.mask, a.mask) {
                        x += m[i * shape.row_stride + j] as f64;
                    }
                    if let Some(s) = &slopes {
                        x -= s[h] as f64 * (d - jj).unsigned_abs() as f64;
                    }
                    if x == f64::NEG_INFINITY {
                        continue;
                    }
                    scores.push((j, x));
                }
                let sink = a.sinks.as_ref().map(|s| s[h] as f64);
                let top = scores.iter().map(|s| s.1).chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let denominator: f64 = scores.iter().map(|s| (s.1 - top).exp()).sum::<f64>() + sink.map_or(0.0, |s| (s - top).exp());
                let oi = index(a.o_strides, qb, q_start + i, h);
                for c in 0..dv {
                    let mut acc = 0.0f64;
                    for &(j, x) in &scores {
                        acc += (x - top).exp() * inputs.v[key_index(a.v_strides, j, kh) + c] as f64;
                    }
                    o.push((oi + c, if denominator > 0.0 { acc / denominator } else { 0.0 }));
                }
                let row_lse = if denominator > 0.0 { top + denominator.ln() } else { f64::NEG_INFINITY };
                let q_global = if a.varlen.is_some() { q_start + i } else { b * a.seqlen_q + i };
                let at = if a.varlen.is_some() { h * total_q + q_global } else { (b * a.heads_q + h) * a.seqlen_q + i };
                lse.push((at, row_lse));
            }
        }
    }
    AttentionExpected { o, lse }
}
