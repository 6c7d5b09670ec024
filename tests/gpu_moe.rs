//! MoE quantized matmul (`mul_mat_id`) on a real GPU, with every architecture's config (on an
//! sm_90 device: the PTX of sm_70 to sm_89, the sm_90 cubin, and the sm_100 and sm_120 rows
//! built for sm_90).
//!
//! Each case draws fresh random weights (quantized with the host's ggml reference quantizer),
//! activations and ids (with duplicated ids, a token whose every slot names one expert, and
//! experts that no token chose), computes the f64 reference once, then for every config
//! poisons `y` (a NaN bit pattern everywhere), runs, and checks **every element**:
//! - a computed slot's element `y` against `ref = Σ_j w_j · d·q_j`, the exact product of the
//!   dequantized weights with the q8_1-quantized activations (`quantize_q8_1`'s values, which the
//!   GPU's quantizer reproduces bit for bit, with the scale `d` in f32): `|y − ref| ≤ 1e-5 · S`,
//!   `S = Σ_j (|scale_j · v_j| + |offset_j|) · |d·q_j|` the sum of the magnitudes the kernel's f32
//!   arithmetic rounds (about 100 times the f32 rounding error of the kernel's ~20 sequential
//!   operations; a dropped or misrouted row is off by about `S / √k`, hundreds of times more);
//! - a slot routed outside the expert range, or with a bad id, keeps its poison bits.
//!
//! These tests need a CUDA GPU and are `#[ignore]`d otherwise: run them with
//! `cargo test -p cukernels-tests --test gpu_moe -- --ignored` (or `scripts/device-run.sh`).
//! `CUKERNELS_TEST_QUICK=1` keeps a few formats (every batch size with 512 experts, 10 used)
//! and the sm_90 and sm_75 configs: the compute-sanitizer runs.

use cukernels::cudarc::driver::{CudaSlice, CudaStream};
use cukernels::quant::{chunks, quantize, quantize_q8_1, Chunk, QK};
use cukernels::{Arch, Cukernels, Error, GgufFormat, KernelFamily, MoeInput, MoePath, MulMatId};
use cukernels_tests::{config_handles, rng, UntrackedAllocations};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::Rng;
use std::sync::Arc;

struct Gpu {
    stream: Arc<CudaStream>,
    /// One handle per architecture config this device can run (cubin where one runs).
    handles: Vec<Cukernels>,
}

fn gpu() -> Gpu {
    // Quick runs (compute-sanitizer) keep the sm_90 row and sm_75's (its own tile shapes).
    let configs: &[Arch] = if quick() { &[Arch::Sm90, Arch::Sm75] } else { &Arch::ALL };
    let (stream, handles) = config_handles(KernelFamily::Moe, configs);
    Gpu { stream, handles }
}

fn quick() -> bool {
    std::env::var("CUKERNELS_TEST_QUICK").is_ok_and(|v| v == "1")
}

/// The poison `y` is filled with before each run (a NaN no kernel computes).
const POISON: u32 = 0x7fc0_dead;

/// Activation element types.
#[derive(Clone, Copy, Debug, PartialEq)]
enum XType {
    F32,
    F16,
    Bf16,
}

/// One call with its inputs and reference.
struct Case {
    desc: MulMatId,
    weights: Vec<u8>,
    /// The activations as the GPU sees them (rounded to the element type), in f32.
    x: Vec<f32>,
    xtype: XType,
    ids: Vec<i32>,
    /// Per output element: `Some((ref, S))` where computed, `None` where left untouched.
    expected: Vec<Option<(f64, f64)>>,
}

/// Random ids: distinct experts per token mostly, with duplicates in every 7th token and every
/// slot of token 3 naming one expert; `bad` slots get ids outside `0..experts`.
fn random_ids(rng: &mut StdRng, experts: usize, n_used: usize, tokens: usize) -> Vec<i32> {
    let mut ids = Vec::with_capacity(tokens * n_used);
    for t in 0..tokens {
        let mut row: Vec<i32> = Vec::with_capacity(n_used);
        while row.len() < n_used {
            let e = rng.random_range(0..experts) as i32;
            if !row.contains(&e) {
                row.push(e);
            }
        }
        if t % 7 == 1 && n_used > 1 {
            row[n_used - 1] = row[0];
        }
        if t == 3 {
            row.iter_mut().for_each(|e| *e = (t % experts) as i32);
        }
        ids.extend(row);
    }
    ids
}

fn round_to(xtype: XType, x: f32) -> f32 {
    match xtype {
        XType::F32 => x,
        XType::F16 => f16::from_f32(x).to_f32(),
        XType::Bf16 => bf16::from_f32(x).to_f32(),
    }
}

/// Builds a case: weights of the experts the ids use (others are 0xFF bytes, never read),
/// activations, and the f64 reference (threads over slots).
fn make_case(rng: &mut StdRng, desc: MulMatId, xtype: XType, ids: Vec<i32>) -> Case {
    let (n, k) = (desc.n, desc.k);
    let lens = desc.buffer_lengths().unwrap();
    let expert_bytes = lens.weight_bytes / desc.experts;
    let mut used = vec![false; desc.experts];
    for &e in &ids {
        if e >= 0 && (e as usize) < desc.experts {
            used[e as usize] = true;
        }
    }
    // Quantize the used experts' weights (in parallel: the K-quant quantizers iterate).
    let seeds: Vec<u64> = (0..desc.experts).map(|_| rng.random()).collect();
    let mut weights = vec![0xFFu8; lens.weight_bytes];
    let threads = std::thread::available_parallelism().map_or(4, |p| p.get()).min(32);
    let mut per_worker: Vec<Vec<(usize, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
    for (e, dst) in weights.chunks_mut(expert_bytes).enumerate() {
        if used[e] {
            per_worker[e % threads].push((e, dst));
        }
    }
    let format = desc.format;
    std::thread::scope(|scope| {
        for work in per_worker {
            let seeds = &seeds;
            scope.spawn(move || {
                for (e, dst) in work {
                    let mut r = <StdRng as rand::SeedableRng>::seed_from_u64(seeds[e]);
                    // Rows of different magnitudes (and an expert-dependent offset, so the `_1`
                    // and K formats' minimums matter).
                    let mut w = Vec::with_capacity(n * k);
                    for j in 0..n {
                        let scale = 0.02 * (1.0 + (j % 5) as f32);
                        let bias = 0.01 * ((e % 3) as f32 - 1.0);
                        w.extend((0..k).map(|_| bias + scale * r.random_range(-1.0f32..1.0)));
                    }
                    dst.copy_from_slice(&quantize(format, &w).unwrap());
                }
            });
        }
    });
    let x: Vec<f32> = (0..lens.x).map(|i| round_to(xtype, (1.0 + (i / k % 3) as f32) * rng.random_range(-1.0f32..1.0))).collect();
    let expected = reference(&desc, &weights, &x, &ids);
    Case { desc, weights, x, xtype, ids, expected }
}

/// `(Σ_j w_j · d·q_j, Σ_j (|scale·v| + |offset|)·|d·q_j|)` per output element, or `None` for a
/// slot this call does not compute.
fn reference(desc: &MulMatId, weights: &[u8], x: &[f32], ids: &[i32]) -> Vec<Option<(f64, f64)>> {
    let (n, k, n_used) = (desc.n, desc.k, desc.n_used);
    let expert_bytes = weights.len() / desc.experts;
    // Quantized activations, per row: d (f32, as the GPU keeps it) · q.
    let x_rows = x.len() / k;
    let xq: Vec<f64> = (0..x_rows)
        .flat_map(|r| {
            let row = &x[r * k..(r + 1) * k];
            let blocks = quantize_q8_1(row).unwrap();
            blocks.into_iter().enumerate().flat_map(move |(b, blk)| {
                let amax = row[b * QK..(b + 1) * QK].iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                blk.qs.into_iter().map(move |q| d as f64 * q as f64)
            })
        })
        .collect();
    let mut expert_chunks: Vec<Option<Vec<Chunk>>> = vec![None; desc.experts];
    for &e in ids {
        if e >= 0 && (e as usize) < desc.experts && expert_chunks[e as usize].is_none() {
            expert_chunks[e as usize] = Some(chunks(desc.format, &weights[e as usize * expert_bytes..(e as usize + 1) * expert_bytes]).unwrap());
        }
    }
    let slots = desc.tokens * n_used;
    let mut out = vec![None; slots * n];
    let threads = std::thread::available_parallelism().map_or(4, |p| p.get()).min(32);
    let per = slots.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (part, dst) in out.chunks_mut(per * n).enumerate() {
            let (expert_chunks, xq) = (&expert_chunks, &xq);
            scope.spawn(move || {
                for (i, y) in dst.chunks_mut(n).enumerate() {
                    let slot = part * per + i;
                    let e = ids[slot];
                    if e < 0 || e as usize >= desc.experts || !desc.computes(e as usize) {
                        continue;
                    }
                    let ch = expert_chunks[e as usize].as_ref().unwrap();
                    let row = match desc.input {
                        MoeInput::Shared => slot / n_used,
                        MoeInput::PerSlot => slot,
                    };
                    let xr = &xq[row * k..(row + 1) * k];
                    let per_row = k / QK;
                    for (j, yj) in y.iter_mut().enumerate() {
                        let (mut acc, mut mag) = (0f64, 0f64);
                        for (c, chunk) in ch[j * per_row..(j + 1) * per_row].iter().enumerate() {
                            for l in 0..QK {
                                let (scale, offset) = (chunk.scale[l / 16] as f64, chunk.offset[l / 16] as f64);
                                let sv = scale * chunk.value(l) as f64;
                                let xv = xr[c * QK + l];
                                acc += (sv + offset) * xv;
                                mag += (sv.abs() + offset.abs()) * xv.abs();
                            }
                        }
                        *yj = Some((acc, mag));
                    }
                }
            });
        }
    });
    out
}

fn upload<T: cukernels::cudarc::driver::DeviceRepr>(stream: &Arc<CudaStream>, v: &[T]) -> CudaSlice<T> {
    stream.clone_htod(v).unwrap()
}

/// Which matmul paths a case runs.
#[derive(Clone, Copy, PartialEq)]
enum Paths {
    /// The config's choice for the call's size.
    Chosen,
    /// The config's choice, then each path forced (direct, decode, tiled): every path must
    /// give every call the same results, whatever the batch size.
    Every,
}

/// A case's inputs on the device.
struct DeviceInputs {
    weights: CudaSlice<u8>,
    ids: CudaSlice<i32>,
    x32: Option<CudaSlice<f32>>,
    x16: Option<CudaSlice<f16>>,
    xb16: Option<CudaSlice<bf16>>,
}

impl DeviceInputs {
    fn new(s: &Arc<CudaStream>, case: &Case) -> DeviceInputs {
        DeviceInputs {
            weights: upload(s, &case.weights),
            ids: upload(s, &case.ids),
            x32: (case.xtype == XType::F32).then(|| upload(s, &case.x)),
            x16: (case.xtype == XType::F16).then(|| upload(s, &case.x.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>())),
            xb16: (case.xtype == XType::Bf16).then(|| upload(s, &case.x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>())),
        }
    }

    /// `h.mul_mat_id` of `desc` on these inputs (not waiting for the stream).
    fn run(&self, h: &Cukernels, s: &Arc<CudaStream>, desc: &MulMatId, y: &mut CudaSlice<f32>, workspace: &mut CudaSlice<u8>) -> Result<(), Error> {
        let (w, ids) = (&self.weights, &self.ids);
        match (&self.x32, &self.x16, &self.xb16) {
            (Some(x), _, _) => h.mul_mat_id(s, desc, w, x, ids, y, workspace),
            (_, Some(x), _) => h.mul_mat_id(s, desc, w, x, ids, y, workspace),
            (_, _, Some(x)) => h.mul_mat_id(s, desc, w, x, ids, y, workspace),
            _ => unreachable!("one activation buffer per case"),
        }
    }
}

/// Runs `case` on every handle (and path) and checks the result (the routing error for bad
/// ids) and every element.
fn run_case(gpu: &Gpu, case: &Case, label: &str, paths: Paths) {
    let inputs = DeviceInputs::new(&gpu.stream, case);
    let forced: &[MoePath] = if paths == Paths::Every { &MoePath::ALL } else { &[] };
    for path in std::iter::once(None).chain(forced.iter().copied().map(Some)) {
        let desc = match path {
            Some(p) => case.desc.clone().force_path(p),
            None => case.desc.clone(),
        };
        run_case_on(gpu, case, &inputs, &desc, &format!("{label} path {}", path.map_or("chosen", |p| p.name())));
    }
}

/// [`run_case`] of `desc` (the case's call, maybe with a forced path).
fn run_case_on(gpu: &Gpu, case: &Case, inputs: &DeviceInputs, desc: &MulMatId, label: &str) {
    let s = &gpu.stream;
    let poison = vec![f32::from_bits(POISON); case.expected.len()];
    let mut y = upload(s, &poison);
    for h in &gpu.handles {
        let mut workspace = s.alloc_zeros::<u8>(desc.workspace_bytes().unwrap().max(1)).unwrap();
        s.memcpy_htod(&poison, &mut y).unwrap();
        let result = inputs.run(h, s, desc, &mut y, &mut workspace).and_then(|()| h.moe_routing_error(s, desc, &inputs.ids, &workspace));
        let config = format!("{} ({})", h.artifact(KernelFamily::Moe), desc.matmul_path(h.moe_config()).name());
        let bad = case.ids.iter().position(|&e| e < 0 || e as usize >= desc.experts);
        match (bad, &result) {
            (None, Ok(())) => {}
            (Some(slot), Err(Error::InvalidArgument { name: "ids", reason, .. })) => {
                let at = format!("ids[{}][{}]", slot / desc.n_used, slot % desc.n_used);
                assert!(reason.contains(&at), "{label} {config}: the error must name the first bad slot {at}: {reason}");
            }
            _ => panic!("{label} {config}: result {result:?} with first bad slot {bad:?}"),
        }
        let worst = check_output(case, desc, &s.clone_dtoh(&y).unwrap(), &format!("{label} {config}"));
        eprintln!("{label} {config}: ok (worst error {worst:.3} of the bound)");
    }
}

/// Checks every element of `got` against the case's reference (untouched rows must still hold
/// the poison); returns the worst error as a fraction of its bound.
fn check_output(case: &Case, desc: &MulMatId, got: &[f32], label: &str) -> f64 {
    let mut worst = 0f64;
    for (i, (g, e)) in got.iter().zip(&case.expected).enumerate() {
        let (slot, j) = (i / desc.n, i % desc.n);
        let place = || format!("{label}: y[{}][{}][{j}] (expert {})", slot / desc.n_used, slot % desc.n_used, case.ids[slot]);
        match e {
            None => assert_eq!(g.to_bits(), POISON, "{}: must be left untouched, holds {g}", place()),
            Some((r, mag)) => {
                assert!(g.is_finite(), "{}: not written or not finite: {g} (expected {r})", place());
                let err = (*g as f64 - r).abs();
                let tol = 1e-5 * mag + 1e-30;
                assert!(err <= tol, "{}: {g} vs {r}: error {err:.3e} > {tol:.3e}", place());
                worst = worst.max(err / tol);
            }
        }
    }
    worst
}

const COMBOS: [(usize, usize); 4] = [(8, 2), (32, 4), (128, 8), (512, 10)];
const TOKENS: [usize; 14] = [1, 2, 3, 5, 8, 9, 17, 32, 129, 511, 512, 513, 1024, 4096];

fn formats() -> Vec<GgufFormat> {
    if quick() {
        vec![GgufFormat::Q4_0, GgufFormat::Q4K, GgufFormat::Q6K, GgufFormat::Mxfp4]
    } else {
        GgufFormat::ALL.to_vec()
    }
}

/// `blocks` blocks of the format along K.
fn k_of(format: GgufFormat, blocks: usize) -> usize {
    blocks * format.block_elements()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_format_every_batch_size_every_config() {
    let gpu = gpu();
    let mut rng = rng("moe every format");
    for format in formats() {
        for (i, &tokens) in TOKENS.iter().enumerate() {
            // Every batch size with 512 experts, 10 used; and with one of the other shapes, the
            // other input mode. N is odd (no multiple of any tile); K is 3 blocks, or for small
            // batches more than one K step of 1024 weights (37 blocks of 32, 5 of 256).
            let n = if tokens >= 511 { 37 } else { 67 };
            let blocks = match (tokens < 32, format.block_elements() == QK) {
                (true, true) => 37,
                (true, false) => 5,
                (false, _) => 3,
            };
            let k = k_of(format, blocks);
            let (e2, u2) = COMBOS[i % 3];
            let mut shapes = vec![(512, 10, i % 2 == 0), (e2, u2, i % 2 == 1)];
            if quick() {
                shapes.truncate(1);
            }
            for (experts, n_used, per_slot) in shapes {
                let mut desc = MulMatId::new(format, experts, n, k, tokens, n_used);
                if per_slot {
                    desc = desc.per_slot_input();
                }
                let xtype = [XType::F32, XType::F16, XType::Bf16][i % 3];
                let ids = random_ids(&mut rng, experts, n_used, tokens);
                let case = make_case(&mut rng, desc, xtype, ids);
                // Every path on the small batches (the three are close there), the chosen one
                // on the large.
                let paths = if tokens <= 17 { Paths::Every } else { Paths::Chosen };
                run_case(&gpu, &case, &format!("{format} T{tokens} E{experts}/{n_used} {} {xtype:?} k{k} n{n}", if per_slot { "per-slot" } else { "shared" }), paths);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn expert_ranges_leave_other_slots_untouched() {
    let gpu = gpu();
    let mut rng = rng("moe expert range");
    for format in [GgufFormat::Q4_0, GgufFormat::Q5K, GgufFormat::Iq4Xs] {
        for (tokens, range) in [(1, (0, 4)), (5, (3, 20)), (129, (31, 32)), (600, (8, 16))] {
            let desc = MulMatId::new(format, 32, 45, k_of(format, 3), tokens, 4).expert_range(range.0, range.1);
            let ids = random_ids(&mut rng, 32, 4, tokens);
            let case = make_case(&mut rng, desc, XType::F32, ids);
            run_case(&gpu, &case, &format!("{format} T{tokens} experts {}..{}", range.0, range.1), Paths::Every);
        }
    }
}

/// The router counts `MOE_ROUTE_EXPERTS_PER_PASS` experts per pass in shared memory: with
/// more experts than that it takes several passes over the ids, each scanning on from the
/// last's totals. Ids across three passes, an expert range that straddles a pass boundary, and
/// a bad id (flagged in the first pass only, once).
#[test]
#[ignore = "needs a CUDA GPU"]
fn more_experts_than_one_router_pass() {
    let gpu = gpu();
    let mut rng = rng("moe many experts");
    let pass = cukernels::MOE_ROUTE_EXPERTS_PER_PASS as usize;
    let experts = 2 * pass + 808;
    for (tokens, range, bad) in [(1, None, None), (9, Some((pass - 100, pass + 900)), None), (700, None, Some((1234, experts as i32))), (600, Some((10, 2 * pass + 5)), None)] {
        let mut desc = MulMatId::new(GgufFormat::Q8_0, experts, 19, k_of(GgufFormat::Q8_0, 2), tokens, 4);
        if let Some((first, last)) = range {
            desc = desc.expert_range(first, last);
        }
        let mut ids = random_ids(&mut rng, experts, 4, tokens);
        if let Some((slot, id)) = bad {
            ids[slot] = id;
        }
        let case = make_case(&mut rng, desc, XType::F32, ids);
        run_case(&gpu, &case, &format!("q8_0 T{tokens} E{experts}/4 range {range:?} bad {bad:?}"), Paths::Every);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ids_out_of_range_are_an_error_and_read_nothing() {
    let gpu = gpu();
    let mut rng = rng("moe bad ids");
    for (tokens, bad) in [(1usize, vec![(0usize, -1i32)]), (9, vec![(20, 128), (3, i32::MIN)]), (513, vec![(4000, i32::MAX), (100, 129)])] {
        let desc = MulMatId::new(GgufFormat::Q4K, 128, 33, k_of(GgufFormat::Q4K, 3), tokens, 8);
        let mut ids = random_ids(&mut rng, 128, 8, tokens);
        for &(slot, id) in &bad {
            ids[slot] = id;
        }
        let case = make_case(&mut rng, desc, XType::F32, ids);
        run_case(&gpu, &case, &format!("bad ids T{tokens}"), Paths::Every);
    }
}

/// The direct path reads each slot's quantized row from the workspace, so it has no limit on
/// K: a K of 28672 (Llama-3-70B's FFN down projection), many passes of 32 chunks per lane.
#[test]
#[ignore = "needs a CUDA GPU"]
fn long_k_on_every_path() {
    let gpu = gpu();
    let mut rng = rng("moe long k");
    for format in [GgufFormat::Q4_0, GgufFormat::Q6K] {
        let desc = MulMatId::new(format, 8, 37, 28672, 2, 2);
        let ids = random_ids(&mut rng, 8, 2, 2);
        let case = make_case(&mut rng, desc, XType::F32, ids);
        run_case(&gpu, &case, &format!("{format} T2 E8/2 k28672"), Paths::Every);
    }
}

/// The call captured in a CUDA graph and replayed gives every element as a direct call does,
/// on every path and config: the direct path's second launch is a programmatic dependent of
/// the first on sm_90 builds, which a capture must keep as a graph edge.
#[test]
#[ignore = "needs a CUDA GPU"]
fn calls_can_be_captured_in_a_cuda_graph() {
    use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let gpu = gpu();
    // The handles' default stream is the legacy one, which cannot be captured.
    let stream = gpu.stream.context().new_stream().unwrap();
    let s = &stream;
    let mut rng = rng("moe graph");
    let desc = MulMatId::new(GgufFormat::Q4K, 32, 67, k_of(GgufFormat::Q4K, 5), 3, 4);
    let ids = random_ids(&mut rng, 32, 4, 3);
    let case = make_case(&mut rng, desc, XType::F16, ids);
    // Buffers used in a graph are untracked (`UntrackedAllocations` says why).
    // SAFETY: these buffers are only ever used on `s`, in order.
    let untracked = unsafe { UntrackedAllocations::begin(s) };
    let inputs = DeviceInputs::new(s, &case);
    let poison = vec![f32::from_bits(POISON); case.expected.len()];
    let mut y = upload(s, &poison);
    let mut workspace = s.alloc_zeros::<u8>(case.desc.workspace_bytes().unwrap()).unwrap();
    drop(untracked);
    for path in MoePath::ALL {
        let desc = case.desc.clone().force_path(path);
        for h in &gpu.handles {
            // A module cannot be loaded while the stream is capturing.
            h.preload().unwrap();
            let label = format!("graph q4_K T3 E32/4 {} ({})", h.artifact(KernelFamily::Moe), path.name());
            s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
            inputs.run(h, s, &desc, &mut y, &mut workspace).unwrap();
            let graph = s.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("the capture recorded the launches");
            for replay in 0..2 {
                s.memcpy_htod(&poison, &mut y).unwrap();
                graph.launch().unwrap();
                h.moe_routing_error(s, &desc, &inputs.ids, &workspace).unwrap();
                let worst = check_output(&case, &desc, &s.clone_dtoh(&y).unwrap(), &format!("{label} replay {replay}"));
                eprintln!("{label} replay {replay}: ok (worst error {worst:.3} of the bound)");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_tokens_and_bad_buffers_launch_nothing() {
    let gpu = gpu();
    let s = &gpu.stream;
    let h = &gpu.handles[0];
    let desc = MulMatId::new(GgufFormat::Q8_0, 8, 16, 64, 0, 2);
    let w = s.alloc_zeros::<u8>(desc.buffer_lengths().unwrap().weight_bytes).unwrap();
    let x = s.alloc_zeros::<f32>(1).unwrap();
    let ids = s.alloc_zeros::<i32>(1).unwrap();
    let mut y = s.alloc_zeros::<f32>(1).unwrap();
    let mut ws = s.alloc_zeros::<u8>(desc.workspace_bytes().unwrap()).unwrap();
    // Zero tokens: x, ids and y must be empty.
    let err = h.mul_mat_id(s, &desc, &w, &x.slice(0..0), &ids.slice(0..0), &mut y, &mut ws).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "y", .. }), "{err}");
    h.mul_mat_id_checked(s, &desc, &w, &x.slice(0..0), &ids.slice(0..0), &mut y.slice_mut(0..0), &mut ws).unwrap();
    // A workspace one byte short.
    let desc = MulMatId::new(GgufFormat::Q8_0, 8, 16, 64, 3, 2);
    let x = s.alloc_zeros::<f32>(3 * 64).unwrap();
    let ids = upload(s, &[0i32, 1, 2, 3, 4, 5]);
    let mut y = s.alloc_zeros::<f32>(3 * 2 * 16).unwrap();
    let need = desc.workspace_bytes().unwrap();
    let mut ws = s.alloc_zeros::<u8>(need).unwrap();
    let err = h.mul_mat_id(s, &desc, &w, &x, &ids, &mut y, &mut ws.slice_mut(0..need - 1)).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { name: "workspace", .. }), "{err}");
    // Weights that do not start on a block's alignment.
    let w2 = s.alloc_zeros::<u8>(w.len() + 1).unwrap();
    let err = h.mul_mat_id(s, &desc, &w2.slice(1..), &x, &ids, &mut y, &mut ws).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "weights", .. }), "{err}");
    h.mul_mat_id_checked(s, &desc, &w, &x, &ids, &mut y, &mut ws).unwrap();
}
