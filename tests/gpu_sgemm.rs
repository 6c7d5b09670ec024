//! SGEMM on a real GPU, with every architecture's config the device can run, through every
//! artifact that can carry it: on an sm_90 device the PTX of sm_70 to sm_90 (JIT-compiled by
//! the driver), the sm_90 cubin, and the sm_100 and sm_120 rows as their sm_90-target builds
//! (`config-probes`), each as a cubin and as PTX. Each case draws fresh random inputs, poisons C (NaN when beta = 0,
//! random values otherwise, sentinels in every gap), and compares against an f64 reference.
//!
//! These tests need a CUDA GPU and are `#[ignore]`d otherwise: run them with
//! `cargo test -p cukernels-tests --test gpu_sgemm -- --ignored` (or `scripts/device-run.sh`).
//! `CUKERNELS_TEST_QUICK=1` keeps only small shapes (for compute-sanitizer runs).

use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cukernels::cudarc::driver::{CudaContext, CudaStream, DevicePtr};
use cukernels::{
    SgemmWorkspace, SplitWorkspaceLayout,
    artifacts, device_context, k_slice, ArtifactKind, Cukernels, KernelFamily, SgemmBuffers, Error, Layout, Sgemm, SgemmChoice, SgemmVariant, Transpose, MAX_K_SPLITS,
};
use cukernels_tests::{buffer_len, random_vec, rng, Expected, UntrackedAllocations};
use rand::rngs::StdRng;
use rand::Rng;
use std::sync::Arc;

struct Gpu {
    stream: Arc<CudaStream>,
    /// One handle per (target, config, kind) this device can run.
    handles: Vec<Cukernels>,
}

fn gpu() -> Gpu {
    let ctx: Arc<CudaContext> = device_context(0).expect("these tests need a CUDA GPU");
    let (major, minor) = ctx.compute_capability().unwrap();
    let device = (major * 10 + minor) as u32;
    let handles: Vec<Cukernels> = artifacts::embedded()
        .iter()
        .filter(|a| a.family == KernelFamily::Sgemm && a.runs_on(major as u32, minor as u32))
        .map(|a| Cukernels::with_artifact(&ctx, a.target, a.config, a.kind).unwrap())
        .collect();
    let configs: Vec<String> = handles.iter().map(|h| h.artifact(KernelFamily::Sgemm).to_string()).collect();
    eprintln!("GPU sm_{device}: testing configs {configs:?}");
    assert!(handles.len() >= 2, "expected several configs to test, got {configs:?}");
    // Where a cubin of this build runs here, both load paths are tested: cubin and PTX.
    let kinds = |kind| handles.iter().filter(|h| h.artifact(KernelFamily::Sgemm).kind == kind).count();
    let cubin_runs = artifacts::embedded().iter().any(|a| a.kind == ArtifactKind::Cubin && a.runs_on(major as u32, minor as u32));
    assert!(kinds(ArtifactKind::Ptx) >= 1 && (!cubin_runs || kinds(ArtifactKind::Cubin) >= 1), "{configs:?}");
    Gpu { stream: ctx.default_stream(), handles }
}

fn quick() -> bool {
    std::env::var("CUKERNELS_TEST_QUICK").is_ok_and(|v| v == "1")
}

/// Host-side inputs of one case; `*_off` shift each buffer's start by that many floats (to make
/// pointers unaligned), `c` is C's initial content (poison included).
struct Inputs {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    a_off: usize,
    b_off: usize,
    c_off: usize,
}

/// Builds inputs for `g`: random A and B, C random (beta ≠ 0) or NaN (beta = 0), and every
/// element of the C buffer outside the C matrices set to a sentinel that must survive.
fn inputs(g: &Sgemm, rng: &mut StdRng, offsets: (usize, usize, usize)) -> Inputs {
    let (ar, ac) = g.stored_a();
    let (br, bc) = g.stored_b();
    let a = random_vec(rng, buffer_len(g, ar, ac, g.lda, g.stride_a, 3));
    let b = random_vec(rng, buffer_len(g, br, bc, g.ldb, g.stride_b, 3));
    let c_len = buffer_len(g, g.m, g.n, g.ldc, g.stride_c, 3);
    let mut c = vec![-12345.0f32; c_len];
    for bi in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let idx = cukernels_tests::c_index(g, bi, i, j);
                c[idx] = if g.beta == 0.0 { f32::NAN } else { rng.random_range(-1.0..1.0) };
            }
        }
    }
    Inputs { a, b, c, a_off: offsets.0, b_off: offsets.1, c_off: offsets.2 }
}

fn expected(g: &Sgemm, x: &Inputs, rng: &mut StdRng) -> Expected {
    let work = g.m as f64 * g.n as f64 * g.k as f64 * g.batch as f64;
    if work <= 4e8 {
        Expected::full(g, &x.a, &x.b, &x.c)
    } else {
        Expected::sampled(g, &x.a, &x.b, &x.c, 3000, rng)
    }
}

/// Whether handle `h`'s config has kernel `choice` (k splits over a cluster need clusters).
fn supports(h: &Cukernels, choice: Option<SgemmChoice>) -> bool {
    choice.is_none_or(|c| {
        let tile = || h.sgemm_config().tile(c.variant);
        c.k_splits == 1 || if c.uses_workspace() { tile().splits_k() } else { tile().can_split_k(&h.sgemm_config().arch.limits()) }
    })
}

/// The turned-around tile runs (`skinny/t`): unsplit, split through the workspace and over a
/// cluster (where the config has clusters), on whatever canonical shape the case has (turning
/// a problem with more columns than rows is slow, never wrong).
fn turned_choices() -> [Option<SgemmChoice>; 3] {
    [SgemmVariant::Skinny.into(), SgemmChoice::workspace_split(SgemmVariant::Skinny, 3), SgemmChoice::cluster_split(SgemmVariant::Skinny, 2)]
        .map(|c: SgemmChoice| Some(c.turn()))
}

/// Whether the arrival counters of a k-split workspace are all back at zero (as every launch
/// must leave them for the next).
fn counters_are_zero(s: &std::sync::Arc<CudaStream>, w: &SgemmWorkspace) -> bool {
    let layout = SplitWorkspaceLayout::of(w.bytes());
    let bytes = s.clone_dtoh(w.buffer()).unwrap();
    bytes[..layout.counters * 4].iter().all(|&b| b == 0)
}

/// Runs `g` with every handle and each of `variants` (None = the dispatcher) that the handle's
/// config has, and checks each result. Returns the failures.
fn run(gpu: &Gpu, g: &Sgemm, x: &Inputs, want: &Expected, variants: &[Option<SgemmChoice>]) -> Vec<String> {
    let s = &gpu.stream;
    let pad = |v: &[f32], off: usize| {
        let mut p = vec![7.0f32; off];
        p.extend_from_slice(v);
        p
    };
    let a_dev = s.clone_htod(&pad(&x.a, x.a_off)).unwrap();
    let b_dev = s.clone_htod(&pad(&x.b, x.b_off)).unwrap();
    let c_init = pad(&x.c, x.c_off);
    let mut failures = Vec::new();
    for h in &gpu.handles {
        for &v in variants.iter().filter(|&&v| supports(h, v)) {
            let mut c_dev = s.clone_htod(&c_init).unwrap();
            let a_view = a_dev.slice(x.a_off..);
            let b_view = b_dev.slice(x.b_off..);
            let mut c_view = c_dev.slice_mut(x.c_off..);
            let label = format!("{g:?} config {}@{} variant {v:?} offsets ({}, {}, {})", h.config(), h.target(), x.a_off, x.b_off, x.c_off);
            // A forced split through a workspace runs in a workspace of exactly the size the
            // handle names for it (the dispatcher's choices in the handle's own).
            let needed = v.map_or(0, |c| h.sgemm_workspace_bytes(g, Some(c)));
            let mut workspace = (needed > 0).then(|| h.sgemm_workspace(s, needed).unwrap());
            let launched = match workspace.as_mut() {
                Some(w) => h.sgemm_in(s, g, &a_view, &b_view, &mut c_view, w, v),
                None => h.sgemm_with(s, g, &a_view, &b_view, &mut c_view, v),
            };
            if let Err(e) = launched {
                failures.push(format!("{label}: launch error {e}"));
                continue;
            }
            if let Err(e) = s.synchronize() {
                panic!("{label}: the kernel failed on the device: {e}");
            }
            if workspace.as_ref().is_some_and(|w| !counters_are_zero(s, w)) {
                failures.push(format!("{label}: the workspace's counters are not back at zero"));
            }
            let out = s.clone_dtoh(&c_dev).unwrap();
            if let Err(e) = want.check(g, &x.c, &out[x.c_off..]) {
                failures.push(format!("{label}:\n{e}"));
            }
        }
    }
    failures
}

/// One case: fresh inputs for `g` (buffers shifted by `offsets` floats), the reference, and a
/// run with every handle and each of `variants`.
fn case(gpu: &Gpu, g: &Sgemm, rng: &mut StdRng, offsets: (usize, usize, usize), variants: &[Option<SgemmChoice>]) -> Vec<String> {
    let x = inputs(g, rng, offsets);
    let want = expected(g, &x, rng);
    run(gpu, g, &x, &want, variants)
}

fn assert_all(failures: Vec<String>) {
    if !failures.is_empty() {
        panic!("{} failing runs:\n{}", failures.len(), failures.join("\n\n"));
    }
}

const ODD_SIZES: [usize; 7] = [1, 7, 31, 33, 127, 1000, 4095];
const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];
const TRANSPOSES: [(Transpose, Transpose); 4] =
    [(Transpose::No, Transpose::No), (Transpose::No, Transpose::Yes), (Transpose::Yes, Transpose::No), (Transpose::Yes, Transpose::Yes)];

/// `m × n × k` in every layout and transpose combination (tight leading dimensions), in a
/// fixed order.
fn every_layout_and_transpose(m: usize, n: usize, k: usize) -> impl Iterator<Item = Sgemm> {
    LAYOUTS.into_iter().flat_map(move |layout| TRANSPOSES.into_iter().map(move |(ta, tb)| Sgemm::new(m, n, k).layout(layout).transpose(ta, tb)))
}

/// [`case`] for `m × n × k` with `batch` batches and `(alpha, beta)`, in every layout and
/// transpose combination ([`every_layout_and_transpose`]), in that order.
fn every_layout_case(
    gpu: &Gpu,
    rng: &mut StdRng,
    (m, n, k, batch): (usize, usize, usize, usize),
    (alpha, beta): (f32, f32),
    offsets: (usize, usize, usize),
    variants: &[Option<SgemmChoice>],
) -> Vec<String> {
    every_layout_and_transpose(m, n, k).flat_map(|g| case(gpu, &g.batched(batch).alpha_beta(alpha, beta), rng, offsets, variants)).collect()
}

/// A stored `rows × cols` matrix's extent along its contiguous direction (the least leading
/// dimension it can have) in `layout`.
fn minor(layout: Layout, rows: usize, cols: usize) -> usize {
    if layout == Layout::RowMajor { cols } else { rows }
}

/// A stored `rows × cols` matrix's extent across its contiguous direction in `layout`: how
/// many leading dimensions one matrix spans.
fn major(layout: Layout, rows: usize, cols: usize) -> usize {
    if layout == Layout::RowMajor { rows } else { cols }
}

/// Shapes that put each size of `ODD_SIZES` in each of m, n and k (the other two odd and
/// mid-sized), plus all-large ones.
fn odd_shapes() -> Vec<(usize, usize, usize)> {
    let sizes: &[usize] = if quick() { &[1, 7, 33, 127] } else { &ODD_SIZES };
    let mut shapes = Vec::new();
    for (i, &v) in sizes.iter().enumerate() {
        let (p, q) = if i % 2 == 0 { (33, 127) } else { (127, 31) };
        shapes.push((v, p, q));
        shapes.push((p, v, q));
        shapes.push((p, q, v));
    }
    if !quick() {
        shapes.extend([(1000, 1000, 1000), (4095, 4095, 4095), (257, 4095, 129)]);
    }
    shapes
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn odd_shapes_every_layout_and_transpose_every_config() {
    let gpu = gpu();
    let mut rng = rng("odd_shapes");
    let mut failures = Vec::new();
    for (m, n, k) in odd_shapes() {
        failures.extend(every_layout_case(&gpu, &mut rng, (m, n, k, 1), (1.25, -0.5), (0, 0, 0), &[None]));
    }
    assert_all(failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_variant_on_edge_shapes() {
    let gpu = gpu();
    let mut rng = rng("every_variant");
    let variants: Vec<Option<SgemmChoice>> = SgemmVariant::ALL.iter().map(|&v| Some(v.into())).chain(turned_choices()).collect();
    let mut failures = Vec::new();
    let shapes: &[(usize, usize, usize, usize)] = if quick() {
        &[(33, 65, 17, 2), (5, 130, 40, 1)]
    } else {
        &[(33, 65, 17, 2), (5, 130, 40, 1), (129, 257, 300, 3), (300, 31, 1000, 2), (16, 1000, 513, 1)]
    };
    for &shape in shapes {
        failures.extend(every_layout_case(&gpu, &mut rng, shape, (-0.75, 0.25), (0, 0, 0), &variants));
    }
    // beta = 0 (C poisoned with NaN, so a read of C shows) where C's rows are not 16-byte
    // aligned (n = 65): the tiles' staged epilogue, which reads C only where beta ≠ 0.
    failures.extend(every_layout_case(&gpu, &mut rng, (33, 65, 17, 2), (1.5, 0.0), (0, 0, 0), &variants));
    assert_all(failures);
}

/// Shapes whose leading dimensions are all multiples of 4 (16-byte aligned rows), with tiles
/// wholly inside C and k-steps wholly inside k: the kernels' fast loop (no bounds tests,
/// vector copies), beside edge tiles (moved inside or not) and a partial last k-step, for
/// every tile variant.
#[test]
#[ignore = "needs a CUDA GPU"]
fn aligned_interior_tiles_every_variant() {
    let gpu = gpu();
    let mut rng = rng("aligned_interior");
    let variants: Vec<Option<SgemmChoice>> = std::iter::once(None).chain(SgemmVariant::TILED.iter().map(|&v| Some(v.into()))).collect();
    let shapes: &[(usize, usize, usize, usize)] = if quick() { &[(136, 264, 72, 1)] } else { &[(136, 264, 72, 1), (264, 520, 264, 2), (520, 264, 1000, 1)] };
    let mut failures = Vec::new();
    for &shape in shapes {
        failures.extend(every_layout_case(&gpu, &mut rng, shape, (0.5, 1.5), (0, 0, 0), &variants));
    }
    // m = n = 130 with every leading dimension padded to a multiple of 4 (16-byte aligned
    // rows): the last 64-wide tile moves back by 66, not a multiple of 4, so it moves only
    // where its operand is copied a float at a time, and then stores C without 16-byte
    // vectors; k splits too (on configs with clusters).
    let mut choices = variants.clone();
    choices.extend(turned_choices());
    choices.extend([SgemmVariant::Medium, SgemmVariant::Skinny].map(|variant| Some(SgemmChoice::cluster_split(variant, 3))));
    choices.extend([SgemmVariant::Medium, SgemmVariant::Skinny].map(|variant| Some(SgemmChoice::workspace_split(variant, 3))));
    for g in every_layout_and_transpose(130, 130, 200) {
        let layout = g.layout;
        let (ar, ac) = g.stored_a();
        let (br, bc) = g.stored_b();
        let padded = |r: usize, c: usize| minor(layout, r, c).next_multiple_of(4);
        let (lda, ldb, ldc) = (padded(ar, ac), padded(br, bc), padded(130, 130));
        let strides = (major(layout, ar, ac) * lda, major(layout, br, bc) * ldb, major(layout, 130, 130) * ldc);
        let g = g.batched(2).leading_dims(lda, ldb, ldc).strides(strides.0, strides.1, strides.2).alpha_beta(0.5, 1.5);
        failures.extend(case(&gpu, &g, &mut rng, (0, 0, 0), &choices));
    }
    assert_all(failures);
}

/// The k-split tests' cases: each `(m, n, k, batch, offsets)` in every layout and transpose,
/// with beta ≠ 0 and with beta = 0 (NaN in C), run with each of `choices`.
fn split_cases(gpu: &Gpu, rng: &mut StdRng, shapes: &[(usize, usize, usize, usize, (usize, usize, usize))], choices: &[Option<SgemmChoice>]) -> Vec<String> {
    let mut failures = Vec::new();
    for &(m, n, k, batch, offsets) in shapes {
        for g in every_layout_and_transpose(m, n, k) {
            for (alpha, beta) in [(1.25, -0.5), (0.75, 0.0)] {
                failures.extend(case(gpu, &g.batched(batch).alpha_beta(alpha, beta), rng, offsets, choices));
            }
        }
    }
    failures
}

/// K splits over 2, 3, 5 and `MAX_K_SPLITS` blocks of a cluster, for every variant that splits, on
/// the configs with clusters: k not a multiple of any k-step, slices that end inside a k-step,
/// splits with more blocks than k-steps (empty slices), edge tiles, batches, beta ≠ 0 and
/// beta = 0 with NaN in C, unaligned operands, every layout and transpose. The device must
/// have at least one such config (sm_90 and newer do).
#[test]
#[ignore = "needs a CUDA GPU"]
fn k_split_every_variant_and_split() {
    let gpu = gpu();
    let mut rng = rng("k_split");
    let splitting: Vec<&Cukernels> = gpu.handles.iter().filter(|h| h.sgemm_config().arch.limits().has_clusters).collect();
    assert!(!splitting.is_empty(), "no config with thread-block clusters to test k splits on");
    let splits: Vec<u32> = if quick() { vec![2, 3, MAX_K_SPLITS] } else { vec![2, 3, 5, MAX_K_SPLITS] };
    let choices: Vec<Option<SgemmChoice>> = SgemmVariant::TILED
        .iter()
        .flat_map(|&variant| splits.iter().map(move |&k_splits| Some(SgemmChoice::cluster_split(variant, k_splits))))
        .collect();
    let shapes: &[(usize, usize, usize, usize, (usize, usize, usize))] = if quick() {
        &[(70, 45, 99, 2, (0, 0, 0)), (33, 130, 20, 1, (1, 2, 3))]
    } else {
        &[(70, 45, 99, 2, (0, 0, 0)), (33, 130, 20, 1, (1, 2, 3)), (257, 300, 1000, 1, (0, 0, 0)), (136, 264, 520, 2, (0, 0, 0))]
    };
    assert_all(split_cases(&gpu, &mut rng, shapes, &choices));
}

/// K splits through a workspace, on every config (every architecture has them), for every
/// variant that splits: 2 to 64 blocks, more blocks than k-steps (empty slices), k not a
/// multiple of any k-step, edge tiles, batches, beta ≠ 0 and beta = 0 with NaN in C,
/// unaligned operands, every layout and transpose; each in a workspace of exactly the size
/// the handle names, whose counters must be back at zero afterwards.
#[test]
#[ignore = "needs a CUDA GPU"]
fn workspace_k_split_every_variant_and_split() {
    let gpu = gpu();
    let mut rng = rng("workspace_split");
    let splits: &[u32] = if quick() { &[2, 7, 64] } else { &[2, 3, 7, 33, 64] };
    let choices: Vec<Option<SgemmChoice>> = SgemmVariant::TILED
        .iter()
        .flat_map(|&variant| splits.iter().map(move |&k_splits| Some(SgemmChoice::workspace_split(variant, k_splits))))
        .collect();
    let shapes: &[(usize, usize, usize, usize, (usize, usize, usize))] = if quick() {
        &[(70, 45, 99, 2, (0, 0, 0)), (33, 130, 2000, 1, (1, 2, 3))]
    } else {
        &[(70, 45, 99, 2, (0, 0, 0)), (33, 130, 2000, 1, (1, 2, 3)), (17, 9, 20_000, 3, (0, 0, 0)), (136, 264, 5200, 1, (0, 0, 0))]
    };
    assert_all(split_cases(&gpu, &mut rng, shapes, &choices));
}

/// One workspace serves launches of different plans (more tiles and fewer splits, then fewer
/// tiles and more) on two streams, with no synchronization between them but cudarc's: every
/// result is right and the counters end at zero. The dispatcher splits a long k through the
/// handle's own workspace on the first stream that does so; on another stream it plans
/// without it, and both are right.
#[test]
#[ignore = "needs a CUDA GPU"]
fn workspace_reused_across_plans_and_streams() {
    let gpu = gpu();
    let mut rng = rng("workspace_reuse");
    let ctx = device_context(0).unwrap();
    let streams = [ctx.new_stream().unwrap(), ctx.new_stream().unwrap()];
    for h in &gpu.handles {
        let plans = [
            (Sgemm::new(200, 150, 3000).alpha_beta(1.0, 0.5), SgemmChoice::workspace_split(SgemmVariant::Medium, 4)),
            (Sgemm::new(40, 70, 9000), SgemmChoice::workspace_split(SgemmVariant::Skinny, 40)),
        ];
        let bytes = plans.iter().map(|(g, c)| h.sgemm_workspace_bytes(g, Some(*c))).max().unwrap();
        let mut workspace = h.sgemm_workspace(&streams[0], bytes).unwrap();
        let mut outputs = Vec::new();
        for round in 0..6 {
            let (g, choice) = &plans[round % 2];
            let s = &streams[round / 2 % 2];
            let x = inputs(g, &mut rng, (0, 0, 0));
            let (a, b) = (s.clone_htod(&x.a).unwrap(), s.clone_htod(&x.b).unwrap());
            let mut c = s.clone_htod(&x.c).unwrap();
            h.sgemm_in(s, g, &a, &b, &mut c, &mut workspace, Some(*choice)).unwrap();
            outputs.push((*g, x, c));
        }
        for (i, (g, x, c)) in outputs.iter().enumerate() {
            let out = streams[i / 2 % 2].clone_dtoh(c).unwrap();
            if let Err(e) = expected(g, x, &mut rng).check(g, &x.c, &out) {
                panic!("config {}: round {i} ({g:?}):\n{e}", h.config());
            }
        }
        for s in &streams {
            s.synchronize().unwrap();
        }
        assert!(counters_are_zero(&streams[0], &workspace), "config {}", h.config());
    }
    // The handle's own workspace: a fresh handle, a long k that the dispatcher splits through
    // it, on two streams in turn.
    let h = Cukernels::new(&ctx).unwrap();
    let g = Sgemm::new(48, 40, 60_000).alpha_beta(1.0, 1.0);
    assert!(h.sgemm_workspace_bytes(&g, None) > 0, "the dispatcher should split 48 × 40 × 60000 through a workspace");
    assert!(h.own_sgemm_workspace_bytes().unwrap() >= h.sgemm_workspace_bytes(&g, None));
    for s in streams.iter().chain(&streams) {
        let x = inputs(&g, &mut rng, (0, 0, 0));
        let (a, b) = (s.clone_htod(&x.a).unwrap(), s.clone_htod(&x.b).unwrap());
        let mut c = s.clone_htod(&x.c).unwrap();
        h.sgemm(s, &g, &a, &b, &mut c).unwrap();
        let out = s.clone_dtoh(&c).unwrap();
        if let Err(e) = expected(&g, &x, &mut rng).check(&g, &x.c, &out) {
            panic!("own workspace, stream {:?}:\n{e}", s.cu_stream());
        }
    }
}

/// The handle's own workspace under threads that race for it: four threads share one fresh
/// handle, each with its own stream, and all queue long-k products that the dispatcher would
/// split through the workspace, with no synchronization between them until the end. Exactly
/// one stream may win it (the others plan without it), and every result must be right.
#[test]
#[ignore = "needs a CUDA GPU"]
fn own_workspace_raced_by_threads_on_their_own_streams() {
    let ctx = device_context(0).unwrap();
    let h = Cukernels::new(&ctx).unwrap();
    let g = Sgemm::new(48, 40, 60_000).alpha_beta(1.0, 1.0);
    assert!(h.sgemm_workspace_bytes(&g, None) > 0, "the dispatcher should split 48 × 40 × 60000 through a workspace");
    const THREADS: usize = 4;
    const ROUNDS: usize = 6;
    let start = std::sync::Barrier::new(THREADS);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (h, ctx, start) = (&h, &ctx, &start);
                scope.spawn(move || {
                    let mut rng = rng(&format!("own_workspace_race_{t}"));
                    let s = ctx.new_stream().unwrap();
                    let cases: Vec<_> = (0..ROUNDS).map(|_| inputs(&g, &mut rng, (0, 0, 0))).collect();
                    let mut queued = Vec::new();
                    start.wait();
                    for x in &cases {
                        let (a, b) = (s.clone_htod(&x.a).unwrap(), s.clone_htod(&x.b).unwrap());
                        let mut c = s.clone_htod(&x.c).unwrap();
                        h.sgemm(&s, &g, &a, &b, &mut c).unwrap();
                        queued.push(c);
                    }
                    for (round, (x, c)) in cases.iter().zip(&queued).enumerate() {
                        let out = s.clone_dtoh(c).unwrap();
                        if let Err(e) = expected(&g, x, &mut rng).check(&g, &x.c, &out) {
                            panic!("thread {t}, round {round}:\n{e}");
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a racing thread failed");
        }
    });
}

/// A k-split result does not depend on timing: the cluster adds the partial tiles in a fixed
/// order, so two runs give the same bits.
#[test]
#[ignore = "needs a CUDA GPU"]
fn k_split_results_are_bitwise_reproducible() {
    let gpu = gpu();
    let s = &gpu.stream;
    let mut rng = rng("k_split_bits");
    let g = Sgemm::new(200, 300, 2000).batched(2);
    let x = inputs(&g, &mut rng, (0, 0, 0));
    let a = s.clone_htod(&x.a).unwrap();
    let b = s.clone_htod(&x.b).unwrap();
    let mut tested = 0;
    for h in gpu.handles.iter().filter(|h| h.sgemm_config().arch.limits().has_clusters) {
        for k_splits in [3, MAX_K_SPLITS] {
            let choice = Some(SgemmChoice::cluster_split(SgemmVariant::Medium, k_splits));
            let mut runs = Vec::new();
            for _ in 0..3 {
                let mut c = s.clone_htod(&x.c).unwrap();
                h.sgemm_with(s, &g, &a, &b, &mut c, choice).unwrap();
                runs.push(s.clone_dtoh(&c).unwrap().iter().map(|v| v.to_bits()).collect::<Vec<u32>>());
            }
            assert!(runs.windows(2).all(|w| w[0] == w[1]), "config {}: medium/k{k_splits} differs between runs", h.config());
            tested += 1;
        }
    }
    assert!(tested > 0, "no config with thread-block clusters");
}

/// The products of one element of C, `A(i, p)·B(p, j)` for p in `ks`, added by a chain of
/// f32 FMAs from +0 in that order: what one thread (or lane) of every kernel computes for its
/// slice of k.
fn fma_chain(a: &[f32], b: &[f32], (i, j): (usize, usize), (k, n): (usize, usize), ks: impl Iterator<Item = usize>) -> f32 {
    ks.fold(0.0f32, |acc, p| a[i * k + p].mul_add(b[p * n + j], acc))
}

/// Splits of k give the bits of their order, computed on the CPU in that order (not only the
/// same bits twice): a k split over a cluster adds the blocks' partial sums (each a chain of
/// FMAs over its `k_slice`) in rank order; `tiny`'s team of lanes adds the lanes' chains (lane
/// t: k = t, t + lanes, ...) by a butterfly. Row-major, alpha = 1, beta = 0, so the stored
/// value is the sum itself.
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_results_equal_the_cpu_in_the_kernels_order() {
    let gpu = gpu();
    let s = &gpu.stream;
    let mut rng = rng("split_order");
    let (m, n, k) = (37, 45, 2001);
    let g = Sgemm::new(m, n, k);
    let x = inputs(&g, &mut rng, (0, 0, 0));
    let a = s.clone_htod(&x.a).unwrap();
    let b = s.clone_htod(&x.b).unwrap();
    // (Addresses only for the plan's checks: its team size depends on sizes, not addresses.)
    let buffers = SgemmBuffers { a_addr: 1 << 20, a_len: x.a.len(), b_addr: 1 << 30, b_len: x.b.len(), c_addr: 1 << 40, c_len: x.c.len(), ..Default::default() };
    let expected = |sum_of: &dyn Fn(usize, usize) -> f32| -> Vec<u32> { (0..m * n).map(|e| sum_of(e / n, e % n).to_bits()).collect() };
    let mut tested = 0;
    for h in &gpu.handles {
        // Splits through the workspace on every config (the same order, so the same bits as
        // over a cluster), over a cluster where the config has them.
        let mut choices = vec![SgemmChoice::from(SgemmVariant::Tiny)];
        choices.extend([(SgemmVariant::Medium, 3), (SgemmVariant::Medium, 37), (SgemmVariant::Skinny, 5)].map(|(variant, k_splits)| SgemmChoice::workspace_split(variant, k_splits)));
        if h.sgemm_config().arch.limits().has_clusters {
            choices.extend([(SgemmVariant::Medium, 3), (SgemmVariant::Medium, MAX_K_SPLITS), (SgemmVariant::Skinny, 5)].map(|(variant, k_splits)| SgemmChoice::cluster_split(variant, k_splits)));
        }
        for choice in choices {
            let want = if choice.variant == SgemmVariant::Tiny {
                let plan = g.plan(&buffers, h.sgemm_config(), h.sm_count(), Some(choice)).unwrap();
                let lanes = plan.tiny_team_lanes() as usize;
                assert!(lanes > 1, "k = {k} over {} pieces should split over a team", (m / 4) * (n / 4));
                expected(&|i, j| {
                    let mut v: Vec<f32> = (0..lanes).map(|t| fma_chain(&x.a, &x.b, (i, j), (k, n), (t..k).step_by(lanes))).collect();
                    let mut level = lanes / 2;
                    while level > 0 {
                        v = (0..lanes).map(|t| v[t] + v[t ^ level]).collect();
                        level /= 2;
                    }
                    v[0]
                })
            } else {
                let bk = h.sgemm_config().tile(choice.variant).bk;
                expected(&|i, j| {
                    (0..choice.k_splits).fold(0.0f32, |sum, split| {
                        let (first, len) = k_slice(k as u32, bk, split, choice.k_splits);
                        sum + fma_chain(&x.a, &x.b, (i, j), (k, n), first as usize..(first + len) as usize)
                    })
                })
            };
            let mut c = s.clone_htod(&x.c).unwrap();
            let mut workspace = h.sgemm_workspace(s, h.sgemm_workspace_bytes(&g, Some(choice))).unwrap();
            h.sgemm_in(s, &g, &a, &b, &mut c, &mut workspace, Some(choice)).unwrap();
            let got: Vec<u32> = s.clone_dtoh(&c).unwrap().iter().map(|v| v.to_bits()).collect();
            let differ = got.iter().zip(&want).filter(|(x, y)| x != y).count();
            assert_eq!(differ, 0, "config {}: {choice}: {differ} of {} elements differ from the CPU's sum in the kernel's order", h.config(), m * n);
            tested += 1;
        }
    }
    assert!(tested > 4 * gpu.handles.len(), "no config with thread-block clusters");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn beta_zero_never_reads_nan_in_c_and_alpha_beta_scale() {
    let gpu = gpu();
    let mut rng = rng("alpha_beta");
    let mut failures = Vec::new();
    for (alpha, beta) in [(1.0, 0.0), (2.5, 0.0), (-1.5, 0.75), (0.3, 1.0), (0.0, 0.5), (0.0, 0.0), (1.0, -2.0)] {
        for layout in LAYOUTS {
            let g = Sgemm::new(67, 45, 93).layout(layout).batched(2).alpha_beta(alpha, beta);
            let mut x = inputs(&g, &mut rng, (0, 0, 0));
            if alpha == 0.0 {
                // alpha = 0: A and B must not be read (cuBLAS semantics): NaN there must not leak.
                x.a.iter_mut().for_each(|v| *v = f32::NAN);
                x.b.iter_mut().for_each(|v| *v = f32::NAN);
            }
            let want = expected(&g, &x, &mut rng);
            failures.extend(run(&gpu, &g, &x, &want, &[None, Some(SgemmVariant::Small.into())]));
        }
    }
    assert_all(failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn k_zero_and_empty_problems() {
    let gpu = gpu();
    let mut rng = rng("k_zero");
    let mut failures = Vec::new();
    for (m, n, k, beta) in [(37, 29, 0, 0.5), (37, 29, 0, 0.0), (0, 29, 10, 1.0), (37, 0, 10, 1.0)] {
        let g = Sgemm::new(m, n, k).alpha_beta(1.0, beta).batched(3);
        failures.extend(case(&gpu, &g, &mut rng, (0, 0, 0), &[None]));
    }
    // batch = 0: nothing happens.
    let g = Sgemm::new(8, 8, 8).batched(0);
    failures.extend(case(&gpu, &g, &mut rng, (0, 0, 0), &[None]));
    assert_all(failures);
}

/// Launches on one stream that read what the launch before them wrote: on sm_90+ each is a
/// programmatic dependent of the one before, resident before that one ends, and must wait for
/// it on the GPU. A chain `x_{i+1} = W·x_i` on one stream, every `x_i` poisoned with NaN before
/// the chain starts; each step is then checked against `W` times the `x_i` the GPU produced,
/// so a step that read its input before the step before had written it (NaN, or part of a
/// product) fails. Shapes that take `gemv`, `tiny`, the tiles and k splits (the dispatcher's
/// choices), and the chain once more with every variant forced, on every config.
#[test]
#[ignore = "needs a CUDA GPU"]
fn chained_launches_read_what_the_launch_before_wrote() {
    const STEPS: usize = 6;
    let gpu = gpu();
    // A stream of its own, and the chain's buffers made without cudarc's event tracking: with
    // it, every launch would wait for an event recorded after the one before, and the launches
    // would never overlap (nor test the kernels' own wait).
    let s = &gpu.stream.context().new_stream().unwrap();
    let mut rng = rng("chained");
    let mut failures = Vec::new();
    let forced: Vec<Option<SgemmChoice>> = std::iter::once(None).chain(SgemmVariant::ALL.iter().map(|&v| Some(v.into()))).collect();
    for (m, n) in [(700, 1), (257, 9), (531, 300), (3000, 2), (96, 4000)] {
        let g = Sgemm::new(m, n, m);
        // Entries of W of size about 1/√m keep every x_i of the chain of order 1.
        let w: Vec<f32> = random_vec(&mut rng, m * m).iter().map(|v| v / (m as f32).sqrt()).collect();
        let x0 = random_vec(&mut rng, m * n);
        // SAFETY: the buffers made while `untracked` lives are used on `s` alone, in order.
        let untracked = unsafe { UntrackedAllocations::begin(s) };
        let w_dev = s.clone_htod(&w).unwrap();
        let poison = vec![f32::NAN; m * n];
        let choices: &[Option<SgemmChoice>] = if m == 531 { &forced } else { &[None] };
        for h in &gpu.handles {
            for &choice in choices.iter().filter(|&&c| supports(h, c)) {
                let label = format!("{m}x{n}x{m} chain, config {}@{}, {choice:?}", h.config(), h.target());
                let mut xs = vec![s.clone_htod(&x0).unwrap()];
                xs.extend((0..STEPS).map(|_| s.clone_htod(&poison).unwrap()));
                for i in 0..STEPS {
                    let (done, rest) = xs.split_at_mut(i + 1);
                    if let Err(e) = h.sgemm_with(s, &g, &w_dev, &done[i], &mut rest[0], choice) {
                        failures.push(format!("{label}: step {i}: launch error {e}"));
                    }
                }
                if let Err(e) = s.synchronize() {
                    panic!("{label}: a kernel failed on the device: {e}");
                }
                let host: Vec<Vec<f32>> = xs.iter().map(|x| s.clone_dtoh(x).unwrap()).collect();
                s.synchronize().unwrap();
                for i in 0..STEPS {
                    let want = Expected::full(&g, &w, &host[i], &poison);
                    if let Err(e) = want.check(&g, &poison, &host[i + 1]) {
                        failures.push(format!("{label}: step {}:\n{e}", i + 1));
                    }
                }
            }
        }
        s.synchronize().unwrap();
        drop(untracked);
    }
    assert_all(failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn broadcast_strides_and_padded_leading_dimensions() {
    let gpu = gpu();
    let mut rng = rng("strides");
    let mut failures = Vec::new();
    for base in every_layout_and_transpose(70, 53, 41) {
        let base = base.batched(4).alpha_beta(1.0, 0.5);
        let layout = base.layout;
        let (ar, ac) = base.stored_a();
        let (br, bc) = base.stored_b();
        let (lda, ldb, ldc) = (minor(layout, ar, ac) + 3, minor(layout, br, bc) + 5, minor(layout, 70, 53) + 2);
        let one_c = major(layout, 70, 53) * ldc;
        // A broadcast (stride 0), B broadcast, both, and gaps between C batches.
        for (sa, sb) in [(0, major(layout, br, bc) * ldb), (major(layout, ar, ac) * lda, 0), (0, 0)] {
            let g = base.leading_dims(lda, ldb, ldc).strides(sa, sb, one_c + 9);
            failures.extend(case(&gpu, &g, &mut rng, (0, 0, 0), &[None, Some(SgemmVariant::Medium.into())]));
        }
    }
    assert_all(failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn unaligned_pointers_and_leading_dimensions() {
    let gpu = gpu();
    let mut rng = rng("unaligned");
    let mut failures = Vec::new();
    for base in every_layout_and_transpose(131, 67, 75) {
        for offsets in [(1, 2, 3), (3, 0, 1), (0, 1, 0)] {
            let g = base.batched(2);
            let layout = g.layout;
            let (ar, ac) = g.stored_a();
            let (br, bc) = g.stored_b();
            let (lda, ldb, ldc) = (minor(layout, ar, ac) + 1, minor(layout, br, bc) + 2, minor(layout, 131, 67) + 1);
            let g = g
                .leading_dims(lda, ldb, ldc)
                .strides(major(layout, ar, ac) * lda + 1, major(layout, br, bc) * ldb + 3, major(layout, 131, 67) * ldc + 1);
            let turned = Some(SgemmChoice::from(SgemmVariant::Skinny).turn());
            failures.extend(case(&gpu, &g, &mut rng, offsets, &[None, Some(SgemmVariant::Large.into()), Some(SgemmVariant::Skinny.into()), turned]));
        }
    }
    assert_all(failures);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn batch_count_beyond_grid_limit() {
    let gpu = gpu();
    let mut rng = rng("big_batch");
    // More batches than a grid's z (65 535) holds: the tile kernels loop over the batch in
    // steps of the grid, `tiny` numbers its pieces over the whole batch. Every kind of kernel,
    // the k split included (where the config has clusters); the quick suite (racecheck's) too.
    let batch = if quick() { 65_600 } else { 70_000 };
    let g = Sgemm::new(3, 5, 7).batched(batch).alpha_beta(1.0, 1.0);
    let mut choices: Vec<Option<SgemmChoice>> =
        vec![None, Some(SgemmVariant::Huge.into()), Some(SgemmVariant::Tiny.into()), Some(SgemmChoice::workspace_split(SgemmVariant::Skinny, 2))];
    if !quick() {
        choices.extend([Some(SgemmVariant::Skinny.into()), Some(SgemmVariant::Gemv.into()), Some(SgemmChoice::cluster_split(SgemmVariant::Medium, 2))]);
    }
    assert_all(case(&gpu, &g, &mut rng, (0, 0, 0), &choices));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn invalid_arguments_are_errors_before_launch() {
    let gpu = gpu();
    let s = &gpu.stream;
    let h = &gpu.handles[0];
    let a = s.clone_htod(&vec![1.0f32; 100]).unwrap();
    let b = s.clone_htod(&vec![1.0f32; 100]).unwrap();
    let mut c = s.clone_htod(&vec![1.0f32; 100]).unwrap();
    let err = h.sgemm(s, &Sgemm::new(10, 10, 11), &a, &b, &mut c).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { name: "a", len: 100, required: 110 }), "{err}");
    let err = h.sgemm(s, &Sgemm::new(10, 10, 10).leading_dims(9, 10, 10), &a, &b, &mut c).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "lda", .. }), "{err}");
    let err = h.sgemm(s, &Sgemm::new(5, 5, 5).batched(2).strides(25, 25, 10), &a, &b, &mut c).unwrap_err();
    assert!(matches!(err, Error::Overlap(_)), "{err}");
    let bad_splits = [(SgemmVariant::Medium, 0), (SgemmVariant::Medium, MAX_K_SPLITS + 1), (SgemmVariant::Gemv, 2), (SgemmVariant::Tiny, 2)];
    for bad in bad_splits.map(|(variant, k_splits)| SgemmChoice::cluster_split(variant, k_splits)) {
        let err = h.sgemm_with(s, &Sgemm::new(5, 5, 4), &a, &b, &mut c, Some(bad)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { name: "k_splits", .. }), "{bad}: {err}");
    }
    // A config without clusters refuses a k split over a cluster; a workspace too small for
    // a split, or one that overlaps C, is refused too.
    let old = gpu.handles.iter().find(|h| !h.sgemm_config().arch.limits().has_clusters).expect("the sm_70..sm_89 configs load on every GPU these tests run on");
    let err = old.sgemm_with(s, &Sgemm::new(5, 5, 4), &a, &b, &mut c, Some(SgemmChoice::cluster_split(SgemmVariant::Medium, 2))).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "k_splits", .. }), "{err}");
    let split = SgemmChoice::workspace_split(SgemmVariant::Medium, 4);
    let mut small = old.sgemm_workspace(s, 4096).unwrap();
    let err = old.sgemm_in(s, &Sgemm::new(5, 5, 4), &a, &b, &mut c, &mut small, Some(split)).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { name: "workspace", .. }), "{err}");
    let needed = old.sgemm_workspace_bytes(&Sgemm::new(5, 5, 4), Some(split));
    // SAFETY: the addresses are the live buffers `a`, `b`, `c`; the call is refused before launch.
    let err = unsafe {
        let (a_addr, _a) = a.device_ptr(s);
        let (b_addr, _b) = b.device_ptr(s);
        let (c_addr, _c) = c.device_ptr(s);
        let buffers = SgemmBuffers { a_addr, a_len: 100, b_addr, b_len: 100, c_addr, c_len: 100, workspace_addr: c_addr, workspace_bytes: needed };
        old.sgemm_raw(s.cu_stream(), &Sgemm::new(5, 5, 4), &buffers, Some(split)).unwrap_err()
    };
    assert!(matches!(err, Error::Overlap(_)), "{err}");
    // C is untouched by every refused call.
    assert!(s.clone_dtoh(&c).unwrap().iter().all(|&v| v == 1.0));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn small_m_every_row_count() {
    let gpu = gpu();
    let mut rng = rng("small_m");
    let mut failures = Vec::new();
    let rows: Vec<usize> = if quick() { vec![1, 3, 8, 9] } else { (1..=17).collect() };
    let variants = [None, Some(SgemmVariant::Gemv.into()), Some(SgemmVariant::Skinny.into())];
    for m in rows {
        failures.extend(every_layout_case(&gpu, &mut rng, (m, 70, 301, 2), (0.5, -1.0), (0, 1, 0), &variants));
    }
    assert_all(failures);
}

/// `g` with every leading dimension padded to a multiple of 4 floats (16-byte aligned rows:
/// `gemv`'s 16-byte loads along k) and batches one padded matrix apart.
fn padded_to_16_bytes(g: Sgemm) -> Sgemm {
    let layout = g.layout;
    let (ar, ac) = g.stored_a();
    let (br, bc) = g.stored_b();
    let pad = |r: usize, c: usize| minor(layout, r, c).next_multiple_of(4);
    g.leading_dims(pad(ar, ac), pad(br, bc), pad(g.m, g.n))
}

/// [`case`] for each of `shapes` (`m, n, k, batch`) in every layout and transpose, tight and
/// [`padded_to_16_bytes`]: alpha and beta alternate between (1.25, −0.5) and (0.75, 0, over
/// NaN), and every third shape's tight buffers start 1, 2 and 3 floats off alignment.
fn tight_and_padded_cases(gpu: &Gpu, rng: &mut StdRng, shapes: &[(usize, usize, usize, usize)], variants: &[Option<SgemmChoice>]) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, &(m, n, k, batch)) in shapes.iter().enumerate() {
        let (alpha, beta) = if i % 2 == 0 { (1.25, -0.5) } else { (0.75, 0.0) };
        let offsets = if i % 3 == 1 { (1, 2, 3) } else { (0, 0, 0) };
        for g in every_layout_and_transpose(m, n, k) {
            let g = g.batched(batch).alpha_beta(alpha, beta);
            failures.extend(case(gpu, &g, rng, offsets, variants));
            failures.extend(case(gpu, &padded_to_16_bytes(g), rng, (0, 0, 0), variants));
        }
    }
    failures
}

/// GEMV in every layout: few rows of C against B stored either way (`gemv`'s dot body where
/// B is k-contiguous, weights `[out, in]`; its column body otherwise), and few columns of C,
/// which `gemv` computes turned around (`Cᵀ = Bᵀ·Aᵀ`, C written transposed), each in every
/// layout and transpose, tight (odd leading dimensions: a float per lane) and padded (16-byte
/// loads), with k of one to sixteen warps per column group and k % 4 ≠ 0, unaligned buffers,
/// batches, beta = 0 over NaN and beta ≠ 0.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gemv_every_layout_few_rows_or_few_columns() {
    let gpu = gpu();
    let mut rng = rng("gemv_layouts");
    let shapes: &[(usize, usize, usize, usize)] = if quick() {
        &[(1, 70, 2051, 2), (3, 5, 33, 1), (70, 2, 301, 2)]
    } else {
        &[
            (1, 1000, 4099, 1),
            (3, 257, 129, 2),
            (8, 70, 17001, 1),
            (1, 1, 1000, 1),
            (2, 5, 33, 3),
            (1000, 1, 4099, 1),
            (257, 3, 129, 2),
            (70, 8, 17001, 1),
            (5, 2, 33, 3),
            (6, 6, 2050, 2),
        ]
    };
    let variants = [None, Some(SgemmVariant::Gemv.into())];
    assert_all(tight_and_padded_cases(&gpu, &mut rng, shapes, &variants));
}

/// `tiny` (4×4 pieces of C per thread, numbered over the whole batch): thousands of tiny
/// problems, short k, pieces cut by the edges of C (m, n not multiples of 4), k split over
/// teams of 2 to 32 lanes (k from 64 to 3062), in every layout and transpose, tight (a float
/// per load) and padded to 16 bytes (16-byte lines and stores), unaligned buffers, beta = 0
/// over NaN and beta ≠ 0; forced and as the dispatcher's choice.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tiny_many_small_problems_and_short_k() {
    let gpu = gpu();
    let mut rng = rng("tiny");
    let shapes: &[(usize, usize, usize, usize)] = if quick() {
        &[(6, 5, 5, 700), (9, 24, 337, 20), (33, 70, 7, 2)]
    } else {
        &[(6, 5, 5, 2945), (8, 8, 64, 3000), (1, 162, 9, 300), (9, 24, 337, 200), (10, 17, 3062, 3), (33, 70, 7, 2), (4, 4, 1, 5000), (130, 66, 16, 1)]
    };
    let variants = [None, Some(SgemmVariant::Tiny.into())];
    assert_all(tight_and_padded_cases(&gpu, &mut rng, shapes, &variants));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launches_can_be_captured_in_a_cuda_graph() {
    let ctx = device_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.new_stream().unwrap();
    let kernels = Cukernels::new(&ctx).unwrap();
    kernels.preload().unwrap();
    let mut rng = rng("graph");
    // C += A·B per launch: three replays of two launches give C0 + 6·A·B (of three, C0 + 9·A·B).
    let once = Sgemm::new(100, 70, 50).alpha_beta(1.0, 1.0);
    let x = inputs(&once, &mut rng, (0, 0, 0));
    // Buffers used in a graph are untracked (`UntrackedAllocations` says why).
    // SAFETY: these three buffers are only ever used on `stream`, in order.
    let untracked = unsafe { UntrackedAllocations::begin(&stream) };
    let a = stream.clone_htod(&x.a).unwrap();
    let b = stream.clone_htod(&x.b).unwrap();
    let mut c = stream.clone_htod(&x.c).unwrap();
    drop(untracked);
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
    kernels.sgemm(&stream, &once, &a, &b, &mut c).unwrap();
    // On a GPU with clusters, also a k-split launch (cuLaunchKernelEx with a cluster size).
    // A k split through the handle's own workspace (no allocation, no event: capturable).
    kernels.sgemm_with(&stream, &once, &a, &b, &mut c, Some(SgemmChoice::workspace_split(SgemmVariant::Medium, 5))).unwrap();
    let split = kernels.sgemm_config().arch.limits().has_clusters;
    if split {
        kernels.sgemm_with(&stream, &once, &a, &b, &mut c, Some(SgemmChoice::cluster_split(SgemmVariant::Medium, 3))).unwrap();
    }
    let graph = stream.end_capture(CUgraphInstantiate_flags(0)).unwrap().expect("the capture recorded the launch");
    for _ in 0..3 {
        graph.launch().unwrap();
    }
    stream.synchronize().unwrap();
    let out = stream.clone_dtoh(&c).unwrap();
    let thrice = once.alpha_beta(if split { 9.0 } else { 6.0 }, 1.0);
    let want = expected(&thrice, &x, &mut rng);
    if let Err(e) = want.check(&thrice, &x.c, &out) {
        panic!("graph replays:\n{e}");
    }
}

/// `Cukernels::new` picks this device's cubin (on an H200: sm_90's), loads nothing until the
/// first launch, and the raw-pointer entry point gives the same bits as the safe one, with the
/// same validation.
#[test]
#[ignore = "needs a CUDA GPU"]
fn default_handle_loads_the_cubin_lazily_and_the_raw_entry_matches_the_safe_one() {
    let ctx = device_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.new_stream().unwrap();
    let (major, minor) = ctx.compute_capability().unwrap();
    let kernels = Cukernels::new(&ctx).unwrap();
    let artifact = kernels.artifact(KernelFamily::Sgemm);
    assert_eq!(artifact.kind, ArtifactKind::Cubin, "{artifact}");
    assert_eq!(artifact.target.sm() / 10, major as u32, "{artifact} on {major}.{minor}");
    assert!(!kernels.is_loaded(KernelFamily::Sgemm), "nothing loads before the first launch");

    let mut rng = rng("raw_entry");
    let g = Sgemm::new(77, 45, 130).transpose(Transpose::Yes, Transpose::No).alpha_beta(0.75, 0.5);
    let x = inputs(&g, &mut rng, (0, 0, 0));
    let a = stream.clone_htod(&x.a).unwrap();
    let b = stream.clone_htod(&x.b).unwrap();
    let mut c_safe = stream.clone_htod(&x.c).unwrap();
    let mut c_raw = stream.clone_htod(&x.c).unwrap();
    kernels.sgemm(&stream, &g, &a, &b, &mut c_safe).unwrap();
    assert!(kernels.is_loaded(KernelFamily::Sgemm));
    stream.synchronize().unwrap();
    let safe = stream.clone_dtoh(&c_safe).unwrap();
    if let Err(e) = expected(&g, &x, &mut rng).check(&g, &x.c, &safe) {
        panic!("safe entry:\n{e}");
    }

    use cukernels::cudarc::driver::{DevicePtr, DevicePtrMut};
    let (a_addr, _ga) = a.device_ptr(&stream);
    let (b_addr, _gb) = b.device_ptr(&stream);
    let c_len = c_raw.len();
    let (c_addr, _gc) = c_raw.device_ptr_mut(&stream);
    let buffers = SgemmBuffers { a_addr, a_len: x.a.len(), b_addr, b_len: x.b.len(), c_addr, c_len, ..Default::default() };
    // SAFETY: the addresses and lengths are those of the three live cudarc buffers above, used
    // on `stream` only, which outlives the launch (synchronized below).
    unsafe { kernels.sgemm_raw(stream.cu_stream(), &g, &buffers, None) }.unwrap();
    // Validated exactly as the safe entry point: a buffer one element short is refused.
    let short = SgemmBuffers { a_len: 130 * 77 - 1, ..buffers }; // A is stored k × m = 130 × 77
    // SAFETY: refused before any launch.
    let e = unsafe { kernels.sgemm_raw(stream.cu_stream(), &g, &short, None) }.unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { name: "a", .. }), "{e}");
    stream.synchronize().unwrap();
    drop((_ga, _gb, _gc));
    let raw = stream.clone_dtoh(&c_raw).unwrap();
    assert!(safe.iter().zip(&raw).all(|(s, r)| s.to_bits() == r.to_bits()), "raw entry differs from the safe one");
}
