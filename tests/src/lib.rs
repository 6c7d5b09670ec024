//! Shared helpers of the integration tests: fresh random inputs, an f64 reference of the
//! user-level SGEMM contract (written from the definition, independent of the host's canonical
//! mapping), an error bound suited to FP32 accumulation, and GPU plumbing.

pub mod attention_ref;

use cukernels::cudarc::driver::{CudaContext, CudaStream};
use cukernels::{artifacts, device_context, Arch, ArtifactKind, Compiler, Cukernels, KernelFamily};
use std::sync::Arc;

/// A stream and one handle per config of `configs` and compiler that this device can run
/// `family` with: the config's cubin where one runs, else its PTX (JIT-compiled), else its
/// sm_90 probe (the sm_100/sm_120 rows built for sm_90); the nvptx build, and beside it the
/// rust-cuda build where one is embedded (README "rust-cuda"); `CUKERNELS_TEST_COMPILER=rust-cuda`
/// (or `nvptx`) tests only that compiler's. Each family is preloaded. On an sm_90 device every
/// config must be there (asserted when `configs` is every architecture and the nvptx build is
/// tested). Panics without a GPU.
pub fn config_handles(family: KernelFamily, configs: &[Arch]) -> (Arc<CudaStream>, Vec<Cukernels>) {
    let ctx = device_context(0).expect("these tests need a CUDA GPU");
    let (major, minor) = ctx.compute_capability().unwrap();
    let (major, minor) = (major as u32, minor as u32);
    let only = std::env::var("CUKERNELS_TEST_COMPILER").ok().map(|name| {
        Compiler::from_name(&name).unwrap_or_else(|| panic!("CUKERNELS_TEST_COMPILER={name}: nvptx or rust-cuda"))
    });
    let compilers: Vec<Compiler> = Compiler::ALL.into_iter().filter(|&c| only.is_none_or(|o| o == c)).collect();
    let mut handles = Vec::new();
    for &config in configs {
        for &compiler in &compilers {
            let candidates: Vec<_> =
                artifacts::embedded().iter().filter(|a| a.family == family && a.config == config && a.compiler == compiler && a.runs_on(major, minor)).collect();
            let pick = candidates.iter().find(|a| a.kind == ArtifactKind::Cubin).or_else(|| candidates.first());
            if let Some(a) = pick {
                handles.push(Cukernels::with_compiled_artifact(&ctx, a.target, a.config, a.kind, a.compiler).unwrap());
            }
        }
    }
    let names: Vec<String> = handles.iter().map(|h| h.artifact(family).to_string()).collect();
    eprintln!("GPU sm_{major}{minor}: testing {family} configs {names:?}");
    if major == 9 && configs.len() == Arch::ALL.len() && compilers.contains(&Compiler::Nvptx) {
        let nvptx = handles.iter().filter(|h| h.artifact(family).compiler == Compiler::Nvptx).count();
        assert_eq!(nvptx, 8, "every architecture's config must be testable on an sm_90 device: {names:?}");
    }
    assert!(!handles.is_empty(), "no {family} module of {compilers:?} runs on this device: {names:?}");
    for h in &handles {
        h.preload_family(family).unwrap();
    }
    (ctx.default_stream(), handles)
}

/// While alive, the buffers allocated in the stream's context are untracked: cudarc's event
/// tracking makes each use of a buffer wait for an event of its last use on any stream. Inside
/// a graph capture, a wait on an event recorded before it is an error
/// (CUDA_ERROR_STREAM_CAPTURE_ISOLATION); between chained launches the waits would keep the
/// launches from ever overlapping (nor test the kernels' own wait). Dropping it turns tracking
/// on again for what is allocated after.
pub struct UntrackedAllocations {
    ctx: Arc<CudaContext>,
}

impl UntrackedAllocations {
    /// # Safety
    /// Every buffer allocated in `stream`'s context while the guard lives is used on `stream`
    /// alone, in order, for all its life (no event is then needed to order its uses).
    pub unsafe fn begin(stream: &CudaStream) -> Self {
        let ctx = stream.context().clone();
        // SAFETY: the caller's promise above.
        unsafe { ctx.disable_event_tracking() };
        UntrackedAllocations { ctx }
    }
}

impl Drop for UntrackedAllocations {
    fn drop(&mut self) {
        // SAFETY: only buffers allocated from here on are tracked again.
        unsafe { self.ctx.enable_event_tracking() };
    }
}

use cukernels::{Layout, Sgemm, Transpose};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// A random generator seeded from `CUKERNELS_SEED` if set, else from the clock; the seed is
/// printed so a failure can be replayed.
pub fn rng(label: &str) -> StdRng {
    let seed = std::env::var("CUKERNELS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("[{label}] CUKERNELS_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// `len` uniform values in [-1, 1).
pub fn random_vec(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// Index of element (r, c) of a stored matrix with leading dimension `ld`.
pub fn at(layout: Layout, ld: usize, r: usize, c: usize) -> usize {
    match layout {
        Layout::RowMajor => r * ld + c,
        Layout::ColMajor => r + c * ld,
    }
}

/// Element (i, p) of op(A) of batch `b`.
fn op_a(g: &Sgemm, a: &[f32], b: usize, i: usize, p: usize) -> f32 {
    let (r, c) = if g.trans_a == Transpose::No { (i, p) } else { (p, i) };
    a[b * g.stride_a + at(g.layout, g.lda, r, c)]
}

/// Element (p, j) of op(B) of batch `b`.
fn op_b(g: &Sgemm, bm: &[f32], b: usize, p: usize, j: usize) -> f32 {
    let (r, c) = if g.trans_b == Transpose::No { (p, j) } else { (j, p) };
    bm[b * g.stride_b + at(g.layout, g.ldb, r, c)]
}

/// Index in C of element (i, j) of batch `b`.
pub fn c_index(g: &Sgemm, b: usize, i: usize, j: usize) -> usize {
    b * g.stride_c + at(g.layout, g.ldc, i, j)
}

/// The exact-ish value (f64) of C[b](i, j) after the call, and the magnitude that scales its
/// rounding error: `|alpha| Σ|a||b| + |beta||c|`.
pub fn reference_element(g: &Sgemm, a: &[f32], bm: &[f32], c_before: &[f32], b: usize, i: usize, j: usize) -> (f64, f64) {
    let mut dot = 0.0f64;
    let mut mag = 0.0f64;
    if g.alpha != 0.0 {
        for p in 0..g.k {
            let x = op_a(g, a, b, i, p) as f64 * op_b(g, bm, b, p, j) as f64;
            dot += x;
            mag += x.abs();
        }
    }
    let alpha = g.alpha as f64;
    let mut value = alpha * dot;
    let mut scale = alpha.abs() * mag;
    if g.beta != 0.0 {
        let c = c_before[c_index(g, b, i, j)] as f64;
        value += g.beta as f64 * c;
        scale += (g.beta as f64 * c).abs();
    }
    (value, scale)
}

/// Tolerance for one element: FP32 accumulation over k in any order has a rounding error well
/// inside `8·u·sqrt(k+2)·scale` (u = 2⁻²⁴; the statistical bound with a wide margin), while a
/// wrong or missing term is of the order of one |a·b| and exceeds it.
pub fn tolerance(k: usize, scale: f64) -> f64 {
    8.0 * f64::from(f32::EPSILON / 2.0) * ((k + 2) as f64).sqrt() * scale + 1e-30
}

/// Reference values of the elements of C a check looks at (all of them, or a random sample
/// plus the first and last together with every row's and every column's sum), computed once
/// and compared against any number of runs.
pub struct Expected {
    /// (index in the C buffer, reference value, error scale)
    points: Vec<(usize, f64, f64)>,
    /// Sums over whole rows and columns of C (sampled checks only).
    sums: Vec<LineSum>,
    k: usize,
}

/// The sum of one row (or column) of one batch's C: a check that sees every element, cheap
/// to compute exactly (`Σ_j C(i, j) = α·Σ_p A(i, p)·(Σ_j B(p, j)) + β·Σ_j C₀(i, j)`).
struct LineSum {
    batch: usize,
    /// Row `index` (true) or column `index`.
    row: bool,
    index: usize,
    want: f64,
    /// Tolerance scale: `4·Σ scale / sqrt(len)` over the line's elements. Their rounding
    /// errors are independent, so their sum grows like the root of the sum of squares (≤ this
    /// by Cauchy-Schwarz when the scales are alike), not like the sum: a missing tile of 64
    /// elements moves a sum by orders of magnitude more.
    scale: f64,
}

impl Expected {
    /// Every element of every C matrix (O(batch·m·n·k), spread over all cores).
    pub fn full(g: &Sgemm, a: &[f32], bm: &[f32], c_before: &[f32]) -> Expected {
        let rows: Vec<(usize, usize)> = (0..g.batch).flat_map(|b| (0..g.m).map(move |i| (b, i))).collect();
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let chunk = rows.len().div_ceil(threads).max(1);
        let points = std::thread::scope(|s| {
            let handles: Vec<_> = rows
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        let mut out = Vec::with_capacity(part.len() * g.n);
                        for &(b, i) in part {
                            for j in 0..g.n {
                                let (want, scale) = reference_element(g, a, bm, c_before, b, i, j);
                                out.push((c_index(g, b, i, j), want, scale));
                            }
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        Expected { points, sums: Vec::new(), k: g.k }
    }

    /// `count` random elements plus the first and the last.
    pub fn sampled(g: &Sgemm, a: &[f32], bm: &[f32], c_before: &[f32], count: usize, rng: &mut StdRng) -> Expected {
        let mut points = Vec::new();
        if g.batch > 0 && g.m > 0 && g.n > 0 {
            let mut picks = vec![(0, 0, 0), (g.batch - 1, g.m - 1, g.n - 1)];
            picks.extend((0..count).map(|_| (rng.random_range(0..g.batch), rng.random_range(0..g.m), rng.random_range(0..g.n))));
            for (b, i, j) in picks {
                let (want, scale) = reference_element(g, a, bm, c_before, b, i, j);
                points.push((c_index(g, b, i, j), want, scale));
            }
        }
        let sums = (0..g.batch).flat_map(|b| line_sums(g, a, bm, c_before, b)).collect();
        Expected { points, sums, k: g.k }
    }

    /// Compares a run's C against the reference; also checks that every element of every C
    /// matrix was written (finite: inputs are finite, and C is NaN-poisoned when beta = 0) and
    /// that everything else in the C buffer (padding between rows, gaps between batches) kept
    /// its value.
    pub fn check(&self, g: &Sgemm, c_before: &[f32], c_after: &[f32]) -> Result<(), String> {
        let mut failures = Vec::new();
        for &(idx, want, scale) in &self.points {
            let got = c_after[idx] as f64;
            let err = (got - want).abs();
            let tol = tolerance(self.k, scale);
            let within = err <= tol; // false for NaN too
            if !within && failures.len() < 8 {
                failures.push(format!("C element {idx} = {got}, reference {want} (error {err:e}, tolerance {tol:e})"));
            }
        }
        for line in &self.sums {
            let len = if line.row { g.n } else { g.m };
            let got: f64 = (0..len)
                .map(|x| {
                    let (i, j) = if line.row { (line.index, x) } else { (x, line.index) };
                    c_after[c_index(g, line.batch, i, j)] as f64
                })
                .sum();
            let err = (got - line.want).abs();
            let tol = tolerance(self.k, line.scale);
            if !(err <= tol) && failures.len() < 8 {
                let what = if line.row { "row" } else { "column" };
                failures.push(format!("C[batch {}] {what} {} sums to {got}, reference {} (error {err:e}, tolerance {tol:e})", line.batch, line.index, line.want));
            }
        }
        let mut inside = vec![false; c_after.len()];
        for b in 0..g.batch {
            for i in 0..g.m {
                for j in 0..g.n {
                    let idx = c_index(g, b, i, j);
                    inside[idx] = true;
                    if !c_after[idx].is_finite() && failures.len() < 16 {
                        failures.push(format!("C[batch {b}]({i}, {j}) = {} (not written, or NaN leaked)", c_after[idx]));
                    }
                }
            }
        }
        for (idx, (&after, &before)) in c_after.iter().zip(c_before).enumerate() {
            if !inside[idx] && after.to_bits() != before.to_bits() && failures.len() < 24 {
                failures.push(format!("element {idx} of the C buffer lies outside every C matrix but changed: {before} -> {after}"));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
    }
}

/// Reference sums of every row and every column of batch `b`'s C (see [`LineSum`]).
fn line_sums(g: &Sgemm, a: &[f32], bm: &[f32], c_before: &[f32], b: usize) -> Vec<LineSum> {
    let (alpha, beta) = (g.alpha as f64, g.beta as f64);
    let reads = g.alpha != 0.0;
    let opa = |i: usize, p: usize| op_a(g, a, b, i, p) as f64;
    let opb = |p: usize, j: usize| op_b(g, bm, b, p, j) as f64;
    let c0 = |i: usize, j: usize| if g.beta != 0.0 { c_before[c_index(g, b, i, j)] as f64 } else { 0.0 };
    let with_abs = |(s, t): (f64, f64), v: f64| (s + v, t + v.abs());
    // For each p < k: Σ over `len` of f(p, ·) and of its absolute values.
    let sums_over = |len: usize, f: &dyn Fn(usize, usize) -> f64| -> Vec<(f64, f64)> {
        (0..g.k).map(|p| if reads { (0..len).map(|x| f(p, x)).fold((0.0, 0.0), with_abs) } else { (0.0, 0.0) }).collect()
    };
    // Σ_j op(B)(p, j) and Σ_i op(A)(i, p): a row of C sums to Σ_p op(A)(i, p) · Σ_j op(B)(p, j),
    // a column to Σ_p Σ_i op(A)(i, p) · op(B)(p, j).
    let b_rows = sums_over(g.n, &|p, j| opb(p, j));
    let a_cols = sums_over(g.m, &|p, i| opa(i, p));
    // Row `index` of C (`row`) or column `index`.
    let line = |row: bool, index: usize| {
        let (sums, len) = if row { (&b_rows, g.n) } else { (&a_cols, g.m) };
        let (mut want, mut scale) = (0.0, 0.0);
        if reads {
            for (p, &(sum, abs)) in sums.iter().enumerate() {
                let x = if row { opa(index, p) } else { opb(p, index) };
                want += x * sum;
                scale += x.abs() * abs;
            }
        }
        let (c_sum, c_abs) = (0..len).map(|t| if row { c0(index, t) } else { c0(t, index) }).fold((0.0, 0.0), with_abs);
        let scale = alpha.abs() * scale + beta.abs() * c_abs;
        LineSum { batch: b, row, index, want: alpha * want + beta * c_sum, scale: 4.0 * scale / (len as f64).sqrt() }
    };
    (0..g.m).map(|i| line(true, i)).chain((0..g.n).map(|j| line(false, j))).collect()
}

/// Elements a buffer needs for the stored matrix (rows × cols, leading dimension `ld`) over
/// all batches, plus `extra` slack.
pub fn buffer_len(g: &Sgemm, rows: usize, cols: usize, ld: usize, stride: usize, extra: usize) -> usize {
    if rows == 0 || cols == 0 || g.batch == 0 {
        return extra.max(1);
    }
    let one = at(g.layout, ld, rows - 1, cols - 1) + 1;
    (g.batch - 1) * stride + one + extra
}
