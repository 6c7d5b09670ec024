//! SGEMM tile configurations: one row per architecture, fixed at compile time, read by both the
//! device build (which instantiates one kernel per variant) and the host (which launches them
//! and checks resources). Every row is checked against its architecture's limits by a `const`
//! assertion at the bottom of this file, so a config that cannot fit does not compile.
//!
//! # Vocabulary
//! - **Block tile** `bm × bn`: the part of C one thread block computes; it walks k in steps of
//!   `bk`, staging a `bk × bm` slice of A and a `bk × bn` slice of B in shared memory.
//! - **Thread tile** `tm × tn`: the accumulators one thread holds in registers, made of
//!   `(tm/4) × (tn/4)` sub-tiles of 4×4, so that every shared-memory read is one 16-byte vector.
//! - **Warp tile**: the 32 lanes of a warp form a `lanes_m × (32/lanes_m)` grid of thread tiles,
//!   so a warp covers `(lanes_m·tm) × ((32/lanes_m)·tn)`.
//! - **Stages**: shared-memory buffers in flight. With `cp.async` (sm_80+) loads for `stages-1`
//!   future k-steps are in flight while one is computed; without it (sm_70, sm_75) the kernel
//!   double-buffers through registers and `stages` must be 2.
//! - **Blocks per SM**: the occupancy the config was designed for. It becomes a launch bound
//!   (`.maxntid` / `.minnctapersm` in the PTX), so ptxas caps registers to make it possible, and
//!   the CI checks that it did so without spilling.

use crate::arch::{Arch, ArchLimits};

/// Padding (in floats) added to every shared-memory row. Rows stay 16-byte aligned (vector
/// reads), and the transposing 4-byte stores of a k-contiguous operand spread over more banks.
pub const SMEM_ROW_PAD: u32 = 4;

/// Registers beyond accumulators and two fragment sets that a tile's budget must leave before
/// it reads its first fragments early ([`SgemmTile::reads_first_fragments_early`]): about what
/// the copy plans, stage addresses and loop counters take in the kernels' SASS.
pub const EARLY_FRAGMENT_SPARE_REGISTERS: u32 = 40;

/// Most accumulators a thread may hold for its tile to store C through shared memory where C
/// is not 16-byte aligned ([`SgemmTile::store_staging_rows`]). Beyond it (`huge`, 128), the
/// staging code beside the accumulators made ptxas 12.9 spill (12 bytes in `huge`'s `tt` on
/// sm_90), and a tile that large runs on problems big enough that the epilogue matters little.
pub const STAGED_STORES_MAX_ACCUMULATORS: u32 = 64;

/// Stores of C (and loads of C where beta ≠ 0) each lane issues before it waits for any, in
/// the staged epilogue ([`SgemmTile::store_staging_rows`]): each is a 128-byte row segment of
/// the warp, and a load of C takes hundreds of cycles, so the loads of several segments go
/// out together.
pub const STAGED_STORES_IN_FLIGHT: u32 = 8;

/// Fewest columns of C a block must store for its epilogue to go through shared memory
/// ([`SgemmTile::store_staging_rows`]): what it buys is store instructions that each write a
/// 32-float segment of a row. A block with fewer columns (n = 5, say) has no such segments,
/// and its threads' scalar stores already touch few sectors; staging only added instructions
/// (H100, 633 × (6887 × 5 × 7) `tn@col`: `medium` 0.43 → 0.62 ms with it).
pub const STAGED_STORES_MIN_COLUMNS: u32 = 32;

/// Fewest rows a tile must have for its epilogue to go through shared memory
/// ([`SgemmTile::store_staging_rows`]). The 16-row `skinny` tile serves m ≤ 16, where each
/// block streams a long strip of B and stores only 16 rows of C: forced on 19 random-sweep
/// shapes with the staged epilogue it ran 0.94x as fast by geometric mean (H100, 2026-12-06;
/// worst 0.86x, 24 × (10770 × 558 × 2) `tt`), so it keeps the scalar stores.
pub const STAGED_STORES_MIN_TILE_ROWS: u32 = 32;

/// Thread blocks are rasterized in groups of this many tile-rows, so that blocks running at the
/// same time share rows of A and columns of B in L2.
pub const RASTER_GROUP_M: u32 = 8;

/// Most blocks one tile's k range is split over ([`SgemmTile::split_k_smem_bytes`]): the blocks
/// of one tile form a thread-block cluster, and 8 is the cluster size every architecture with
/// clusters guarantees ("portable"); larger ones need an opt-in and may not be schedulable.
pub const MAX_K_SPLITS: u32 = 8;

/// Largest block tile (`bm × bn`) that is compiled with the k split and with edge tiles moved
/// inside ([`SgemmTile::can_split_k`], [`SgemmTile::moves_edge_tiles`]). Measured on the H200
/// (1024³, 1000³, 768³): the 128-wide tiles' splits never beat a split 64×64 tile (`huge`
/// over 2-4 blocks was 15-70% slower than `medium` over 2-5), and either feature's extra code
/// cost `huge` 1-5% at 4096³, where it never splits. Smaller tiles split where a problem has
/// too few tiles for the GPU: `medium` at 1024³ and 768³, `skinny` for m = 16 (16 × 4096²:
/// 35 µs over 5 blocks against 69 µs unsplit).
pub const SMALL_TILE_MAX_ELEMENTS: u32 = 64 * 64;

/// Where a block's tile starts along m (or n) so that it lies inside the matrix (`total` rows,
/// tiles of `tile`): `start` (the first row the block owns) for every tile but the last, whose
/// tile is moved back to end at `total` when the matrix has at least `tile` rows. The moved
/// tile recomputes rows its neighbour owns (and does not store them), but all its copies lie
/// inside the operands, so it needs no bounds tests (in a one-wave grid such as 1000³ on the
/// H200, the edge tiles set the time). `any_shift`: the operand's copies have no alignment to
/// keep (k-contiguous, or copied a float at a time); otherwise the tile only moves by a
/// multiple of 4, which keeps its 16-byte vectors aligned.
pub const fn tile_origin_inside(start: u32, total: u32, tile: u32, any_shift: bool) -> u32 {
    if start + tile > total && total >= tile && (any_shift || (total - tile) % 4 == 0) {
        total - tile
    } else {
        start
    }
}

/// The slice of k (first index, length) of block `split` of `splits` in a k-split launch:
/// block `s` takes k-steps (of `bk`) `⌊s·steps/splits⌋ .. ⌊(s+1)·steps/splits⌋`, so slices
/// differ by at most one k-step, none is empty while there are at least as many k-steps as
/// blocks, and the last slice ends with the partial k-step (if k is not a multiple of `bk`).
pub const fn k_slice(k: u32, bk: u32, split: u32, splits: u32) -> (u32, u32) {
    let steps = k.div_ceil(bk) as u64;
    let splits = if splits == 0 { 1 } else { splits as u64 };
    let first = (split as u64 * steps / splits) * bk as u64;
    let end = ((split as u64 + 1) * steps / splits) * bk as u64;
    let k = k as u64;
    let first = if first < k { first } else { k };
    let end = if end < k { end } else { k };
    (first as u32, (end - first) as u32)
}

/// One SGEMM kernel variant's tile shape and pipeline depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SgemmTile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub tm: u32,
    pub tn: u32,
    pub lanes_m: u32,
    pub stages: u32,
    pub blocks_per_sm: u32,
}

/// The kernel variants every architecture provides. Each becomes one PTX entry point,
/// `cukernels_sgemm_<name>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SgemmVariant {
    /// Biggest tile: most FLOPs per shared-memory byte; for large problems that fill the GPU.
    Huge,
    /// The workhorse for mid-size and large problems.
    Large,
    /// For problems whose large-tile grid would leave SMs idle, and for batched mid-size GEMMs.
    Medium,
    /// For small matrices (batched 64³ and the like): many blocks, short k.
    Small,
    /// For few rows of C (m ≤ 16): 16-row tiles; for few columns, the same turned around
    /// ([`SgemmVariant::can_turn`]).
    Skinny,
    /// For at most [`GEMV_MAX_M`] rows of C: not a tile kernel but a streaming one (one column
    /// of C per lane, k split across the warps of a block), bound by reading B once at full
    /// memory bandwidth. Larger m runs in groups of `GEMV_MAX_M` rows (correct, not fast).
    Gemv,
    /// For problems far smaller than any tile (tens of thousands of 8×8 products) and for a
    /// short k (C written from a few products per element): not a tile kernel either. Each
    /// thread computes a [`TINY_TILE`]² piece of C straight from global memory, so one block
    /// holds pieces of many problems ([`TinyConfig`]).
    Tiny,
}

impl SgemmVariant {
    /// Every variant.
    pub const ALL: [SgemmVariant; 7] = [
        SgemmVariant::Huge,
        SgemmVariant::Large,
        SgemmVariant::Medium,
        SgemmVariant::Small,
        SgemmVariant::Skinny,
        SgemmVariant::Gemv,
        SgemmVariant::Tiny,
    ];
    /// The variants that are block-tile kernels (they have an [`SgemmTile`]).
    pub const TILED: [SgemmVariant; 5] = [
        SgemmVariant::Huge,
        SgemmVariant::Large,
        SgemmVariant::Medium,
        SgemmVariant::Small,
        SgemmVariant::Skinny,
    ];

    /// Whether the variant's kernels can run a problem turned around: `Cᵀ = op(B)ᵀ · op(A)ᵀ`,
    /// the operands swapped and C written transposed (`C_TRANSPOSED`). Only the one tile that
    /// is not square: `skinny`'s 16 rows then lie along the caller's n, so a problem with few
    /// columns and many rows (m = 2248, n = 23) fills 16-row tiles instead of padding 64-wide
    /// ones. (`gemv` turns too, by its own rule.)
    pub const fn can_turn(self) -> bool {
        matches!(self, SgemmVariant::Skinny)
    }

    pub const fn name(self) -> &'static str {
        match self {
            SgemmVariant::Huge => "huge",
            SgemmVariant::Large => "large",
            SgemmVariant::Medium => "medium",
            SgemmVariant::Small => "small",
            SgemmVariant::Skinny => "skinny",
            SgemmVariant::Gemv => "gemv",
            SgemmVariant::Tiny => "tiny",
        }
    }
}

/// How the canonical A (`m × k`) and B (`k × n`) are stored: `N` means as a row-major
/// product expects (A k-contiguous, B n-contiguous), `T` the transpose (A m-contiguous, B
/// k-contiguous). Every variant is compiled once per combination, so the copy code has no
/// run-time layout branches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SgemmOperands {
    Nn,
    Nt,
    Tn,
    Tt,
}

impl SgemmOperands {
    pub const ALL: [SgemmOperands; 4] = [SgemmOperands::Nn, SgemmOperands::Nt, SgemmOperands::Tn, SgemmOperands::Tt];

    pub const fn new(a_k_contiguous: bool, b_k_contiguous: bool) -> SgemmOperands {
        match (a_k_contiguous, b_k_contiguous) {
            (true, false) => SgemmOperands::Nn,
            (true, true) => SgemmOperands::Nt,
            (false, false) => SgemmOperands::Tn,
            (false, true) => SgemmOperands::Tt,
        }
    }
    /// A's element (i, p) is at `a[i·lda + p]`; otherwise at `a[p·lda + i]`.
    pub const fn a_k_contiguous(self) -> bool {
        matches!(self, SgemmOperands::Nn | SgemmOperands::Nt)
    }
    /// B's element (p, j) is at `b[j·ldb + p]`; otherwise at `b[p·ldb + j]`.
    pub const fn b_k_contiguous(self) -> bool {
        matches!(self, SgemmOperands::Nt | SgemmOperands::Tt)
    }
}

/// One PTX entry point: a variant compiled for one operand layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SgemmKernel {
    pub variant: SgemmVariant,
    pub operands: SgemmOperands,
    pub entry_point: &'static str,
}

/// Calls `$callback! { (entry_point, Variant, Operands), ... }` with every SGEMM entry point:
/// the one list from which both the device crate defines its kernels and the host names them.
#[macro_export]
macro_rules! with_sgemm_kernels {
    ($callback:ident) => {
        $callback! {
            (cukernels_sgemm_huge_nn, Huge, Nn), (cukernels_sgemm_huge_nt, Huge, Nt),
            (cukernels_sgemm_huge_tn, Huge, Tn), (cukernels_sgemm_huge_tt, Huge, Tt),
            (cukernels_sgemm_large_nn, Large, Nn), (cukernels_sgemm_large_nt, Large, Nt),
            (cukernels_sgemm_large_tn, Large, Tn), (cukernels_sgemm_large_tt, Large, Tt),
            (cukernels_sgemm_medium_nn, Medium, Nn), (cukernels_sgemm_medium_nt, Medium, Nt),
            (cukernels_sgemm_medium_tn, Medium, Tn), (cukernels_sgemm_medium_tt, Medium, Tt),
            (cukernels_sgemm_small_nn, Small, Nn), (cukernels_sgemm_small_nt, Small, Nt),
            (cukernels_sgemm_small_tn, Small, Tn), (cukernels_sgemm_small_tt, Small, Tt),
            (cukernels_sgemm_skinny_nn, Skinny, Nn), (cukernels_sgemm_skinny_nt, Skinny, Nt),
            (cukernels_sgemm_skinny_tn, Skinny, Tn), (cukernels_sgemm_skinny_tt, Skinny, Tt),
            (cukernels_sgemm_gemv_nn, Gemv, Nn), (cukernels_sgemm_gemv_nt, Gemv, Nt),
            (cukernels_sgemm_gemv_tn, Gemv, Tn), (cukernels_sgemm_gemv_tt, Gemv, Tt),
            (cukernels_sgemm_tiny_nn, Tiny, Nn), (cukernels_sgemm_tiny_nt, Tiny, Nt),
            (cukernels_sgemm_tiny_tn, Tiny, Tn), (cukernels_sgemm_tiny_tt, Tiny, Tt)
        }
    };
}

macro_rules! kernel_table {
    ($(($name:ident, $variant:ident, $operands:ident)),*) => {
        /// Every SGEMM entry point of every PTX module.
        pub const SGEMM_KERNELS: &[SgemmKernel] = &[$(SgemmKernel {
            variant: SgemmVariant::$variant,
            operands: SgemmOperands::$operands,
            entry_point: stringify!($name),
        }),*];
    };
}
with_sgemm_kernels!(kernel_table);

/// The position in [`SGEMM_KERNELS`] of the entry point of `variant` for `operands`.
pub fn sgemm_kernel_index(variant: SgemmVariant, operands: SgemmOperands) -> usize {
    SGEMM_KERNELS
        .iter()
        .position(|k| k.variant == variant && k.operands == operands)
        .expect("every (variant, operands) pair has an entry point")
}

/// The entry point of `variant` for `operands`.
pub fn sgemm_kernel(variant: SgemmVariant, operands: SgemmOperands) -> &'static SgemmKernel {
    &SGEMM_KERNELS[sgemm_kernel_index(variant, operands)]
}

/// One architecture's row of the SGEMM table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SgemmArchConfig {
    pub arch: Arch,
    pub huge: SgemmTile,
    pub large: SgemmTile,
    pub medium: SgemmTile,
    pub small: SgemmTile,
    pub skinny: SgemmTile,
    pub gemv: GemvConfig,
    pub tiny: TinyConfig,
}

/// What a launch of one variant needs, whatever its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub threads: u32,
    pub smem_bytes: u32,
    /// Shared memory of a k-split launch ([`SgemmTile::split_k_smem_bytes`]); the most any
    /// launch of this variant asks for.
    pub split_k_smem_bytes: u32,
    /// Designed occupancy: becomes the kernel's launch bound.
    pub blocks_per_sm: u32,
}

impl SgemmArchConfig {
    /// The tile of a block-tile variant (every variant but [`SgemmVariant::Gemv`] and
    /// [`SgemmVariant::Tiny`]).
    pub const fn tile(&self, variant: SgemmVariant) -> SgemmTile {
        match variant {
            SgemmVariant::Huge => self.huge,
            SgemmVariant::Large => self.large,
            SgemmVariant::Medium => self.medium,
            SgemmVariant::Small => self.small,
            SgemmVariant::Skinny => self.skinny,
            SgemmVariant::Gemv => panic!("gemv is not a block-tile kernel"),
            SgemmVariant::Tiny => panic!("tiny is not a block-tile kernel"),
        }
    }

    /// Threads, shared memory and designed blocks per SM of any variant.
    pub const fn launch(&self, variant: SgemmVariant) -> LaunchShape {
        match variant {
            SgemmVariant::Gemv => LaunchShape {
                threads: self.gemv.threads(),
                smem_bytes: self.gemv.smem_bytes(),
                split_k_smem_bytes: self.gemv.smem_bytes(),
                blocks_per_sm: self.gemv.blocks_per_sm,
            },
            SgemmVariant::Tiny => LaunchShape {
                threads: self.tiny.threads(),
                smem_bytes: 0,
                split_k_smem_bytes: 0,
                blocks_per_sm: self.tiny.blocks_per_sm,
            },
            _ => {
                let t = self.tile(variant);
                LaunchShape {
                    threads: t.threads(),
                    smem_bytes: t.smem_bytes(),
                    split_k_smem_bytes: if t.can_split_k(&self.arch.limits()) { t.split_k_smem_bytes() } else { t.smem_bytes() },
                    blocks_per_sm: t.blocks_per_sm,
                }
            }
        }
    }
}

/// Most rows of C one pass of the `gemv` kernel computes (its accumulators per lane).
pub const GEMV_MAX_M: u32 = 8;
/// Columns of C per `gemv` block: one per lane of a warp.
pub const GEMV_COLUMNS: u32 = 32;

/// The `gemv` kernel's config (`kernels-gpu/src/device/gemv.rs`). Its two bodies share the
/// block shape: the *column* body (B n-contiguous) splits k over the `warps` warps, each
/// keeping `unroll` loads of B in flight; the *dot* body (B k-contiguous: weights stored
/// `[out, in]`) gives each warp `dot_columns` rows of B to stream with `dot_unroll` 16-byte
/// loads in flight per row and lane, and splits k over [`dot_k_warps`](Self::dot_k_warps)
/// warps when k is long. Partial sums meet in shared memory at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvConfig {
    pub warps: u32,
    /// Loads of B in flight per lane when m ≥ 3 (each needs m values of A beside it).
    pub unroll: u32,
    /// Loads in flight per lane for m ≤ 2, where registers allow more.
    pub unroll_narrow: u32,
    /// Dot body: columns of C (rows of B) per warp; A's values loaded once serve all of them.
    pub dot_columns: u32,
    /// Dot body: chunks of 4 k (one 16-byte load) per row of B and lane in flight.
    pub dot_unroll: u32,
    pub blocks_per_sm: u32,
}

/// The dot body's least k per warp: below it, splitting k further over the warps of a block
/// would leave lanes with less than a couple of chunks each and add a shared-memory reduction
/// for nothing. 1024 = 8 chunks of 4 per lane.
pub const GEMV_DOT_MIN_K_PER_WARP: u32 = 1024;
/// The dot body splits k over more warps only while the whole grid has fewer warps than this:
/// with enough columns, one warp per column group streams its rows from end to end with no
/// barrier and no shared-memory reduction. 8192 warps are four waves of one 16-warp block on
/// each of the H200's 132 SMs (the dot body runs one block per SM: 128 registers a thread).
/// Measured on the H200 (1 × 32000 × 4096, B `[out, in]`): k over 4 warps, 3.1 TB/s.
pub const GEMV_DOT_FILL_WARPS: u64 = 8192;

impl GemvConfig {
    pub const fn threads(&self) -> u32 {
        self.warps * 32
    }
    /// The partial sums of every warp: `warps × GEMV_MAX_M × 32` floats (the column body;
    /// the dot body needs `warps × GEMV_MAX_M × dot_columns`, checked to fit).
    pub const fn smem_bytes(&self) -> u32 {
        self.warps * GEMV_MAX_M * GEMV_COLUMNS * 4
    }
    /// Dot body: warps that share one group of `dot_columns` of the `n` columns, each taking a
    /// contiguous slice of k: the largest power of two up to `warps` that leaves every warp at
    /// least [`GEMV_DOT_MIN_K_PER_WARP`] of k and the grid under [`GEMV_DOT_FILL_WARPS`]
    /// warps (1 for short k or many columns). The host sizes the grid with the same function.
    pub const fn dot_k_warps(&self, n: u32, k: u32) -> u32 {
        let groups = n.div_ceil(self.dot_columns) as u64;
        let mut w = 1;
        while w * 2 <= self.warps
            && (w * 2) as u64 * GEMV_DOT_MIN_K_PER_WARP as u64 <= k as u64
            && groups * (w * 2) as u64 <= GEMV_DOT_FILL_WARPS
        {
            w *= 2;
        }
        w
    }
    /// Dot body, 16-byte chunks (A k-contiguous, B's rows aligned): chunks in flight per
    /// row of B and lane for `m` rows of A in a pass: `dot_unroll`, twice as many for m ≤ 2,
    /// where the values of A take few registers (as the column body's `unroll_narrow`).
    pub const fn dot_unroll_for_rows(&self, m: u32) -> u32 {
        if m <= 2 { 2 * self.dot_unroll } else { self.dot_unroll }
    }
    /// Dot body, chunks of one float per lane (an m-contiguous A, whose values for one k are M
    /// floats apart from the next k's, or rows not 16-byte aligned): loads of B in flight per
    /// row and lane. Twice `dot_unroll` for an m-contiguous A: read in 16-byte chunks of k, it
    /// cost 4·M scalar loads per chunk, which ptxas hoisted next to B's (sm_90 spilled at two
    /// chunks) and left a quarter of the loads in flight (0.97 TB/s for 16384 × 4 × 16384).
    /// `dot_unroll` for a k-contiguous A with unaligned rows (twice spilled 40 bytes, sm_90).
    pub const fn dot_unroll_scalar(&self, a_k_contiguous: bool) -> u32 {
        if a_k_contiguous { self.dot_unroll } else { 2 * self.dot_unroll }
    }
    /// Dot body: columns of C one block computes for a given n and k.
    pub const fn dot_columns_per_block(&self, n: u32, k: u32) -> u32 {
        self.warps / self.dot_k_warps(n, k) * self.dot_columns
    }
    pub const fn check(&self, arch: Arch) -> Result<(), &'static str> {
        let l = arch.limits();
        if self.warps < GEMV_MAX_M || self.threads() > 1024 || !self.warps.is_power_of_two() {
            return Err("gemv: a power of two from GEMV_MAX_M to 32 warps per block (warp i finalizes row i)");
        }
        if self.unroll == 0 || self.unroll > 16 || self.unroll_narrow < self.unroll || self.unroll_narrow > 32 {
            return Err("gemv: unroll 1..=16, unroll_narrow unroll..=32");
        }
        // (dot_columns ≤ 4 also keeps the dot body's partial sums inside `smem_bytes`.)
        if self.dot_columns == 0 || self.dot_columns > 4 || self.dot_unroll == 0 || self.dot_unroll > 8 {
            return Err("gemv: dot_columns 1..=4 and dot_unroll 1..=8 (registers: columns x unroll x 4 loaded values per lane)");
        }
        if self.blocks_per_sm == 0 || self.threads() * self.blocks_per_sm > l.max_threads_per_sm {
            return Err("gemv: blocks_per_sm x threads exceeds the threads an SM can hold");
        }
        if self.blocks_per_sm * (self.smem_bytes() + l.reserved_smem_per_block) > l.smem_per_sm {
            return Err("gemv: blocks_per_sm x shared memory exceeds the SM's shared memory");
        }
        let budget = l.regs_per_sm / (self.threads() * self.blocks_per_sm);
        if budget < 32 + GEMV_MAX_M + self.unroll
            || budget < 32 + GEMV_MAX_M * self.dot_columns + 4 * self.dot_columns * self.dot_unroll
            || budget < 32 + 2 * self.dot_columns + 4 * self.dot_columns * self.dot_unroll_for_rows(2)
        {
            return Err("gemv: register budget below what the accumulators and loads in flight need");
        }
        Ok(())
    }
}

/// Rows and columns of C each thread of the `tiny` kernel computes (its `TINY_TILE²`
/// accumulators): 4 so that a row of the piece is one 16-byte load or store wherever the
/// operand's contiguous direction and alignment allow.
pub const TINY_TILE: u32 = 4;
/// The `tiny` kernel can give each piece of C a team of lanes that split k between them
/// ([`TinyConfig::team_lanes`]), each lane taking at least this many products: below it, the
/// butterfly that adds the team's partial sums (`TINY_TILE²` values per level) costs more
/// than the products it shares out.
pub const TINY_K_PER_LANE: u32 = 8;

/// The `tiny` kernel's config (`kernels-gpu/src/device/tiny.rs`): `warps` per block,
/// `unroll` k-steps of loads in flight per lane, the occupancy its launch bound asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TinyConfig {
    pub warps: u32,
    pub unroll: u32,
    pub blocks_per_sm: u32,
    /// Where C's rows are not 16-byte aligned, one-lane pieces are stored across the warp's
    /// lanes (shuffles), so that each store instruction writes consecutive floats
    /// (`device/tiny.rs`, `store_piece_across_lanes`); otherwise each lane stores its own
    /// four-float runs, 16 bytes apart.
    pub stores_across_lanes: bool,
}

impl TinyConfig {
    pub const fn threads(&self) -> u32 {
        self.warps * 32
    }
    /// 128-byte lines one warp's load of A plus one of B touches when teams of `lanes` lanes
    /// share each piece (`pieces_n` pieces per row of pieces; a warp takes `32 / lanes`
    /// consecutive pieces). A team's lanes read consecutive k: one line along a k-contiguous
    /// operand, `lanes` lines across an m- or n-contiguous one. The warp's pieces share rows of
    /// A where they lie in one row of pieces, and columns of B where they lie in one column.
    pub const fn warp_lines(lanes: u32, operands: SgemmOperands, pieces_n: u32) -> u32 {
        let pieces_per_warp = 32 / lanes;
        let pieces_n = if pieces_n == 0 { 1 } else { pieces_n };
        let a = if operands.a_k_contiguous() { pieces_per_warp.div_ceil(pieces_n) } else { lanes };
        let b = if operands.b_k_contiguous() { if pieces_per_warp < pieces_n { pieces_per_warp } else { pieces_n } } else { lanes };
        a + b
    }
    /// Lanes that share one piece of C, each taking every `lanes`-th k: a power of two up to
    /// 32 that leaves each lane at least [`TINY_K_PER_LANE`] of k, the one whose loads touch
    /// the fewest lines ([`warp_lines`](Self::warp_lines); the smaller on a tie), then doubled
    /// while `pieces` (of which `pieces_n` per row) give the GPU fewer than a quarter of the
    /// `resident_threads` it holds at once. The host passes the result in `flags`.
    pub const fn team_lanes(k: u32, operands: SgemmOperands, pieces_n: u32, pieces: u64, resident_threads: u64) -> u32 {
        let mut most = 1;
        while most < 32 && 2 * most * TINY_K_PER_LANE <= k {
            most *= 2;
        }
        let (mut lanes, mut fewest) = (1, Self::warp_lines(1, operands, pieces_n));
        let mut l = 2;
        while l <= most {
            let lines = Self::warp_lines(l, operands, pieces_n);
            if lines < fewest {
                (lanes, fewest) = (l, lines);
            }
            l *= 2;
        }
        while lanes < most && pieces.saturating_mul(4 * lanes as u64) < resident_threads {
            lanes *= 2;
        }
        lanes
    }
    pub const fn check(&self, arch: Arch) -> Result<(), &'static str> {
        let l = arch.limits();
        if self.warps == 0 || self.threads() > 1024 {
            return Err("tiny: 1 to 32 warps per block");
        }
        if self.unroll == 0 || self.unroll > 8 {
            return Err("tiny: unroll 1..=8");
        }
        if self.blocks_per_sm == 0 || self.threads() * self.blocks_per_sm > l.max_threads_per_sm {
            return Err("tiny: blocks_per_sm x threads exceeds the threads an SM can hold");
        }
        // Accumulators, `unroll` k-steps of a row and a column of the piece, 2 × 8 for the
        // piece's line addresses, ~16 for indices and loop counters.
        let need = TINY_TILE * TINY_TILE + self.unroll * 2 * TINY_TILE + 32;
        if l.regs_per_sm / (self.threads() * self.blocks_per_sm) < need {
            return Err("tiny: register budget below what the accumulators and loads in flight need");
        }
        Ok(())
    }
}

/// `tiny` on every architecture but sm_70: 8 warps, three blocks per SM (768 threads, which every
/// architecture holds, 85 registers a thread), 2 k-steps of loads in flight per lane. With 4,
/// ptxas 12.9 spilled 12-172 bytes on sm_90 at this bound (the 16 accumulators, 32 loaded
/// values and a piece's 8 line addresses). The loads are L1 and L2 hits for the small operands
/// this kernel takes; not tuned per architecture.
///
/// Stores across lanes: on the H100, over 15 of the randomized sweep's shapes where `tiny`
/// runs with C unaligned, 1.21x faster (up to 1.87x; `benches/results/NOTES.md`).
const TINY: TinyConfig = TinyConfig { warps: 8, unroll: 2, blocks_per_sm: 3, stores_across_lanes: true };
/// sm_80, sm_86 and sm_89: as [`TINY`] but storing each lane's runs itself. With the stores
/// across lanes, ptxas 12.9 spilled 8-16 bytes (`nn`, `tt`) at these targets' 80 registers
/// (three blocks of 256), where sm_90's did not.
const TINY_AMPERE: TinyConfig = TinyConfig { stores_across_lanes: false, ..TINY };
/// `tiny` on sm_70: two blocks per SM (128 registers a thread). At three, ptxas 12.9 for sm_70
/// spilled 72-104 bytes (nn, tn, tt) with two k-steps of loads in flight, and 4-16 bytes with
/// one. Not measured on a V100.
const TINY_VOLTA: TinyConfig = TinyConfig { blocks_per_sm: 2, ..TINY };

impl SgemmTile {
    /// Tiles (blocks) that cover an `m × n` C: partial tiles at the edges count as whole.
    pub const fn tile_count(&self, m: usize, n: usize) -> u64 {
        m.div_ceil(self.bm as usize) as u64 * n.div_ceil(self.bn as usize) as u64
    }
    /// Threads per block: one per thread tile.
    pub const fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }
    pub const fn lanes_n(&self) -> u32 {
        32 / self.lanes_m
    }
    pub const fn warp_tile_m(&self) -> u32 {
        self.lanes_m * self.tm
    }
    pub const fn warp_tile_n(&self) -> u32 {
        self.lanes_n() * self.tn
    }
    /// Dynamic shared memory of one block, in bytes: `stages` copies of the A and B slices.
    pub const fn smem_bytes(&self) -> u32 {
        self.stages * self.bk * ((self.bm + SMEM_ROW_PAD) + (self.bn + SMEM_ROW_PAD)) * 4
    }
    /// Dynamic shared memory of one block of a k-split launch (architectures with clusters):
    /// the blocks of a cluster share one C tile, each computing a slice of k, then each block
    /// leaves its partial tile (`bm × (bn + SMEM_ROW_PAD)` floats) in its shared memory, where
    /// the others read it. The partial tile reuses the pipeline's buffers, so a block needs
    /// whichever of the two is larger.
    pub const fn split_k_smem_bytes(&self) -> u32 {
        let partial_tile = self.bm * (self.bn + SMEM_ROW_PAD) * 4;
        if partial_tile > self.smem_bytes() {
            partial_tile
        } else {
            self.smem_bytes()
        }
    }
    /// Whether a block whose tile would reach past the edge of C moves its tile back inside
    /// (and stores only the part it owns, [`tile_origin_inside`]), so that its copies need no
    /// bounds tests and, where the tile has one, it runs the fast k loop. For tiles up to
    /// [`SMALL_TILE_MAX_ELEMENTS`]: measured on the H200, `medium` at 1000³ 71.5 → 63.4 µs
    /// (1.0× the 1024³ time); for the 128-wide tiles the extra code cost `huge` 1-2% at
    /// 4096³ and 8192³ (ptxas allocates the main loop's registers differently), and their
    /// problems are big enough that edge tiles matter less.
    pub const fn moves_edge_tiles(&self) -> bool {
        self.bm * self.bn <= SMALL_TILE_MAX_ELEMENTS
    }

    /// Whether the kernel of this tile can split its k range over blocks (on every
    /// architecture, through a workspace): tiles up to [`SMALL_TILE_MAX_ELEMENTS`]. A problem
    /// worth a k split has too few tiles to fill the GPU, where the small tiles are the ones
    /// that fit; in the 128-wide tiles the slice bounds, live through the main loop, made
    /// ptxas spill on sm_70 (where they hold 128 registers).
    pub const fn splits_k(&self) -> bool {
        self.bm * self.bn <= SMALL_TILE_MAX_ELEMENTS
    }

    /// Whether the kernel of this tile can also split its k range over a cluster, adding the
    /// partial tiles through distributed shared memory (no workspace): it [`splits_k`](Self::splits_k), the
    /// architecture has clusters, and its partial tile fits in a block's shared memory.
    pub const fn can_split_k(&self, limits: &ArchLimits) -> bool {
        limits.has_clusters && self.splits_k() && self.split_k_smem_bytes() <= limits.max_smem_per_block
    }
    /// Floats of A (resp. B) each thread moves per k-step; also the size of the register
    /// staging buffer of the double-buffered (pre-sm_80) pipeline.
    pub const fn a_elems_per_thread(&self) -> u32 {
        self.bm * self.bk / self.threads()
    }
    pub const fn b_elems_per_thread(&self) -> u32 {
        self.bn * self.bk / self.threads()
    }

    /// Whether the kernel's inner loop over `kk` is the register-pipelined rolled loop (see
    /// `compute_stage` in `device/sgemm.rs`) rather than fully unrolled. Measured on the H200:
    /// for 8×8 thread tiles the pipelined loop is 8-10% faster (`large` at 8192³: 41.4 → 45.6
    /// TFLOP/s); for 8×16 tiles, which hold 128 accumulators near the 255-register cap, ptxas
    /// sinks the early loads back next to their use and the rolled form lost 2-4%; for 4×4
    /// tiles the loop's own instructions (7 per 32 FMAs) cost more than they save.
    pub const fn pipelined_fragments(&self) -> bool {
        self.tm * self.tn == 64
    }

    /// Whether, on the `cp.async` pipeline, each k-step reads its first kk's fragments from
    /// shared memory right after the barrier, before issuing the copies of a later k-step (see
    /// `sgemm` in `device/sgemm.rs`), so that their latency hides behind the copy code. Those
    /// `TM + TN` values then stay live through the copy code, beside the accumulators and the
    /// next fragments, so only tiles whose register budget leaves
    /// [`EARLY_FRAGMENT_SPARE_REGISTERS`] beyond that do it. Measured on the H200 (8192³):
    /// `huge` 44.2 → 48.8 TFLOP/s and `medium` 42.2 → 43.2 with it; `large`, at its budget of
    /// 128, 46.5 → 43.5, so `large` does not.
    pub const fn reads_first_fragments_early(&self, limits: &ArchLimits) -> bool {
        let needed = self.tm * self.tn + 2 * (self.tm + self.tn) + EARLY_FRAGMENT_SPARE_REGISTERS;
        self.register_budget(limits) >= needed
    }

    /// Whether, on the `cp.async` pipeline, the kernel splits its k loop in two: a fast loop
    /// for the k-steps whose copies need no bounds tests, then the checked loop (see "Two k
    /// loops" in `device/sgemm.rs`). The two loop bodies cost registers: at a budget of 128,
    /// 8×8 tiles spilled (the `tn` layout, whose two operands both have vector and scalar
    /// copy plans), so the fast loop goes with the same register rule as the early read.
    /// Measured on the H200: `huge` 48.3 → 50.7 TFLOP/s at 4096³ (with its B copies moved to
    /// kk = 2, `B_COPIES_AT_KK` in `device/sgemm.rs`), `medium` 30.7 → 32.8 at 1024³.
    pub const fn has_fast_loop(&self, limits: &ArchLimits) -> bool {
        self.reads_first_fragments_early(limits)
    }

    /// Registers per thread that still allow `blocks_per_sm` resident blocks: registers are
    /// given to warps in units of 256 (8 per thread), hence the rounding down to a multiple of 8.
    pub const fn register_budget(&self, limits: &ArchLimits) -> u32 {
        let per_thread = limits.regs_per_sm / (self.threads() * self.blocks_per_sm);
        let rounded = per_thread / 8 * 8;
        if rounded > limits.max_regs_per_thread {
            limits.max_regs_per_thread
        } else {
            rounded
        }
    }

    /// Rows of each lane's accumulators a warp stages in shared memory at a time to store C
    /// where C's rows are not 16-byte aligned (0: it does not; see "Epilogue" in
    /// `device/sgemm.rs`). A thread's four columns of a row are then stored one float at a
    /// time, and a warp's store instruction spread 32 floats over `lanes_m` rows at 16-byte
    /// steps: 16-20 memory sectors for 128 bytes. Staged through shared memory, each store
    /// instruction writes 32 consecutive floats of one row (4 sectors). The stage buffers are
    /// idle by then; all `tm` rows at once where they fit, else 4 or 1 per pass. Not for tiles
    /// past [`STAGED_STORES_MAX_ACCUMULATORS`] or shorter than [`STAGED_STORES_MIN_TILE_ROWS`],
    /// nor for the register-double-buffered
    /// pipeline (no `cp.async`) at a budget of 128 registers: ptxas 12.9 spilled 16-232 bytes
    /// in sm_70's and sm_75's `large` with the staging code.
    pub const fn store_staging_rows(&self, limits: &ArchLimits) -> u32 {
        if self.tm * self.tn > STAGED_STORES_MAX_ACCUMULATORS
            || self.bm < STAGED_STORES_MIN_TILE_ROWS
            || (!limits.has_cp_async && self.register_budget(limits) <= 128)
        {
            return 0;
        }
        if self.store_staging_bytes(self.tm) <= self.smem_bytes() {
            self.tm
        } else if self.store_staging_bytes(4) <= self.smem_bytes() {
            4
        } else if self.store_staging_bytes(1) <= self.smem_bytes() {
            1
        } else {
            0
        }
    }

    /// Shared memory the staged epilogue takes with `rows` rows of each lane's accumulators
    /// per pass: every warp stages `lanes_m × rows` rows of its warp tile, each padded as the
    /// stage buffers' rows are.
    pub const fn store_staging_bytes(&self, rows: u32) -> u32 {
        (self.threads() / 32) * self.lanes_m * rows * (self.warp_tile_n() + SMEM_ROW_PAD) * 4
    }

    /// Resident blocks per SM that shared memory alone allows.
    pub const fn blocks_by_smem(&self, limits: &ArchLimits) -> u32 {
        limits.smem_per_sm / (self.smem_bytes() + limits.reserved_smem_per_block)
    }

    /// Checks this tile against the kernel's structural rules and the architecture's limits.
    /// `const` so that the table below fails to compile when a row is wrong.
    pub const fn check(&self, arch: Arch) -> Result<(), &'static str> {
        let l = arch.limits();
        let t = self.threads();
        if self.tm % 4 != 0 || self.tn % 4 != 0 || self.tm == 0 || self.tn == 0 {
            return Err("thread tile must be made of 4x4 sub-tiles");
        }
        if !matches!(self.lanes_m, 1 | 2 | 4 | 8 | 16 | 32) {
            return Err("lanes_m must divide 32");
        }
        if self.bm % self.warp_tile_m() != 0 || self.bn % self.warp_tile_n() != 0 {
            return Err("block tile must be a whole number of warp tiles");
        }
        if t % 32 != 0 || t > 1024 {
            return Err("threads per block must be a multiple of 32 and at most 1024");
        }
        if self.bk % 4 != 0 || self.bk == 0 {
            return Err("bk must be a multiple of 4");
        }
        // Loader rules (see sgemm.rs, "Loading a tile"): every thread moves the same number of
        // copy units per k-step, and each thread's units share one row or column index, so
        // their addresses are one base plus a constant step.
        if (self.bm * self.bk) % (4 * t) != 0 || (self.bn * self.bk) % (4 * t) != 0 {
            return Err("each thread must copy whole 16-byte vectors of A and B per k-step");
        }
        if t % self.bk != 0 || t % self.bm != 0 || t % self.bn != 0 {
            return Err("threads per block must be a multiple of bk, bm and bn");
        }
        if t % (self.bm / 4) != 0 || t % (self.bn / 4) != 0 {
            return Err("threads per block must be a multiple of bm/4 and bn/4");
        }
        if l.has_cp_async {
            if self.stages < 2 {
                return Err("a cp.async pipeline needs at least 2 stages");
            }
        } else if self.stages != 2 {
            return Err("without cp.async the pipeline is a register double buffer: stages = 2");
        }
        if self.smem_bytes() > l.max_smem_per_block {
            return Err("shared memory exceeds the architecture's per-block limit");
        }
        if self.blocks_per_sm == 0 || self.blocks_per_sm > l.max_blocks_per_sm {
            return Err("blocks_per_sm out of range");
        }
        if t * self.blocks_per_sm > l.max_threads_per_sm {
            return Err("blocks_per_sm x threads exceeds the threads an SM can hold");
        }
        if self.blocks_by_smem(&l) < self.blocks_per_sm {
            return Err("blocks_per_sm x shared memory exceeds the SM's shared memory");
        }
        if self.can_split_k(&l) && self.blocks_per_sm * (self.split_k_smem_bytes() + l.reserved_smem_per_block) > l.smem_per_sm {
            return Err("a k-split launch's partial tile would lower the designed blocks per SM");
        }
        let staged_rows = self.store_staging_rows(&l);
        if staged_rows > 0 {
            // The read-back: each lane takes columns `lane + 32·c` of a staged row.
            if self.warp_tile_n() % 32 != 0 || STAGED_STORES_IN_FLIGHT % (self.warp_tile_n() / 32) != 0 {
                return Err("staged epilogue: the warp tile's width must be 32 columns times a divisor of STAGED_STORES_IN_FLIGHT (a trip stores whole rows)");
            }
            if self.tm % staged_rows != 0 || !(staged_rows == 1 || staged_rows % 4 == 0) || self.store_staging_bytes(staged_rows) > self.smem_bytes() {
                return Err("staged epilogue: the staged rows must be 1 or a multiple of 4, divide tm and fit in the stage buffers");
            }
        }
        if self.register_budget(&l) < 64 {
            return Err("register budget below 64 per thread: the accumulators would spill");
        }
        if self.tm * self.tn + 24 > self.register_budget(&l) {
            return Err("accumulators alone exceed the register budget");
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
const fn tile(bm: u32, bn: u32, bk: u32, tm: u32, tn: u32, lanes_m: u32, stages: u32, blocks_per_sm: u32) -> SgemmTile {
    SgemmTile { bm, bn, bk, tm, tn, lanes_m, stages, blocks_per_sm }
}

// Tiles shared by several rows. Each row below says why it takes what it takes.

/// 128×256, 8×16 per thread (128 accumulators), 256 threads, one block per SM: the highest
/// FFMA-to-shared-load ratio (6 vector loads per 128 FMAs), for problems large enough to fill
/// every SM with a single block. The fastest variant on the H200 for such problems (8192³:
/// 51.0 TFLOP/s, against 46.3 for `large`).
const fn huge(bk: u32, stages: u32) -> SgemmTile {
    tile(128, 256, bk, 8, 16, 4, stages, 1)
}
/// 128×128, 8×8 per thread, 256 threads, two blocks per SM (128 registers a thread): while one
/// block waits at its barrier the other computes, and four warps per scheduler hide the
/// shared-memory latency its register-pipelined inner loop leaves.
const fn large(bk: u32, stages: u32) -> SgemmTile {
    tile(128, 128, bk, 8, 8, 4, stages, 2)
}
/// 64×64, 8×8 per thread, 64 threads: four times as many blocks as `large` for mid-size and
/// batched problems.
const fn medium(bk: u32, stages: u32, blocks_per_sm: u32) -> SgemmTile {
    tile(64, 64, bk, 8, 8, 4, stages, blocks_per_sm)
}
/// 32×32, 4×4 per thread, 64 threads: for 64×64-sized matrices in large batches (sm_90 and
/// sm_100 use a 64×64 tile instead: see their rows).
const fn small(bk: u32, stages: u32, blocks_per_sm: u32) -> SgemmTile {
    tile(32, 32, bk, 4, 4, 4, stages, blocks_per_sm)
}
/// 16×64, 4×4 per thread, 64 threads, deep k-steps: m ≤ 16 is memory-bound on B, so what
/// matters is many blocks with many bytes in flight.
const fn skinny(bk: u32, stages: u32, blocks_per_sm: u32) -> SgemmTile {
    tile(16, 64, bk, 4, 4, 4, stages, blocks_per_sm)
}

/// `gemv` on sm_90 and sm_100: 16 warps (512 threads) with 8 loads of B in flight each (16
/// for m ≤ 2) keep 16 to 32 KB in flight per block for HBM3/HBM3e. One block per SM leaves 128
/// registers a thread, which the up to 8 × 8 broadcast values of A loaded ahead of their FMAs
/// need (at 2 blocks, 64 registers, ptxas spilled). The dot body streams 2 rows of B per warp
/// with 4 16-byte loads each in flight: 128 bytes per lane, 64 KB per block (Little's law at
/// ~4.8 TB/s and ~1 µs over 132 SMs asks for ~36 KB per SM).
const GEMV_HBM3: GemvConfig = GemvConfig { warps: 16, unroll: 8, unroll_narrow: 16, dot_columns: 2, dot_unroll: 4, blocks_per_sm: 1 };
/// `gemv` elsewhere: 4 loads in flight per warp (8 for m ≤ 2); with 8 at m = 8, ptxas for
/// these targets spilled at 128 registers, and their lower memory bandwidth needs fewer bytes
/// in flight (the dot body: 1 row × 2 16-byte loads per lane, 16 KB per block; at 2 rows of
/// B per warp, ptxas 12.9 spilled 16-88 bytes for sm_70, sm_75, sm_80 and sm_120 at m = 8).
/// Not measured on these architectures.
const GEMV: GemvConfig = GemvConfig { warps: 16, unroll: 4, unroll_narrow: 8, dot_columns: 1, dot_unroll: 2, blocks_per_sm: 1 };
/// `gemv` on sm_70: as [`GEMV`], with one 16-byte load per row of B and lane in flight in the
/// dot body (at two, ptxas 12.9 spilled 16 bytes for sm_70 at m = 8).
const GEMV_VOLTA: GemvConfig = GemvConfig { dot_unroll: 1, ..GEMV };

/// The SGEMM table, one row per architecture, in [`Arch::ALL`] order.
pub const SGEMM_CONFIGS: [SgemmArchConfig; 8] = [
    // sm_70 (V100): no cp.async, so register double-buffering (stages = 2). 96 KB of shared
    // memory and 2048 threads per SM: two 256-thread `large` blocks (17 KB each at bk = 8) fit
    // with room; bk = 8 keeps the register staging buffer at 4 floats per operand. `large`
    // takes a 64×32 warp tile (lanes 8×4): with the 32×64 one, the staging buffer live across
    // the FMAs needed two registers more than the 128 that two blocks per SM allow. Small-tile
    // occupancy is bounded by shared memory: 4 `medium` blocks of 17 KB, 8 `small` of 9 KB.
    SgemmArchConfig {
        arch: Arch::Sm70,
        huge: huge(8, 2),
        large: tile(128, 128, 8, 8, 8, 8, 2, 2),
        medium: medium(16, 2, 4),
        small: small(16, 2, 8),
        skinny: skinny(32, 2, 4),
        gemv: GEMV_VOLTA,
        tiny: TINY_VOLTA,
    },
    // sm_75 (T4): no cp.async; only 64 KB of shared memory and 1024 threads per SM, so at most
    // 4 blocks of 256 threads: `large` at two blocks (128 registers each) is the sweet spot;
    // small tiles are limited by the 16-blocks-per-SM cap.
    SgemmArchConfig {
        arch: Arch::Sm75,
        huge: huge(8, 2),
        large: large(8, 2),
        medium: medium(16, 2, 3),
        small: small(16, 2, 6),
        skinny: skinny(32, 2, 2),
        gemv: GEMV,
        tiny: TINY,
    },
    // sm_80 (A100): cp.async, 164 KB per SM. `large` with 4 stages of bk = 16 takes 68 KB, so
    // two blocks fit (136 KB); deeper pipelines hide A100's longer HBM latency.
    SgemmArchConfig {
        arch: Arch::Sm80,
        huge: huge(16, 3),
        large: large(16, 4),
        medium: medium(16, 4, 4),
        small: small(16, 4, 8),
        skinny: skinny(32, 4, 3),
        gemv: GEMV,
        tiny: TINY_AMPERE,
    },
    // sm_86 (RTX 30 / A10): only 100 KB of shared memory and 1536 threads per SM. Two `large`
    // blocks must share 100 KB, so 3 stages of bk = 8 (25 KB each).
    SgemmArchConfig {
        arch: Arch::Sm86,
        huge: huge(16, 3),
        large: large(8, 3),
        medium: medium(16, 3, 3),
        small: small(16, 3, 6),
        skinny: skinny(32, 3, 2),
        gemv: GEMV,
        tiny: TINY_AMPERE,
    },
    // sm_89 (RTX 40 / L4 / L40): same shared-memory and thread budget as sm_86, and the same
    // 128 FP32 lanes per SM, so the same tiles.
    SgemmArchConfig {
        arch: Arch::Sm89,
        huge: huge(16, 3),
        large: large(8, 3),
        medium: medium(16, 3, 3),
        small: small(16, 3, 6),
        skinny: skinny(32, 3, 2),
        gemv: GEMV,
        tiny: TINY_AMPERE,
    },
    // sm_90 (H100 / H200): 228 KB per SM, 132 SMs. Deep pipelines are affordable: `large`
    // keeps 4 stages (68 KB) at two blocks per SM; `skinny` keeps 6 stages of 32-deep k-steps
    // in flight per block (66 KB, three blocks per SM) to stream B at HBM3e rates. `small` is
    // here medium's 64×64 tile with 2 stages at 8 blocks per SM, for many small matrices with
    // short k: 1024 64×64 problems then run in one wave (132 × 8 ≥ 1024, where `medium` at 6
    // blocks per SM needs two) and a k of 64 needs no deeper pipeline. Measured on the H200,
    // 1024 × 64³: 21.3 TFLOP/s (1.0× cuBLAS), against 15.7 for `medium` and 17.9 for the
    // 32×32 4×4 `small` this row had before.
    SgemmArchConfig {
        arch: Arch::Sm90,
        huge: huge(16, 3),
        large: large(16, 4),
        medium: medium(16, 4, 6),
        small: medium(16, 2, 8),
        skinny: skinny(32, 6, 3),
        gemv: GEMV_HBM3,
        tiny: TINY,
    },
    // sm_100 (B200): same shared memory, thread and register budget per SM as sm_90, and the
    // same FP32 path, so the sm_90 tiles (not yet measured on a B200).
    SgemmArchConfig {
        arch: Arch::Sm100,
        huge: huge(16, 3),
        large: large(16, 4),
        medium: medium(16, 4, 6),
        small: medium(16, 2, 8),
        skinny: skinny(32, 6, 3),
        gemv: GEMV_HBM3,
        tiny: TINY,
    },
    // sm_120 (RTX 50): the sm_86/89 budget (100 KB, 1536 threads). The field report on cuBLAS
    // reaching 68% of FMA throughput there asks for a row of its own: same budget reasoning as
    // sm_89, with 3-stage bk = 8 for `large`.
    SgemmArchConfig {
        arch: Arch::Sm120,
        huge: huge(16, 3),
        large: large(8, 3),
        medium: medium(16, 3, 3),
        small: small(16, 3, 6),
        skinny: skinny(32, 3, 2),
        gemv: GEMV,
        tiny: TINY,
    },
];

/// The SGEMM row of one architecture.
pub const fn sgemm_config(arch: Arch) -> &'static SgemmArchConfig {
    let mut i = 0;
    while i < SGEMM_CONFIGS.len() {
        if SGEMM_CONFIGS[i].arch as u8 == arch as u8 {
            return &SGEMM_CONFIGS[i];
        }
        i += 1;
    }
    panic!("every architecture has an SGEMM row")
}

// Compile-time proof that every row fits its architecture and sits at its Arch::ALL index.
const _: () = {
    let mut i = 0;
    while i < SGEMM_CONFIGS.len() {
        let row = &SGEMM_CONFIGS[i];
        assert!(row.arch as u8 == Arch::ALL[i] as u8, "SGEMM_CONFIGS must follow Arch::ALL order");
        let mut v = 0;
        while v < SgemmVariant::TILED.len() {
            if let Err(why) = row.tile(SgemmVariant::TILED[v]).check(row.arch) {
                panic!("{}", why);
            }
            v += 1;
        }
        if let Err(why) = row.gemv.check(row.arch) {
            panic!("{}", why);
        }
        if let Err(why) = row.tiny.check(row.arch) {
            panic!("{}", why);
        }
        i += 1;
    }
};
