//! Flash attention on a real GPU, with every architecture's config: on an sm_90 device the
//! PTX of sm_70 to sm_89 (JIT-compiled by the driver: their configs and their matrix paths,
//! including sm_70's shuffle path and sm_75's m16n8k8 pairs), the sm_90 cubin, and the sm_100
//! and sm_120 rows built for sm_90 (`config-probes`). Each case draws fresh random inputs
//! (rounded to f16/bf16; the reference reads the rounded values), computes an f64 reference
//! once, then for every config poisons O (NaN everywhere, gaps included) and the LSE, runs,
//! and checks every element per element: `|o − ref| ≤ atol + rtol·|ref|` with
//! (atol, rtol) = (4e-3, 4e-3) for f16 and (2e-2, 2e-2) for bf16 (P is rounded to the element
//! type before P·V, as in FlashAttention-2), no NaN, every addressed element written and every
//! gap element left as it was.
//!
//! These tests need a CUDA GPU and are `#[ignore]`d otherwise: run them with
//! `cargo test -p cukernels-tests --test gpu_attention -- --ignored` (or `scripts/device-run.sh`).
//! `CUKERNELS_TEST_QUICK=1` keeps only the small cases (for compute-sanitizer runs).

use cukernels::cudarc::driver::{CudaSlice, CudaStream};
use cukernels::{
    Alibi, Arch, Attention, AttentionDtype, AttentionElement, AttentionExtras, Cukernels, DeviceTables, Error, KernelFamily, MaskBuffer,
    MaskShape, PagedKv, Strides,
};
use cukernels_tests::attention_ref::{attention_reference, AttentionExpected, AttentionInputs};
use cukernels_tests::{config_handles, rng, UntrackedAllocations};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use std::sync::Arc;

struct Gpu {
    stream: Arc<CudaStream>,
    /// One handle per architecture config this device can run (cubin where one runs).
    handles: Vec<Cukernels>,
}

fn gpu() -> Gpu {
    let (stream, handles) = config_handles(KernelFamily::Attention, &Arch::ALL);
    Gpu { stream, handles }
}

fn quick() -> bool {
    std::env::var("CUKERNELS_TEST_QUICK").is_ok_and(|v| v == "1")
}

trait Element: AttentionElement + Copy + Send + Sync + 'static {
    const ATOL: f64;
    const RTOL: f64;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    fn bits(self) -> u16;
}
impl Element for f16 {
    const ATOL: f64 = 4e-3;
    const RTOL: f64 = 4e-3;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn bits(self) -> u16 {
        self.to_bits()
    }
}
impl Element for bf16 {
    const ATOL: f64 = 2e-2;
    const RTOL: f64 = 2e-2;
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn bits(self) -> u16 {
        self.to_bits()
    }
}

/// What the mask of a case holds.
#[derive(Clone, Copy, PartialEq)]
enum MaskKind {
    None,
    F16,
    F32,
}

/// One test case: a problem, the mask's element type, and layout twists.
#[derive(Clone)]
struct Case {
    name: String,
    desc: Attention,
    mask: MaskKind,
    /// Q, K, V and O start one element into their buffers (no 16-byte vectors).
    unaligned: bool,
    /// V is K's buffer (its first `head_dim_v` columns), as MLA's latent cache.
    v_is_k: bool,
    /// Scale of Q's random values (larger: sharper softmax).
    q_scale: f32,
    /// The block table, key lengths, ALiBi slopes and sinks go to the GPU as device buffers
    /// (`DeviceTables`) instead of in the problem; the reference reads the host ones.
    device_tables: bool,
}

impl Case {
    fn new(name: impl Into<String>, desc: Attention) -> Case {
        Case { name: name.into(), desc, mask: MaskKind::None, unaligned: false, v_is_k: false, q_scale: 1.0, device_tables: false }
    }
    fn mask(mut self, kind: MaskKind) -> Case {
        self.mask = kind;
        let d = &self.desc;
        self.desc.mask = Some(MaskShape { rows: d.seqlen_q, cols: d.seqlen_k, row_stride: d.seqlen_k + 3 });
        self
    }
}

/// The host tables of a problem, taken out of it: what a call passes as `DeviceTables`.
#[derive(Clone, Default)]
struct HostTables {
    cu_seqlens_q: Option<Vec<u32>>,
    cu_seqlens_k: Option<Vec<u32>>,
    block_table: Option<Vec<u32>>,
    seqlens_k: Option<Vec<u32>>,
    alibi_slopes: Option<Vec<f32>>,
    sinks: Option<Vec<f32>>,
}

/// `d` without its host tables (the same problem once they are passed on the device), and
/// the tables.
fn tables_taken_out(d: &Attention) -> (Attention, HostTables) {
    let mut bare = d.clone();
    let mut tables = HostTables::default();
    if let Some(v) = &mut bare.varlen {
        // (The totals and the packed strides stay: `Attention::varlen_on_device`'s.)
        tables.cu_seqlens_q = Some(std::mem::take(&mut v.cu_seqlens_q));
        tables.cu_seqlens_k = Some(std::mem::take(&mut v.cu_seqlens_k));
    }
    if let Some(pg) = &mut bare.paged {
        tables.block_table = Some(std::mem::take(&mut pg.block_table));
        tables.seqlens_k = pg.seqlens_k.take();
    }
    tables.alibi_slopes = bare.alibi.take().map(|a| match a {
        Alibi::Slopes(s) => s,
        Alibi::MaxBias(b) => cukernels::alibi_slopes(d.heads_q, b),
    });
    tables.sinks = bare.sinks.take();
    (bare, tables)
}

/// Device copies of [`HostTables`].
struct DeviceCopies {
    cu_seqlens_q: Option<CudaSlice<u32>>,
    cu_seqlens_k: Option<CudaSlice<u32>>,
    block_table: Option<CudaSlice<u32>>,
    seqlens_k: Option<CudaSlice<u32>>,
    alibi_slopes: Option<CudaSlice<f32>>,
    sinks: Option<CudaSlice<f32>>,
}

impl DeviceCopies {
    fn new(stream: &Arc<CudaStream>, t: &HostTables) -> DeviceCopies {
        DeviceCopies {
            cu_seqlens_q: t.cu_seqlens_q.as_ref().map(|v| upload(stream, v)),
            cu_seqlens_k: t.cu_seqlens_k.as_ref().map(|v| upload(stream, v)),
            block_table: t.block_table.as_ref().map(|v| upload(stream, v)),
            seqlens_k: t.seqlens_k.as_ref().map(|v| upload(stream, v)),
            alibi_slopes: t.alibi_slopes.as_ref().map(|v| upload(stream, v)),
            sinks: t.sinks.as_ref().map(|v| upload(stream, v)),
        }
    }
    fn tables(&self) -> DeviceTables<'_> {
        DeviceTables {
            cu_seqlens_q: self.cu_seqlens_q.as_ref(),
            cu_seqlens_k: self.cu_seqlens_k.as_ref(),
            block_table: self.block_table.as_ref(),
            seqlens_k: self.seqlens_k.as_ref(),
            alibi_slopes: self.alibi_slopes.as_ref(),
            sinks: self.sinks.as_ref(),
        }
    }
}

fn round<T: Element>(x: &[f32]) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = x.iter().map(|&v| T::from_f32(v)).collect();
    let back = t.iter().map(|v| v.to_f32()).collect();
    (t, back)
}

fn random(rng: &mut StdRng, len: usize, scale: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0) * scale).collect()
}

fn upload<T: cukernels::cudarc::driver::DeviceRepr>(stream: &Arc<CudaStream>, v: &[T]) -> CudaSlice<T> {
    stream.clone_htod(v).unwrap()
}

/// Runs `case` in element type `T` on every config and checks it.
fn run_case<T: Element>(gpu: &Gpu, case: &Case) {
    let label = format!("{} {:?}", case.name, T::DTYPE);
    let mut rng = rng(&label);
    let d = &case.desc;
    let lengths = d.buffer_lengths().unwrap();
    let off = usize::from(case.unaligned);
    let (q_host, q) = round::<T>(&random(&mut rng, lengths.q + off, case.q_scale));
    let (k_host, k) = round::<T>(&random(&mut rng, lengths.k.max(lengths.v) + off, 1.0));
    let (v_host, v) = if case.v_is_k { (k_host.clone(), k.clone()) } else { round::<T>(&random(&mut rng, lengths.v + off, 1.0)) };
    // The mask: values in [-3, 0], and a tenth of the entries −inf, plus whole rows of −inf.
    let mask_f32: Option<Vec<f32>> = d.mask.map(|m| {
        let mut x: Vec<f32> = (0..(m.rows - 1) * m.row_stride + m.cols).map(|_| if rng.random_bool(0.1) { f32::NEG_INFINITY } else { rng.random_range(-3.0f32..0.0) }).collect();
        if m.rows > 2 {
            for c in 0..m.cols {
                x[m.row_stride + c] = f32::NEG_INFINITY;
            }
        }
        if case.mask == MaskKind::F16 {
            x = x.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        }
        x
    });
    let inputs = AttentionInputs { q: &q[off..], k: &k[off..], v: &v[off..], mask: mask_f32.as_deref() };
    let expected: AttentionExpected = attention_reference(d, &inputs);
    assert!(expected.o.iter().all(|x| x.1.is_finite()), "{label}: the reference has a non-finite output");

    let stream = &gpu.stream;
    let q_dev = upload(stream, &q_host);
    let k_dev = upload(stream, &k_host);
    let v_dev = upload(stream, &v_host);
    let mask16 = mask_f32.as_ref().filter(|_| case.mask == MaskKind::F16).map(|m| upload(stream, &m.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>()));
    let mask32 = mask_f32.as_ref().filter(|_| case.mask == MaskKind::F32).map(|m| upload(stream, m));
    // With device tables the call gets the problem without its host tables.
    let (launch_desc, device_copies) = if case.device_tables {
        let (bare, tables) = tables_taken_out(d);
        (bare, Some(DeviceCopies::new(stream, &tables)))
    } else {
        (d.clone(), None)
    };
    let poison = T::from_f32(f32::NAN);
    let o_len = lengths.o + off + 5;
    let mut written = vec![false; o_len];
    for &(i, _) in &expected.o {
        written[i + off] = true;
    }
    for h in &gpu.handles {
        let who = format!("{label} [{}]", h.artifact(KernelFamily::Attention));
        let mut o_dev = upload(stream, &vec![poison; o_len]);
        let mut lse_dev = upload(stream, &vec![f32::NAN; lengths.lse.max(1)]);
        let (q_view, k_view, v_view) = (q_dev.slice(off..), k_dev.slice(off..), if case.v_is_k { k_dev.slice(off..) } else { v_dev.slice(off..) });
        let mut o_view = o_dev.slice_mut(off..);
        let extras = AttentionExtras {
            mask: match (&mask16, &mask32) {
                (Some(m), _) => Some(MaskBuffer::F16(m)),
                (_, Some(m)) => Some(MaskBuffer::F32(m)),
                _ => None,
            },
            lse: if d.lse { Some(&mut lse_dev) } else { None },
            tables: device_copies.as_ref().map_or_else(DeviceTables::default, DeviceCopies::tables),
        };
        h.attention(stream, &launch_desc, &q_view, &k_view, &v_view, &mut o_view, extras).unwrap_or_else(|e| panic!("{who}: {e}"));
        h.attention_table_error(stream).unwrap_or_else(|e| panic!("{who}: valid tables reported as bad: {e}"));
        drop(o_view);
        let o: Vec<T> = stream.clone_dtoh(&o_dev).unwrap();
        stream.synchronize().unwrap_or_else(|e| panic!("{who}: {e}"));
        let mut bad = Vec::new();
        for &(i, want) in &expected.o {
            let got = o[i + off].to_f32() as f64;
            if !(got - want).abs().le(&(T::ATOL + T::RTOL * want.abs())) {
                bad.push(format!("O[{i}] = {got} (want {want})"));
            }
        }
        for (i, was_written) in written.iter().enumerate() {
            if !was_written && o[i].bits() != poison.bits() {
                bad.push(format!("O[{}] outside the output was overwritten ({})", i as i64 - off as i64, o[i].to_f32()));
            }
        }
        if d.lse {
            let lse: Vec<f32> = stream.clone_dtoh(&lse_dev).unwrap();
            for &(i, want) in &expected.lse {
                let got = lse[i] as f64;
                let ok = if want == f64::NEG_INFINITY { got == f64::NEG_INFINITY } else { (got - want).abs() <= 2e-3 + 1e-3 * want.abs() };
                if !ok {
                    bad.push(format!("LSE[{i}] = {got} (want {want})"));
                }
            }
        }
        assert!(bad.is_empty(), "{who}: {} wrong of {} ({} splits?):\n{}", bad.len(), expected.o.len(), d.splits.unwrap_or(0), bad.iter().take(12).cloned().collect::<Vec<_>>().join("\n"));
    }
}

fn run(gpu: &Gpu, cases: &[Case], dtypes: &[AttentionDtype]) {
    for case in cases {
        for &dt in dtypes {
            match dt {
                AttentionDtype::F16 => run_case::<f16>(gpu, case),
                AttentionDtype::Bf16 => run_case::<bf16>(gpu, case),
            }
        }
    }
}

const BOTH: [AttentionDtype; 2] = [AttentionDtype::F16, AttentionDtype::Bf16];

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_head_size_causal_and_not_with_gqa() {
    let gpu = gpu();
    let mut cases = Vec::new();
    for (dk, dv) in [(64, 64), (80, 80), (96, 96), (112, 112), (128, 128), (192, 192), (256, 256), (192, 128), (320, 256), (576, 512)] {
        cases.push(Case::new(format!("head {dk}/{dv}, 113×113, GQA 2"), Attention::new(2, 113, 113, 4, 2, dk).head_dim_v(dv)));
        cases.push(Case::new(format!("head {dk}/{dv}, causal 17×113, MQA"), Attention::new(1, 17, 113, 3, 1, dk).head_dim_v(dv).causal().with_lse()));
        // 3 positions × 4 packed heads: the decode tile, its keys split over blocks.
        cases.push(Case::new(format!("head {dk}/{dv}, decode causal 3×300, GQA 4"), Attention::new(2, 3, 300, 8, 2, dk).head_dim_v(dv).causal().with_lse()));
    }
    run(&gpu, &cases, &BOTH);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sequence_lengths_both_ways() {
    let gpu = gpu();
    let mut cases = Vec::new();
    let lens: &[usize] = if quick() { &[1, 17, 113] } else { &[1, 17, 113, 1000, 4097] };
    for &lq in lens {
        for &lk in lens {
            if lq * lk > 1_000_000 && lq != lk {
                continue;
            }
            cases.push(Case::new(format!("{lq}×{lk} causal"), Attention::new(1, lq, lk, 2, 1, 128).causal().with_lse()));
            if lq <= 1000 && lk <= 1000 {
                cases.push(Case::new(format!("{lq}×{lk}"), Attention::new(2, lq, lk, 2, 2, 64)));
            }
        }
    }
    run(&gpu, &cases, &BOTH);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gqa_ratios_prefill_and_decode() {
    let gpu = gpu();
    let mut cases = Vec::new();
    for ratio in [1, 4, 8, 16, 32, 48] {
        cases.push(Case::new(format!("GQA {ratio} prefill 77×77"), Attention::new(1, 77, 77, 2 * ratio, 2, 128).causal()));
        for lq in [1, 3, 16] {
            cases.push(Case::new(format!("GQA {ratio} decode {lq}×1500"), Attention::new(2, lq, 1500, 2 * ratio, 2, 128).causal().with_lse()));
        }
    }
    run(&gpu, &cases, &[AttentionDtype::F16]);
}

/// Distinct ALiBi slopes for 8 heads (0.05 … 0.82), so a head mixed up with another shows.
fn alibi_slopes_of_8_heads() -> Vec<f32> {
    (0..8).map(|h| 0.05 + 0.11 * h as f32).collect()
}

/// Distinct attention-sink logits for 8 heads, negative to positive (−1.5 … 3.4): a sink that
/// takes little of the softmax and one that takes most of it.
fn sinks_of_8_heads() -> Vec<f32> {
    (0..8).map(|h| -1.5 + 0.7 * h as f32).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn masks_biases_softcap_sinks_alone_and_combined() {
    let gpu = gpu();
    let base = || Attention::new(2, 113, 200, 8, 2, 64);
    let (slopes, sinks) = (alibi_slopes_of_8_heads(), sinks_of_8_heads());
    let cases = vec![
        Case::new("mask f16", base()).mask(MaskKind::F16),
        Case::new("mask f32 with -inf rows", base().with_lse()).mask(MaskKind::F32),
        Case::new("ALiBi slopes", base().alibi(Alibi::Slopes(slopes.clone()))),
        Case::new("ALiBi max_bias 8", base().alibi(Alibi::MaxBias(8.0)).causal()),
        Case::new("softcap 5 (sharp scores)", base().softcap(5.0)).q_scale_by(4.0),
        Case::new("sinks", base().sinks(sinks.clone()).with_lse()),
        Case::new("sliding window 30/0", base().window(Some(30), Some(0))),
        Case::new("sliding window 20/9 non-causal", base().window(Some(20), Some(9)).with_lse()),
        Case::new("scale 0.3", base().scale(0.3)),
        Case::new(
            "everything: mask, ALiBi, softcap, sinks, window, causal, LSE, scale",
            base().alibi(Alibi::Slopes(slopes)).softcap(20.0).sinks(sinks).window(Some(50), None).causal().scale(0.2).with_lse(),
        )
        .mask(MaskKind::F32),
        Case::new("causal, seqlen_q > seqlen_k: top rows see nothing", Attention::new(1, 150, 40, 2, 2, 64).causal().with_lse()),
        Case::new("causal + sinks, seqlen_q > seqlen_k", Attention::new(1, 150, 40, 2, 2, 64).causal().sinks(vec![0.5, -0.5]).with_lse()),
    ];
    run(&gpu, &cases, &BOTH);
}

/// The same features on the decode tile, whose warps split each key tile (`key_split`): 3
/// queries × 4 packed heads fit its 16 rows, and 201 keys end inside a key tile, so in the last
/// tile some warps hold a few visible keys and others none (their keys all past the
/// sequence). Heads 64, 128 and 256 (16 keys per warp, all or half of `D_v`), forced splits
/// included, so each warp's softmax state meets both the block's merge and the splits' merge.
#[test]
#[ignore = "needs a CUDA GPU"]
fn decode_tile_masks_biases_softcap_sinks_and_windows() {
    let gpu = gpu();
    let (slopes, sinks) = (alibi_slopes_of_8_heads(), sinks_of_8_heads());
    let mut cases = Vec::new();
    for d in [64, 128, 256] {
        let base = || Attention::new(2, 3, 201, 8, 2, d);
        cases.extend([
            Case::new(format!("d{d} decode: mask f32 with -inf rows"), base().with_lse()).mask(MaskKind::F32),
            Case::new(format!("d{d} decode: ALiBi slopes"), base().alibi(Alibi::Slopes(slopes.clone()))),
            Case::new(format!("d{d} decode: softcap 5"), base().softcap(5.0)).q_scale_by(4.0),
            Case::new(format!("d{d} decode: sinks"), base().sinks(sinks.clone()).with_lse()),
            Case::new(format!("d{d} decode: window 20/9"), base().window(Some(20), Some(9)).with_lse()),
            Case::new(format!("d{d} decode: window 5/0 (most warps see nothing)"), base().window(Some(5), Some(0)).with_lse()),
            Case::new(
                format!("d{d} decode: mask, ALiBi, softcap, sinks, window, causal, 3 splits"),
                base().alibi(Alibi::Slopes(slopes.clone())).softcap(20.0).sinks(sinks.clone()).window(Some(90), None).causal().splits(3).with_lse(),
            )
            .mask(MaskKind::F16),
        ]);
    }
    run(&gpu, &cases, &BOTH);
}

trait QScale {
    fn q_scale_by(self, s: f32) -> Self;
}
impl QScale for Case {
    fn q_scale_by(mut self, s: f32) -> Case {
        self.q_scale = s;
        self
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn strided_views_unaligned_pointers_and_forced_splits() {
    let gpu = gpu();
    let (b, lq, lk, hq, hk, d) = (2, 70, 90, 4, 2, 96);
    // [batch, heads, seq, dim] views, and O with gaps between heads and rows.
    let bhsd = Attention::new(b, lq, lk, hq, hk, d).strides(
        Strides::bhsd(lq, hq, d),
        Strides::bhsd(lk, hk, d),
        Strides::bhsd(lk, hk, d),
        Strides { batch: lq * hq * (d + 24) + 8, seq: hq * (d + 24), head: d + 24 },
    );
    let cases = vec![
        Case::new("BHSD views, O with gaps", bhsd.clone()),
        Case { unaligned: true, ..Case::new("unaligned pointers (element copies)", bhsd.clone().causal()) },
        Case::new("forced 3 splits", Attention::new(2, 100, 700, 4, 2, 128).splits(3).with_lse()),
        Case::new("forced 7 splits + sinks + causal", Attention::new(1, 33, 900, 4, 1, 64).splits(7).sinks(vec![1.0, 0.0, -1.0, 2.0]).causal().with_lse()),
        Case::new("forced splits, more splits than key tiles", Attention::new(1, 5, 40, 2, 1, 64).splits(9).with_lse()),
    ];
    run(&gpu, &cases, &BOTH);
}

/// Packed sequences with empty and one-token sequences, their cumulative lengths on the host
/// and (`Attention::varlen_on_device`) on the device; decode steps of packed one-token
/// queries, and paged keys whose lengths come from device `cu_seqlens_k`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn varlen_with_empty_and_single_token_sequences() {
    let gpu = gpu();
    let mut rng = rng("varlen");
    let cu_q = vec![0, 5, 5, 6, 106, 107, 300];
    let cu_k = vec![0, 17, 40, 41, 141, 141, 400];
    let mut cases = vec![
        Case::new("varlen", Attention::new(0, 0, 0, 4, 2, 128).varlen(cu_q.clone(), cu_k.clone()).with_lse()),
        Case::new("varlen causal", Attention::new(0, 0, 0, 4, 2, 64).varlen(cu_q.clone(), cu_k.clone()).causal().with_lse()),
        Case::new("varlen causal window + mask", Attention::new(0, 0, 0, 2, 2, 64).varlen(cu_q, cu_k).causal().window(Some(16), None)).mask(MaskKind::F16),
        Case::new("varlen decode, one query per sequence", Attention::new(0, 0, 0, 32, 8, 128).varlen(vec![0, 1, 2, 3, 4], vec![0, 1, 900, 2000, 2000]).with_lse()),
        Case::new("varlen 4 queries per sequence, GQA 16, head 256", Attention::new(0, 0, 0, 32, 2, 256).varlen(vec![0, 4, 8, 9], vec![0, 300, 1300, 1301]).causal().with_lse()),
    ];
    // The same problems with the lengths on the device.
    let on_device: Vec<Case> = cases.iter().map(|c| Case { device_tables: true, name: format!("{} (device cu_seqlens)", c.name), ..c.clone() }).collect();
    cases.extend(on_device);
    // Paged keys, packed queries: chunks of 3 queries against each sequence's pages, the key
    // lengths from cu_seqlens_k (device: with the block table).
    let paged = paged_queries_case("paged, 3 queries per sequence", 3, 3, vec![40, 700, 2500], 32, 8, 2, (128, 128), &mut rng);
    let lens = paged.desc.paged.as_ref().unwrap().seqlens_k.clone().unwrap();
    let mut cu_k = vec![0u32];
    for l in &lens {
        cu_k.push(cu_k.last().unwrap() + l);
    }
    let mut packed = paged.clone();
    packed.name = "paged, packed queries, device cu_seqlens and block table".into();
    packed.desc.paged.as_mut().unwrap().seqlens_k = None;
    let pg = packed.desc.paged.clone().unwrap();
    packed.desc = packed.desc.varlen(vec![0, 3, 6, 9], cu_k).paged(pg);
    packed.device_tables = true;
    cases.push(packed);
    run(&gpu, &cases, &BOTH);
}

/// Bad device-side cumulative lengths are never followed and are reported: a decreasing query
/// range, one past `total_q`, a key range past `total_k` (cut there; also one too long
/// uncut but not once cut, reported as the cut the kernels made), a key length past `seqlen_k`
/// and a decreasing key range each leave every other sequence's rows written, touch no row of a bad query
/// range (O stays poisoned there), and make `attention_table_error` name the table, the entry and its value,
/// once. Lengths that cover fewer rows than `total_q` are valid: the rows past them stay
/// untouched. A call with device lengths is captured in a CUDA graph and replayed with new
/// lengths, giving a direct call's bits. (compute-sanitizer's memcheck runs this test in the
/// quick suite: nothing is read or written out of bounds.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_device_cumulative_lengths_are_reported_not_followed() {
    use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let gpu = gpu();
    let mut rng = rng("bad device cu_seqlens");
    // Three sequences of at most 20 queries and 300 keys, 40 and 600 rows packed.
    let d = Attention::new(0, 0, 0, 8, 2, 128).varlen_on_device(3, 20, 300, 40, 600);
    let n = d.buffer_lengths().unwrap();
    let (s, Capturable { q, k, v, mut o, lse: _ }) = capturable(&gpu, &d, "bad device cu_seqlens");
    let row = 8 * 128;
    for h in &gpu.handles {
        let who = format!("device cu_seqlens [{}]", h.artifact(KernelFamily::Attention));
        let run = |o: &mut CudaSlice<f16>, cu_q: &[u32], cu_k: &[u32]| -> Vec<f16> {
            let (cu_q, cu_k) = (upload(&s, cu_q), upload(&s, cu_k));
            s.memcpy_htod(&vec![f16::NAN; n.o], o).unwrap();
            let tables = DeviceTables { cu_seqlens_q: Some(&cu_q), cu_seqlens_k: Some(&cu_k), ..DeviceTables::default() };
            h.attention(&s, &d, &q, &k, &v, o, AttentionExtras { tables, ..AttentionExtras::default() }).unwrap_or_else(|e| panic!("{who}: {e}"));
            s.clone_dtoh(o).unwrap()
        };
        let rows_finite = |o: &[f16], rows: std::ops::Range<usize>| o[rows.start * row..rows.end * row].iter().all(|x| x.is_finite());
        let rows_poisoned = |o: &[f16], rows: std::ops::Range<usize>| o[rows.start * row..rows.end * row].iter().all(|x| x.is_nan());
        let expect = |what: &str, name: &str, value: &str| match h.attention_table_error(&s) {
            Err(Error::InvalidArgument { name: got, value: v, .. }) if got == name && v == value => {}
            other => panic!("{who}: {what}: {other:?}"),
        };
        // Valid lengths covering 35 of the 40 rows: nothing reported, the last 5 rows untouched.
        let got = run(&mut o, &[0, 10, 30, 35], &[0, 100, 400, 600]);
        h.attention_table_error(&s).unwrap_or_else(|e| panic!("{who}: valid lengths reported as bad: {e}"));
        assert!(rows_finite(&got, 0..35) && rows_poisoned(&got, 35..40), "{who}: rows past the last sequence were written");
        // Sequence 1's queries run backwards (10 to 8): its range is skipped, the others are computed.
        let got = run(&mut o, &[0, 10, 8, 28], &[0, 100, 400, 600]);
        expect("a decreasing query range", "cu_seqlens_q", "[1] = 10 and the entry after it");
        assert!(rows_finite(&got, 0..10) && rows_finite(&got, 8..28), "{who}: the valid sequences");
        h.attention_table_error(&s).unwrap_or_else(|e| panic!("{who}: the record was not cleared: {e}"));
        // Sequence 2's queries end past total_q.
        let got = run(&mut o, &[0, 10, 30, 45], &[0, 100, 400, 600]);
        expect("queries past total_q", "cu_seqlens_q", "[2] = 30 and the entry after it");
        assert!(rows_finite(&got, 0..30) && rows_poisoned(&got, 30..40), "{who}: the bad range was written");
        // Sequence 2's keys end past total_k: they are cut at its end (nothing read past K/V).
        let got = run(&mut o, &[0, 10, 30, 40], &[0, 100, 400, 700]);
        expect("keys past total_k", "cu_seqlens_k", "[3] = 700");
        assert!(rows_finite(&got, 0..40), "{who}: every row of the valid query ranges written");
        // Sequence 2's keys run 400 past seqlen_k's 300 and end past total_k: cut at total_k
        // they are 200, which the kernels read; the report says what they did (cut), not
        // that they read nothing.
        let got = run(&mut o, &[0, 10, 30, 40], &[0, 100, 400, 800]);
        expect("keys too many and past total_k, but not once cut", "cu_seqlens_k", "[3] = 800");
        assert!(rows_finite(&got, 0..40), "{who}: every row of the valid query ranges written");
        // Sequence 1 has 301 keys, past seqlen_k.
        run(&mut o, &[0, 10, 30, 40], &[0, 100, 401, 600]);
        expect("a key length past seqlen_k", "cu_seqlens_k", "[1] and [2]: length 301");
        // Sequence 1's keys run backwards (100 to 50; sequence 2's 50 to 300 are valid).
        run(&mut o, &[0, 10, 30, 40], &[0, 100, 50, 300]);
        expect("a decreasing key range", "cu_seqlens_k", "[1] and [2]: length -50");
        h.attention_table_error(&s).unwrap_or_else(|e| panic!("{who}: the record was not cleared: {e}"));

        // Captured once, replayed with other lengths: a direct call's bits.
        let lengths = |rng: &mut StdRng| -> (Vec<u32>, Vec<u32>) {
            let (mut cu_q, mut cu_k) = (vec![0u32], vec![0u32]);
            for b in 0..3 {
                let room = |total: u32, now: u32, longest: u32| (total - now).min(longest) / (3 - b);
                cu_q.push(cu_q[b as usize] + rng.random_range(0..=room(40, cu_q[b as usize], 20)));
                cu_k.push(cu_k[b as usize] + rng.random_range(0..=room(600, cu_k[b as usize], 300)));
            }
            (cu_q, cu_k)
        };
        let (cu_q0, cu_k0) = lengths(&mut rng);
        // SAFETY: the two buffers made while `untracked` lives are used on `s` alone, in order.
        let untracked = unsafe { UntrackedAllocations::begin(&s) };
        let (mut cu_q_dev, mut cu_k_dev) = (upload(&s, &cu_q0), upload(&s, &cu_k0));
        drop(untracked);
        s.synchronize().unwrap();
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
        let tables = DeviceTables { cu_seqlens_q: Some(&cu_q_dev), cu_seqlens_k: Some(&cu_k_dev), ..DeviceTables::default() };
        let called = h.attention(&s, &d, &q, &k, &v, &mut o, AttentionExtras { tables, ..AttentionExtras::default() });
        let graph = s.end_capture(CUgraphInstantiate_flags(0));
        called.unwrap_or_else(|e| panic!("{who}: captured call: {e}"));
        let graph = graph.unwrap_or_else(|e| panic!("{who}: capture: {e}")).expect("the capture recorded the launches");
        for step in 0..3 {
            let (cu_q, cu_k) = lengths(&mut rng);
            let direct = run(&mut o, &cu_q, &cu_k);
            s.memcpy_htod(&cu_q, &mut cu_q_dev).unwrap();
            s.memcpy_htod(&cu_k, &mut cu_k_dev).unwrap();
            s.memcpy_htod(&vec![f16::NAN; n.o], &mut o).unwrap();
            graph.launch().unwrap_or_else(|e| panic!("{who}: step {step}: {e}"));
            let replayed: Vec<f16> = s.clone_dtoh(&o).unwrap();
            h.attention_table_error(&s).unwrap_or_else(|e| panic!("{who}: step {step}: valid lengths reported as bad: {e}"));
            let same = direct.iter().zip(&replayed).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{who}: step {step} ({cu_q:?}, {cu_k:?}): the replay differs from a direct call");
        }
    }
}

/// A paged decode step: `pages` pages of `page_size`, the sequences' pages in random order.
#[allow(clippy::too_many_arguments)]
fn paged_case(name: &str, batch: usize, lens: Vec<u32>, page_size: usize, heads_q: usize, heads_k: usize, dims: (usize, usize), rng: &mut StdRng) -> Case {
    paged_queries_case(name, batch, 1, lens, page_size, heads_q, heads_k, dims, rng)
}

/// `seqlen_q` queries per sequence (a chunked prefill when more than one) over a paged cache,
/// as [`paged_case`].
#[allow(clippy::too_many_arguments)]
fn paged_queries_case(name: &str, batch: usize, seqlen_q: usize, lens: Vec<u32>, page_size: usize, heads_q: usize, heads_k: usize, (dk, dv): (usize, usize), rng: &mut StdRng) -> Case {
    let pages_per_seq = (*lens.iter().max().unwrap() as usize).div_ceil(page_size);
    let pages = batch * pages_per_seq + 3;
    let mut ids: Vec<u32> = (0..pages as u32).collect();
    ids.shuffle(rng);
    let table = ids[..batch * pages_per_seq].to_vec();
    let longest = *lens.iter().max().unwrap() as usize;
    let desc = Attention::new(batch, seqlen_q, longest, heads_q, heads_k, dk)
        .head_dim_v(dv)
        .paged(PagedKv { page_size, pages, pages_per_seq, block_table: table, seqlens_k: Some(lens) })
        .with_lse();
    Case::new(name, desc)
}

/// Pages shorter than a key tile: vLLM's 16 keys, mistral.rs's 32, and 8. The decode tiles
/// take the short-page copy there (the tile's table entries read once, a lane each, and shared
/// by shuffles): every decode head group is run (passes of whole rows at heads 64, 128 and 256,
/// chunk by chunk at 96 and 576/512), against the f64 reference on every config; sequence
/// lengths end inside a page and inside a tile, and one sequence has a single key. Beside
/// them: pages of 2 (32 pages per 64-key tile, an entry in every lane); and the row-by-row
/// copy: a chunked prefill (causal and not: the prefill tiles copy short pages row by row),
/// pages of 48 (not a power of two) and of 1 (more pages per 64-key tile than a warp has
/// lanes).
#[test]
#[ignore = "needs a CUDA GPU"]
fn short_pages_match_the_reference() {
    let gpu = gpu();
    let mut rng = rng("short pages");
    let mut cases = Vec::new();
    for page in [8, 16, 32, 2, 48, 1] {
        let heads: &[(usize, usize)] = if matches!(page, 16 | 32) { &[(64, 64), (96, 96), (128, 128), (256, 256), (576, 512)] } else { &[(128, 128)] };
        for &(dk, dv) in heads {
            let (heads_q, heads_k) = if dk == 576 { (16, 1) } else { (8, 2) };
            cases.push(paged_case(&format!("paged decode {dk}/{dv}, page {page}"), 3, vec![1, 333, 1000], page, heads_q, heads_k, (dk, dv), &mut rng));
        }
        let mut prefill = paged_queries_case(&format!("paged chunked prefill 128, page {page}"), 2, 70, vec![70, 901], page, 8, 2, (128, 128), &mut rng);
        cases.push(prefill.clone());
        prefill.desc = prefill.desc.causal();
        prefill.name = format!("paged chunked prefill 128, causal, page {page}");
        cases.push(prefill);
    }
    run(&gpu, &cases, &BOTH);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn decode_long_contiguous_and_paged() {
    let gpu = gpu();
    let mut rng = rng("paged layout");
    let long = if quick() { 4096 } else { 131072 };
    let mut cases = vec![
        Case::new(format!("decode 1×{long}, GQA 4, head 128"), Attention::new(1, 1, long, 32, 8, 128).with_lse()),
        Case::new("decode 4×20000, GQA 16, head 256", Attention::new(1, 4, 20000, 32, 2, 256).causal()),
    ];
    for page in [16, 64, 256] {
        cases.push(paged_case(&format!("paged decode, page {page}"), 3, vec![1, 700, 2500], page, 8, 2, (128, 128), &mut rng));
    }
    cases.push(paged_case("paged decode 576/512 (MLA)", 2, vec![300, 1000], 64, 16, 1, (576, 512), &mut rng));
    run(&gpu, &cases, &BOTH);
}

/// Split launches and their merge against the f64 reference, on every config: prefill and
/// decode tiles, every head size of the decode tile, sinks (applied by the merge), LSE, paged
/// caches with per-sequence lengths (an empty row tile's splits see no key), more splits than
/// key tiles (blocks with no key), varlen, and many splits per row (each merged column sums
/// its splits over several groups).
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_launches_match_the_reference() {
    let gpu = gpu();
    let mut rng = rng("split launches");
    let mut cases = vec![
        Case::new("prefill tile, 3 splits", Attention::new(2, 100, 700, 4, 2, 128).splits(3).with_lse()),
        Case::new("7 splits + sinks + causal", Attention::new(1, 33, 900, 4, 1, 64).splits(7).sinks(vec![1.0, 0.0, -1.0, 2.0]).causal().with_lse()),
        Case::new("more splits than key tiles", Attention::new(1, 5, 40, 2, 1, 64).splits(9).with_lse()),
        Case::new("varlen, 4 splits", Attention::new(0, 0, 0, 4, 2, 64).varlen(vec![0, 1, 1, 3, 20], vec![0, 300, 300, 301, 900]).splits(4).with_lse()),
    ];
    for (dk, dv) in [(64, 64), (80, 80), (96, 96), (112, 112), (128, 128), (192, 128), (192, 192), (256, 256), (320, 256)] {
        cases.push(Case::new(format!("decode {dk}/{dv}, 2×1500, GQA 4, 6 splits"), Attention::new(2, 1, 1500, 8, 2, dk).head_dim_v(dv).splits(6).sinks(vec![0.5; 8]).with_lse()));
    }
    cases.push(paged_case("paged decode, page 64", 3, vec![1, 700, 2500], 64, 8, 2, (128, 128), &mut rng));
    cases.push(paged_case("paged decode 576/512 (MLA)", 2, vec![300, 1000], 64, 16, 1, (576, 512), &mut rng));
    cases.push(Case::new("decode 1×16384, GQA 4, head 128 (chosen splits)", Attention::new(1, 1, 16384, 32, 8, 128).with_lse()));
    // Many rows and splits: each column sums 40 splits over its groups (16 groups at head 64,
    // 4 at 256).
    cases.push(Case::new("decode 1×5000, GQA 16, head 64, 40 splits", Attention::new(1, 1, 5000, 16, 1, 64).splits(40).with_lse()));
    cases.push(Case::new("decode 1×5000, GQA 16, head 256, 40 splits", Attention::new(1, 1, 5000, 32, 2, 256).splits(40).with_lse()));
    run(&gpu, &cases, &BOTH);
}

/// Launches on one stream that read what the launch before them wrote: on sm_90+ each forward
/// launch is a programmatic dependent of the launch before it (the previous step's merge or
/// forward), resident before that one ends, and must wait for it on the GPU. A chain in which
/// each step's output is the next step's Q, every output poisoned with NaN before the chain
/// starts; each step is checked against the reference on the Q the GPU produced, so a step that
/// read Q (or overwrote the split workspace the merge before it still read) early fails. A
/// split decode (forward and merge per step) and a causal prefill, f16, every config.
#[test]
#[ignore = "needs a CUDA GPU"]
fn chained_launches_read_what_the_launch_before_wrote() {
    const STEPS: usize = 4;
    let gpu = gpu();
    // A stream of its own, and the chain's buffers made without cudarc's event tracking: with
    // it, every launch would wait for an event recorded after the one before, and the launches
    // would never overlap (nor test the kernels' own wait).
    let stream = &gpu.stream.context().new_stream().unwrap();
    let mut rng = rng("chained launches");
    for (name, d) in [("decode 1×3000, GQA 4, 8 splits", Attention::new(1, 1, 3000, 32, 8, 128).splits(8)), ("prefill 2×300, causal", Attention::new(2, 300, 300, 8, 8, 64).causal())] {
        let lengths = d.buffer_lengths().unwrap();
        assert_eq!(lengths.o, lengths.q, "{name}: each step's O is the next step's Q");
        let (q0_host, _) = round::<f16>(&random(&mut rng, lengths.q, 1.0));
        let (k_host, k) = round::<f16>(&random(&mut rng, lengths.k, 1.0));
        let (v_host, v) = round::<f16>(&random(&mut rng, lengths.v, 1.0));
        // SAFETY: the buffers made while `untracked` lives are used on `stream` alone, in order.
        let untracked = unsafe { UntrackedAllocations::begin(stream) };
        let (k_dev, v_dev) = (upload(stream, &k_host), upload(stream, &v_host));
        let poison = vec![f16::from_f32(f32::NAN); lengths.o];
        for h in &gpu.handles {
            let who = format!("{name} [{}]", h.artifact(KernelFamily::Attention));
            let mut qs = vec![upload(stream, &q0_host)];
            qs.extend((0..STEPS).map(|_| upload(stream, &poison)));
            for i in 0..STEPS {
                let (done, rest) = qs.split_at_mut(i + 1);
                h.attention(stream, &d, &done[i], &k_dev, &v_dev, &mut rest[0], AttentionExtras::default()).unwrap_or_else(|e| panic!("{who}: step {}: {e}", i + 1));
            }
            stream.synchronize().unwrap_or_else(|e| panic!("{who}: {e}"));
            let host: Vec<Vec<f16>> = qs.iter().map(|q| stream.clone_dtoh(q).unwrap()).collect();
            stream.synchronize().unwrap();
            for i in 0..STEPS {
                let q: Vec<f32> = host[i].iter().map(|x| x.to_f32()).collect();
                let expected = attention_reference(&d, &AttentionInputs { q: &q, k: &k, v: &v, mask: None });
                let bad: Vec<String> = expected
                    .o
                    .iter()
                    .filter_map(|&(j, want)| {
                        let got = host[i + 1][j].to_f32() as f64;
                        (!(got - want).abs().le(&(f16::ATOL + f16::RTOL * want.abs()))).then(|| format!("O[{j}] = {got} (want {want})"))
                    })
                    .collect();
                assert!(bad.is_empty(), "{who}: step {}: {} wrong of {}:\n{}", i + 1, bad.len(), expected.o.len(), bad.iter().take(8).cloned().collect::<Vec<_>>().join("\n"));
            }
        }
        drop(untracked);
    }
}

/// A split decode gives the same bits on every run (the merge adds the splits in a fixed
/// order, whatever the blocks' timing), on every config: the two llama.cpp decode shapes
/// (32 and 78 splits on the H200), three runs each, O and LSE compared bit for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_decode_gives_the_same_bits_every_run() {
    let gpu = gpu();
    let s = &gpu.stream;
    let mut rng = rng("split determinism");
    // Quick runs (compute-sanitizer) take shorter keys, still split over many blocks.
    let (long_128, long_256) = if quick() { (4096, 5000) } else { (16384, 20000) };
    for d in [Attention::new(1, 1, long_128, 32, 8, 128).with_lse(), Attention::new(1, 1, long_256, 32, 2, 256).with_lse()] {
        let n = d.buffer_lengths().unwrap();
        let (q_host, _) = round::<f16>(&random(&mut rng, n.q, 1.0));
        let (k_host, _) = round::<f16>(&random(&mut rng, n.k, 1.0));
        let (v_host, _) = round::<f16>(&random(&mut rng, n.v, 1.0));
        let (q, k, v) = (upload(s, &q_host), upload(s, &k_host), upload(s, &v_host));
        for h in &gpu.handles {
            let who = format!("decode 1×{} head {} [{}]", d.seqlen_k, d.head_dim, h.artifact(KernelFamily::Attention));
            let mut first: Option<(Vec<u16>, Vec<u32>)> = None;
            for run in 0..3 {
                let mut o = upload(s, &vec![f16::NAN; n.o]);
                let mut lse = upload(s, &vec![f32::NAN; n.lse]);
                let extras = AttentionExtras { lse: Some(&mut lse), ..AttentionExtras::default() };
                h.attention(s, &d, &q, &k, &v, &mut o, extras).unwrap_or_else(|e| panic!("{who}: {e}"));
                let o_bits: Vec<u16> = s.clone_dtoh(&o).unwrap().iter().map(|x| x.to_bits()).collect();
                let lse_bits: Vec<u32> = s.clone_dtoh(&lse).unwrap().iter().map(|x| x.to_bits()).collect();
                assert!(o_bits.iter().all(|&b| !f16::from_bits(b).is_nan()), "{who}: a NaN (unwritten) output");
                match &first {
                    None => first = Some((o_bits, lse_bits)),
                    Some((o0, l0)) => {
                        let differ = o0.iter().zip(&o_bits).filter(|(a, b)| a != b).count();
                        assert!(differ == 0 && *l0 == lse_bits, "{who}: run {run} differs from run 0 in {differ} outputs");
                    }
                }
            }
        }
    }
}

/// Random f16 Q, K and V of a problem, and NaN-poisoned O and LSE, on a stream of their own.
struct Capturable {
    q: CudaSlice<f16>,
    k: CudaSlice<f16>,
    v: CudaSlice<f16>,
    o: CudaSlice<f16>,
    lse: CudaSlice<f32>,
}

/// A new stream (the handles' default stream is the legacy one, which cannot be captured) and
/// [`Capturable`] buffers for `d` on it, made with cudarc's event tracking off: tracking makes
/// each use of a buffer wait for its last use, and inside a capture a wait on an event
/// recorded before it is an error. Use the buffers on that stream only.
fn capturable(gpu: &Gpu, d: &Attention, seed: &str) -> (Arc<CudaStream>, Capturable) {
    let s = gpu.stream.context().new_stream().unwrap();
    let mut rng = rng(seed);
    let n = d.buffer_lengths().unwrap();
    // SAFETY: the buffers made while `untracked` lives are used on `s` alone, in order (the
    // caller's promise).
    let untracked = unsafe { UntrackedAllocations::begin(&s) };
    let q = upload(&s, &round::<f16>(&random(&mut rng, n.q, 1.0)).0);
    let k = upload(&s, &round::<f16>(&random(&mut rng, n.k, 1.0)).0);
    let v = upload(&s, &round::<f16>(&random(&mut rng, n.v, 1.0)).0);
    let (o, lse) = (upload(&s, &vec![f16::NAN; n.o]), upload(&s, &vec![f32::NAN; n.lse.max(1)]));
    drop(untracked);
    s.synchronize().unwrap();
    (s, Capturable { q, k, v, o, lse })
}

/// A split decode (flash-decoding: the split launch, then the merge as its programmatic
/// dependent on sm_90 builds, and the handle's own workspace they share) captured in a CUDA graph and replayed gives the bits of a
/// direct call, on every config: a decode loop that replays a graph per token runs the same
/// kernels as one that launches them. A call on a second stream, which the own workspace does
/// not serve, gives them too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_decode_can_be_captured_in_a_cuda_graph() {
    use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let gpu = gpu();
    let keys = if quick() { 3000 } else { 9000 };
    let d = Attention::new(2, 1, keys, 32, 8, 128).with_lse();
    let n = d.buffer_lengths().unwrap();
    let (s, Capturable { q, k, v, mut o, mut lse }) = capturable(&gpu, &d, "attention graph");
    for h in &gpu.handles {
        let who = format!("decode 2×{keys} head 128 [{}]", h.artifact(KernelFamily::Attention));
        let plan = d.plan(AttentionDtype::F16, &d.placeholder_buffers().unwrap(), h.attention_config(), h.sm_count()).unwrap();
        assert!(plan.splits > 1, "{who}: the case must split ({plan:?})");
        // ... through the handle's own workspace (the first call binds it to `s`).
        let own = cukernels::attention::own_split_workspace_bytes(h.attention_config(), h.sm_count());
        assert!(plan.split_workspace_bytes() <= own, "{who}: {} bytes of {own}", plan.split_workspace_bytes());
        let read = |o: &CudaSlice<f16>, lse: &CudaSlice<f32>| -> (Vec<u16>, Vec<u32>) {
            (s.clone_dtoh(o).unwrap().iter().map(|x| x.to_bits()).collect(), s.clone_dtoh(lse).unwrap().iter().map(|x| x.to_bits()).collect())
        };
        h.attention(&s, &d, &q, &k, &v, &mut o, AttentionExtras { lse: Some(&mut lse), ..AttentionExtras::default() }).unwrap_or_else(|e| panic!("{who}: {e}"));
        let direct = read(&o, &lse);
        assert!(direct.0.iter().all(|&b| !f16::from_bits(b).is_nan()), "{who}: a NaN (unwritten) output");
        // That call bound the handle's own split workspace to `s`; a call on another stream
        // splits through a workspace of its own, with the same bits.
        let other = &gpu.stream;
        s.memcpy_htod(&vec![f16::NAN; n.o], &mut o).unwrap();
        s.memcpy_htod(&vec![f32::NAN; n.lse], &mut lse).unwrap();
        s.synchronize().unwrap();
        h.attention(other, &d, &q, &k, &v, &mut o, AttentionExtras { lse: Some(&mut lse), ..AttentionExtras::default() }).unwrap_or_else(|e| panic!("{who}: other stream: {e}"));
        other.synchronize().unwrap();
        assert!(read(&o, &lse) == direct, "{who}: the call on another stream differs");
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
        let called = h.attention(&s, &d, &q, &k, &v, &mut o, AttentionExtras { lse: Some(&mut lse), ..AttentionExtras::default() });
        let graph = s.end_capture(CUgraphInstantiate_flags(0));
        called.unwrap_or_else(|e| panic!("{who}: captured call: {e}"));
        let graph = graph.unwrap_or_else(|e| panic!("{who}: capture: {e}")).expect("the capture recorded the launches");
        for replay in 0..2 {
            s.memcpy_htod(&vec![f16::NAN; n.o], &mut o).unwrap();
            s.memcpy_htod(&vec![f32::NAN; n.lse], &mut lse).unwrap();
            graph.launch().unwrap_or_else(|e| panic!("{who}: replay {replay}: {e}"));
            assert!(read(&o, &lse) == direct, "{who}: replay {replay} differs from the direct call");
        }
    }
}

/// A call inside a CUDA graph capture on a handle whose attention module is not loaded yet is
/// an error naming the stream (loading allocates the split workspace and waits for its
/// zeroing, which would invalidate the capture), and the capture stays valid; after
/// `preload_family`, the same call is captured.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_capture_before_the_module_is_loaded_is_an_error() {
    use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let gpu = gpu();
    let d = Attention::new(1, 1, 4096, 8, 2, 128);
    let (s, Capturable { q, k, v, mut o, .. }) = capturable(&gpu, &d, "attention capture before load");
    let fresh = Cukernels::new(s.context()).unwrap();
    assert!(!fresh.is_loaded(KernelFamily::Attention));
    s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
    let refused = fresh.attention(&s, &d, &q, &k, &v, &mut o, AttentionExtras::default());
    let graph = s.end_capture(CUgraphInstantiate_flags(0));
    assert!(matches!(refused, Err(Error::InvalidArgument { name: "stream", .. })), "{refused:?}");
    assert!(graph.is_ok(), "the capture was invalidated: {:?}", graph.err());
    assert!(!fresh.is_loaded(KernelFamily::Attention), "nothing loaded inside the capture");
    fresh.preload_family(KernelFamily::Attention).unwrap();
    s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
    let called = fresh.attention(&s, &d, &q, &k, &v, &mut o, AttentionExtras::default());
    let graph = s.end_capture(CUgraphInstantiate_flags(0));
    called.unwrap();
    graph.unwrap().expect("the capture recorded the launches").launch().unwrap();
    s.synchronize().unwrap();
    assert!(s.clone_dtoh(&o).unwrap().iter().all(|x| x.is_finite()), "every output written");
}

/// Block tables, key lengths, ALiBi slopes and sinks passed as device buffers give the results
/// of the same problems with host tables (paged decode with and without per-sequence lengths,
/// MLA, the decode tile's biases with a split, ALiBi on the prefill tile), on every config.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_tables_give_the_host_tables_results() {
    let gpu = gpu();
    let mut rng = rng("device tables");
    let on_device = |c: Case| Case { device_tables: true, name: format!("{} (device tables)", c.name), ..c };
    let (slopes, sinks) = (alibi_slopes_of_8_heads(), sinks_of_8_heads());
    let n = if quick() { 96 } else { 300 };
    let mut all_keys = paged_case("paged decode, page 32, every sequence full", 3, vec![900, 900, 900], 32, 8, 2, (128, 128), &mut rng);
    all_keys.desc.paged.as_mut().unwrap().seqlens_k = None;
    let cases = vec![
        on_device(paged_case("paged decode, page 16", 3, vec![1, 700, 2500], 16, 8, 2, (128, 128), &mut rng)),
        on_device(paged_case("paged decode, page 64, an empty sequence", 4, vec![0, 64, 65, 3000], 64, 32, 8, (128, 128), &mut rng)),
        on_device(all_keys),
        on_device(paged_case("paged decode 576/512 (MLA)", 2, vec![300, 1000], 64, 16, 1, (576, 512), &mut rng)),
        on_device(Case::new("decode: ALiBi slopes, sinks, 3 splits", Attention::new(2, 3, 201, 8, 2, 128).alibi(Alibi::Slopes(slopes)).sinks(sinks.clone()).splits(3).with_lse())),
        on_device(Case::new("prefill: ALiBi (max_bias 8) and sinks", Attention::new(1, n, n, 8, 8, 64).causal().alibi(Alibi::MaxBias(8.0)).sinks(sinks).with_lse())),
    ];
    run(&gpu, &cases, &BOTH);
}

/// A paged decode step whose block table, key lengths and sinks are device buffers is captured
/// once in a CUDA graph and replayed for steps with other tables (lengths growing, pages
/// reshuffled): every replay matches the f64 reference of its own tables, on every config. A
/// call with host tables is refused inside a capture (its upload could not be replayed), and
/// the capture stays valid.
#[test]
#[ignore = "needs a CUDA GPU"]
fn paged_decode_with_device_tables_replays_in_a_cuda_graph() {
    use cukernels::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let gpu = gpu();
    let mut rng = rng("paged graph");
    let (batch, heads_q, heads_k, dim, page_size) = (3, 16, 4, 128, 32);
    let seqlen_k: usize = if quick() { 700 } else { 4000 };
    let pages_per_seq = seqlen_k.div_ceil(page_size);
    let pages = batch * pages_per_seq + 5;
    let d = Attention::new(batch, 1, seqlen_k, heads_q, heads_k, dim).paged(PagedKv::on_device(page_size, pages, pages_per_seq)).with_lse();
    let n = d.buffer_lengths().unwrap();
    let (q_host, q_f32) = round::<f16>(&random(&mut rng, n.q, 1.0));
    let (k_host, k_f32) = round::<f16>(&random(&mut rng, n.k, 1.0));
    let (v_host, v_f32) = round::<f16>(&random(&mut rng, n.v, 1.0));
    let sinks: Vec<f32> = (0..heads_q).map(|h| h as f32 * 0.25 - 2.0).collect();
    // The tables of one decode step: lengths up to seqlen_k (one sequence empty in step 1), and
    // the sequences' pages drawn from the whole cache in a new order.
    let step_tables = |step: usize, rng: &mut StdRng| -> (Vec<u32>, Vec<u32>) {
        let mut ids: Vec<u32> = (0..pages as u32).collect();
        ids.shuffle(rng);
        let lens: Vec<u32> = (0..batch).map(|b| if step == 1 && b == 0 { 0 } else { rng.random_range(1..=seqlen_k as u32) }).collect();
        (ids[..batch * pages_per_seq].to_vec(), lens)
    };
    let s = gpu.stream.context().new_stream().unwrap();
    // SAFETY: the buffers made while `untracked` lives are used on `s` alone, in order.
    let untracked = unsafe { UntrackedAllocations::begin(&s) };
    let (q, k, v) = (upload(&s, &q_host), upload(&s, &k_host), upload(&s, &v_host));
    let (mut o, mut lse) = (upload(&s, &vec![f16::NAN; n.o]), upload(&s, &vec![f32::NAN; n.lse]));
    let (table0, lens0) = step_tables(0, &mut rng);
    let (mut table_dev, mut lens_dev, sinks_dev) = (upload(&s, &table0), upload(&s, &lens0), upload(&s, &sinks));
    drop(untracked);
    s.synchronize().unwrap();
    for h in &gpu.handles {
        let who = format!("paged decode {batch}×{seqlen_k} [{}]", h.artifact(KernelFamily::Attention));
        h.preload_family(KernelFamily::Attention).unwrap();
        // Host tables inside a capture: refused before anything is queued.
        let host_desc = d.clone().paged(PagedKv { block_table: table0.clone(), seqlens_k: Some(lens0.clone()), ..PagedKv::on_device(page_size, pages, pages_per_seq) });
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
        let refused = h.attention(&s, &host_desc, &q, &k, &v, &mut o, AttentionExtras { lse: Some(&mut lse), ..AttentionExtras::default() });
        let graph = s.end_capture(CUgraphInstantiate_flags(0));
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "stream", .. })), "{who}: {refused:?}");
        assert!(graph.is_ok(), "{who}: the refused call invalidated the capture: {:?}", graph.err());
        // The step with device tables, captured once.
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
        let tables = DeviceTables { block_table: Some(&table_dev), seqlens_k: Some(&lens_dev), sinks: Some(&sinks_dev), ..DeviceTables::default() };
        let called = h.attention(&s, &d, &q, &k, &v, &mut o, AttentionExtras { lse: Some(&mut lse), tables, ..AttentionExtras::default() });
        let graph = s.end_capture(CUgraphInstantiate_flags(0));
        called.unwrap_or_else(|e| panic!("{who}: captured call: {e}"));
        let graph = graph.unwrap_or_else(|e| panic!("{who}: capture: {e}")).expect("the capture recorded the launches");
        for step in 0..3 {
            let (table, lens) = step_tables(step, &mut rng);
            s.memcpy_htod(&table, &mut table_dev).unwrap();
            s.memcpy_htod(&lens, &mut lens_dev).unwrap();
            s.memcpy_htod(&vec![f16::NAN; n.o], &mut o).unwrap();
            s.memcpy_htod(&vec![f32::NAN; n.lse], &mut lse).unwrap();
            graph.launch().unwrap_or_else(|e| panic!("{who}: step {step}: {e}"));
            h.attention_table_error(&s).unwrap_or_else(|e| panic!("{who}: step {step}: valid tables reported as bad: {e}"));
            let got_o: Vec<f16> = s.clone_dtoh(&o).unwrap();
            let got_lse: Vec<f32> = s.clone_dtoh(&lse).unwrap();
            let reference = d.clone().paged(PagedKv { block_table: table, seqlens_k: Some(lens), ..PagedKv::on_device(page_size, pages, pages_per_seq) }).sinks(sinks.clone());
            let expected = attention_reference(&reference, &AttentionInputs { q: &q_f32, k: &k_f32, v: &v_f32, mask: None });
            assert_eq!(expected.o.len(), n.o, "{who}: the reference covers every output");
            let mut bad = Vec::new();
            for &(i, want) in &expected.o {
                let got = got_o[i].to_f32() as f64;
                if !(got - want).abs().le(&(f16::ATOL + f16::RTOL * want.abs())) {
                    bad.push(format!("O[{i}] = {got} (want {want})"));
                }
            }
            for &(i, want) in &expected.lse {
                let got = got_lse[i] as f64;
                if !((got - want).abs() <= 2e-3 + 1e-3 * want.abs() || got == want) {
                    bad.push(format!("LSE[{i}] = {got} (want {want})"));
                }
            }
            assert!(bad.is_empty(), "{who}: step {step}: {} wrong:\n{}", bad.len(), bad.iter().take(12).cloned().collect::<Vec<_>>().join("\n"));
        }
    }
}

/// Bad device tables are never followed and are reported: a page past the cache and a key
/// length past `seqlen_k` (in a direct call and in a graph replay) leave every output finite
/// (the launch read the last page, or no keys) and make `attention_table_error` name the table, the
/// sequence and the value, once: the next report is clean. (compute-sanitizer's memcheck runs
/// this test in the quick suite: nothing is read out of bounds.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_device_tables_are_reported_not_followed() {
    let gpu = gpu();
    let s = &gpu.stream;
    let mut rng = rng("bad device tables");
    let (batch, page_size, pages_per_seq) = (2, 16, 8);
    let pages = batch * pages_per_seq;
    let d = Attention::new(batch, 1, page_size * pages_per_seq, 8, 2, 128).paged(PagedKv::on_device(page_size, pages, pages_per_seq));
    let n = d.buffer_lengths().unwrap();
    let (q, k, v) = (upload(s, &round::<f16>(&random(&mut rng, n.q, 1.0)).0), upload(s, &round::<f16>(&random(&mut rng, n.k, 1.0)).0), upload(s, &round::<f16>(&random(&mut rng, n.v, 1.0)).0));
    let good_table: Vec<u32> = (0..pages as u32).collect();
    for h in &gpu.handles {
        let who = format!("bad tables [{}]", h.artifact(KernelFamily::Attention));
        let run = |table: &[u32], lens: &[u32]| -> Vec<f16> {
            let (table, lens) = (upload(s, table), upload(s, lens));
            let mut o = upload(s, &vec![f16::NAN; n.o]);
            let tables = DeviceTables { block_table: Some(&table), seqlens_k: Some(&lens), ..DeviceTables::default() };
            h.attention(s, &d, &q, &k, &v, &mut o, AttentionExtras { tables, ..AttentionExtras::default() }).unwrap_or_else(|e| panic!("{who}: {e}"));
            s.clone_dtoh(&o).unwrap()
        };
        let mut bad_page = good_table.clone();
        bad_page[pages_per_seq + 3] = pages as u32 + 7;
        let o = run(&bad_page, &[100, 128]);
        assert!(o.iter().all(|x| x.is_finite()), "{who}: every output written, none from outside the cache");
        match h.attention_table_error(s) {
            Err(Error::InvalidArgument { name: "block_table", value, .. }) => assert_eq!(value, format!("[1][3] = {}", pages + 7), "{who}"),
            other => panic!("{who}: a bad page: {other:?}"),
        }
        h.attention_table_error(s).unwrap_or_else(|e| panic!("{who}: the record was not cleared: {e}"));
        let o = run(&good_table, &[129, 5]);
        assert!(o.iter().all(|x| x.is_finite()), "{who}: every output written");
        match h.attention_table_error(s) {
            Err(Error::InvalidArgument { name: "seqlens_k", value, .. }) => assert_eq!(value, "[0] = 129", "{who}"),
            other => panic!("{who}: a length past seqlen_k: {other:?}"),
        }
        h.attention_table_error(s).unwrap_or_else(|e| panic!("{who}: the record was not cleared: {e}"));
        // A good call after them reports nothing.
        run(&good_table, &[128, 1]);
        h.attention_table_error(s).unwrap_or_else(|e| panic!("{who}: valid tables reported as bad: {e}"));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn real_model_shapes() {
    let gpu = gpu();
    let n = if quick() { 64 } else { 700 };
    // MLA: V is the first 512 columns of the 576-wide latent K.
    let mla = Attention::new(1, 8, 1200, 16, 1, 576).head_dim_v(512);
    let k_strides = mla.k_strides;
    let mla = mla.clone().strides(mla.q_strides, k_strides, k_strides, mla.o_strides).causal();
    let cases = vec![
        Case::new("Qwen3.5-122B full attention: head 256, GQA 16", Attention::new(1, n, n, 32, 2, 256).causal()),
        Case { v_is_k: true, ..Case::new("DeepSeek MLA 576/512, V aliases K", mla) },
        Case::new("head 128, GQA 8, sliding window 128", Attention::new(1, n, n, 32, 4, 128).causal().window(Some(128), None)),
        Case::new("head 64 with ALiBi (max_bias 8)", Attention::new(1, n, n, 12, 12, 64).causal().alibi(Alibi::MaxBias(8.0))),
        Case::new("gpt-oss: head 64, GQA 8, window 128, sinks", Attention::new(1, n, n, 16, 2, 64).causal().window(Some(128), None).sinks((0..16).map(|h| h as f32 * 0.3 - 2.0).collect())),
        Case::new("Gemma-2: head 256, softcap 50", Attention::new(1, n, n, 8, 4, 256).causal().softcap(50.0).scale(1.0 / 16.0)).q_scale_by(3.0),
    ];
    run(&gpu, &cases, &BOTH);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_is_an_error_before_launch() {
    let gpu = gpu();
    let h = &gpu.handles[0];
    let s = &gpu.stream;
    let q = upload(s, &vec![f16::ZERO; 4096]);
    let mut o = upload(s, &vec![f16::ZERO; 4096]);
    let attn = |d: &Attention, o: &mut CudaSlice<f16>| h.attention(s, d, &q, &q, &q, o, AttentionExtras::default());
    let err = attn(&Attention::new(1, 4, 4, 2, 2, 72), &mut o).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "head_dim", .. }), "{err}");
    let err = attn(&Attention::new(1, 64, 64, 2, 2, 64), &mut o).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { .. }), "{err}");
    let err = attn(&Attention::new(1, 4, 4, 3, 2, 64), &mut o).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "heads_q", .. }), "{err}");
    // A valid call on the same buffers runs (the errors above came from validation alone).
    attn(&Attention::new(1, 4, 4, 2, 2, 64), &mut o).unwrap();
    s.synchronize().unwrap();
}
