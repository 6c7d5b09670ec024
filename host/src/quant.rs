//! Quantizing and dequantizing GGUF block formats on the host, with ggml's reference
//! algorithms (`quantize_row_*_ref` and `dequantize_row_*` of `ggml-quants.c`), so that users
//! can quantize their own weights and the GPU kernels have a reference.
//!
//! The block layouts are [`cukernels_gpu::quant`]'s (the device reads the same structs).
//! Dequantization reproduces ggml's arithmetic operation for operation (products and sums in
//! the same order, f32 throughout, no fused multiply-adds), so its results are ggml's bit for
//! bit; `tests/cpu_quant.rs` checks them against PyPI's `gguf` package, and checks the
//! quantizers that package implements (q4_0, q4_1, q5_0, q5_1, q8_0, mxfp4) the same way. The
//! K-quants' and `iq4_*` quantizers follow ggml's reference search (weighted least squares over
//! candidate scales) step by step; `gguf` has no quantizer for them, so the tests check them by
//! their error bounds and by dequantizing through `gguf`. A one-off comparison with ggml's own C
//! reference quantizers (ggml `d99724f2`, compiled locally; not part of this repository)
//! matched every one of 99,200 blocks of all 13 formats (2026-12-01), except all-zero `iq4_nl`
//! blocks, where that ggml left stale levels under a zero scale (current llama.cpp zeroes them,
//! as this module does; both dequantize to zeros).
//!
//! ```
//! use cukernels::quant::{dequantize, quantize};
//! use cukernels::GgufFormat;
//! let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
//! let q4k = quantize(GgufFormat::Q4K, &x).unwrap(); // one 144-byte super-block
//! assert_eq!(q4k.len(), 144);
//! let y = dequantize(GgufFormat::Q4K, &q4k).unwrap();
//! // 4.5 bits a weight: within half a step (1/15 of a sub-block's range) of the input.
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 0.08));
//! ```

use crate::error::{Error, Result};
pub use cukernels_gpu::quant::{
    bit_plane, chunk_dot, dp4a, e8m0_to_f32_half, five_bits, set_bit_plane, q8_words, k4_nibble, nibble, scale_iq4xs, scale_min_k4, scale_q3k, six_bits, two_bits, BlockFormat, Chunk, BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0, BlockQ8_1, GgufFormat, KVALUES_IQ4NL, KVALUES_MXFP4, QK, QK_K,
};
use half::f16;

/// A block format's reference quantizer (its layout and decoding, shared with the device, are
/// [`BlockFormat`]).
pub trait QuantBlock: BlockFormat + bytemuck::Pod {
    /// The block ggml's reference quantizer makes of one block's worth of weights.
    fn quantize(x: &[f32]) -> Self;
}

/// One block's weights (ggml's `dequantize_row_*`, bit for bit): each chunk's
/// `scale · v + offset`, in that order, unfused.
pub fn dequantize_block<B: BlockFormat>(block: &B, y: &mut [f32]) {
    for (c, out) in y.chunks_exact_mut(QK).enumerate() {
        let chunk = block.chunk(c);
        for (j, w) in out.iter_mut().enumerate() {
            let (scale, v) = (chunk.scale[j / 16], chunk.value(j) as f32);
            *w = if B::HAS_OFFSET { scale * v + chunk.offset[j / 16] } else { scale * v };
        }
    }
}

/// Dequantizes `bytes` (whole blocks of `format`) to f32.
pub fn dequantize(format: GgufFormat, bytes: &[u8]) -> Result<Vec<f32>> {
    with_block!(format, B => dequantize_blocks::<B>(bytes))
}

/// Quantizes `x` (a whole number of `format` blocks) with ggml's reference quantizer.
pub fn quantize(format: GgufFormat, x: &[f32]) -> Result<Vec<u8>> {
    with_block!(format, B => quantize_blocks::<B>(x))
}

/// One row of weights (whole blocks of `format`) times the same number of activations as q8_1
/// blocks, computed the way the GPU kernels compute it: for each 32-weight chunk, integer dot
/// products ([`chunk_dot`], `dp4a`) scaled by the chunk's and the activations' scales, summed
/// in order in f32.
pub fn dot_q8_1(format: GgufFormat, row: &[u8], x: &[BlockQ8_1]) -> Result<f32> {
    with_block!(format, B => dot_blocks::<B>(row, x, false))
}

/// Every 32-weight chunk of `bytes` (whole blocks of `format`), in order: the int8 values and
/// per-16-weight scales and offsets the integer kernels multiply ([`BlockFormat::chunk`]).
pub fn chunks(format: GgufFormat, bytes: &[u8]) -> Result<Vec<Chunk>> {
    with_block!(format, B => chunks_of::<B>(bytes))
}

fn chunks_of<B: QuantBlock>(bytes: &[u8]) -> Result<Vec<Chunk>> {
    each_chunk::<B>(bytes, |block, c| block.chunk(c))
}

/// `read(block, c)` for every chunk `c` of every block of `bytes`, in order, the blocks read
/// in place from a 4-aligned copy of `bytes` as in a weight tensor on the GPU: the blocks of
/// a format whose size is 2 mod 4 then alternate between the two alignments that
/// `chunk_at` treats apart (`field_words`).
fn each_chunk<B: QuantBlock>(bytes: &[u8], read: impl Fn(&B, usize) -> Chunk) -> Result<Vec<Chunk>> {
    let per_block = B::FORMAT.block_elements() / QK;
    let blocks = whole_blocks::<B>("bytes", bytes)?;
    let mut words = vec![0u32; bytes.len().div_ceil(4)];
    let copy = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..bytes.len()];
    copy.copy_from_slice(bytes);
    // A block's alignment (1, 2 or 4) divides both the copy's 4 and the block's size.
    let in_place: &[B] = bytemuck::cast_slice(copy);
    let mut out = Vec::with_capacity(blocks * per_block);
    for block in in_place {
        out.extend((0..per_block).map(|c| read(block, c)));
    }
    Ok(out)
}

/// Every chunk of `bytes` as the GPU kernels read it ([`BlockFormat::chunk_at`]: a scale and
/// aligned words for q4_0, q5_0 and q8_0, whole-block copies in 16-bit loads for q4_1, iq4_nl
/// and q5_1, q4_K/q5_K in 32-bit words), in [`chunks`]' order; the two must agree bit for bit
/// (a CPU test checks it for every format).
pub fn chunks_as_the_gpu_reads_them(format: GgufFormat, bytes: &[u8]) -> Result<Vec<Chunk>> {
    with_block!(format, B => gpu_chunks_of::<B>(bytes))
}

fn gpu_chunks_of<B: QuantBlock>(bytes: &[u8]) -> Result<Vec<Chunk>> {
    // SAFETY: `block` is a reference to a block, valid and aligned for `B`; on the host
    // `chunk_at` reads unaligned, so the device's 4-byte alignment of q4_K/q5_K blocks is not
    // needed here.
    each_chunk::<B>(bytes, |block, c| unsafe { B::chunk_at(block, c) })
}

/// The number of `B` blocks in `bytes`, or an error naming the argument `name`.
fn whole_blocks<B: QuantBlock>(name: &'static str, bytes: &[u8]) -> Result<usize> {
    let size = std::mem::size_of::<B>();
    if bytes.len() % size != 0 {
        return Err(Error::invalid(name, bytes.len(), format!("not a whole number of {} blocks ({size} bytes each)", B::FORMAT)));
    }
    Ok(bytes.len() / size)
}

/// [`dot_q8_1`] the way the direct path computes it: each chunk's values as stored
/// ([`BlockFormat::stored_chunk_at`], read in place), their bias ([`BlockFormat::VALUE_BIAS`])
/// taken off the integer dots; the same bits as `dot_q8_1` (a CPU test checks it for every
/// format).
pub fn dot_q8_1_with_stored_values(format: GgufFormat, row: &[u8], x: &[BlockQ8_1]) -> Result<f32> {
    with_block!(format, B => dot_blocks::<B>(row, x, true))
}

fn dot_blocks<B: QuantBlock>(row: &[u8], x: &[BlockQ8_1], stored_values: bool) -> Result<f32> {
    let format = B::FORMAT;
    let blocks = whole_blocks::<B>("row", row)?;
    let per_block = format.block_elements() / QK;
    if x.len() != blocks * per_block {
        return Err(Error::invalid("x", x.len(), format!("the row holds {} weights: {} q8_1 blocks", blocks * format.block_elements(), blocks * per_block)));
    }
    let (chunks, bias) = if stored_values {
        // SAFETY: `block` is a reference to a block, valid and aligned for `B`; on the host
        // `stored_chunk_at` reads unaligned.
        (each_chunk::<B>(row, |block, c| unsafe { B::stored_chunk_at(block, c) })?, B::VALUE_BIAS)
    } else {
        (each_chunk::<B>(row, |block, c| block.chunk(c))?, 0)
    };
    let mut acc = 0f32;
    for (chunk, act) in chunks.iter().zip(x) {
        acc += chunk_dot(chunk, bias, B::HAS_OFFSET, &q8_words(act), act.d.to_f32());
    }
    Ok(acc)
}

/// Quantizes activations to `q8_1` blocks (what the integer kernels multiply weights with).
pub fn quantize_q8_1(x: &[f32]) -> Result<Vec<BlockQ8_1>> {
    if x.len() % QK != 0 {
        return Err(Error::invalid("x", x.len(), format!("q8_1 needs a multiple of {QK} elements")));
    }
    Ok(x.chunks_exact(QK).map(quantize_q8_1_block).collect())
}

/// Runs `$body` with `$b` the block struct of `$format`.
macro_rules! with_block {
    ($format:expr, $b:ident => $body:expr) => {
        match $format {
            GgufFormat::Q4_0 => { type $b = BlockQ4_0; $body }
            GgufFormat::Q4_1 => { type $b = BlockQ4_1; $body }
            GgufFormat::Q5_0 => { type $b = BlockQ5_0; $body }
            GgufFormat::Q5_1 => { type $b = BlockQ5_1; $body }
            GgufFormat::Q8_0 => { type $b = BlockQ8_0; $body }
            GgufFormat::Q2K => { type $b = BlockQ2K; $body }
            GgufFormat::Q3K => { type $b = BlockQ3K; $body }
            GgufFormat::Q4K => { type $b = BlockQ4K; $body }
            GgufFormat::Q5K => { type $b = BlockQ5K; $body }
            GgufFormat::Q6K => { type $b = BlockQ6K; $body }
            GgufFormat::Iq4Nl => { type $b = BlockIq4Nl; $body }
            GgufFormat::Iq4Xs => { type $b = BlockIq4Xs; $body }
            GgufFormat::Mxfp4 => { type $b = BlockMxfp4; $body }
        }
    };
}
use with_block;

fn dequantize_blocks<B: QuantBlock>(bytes: &[u8]) -> Result<Vec<f32>> {
    let elements = B::FORMAT.block_elements();
    let mut out = vec![0f32; whole_blocks::<B>("bytes", bytes)? * elements];
    for (block, y) in bytes.chunks_exact(std::mem::size_of::<B>()).zip(out.chunks_exact_mut(elements)) {
        // Blocks in a byte buffer need not be aligned (GGUF tensor data often is not).
        dequantize_block(&bytemuck::pod_read_unaligned::<B>(block), y);
    }
    Ok(out)
}

fn quantize_blocks<B: QuantBlock>(x: &[f32]) -> Result<Vec<u8>> {
    let elements = B::FORMAT.block_elements();
    if x.len() % elements != 0 {
        return Err(Error::invalid("x", x.len(), format!("{} needs a multiple of {elements} elements", B::FORMAT)));
    }
    let mut out = Vec::with_capacity(x.len() / elements * std::mem::size_of::<B>());
    for chunk in x.chunks_exact(elements) {
        out.extend_from_slice(bytemuck::bytes_of(&B::quantize(chunk)));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Helpers of ggml-quants.c
// ---------------------------------------------------------------------------------------------

/// Sub-block maxima below this are all-zero sub-blocks (ggml's `GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;

fn h(x: f32) -> f16 {
    f16::from_f32(x)
}

/// Round to nearest, ties to even, through the f32 adder (ggml's `nearest_int`; |x| < 2^22).
fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The largest magnitude and the (signed) element that has it, the first one on ties.
fn signed_abs_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// `1/d`, or 0 for `d = 0`.
fn inverse_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// The nibble pairs of a 32-element block: element `j` low, `j + 16` high.
fn pack_nibbles(q: &[u8; QK]) -> [u8; QK / 2] {
    std::array::from_fn(|j| (q[j] & 0xF) | ((q[j + QK / 2] & 0xF) << 4))
}

/// Index of the level of the sorted `values` nearest `x` (ggml's branch-free
/// `best_index_int8`: level `i` from the midpoint of `values[i-1]` and `values[i]` on, compared
/// at twice the scale so that both sides are exact).
fn best_index_int8(values: &[i8; 16], x: f32) -> usize {
    let x2 = x + x;
    let mut idx = 0;
    let mut step = values.len() >> 1;
    while step > 0 {
        let j = idx + step;
        if x2 >= (values[j - 1] as i32 + values[j] as i32) as f32 {
            idx = j;
        }
        step >>= 1;
    }
    idx
}

/// The first step of ggml's `make_qx_quants` (rmse_type 1) and `make_q3_quants`: signed levels
/// `l = nearest_int(iscale · x)` clamped to `−nmax .. nmax`, each handed to `level(i, l)`, and
/// the weighted sums `(Σ w·x·l, Σ w·l²)` with `w = x²`, in ggml's order of operations.
fn signed_levels_fit(x: &[f32], iscale: f32, nmax: i32, mut level: impl FnMut(usize, i32)) -> (f32, f32) {
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (i, &xi) in x.iter().enumerate() {
        let l = nearest_int(iscale * xi).clamp(-nmax, nmax - 1);
        level(i, l);
        let w = xi * xi;
        sumlx += w * xi * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    (sumlx, suml2)
}

/// ggml's `make_qx_quants` for `rmse_type` 1 without importance weights (`w = x²`): levels
/// `L` in `0..2·nmax` around `nmax`, the scale from a weighted least-squares fit, the best of
/// 19 candidate starting scales.
fn make_qx_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (amax, max) = signed_abs_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let (sumlx, suml2) = signed_levels_fit(x, -(nmax as f32) / max, nmax, |i, l| levels[i] = (l + nmax) as i8);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        let iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = signed_levels_fit(x, iscale, nmax, |_, _| {});
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            signed_levels_fit(x, iscale, nmax, |i, l| levels[i] = (l + nmax) as i8);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse`: signed levels refined one at a time (up to 5
/// passes) while the weighted error falls; returns the scale, levels offset by `nmax`.
fn make_q3_quants(nmax: i32, x: &[f32], levels: &mut [i8]) -> f32 {
    let (amax, max) = signed_abs_max(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let mut l_of = [0i32; 16];
    let (mut sumlx, mut suml2) = signed_levels_fit(x, -(nmax as f32) / max, nmax, |i, l| l_of[i] = l);
    for _ in 0..5 {
        let mut changed = 0;
        for (i, &xi) in x.iter().enumerate() {
            let w = xi * xi;
            let mut slx = sumlx - w * xi * l_of[i] as f32;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * l_of[i] as f32 * l_of[i] as f32;
                let new_l = nearest_int(xi * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l_of[i] {
                    slx += w * xi * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l_of[i] = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    for (out, l) in levels.iter_mut().zip(l_of) {
        *out = (l + nmax) as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// ggml's `make_qkx2_quants`: levels `0..=nmax` with a scale and a (non-positive) minimum,
/// fitted by weighted least squares over `nstep + 1` candidate scales. Returns
/// `(scale, −min)`.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(nmax: i32, x: &[f32], weights: &[f32], levels: &mut [u8], rmin: f32, rdelta: f32, nstep: i32, use_mad: bool) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let error = |d: f32| if use_mad { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        levels[i] = l as u8;
        best_error += weights[i] * error(scale * l as f32 + min - x[i]);
    }
    let mut aux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0f32;
            for i in 0..n {
                cur_error += weights[i] * error(this_scale * aux[i] as f32 + this_min - x[i]);
            }
            if cur_error < best_error {
                levels[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `quantize_row_iq4_nl_impl` without importance weights (`w = x²`), for one block of
/// `iq4_nl` (32 weights, `ntry` −1: no scale search) or one super-block of `iq4_xs` (256,
/// `ntry` 7). Returns the scale of each 32-weight sub-block (the f32 before packing), the
/// block scale and the levels.
struct Iq4Levels {
    d: f32,
    sub_levels: [i32; QK_K / 32],
    levels: [u8; QK_K],
}

fn quantize_iq4(x: &[f32], ntry: i32) -> Iq4Levels {
    let values = &KVALUES_IQ4NL;
    let sub_blocks = x.len() / 32;
    let mut levels = [0u8; QK_K];
    let mut scales = [0f32; QK_K / 32];
    let (mut max_scale, mut amax_scale) = (0f32, 0f32);
    for ib in 0..sub_blocks {
        let xb = &x[32 * ib..32 * ib + 32];
        let lb = &mut levels[32 * ib..32 * ib + 32];
        let (amax, max) = signed_abs_max(xb);
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            lb.fill(0);
            continue;
        }
        let fit = |id: f32, lb: Option<&mut [u8]>| -> (f32, f32) {
            let (mut sumqx, mut sumq2) = (0f32, 0f32);
            let mut out = lb;
            for (j, &xj) in xb.iter().enumerate() {
                let l = best_index_int8(values, id * xj);
                if let Some(out) = out.as_deref_mut() {
                    out[j] = l as u8;
                }
                let (q, w) = (values[l] as f32, xj * xj);
                sumqx += w * q * xj;
                sumq2 += w * q * q;
            }
            (sumqx, sumq2)
        };
        let d0 = if ntry > 0 { -max / values[0] as f32 } else { max / values[0] as f32 };
        let (sumqx, sumq2) = fit(1.0 / d0, Some(lb));
        let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -ntry..=ntry {
            let id = (itry + values[0] as i32) as f32 / max;
            let (sumqx, sumq2) = fit(id, None);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    let mut sub_levels = [0i32; QK_K / 32];
    let d = if sub_blocks > 1 {
        let d = -max_scale / 32.0;
        let id = inverse_or_zero(d);
        for ib in 0..sub_blocks {
            let l = nearest_int(id * scales[ib]).clamp(-32, 31);
            let idl = inverse_or_zero(d * l as f32);
            for j in 0..32 {
                levels[32 * ib + j] = best_index_int8(values, idl * x[32 * ib + j]) as u8;
            }
            sub_levels[ib] = l;
        }
        d
    } else {
        scales[0]
    };
    Iq4Levels { d, sub_levels, levels }
}

fn quantize_q8_1_block(x: &[f32]) -> BlockQ8_1 {
    let amax = x.iter().fold(0f32, |a, v| if a > v.abs() { a } else { v.abs() });
    let d = amax / 127.0;
    let id = inverse_or_zero(d);
    let qs: [i8; QK] = std::array::from_fn(|j| (x[j] * id).round() as i8);
    let sum: i32 = qs.iter().map(|&q| q as i32).sum();
    BlockQ8_1 { d: h(d), s: h(sum as f32 * d), qs }
}

// ---------------------------------------------------------------------------------------------
// The formats
// ---------------------------------------------------------------------------------------------

/// The levels of ggml's `_0` quantizers (`q4_0`, `q5_0`): `d = max / −2^(bits−1)` from the
/// weight of largest magnitude (so that it maps to level 0), `q = min(top, ⌊x/d + 2^(bits−1) +
/// ½⌋)`.
fn zero_point_levels(x: &[f32], bits: u32) -> (f32, [u8; QK]) {
    let (offset, top) = ((1 << (bits - 1)) as f32, (1i8 << bits) - 1);
    let (_, max) = signed_abs_max(x);
    let d = max / -offset;
    let id = inverse_or_zero(d);
    (d, std::array::from_fn(|j| ((x[j] * id + (offset + 0.5)) as i8).min(top) as u8))
}

/// The levels of ggml's `_1` quantizers (`q4_1`, `q5_1`): `d = (max − min) / top`,
/// `q = min(top, ⌊(x − min)/d + ½⌋)`; returns `(d, min, levels)`.
fn min_offset_levels(x: &[f32], bits: u32) -> (f32, f32, [u8; QK]) {
    let top = (1i8 << bits) - 1;
    let (min, max) = min_max(x);
    let d = (max - min) / top as f32;
    let id = inverse_or_zero(d);
    (d, min, std::array::from_fn(|j| (((x[j] - min) * id + 0.5) as i8).min(top) as u8))
}

impl QuantBlock for BlockQ4_0 {
    fn quantize(x: &[f32]) -> Self {
        let (d, q) = zero_point_levels(x, 4);
        BlockQ4_0 { d: h(d), qs: pack_nibbles(&q) }
    }
}

impl QuantBlock for BlockQ4_1 {
    fn quantize(x: &[f32]) -> Self {
        let (d, min, q) = min_offset_levels(x, 4);
        BlockQ4_1 { d: h(d), m: h(min), qs: pack_nibbles(&q) }
    }
}

/// The `qs` and `qh` of 32 five-bit levels.
fn pack_five_bits(q: &[u8; QK]) -> ([u8; QK / 2], [u8; 4]) {
    let qh = q.iter().enumerate().fold(0u32, |acc, (j, &l)| acc | (((l as u32 >> 4) & 1) << j));
    (pack_nibbles(q), qh.to_le_bytes())
}

impl QuantBlock for BlockQ5_0 {
    fn quantize(x: &[f32]) -> Self {
        let (d, q) = zero_point_levels(x, 5);
        let (qs, qh) = pack_five_bits(&q);
        BlockQ5_0 { d: h(d), qh, qs }
    }
}

impl QuantBlock for BlockQ5_1 {
    fn quantize(x: &[f32]) -> Self {
        let (d, min, q) = min_offset_levels(x, 5);
        let (qs, qh) = pack_five_bits(&q);
        BlockQ5_1 { d: h(d), m: h(min), qh, qs }
    }
}

impl QuantBlock for BlockQ8_0 {
    fn quantize(x: &[f32]) -> Self {
        let q8 = quantize_q8_1_block(x);
        BlockQ8_0 { d: q8.d, qs: q8.qs }
    }
}

/// `qs` of 256 two-bit levels (q2_K and q3_K's low bits).
fn pack_two_bits(levels: &[u8; QK_K]) -> [u8; QK_K / 4] {
    std::array::from_fn(|i| {
        let (half, l) = (i / 32, i % 32);
        let at = |g: usize| levels[128 * half + 32 * g + l] & 3;
        at(0) | (at(1) << 2) | (at(2) << 4) | (at(3) << 6)
    })
}

impl QuantBlock for BlockQ2K {
    fn quantize(x: &[f32]) -> Self {
        const Q4SCALE: f32 = 15.0;
        let mut levels = [0u8; QK_K];
        let (mut scales, mut mins) = ([0f32; QK_K / 16], [0f32; QK_K / 16]);
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            let weights: [f32; 16] = std::array::from_fn(|l| xs[l].abs());
            (scales[j], mins[j]) = make_qkx2_quants(3, xs, &weights, &mut levels[16 * j..16 * j + 16], -0.5, 0.1, 15, true);
            max_scale = max_scale.max(scales[j]);
            max_min = max_min.max(mins[j]);
        }
        let mut packed = [0u8; QK_K / 16];
        let d = if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for j in 0..QK_K / 16 {
                packed[j] = nearest_int(iscale * scales[j]) as u8;
            }
            max_scale / Q4SCALE
        } else {
            0.0
        };
        let dmin = if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for j in 0..QK_K / 16 {
                packed[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
            }
            max_min / Q4SCALE
        } else {
            0.0
        };
        let (d, dmin) = (h(d), h(dmin));
        for j in 0..QK_K / 16 {
            let dl = d.to_f32() * (packed[j] & 0xF) as f32;
            if dl == 0.0 {
                continue;
            }
            let ml = dmin.to_f32() * (packed[j] >> 4) as f32;
            for ii in 0..16 {
                levels[16 * j + ii] = nearest_int((x[16 * j + ii] + ml) / dl).clamp(0, 3) as u8;
            }
        }
        BlockQ2K { scales: packed, qs: pack_two_bits(&levels), d, dmin }
    }
}

impl QuantBlock for BlockQ3K {
    fn quantize(x: &[f32]) -> Self {
        let mut levels = [0i8; QK_K];
        let scales: [f32; QK_K / 16] = std::array::from_fn(|j| make_q3_quants(4, &x[16 * j..16 * j + 16], &mut levels[16 * j..16 * j + 16]));
        let (_, max_scale) = signed_abs_max(&scales);
        let mut packed = [0u8; 12];
        let d = if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                let l = ((nearest_int(iscale * scales[j]) as i8).clamp(-32, 31) + 32) as u8;
                if j < 8 {
                    packed[j] = l & 0xF;
                } else {
                    packed[j - 8] |= (l & 0xF) << 4;
                }
                packed[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
            }
            h(1.0 / iscale)
        } else {
            h(0.0)
        };
        for j in 0..QK_K / 16 {
            let dl = d.to_f32() * scale_q3k(j, &packed) as f32;
            if dl == 0.0 {
                continue;
            }
            for ii in 0..16 {
                levels[16 * j + ii] = (nearest_int(x[16 * j + ii] / dl).clamp(-4, 3) + 4) as i8;
            }
        }
        let mut hmask = [0u8; QK_K / 8];
        let mut low = [0u8; QK_K];
        for (e, &l) in levels.iter().enumerate() {
            let l = l as u8;
            if l > 3 {
                set_bit_plane(&mut hmask, e);
            }
            low[e] = if l > 3 { l - 4 } else { l };
        }
        BlockQ3K { hmask, qs: pack_two_bits(&low), scales: packed, d }
    }
}

/// The scales of a `q4_K`/`q5_K` super-block, packed (`scale_min_k4`'s inverse).
fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

/// The reference quantization of a `q4_K` (`nmax` 15) or `q5_K` (31) super-block: levels,
/// packed scales, `d`, `dmin`.
fn quantize_k4(x: &[f32], nmax: i32, rmin: f32, nstep: i32) -> ([u8; QK_K], [u8; 12], f16, f16) {
    let mut levels = [0u8; QK_K];
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let sum_x2 = xs.iter().fold(0f32, |s, &v| s + v * v);
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|l| av_x + xs[l].abs());
        (scales[j], mins[j]) = make_qkx2_quants(nmax, xs, &weights, &mut levels[32 * j..32 * j + 32], rmin, 0.1, nstep, false);
        max_scale = max_scale.max(scales[j]);
        max_min = max_min.max(mins[j]);
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let ls: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    let packed = pack_scale_min_k4(&ls, &lm);
    let (d, dmin) = (h(max_scale / 63.0), h(max_min / 63.0));
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dl = d.to_f32() * sc as f32;
        if dl == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for ii in 0..32 {
            levels[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dl).clamp(0, nmax) as u8;
        }
    }
    (levels, packed, d, dmin)
}

fn pack_k4_nibbles(levels: &[u8; QK_K]) -> [u8; QK_K / 2] {
    std::array::from_fn(|i| {
        let (pair, l) = (i / 32, i % 32);
        (levels[64 * pair + l] & 0xF) | ((levels[64 * pair + 32 + l] & 0xF) << 4)
    })
}

impl QuantBlock for BlockQ4K {
    fn quantize(x: &[f32]) -> Self {
        let (levels, scales, d, dmin) = quantize_k4(x, 15, -1.0, 20);
        BlockQ4K { d, dmin, scales, qs: pack_k4_nibbles(&levels) }
    }
}

impl QuantBlock for BlockQ5K {
    fn quantize(x: &[f32]) -> Self {
        let (levels, scales, d, dmin) = quantize_k4(x, 31, -0.5, 15);
        let mut qh = [0u8; QK_K / 8];
        for (e, &l) in levels.iter().enumerate() {
            if l > 15 {
                set_bit_plane(&mut qh, e);
            }
        }
        BlockQ5K { d, dmin, scales, qh, qs: pack_k4_nibbles(&levels) }
    }
}

impl QuantBlock for BlockQ6K {
    fn quantize(x: &[f32]) -> Self {
        let mut levels = [0i8; QK_K];
        let scales: [f32; QK_K / 16] = std::array::from_fn(|ib| make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut levels[16 * ib..16 * ib + 16]));
        let (max_abs_scale, max_scale) = signed_abs_max(&scales);
        if max_abs_scale < GROUP_MAX_EPS {
            return bytemuck::Zeroable::zeroed();
        }
        let iscale = -128.0 / max_scale;
        let d = h(1.0 / iscale);
        let packed: [i8; QK_K / 16] = std::array::from_fn(|ib| nearest_int(iscale * scales[ib]).min(127) as i8);
        for j in 0..QK_K / 16 {
            let dl = d.to_f32() * packed[j] as f32;
            if dl == 0.0 {
                continue;
            }
            for ii in 0..16 {
                levels[16 * j + ii] = (nearest_int(x[16 * j + ii] / dl).clamp(-32, 31) + 32) as i8;
            }
        }
        let (mut ql, mut qh) = ([0u8; QK_K / 2], [0u8; QK_K / 4]);
        for (e, &l) in levels.iter().enumerate() {
            let l = l as u8;
            let (n, g, i) = (e / 128, (e % 128) / 32, e % 32);
            ql[64 * n + 32 * (g % 2) + i] |= (l & 0xF) << (4 * (g / 2));
            qh[32 * n + i] |= (l >> 4) << (2 * g);
        }
        BlockQ6K { ql, qh, scales: packed, d }
    }
}

impl QuantBlock for BlockIq4Nl {
    fn quantize(x: &[f32]) -> Self {
        let q = quantize_iq4(x, -1);
        let levels: [u8; QK] = std::array::from_fn(|j| q.levels[j]);
        BlockIq4Nl { d: h(q.d), qs: pack_nibbles(&levels) }
    }
}

impl QuantBlock for BlockIq4Xs {
    fn quantize(x: &[f32]) -> Self {
        let q = quantize_iq4(x, 7);
        let (mut scales_l, mut scales_h) = ([0u8; QK_K / 64], 0u16);
        for (ib, &l) in q.sub_levels.iter().enumerate() {
            let l = (l + 32) as u8;
            scales_l[ib / 2] |= (l & 0xF) << (4 * (ib % 2));
            scales_h |= ((l >> 4) as u16) << (2 * ib);
        }
        let qs: [u8; QK_K / 2] = std::array::from_fn(|i| {
            let (sub, j) = (i / 16, i % 16);
            q.levels[32 * sub + j] | (q.levels[32 * sub + 16 + j] << 4)
        });
        BlockIq4Xs { d: h(q.d), scales_h, scales_l, qs }
    }
}

impl QuantBlock for BlockMxfp4 {
    fn quantize(x: &[f32]) -> Self {
        let (amax, _) = signed_abs_max(x);
        // ggml: floor(log2(amax)) − 2 + 127 through `log2f`; an exponent below the E8M0 range
        // (|x| < 2^-125) saturates to 0 here (undefined in C).
        let e = if amax > 0.0 { (amax.log2().floor() - 2.0 + 127.0) as u8 } else { 0 };
        let d = e8m0_to_f32_half(e);
        let best = |v: f32| -> u8 {
            let mut best = (0u8, (KVALUES_MXFP4[0] as f32 * d - v).abs());
            for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
                let err = (k as f32 * d - v).abs();
                if err < best.1 {
                    best = (i as u8, err);
                }
            }
            best.0
        };
        let q: [u8; QK] = std::array::from_fn(|j| best(x[j]));
        BlockMxfp4 { e, qs: pack_nibbles(&q) }
    }
}
