//! Flash attention, timed on the GPU: the shapes of the attention issue (prefill at batch 4,
//! seq 4096 and 16384, heads 64/128/256, causal and not, f16 and bf16, GQA 8; decode of one
//! query against 8k to 128k keys at batch 1 and 16; llama.cpp's own decode and prefill
//! shapes). Each figure is the median over samples of many back-to-back launches between two
//! CUDA events (a decode step takes a few µs: one launch between two events would time the
//! launch, not the kernel). `benches/attention_torch.py` then times PyTorch's
//! `scaled_dot_product_attention` (flash and cuDNN backends) on the same shapes on the same GPU
//! and adds the ratios.

use crate::sgemm_bench::DeviceInfo;
use cukernels::cudarc::driver::sys::CUevent_flags;
use cukernels::cudarc::driver::{CudaSlice, CudaStream};
use cukernels::{Attention, AttentionDtype, AttentionElement, AttentionExtras, Cukernels, DeviceTables, PagedKv};
use std::sync::Arc;

/// One benchmark shape.
#[derive(Clone, Debug)]
pub struct AttentionShape {
    /// `prefill` or `decode`.
    pub kind: &'static str,
    /// A short name of where the shape comes from.
    pub group: &'static str,
    pub batch: usize,
    pub seqlen_q: usize,
    pub seqlen_k: usize,
    pub heads_q: usize,
    pub heads_k: usize,
    pub head_dim: usize,
    pub causal: bool,
    pub dtype: AttentionDtype,
    /// Splits forced on a decode launch (the split sweep, which measures the split rule);
    /// `None`: the plan's choice.
    pub splits: Option<usize>,
    /// Paged K/V (the sequences' pages interleaved in the cache); `None`: contiguous K/V.
    pub paged: Option<PagedShape>,
}

/// A paged shape's cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedShape {
    /// Where the block table lives.
    pub table: TableSource,
    /// Tokens per page.
    pub page_size: usize,
}

/// Where a paged shape's block table lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableSource {
    /// In the problem: checked and uploaded by every call (not capturable).
    Host,
    /// A device buffer (`DeviceTables`): checked on the device by the check launch.
    Device,
}

/// Tokens per page of the paged rows: vLLM's default (16), mistral.rs's (32), and 64, which
/// holds whole key tiles of every decode tile (each path of the tile copy, `device/attention`).
pub const PAGED_PAGE_SIZES: [usize; 3] = [16, 32, 64];

/// The page size at which the host-table rows are timed beside the device-table rows.
pub const HOST_TABLE_PAGE_SIZE: usize = 64;

/// The group of the paged rows (ours only: PyTorch's SDPA has no paged K/V).
pub const PAGED_DECODE: &str = "paged decode";

impl AttentionShape {
    pub fn desc(&self) -> Attention {
        let d = Attention::new(self.batch, self.seqlen_q, self.seqlen_k, self.heads_q, self.heads_k, self.head_dim);
        let d = if self.causal { d.causal() } else { d };
        let d = match self.splits {
            Some(n) => d.splits(n),
            None => d,
        };
        match self.paged {
            None => d,
            Some(paged) => {
                let pages_per_seq = self.seqlen_k.div_ceil(paged.page_size);
                let table = match paged.table {
                    TableSource::Host => self.block_table(),
                    TableSource::Device => Vec::new(),
                };
                d.paged(PagedKv { block_table: table, ..PagedKv::on_device(paged.page_size, self.batch * pages_per_seq, pages_per_seq) })
            }
        }
    }
    /// The block table of a paged shape: sequence `b`'s page `i` is `i · batch + b`, so that
    /// each sequence's pages are spread over the cache (empty for a contiguous shape).
    pub fn block_table(&self) -> Vec<u32> {
        let Some(paged) = self.paged else { return Vec::new() };
        let pages_per_seq = self.seqlen_k.div_ceil(paged.page_size);
        (0..self.batch).flat_map(|b| (0..pages_per_seq).map(move |i| (i * self.batch + b) as u32)).collect::<Vec<_>>()
    }
    pub fn label(&self) -> String {
        format!(
            "{} b{} q{} k{} h{}/{} d{}{} {}{}{}",
            self.kind,
            self.batch,
            self.seqlen_q,
            self.seqlen_k,
            self.heads_q,
            self.heads_k,
            self.head_dim,
            if self.causal { " causal" } else { "" },
            self.dtype.name(),
            self.splits.map_or(String::new(), |n| format!(" splits {n}")),
            match self.paged {
                None => String::new(),
                Some(PagedShape { table: TableSource::Host, page_size }) => format!(" paged host, page {page_size}"),
                Some(PagedShape { table: TableSource::Device, page_size }) => format!(" paged device, page {page_size}"),
            },
        )
    }
    /// Bytes of K and V one pass reads.
    pub fn kv_bytes(&self) -> f64 {
        (self.batch * self.seqlen_k * self.heads_k * 2 * self.head_dim * 2) as f64
    }
}

/// The group of the split-sweep rows.
pub const SPLIT_SWEEP: &str = "decode split sweep";

/// The shapes.
pub fn shapes() -> Vec<AttentionShape> {
    let mut v = Vec::new();
    let s = |kind, group, batch, seqlen_q, seqlen_k, heads_q, heads_k, head_dim, causal, dtype| AttentionShape {
        kind,
        group,
        batch,
        seqlen_q,
        seqlen_k,
        heads_q,
        heads_k,
        head_dim,
        causal,
        dtype,
        splits: None,
        paged: None,
    };
    for dtype in AttentionDtype::ALL {
        for seq in [4096, 16384] {
            for d in [64, 128, 256] {
                for causal in [false, true] {
                    // Hidden size 2048: 32, 16 or 8 heads.
                    v.push(s("prefill", "prefill", 4, seq, seq, 2048 / d, 2048 / d, d, causal, dtype));
                }
            }
        }
        v.push(s("prefill", "prefill GQA 8", 4, 4096, 4096, 32, 4, 128, true, dtype));
    }
    for kv in [8192, 32768, 131072] {
        for batch in [1, 16] {
            v.push(s("decode", "decode", batch, 1, kv, 32, 8, 128, false, AttentionDtype::F16));
        }
    }
    // llama.cpp's shapes (DESIGN.md): decode head 128, 8 KV heads, GQA 4, 16384 keys (also
    // "one sequence"); decode head 256, 2 KV heads, GQA 16, 20000 keys; prefill head 256,
    // GQA 16, 512 queries against 20000 keys (non-causal here: PyTorch's `is_causal` aligns
    // top-left, and the causal triangle is 1% of these scores).
    v.push(s("decode", "llama.cpp decode", 1, 1, 16384, 32, 8, 128, false, AttentionDtype::F16));
    v.push(s("decode", "llama.cpp decode", 1, 1, 20000, 32, 2, 256, false, AttentionDtype::F16));
    for dtype in AttentionDtype::ALL {
        v.push(s("prefill", "llama.cpp prefill", 1, 512, 20000, 32, 2, 256, false, dtype));
    }
    // Paged decode beside contiguous K/V, at each page size (each takes its own path of the
    // tile copy), the block table on the device (checked by the check launch, capturable);
    // and once on the host (uploaded per call), for what the device tables cost.
    for (batch, kv) in [(1, 16384), (16, 8192)] {
        let paged = |table, page_size| AttentionShape { paged: Some(PagedShape { table, page_size }), ..s("decode", PAGED_DECODE, batch, 1, kv, 32, 8, 128, false, AttentionDtype::F16) };
        v.push(paged(TableSource::Host, HOST_TABLE_PAGE_SIZE));
        for page_size in PAGED_PAGE_SIZES {
            v.push(paged(TableSource::Device, page_size));
        }
    }
    // The split sweep: one sequence's decode with the split count forced, to measure the split
    // rule (ours only; the PyTorch script skips the group).
    let sweep: [(usize, usize, usize, usize, &[usize]); 5] = [
        (1, 8192, 8, 128, &[8, 16, 24, 33, 48, 64]),
        (1, 16384, 8, 128, &[16, 24, 28, 32, 33, 40, 48, 64, 66, 99, 128]),
        (1, 131072, 8, 128, &[16, 24, 32, 33, 64, 128]),
        (1, 20000, 2, 256, &[32, 48, 56, 64, 66, 72, 80, 96, 128]),
        (16, 32768, 8, 128, &[1, 2, 3, 4, 5]),
    ];
    for (batch, kv, heads_k, d, counts) in sweep {
        for &n in counts {
            v.push(AttentionShape { splits: Some(n), ..s("decode", SPLIT_SWEEP, batch, 1, kv, 32, heads_k, d, false, AttentionDtype::F16) });
        }
    }
    v
}

/// Median milliseconds per launch of `run`: `samples` samples, each `inner` back-to-back
/// launches between two events (`inner` chosen so that a sample takes about a millisecond).
pub fn per_launch_ms(stream: &Arc<CudaStream>, samples: usize, run: impl FnMut()) -> f64 {
    per_launch_timing(stream, samples, run).ms
}

/// What [`per_launch_timing`] measured.
#[derive(Clone, Copy, Debug)]
pub struct LaunchTiming {
    /// Median GPU milliseconds per launch (CUDA events).
    pub ms: f64,
    /// Host milliseconds per call of `run` over the timed samples: where it comes close to
    /// `ms`, the host could not queue launches faster than the GPU ran them, and `ms` timed
    /// the host.
    pub host_ms: f64,
    /// Back-to-back launches per sample.
    pub inner: usize,
}

/// [`per_launch_ms`], with the host's time per call.
pub fn per_launch_timing(stream: &Arc<CudaStream>, samples: usize, mut run: impl FnMut()) -> LaunchTiming {
    let ctx = stream.context();
    let ev = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
    for _ in 0..3 {
        run();
    }
    let (a, b) = (ev(), ev());
    a.record(stream).unwrap();
    run();
    b.record(stream).unwrap();
    stream.synchronize().unwrap();
    let one = (a.elapsed_ms(&b).unwrap() as f64).max(1e-4);
    let inner = ((1.0 / one).ceil() as usize).clamp(1, 2000);
    // About 30 ms more before timing, so that the GPU's clocks are up again after the idle
    // setup of the shape: without it, the first row of a MoE run read 9.2 µs for a call that
    // read 6.5 µs later in the same run (11 samples of about 1 ms each are over before the
    // clocks have risen).
    for _ in 0..30 * inner {
        run();
    }
    let (ms, host_ms) = timed_samples(stream, samples, inner, || {
        for _ in 0..inner {
            run();
        }
    });
    LaunchTiming { ms, host_ms, inner }
}

/// Runs `sample` (which queues `calls` calls) `samples` times, each between two CUDA events,
/// and returns the median GPU milliseconds per call and the host's milliseconds per call.
fn timed_samples(stream: &Arc<CudaStream>, samples: usize, calls: usize, mut sample: impl FnMut()) -> (f64, f64) {
    let ctx = stream.context();
    let events: Vec<_> = (0..samples).map(|_| (ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap(), ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap())).collect();
    let host = std::time::Instant::now();
    for (start, end) in &events {
        start.record(stream).unwrap();
        sample();
        end.record(stream).unwrap();
    }
    let host_ms = host.elapsed().as_secs_f64() * 1e3 / (samples * calls) as f64;
    stream.synchronize().unwrap();
    let mut per_call: Vec<f64> = events.iter().map(|(s, e)| s.elapsed_ms(e).unwrap() as f64 / calls as f64).collect();
    per_call.sort_by(|x, y| x.partial_cmp(y).unwrap());
    (per_call[per_call.len() / 2], host_ms)
}

/// Median milliseconds per call of `run` replayed from a CUDA graph: `inner` calls captured
/// once, the graph launched `samples` times between events (after 30 warm-up launches). No
/// host work sits between the calls, so this is the GPU's time even where the host cannot
/// keep up with back-to-back launches. `None` (with the reason on stderr) where the calls
/// cannot be captured.
pub fn per_graph_ms(stream: &Arc<CudaStream>, samples: usize, inner: usize, mut run: impl FnMut() -> Result<(), String>) -> Option<f64> {
    use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    if let Err(e) = stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) {
        eprintln!("graph capture refused (the legacy default stream cannot be captured): {e}");
        return None;
    }
    let mut failed = None;
    for _ in 0..inner {
        if let Err(e) = run() {
            failed = Some(e);
            break;
        }
    }
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    let graph = match (failed, graph) {
        (None, Ok(Some(g))) => g,
        (failed, graph) => {
            eprintln!("graph capture failed: {failed:?} {:?}", graph.err());
            return None;
        }
    };
    for _ in 0..30 {
        graph.launch().unwrap();
    }
    Some(timed_samples(stream, samples, inner, || graph.launch().unwrap()).0)
}

/// One measured shape.
pub struct AttentionRow {
    pub shape: AttentionShape,
    pub ms: f64,
    /// Host milliseconds per call while timing `ms` ([`LaunchTiming::host_ms`]).
    pub host_ms: f64,
    /// Milliseconds per call replayed from a CUDA graph (decode shapes; `None` for prefill,
    /// whose launches the host outpaces by far, or where the capture failed).
    pub graph_ms: Option<f64>,
    /// Calls per graph (and per event sample) behind `graph_ms`; the PyTorch script captures
    /// as many.
    pub graph_inner: usize,
    pub splits: usize,
    pub heads_packed: usize,
}

impl AttentionRow {
    pub fn tflops(&self) -> f64 {
        self.shape.desc().flops() / (self.ms * 1e-3) / 1e12
    }
    pub fn tbps(&self) -> f64 {
        self.shape.kv_bytes() / (self.ms * 1e-3) / 1e12
    }
    /// One JSON line (the PyTorch script adds its baselines and ratios to it).
    /// One JSON line; `artifact` is the module it ran (`build`: its compiler).
    pub fn to_json(&self, info: &DeviceInfo, commit: &str, date: &str, artifact: &cukernels::Artifact) -> String {
        let build = artifact.compiler.name();
        let s = &self.shape;
        format!(
            "{{\"op\":\"attention\",\"kind\":\"{}\",\"group\":\"{}\",\"label\":\"{}\",\"date\":\"{date}\",\"gpu\":\"{}\",\"commit\":\"{commit}\",\"artifact\":\"{artifact}\",\"build\":\"{build}\",\"batch\":{},\"seqlen_q\":{},\"seqlen_k\":{},\"heads_q\":{},\"heads_k\":{},\"head_dim\":{},\"causal\":{},\"dtype\":\"{}\",\"flops\":{},\"kv_bytes\":{},\"splits\":{},\"heads_packed\":{},\"ours_ms\":{:.5},\"ours_tflops\":{:.2},\"ours_tbps\":{:.3},\"host_ms\":{:.5},\"graph_ms\":{},\"graph_inner\":{}}}",
            s.kind,
            s.group,
            s.label(),
            info.name,
            s.batch,
            s.seqlen_q,
            s.seqlen_k,
            s.heads_q,
            s.heads_k,
            s.head_dim,
            s.causal,
            s.dtype.name(),
            s.desc().flops(),
            s.kv_bytes(),
            self.splits,
            self.heads_packed,
            self.ms,
            self.tflops(),
            self.tbps(),
            self.host_ms,
            self.graph_ms.map_or("null".to_string(), |g| format!("{g:.5}")),
            self.graph_inner
        )
    }
}

fn bench_typed<T: AttentionElement + Copy>(kernels: &Cukernels, stream: &Arc<CudaStream>, s: &AttentionShape, samples: usize, from_f32: fn(f32) -> T) -> AttentionRow {
    let d = s.desc();
    let n = d.buffer_lengths().unwrap();
    let fill = |len: usize, seed: u32| -> CudaSlice<T> {
        let host: Vec<T> = (0..len).map(|i| from_f32(((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32 / (1u32 << 24) as f32 - 0.5)).collect();
        stream.clone_htod(&host).unwrap()
    };
    let (q, k, v) = (fill(n.q, 1), fill(n.k, 2), fill(n.v, 3));
    let mut o: CudaSlice<T> = stream.clone_htod(&vec![from_f32(0.0); n.o]).unwrap();
    let plan = d.plan(T::DTYPE, &d.placeholder_buffers().unwrap(), kernels.attention_config(), kernels.sm_count()).unwrap();
    let table: Option<CudaSlice<u32>> = s.paged.is_some_and(|p| p.table == TableSource::Device).then(|| stream.clone_htod(&s.block_table()).unwrap());
    let extras = || AttentionExtras { tables: DeviceTables { block_table: table.as_ref(), ..DeviceTables::default() }, ..AttentionExtras::default() };
    let t = per_launch_timing(stream, samples, || kernels.attention(stream, &d, &q, &k, &v, &mut o, extras()).unwrap());
    // (Host tables are uploaded by every call, which a graph cannot replay.)
    let capturable = s.kind == "decode" && !s.paged.is_some_and(|p| p.table == TableSource::Host);
    let graph_ms = capturable.then(|| per_graph_ms(stream, samples, t.inner, || kernels.attention(stream, &d, &q, &k, &v, &mut o, extras()).map_err(|e| e.to_string()))).flatten();
    if table.is_some() {
        kernels.attention_table_error(stream).unwrap_or_else(|e| panic!("{}: {e}", s.label()));
    }
    AttentionRow { shape: s.clone(), ms: t.ms, host_ms: t.host_ms, graph_ms, graph_inner: t.inner, splits: plan.splits, heads_packed: plan.heads_packed }
}

/// Times one shape with our kernels.
pub fn bench_attention(kernels: &Cukernels, stream: &Arc<CudaStream>, s: &AttentionShape, samples: usize) -> AttentionRow {
    match s.dtype {
        AttentionDtype::F16 => bench_typed::<half::f16>(kernels, stream, s, samples, half::f16::from_f32),
        AttentionDtype::Bf16 => bench_typed::<half::bf16>(kernels, stream, s, samples, half::bf16::from_f32),
    }
}
