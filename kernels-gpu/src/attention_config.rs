//! Flash-attention tile configurations: one row per architecture, one tile per head size in
//! each row, fixed at compile time and read by both the device build (which instantiates one
//! kernel per head size and element type) and the host (which launches them). Every tile is
//! checked against its architecture's shared memory and thread budget by a `const` assertion
//! at the bottom of this file, so a config that cannot fit does not compile: the Volta crash of
//! FIELD-REPORTS §2 (an Ampere tile sent to a GPU with less shared memory) cannot be built.
//!
//! # Vocabulary (see `kernels-gpu/src/device/attention/mod.rs` for the algorithm)
//! - **Rows**: a block owns `rows()` query rows. A *row* is one (query position, query head)
//!   pair; when query heads that share a KV head are packed together (decode), consecutive rows
//!   are the heads of one position.
//! - **Warps**: `row_warps × dv_split × key_split` warps. Warp `w` owns the rows
//!   `(w % row_warps)·16·m_tiles ..` (each a set of `m_tiles` matrix-instruction tiles of 16
//!   rows), the output columns `((w / row_warps) % dv_split)·D_v/dv_split ..` and the keys
//!   `(w / (row_warps·dv_split))·bk/key_split ..` of every key tile. A `dv_split` above 1 keeps
//!   the output accumulators of large `D_v` (512) inside the register file, at the price of
//!   each warp of a row group computing the same scores. A `key_split` above 1 (decode) gives
//!   each warp its own keys, softmax state and output: no score is computed twice, and the
//!   warps' results are merged once, at the end of the block.
//! - **Key tile** `bk`: keys staged in shared memory per step of the main loop.
//! - **Stages**: key/value tiles in flight (`cp.async`, sm_80+); 1 on sm_70/sm_75, which copy
//!   through registers.
//! - **Q in registers**: the query fragments are read from shared memory once, not at every
//!   key tile; only where the registers allow it.

use crate::arch::Arch;

/// Padding, in elements, at the end of every shared-memory row of Q, K and V. A row of `D`
/// 2-byte elements is then `D/8 + 1` 16-byte chunks long, an odd number, so the 8 rows an
/// `ldmatrix` reads (16 bytes each) fall into 8 different bank groups: no conflicts, for every
/// head size (all multiples of 16), without a swizzle.
pub const ATTENTION_SMEM_PAD: u32 = 8;

/// Most query rows (query positions × packed heads) of one decode problem: the decode path
/// packs all the query heads of a KV head into one block's rows when
/// `seqlen_q · (heads_q / heads_k)` is at most this.
pub const DECODE_MAX_PACKED_ROWS: u32 = 64;

/// Most blocks one (sequence, head group, row tile) spreads its keys over (flash-decoding); the
/// partial results take `splits × rows × D_v` floats of workspace.
pub const MAX_KV_SPLITS: u32 = 128;

/// Fewest bytes of K and V one split reads: below this a split's fixed cost (loading Q, its
/// pipeline's start, writing its partial rows and merging them) outweighs its keys. The H200's
/// split sweep (`cukernels-bench attention`, group "decode split sweep") ran one sequence's
/// decode at head 128 fastest with one wave of splits down to 8192 keys (33 splits of 248
/// keys, 124 KiB each: 17.5 µs against 19.0 with 16 splits).
pub const MIN_SPLIT_KV_BYTES: u32 = 128 * 1024;

/// The head sizes (`D_k`, `D_v`) with a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttentionHead {
    D64,
    D80,
    D96,
    D112,
    D128,
    D192,
    D256,
    /// DeepSeek-V2/V3 prefill (`D_k` 192 = 128 + 64 rotary, `D_v` 128).
    D192V128,
    D320V256,
    /// DeepSeek MLA decode over the latent cache: K is 576 wide (512 latent + 64 rotary), V
    /// the first 512 columns (V may alias K).
    D576V512,
}

impl AttentionHead {
    pub const ALL: [AttentionHead; 10] = [
        AttentionHead::D64,
        AttentionHead::D80,
        AttentionHead::D96,
        AttentionHead::D112,
        AttentionHead::D128,
        AttentionHead::D192,
        AttentionHead::D256,
        AttentionHead::D192V128,
        AttentionHead::D320V256,
        AttentionHead::D576V512,
    ];

    /// Width of a query and key row.
    pub const fn dk(self) -> u32 {
        match self {
            AttentionHead::D64 => 64,
            AttentionHead::D80 => 80,
            AttentionHead::D96 => 96,
            AttentionHead::D112 => 112,
            AttentionHead::D128 => 128,
            AttentionHead::D192 | AttentionHead::D192V128 => 192,
            AttentionHead::D256 => 256,
            AttentionHead::D320V256 => 320,
            AttentionHead::D576V512 => 576,
        }
    }

    /// Width of a value and output row.
    pub const fn dv(self) -> u32 {
        match self {
            AttentionHead::D192V128 => 128,
            AttentionHead::D320V256 => 256,
            AttentionHead::D576V512 => 512,
            h => h.dk(),
        }
    }

    /// The head of (`dk`, `dv`), if there is a kernel for it.
    pub fn from_dims(dk: usize, dv: usize) -> Option<AttentionHead> {
        Self::ALL.into_iter().find(|h| h.dk() as usize == dk && h.dv() as usize == dv)
    }

    /// Position in [`AttentionHead::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            AttentionHead::D64 => "64",
            AttentionHead::D80 => "80",
            AttentionHead::D96 => "96",
            AttentionHead::D112 => "112",
            AttentionHead::D128 => "128",
            AttentionHead::D192 => "192",
            AttentionHead::D256 => "256",
            AttentionHead::D192V128 => "192_128",
            AttentionHead::D320V256 => "320_256",
            AttentionHead::D576V512 => "576_512",
        }
    }
}

/// Element type of Q, K, V and O (accumulation is always f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttentionDtype {
    F16,
    Bf16,
}

impl AttentionDtype {
    pub const ALL: [AttentionDtype; 2] = [AttentionDtype::F16, AttentionDtype::Bf16];
    pub const fn name(self) -> &'static str {
        match self {
            AttentionDtype::F16 => "f16",
            AttentionDtype::Bf16 => "bf16",
        }
    }
}

/// How one 16×8×16 step of a matrix product is computed: every path works on the same
/// register fragments (the `mma.m16n8k16` layout), so the rest of the kernel is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatrixPath {
    /// `mma.sync.m16n8k16` (f16 and bf16), sm_80 and newer.
    Mma16816,
    /// Two `mma.sync.m16n8k8` (f16 only), sm_75: the k16 fragments are two k8 fragments side
    /// by side.
    Mma1688Pair,
    /// No matrix instruction: each lane gathers its rows and columns from the fragments of its
    /// warp with shuffles and multiplies in f32. For bf16 on sm_70/sm_75 (no bf16 matrix
    /// instructions; converting to f16 could overflow) and for sm_70 (whose `m8n8k4` layout is
    /// not yet implemented).
    Simt,
}

/// The matrix path of `arch` for `dtype`.
pub const fn matrix_path(arch: Arch, dtype: AttentionDtype) -> MatrixPath {
    match (arch, dtype) {
        (Arch::Sm70, _) | (Arch::Sm75, AttentionDtype::Bf16) => MatrixPath::Simt,
        (Arch::Sm75, AttentionDtype::F16) => MatrixPath::Mma1688Pair,
        _ => MatrixPath::Mma16816,
    }
}

/// One head size's tile on one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionTile {
    /// 16-row matrix tiles per warp: two halve the shared-memory reads of K and V per
    /// multiply-add (each fragment read serves two tiles) at the price of twice the
    /// accumulators.
    pub m_tiles: u32,
    /// Warps along the rows.
    pub row_warps: u32,
    /// Warps along the output columns (see the module docs).
    pub dv_split: u32,
    /// Warps along the keys of each tile (see the module docs).
    pub key_split: u32,
    /// Keys per tile.
    pub bk: u32,
    /// Key/value tiles in shared memory (cp.async pipeline depth).
    pub stages: u32,
    /// Query fragments held in registers for the whole kernel.
    pub q_in_registers: bool,
    /// Designed occupancy: the launch bound.
    pub blocks_per_sm: u32,
    /// Products by warpgroup instructions (`wgmma`, sm_90a): each group of 4 row warps (64
    /// rows) multiplies its whole `Q·Kᵀ` tile and `P·V` tile with a few asynchronous
    /// instructions reading K and V from shared memory in the core-matrix layout, instead of one
    /// `mma` per 16×8×16 step fed by `ldmatrix` (`m_tiles` 1, no splits).
    pub wgmma: bool,
}

impl AttentionTile {
    /// Query rows per block.
    pub const fn rows(&self) -> u32 {
        16 * self.m_tiles * self.row_warps
    }
    pub const fn warps(&self) -> u32 {
        self.row_warps * self.dv_split * self.key_split
    }
    /// Keys of each tile that one warp takes.
    pub const fn keys_per_warp(&self) -> u32 {
        self.bk / self.key_split
    }
    pub const fn threads(&self) -> u32 {
        32 * self.warps()
    }
    /// Dynamic shared memory, bytes: Q (`rows × (D_k + pad)`) and `stages` tiles of K
    /// (`bk × (D_k + pad)`) and V (`bk × (D_v + pad)`), 2-byte elements; at least the end of
    /// block merge of a key split, which reuses it ([`key_merge_bytes`](Self::key_merge_bytes)).
    pub const fn smem_bytes(&self, head: AttentionHead) -> u32 {
        let k_row = head.dk() + self.smem_pad();
        let v_row = head.dv() + self.smem_pad();
        // (`wgmma` tiles: and 1024 bytes to align the start to a swizzle atom.)
        let pipeline = 2 * (self.rows() * k_row + self.stages * self.bk * (k_row + v_row)) + if self.wgmma { 1024 } else { 0 };
        let merge = self.key_merge_bytes(head);
        if merge > pipeline {
            merge
        } else {
            pipeline
        }
    }
    /// Padding of each shared-memory row: [`ATTENTION_SMEM_PAD`], or none in the core-matrix
    /// layout of `wgmma` tiles (conflict-free without it).
    pub const fn smem_pad(&self) -> u32 {
        if self.wgmma {
            0
        } else {
            ATTENTION_SMEM_PAD
        }
    }
    /// Shared memory of the merge of a key split: every warp but those of the first key
    /// group leaves its output accumulators and its rows' running maximum and denominator
    /// (two each per 16-row tile), f32, one per lane.
    pub const fn key_merge_bytes(&self, head: AttentionHead) -> u32 {
        let per_lane = self.m_tiles * (head.dv() / self.dv_split / 8 * 4 + 4);
        4 * 32 * per_lane * self.row_warps * self.dv_split * (self.key_split - 1)
    }
    /// f32 accumulator registers per thread: output, scores, and query fragments if held.
    pub const fn accumulator_registers(&self, head: AttentionHead) -> u32 {
        let output = self.m_tiles * (head.dv() / self.dv_split / 8) * 4;
        let scores = self.m_tiles * (self.keys_per_warp() / 8) * 4;
        let query = if self.q_in_registers { self.m_tiles * (head.dk() / 16) * 4 } else { 0 };
        output + scores + query
    }

    /// Checks the tile against `arch`'s limits and the kernel's shape rules.
    pub const fn check(&self, arch: Arch, head: AttentionHead) -> Result<(), &'static str> {
        let l = arch.limits();
        if self.m_tiles == 0 || self.row_warps == 0 || self.dv_split == 0 || self.key_split == 0 || self.bk == 0 || self.stages == 0 {
            return Err("attention tile: every field must be positive");
        }
        if self.bk % (16 * self.key_split) != 0 {
            return Err("attention tile: each warp's keys of a tile (bk / key_split) must be a multiple of 16 (one k-step of P·V)");
        }
        if (head.dv() / self.dv_split) % 16 != 0 || head.dv() % self.dv_split != 0 {
            return Err("attention tile: each warp's share of D_v must be a multiple of 16 (ldmatrix pairs)");
        }
        if self.wgmma {
            if !matches!(arch, Arch::Sm90) {
                return Err("attention tile: wgmma exists on sm_90a alone (sm_100 and sm_120 have no warpgroup MMA)");
            }
            if self.m_tiles != 1 || self.row_warps % 4 != 0 || self.dv_split != 1 || self.key_split != 1 || self.q_in_registers {
                return Err("attention tile: a wgmma tile is whole warpgroups of one 16-row tile per warp, no splits, Q in shared memory");
            }
            if !matches!(self.bk, 64 | 128 | 256) || !matches!(head.dv(), 64 | 128 | 256) || head.dk() % 64 != 0 {
                return Err("attention tile: wgmma tiles are built for 64, 128 or 256 keys and D_v, and D_k a multiple of 64 (128-byte swizzle)");
            }
        }
        if !l.has_cp_async && self.stages != 1 {
            return Err("attention tile: without cp.async (sm_70, sm_75) the kernel copies through registers into one stage");
        }
        // Registers: the launch bound gives each thread regs_per_sm / (blocks · threads), at
        // most 255; the accumulators plus ~40 for addresses, softmax state and fragments must
        // fit in it (ptxas in CI proves there are no spills).
        let budget = match l.check_blocks(self.threads(), self.smem_bytes(head), self.blocks_per_sm) {
            Ok(budget) => budget,
            Err(why) => return Err(why),
        };
        if self.accumulator_registers(head) + 40 > budget {
            return Err("attention tile: accumulators leave too few registers under the launch bound");
        }
        Ok(())
    }
}

/// The three forward entry points of a (head size, dtype) and the tile each is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionTileKind {
    /// Many query rows per block, every feature (mask tensor, ALiBi, softcap included).
    Prefill,
    /// Many query rows per block, no mask tensor, ALiBi or softcap (the scores are scaled and
    /// cut by the causal, window and length bounds only). Without those passes the kernel
    /// needs fewer registers, which buys larger tiles where registers bound them: the sm_90
    /// `wgmma` rows (see `SM90_PLAIN_TILES`). Most prefill launches are of this kind.
    Plain,
    /// All of a problem's rows in one 16-row tile (decode; every feature).
    Decode,
}

/// One architecture's row: per head size, in [`AttentionHead::ALL`] order, a tile for each
/// [`AttentionTileKind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionArchConfig {
    pub arch: Arch,
    pub tiles: [AttentionTile; 10],
    /// Tiles of the plain prefill entry points, where the lean kernel affords a larger tile
    /// than the prefill one; `None` elsewhere ([`has_plain_tile`](Self::has_plain_tile)).
    pub plain_tiles: [Option<AttentionTile>; 10],
    /// Tiles of the decode entry points: see [`decode`].
    pub decode_tiles: [AttentionTile; 10],
}

impl AttentionArchConfig {
    pub const fn tile(&self, head: AttentionHead) -> AttentionTile {
        self.tiles[head.index()]
    }

    /// The plain entry point's tile: its own, or the prefill tile where it has none.
    pub const fn plain_tile(&self, head: AttentionHead) -> AttentionTile {
        match self.plain_tiles[head.index()] {
            Some(tile) => tile,
            None => self.tile(head),
        }
    }

    pub const fn decode_tile(&self, head: AttentionHead) -> AttentionTile {
        self.decode_tiles[head.index()]
    }

    /// Whether `head`'s plain prefill entry point has a tile of its own. Where it has not, that
    /// entry point is built empty (compiling the lean kernel with the prefill tile bought
    /// nothing, and ptxas 12.9 spilled 4-24 bytes in some of those kernels that the full ones
    /// do not) and the host launches the prefill entry point instead.
    pub const fn has_plain_tile(&self, head: AttentionHead) -> bool {
        self.plain_tiles[head.index()].is_some()
    }

    /// The tile of `head`'s entry point of `kind`.
    pub const fn tile_of(&self, kind: AttentionTileKind, head: AttentionHead) -> AttentionTile {
        match kind {
            AttentionTileKind::Prefill => self.tile(head),
            AttentionTileKind::Plain => self.plain_tile(head),
            AttentionTileKind::Decode => self.decode_tile(head),
        }
    }
}

const fn tile(m_tiles: u32, row_warps: u32, dv_split: u32, bk: u32, stages: u32, q_in_registers: bool, blocks_per_sm: u32) -> AttentionTile {
    AttentionTile { m_tiles, row_warps, dv_split, key_split: 1, bk, stages, q_in_registers, blocks_per_sm, wgmma: false }
}

/// A `wgmma` tile (sm_90): `warpgroups` groups of 4 warps, 64 rows each, `bk`-key tiles in
/// `stages` stages.
const fn wgmma_tile(warpgroups: u32, bk: u32, stages: u32, blocks_per_sm: u32) -> AttentionTile {
    AttentionTile { wgmma: true, ..tile(1, 4 * warpgroups, 1, bk, stages, false, blocks_per_sm) }
}

/// A decode tile: one 16-row matrix tile (the packed query heads of a KV head at a few
/// positions: decode launches take it when all of a problem's rows fit in 16), its `D_v`
/// columns spread over `dv_split` warps. Every warp computes the tile's scores itself, the same
/// ones (where [`decode_keys`] cannot split the keys instead): the repeated `Q·Kᵀ` costs less
/// than the prefill tile's warps left idle with 4 rows in 128. Small blocks, several per SM,
/// keep more key tiles in flight per SM, and the split rule fills the GPU with them.
const fn decode(dv_split: u32, bk: u32, stages: u32, q_in_registers: bool, blocks_per_sm: u32) -> AttentionTile {
    tile(1, 1, dv_split, bk, stages, q_in_registers, blocks_per_sm)
}

/// A decode tile whose warps split each key tile: `key_split` groups of `dv_split` warps, each
/// group with its own `bk / key_split` keys of every tile and its own softmax state, merged at
/// the end of the block. No warp repeats another's `Q·Kᵀ`, which is what bounds the
/// one-score-tile-per-warp decode above (each warp latency-bound on a chain of `D_k/16`
/// dependent `mma`s per score fragment: benches/results/NOTES.md, "Decode: profiled").
const fn decode_keys(dv_split: u32, key_split: u32, bk: u32, stages: u32, q_in_registers: bool, blocks_per_sm: u32) -> AttentionTile {
    AttentionTile { key_split, ..tile(1, 1, dv_split, bk, stages, q_in_registers, blocks_per_sm) }
}


/// Decode on sm_90 and sm_100: 64-key tiles up to head 128 and 32 from head 192 on, 3 stages
/// (two tiles in flight behind the computed one), 2-3 blocks per SM; Q in registers (16 rows
/// hold few) except at 576/512 and at heads 80 to 112, whose 5 to 7 warps per block leave fewer
/// registers per thread. Heads 64 and 128 split each 64-key tile over 4 warps (16 keys and all
/// `D_v` columns each), heads 192 and 256 over 2 pairs of warps (16 keys, half the columns),
/// 192/128 over 2 warps: on the H200 that took one sequence's step at 16k keys (head 128) from
/// 28.4 to 27.5 µs and at 20000 keys (head 256, GQA 16) from 25.3 to 24.2, and a block that
/// walks many keys (batch 16 at 32k keys, one split) from 684 to 511 µs
/// (`benches/results/2026-12-03-h200-attention-ecf3ad6-dirty-decode-key-split.txt`). Heads 80
/// to 112 keep one warp per 16 columns (`dv_split` 5 to 7, each warp repeating the scores):
/// their `D_v` does not split into a power of two. Head 256 is designed for one block per SM
/// (the split rule fills one wave of them): in the H200's split sweep one sequence at 20000 keys
/// (GQA 16) ran in 25 µs as 128 blocks (64 splits) and in 30 µs as 256 (128 splits, two blocks
/// per SM).
const HOPPER_DECODE_TILES: [AttentionTile; 10] = [
    decode_keys(1, 4, 64, 3, true, 3), // 64: 56.2 KB
    decode(5, 64, 3, false, 3),        // 80: 68.8 KB
    decode(6, 64, 3, false, 2),        // 96: 81.2 KB
    decode(7, 64, 3, false, 2),        // 112: 93.8 KB
    decode_keys(1, 4, 64, 3, true, 2), // 128: 106.2 KB
    decode_keys(2, 2, 32, 3, true, 2), // 192: 81.2 KB
    decode_keys(2, 2, 32, 3, true, 1), // 256: 107.2 KB (one block per SM: see above)
    decode_keys(1, 2, 32, 3, true, 2), // 192/128: 69.2 KB
    decode(4, 32, 2, true, 2),         // 320/256: 84.2 KB
    decode(8, 32, 2, false, 1),        // 576/512: 156.2 KB
];

/// Decode on sm_80 (164 KB per SM): two blocks per SM where they fit, with the stages that
/// allows; the key splits of the sm_90 row (measured there: the warps' repeated `Q·Kᵀ` is the
/// same work on every architecture).
const SM80_DECODE_TILES: [AttentionTile; 10] = [
    decode_keys(1, 4, 64, 3, true, 2), // 64: 56.2 KB
    decode(5, 64, 3, false, 2),   // 80: 68.8 KB
    decode(6, 64, 2, false, 2),   // 96: 55.2 KB
    decode(7, 64, 2, false, 1),   // 112: 63.8 KB (7 warps: two blocks would leave 128 registers)
    decode_keys(1, 4, 64, 2, true, 2), // 128: 72.2 KB
    decode_keys(2, 2, 32, 2, true, 2), // 192: 56.2 KB
    decode_keys(2, 2, 32, 2, true, 2), // 256: 74.2 KB
    decode_keys(1, 2, 32, 3, true, 2), // 192/128: 69.2 KB
    decode(4, 32, 2, true, 1),    // 320/256: 84.2 KB
    decode(8, 32, 2, false, 1),   // 576/512: 156.2 KB
];

/// Decode on the 99 KB GPUs (sm_86, sm_89, sm_120; 100 KB per SM): 32-key tiles from head 96
/// on, 16 at 320/256 and 576/512, so that two blocks of two stages fit where they can; key
/// splits as on sm_90, where the tile has 32 keys in two 16-key groups: of two warps (half the
/// columns each) at heads 128, 192 and 256, of one warp at 192/128.
const MID_SMEM_DECODE_TILES: [AttentionTile; 10] = [
    decode_keys(1, 4, 64, 2, true, 2), // 64: 38.2 KB
    decode(5, 64, 2, false, 2),   // 80: 46.8 KB
    decode(6, 32, 3, false, 2),   // 96: 42.2 KB
    decode(7, 32, 2, false, 2),   // 112: 33.8 KB
    decode_keys(2, 2, 32, 2, true, 2), // 128: 38.2 KB
    decode_keys(2, 2, 32, 2, true, 1), // 192: 56.2 KB
    decode_keys(2, 2, 32, 2, true, 1), // 256: 74.2 KB
    decode_keys(1, 2, 32, 2, true, 1), // 192/128: 48.2 KB
    decode(4, 16, 2, true, 1),    // 320/256: 47.2 KB
    decode(8, 16, 2, false, 1),   // 576/512: 87.2 KB
];

/// Decode on sm_70 and sm_75 (no `cp.async`: one stage): 32-key tiles (16 at 576/512 on
/// sm_75's 64 KB), Q re-read from shared memory (the shuffle path's products need the
/// registers). Heads 80 and 96 run `blocks_80_96` blocks per SM: on sm_70, whose f16 takes the
/// shuffle path too, two blocks of 5 or 6 warps leave 204 or 170 registers per thread, and
/// ptxas 12.9 spilled 8 bytes at both (f16); one block leaves 255.
const fn small_decode_tiles(bk_576: u32, blocks_80_96: u32) -> [AttentionTile; 10] {
    [
        decode(4, 32, 1, false, 2),   // 64: 11.2 KB
        decode(5, 32, 1, false, blocks_80_96), // 80: 13.8 KB
        decode(6, 32, 1, false, blocks_80_96), // 96: 16.2 KB
        decode(7, 32, 1, false, 1),   // 112: 18.8 KB (7 warps: one block)
        decode(4, 32, 1, false, 2),   // 128: 21.2 KB
        decode(4, 32, 1, false, 1),   // 192: 31.2 KB
        decode(4, 32, 1, false, 1),   // 256: 41.2 KB
        decode(4, 32, 1, false, 1),   // 192/128: 27.2 KB
        decode(4, 32, 1, false, 1),   // 320/256: 47.2 KB
        decode(8, bk_576, 1, false, 1),  // 576/512
    ]
}

/// sm_80 (A100): 163 KB per block, 164 KB per SM.
/// - 4 warps of one 16-row tile each (64 rows), 64-key tiles; 3 stages and two blocks per SM
///   where they fit, so that two key tiles' copies are in flight behind the one computed;
///   Q in registers at heads 80 and 96 (`4 · D/16` registers; at head 64 the 64-key score
///   tile and Q together spilled 4 bytes).
///   (Two 16-row tiles per warp, as FlashAttention-2 runs head 128, halve the K/V fragment
///   reads per multiply-add; with them ptxas spilled, so that waits for a leaner main loop.)
/// - Larger heads: Q re-read from shared memory at every key tile; 32-key tiles from head 192
///   on (with 64, the driver's JIT of this PTX on an H200 spilled 8 bytes at head 192).
/// - 576/512: `dv_split` 4 keeps 64 output registers per warp; 32-key tiles, one stage (two
///   would take 175 KB).
const SM80_TILES: [AttentionTile; 10] = [
    tile(1, 4, 1, 64, 3, false, 2),  // 64: 64.5 KB
    tile(1, 4, 1, 64, 3, true, 2),   // 80: 79 KB
    tile(1, 4, 1, 64, 2, true, 2),   // 96: 66.5 KB
    tile(1, 4, 1, 64, 2, false, 2),  // 112: 77 KB
    tile(1, 4, 1, 64, 3, false, 1),  // 128: 122 KB
    tile(1, 4, 1, 32, 3, false, 1),  // 192: 100 KB
    tile(1, 4, 1, 32, 3, false, 1),  // 256: 132 KB
    tile(1, 4, 1, 64, 2, false, 1),  // 192/128: 109 KB
    tile(1, 4, 1, 32, 2, false, 1),  // 320/256: 115 KB
    tile(1, 2, 4, 32, 1, false, 1),  // 576/512: 8 warps, 32 rows, 108 KB
];

/// sm_100 (B200), and sm_90 where it has no `wgmma` tile (`SM90_TILES`): 227 KB per block,
/// 228 KB per SM. (Measured on the H200, as the sm_90 row and as the sm_100 config probe.)
/// - Heads 64 to 128 and 192/128: FlashAttention-2's layout, 4 warps of two 16-row tiles
///   (128 rows), two blocks per SM (255 registers each). A K or V fragment read from shared
///   memory serves both row tiles (4 MMAs instead of 2), which takes the kernel off the shared
///   memory bound of one-tile warps (benches/results/NOTES.md). Two tiles hold 160-192
///   accumulator registers, so the key tiles are 32 keys (64 at heads 64 and 80) and Q is
///   re-read from shared memory; 64-key tiles spill at heads 96 to 128 (ptxas 12.9: 16 bytes
///   at 96, 176-304 at 112 and 128).
/// - Heads 192 and 256, 320/256, 576/512: one tile per warp (two would not fit the register
///   file at D_v ≥ 256), 8 warps where the shared memory allows, one block per SM. Heads 192
///   and 256 take 64-key tiles in two stages (FlashAttention-2's 128 × 64 tile): at head 256
///   that ran 1.2x faster on the H200 than 32-key tiles in three stages (half the per-tile
///   softmax, barrier and copy-issue cost per key). The same one-tile layout at heads 64 to 128
///   (8 warps, Q in registers) ran 0.64-0.90x of the two-tile rows below
///   (`benches/results/2026-12-02-h200-attention-18c53ee-*`).
const HOPPER_TILES: [AttentionTile; 10] = [
    tile(2, 4, 1, 64, 3, false, 2),  // 64: 72.0 KB
    tile(2, 4, 1, 64, 3, false, 2),  // 80: 88.0 KB
    tile(2, 4, 1, 32, 3, false, 2),  // 96: 65.0 KB
    tile(2, 4, 1, 32, 3, false, 2),  // 112: 75.0 KB
    tile(2, 4, 1, 32, 3, false, 2),  // 128: 85.0 KB
    tile(1, 8, 1, 64, 2, false, 1),  // 192: 150.0 KB
    tile(1, 8, 1, 64, 2, false, 1),  // 256: 198.0 KB
    tile(2, 4, 1, 32, 3, false, 2),  // 192/128: 113.0 KB
    tile(1, 4, 1, 32, 3, false, 1),  // 320/256: 152.0 KB
    tile(1, 2, 4, 32, 2, false, 1),  // 576/512: 174.5 KB
];

/// sm_90 (H100/H200): the sm_100 row above, except where the warpgroup MMA (`wgmma`, sm_90a)
/// serves: heads 128, 256 and 192/128 run two warpgroups of 64 rows (128 rows, 8 warps, one
/// block per SM), 64-key tiles, K, Q and V in the 128-byte swizzled layout. Each warpgroup
/// multiplies its `Q·Kᵀ` tile with `D_k/16` instructions reading shared memory and its `P·V`
/// with 4 instructions taking P from registers, where `mma.sync` needed 64 of each plus the
/// `ldmatrix` reads that fed them. On the H200 the head-128 prefill at 4096 went from 294 to
/// 398 TFLOP/s with 128-key tiles (which spilled 16 bytes; 64-key tiles do not). The layout
/// matters: the same kernel on the unswizzled core-matrix layout ran at 230
/// (benches/results/NOTES.md, "Attention: wgmma"). Head 64 stays on `mma.sync` here (a 64-key
/// `wgmma` tile ran 284 against 290 TFLOP/s: a 64-wide head gives each instruction too little
/// work), and takes a 128-key `wgmma` tile in the plain entry point ([`SM90_PLAIN_TILES`]);
/// heads 80 to 112, 192 and the wide pairs have no `wgmma` tile yet (the 128-byte swizzle wants
/// multiples of 64, and 192 or 320 columns are no `wgmma` width here).
const SM90_TILES: [AttentionTile; 10] = [
    tile(2, 4, 1, 64, 3, false, 2),  // 64: 72.0 KB
    tile(2, 4, 1, 64, 3, false, 2),  // 80: 88.0 KB
    tile(2, 4, 1, 32, 3, false, 2),  // 96: 65.0 KB
    tile(2, 4, 1, 32, 3, false, 2),  // 112: 75.0 KB
    wgmma_tile(2, 64, 3, 1),         // 128: 129 KB
    tile(1, 8, 1, 64, 2, false, 1),  // 192: 150.0 KB
    wgmma_tile(2, 64, 2, 1),         // 256: 193 KB
    wgmma_tile(2, 64, 3, 1),         // 192/128: 169 KB
    tile(1, 4, 1, 32, 3, false, 1),  // 320/256: 152.0 KB
    tile(1, 2, 4, 32, 2, false, 1),  // 576/512: 174.5 KB
];

/// sm_90's plain prefill tiles (no mask tensor, ALiBi or softcap: [`AttentionTileKind::Plain`]):
/// 128-key `wgmma` tiles at heads 64 and 128. A warpgroup's 128-key tile holds 64
/// score and 64 output registers per thread at head 128; with the mask pass in the kernel
/// (whose 64 loads ptxas keeps in flight at once) that spilled 16 bytes at 255 registers,
/// without it it fits. Twice the keys per tile halve the barriers, pipeline waits and row
/// maxima per key: on the H200 head 128 went from 339-361 to 347-436 TFLOP/s (1.15-1.27x
/// FlashAttention-2). Head 64 runs one warpgroup per block and two blocks per SM: separate
/// blocks keep separate barriers, so one block's softmax overlaps the other's products, where
/// the two warpgroups of one block run in phase (308-317 TFLOP/s at 4096 against 295 with two
/// warpgroups; at head 128 one warpgroup per block lost: each block copies its own K and V for
/// 64 rows). At 192/128 ptxas 12.9 puts 560 bytes of the 128-key tile's arrays in local
/// memory: it keeps the prefill tile, as every head without an entry here does.
const SM90_PLAIN_TILES: [Option<AttentionTile>; 10] = [
    Some(wgmma_tile(1, 128, 2, 2)),  // 64: 73 KB, two blocks per SM
    None,
    None,
    None,
    Some(wgmma_tile(2, 128, 2, 1)),  // 128: 161 KB
    None,
    None,
    None,
    None,
    None,
];

/// No plain tiles: every plain prefill launches the prefill entry point.
const NO_PLAIN_TILES: [Option<AttentionTile>; 10] = [None; 10];

/// Rows for the 99 KB GPUs (sm_86, sm_89, sm_120): sm_80's shapes, with 32-key tiles from head
/// 112 on (ptxas 12.9 spilled 4 bytes at head 112 for sm_120 with 64) and one block per SM
/// where two do not fit.
const MID_SMEM_TILES: [AttentionTile; 10] = [
    tile(1, 4, 1, 64, 2, true, 2),   // 64: 46 KB
    tile(1, 4, 1, 64, 2, true, 1),   // 80: 56 KB
    tile(1, 4, 1, 64, 2, true, 1),   // 96: 66.5 KB
    tile(1, 4, 1, 32, 2, false, 1),  // 112: 46 KB
    tile(1, 4, 1, 32, 2, false, 1),  // 128: 52 KB
    tile(1, 4, 1, 32, 2, false, 1),  // 192: 75 KB
    tile(1, 4, 1, 32, 2, false, 1),  // 256: 99 KB
    tile(1, 4, 1, 32, 2, false, 1),  // 192/128: 67 KB
    tile(1, 2, 1, 32, 1, false, 1),  // 320/256: 57.5 KB
    tile(1, 1, 4, 32, 1, false, 1),  // 576/512: 87 KB
];

/// Small accumulators for the paths without bf16 matrix instructions: every warp holds at
/// most 64 output columns (`dv_split` spreads wider heads over more warps, which each compute
/// the same scores) and 32-key score tiles, so that the shuffle-and-FMA products of
/// [`MatrixPath::Simt`] (ten times a matrix instruction's code) stay fully unrolled in
/// registers. Built for 96 KB (sm_70); sm_75 takes the same tiles where they fit its 64 KB.
const fn small_accumulator_tiles(bk_576: u32) -> [AttentionTile; 10] {
    [
        tile(1, 4, 1, 32, 1, false, 2),     // 64: 18 KB
        tile(1, 4, 1, 32, 1, false, 2),     // 80
        tile(1, 4, 2, 32, 1, false, 1),     // 96
        tile(1, 4, 1, 32, 1, false, 1),     // 112 (112/16 = 7 does not split)
        tile(1, 4, 2, 32, 1, false, 1),     // 128: 8 warps, 34 KB
        tile(1, 2, 4, 32, 1, false, 1),     // 192
        tile(1, 2, 4, 32, 1, false, 1),     // 256: 8 warps, 32 rows, 50.5 KB
        tile(1, 4, 2, 32, 1, false, 1),     // 192/128
        tile(1, 2, 4, 32, 1, false, 1),     // 320/256: 59 KB
        tile(1, 1, 8, bk_576, 1, false, 1), // 576/512: 8 warps of 64 columns
    ]
}

/// sm_75 (T4): 64 KB per block, 1024 threads per SM, no cp.async (one stage, copied through
/// registers); f16 runs on `m16n8k8` pairs, bf16 on the shuffle path, so the small-accumulator
/// tiles, with 16-key tiles for 576/512 (54 KB).
const SM75_TILES: [AttentionTile; 10] = small_accumulator_tiles(16);

/// sm_70 (V100): 96 KB per block, no cp.async, no ldmatrix, no `m16n8k16`: the shuffle path
/// and the small-accumulator tiles (576/512: 89 KB). FIELD-REPORTS §2: head 256 and 320 must
/// fit 96 KB, which the `const` check below proves.
const SM70_TILES: [AttentionTile; 10] = small_accumulator_tiles(32);

/// Every architecture's row, in [`Arch::ALL`] order.
pub const ATTENTION_CONFIGS: [AttentionArchConfig; 8] = [
    AttentionArchConfig { arch: Arch::Sm70, tiles: SM70_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: small_decode_tiles(32, 1) },
    AttentionArchConfig { arch: Arch::Sm75, tiles: SM75_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: small_decode_tiles(16, 2) },
    AttentionArchConfig { arch: Arch::Sm80, tiles: SM80_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: SM80_DECODE_TILES },
    AttentionArchConfig { arch: Arch::Sm86, tiles: MID_SMEM_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: MID_SMEM_DECODE_TILES },
    AttentionArchConfig { arch: Arch::Sm89, tiles: MID_SMEM_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: MID_SMEM_DECODE_TILES },
    AttentionArchConfig { arch: Arch::Sm90, tiles: SM90_TILES, plain_tiles: SM90_PLAIN_TILES, decode_tiles: HOPPER_DECODE_TILES },
    AttentionArchConfig { arch: Arch::Sm100, tiles: HOPPER_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: HOPPER_DECODE_TILES },
    AttentionArchConfig { arch: Arch::Sm120, tiles: MID_SMEM_TILES, plain_tiles: NO_PLAIN_TILES, decode_tiles: MID_SMEM_DECODE_TILES },
];

/// The attention row of one architecture.
pub const fn attention_config(arch: Arch) -> &'static AttentionArchConfig {
    &ATTENTION_CONFIGS[arch as usize]
}

/// Whether the `kind` entry points copy paged keys through the short-page path (pages of a
/// power of two shorter than the key tile, such as vLLM's 16 and mistral.rs's 32 keys: the
/// tile's table entries read once, a lane each, and shared by shuffles; see
/// `device/attention/mod.rs`). The decode tiles do: a decode step is bound by its copies, and
/// reading each key row's table entry before its copy made paged decode 3.8x slower than
/// contiguous K/V on the H200. The prefill tiles keep the row-by-row copy: each of their key
/// tiles serves 64 to 128 query rows, which spreads its cost, and the path's code in every
/// prefill entry point would take the package past its size budget (`tests/cpu_artifacts.rs`).
pub const fn copies_short_pages(kind: AttentionTileKind) -> bool {
    matches!(kind, AttentionTileKind::Decode)
}

/// Threads of the merge launch (one block per output row, see `device/attention/merge.rs`):
/// its first warp computes the row's split weights, then thread `(g, c)` sums group `g` of the
/// splits of 16-byte column `c` (`merge_groups`): at `D_v` 128 eight groups, so that eight
/// splits' loads are in flight per column.
pub const MERGE_THREADS: u32 = 256;

/// Floats of the merge launch's shared memory between the weights and the column sums: the
/// row's log-sum-exp, padded so that the column sums (16-byte vectors) stay 16-byte aligned.
pub const MERGE_LSE_FLOATS: u32 = 4;

/// Shared memory of the merge launch, bytes: the splits' weights, the row's log-sum-exp
/// ([`MERGE_LSE_FLOATS`]) and each thread's four column sums.
pub const MERGE_SMEM_BYTES: u32 = 4 * (MAX_KV_SPLITS + MERGE_LSE_FLOATS + 4 * MERGE_THREADS);
const _: () = assert!((MAX_KV_SPLITS + MERGE_LSE_FLOATS) % 4 == 0, "the merge's column sums are 16-byte aligned");

/// Calls `$callback!` with every attention entry point: (name, head, dtype) for the forward
/// kernels with the prefill tiles, then with the decode tiles, then with the plain prefill
/// tiles, then the merge kernels as (name, dtype).
#[macro_export]
#[doc(hidden)]
macro_rules! with_attention_kernels {
    ($callback:ident) => {
        $callback! {
            forward: [
                (cukernels_attention_64_f16, D64, F16), (cukernels_attention_64_bf16, D64, Bf16),
                (cukernels_attention_80_f16, D80, F16), (cukernels_attention_80_bf16, D80, Bf16),
                (cukernels_attention_96_f16, D96, F16), (cukernels_attention_96_bf16, D96, Bf16),
                (cukernels_attention_112_f16, D112, F16), (cukernels_attention_112_bf16, D112, Bf16),
                (cukernels_attention_128_f16, D128, F16), (cukernels_attention_128_bf16, D128, Bf16),
                (cukernels_attention_192_f16, D192, F16), (cukernels_attention_192_bf16, D192, Bf16),
                (cukernels_attention_256_f16, D256, F16), (cukernels_attention_256_bf16, D256, Bf16),
                (cukernels_attention_192_128_f16, D192V128, F16), (cukernels_attention_192_128_bf16, D192V128, Bf16),
                (cukernels_attention_320_256_f16, D320V256, F16), (cukernels_attention_320_256_bf16, D320V256, Bf16),
                (cukernels_attention_576_512_f16, D576V512, F16), (cukernels_attention_576_512_bf16, D576V512, Bf16)
            ],
            decode: [
                (cukernels_attention_decode_64_f16, D64, F16), (cukernels_attention_decode_64_bf16, D64, Bf16),
                (cukernels_attention_decode_80_f16, D80, F16), (cukernels_attention_decode_80_bf16, D80, Bf16),
                (cukernels_attention_decode_96_f16, D96, F16), (cukernels_attention_decode_96_bf16, D96, Bf16),
                (cukernels_attention_decode_112_f16, D112, F16), (cukernels_attention_decode_112_bf16, D112, Bf16),
                (cukernels_attention_decode_128_f16, D128, F16), (cukernels_attention_decode_128_bf16, D128, Bf16),
                (cukernels_attention_decode_192_f16, D192, F16), (cukernels_attention_decode_192_bf16, D192, Bf16),
                (cukernels_attention_decode_256_f16, D256, F16), (cukernels_attention_decode_256_bf16, D256, Bf16),
                (cukernels_attention_decode_192_128_f16, D192V128, F16), (cukernels_attention_decode_192_128_bf16, D192V128, Bf16),
                (cukernels_attention_decode_320_256_f16, D320V256, F16), (cukernels_attention_decode_320_256_bf16, D320V256, Bf16),
                (cukernels_attention_decode_576_512_f16, D576V512, F16), (cukernels_attention_decode_576_512_bf16, D576V512, Bf16)
            ],
            plain: [
                (cukernels_attention_plain_64_f16, D64, F16), (cukernels_attention_plain_64_bf16, D64, Bf16),
                (cukernels_attention_plain_80_f16, D80, F16), (cukernels_attention_plain_80_bf16, D80, Bf16),
                (cukernels_attention_plain_96_f16, D96, F16), (cukernels_attention_plain_96_bf16, D96, Bf16),
                (cukernels_attention_plain_112_f16, D112, F16), (cukernels_attention_plain_112_bf16, D112, Bf16),
                (cukernels_attention_plain_128_f16, D128, F16), (cukernels_attention_plain_128_bf16, D128, Bf16),
                (cukernels_attention_plain_192_f16, D192, F16), (cukernels_attention_plain_192_bf16, D192, Bf16),
                (cukernels_attention_plain_256_f16, D256, F16), (cukernels_attention_plain_256_bf16, D256, Bf16),
                (cukernels_attention_plain_192_128_f16, D192V128, F16), (cukernels_attention_plain_192_128_bf16, D192V128, Bf16),
                (cukernels_attention_plain_320_256_f16, D320V256, F16), (cukernels_attention_plain_320_256_bf16, D320V256, Bf16),
                (cukernels_attention_plain_576_512_f16, D576V512, F16), (cukernels_attention_plain_576_512_bf16, D576V512, Bf16)
            ],
            merge: [(cukernels_attention_merge_f16, F16), (cukernels_attention_merge_bf16, Bf16)]
        }
    };
}

/// One attention entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionKernel {
    pub entry_point: &'static str,
    /// `None`: the merge kernel of split launches.
    pub head: Option<AttentionHead>,
    pub dtype: AttentionDtype,
    /// The tile it is built with (the merge kernels: `Prefill`, unused).
    pub kind: AttentionTileKind,
}

macro_rules! attention_kernel_table {
    (forward: [$(($name:ident, $head:ident, $dtype:ident)),*], decode: [$(($dname:ident, $dhead:ident, $ddtype:ident)),*], plain: [$(($pname:ident, $phead:ident, $pdtype:ident)),*], merge: [$(($mname:ident, $mdtype:ident)),*]) => {
        /// Every attention entry point of every module: the forward kernels (prefill tiles,
        /// decode tiles, plain prefill tiles), then the merges.
        pub const ATTENTION_KERNELS: &[AttentionKernel] = &[
            $(AttentionKernel { entry_point: stringify!($name), head: Some(AttentionHead::$head), dtype: AttentionDtype::$dtype, kind: AttentionTileKind::Prefill },)*
            $(AttentionKernel { entry_point: stringify!($dname), head: Some(AttentionHead::$dhead), dtype: AttentionDtype::$ddtype, kind: AttentionTileKind::Decode },)*
            $(AttentionKernel { entry_point: stringify!($pname), head: Some(AttentionHead::$phead), dtype: AttentionDtype::$pdtype, kind: AttentionTileKind::Plain },)*
            $(AttentionKernel { entry_point: stringify!($mname), head: None, dtype: AttentionDtype::$mdtype, kind: AttentionTileKind::Prefill },)*
        ];
    };
}
with_attention_kernels!(attention_kernel_table);

/// Position in [`ATTENTION_KERNELS`] of the forward kernel of (`head`, `dtype`) with the
/// tile of `kind`, or of the merge kernel of `dtype` when `head` is `None`.
pub fn attention_kernel_index(head: Option<AttentionHead>, dtype: AttentionDtype, kind: AttentionTileKind) -> usize {
    let kind = if head.is_some() { kind } else { AttentionTileKind::Prefill };
    ATTENTION_KERNELS
        .iter()
        .position(|k| k.head == head && k.dtype == dtype && k.kind == kind)
        .expect("every (head, dtype, tile) has an entry point")
}

// Compile-time proof that every tile fits its architecture and every row sits at its
// Arch::ALL index.
const _: () = {
    let mut i = 0;
    while i < ATTENTION_CONFIGS.len() {
        let row = &ATTENTION_CONFIGS[i];
        assert!(row.arch as u8 == Arch::ALL[i] as u8, "ATTENTION_CONFIGS must follow Arch::ALL order");
        let mut h = 0;
        while h < AttentionHead::ALL.len() {
            if let Err(why) = row.tiles[h].check(row.arch, AttentionHead::ALL[h]) {
                panic!("{}", why);
            }
            if let Err(why) = row.decode_tiles[h].check(row.arch, AttentionHead::ALL[h]) {
                panic!("{}", why);
            }
            if let Some(plain) = row.plain_tiles[h] {
                if let Err(why) = plain.check(row.arch, AttentionHead::ALL[h]) {
                    panic!("{}", why);
                }
            }
            assert!(row.decode_tiles[h].rows() == 16, "a decode tile is one 16-row matrix tile");
            h += 1;
        }
        i += 1;
    }
};
