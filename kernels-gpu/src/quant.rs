//! # GGUF block formats, as ggml lays them out (one definition for host and device)
//!
//! A quantized row is a sequence of *blocks*; each block stores `BLOCK_ELEMENTS` weights as
//! small integers plus the scale(s) that map them back to floats. The layouts below are
//! ggml's (`ggml-common.h`) byte for byte: the same fields in the same order, `#[repr(C)]`
//! with 2-byte alignment where a block holds an f16 and none where it does not, so a GGUF
//! file's tensor data *is* a slice of these structs. The sizes are checked at compile time
//! at the bottom of this file.
//!
//! Two families:
//! - **32-element blocks** (`q4_0` … `q8_0`, `iq4_nl`, `mxfp4`): one scale `d` (and for the
//!   `_1` formats a minimum `m`): `x = d·q` or `x = d·q + m`. `q5_*` keep the fifth bit of
//!   each weight in a 32-bit mask `qh`. `iq4_nl` maps its 4-bit codes through a non-linear
//!   table ([`KVALUES_IQ4NL`]); `mxfp4` stores FP4 (E2M1) codes ([`KVALUES_MXFP4`], doubled)
//!   and a shared power-of-two exponent `e` (E8M0).
//! - **256-element super-blocks** (the K-quants `q2_K` … `q6_K`, and `iq4_xs`): 8 or 16
//!   sub-blocks, each with its own small integer scale (and minimum), themselves scaled by the
//!   super-block's f16 `d` (and `dmin`). The sub-block scales are packed in a few bits each
//!   (6 bits in `q4_K`/`q5_K`/`iq4_xs`, 4+4 in `q2_K`, 6 across two arrays in `q3_K`, a
//!   signed byte in `q6_K`).
//!
//! `q8_1` is not a weight format: it is what activations are quantized to before the integer
//! products (`d`, and `s = d · Σ q` so that the `_1` formats' minimum can be applied to a
//! whole block at once).
//!
//! On the host the scales are `half::f16` and every block is `bytemuck::Pod`; on the device
//! the same field is its bits ([`Half`]), converted with `cvt.f32.f16`.

/// Elements of a 32-element block.
pub const QK: usize = 32;
/// Elements of a super-block (K-quants, `iq4_xs`).
pub const QK_K: usize = 256;

/// The f16 scale type of the blocks: `half::f16` on the host.
#[cfg(not(target_arch = "nvptx64"))]
pub type Half = half::f16;

/// The f16 scale type of the blocks: its bits on the device (same size and alignment as
/// `half::f16`, which is `repr(transparent)` over `u16`).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Half(pub u16);

/// Defines a block struct: `#[repr(C)]`, `Copy`, and on the host `bytemuck::Pod`.
macro_rules! block {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(not(target_arch = "nvptx64"), derive(bytemuck::Pod, bytemuck::Zeroable))]
        #[repr(C)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }
    };
}

block!(
    /// `q4_0`: `x = d · (q − 8)`, `q` 4 bits; element `j` in the low nibble of `qs[j]`,
    /// element `j + 16` in the high nibble.
    BlockQ4_0 { d: Half, qs: [u8; QK / 2] }
);
block!(
    /// `q4_1`: `x = d · q + m`, `q` 4 bits (nibbles as `q4_0`).
    BlockQ4_1 { d: Half, m: Half, qs: [u8; QK / 2] }
);
block!(
    /// `q5_0`: `x = d · (q − 16)`, `q` 5 bits: nibbles as `q4_0`, bit 4 of element `j` in bit
    /// `j` of the little-endian `qh`.
    BlockQ5_0 { d: Half, qh: [u8; 4], qs: [u8; QK / 2] }
);
block!(
    /// `q5_1`: `x = d · q + m`, `q` 5 bits (packed as `q5_0`).
    BlockQ5_1 { d: Half, m: Half, qh: [u8; 4], qs: [u8; QK / 2] }
);
block!(
    /// `q8_0`: `x = d · q`, `q` a signed byte.
    BlockQ8_0 { d: Half, qs: [i8; QK] }
);
block!(
    /// `q8_1` (activations): `x = d · q`, and `s = d · Σ q`.
    BlockQ8_1 { d: Half, s: Half, qs: [i8; QK] }
);
block!(
    /// `q2_K`: 16 sub-blocks of 16; `x = d · (sc & 15) · q − dmin · (sc >> 4)`, `q` 2 bits.
    /// Element `128·h + 32·s + l` (half `h`, shift `s`) is bits `2s..2s+2` of `qs[32·h + l]`.
    BlockQ2K { scales: [u8; QK_K / 16], qs: [u8; QK_K / 4], d: Half, dmin: Half }
);
block!(
    /// `q3_K`: 16 sub-blocks of 16; `x = d · (sc − 32) · (q − 4·!hbit)`, `q` 2 low bits (as
    /// `q2_K`) and a high bit in `hmask` (element `32·b + l`: bit `b` of `hmask[l]`); the
    /// 6-bit scales are the low nibbles of `scales[0..8]`, then their high nibbles, with the
    /// top two bits in `scales[8..12]`.
    BlockQ3K { hmask: [u8; QK_K / 8], qs: [u8; QK_K / 4], scales: [u8; 12], d: Half }
);
block!(
    /// `q4_K`: 8 sub-blocks of 32; `x = d · sc · q − dmin · m`, `q` 4 bits (element
    /// `64·p + l` in the low nibble of `qs[32·p + l]`, `64·p + 32 + l` in the high one), 6-bit
    /// `sc` and `m` packed in `scales` (see `scale_min_k4`).
    BlockQ4K { d: Half, dmin: Half, scales: [u8; 12], qs: [u8; QK_K / 2] }
);
block!(
    /// `q5_K`: as `q4_K`, plus a fifth bit per weight in `qh` (element `64·p + l`: bit `2p`
    /// of `qh[l]`; `64·p + 32 + l`: bit `2p + 1`).
    BlockQ5K { d: Half, dmin: Half, scales: [u8; 12], qh: [u8; QK_K / 8], qs: [u8; QK_K / 2] }
);
block!(
    /// `q6_K`: 16 sub-blocks of 16; `x = d · sc · (q − 32)`, `q` 6 bits (4 in `ql`, 2 in
    /// `qh`), `sc` a signed byte.
    BlockQ6K { ql: [u8; QK_K / 2], qh: [u8; QK_K / 4], scales: [i8; QK_K / 16], d: Half }
);
block!(
    /// `iq4_nl`: `x = d · KVALUES_IQ4NL[q]`, `q` 4 bits (nibbles as `q4_0`).
    BlockIq4Nl { d: Half, qs: [u8; QK / 2] }
);
block!(
    /// `iq4_xs`: 8 sub-blocks of 32; `x = d · (sc − 32) · KVALUES_IQ4NL[q]`, the 6-bit `sc` of
    /// sub-block `b` from nibble `b % 2` of `scales_l[b / 2]` and bits `2b..2b+2` of
    /// `scales_h`; within a sub-block the nibbles are as `q4_0`'s.
    BlockIq4Xs { d: Half, scales_h: u16, scales_l: [u8; QK_K / 64], qs: [u8; QK_K / 2] }
);
block!(
    /// `mxfp4` (OCP microscaling FP4): `x = 2^(e − 127) · E2M1[q]`, computed as
    /// `e8m0_half(e) · KVALUES_MXFP4[q]` (the table holds twice the E2M1 values and the scale
    /// half the power of two); nibbles as `q4_0`.
    BlockMxfp4 { e: u8, qs: [u8; QK / 2] }
);

/// The 16 levels of `iq4_nl` and `iq4_xs` (ggml's `kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// Twice the FP4 (E2M1) values of codes 0..16 (ggml's `kvalues_mxfp4`).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half of the E8M0 scale `2^(e − 127)`, as an f32 (ggml's `ggml_e8m0_to_fp32_half`): exact
/// for every `e`, subnormal for `e < 2`.
pub const fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { ((e as u32) - 1) << 23 };
    f32::from_bits(bits)
}

/// The 6-bit scale and minimum of sub-block `j` (0..8) of a `q4_K` / `q5_K` block (ggml's
/// `get_scale_min_k4`): sub-blocks 0..4 in the low 6 bits of `scales[j]` and
/// `scales[j + 4]`; 4..8 in the nibbles of `scales[j + 4]` with their top two bits in the
/// high bits of `scales[j − 4]` and `scales[j]`.
pub const fn scale_min_k4(j: usize, scales: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (scales[j] & 63, scales[j + 4] & 63)
    } else {
        ((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4))
    }
}

/// The signed 6-bit scale of sub-block `j` (0..16) of a `q3_K` block, minus its offset 32.
pub const fn scale_q3k(j: usize, scales: &[u8; 12]) -> i8 {
    let low = if j < 8 { scales[j] & 0xF } else { scales[j - 8] >> 4 };
    let high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    (low | (high << 4)) as i8 - 32
}

/// The 6-bit scale of sub-block `b` (0..8) of an `iq4_xs` block, minus its offset 32.
pub const fn scale_iq4xs(b: usize, scales_h: u16, scales_l: &[u8; 4]) -> i8 {
    let low = (scales_l[b / 2] >> (4 * (b % 2))) & 0xF;
    let high = ((scales_h >> (2 * b)) & 3) as u8;
    (low | (high << 4)) as i8 - 32
}

/// An f16 scale as f32 (exact): `half` on the host, `cvt.f32.f16` on the device.
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
pub fn half_to_f32(h: Half) -> f32 {
    h.to_f32()
}

/// An f16 scale as f32 (exact): `half` on the host, `cvt.f32.f16` on the device.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub fn half_to_f32(h: Half) -> f32 {
    crate::device::ptx::f16_to_f32(h.0 as u32)
}

// ---------------------------------------------------------------------------------------------
// Decoding: every format as 32-weight chunks of small integers with a scale and an offset
// ---------------------------------------------------------------------------------------------

/// 32 consecutive weights of a block, the way integer products see them: weight `j` is
/// `scale[j / 16] · v_j (+ offset[j / 16])`, `v_j` the signed byte `j` of `values` (4 to a
/// word, little-endian, ready for `dp4a`/`mma` with a q8_1 activation block). The two halves
/// have their own scale because q2_K, q3_K and q6_K scale every 16 weights; in the other
/// formats both halves are equal. With the activations' `q8_1` block `(dx, qx, sx)`, the chunk's
/// dot product is `Σ_h scale[h]·dx·Σ v·qx + offset[h]·dx·Σ qx` over the halves.
///
/// The scales are computed exactly as ggml's `dequantize_row_*` computes them, so that
/// `scale · v + offset` (in that order, f32, not fused) is ggml's dequantized weight bit for
/// bit (the host's `quant::dequantize` is built on this).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chunk {
    pub values: [u32; 8],
    pub scale: [f32; 2],
    pub offset: [f32; 2],
}

impl Chunk {
    /// The signed integer of weight `j`.
    #[inline(always)]
    pub const fn value(&self, j: usize) -> i8 {
        (self.values[j / 4] >> (8 * (j % 4))) as u8 as i8
    }
}

/// A block format's decoding (host and device).
pub trait BlockFormat: Copy {
    const FORMAT: GgufFormat;
    /// Whether the weights carry an offset (the `_1` formats' `m`, the K-quants' minimums).
    const HAS_OFFSET: bool;
    /// Whether the two 16-weight halves of a chunk may have different scales and offsets
    /// (q2_K, q3_K, q6_K: a scale per 16 weights). When false, `scale[0] == scale[1]` and
    /// `offset[0] == offset[1]`, and a tensor-core tile takes the chunk in one k32 product.
    const HALF_SCALES: bool = Self::FORMAT.scales_per_16_weights();
    /// The bias the format stores its values with (q4_0: 8, q5_0: 16, q3_K: 4, q6_K: 32; 0
    /// for the others): [`chunk`](Self::chunk)'s values are the stored ones less this, per
    /// byte ([`without_bias`]). The direct path keeps the stored values and takes
    /// `bias · Σ qx` off each half's integer dot instead ([`chunk_dot`]: the same integer, so
    /// the same bits), which saves the two instructions per word that the subtraction costs
    /// for every feature: `Σ qx` is the slot's, one for all the features a lane decodes.
    const VALUE_BIAS: u32 = 0;
    /// Chunk `c` (`0 .. block_elements / 32`) of the block.
    fn chunk(&self, c: usize) -> Chunk;

    /// [`chunk`](Self::chunk) of the block at `block`, read from memory with the widest loads
    /// the format's layout allows (the GPU kernels' decoder; the same chunk, bit for bit, as a
    /// CPU test checks). The decoders' byte reads become one load instruction per byte, and on
    /// the GPU each is a separate L1 request for a warp whose lanes sit 18-210 bytes apart:
    /// - a block of a 32-weight format is one chunk, decoded from registers: q4_0, q5_0 and q8_0
    ///   (`4N + 2` bytes) read as their scale and `N` words ([`scale_and_words`]: 6-10 loads
    ///   instead of 9-17), the others copied whole in 16-bit loads (their alignment; iq4_nl
    ///   read so spilled 8 bytes in sm_90's 64-row tile);
    /// - q4_K and q5_K read their chunk's bytes as 32-bit words (12 and 20 loads instead of 37
    ///   and 69), their blocks starting at multiples of 4 ([`GgufFormat::block_alignment`]);
    /// - the other K-quants and mxfp4 decode in place (a chunk is one lane-dependent part of
    ///   its super-block, and a copy indexed by it would live in local memory), q2_K, q3_K
    ///   and q6_K reading their fields' words by [`field_words`] (18 loads instead of 32 for
    ///   a q6_K chunk).
    ///
    /// # Safety
    /// `block` points at a readable block, aligned to the format's `block_alignment`.
    #[inline(always)]
    unsafe fn chunk_at(block: *const Self, c: usize) -> Chunk {
        use core::mem::{align_of, size_of, MaybeUninit};
        if Self::FORMAT.block_elements() == QK && align_of::<Self>() == 2 && size_of::<Self>() % 2 == 0 {
            let mut copy = MaybeUninit::<Self>::uninit();
            let (src, dst) = (block as *const u16, copy.as_mut_ptr() as *mut u16);
            for i in 0..size_of::<Self>() / 2 {
                *dst.add(i) = *src.add(i);
            }
            // Every byte of `copy` was written, and a block is plain data: any bytes are a
            // valid block.
            copy.assume_init().chunk(0)
        } else {
            (*block).chunk(c)
        }
    }

    /// [`chunk`](Self::chunk) with the values as stored, [`VALUE_BIAS`](Self::VALUE_BIAS)
    /// more per byte: for an unbiased format, `chunk` (every biased one overrides it, and
    /// takes `chunk` as [`without_bias`] of it).
    #[inline(always)]
    fn stored_chunk(&self, c: usize) -> Chunk {
        self.chunk(c)
    }

    /// [`chunk_at`](Self::chunk_at) with the values as stored: for an unbiased format,
    /// `chunk_at`; for a biased one, [`stored_chunk`](Self::stored_chunk) in place (q3_K and
    /// q6_K decode so), unless it reads wider (q4_0 and q5_0 override it).
    ///
    /// # Safety
    /// As [`chunk_at`](Self::chunk_at).
    #[inline(always)]
    unsafe fn stored_chunk_at(block: *const Self, c: usize) -> Chunk {
        if Self::VALUE_BIAS == 0 {
            Self::chunk_at(block, c)
        } else {
            (*block).stored_chunk(c)
        }
    }
}

/// `chunk` with `B`'s [`VALUE_BIAS`](BlockFormat::VALUE_BIAS) taken off every value.
#[inline(always)]
pub fn without_bias<B: BlockFormat>(chunk: Chunk) -> Chunk {
    Chunk { values: chunk.values.map(|v| minus_per_byte(v, B::VALUE_BIAS)), ..chunk }
}

/// The `T` (a `u16` or `u32`) at `at`, a field of a block read in place: an aligned load on
/// the device (a block starts at a multiple of its format's `block_alignment` there), an
/// unaligned read on the host (a `Vec` of blocks is only 2-aligned).
///
/// Safety: `at .. at + size_of::<T>()` is readable (and aligned for `T` on the device).
#[inline(always)]
unsafe fn block_read<T: Copy>(at: *const u8) -> T {
    #[cfg(target_arch = "nvptx64")]
    {
        *(at as *const T)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        (at as *const T).read_unaligned()
    }
}

/// Word `i` (the 4 bytes at offset `4i`, little-endian) of the block at `block`, by
/// [`block_read`] (the formats that read words so start at multiples of 4).
///
/// Safety: `block .. block + 4i + 4` is readable (and 4-aligned on the device).
#[inline(always)]
unsafe fn block_word(block: *const u8, i: usize) -> u32 {
    block_read::<u32>(block.add(4 * i))
}

/// The 16 bits at byte `at` of the block at `block` (little-endian), by [`block_read`].
///
/// Safety: `block .. block + at + 2` is readable (and 2-aligned on the device).
#[inline(always)]
unsafe fn block_half(block: *const u8, at: usize) -> u32 {
    block_read::<u16>(block.add(at)) as u32
}

/// The low 32 bits of `hi:lo >> shift` (`shift ≤ 32`): one `shf.r.clamp` on the device.
#[inline(always)]
fn funnel_shift_right(lo: u32, hi: u32, shift: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::ptx::funnel_shift_right(lo, hi, shift)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        ((hi as u64) << 32 | lo as u64).wrapping_shr(shift) as u32
    }
}

/// `N` little-endian words of a block, from its 2-aligned byte `field` on, in `N` aligned
/// 32-bit loads and one 16-bit load, where reading 16 bits at a time took `2N` loads.
///
/// The blocks of q2_K, q3_K, q6_K, q4_0, q5_0 and q8_0 are only 2-aligned, and their
/// sizes are 2 mod 4, so neighbouring blocks alternate between a field that starts on a word
/// boundary and one that starts halfway into a word. A warp's lanes meet both, and both take
/// the same instructions: only where the aligned loads start and the shift depend on the
/// address.
/// - On a word boundary, the aligned loads are the words (a shift of 0, or 32 when
///   `SLACK_AFTER`: `funnel_shift_right` gives its `hi` operand).
/// - Halfway into a word, each word is the upper half of one aligned word and the lower half
///   of the next: a funnel shift by 16. The aligned loads then reach 2 bytes past one end of
///   the field, which must lie inside the block. With `SLACK_AFTER` they start 2 bytes into
///   the field and end 2 bytes past it, and the 16-bit load gives the field's first 2 bytes.
///   Otherwise they start 2 bytes before the field (a field at the block's end), and the 16-bit
///   load gives its last 2 bytes.
///
/// Safety: `field` is 2-aligned; `field .. field + 4N` is readable, and so are the 2 bytes
/// after it (`SLACK_AFTER`) or before it (otherwise).
#[inline(always)]
unsafe fn field_words<const N: usize, const SLACK_AFTER: bool>(field: *const u8) -> [u32; N] {
    // 0 on a word boundary, 2 halfway into a word.
    let into_word = field as usize & 2;
    if SLACK_AFTER {
        let loaded: [u32; N] = core::array::from_fn(|i| block_word(field.add(into_word), i));
        let head = block_half(field, 0) << 16;
        let shift = 32 - 8 * into_word as u32;
        core::array::from_fn(|i| funnel_shift_right(if i == 0 { head } else { loaded[i - 1] }, loaded[i], shift))
    } else {
        let loaded: [u32; N] = core::array::from_fn(|i| block_word(field.sub(into_word), i));
        let tail = block_half(field, 4 * N - 2);
        let shift = 8 * into_word as u32;
        core::array::from_fn(|i| funnel_shift_right(loaded[i], if i + 1 < N { loaded[i + 1] } else { tail }, shift))
    }
}

/// The f16 scale that opens a 32-weight block of `4N + 2` bytes (q4_0, q5_0, q8_0) and
/// the `N` words after it ([`field_words`], the scale before them as the slack): `N + 2` loads
/// instead of a whole-block copy's `2N + 1` (q8_0: 10 instead of 17).
///
/// Safety: `block` points at a readable, 2-aligned block of `4N + 2` bytes.
#[inline(always)]
unsafe fn scale_and_words<const N: usize>(block: *const u8) -> (u32, [u32; N]) {
    (block_half(block, 0), field_words::<N, false>(block.add(2)))
}

/// The f16 with bits `bits`, as f32 (exact).
#[inline(always)]
fn f16_bits_to_f32(bits: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::ptx::f16_to_f32(bits & 0xFFFF)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        half::f16::from_bits(bits as u16).to_f32()
    }
}

/// Sub-block `c` of the q4_K/q5_K super-block at `block` ([`k4_chunk`]) read in words: `d` and
/// `dmin` (word 0), the 12 packed scale bytes (words 1-3), the 32 bytes of `qs` whose low
/// (`c` even) or high (`c` odd) nibbles are the chunk (8 words from word `qs_word`), and for
/// q5_K the 32 bytes of `qh` whose bit `c` is each level's fifth bit (8 words from `qh_word`).
/// Four levels come out of each word at once.
///
/// Safety: as [`BlockFormat::chunk_at`].
#[inline(always)]
unsafe fn k4_chunk_words(block: *const u8, c: usize, qs_word: usize, qh_word: Option<usize>) -> Chunk {
    let dm = block_word(block, 0);
    let (d, dmin) = (f16_bits_to_f32(dm), f16_bits_to_f32(dm >> 16));
    // Byte `b` of the scales is byte `b % 4` of word `1 + b / 4`; `scale_min_k4` on words.
    let byte = |w: u32, i: usize| (w >> (8 * (i % 4))) & 0xFF;
    let (s0, s1, s2) = (block_word(block, 1), block_word(block, 2), block_word(block, 3));
    let (sc, m) = if c < 4 {
        (byte(s0, c) & 63, byte(s1, c) & 63)
    } else {
        ((byte(s2, c) & 0xF) | ((byte(s0, c) >> 6) << 4), (byte(s2, c) >> 4) | ((byte(s1, c) >> 6) << 4))
    };
    let (scale, offset) = (d * sc as f32, -(dmin * m as f32));
    let pair = c / 2;
    let values = core::array::from_fn(|w| {
        let low = (block_word(block, qs_word + 8 * pair + w) >> (4 * (c % 2))) & LOW_NIBBLES;
        match qh_word {
            Some(qh) => low | (((block_word(block, qh + w) >> c) & 0x0101_0101) << 4),
            None => low,
        }
    });
    Chunk { values, scale: [scale, scale], offset: [offset, offset] }
}

/// `c` plus the dot product of the four signed bytes of `a` and of `b`: `dp4a.s32.s32` on the
/// device, the same integer arithmetic on the host.
#[inline(always)]
pub fn dp4a(a: u32, b: u32, c: i32) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::ptx::dp4a(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
        (0..4).fold(c, |acc, i| acc + a[i] as i8 as i32 * b[i] as i8 as i32)
    }
}

/// The 32 signed bytes of a q8_1 activation block, 4 to a word (as [`Chunk::values`]).
#[inline(always)]
pub fn q8_words(block: &BlockQ8_1) -> [u32; 8] {
    signed_byte_words(&block.qs)
}

/// 32 signed bytes, 4 to a word (little-endian).
#[inline(always)]
fn signed_byte_words(qs: &[i8; QK]) -> [u32; 8] {
    core::array::from_fn(|w| u32::from_le_bytes([qs[4 * w] as u8, qs[4 * w + 1] as u8, qs[4 * w + 2] as u8, qs[4 * w + 3] as u8]))
}

/// `Σ_j w_j · x_j` over a chunk's 32 weights and the 32 activations `x_j = dx · q_j` of a q8_1
/// block (`words` = [`q8_words`]): per half `h`, `scale[h]·dx·Σ v·q` (8 `dp4a`) plus, for a
/// format with offsets (`has_offset`: [`BlockFormat::HAS_OFFSET`], a constant at every call
/// site), `offset[h]·dx·Σ q` (the activations' sum over the half, 4 more `dp4a` against
/// ones). With the values as stored (`bias`: [`BlockFormat::VALUE_BIAS`],
/// [`BlockFormat::stored_chunk_at`]; 0 for a chunk whose bias is off), `bias · Σ q` comes off
/// each half's integer dot, which gives the same integer as the unbiased values. The integer
/// sums are exact; what rounds is the f32 scaling, as in ggml's `vec_dot_*_q8_1`.
#[inline(always)]
pub fn chunk_dot(chunk: &Chunk, bias: u32, has_offset: bool, words: &[u32; 8], dx: f32) -> f32 {
    const ONES: u32 = 0x0101_0101;
    let mut acc = 0f32;
    let mut h = 0;
    while h < 2 {
        let (mut dot, mut sum) = (0i32, 0i32);
        let mut w = 4 * h;
        while w < 4 * h + 4 {
            dot = dp4a(chunk.values[w], words[w], dot);
            if has_offset || bias != 0 {
                sum = dp4a(ONES, words[w], sum);
            }
            w += 1;
        }
        // Σ (v − bias)·qx = Σ v·qx − bias·Σ qx, exactly (small integers).
        let dot = dot - bias as i32 * sum;
        acc += chunk.scale[h] * dx * dot as f32;
        if has_offset {
            acc += chunk.offset[h] * dx * sum as f32;
        }
        h += 1;
    }
    acc
}

/// 32 signed bytes from `v(j)`, packed 4 to a word.
#[inline(always)]
fn pack_values(v: impl Fn(usize) -> i8) -> [u32; 8] {
    let mut words = [0u32; 8];
    let mut j = 0;
    while j < 32 {
        words[j / 4] |= (v(j) as u8 as u32) << (8 * (j % 4));
        j += 1;
    }
    words
}

/// Each byte's low nibble.
const LOW_NIBBLES: u32 = 0x0F0F_0F0F;

/// The word of four bytes `bytes[at .. at + 4]`, little-endian.
#[inline(always)]
fn le_word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// `v` with `k` subtracted from each of its four bytes, as signed bytes. Each byte holds
/// `0 ≤ x < 0x80 + k`, so adding `0x80 − k` cannot carry into the next byte, and flipping the
/// sign bit turns the biased `x + 0x80 − k` into `x − k` in two's complement: two instructions
/// per word instead of four subtractions and the byte packing.
#[inline(always)]
const fn minus_per_byte(v: u32, k: u32) -> u32 {
    v.wrapping_add((0x80 - k) * 0x0101_0101) ^ 0x8080_8080
}

/// Bits 0..4 of `b` moved to bit 0 of bytes 0..4: the product adds `b` shifted by 0, 7, 14 and
/// 21, four copies that do not overlap, and the mask keeps bit `i` of copy `i`.
#[inline(always)]
const fn spread_bits(b: u32) -> u32 {
    ((b & 0xF) * 0x0020_4081) & 0x0101_0101
}

/// The unsigned nibbles of a 32-weight block's `qs` (see [`nibble`]) as value words: word `w`
/// holds weights `4w .. 4w + 4`, the low nibbles of `qs` for words 0-3 and the high ones for
/// words 4-7.
#[inline(always)]
fn nibble_words(qs: &[u8; QK / 2]) -> [u32; 8] {
    nibble_words_of(core::array::from_fn(|w| le_word(qs, 4 * w)))
}

/// [`nibble_words`] of `qs` given as four little-endian words.
#[inline(always)]
fn nibble_words_of(qs: [u32; 4]) -> [u32; 8] {
    core::array::from_fn(|w| (qs[w % 4] >> (4 * (w / 4))) & LOW_NIBBLES)
}

/// [`nibble_words`] with each weight's fifth bit, bit `j` of `qh` (see [`five_bits`]).
#[inline(always)]
fn five_bit_words(qs: &[u8; QK / 2], qh: [u8; 4]) -> [u32; 8] {
    five_bit_words_of(core::array::from_fn(|w| le_word(qs, 4 * w)), u32::from_le_bytes(qh))
}

/// [`five_bit_words`] of `qs` given as four little-endian words and `qh` as one.
#[inline(always)]
fn five_bit_words_of(qs: [u32; 4], qh: u32) -> [u32; 8] {
    let nibbles = nibble_words_of(qs);
    core::array::from_fn(|w| nibbles[w] | spread_bits(qh >> (4 * w)) << 4)
}

/// One scale for both halves and no offset.
#[inline(always)]
fn scaled(values: [u32; 8], scale: f32) -> Chunk {
    Chunk { values, scale: [scale, scale], offset: [0.0, 0.0] }
}

/// The unsigned nibble `j` (0..32) of a 32-weight block: weight `j` in the low nibble of
/// `qs[j]`, weight `j + 16` in the high nibble of `qs[j]`.
#[inline(always)]
pub const fn nibble(qs: &[u8; QK / 2], j: usize) -> u8 {
    if j < QK / 2 {
        qs[j] & 0xF
    } else {
        qs[j - QK / 2] >> 4
    }
}

/// The 5-bit level `j` of a `q5_0`/`q5_1` block: a nibble, and bit `j` of `qh`.
#[inline(always)]
pub const fn five_bits(qs: &[u8; QK / 2], qh: [u8; 4], j: usize) -> u8 {
    nibble(qs, j) | ((((u32::from_le_bytes(qh) >> j) & 1) as u8) << 4)
}

/// The 2-bit level of weight `e` of a q2_K/q3_K super-block: bits `2g..2g+2` of
/// `qs[32·half + l]` for `e = 128·half + 32·g + l`.
#[inline(always)]
pub const fn two_bits(qs: &[u8; QK_K / 4], e: usize) -> u8 {
    let (half, group, l) = (e / 128, (e % 128) / 32, e % 32);
    (qs[32 * half + l] >> (2 * group)) & 3
}

/// Bit `e` of a 256-bit mask stored as bit planes, as q3_K's `hmask` and q5_K's `qh` store
/// their extra bit: weight `e` is bit `e / 32` of byte `e % 32`.
#[inline(always)]
pub const fn bit_plane(mask: &[u8; QK_K / 8], e: usize) -> bool {
    mask[e % 32] & (1 << (e / 32)) != 0
}

/// Sets bit `e` of a bit-plane mask (see [`bit_plane`]).
#[inline(always)]
pub fn set_bit_plane(mask: &mut [u8; QK_K / 8], e: usize) {
    mask[e % 32] |= 1 << (e / 32);
}

/// The 4 low bits of weight `e` of a q4_K/q5_K super-block: `qs[32·p + l]`, low nibble for
/// `e = 64·p + l`, high nibble for `e = 64·p + 32 + l`.
#[inline(always)]
pub const fn k4_nibble(qs: &[u8; QK_K / 2], e: usize) -> u8 {
    let (pair, l) = (e / 64, e % 32);
    if (e % 64) < 32 {
        qs[32 * pair + l] & 0xF
    } else {
        qs[32 * pair + l] >> 4
    }
}

/// The 6-bit level of weight `e` of a q6_K super-block (`e = 128·n + 32·g + l`): 4 low bits in
/// nibble `g / 2` of `ql[64·n + 32·(g % 2) + l]`, 2 high bits in bits `2g..2g+2` of
/// `qh[32·n + l]`.
#[inline(always)]
pub const fn six_bits(ql: &[u8; QK_K / 2], qh: &[u8; QK_K / 4], e: usize) -> u8 {
    let (n, g, l) = (e / 128, (e % 128) / 32, e % 32);
    let low = (ql[64 * n + 32 * (g % 2) + l] >> (4 * (g / 2))) & 0xF;
    let high = (qh[32 * n + l] >> (2 * g)) & 3;
    low | (high << 4)
}

/// The 2-bit levels of sub-blocks `2c, 2c + 1` of a q2_K/q3_K super-block as value words
/// ([`two_bits`] of weights `32c ..`: bits `2g..2g+2` of the 32 bytes `qs[32·half ..]`, for
/// `c = 4·half + g`), read by [`field_words`] from the block at `block`, whose `qs` starts at
/// byte `qs_at`.
///
/// Safety: `block` points at a readable, 2-aligned q2_K or q3_K block, `qs_at` is its `qs`
/// offset (even, with more of the block after `qs`: the scales).
#[inline(always)]
unsafe fn two_bit_words(block: *const u8, qs_at: usize, c: usize) -> [u32; 8] {
    let (half, group) = (c / 4, c % 4);
    field_words::<8, true>(block.add(qs_at + 32 * half)).map(|w| (w >> (2 * group)) & 0x0303_0303)
}

/// The 6-bit values as stored ([`six_bits`], 32 more than the levels) of sub-blocks
/// `2c, 2c + 1` of a q6_K super-block as value words: for `c = 4n + g`, the 32 bytes `ql[64n + 32·(g % 2) ..]` give 4 bits each
/// (nibble `g / 2`), the 32 bytes `qh[32n ..]` 2 more (bits `2g..2g+2`), read by
/// [`field_words`].
#[inline(always)]
fn six_bit_words(block: &BlockQ6K, c: usize) -> [u32; 8] {
    let (n, g) = (c / 4, c % 4);
    let at = block as *const BlockQ6K as *const u8;
    // SAFETY: `at` is the 2-aligned block; `ql` (bytes 0-127) is followed by `qh`
    // (128-191), and `qh` by the scales, so 2 bytes past either field's 32 bytes lie inside it.
    let (low, high) = unsafe {
        (field_words::<8, true>(at.add(core::mem::offset_of!(BlockQ6K, ql) + 64 * n + 32 * (g % 2))), field_words::<8, true>(at.add(core::mem::offset_of!(BlockQ6K, qh) + 32 * n)))
    };
    core::array::from_fn(|w| (low[w] >> (4 * (g / 2))) & LOW_NIBBLES | ((high[w] >> (2 * g)) & 0x0303_0303) << 4)
}

impl BlockFormat for BlockQ4_0 {
    const FORMAT: GgufFormat = GgufFormat::Q4_0;
    const HAS_OFFSET: bool = false;
    /// `d · (q − 8)`.
    const VALUE_BIAS: u32 = 8;
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        without_bias::<Self>(self.stored_chunk(c))
    }
    #[inline(always)]
    fn stored_chunk(&self, _: usize) -> Chunk {
        scaled(nibble_words(&self.qs), half_to_f32(self.d))
    }
    #[inline(always)]
    unsafe fn chunk_at(block: *const Self, c: usize) -> Chunk {
        without_bias::<Self>(Self::stored_chunk_at(block, c))
    }
    /// `d` and `qs` by [`scale_and_words`].
    #[inline(always)]
    unsafe fn stored_chunk_at(block: *const Self, _: usize) -> Chunk {
        let (d, qs) = scale_and_words::<4>(block as *const u8);
        scaled(nibble_words_of(qs), f16_bits_to_f32(d))
    }
}

impl BlockFormat for BlockQ4_1 {
    const FORMAT: GgufFormat = GgufFormat::Q4_1;
    const HAS_OFFSET: bool = true;
    #[inline(always)]
    fn chunk(&self, _: usize) -> Chunk {
        let (d, m) = (half_to_f32(self.d), half_to_f32(self.m));
        Chunk { values: nibble_words(&self.qs), scale: [d, d], offset: [m, m] }
    }
}

impl BlockFormat for BlockQ5_0 {
    const FORMAT: GgufFormat = GgufFormat::Q5_0;
    const HAS_OFFSET: bool = false;
    /// `d · (q − 16)`.
    const VALUE_BIAS: u32 = 16;
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        without_bias::<Self>(self.stored_chunk(c))
    }
    #[inline(always)]
    fn stored_chunk(&self, _: usize) -> Chunk {
        scaled(five_bit_words(&self.qs, self.qh), half_to_f32(self.d))
    }
    #[inline(always)]
    unsafe fn chunk_at(block: *const Self, c: usize) -> Chunk {
        without_bias::<Self>(Self::stored_chunk_at(block, c))
    }
    /// `d`, then `qh` and `qs` as five words, by [`scale_and_words`].
    #[inline(always)]
    unsafe fn stored_chunk_at(block: *const Self, _: usize) -> Chunk {
        let (d, [qh, qs @ ..]) = scale_and_words::<5>(block as *const u8);
        scaled(five_bit_words_of(qs, qh), f16_bits_to_f32(d))
    }
}

impl BlockFormat for BlockQ5_1 {
    const FORMAT: GgufFormat = GgufFormat::Q5_1;
    const HAS_OFFSET: bool = true;
    #[inline(always)]
    fn chunk(&self, _: usize) -> Chunk {
        let (d, m) = (half_to_f32(self.d), half_to_f32(self.m));
        Chunk { values: five_bit_words(&self.qs, self.qh), scale: [d, d], offset: [m, m] }
    }
}

impl BlockFormat for BlockQ8_0 {
    const FORMAT: GgufFormat = GgufFormat::Q8_0;
    const HAS_OFFSET: bool = false;
    #[inline(always)]
    fn chunk(&self, _: usize) -> Chunk {
        scaled(signed_byte_words(&self.qs), half_to_f32(self.d))
    }
    /// `d` and the 32 values as eight words, by [`scale_and_words`].
    #[inline(always)]
    unsafe fn chunk_at(block: *const Self, _: usize) -> Chunk {
        let (d, values) = scale_and_words::<8>(block as *const u8);
        scaled(values, f16_bits_to_f32(d))
    }
}

impl BlockFormat for BlockQ2K {
    const FORMAT: GgufFormat = GgufFormat::Q2K;
    const HAS_OFFSET: bool = true;
    /// Sub-blocks `2c` and `2c + 1`: `d · (sc & 15) · q − dmin · (sc >> 4)`.
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        let (d, min) = (half_to_f32(self.d), half_to_f32(self.dmin));
        let (s0, s1) = (self.scales[2 * c], self.scales[2 * c + 1]);
        Chunk {
            // SAFETY: `self` is a 2-aligned block, its `qs` followed by `d` and `dmin`.
            values: unsafe { two_bit_words(self as *const Self as *const u8, core::mem::offset_of!(BlockQ2K, qs), c) },
            scale: [d * (s0 & 0xF) as f32, d * (s1 & 0xF) as f32],
            offset: [-(min * (s0 >> 4) as f32), -(min * (s1 >> 4) as f32)],
        }
    }
}

impl BlockFormat for BlockQ3K {
    const FORMAT: GgufFormat = GgufFormat::Q3K;
    const HAS_OFFSET: bool = false;
    /// The level is `two_bits + 4·hbit − 4`.
    const VALUE_BIAS: u32 = 4;
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        without_bias::<Self>(self.stored_chunk(c))
    }
    /// Sub-blocks `2c` and `2c + 1`: `d · (sc − 32) · (q − 4·!hbit)`, `q + 4·hbit` as stored.
    #[inline(always)]
    fn stored_chunk(&self, c: usize) -> Chunk {
        let d = half_to_f32(self.d);
        // The high bit of weight 32c + j is bit c of hmask[j] (see `bit_plane`).
        let at = self as *const Self as *const u8;
        // SAFETY: `self` is a 2-aligned block; `hmask` (bytes 0-31) is followed by `qs`, and
        // `qs` by the scales.
        let (levels, hmask) = unsafe { (two_bit_words(at, core::mem::offset_of!(BlockQ3K, qs), c), field_words::<8, true>(at.add(core::mem::offset_of!(BlockQ3K, hmask)))) };
        Chunk {
            values: core::array::from_fn(|w| levels[w] | ((hmask[w] >> c) & 0x0101_0101) << 2),
            scale: [d * scale_q3k(2 * c, &self.scales) as f32, d * scale_q3k(2 * c + 1, &self.scales) as f32],
            offset: [0.0, 0.0],
        }
    }
}

/// Sub-block `c` of a q4_K/q5_K super-block: `d · sc · q − dmin · m`, with the 4 low bits of
/// each level from `qs` and `high(e)` added.
#[inline(always)]
fn k4_chunk(d: Half, dmin: Half, scales: &[u8; 12], qs: &[u8; QK_K / 2], c: usize, high: impl Fn(usize) -> u8) -> Chunk {
    let (sc, m) = scale_min_k4(c, scales);
    let (scale, offset) = (half_to_f32(d) * sc as f32, -(half_to_f32(dmin) * m as f32));
    Chunk { values: pack_values(|j| (k4_nibble(qs, 32 * c + j) + high(32 * c + j)) as i8), scale: [scale, scale], offset: [offset, offset] }
}

impl BlockFormat for BlockQ4K {
    const FORMAT: GgufFormat = GgufFormat::Q4K;
    const HAS_OFFSET: bool = true;
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        k4_chunk(self.d, self.dmin, &self.scales, &self.qs, c, |_| 0)
    }
    /// `qs` from byte 16 (word 4).
    #[inline(always)]
    unsafe fn chunk_at(block: *const Self, c: usize) -> Chunk {
        k4_chunk_words(block as *const u8, c, 4, None)
    }
}

impl BlockFormat for BlockQ5K {
    const FORMAT: GgufFormat = GgufFormat::Q5K;
    const HAS_OFFSET: bool = true;
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        k4_chunk(self.d, self.dmin, &self.scales, &self.qs, c, |e| if bit_plane(&self.qh, e) { 16 } else { 0 })
    }
    /// `qh` from byte 16 (word 4), `qs` from byte 48 (word 12).
    #[inline(always)]
    unsafe fn chunk_at(block: *const Self, c: usize) -> Chunk {
        k4_chunk_words(block as *const u8, c, 12, Some(4))
    }
}

impl BlockFormat for BlockQ6K {
    const FORMAT: GgufFormat = GgufFormat::Q6K;
    const HAS_OFFSET: bool = false;
    /// `d · sc · (q − 32)`.
    const VALUE_BIAS: u32 = 32;
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        without_bias::<Self>(self.stored_chunk(c))
    }
    /// Sub-blocks `2c` and `2c + 1`: `d · sc · q`, the 6-bit `q` as stored (32 more than the
    /// level).
    #[inline(always)]
    fn stored_chunk(&self, c: usize) -> Chunk {
        let d = half_to_f32(self.d);
        Chunk {
            values: six_bit_words(self, c),
            scale: [d * self.scales[2 * c] as f32, d * self.scales[2 * c + 1] as f32],
            offset: [0.0, 0.0],
        }
    }
}

impl BlockFormat for BlockIq4Nl {
    const FORMAT: GgufFormat = GgufFormat::Iq4Nl;
    const HAS_OFFSET: bool = false;
    #[inline(always)]
    fn chunk(&self, _: usize) -> Chunk {
        scaled(pack_values(|j| KVALUES_IQ4NL[nibble(&self.qs, j) as usize]), half_to_f32(self.d))
    }
}

impl BlockFormat for BlockIq4Xs {
    const FORMAT: GgufFormat = GgufFormat::Iq4Xs;
    const HAS_OFFSET: bool = false;
    /// Sub-block `c`: `d · (sc − 32) · KVALUES_IQ4NL[q]`, its nibbles in `qs[16c .. 16c + 16]`.
    #[inline(always)]
    fn chunk(&self, c: usize) -> Chunk {
        let qs: [u8; 16] = core::array::from_fn(|i| self.qs[16 * c + i]);
        let scale = half_to_f32(self.d) * scale_iq4xs(c, self.scales_h, &self.scales_l) as f32;
        scaled(pack_values(|j| KVALUES_IQ4NL[nibble(&qs, j) as usize]), scale)
    }
}

impl BlockFormat for BlockMxfp4 {
    const FORMAT: GgufFormat = GgufFormat::Mxfp4;
    const HAS_OFFSET: bool = false;
    #[inline(always)]
    fn chunk(&self, _: usize) -> Chunk {
        scaled(pack_values(|j| KVALUES_MXFP4[nibble(&self.qs, j) as usize]), e8m0_to_f32_half(self.e))
    }
}

/// The GGUF block formats cukernels reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgufFormat {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Iq4Nl,
    Iq4Xs,
    Mxfp4,
}

impl GgufFormat {
    /// Every weight format, in ggml's type-id order.
    pub const ALL: [GgufFormat; 13] = [
        GgufFormat::Q4_0,
        GgufFormat::Q4_1,
        GgufFormat::Q5_0,
        GgufFormat::Q5_1,
        GgufFormat::Q8_0,
        GgufFormat::Q2K,
        GgufFormat::Q3K,
        GgufFormat::Q4K,
        GgufFormat::Q5K,
        GgufFormat::Q6K,
        GgufFormat::Iq4Nl,
        GgufFormat::Iq4Xs,
        GgufFormat::Mxfp4,
    ];

    /// ggml's name (`ggml_type_name`), as GGUF files and llama.cpp print it.
    pub const fn name(self) -> &'static str {
        match self {
            GgufFormat::Q4_0 => "q4_0",
            GgufFormat::Q4_1 => "q4_1",
            GgufFormat::Q5_0 => "q5_0",
            GgufFormat::Q5_1 => "q5_1",
            GgufFormat::Q8_0 => "q8_0",
            GgufFormat::Q2K => "q2_K",
            GgufFormat::Q3K => "q3_K",
            GgufFormat::Q4K => "q4_K",
            GgufFormat::Q5K => "q5_K",
            GgufFormat::Q6K => "q6_K",
            GgufFormat::Iq4Nl => "iq4_nl",
            GgufFormat::Iq4Xs => "iq4_xs",
            GgufFormat::Mxfp4 => "mxfp4",
        }
    }

    /// The format of a name as [`GgufFormat::name`] spells it (case-insensitive).
    pub fn from_name(name: &str) -> Option<GgufFormat> {
        Self::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// ggml's type id (`enum ggml_type`), as stored in a GGUF file's tensor info.
    pub const fn ggml_type(self) -> u32 {
        match self {
            GgufFormat::Q4_0 => 2,
            GgufFormat::Q4_1 => 3,
            GgufFormat::Q5_0 => 6,
            GgufFormat::Q5_1 => 7,
            GgufFormat::Q8_0 => 8,
            GgufFormat::Q2K => 10,
            GgufFormat::Q3K => 11,
            GgufFormat::Q4K => 12,
            GgufFormat::Q5K => 13,
            GgufFormat::Q6K => 14,
            GgufFormat::Iq4Nl => 20,
            GgufFormat::Iq4Xs => 23,
            GgufFormat::Mxfp4 => 39,
        }
    }

    /// Whether the format scales every 16 weights (q2_K, q3_K, q6_K) rather than every 32 or
    /// more: the halves of a decoded [`Chunk`] then have scales (and offsets) of their own.
    pub const fn scales_per_16_weights(self) -> bool {
        matches!(self, GgufFormat::Q2K | GgufFormat::Q3K | GgufFormat::Q6K)
    }

    /// Weights per block.
    pub const fn block_elements(self) -> usize {
        match self {
            GgufFormat::Q4_0 | GgufFormat::Q4_1 | GgufFormat::Q5_0 | GgufFormat::Q5_1 | GgufFormat::Q8_0 | GgufFormat::Iq4Nl | GgufFormat::Mxfp4 => QK,
            GgufFormat::Q2K | GgufFormat::Q3K | GgufFormat::Q4K | GgufFormat::Q5K | GgufFormat::Q6K | GgufFormat::Iq4Xs => QK_K,
        }
    }

    /// Bytes per block (`size_of` of the block struct).
    pub const fn block_bytes(self) -> usize {
        match self {
            GgufFormat::Q4_0 => core::mem::size_of::<BlockQ4_0>(),
            GgufFormat::Q4_1 => core::mem::size_of::<BlockQ4_1>(),
            GgufFormat::Q5_0 => core::mem::size_of::<BlockQ5_0>(),
            GgufFormat::Q5_1 => core::mem::size_of::<BlockQ5_1>(),
            GgufFormat::Q8_0 => core::mem::size_of::<BlockQ8_0>(),
            GgufFormat::Q2K => core::mem::size_of::<BlockQ2K>(),
            GgufFormat::Q3K => core::mem::size_of::<BlockQ3K>(),
            GgufFormat::Q4K => core::mem::size_of::<BlockQ4K>(),
            GgufFormat::Q5K => core::mem::size_of::<BlockQ5K>(),
            GgufFormat::Q6K => core::mem::size_of::<BlockQ6K>(),
            GgufFormat::Iq4Nl => core::mem::size_of::<BlockIq4Nl>(),
            GgufFormat::Iq4Xs => core::mem::size_of::<BlockIq4Xs>(),
            GgufFormat::Mxfp4 => core::mem::size_of::<BlockMxfp4>(),
        }
    }

    /// Where a block may start in device memory: the block struct's alignment (`align_of`: 2
    /// where it holds an f16 scale, 1 for mxfp4), and 4 for q4_K and q5_K, whose chunks the
    /// GPU reads in 32-bit words ([`BlockFormat::chunk_at`]; their sizes, 144 and 176, are
    /// multiples of 4, so every block of an aligned tensor is aligned).
    pub const fn block_alignment(self) -> usize {
        match self {
            GgufFormat::Q4_0 => core::mem::align_of::<BlockQ4_0>(),
            GgufFormat::Q4_1 => core::mem::align_of::<BlockQ4_1>(),
            GgufFormat::Q5_0 => core::mem::align_of::<BlockQ5_0>(),
            GgufFormat::Q5_1 => core::mem::align_of::<BlockQ5_1>(),
            GgufFormat::Q8_0 => core::mem::align_of::<BlockQ8_0>(),
            GgufFormat::Q2K => core::mem::align_of::<BlockQ2K>(),
            GgufFormat::Q3K => core::mem::align_of::<BlockQ3K>(),
            GgufFormat::Q4K | GgufFormat::Q5K => 4,
            GgufFormat::Q6K => core::mem::align_of::<BlockQ6K>(),
            GgufFormat::Iq4Nl => core::mem::align_of::<BlockIq4Nl>(),
            GgufFormat::Iq4Xs => core::mem::align_of::<BlockIq4Xs>(),
            GgufFormat::Mxfp4 => core::mem::align_of::<BlockMxfp4>(),
        }
    }

    /// Bits per weight, scales included.
    pub const fn bits_per_weight(self) -> f32 {
        (8 * self.block_bytes()) as f32 / self.block_elements() as f32
    }

    /// Bytes of `rows` rows of `k` weights, or `None` when `k` is not a whole number of
    /// blocks or the size overflows.
    pub const fn row_bytes(self, rows: usize, k: usize) -> Option<usize> {
        if k % self.block_elements() != 0 {
            return None;
        }
        match (k / self.block_elements()).checked_mul(self.block_bytes()) {
            Some(row) => row.checked_mul(rows),
            None => None,
        }
    }
}

impl core::fmt::Display for GgufFormat {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

// ggml's block sizes (`static_assert`s of ggml-common.h), and no padding anywhere: the struct
// sizes are the sums of their fields.
const _: () = {
    let expected: [(GgufFormat, usize); 13] = [
        (GgufFormat::Q4_0, 2 + 16),
        (GgufFormat::Q4_1, 2 + 2 + 16),
        (GgufFormat::Q5_0, 2 + 4 + 16),
        (GgufFormat::Q5_1, 2 + 2 + 4 + 16),
        (GgufFormat::Q8_0, 2 + 32),
        (GgufFormat::Q2K, 16 + 64 + 2 + 2),
        (GgufFormat::Q3K, 32 + 64 + 12 + 2),
        (GgufFormat::Q4K, 2 + 2 + 12 + 128),
        (GgufFormat::Q5K, 2 + 2 + 12 + 32 + 128),
        (GgufFormat::Q6K, 128 + 64 + 16 + 2),
        (GgufFormat::Iq4Nl, 2 + 16),
        (GgufFormat::Iq4Xs, 2 + 2 + 4 + 128),
        (GgufFormat::Mxfp4, 1 + 16),
    ];
    let mut i = 0;
    while i < expected.len() {
        assert!(expected[i].0.block_bytes() == expected[i].1, "a block struct's size differs from ggml's");
        assert!(expected[i].0 as usize == i, "GgufFormat::ALL order");
        i += 1;
    }
    assert!(core::mem::size_of::<BlockQ8_1>() == 2 + 2 + 32);
    assert!(core::mem::align_of::<BlockMxfp4>() == 1 && core::mem::align_of::<BlockQ4_0>() == 2);
};
