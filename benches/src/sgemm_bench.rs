//! SGEMM against cuBLAS (`cublasSgemmStridedBatched`, TF32 off: cuBLAS's default math mode) on
//! the same GPU, in the same run, on the same buffers. Each figure is the median of CUDA-event
//! timings after warm-up: of single launches, or, for kernels under [`BACK_TO_BACK_BELOW_MS`],
//! of runs of back-to-back launches between one pair of events (divided by their count), so
//! that the host's enqueue gaps do not count; ours and cuBLAS's are timed alike. Inputs
//! rotate among several buffer sets when one set would fit in L2, so that repeated runs do
//! not measure the cache.
//!
//! Dispatch regret: for each shape, every candidate kernel (each variant, and each k split the
//! dispatcher considers: `kernel_candidates`) is timed the same way; regret is the
//! dispatcher's choice's time over the best candidate's time, minus one.

use cukernels::cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, StridedBatchedConfig};
use cukernels::cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cukernels::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use cukernels::{choose_kernel, kernel_candidates, Cukernels, Layout, Sgemm, SgemmChoice, SgemmVariant, Transpose};
use std::sync::Arc;

/// One benchmark shape: `batch` products of `op(A)` (`m×k`) by `op(B)` (`k×n`), each operand
/// stored transposed where its flag says (A as `k×m`, B as `n×k`: weights `[out, in]`), all
/// three matrices row-major, or column-major (cuBLAS's layout) with `col_major`.
#[derive(Clone, Debug)]
pub struct Shape {
    pub group: &'static str,
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: bool,
    pub trans_b: bool,
    pub col_major: bool,
}

impl Shape {
    /// `MxNxK`, `B,MxNxK`, with `:tn`, `:nt` or `:tt` after it when an operand is transposed,
    /// and `@col` after that when the matrices are column-major.
    pub fn label(&self) -> String {
        let dims = if self.batch == 1 {
            format!("{}x{}x{}", self.m, self.n, self.k)
        } else {
            format!("{}x({}x{}x{})", self.batch, self.m, self.n, self.k)
        };
        let dims = match (self.trans_a, self.trans_b) {
            (false, false) => dims,
            (ta, tb) => format!("{dims}:{}{}", if ta { 't' } else { 'n' }, if tb { 't' } else { 'n' }),
        };
        if self.col_major { format!("{dims}@col") } else { dims }
    }
    /// `MxNxK` (one batch) or `B,MxNxK`, optionally `:nt` etc. and `@col`: a shape outside
    /// the sweep (group "extra").
    pub fn parse(label: &str) -> Option<Shape> {
        let (label, col_major) = match label.strip_suffix("@col") {
            Some(l) => (l, true),
            None => (label, false),
        };
        let (label, (trans_a, trans_b)) = match label.split_once(':') {
            Some((l, "nn")) => (l, (false, false)),
            Some((l, "nt")) => (l, (false, true)),
            Some((l, "tn")) => (l, (true, false)),
            Some((l, "tt")) => (l, (true, true)),
            Some(_) => return None,
            None => (label, (false, false)),
        };
        // `B,MxNxK`, or `Bx(MxNxK)` as `label` writes it.
        let (batch, dims) = match (label.split_once(','), label.strip_suffix(')').and_then(|l| l.split_once("x("))) {
            (Some((b, d)), _) | (None, Some((b, d))) => (b.parse().ok()?, d),
            (None, None) => (1, label),
        };
        let d: Vec<usize> = dims.split('x').map(|x| x.parse().ok()).collect::<Option<_>>()?;
        match d[..] {
            [m, n, k] => Some(Shape { trans_a, trans_b, col_major, ..shape("extra", batch, m, n, k) }),
            _ => None,
        }
    }
    pub fn flops(&self) -> f64 {
        2.0 * (self.batch * self.m * self.n) as f64 * self.k as f64
    }
    /// Bytes of A, B and C (each read or written once at best).
    pub fn bytes(&self) -> f64 {
        4.0 * self.batch as f64 * (self.m * self.k + self.k * self.n + self.m * self.n) as f64
    }
    /// The problem as our API takes it.
    pub fn sgemm(&self) -> Sgemm {
        let t = |yes: bool| if yes { Transpose::Yes } else { Transpose::No };
        let layout = if self.col_major { Layout::ColMajor } else { Layout::RowMajor };
        Sgemm::new(self.m, self.n, self.k).layout(layout).transpose(t(self.trans_a), t(self.trans_b)).batched(self.batch)
    }
    /// (m, n) of the row-major problem the plan runs: a column-major `C = op(A)·op(B)` is the
    /// row-major `Cᵀ = op(B)ᵀ·op(A)ᵀ`, n × m (what the dispatcher is asked about).
    pub fn canonical_mn(&self) -> (usize, usize) {
        if self.col_major { (self.n, self.m) } else { (self.m, self.n) }
    }
}

pub const fn shape(group: &'static str, batch: usize, m: usize, n: usize, k: usize) -> Shape {
    Shape { group, batch, m, n, k, trans_a: false, trans_b: false, col_major: false }
}

/// [`shape`] with B stored transposed (`n×k`, k-contiguous: weights `[out, in]`).
const fn shape_nt(group: &'static str, m: usize, n: usize, k: usize) -> Shape {
    Shape { trans_b: true, ..shape(group, 1, m, n, k) }
}

/// The shape classes of the SGEMM-every-shape issue beyond the sweep: GEMV in every layout
/// (matrices of 64 MB and more, where the issue asks for 80% of the copy bandwidth).
pub fn shape_classes() -> Vec<Shape> {
    vec![
        // One token through an LLM head stored [out, in]: Llama-2 (32000) and Llama-3 (128256).
        shape_nt("gemv", 1, 32000, 4096),
        shape_nt("gemv", 1, 128256, 4096),
        shape_nt("gemv", 4, 32000, 4096),
        shape_nt("gemv", 8, 32000, 4096),
        shape_nt("gemv", 1, 4096, 4096),
        shape_nt("gemv", 16, 4096, 4096),
        // A matrix-vector product written as n = 1 (A k-contiguous, and A stored transposed).
        shape("gemv", 1, 4096, 1, 4096),
        shape("gemv", 1, 16384, 1, 16384),
        Shape { trans_a: true, ..shape("gemv", 1, 16384, 1, 16384) },
        shape("gemv", 1, 16384, 4, 16384),
        // m = 1 with B n-contiguous (the column body), for comparison.
        shape("gemv", 1, 1, 16384, 16384),
        // Long k: small m × n with k around 100k (a reduction over a long axis, a Gram
        // matrix of a few long vectors), where the work sits in a few tiles unless k is split.
        shape("long-k", 1, 32, 32, 131072),
        shape("long-k", 1, 64, 64, 100000),
        shape("long-k", 1, 128, 128, 100000),
        shape_nt("long-k", 96, 200, 50000),
        shape("long-k", 1, 256, 256, 65536),
        Shape { trans_a: true, ..shape("long-k", 1, 17, 33, 100003) },
        shape("long-k", 4, 64, 64, 65536),
    ]
}

/// The sweep of the SGEMM issue: square, batched, skinny and odd shapes.
pub fn sweep() -> Vec<Shape> {
    let mut v = Vec::new();
    for s in [256, 512, 1024, 2048, 4096, 8192] {
        v.push(shape("square", 1, s, s, s));
    }
    v.extend([
        shape("batched", 64, 512, 512, 512),
        shape("batched", 256, 256, 256, 256),
        shape("batched", 1024, 64, 64, 64),
        shape("batched", 32, 128, 4096, 128),
        shape("batched", 8, 2048, 2048, 2048),
    ]);
    for m in [1, 4, 16] {
        v.push(shape("skinny", 1, m, 4096, 4096));
    }
    v.extend([shape("odd", 1, 1000, 1000, 1000), shape("odd", 1, 4095, 4095, 4095), shape("odd", 1, 33, 4097, 129)]);
    v
}

/// Shapes in the randomized sweep ([`random_sweep`]).
pub const RANDOM_SHAPES: usize = 160;
/// Its work cap: at most 2³³ multiply-adds per call (about 1 ms at 17 TFLOP/s) and 1 GiB of
/// A, B and C, so that timing every candidate kernel of all the shapes takes a few minutes.
pub const RANDOM_MAX_MACS: f64 = 8_589_934_592.0;
pub const RANDOM_MAX_BYTES: f64 = 1_073_741_824.0;

/// The randomized sweep of the SGEMM-every-shape issue (group "random"): [`RANDOM_SHAPES`]
/// shapes from a fixed seed, m, n and k drawn log-uniformly from 1 to 16384, batch from 1 to
/// 4096, each with a random transpose pair and layout; a draw over the work cap halves its
/// batch, then its largest dimension, until it fits. Some dispatcher rules were fitted to the
/// shapes of the default seed (the `tiny` thresholds, [`cukernels::SHORT_K_TILES`]), so
/// its regret there is in-sample; `CUKERNELS_SWEEP_SEED=<u64>` draws other shapes, on which it
/// is not.
pub fn random_sweep() -> Vec<Shape> {
    // splitmix64: a fixed, portable stream (the shapes must be the same on every machine).
    let mut state = match std::env::var("CUKERNELS_SWEEP_SEED") {
        // A typo must not quietly give the default (in-sample) shapes.
        Ok(seed) => seed.parse::<u64>().unwrap_or_else(|_| panic!("CUKERNELS_SWEEP_SEED={seed:?} is not a u64")),
        Err(_) => 0x5EED_0F_5EED_u64,
    };
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    // exp(U · ln max), rounded: 1 ..= max, log-uniform.
    let log_uniform = |bits: u64, max: f64| (((bits >> 11) as f64 / (1u64 << 53) as f64 * max.ln()).exp().round().max(1.0) as usize).min(max as usize);
    let mut v = Vec::with_capacity(RANDOM_SHAPES);
    while v.len() < RANDOM_SHAPES {
        let (m, n, k) = (log_uniform(next(), 16384.0), log_uniform(next(), 16384.0), log_uniform(next(), 16384.0));
        let batch = log_uniform(next(), 4096.0);
        let flags = next();
        let mut s = Shape { trans_a: flags & 1 != 0, trans_b: flags & 2 != 0, col_major: flags & 4 != 0, ..shape("random", batch, m, n, k) };
        let over = |s: &Shape| s.flops() / 2.0 > RANDOM_MAX_MACS || s.bytes() > RANDOM_MAX_BYTES;
        while over(&s) {
            if s.batch > 1 {
                s.batch /= 2;
            } else if s.m >= s.n && s.m >= s.k {
                s.m /= 2;
            } else if s.n >= s.k {
                s.n /= 2;
            } else {
                s.k /= 2;
            }
        }
        v.push(s);
    }
    v
}

/// The result for one shape.
#[derive(Clone, Debug)]
pub struct Row {
    pub shape: Shape,
    pub chosen: SgemmChoice,
    pub ours_ms: f64,
    pub cublas_ms: f64,
    /// Median time of each candidate kernel (the dispatcher's choice included).
    pub variants_ms: Vec<(SgemmChoice, f64)>,
}

impl Row {
    pub fn ours_tflops(&self) -> f64 {
        self.shape.flops() / self.ours_ms / 1e9
    }
    pub fn cublas_tflops(&self) -> f64 {
        self.shape.flops() / self.cublas_ms / 1e9
    }
    pub fn ratio(&self) -> f64 {
        self.cublas_ms / self.ours_ms
    }
    pub fn best(&self) -> (SgemmChoice, f64) {
        self.variants_ms.iter().copied().fold((self.chosen, f64::INFINITY), |b, x| if x.1 < b.1 { x } else { b })
    }
    pub fn regret(&self) -> f64 {
        self.ours_ms / self.best().1 - 1.0
    }
}

/// The device facts a report needs.
pub struct DeviceInfo {
    pub name: String,
    pub sm_count: u32,
    pub clock_khz: u32,
    pub l2_bytes: usize,
}

impl DeviceInfo {
    pub fn of(ctx: &Arc<CudaContext>) -> DeviceInfo {
        let attr = |a| ctx.attribute(a).unwrap_or(0).max(0) as u32;
        DeviceInfo {
            name: ctx.name().unwrap_or_else(|_| "unknown GPU".into()),
            sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            clock_khz: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            l2_bytes: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE) as usize,
        }
    }
    /// FP32 FMA peak in TFLOP/s at the boost clock: 2 · lanes · SMs · clock.
    pub fn fp32_peak_tflops(&self, lanes_per_sm: u32) -> f64 {
        2.0 * lanes_per_sm as f64 * self.sm_count as f64 * self.clock_khz as f64 * 1e3 / 1e12
    }
}

/// Device buffers for one shape: `sets` independent (A, B, C) triples.
struct Sets {
    a: Vec<CudaSlice<f32>>,
    b: Vec<CudaSlice<f32>>,
    c: Vec<CudaSlice<f32>>,
}

fn pseudo_random(len: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn alloc_sets(stream: &Arc<CudaStream>, s: &Shape, l2_bytes: usize) -> Sets {
    let (la, lb, lc) = (s.batch * s.m * s.k, s.batch * s.k * s.n, s.batch * s.m * s.n);
    let bytes = 4 * (la + lb + lc);
    // Enough sets that one round of them is at least twice the L2, at most 8.
    let sets = (2 * l2_bytes).div_ceil(bytes.max(1)).clamp(1, 8);
    let host_a = pseudo_random(la, 1);
    let host_b = pseudo_random(lb, 2);
    let host_c = pseudo_random(lc, 3);
    let mut out = Sets { a: vec![], b: vec![], c: vec![] };
    for _ in 0..sets {
        out.a.push(stream.clone_htod(&host_a).unwrap());
        out.b.push(stream.clone_htod(&host_b).unwrap());
        out.c.push(stream.clone_htod(&host_c).unwrap());
    }
    out
}

/// Kernels faster than this are timed back to back ([`median_ms`]).
pub const BACK_TO_BACK_BELOW_MS: f64 = 0.05;

/// Median milliseconds of one `run(i)` over `reps` samples after `warmup` runs. A sample is
/// one launch between a pair of CUDA events, or, when a first estimate is under
/// [`BACK_TO_BACK_BELOW_MS`], enough back-to-back launches between the pair to fill about
/// 0.2 ms, divided by their count.
pub fn median_ms(stream: &Arc<CudaStream>, warmup: usize, reps: usize, mut run: impl FnMut(usize)) -> f64 {
    let ctx = stream.context();
    let ev = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
    for i in 0..warmup {
        run(i);
    }
    let mut next = warmup;
    let mut sample = |launches: usize, count: usize, run: &mut dyn FnMut(usize)| -> f64 {
        let events: Vec<_> = (0..count).map(|_| (ev(), ev())).collect();
        for (start, end) in &events {
            start.record(stream).unwrap();
            for _ in 0..launches {
                run(next);
                next += 1;
            }
            end.record(stream).unwrap();
        }
        stream.synchronize().unwrap();
        let mut times: Vec<f64> = events.iter().map(|(s, e)| s.elapsed_ms(e).unwrap() as f64 / launches as f64).collect();
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        times[times.len() / 2]
    };
    let first = sample(1, 5.min(reps).max(1), &mut run);
    if first >= BACK_TO_BACK_BELOW_MS {
        return sample(1, reps, &mut run);
    }
    let launches = (0.2 / first.max(1e-4)).ceil() as usize;
    sample(launches.clamp(2, 200), reps, &mut run)
}

/// The cuBLAS call for a row-major `C = A·B`: that is the column-major `Cᵀ = Bᵀ·Aᵀ`, so cuBLAS
/// gets (n, m, k) and B before A.
/// A transposed operand (stored row-major `n×k` for B, `k×m` for A) is, seen column-major,
/// the matrix cuBLAS needs transposed once more: `CUBLAS_OP_T` with its row length as the
/// leading dimension.
///
/// A column-major shape is cuBLAS's own problem: A before B, (m, n, k), and the leading
/// dimensions of the column-major stored matrices. [`cublas_operands_swapped`] says which
/// operand goes first.
pub fn cublas_config(s: &Shape) -> StridedBatchedConfig<f32> {
    let op = |t: bool| if t { cublasOperation_t::CUBLAS_OP_T } else { cublasOperation_t::CUBLAS_OP_N };
    // A row-major product is the column-major one of the transposed problem: m and n, the
    // operands and their flags swapped (and `cublas_operands_swapped` hands B over first).
    let c = if s.col_major { s.clone() } else { Shape { m: s.n, n: s.m, trans_a: s.trans_b, trans_b: s.trans_a, col_major: true, ..s.clone() } };
    StridedBatchedConfig {
        gemm: cukernels::cudarc::cublas::GemmConfig {
            transa: op(c.trans_a),
            transb: op(c.trans_b),
            m: c.m as i32,
            n: c.n as i32,
            k: c.k as i32,
            alpha: 1.0f32,
            lda: if c.trans_a { c.k } else { c.m } as i32,
            ldb: if c.trans_b { c.n } else { c.k } as i32,
            beta: 0.0f32,
            ldc: c.m as i32,
        },
        batch_size: c.batch as i32,
        stride_a: (c.m * c.k) as i64,
        stride_b: (c.k * c.n) as i64,
        stride_c: (c.m * c.n) as i64,
    }
}

/// Whether [`cublas_config`] takes B first (row-major shapes) rather than A.
pub fn cublas_operands_swapped(s: &Shape) -> bool {
    !s.col_major
}

/// Benchmarks one shape: our dispatcher's choice, each variant, and cuBLAS.
pub fn bench_shape(kernels: &Cukernels, blas: &CudaBlas, stream: &Arc<CudaStream>, s: &Shape, info: &DeviceInfo, reps: usize) -> Row {
    let mut sets = alloc_sets(stream, s, info.l2_bytes);
    let n_sets = sets.a.len();
    let g = s.sgemm();
    let (row, sms) = (kernels.sgemm_config(), kernels.sm_count());
    let (cm, cn) = s.canonical_mn();
    let workspace = kernels.own_sgemm_workspace_bytes().expect("the SGEMM module loads and the own workspace is allocated");
    let chosen = choose_kernel(cm, cn, s.k, s.batch, g.canonical_operands(), row, sms, workspace);
    let warmup = 3;
    let time_ours = |choice: Option<SgemmChoice>, sets: &mut Sets| {
        median_ms(stream, warmup, reps, |i| {
            let j = i % n_sets;
            kernels.sgemm_with(stream, &g, &sets.a[j], &sets.b[j], &mut sets.c[j], choice).unwrap();
        })
    };
    let ours_ms = time_ours(None, &mut sets);
    // Every kernel that could be the right one: the dispatcher's candidates, `gemv`, which
    // re-streams B once per 8 rows of C (or A per 8 columns), where m or n is small enough
    // for it to be a contender, and `tiny` (which runs any shape).
    let mut candidates = kernel_candidates(cm, cn, s.k, s.batch, row, sms, workspace);
    if cm.min(cn) <= 2 * cukernels::GEMV_MAX_M as usize && !candidates.contains(&SgemmVariant::Gemv.into()) {
        candidates.push(SgemmVariant::Gemv.into());
    }
    candidates.push(SgemmVariant::Tiny.into());
    let variants_ms: Vec<(SgemmChoice, f64)> =
        candidates.into_iter().map(|c| (c, if c == chosen { ours_ms } else { time_ours(Some(c), &mut sets) })).collect();
    let cfg = cublas_config(s);
    let cublas_ms = median_ms(stream, warmup, reps, |i| {
        let j = i % n_sets;
        let (first, second) = if cublas_operands_swapped(s) { (&sets.b[j], &sets.a[j]) } else { (&sets.a[j], &sets.b[j]) };
        // SAFETY: the buffers hold exactly batch·(k·n), batch·(m·k), batch·(m·n) floats, which is
        // what this column-major call with these leading dimensions and strides addresses.
        unsafe { blas.gemm_strided_batched(cfg, first, second, &mut sets.c[j]).unwrap() };
    });
    Row { shape: s.clone(), chosen, ours_ms, cublas_ms, variants_ms }
}

/// Checks our result against cuBLAS's on one shape before timing anything (a benchmark of a
/// wrong kernel is worthless). Returns the largest relative difference.
pub fn cross_check(kernels: &Cukernels, blas: &CudaBlas, stream: &Arc<CudaStream>, s: &Shape) -> f64 {
    let g = s.sgemm();
    let a = stream.clone_htod(&pseudo_random(s.batch * s.m * s.k, 11)).unwrap();
    let b = stream.clone_htod(&pseudo_random(s.batch * s.k * s.n, 12)).unwrap();
    let mut ours = stream.clone_htod(&vec![f32::NAN; s.batch * s.m * s.n]).unwrap();
    let mut theirs = stream.alloc_zeros::<f32>(s.batch * s.m * s.n).unwrap();
    kernels.sgemm(stream, &g, &a, &b, &mut ours).unwrap();
    let cfg = cublas_config(s);
    let (first, second) = if cublas_operands_swapped(s) { (&b, &a) } else { (&a, &b) };
    // SAFETY: as in `bench_shape`.
    unsafe { blas.gemm_strided_batched(cfg, first, second, &mut theirs).unwrap() };
    let x = stream.clone_dtoh(&ours).unwrap();
    let y = stream.clone_dtoh(&theirs).unwrap();
    let scale = (s.k as f64).sqrt();
    x.iter().zip(&y).map(|(&p, &q)| if p.is_finite() { ((p - q).abs() as f64) / scale } else { f64::INFINITY }).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The randomized sweep is the issue's: at least 150 shapes, the same on every call, every
    /// dimension within its range and the work cap, every transpose pair in both layouts, and
    /// spread over the whole log range (so it holds GEMVs, tiny batched products and large
    /// squares alike).
    #[test]
    fn random_sweep_is_fixed_bounded_and_spread() {
        let v = random_sweep();
        assert!(v.len() >= 150);
        assert_eq!(v.iter().map(Shape::label).collect::<Vec<_>>(), random_sweep().iter().map(Shape::label).collect::<Vec<_>>());
        for s in &v {
            assert_eq!(s.group, "random");
            assert!((1..=16384).contains(&s.m) && (1..=16384).contains(&s.n) && (1..=16384).contains(&s.k), "{}", s.label());
            assert!((1..=4096).contains(&s.batch), "{}", s.label());
            assert!(s.flops() / 2.0 <= RANDOM_MAX_MACS && s.bytes() <= RANDOM_MAX_BYTES, "{}", s.label());
            // Every label parses back to the shape (so `--shape` can re-run any of them).
            let p = Shape::parse(&s.label()).unwrap();
            assert_eq!((p.batch, p.m, p.n, p.k, p.trans_a, p.trans_b, p.col_major), (s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, s.col_major));
        }
        for combo in 0..8 {
            let count = v.iter().filter(|s| (s.trans_a as usize) | (s.trans_b as usize) << 1 | (s.col_major as usize) << 2 == combo).count();
            assert!(count >= 8, "transpose/layout combination {combo}: {count} shapes");
        }
        let share = |f: &dyn Fn(&Shape) -> bool| v.iter().filter(|s| f(s)).count();
        assert!(share(&|s| s.m.min(s.n) <= 8) >= 10, "GEMV-like shapes");
        assert!(share(&|s| s.m.max(s.n) >= 4096) >= 20, "large shapes");
        assert!(share(&|s| s.batch >= 64) >= 20, "large batches");
        assert!(share(&|s| s.k >= 4096) >= 12, "long k");
    }

    /// cuBLAS's column-major call for a column-major shape is the problem itself; for a
    /// row-major one, the transposed problem with the operands swapped.
    #[test]
    fn cublas_config_of_each_layout() {
        let row = Shape { trans_b: true, ..shape("x", 2, 3, 5, 7) };
        let c = cublas_config(&row);
        assert!(cublas_operands_swapped(&row));
        assert_eq!((c.gemm.m, c.gemm.n, c.gemm.k, c.gemm.lda, c.gemm.ldb, c.gemm.ldc), (5, 3, 7, 7, 7, 5));
        let col = Shape { col_major: true, trans_a: true, ..shape("x", 2, 3, 5, 7) };
        let c = cublas_config(&col);
        assert!(!cublas_operands_swapped(&col));
        assert_eq!((c.gemm.m, c.gemm.n, c.gemm.k, c.gemm.lda, c.gemm.ldb, c.gemm.ldc), (3, 5, 7, 7, 7, 3));
        assert_eq!((c.stride_a, c.stride_b, c.stride_c), (21, 35, 15));
        assert_eq!(col.canonical_mn(), (5, 3));
    }
}
