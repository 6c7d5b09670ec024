//! MoE quantized matmul (`mul_mat_id`) against cuBLAS on the same GPU, in the same run.
//!
//! Ours: the whole call (routing and quantization in one launch, then the matmul), timed as the median of
//! samples of back-to-back calls between CUDA events ([`per_launch_ms`]). The baseline,
//! `cublas-f16`: the weights dequantized to f16 once (the multiply alone is timed), one cuBLAS
//! f16 strided-batched GEMM (f32 accumulation) over the experts the call routes rows to, each
//! expert's own matrix times an equal share of the routed rows (`⌈slots / experts hit⌉`): the
//! same weight bytes as a grouped f16 MoE and at least the same FLOPs, no routing, so a lower
//! bound on what a cuBLAS-based MoE takes. For T ≤ 8, `ours_tbps` is the bytes of the distinct
//! experts' weights read per second (the decode path should approach the memory bandwidth).
//! llama.cpp's MMQ is the other baseline of the issue: `benches/moe_llamacpp.py` sets the
//! figures of ggml's own benchmark from the same device run beside these rows.

use crate::attention_bench::per_launch_ms;
use crate::sgemm_bench::DeviceInfo;
use cukernels::cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cukernels::cudarc::driver::{CudaSlice, CudaStream};
use cukernels::{Cukernels, GgufFormat, MulMatId};
use half::f16;
use std::sync::Arc;

/// One benchmarked call.
#[derive(Clone, Debug)]
pub struct MoeShape {
    pub model: &'static str,
    pub format: GgufFormat,
    pub experts: usize,
    pub n_used: usize,
    pub n: usize,
    pub k: usize,
    pub tokens: usize,
    pub per_slot: bool,
    /// A forced path (`None`: the config's choice).
    pub path: Option<cukernels::MoePath>,
}

impl MoeShape {
    pub fn desc(&self) -> MulMatId {
        let d = MulMatId::new(self.format, self.experts, self.n, self.k, self.tokens, self.n_used);
        let d = if self.per_slot { d.per_slot_input() } else { d };
        match self.path {
            Some(p) => d.force_path(p),
            None => d,
        }
    }
    pub fn label(&self) -> String {
        let forced = match self.path {
            Some(p) => format!(" ({} forced)", p.name()),
            None => String::new(),
        };
        format!("{} {} T{} E{}/{} {}x{}{forced}", self.model, self.format, self.tokens, self.experts, self.n_used, self.n, self.k)
    }
}

/// A benchmarked model's expert matrices.
#[derive(Clone, Copy)]
struct MoeModel {
    name: &'static str,
    experts: usize,
    n_used: usize,
    n: usize,
    k: usize,
    /// One activation row per slot (as ggml's `test-backend-ops perf`), else one per token.
    per_slot: bool,
    /// The batch sizes at which the formats outside the main list are timed.
    other_formats_tokens: &'static [usize],
}

/// The shapes: Qwen3-30B-A3B-like (E 128, 8 used, N 768, K 2048) and llama.cpp's second
/// perf shape (E 32, 4 used, N 1792, K 2048), both with one activation row per slot as ggml's
/// `test-backend-ops perf` times them (so that `benches/moe_llamacpp.py` can set llama.cpp's
/// figures beside ours); a 512-expert, 10-used model (N 512, K 2048, one row per token); and a
/// dense N = K = 4096 matmul (one expert, one used); over the batch sizes and formats.
/// Then q4_0 on the first shape and the dense one with each path forced around the switch
/// (where it belongs is measured so).
pub fn shapes(quick: bool) -> Vec<MoeShape> {
    let tokens: &[usize] = if quick { &[1, 8, 512] } else { &[1, 8, 32, 128, 512, 2048] };
    let formats: &[GgufFormat] = if quick { &[GgufFormat::Q4_0] } else { &[GgufFormat::Q4_0, GgufFormat::Q8_0, GgufFormat::Q4K, GgufFormat::Q6K] };
    // The other formats run where the tensor-core tiles do (their tiles are chosen per format:
    // `moe_config.rs`), at the batch sizes of `other_formats_tokens`: Qwen3 at 128 tokens (the
    // 32-row tile) and 2048 (the tall one), llama.cpp's second shape at 128 (the 32-row tile)
    // and the dense matmul at 512 (tall, a grid of 256 blocks).
    let qwen3 = MoeModel { name: "qwen3-30b-a3b", experts: 128, n_used: 8, n: 768, k: 2048, per_slot: true, other_formats_tokens: &[128, 2048] };
    let llama_cpp_perf_2 = MoeModel { name: "llama.cpp perf 2", experts: 32, n_used: 4, n: 1792, k: 2048, per_slot: true, other_formats_tokens: &[128] };
    let many_experts = MoeModel { name: "512 experts", experts: 512, n_used: 10, n: 512, k: 2048, per_slot: false, other_formats_tokens: &[] };
    let dense = MoeModel { name: "dense", experts: 1, n_used: 1, n: 4096, k: 4096, per_slot: false, other_formats_tokens: &[512] };
    let models = [qwen3, llama_cpp_perf_2, many_experts, dense];
    let shape = |m: &MoeModel, format: GgufFormat, tokens: usize| MoeShape { model: m.name, format, experts: m.experts, n_used: m.n_used, n: m.n, k: m.k, tokens, per_slot: m.per_slot, path: None };
    let mut v = Vec::new();
    for m in &models {
        for &format in formats {
            for &tokens in tokens {
                v.push(shape(m, format, tokens));
            }
        }
    }
    if !quick {
        for format in GgufFormat::ALL.into_iter().filter(|f| !formats.contains(f)) {
            for m in &models {
                for &tokens in m.other_formats_tokens {
                    v.push(shape(m, format, tokens));
                }
            }
        }
        for t in [1, 8, 32, 128, 512] {
            for path in cukernels::MoePath::ALL {
                v.push(MoeShape { path: Some(path), ..shape(&dense, GgufFormat::Q4_0, t) });
            }
        }
        for t in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            for path in cukernels::MoePath::ALL {
                v.push(MoeShape { path: Some(path), ..shape(&qwen3, GgufFormat::Q4_0, t) });
            }
        }
    }
    v
}

/// One measured shape.
pub struct MoeRow {
    pub shape: MoeShape,
    pub ms: f64,
    pub cublas_ms: f64,
    /// Bytes of the distinct experts' weights the call reads.
    pub weight_bytes: f64,
    pub flops: f64,
    /// The path the call ran.
    pub path: cukernels::MoePath,
}

impl MoeRow {
    pub fn tflops(&self) -> f64 {
        self.flops / (self.ms * 1e-3) / 1e12
    }
    pub fn cublas_tflops(&self) -> f64 {
        self.flops / (self.cublas_ms * 1e-3) / 1e12
    }
    pub fn tbps(&self) -> f64 {
        self.weight_bytes / (self.ms * 1e-3) / 1e12
    }
    /// One JSON line; `artifact` is the module it ran (`build`: its compiler).
    pub fn to_json(&self, info: &DeviceInfo, commit: &str, date: &str, artifact: &cukernels::Artifact) -> String {
        let build = artifact.compiler.name();
        let s = &self.shape;
        let tbps = if s.tokens <= 8 { format!(",\"ours_tbps\":{:.3}", self.tbps()) } else { String::new() };
        format!(
            "{{\"op\":\"moe\",\"label\":\"{}\",\"model\":\"{}\",\"format\":\"{}\",\"tokens\":{},\"experts\":{},\"n_used\":{},\"n\":{},\"k\":{},\"x_rows\":\"{}\",\"path\":\"{}\",\"ours_ms\":{:.5},\"ours_tflops\":{:.3}{tbps},\"baseline\":\"cublas-f16\",\"baseline_ms\":{:.5},\"baseline_tflops\":{:.3},\"ratio\":{:.4},\"gpu\":\"{}\",\"artifact\":\"{artifact}\",\"build\":\"{build}\",\"commit\":\"{commit}\",\"date\":\"{date}\"}}",
            s.label(),
            s.model,
            s.format,
            s.tokens,
            s.experts,
            s.n_used,
            s.n,
            s.k,
            if s.per_slot { "n_used" } else { "1" },
            self.path.name(),
            self.ms,
            self.tflops(),
            self.cublas_ms,
            self.cublas_tflops(),
            self.cublas_ms / self.ms,
            info.name
        )
    }
}

/// A cheap deterministic stream of pseudo-random words.
fn hash(i: u64, seed: u64) -> u64 {
    let mut z = i.wrapping_add(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 31)
}

/// Times one shape: ours and the cuBLAS f16 baseline.
pub fn bench_moe(kernels: &Cukernels, blas: &CudaBlas, stream: &Arc<CudaStream>, s: &MoeShape, samples: usize) -> MoeRow {
    let d = s.desc();
    let lens = d.buffer_lengths().unwrap();
    // Weights: random bytes in the real layout. Quantizing 128 experts with the reference
    // quantizers would take minutes, and the kernels' time does not depend on the values (some
    // random f16 scales are NaN or infinite: the outputs are not looked at).
    let weights: Vec<u8> = (0..lens.weight_bytes).map(|i| hash(i as u64, 1) as u8).collect();
    let w = stream.clone_htod(&weights).unwrap();
    let x_host: Vec<f32> = (0..lens.x).map(|i| (hash(i as u64, 2) >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect();
    let x = stream.clone_htod(&x_host).unwrap();
    let mut ids_host = Vec::with_capacity(lens.ids);
    for t in 0..s.tokens {
        let mut row: Vec<i32> = Vec::new();
        let mut j = 0;
        while row.len() < s.n_used {
            let e = (hash((t * 64 + j) as u64, 3) % s.experts as u64) as i32;
            if !row.contains(&e) {
                row.push(e);
            }
            j += 1;
        }
        ids_host.extend(row);
    }
    let mut distinct = ids_host.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let ids = stream.clone_htod(&ids_host).unwrap();
    let mut y = stream.alloc_zeros::<f32>(lens.y).unwrap();
    let mut ws = stream.alloc_zeros::<u8>(d.workspace_bytes().unwrap()).unwrap();
    kernels.mul_mat_id_checked(stream, &d, &w, &x, &ids, &mut y, &mut ws).unwrap();
    let ms = per_launch_ms(stream, samples, || kernels.mul_mat_id(stream, &d, &w, &x, &ids, &mut y, &mut ws).unwrap());

    // cuBLAS: for each routed expert e, C_e[rows, n] = A_e[rows, k] · B_e[n, k]ᵀ in f16
    // (column-major: C_eᵀ = B_e · A_eᵀ), one strided-batched call.
    let slots = s.tokens * s.n_used;
    let batch = distinct.len();
    let rows = slots.div_ceil(batch);
    let a: CudaSlice<f16> = stream.clone_htod(&(0..batch * rows * s.k).map(|i| f16::from_f32(x_host[i % x_host.len()])).collect::<Vec<_>>()).unwrap();
    // One expert's random matrix, copied on the device into every expert's place.
    let one: CudaSlice<f16> = stream.clone_htod(&(0..s.n * s.k).map(|i| f16::from_f32((hash(i as u64, 4) >> 40) as f32 / (1u64 << 24) as f32 - 0.5)).collect::<Vec<_>>()).unwrap();
    let mut b: CudaSlice<f16> = stream.alloc_zeros(batch * s.n * s.k).unwrap();
    for e in 0..batch {
        stream.memcpy_dtod(&one, &mut b.slice_mut(e * s.n * s.k..(e + 1) * s.n * s.k)).unwrap();
    }
    let mut c: CudaSlice<f16> = stream.alloc_zeros(batch * rows * s.n).unwrap();
    let cfg = StridedBatchedConfig {
        gemm: GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: s.n as i32,
            n: rows as i32,
            k: s.k as i32,
            alpha: f16::ONE,
            lda: s.k as i32,
            ldb: s.k as i32,
            beta: f16::ZERO,
            ldc: s.n as i32,
        },
        batch_size: batch as i32,
        stride_a: (s.n * s.k) as i64,
        stride_b: (rows * s.k) as i64,
        stride_c: (rows * s.n) as i64,
    };
    // SAFETY: the buffers hold exactly the elements the config addresses (b: batch × n × k,
    // a: batch × rows × k, c: batch × rows × n).
    let cublas_ms = per_launch_ms(stream, samples, || unsafe { blas.gemm_strided_batched(cfg, &b, &a, &mut c).unwrap() });
    let expert_bytes = (lens.weight_bytes / s.experts) as f64;
    MoeRow {
        shape: s.clone(),
        ms,
        cublas_ms,
        weight_bytes: expert_bytes * distinct.len() as f64,
        flops: 2.0 * slots as f64 * s.n as f64 * s.k as f64,
        path: d.matmul_path(kernels.moe_config()),
    }
}
