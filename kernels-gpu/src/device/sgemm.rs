//! # FP32 SGEMM: `C = alpha · op(A) · op(B) + beta · C`, strided-batched
//!
//! ## The canonical problem
//! The host turns every call (row- or column-major, either operand transposed) into one form:
//! C is `m × n` row-major (`C[i·ldc + j]`), A is `m × k` and B is `k × n`, each stored either
//! k-contiguous or m/n-contiguous. A column-major problem is the row-major problem
//! `Cᵀ = op(B)ᵀ · op(A)ᵀ`, which only swaps the operands. Every variant is compiled once per
//! operand layout ([`SgemmOperands`]: `nn`, `nt`, `tn`, `tt`), so the layout is a compile-time
//! constant; what is only known at run time (alignment, beta = 0) comes in `flags`.
//!
//! ## Tiling (three levels)
//! - A **block** computes a `BM × BN` tile of C. It walks k in steps of `BK`; for each step it
//!   stages a `BK × BM` slice of A and a `BK × BN` slice of B in shared memory, both stored
//!   *k-major* (`As[kk][i]`, `Bs[kk][j]`), whatever their layout in global memory.
//! - A **warp** owns a `(LM·TM) × (LN·TN)` part of the block tile, its 32 lanes arranged
//!   `LM × LN` (`LN = 32 / LM`).
//! - A **thread** owns `TM × TN` accumulators, as `(TM/4) × (TN/4)` sub-tiles of 4×4 spaced
//!   `LM·4` rows and `LN·4` columns apart. For each `kk` a thread reads `TM/4` float4s of A and
//!   `TN/4` float4s of B from shared memory and does `TM·TN` FMAs. Lanes of a warp read
//!   consecutive float4s of one shared row, so these reads have no bank conflicts, and lanes
//!   that share a row index read the same address (a broadcast).
//!
//! ## Loading a tile
//! Each thread copies a fixed set of "copy units" of each operand per k-step: 16-byte vectors
//! along m (or n) when that is the contiguous direction and the host has proved 16-byte
//! alignment, single floats otherwise. A k-contiguous operand is copied one float at a time
//! (consecutive lanes take consecutive k, so the global reads coalesce) and thereby transposed
//! into the k-major shared layout. Each thread's units share one row (or column) index, so
//! their addresses are one base plus a constant step. Out-of-range elements are filled with
//! zeros, so the compute loop never tests bounds.
//!
//! ## Registers
//! The accumulators take most of the register budget that the launch bound allows (128 for two
//! 256-thread blocks per SM). The copy plan of a k-step (`OperandCopy`) is therefore rebuilt at
//! every k-step from inputs hidden behind `ptx::opaque`, and the epilogue's indices likewise:
//! a few integer instructions per k-step, instead of a dozen values the compiler would hoist and
//! keep live across the main loop (which made ptxas spill). CI checks every kernel for spills.
//!
//! ## Pipeline
//! - **sm_80 and newer** (`ASYNC`): `cp.async` copies global memory straight into shared memory
//!   without passing through registers. `STAGES` buffers form a ring: while the block computes
//!   on stage `s`, the copies for the next `STAGES-1` k-steps are in flight. One barrier per
//!   k-step both publishes the stage that just arrived and frees the stage that was consumed.
//! - **sm_70 / sm_75**: two shared buffers; the next k-step's global loads go into registers
//!   before the current step is computed and are stored to the other buffer after it, so global
//!   latency hides behind the FMAs.
//! - **Inside a k-step** (all architectures): for 8×8 thread tiles the fragments of `kk + 1`
//!   are read from shared memory before the FMAs of `kk`, in a rolled loop of two kk per trip
//!   (`compute_stage`); other tiles load then compute, fully unrolled
//!   ([`SgemmTile::pipelined_fragments`] says which and why).
//! - **Two k loops** (tiles with registers to spare, [`SgemmTile::has_fast_loop`]). The
//!   k-steps whose copies lie wholly inside A and B, in a tile wholly inside C whose operands
//!   allow their natural copy width (most k-steps of a large problem), run a loop of their
//!   own: copies with no bounds tests, no zero-fill and a width fixed at compile time, so the
//!   loop body is one straight run of code. With the tests inside, the branches around them
//!   cost an instruction-fetch stall at every k-step (ncu on `huge`: a third of its stalls).
//!   Edge tiles that are not moved inside (see "Edge tiles"), unaligned operands and the last
//!   `STAGES-1` k-steps run the checked loop (which still skips the tests where a k-step
//!   allows).
//! - **After the barrier**, tiles with registers to spare read the first kk's fragments before
//!   issuing the next copies, so that latency hides behind the copy code
//!   ([`SgemmTile::reads_first_fragments_early`]); the unrolled ones among them issue A's
//!   copies there and B's a few kk later ([`B_COPIES_AT_KK`]), so that the copies do not queue
//!   up behind each other and the FMAs right after them.
//!
//! ## Edge tiles
//! The last tile-row and tile-column of C usually reach past m and n. Small tiles
//! ([`SgemmTile::moves_edge_tiles`]) move such a tile back to end at m (n)
//! ([`tile_origin_inside`]), so that every copy lies inside A and B (no bounds tests; the fast
//! k loop where the tile has one); the block recomputes rows its neighbour owns and stores only
//! its own. Other tiles fill the rows and columns past the edge with zeros and run the checked
//! loop.
//!
//! ## Split k
//! A problem with too few tiles to fill the GPU (1024³ in 64×64 tiles: 256 blocks of 2 warps
//! on 132 SMs; 64×64 with k = 100 000: one tile) can spread each tile's k range over the
//! `gridDim.y` blocks of a k split: block `blockIdx.y` runs the whole pipeline above on its
//! slice of k ([`k_slice`]: whole k-steps, as even as they go). The partial tiles meet in one
//! of two ways, and both add them in split order starting from 0, so the result has the same
//! bits on every run (and the same bits either way):
//! - **through a cluster** (sm_90 and newer, up to 8 blocks, [`SgemmTile::can_split_k`]):
//!   each block stores its partial tile in its own shared memory (reusing the stage
//!   buffers), a cluster barrier publishes them, and every block finishes a share of the tile
//!   by reading all the partial tiles through distributed shared memory
//!   (`ld.shared::cluster`). No workspace, no atomics; a second cluster barrier keeps each
//!   block's shared memory alive until its partners have read it.
//! - **through a workspace** (every architecture, any number of blocks, `SPLIT_WORKSPACE`;
//!   tiles that [`SgemmTile::splits_k`]):
//!   each block stores its partial tile in global memory, and one thread counts the block's
//!   arrival on the tile's counter (a fence first, so the stores are visible to whoever sees
//!   the count). The last block to arrive adds the partial tiles and writes C; its increment
//!   wraps the counter back to 0. No block ever waits for another.

//! ## Epilogue and batches
//! Each thread scales its accumulators by alpha, adds `beta · C` (not reading C at all when
//! beta is 0), and writes the elements its block owns (a moved tile skips its neighbour's
//! rows and columns), with 16-byte stores where C is aligned (for a moved tile: moved by a
//! multiple of 4) and the four columns are in range. Where C is not aligned, a thread's
//! four columns would be four scalar stores, and each store instruction of the warp would
//! spread 32 floats over `LM` rows 16 bytes apart; tiles with few enough accumulators
//! ([`SgemmTile::store_staging_rows`]) instead pass their rows through the idle stage buffers
//! ([`store_rows_through_shared`]), so that each store instruction writes 32 consecutive
//! floats of one row. `skinny` can also run a problem turned around (`C_TRANSPOSED`: the host
//! swapped and transposed the operands so that its 16 rows lie along the caller's few columns);
//! it then writes C transposed ([`store_turned`]). A k-split launch writes C from the
//! reduction of its partial tiles instead (see "Split k"). `blockIdx.x` is the tile index (rasterized in groups of `RASTER_GROUP_M` tile-rows so
//! co-running blocks share A and B in L2); `blockIdx.z` strides over the batch, so any batch
//! count runs in one launch.
//!
//! ## Launch overlap (sm_90+)
//! Every entry point (the tiles, `tiny` and `gemv`) is launched as a programmatic dependent
//! (PDL) of the launch before it on the stream: its launch is prepared while the launch before
//! drains, and its blocks wait in `griddepcontrol.wait` before touching memory. It never lets
//! its own dependent start early (`griddepcontrol.launch_dependents`): the trigger is the
//! implicit one at block exit, so the next grid is dispatched onto idle SMs. Dispatched beside
//! this grid's running blocks, a next grid of under one wave was placed two blocks to some SMs
//! and none to others, and ran up to 1.4x slower (NOTES "Launch overlap").

use super::ptx::{
    arrive_wrapping_gpu, block_idx_x, block_idx_y, block_idx_z, cluster_rank, cluster_shared_address, cluster_sync, cp_async_16,
    cp_async_16_inside, cp_async_4, cp_async_4_inside, cp_async_commit, cp_async_wait, dynamic_smem, fence_gpu, fma, grid_dim_x, grid_dim_y,
    grid_dim_z, load_cluster_shared_f32x4, load_gpu_coherent_f32x4, opaque, rolled, shared_address, sync_threads, sync_warp, thread_idx_x,
    wait_for_prerequisite_grid,
};
use super::BUILD_CONFIG;
use super::gemv::{gemv, gemv_dot};
use super::tiny::tiny;
use crate::sgemm_config::{
    k_slice, sgemm_config, tile_origin_inside, GemvConfig, SgemmOperands, SgemmTile, SgemmVariant, TinyConfig, RASTER_GROUP_M, SMEM_ROW_PAD,
    STAGED_STORES_IN_FLIGHT, STAGED_STORES_MIN_COLUMNS,
};
use crate::abi::{sgemm_params_entry, SgemmParams};
use crate::sgemm_flags::{A_VECTOR, BETA_ZERO, B_VECTOR, C_TRANSPOSED, C_VECTOR, SPLIT_WORKSPACE};

const PAD: usize = SMEM_ROW_PAD as usize;

/// Groups of four C elements whose partial sums each thread of a k-split block reads from
/// the cluster at once ([`reduce_k_splits`]): a read of another block's shared memory takes
/// hundreds of cycles, so the reads of several groups go out together before any is added.
const CLUSTER_GROUPS_IN_FLIGHT: usize = 4;
/// The same for the last block of a k split through the workspace
/// ([`reduce_k_splits_in_workspace`]), which reads every partial tile from L2 alone: twice as
/// many loads in flight (its accumulators are stored by then, so the registers are free).
const WORKSPACE_GROUPS_IN_FLIGHT: usize = 8;

/// Tiles that read their first fragments early ([`SgemmTile::reads_first_fragments_early`])
/// and run the unrolled inner loop issue a k-step's copies in two parts: A's right after the
/// early read, B's after the fragments of this kk are read. Issuing all of them at once
/// queued a dozen `cp.async` behind the early shared loads, and the FMAs after them waited for
/// the copies to read their address registers (ncu: "long scoreboard" at the first FFMA after
/// the copies, a third of `huge`'s stalls). Measured on the H200 (`huge`, 4096³): B at kk 2
/// 50.7 TFLOP/s, kk 1 47.7, kk 3 47.6, all at the top 48.3.
const B_COPIES_AT_KK: usize = 2;

/// Four floats read or written as one 16-byte access (`ld.v4.f32` / `st.v4.f32`).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub(super) struct Float4(pub(super) [f32; 4]);

/// The canonical problem of one launch (see the module docs): the entry point's parameters,
/// defined once for host and device in [`crate::abi`].
pub(super) type Problem = SgemmParams;

/// How one thread copies its units of one operand tile (`MN × BK`, MN = BM for A, BN for B).
/// Rebuilt at every k-step (see `copies` in `sgemm`); cheap integer arithmetic.
#[derive(Clone, Copy)]
struct OperandCopy {
    /// Global address of this thread's first unit at k = 0.
    first: *const f32,
    /// Global elements from one of this thread's units to the next.
    unit_step: u64,
    /// Global elements per unit of k.
    k_step: u64,
    /// Byte offset of the first unit inside a stage's slice, and from one unit to the next.
    smem_first: u32,
    smem_unit_step: u32,
    /// k index (inside the k-step) of the first unit, and its increase from unit to unit.
    kk_first: u32,
    kk_unit_step: u32,
    /// Bit i set: unit i's row/column lies inside the matrix (scalar units).
    mn_mask: u32,
    /// Bytes of a 16-byte unit that lie inside the matrix (vector units; 0..=16).
    mn_bytes: u32,
    /// The whole tile lies inside the matrix along m (or n): every unit is inside, and a
    /// k-step that is also inside along k needs no bounds tests at all.
    mn_full: bool,
    vector: bool,
}

impl OperandCopy {
    /// `MN`: tile extent along m (or n); `mn0`: where the tile starts; `mn_total`: m (or n).
    #[inline(always)]
    fn new<const MN: usize, const BK: usize, const NT: usize>(
        base: *const f32,
        ld: u64,
        k_contiguous: bool,
        vector: bool,
        mn0: u32,
        mn_total: u32,
        tid: u32,
    ) -> OperandCopy {
        let row_floats = (MN + PAD) as u32;
        let mn_left = mn_total - mn0;
        let mn_full = mn_left >= MN as u32;
        if k_contiguous {
            // Unit i: row mn_t + i·(NT/BK), column kk_t. Lanes take consecutive k.
            let kk_t = tid % BK as u32;
            let mn_t = tid / BK as u32;
            let rows_step = (NT / BK) as u32;
            let mut mask = 0u32;
            let units = MN * BK / NT;
            for i in 0..units {
                if mn_t + i as u32 * rows_step < mn_left {
                    mask |= 1 << i;
                }
            }
            OperandCopy {
                first: base.wrapping_add(((mn0 + mn_t) as u64 * ld + kk_t as u64) as usize),
                unit_step: rows_step as u64 * ld,
                k_step: 1,
                smem_first: (kk_t * row_floats + mn_t) * 4,
                smem_unit_step: rows_step * 4,
                kk_first: kk_t,
                kk_unit_step: 0,
                mn_mask: mask,
                mn_bytes: 0,
                mn_full,
                vector: false,
            }
        } else if vector {
            // Unit i: four consecutive m (or n) starting at 4·v_t, row kk_t + i·(NT/(MN/4)).
            let per_row = (MN / 4) as u32;
            let v_t = tid % per_row;
            let kk_t = tid / per_row;
            let k_rows = NT as u32 / per_row;
            let inside = mn_left.saturating_sub(4 * v_t);
            OperandCopy {
                first: base.wrapping_add((kk_t as u64 * ld + (mn0 + 4 * v_t) as u64) as usize),
                unit_step: k_rows as u64 * ld,
                k_step: ld,
                smem_first: (kk_t * row_floats + 4 * v_t) * 4,
                smem_unit_step: k_rows * row_floats * 4,
                kk_first: kk_t,
                kk_unit_step: k_rows,
                mn_mask: 0,
                mn_bytes: if inside >= 4 { 16 } else { inside * 4 },
                mn_full,
                vector: true,
            }
        } else {
            // Unit i: one float at column mn_t, row kk_t + i·(NT/MN).
            let mn_t = tid % MN as u32;
            let kk_t = tid / MN as u32;
            let k_rows = (NT / MN) as u32;
            OperandCopy {
                first: base.wrapping_add((kk_t as u64 * ld + (mn0 + mn_t) as u64) as usize),
                unit_step: k_rows as u64 * ld,
                k_step: ld,
                smem_first: (kk_t * row_floats + mn_t) * 4,
                smem_unit_step: k_rows * row_floats * 4,
                kk_first: kk_t,
                kk_unit_step: k_rows,
                mn_mask: if mn_t < mn_left { u32::MAX } else { 0 },
                mn_bytes: 0,
                mn_full,
                vector: false,
            }
        }
    }

    /// Global address of unit `i` for the k-step starting at `k0`.
    #[inline(always)]
    fn global(&self, i: usize, k0: u32) -> *const f32 {
        self.first.wrapping_add((i as u64 * self.unit_step + k0 as u64 * self.k_step) as usize)
    }

    /// Shared address of unit `i` in the stage whose slice of this operand starts at `stage`.
    #[inline(always)]
    fn shared(&self, stage: u32, i: usize) -> u32 {
        stage + self.smem_first + i as u32 * self.smem_unit_step
    }

    /// Issues this thread's `cp.async` copies of the k-step at `k0` into the stage whose slice
    /// of this operand starts at shared address `stage`.
    #[inline(always)]
    unsafe fn issue_async<const MN: usize, const BK: usize, const NT: usize>(&self, stage: u32, k0: u32, k_total: u32) {
        if self.mn_full && k0 + BK as u32 <= k_total {
            // Interior k-step of an interior tile (block-uniform): no tests, no zero-fill.
            self.issue_inside::<MN, BK, NT>(stage, k0, self.vector);
        } else if self.vector {
            for i in 0..MN * BK / (4 * NT) {
                let kk = self.kk_first + i as u32 * self.kk_unit_step;
                let bytes = if k0 + kk < k_total { self.mn_bytes } else { 0 };
                // A zero-byte copy still needs a valid 16-byte aligned address: use the first.
                let src = if bytes > 0 { self.global(i, k0) } else { self.first };
                cp_async_16(self.shared(stage, i), src, bytes);
            }
        } else {
            for i in 0..MN * BK / NT {
                let kk = self.kk_first + i as u32 * self.kk_unit_step;
                let inside = k0 + kk < k_total && (self.mn_mask >> i) & 1 != 0;
                let src = if inside { self.global(i, k0) } else { self.first };
                cp_async_4(self.shared(stage, i), src, if inside { 4 } else { 0 });
            }
        }
    }

    /// Issues the copies of a k-step that lies wholly inside the operand: no tests, no
    /// zero-fill. `vector`: the plan's units are 16-byte vectors. The fast loop (see
    /// `fast_iters` in `sgemm`) passes a compile-time constant, so its copies have no branch
    /// at all: a k-contiguous operand is copied a float at a time, an m/n-contiguous one
    /// (which the fast loop only takes when it is 16-byte aligned) in 16-byte vectors.
    #[inline(always)]
    unsafe fn issue_inside<const MN: usize, const BK: usize, const NT: usize>(&self, stage: u32, k0: u32, vector: bool) {
        if vector {
            for i in 0..MN * BK / (4 * NT) {
                cp_async_16_inside(self.shared(stage, i), self.global(i, k0));
            }
        } else {
            for i in 0..MN * BK / NT {
                cp_async_4_inside(self.shared(stage, i), self.global(i, k0));
            }
        }
    }

    /// Loads this thread's units of the k-step at `k0` into registers (zeros outside).
    #[inline(always)]
    unsafe fn load<const MN: usize, const BK: usize, const NT: usize, const E: usize>(&self, k0: u32, k_total: u32) -> [f32; E] {
        let mut regs = [0.0f32; E];
        if self.vector {
            for i in 0..E / 4 {
                let kk = self.kk_first + i as u32 * self.kk_unit_step;
                if k0 + kk < k_total {
                    let src = self.global(i, k0);
                    if self.mn_bytes == 16 {
                        let v = *(src as *const Float4);
                        regs[4 * i..4 * i + 4].copy_from_slice(&v.0);
                    } else {
                        for e in 0..4 {
                            if (e as u32) * 4 < self.mn_bytes {
                                regs[4 * i + e] = *src.add(e);
                            }
                        }
                    }
                }
            }
        } else {
            for (i, r) in regs.iter_mut().enumerate() {
                let kk = self.kk_first + i as u32 * self.kk_unit_step;
                if k0 + kk < k_total && (self.mn_mask >> i) & 1 != 0 {
                    *r = *self.global(i, k0);
                }
            }
        }
        regs
    }

    /// Stores registers from [`load`](Self::load) into a stage's slice at `stage`.
    #[inline(always)]
    unsafe fn store<const E: usize>(&self, stage: *mut f32, regs: &[f32; E]) {
        let base = stage.byte_add(self.smem_first as usize);
        if self.vector {
            for i in 0..E / 4 {
                let dst = base.byte_add(i * self.smem_unit_step as usize) as *mut Float4;
                *dst = Float4([regs[4 * i], regs[4 * i + 1], regs[4 * i + 2], regs[4 * i + 3]]);
            }
        } else {
            for (i, r) in regs.iter().enumerate() {
                *base.byte_add(i * self.smem_unit_step as usize) = *r;
            }
        }
    }
}

/// A thread's fragments of one `kk` row of a stage: `TM` values of A and `TN` of B, read as
/// `TM/4 + TN/4` 16-byte shared-memory loads. `a_row`/`b_row` point at the thread's first
/// element of that row.
#[inline(always)]
unsafe fn fragments<const TM: usize, const TN: usize, const LM: usize>(a_row: *const f32, b_row: *const f32) -> ([f32; TM], [f32; TN]) {
    let ln = 32 / LM;
    let mut a = [0.0f32; TM];
    let mut b = [0.0f32; TN];
    for i in 0..TM / 4 {
        let v = *(a_row.add(i * LM * 4) as *const Float4);
        a[4 * i..4 * i + 4].copy_from_slice(&v.0);
    }
    for j in 0..TN / 4 {
        let v = *(b_row.add(j * ln * 4) as *const Float4);
        b[4 * j..4 * j + 4].copy_from_slice(&v.0);
    }
    (a, b)
}

/// `acc += a ⊗ b`: the `TM·TN` FMAs of one `kk`.
#[inline(always)]
pub(super) fn outer_product<const TM: usize, const TN: usize>(a: &[f32; TM], b: &[f32; TN], acc: &mut [[f32; TN]; TM]) {
    for x in 0..TM {
        for y in 0..TN {
            acc[x][y] = fma(a[x], b[y], acc[x][y]);
        }
    }
}

/// One k-step of FMAs on a stage: `acc += As[kk][rows] ⊗ Bs[kk][cols]` for kk in 0..BK.
/// `a_first`/`b_first` point at the thread's first element in the stage's kk = 0 row, whose
/// fragments the caller has already read (`(a, b)`), ahead of its own work.
///
/// Two forms, chosen per tile by [`SgemmTile::pipelined_fragments`]:
/// - **Pipelined** (8×8 thread tiles): the fragments of `kk + 1` are loaded before the FMAs
///   of `kk`, so shared-memory latency hides behind 64 independent FMAs. The loop over kk
///   stays rolled, two kk per trip so that the two fragment sets alternate without register
///   moves (a [`rolled`] loop, so that the compiler does not unroll it): 128 FMAs
///   per trip against ~7 loop instructions, and a loop body that stays in the instruction
///   cache. The last pair is peeled so that no load reaches past the stage.
/// - **Unrolled** (other tiles): load, then FMAs, fully unrolled; ptxas schedules the loads.
///   `at_copy` runs between the loads and the FMAs of kk = [`B_COPIES_AT_KK`] (the caller's
///   late copies); the pipelined form never calls it.
#[inline(always)]
unsafe fn compute_stage<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const TM: usize,
    const TN: usize,
    const LM: usize,
    const PIPELINED: bool,
>(
    a_first: *const f32,
    b_first: *const f32,
    (mut a, mut b): ([f32; TM], [f32; TN]),
    acc: &mut [[f32; TN]; TM],
    mut at_copy: impl FnMut(),
) {
    if !PIPELINED {
        outer_product(&a, &b, acc);
        for kk in 1..BK {
            (a, b) = fragments::<TM, TN, LM>(a_first.add(kk * (BM + PAD)), b_first.add(kk * (BN + PAD)));
            if kk == B_COPIES_AT_KK {
                at_copy();
            }
            outer_product(&a, &b, acc);
        }
        return;
    }
    const { assert!(BK % 2 == 0 && BK >= 2) };
    let (mut a_row, mut b_row) = (a_first, b_first);
    for _ in rolled(0..opaque((BK / 2 - 1) as u32)) {
        let (a_odd, b_odd) = fragments::<TM, TN, LM>(a_row.add(BM + PAD), b_row.add(BN + PAD));
        outer_product(&a, &b, acc);
        (a_row, b_row) = (a_row.add(2 * (BM + PAD)), b_row.add(2 * (BN + PAD)));
        (a, b) = fragments::<TM, TN, LM>(a_row, b_row);
        outer_product(&a_odd, &b_odd, acc);
    }
    let (a_odd, b_odd) = fragments::<TM, TN, LM>(a_row.add(BM + PAD), b_row.add(BN + PAD));
    outer_product(&a, &b, acc);
    outer_product(&a_odd, &b_odd, acc);
}

/// The C tile of one block: the rows and columns it owns (from `m_start`, `n_start`) and where
/// its tile of A, B and accumulators starts (`m0`, `n0`; see [`tile_origin_inside`]).
struct BlockTile {
    m_start: u32,
    n_start: u32,
    m0: u32,
    n0: u32,
}

impl BlockTile {
    /// This block's tile: grouped rasterization of the linear block index, `RASTER_GROUP_M`
    /// tile-rows per group. `MOVES_EDGE_TILES` ([`SgemmTile::moves_edge_tiles`]): whether an
    /// edge tile moves inside; the operands' layouts and `flags` say by how much it may
    /// ([`tile_origin_inside`]). `OPAQUE`: read the block index through [`opaque`] (the
    /// epilogue's recomputation, which must not be merged with this one).
    #[inline(always)]
    fn new<const BM: usize, const BN: usize, const MOVES_EDGE_TILES: bool, const A_K_CONTIGUOUS: bool, const B_K_CONTIGUOUS: bool, const OPAQUE: bool>(
        p: &Problem,
    ) -> BlockTile {
        let tiles_m = p.m.div_ceil(BM as u32);
        let tiles_n = p.n.div_ceil(BN as u32);
        let pid = if OPAQUE { opaque(block_idx_x()) } else { block_idx_x() };
        // (`max(1)`: the host never launches an empty grid; this only spares a division check.)
        let group_width = (RASTER_GROUP_M * tiles_n).max(1);
        let first_m = pid / group_width * RASTER_GROUP_M;
        let group_rows = (tiles_m - first_m).clamp(1, RASTER_GROUP_M);
        let tile_m = first_m + (pid % group_width) % group_rows;
        let tile_n = (pid % group_width) / group_rows;
        let (m_start, n_start) = (tile_m * BM as u32, tile_n * BN as u32);
        BlockTile {
            m_start,
            n_start,
            m0: if MOVES_EDGE_TILES { tile_origin_inside(m_start, p.m, BM as u32, A_K_CONTIGUOUS || p.flags & A_VECTOR == 0) } else { m_start },
            n0: if MOVES_EDGE_TILES { tile_origin_inside(n_start, p.n, BN as u32, B_K_CONTIGUOUS || p.flags & B_VECTOR == 0) } else { n_start },
        }
    }
}

/// Where and how a block writes its part of C: rows from `m_start`, columns from `n_start`
/// (a moved edge tile's first rows and columns belong to its neighbour), up to m and n.
/// `MOVED`: the tile may have been moved ([`SgemmTile::moves_edge_tiles`]); otherwise the
/// tests against `m_start` and `n_start` are compiled out.
pub(super) struct COutput<const MOVED: bool> {
    pub(super) base: *mut f32,
    pub(super) m_start: u32,
    pub(super) n_start: u32,
    /// C is 16-byte aligned at every fourth column of this tile (turned: at every fourth row).
    pub(super) vector: bool,
    /// beta = 0: C is not read.
    pub(super) beta_zero: bool,
    /// The problem runs turned around (`C_TRANSPOSED`): element `(row, col)` of the canonical
    /// C lies at `base[col·ldc + row]`. Only tiles that [`SgemmVariant::can_turn`] set it.
    pub(super) transposed: bool,
}

impl<const MOVED: bool> COutput<MOVED> {
    /// Whether this block stores row `row` of C.
    #[inline(always)]
    pub(super) fn owns_row(&self, p: &Problem, row: u32) -> bool {
        row < p.m && (!MOVED || row >= self.m_start)
    }

    /// Where row `row` of C starts (turned: its first element; the next is `ldc` further).
    #[inline(always)]
    pub(super) fn row(&self, p: &Problem, row: u32) -> *mut f32 {
        let offset = if self.transposed { row as u64 } else { row as u64 * p.ldc };
        self.base.wrapping_add(offset as usize)
    }

    /// How many columns of C this block stores, of its tile's `bn` from `n0`.
    #[inline(always)]
    pub(super) fn owned_columns(&self, p: &Problem, n0: u32, bn: u32) -> u32 {
        let first = if MOVED { n0.max(self.n_start) } else { n0 };
        (n0 + bn).min(p.n).saturating_sub(first)
    }

    /// Whether this block stores column `col` of C.
    #[inline(always)]
    pub(super) fn owns_col(&self, p: &Problem, col: u32) -> bool {
        col < p.n && (!MOVED || col >= self.n_start)
    }

    /// The value stored where C held `old`: `scaled` (= alpha·acc) + beta·old. The one store
    /// formula of the tile kernels, so every path writes the same bits.
    #[inline(always)]
    pub(super) fn add_old(&self, p: &Problem, scaled: f32, old: f32) -> f32 {
        fma(p.beta, old, scaled)
    }

    /// `*dst = scaled + beta·*dst` (just `scaled` where beta = 0: C is not read).
    #[inline(always)]
    pub(super) unsafe fn store1(&self, p: &Problem, dst: *mut f32, scaled: f32) {
        *dst = if self.beta_zero { scaled } else { self.add_old(p, scaled, *dst) };
    }

    /// `C[col + e] = alpha·acc[e] + beta·C[col + e]` in row `c_row` (from [`row`](Self::row)),
    /// for those of the four columns from `col` (a multiple of 4 from the tile's first column)
    /// that this block owns.
    #[inline(always)]
    pub(super) unsafe fn store4(&self, p: &Problem, c_row: *mut f32, col: u32, acc: [f32; 4]) {
        // (Scaled once, before the branches: scaling in each branch made the compiler keep
        // both products and select between them, a multiply and a select per element.)
        let out = acc.map(|v| p.alpha * v);
        if self.transposed {
            // Four rows of the stored C, one float each (the main epilogue of a turned tile
            // stores whole columns instead: `store_turned`).
            for (e, v) in out.iter().enumerate() {
                if self.owns_col(p, col + e as u32) {
                    self.store1(p, c_row.wrapping_add(((col + e as u32) as u64 * p.ldc) as usize), *v);
                }
            }
            return;
        }
        let whole = self.vector && col + 4 <= p.n && (!MOVED || col >= self.n_start);
        self.store_run4(p, c_row.wrapping_add(col as usize), whole, out, |e| self.owns_col(p, col + e as u32));
    }

    /// Stores four scaled values (`alpha·acc`) into four consecutive floats of C from `dst`:
    /// one 16-byte store (after a 16-byte load of the old values where beta ≠ 0) where `whole`
    /// (aligned, and all four the block's), otherwise those that `owned(e)` one at a time.
    #[inline(always)]
    pub(super) unsafe fn store_run4(&self, p: &Problem, dst: *mut f32, whole: bool, mut out: [f32; 4], owned: impl Fn(usize) -> bool) {
        if whole {
            if !self.beta_zero {
                let old = *(dst as *const Float4);
                for e in 0..4 {
                    out[e] = self.add_old(p, out[e], old.0[e]);
                }
            }
            *(dst as *mut Float4) = Float4(out);
        } else {
            for (e, v) in out.iter().enumerate() {
                if owned(e) {
                    self.store1(p, dst.add(e), *v);
                }
            }
        }
    }
}

/// The epilogue where C's rows are not 16-byte aligned (see "Epilogue"), for a block that owns
/// at least 32 columns of C: `ROWS` rows of each lane's accumulators at a time
/// ([`SgemmTile::store_staging_rows`]), each warp writes them into its own rows of the idle
/// stage buffers (16-byte vectors, as its registers hold them), then reads them back one
/// 32-column segment of a row at a time, lane `l` on column `l` of the segment, so that each
/// store to C (and each load of C where beta ≠ 0) is 32 consecutive floats.
///
/// The staged rows are the pass's rows of the warp tile in order (`ROWS` a multiple of 4: a
/// run of consecutive rows; `ROWS` = 1: every fourth row), so staged row `s` is row
/// `first + s·step` of C: the rows inside C are one range of `s`, and the read-back walks only
/// that range, [`STAGED_STORES_IN_FLIGHT`] segments at a time (whole rows, in row order), their
/// loads of C before any store.
/// `row0`, `col0`: this thread's first accumulator row and column in the block tile, as the
/// kernel computes them.
///
/// Safety: every thread of the block calls it (a block barrier), after the main loop; the
/// stage buffers (at `smem`) hold [`SgemmTile::store_staging_bytes`]`(ROWS)`, which the
/// config check proves.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_rows_through_shared<const TM: usize, const TN: usize, const LM: usize, const ROWS: usize, const MOVED: bool>(
    p: &Problem,
    c_out: &COutput<MOVED>,
    acc: &[[f32; TN]; TM],
    smem: *mut f32,
    m0: u32,
    n0: u32,
    row0: usize,
    col0: usize,
    tid: u32,
) {
    const IN_FLIGHT: usize = STAGED_STORES_IN_FLIGHT as usize;
    const { assert!(ROWS == 1 || ROWS % 4 == 0) };
    let ln = 32 / LM;
    let width = ln * TN; // columns of the warp tile
    let row_floats = width + PAD;
    let staged_rows = LM * ROWS;
    // Staged row s is warp-tile row `pass_first + s·step`.
    let step = if ROWS == 1 { 4 } else { 1 };
    let (warp, lane) = (tid as usize / 32, tid as usize % 32);
    let (lane_m, lane_n) = (lane / ln, lane % ln);
    let (warp_m0, warp_n0) = (row0 - lane_m * 4, col0 - lane_n * 4);
    let staging = smem.add(warp * staged_rows * row_floats);
    // Every warp is done reading the stage buffers (a cp.async pipeline has no barrier after
    // its last k-step).
    sync_threads();
    for pass in 0..TM / ROWS {
        // Accumulator row a = 4i + r of lane (lane_m, ·) is warp-tile row lane_m·4 + i·LM·4 + r.
        for q in 0..ROWS {
            let a = pass * ROWS + q;
            let staged = if ROWS == 1 { lane_m } else { lane_m * 4 + q / 4 * LM * 4 + q % 4 };
            let staged_row = staging.add(staged * row_floats + lane_n * 4);
            for j in 0..TN / 4 {
                let v = &acc[a][4 * j..4 * j + 4];
                *(staged_row.add(j * ln * 4) as *mut Float4) = Float4([v[0], v[1], v[2], v[3]]);
            }
        }
        sync_warp();
        let pass_first = if ROWS == 1 { pass / 4 * LM * 4 + pass % 4 } else { pass * (ROWS / 4) * LM * 4 };
        // Row of C of staged row 0, and the staged rows this block owns: s in [s_first, s_end).
        let first_row = m0 + (warp_m0 + pass_first) as u32;
        let rows_to = |row: u32| row.saturating_sub(first_row).div_ceil(step as u32).min(staged_rows as u32);
        let s_end = rows_to(p.m);
        let s_first = if MOVED { rows_to(c_out.m_start) } else { 0 };
        let row_stride = step as u64 * p.ldc;
        let c_first_row = c_out.row(p, first_row);
        // A trip takes `rows_per_trip` staged rows whole, their segments in row order: the
        // two halves of a 64-column row go out back to back (taking a segment of every row
        // first measured up to 1.2x slower on wide shapes, H100). A segment wholly past n is
        // never owned: it only idles its slots.
        let chunks = width / 32;
        let rows_per_trip = IN_FLIGHT / chunks;
        // (`rolled`: unrolled, every pass grew the kernel.)
        for trip in rolled(0..opaque(s_end.div_ceil(rows_per_trip as u32))) {
            let mut dst = [core::ptr::null_mut::<f32>(); IN_FLIGHT];
            let mut out = [0.0f32; IN_FLIGHT];
            let mut owned = [false; IN_FLIGHT];
            for t in 0..IN_FLIGHT {
                let s = trip * rows_per_trip as u32 + (t / chunks) as u32;
                let column = t % chunks * 32 + lane;
                let col = n0 + (warp_n0 + column) as u32;
                owned[t] = c_out.owns_col(p, col) && s >= s_first && s < s_end;
                if owned[t] {
                    dst[t] = c_first_row.wrapping_add(col as usize + (s as u64 * row_stride) as usize);
                    out[t] = p.alpha * *staging.add(s as usize * row_floats + column);
                }
            }
            if !c_out.beta_zero {
                let mut old = [0.0f32; IN_FLIGHT];
                for t in 0..IN_FLIGHT {
                    if owned[t] {
                        old[t] = *dst[t];
                    }
                }
                for t in 0..IN_FLIGHT {
                    out[t] = c_out.add_old(p, out[t], old[t]);
                }
            }
            for t in 0..IN_FLIGHT {
                if owned[t] {
                    *dst[t] = out[t];
                }
            }
        }
        // The next pass overwrites the staged rows every lane has just read.
        sync_warp();
    }
}

/// The epilogue of a turned problem (`C_TRANSPOSED`, see [`COutput::transposed`]): the
/// canonical C is the stored C's transpose, so four consecutive rows of one column of a
/// thread's 4×4 sub-tile are four consecutive floats of one stored row. Each goes out as one
/// 16-byte store where C is aligned and all four rows are the block's; the lanes that share a
/// column (`LM` of them, along m) then write `16·LM` consecutive bytes of that stored row.
/// Otherwise one float at a time.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_turned<const TM: usize, const TN: usize, const LM: usize, const MOVED: bool>(
    p: &Problem,
    c_out: &COutput<MOVED>,
    acc: &[[f32; TN]; TM],
    m0: u32,
    n0: u32,
    row0: usize,
    col0: usize,
) {
    let ln = 32 / LM;
    for i in 0..TM / 4 {
        let row = m0 + (row0 + i * LM * 4) as u32;
        // (A moved tile's rows are 16-byte aligned only if it moved by a multiple of 4.)
        let whole = c_out.vector && row % 4 == 0 && row + 4 <= p.m && (!MOVED || row >= c_out.m_start);
        for j in 0..TN / 4 {
            for c in 0..4 {
                let col = n0 + (col0 + j * ln * 4 + c) as u32;
                if !c_out.owns_col(p, col) {
                    continue;
                }
                let dst = c_out.base.wrapping_add((col as u64 * p.ldc + row as u64) as usize);
                let out: [f32; 4] = core::array::from_fn(|r| p.alpha * acc[4 * i + r][4 * j + c]);
                c_out.store_run4(p, dst, whole, out, |r| c_out.owns_row(p, row + r as u32));
            }
        }
    }
}

/// Writes a thread's accumulators into a `BM × BN` partial tile whose rows are `row_floats`
/// apart (shared memory, or the workspace): the layout the partial-tile sums read.
#[inline(always)]
unsafe fn store_partial_tile<const TM: usize, const TN: usize, const LM: usize>(acc: &[[f32; TN]; TM], tile: *mut f32, row_floats: usize, row0: usize, col0: usize) {
    let ln = 32 / LM;
    for i in 0..TM / 4 {
        for r in 0..4 {
            for j in 0..TN / 4 {
                let v = &acc[4 * i + r][4 * j..4 * j + 4];
                let dst = tile.add((row0 + i * LM * 4 + r) * row_floats + col0 + j * ln * 4);
                *(dst as *mut Float4) = Float4([v[0], v[1], v[2], v[3]]);
            }
        }
    }
}

/// Finishes the groups of four C elements `first`, `first + stride`, ... of a k-split tile:
/// adds the `splits` partial tiles' values of each group (`load(group, split)`) in split
/// order, starting from 0 (so the sum has the same bits however the blocks were timed), and
/// stores `alpha·sum + beta·C`. `IN_FLIGHT` groups at a time: their loads (hundreds of cycles
/// each, from another block's shared memory or from L2) go out together before any is added.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn add_partial_tiles<const BM: usize, const BN: usize, const IN_FLIGHT: usize, const MOVED: bool>(
    p: &Problem,
    c_out: &COutput<MOVED>,
    m0: u32,
    n0: u32,
    first: u32,
    stride: u32,
    splits: u32,
    load: impl Fn(u32, u32) -> [f32; 4],
) {
    let groups = (BM * BN / 4) as u32;
    let groups_per_row = (BN / 4) as u32;
    let mut first = first;
    while first < groups {
        let mut sums = [[0.0f32; 4]; IN_FLIGHT];
        for split in 0..splits {
            let mut partials = [[0.0f32; 4]; IN_FLIGHT];
            for (i, partial) in partials.iter_mut().enumerate() {
                let group = first + i as u32 * stride;
                if group < groups {
                    *partial = load(group, split);
                }
            }
            for (sum, partial) in sums.iter_mut().zip(&partials) {
                for e in 0..4 {
                    sum[e] += partial[e];
                }
            }
        }
        for (i, sum) in sums.iter().enumerate() {
            let group = first + i as u32 * stride;
            if group < groups {
                let row = m0 + group / groups_per_row;
                if c_out.owns_row(p, row) {
                    c_out.store4(p, c_out.row(p, row), n0 + group % groups_per_row * 4, *sum);
                }
            }
        }
        first += IN_FLIGHT as u32 * stride;
    }
}

/// The epilogue of a k split over a cluster: the cluster's blocks computed the same C tile
/// over different slices of k. Each block leaves its partial tile in its own shared memory;
/// after a cluster barrier, the `NT` threads of block `rank` of `splits` finish the groups of
/// four elements `rank·NT + tid + i·splits·NT`, reading the partial tiles of all blocks
/// through distributed shared memory; a second barrier keeps every block's shared memory
/// alive until all reads are done.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_k_splits<const BM: usize, const BN: usize, const TM: usize, const TN: usize, const LM: usize, const NT: usize, const MOVED: bool>(
    p: &Problem,
    c_out: &COutput<MOVED>,
    acc: &[[f32; TN]; TM],
    smem: *mut f32,
    m0: u32,
    n0: u32,
    row0: usize,
    col0: usize,
    tid: u32,
) {
    let row_floats = BN + PAD;
    // Every warp is done reading the pipeline's buffers, which the partial tile overwrites.
    sync_threads();
    store_partial_tile::<TM, TN, LM>(acc, smem, row_floats, row0, col0);
    cluster_sync();
    let (rank, splits) = (cluster_rank(), grid_dim_y());
    let tile = shared_address(smem);
    let groups_per_row = (BN / 4) as u32;
    // A group's byte offset in every block's partial tile.
    let offset = |group: u32| tile + (group / groups_per_row * row_floats as u32 + group % groups_per_row * 4) * 4;
    add_partial_tiles::<BM, BN, CLUSTER_GROUPS_IN_FLIGHT, MOVED>(p, c_out, m0, n0, rank * NT as u32 + tid, splits * NT as u32, splits, |group, peer| {
        load_cluster_shared_f32x4(cluster_shared_address(offset(group), peer))
    });
    cluster_sync();
}

/// The epilogue of a k split through the workspace (any architecture; see "Split k"): every
/// block stores its partial tile in its slot of `split_partials`, and thread 0 counts the
/// block's arrival on the tile's counter, after a fence that publishes the block's stores.
/// The block that arrives last (whichever it is) adds all the partial tiles in split order
/// and writes C; the counter wraps back to 0 for the next launch. No block waits for another,
/// so nothing depends on which blocks are resident together.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_k_splits_in_workspace<const BM: usize, const BN: usize, const TM: usize, const TN: usize, const LM: usize, const NT: usize, const MOVED: bool>(
    p: &Problem,
    c_out: &COutput<MOVED>,
    acc: &[[f32; TN]; TM],
    smem: *mut f32,
    m0: u32,
    n0: u32,
    row0: usize,
    col0: usize,
    tid: u32,
    batch: u32,
) {
    let splits = grid_dim_y();
    let tile_floats = (BM * BN) as u64;
    // This (batch, tile)'s slot; the host sized the workspace for every slot of the launch.
    let slot = batch as u64 * grid_dim_x() as u64 + block_idx_x() as u64;
    let partials = p.split_partials.ptr_mut().wrapping_add((slot * splits as u64 * tile_floats) as usize);
    store_partial_tile::<TM, TN, LM>(acc, partials.wrapping_add((block_idx_y() as u64 * tile_floats) as usize), BN, row0, col0);
    // Every thread's stores are done (and every warp is past the main loop, so the first word
    // of shared memory is free to carry the verdict).
    sync_threads();
    let verdict = smem as *mut u32;
    if tid == 0 {
        fence_gpu();
        let arrived = arrive_wrapping_gpu(p.split_counters.ptr_mut().wrapping_add(slot as usize), splits - 1);
        fence_gpu();
        *verdict = (arrived == splits - 1) as u32;
    }
    sync_threads();
    if *verdict != 0 {
        add_partial_tiles::<BM, BN, WORKSPACE_GROUPS_IN_FLIGHT, MOVED>(p, c_out, m0, n0, tid, NT as u32, splits, |group, split| {
            load_gpu_coherent_f32x4(partials.wrapping_add((split as u64 * tile_floats + group as u64 * 4) as usize))
        });
    }
}

/// The kernel body, monomorphized per variant by [`sgemm_entry!`]. `EA`/`EB`: floats of A/B
/// each thread stages per k-step (the register buffer of the pre-sm_80 pipeline);
/// `PIPELINED`, `EARLY_FRAGMENTS`, `FAST_LOOP`, `SPLITS_K`, `CLUSTER_SPLIT`, `MOVES_EDGE_TILES`:
/// see [`SgemmTile::pipelined_fragments`], [`SgemmTile::reads_first_fragments_early`],
/// [`SgemmTile::has_fast_loop`], [`SgemmTile::splits_k`], [`SgemmTile::can_split_k`] and
/// [`SgemmTile::moves_edge_tiles`]; `STAGED_ROWS`: [`SgemmTile::store_staging_rows`];
/// `TURNS`: [`SgemmVariant::can_turn`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn sgemm<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const TM: usize,
    const TN: usize,
    const LM: usize,
    const STAGES: usize,
    const ASYNC: bool,
    const A_K_CONTIGUOUS: bool,
    const B_K_CONTIGUOUS: bool,
    const NT: usize,
    const EA: usize,
    const EB: usize,
    const PIPELINED: bool,
    const EARLY_FRAGMENTS: bool,
    const FAST_LOOP: bool,
    const SPLITS_K: bool,
    const CLUSTER_SPLIT: bool,
    const MOVES_EDGE_TILES: bool,
    const STAGED_ROWS: usize,
    const TURNS: bool,
>(
    p: &Problem,
) {
    let ln = 32 / LM;
    let tid = thread_idx_x();

    let flags = p.flags;
    let tile = BlockTile::new::<BM, BN, MOVES_EDGE_TILES, A_K_CONTIGUOUS, B_K_CONTIGUOUS, false>(p);
    let (m0, n0) = (tile.m0, tile.n0);

    // Where this thread's accumulators sit inside the block tile.
    let warp = tid as usize / 32;
    let lane = tid as usize % 32;
    let warps_n = BN / (ln * TN);
    let warp_m0 = (warp / warps_n) * (LM * TM);
    let warp_n0 = (warp % warps_n) * (ln * TN);
    let lane_m = lane / ln;
    let lane_n = lane % ln;
    let row0 = warp_m0 + lane_m * 4; // + i·LM·4 + r
    let col0 = warp_n0 + lane_n * 4; // + j·LN·4 + c

    // Shared memory: STAGES × (A slice, B slice).
    let smem = dynamic_smem();
    let a_stage_floats = BK * (BM + PAD);
    let stage_floats = a_stage_floats + BK * (BN + PAD);

    // A k-split launch (gridDim.y > 1) gives each of a tile's blocks one slice of k; the
    // block runs the whole pipeline on its slice as if it were the problem's k. (In a cluster
    // split, the cluster is `1 × gridDim.y × 1`, so `blockIdx.y` is also the block's rank.)
    let (k_first, k_len) = if SPLITS_K && grid_dim_y() > 1 { k_slice(p.k, BK as u32, block_idx_y(), grid_dim_y()) } else { (0, p.k) };
    let k_iters = k_len.div_ceil(BK as u32);
    let a_k_first = k_first as u64 * if A_K_CONTIGUOUS { 1 } else { p.lda };
    let b_k_first = k_first as u64 * if B_K_CONTIGUOUS { 1 } else { p.ldb };

    let mut batch = block_idx_z();
    while batch < p.batch {
        let a_base = p.a.ptr().wrapping_add((batch as u64 * p.stride_a + a_k_first) as usize);
        let b_base = p.b.ptr().wrapping_add((batch as u64 * p.stride_b + b_k_first) as usize);
        // The copy plans of A and B. They are rebuilt at every k-step from
        // inputs hidden by `opaque`, so their dozen integer fields per operand are recomputed
        // there (a few instructions per 512+ FMAs) instead of being hoisted out of the main
        // loop, where they would hold registers the accumulators need.
        let copies = || {
            (
                OperandCopy::new::<BM, BK, NT>(opaque(a_base), p.lda, A_K_CONTIGUOUS, flags & A_VECTOR != 0, opaque(m0), p.m, tid),
                OperandCopy::new::<BN, BK, NT>(opaque(b_base), p.ldb, B_K_CONTIGUOUS, flags & B_VECTOR != 0, opaque(n0), p.n, tid),
            )
        };

        // Where this thread's fragments start in stage `s` (its kk = 0 row of A and of B).
        let stage_rows = |s: usize| {
            let a_stage = smem.add(s * stage_floats);
            (a_stage.add(row0), a_stage.add(a_stage_floats + col0))
        };

        let mut acc = [[0.0f32; TN]; TM];
        if ASYNC {
            let smem_addr = shared_address(smem);
            let stage_bytes = (stage_floats * 4) as u32;
            let a_bytes = (a_stage_floats * 4) as u32;
            // Prologue: k-steps 0..STAGES-1 in flight, one commit group each (empty groups
            // keep the count uniform when k is short).
            // (`rolled`: one copy of the copy code, not STAGES-1 copies
            // scheduled together.)
            for s in rolled(0..opaque(STAGES as u32 - 1)) {
                if s < k_iters {
                    let stage = smem_addr + s * stage_bytes;
                    let (a_copy, b_copy) = copies();
                    a_copy.issue_async::<BM, BK, NT>(stage, s * BK as u32, k_len);
                    b_copy.issue_async::<BN, BK, NT>(stage + a_bytes, s * BK as u32, k_len);
                }
                cp_async_commit();
            }
            let mut read_stage = 0usize;
            let mut write_stage = STAGES - 1;
            // One k-step. `fast`: this k-step's copies lie wholly inside A and B and use their
            // natural width (see `fast_iters` below); a constant at each call site, so each of
            // the two loops gets its own code.
            let mut step = |kt: u32, fast: bool, acc: &mut [[f32; TN]; TM]| {
                // Step kt's group has landed for this thread; the barrier makes every thread's
                // copies visible and proves all threads finished step kt-1, whose stage is the
                // one refilled next.
                cp_async_wait(STAGES - 2);
                sync_threads();
                // With EARLY_FRAGMENTS the first kk's fragments are read before the copies of
                // a later k-step are issued: their shared-memory latency hides behind the copy
                // code instead of stalling every warp of the block at its first FMA right
                // after the barrier. (The copies go to another stage, so the order does not
                // matter for correctness; the `cp.async` asm is a memory side effect, so the
                // compiler keeps the reads first.)
                let early = if EARLY_FRAGMENTS {
                    let (a_first, b_first) = stage_rows(read_stage);
                    Some(fragments::<TM, TN, LM>(a_first, b_first))
                } else {
                    None
                };
                let next = kt + STAGES as u32 - 1;
                let stage = smem_addr + write_stage as u32 * stage_bytes;
                let copy_a = || {
                    if fast {
                        let (a_copy, _) = copies();
                        a_copy.issue_inside::<BM, BK, NT>(stage, next * BK as u32, !A_K_CONTIGUOUS);
                    } else if next < k_iters {
                        let (a_copy, _) = copies();
                        a_copy.issue_async::<BM, BK, NT>(stage, next * BK as u32, k_len);
                    }
                };
                let copy_b = || {
                    if fast {
                        let (_, b_copy) = copies();
                        b_copy.issue_inside::<BN, BK, NT>(stage + a_bytes, next * BK as u32, !B_K_CONTIGUOUS);
                    } else if next < k_iters {
                        let (_, b_copy) = copies();
                        b_copy.issue_async::<BN, BK, NT>(stage + a_bytes, next * BK as u32, k_len);
                    }
                    cp_async_commit();
                };
                // Unrolled tiles that read early issue B's copies (and the commit) after the
                // fragments of kk = B_COPIES_AT_KK; all others issue everything here.
                let late_b_copies = !PIPELINED && EARLY_FRAGMENTS;
                copy_a();
                if !late_b_copies {
                    copy_b();
                }
                let (a_first, b_first) = stage_rows(read_stage);
                let first = match early {
                    Some(first) => first,
                    None => fragments::<TM, TN, LM>(a_first, b_first),
                };
                compute_stage::<BM, BN, BK, TM, TN, LM, PIPELINED>(a_first, b_first, first, acc, || {
                    if late_b_copies {
                        copy_b();
                    }
                });
                read_stage = if read_stage + 1 == STAGES { 0 } else { read_stage + 1 };
                write_stage = if write_stage + 1 == STAGES { 0 } else { write_stage + 1 };
            };
            // The k-steps that run `fast`: those whose copies (of k-step kt + STAGES - 1) lie
            // wholly inside k, in a tile wholly inside C whose m/n-contiguous operands are
            // 16-byte aligned (k-contiguous ones are copied a float at a time anyway). They
            // come first; the checked loop finishes the last STAGES - 1 k-steps (which issue
            // no copies, or copy a partial k-step).
            let fast_iters = if FAST_LOOP {
                let tile_inside = p.m - m0 >= BM as u32 && p.n - n0 >= BN as u32;
                let vectors = (A_K_CONTIGUOUS || flags & A_VECTOR != 0) && (B_K_CONTIGUOUS || flags & B_VECTOR != 0);
                if tile_inside && vectors { (k_len / BK as u32).saturating_sub(STAGES as u32 - 1).min(k_iters) } else { 0 }
            } else {
                0
            };
            for kt in rolled(0..fast_iters) {
                step(kt, true, &mut acc);
            }
            for kt in rolled(fast_iters..k_iters) {
                step(kt, false, &mut acc);
            }
            cp_async_wait(0);
        } else {
            if k_iters > 0 {
                let (a_copy, b_copy) = copies();
                let a_regs = a_copy.load::<BM, BK, NT, EA>(0, k_len);
                let b_regs = b_copy.load::<BN, BK, NT, EB>(0, k_len);
                a_copy.store::<EA>(smem, &a_regs);
                b_copy.store::<EB>(smem.add(a_stage_floats), &b_regs);
            }
            sync_threads();
            for kt in rolled(0..k_iters) {
                let current = smem.add((kt as usize & 1) * stage_floats);
                let other = smem.add((!kt as usize & 1) * stage_floats);
                let has_next = kt + 1 < k_iters;
                let k_next = (kt + 1) * BK as u32;
                let mut a_regs = [0.0f32; EA];
                let mut b_regs = [0.0f32; EB];
                let (a_copy, b_copy) = copies();
                if has_next {
                    a_regs = a_copy.load::<BM, BK, NT, EA>(k_next, k_len);
                    b_regs = b_copy.load::<BN, BK, NT, EB>(k_next, k_len);
                }
                let (a_first, b_first) = stage_rows(kt as usize & 1);
                let first = fragments::<TM, TN, LM>(a_first, b_first);
                compute_stage::<BM, BN, BK, TM, TN, LM, PIPELINED>(a_first, b_first, first, &mut acc, || {});
                if has_next {
                    // Rebuilt rather than kept: keeping the plans live across the FMAs costs
                    // registers.
                    let (a_copy, b_copy) = copies();
                    a_copy.store::<EA>(other, &a_regs);
                    b_copy.store::<EB>(other.add(a_stage_floats), &b_regs);
                }
                sync_threads();
            }
        }

        // Epilogue: C = alpha·acc + beta·C over the part of the tile this block owns. Its
        // indices go through `opaque` so that they are computed here, after the main loop,
        // rather than before it, where they would occupy registers through the whole loop.
        // (A moved tile's origin is recomputed rather than kept live through the main loop.)
        let (row0, col0) = (opaque(row0 as u32) as usize, opaque(col0 as u32) as usize);
        let tile = if MOVES_EDGE_TILES {
            BlockTile::new::<BM, BN, true, A_K_CONTIGUOUS, B_K_CONTIGUOUS, true>(p)
        } else {
            BlockTile { m_start: 0, n_start: 0, m0: opaque(m0), n0: opaque(n0) }
        };
        let (m0, n0) = (tile.m0, tile.n0);
        let transposed = TURNS && flags & C_TRANSPOSED != 0;
        let c_out = COutput::<MOVES_EDGE_TILES> {
            base: p.c.ptr_mut().wrapping_add((batch as u64 * p.stride_c) as usize),
            m_start: tile.m_start,
            n_start: tile.n_start,
            beta_zero: flags & BETA_ZERO != 0,
            // A moved edge tile's columns are 16-byte aligned only if it moved by a multiple of 4
            // (turned: its rows, which `store_turned` tests).
            vector: flags & C_VECTOR != 0 && (!MOVES_EDGE_TILES || transposed || n0 % 4 == 0),
            transposed,
        };
        if SPLITS_K && flags & SPLIT_WORKSPACE != 0 {
            reduce_k_splits_in_workspace::<BM, BN, TM, TN, LM, NT, MOVES_EDGE_TILES>(p, &c_out, &acc, smem, m0, n0, row0, col0, tid, batch);
        } else if CLUSTER_SPLIT && grid_dim_y() > 1 {
            reduce_k_splits::<BM, BN, TM, TN, LM, NT, MOVES_EDGE_TILES>(p, &c_out, &acc, smem, m0, n0, row0, col0, tid);
        } else if c_out.transposed {
            store_turned::<TM, TN, LM, MOVES_EDGE_TILES>(p, &c_out, &acc, m0, n0, row0, col0);
        } else if STAGED_ROWS > 0 && !c_out.vector && c_out.owned_columns(p, n0, BN as u32) >= STAGED_STORES_MIN_COLUMNS {
            // (The same for the whole block: every thread takes this branch or none.)
            // (`opaque(tid)`: the staging addresses are computed here, not hoisted out of the batch
            // loop to hold registers through the main loop.)
            store_rows_through_shared::<TM, TN, LM, STAGED_ROWS, MOVES_EDGE_TILES>(p, &c_out, &acc, smem, m0, n0, row0, col0, opaque(tid));
        } else {
            for i in 0..TM / 4 {
                for r in 0..4 {
                    let row = m0 + (row0 + i * LM * 4 + r) as u32;
                    if !c_out.owns_row(p, row) {
                        continue;
                    }
                    let c_row = c_out.row(p, row);
                    for j in 0..TN / 4 {
                        let col = n0 + (col0 + j * ln * 4) as u32;
                        let v = &acc[4 * i + r][4 * j..4 * j + 4];
                        c_out.store4(p, c_row, col, [v[0], v[1], v[2], v[3]]);
                    }
                }
            }
        }

        batch += grid_dim_z();
        if batch < p.batch {
            // The next batch refills shared memory that slow threads may still be reading.
            sync_threads();
        }
    }
}

/// Defines the PTX entry point of one variant and operand layout with this build's config row:
/// the `gemv` kernel for [`SgemmVariant::Gemv`] (its dot body where B is k-contiguous, its
/// column body otherwise), the `tiny` kernel for [`SgemmVariant::Tiny`], the block-tile
/// kernel for the others.
macro_rules! sgemm_entry {
    ($name:ident, Gemv, $operands:ident) => {
        sgemm_entry!(@signature $name, |problem| {
            const G: GemvConfig = sgemm_config(BUILD_CONFIG).gemv;
            const OPERANDS: SgemmOperands = SgemmOperands::$operands;
            if OPERANDS.b_k_contiguous() {
                gemv_dot::<
                    { G.dot_columns as usize },
                    { G.dot_unroll_for_rows(3) as usize },
                    { G.dot_unroll_for_rows(1) as usize },
                    { G.dot_unroll_scalar(OPERANDS.a_k_contiguous()) as usize },
                    { OPERANDS.a_k_contiguous() },
                >(&problem, G)
            } else {
                gemv::<{ G.warps as usize }, { G.unroll as usize }, { G.unroll_narrow as usize }, { OPERANDS.a_k_contiguous() }>(&problem)
            }
        });
    };
    ($name:ident, Tiny, $operands:ident) => {
        sgemm_entry!(@signature $name, |problem| {
            const C: TinyConfig = sgemm_config(BUILD_CONFIG).tiny;
            const OPERANDS: SgemmOperands = SgemmOperands::$operands;
            tiny::<{ C.unroll as usize }, { OPERANDS.a_k_contiguous() }, { OPERANDS.b_k_contiguous() }>(&problem, C)
        });
    };
    ($name:ident, $variant:ident, $operands:ident) => {
        sgemm_entry!(@signature $name, |problem| {
            const T: SgemmTile = sgemm_config(BUILD_CONFIG).tile(SgemmVariant::$variant);
            const ASYNC: bool = BUILD_CONFIG.limits().has_cp_async;
            const OPERANDS: SgemmOperands = SgemmOperands::$operands;
            sgemm::<
                { T.bm as usize },
                { T.bn as usize },
                { T.bk as usize },
                { T.tm as usize },
                { T.tn as usize },
                { T.lanes_m as usize },
                { T.stages as usize },
                ASYNC,
                { OPERANDS.a_k_contiguous() },
                { OPERANDS.b_k_contiguous() },
                { T.threads() as usize },
                { T.a_elems_per_thread() as usize },
                { T.b_elems_per_thread() as usize },
                { T.pipelined_fragments() },
                { T.reads_first_fragments_early(&BUILD_CONFIG.limits()) },
                { T.has_fast_loop(&BUILD_CONFIG.limits()) },
                { T.splits_k() },
                { T.can_split_k(&BUILD_CONFIG.limits()) },
                { T.moves_edge_tiles() },
                { T.store_staging_rows(&BUILD_CONFIG.limits()) as usize },
                { SgemmVariant::$variant.can_turn() },
            >(&problem)
        });
    };
    (@signature $name:ident, |$problem:ident| $body:block) => {
        sgemm_params_entry!(
            /// SGEMM entry point (see the module docs). Arguments are validated by the host.
            ///
            /// # Safety
            /// Every pointer must cover the elements the canonical problem addresses.
            $name,
            |$problem| {
                // sm_90+: this launch, a dependent of the launch before it, waits for that
                // grid before touching any memory ("Launch overlap" above).
                wait_for_prerequisite_grid();
                $body
            }
        );
    };
}

macro_rules! define_entries {
    ($(($name:ident, $variant:ident, $operands:ident)),*) => {
        $(sgemm_entry!($name, $variant, $operands);)*
    };
}
crate::with_sgemm_kernels!(define_entries);
