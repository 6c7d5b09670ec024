//! Attention without a GPU: the config table's invariants, the validation of every kind of bad
//! input (a typed error naming the argument, before anything launches), the launch plans
//! (decode packing and split rule), and the f64 reference on cases with known answers.

use cukernels::{
    alibi_slopes, attention_config, matrix_path, Alibi, Arch, Attention, AttentionBuffers, AttentionDtype, AttentionHead, AttentionTileKind, Error, MaskShape, MatrixPath, PagedKv,
    Strides, TableBuffers, ATTENTION_CONFIGS, ATTENTION_KERNELS,
};
use cukernels_tests::attention_ref::{attention_reference, AttentionInputs};

#[test]
fn every_architecture_has_fitting_prefill_and_decode_tiles_for_every_head_size() {
    for row in ATTENTION_CONFIGS {
        let l = row.arch.limits();
        for head in AttentionHead::ALL {
            let t = row.tile(head);
            t.check(row.arch, head).unwrap();
            assert!(t.smem_bytes(head) <= l.max_smem_per_block, "{} head {}", row.arch, head.name());
            assert_eq!(head.dv() % (16 * t.dv_split), 0);
            let d = row.decode_tile(head);
            d.check(row.arch, head).unwrap();
            assert_eq!((d.rows(), head.dv() % (16 * d.dv_split)), (16, 0), "{} head {}", row.arch, head.name());
            // A key split: each warp's keys are whole k-steps of P·V, and the end-of-block
            // merge of its warps fits the shared memory the launch asks for.
            assert_eq!(d.keys_per_warp() % 16, 0, "{} head {}", row.arch, head.name());
            assert!(d.key_merge_bytes(head) <= d.smem_bytes(head));
            assert_eq!(d.key_merge_bytes(head) == 0, d.key_split == 1);
            let plain = row.plain_tile(head);
            plain.check(row.arch, head).unwrap();
            assert!(plain.smem_bytes(head) <= l.max_smem_per_block, "{} head {}", row.arch, head.name());
            for dtype in AttentionDtype::ALL {
                for kind in [AttentionTileKind::Prefill, AttentionTileKind::Plain, AttentionTileKind::Decode] {
                    assert_eq!(ATTENTION_KERNELS.iter().filter(|k| k.head == Some(head) && k.dtype == dtype && k.kind == kind).count(), 1);
                }
            }
        }
    }
    // FIELD-REPORTS §2: head 256 and 320 on Volta fit its 96 KB (and Turing's 64 KB).
    for arch in [Arch::Sm70, Arch::Sm75] {
        for head in [AttentionHead::D256, AttentionHead::D320V256, AttentionHead::D576V512] {
            assert!(attention_config(arch).tile(head).smem_bytes(head) <= arch.limits().max_smem_per_block);
        }
    }
    // bf16 never runs on a matrix instruction that lacks it.
    assert_eq!(matrix_path(Arch::Sm70, AttentionDtype::Bf16), MatrixPath::Simt);
    assert_eq!(matrix_path(Arch::Sm75, AttentionDtype::Bf16), MatrixPath::Simt);
    assert_eq!(matrix_path(Arch::Sm75, AttentionDtype::F16), MatrixPath::Mma1688Pair);
    assert_eq!(matrix_path(Arch::Sm80, AttentionDtype::Bf16), MatrixPath::Mma16816);
    // The sm_90 decode tiles of heads 128 and 256 split their keys over the warps (no warp
    // repeats another's `Q·Kᵀ`); a split that leaves a warp less than a k-step is refused.
    for head in [AttentionHead::D128, AttentionHead::D256] {
        assert!(attention_config(Arch::Sm90).decode_tile(head).key_split > 1, "head {}", head.name());
    }
    let mut d = attention_config(Arch::Sm90).decode_tile(AttentionHead::D128);
    d.key_split = 8;
    assert!(d.check(Arch::Sm90, AttentionHead::D128).is_err(), "64-key tiles over 8 key groups: 8 keys per warp");
    // A tile that does not fit is refused.
    let mut t = attention_config(Arch::Sm90).tile(AttentionHead::D256);
    t.bk = 128;
    t.stages = 3;
    assert!(t.check(Arch::Sm75, AttentionHead::D256).is_err());
}

#[test]
fn warpgroup_tiles_exist_on_sm_90_alone_and_in_the_shape_they_need() {
    let wgmma_heads: Vec<AttentionHead> = AttentionHead::ALL.into_iter().filter(|&h| attention_config(Arch::Sm90).tile(h).wgmma).collect();
    assert_eq!(wgmma_heads, [AttentionHead::D128, AttentionHead::D256, AttentionHead::D192V128]);
    for row in ATTENTION_CONFIGS.iter() {
        for head in AttentionHead::ALL {
            assert!(!row.decode_tile(head).wgmma, "{:?} decode {}: a decode tile has 16 rows, a warpgroup 64", row.arch, head.name());
            assert_eq!(row.tile(head).wgmma, row.arch == Arch::Sm90 && wgmma_heads.contains(&head));
            // The plain tiles differ from the prefill tiles where the lean kernel affords more
            // keys per tile: on sm_90, at heads 64 and 128, 128-key warpgroup tiles.
            let larger = row.arch == Arch::Sm90 && matches!(head, AttentionHead::D64 | AttentionHead::D128);
            assert_eq!(row.plain_tile(head) != row.tile(head), larger, "{:?} head {}", row.arch, head.name());
            assert_eq!(row.has_plain_tile(head), larger);
            if larger {
                assert!(row.plain_tile(head).wgmma && row.plain_tile(head).bk == 128);
            }
        }
    }
    let t = attention_config(Arch::Sm90).tile(AttentionHead::D128);
    assert_eq!((t.rows(), t.threads(), t.smem_pad()), (128, 256, 0));
    // Q, 3 stages of K and V, unpadded, and 1024 bytes to align the swizzle atoms.
    assert_eq!(t.smem_bytes(AttentionHead::D128), 2 * (128 * 128 + 3 * 64 * 256) + 1024);
    // No warpgroup MMA on other architectures (sm_100 and sm_120 included), nor in shapes the
    // path does not take.
    for arch in [Arch::Sm80, Arch::Sm89, Arch::Sm100, Arch::Sm120] {
        assert!(t.check(arch, AttentionHead::D128).is_err(), "{arch:?}");
    }
    assert!(t.check(Arch::Sm90, AttentionHead::D80).is_err(), "80 columns: no 128-byte swizzle, no wgmma width");
    let mut two_tiles = t;
    two_tiles.m_tiles = 2;
    assert!(two_tiles.check(Arch::Sm90, AttentionHead::D128).is_err());
    let mut half_group = t;
    half_group.row_warps = 6;
    assert!(half_group.check(Arch::Sm90, AttentionHead::D128).is_err());
}

/// Buffers large enough for `d`, at distinct aligned addresses.
fn buffers(d: &Attention) -> AttentionBuffers {
    d.placeholder_buffers().unwrap()
}

fn plan(d: &Attention) -> Result<cukernels::AttentionPlan, Error> {
    d.plan(AttentionDtype::F16, &buffers(d), attention_config(Arch::Sm90), 132)
}

fn invalid_name(r: Result<cukernels::AttentionPlan, Error>) -> String {
    match r {
        Err(Error::InvalidArgument { name, value, reason }) => {
            assert!(!reason.is_empty() && !value.is_empty());
            name.to_string()
        }
        Err(e) => format!("other: {e}"),
        Ok(_) => "ok".into(),
    }
}

#[test]
fn bad_input_is_a_typed_error_naming_the_argument() {
    let d = Attention::new(2, 64, 64, 8, 2, 128);
    assert!(plan(&d).is_ok());
    assert_eq!(invalid_name(plan(&Attention::new(1, 4, 4, 2, 2, 72))), "head_dim");
    assert_eq!(invalid_name(plan(&Attention::new(1, 4, 4, 2, 2, 128).head_dim_v(64))), "head_dim");
    assert_eq!(invalid_name(plan(&Attention::new(1, 4, 4, 6, 4, 64))), "heads_q");
    assert_eq!(invalid_name(plan(&Attention::new(1, 4, 4, 2, 0, 64))), "heads_k");
    assert_eq!(invalid_name(plan(&d.clone().softcap(0.0))), "softcap");
    assert_eq!(invalid_name(plan(&d.clone().scale(f32::NAN))), "scale");
    assert_eq!(invalid_name(plan(&d.clone().sinks(vec![0.0; 7]))), "sinks");
    assert_eq!(invalid_name(plan(&d.clone().alibi(Alibi::Slopes(vec![0.1; 3])))), "alibi_slopes");
    assert_eq!(invalid_name(plan(&d.clone().alibi(Alibi::MaxBias(f32::INFINITY)))), "max_bias");
    assert_eq!(invalid_name(plan(&d.clone().splits(0))), "splits");
    assert_eq!(invalid_name(plan(&d.clone().splits(1000))), "splits");
    assert_eq!(invalid_name(plan(&Attention::new(70000, 1, 8, 1, 1, 64))), "batch");
    // Buffers.
    let mut b = buffers(&d);
    b.k.1 -= 1;
    assert!(matches!(d.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132), Err(Error::BufferTooSmall { name: "k", .. })));
    let mut b = buffers(&d);
    b.o.0 = b.q.0 + 64;
    assert!(matches!(d.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132), Err(Error::Overlap(_))));
    let overlapping_rows = d.clone().strides(d.q_strides, d.k_strides, d.v_strides, Strides { batch: 64 * 8 * 128, seq: 8 * 128, head: 64 });
    assert!(matches!(plan(&overlapping_rows), Err(Error::Overlap(_))));
    // LSE and mask buffers must match what the descriptor asks for.
    let mut b = buffers(&d);
    b.lse = Some((5 << 30, 10));
    assert_eq!(invalid_name(d.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132)), "lse");
    let lse = d.clone().with_lse();
    let mut b = buffers(&lse);
    b.lse.as_mut().unwrap().1 = 2 * 8 * 64 - 1;
    assert!(matches!(lse.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132), Err(Error::BufferTooSmall { name: "lse", .. })));
    let masked = d.clone().mask(MaskShape { rows: 64, cols: 63, row_stride: 64 });
    let mut b = buffers(&masked);
    b.mask = Some((6 << 30, 64 * 64, false));
    assert_eq!(invalid_name(masked.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132)), "mask");
    let masked = d.clone().mask(MaskShape { rows: 64, cols: 64, row_stride: 60 });
    assert_eq!(invalid_name(masked.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132)), "mask.row_stride");
    let masked = d.clone().mask(MaskShape { rows: 64, cols: 64, row_stride: 64 });
    b.mask = Some((6 << 30, 64 * 64 - 1, true));
    assert!(matches!(masked.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132), Err(Error::BufferTooSmall { name: "mask", .. })));
    assert!(plan(&masked).is_ok(), "placeholder buffers include the mask");
    b.mask = None;
    assert_eq!(invalid_name(masked.plan(AttentionDtype::F16, &b, attention_config(Arch::Sm90), 132)), "mask", "a mask shape without a buffer");
    // Packed sequences.
    let v = |q: Vec<u32>, k: Vec<u32>| Attention::new(0, 0, 0, 2, 2, 64).varlen(q, k);
    assert!(plan(&v(vec![0, 3, 3, 10], vec![0, 0, 5, 9])).is_ok());
    assert_eq!(invalid_name(plan(&v(vec![0, 3, 2, 10], vec![0, 1, 5, 9]))), "cu_seqlens_q");
    assert_eq!(invalid_name(plan(&v(vec![1, 3, 4, 10], vec![0, 1, 5, 9]))), "cu_seqlens_q");
    let mut wrong_len = v(vec![0, 3, 4, 10], vec![0, 1, 5, 9]);
    wrong_len.varlen.as_mut().unwrap().cu_seqlens_k.pop();
    assert_eq!(invalid_name(plan(&wrong_len)), "cu_seqlens_k");
    // Paged K/V.
    let paged = |table: Vec<u32>, lens: Option<Vec<u32>>| {
        Attention::new(2, 1, 100, 4, 2, 128).paged(PagedKv { page_size: 16, pages: 20, pages_per_seq: 7, block_table: table, seqlens_k: lens })
    };
    assert!(plan(&paged((0..14).collect(), Some(vec![100, 3]))).is_ok());
    assert_eq!(invalid_name(plan(&paged((0..14).map(|p| p * 2).collect(), None))), "block_table");
    assert_eq!(invalid_name(plan(&paged((0..13).collect(), None))), "block_table");
    assert_eq!(invalid_name(plan(&paged((0..14).collect(), Some(vec![101, 3])))), "seqlens_k");
    assert_eq!(invalid_name(plan(&paged((0..14).collect(), Some(vec![1])))), "seqlens_k");
    let mut too_long = paged((0..14).collect(), None);
    too_long.seqlen_k = 113;
    assert_eq!(invalid_name(plan(&too_long)), "seqlen_k");
}

/// Tables passed as device buffers replace the problem's host arrays: their pointers go in the
/// parameters, nothing is uploaded (so the call can be captured), the kernels check the
/// paged tables' contents (`CHECK_TABLES`), and their lengths, alignment and the rule "one
/// source per table" are checked on the host.
#[test]
fn device_tables_replace_the_host_arrays() {
    use cukernels::attention_flags::{ALIBI, CHECK_TABLES, KEY_LENGTHS, PAGED, SINKS};
    let on_device = Attention::new(2, 1, 100, 4, 2, 128).paged(PagedKv::on_device(16, 20, 7));
    let (table_at, lens_at, slopes_at, sinks_at) = (7u64 << 40, 8u64 << 40, 9u64 << 40, 10u64 << 40);
    let with = |d: &Attention, tables: TableBuffers| d.plan(AttentionDtype::F16, &AttentionBuffers { tables, ..buffers(d) }, attention_config(Arch::Sm90), 132);
    let tables = TableBuffers { block_table: Some((table_at, 14)), seqlens_k: Some((lens_at, 2)), alibi_slopes: None, sinks: Some((sinks_at, 4)), ..TableBuffers::default() };
    let p = with(&on_device, tables).unwrap();
    let flags = p.params.flags;
    assert_eq!(flags & (PAGED | KEY_LENGTHS | CHECK_TABLES | SINKS), PAGED | KEY_LENGTHS | CHECK_TABLES | SINKS);
    // Lengths per sequence: `key_ends` is the device buffer, read from step-0 starts (the zero
    // word, set at launch).
    assert_eq!((p.params.block_table.addr(), p.params.key_ends.addr(), p.params.key_start_step, p.params.sinks.addr(), p.params.last_page), (table_at, lens_at, 0, sinks_at, 19));
    assert!(!p.uploads() && p.checks_tables() && p.forward_overlaps_previous && p.block_table.is_none() && p.cu_seqlens_k.is_none() && p.sinks.is_none(), "{p:?}");
    let sm80 = on_device.plan(AttentionDtype::F16, &AttentionBuffers { tables, ..buffers(&on_device) }, attention_config(Arch::Sm80), 108).unwrap();
    assert!(sm80.checks_tables() && !sm80.forward_overlaps_previous, "no programmatic launch before sm_90");
    // The same problem on the host: uploaded, checked there, not on the device.
    let host = Attention::new(2, 1, 100, 4, 2, 128)
        .paged(PagedKv { page_size: 16, pages: 20, pages_per_seq: 7, block_table: (0..14).collect(), seqlens_k: Some(vec![100, 3]) })
        .sinks(vec![0.5; 4]);
    let p = plan(&host).unwrap();
    assert_eq!(p.params.flags & (PAGED | KEY_LENGTHS | CHECK_TABLES), PAGED | KEY_LENGTHS);
    assert_eq!(p.params.key_start_step, 1, "cumulative lengths");
    assert!(p.uploads() && !p.checks_tables() && p.cu_seqlens_k == Some(vec![0, 100, 103]) && p.block_table.is_some(), "{p:?}");
    // Only the block table on the device; every sequence has seqlen_k keys.
    let p = with(&on_device, TableBuffers { block_table: Some((table_at, 14)), ..TableBuffers::default() }).unwrap();
    assert_eq!(p.params.flags & (KEY_LENGTHS | CHECK_TABLES), CHECK_TABLES);
    assert!(!p.uploads());
    assert!(plan(&on_device).is_ok(), "placeholder buffers include a device block table");
    // Slopes on the device take the biased prefill tile, as host ALiBi does.
    let prefill = Attention::new(1, 512, 512, 8, 8, 128);
    assert_eq!(plan(&prefill).unwrap().kind, AttentionTileKind::Plain);
    let p = with(&prefill, TableBuffers { alibi_slopes: Some((slopes_at, 8)), ..TableBuffers::default() }).unwrap();
    assert_eq!((p.kind, p.params.flags & ALIBI, p.params.alibi_slopes.addr()), (AttentionTileKind::Prefill, ALIBI, slopes_at));
    assert!(!p.checks_tables(), "slopes and sinks are values, not indices");

    // Bad tables.
    let err = with(&on_device, TableBuffers { block_table: Some((table_at, 13)), ..tables }).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { name: "block_table", len: 13, required: 14 }), "{err}");
    assert!(matches!(with(&on_device, TableBuffers { seqlens_k: Some((lens_at, 1)), ..tables }), Err(Error::BufferTooSmall { name: "seqlens_k", .. })));
    assert!(matches!(with(&on_device, TableBuffers { sinks: Some((sinks_at, 3)), ..tables }), Err(Error::BufferTooSmall { name: "sinks", .. })));
    assert_eq!(invalid_name(with(&on_device, TableBuffers { block_table: Some((table_at + 2, 14)), ..tables })), "block_table");
    assert_eq!(invalid_name(with(&on_device, TableBuffers { block_table: None, ..tables })), "block_table", "no table anywhere");
    let both = host.clone().paged(PagedKv { seqlens_k: None, ..host.paged.clone().unwrap() });
    assert_eq!(invalid_name(with(&both, TableBuffers { block_table: Some((table_at, 14)), ..TableBuffers::default() })), "block_table");
    assert_eq!(invalid_name(with(&host, TableBuffers { seqlens_k: Some((lens_at, 2)), block_table: None, ..TableBuffers::default() })), "seqlens_k");
    assert_eq!(invalid_name(with(&host, TableBuffers { sinks: Some((sinks_at, 4)), ..TableBuffers::default() })), "sinks");
    let alibi = prefill.clone().alibi(Alibi::MaxBias(8.0));
    assert_eq!(invalid_name(with(&alibi, TableBuffers { alibi_slopes: Some((slopes_at, 8)), ..TableBuffers::default() })), "alibi_slopes");
    assert_eq!(invalid_name(with(&prefill, TableBuffers { block_table: Some((table_at, 14)), ..TableBuffers::default() })), "block_table", "a block table without paged K/V");
    let packed = Attention::new(0, 0, 0, 2, 2, 64).varlen(vec![0, 1, 2], vec![0, 5, 9]).paged(PagedKv::on_device(16, 4, 1));
    assert_eq!(invalid_name(with(&packed, TableBuffers { block_table: Some((table_at, 2)), seqlens_k: Some((lens_at, 2)), ..TableBuffers::default() })), "seqlens_k", "packed key lengths come from cu_seqlens_k");
    // Device lengths are bounded by seqlen_k, which must fit the pages.
    let mut too_long = on_device.clone();
    too_long.seqlen_k = 113;
    assert_eq!(invalid_name(with(&too_long, tables)), "seqlen_k");
}

/// Packed sequences whose cumulative lengths are device buffers (`Attention::varlen_on_device`):
/// their pointers go in the parameters (the key lengths as cumulative starts and ends, step
/// 1), nothing is uploaded, the kernels check them (`CHECK_TABLES`), the packed totals size
/// the buffers and bound the ranges (`total_q`, `total_k`), and the launch is never split;
/// lengths, alignment, a missing buffer and a second source are refused on the host.
#[test]
fn device_cumulative_lengths_replace_the_host_ones() {
    use cukernels::attention_flags::{CHECK_TABLES, KEY_LENGTHS, SPLIT, VARLEN};
    let (cu_q_at, cu_k_at) = (8u64 << 40, 9u64 << 40);
    let tables = TableBuffers { cu_seqlens_q: Some((cu_q_at, 4)), cu_seqlens_k: Some((cu_k_at, 4)), ..TableBuffers::default() };
    let with = |d: &Attention, tables: TableBuffers| d.plan(AttentionDtype::F16, &AttentionBuffers { tables, ..buffers(d) }, attention_config(Arch::Sm90), 132);
    // Three sequences of at most 100 queries and 700 keys, 150 and 900 rows in all.
    let prefill = Attention::new(0, 0, 0, 8, 2, 128).varlen_on_device(3, 100, 700, 150, 900).causal().with_lse();
    let n = prefill.buffer_lengths().unwrap();
    assert_eq!((n.q, n.k, n.o, n.lse), (150 * 8 * 128, 900 * 2 * 128, 150 * 8 * 128, 8 * 150));
    let p = with(&prefill, tables).unwrap();
    assert_eq!(p.params.flags & (VARLEN | KEY_LENGTHS | CHECK_TABLES | SPLIT), VARLEN | KEY_LENGTHS | CHECK_TABLES);
    assert_eq!((p.params.cu_seqlens_q.addr(), p.params.key_starts.addr(), p.params.key_ends.addr(), p.params.key_start_step), (cu_q_at, cu_k_at, cu_k_at + 4, 1));
    assert_eq!((p.params.total_q, p.params.total_k, p.params.seqlen_q, p.params.seqlen_k, p.grid.1), (150, 900, 100, 700, 3 * 8));
    assert!(!p.uploads() && p.checks_tables() && p.cu_seqlens_q.is_none() && p.cu_seqlens_k.is_none(), "{p:?}");
    assert!(plan(&prefill).is_ok(), "placeholder buffers include the device lengths");
    // Host lengths: uploaded, checked there; total_k only bounds packed K/V.
    let host = Attention::new(0, 0, 0, 8, 2, 128).varlen(vec![0, 100, 100, 150], vec![0, 700, 800, 900]);
    let p = plan(&host).unwrap();
    assert_eq!((p.params.flags & CHECK_TABLES, p.params.total_q, p.params.total_k), (0, 150, 900));
    assert!(p.uploads() && p.cu_seqlens_q.is_some(), "{p:?}");
    assert_eq!(plan(&Attention::new(2, 1, 100, 4, 2, 128)).unwrap().params.total_k, u32::MAX, "not packed");
    // One long sequence's decode would split; with device lengths it is not, and asking is refused.
    let decode = Attention::new(0, 0, 0, 32, 8, 128).varlen_on_device(1, 1, 16384, 1, 16384);
    let one = TableBuffers { cu_seqlens_q: Some((cu_q_at, 2)), cu_seqlens_k: Some((cu_k_at, 2)), ..TableBuffers::default() };
    let p = with(&decode, one).unwrap();
    assert_eq!((p.kind, p.splits, p.params.flags & SPLIT), (AttentionTileKind::Decode, 1, 0));
    assert!(plan(&Attention::new(1, 1, 16384, 32, 8, 128)).unwrap().splits > 1, "the same problem padded splits");
    assert_eq!(invalid_name(with(&decode.clone().splits(4), one)), "splits");
    // Bad tables.
    assert!(matches!(with(&prefill, TableBuffers { cu_seqlens_q: Some((cu_q_at, 3)), ..tables }), Err(Error::BufferTooSmall { name: "cu_seqlens_q", len: 3, required: 4 })));
    assert!(matches!(with(&prefill, TableBuffers { cu_seqlens_k: Some((cu_k_at, 2)), ..tables }), Err(Error::BufferTooSmall { name: "cu_seqlens_k", .. })));
    assert_eq!(invalid_name(with(&prefill, TableBuffers { cu_seqlens_q: Some((cu_q_at + 2, 4)), ..tables })), "cu_seqlens_q", "unaligned");
    assert_eq!(invalid_name(with(&prefill, TableBuffers { cu_seqlens_k: None, ..tables })), "cu_seqlens_k", "missing");
    assert_eq!(invalid_name(with(&host, tables)), "cu_seqlens_q", "given twice");
    assert_eq!(invalid_name(with(&Attention::new(3, 10, 10, 8, 2, 128), tables)), "cu_seqlens_q", "without packed sequences");
    let mut wrong_total = host.clone();
    wrong_total.varlen.as_mut().unwrap().total_k = 901;
    assert_eq!(invalid_name(plan(&wrong_total)), "total_k");
    assert_eq!(invalid_name(with(&Attention::new(0, 0, 0, 8, 2, 128).varlen_on_device(3, 100, 700, 1 << 31, 900), tables)), "total_q");
    // Paged K/V with packed queries: keys from the pages, their lengths from cu_seqlens_k.
    let paged = Attention::new(0, 0, 0, 8, 2, 128).varlen_on_device(3, 4, 100, 9, 0).paged(PagedKv::on_device(16, 40, 7));
    let p = with(&paged, TableBuffers { block_table: Some((7 << 40, 21)), ..tables }).unwrap();
    assert_eq!((p.params.total_k, p.params.key_start_step), (u32::MAX, 1));
}

/// The split workspace a handle owns holds the partial results of the decode splits the rule
/// picks on the H200 (one and 16 sequences, every head size, GQA 1 to 16, 1 to 16 query
/// positions), so that decode steps allocate nothing; a launch without a split needs none.
#[test]
fn the_own_split_workspace_holds_the_split_rules_decode_launches() {
    let row = attention_config(Arch::Sm90);
    let own = cukernels::attention::own_split_workspace_bytes(row, 132);
    assert!(own > 0 && own < 20 << 20, "{own}");
    eprintln!("own split workspace on the H200: {own} bytes");
    let mut largest = 0;
    for head in AttentionHead::ALL {
        for (batch, kv, heads_q, heads_k, seqlen_q) in [(1, 16384, 32, 8, 1), (1, 131072, 32, 8, 1), (1, 20000, 32, 2, 1), (16, 8192, 32, 8, 1), (1, 4096, 16, 16, 1), (1, 65536, 8, 8, 16), (4, 20000, 32, 2, 4)] {
            let d = Attention::new(batch, seqlen_q, kv, heads_q, heads_k, head.dk() as usize).head_dim_v(head.dv() as usize);
            let p = plan(&d).unwrap();
            let need = p.split_workspace_bytes();
            assert_eq!(need == 0, p.splits == 1, "{d:?}: {p:?}");
            // Splits × rows partial rows of D_v floats and one LSE each (at most 255 bytes of
            // alignment between them).
            let rows = p.splits * heads_q * batch * seqlen_q;
            if p.splits > 1 {
                assert!(need >= rows * (head.dv() as usize + 1) * 4 && need < rows * (head.dv() as usize + 1) * 4 + 256, "{d:?}");
            }
            assert!(need <= own, "head {}: {batch}×{seqlen_q} against {kv} keys, GQA {}: {p:?} needs {need} of {own}", head.name(), heads_q / heads_k);
            largest = largest.max(need);
        }
    }
    assert!(largest > 0, "some of these shapes split");
}

#[test]
fn decode_packs_query_heads_and_splits_the_keys() {
    // One sequence, GQA 4, 16k keys: 8 blocks of packed heads would leave an H200 idle.
    // Its 4 rows per KV head fit the decode tile: one 16-row tile, 4 warps of 16 keys of each
    // key tile and all 128 columns.
    let row = attention_config(Arch::Sm90);
    let p = plan(&Attention::new(1, 1, 16384, 32, 8, 128)).unwrap();
    assert_eq!(p.heads_packed, 4);
    assert!(p.kind == AttentionTileKind::Decode && p.block == row.decode_tile(AttentionHead::D128).threads(), "{p:?}");
    assert_eq!(p.smem_bytes, row.decode_tile(AttentionHead::D128).smem_bytes(AttentionHead::D128));
    // At 16k keys (8 MiB of K and V per KV head) a split of one block per SM still reads
    // 512 KiB: 16 splits of the 8 groups, 128 blocks.
    assert_eq!((p.splits, p.grid.0 * p.grid.1 * p.grid.2), (16, 128), "{p:?}");
    // At 8k it would read 256 KiB: one wave of the tile's blocks per SM instead, every block
    // resident at once (32 splits: none under MIN_SPLIT_KV_BYTES).
    let p = plan(&Attention::new(1, 1, 8192, 32, 8, 128)).unwrap();
    let wave = 132 * row.decode_tile(AttentionHead::D128).blocks_per_sm;
    assert!(p.splits > 16 && p.grid.0 * p.grid.1 * p.grid.2 > 132, "{p:?}");
    assert!(p.grid.0 * p.grid.1 * p.grid.2 <= wave && (p.splits as u64) * 128 * 1024 <= 8192 * 256 * 2, "{p:?}");
    // The merge overlaps the split launch (PDL) on sm_90+ builds only.
    assert!(p.merge_overlaps_split);
    let one_sequence = Attention::new(1, 1, 16384, 32, 8, 128);
    let on_sm80 = one_sequence.plan(AttentionDtype::F16, &buffers(&one_sequence), attention_config(Arch::Sm80), 108).unwrap();
    assert!(on_sm80.splits > 1 && !on_sm80.merge_overlaps_split, "{on_sm80:?}");
    // Prefill fills the GPU by itself: no packing, no split; without a mask tensor, ALiBi or
    // softcap, the plain prefill tile (causal and windows included), with one the prefill tile.
    let mut prefill = Attention::new(4, 4096, 4096, 32, 8, 128);
    prefill.causal = true;
    prefill.window_left = Some(1000);
    let p = plan(&prefill).unwrap();
    assert_eq!((p.heads_packed, p.splits, p.kind, p.merge_overlaps_split), (1, 1, AttentionTileKind::Plain, false));
    let plain = row.plain_tile(AttentionHead::D128);
    assert_eq!((p.block, p.smem_bytes), (plain.threads(), plain.smem_bytes(AttentionHead::D128)));
    prefill.softcap = Some(30.0);
    let p = plan(&prefill).unwrap();
    assert_eq!((p.kind, p.smem_bytes), (AttentionTileKind::Prefill, row.tile(AttentionHead::D128).smem_bytes(AttentionHead::D128)));
    prefill.softcap = None;
    prefill.alibi = Some(Alibi::MaxBias(8.0));
    assert_eq!(plan(&prefill).unwrap().kind, AttentionTileKind::Prefill);
    // GQA 32 with 4 queries: 128 rows do not fit one block's 64; 16 heads are packed, 64 rows:
    // more than a decode tile holds.
    let p = plan(&Attention::new(1, 4, 8192, 64, 2, 128)).unwrap();
    assert_eq!((p.heads_packed, p.kind), (16, AttentionTileKind::Plain));
    // 16 query positions of one head (no GQA) still fit the decode tile; 17 do not.
    assert_eq!(plan(&Attention::new(2, 16, 4096, 8, 8, 64)).unwrap().kind, AttentionTileKind::Decode);
    assert_eq!(plan(&Attention::new(2, 17, 4096, 8, 8, 64)).unwrap().kind, AttentionTileKind::Plain);
    // A head size whose plain prefill tile is the prefill tile takes the prefill entry point.
    assert_eq!(plan(&Attention::new(2, 17, 4096, 8, 8, 256)).unwrap().kind, AttentionTileKind::Prefill);
    // Short keys are not split: a split reads at least MIN_SPLIT_KV_BYTES of K and V.
    let p = plan(&Attention::new(1, 1, 64, 8, 8, 128)).unwrap();
    assert_eq!(p.splits, 1);
}

#[test]
fn alibi_slopes_follow_ggml() {
    // 12 heads: n = 8, m0 = 2^(-8/8) = 0.5, m1 = 2^(-4/8).
    let s = alibi_slopes(12, 8.0);
    assert_eq!(s.len(), 12);
    assert!((s[0] - 0.5).abs() < 1e-7 && (s[7] - 0.5f32.powi(8)).abs() < 1e-9);
    let m1 = 2f32.powf(-0.5);
    assert!((s[8] - m1).abs() < 1e-7 && (s[11] - m1.powi(7)).abs() < 1e-7);
}

#[test]
fn the_reference_gives_known_answers() {
    // One key: O is its V row. Causal with equal lengths: row 0 sees key 0 only.
    let d = Attention::new(1, 3, 3, 1, 1, 64).causal().with_lse();
    let q: Vec<f32> = (0..4 * 64).map(|i| (i % 7) as f32 * 0.1).collect();
    let k: Vec<f32> = (0..3 * 64).map(|i| (i % 5) as f32 * 0.1).collect();
    let v: Vec<f32> = (0..3 * 64).map(|i| i as f32).collect();
    let r = attention_reference(&d, &AttentionInputs { q: &q, k: &k, v: &v, mask: None });
    for c in 0..64 {
        assert_eq!(r.o[c], (c, c as f64));
    }
    // Fully masked rows (seqlen_q > seqlen_k, causal): zeros and LSE −inf; with a sink, zeros
    // and LSE = the sink.
    let d = Attention::new(1, 4, 2, 1, 1, 64).causal().with_lse();
    let r = attention_reference(&d, &AttentionInputs { q: &q, k: &k, v: &v, mask: None });
    assert!(r.o[..64].iter().all(|x| x.1 == 0.0) && r.lse[0].1 == f64::NEG_INFINITY && r.lse[2].1.is_finite());
    let r = attention_reference(&d.clone().sinks(vec![0.75]), &AttentionInputs { q: &q, k: &k, v: &v, mask: None });
    assert!(r.o[..64].iter().all(|x| x.1 == 0.0) && r.lse[0].1 == 0.75);
    // Equal keys: uniform weights, O the mean of the visible V rows, LSE = s + ln(n).
    let k1: Vec<f32> = (0..3 * 64).map(|i| (i % 64) as f32 * 0.01).collect();
    let d = Attention::new(1, 1, 3, 1, 1, 64).with_lse();
    let r = attention_reference(&d, &AttentionInputs { q: &q, k: &k1, v: &v, mask: None });
    for c in 0..64 {
        assert!((r.o[c].1 - (c as f64 + 64.0)).abs() < 1e-9);
    }
    let s: f64 = (0..64).map(|c| q[c] as f64 * k1[c] as f64).sum::<f64>() / 8.0;
    assert!((r.lse[0].1 - (s + 3f64.ln())).abs() < 1e-9);
    // A −inf mask entry removes a key: the mean of the other two.
    let mask = [0.0, f32::NEG_INFINITY, 0.0];
    let d = d.mask(MaskShape { rows: 1, cols: 3, row_stride: 3 });
    let r = attention_reference(&d, &AttentionInputs { q: &q, k: &k1, v: &v, mask: Some(&mask) });
    assert!((r.o[0].1 - 64.0).abs() < 1e-9);
}
