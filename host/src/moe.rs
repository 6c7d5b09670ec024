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
//! The GPU kernels (int8 products on q8_1-quantized activations, GPU-side routing) are the
//! next step of this module; [`mul_mat_id_reference`] is their oracle.

use crate::error::{Error, Result};
use crate::quant::dequantize;
use cukernels_gpu::quant::GgufFormat;

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
        MulMatId { format, experts, n, k, tokens, n_used, input: MoeInput::Shared, expert_range: None }
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
