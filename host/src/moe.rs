//! Mixture-of-experts matmul on quantized weights (ggml's `MUL_MAT_ID`): the operation's
//! description, its validation, and the f64 reference the GPU kernels are tested against.
//!
//! Shapes, row-major (ggml's, outermost first):
//! - weights `[experts, n, k]` in a GGUF block format ([`GgufFormat`]): expert `e`'s matrix is
//!   `n` rows of `k` weights, each row `k / block_elements` blocks;
//! - activations `x` `[tokens, x_rows, k]` f32, `x_rows` 1 (every chosen expert reads the
//!   token's row: gate/up projections) or `n_used` (slot `s` reads row `s`: the down
//!   projection, after the per-slot activations);
//! - `ids` `[tokens, n_used]` i32, the experts each token is routed to;
//! - output `y` `[tokens, n_used, n]`: `y[t][s] = W[ids[t][s]] · x[t][s or 0]`.
//!
//! Semantics, as ggml's: an expert that appears twice in a token's ids computes both slots; an
//! expert no token chose costs nothing; an id outside `[0, experts)` is an error. With an
//! expert range `[first, last)` (expert parallelism: each GPU owns some experts), only slots
//! routed to an expert in the range are computed and the others are left as they were, so
//! that the group's outputs can be summed or gathered afterwards.
//!
//! # On the GPU
//! [`Cukernels::mul_mat_id`] runs on the caller's stream (see
//! `kernels-gpu/src/device/moe/mod.rs`), in one of three paths ([`MulMatId::matmul_path`]):
//! - **decode** and **tiled**: two launches. The first quantizes the activations to q8_1
//!   blocks and routes (counts, prefix-sums and gathers the slots of each expert); the second
//!   multiplies each expert's weights by its gathered rows, with `dp4a` (decode: few rows per
//!   expert) or the int8 tensor cores (tiled: many);
//! - **direct** (a few slots: one to a few tokens): no routing; the first launch only
//!   quantizes, and in the second each block reads its slot's id and streams that expert's
//!   weights against the slot's quantized row. On sm_90 and newer the second launch is a
//!   programmatic dependent of the first (it starts, and issues its first weight loads, while
//!   the quantizer runs).
//!
//! Nothing waits for the host, so the call can be captured in a CUDA graph. The caller
//! allocates a workspace of [`MulMatId::workspace_bytes`] bytes (reusable by later calls on the
//! same stream; the direct path uses only its q8_1 parts and error record).
//!
//! An id outside `0..experts` is caught on the device (by the router, or on the direct path by
//! the first block): that slot is computed by
//! no kernel (its output row is left as it was, and nothing is read out of bounds), and the
//! workspace records the first such slot. [`Cukernels::mul_mat_id_checked`] waits for the
//! stream and turns it into an error; [`Cukernels::moe_routing_error`] does the same after an
//! unchecked (or graph) launch. Each call overwrites the record.
//!
//! The activations' q8_1 values are exactly the host's [`crate::quant::quantize_q8_1`]'s (the
//! scale stays f32 instead of being rounded to f16), so every output is the exact dot product
//! of the weights with the quantized activations, up to f32 rounding of the per-16-weight
//! scaling and of the sum ([`mul_mat_id_reference`] is the f64 oracle of the tests).
//! [`MulMatId::matmul_path`] tells which kernels a call runs.

use crate::error::{Error, Result};
use crate::quant::dequantize;
use crate::runtime::{launch, Cukernels, LaunchAttribute};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceRepr};
use cukernels_gpu::moe_flags::{QUANTIZE_ONLY, X_BF16, X_F16};
use cukernels_gpu::quant::GgufFormat;
use cukernels_gpu::{moe_config, GlobalPtr, MoeArchConfig, MoeKernelKind, MoeParams, MoePath, MOE_PREPARE_THREADS, MOE_QUANTIZE_VALUES_PER_THREAD};
use std::sync::Arc;

/// Which activation row a slot reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeInput {
    /// `x` is `[tokens, 1, k]`: every slot of a token reads the token's row.
    Shared,
    /// `x` is `[tokens, n_used, k]`: slot `s` reads row `s`.
    PerSlot,
}

/// One `mul_mat_id` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulMatId {
    pub format: GgufFormat,
    pub experts: usize,
    /// Output features (rows of each expert's matrix).
    pub n: usize,
    /// Input features (a multiple of the format's block).
    pub k: usize,
    pub tokens: usize,
    /// Experts per token (columns of `ids`).
    pub n_used: usize,
    pub input: MoeInput,
    /// Only experts `first..last` are computed (`None`: all).
    pub expert_range: Option<(usize, usize)>,
    /// The matmul path to run, instead of the config's choice by batch size (benchmarks
    /// measure both paths with it to place the switch).
    pub path: Option<MoePath>,
}

/// Element counts of each buffer of a [`MulMatId`] (weights in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeLengths {
    pub weight_bytes: usize,
    pub x: usize,
    pub ids: usize,
    pub y: usize,
}

impl MulMatId {
    /// `tokens` tokens, each routed to `n_used` of `experts` experts of `n × k` weights in
    /// `format`; every slot reads the token's row (see [`MulMatId::per_slot_input`]).
    pub fn new(format: GgufFormat, experts: usize, n: usize, k: usize, tokens: usize, n_used: usize) -> MulMatId {
        MulMatId { format, experts, n, k, tokens, n_used, input: MoeInput::Shared, expert_range: None, path: None }
    }

    /// Slot `s` of each token reads activation row `s` (`x` is `[tokens, n_used, k]`).
    pub fn per_slot_input(mut self) -> Self {
        self.input = MoeInput::PerSlot;
        self
    }

    /// Computes only the slots routed to experts `first..last`.
    pub fn expert_range(mut self, first: usize, last: usize) -> Self {
        self.expert_range = Some((first, last));
        self
    }

    /// Activation rows per token.
    pub fn x_rows(&self) -> usize {
        match self.input {
            MoeInput::Shared => 1,
            MoeInput::PerSlot => self.n_used,
        }
    }

    /// The buffer sizes this call needs, after checking its shape.
    pub fn buffer_lengths(&self) -> Result<MoeLengths> {
        let f = self.format;
        if self.experts == 0 || self.experts > i32::MAX as usize {
            return Err(Error::invalid("experts", self.experts, "must be 1 to i32::MAX (ids are i32)"));
        }
        if self.n_used == 0 || self.n_used > self.experts {
            return Err(Error::invalid("n_used", self.n_used, format!("must be 1 to experts ({})", self.experts)));
        }
        if self.k == 0 || self.k % f.block_elements() != 0 {
            return Err(Error::invalid("k", self.k, format!("must be a positive multiple of {f}'s block of {} weights", f.block_elements())));
        }
        if self.n == 0 {
            return Err(Error::invalid("n", self.n, "must be positive"));
        }
        if let Some((first, last)) = self.expert_range {
            if first >= last || last > self.experts {
                return Err(Error::invalid("expert_range", format!("{first}..{last}"), format!("must be a non-empty range inside 0..{}", self.experts)));
            }
        }
        let overflow = |name: &'static str| Error::invalid(name, "size", "overflows usize");
        let weight_bytes = self.experts.checked_mul(self.n).and_then(|rows| f.row_bytes(rows, self.k)).ok_or_else(|| overflow("experts"))?;
        let slots = self.tokens.checked_mul(self.n_used).ok_or_else(|| overflow("tokens"))?;
        let x = self.tokens.checked_mul(self.x_rows()).and_then(|r| r.checked_mul(self.k)).ok_or_else(|| overflow("tokens"))?;
        let y = slots.checked_mul(self.n).ok_or_else(|| overflow("tokens"))?;
        Ok(MoeLengths { weight_bytes, x, ids: slots, y })
    }

    /// Checks the buffers' lengths against the shape: each mismatch is an error naming the
    /// buffer.
    pub fn check_buffers(&self, weight_bytes: usize, x: usize, ids: usize, y: usize) -> Result<MoeLengths> {
        let need = self.buffer_lengths()?;
        for (name, have, want) in [("weights", weight_bytes, need.weight_bytes), ("x", x, need.x), ("ids", ids, need.ids), ("y", y, need.y)] {
            if have != want {
                return Err(Error::invalid(name, have, format!("{self:?} needs exactly {want} (bytes for weights, elements otherwise)")));
            }
        }
        Ok(need)
    }

    /// Whether expert `e` is computed by this call.
    pub fn computes(&self, e: usize) -> bool {
        self.expert_range.is_none_or(|(first, last)| (first..last).contains(&e))
    }

    /// Multiply-adds × 2 of the slots this call computes (`ids` decide how many).
    pub fn flops(&self, ids: &[i32]) -> f64 {
        let computed = ids.iter().filter(|&&e| e >= 0 && self.computes(e as usize)).count();
        2.0 * computed as f64 * self.n as f64 * self.k as f64
    }
}

/// Checks every id against `[0, experts)`: the first one outside is an error naming its place.
pub fn check_ids(desc: &MulMatId, ids: &[i32]) -> Result<()> {
    for (i, &e) in ids.iter().enumerate() {
        if e < 0 || e as usize >= desc.experts {
            return Err(Error::invalid("ids", e, format!("ids[{}][{}] is outside 0..{}", i / desc.n_used, i % desc.n_used, desc.experts)));
        }
    }
    Ok(())
}

/// The routing a GPU gather must produce: for each expert, the `(token, slot)` pairs routed to
/// it, in token order, then slot order (a stable order, so results do not depend on
/// scheduling). Experts outside the call's range get no pairs.
pub fn routing_reference(desc: &MulMatId, ids: &[i32]) -> Result<Vec<Vec<(usize, usize)>>> {
    desc.buffer_lengths()?;
    if ids.len() != desc.tokens * desc.n_used {
        return Err(Error::invalid("ids", ids.len(), format!("needs tokens × n_used = {}", desc.tokens * desc.n_used)));
    }
    check_ids(desc, ids)?;
    let mut per_expert = vec![Vec::new(); desc.experts];
    for (i, &e) in ids.iter().enumerate() {
        if desc.computes(e as usize) {
            per_expert[e as usize].push((i / desc.n_used, i % desc.n_used));
        }
    }
    Ok(per_expert)
}

/// `y = W[ids] · x` in f64 from the dequantized weights (ggml's dequantization, exact in f64),
/// `[tokens, n_used, n]`; a slot routed outside the expert range is `None` (left untouched).
pub fn mul_mat_id_reference(desc: &MulMatId, weights: &[u8], x: &[f32], ids: &[i32]) -> Result<Vec<Option<f64>>> {
    let lens = desc.check_buffers(weights.len(), x.len(), ids.len(), desc.buffer_lengths()?.y)?;
    check_ids(desc, ids)?;
    let (n, k) = (desc.n, desc.k);
    let expert_bytes = lens.weight_bytes / desc.experts;
    let mut dequantized: Vec<Option<Vec<f32>>> = vec![None; desc.experts];
    let mut y = vec![None; lens.y];
    for t in 0..desc.tokens {
        for s in 0..desc.n_used {
            let e = ids[t * desc.n_used + s] as usize;
            if !desc.computes(e) {
                continue;
            }
            let w = match &mut dequantized[e] {
                Some(w) => &*w,
                slot => &*slot.insert(dequantize(desc.format, &weights[e * expert_bytes..(e + 1) * expert_bytes])?),
            };
            let row = match desc.input {
                MoeInput::Shared => t,
                MoeInput::PerSlot => t * desc.n_used + s,
            };
            let xr = &x[row * k..(row + 1) * k];
            for j in 0..n {
                let wr = &w[j * k..(j + 1) * k];
                y[(t * desc.n_used + s) * n + j] = Some(wr.iter().zip(xr).map(|(&a, &b)| a as f64 * b as f64).sum());
            }
        }
    }
    Ok(y)
}

// -------------------------------------------------------------------------------------------
// The GPU operation
// -------------------------------------------------------------------------------------------

/// An activation element type of [`Cukernels::mul_mat_id`]: f32, f16 or bf16.
pub trait MoeActivation: DeviceRepr {
    /// Its [`cukernels_gpu::moe_flags`] bit.
    const FLAGS: u32;
}
impl MoeActivation for f32 {
    const FLAGS: u32 = 0;
}
impl MoeActivation for half::f16 {
    const FLAGS: u32 = X_F16;
}
impl MoeActivation for half::bf16 {
    const FLAGS: u32 = X_BF16;
}

/// Byte offsets of the parts of a [`MulMatId`]'s workspace (each 16-byte aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeWorkspaceLayout {
    /// q8_1 values of the activations, `[tokens · x_rows, k]` bytes.
    pub x_q: usize,
    /// Their f32 scales, `[tokens · x_rows, k / 32]`.
    pub x_d: usize,
    /// `experts + 1` u32 prefix sums of rows.
    pub row_start: usize,
    /// `experts + 1` u32 prefix sums of tiles.
    pub tiles_before: usize,
    /// `tokens · n_used` u32 gathered slots.
    pub slot_list: usize,
    /// One u32: the first slot with an id outside `0..experts`, or `u32::MAX`.
    pub error: usize,
    /// Total bytes.
    pub bytes: usize,
}

/// Grid limit of `gridDim.x` (tiles) and `gridDim.y` (feature blocks).
const MAX_GRID_X: u64 = i32::MAX as u64;
const MAX_GRID_Y: u64 = 65535;

impl MulMatId {
    /// Slots (`tokens · n_used`).
    pub fn slots(&self) -> usize {
        self.tokens * self.n_used
    }

    /// Whether the call runs the decode kernel (few rows per expert: at most the config's
    /// `decode_max_rows` on average, or a tiled grid under `tiled_min_blocks`) on an
    /// architecture with `config`.
    pub fn decode_path(&self, config: &MoeArchConfig) -> bool {
        self.matmul_path(config) == MoePath::Decode
    }

    /// Runs `path` whatever the batch size (every path is correct for every call).
    pub fn force_path(mut self, path: MoePath) -> Self {
        self.path = Some(path);
        self
    }

    /// The matmul path the call runs on an architecture with `config`: the forced one, or
    /// the config's choice ([`MoeArchConfig::path`]: direct for a few slots, decode for few rows
    /// per expert, tiled for many).
    pub fn matmul_path(&self, config: &MoeArchConfig) -> MoePath {
        let (first, last) = self.expert_range.unwrap_or((0, self.experts));
        self.path.unwrap_or_else(|| config.path(self.format, self.slots() as u64, (last - first) as u64, self.n as u64))
    }

    /// The workspace's parts (after checking the shape).
    pub fn workspace_layout(&self) -> Result<MoeWorkspaceLayout> {
        self.buffer_lengths()?;
        self.layout_of_checked_shape()
    }

    /// [`workspace_layout`](Self::workspace_layout) of a shape [`buffer_lengths`](Self::buffer_lengths)
    /// has already accepted.
    fn layout_of_checked_shape(&self) -> Result<MoeWorkspaceLayout> {
        let overflow = || Error::invalid("tokens", self.tokens, "the workspace size overflows usize");
        let x_values = self.tokens.checked_mul(self.x_rows()).and_then(|r| r.checked_mul(self.k)).ok_or_else(overflow)?;
        let mut at = 0usize;
        let mut part = |bytes: usize| -> Result<usize> {
            let start = at;
            at = at.checked_add(bytes).and_then(|e| e.checked_next_multiple_of(16)).ok_or_else(overflow)?;
            Ok(start)
        };
        let x_q = part(x_values)?;
        let x_d = part(x_values / 32 * 4)?;
        let row_start = part((self.experts + 1) * 4)?;
        let tiles_before = part((self.experts + 1) * 4)?;
        let slot_list = part(self.slots() * 4)?;
        let error = part(4)?;
        Ok(MoeWorkspaceLayout { x_q, x_d, row_start, tiles_before, slot_list, error, bytes: at })
    }

    /// Bytes of workspace [`Cukernels::mul_mat_id`] needs for this call.
    pub fn workspace_bytes(&self) -> Result<usize> {
        Ok(self.workspace_layout()?.bytes)
    }

    /// Validates the call against its buffers (device addresses and lengths: weights and
    /// workspace in bytes, the others in elements) and the config row, and works out the
    /// launches.
    pub fn plan(&self, x_flags: u32, buffers: &MoeBuffers, config: &MoeArchConfig) -> Result<MoePlan> {
        let lens = self.check_buffers(buffers.weights.1, buffers.x.1, buffers.ids.1, buffers.y.1)?;
        let layout = self.layout_of_checked_shape()?;
        if buffers.workspace.1 < layout.bytes {
            return Err(Error::BufferTooSmall { name: "workspace", len: buffers.workspace.1, required: layout.bytes });
        }
        let f = self.format;
        let align = f.block_alignment() as u64;
        if buffers.weights.0 % align != 0 {
            return Err(Error::invalid("weights", format!("{:#x}", buffers.weights.0), format!("{f} blocks must start at a multiple of {align} bytes")));
        }
        if buffers.workspace.0 % 16 != 0 {
            return Err(Error::invalid("workspace", format!("{:#x}", buffers.workspace.0), "must start at a multiple of 16 bytes"));
        }
        let too_big = |name: &'static str, value: usize, why: &str| Error::invalid(name, value, why.to_string());
        let slots = self.slots();
        if self.k > u32::MAX as usize || self.n > u32::MAX as usize {
            return Err(too_big("k", self.k, "k and n must fit in 32 bits"));
        }
        if slots > u32::MAX as usize - 1 || self.tokens.checked_mul(self.x_rows()).is_none_or(|r| r > u32::MAX as usize) {
            return Err(too_big("tokens", self.tokens, "tokens · n_used must fit in 32 bits"));
        }
        let path = self.matmul_path(config);
        let tile = config.tile(path, self.format);
        let feature_blocks = self.n.div_ceil(tile.features() as usize) as u64;
        if feature_blocks > MAX_GRID_Y {
            return Err(too_big("n", self.n, &format!("more than {MAX_GRID_Y} blocks of {} features (gridDim.y)", tile.features())));
        }
        let (first, last) = self.expert_range.unwrap_or((0, self.experts));
        // Routed: Σ ⌈count_e / rows⌉ over the computed experts, bounded without reading the
        // counts. Direct: one block per slot.
        let tile_bound = match path {
            MoePath::Direct => slots as u64,
            MoePath::Decode | MoePath::Tiled | MoePath::TiledTall => (slots.div_ceil(tile.rows as usize) + (last - first).min(slots)) as u64,
        };
        if tile_bound > MAX_GRID_X {
            return Err(too_big("tokens", self.tokens, "more row tiles than gridDim.x allows"));
        }
        let x_blocks = (lens.x / 32) as u64;
        // Block 0 routes (not on the direct path), the others quantize.
        let router_blocks = if path == MoePath::Direct { 0 } else { 1 };
        let prepare_blocks = router_blocks + x_blocks.div_ceil((MOE_PREPARE_THREADS / (32 / MOE_QUANTIZE_VALUES_PER_THREAD)) as u64);
        if prepare_blocks > MAX_GRID_X {
            return Err(too_big("tokens", self.tokens, "more activation blocks than gridDim.x allows"));
        }

        // y must not overlap anything the kernels read, nor the workspace.
        let y_range = (buffers.y.0, buffers.y.0.saturating_add(4 * lens.y as u64));
        let x_bytes = (lens.x * x_element_bytes(x_flags)) as u64;
        for (name, start, bytes) in [
            ("weights", buffers.weights.0, lens.weight_bytes as u64),
            ("x", buffers.x.0, x_bytes),
            ("ids", buffers.ids.0, 4 * lens.ids as u64),
            ("workspace", buffers.workspace.0, layout.bytes as u64),
        ] {
            if lens.y > 0 && bytes > 0 && y_range.0 < start.saturating_add(bytes) && start < y_range.1 {
                return Err(Error::Overlap(format!("y overlaps {name} in device memory")));
            }
        }
        let ws = |offset: usize| buffers.workspace.0 + offset as u64;
        let expert_bytes = lens.weight_bytes / self.experts;
        let params = MoeParams {
            weights: GlobalPtr::new(buffers.weights.0),
            x: GlobalPtr::new(buffers.x.0),
            ids: GlobalPtr::new(buffers.ids.0),
            y: GlobalPtr::new(buffers.y.0),
            x_q: GlobalPtr::new(ws(layout.x_q)),
            x_d: GlobalPtr::new(ws(layout.x_d)),
            row_start: GlobalPtr::new(ws(layout.row_start)),
            tiles_before: GlobalPtr::new(ws(layout.tiles_before)),
            slot_list: GlobalPtr::new(ws(layout.slot_list)),
            error: GlobalPtr::new(ws(layout.error)),
            row_bytes: (expert_bytes / self.n) as u64,
            expert_bytes: expert_bytes as u64,
            experts: self.experts as u32,
            n: self.n as u32,
            k: self.k as u32,
            tokens: self.tokens as u32,
            n_used: self.n_used as u32,
            x_rows: self.x_rows() as u32,
            expert_first: first as u32,
            expert_last: last as u32,
            tile_rows: tile.rows,
            flags: if path == MoePath::Direct { x_flags | QUANTIZE_ONLY } else { x_flags },
        };
        Ok(MoePlan {
            params,
            path,
            prepare_grid: prepare_blocks as u32,
            matmul_grid: (tile_bound as u32, feature_blocks as u32),
            matmul_threads: tile.threads(),
            matmul_smem: tile.smem_bytes(),
            overlaps_previous: config.arch.has_programmatic_launch(),
            empty: self.tokens == 0,
        })
    }
}

fn x_element_bytes(flags: u32) -> usize {
    if flags & (X_F16 | X_BF16) != 0 { 2 } else { 4 }
}

/// Device addresses and lengths of a call's buffers (weights and workspace in bytes, the
/// others in elements).
#[derive(Clone, Copy, Debug)]
pub struct MoeBuffers {
    pub weights: (u64, usize),
    pub x: (u64, usize),
    pub ids: (u64, usize),
    pub y: (u64, usize),
    pub workspace: (u64, usize),
}

/// The launches of one call.
#[derive(Clone, Copy, Debug)]
pub struct MoePlan {
    pub params: MoeParams,
    pub path: MoePath,
    /// Blocks of the prepare launch: the router (not on the direct path), then the quantizers.
    pub prepare_grid: u32,
    /// (tiles bound, feature blocks) of the matmul.
    pub matmul_grid: (u32, u32),
    pub matmul_threads: u32,
    pub matmul_smem: u32,
    /// Both launches are programmatic dependents of the launch before them on the stream
    /// (sm_90+ builds): the prepare launch of the one before the call, the matmul of the
    /// prepare launch; each kernel waits for its prerequisite grid itself.
    pub overlaps_previous: bool,
    /// No tokens: nothing to launch.
    pub empty: bool,
}

impl Cukernels {
    /// The MoE config row this handle's `moe` kernels were compiled with.
    pub fn moe_config(&self) -> &'static MoeArchConfig {
        moe_config(self.artifact(cukernels_gpu::KernelFamily::Moe).config)
    }

    /// Runs `desc` on `stream`: `y[t][s] = W[ids[t][s]] · x[t][s or 0]` (see the module docs),
    /// without waiting for the stream. `workspace` holds at least
    /// [`MulMatId::workspace_bytes`]. An id outside `0..experts` leaves its slot's output row
    /// untouched and is reported by [`Cukernels::moe_routing_error`].
    #[allow(clippy::too_many_arguments)]
    pub fn mul_mat_id<X, W, XB, I, Y, S>(&self, stream: &Arc<CudaStream>, desc: &MulMatId, weights: &W, x: &XB, ids: &I, y: &mut Y, workspace: &mut S) -> Result<()>
    where
        X: MoeActivation,
        W: DevicePtr<u8>,
        XB: DevicePtr<X>,
        I: DevicePtr<i32>,
        Y: DevicePtrMut<f32>,
        S: DevicePtrMut<u8>,
    {
        self.check_stream(stream)?;
        let (w_addr, _w_sync) = weights.device_ptr(stream);
        let (x_addr, _x_sync) = x.device_ptr(stream);
        let (ids_addr, _ids_sync) = ids.device_ptr(stream);
        let y_len = y.len();
        let (y_addr, _y_sync) = y.device_ptr_mut(stream);
        let ws_len = workspace.len();
        let (ws_addr, _ws_sync) = workspace.device_ptr_mut(stream);
        let buffers = MoeBuffers {
            weights: (w_addr, weights.len()),
            x: (x_addr, x.len()),
            ids: (ids_addr, ids.len()),
            y: (y_addr, y_len),
            workspace: (ws_addr, ws_len),
        };
        let plan = desc.plan(X::FLAGS, &buffers, self.moe_config())?;
        self.launch_moe(stream, &plan, desc.format)
    }

    /// [`mul_mat_id`](Self::mul_mat_id), then waits for the stream and reports an id outside
    /// `0..experts` as an error.
    #[allow(clippy::too_many_arguments)]
    pub fn mul_mat_id_checked<X, W, XB, I, Y, S>(&self, stream: &Arc<CudaStream>, desc: &MulMatId, weights: &W, x: &XB, ids: &I, y: &mut Y, workspace: &mut S) -> Result<()>
    where
        X: MoeActivation,
        W: DevicePtr<u8>,
        XB: DevicePtr<X>,
        I: DevicePtr<i32>,
        Y: DevicePtrMut<f32>,
        S: DevicePtrMut<u8> + DevicePtr<u8>,
    {
        self.mul_mat_id(stream, desc, weights, x, ids, y, workspace)?;
        self.moe_routing_error(stream, desc, ids, workspace)
    }

    /// Waits for `stream` and reads the router's record in `workspace` of the last
    /// [`mul_mat_id`](Self::mul_mat_id) of `desc`: an error naming the first slot whose id is
    /// outside `0..experts` (that slot's output row was left untouched), else `Ok`.
    pub fn moe_routing_error<I, S>(&self, stream: &Arc<CudaStream>, desc: &MulMatId, ids: &I, workspace: &S) -> Result<()>
    where
        I: DevicePtr<i32>,
        S: DevicePtr<u8>,
    {
        self.check_stream(stream)?;
        let layout = desc.workspace_layout()?;
        if desc.tokens == 0 {
            return Ok(());
        }
        if workspace.len() < layout.bytes {
            return Err(Error::BufferTooSmall { name: "workspace", len: workspace.len(), required: layout.bytes });
        }
        let mut word = [0u32; 1];
        let (ws_addr, _sync) = workspace.device_ptr(stream);
        self.context().bind_to_thread()?;
        // SAFETY: reads 4 bytes at `error`, inside the workspace (checked above), into `word`;
        // the copy is ordered after the call's kernels on `stream`, and the stream is
        // synchronized before `word` is read.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(&mut word, ws_addr + layout.error as u64, stream.cu_stream())?;
        }
        stream.synchronize()?;
        let slot = word[0];
        if slot == u32::MAX {
            return Ok(());
        }
        let (t, s) = (slot as usize / desc.n_used, slot as usize % desc.n_used);
        let id = if (slot as usize) < ids.len() {
            let mut id = [0i32; 1];
            let (ids_addr, _ids_sync) = ids.device_ptr(stream);
            // SAFETY: reads element `slot` of `ids` (bounds checked just above) into `id`, then
            // waits for the copy.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut id, ids_addr + 4 * slot as u64, stream.cu_stream())? };
            stream.synchronize()?;
            id[0].to_string()
        } else {
            "?".into()
        };
        Err(Error::invalid("ids", id, format!("ids[{t}][{s}] is outside 0..{} (found on the device; the slot's output row was left untouched)", desc.experts)))
    }

    fn launch_moe(&self, stream: &Arc<CudaStream>, plan: &MoePlan, format: GgufFormat) -> Result<()> {
        if plan.empty {
            return Ok(());
        }
        let prepare = self.moe_function(MoeKernelKind::Prepare)?;
        let matmul = self.moe_function(MoeKernelKind::MatMul(format, plan.path))?;
        self.context().bind_to_thread()?;
        let mut params = plan.params;
        let mut args = params.kernel_args();
        let s = stream.cu_stream();
        // SAFETY: `plan` proved that every byte the parameters address lies inside the caller's
        // buffers and workspace (held by their SyncOnDrop guards in the caller for the duration
        // of the launches), and that y overlaps nothing the kernels read. The prepare kernel's
        // quantizing blocks write only the workspace's q8_1 parts, its routing block only the
        // routing parts (reading ids); the matmul reads those, the weights, and writes y rows
        // of routed slots (the direct one, overlapping the prepare launch, reads the q8_1 parts
        // only after its wait for that grid). `args`
        // points at the fields of `params`, alive until the last launch returns, and matches
        // the entry points' parameters by construction (one definition of `MoeParams`).
        unsafe {
            let route_smem = cukernels_gpu::moe_config::MOE_ROUTE_SMEM_BYTES;
            // With PDL (sm_90+ builds) each kernel waits for the grid before it
            // (`griddepcontrol.wait`) before it reads what that grid may have written.
            let overlap = LaunchAttribute::programmatic_if(plan.overlaps_previous);
            launch(prepare.cu_function(), (plan.prepare_grid, 1, 1), MOE_PREPARE_THREADS, route_smem, s, &mut args, overlap)?;
            let grid = (plan.matmul_grid.0, plan.matmul_grid.1, 1);
            launch(matmul.cu_function(), grid, plan.matmul_threads, plan.matmul_smem, s, &mut args, overlap)?;
        }
        Ok(())
    }
}
