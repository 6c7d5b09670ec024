//! Per-architecture configuration of the MoE quantized matmul (`mul_mat_id`) kernels: the tile
//! of the small-batch (decode) path and of the tiled path, and where the host switches between
//! them. The kernels are described in `device/moe/mod.rs`; this table is read by both sides, so
//! the tile a kernel is compiled with is the tile the host launches and sizes.
//!
//! A *tile* is `rows` gathered activation rows routed to one expert × `warps · features_per_warp`
//! output features. Every lane of a warp takes one 32-weight chunk of each K step
//! ([`MOE_CHUNKS_PER_STEP`]), so a warp covers 1024 weights of K per step for each of its
//! features, and the step's q8_1 activations of the tile's rows are staged in shared memory
//! once for all warps.

use crate::arch::Arch;
use crate::quant::GgufFormat;

/// 32-weight chunks of K that one K step covers: one per lane of a warp.
pub const MOE_CHUNKS_PER_STEP: u32 = 32;
/// Bytes of shared memory per staged activation row and step: the q8_1 values (32 bytes per
/// chunk) and the chunk's scale (an f32), plus the row's slot index and activation row.
pub const MOE_SMEM_BYTES_PER_ROW: u32 = MOE_CHUNKS_PER_STEP * (32 + 4) + 2 * 4;
/// Threads per block of the prepare kernel (routing in block 0, quantization in the others: one
/// launch). One block does the whole routing (counts, prefix sums, scatter), so its size is the
/// block limit; it loops over slots and experts. A quantizing block takes 128 q8_1 blocks
/// (8 threads each).
pub const MOE_PREPARE_THREADS: u32 = 1024;
/// Experts the router counts per pass over the ids, in shared memory: 4096 (16 KB) covers
/// every MoE model in use in one pass (128-512 experts); a call with more experts takes
/// `⌈experts / 4096⌉` passes.
pub const MOE_ROUTE_EXPERTS_PER_PASS: u32 = 4096;
/// Shared memory of the prepare kernel (used by the routing block): the 32 warps' row and tile
/// totals, the two running totals, and one pass's counts.
pub const MOE_ROUTE_SMEM_BYTES: u32 = (2 * 32 + 2 + MOE_ROUTE_EXPERTS_PER_PASS) * 4;
/// Activation values per quantizer thread.
pub const MOE_QUANTIZE_VALUES_PER_THREAD: u32 = 4;

/// 32-weight chunks of K per step of the tensor-core tiles: 256 weights, one K-quant
/// super-block or eight blocks of the 32-weight formats, so a step never splits a block.
pub const MOE_MMA_STEP_CHUNKS: u32 = 8;
/// Words (of 4 int8 values) per row of a tensor-core tile's staged step: 64 of values plus 4 of
/// padding, so that the 8 rows one fragment load touches (row stride 68 ≡ 4 banks) fall in 8
/// different groups of 4 banks: the loads are free of bank conflicts.
pub const MOE_MMA_ROW_WORDS: u32 = MOE_MMA_STEP_CHUNKS * 8 + 4;
/// Shared memory per weight row (output feature) of a tensor-core tile: its step's int8
/// values, and an f32 scale and offset per 16 weights.
pub const MOE_MMA_SMEM_BYTES_PER_FEATURE: u32 = 4 * MOE_MMA_ROW_WORDS + 2 * 2 * MOE_MMA_STEP_CHUNKS * 4;
/// Shared memory per activation row of a tensor-core tile: its step's q8_1 values, the scale
/// per 32 values, the scaled sum per 16 values (for the offsets), and the row's slot index.
pub const MOE_MMA_SMEM_BYTES_PER_ROW: u32 = 4 * MOE_MMA_ROW_WORDS + MOE_MMA_STEP_CHUNKS * 4 + 2 * MOE_MMA_STEP_CHUNKS * 4 + 4;
/// Shared memory of a tensor-core tile besides the per-feature and per-row parts: the scale
/// arrays are stored chunk-major with one word of padding per line (weights' scales and
/// offsets: 2 · 8 lines each; activations' scales: 8, sums: 16).
pub const MOE_MMA_SMEM_PADDING_BYTES: u32 = (2 * 2 * MOE_MMA_STEP_CHUNKS + MOE_MMA_STEP_CHUNKS + 2 * MOE_MMA_STEP_CHUNKS) * 4;

/// How a tile computes its integer dot products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeEngine {
    /// `dp4a` on the CUDA cores, every lane a 32-weight chunk (every architecture).
    Dp4a,
    /// `dp4a` as [`Dp4a`](Self::Dp4a), one slot's activation row per block, read from the
    /// quantizer's output in global memory with no staging (the direct path: no routing).
    Dp4aRow,
    /// Int8 tensor cores, `mma.m8n8k16` (sm_75: Turing's only int8 shape), two per 16×8
    /// fragment.
    MmaM8n8k16,
    /// Int8 tensor cores, `mma.m16n8k32` and `m16n8k16` (sm_80 and newer).
    MmaM16n8k32,
}

impl MoeEngine {
    pub const fn name(self) -> &'static str {
        match self {
            MoeEngine::Dp4a => "dp4a",
            MoeEngine::Dp4aRow => "dp4a, one row",
            MoeEngine::MmaM8n8k16 => "mma.m8n8k16",
            MoeEngine::MmaM16n8k32 => "mma.m16n8k32",
        }
    }
}

/// One matmul tile shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeTile {
    /// Gathered rows (token slots routed to one expert) per tile.
    pub rows: u32,
    pub warps: u32,
    /// Output features each warp computes for all of the tile's rows (with `dp4a` each lane
    /// holds `rows · features_per_warp` partial sums; with `mma` the warp's accumulator
    /// fragments hold them, `rows · features_per_warp / 32` per lane).
    pub features_per_warp: u32,
    /// Designed occupancy (the launch bound).
    pub blocks_per_sm: u32,
    pub engine: MoeEngine,
}

impl MoeTile {
    pub const fn threads(&self) -> u32 {
        self.warps * 32
    }
    /// Output features per block.
    pub const fn features(&self) -> u32 {
        self.warps * self.features_per_warp
    }
    /// Dynamic shared memory of one block: the staged activations of one K step (and, for the
    /// tensor-core tiles, the step's decoded weights); none for the direct path.
    pub const fn smem_bytes(&self) -> u32 {
        match self.engine {
            MoeEngine::Dp4a => self.rows * MOE_SMEM_BYTES_PER_ROW,
            MoeEngine::Dp4aRow => 0,
            MoeEngine::MmaM8n8k16 | MoeEngine::MmaM16n8k32 => {
                self.features() * MOE_MMA_SMEM_BYTES_PER_FEATURE + self.rows * MOE_MMA_SMEM_BYTES_PER_ROW + MOE_MMA_SMEM_PADDING_BYTES
            }
        }
    }

    /// Checks the tile against `arch`'s limits (compile time, below).
    pub const fn check(&self, arch: Arch) -> Result<(), &'static str> {
        let l = arch.limits();
        if self.rows == 0 || self.warps == 0 || self.features_per_warp == 0 || self.blocks_per_sm == 0 {
            return Err("moe tile: every field must be positive");
        }
        let budget = match l.check_blocks(self.threads(), self.smem_bytes(), self.blocks_per_sm) {
            Ok(budget) => budget,
            Err(why) => return Err(why),
        };
        match self.engine {
            MoeEngine::Dp4a | MoeEngine::Dp4aRow => {
                if matches!(self.engine, MoeEngine::Dp4aRow) && self.rows != 1 {
                    return Err("moe tile: a direct-path block takes one row");
                }
                if self.rows > 32 {
                    return Err("moe tile: at most 32 rows (lane r writes row r's results)");
                }
                // Each lane holds rows · features partial sums, the features' decoded chunks
                // (8 words + 4 scales each) and ~40 registers of addresses and loop state.
                if self.rows * self.features_per_warp + 12 * self.features_per_warp + 40 > budget {
                    return Err("moe tile: partial sums leave too few registers under the launch bound");
                }
            }
            MoeEngine::MmaM8n8k16 | MoeEngine::MmaM16n8k32 => {
                let needs = if matches!(self.engine, MoeEngine::MmaM8n8k16) { Arch::Sm75 } else { Arch::Sm80 };
                if (arch as u8) < (needs as u8) {
                    return Err("moe tile: the architecture lacks this int8 mma shape");
                }
                if self.rows % 32 != 0 || self.features_per_warp % 16 != 0 {
                    return Err("moe tile: mma tiles take rows in 32s (ldmatrix loads 8-row fragments in pairs, the tile's first half too) and features in 16s");
                }
                if self.features_per_warp > 32 {
                    return Err("moe tile: at most 32 features per warp (each thread decodes features_per_warp / 4 of a step's chunks, at most a step's 8)");
                }
                // Per lane: the accumulators, one chunk's A (4 words per 16 features) and B
                // (2 words per 8 rows) fragments, the weights' scales and offsets (2 per
                // 16-feature tile and half), the rows' scales and sums of the 8-row tile being
                // scaled (6: they are loaded per tile), and ~48 of addresses and loop state.
                let (m_tiles, n_tiles) = (self.features_per_warp / 16, self.rows / 8);
                if 4 * m_tiles * n_tiles + 4 * m_tiles + 2 * n_tiles + 8 * m_tiles + 6 + 48 > budget {
                    return Err("moe tile: accumulators leave too few registers under the launch bound");
                }
            }
        }
        Ok(())
    }
}

/// The decode tile's shape but for its features per warp, which are per format
/// ([`decode_features_per_warp`]; [`MoeArchConfig::tile`] puts the two together). The decode
/// tile always computes with `dp4a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeDecodeShape {
    pub rows: u32,
    pub warps: u32,
    /// Designed occupancy (the launch bound).
    pub blocks_per_sm: u32,
}

/// One architecture's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeArchConfig {
    pub arch: Arch,
    /// Few rows per expert: a tile has few rows and many blocks stream the chosen experts'
    /// weights (each weight is read once per tile of rows).
    pub decode: MoeDecodeShape,
    /// Large batches: more rows per tile, so each weight chunk decoded serves more products.
    pub tiled: MoeTile,
    /// Experts with many rows: the tiled path with twice the rows per tile (each decoded
    /// chunk serves twice the products; a tile of an expert with few rows is mostly empty).
    pub tall: MoeTile,
    /// The tall tile of the formats with a scale per 16 weights (q2_K, q3_K, q6_K:
    /// [`GgufFormat::scales_per_16_weights`]): the same rows and features per block as `tall`
    /// (so the path rule and the grid do not depend on the format), perhaps over other warps.
    pub tall_half_scales: MoeTile,
    /// The tall tile runs while the routed slots average at least this many rows per
    /// computed expert (`slots ≥ tall_min_rows · experts`) and its grid has at least
    /// `tall_min_blocks` blocks (`⌈slots / tall.rows⌉ · ⌈n / tall.features()⌉`).
    pub tall_min_rows: u32,
    pub tall_min_blocks: u32,
    /// The direct path (a block per slot and feature group, no routing): its warps and
    /// occupancy (one row, the decode tile's features per warp).
    pub direct: MoeDecodeShape,
    /// The direct path runs while a call has at most this many slots (`tokens · n_used`), at
    /// most `direct_max_rows` per computed expert on average (each slot reads and decodes its
    /// expert's weights itself), ...
    pub direct_max_slots: u32,
    pub direct_max_rows: u32,
    /// ... or has at most this many slots, however many rows per expert; then the decode
    /// path, then the tiled one. These two hold for the light formats (at most 4.5 bits per
    /// weight, [`direct_rereads_pay`]); a heavier format takes the direct path at one row per
    /// expert at most.
    pub direct_any_rows_slots: u32,
    /// The decode path runs while the routed slots average at most this many rows per
    /// computed expert (`slots ≤ decode_max_rows · experts`), ...
    pub decode_max_rows: u32,
    /// ... or while the tiled grid would have fewer blocks than this (at least
    /// `⌈slots / tiled.rows⌉ · ⌈n / tiled.features()⌉`): few experts with many features (a
    /// dense matmul) give the tiled path too few blocks to fill the GPU.
    pub tiled_min_blocks: u32,
}

impl MoeArchConfig {
    /// The tile of `path` for weights in `format`: the decode tile takes as many features
    /// per warp as the format's decode leaves registers for ([`decode_features_per_warp`]),
    /// the direct path as many as pay there ([`direct_features_per_warp`]).
    pub const fn tile(&self, path: MoePath, format: GgufFormat) -> MoeTile {
        match path {
            MoePath::Decode => {
                let MoeDecodeShape { rows, warps, blocks_per_sm } = self.decode;
                MoeTile { rows, warps, features_per_warp: decode_features_per_warp(self.arch, format), blocks_per_sm, engine: MoeEngine::Dp4a }
            }
            MoePath::Tiled => self.tiled,
            MoePath::TiledTall if format.scales_per_16_weights() => self.tall_half_scales,
            MoePath::TiledTall => self.tall,
            MoePath::Direct => {
                let MoeDecodeShape { rows, warps, blocks_per_sm } = self.direct;
                MoeTile { rows, warps, features_per_warp: direct_features_per_warp(self.arch, format), blocks_per_sm, engine: MoeEngine::Dp4aRow }
            }
        }
    }
    /// The path a call on weights in `format` of `slots` routed slots (tokens · n_used) over
    /// `experts` computed experts and `n` output features takes.
    pub const fn path(&self, format: GgufFormat, slots: u64, experts: u64, n: u64) -> MoePath {
        let tiled_blocks = slots.div_ceil(self.tiled.rows as u64) * n.div_ceil(self.tiled.features() as u64);
        let tall_blocks = slots.div_ceil(self.tall.rows as u64) * n.div_ceil(self.tall.features() as u64);
        let (max_rows, any_rows_slots) = if direct_rereads_pay(format) { (self.direct_max_rows, self.direct_any_rows_slots) } else { (1, 1) };
        if slots <= self.direct_max_slots as u64 && (slots <= max_rows as u64 * experts || slots <= any_rows_slots as u64) {
            MoePath::Direct
        } else if slots <= self.decode_max_rows as u64 * experts || tiled_blocks < self.tiled_min_blocks as u64 {
            MoePath::Decode
        } else if slots >= self.tall_min_rows as u64 * experts && tall_blocks >= self.tall_min_blocks as u64 {
            MoePath::TiledTall
        } else {
            MoePath::Tiled
        }
    }
}

/// The four matmul paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoePath {
    /// Routed, few rows per expert: small tiles, many blocks.
    Decode,
    /// Routed, many rows per expert: tensor-core tiles (`dp4a` on sm_70).
    Tiled,
    /// Routed, very many rows per expert: the tiled path with taller tiles.
    TiledTall,
    /// Not routed: a block per slot (few tokens), quantizing its own activation row.
    Direct,
}

impl MoePath {
    pub const ALL: [MoePath; 4] = [MoePath::Direct, MoePath::Decode, MoePath::Tiled, MoePath::TiledTall];
    pub const fn name(self) -> &'static str {
        match self {
            MoePath::Decode => "decode",
            MoePath::Tiled => "tiled",
            MoePath::TiledTall => "tall",
            MoePath::Direct => "direct",
        }
    }
}

/// Features per warp of the decode tile, per format: each is a chunk load per lane in flight,
/// and a chunk's decode holds its loaded words in registers until they are packed, so the
/// formats whose chunks take many loads and much unpacking get fewer. The most that fit the 128
/// registers of four 128-thread blocks per SM with no spill (ptxas 12.9; CI checks each kernel
/// against its bound): the same on every architecture but sm_70, where q6_K's four spilled
/// 4 bytes.
pub const fn decode_features_per_warp(arch: Arch, format: GgufFormat) -> u32 {
    match format {
        GgufFormat::Q6K if matches!(arch, Arch::Sm70) => 2,
        GgufFormat::Q3K | GgufFormat::Mxfp4 => 1,
        GgufFormat::Q2K | GgufFormat::Iq4Nl | GgufFormat::Iq4Xs => 2,
        GgufFormat::Q4_0 | GgufFormat::Q4_1 | GgufFormat::Q5_0 | GgufFormat::Q5_1 | GgufFormat::Q8_0 | GgufFormat::Q4K | GgufFormat::Q5K | GgufFormat::Q6K => 4,
    }
}

/// Features per warp of the direct path, per format: the decode tile's
/// ([`decode_features_per_warp`]) but for q4_K and q6_K, which take 2. Their direct kernels
/// used all 128 registers at 4 features (four 4-warp blocks per SM, 25% occupancy) and waited
/// on their loads (ncu, H200: long scoreboard 2.4-3.2 cycles per issued instruction, DRAM at
/// 36-42% of peak). With 2 features a warp has fewer loads in flight but the SM more warps:
/// H200 A/B at T = 8, q6_K 1.11-1.14x (Qwen3 41.8 -> 37.0 µs), q4_K 0.98-1.03x. The decode
/// tile, whose lanes hold 8 rows of sums per feature, lost 10-21% with 2 (it keeps 4).
pub const fn direct_features_per_warp(arch: Arch, format: GgufFormat) -> u32 {
    match format {
        GgufFormat::Q4K | GgufFormat::Q6K => 2,
        _ => decode_features_per_warp(arch, format),
    }
}

const fn tile(rows: u32, warps: u32, features_per_warp: u32, blocks_per_sm: u32) -> MoeTile {
    MoeTile { rows, warps, features_per_warp, blocks_per_sm, engine: MoeEngine::Dp4a }
}

const fn mma_tile(rows: u32, warps: u32, features_per_warp: u32, blocks_per_sm: u32, engine: MoeEngine) -> MoeTile {
    MoeTile { rows, warps, features_per_warp, blocks_per_sm, engine }
}

/// Decode: 8 rows (an expert's rows fill ⌈rows / 8⌉ tiles; at decode batches most experts have
/// one), 4 warps of up to 4 features each ([`decode_features_per_warp`]), four blocks per SM
/// (128 registers). Each lane decodes one chunk of each of its features per K step, so the
/// features are chunk loads in flight per lane, and a block's start (finding its tile, staging
/// its rows) serves 16 features: measured on the H200 with one feature per warp and six blocks,
/// the decode path read at 0.8 TB/s (ncu: 52% of warp slots active, 18% of the DRAM peak).
const DECODE: MoeDecodeShape = MoeDecodeShape { rows: 8, warps: 4, blocks_per_sm: 4 };
/// Direct: the decode tile's warps and features per warp, one row: a block computes 16
/// features of one slot, reading the slot's q8_1 row from global memory (L1 and L2: every
/// block of the slot, and at `x_rows = 1` of the token, reads the same row). Four blocks per SM
/// as the launch bound (128 registers); with no shared memory, more fit where the kernel
/// needs fewer (sm_90, ptxas 12.9: 64-128 registers, q4_0 72 and seven blocks, q5_K 128 and
/// four). Two ways to put more warps on the small grids were measured slower on the H100
/// (`benches/results/2026-12-07-h100-moe-direct-ab`): the loads each lane keeps in flight
/// seem to matter more to this kernel than the number of warps:
/// - a tighter bound, which ptxas meets without spills (6 blocks: every direct kernel at
///   80 registers or fewer; 8: 64), lost at T = 8: 0.93-1.01x at 6, 0.76-0.97x at 8 (the
///   T = 1 rows, 5-8 µs, varied more between rounds than between the builds);
/// - the block's warps splitting K where the grid is small (the dense decode's 256 blocks
///   become 1024, a shared-memory sum per warp) lost at T = 1: 0.74-0.80x on the dense
///   4096 × 4096 rows (each lane one chunk), 0.52-0.81x where K = 2048 left half of each
///   warp's lanes without a chunk (q8_0 0.69-0.71x, 512-expert q4_0 0.81x); its extra
///   registers cost the unsplit T = 8 rows 0.89-0.98x.
const DIRECT: MoeDecodeShape = MoeDecodeShape { rows: 1, warps: 4, blocks_per_sm: 4 };
/// The direct path re-reads and re-decodes an expert's weights for each slot routed to it (the
/// routed paths once per tile of rows; the re-reads mostly hit L2), and skips the router and
/// the tile search. Measured on the H200 with every path forced
/// (`benches/results/2026-12-02-h200-moe-b9aeb85.jsonl`, q4_0): 128 experts × 8, 768 × 2048,
/// per-slot rows: direct 36 / 64 / 122 / 236 µs at 16 / 32 / 64 / 128 tokens (1 / 2 / 4 / 8
/// rows per expert) against decode 65 / 92 / 124 / 198 and tiled 139 / 142 / 146 / 166; one
/// dense 4096 × 4096 expert: direct 24 µs at 8 tokens against decode 27, 77 at 32 against 47.
/// The same run's other formats: at two rows per expert (128 × 8, 32 tokens) direct
/// against decode (da60057's run) q4_K 77 / 97 µs, but q8_0 135 / 114 and q6_K 180 / 143; a
/// dense expert at 8 tokens q4_K 26 / 31, q8_0 48 / 30, q6_K 63 / 34; at four rows (32 × 4,
/// 32 tokens) every format loses (q8_0 155 / 89). So: up to 512 slots at up to 2 rows per
/// expert on average, or any 8 slots (a dense layer's decode), for the light formats; one row
/// per expert for the others ([`direct_rereads_pay`]).
const DIRECT_MAX_SLOTS: u32 = 512;
const DIRECT_MAX_ROWS: u32 = 2;
const DIRECT_ANY_ROWS_SLOTS: u32 = 8;

/// Whether `format`'s weights are light enough (at most 4.5 bits per weight: q4_0, q4_K,
/// iq4_nl, iq4_xs, mxfp4, q2_K, q3_K) for the direct path's re-reads of an expert, one per
/// slot, to beat the routed paths' single read ([`MoeArchConfig::direct_max_rows`]): their
/// bytes and their decode per chunk are the cheapest (measured above).
pub const fn direct_rereads_pay(format: GgufFormat) -> bool {
    2 * format.block_bytes() * 8 <= 9 * format.block_elements()
}
/// Tiled with `dp4a` (sm_70, which has no int8 tensor cores): 32 rows × 8 warps × 1 feature: 32 partial sums per lane, 37 KB of staged activations,
/// two blocks per SM (128 registers per thread: with 2 features per warp the K-quants' decode
/// spilled 8-88 bytes there, ptxas 12.9).
const TILED: MoeTile = tile(32, 8, 1, 2);
/// Tensor-core tiles: 32 rows (at 512 tokens of 128 experts × 8 an expert averages 32 rows)
/// × 4 warps × 32 features (two 16-feature fragments per warp, sharing each activation
/// fragment): 128 features, 62 KB of staged step, two blocks on sm_80's 164 KB.
const TILED_MMA_SM80: MoeTile = mma_tile(32, 4, 32, 2, MoeEngine::MmaM16n8k32);
/// sm_90 and sm_100: the same 32 rows × 128 features as 8 warps × 16 features, two blocks per
/// SM (128 registers each): 16 warps per SM where 4 × 32 at three blocks had 12, and each warp
/// half the accumulators. These tiles wait on their loads (the weight decode's, ncu above), and
/// twice the warps per block hide more of it at the price of each activation fragment serving
/// one weight fragment instead of two. Measured on an H100 against 4 × 32 × 3 blocks, every
/// format, the same run (`benches/results/2026-12-06-h100-moe-narrow-tiles/`): llama.cpp's
/// second shape at T = 128 1.13-1.43x (all 13 formats), dense 4096² T = 128 1.06-1.14x,
/// 512 experts T = 512 1.01-1.19x; Qwen3 at T = 128 0.94-1.11x (8 of 13 formats 1-6% slower).
const TILED_MMA_NARROW: MoeTile = mma_tile(32, 8, 16, 2, MoeEngine::MmaM16n8k32);
/// The 100 KB SMs (sm_86, sm_89, sm_120): 16 features per warp, 37 KB, two blocks.
const TILED_MMA_100KB: MoeTile = mma_tile(32, 4, 16, 2, MoeEngine::MmaM16n8k32);
/// sm_75 (64 KB per SM, `mma.m8n8k16`): one block of 8 warps × 16 features, 62 KB.
const TILED_MMA_SM75: MoeTile = mma_tile(32, 8, 16, 1, MoeEngine::MmaM8n8k16);
/// Tall tiles: 64 rows, the same features per warp. Measured on the H200 as the sm_100 probe
/// row (`benches/results/2026-12-02-h200-moe-6d14be2-tiled-64-rows-probe-experiment.jsonl`,
/// against the 32-row tile in the same run): 1.13-1.33x faster at 2048 tokens (16-128 rows
/// per expert) on every shape and format, 1.16-1.18x at 32 rows per expert (Qwen3, 512
/// tokens), 0.83-0.85x at 8-10 rows; three blocks per SM (75 KB, 158-168 registers without
/// spills) ran faster than two (238-255 registers: ccb7582's run).
const TALL_MMA: MoeTile = mma_tile(64, 4, 32, 3, MoeEngine::MmaM16n8k32);
/// The tall tile as 8 warps × 16 features (two blocks per SM), for the formats with a scale per
/// 16 weights on sm_90 and sm_100. In the 4 × 32 tile those keep a branch per fragment (see
/// `multiply_step`); here every format gains where the grid is small (dense 4096² T = 512, 256
/// blocks: 1.27-1.47x), but over many waves only those three do: Qwen3 T = 2048 q2_K 1.01x,
/// q3_K 1.01x, q6_K 1.03x against 0.88-0.96x for the others; q6_K 1.03-1.11x on every other
/// tall row (same run as [`TILED_MMA_NARROW`]). iq4_nl and mxfp4 spill 8-12 bytes in it.
const TALL_MMA_NARROW: MoeTile = mma_tile(64, 8, 16, 2, MoeEngine::MmaM16n8k32);
/// sm_80's 164 KB hold two 75 KB blocks.
const TALL_MMA_SM80: MoeTile = mma_tile(64, 4, 32, 2, MoeEngine::MmaM16n8k32);
/// The 100 KB SMs: 64 rows × 4 warps × 16 features, 49 KB, two blocks.
const TALL_MMA_100KB: MoeTile = mma_tile(64, 4, 16, 2, MoeEngine::MmaM16n8k32);
/// sm_75: 64 rows × 4 warps × 16 features, 49 KB, one block.
const TALL_MMA_SM75: MoeTile = mma_tile(64, 4, 16, 1, MoeEngine::MmaM8n8k16);
/// The tall tile from 32 rows per expert on average (a guess between the measured 10, where
/// it lost, and 32, where it won) ...
const TALL_MIN_ROWS: u32 = 32;
/// ... while its grid holds two blocks per SM of a 132-SM GPU (a dense 4096-feature matmul of
/// 128 tokens, 64 blocks, ran 0.72x the 32-row tile's 128).
const TALL_MIN_BLOCKS: u32 = 256;
/// Measured on the H200 with the tensor-core tiled path (q4_0, 128 experts, 8 used,
/// 768 × 2048, one row per slot; both paths forced,
/// `benches/results/2026-12-01-h200-moe-mma.jsonl`): decode is 1.4x faster at 32 tokens
/// (2 rows per expert on average), level at 64 (4 rows), 1.5x slower at 128 (8 rows).
const DECODE_MAX_ROWS: u32 = 4;
/// About one block per SM of the GPUs these rows serve (H100/H200 132, A100 108, RTX 4090 128):
/// a tiled grid smaller than that leaves SMs idle while the decode path's grid (8-row tiles ×
/// 4 features) fills them. Measured on the H200 (dense 4096 × 4096 q4_0, both paths forced,
/// `benches/results/2026-12-01-h200-moe-mma.jsonl`): at 8 tokens (32 tiled blocks) decode is
/// 3x faster.
const TILED_MIN_BLOCKS: u32 = 128;

const fn row(arch: Arch) -> MoeArchConfig {
    let decode = DECODE;
    let tiled = match arch {
        Arch::Sm70 => TILED,
        Arch::Sm75 => TILED_MMA_SM75,
        Arch::Sm80 => TILED_MMA_SM80,
        Arch::Sm86 | Arch::Sm89 | Arch::Sm120 => TILED_MMA_100KB,
        Arch::Sm90 | Arch::Sm100 => TILED_MMA_NARROW,
    };
    // sm_70 has no tensor cores: its tall "tile" is the dp4a tile, never chosen (at most 32
    // rows: lane r writes row r), but forcing it runs the same kernel correctly.
    let (tall, tall_min_rows) = match arch {
        Arch::Sm70 => (TILED, u32::MAX),
        Arch::Sm75 => (TALL_MMA_SM75, TALL_MIN_ROWS),
        Arch::Sm80 => (TALL_MMA_SM80, TALL_MIN_ROWS),
        Arch::Sm86 | Arch::Sm89 | Arch::Sm120 => (TALL_MMA_100KB, TALL_MIN_ROWS),
        Arch::Sm90 | Arch::Sm100 => (TALL_MMA, TALL_MIN_ROWS),
    };
    let tall_half_scales = match arch {
        Arch::Sm90 | Arch::Sm100 => TALL_MMA_NARROW,
        _ => tall,
    };
    MoeArchConfig { arch, decode, tiled, tall, tall_half_scales, tall_min_rows, tall_min_blocks: TALL_MIN_BLOCKS, direct: DIRECT, direct_max_slots: DIRECT_MAX_SLOTS, direct_max_rows: DIRECT_MAX_ROWS, direct_any_rows_slots: DIRECT_ANY_ROWS_SLOTS, decode_max_rows: DECODE_MAX_ROWS, tiled_min_blocks: TILED_MIN_BLOCKS }
}

/// Every architecture's row, in [`Arch::ALL`] order. The decode path is `dp4a` everywhere;
/// the tiled path runs on the int8 tensor cores from sm_75 on (sm_70 has none).
pub const MOE_CONFIGS: [MoeArchConfig; 8] =
    [row(Arch::Sm70), row(Arch::Sm75), row(Arch::Sm80), row(Arch::Sm86), row(Arch::Sm89), row(Arch::Sm90), row(Arch::Sm100), row(Arch::Sm120)];

/// `arch`'s row.
pub const fn moe_config(arch: Arch) -> &'static MoeArchConfig {
    &MOE_CONFIGS[arch as usize]
}

/// What one entry point of the `moe` family does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeKernelKind {
    /// Block 0: counts, prefix sums and the gathered slot list per expert, flagging bad ids;
    /// the other blocks: activations (f32, f16 or bf16) to q8_1 values and scales.
    Prepare,
    /// The matmul of one weight format on one path.
    MatMul(GgufFormat, MoePath),
}

/// One entry point of the `moe` family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeKernel {
    pub entry_point: &'static str,
    pub kind: MoeKernelKind,
}

/// Lists the family's entry points for `$callback`: the matmuls as (decode name, tiled name,
/// tall name, direct name, format, block type), then the prepare kernel (router and quantizer).
#[macro_export]
#[doc(hidden)]
macro_rules! with_moe_kernels {
    ($callback:ident) => {
        $callback! {
            matmul: [
                (cukernels_moe_decode_q4_0, cukernels_moe_tiled_q4_0, cukernels_moe_tall_q4_0, cukernels_moe_direct_q4_0, Q4_0, BlockQ4_0),
                (cukernels_moe_decode_q4_1, cukernels_moe_tiled_q4_1, cukernels_moe_tall_q4_1, cukernels_moe_direct_q4_1, Q4_1, BlockQ4_1),
                (cukernels_moe_decode_q5_0, cukernels_moe_tiled_q5_0, cukernels_moe_tall_q5_0, cukernels_moe_direct_q5_0, Q5_0, BlockQ5_0),
                (cukernels_moe_decode_q5_1, cukernels_moe_tiled_q5_1, cukernels_moe_tall_q5_1, cukernels_moe_direct_q5_1, Q5_1, BlockQ5_1),
                (cukernels_moe_decode_q8_0, cukernels_moe_tiled_q8_0, cukernels_moe_tall_q8_0, cukernels_moe_direct_q8_0, Q8_0, BlockQ8_0),
                (cukernels_moe_decode_q2_k, cukernels_moe_tiled_q2_k, cukernels_moe_tall_q2_k, cukernels_moe_direct_q2_k, Q2K, BlockQ2K),
                (cukernels_moe_decode_q3_k, cukernels_moe_tiled_q3_k, cukernels_moe_tall_q3_k, cukernels_moe_direct_q3_k, Q3K, BlockQ3K),
                (cukernels_moe_decode_q4_k, cukernels_moe_tiled_q4_k, cukernels_moe_tall_q4_k, cukernels_moe_direct_q4_k, Q4K, BlockQ4K),
                (cukernels_moe_decode_q5_k, cukernels_moe_tiled_q5_k, cukernels_moe_tall_q5_k, cukernels_moe_direct_q5_k, Q5K, BlockQ5K),
                (cukernels_moe_decode_q6_k, cukernels_moe_tiled_q6_k, cukernels_moe_tall_q6_k, cukernels_moe_direct_q6_k, Q6K, BlockQ6K),
                (cukernels_moe_decode_iq4_nl, cukernels_moe_tiled_iq4_nl, cukernels_moe_tall_iq4_nl, cukernels_moe_direct_iq4_nl, Iq4Nl, BlockIq4Nl),
                (cukernels_moe_decode_iq4_xs, cukernels_moe_tiled_iq4_xs, cukernels_moe_tall_iq4_xs, cukernels_moe_direct_iq4_xs, Iq4Xs, BlockIq4Xs),
                (cukernels_moe_decode_mxfp4, cukernels_moe_tiled_mxfp4, cukernels_moe_tall_mxfp4, cukernels_moe_direct_mxfp4, Mxfp4, BlockMxfp4)
            ],
            prepare: cukernels_moe_prepare
        }
    };
}

macro_rules! moe_kernel_table {
    (matmul: [$(($decode:ident, $tiled:ident, $tall:ident, $direct:ident, $format:ident, $block:ident)),*], prepare: $prepare:ident) => {
        /// Every entry point of the `moe` family: the matmuls (decode, tiled, tall, direct) per format in
        /// [`GgufFormat::ALL`] order, then the prepare kernel.
        pub const MOE_KERNELS: &[MoeKernel] = &[
            $(
                MoeKernel { entry_point: stringify!($decode), kind: MoeKernelKind::MatMul(GgufFormat::$format, MoePath::Decode) },
                MoeKernel { entry_point: stringify!($tiled), kind: MoeKernelKind::MatMul(GgufFormat::$format, MoePath::Tiled) },
                MoeKernel { entry_point: stringify!($tall), kind: MoeKernelKind::MatMul(GgufFormat::$format, MoePath::TiledTall) },
                MoeKernel { entry_point: stringify!($direct), kind: MoeKernelKind::MatMul(GgufFormat::$format, MoePath::Direct) },
            )*
            MoeKernel { entry_point: stringify!($prepare), kind: MoeKernelKind::Prepare },
        ];
    };
}
with_moe_kernels!(moe_kernel_table);

/// Position in [`MOE_KERNELS`] of the entry point of `kind`.
pub fn moe_kernel_index(kind: MoeKernelKind) -> usize {
    MOE_KERNELS.iter().position(|k| k.kind == kind).expect("every moe kernel kind has an entry point")
}

/// Designed occupancy of the prepare kernel: one block of 1024 threads (the limit of sm_75's
/// SMs; few registers, no shared memory besides the router's 264 bytes).
pub const MOE_PREPARE_BLOCKS_PER_SM: u32 = 1;

// Compile-time proof that every tile fits its architecture and every row sits at its
// Arch::ALL index.
const _: () = {
    let mut i = 0;
    while i < MOE_CONFIGS.len() {
        let row = &MOE_CONFIGS[i];
        assert!(row.arch as u8 == Arch::ALL[i] as u8, "MOE_CONFIGS must follow Arch::ALL order");
        // Every path's tile of every format, as the launches take it (`tile(path, format)`).
        let mut f = 0;
        while f < GgufFormat::ALL.len() {
            let format = GgufFormat::ALL[f];
            let mut p = 0;
            while p < MoePath::ALL.len() {
                if let Err(why) = row.tile(MoePath::ALL[p], format).check(row.arch) {
                    panic!("{}", why);
                }
                p += 1;
            }
            let tall = row.tile(MoePath::TiledTall, format);
            assert!(
                tall.rows == row.tall.rows && tall.features() == row.tall.features() && tall.engine as u8 == row.tall.engine as u8,
                "every format's tall tile has the tall rows, features and engine (the path rule and the grid assume them)"
            );
            f += 1;
        }
        assert!(!matches!(row.tiled.engine, MoeEngine::Dp4aRow) && !matches!(row.tall.engine, MoeEngine::Dp4aRow), "the tiled paths gather rows of many slots: the one-row direct engine cannot run them");
        i += 1;
    }
    // The matmul list follows GgufFormat::ALL.
    let mut f = 0;
    while f < GgufFormat::ALL.len() {
        match MOE_KERNELS[4 * f].kind {
            MoeKernelKind::MatMul(format, MoePath::Decode) => assert!(format as u8 == GgufFormat::ALL[f] as u8, "moe kernels follow GgufFormat::ALL"),
            _ => panic!("moe kernels: decode, tiled, tall and direct per format"),
        }
        f += 1;
    }
};
