//! FP32 GEMM with the contract of cuBLAS `cublasSgemmStridedBatched`:
//! `C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b]` for `b` in `0..batch`.
//!
//! # Layout convention
//! [`Layout::RowMajor`] (the default, what Rust frameworks use): element `(r, c)` of a stored
//! matrix is at `r * ld + c`, so `ld ≥ columns`. [`Layout::ColMajor`] (cuBLAS, Fortran): at
//! `r + c * ld`, so `ld ≥ rows`. The layout applies to A, B and C alike. `op(A)` is `m × k`,
//! `op(B)` is `k × n`, C is `m × n`; with [`Transpose::Yes`] the stored A is `k × m`.
//!
//! Batch `b` of A starts at element `b * stride_a` (likewise B, C). A stride of 0 broadcasts
//! one A (or B) to every batch; C's batches must not overlap.
//!
//! With `beta == 0`, C is only written: NaN or garbage in C does not reach the result. With
//! `k == 0` or `alpha == 0`, A and B are not read and `C = beta · C`.
//!
//! # How a call runs
//! [`Sgemm::plan`] validates everything and maps the call onto the kernels' one canonical form
//! (row-major C; see `kernels-gpu/src/device/sgemm.rs`): a column-major problem is computed as
//! the row-major `Cᵀ = op(B)ᵀ · op(A)ᵀ`, which swaps the operands and costs nothing. Then the
//! dispatcher picks a kernel variant and a k split (rule in [`choose_kernel`]).
//!
//! # Split k
//! A problem with too few tiles to fill the GPU (a long k over a small C above all) can spread
//! each tile's k range over several blocks ([`SgemmChoice::k_splits`]). Each block computes a
//! partial tile over its slice of k, and the partial tiles are added in split order, so the
//! result has the same bits on every run, whichever way they meet ([`SplitReduction`]):
//! - **over a thread-block cluster** (sm_90 and newer, up to [`MAX_K_SPLITS`] blocks): through
//!   distributed shared memory; no workspace, no atomics.
//! - **through a workspace** (every architecture, up to [`MAX_WORKSPACE_K_SPLITS`] blocks): each
//!   block stores its partial tile in global memory and counts its arrival on the tile's
//!   counter; the last to arrive adds them all and writes C. The counters are back at zero
//!   after every launch.
//!
//! Where the workspace comes from: [`Cukernels::sgemm`] and [`Cukernels::sgemm_with`] use one
//! the handle owns (allocated and zeroed with the SGEMM module, on the first SGEMM call or by
//! [`Cukernels::preload`]; [`default_split_workspace_bytes`]: enough for every split the
//! dispatcher considers), for the first stream that splits through it; calls on other streams
//! plan without it. [`Cukernels::sgemm_in`] takes the caller's
//! ([`Cukernels::sgemm_workspace`]; [`Cukernels::sgemm_workspace_bytes`] gives the size a call
//! needs), and the raw entry point takes one in [`SgemmBuffers`]. Nothing is allocated per
//! call after the first, so every call after `preload` can be captured in a CUDA graph.

use crate::error::{Error, Result};
use crate::runtime::{launch, Cukernels, LaunchAttribute};
use cukernels_gpu::KernelFamily;
use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cukernels_gpu::sgemm_flags::{A_VECTOR, BETA_ZERO, B_VECTOR, C_TRANSPOSED, C_VECTOR, SPLIT_WORKSPACE, TINY_LANES_MASK, TINY_LANES_SHIFT};
use cukernels_gpu::{GlobalPtr, SgemmArchConfig, SgemmOperands, SgemmParams, SgemmTile, SgemmVariant, TinyConfig, GEMV_COLUMNS, MAX_K_SPLITS, SMALL_TILE_MAX_ELEMENTS, TINY_TILE};

/// Which kernel runs a problem: a variant, and over how many blocks each tile's k range is
/// split (1: no split) and how those blocks add their partial tiles. [`choose_kernel`] picks
/// one; tests and benchmarks may force one through [`Cukernels::sgemm_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SgemmChoice {
    pub variant: SgemmVariant,
    pub k_splits: u32,
    /// How a split's blocks add their partial tiles (ignored when `k_splits` is 1).
    pub reduction: SplitReduction,
    /// The problem runs turned around, `Cᵀ = op(B)ᵀ · op(A)ᵀ` with C written transposed
    /// (only variants that [`SgemmVariant::can_turn`]; `gemv` turns by its own rule, see
    /// [`Sgemm::plan`]).
    pub turned: bool,
}

/// How the blocks of a k split add their partial tiles (see the module docs). Both add them in
/// split order: the same bits on every run, and the same bits either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SplitReduction {
    /// Through the distributed shared memory of a thread-block cluster: sm_90 and newer, up
    /// to [`MAX_K_SPLITS`] blocks, no workspace.
    Cluster,
    /// Through a workspace in global memory ([`SgemmWorkspace`]): every architecture, up to
    /// [`MAX_WORKSPACE_K_SPLITS`] blocks.
    Workspace,
}

impl SgemmChoice {
    /// `variant` with each tile's k split over a cluster of `k_splits` blocks.
    pub const fn cluster_split(variant: SgemmVariant, k_splits: u32) -> SgemmChoice {
        SgemmChoice { variant, k_splits, reduction: SplitReduction::Cluster, turned: false }
    }

    /// `variant` with each tile's k split over `k_splits` blocks that meet in the workspace.
    pub const fn workspace_split(variant: SgemmVariant, k_splits: u32) -> SgemmChoice {
        SgemmChoice { variant, k_splits, reduction: SplitReduction::Workspace, turned: false }
    }

    /// The same choice, run turned around (see [`SgemmChoice::turned`]).
    pub const fn turn(self) -> SgemmChoice {
        SgemmChoice { turned: true, ..self }
    }

    /// Whether this choice adds partial tiles through a workspace.
    pub fn uses_workspace(&self) -> bool {
        self.k_splits > 1 && self.reduction == SplitReduction::Workspace
    }
}

impl From<SgemmVariant> for SgemmChoice {
    fn from(variant: SgemmVariant) -> SgemmChoice {
        SgemmChoice::cluster_split(variant, 1)
    }
}

impl std::fmt::Display for SgemmChoice {
    /// `medium`, `medium/k3` (over a cluster of 3), `medium/w24` (over 24 blocks through the
    /// workspace), `skinny/t` (turned around), `skinny/t/w6`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.variant.name())?;
        if self.turned {
            f.write_str("/t")?;
        }
        match (self.k_splits, self.reduction) {
            (1, _) => Ok(()),
            (splits, SplitReduction::Cluster) => write!(f, "/k{splits}"),
            (splits, SplitReduction::Workspace) => write!(f, "/w{splits}"),
        }
    }
}

/// The most blocks one tile's k range may be split over through the workspace.
pub const MAX_WORKSPACE_K_SPLITS: u32 = 1024;

/// A k-split workspace holds one arrival counter per this many bytes, before its partial
/// tiles: more counters than any plan that fits can use (a (batch, tile) slot has at least two
/// partial tiles of at least 1024 floats, 8 KiB), so the counters never move with the plan,
/// and a slot's counter is always one that the previous launches left at zero.
const WORKSPACE_BYTES_PER_COUNTER: usize = 2048;
/// Where the partial tiles start: a multiple of this (their 16-byte stores need 16).
const WORKSPACE_ALIGN: usize = 256;

/// The parts of a k-split workspace of some size: `counters` arrival counters (`u32`, zero
/// between launches) at its start, then `partial_bytes` bytes for partial tiles from
/// `partials_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitWorkspaceLayout {
    pub counters: usize,
    pub partials_offset: usize,
    pub partial_bytes: usize,
}

impl SplitWorkspaceLayout {
    /// The layout of a workspace of `bytes` bytes.
    pub fn of(bytes: usize) -> SplitWorkspaceLayout {
        let counters = bytes / WORKSPACE_BYTES_PER_COUNTER;
        let partials_offset = (counters * 4).next_multiple_of(WORKSPACE_ALIGN).min(bytes);
        SplitWorkspaceLayout { counters, partials_offset, partial_bytes: bytes - partials_offset }
    }

    /// Whether a launch with `slots` (batch, tile) slots and `partial_bytes` bytes of partial
    /// tiles fits.
    pub fn fits(&self, slots: u64, partial_bytes: u64) -> bool {
        slots <= self.counters as u64 && partial_bytes <= self.partial_bytes as u64
    }

    /// The smallest workspace (bytes) in which such a launch fits.
    pub fn bytes_for(slots: u64, partial_bytes: u64) -> usize {
        // The counters take at least a 512th of the whole, so the smallest fit is at least
        // `need + need / 512`: start just below that and step up.
        let need = usize::try_from(partial_bytes).unwrap_or(usize::MAX);
        let counters_floor = need / (WORKSPACE_BYTES_PER_COUNTER / 4) / WORKSPACE_ALIGN * WORKSPACE_ALIGN;
        let mut bytes = need.saturating_add(counters_floor);
        while !SplitWorkspaceLayout::of(bytes).fits(slots, partial_bytes) && bytes < usize::MAX - WORKSPACE_ALIGN {
            bytes += WORKSPACE_ALIGN;
        }
        bytes
    }
}

/// Device memory for k splits whose blocks add their partial tiles through global memory
/// ([`SplitReduction::Workspace`]), made by [`Cukernels::sgemm_workspace`]. It is zeroed once;
/// every launch leaves its counters at zero again, so any number of later calls reuse it.
/// cudarc orders the streams that use it, as for any buffer.
pub struct SgemmWorkspace {
    buffer: CudaSlice<u8>,
}

impl SgemmWorkspace {
    pub fn bytes(&self) -> usize {
        self.buffer.len()
    }

    /// The memory itself (tests read it back: between launches its counters are zero).
    pub fn buffer(&self) -> &CudaSlice<u8> {
        &self.buffer
    }
}

/// The size of the workspace a handle owns: one wave of split blocks (`SMs × blocks_per_sm`)
/// of the largest tile that splits k, which covers every split the dispatcher considers
/// ([`kernel_candidates`]). 17.3 MB on the H200 (132 SMs, eight 64×64 `small` blocks each).
pub fn default_split_workspace_bytes(row: &SgemmArchConfig, sm_count: u32) -> usize {
    let wave = |t: SgemmTile| sm_count as u64 * t.blocks_per_sm as u64;
    let (slots, partial_bytes) = SgemmVariant::TILED
        .iter()
        .map(|&v| row.tile(v))
        .filter(|t| t.splits_k())
        .map(|t| (wave(t) / 2, wave(t) * (t.bm * t.bn) as u64 * 4))
        .fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
    SplitWorkspaceLayout::bytes_for(slots, partial_bytes)
}

/// The (batch, tile) slots and partial-tile bytes of a k split through the workspace.
fn workspace_need(tile: &SgemmTile, m: usize, n: usize, batch: usize, k_splits: u32) -> (u64, u64) {
    let slots = tile.tile_count(m, n).saturating_mul(batch as u64);
    (slots, slots.saturating_mul(k_splits as u64).saturating_mul(tile.bm as u64 * tile.bn as u64 * 4))
}

/// The smallest workspace (bytes) for that split: 0 for an empty C.
fn workspace_bytes_needed(tile: &SgemmTile, m: usize, n: usize, batch: usize, k_splits: u32) -> usize {
    if m == 0 || n == 0 || batch == 0 {
        return 0;
    }
    let (slots, partial_bytes) = workspace_need(tile, m, n, batch, k_splits);
    SplitWorkspaceLayout::bytes_for(slots, partial_bytes)
}

/// Storage order of all three matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Layout {
    /// `(r, c)` at `r * ld + c`.
    #[default]
    RowMajor,
    /// `(r, c)` at `r + c * ld` (cuBLAS).
    ColMajor,
}

/// Whether an operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Transpose {
    #[default]
    No,
    Yes,
}

/// A strided-batched SGEMM problem. Build with [`Sgemm::new`] and the setters; every field is
/// public and checked by [`Sgemm::plan`] before any launch.
///
/// The setters do not depend on the order they are called in: leading dimensions not given
/// through [`leading_dims`](Self::leading_dims) follow the shape, layout and transposes
/// (tight), and batch strides not given through [`strides`](Self::strides) follow the
/// leading dimensions (one stored matrix after another), whenever any setter runs. So
/// `Sgemm::new(m, n, k).leading_dims(..).layout(..).batched(..)` and every other order of the
/// same calls build the same problem. Fields assigned directly are taken as they are, until a
/// setter recomputes the ones that were not given explicitly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sgemm {
    pub layout: Layout,
    pub trans_a: Transpose,
    pub trans_b: Transpose,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub beta: f32,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub batch: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
    /// Which of the leading dimensions and strides the caller gave; the others are derived.
    explicit: Explicit,
}

/// What the caller of the builder set explicitly (see [`Sgemm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Explicit {
    leading_dims: bool,
    strides: bool,
}

/// Largest m, n or k: the kernels index within a matrix with 32-bit integers.
pub const MAX_DIM: usize = i32::MAX as usize;
/// Most blocks in a grid's x dimension.
const MAX_GRID_X: u64 = i32::MAX as u64;
/// Most blocks in a grid's z dimension; larger batches loop inside the kernel.
const MAX_GRID_Z: usize = 65535;

impl Sgemm {
    /// `C = op(A) · op(B)` (alpha 1, beta 0), row-major, no transposes, tight leading dimensions,
    /// one batch.
    pub fn new(m: usize, n: usize, k: usize) -> Sgemm {
        let mut g = Sgemm {
            layout: Layout::RowMajor,
            trans_a: Transpose::No,
            trans_b: Transpose::No,
            m,
            n,
            k,
            alpha: 1.0,
            beta: 0.0,
            lda: 0,
            ldb: 0,
            ldc: 0,
            batch: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
            explicit: Explicit::default(),
        };
        g.derive();
        g
    }

    /// Forgets explicitly set leading dimensions and strides: all become tight for the current
    /// shape, layout and transposes.
    pub fn tight(&mut self) -> &mut Self {
        self.explicit = Explicit::default();
        self.derive();
        self
    }

    /// Recomputes what the caller did not set: tight leading dimensions from the shape, layout
    /// and transposes, and batch strides of one stored matrix from the leading dimensions.
    /// Every setter ends with it, which makes the builder independent of call order.
    fn derive(&mut self) {
        let (ar, ac) = self.stored_a();
        let (br, bc) = self.stored_b();
        let layout = self.layout;
        // (extent along the contiguous direction, extent across it) of a stored matrix.
        let extents = |rows: usize, cols: usize| match layout {
            Layout::RowMajor => (cols, rows),
            Layout::ColMajor => (rows, cols),
        };
        let (a_minor, a_major) = extents(ar, ac);
        let (b_minor, b_major) = extents(br, bc);
        let (c_minor, c_major) = extents(self.m, self.n);
        if !self.explicit.leading_dims {
            self.lda = a_minor.max(1);
            self.ldb = b_minor.max(1);
            self.ldc = c_minor.max(1);
        }
        if !self.explicit.strides {
            self.stride_a = a_major * self.lda;
            self.stride_b = b_major * self.ldb;
            self.stride_c = c_major * self.ldc;
        }
    }

    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self.derive();
        self
    }
    pub fn transpose(mut self, a: Transpose, b: Transpose) -> Self {
        self.trans_a = a;
        self.trans_b = b;
        self.derive();
        self
    }
    pub fn alpha_beta(mut self, alpha: f32, beta: f32) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }
    /// `batch` problems; unless [`strides`](Self::strides) gives them, one stored matrix after
    /// another (non-overlapping, including any padding of the leading dimensions).
    pub fn batched(mut self, batch: usize) -> Self {
        // The derived leading dimensions and strides do not depend on the batch.
        self.batch = batch;
        self
    }
    /// Leading dimensions (each at least the stored matrix's row length in its layout); they
    /// stay as given whatever is set after them.
    pub fn leading_dims(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        self.lda = lda;
        self.ldb = ldb;
        self.ldc = ldc;
        self.explicit.leading_dims = true;
        self.derive();
        self
    }
    /// Batch strides in elements (0 broadcasts A or B); they stay as given whatever is set
    /// after them.
    pub fn strides(mut self, stride_a: usize, stride_b: usize, stride_c: usize) -> Self {
        self.stride_a = stride_a;
        self.stride_b = stride_b;
        self.stride_c = stride_c;
        self.explicit.strides = true;
        self
    }

    /// Rows and columns of A as stored.
    pub fn stored_a(&self) -> (usize, usize) {
        match self.trans_a {
            Transpose::No => (self.m, self.k),
            Transpose::Yes => (self.k, self.m),
        }
    }
    /// Rows and columns of B as stored.
    pub fn stored_b(&self) -> (usize, usize) {
        match self.trans_b {
            Transpose::No => (self.k, self.n),
            Transpose::Yes => (self.n, self.k),
        }
    }

    /// Floating-point operations of the whole problem (2·m·n·k per batch).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Elements a buffer must hold for a `rows × cols` matrix with leading dimension `ld`,
    /// repeated `batch` times `stride` apart; `None` on overflow.
    fn footprint(&self, rows: usize, cols: usize, ld: usize, stride: usize) -> Option<usize> {
        if rows == 0 || cols == 0 || self.batch == 0 {
            return Some(0);
        }
        let (rs, cs) = match self.layout {
            Layout::RowMajor => (ld, 1),
            Layout::ColMajor => (1, ld),
        };
        let one = (rows - 1).checked_mul(rs)?.checked_add((cols - 1).checked_mul(cs)?)?.checked_add(1)?;
        (self.batch - 1).checked_mul(stride)?.checked_add(one)
    }

    /// Whether A and B are read at all (not when C = beta·C).
    fn reads_inputs(&self) -> bool {
        self.k > 0 && self.alpha != 0.0 && self.m > 0 && self.n > 0
    }

    /// The workspace bytes this problem needs on a device of `sm_count` SMs with config `row`,
    /// with `choice` (`None`: the dispatcher's pick when any workspace is at hand): 0 unless
    /// that splits k through a workspace.
    pub fn split_workspace_bytes(&self, row: &SgemmArchConfig, sm_count: u32, choice: Option<SgemmChoice>) -> usize {
        let (cm, cn, k) = self.canonical_shape();
        let c = choice.unwrap_or_else(|| choose_kernel(cm, cn, k, self.batch, self.canonical_operands(), row, sm_count, usize::MAX));
        if !c.uses_workspace() || !SgemmVariant::TILED.contains(&c.variant) {
            return 0;
        }
        let (cm, cn) = if c.turned { (cn, cm) } else { (cm, cn) };
        workspace_bytes_needed(&row.tile(c.variant), cm, cn, self.batch, c.k_splits)
    }

    /// The strides (row, column) of the canonical problem's left (m × k) and right (k × n)
    /// operands: element (r, c) at `r·rs + c·cs`, one of the two 1. Row-major C: op(A) and
    /// op(B); column-major C: Cᵀ = op(B)ᵀ op(A)ᵀ (transposing an operand swaps its strides).
    fn canonical_strides(&self) -> [(usize, usize); 2] {
        let op_strides = |trans: Transpose, ld: usize| -> (usize, usize) {
            let stored = match self.layout {
                Layout::RowMajor => (ld, 1),
                Layout::ColMajor => (1, ld),
            };
            match trans {
                Transpose::No => stored,
                Transpose::Yes => (stored.1, stored.0),
            }
        };
        let (opa, opb) = (op_strides(self.trans_a, self.lda), op_strides(self.trans_b, self.ldb));
        match self.layout {
            Layout::RowMajor => [opa, opb],
            Layout::ColMajor => [(opb.1, opb.0), (opa.1, opa.0)],
        }
    }

    /// Which of the canonical problem's operands are k-contiguous (see
    /// [`canonical_strides`](Self::canonical_strides)): the left one (m × k) where its
    /// column stride is 1, the right one (k × n) where its row stride is 1, each only where
    /// its other stride is not 1 as well (a leading dimension of 1), as [`Sgemm::plan`] tests
    /// the operand that `gemv` streams. The dispatcher takes it ([`choose_kernel`]): it
    /// decides `gemv`'s body.
    pub fn canonical_operands(&self) -> SgemmOperands {
        let [left, right] = self.canonical_strides();
        SgemmOperands::new(left.1 == 1 && left.0 != 1, right.0 == 1 && right.1 != 1)
    }

    /// The canonical problem's (m, n, k), which the kernels run: C row-major (a column-major C
    /// is the row-major Cᵀ, so m and n swap), and no k where nothing is read (C = beta·C).
    fn canonical_shape(&self) -> (usize, usize, usize) {
        let k = if self.reads_inputs() { self.k } else { 0 };
        match self.layout {
            Layout::RowMajor => (self.m, self.n, k),
            Layout::ColMajor => (self.n, self.m, k),
        }
    }

    /// Validates the problem against the buffers (device addresses and lengths in elements) and
    /// maps it onto a kernel launch for a device with `sm_count` SMs and config `row`.
    /// `choice` overrides the dispatcher (benchmarks, tests).
    pub fn plan(&self, buffers: &SgemmBuffers, row: &SgemmArchConfig, sm_count: u32, choice: Option<SgemmChoice>) -> Result<SgemmPlan> {
        let g = self;
        for (name, v) in [("m", g.m), ("n", g.n), ("k", g.k)] {
            if v > MAX_DIM {
                return Err(Error::invalid(name, v, format!("at most {MAX_DIM}")));
            }
        }
        if g.batch > u32::MAX as usize {
            return Err(Error::invalid("batch", g.batch, format!("at most {}", u32::MAX)));
        }
        let (ar, ac) = g.stored_a();
        let (br, bc) = g.stored_b();
        let min_ld = |rows: usize, cols: usize| match g.layout {
            Layout::RowMajor => cols.max(1),
            Layout::ColMajor => rows.max(1),
        };
        let what = match g.layout {
            Layout::RowMajor => "columns",
            Layout::ColMajor => "rows",
        };
        for (name, ld, rows, cols) in [("lda", g.lda, ar, ac), ("ldb", g.ldb, br, bc), ("ldc", g.ldc, g.m, g.n)] {
            if ld < min_ld(rows, cols) {
                return Err(Error::invalid(name, ld, format!("must be at least the stored matrix's {what} ({})", min_ld(rows, cols))));
            }
        }
        let reads_inputs = g.reads_inputs();
        let overflow = |name: &'static str, stride: usize| Error::invalid(name, stride, "the buffer extent overflows usize");
        let need_a = if reads_inputs { g.footprint(ar, ac, g.lda, g.stride_a).ok_or_else(|| overflow("stride_a", g.stride_a))? } else { 0 };
        let need_b = if reads_inputs { g.footprint(br, bc, g.ldb, g.stride_b).ok_or_else(|| overflow("stride_b", g.stride_b))? } else { 0 };
        let need_c = g.footprint(g.m, g.n, g.ldc, g.stride_c).ok_or_else(|| overflow("stride_c", g.stride_c))?;
        for (name, len, need) in [("a", buffers.a_len, need_a), ("b", buffers.b_len, need_b), ("c", buffers.c_len, need_c)] {
            if len < need {
                return Err(Error::BufferTooSmall { name, len, required: need });
            }
        }
        if g.batch > 1 && need_c > 0 {
            let one_c = g.footprint(g.m, g.n, g.ldc, 0).expect("fits: checked above");
            if g.stride_c < one_c {
                return Err(Error::Overlap(format!(
                    "stride_c = {} but one C matrix spans {one_c} elements, so batches of C overlap",
                    g.stride_c
                )));
            }
        }
        let range = |addr: u64, len: usize| (addr, addr.saturating_add((len as u64).saturating_mul(4)));
        let overlaps = |x: (u64, u64), y: (u64, u64)| x.0 < y.1 && y.0 < x.1;
        if need_c > 0 {
            let c = range(buffers.c_addr, need_c);
            if need_a > 0 && overlaps(c, range(buffers.a_addr, need_a)) {
                return Err(Error::Overlap("C overlaps A in device memory".into()));
            }
            if need_b > 0 && overlaps(c, range(buffers.b_addr, need_b)) {
                return Err(Error::Overlap("C overlaps B in device memory".into()));
            }
        }

        // Canonical form: row-major C (cm × cn). Each operand's element (row, col) sits at
        // row·rs + col·cs; one of the two strides is 1.
        struct Operand {
            addr: u64,
            strides: (usize, usize),
            batch_stride: usize,
        }
        let (cm, cn, k) = g.canonical_shape();
        let [left_strides, right_strides] = g.canonical_strides();
        // (address, batch stride) of A and B; column-major C takes B on the left.
        let (a, b) = ((buffers.a_addr, g.stride_a), (buffers.b_addr, g.stride_b));
        let ((left_addr, left_batch), (right_addr, right_batch)) = match g.layout {
            Layout::RowMajor => (a, b),
            Layout::ColMajor => (b, a),
        };
        let left = Operand { addr: left_addr, strides: left_strides, batch_stride: left_batch };
        let right = Operand { addr: right_addr, strides: right_strides, batch_stride: right_batch };
        let workspace = SplitWorkspaceLayout::of(buffers.workspace_bytes);
        let chosen = choice.unwrap_or_else(|| choose_kernel(cm, cn, k, g.batch, g.canonical_operands(), row, sm_count, buffers.workspace_bytes));
        let SgemmChoice { variant, k_splits, reduction, turned } = chosen;
        if turned && !variant.can_turn() {
            return Err(Error::invalid("choice", chosen, format!("{} does not run turned around (only skinny does)", variant.name())));
        }
        let through_workspace = chosen.uses_workspace();
        // `gemv` keeps at most `GEMV_MAX_M` rows of C in registers and streams B: a product with
        // fewer columns than rows runs turned around, `Cᵀ = op(B)ᵀ · op(A)ᵀ` (the operands swap
        // and transpose, C is written transposed: `C_TRANSPOSED`), so the operand it streams
        // is always the larger one. A turned tile choice does the same, so that `skinny`'s 16
        // rows lie along the caller's few columns.
        let turned = turned || (variant == SgemmVariant::Gemv && cn < cm);
        let (cm, cn, left, right) = if turned {
            (cn, cm, Operand { strides: (right.strides.1, right.strides.0), ..right }, Operand { strides: (left.strides.1, left.strides.0), ..left })
        } else {
            (cm, cn, left, right)
        };
        let aligned = |addr: u64, ld: usize, stride: usize| addr % 16 == 0 && ld % 4 == 0 && (g.batch <= 1 || stride % 4 == 0);
        let mut flags = 0u32;
        // Left operand (cm × k): k-contiguous when its column stride is 1.
        let (lda, a_k_contiguous) = if left.strides.1 == 1 { (left.strides.0, true) } else { (left.strides.1, false) };
        // Right operand (k × cn): k-contiguous when its row stride is 1.
        let (ldb, b_k_contiguous) = if right.strides.0 == 1 && right.strides.1 != 1 {
            (right.strides.1, true)
        } else {
            (right.strides.0, false)
        };
        // A_VECTOR / B_VECTOR: 16-byte loads along the operand's contiguous direction. The tile
        // kernels copy a k-contiguous operand a float at a time (transposing it into shared
        // memory) and only take the flag for the other layout; `gemv` reads either layout in
        // 16-byte chunks where aligned.
        let gemv = variant == SgemmVariant::Gemv;
        if (gemv || !a_k_contiguous) && aligned(left.addr, lda, left.batch_stride) {
            flags |= A_VECTOR;
        }
        if (gemv || !b_k_contiguous) && aligned(right.addr, ldb, right.batch_stride) {
            flags |= B_VECTOR;
        }
        if aligned(buffers.c_addr, g.ldc, g.stride_c) {
            flags |= C_VECTOR;
        }
        if g.beta == 0.0 {
            flags |= BETA_ZERO;
        }
        if turned {
            flags |= C_TRANSPOSED;
        }

        if k_splits != 1 {
            let max = if through_workspace { MAX_WORKSPACE_K_SPLITS } else { MAX_K_SPLITS };
            let why = if k_splits == 0 || k_splits > max {
                Some(match reduction {
                    SplitReduction::Cluster => format!("must be 1 to {MAX_K_SPLITS} (a cluster's blocks)"),
                    SplitReduction::Workspace => format!("must be 1 to {MAX_WORKSPACE_K_SPLITS} through the workspace"),
                })
            } else if variant == SgemmVariant::Gemv {
                Some("gemv does not split k".to_string())
            } else if variant == SgemmVariant::Tiny {
                Some("tiny splits k between the lanes of a warp, not over blocks".to_string())
            } else if !row.tile(variant).splits_k() {
                Some(format!("{} does not split k (only tiles of at most {SMALL_TILE_MAX_ELEMENTS} elements do)", variant.name()))
            } else if !through_workspace && !row.tile(variant).can_split_k(&row.arch.limits()) {
                Some(format!("{} has no cluster k split on {} (needs thread-block clusters and room for a partial tile)", variant.name(), row.arch))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(Error::invalid("k_splits", k_splits, why));
            }
        }
        // A split through the workspace: the workspace must hold its counters and partial
        // tiles, and must not overlap A, B or C (its partial tiles are written while they are
        // read).
        let (split_partials, split_counters) = if through_workspace && !(cm == 0 || cn == 0 || g.batch == 0) {
            let (slots, partial_bytes) = workspace_need(&row.tile(variant), cm, cn, g.batch, k_splits);
            if !workspace.fits(slots, partial_bytes) {
                let required = workspace_bytes_needed(&row.tile(variant), cm, cn, g.batch, k_splits);
                return Err(Error::BufferTooSmall { name: "workspace", len: buffers.workspace_bytes, required });
            }
            let w = (buffers.workspace_addr, buffers.workspace_addr.saturating_add(buffers.workspace_bytes as u64));
            for (name, addr, len) in [("A", buffers.a_addr, need_a), ("B", buffers.b_addr, need_b), ("C", buffers.c_addr, need_c)] {
                if len > 0 && overlaps(w, range(addr, len)) {
                    return Err(Error::Overlap(format!("the workspace overlaps {name} in device memory")));
                }
            }
            if buffers.workspace_addr % WORKSPACE_ALIGN as u64 != 0 {
                let what = format!("the workspace must start at a multiple of {WORKSPACE_ALIGN} bytes");
                return Err(Error::invalid("workspace", format!("{:#x}", buffers.workspace_addr), what));
            }
            flags |= SPLIT_WORKSPACE;
            (buffers.workspace_addr + workspace.partials_offset as u64, buffers.workspace_addr)
        } else {
            (0, 0)
        };
        let launch = row.launch(variant);
        let operands = SgemmOperands::new(a_k_contiguous, b_k_contiguous);
        // The canonical n is the caller's n (row-major) or m (column-major), or the other one
        // where the problem runs turned around.
        let (n_name, n_value) = if (g.layout == Layout::RowMajor) != turned { ("n", g.n) } else { ("m", g.m) };
        let (grid_x, name, value, what) = match variant {
            SgemmVariant::Tiny => {
                // Pieces of 4×4 numbered over the whole batch, `team_lanes` threads each; the
                // kernel walks them in a grid-stride loop, so the grid is capped at
                // `TINY_GRID_WAVES` waves (and never past a grid's limit).
                let pieces_per_problem = (cm.div_ceil(TINY_TILE as usize) as u64).saturating_mul(cn.div_ceil(TINY_TILE as usize) as u64);
                if pieces_per_problem > u32::MAX as u64 {
                    let what = format!("m × n needs {pieces_per_problem} pieces of {TINY_TILE}×{TINY_TILE}, more than tiny numbers in 32 bits");
                    return Err(Error::invalid("m", g.m, what));
                }
                let pieces = pieces_per_problem.saturating_mul(g.batch as u64);
                let resident_blocks = sm_count.max(1) as u64 * row.tiny.blocks_per_sm as u64;
                let pieces_n = cn.div_ceil(TINY_TILE as usize) as u32;
                let lanes = TinyConfig::team_lanes(k as u32, operands, pieces_n, pieces, resident_blocks * row.tiny.threads() as u64);
                flags |= lanes.trailing_zeros() << TINY_LANES_SHIFT;
                let threads = pieces.saturating_mul(lanes as u64);
                let cap = (resident_blocks * TINY_GRID_WAVES).min(MAX_GRID_X);
                (threads.div_ceil(row.tiny.threads() as u64).clamp(1, cap), "m", g.m, String::new())
            }
            SgemmVariant::Gemv => {
                // Column body: 32 columns per block; dot body (B k-contiguous): as many as the
                // kernel derives from n and k, by the same function.
                let columns = if b_k_contiguous { row.gemv.dot_columns_per_block(cn as u32, k as u32) } else { GEMV_COLUMNS };
                (cn.div_ceil(columns as usize) as u64, n_name, n_value, format!("{n_name} needs blocks of {columns} columns"))
            }
            _ => {
                let tile = row.tile(variant);
                let tiles = tile.tile_count(cm, cn);
                (tiles, "m", g.m, format!("m × n needs {tiles} tiles of {}×{}", tile.bm, tile.bn))
            }
        };
        if grid_x > MAX_GRID_X {
            return Err(Error::invalid(name, value, format!("{what}, more than one grid holds")));
        }
        Ok(SgemmPlan {
            variant,
            operands,
            // (`tiny` walks the batch in its grid-stride loop.)
            grid: (grid_x as u32, k_splits, if variant == SgemmVariant::Tiny { 1 } else { g.batch.min(MAX_GRID_Z) as u32 }),
            block: launch.threads,
            smem_bytes: if k_splits > 1 && !through_workspace { launch.split_k_smem_bytes } else { launch.smem_bytes },
            params: SgemmParams {
                a: GlobalPtr::new(left.addr),
                b: GlobalPtr::new(right.addr),
                c: GlobalPtr::new(buffers.c_addr),
                m: cm as u32,
                n: cn as u32,
                k: k as u32,
                lda: lda as u64,
                ldb: ldb as u64,
                ldc: g.ldc as u64,
                stride_a: left.batch_stride as u64,
                stride_b: right.batch_stride as u64,
                stride_c: g.stride_c as u64,
                batch: g.batch as u32,
                flags,
                alpha: g.alpha,
                beta: g.beta,
                split_partials: GlobalPtr::new(split_partials),
                split_counters: GlobalPtr::new(split_counters),
            },
            empty: cm == 0 || cn == 0 || g.batch == 0,
            overlaps_previous: row.arch.has_programmatic_launch(),
        })
    }
}

impl SgemmPlan {
    /// Whether the launch splits k through the workspace.
    pub fn uses_workspace(&self) -> bool {
        self.params.flags & SPLIT_WORKSPACE != 0
    }

    /// `tiny`: the lanes that share each piece of C (from `flags`; 1 for other variants).
    pub fn tiny_team_lanes(&self) -> u32 {
        if self.variant == SgemmVariant::Tiny {
            1 << ((self.params.flags >> TINY_LANES_SHIFT) & TINY_LANES_MASK)
        } else {
            1
        }
    }
}

/// Device addresses and lengths (in elements) of the three buffers, and of a k-split
/// workspace (bytes; 0: none, so no k split through a workspace).
#[derive(Clone, Copy, Debug, Default)]
pub struct SgemmBuffers {
    pub a_addr: u64,
    pub a_len: usize,
    pub b_addr: u64,
    pub b_len: usize,
    pub c_addr: u64,
    pub c_len: usize,
    /// A workspace as [`Cukernels::sgemm_workspace`] makes one: 256-byte aligned, zeroed when
    /// allocated, and written by nothing but SGEMM launches since (its counters return to zero
    /// after each launch). Pass the same memory with the same `workspace_bytes` every time:
    /// where its counters end and its partial tiles begin follows from its size
    /// ([`SplitWorkspaceLayout::of`]), so a launch told another size would take earlier
    /// partial tiles for counters.
    pub workspace_addr: u64,
    pub workspace_bytes: usize,
}

/// A validated launch of one SGEMM kernel on the canonical problem (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgemmPlan {
    pub variant: SgemmVariant,
    /// The canonical operands' layout: selects the entry point compiled for it.
    pub operands: SgemmOperands,
    /// (tiles or column blocks, k splits, batches): the `grid.1` blocks of a tile form one
    /// thread-block cluster when it is above 1.
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub smem_bytes: u32,
    /// The entry point's parameters: the canonical problem (the one struct the kernels take,
    /// [`SgemmParams`]).
    pub params: SgemmParams,
    /// Nothing to compute (m, n or batch is 0): no launch.
    pub empty: bool,
    /// Launched as a programmatic dependent of the launch before it on the stream (sm_90+
    /// builds): its blocks are scheduled while that launch drains and wait for it on the GPU
    /// (the kernels' "Launch overlap").
    pub overlaps_previous: bool,
}

/// The most rows (or columns) of C for which the dispatcher picks `gemv`. Measured on the
/// H200 (2026-12-02, every candidate timed): at 1 to 4 rows `gemv` was the fastest kernel on
/// every shape but one (4 × 16384², B n-contiguous: `skinny` 11% faster), and 0.89-1.44× cuBLAS;
/// at 8 rows the 16-row `skinny` tiles beat it by 17-67% (8 × 32000 × 4096 with B `[out, in]`,
/// 8 × 16384²), and at 8 columns `medium` split over 2 blocks by 20% (16384 × 8 × 16384): its
/// eight accumulators per column and lane, and eight loads of A per chunk of B, cost more
/// than the tiles' redundant rows.
pub const GEMV_DISPATCH_MAX: usize = 4;

/// The least fraction of its columns that `gemv`'s column body must use for the dispatcher to
/// pick it. That body (the streamed operand not k-contiguous) gives each block
/// [`GEMV_COLUMNS`] (32) columns of the long side, a lane each, and each lane streams its
/// column's whole k: a long side of 5 to 17 leaves 47-84% of the lanes idle, while `tiny`
/// spreads each output's k over a team of lanes. The dot body (k-contiguous) has no such
/// waste. H200, randomized sweeps of both seeds (2026-12-06, every candidate timed,
/// `scripts/sgemm-regret.py`): of the column-body shapes below this use, `tiny` was 1.44-2.13x
/// faster on six (3125 × (1 × 13 × 861), 736 × (2 × 8 × 673), 313 × (2 × 5 × 8025)) and 0.77-0.87x
/// on three of 3-4 µs; from 63 columns (98%) on `gemv` stayed the best or within 10%, but
/// for 67 (70%: 2 × (2 × 67 × 5865), 6 blocks in all, where a split tile was 1.9x faster).
/// The same shapes on the H100 (stop 46) moved alike. In-sample: fitted to those two seeds.
pub const GEMV_MIN_COLUMN_USE: f64 = 0.55;

/// The shortest dot product for which the dispatcher still picks `gemv` on a problem that is
/// not tiny (see [`GEMV_TINY_OUTPUTS`]). `gemv` gives each output a warp (or a lane group) that
/// streams its k; below ~128 most of those lanes idle, and the work is writing C, which the
/// tiles do many outputs at a time. H200, randomized sweep of 2026-12-03 (every candidate
/// timed): at k ≤ 89 with thousands of outputs `gemv` was 1.3-5.3x slower than the best tile
/// (2197 × (1 × 162 × 9): 205 µs against 39.5 for `small`; 947 × (1951 × 2 × 87): 1.07 ms
/// against 0.71 for `medium`); from k = 163 on it was the best candidate or within 7%.
pub const GEMV_MIN_K: usize = 128;

/// The most outputs (batch · m · n) of a problem that is launch-bound whatever runs it: there
/// `gemv`, the lightest kernel, is kept at any k (same sweep: at k ≤ 84 and up to 11 152
/// outputs it was the best candidate every time, 1.8-3.1x cuBLAS; from 81 328 outputs on it
/// lost to the tiles).
pub const GEMV_TINY_OUTPUTS: usize = 16_384;

/// The most blocks a `tiny` launch has, in waves of the GPU (SMs × its blocks per SM): beyond
/// that its grid-stride loop gives each thread more pieces, rather than the GPU more blocks
/// to start.
pub const TINY_GRID_WAVES: u64 = 16;

/// The longest k that the dispatcher counts as short (past the `gemv` rule): each element of
/// C is at most this many products, so the work is writing C, which `tiny` does with no
/// pipeline to fill, no shared memory and no barrier; it takes such a problem unless the tiles
/// would fit it well ([`TINY_SHORT_K_MAX_TILE_USE`]).
pub const TINY_SHORT_K: usize = 16;

/// With a short k, `tiny` is picked while the best-fitting small tiles would use at most this
/// fraction of their elements. H200, randomized sweep of 2026-12-03 (every candidate timed,
/// so this is fitted to those shapes): at k ≤ 16 `tiny` was 0.06-0.98× the best tile's time
/// up to 78% use (one shape at 74%, 294 × (143 × 3916 × 1), 1.10×), and 1.05-1.25× from 85%
/// on (1.88× for 39 × (7120 × 104 × 15) at 81%), where the tiles write C in wide runs.
pub const TINY_SHORT_K_MAX_TILE_USE: f64 = 0.8;

/// The dispatcher picks `tiny` at any k when the block tiles that fit a problem best would
/// leave at least three quarters of their FMAs past its edges (`best_tile_use_in_k`): on
/// rows and columns (a batch of 8×8 products in 64×64 tiles uses 1.6% of them), or in the
/// depth of their k-steps (k = 2 fills an eighth of a 16-deep one; `tiny` has no k-step, its
/// lanes loop over k itself). Same sweep, k > 16: of the 28 shapes `tiny` took by the rows
/// and columns, 21 ran within 10% of the best kernel or faster (0.29-1.01×), 7 were
/// 1.11-1.42× slower. The depth was added later (2026-12-03, `da89e30-dirty-short-k-tiles`
/// runs of two seeds, every candidate timed, `scripts/sgemm-regret.py`): it moved 19 of their
/// 320 random shapes to `tiny`, 14 of them with k ≤ 4 on tiles at least 81% used on rows and
/// columns (where the tiles' one k-step is mostly padding), the others with k = 5-112 on
/// tiles 27-47% used; `tiny` was the fastest candidate on all 19, 1.04-1.91× faster than the
/// tile the dispatcher had chosen. Not refitted: the same quarter as for rows and columns.
/// The turned `skinny` counts since 2026-12-06 (stop 46's H100 sweep with `skinny/t` timed as a
/// candidate, `scripts/sgemm-regret.py --rule current`): 12 of the 160 random shapes left
/// `tiny`, 1.25x faster by geometric mean (15 × (10216 × 15 × 280) 2.16x, 701 × (138 × 14 ×
/// 2185) 1.84x), four of them slower (0.78-0.85x: 467 × (247 × 9 × 65), 258 × (168 × 6 ×
/// 3123), and two shapes of 5-8 µs). Out of sample, on seed 12648430 timed with the rule in
/// place, the 12 shapes it changed ran 1.34x faster (replayed on that run's candidate timings).
pub const TINY_MAX_TILE_USE: f64 = 0.25;

/// The block tiles the cost model weighs at a short k (`k ≤ TINY_SHORT_K`, where `tiny` did not
/// take the problem): one k-step leaves a block little but writing its C tile, which the
/// tiles made for small problems do with more blocks per SM than `huge`, and in wider runs than
/// `skinny`'s 16 rows. The cost model counts a block's fixed cost in k-steps of its own tile,
/// which at one k-step undercounts `huge`'s. First fitted on the H200 sweep of 2026-12-03 (in-sample): of its
/// 13 shapes with k ≤ 16 that reached the cost model, `small` or `medium` was the fastest tile
/// in 11 (the other two: `skinny` 6% and `large` 2% faster), and the model had chosen `huge`
/// for four of them, 1.34-1.44x slower than `small` (12 × (1929 × 7585 × 2): 0.98 ms against
/// 0.68). `large` joined in stop 56 with `medium`'s own block overhead
/// ([`block_overhead_k_steps`]): on large grids at k of 6-16 it ran 1.12-1.23x faster than
/// `medium` (H200, 2026-12-06: 137 × (195 × 6758 × 10), 115 × (13906 × 93 × 16); H100, stop 54:
/// 220 × (1132 × 851 × 6), 9 × (6361 × 2834 × 8)). Measured on the H200 and the H100; it
/// applies to every architecture's row.
pub const SHORT_K_TILES: [SgemmVariant; 3] = [SgemmVariant::Small, SgemmVariant::Medium, SgemmVariant::Large];

/// The shortest k for which the cost model weighs `huge`. Its 128 × 256 C tile, one block per
/// SM, costs a long epilogue and a deep pipeline fill that the model's fixed
/// [`BLOCK_OVERHEAD_K_STEPS`] undercounts when a block has few k-steps to spread them over.
/// H200, randomized sweep of seed 12648430 (2026-12-06, every candidate timed;
/// `scripts/sgemm-regret.py`): the model took `huge` on five shapes with k of 32-82, and
/// `large` or `small` was 1.08-2.39x faster on each (7 × (3217 × 9581 × 32) 2.39x, 18 × (3039 ×
/// 2955 × 37) 1.84x, 3854 × 9102 × 82 1.58x). Where `huge` was the fastest tile, k was 128 or
/// more. A larger block overhead for `huge` instead would also have moved the sweep's
/// 256 × 256³ and 64 × 512³, where `huge` is 9-11% faster than `large`. Fitted on one seed
/// (the H100's sweep of the same seed, stop 46, moved alike); the shapes of other seeds it
/// changes are listed for a device run in benches/results/2026-12-07-h200-attention-ab-third-seed.
pub const HUGE_MIN_K: usize = 128;

/// The fraction of a block tile's elements that lie inside an `m × n` C, for the tile kernels
/// shaped for small problems (`small` and `skinny`, and `skinny` turned around where C has
/// fewer columns than rows: [`SgemmVariant::can_turn`]), the best of them.
pub fn best_tile_use(m: usize, n: usize, row: &SgemmArchConfig) -> f64 {
    small_tiles_use(m, n, None, row)
}

/// The same, for the FMAs of an `m × n × k` problem: the k loop runs in whole k-steps of `bk`,
/// so a tile also computes `k.div_ceil(bk) · bk − k` steps of padding (none at k = 0, which
/// has no k-step). At most [`best_tile_use`].
fn best_tile_use_in_k(m: usize, n: usize, k: usize, row: &SgemmArchConfig) -> f64 {
    small_tiles_use(m, n, Some(k), row)
}

fn small_tiles_use(m: usize, n: usize, k: Option<usize>, row: &SgemmArchConfig) -> f64 {
    const { assert!(SgemmVariant::Skinny.can_turn()) };
    let turned = (n < m).then_some((SgemmVariant::Skinny, n, m));
    [(SgemmVariant::Small, m, n), (SgemmVariant::Skinny, m, n)]
        .into_iter()
        .chain(turned)
        .map(|(v, rows, cols)| {
            let t = row.tile(v);
            let depth = match k {
                Some(k) if k > 0 => k as f64 / (k.div_ceil(t.bk as usize) * t.bk as usize) as f64,
                _ => 1.0,
            };
            (rows as f64 * cols as f64) / (t.tile_count(rows, cols) as f64 * (t.bm * t.bn) as f64) * depth
        })
        .fold(0.0, f64::max)
}

/// How fast one SM runs a variant's tiles, as the dispatcher's cost model sees it: with `w`
/// warps resident, `peak × w / (w + half_warps)` (FMA work per unit of time): few warps cannot
/// hide the shared-memory and pipeline latencies, many approach the tile's peak. Fitted to the
/// H200 (2026-11-30: the sweep of `cukernels-bench` plus eight more shapes, timing every
/// candidate; with these values every sweep shape gets its fastest candidate, the others
/// within 17%), with the full-load ratios of the 8192³ runs kept (`huge` 7% faster than
/// `large`); assumed for the other architectures until measured there.
struct TileSpeed {
    peak: f64,
    half_warps: f64,
}

fn tile_speed(v: SgemmVariant, tile: &SgemmTile) -> TileSpeed {
    let (peak, half_warps) = match v {
        SgemmVariant::Huge => (1.08, 1.5),
        SgemmVariant::Large => (0.95, 1.9),
        SgemmVariant::Medium => (0.96, 2.1),
        SgemmVariant::Small if tile.tm * tile.tn == 64 => (0.9, 1.9),
        // The 4×4 `small` of the other rows: not measured on the H200; a quarter of an 8×8
        // tile's FMAs per shared-memory read.
        SgemmVariant::Small => (0.6, 1.9),
        SgemmVariant::Skinny => (0.86, 3.5),
        SgemmVariant::Gemv | SgemmVariant::Tiny => (0.0, 1.0), // never costed: chosen by their rules
    };
    TileSpeed { peak, half_warps }
}

/// Fixed cost of a block beyond its k loop, in k-steps' worth of its own work: filling the
/// pipeline, the epilogue (fitted with [`tile_speed`]).
const BLOCK_OVERHEAD_K_STEPS: f64 = 3.6;
/// `medium`'s fixed cost per block, in k-steps of its own 64 × 64 tile: more than the others'.
/// On grids of many waves at a short k (1-7 k-steps), where a block is mostly its fixed costs,
/// `large` ran 1.10-1.23x faster than `medium` while the model, with [`BLOCK_OVERHEAD_K_STEPS`]
/// for both, had them within 1-3% and chose `medium`: solving the measured ratios for
/// `medium`'s overhead gives 4.0-4.4 at k-steps 1, 2 and 5 (recorded sweeps, every candidate
/// timed: the H200's two seeds of 2026-12-06 and the H100's seed 3 of stop 54; replayed with
/// `scripts/sgemm-regret.py`, in-sample, regret ≤ 10% went 77.8% → 80.0% and 67.7% → 71.4%).
/// Out of sample, on an H100 (stop 56, `benches/results/2026-12-07-sgemm-medium-overhead`): the
/// 449 shapes of seeds 11-38 whose choice this and `large` among [`SHORT_K_TILES`] change ran
/// 1.045-1.049x faster, regret ≤ 10% on 54-55% of them before and 82-85% after (`large` for
/// `medium` 1.11x; `small` for `medium` 1.03x, but 0.81x on its worst shape).
const MEDIUM_BLOCK_OVERHEAD_K_STEPS: f64 = 4.2;

/// A variant's fixed cost per block in the cost model ([`BLOCK_OVERHEAD_K_STEPS`],
/// [`MEDIUM_BLOCK_OVERHEAD_K_STEPS`]).
fn block_overhead_k_steps(v: SgemmVariant) -> f64 {
    match v {
        SgemmVariant::Medium => MEDIUM_BLOCK_OVERHEAD_K_STEPS,
        _ => BLOCK_OVERHEAD_K_STEPS,
    }
}
/// Extra cost of a k-split block, in k-steps' worth of its work: the cluster barriers, storing
/// its partial tile, plus per block of the cluster reading its share of that block's partial
/// tile through distributed shared memory (fitted with [`tile_speed`]).
const SPLIT_OVERHEAD_K_STEPS: f64 = 2.1;
const SPLIT_OVERHEAD_PER_BLOCK_K_STEPS: f64 = 0.86;
/// The same for a split through the workspace: storing the partial tile to L2 and the
/// arrival count; plus, per block of the split, the last block's read of that block's partial
/// tile from L2, one float per element for `bk` FMAs per element in a k-step, so
/// `WORKSPACE_SPLIT_READ_K_STEPS / bk` k-steps (one block reads them all, so this term grows
/// with the split: `medium` over 390 blocks took 250 µs on 64 × 64 × 100 000, over 781 470 µs).
/// Fitted on the H200 (2026-12-03, twelve shapes of the `long-k` class and the sweep, every
/// candidate timed): the dispatcher then picks the fastest on eleven, and is 20% off on
/// 96 × 200 × 50 000 `nt`. At equal splits the two reductions ran equally fast.
const WORKSPACE_SPLIT_OVERHEAD_K_STEPS: f64 = 4.0;
const WORKSPACE_SPLIT_READ_K_STEPS: f64 = 4.0;

/// The k splits over a cluster that the dispatcher considers (any from 1 to [`MAX_K_SPLITS`]
/// can be forced). Splits
/// over 4, 6 and 8 blocks measured slower than their odd neighbours on the H200 where B
/// streams from memory (16 × 4096²: 41.4 µs over 4, 36.6 over 3, 35.5 over 5; over 6 39.5),
/// as if slices a power-of-two number of rows apart contended for the same memory
/// partitions; interleaving the slices' k-steps would be the fix.
const K_SPLIT_CANDIDATES: [u32; 4] = [2, 3, 5, 7];

/// The fewest k-steps each block of a split through the workspace gets from the dispatcher:
/// below that, a block's pipeline fill and its partial tile's round trip through L2 outweigh
/// its share of the k loop.
const WORKSPACE_MIN_K_STEPS_PER_SPLIT: usize = 8;

/// The kernels worth considering for a problem (`m × n × k`, `batch`; canonical, row-major
/// C): every block-tile variant unsplit; and, for the tiles that split k
/// ([`SgemmTile::splits_k`]) while the split grid still fits on the GPU at once
/// (`tiles × splits ≤ SMs × blocks_per_sm`):
/// - over a cluster of each of [`K_SPLIT_CANDIDATES`] blocks where the architecture has
///   clusters ([`SgemmTile::can_split_k`]) and every slice keeps at least two k-steps;
/// - through a workspace of `workspace_bytes` (0: none) where it fits, over each of
///   [`K_SPLIT_CANDIDATES`] blocks, the most blocks that fill the GPU, and half as many,
///   each slice keeping at least [`WORKSPACE_MIN_K_STEPS_PER_SPLIT`] k-steps;
///
/// and where C has fewer columns than rows, the same for the variants that run turned around
/// ([`SgemmVariant::can_turn`]) on the turned problem (`n × m`).
pub fn kernel_candidates(m: usize, n: usize, k: usize, batch: usize, row: &SgemmArchConfig, sm_count: u32, workspace_bytes: usize) -> Vec<SgemmChoice> {
    let mut out = tile_candidates(&SgemmVariant::TILED, m, n, k, batch, row, sm_count, workspace_bytes);
    if n < m {
        let turnable: Vec<SgemmVariant> = SgemmVariant::TILED.into_iter().filter(|v| v.can_turn()).collect();
        out.extend(tile_candidates(&turnable, n, m, k, batch, row, sm_count, workspace_bytes).into_iter().map(SgemmChoice::turn));
    }
    out
}

/// [`kernel_candidates`] among `variants`, for the problem as the kernels see it (`m × n`).
#[allow(clippy::too_many_arguments)]
fn tile_candidates(variants: &[SgemmVariant], m: usize, n: usize, k: usize, batch: usize, row: &SgemmArchConfig, sm_count: u32, workspace_bytes: usize) -> Vec<SgemmChoice> {
    let workspace = SplitWorkspaceLayout::of(workspace_bytes);
    let mut out = Vec::new();
    for &v in variants {
        out.push(SgemmChoice::from(v));
        let t = row.tile(v);
        if !t.splits_k() {
            continue;
        }
        // (Saturating: a public function, callable with sizes no buffer could hold.)
        let tiles = t.tile_count(m, n).saturating_mul(batch.max(1) as u64);
        let resident = sm_count as u64 * t.blocks_per_sm as u64;
        let k_steps = k.div_ceil(t.bk as usize);
        if t.can_split_k(&row.arch.limits()) {
            for k_splits in K_SPLIT_CANDIDATES {
                if tiles.saturating_mul(k_splits as u64) <= resident && k_steps >= 2 * k_splits as usize {
                    out.push(SgemmChoice::cluster_split(v, k_splits));
                }
            }
        }
        let fill = (resident / tiles.max(1)).min((k_steps / WORKSPACE_MIN_K_STEPS_PER_SPLIT) as u64).min(MAX_WORKSPACE_K_SPLITS as u64) as u32;
        let mut splits: Vec<u32> = K_SPLIT_CANDIDATES.iter().copied().chain([fill / 2, fill]).filter(|&s| s >= 2 && s <= fill).collect();
        splits.sort_unstable();
        splits.dedup();
        for k_splits in splits {
            let (slots, partial_bytes) = workspace_need(&t, m, n, batch.max(1), k_splits);
            if workspace.fits(slots, partial_bytes) {
                out.push(SgemmChoice::workspace_split(v, k_splits));
            }
        }
    }
    out
}

/// The dispatcher. For `m ≤ GEMV_DISPATCH_MAX` (4) the problem is a few matrix-vector
/// products bound by streaming B, and `gemv` streams it in one pass (H200, n = k = 4096: 22 µs
/// at m = 1 and 31 µs at m = 4, against 74 µs for the 16-row `skinny` tiles); likewise for
/// `n ≤ GEMV_DISPATCH_MAX`, which `gemv` runs turned around (see [`Sgemm::plan`]), streaming
/// A. `gemv` computes up to `GEMV_MAX_M` (8) rows in one pass, but from 5 rows on the tiles
/// were as fast or faster (see [`GEMV_DISPATCH_MAX`]); from 9 `gemv` would take two passes.
/// A short k is the exception: from [`GEMV_TINY_OUTPUTS`] outputs on, a product with
/// `k < GEMV_MIN_K` goes to the rules below like any other; and so is a long side too short
/// for `gemv`'s column body, which it runs where the operand it streams is not k-contiguous
/// (`operands`, the canonical problem's: [`Sgemm::canonical_operands`]; [`GEMV_MIN_COLUMN_USE`]).
/// Next, `tiny` takes problems that the small tiles would mostly pad ([`TINY_MAX_TILE_USE`],
/// `best_tile_use_in_k`: batches of tiny matrices, matrices with a handful of rows or columns
/// and a k too short for `gemv`, a k of a few products) and, with a short k ([`TINY_SHORT_K`]),
/// those they would not fill well on rows and columns ([`TINY_SHORT_K_MAX_TILE_USE`],
/// [`best_tile_use`]), unless the cost model below splits k (a grid too small for the GPU).
/// Otherwise every
/// candidate ([`kernel_candidates`]; at a short k only [`SHORT_K_TILES`], below [`HUGE_MIN_K`] not `huge`) gets an estimated time from a wave model of its grid:
/// each SM holds `resident` blocks at once (the variant's `blocks_per_sm`, or fewer when the
/// grid has fewer blocks per SM), the grid runs in `waves = ceil(blocks / (SMs × resident))`,
/// and a wave costs the work of the SM's `resident` blocks (`bm × bn × k` of its slice, plus
/// fixed overheads) at the speed of `resident` blocks' warps ([`tile_speed`]). Counting whole
/// tiles charges the partial tiles at the edges; counting whole waves charges the idle SMs of
/// a grid that does not divide evenly; the speed curve charges grids too small to hide
/// latency, which a k split relieves by putting more blocks (warps) on every SM (at the cost
/// of adding the partial tiles: through a cluster, or through `workspace_bytes` of
/// workspace, 0 for none, where one block adds them all). A turned candidate (fewer columns
/// than rows: `skinny` with its 16 rows along n) is costed on the turned problem. The lowest
/// estimate wins; ties go to the bigger tile, the fewer splits and the problem as given. `cukernels-bench`
/// reports, per shape, how far this choice is from the fastest candidate (dispatch regret).
#[allow(clippy::too_many_arguments)]
pub fn choose_kernel(m: usize, n: usize, k: usize, batch: usize, operands: SgemmOperands, row: &SgemmArchConfig, sm_count: u32, workspace_bytes: usize) -> SgemmChoice {
    let tiny = batch.max(1).saturating_mul(m).saturating_mul(n) <= GEMV_TINY_OUTPUTS;
    if m.min(n) <= GEMV_DISPATCH_MAX && (k >= GEMV_MIN_K || tiny) && gemv_column_use(m, n, operands) >= GEMV_MIN_COLUMN_USE {
        return SgemmVariant::Gemv.into();
    }
    let padded = best_tile_use_in_k(m, n, k, row) <= TINY_MAX_TILE_USE;
    if m.min(n) >= 1 && (padded || (k <= TINY_SHORT_K && best_tile_use(m, n, row) <= TINY_SHORT_K_MAX_TILE_USE)) {
        // `tiny` splits each output's k over a team of lanes, never over blocks: where the
        // tiles' grid is too small for the GPU and the cost model splits k, the split wins.
        // H200, both seeds of 2026-12-06 (in-sample): 2 × (12 × 6 × 14278) 2.94x and
        // 6 × (14 × 17 × 2613) 1.44x faster split; 5 × (5 × 86 × 333), 5 µs, 0.74x.
        let tiles = cheapest_tile(m, n, k, batch, row, sm_count, workspace_bytes);
        return if tiles.k_splits > 1 { tiles } else { SgemmVariant::Tiny.into() };
    }
    cheapest_tile(m, n, k, batch, row, sm_count, workspace_bytes)
}

/// The fraction of its lanes' columns that `gemv` uses on a canonical `m × n` problem with
/// `operands` ([`GEMV_MIN_COLUMN_USE`]): 1 for its dot body, which it runs where the operand
/// it streams (the right one, or the left one where it runs turned around, `n < m`) is
/// k-contiguous; else the long side over whole blocks of [`GEMV_COLUMNS`].
fn gemv_column_use(m: usize, n: usize, operands: SgemmOperands) -> f64 {
    let streams_k_contiguous = if n < m { operands.a_k_contiguous() } else { operands.b_k_contiguous() };
    if streams_k_contiguous {
        return 1.0;
    }
    let columns = m.max(n);
    let per_block = GEMV_COLUMNS as usize;
    columns as f64 / (columns.div_ceil(per_block) * per_block) as f64
}

/// The cost model of [`choose_kernel`]: the candidate tile (and k split) with the lowest
/// estimated time.
fn cheapest_tile(m: usize, n: usize, k: usize, batch: usize, row: &SgemmArchConfig, sm_count: u32, workspace_bytes: usize) -> SgemmChoice {
    let sms = sm_count.max(1) as f64;
    let mut best = (f64::INFINITY, SgemmChoice::from(SgemmVariant::Large));
    let weighed = kernel_candidates(m, n, k, batch, row, sm_count, workspace_bytes)
        .into_iter()
        .filter(|c| k > TINY_SHORT_K || SHORT_K_TILES.contains(&c.variant))
        .filter(|c| c.variant != SgemmVariant::Huge || k >= HUGE_MIN_K);
    for c in weighed {
        let t = row.tile(c.variant);
        let splits = c.k_splits as f64;
        let (m, n) = if c.turned { (n, m) } else { (m, n) };
        let blocks = t.tile_count(m, n) as f64 * batch.max(1) as f64 * splits;
        let resident = (t.blocks_per_sm as f64).min((blocks / sms).ceil()).max(1.0);
        let waves = (blocks / (sms * resident)).ceil();
        let k_steps = (k.div_ceil(t.bk as usize) as f64 / splits).ceil();
        let overhead = block_overhead_k_steps(c.variant)
            + match (c.k_splits, c.reduction) {
                (1, _) => 0.0,
                (_, SplitReduction::Cluster) => SPLIT_OVERHEAD_K_STEPS + SPLIT_OVERHEAD_PER_BLOCK_K_STEPS * splits,
                (_, SplitReduction::Workspace) => WORKSPACE_SPLIT_OVERHEAD_K_STEPS + WORKSPACE_SPLIT_READ_K_STEPS / t.bk as f64 * splits,
            };
        let work = resident * (t.bm * t.bn * t.bk) as f64 * (k_steps + overhead);
        let speed = tile_speed(c.variant, &t);
        let warps = resident * (t.threads() / 32) as f64;
        let cost = waves * work / (speed.peak * warps / (warps + speed.half_warps));
        if cost < best.0 {
            best = (cost, c);
        }
    }
    best.1
}

impl Cukernels {
    /// Runs `desc` on `stream` with the dispatcher's kernel. Returns once the launch is queued
    /// (no synchronization); `a`, `b`, `c` are the caller's device buffers.
    pub fn sgemm<A, B, C>(&self, stream: &CudaStream, desc: &Sgemm, a: &A, b: &B, c: &mut C) -> Result<()>
    where
        A: DevicePtr<f32>,
        B: DevicePtr<f32>,
        C: DevicePtrMut<f32>,
    {
        self.sgemm_with(stream, desc, a, b, c, None)
    }

    /// As [`sgemm`](Self::sgemm), with the kernel (variant and k split) chosen by the caller
    /// (`None`: the dispatcher's choice).
    pub fn sgemm_with<A, B, C>(&self, stream: &CudaStream, desc: &Sgemm, a: &A, b: &B, c: &mut C, choice: Option<SgemmChoice>) -> Result<()>
    where
        A: DevicePtr<f32>,
        B: DevicePtr<f32>,
        C: DevicePtrMut<f32>,
    {
        self.sgemm_through(stream, desc, a, b, c, None, choice)
    }

    /// As [`sgemm_with`](Self::sgemm_with), with the caller's workspace for k splits instead
    /// of the handle's ([`Cukernels::sgemm_workspace`]; [`sgemm_workspace_bytes`](Self::sgemm_workspace_bytes)
    /// says how large one call needs it). The dispatcher considers the k splits that fit in it.
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm_in<A, B, C>(&self, stream: &CudaStream, desc: &Sgemm, a: &A, b: &B, c: &mut C, workspace: &mut SgemmWorkspace, choice: Option<SgemmChoice>) -> Result<()>
    where
        A: DevicePtr<f32>,
        B: DevicePtr<f32>,
        C: DevicePtrMut<f32>,
    {
        let bytes = workspace.bytes();
        let (addr, _workspace_sync) = workspace.buffer.device_ptr_mut(stream);
        self.sgemm_through(stream, desc, a, b, c, Some((addr, bytes)), choice)
    }

    /// Validates, plans and launches on `stream` with the caller's `workspace` (address,
    /// bytes), or else the handle's own.
    #[allow(clippy::too_many_arguments)]
    fn sgemm_through<A, B, C>(&self, stream: &CudaStream, desc: &Sgemm, a: &A, b: &B, c: &mut C, workspace: Option<(u64, usize)>, choice: Option<SgemmChoice>) -> Result<()>
    where
        A: DevicePtr<f32>,
        B: DevicePtr<f32>,
        C: DevicePtrMut<f32>,
    {
        self.check_stream(stream)?;
        let (a_addr, _a_sync) = a.device_ptr(stream);
        let (b_addr, _b_sync) = b.device_ptr(stream);
        let c_len = c.len();
        let (c_addr, _c_sync) = c.device_ptr_mut(stream);
        let (workspace_addr, workspace_bytes) = workspace.unwrap_or((0, 0));
        let buffers = SgemmBuffers { a_addr, a_len: a.len(), b_addr, b_len: b.len(), c_addr, c_len, workspace_addr, workspace_bytes };
        self.plan_and_launch(stream.cu_stream(), desc, &buffers, choice)
    }

    /// Plans `desc` on `buffers` and launches it on `stream`. Without a workspace in
    /// `buffers`, the handle's own serves, if it is free for this stream ([`OwnWorkspace`](crate::workspace::OwnWorkspace)).
    /// Nothing locks: a plan that splits through it binds it to the stream by compare-and-swap,
    /// and in the rare race where another stream bound it first, the call plans again
    /// without it.
    fn plan_and_launch(&self, stream: CUstream, desc: &Sgemm, buffers: &SgemmBuffers, choice: Option<SgemmChoice>) -> Result<()> {
        let plan_with = |b: &SgemmBuffers| desc.plan(b, self.sgemm_config(), self.sm_count(), choice);
        if buffers.workspace_bytes != 0 {
            return self.launch_sgemm(stream, &plan_with(buffers)?);
        }
        // Until the module (and the own workspace with it) is loaded, the problem is first
        // validated without the workspace, so that a bad argument is reported as such, and an
        // empty problem returns, before anything loads. A forced workspace split fails that
        // plan for want of a workspace: only other errors stand. Once loaded, a call plans once.
        if !self.is_loaded(KernelFamily::Sgemm) {
            match plan_with(buffers) {
                Ok(p) if p.empty => return Ok(()),
                Err(e) if !matches!(e, Error::BufferTooSmall { name: "workspace", .. }) => return Err(e),
                _ => {}
            }
        }
        self.check_loadable_on(KernelFamily::Sgemm, stream)?;
        let stream_id = stream as usize;
        if let Some(Ok(own)) = self.own_workspace(KernelFamily::Sgemm)? {
            if own.free_for(stream_id) {
                let with_own = SgemmBuffers { workspace_addr: own.addr(), workspace_bytes: own.bytes(), ..*buffers };
                let plan = plan_with(&with_own)?;
                if !plan.uses_workspace() || own.bind(stream_id) {
                    return self.launch_sgemm(stream, &plan);
                }
            }
        }
        // Another stream holds the own workspace (or it could not be allocated): plan without.
        self.launch_sgemm(stream, &plan_with(buffers)?)
    }

    /// A workspace for k splits of `bytes` bytes, zeroed (on `stream`), for
    /// [`sgemm_in`](Self::sgemm_in): for calls on streams other than the one the handle's own
    /// workspace serves, or splits larger than it. Allocate it once, outside the hot path and
    /// outside graph capture; every later call may reuse it, on any stream (cudarc orders the
    /// streams, as for any buffer; in a graph, as for any buffer, make it untracked).
    pub fn sgemm_workspace(&self, stream: &std::sync::Arc<CudaStream>, bytes: usize) -> Result<SgemmWorkspace> {
        self.check_stream(stream)?;
        Ok(SgemmWorkspace { buffer: stream.alloc_zeros::<u8>(bytes.max(WORKSPACE_ALIGN))? })
    }

    /// The workspace bytes that `desc` needs with `choice` (`None`: the kernel the dispatcher
    /// picks when any workspace is at hand): 0 unless it splits k through a workspace.
    pub fn sgemm_workspace_bytes(&self, desc: &Sgemm, choice: Option<SgemmChoice>) -> usize {
        desc.split_workspace_bytes(self.sgemm_config(), self.sm_count(), choice)
    }

    /// The size of the k-split workspace this handle owns and uses for
    /// [`sgemm`](Self::sgemm) and [`sgemm_with`](Self::sgemm_with)
    /// ([`default_split_workspace_bytes`]), allocated with the SGEMM module. `Err`: the module
    /// could not load, or the workspace could not be allocated (that error, kept from the
    /// load); SGEMM then still runs, splitting k only over clusters or not at all.
    pub fn own_sgemm_workspace_bytes(&self) -> Result<usize> {
        // (`None` cannot happen: SGEMM owns one; it would mean 0 bytes.)
        self.own_workspace(KernelFamily::Sgemm)?.map_or(Ok(0), |w| w.as_ref().map(|w| w.bytes()).map_err(Clone::clone))
    }

    /// As [`sgemm_with`](Self::sgemm_with), for frameworks that hold raw CUDA handles (burn and
    /// cubecl hold `CUdeviceptr`s; candle or mistral.rs may pin another `cudarc`): a raw stream
    /// and the device addresses and lengths (in `f32` elements) of A, B and C in `buffers`.
    /// Validated exactly as the safe entry point (lengths, strides, overlaps, alignment, grid
    /// limits, and the stream's context, which must be this handle's), and queued on `stream`
    /// without synchronizing.
    ///
    /// # Safety
    /// `stream` must be a live stream handle (or null, the context's legacy default stream),
    /// and each address in `buffers` must point to a device allocation of this context that
    /// holds at least its length in `f32`s and stays allocated until the launch has finished
    /// on `stream`. No other stream may write A, B or C, or read C, until then (there is no
    /// event tracking here, unlike cudarc's buffers). A workspace in `buffers` (none: 0 bytes,
    /// and then the handle's own serves as for [`sgemm`](Self::sgemm)) must be as
    /// [`SgemmBuffers`] says, and no other stream may use it until then either.
    pub unsafe fn sgemm_raw(&self, stream: CUstream, desc: &Sgemm, buffers: &SgemmBuffers, choice: Option<SgemmChoice>) -> Result<()> {
        self.check_raw_stream(stream)?;
        self.plan_and_launch(stream, desc, buffers, choice)
    }

    /// Launches a validated plan.
    fn launch_sgemm(&self, stream: CUstream, p: &SgemmPlan) -> Result<()> {
        if p.empty {
            return Ok(());
        }
        let f = self.sgemm_function(p.variant, p.operands)?;
        let mut params = p.params;
        let mut args = params.kernel_args();
        self.context().bind_to_thread()?;
        // A k split without a workspace: the `grid.1` blocks of each tile form one thread-block
        // cluster, which the kernel's reduction through distributed shared memory needs (the
        // plan only has such splits on an architecture with clusters, whose PTX has it).
        let cluster = (p.grid.1 > 1 && !p.uses_workspace()).then_some(LaunchAttribute::ClusterY(p.grid.1));
        let overlap = LaunchAttribute::programmatic_if(p.overlaps_previous);
        let attributes: Vec<LaunchAttribute> = cluster.into_iter().chain(overlap.iter().copied()).collect();
        // SAFETY: `plan` proved that every element the canonical problem addresses lies inside
        // the caller's buffers, whose device pointers stay valid for the duration of the launch
        // (cudarc's SyncOnDrop guards order them on `stream`; the raw entry point's caller
        // promises it). `args` points at the fields of `params`, which lives until
        // cuLaunchKernel returns, and matches the entry point's parameters in count, order and
        // sizes by construction: both are generated from the one definition of `SgemmParams`.
        // A split through the workspace writes only inside the workspace the plan checked
        // (size, alignment, no overlap with A, B, C), which the caller keeps for SGEMM alone.
        // The attributes are ones every entry point of the build was made for (a cluster
        // reduction, a wait for its prerequisite grid on sm_90+).
        unsafe { launch(f.cu_function(), p.grid, p.block, p.smem_bytes, stream, &mut args, &attributes) }
    }
}
