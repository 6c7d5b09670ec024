//! Flash attention, forward: `O = softmax(scale · Q·Kᵀ + bias) · V`, with the interface of
//! FlashAttention-2 (and llama.cpp's `FLASH_ATTN_EXT` features).
//!
//! # Tensors
//! Q is `[batch, seqlen_q, heads_q, head_dim]`, K `[batch, seqlen_k, heads_k, head_dim]`, V
//! `[batch, seqlen_k, heads_k, head_dim_v]` and O `[batch, seqlen_q, heads_q, head_dim_v]`,
//! of f16 or bf16 ([`AttentionElement`]). Each has its own element strides for batch,
//! sequence and head ([`Strides`]), so a `[batch, heads, seq, dim]` view works without a copy;
//! `head_dim` is contiguous. Query head `h` reads KV head `h / (heads_q / heads_k)` (GQA/MQA).
//! The optional log-sum-exp ([`Attention::lse`]) is f32 `[batch, heads_q, seqlen_q]`
//! (`[heads_q, total_q]` for packed sequences), in natural log.
//!
//! # Scores
//! In order: `x = scale · q·k` (default scale `1/√head_dim`); softcap `cap · tanh(x / cap)`;
//! `+ mask[i][j]` (an f16 or f32 `[seqlen_q, seqlen_k]` tensor broadcast over batch and heads,
//! −inf allowed); ALiBi `− slope_h · |i + seqlen_k − seqlen_q − j|`; then causal and sliding
//! window bounds, aligned bottom-right as FlashAttention-2 (query `i` sees key `j` iff
//! `d − left ≤ j ≤ d + right` with `d = i + seqlen_k − seqlen_q`; causal sets `right = 0`).
//! Attention sinks (one logit per query head) join the softmax denominator. A row that sees
//! no key is 0 (its LSE −inf, or the sink's logit), never NaN.
//!
//! # Packed sequences and paged K/V
//! [`Attention::varlen`] takes FlashAttention-2's cumulative sequence lengths on the host (so
//! they are validated before anything launches), [`Attention::varlen_on_device`] as device
//! buffers with the longest lengths and the packed totals (as FA2's `max_seqlen_q`): Q and O
//! are then `[total_q, heads, dim]` and K/V `[total_k, heads, dim]`. [`Attention::paged`] puts K and V in pages of `page_size`
//! tokens (`[pages, page_size, heads_k, dim]`, the batch stride being the page stride) found
//! through a block table, as vLLM and mistral.rs do.
//!
//! # Tables on the device, and CUDA graphs
//! The per-call tables (the cumulative lengths of packed sequences, the block table and key
//! lengths of paged K/V, ALiBi slopes, sink logits) may be given on the host, in the problem, or as device buffers in
//! [`AttentionExtras::tables`], as frameworks hold them. Host tables are checked before
//! anything launches and uploaded by each call, which a CUDA graph cannot replay: a call
//! with any is refused inside a capture. Device tables are read by the kernels where they
//! stand, so a decode step whose block table and lengths change between replays is one
//! graph. Their lengths are checked on the host; their contents on the device: a page past
//! the cache, a key length past `seqlen_k` or a packed range past its tensor is never
//! followed (the launch reads the last page, or nothing of that sequence, instead) and is recorded in the handle by a small check launch, where
//! [`Cukernels::attention_table_error`] finds it and turns it into an error.
//!
//! # How a call runs
//! [`Attention::plan`] validates everything and picks the launch: the head size's kernel (of
//! three: the decode tile for short query blocks, the plain prefill tile when there is no mask
//! tensor, ALiBi or softcap and the architecture has such a tile for the head size, the prefill
//! tile otherwise: `AttentionTileKind`), and
//! for short query blocks (decode), how many query heads share a block (all those of a KV head,
//! so K/V is read once for them) and how many blocks each row tile's keys are split over, so
//! that even one sequence fills the GPU. A split launch writes partial results to a workspace
//! and a second kernel merges them in a fixed order (the same bits on every run). The
//! workspace is the handle's own where it serves the call's stream and is large enough
//! ([`own_split_workspace_bytes`]; `crate::workspace` says which stream it serves), so a
//! decode step allocates nothing; otherwise the call allocates one, stream-ordered.

use crate::error::{Error, Result};
use crate::runtime::{launch, Cukernels, LaunchAttribute};
use cukernels_gpu::KernelFamily;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use std::sync::Arc;
use cukernels_gpu::attention_flags::{ALIBI, CHECK_LAUNCH, CHECK_TABLES, KEY_LENGTHS, MASK, MASK_F32, O_PAIRS, PAGED, QKV_VECTOR, SINKS, SOFTCAP, SPLIT, VARLEN, WRITE_LSE};
use cukernels_gpu::attention_table_error;
use cukernels_gpu::{
    AttentionArchConfig, AttentionDtype, AttentionHead, AttentionParams, AttentionTileKind, GlobalPtr, DECODE_MAX_PACKED_ROWS, MAX_KV_SPLITS, MERGE_SMEM_BYTES, MERGE_THREADS, MIN_SPLIT_KV_BYTES,
};

/// Most blocks in a grid's y or z dimension.
const MAX_GRID_YZ: usize = 65535;
/// K and V bytes per split from which the split rule gives each SM one block rather than a
/// wave of the decode tile's `blocks_per_sm`: a block then has enough keys that its fixed
/// costs (Q, its pipeline's first tiles, its partial rows) matter less than the SM's share of
/// the merge and of the blocks' starts. The H200's split sweep with the key split
/// (`benches/results/2026-12-04-h200-attention-4349887-dirty-decode-split-sweep.jsonl`, head
/// 128, GQA 4, 2 blocks per SM): one sequence at 16k keys took 26.4 µs over 16 splits of
/// 512 KiB against 27.7 over 33; at 8k, 16 splits of 256 KiB took 17.7 µs against 16.5 over
/// 32; at 128k 138 against 137 (even).
const LONG_SPLIT_KV_BYTES: usize = 512 * 1024;
/// Most blocks in a grid's x dimension.
const MAX_GRID_X: usize = i32::MAX as usize;

/// The size of the split workspace a handle owns: one wave of blocks (`SMs × blocks_per_sm`,
/// the most the split rule fills) of the tile that needs most, each block with its partial
/// rows (`D_v` floats and an LSE per row), over every head size and all three entry points
/// (several query positions of many packed heads split on a prefill tile). On the H200 that
/// is the 128-row head-256 tile: 17.4 MB. Larger split launches (splits forced by the caller)
/// allocate their own.
pub fn own_split_workspace_bytes(row: &AttentionArchConfig, sm_count: u32) -> usize {
    let mut most = 0;
    for head in AttentionHead::ALL {
        for kind in [AttentionTileKind::Prefill, AttentionTileKind::Plain, AttentionTileKind::Decode] {
            let tile = row.tile_of(kind, head);
            let rows = sm_count as usize * tile.blocks_per_sm as usize * tile.rows() as usize;
            most = most.max(split_workspace_layout(rows, head.dv() as usize).1);
        }
    }
    most
}

/// The own workspace's word that stays 0 (zeroed at allocation, never written), from which
/// device-side key lengths start: after the table-error record ([`attention_table_error`], at 0).
const OWN_WORKSPACE_ZERO_WORD_AT: usize = 4 * attention_table_error::WORDS;
/// Where the split partials start in the own workspace: after the record and the zero word,
/// at a 256-byte boundary.
const OWN_WORKSPACE_PARTIALS_AT: usize = 256;
const _: () = assert!(OWN_WORKSPACE_ZERO_WORD_AT + 4 <= OWN_WORKSPACE_PARTIALS_AT);

/// Bytes of the handle's own attention workspace: the table-error record, the zero word, then [`own_split_workspace_bytes`] of split partials.
pub(crate) fn own_workspace_bytes(row: &AttentionArchConfig, sm_count: u32) -> usize {
    OWN_WORKSPACE_PARTIALS_AT + own_split_workspace_bytes(row, sm_count)
}

/// Where a split launch's LSEs start in its workspace, and its bytes, for `partial_rows`
/// (splits × rows) partial rows of `dv` floats: the rows first, then an LSE per row, at a
/// 256-byte boundary.
fn split_workspace_layout(partial_rows: usize, dv: usize) -> (usize, usize) {
    let lse_at = (partial_rows * dv * 4).next_multiple_of(256);
    (lse_at, lse_at + partial_rows * 4)
}

/// An element type of Q, K, V and O.
pub trait AttentionElement: DeviceRepr {
    const DTYPE: AttentionDtype;
}
impl AttentionElement for half::f16 {
    const DTYPE: AttentionDtype = AttentionDtype::F16;
}
impl AttentionElement for half::bf16 {
    const DTYPE: AttentionDtype = AttentionDtype::Bf16;
}

/// Element strides of one tensor: between batches, sequence positions and heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strides {
    pub batch: usize,
    pub seq: usize,
    pub head: usize,
}

impl Strides {
    /// The strides of a contiguous `[batch, seq, heads, dim]` tensor.
    pub fn bshd(seq: usize, heads: usize, dim: usize) -> Strides {
        Strides { batch: seq * heads * dim, seq: heads * dim, head: dim }
    }
    /// The strides of a contiguous `[batch, heads, seq, dim]` tensor.
    pub fn bhsd(seq: usize, heads: usize, dim: usize) -> Strides {
        Strides { batch: heads * seq * dim, seq: dim, head: seq * dim }
    }
}

/// ALiBi slopes.
#[derive(Clone, Debug, PartialEq)]
pub enum Alibi {
    /// One slope per query head.
    Slopes(Vec<f32>),
    /// ggml's slopes from `max_bias` ([`alibi_slopes`]).
    MaxBias(f32),
}

/// The additive mask's shape: `rows × cols` (at least `seqlen_q × seqlen_k`, the longest
/// sequences for packed batches), row stride in elements; its element type is the buffer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskShape {
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

/// Packed sequences: `batch + 1` cumulative lengths each, starting at 0 ([`Attention::varlen`]).
/// Both may instead be device buffers ([`DeviceTables`]): leave both vectors empty here
/// ([`Attention::varlen_on_device`]); `seqlen_q` and `seqlen_k` then bound the lengths (FA2's
/// `max_seqlen_q` / `max_seqlen_k`) and size the launch, and `total_q` / `total_k` the packed
/// tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Varlen {
    pub cu_seqlens_q: Vec<u32>,
    pub cu_seqlens_k: Vec<u32>,
    /// Rows of the packed Q and O, and of the packed K and V (unused with paged K/V): the
    /// last cumulative lengths, when those are on the host.
    pub total_q: usize,
    pub total_k: usize,
}

impl Varlen {
    /// Whether the cumulative lengths are device buffers ([`DeviceTables`]).
    pub fn on_device(&self) -> bool {
        self.cu_seqlens_q.is_empty() && self.cu_seqlens_k.is_empty()
    }
}

/// Paged K/V: `pages` pages of `page_size` tokens; sequence `b`'s key `j` lives in page
/// `block_table[b · pages_per_seq + j / page_size]`. `seqlens_k` gives each sequence's key
/// length (else every sequence has `seqlen_k` keys; with [`Varlen`], the key lengths come from
/// its `cu_seqlens_k`).
///
/// Either table may instead be a device buffer ([`DeviceTables`]): leave `block_table` empty
/// and `seqlens_k` `None` here ([`PagedKv::on_device`]). `seqlen_k` then bounds the lengths,
/// as FlashAttention's `max_seqlen_k` does, and sizes the launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PagedKv {
    pub page_size: usize,
    pub pages: usize,
    pub pages_per_seq: usize,
    pub block_table: Vec<u32>,
    pub seqlens_k: Option<Vec<u32>>,
}

impl PagedKv {
    /// A cache whose block table (and key lengths, if any) the call passes as device buffers
    /// ([`DeviceTables`]).
    pub fn on_device(page_size: usize, pages: usize, pages_per_seq: usize) -> PagedKv {
        PagedKv { page_size, pages, pages_per_seq, block_table: Vec::new(), seqlens_k: None }
    }
}

/// An attention problem. Build with [`Attention::new`] and the setters; every field is
/// public and checked by [`Attention::plan`] before any launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub batch: usize,
    /// Query / key length (the longest, for packed sequences).
    pub seqlen_q: usize,
    pub seqlen_k: usize,
    pub heads_q: usize,
    pub heads_k: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    pub q_strides: Strides,
    pub k_strides: Strides,
    pub v_strides: Strides,
    pub o_strides: Strides,
    /// Softmax scale; `None`: `1/√head_dim`.
    pub scale: Option<f32>,
    pub causal: bool,
    /// Sliding window: keys visible before / after the diagonal; `None` is unbounded.
    pub window_left: Option<usize>,
    pub window_right: Option<usize>,
    pub softcap: Option<f32>,
    pub alibi: Option<Alibi>,
    /// Attention-sink logit per query head.
    pub sinks: Option<Vec<f32>>,
    pub mask: Option<MaskShape>,
    pub varlen: Option<Varlen>,
    pub paged: Option<PagedKv>,
    /// Write the log-sum-exp of every row (needs an LSE buffer).
    pub lse: bool,
    /// Blocks each row tile's keys are split over; `None`: chosen ([`Attention::plan`]).
    pub splits: Option<usize>,
}

impl Attention {
    /// Contiguous `[batch, seq, heads, dim]` tensors, no mask, default scale.
    pub fn new(batch: usize, seqlen_q: usize, seqlen_k: usize, heads_q: usize, heads_k: usize, head_dim: usize) -> Attention {
        Attention {
            batch,
            seqlen_q,
            seqlen_k,
            heads_q,
            heads_k,
            head_dim,
            head_dim_v: head_dim,
            q_strides: Strides::bshd(seqlen_q, heads_q, head_dim),
            k_strides: Strides::bshd(seqlen_k, heads_k, head_dim),
            v_strides: Strides::bshd(seqlen_k, heads_k, head_dim),
            o_strides: Strides::bshd(seqlen_q, heads_q, head_dim),
            scale: None,
            causal: false,
            window_left: None,
            window_right: None,
            softcap: None,
            alibi: None,
            sinks: None,
            mask: None,
            varlen: None,
            paged: None,
            lse: false,
            splits: None,
        }
    }
    /// A different V (and O) width (192/128, 320/256, 576/512); V and O strides are reset
    /// to contiguous.
    pub fn head_dim_v(mut self, dv: usize) -> Self {
        self.head_dim_v = dv;
        self.v_strides = Strides::bshd(self.seqlen_k, self.heads_k, dv);
        self.o_strides = Strides::bshd(self.seqlen_q, self.heads_q, dv);
        self
    }
    pub fn strides(mut self, q: Strides, k: Strides, v: Strides, o: Strides) -> Self {
        (self.q_strides, self.k_strides, self.v_strides, self.o_strides) = (q, k, v, o);
        self
    }
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = Some(scale);
        self
    }
    pub fn causal(mut self) -> Self {
        self.causal = true;
        self
    }
    pub fn window(mut self, left: Option<usize>, right: Option<usize>) -> Self {
        (self.window_left, self.window_right) = (left, right);
        self
    }
    pub fn softcap(mut self, cap: f32) -> Self {
        self.softcap = Some(cap);
        self
    }
    pub fn alibi(mut self, alibi: Alibi) -> Self {
        self.alibi = Some(alibi);
        self
    }
    pub fn sinks(mut self, sinks: Vec<f32>) -> Self {
        self.sinks = Some(sinks);
        self
    }
    pub fn mask(mut self, mask: MaskShape) -> Self {
        self.mask = Some(mask);
        self
    }
    pub fn with_lse(mut self) -> Self {
        self.lse = true;
        self
    }
    pub fn splits(mut self, splits: usize) -> Self {
        self.splits = Some(splits);
        self
    }
    /// Packed sequences: sets `batch`, the longest lengths, and packed `[total, heads, dim]`
    /// strides for Q, K, V and O.
    pub fn varlen(mut self, cu_seqlens_q: Vec<u32>, cu_seqlens_k: Vec<u32>) -> Self {
        let longest = |cu: &[u32]| cu.windows(2).map(|w| w[1].saturating_sub(w[0]) as usize).max().unwrap_or(0);
        self.batch = cu_seqlens_q.len().saturating_sub(1);
        self.seqlen_q = longest(&cu_seqlens_q);
        self.seqlen_k = longest(&cu_seqlens_k);
        let total = |cu: &[u32]| cu.last().copied().unwrap_or(0) as usize;
        let (total_q, total_k) = (total(&cu_seqlens_q), total(&cu_seqlens_k));
        self.varlen = Some(Varlen { cu_seqlens_q, cu_seqlens_k, total_q, total_k });
        self.packed_strides()
    }
    /// Packed sequences whose cumulative lengths are device buffers (`batch + 1` entries each,
    /// [`DeviceTables::cu_seqlens_q`] and [`DeviceTables::cu_seqlens_k`]), as candle and
    /// FlashAttention-2's varlen interface hold them: `seqlen_q` / `seqlen_k` are the longest
    /// lengths (FA2's `max_seqlen_q` / `max_seqlen_k`), `total_q` / `total_k` the rows of the
    /// packed tensors; packed strides as [`varlen`](Self::varlen). Nothing is uploaded, so the
    /// call can be captured in a CUDA graph and replayed with new lengths. The lengths are
    /// checked on the device ([`Cukernels::attention_table_error`]): a sequence whose query
    /// range is decreasing, longer than `seqlen_q` or past `total_q` computes nothing; a key
    /// range that is decreasing or longer than `seqlen_k` reads no keys, one past `total_k` is
    /// cut there. Such a launch is never split over keys.
    pub fn varlen_on_device(mut self, batch: usize, seqlen_q: usize, seqlen_k: usize, total_q: usize, total_k: usize) -> Self {
        self.batch = batch;
        self.seqlen_q = seqlen_q;
        self.seqlen_k = seqlen_k;
        self.varlen = Some(Varlen { cu_seqlens_q: Vec::new(), cu_seqlens_k: Vec::new(), total_q, total_k });
        self.packed_strides()
    }
    /// Packed `[total, heads, dim]` strides for Q, K, V and O.
    fn packed_strides(mut self) -> Self {
        let packed = |heads: usize, dim: usize| Strides { batch: 0, seq: heads * dim, head: dim };
        self.q_strides = packed(self.heads_q, self.head_dim);
        self.k_strides = packed(self.heads_k, self.head_dim);
        self.v_strides = packed(self.heads_k, self.head_dim_v);
        self.o_strides = packed(self.heads_q, self.head_dim_v);
        self
    }
    /// Paged K/V with contiguous pages `[pages, page_size, heads_k, dim]`.
    pub fn paged(mut self, paged: PagedKv) -> Self {
        self.k_strides = Strides { batch: paged.page_size * self.heads_k * self.head_dim, seq: self.heads_k * self.head_dim, head: self.head_dim };
        self.v_strides = Strides { batch: paged.page_size * self.heads_k * self.head_dim_v, seq: self.heads_k * self.head_dim_v, head: self.head_dim_v };
        self.paged = Some(paged);
        self
    }

    /// Multiply-adds of the problem's visible scores (`2 · (D_k + D_v)` FLOPs each), for
    /// reports; counts every key for non-causal rows and the visible triangle for causal ones.
    pub fn flops(&self) -> f64 {
        let per_pair = 2.0 * (self.head_dim + self.head_dim_v) as f64;
        let rows = |lq: usize, lk: usize| -> f64 {
            (0..lq)
                .map(|i| {
                    let d = i as i64 + lk as i64 - lq as i64;
                    let hi = if self.causal { d.min(lk as i64 - 1) } else { lk as i64 - 1 };
                    let lo = self.window_left.map_or(0, |l| (d - l as i64).max(0));
                    let hi = self.window_right.map_or(hi, |r| hi.min(d + r as i64));
                    (hi - lo + 1).max(0) as f64
                })
                .sum()
        };
        let pairs: f64 = match &self.varlen {
            // (Device-side lengths: at most every sequence at the longest.)
            Some(v) if v.on_device() => self.batch as f64 * rows(self.seqlen_q, self.seqlen_k),
            Some(v) => (0..self.batch)
                .map(|b| rows((v.cu_seqlens_q[b + 1] - v.cu_seqlens_q[b]) as usize, (v.cu_seqlens_k[b + 1] - v.cu_seqlens_k[b]) as usize))
                .sum(),
            None => self.batch as f64 * rows(self.seqlen_q, self.seqlen_k),
        };
        pairs * self.heads_q as f64 * per_pair
    }
}

/// ggml's ALiBi slopes for `heads` heads from `max_bias`: with `n = 2^⌊log2 heads⌋`,
/// `m0 = 2^(−max_bias / n)` and `m1 = 2^(−max_bias / 2 / n)`, head `h` gets `m0^(h+1)` for
/// `h < n` and `m1^(2(h − n) + 1)` after.
pub fn alibi_slopes(heads: usize, max_bias: f32) -> Vec<f32> {
    if heads == 0 {
        return Vec::new();
    }
    let n = 1usize << (usize::BITS - 1 - heads.leading_zeros());
    let m0 = 2f32.powf(-max_bias / n as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n as f32);
    (0..heads).map(|h| if h < n { m0.powi(h as i32 + 1) } else { m1.powi(2 * (h - n) as i32 + 1) }).collect()
}

/// Device addresses and lengths (elements) of the buffers of one call.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttentionBuffers {
    pub q: (u64, usize),
    pub k: (u64, usize),
    pub v: (u64, usize),
    pub o: (u64, usize),
    /// f32 LSE.
    pub lse: Option<(u64, usize)>,
    /// The mask, and whether it holds f32 (else f16).
    pub mask: Option<(u64, usize, bool)>,
    /// Tables in device memory, given instead of the problem's host arrays.
    pub tables: TableBuffers,
}

/// Device addresses and lengths (elements) of the tables a call passes on the device
/// ([`DeviceTables`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableBuffers {
    /// `u32` `[batch + 1]` each.
    pub cu_seqlens_q: Option<(u64, usize)>,
    pub cu_seqlens_k: Option<(u64, usize)>,
    /// `u32` `[batch, pages_per_seq]`.
    pub block_table: Option<(u64, usize)>,
    /// `u32` `[batch]`.
    pub seqlens_k: Option<(u64, usize)>,
    /// `f32` `[heads_q]`.
    pub alibi_slopes: Option<(u64, usize)>,
    /// `f32` `[heads_q]`.
    pub sinks: Option<(u64, usize)>,
}

/// Elements each buffer of a problem must hold ([`Attention::buffer_lengths`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionLengths {
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub o: usize,
    /// The LSE output (`heads_q × total query rows`), if one is written.
    pub lse: usize,
}

/// A validated launch: the kernel, its grid, its parameters (pointers to the small host
/// arrays are filled at launch, when they are uploaded), and what must be uploaded.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionPlan {
    pub head: AttentionHead,
    pub dtype: AttentionDtype,
    /// The entry point's tile: decode (all of a problem's rows fit in one 16-row tile), plain
    /// prefill (no mask tensor, ALiBi or softcap) or prefill.
    pub kind: AttentionTileKind,
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub smem_bytes: u32,
    pub params: AttentionParams,
    /// Query heads per block (decode packs those of one KV head).
    pub heads_packed: usize,
    pub splits: usize,
    /// The merge of a split launch is launched as a programmatic dependent of it (sm_90+
    /// builds: it is scheduled while the split launch drains and waits for it on the GPU).
    pub merge_overlaps_split: bool,
    /// The forward launch is a programmatic dependent of the launch before it on the stream
    /// (sm_90+ builds): its blocks are scheduled while that launch drains and wait for it on
    /// the GPU, except after the table check (device-side tables), which it does not depend on:
    /// then it starts at once.
    pub forward_overlaps_previous: bool,
    /// Host arrays to upload (their pointer fields of `params` are set at launch; those of
    /// device tables are set already).
    pub cu_seqlens_q: Option<Vec<u32>>,
    pub cu_seqlens_k: Option<Vec<u32>>,
    pub block_table: Option<Vec<u32>>,
    pub alibi_slopes: Option<Vec<f32>>,
    pub sinks: Option<Vec<f32>>,
    /// Nothing to compute (no query rows).
    pub empty: bool,
}

impl AttentionPlan {
    /// Whether the launch uploads host arrays first (which a CUDA graph capture cannot hold).
    pub fn uploads(&self) -> bool {
        self.cu_seqlens_q.is_some() || self.cu_seqlens_k.is_some() || self.block_table.is_some() || self.alibi_slopes.is_some() || self.sinks.is_some()
    }

    /// Whether the kernels check device-side tables and record what they find
    /// ([`Cukernels::attention_table_error`]).
    pub fn checks_tables(&self) -> bool {
        self.params.flags & CHECK_TABLES != 0
    }

    /// Bytes of the split workspace the launch needs (its partial rows and their LSEs): 0
    /// without a split. The handle's own serves it where it is at least this large.
    pub fn split_workspace_bytes(&self) -> usize {
        self.split_workspace().map_or(0, |(_, bytes)| bytes)
    }

    /// Where the LSEs start in the split workspace, and its bytes; `None` without a split.
    fn split_workspace(&self) -> Option<(usize, usize)> {
        (self.splits > 1).then(|| split_workspace_layout(self.splits * self.params.heads_q as usize * self.params.total_q as usize, self.params.dv as usize))
    }
}

fn invalid(name: &'static str, value: impl std::fmt::Display, reason: impl Into<String>) -> Error {
    Error::invalid(name, value, reason)
}

/// The largest element offset a `[batch, seq, heads, dim]` view addresses, plus one.
fn extent(batch: usize, seq: usize, heads: usize, dim: usize, s: Strides) -> Option<usize> {
    if batch == 0 || seq == 0 || heads == 0 || dim == 0 {
        return Some(0);
    }
    (batch - 1).checked_mul(s.batch)?.checked_add((seq - 1).checked_mul(s.seq)?)?.checked_add((heads - 1).checked_mul(s.head)?)?.checked_add(dim)
}

/// Whether the rows of a view (`dims[i]` positions of stride `strides[i]`, each row `row`
/// elements long) are pairwise disjoint: sorted by stride, each stride must step over
/// everything the smaller ones span.
fn rows_disjoint(dims: [usize; 3], strides: [usize; 3], row: usize) -> bool {
    let mut axes: Vec<(usize, usize)> = dims.into_iter().zip(strides).filter(|&(d, _)| d > 1).map(|(d, s)| (s, d)).collect();
    axes.sort();
    let mut span = row;
    for (stride, dim) in axes {
        if stride < span {
            return false;
        }
        span = stride.saturating_mul(dim - 1).saturating_add(span);
    }
    true
}

impl Attention {
    /// The elements each buffer must hold for the problem's shapes and strides (the last
    /// addressed element plus one): Q and O over every sequence's rows, K and V over every
    /// sequence's keys (or every page).
    pub fn buffer_lengths(&self) -> Result<AttentionLengths> {
        let a = self;
        let (dk, dv) = (a.head_dim, a.head_dim_v);
        let (q_batches, q_rows) = match &a.varlen {
            Some(v) => (1, v.total_q),
            None => (a.batch, a.seqlen_q),
        };
        let (k_batches, k_rows) = match (&a.paged, &a.varlen) {
            (Some(pg), _) => (pg.pages, pg.page_size),
            (None, Some(v)) => (1, v.total_k),
            (None, None) => (a.batch, a.seqlen_k),
        };
        let overflow = |name: &'static str| invalid(name, "strides", "the buffer extent overflows usize");
        Ok(AttentionLengths {
            q: extent(q_batches, q_rows, a.heads_q, dk, a.q_strides).ok_or_else(|| overflow("q_strides"))?,
            k: extent(k_batches, k_rows, a.heads_k, dk, a.k_strides).ok_or_else(|| overflow("k_strides"))?,
            v: extent(k_batches, k_rows, a.heads_k, dv, a.v_strides).ok_or_else(|| overflow("v_strides"))?,
            o: extent(q_batches, q_rows, a.heads_q, dv, a.o_strides).ok_or_else(|| overflow("o_strides"))?,
            lse: if a.lse { a.heads_q * q_batches * q_rows } else { 0 },
        })
    }

    /// Buffers of exactly the lengths the problem needs ([`buffer_lengths`](Self::buffer_lengths);
    /// an f16 mask and an LSE where the problem has them, a device block table where its
    /// [`PagedKv`] has none on the host, device cumulative lengths where its [`Varlen`] has
    /// none) at distinct, 16-byte aligned addresses with no memory
    /// behind them: for reading a plan's choices (kernel, grid, splits, workspace) with
    /// [`plan`](Self::plan) before anything is allocated. Never launch with them.
    pub fn placeholder_buffers(&self) -> Result<AttentionBuffers> {
        let n = self.buffer_lengths()?;
        let at = |i: u64, len: usize| (i << 40, len);
        let mask = self.mask.map(|m| (5 << 40, if m.rows == 0 { 0 } else { (m.rows - 1) * m.row_stride + m.cols }, false));
        let block_table = self.paged.as_ref().filter(|p| p.block_table.is_empty()).map(|p| at(7, self.batch * p.pages_per_seq));
        let on_device = self.varlen.as_ref().is_some_and(|v| v.on_device());
        let (cu_seqlens_q, cu_seqlens_k) = if on_device { (Some(at(8, self.batch + 1)), Some(at(9, self.batch + 1))) } else { (None, None) };
        let tables = TableBuffers { cu_seqlens_q, cu_seqlens_k, block_table, ..TableBuffers::default() };
        Ok(AttentionBuffers { q: at(1, n.q), k: at(2, n.k), v: at(3, n.v), o: at(4, n.o), lse: self.lse.then_some(at(6, n.lse)), mask, tables })
    }

    /// Validates the problem against `buffers` and plans its launch on an architecture of
    /// config `row` with `sm_count` SMs.
    pub fn plan(&self, dtype: AttentionDtype, buffers: &AttentionBuffers, row: &AttentionArchConfig, sm_count: u32) -> Result<AttentionPlan> {
        let a = self;
        let head = AttentionHead::from_dims(a.head_dim, a.head_dim_v).ok_or_else(|| {
            let supported: Vec<String> = AttentionHead::ALL.iter().map(|h| format!("{}/{}", h.dk(), h.dv())).collect();
            invalid("head_dim", format!("{}/{}", a.head_dim, a.head_dim_v), format!("supported (head_dim/head_dim_v): {}", supported.join(", ")))
        })?;
        if a.heads_k == 0 || a.heads_q == 0 {
            return Err(invalid("heads_k", a.heads_k, "heads_q and heads_k must be positive"));
        }
        if a.heads_q % a.heads_k != 0 {
            return Err(invalid("heads_q", a.heads_q, format!("must be a multiple of heads_k ({})", a.heads_k)));
        }
        for (name, v) in [("batch", a.batch), ("seqlen_q", a.seqlen_q), ("seqlen_k", a.seqlen_k), ("heads_q", a.heads_q)] {
            if v > u32::MAX as usize / 2 {
                return Err(invalid(name, v, "too large for the kernels' 32-bit indices"));
            }
        }
        let scale = a.scale.unwrap_or(1.0 / (a.head_dim as f32).sqrt());
        if !scale.is_finite() {
            return Err(invalid("scale", scale, "must be finite"));
        }
        if let Some(cap) = a.softcap {
            if !(cap.is_finite() && cap > 0.0) {
                return Err(invalid("softcap", cap, "must be positive and finite"));
            }
        }

        // ---- Sequences ----
        let mut flags = 0u32;
        let tables = buffers.tables;
        // Device tables: their lengths here, their contents on the device (CHECK_TABLES).
        let device_table = |name: &'static str, table: Option<(u64, usize)>, need: usize| -> Result<Option<u64>> {
            match table {
                Some((_, len)) if len < need => Err(Error::BufferTooSmall { name, len, required: need }),
                Some((addr, _)) if addr % 4 != 0 => Err(invalid(name, format!("address {addr:#x}"), "a device table must be 4-byte aligned")),
                Some((addr, _)) => Ok(Some(addr)),
                None => Ok(None),
            }
        };
        // A table passed both in the problem (`host`) and as a device buffer.
        let given_twice = |name: &'static str, host: &str| invalid(name, "given twice", format!("pass it on the host ({host}) or on the device (DeviceTables::{name}), not both"));
        let varlen = a.varlen.as_ref();
        let device_varlen = varlen.is_some_and(|v| v.on_device());
        if !device_varlen && (tables.cu_seqlens_q.is_some() || tables.cu_seqlens_k.is_some()) {
            return Err(invalid("cu_seqlens_q", "device buffer given", "device-side cumulative lengths need Attention::varlen_on_device (and host ones none)"));
        }
        let (mut cu_q_addr, mut cu_k_addr) = (None, None);
        let (total_q, cu_q, mut cu_k) = match varlen {
            Some(v) if device_varlen => {
                let missing = |name: &'static str| invalid(name, "missing", "Attention::varlen_on_device reads cu_seqlens_q and cu_seqlens_k from DeviceTables");
                cu_q_addr = Some(device_table("cu_seqlens_q", tables.cu_seqlens_q, a.batch + 1)?.ok_or_else(|| missing("cu_seqlens_q"))?);
                cu_k_addr = Some(device_table("cu_seqlens_k", tables.cu_seqlens_k, a.batch + 1)?.ok_or_else(|| missing("cu_seqlens_k"))?);
                for (name, total) in [("total_q", v.total_q), ("total_k", v.total_k)] {
                    if total > u32::MAX as usize / 2 {
                        return Err(invalid(name, total, "too large for the kernels' 32-bit indices"));
                    }
                }
                flags |= VARLEN | KEY_LENGTHS | CHECK_TABLES;
                (v.total_q, None, None)
            }
            Some(v) => {
                for (name, cu) in [("cu_seqlens_q", &v.cu_seqlens_q), ("cu_seqlens_k", &v.cu_seqlens_k)] {
                    if cu.len() != a.batch + 1 {
                        return Err(invalid(name, format!("{} entries", cu.len()), format!("must have batch + 1 = {} entries", a.batch + 1)));
                    }
                    if cu[0] != 0 {
                        return Err(invalid(name, cu[0], "must start at 0"));
                    }
                    if let Some(i) = cu.windows(2).position(|w| w[1] < w[0]) {
                        return Err(invalid(name, format!("[{}] = {} then {}", i, cu[i], cu[i + 1]), "must be non-decreasing"));
                    }
                }
                for (name, total, cu) in [("total_q", v.total_q, &v.cu_seqlens_q), ("total_k", v.total_k, &v.cu_seqlens_k)] {
                    if total != *cu.last().unwrap() as usize {
                        return Err(invalid(name, total, format!("must be the last cumulative length, {} (Attention::varlen sets it)", cu.last().unwrap())));
                    }
                }
                let longest = |cu: &[u32]| cu.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0);
                if longest(&v.cu_seqlens_q) > a.seqlen_q || longest(&v.cu_seqlens_k) > a.seqlen_k {
                    return Err(invalid("seqlen_q", a.seqlen_q, "seqlen_q / seqlen_k must be at least the longest packed sequence (Attention::varlen sets them)"));
                }
                flags |= VARLEN | KEY_LENGTHS;
                (v.total_q, Some(v.cu_seqlens_q.clone()), Some(v.cu_seqlens_k.clone()))
            }
            None => (a.batch * a.seqlen_q, None, None),
        };
        let paged = a.paged.as_ref();
        let (mut block_table_addr, mut seqlens_k_addr) = (None, None);
        if paged.is_none() && (tables.block_table.is_some() || tables.seqlens_k.is_some()) {
            return Err(invalid("block_table", "device buffer given", "block_table and seqlens_k need paged K/V (Attention::paged)"));
        }
        if let Some(pg) = paged {
            if pg.page_size == 0 || pg.pages_per_seq == 0 {
                return Err(invalid("page_size", pg.page_size, "page_size and pages_per_seq must be positive"));
            }
            if pg.pages == 0 || pg.pages > u32::MAX as usize {
                return Err(invalid("pages", pg.pages, "the cache must have 1 to u32::MAX pages"));
            }
            let entries = a.batch * pg.pages_per_seq;
            match tables.block_table {
                Some(_) if !pg.block_table.is_empty() => {
                    return Err(given_twice("block_table", "PagedKv::block_table"));
                }
                Some(_) => {
                    block_table_addr = device_table("block_table", tables.block_table, entries)?;
                    flags |= CHECK_TABLES;
                }
                None => {
                    if pg.block_table.len() != entries {
                        return Err(invalid("block_table", format!("{} entries", pg.block_table.len()), format!("must have batch × pages_per_seq = {entries} entries")));
                    }
                    if let Some((i, &p)) = pg.block_table.iter().enumerate().find(|&(_, &p)| p as usize >= pg.pages) {
                        return Err(invalid("block_table", format!("[{i}] = {p}"), format!("points past the cache's {} pages", pg.pages)));
                    }
                }
            }
            if pg.seqlens_k.is_some() || tables.seqlens_k.is_some() {
                if a.varlen.is_some() {
                    return Err(invalid("seqlens_k", "given", "with packed sequences the key lengths come from cu_seqlens_k"));
                }
                match (&pg.seqlens_k, tables.seqlens_k) {
                    (Some(_), Some(_)) => return Err(given_twice("seqlens_k", "PagedKv::seqlens_k")),
                    (Some(lens), None) => {
                        if lens.len() != a.batch {
                            return Err(invalid("seqlens_k", format!("{} entries", lens.len()), format!("must have batch = {} entries", a.batch)));
                        }
                        if let Some((i, &l)) = lens.iter().enumerate().find(|&(_, &l)| l as usize > a.seqlen_k) {
                            return Err(invalid("seqlens_k", format!("[{i}] = {l}"), format!("longer than seqlen_k = {}", a.seqlen_k)));
                        }
                        // As cumulative lengths, which the kernels read as varlen's.
                        let mut cu = Vec::with_capacity(a.batch + 1);
                        let mut sum = 0u32;
                        cu.push(0);
                        for &l in lens {
                            sum = sum.checked_add(l).ok_or_else(|| invalid("seqlens_k", "sum", "overflows u32"))?;
                            cu.push(sum);
                        }
                        cu_k = Some(cu);
                    }
                    (None, _) => {
                        seqlens_k_addr = device_table("seqlens_k", tables.seqlens_k, a.batch)?;
                        flags |= CHECK_TABLES;
                    }
                }
                flags |= KEY_LENGTHS;
            }
            // The longest sequence must fit its pages: device-side lengths are bounded by
            // `seqlen_k` (on the device).
            let capacity = pg.pages_per_seq * pg.page_size;
            let longest_k = match &cu_k {
                Some(cu) => cu.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0),
                None => a.seqlen_k,
            };
            if longest_k > capacity {
                return Err(invalid("seqlen_k", longest_k, format!("more keys than pages_per_seq × page_size = {capacity}")));
            }
            flags |= PAGED;
        }

        // ---- Buffers ----
        let dv = a.head_dim_v;
        let (q_batches, q_rows) = if a.varlen.is_some() { (1, total_q) } else { (a.batch, a.seqlen_q) };
        let need = a.buffer_lengths()?;
        let (need_q, need_k, need_v, need_o) = (need.q, need.k, need.v, need.o);
        for (name, (_, len), need) in [("q", buffers.q, need_q), ("k", buffers.k, need_k), ("v", buffers.v, need_v), ("o", buffers.o, need_o)] {
            if len < need {
                return Err(Error::BufferTooSmall { name, len, required: need });
            }
        }
        if !rows_disjoint([q_batches, q_rows, a.heads_q], [a.o_strides.batch, a.o_strides.seq, a.o_strides.head], dv) {
            return Err(Error::Overlap(format!("o_strides {:?} make rows of O overlap (rows of {dv} elements)", a.o_strides)));
        }
        let range = |(addr, _): (u64, usize), need: usize| (addr, addr.saturating_add(2 * need as u64));
        let overlaps = |x: (u64, u64), y: (u64, u64)| x.0 < y.1 && y.0 < x.1;
        let o_range = range(buffers.o, need_o);
        for (name, buf, need) in [("Q", buffers.q, need_q), ("K", buffers.k, need_k), ("V", buffers.v, need_v)] {
            if need_o > 0 && need > 0 && overlaps(o_range, range(buf, need)) {
                return Err(Error::Overlap(format!("O overlaps {name} in device memory")));
            }
        }
        let vector = |addr: u64, s: Strides| addr % 16 == 0 && s.batch % 8 == 0 && s.seq % 8 == 0 && s.head % 8 == 0;
        if vector(buffers.q.0, a.q_strides) && vector(buffers.k.0, a.k_strides) && vector(buffers.v.0, a.v_strides) {
            flags |= QKV_VECTOR;
        }
        let s = a.o_strides;
        if buffers.o.0 % 4 == 0 && s.batch % 2 == 0 && s.seq % 2 == 0 && s.head % 2 == 0 {
            flags |= O_PAIRS;
        }

        // ---- Masks, biases, outputs ----
        let mut mask_row_stride = 0;
        match (a.mask, buffers.mask) {
            (Some(m), Some((_, len, is_f32))) => {
                if m.rows < a.seqlen_q || m.cols < a.seqlen_k {
                    return Err(invalid("mask", format!("{}×{}", m.rows, m.cols), format!("must cover seqlen_q × seqlen_k = {}×{} (broadcast over batch and heads)", a.seqlen_q, a.seqlen_k)));
                }
                if m.row_stride < m.cols {
                    return Err(invalid("mask.row_stride", m.row_stride, format!("must be at least cols = {}", m.cols)));
                }
                let need = if m.rows == 0 { 0 } else { (m.rows - 1) * m.row_stride + m.cols };
                if len < need {
                    return Err(Error::BufferTooSmall { name: "mask", len, required: need });
                }
                flags |= MASK | if is_f32 { MASK_F32 } else { 0 };
                mask_row_stride = m.row_stride;
            }
            (Some(_), None) => return Err(invalid("mask", "shape given", "no mask buffer was passed")),
            (None, Some(_)) => return Err(invalid("mask", "buffer given", "no mask shape was set (Attention::mask)")),
            (None, None) => {}
        }
        let alibi_slopes = match &a.alibi {
            Some(Alibi::Slopes(s)) => {
                if s.len() != a.heads_q {
                    return Err(invalid("alibi_slopes", format!("{} slopes", s.len()), format!("need one per query head ({})", a.heads_q)));
                }
                Some(s.clone())
            }
            Some(Alibi::MaxBias(b)) => {
                if !b.is_finite() {
                    return Err(invalid("max_bias", b, "must be finite"));
                }
                Some(alibi_slopes(a.heads_q, *b))
            }
            None => None,
        };
        if let Some(s) = &alibi_slopes {
            if let Some(bad) = s.iter().find(|x| !x.is_finite()) {
                return Err(invalid("alibi_slopes", bad, "must be finite"));
            }
            flags |= ALIBI;
        }
        if let Some(s) = &a.sinks {
            if s.len() != a.heads_q {
                return Err(invalid("sinks", format!("{} logits", s.len()), format!("need one per query head ({})", a.heads_q)));
            }
            flags |= SINKS;
        }
        // Slopes and sinks on the device: one per query head; their values are the caller's
        // (a NaN there is a NaN in the output, as in Q).
        if tables.alibi_slopes.is_some() && a.alibi.is_some() {
            return Err(given_twice("alibi_slopes", "Attention::alibi"));
        }
        if tables.sinks.is_some() && a.sinks.is_some() {
            return Err(given_twice("sinks", "Attention::sinks"));
        }
        let device_slopes = device_table("alibi_slopes", tables.alibi_slopes, a.heads_q)?;
        let device_sinks = device_table("sinks", tables.sinks, a.heads_q)?;
        if device_slopes.is_some() {
            flags |= ALIBI;
        }
        if device_sinks.is_some() {
            flags |= SINKS;
        }
        if a.softcap.is_some() {
            flags |= SOFTCAP;
        }
        let (lse_batch_stride, lse_head_stride) = if a.varlen.is_some() { (0, total_q) } else { (a.heads_q * a.seqlen_q, a.seqlen_q) };
        match (a.lse, buffers.lse) {
            (true, Some((_, len))) => {
                let need = need.lse;
                if len < need {
                    return Err(Error::BufferTooSmall { name: "lse", len, required: need });
                }
                flags |= WRITE_LSE;
            }
            (true, None) => return Err(invalid("lse", "requested", "no LSE buffer was passed")),
            (false, Some(_)) => return Err(invalid("lse", "buffer given", "Attention::lse is not set")),
            (false, None) => {}
        }

        // ---- Launch shape ----
        let ratio = a.heads_q / a.heads_k;
        // Decode: pack the query heads of a KV head into one block's rows.
        let heads_packed = (1..=ratio).rev().find(|d| ratio % d == 0 && a.seqlen_q.max(1) * d <= DECODE_MAX_PACKED_ROWS as usize).unwrap_or(1);
        // A problem whose rows (per sequence and head group) fit one decode tile takes it: one
        // 16-row tile per block, every warp busy, several blocks per SM. (With varlen, the
        // longest sequence counts: `seqlen_q` bounds them all.)
        let kind = if a.seqlen_q * heads_packed <= row.decode_tile(head).rows() as usize {
            AttentionTileKind::Decode
        } else if flags & (MASK | ALIBI | SOFTCAP) == 0 && row.has_plain_tile(head) {
            AttentionTileKind::Plain
        } else {
            AttentionTileKind::Prefill
        };
        let tile = row.tile_of(kind, head);
        let rows_per_block = tile.rows() as usize;
        let row_tiles = (a.seqlen_q * heads_packed).div_ceil(rows_per_block);
        let groups = a.batch * (a.heads_q / heads_packed);
        if row_tiles > MAX_GRID_X {
            return Err(invalid("seqlen_q", a.seqlen_q, "more row tiles than a grid holds"));
        }
        if groups > MAX_GRID_YZ {
            return Err(invalid("batch", a.batch, format!("batch × heads_q / heads_packed = {groups} blocks exceed the grid's 65535 in y")));
        }
        let key_tiles = a.seqlen_k.div_ceil(tile.bk as usize);
        let splits = match a.splits {
            // Rows of the packed Q that no valid sequence covers would be merged from partials
            // no block wrote: a launch with device-side query lengths is never split.
            Some(s) if device_varlen && s > 1 => {
                return Err(invalid("splits", s, "a launch with device-side cumulative lengths (Attention::varlen_on_device) is not split"));
            }
            None if device_varlen => 1,
            Some(s) => {
                if s == 0 || s > MAX_KV_SPLITS as usize {
                    return Err(invalid("splits", s, format!("must be 1 to {MAX_KV_SPLITS}")));
                }
                s
            }
            None => {
                // As many splits as one wave of blocks holds (every block resident at once: a
                // second, partial wave measured slower than fewer, longer splits), none shorter
                // than MIN_SPLIT_KV_BYTES of K and V; but one block per SM where each split
                // still reads LONG_SPLIT_KV_BYTES that way.
                let blocks = row_tiles * groups;
                let one_wave = sm_count as usize * tile.blocks_per_sm as usize;
                let kv_bytes = a.seqlen_k * (head.dk() + head.dv()) as usize * 2;
                let most = (kv_bytes / MIN_SPLIT_KV_BYTES as usize).min(key_tiles).clamp(1, MAX_KV_SPLITS as usize);
                if blocks == 0 {
                    1
                } else {
                    let one_per_sm = (sm_count as usize / blocks).clamp(1, most);
                    if kv_bytes / one_per_sm >= LONG_SPLIT_KV_BYTES {
                        one_per_sm
                    } else {
                        (one_wave / blocks).clamp(1, most)
                    }
                }
            }
        };
        if splits > 1 {
            if a.heads_q * total_q > MAX_GRID_X {
                return Err(invalid("splits", splits, "a split launch merges one row per block: heads_q × query rows exceed the grid"));
            }
            flags |= SPLIT;
        }
        let window_right = if a.causal { Some(a.window_right.map_or(0, |r| r.min(0))) } else { a.window_right };
        let window = |w: Option<usize>, name: &'static str| -> Result<i32> {
            match w {
                None => Ok(-1),
                Some(x) if x <= i32::MAX as usize => Ok(x as i32),
                Some(x) => Err(invalid(name, x, "at most i32::MAX")),
            }
        };
        let params = AttentionParams {
            q: GlobalPtr::new(buffers.q.0),
            k: GlobalPtr::new(buffers.k.0),
            v: GlobalPtr::new(buffers.v.0),
            o: GlobalPtr::new(buffers.o.0),
            lse: GlobalPtr::new(buffers.lse.map_or(0, |l| l.0)),
            mask: GlobalPtr::new(buffers.mask.map_or(0, |m| m.0)),
            alibi_slopes: GlobalPtr::new(device_slopes.unwrap_or(0)),
            sinks: GlobalPtr::new(device_sinks.unwrap_or(0)),
            cu_seqlens_q: GlobalPtr::new(cu_q_addr.unwrap_or(0)),
            // Cumulative lengths on the host (uploaded) are set at launch, as is the zero word
            // that starts device-side lengths per sequence (step 0).
            key_starts: GlobalPtr::new(cu_k_addr.unwrap_or(0)),
            key_ends: GlobalPtr::new(cu_k_addr.map_or(seqlens_k_addr.unwrap_or(0), |at| at + 4)),
            key_start_step: u32::from(cu_k.is_some() || cu_k_addr.is_some()),
            block_table: GlobalPtr::new(block_table_addr.unwrap_or(0)),
            table_error: GlobalPtr::new(0),
            partial_o: GlobalPtr::new(0),
            partial_lse: GlobalPtr::new(0),
            q_batch_stride: a.q_strides.batch as u64,
            q_seq_stride: a.q_strides.seq as u64,
            q_head_stride: a.q_strides.head as u64,
            k_batch_stride: a.k_strides.batch as u64,
            k_seq_stride: a.k_strides.seq as u64,
            k_head_stride: a.k_strides.head as u64,
            v_batch_stride: a.v_strides.batch as u64,
            v_seq_stride: a.v_strides.seq as u64,
            v_head_stride: a.v_strides.head as u64,
            o_batch_stride: a.o_strides.batch as u64,
            o_seq_stride: a.o_strides.seq as u64,
            o_head_stride: a.o_strides.head as u64,
            lse_batch_stride: lse_batch_stride as u64,
            lse_head_stride: lse_head_stride as u64,
            mask_row_stride: mask_row_stride as u64,
            block_table_stride: paged.map_or(0, |p| p.pages_per_seq) as u64,
            page_size: paged.map_or(0, |p| p.page_size) as u32,
            last_page: paged.map_or(0, |p| p.pages - 1) as u32,
            batch: a.batch as u32,
            seqlen_q: a.seqlen_q as u32,
            seqlen_k: a.seqlen_k as u32,
            total_q: total_q as u32,
            total_k: match varlen {
                Some(v) if paged.is_none() => v.total_k as u32,
                _ => u32::MAX,
            },
            heads_q: a.heads_q as u32,
            heads_k: a.heads_k as u32,
            heads_packed: heads_packed as u32,
            dv: dv as u32,
            splits: splits as u32,
            scale,
            softcap: a.softcap.unwrap_or(0.0),
            window_left: window(a.window_left, "window_left")?,
            window_right: window(window_right, "window_right")?,
            flags,
        };
        Ok(AttentionPlan {
            head,
            dtype,
            kind,
            grid: (row_tiles as u32, groups as u32, splits as u32),
            block: tile.threads(),
            smem_bytes: tile.smem_bytes(head),
            params,
            heads_packed,
            splits,
            merge_overlaps_split: splits > 1 && row.arch.has_programmatic_launch(),
            forward_overlaps_previous: row.arch.has_programmatic_launch(),
            cu_seqlens_q: cu_q,
            cu_seqlens_k: cu_k,
            block_table: paged.filter(|_| block_table_addr.is_none()).map(|p| p.block_table.clone()),
            alibi_slopes,
            sinks: a.sinks.clone(),
            empty: total_q == 0 || a.batch == 0,
        })
    }
}

/// The optional buffers of a call.
#[derive(Default)]
pub struct AttentionExtras<'a> {
    /// The additive mask (shape in [`Attention::mask`]).
    pub mask: Option<MaskBuffer<'a>>,
    /// The log-sum-exp output ([`Attention::lse`]).
    pub lse: Option<&'a mut CudaSlice<f32>>,
    /// Tables in device memory instead of the problem's host arrays (capturable in a CUDA
    /// graph; see the module docs).
    pub tables: DeviceTables<'a>,
}

/// Per-call tables in device memory, each in place of the problem's host array of the same
/// name (which must then be left empty or `None`). Read on the stream of the call, in order.
#[derive(Clone, Copy, Default)]
pub struct DeviceTables<'a> {
    /// Packed sequences ([`Attention::varlen_on_device`]): `[batch + 1]` cumulative query and
    /// key lengths (checked on the device).
    pub cu_seqlens_q: Option<&'a CudaSlice<u32>>,
    pub cu_seqlens_k: Option<&'a CudaSlice<u32>>,
    /// Paged K/V ([`PagedKv::on_device`]): `[batch, pages_per_seq]` page indices, each below
    /// `pages` (checked on the device).
    pub block_table: Option<&'a CudaSlice<u32>>,
    /// Paged K/V: `[batch]` key lengths, each at most `seqlen_k` (checked on the device).
    pub seqlens_k: Option<&'a CudaSlice<u32>>,
    /// ALiBi: `[heads_q]` slopes (as [`Alibi::Slopes`]; [`alibi_slopes`] computes ggml's).
    pub alibi_slopes: Option<&'a CudaSlice<f32>>,
    /// `[heads_q]` attention-sink logits.
    pub sinks: Option<&'a CudaSlice<f32>>,
}

/// An additive mask buffer, f16 or f32.
pub enum MaskBuffer<'a> {
    F16(&'a CudaSlice<half::f16>),
    F32(&'a CudaSlice<f32>),
}

impl Cukernels {
    /// Runs `desc` on `stream`: `o = attention(q, k, v)` (see the module docs). Everything is
    /// validated first; nothing launches on an error.
    pub fn attention<T, Q, K, V, O>(&self, stream: &Arc<CudaStream>, desc: &Attention, q: &Q, k: &K, v: &V, o: &mut O, extras: AttentionExtras<'_>) -> Result<()>
    where
        T: AttentionElement,
        Q: DevicePtr<T>,
        K: DevicePtr<T>,
        V: DevicePtr<T>,
        O: DevicePtrMut<T>,
    {
        self.check_stream(stream)?;
        let (q_addr, _q_sync) = q.device_ptr(stream);
        let (k_addr, _k_sync) = k.device_ptr(stream);
        let (v_addr, _v_sync) = v.device_ptr(stream);
        let o_len = o.len();
        let (o_addr, _o_sync) = o.device_ptr_mut(stream);
        let mask = extras.mask.as_ref().map(|m| match m {
            MaskBuffer::F16(b) => {
                let (addr, sync) = b.device_ptr(stream);
                ((addr, b.len(), false), sync)
            }
            MaskBuffer::F32(b) => {
                let (addr, sync) = b.device_ptr(stream);
                ((addr, b.len(), true), sync)
            }
        });
        let lse = extras.lse.map(|l| {
            let len = l.len();
            let (addr, sync) = l.device_ptr_mut(stream);
            ((addr, len), sync)
        });
        // A device table's address and length, and the guard that orders its use on `stream`.
        fn table<'a, T>(t: Option<&'a CudaSlice<T>>, stream: &'a Arc<CudaStream>) -> (Option<(u64, usize)>, Option<impl Sized + 'a>) {
            t.map(|t| {
                let (addr, sync) = t.device_ptr(stream);
                ((addr, t.len()), sync)
            })
            .unzip()
        }
        let (cu_seqlens_q, _cu_seqlens_q_sync) = table(extras.tables.cu_seqlens_q, stream);
        let (cu_seqlens_k, _cu_seqlens_k_sync) = table(extras.tables.cu_seqlens_k, stream);
        let (block_table, _block_table_sync) = table(extras.tables.block_table, stream);
        let (seqlens_k, _seqlens_k_sync) = table(extras.tables.seqlens_k, stream);
        let (slopes, _slopes_sync) = table(extras.tables.alibi_slopes, stream);
        let (sinks, _sinks_sync) = table(extras.tables.sinks, stream);
        let buffers = AttentionBuffers {
            q: (q_addr, q.len()),
            k: (k_addr, k.len()),
            v: (v_addr, v.len()),
            o: (o_addr, o_len),
            lse: lse.as_ref().map(|l| l.0),
            mask: mask.as_ref().map(|m| m.0),
            tables: TableBuffers { cu_seqlens_q, cu_seqlens_k, block_table, seqlens_k, alibi_slopes: slopes, sinks },
        };
        let plan = desc.plan(T::DTYPE, &buffers, self.attention_config(), self.sm_count())?;
        self.check_loadable_on(KernelFamily::Attention, stream.cu_stream())?;
        if plan.uploads() && self.is_capturing(stream.cu_stream())? {
            return Err(invalid(
                "stream",
                "capturing a CUDA graph",
                "the call uploads host tables (varlen cu_seqlens, a block table, seqlens_k, ALiBi or sinks), which a graph cannot replay: pass the paged, ALiBi and sink tables as DeviceTables",
            ));
        }
        self.launch_attention(stream, &plan)
    }

    /// Reports the first bad device-side table entry ([`DeviceTables`]) that an attention
    /// launch of this handle met since the last report, as
    /// [`Error::InvalidArgument`] naming `block_table` or `seqlens_k`, and clears the
    /// record. Waits for `stream` first (a launch on another stream is seen once it has
    /// finished). Such a launch read the cache's last page for the bad page, or no keys for
    /// the bad length:
    /// its outputs for that sequence are not meaningful, and nothing was read or written out
    /// of bounds. Call it after a direct call, or after replaying a graph as often as wanted:
    /// the record keeps the first find.
    pub fn attention_table_error(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.check_stream(stream)?;
        let Some(record) = self.table_error_record()? else {
            return Ok(());
        };
        let mut words = [0u32; attention_table_error::WORDS];
        self.context().bind_to_thread()?;
        // SAFETY: reads the record's words (inside the handle's own workspace, alive as long
        // as `self`) into `words`, ordered after the stream's launches, and waits for the copy
        // before `words` is read.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut words, record, stream.cu_stream()) }?;
        stream.synchronize()?;
        let [what, sequence, index, value] = words;
        if what == 0 {
            return Ok(());
        }
        // SAFETY: clears the record's words (as above), then waits, so that the next report
        // sees only later finds.
        unsafe { cudarc::driver::result::memset_d8_async(record, 0, 4 * attention_table_error::WORDS, stream.cu_stream()) }?;
        stream.synchronize()?;
        Err(match what {
            attention_table_error::PAGE_OUT_OF_RANGE => {
                invalid("block_table", format!("[{sequence}][{index}] = {value}"), "points past the cache's pages (found on the device; the launch read its last page instead)")
            }
            attention_table_error::KEY_LENGTH_TOO_LONG => {
                invalid("seqlens_k", format!("[{sequence}] = {value}"), "longer than the seqlen_k the call was planned for (found on the device; the launch read no keys for it)")
            }
            attention_table_error::KEY_RANGE_TOO_LONG => invalid(
                "cu_seqlens_k",
                format!("[{index}] and [{}]: length {}", index + 1, value as i32),
                "decreasing or longer than seqlen_k, counted up to total_k (found on the device; the launch read no keys for that sequence)",
            ),
            attention_table_error::QUERY_RANGE_INVALID => invalid(
                "cu_seqlens_q",
                format!("[{index}] = {value} and the entry after it"),
                "decreasing, longer than seqlen_q, or past total_q (found on the device; the launch computed no rows of that sequence)",
            ),
            attention_table_error::KEY_RANGE_PAST_END => {
                invalid("cu_seqlens_k", format!("[{}] = {value}", index + 1), "past total_k (found on the device; the launch read that sequence's keys up to total_k)")
            }
            other => invalid("table_error", other, "an unknown record (a kernel newer than this host code?)"),
        })
    }

    /// The device address of the table-error record: the head of the attention own
    /// workspace. `None` when the attention module is not loaded yet (no launch can have
    /// written it); an error when the workspace could not be allocated.
    fn table_error_record(&self) -> Result<Option<u64>> {
        if !self.is_loaded(KernelFamily::Attention) {
            return Ok(None);
        }
        match self.own_workspace(KernelFamily::Attention)? {
            Some(Ok(own)) => Ok(Some(own.addr())),
            Some(Err(e)) => Err(e.clone()),
            None => unreachable!("attention owns a workspace (Cukernels::own_workspace_bytes)"),
        }
    }

    /// Uploads the plan's small host arrays, takes the split workspace (the handle's own, or
    /// one allocated for the call), and launches: the table check where the plan has
    /// device-side tables, the forward kernel, and the merge of a split.
    fn launch_attention(&self, stream: &Arc<CudaStream>, plan: &AttentionPlan) -> Result<()> {
        if plan.empty {
            return Ok(());
        }
        // Loads the module (and its own workspace) if need be.
        let forward = self.attention_function(Some(plan.head), plan.dtype, plan.kind)?;
        let mut params = plan.params;
        // Device copies of the host arrays; they live until this function returns, and
        // cudarc frees them in stream order, after the kernels that read them. (Device tables'
        // pointers are in `params` already.)
        fn upload<T: DeviceRepr>(stream: &Arc<CudaStream>, host: &Option<Vec<T>>, field: &mut GlobalPtr<T>) -> Result<Option<CudaSlice<T>>> {
            let Some(host) = host else { return Ok(None) };
            let copy = stream.clone_htod(host)?;
            *field = GlobalPtr::new(copy.device_ptr(stream).0);
            Ok(Some(copy))
        }
        let cu_q = upload(stream, &plan.cu_seqlens_q, &mut params.cu_seqlens_q)?;
        let cu_k = upload(stream, &plan.cu_seqlens_k, &mut params.key_starts)?;
        if cu_k.is_some() {
            // Cumulative key lengths: sequence b's keys end where b + 1's start.
            params.key_ends = GlobalPtr::new(params.key_starts.addr() + 4);
        }
        let table = upload(stream, &plan.block_table, &mut params.block_table)?;
        let slopes = upload(stream, &plan.alibi_slopes, &mut params.alibi_slopes)?;
        let sinks = upload(stream, &plan.sinks, &mut params.sinks)?;
        if plan.checks_tables() {
            let record = self.table_error_record()?.expect("the attention module was loaded above");
            params.table_error = GlobalPtr::new(record);
            if params.flags & KEY_LENGTHS != 0 && params.key_start_step == 0 {
                // Device-side lengths per sequence: every sequence starts at the zero word.
                params.key_starts = GlobalPtr::new(record + OWN_WORKSPACE_ZERO_WORD_AT as u64);
            }
        }
        // The split workspace: the handle's own where it serves this stream and is large
        // enough (no allocation: capturable, and cheaper for the host), else the call's own.
        // With the own workspace, its lock is held until both launches are queued: two
        // threads queueing on the bound stream could otherwise interleave them (forward A,
        // forward B, merge A), and merge A would read B's partial results.
        let mut allocated = None;
        let mut own_launches = None;
        if let Some((lse_at, bytes)) = plan.split_workspace() {
            let stream_id = stream.cu_stream() as usize;
            let base = match self.own_workspace(KernelFamily::Attention)? {
                Some(Ok(own)) if own.bytes() - OWN_WORKSPACE_PARTIALS_AT >= bytes && own.free_for(stream_id) && own.bind(stream_id) => {
                    own_launches = Some(own.lock_launches());
                    own.addr() + OWN_WORKSPACE_PARTIALS_AT as u64
                }
                _ => {
                    // SAFETY: uninitialized device memory is never read: every block of the
                    // split launch writes its partial rows and LSEs (an empty key range writes
                    // 0 and −inf) before the merge, queued after it on the same stream, reads
                    // them. (The own workspace is read the same way: nothing in it is ever read
                    // before this launch writes it.)
                    let buffer = unsafe { stream.alloc::<u8>(bytes) }?;
                    let base = buffer.device_ptr(stream).0;
                    allocated = Some(buffer);
                    base
                }
            };
            params.partial_o = GlobalPtr::new(base);
            params.partial_lse = GlobalPtr::new(base + lse_at as u64);
        }
        self.context().bind_to_thread()?;
        if plan.checks_tables() {
            // The table check: the merge entry point in its checking mode, a block per
            // sequence; the forward kernel clamps what it reads, so it does not wait for the
            // check (on sm_90+ it starts as the check's programmatic dependent).
            let check = self.attention_function(None, plan.dtype, AttentionTileKind::Prefill)?;
            let mut check_params = params;
            check_params.flags |= CHECK_LAUNCH;
            let mut check_args = check_params.kernel_args();
            // SAFETY: the check reads the device tables, whose lengths `plan` checked (batch
            // sequences), and writes only the record in the handle's own workspace (alive as
            // long as `self`); `check_args` points at `check_params`, alive until the launch
            // is queued.
            unsafe {
                launch(check.cu_function(), (plan.params.batch, 1, 1), MERGE_THREADS, 0, stream.cu_stream(), &mut check_args, &[])?;
            }
        }
        let mut args = params.kernel_args();
        // SAFETY: `plan` proved that every element the parameters address lies inside the
        // caller's buffers (held by their SyncOnDrop guards for the duration of the launch)
        // or the uploads and workspace above (alive until after the launch is queued, freed in
        // stream order). `args` points at the fields of `params`, alive until cuLaunchKernel
        // returns, and matches the entry point's parameters by construction (both come from
        // the one definition of `AttentionParams`).
        let overlapped = LaunchAttribute::programmatic_if(plan.forward_overlaps_previous);
        unsafe {
            launch(forward.cu_function(), plan.grid, plan.block, plan.smem_bytes, stream.cu_stream(), &mut args, overlapped)?;
        }
        if plan.splits > 1 {
            let merge = self.attention_function(None, plan.dtype, AttentionTileKind::Prefill)?;
            let rows = params.heads_q * params.total_q;
            // SAFETY: as above; the merge reads the workspace the forward launch wrote, in
            // stream order, and writes O's rows (and LSE) that the plan validated.
            unsafe {
                launch(merge.cu_function(), (rows, 1, 1), MERGE_THREADS, MERGE_SMEM_BYTES, stream.cu_stream(), &mut args, LaunchAttribute::programmatic_if(plan.merge_overlaps_split))?;
            }
        }
        drop((own_launches, cu_q, cu_k, table, slopes, sinks, allocated));
        Ok(())
    }
}
