//! SGEMM without a GPU: config invariants, architecture mapping, argument validation, the
//! dispatcher, and the host's mapping of every layout/transpose/stride case onto the kernels'
//! canonical problem (emulated on the CPU from the plan and compared with the f64 reference of
//! the user-level contract).

use cukernels::sgemm::MAX_DIM;
use cukernels::{
    choose_kernel, sgemm_config, Arch, Error, Layout, Sgemm, SgemmBuffers, SgemmChoice, SgemmPlan, SgemmVariant, Transpose, GEMV_COLUMNS, GEMV_MIN_COLUMN_USE, GEMV_MIN_K, HUGE_MIN_K, TINY_MAX_TILE_USE, TINY_SHORT_K, best_tile_use,
    SgemmOperands, TinyConfig, TINY_GRID_WAVES, TINY_K_PER_LANE, TINY_SHORT_K_MAX_TILE_USE,
    k_slice, tile_origin_inside, MAX_K_SPLITS, SGEMM_CONFIGS, SMALL_TILE_MAX_ELEMENTS, SMEM_ROW_PAD, default_split_workspace_bytes, kernel_candidates,
    sgemm_flags, SplitWorkspaceLayout, MAX_WORKSPACE_K_SPLITS,
};
use cukernels_tests::{buffer_len, random_vec, rng, Expected};
use rand::Rng;

const A_BASE: u64 = 0x1_0000_0000;
const B_BASE: u64 = 0x2_0000_0000;
const C_BASE: u64 = 0x3_0000_0000;
const H200_SMS: u32 = 132;

fn buffers(a_len: usize, b_len: usize, c_len: usize) -> SgemmBuffers {
    SgemmBuffers { a_addr: A_BASE, a_len, b_addr: B_BASE, b_len, c_addr: C_BASE, c_len, ..Default::default() }
}

/// Where the CPU tests' workspace lies (after A, B and C).
const W_BASE: u64 = 0x4_0000_0000;

fn with_workspace(bufs: SgemmBuffers, workspace_bytes: usize) -> SgemmBuffers {
    SgemmBuffers { workspace_addr: W_BASE, workspace_bytes, ..bufs }
}

fn plan(g: &Sgemm, bufs: &SgemmBuffers) -> Result<SgemmPlan, Error> {
    g.plan(bufs, sgemm_config(Arch::Sm90), H200_SMS, None)
}

/// Runs a plan on the CPU exactly as the kernels define the canonical problem (flags, leading
/// dimensions, batch strides), reading whichever host buffer each device address points into.
fn emulate(plan: &SgemmPlan, a: &[f32], b: &[f32], c: &mut [f32]) {
    let p = &plan.params;
    let host = |addr: u64| -> (&[f32], usize) {
        let (buf, base) = if (B_BASE..C_BASE).contains(&addr) { (b, B_BASE) } else { (a, A_BASE) };
        (buf, ((addr - base) / 4) as usize)
    };
    use cukernels::sgemm_flags::{BETA_ZERO, C_TRANSPOSED};
    let (left, l0) = host(p.a.addr());
    let (right, r0) = host(p.b.addr());
    let c0 = ((p.c.addr() - C_BASE) / 4) as usize;
    for batch in 0..p.batch as usize {
        for i in 0..p.m as usize {
            for j in 0..p.n as usize {
                let mut acc = 0.0f64;
                for q in 0..p.k as usize {
                    let ai = l0 + batch * p.stride_a as usize + if plan.operands.a_k_contiguous() { i * p.lda as usize + q } else { q * p.lda as usize + i };
                    let bi = r0 + batch * p.stride_b as usize + if plan.operands.b_k_contiguous() { j * p.ldb as usize + q } else { q * p.ldb as usize + j };
                    acc += left[ai] as f64 * right[bi] as f64;
                }
                let (row, col) = if p.flags & C_TRANSPOSED != 0 { (j, i) } else { (i, j) };
                let ci = c0 + batch * p.stride_c as usize + row * p.ldc as usize + col;
                let old = if p.flags & BETA_ZERO != 0 { 0.0 } else { p.beta as f64 * c[ci] as f64 };
                c[ci] = (p.alpha as f64 * acc + old) as f32;
            }
        }
    }
}

#[test]
fn canonical_mapping_matches_the_contract_for_every_layout_transpose_and_stride() {
    let mut rng = rng("canonical_mapping");
    let mut cases = 0;
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for ta in [Transpose::No, Transpose::Yes] {
            for tb in [Transpose::No, Transpose::Yes] {
                for (m, n, k, batch) in [(5, 7, 3, 1), (1, 9, 4, 3), (6, 1, 5, 2), (4, 4, 1, 2), (3, 8, 6, 4)] {
                    for (pad_a, pad_b, pad_c, broadcast) in [(0, 0, 0, false), (2, 1, 3, false), (1, 0, 2, true)] {
                        let g0 = Sgemm::new(m, n, k).layout(layout).transpose(ta, tb).batched(batch).alpha_beta(1.5, -0.25);
                        let (ar, ac) = g0.stored_a();
                        let (br, bc) = g0.stored_b();
                        let minor = |r: usize, c: usize| if layout == Layout::RowMajor { c } else { r };
                        let major = |r: usize, c: usize| if layout == Layout::RowMajor { r } else { c };
                        let (lda, ldb, ldc) = (minor(ar, ac) + pad_a, minor(br, bc) + pad_b, minor(m, n) + pad_c);
                        let sa = if broadcast { 0 } else { major(ar, ac) * lda + 1 };
                        let g = g0.leading_dims(lda, ldb, ldc).strides(sa, major(br, bc) * ldb, major(m, n) * ldc + 2);
                        let a = random_vec(&mut rng, buffer_len(&g, ar, ac, lda, g.stride_a, 0));
                        let b = random_vec(&mut rng, buffer_len(&g, br, bc, ldb, g.stride_b, 0));
                        let c_before = random_vec(&mut rng, buffer_len(&g, m, n, ldc, g.stride_c, 0));
                        // The dispatcher's kernel (`gemv` on these small shapes, turned
                        // around where n < m), a block-tile kernel, and one turned around.
                        let want = Expected::full(&g, &a, &b, &c_before);
                        for choice in [None, Some(SgemmVariant::Large.into()), Some(SgemmChoice::from(SgemmVariant::Skinny).turn())] {
                            let bufs = buffers(a.len(), b.len(), c_before.len());
                            let p = g.plan(&bufs, sgemm_config(Arch::Sm90), H200_SMS, choice).unwrap();
                            let mut c = c_before.clone();
                            emulate(&p, &a, &b, &mut c);
                            if let Err(e) = want.check(&g, &c_before, &c) {
                                panic!("{g:?} -> {p:?}:\n{e}");
                            }
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 2 * 4 * 5 * 3 * 3);
}

/// The large shapes' checker (a few sampled elements plus every row and column sum in f64)
/// passes a correct result in every layout and transpose, and catches one wrong element that
/// no sampled point looks at, and one element left unwritten, through its row and column sums.
#[test]
fn sampled_checker_catches_one_wrong_element_through_line_sums() {
    let mut rng = rng("sampled checker");
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for (ta, tb) in [(Transpose::No, Transpose::No), (Transpose::Yes, Transpose::No), (Transpose::No, Transpose::Yes), (Transpose::Yes, Transpose::Yes)] {
            let g = Sgemm::new(37, 29, 41).layout(layout).transpose(ta, tb).batched(2).alpha_beta(0.75, 0.5);
            let (ar, ac) = g.stored_a();
            let (br, bc) = g.stored_b();
            let a = random_vec(&mut rng, buffer_len(&g, ar, ac, g.lda, g.stride_a, 0));
            let b = random_vec(&mut rng, buffer_len(&g, br, bc, g.ldb, g.stride_b, 0));
            let c_before = random_vec(&mut rng, buffer_len(&g, g.m, g.n, g.ldc, g.stride_c, 0));
            let p = g.plan(&buffers(a.len(), b.len(), c_before.len()), sgemm_config(Arch::Sm90), H200_SMS, None).unwrap();
            let mut c = c_before.clone();
            emulate(&p, &a, &b, &mut c);
            // No sampled points but the first and last element: only the sums see the rest.
            let want = Expected::sampled(&g, &a, &b, &c_before, 0, &mut rng);
            want.check(&g, &c_before, &c).unwrap_or_else(|e| panic!("{g:?}: a correct result fails:\n{e}"));
            let (i, j) = (17, 11);
            let at = |batch: usize| batch * g.stride_c + if layout == Layout::RowMajor { i * g.ldc + j } else { i + j * g.ldc };
            let mut wrong = c.clone();
            wrong[at(1)] += 0.05;
            let e = want.check(&g, &c_before, &wrong).expect_err("a wrong element must fail");
            assert!(e.contains(&format!("row {i} ")) && e.contains(&format!("column {j} ")), "{g:?}: {e}");
            // Left unwritten: the element of batch 0 whose result differs most from what C held
            // before (a random element may by chance lie within the sums' tolerance of it).
            let index = |i: usize, j: usize| if layout == Layout::RowMajor { i * g.ldc + j } else { i + j * g.ldc };
            let change = |x: usize| (c[x] - c_before[x]).abs();
            let left = (0..g.m).flat_map(|i| (0..g.n).map(move |j| index(i, j))).max_by(|&x, &y| change(x).total_cmp(&change(y))).unwrap();
            let mut unwritten = c.clone();
            unwritten[left] = c_before[left];
            assert!(want.check(&g, &c_before, &unwritten).is_err(), "{g:?}: an element left as it was must fail");
        }
    }
}

#[test]
fn tile_checker_rejects_what_cannot_fit() {
    let mut t = sgemm_config(Arch::Sm90).large;
    t.stages = 9;
    assert!(t.check(Arch::Sm75).is_err(), "sm_75 has no cp.async: stages must be 2");
    let t = cukernels::SgemmTile { stages: 8, ..sgemm_config(Arch::Sm90).huge };
    assert_eq!(t.check(Arch::Sm86), Err("shared memory exceeds the architecture's per-block limit"));
    let t = cukernels::SgemmTile { blocks_per_sm: 2, ..sgemm_config(Arch::Sm90).huge };
    assert!(t.check(Arch::Sm90).is_err(), "two huge blocks need more registers than an SM has");
}

#[test]
fn inner_loop_forms_are_the_measured_choices() {
    // The sm_90 row's kernels take the loop forms the H200 measurements chose (see
    // SgemmTile::pipelined_fragments and reads_first_fragments_early): a change to a tile that
    // silently flips one of these must show up here and be re-measured.
    let row = sgemm_config(Arch::Sm90);
    let limits = Arch::Sm90.limits();
    let forms = |v| {
        let t = row.tile(v);
        (t.pipelined_fragments(), t.reads_first_fragments_early(&limits))
    };
    assert_eq!(forms(SgemmVariant::Huge), (false, true), "huge: unrolled, first fragments early");
    assert_eq!(forms(SgemmVariant::Large), (true, false), "large: pipelined, no early read at 128 registers");
    assert_eq!(forms(SgemmVariant::Medium), (true, true), "medium: pipelined, early read");
    assert_eq!(forms(SgemmVariant::Small), (true, false), "small: 8x8 tiles pipelined, no early read at 128 registers");
    assert_eq!(forms(SgemmVariant::Skinny), (false, true), "skinny: 4x4 tiles stay unrolled");
}

#[test]
fn invalid_arguments_are_typed_errors_naming_the_argument() {
    let ok = buffers(1 << 20, 1 << 20, 1 << 20);
    let e = plan(&Sgemm::new(10, 10, 10).leading_dims(9, 10, 10), &ok).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument { name: "lda", value, .. } if value == "9"), "{e}");
    assert!(e.to_string().contains("lda") && e.to_string().contains('9'));
    let e = plan(&Sgemm::new(10, 10, 10).leading_dims(10, 10, 9), &ok).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "ldc", .. }), "{e}");
    let e = plan(&Sgemm::new(10, 10, 10).layout(Layout::ColMajor).transpose(Transpose::Yes, Transpose::No).leading_dims(9, 10, 10), &ok).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "lda", .. }), "{e}");
    let e = plan(&Sgemm::new(10, 12, 11), &buffers(109, 1000, 1000)).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { name: "a", len: 109, required: 110 }), "{e}");
    let e = plan(&Sgemm::new(10, 12, 11), &buffers(110, 131, 1000)).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { name: "b", len: 131, required: 132 }), "{e}");
    let e = plan(&Sgemm::new(10, 12, 11).batched(2), &buffers(220, 264, 239)).unwrap_err();
    assert!(matches!(e, Error::BufferTooSmall { name: "c", len: 239, required: 240 }), "{e}");
    let e = plan(&Sgemm::new(4, 4, 4).batched(3).strides(16, 16, 15), &ok).unwrap_err();
    assert!(matches!(e, Error::Overlap(_)), "{e}");
    let e = plan(&Sgemm::new(4, 4, 4).batched(3).strides(0, 0, 0), &ok).unwrap_err();
    assert!(matches!(e, Error::Overlap(_)), "{e}");
    let alias = SgemmBuffers { c_addr: A_BASE + 8, ..ok };
    let e = plan(&Sgemm::new(4, 4, 4), &alias).unwrap_err();
    assert!(matches!(e, Error::Overlap(_)), "{e}");
    let e = plan(&Sgemm::new(MAX_DIM + 1, 1, 1), &ok).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "m", .. }), "{e}");
    let e = plan(&Sgemm::new(1, 1, MAX_DIM + 1), &ok).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "k", .. }), "{e}");
    let e = plan(&Sgemm::new(2, 2, 2).batched(u32::MAX as usize + 1), &ok).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "batch", .. }), "{e}");
    let e = plan(&Sgemm::new(2, 2, 2).batched(3).strides(usize::MAX / 2, 4, 4), &ok).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "stride_a", .. }), "{e}");
    // More tiles than one grid holds.
    let huge = SgemmBuffers { a_addr: 1 << 12, a_len: 1 << 32, b_addr: 1 << 36, b_len: 1 << 32, c_addr: 1 << 40, c_len: usize::MAX / 2, ..Default::default() };
    let e = plan(&Sgemm::new(MAX_DIM, MAX_DIM, 1), &huge).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "m", .. }), "{e}");
}

#[test]
fn edge_semantics_of_the_plan() {
    let ok = buffers(1 << 20, 1 << 20, 1 << 20);
    // alpha = 0 or k = 0: A and B are not read (no length required), C = beta·C.
    let p = plan(&Sgemm::new(8, 8, 8).alpha_beta(0.0, 2.0), &buffers(0, 0, 64)).unwrap();
    assert_eq!(p.params.k, 0);
    let p = plan(&Sgemm::new(8, 8, 0).alpha_beta(1.0, 0.5), &buffers(0, 0, 64)).unwrap();
    assert_eq!(p.params.k, 0);
    assert!(!p.empty);
    // m = 0, n = 0 or batch = 0: nothing to launch, and no buffer needed.
    for g in [Sgemm::new(0, 8, 8), Sgemm::new(8, 0, 8), Sgemm::new(8, 8, 8).batched(0)] {
        assert!(plan(&g, &buffers(0, 0, 0)).unwrap().empty);
    }
    // beta = 0 sets the flag that keeps C unread.
    assert_ne!(plan(&Sgemm::new(8, 8, 8), &ok).unwrap().params.flags & 32, 0);
    // Batches beyond 65535 run in one launch: grid.z is capped, the tile kernels loop; `tiny`
    // (the dispatcher's choice here) numbers its pieces over the whole batch, in x.
    let g = Sgemm::new(2, 2, 2).batched(100_000);
    let p = g.plan(&ok, sgemm_config(Arch::Sm90), H200_SMS, Some(SgemmVariant::Small.into())).unwrap();
    assert_eq!(p.grid.2, 65535);
    assert_eq!(p.params.batch, 100_000);
    let p = plan(&g, &ok).unwrap();
    assert_eq!((p.variant, p.grid.1, p.grid.2, p.params.batch), (SgemmVariant::Tiny, 1, 1, 100_000));
    // Vector (16-byte) access only when base, leading dimension and stride allow it.
    let g = Sgemm::new(8, 8, 8).transpose(Transpose::Yes, Transpose::No);
    let aligned = plan(&g, &ok).unwrap();
    assert_eq!(aligned.params.flags & (4 | 8 | 16), 4 | 8 | 16);
    let shifted = plan(&g, &SgemmBuffers { a_addr: A_BASE + 4, b_addr: B_BASE + 8, c_addr: C_BASE + 12, ..ok }).unwrap();
    assert_eq!(shifted.params.flags & (4 | 8 | 16), 0);
    let odd_ld = plan(&g.leading_dims(9, 9, 9), &ok).unwrap();
    assert_eq!(odd_ld.params.flags & (4 | 8 | 16), 0);
}

#[test]
fn dispatcher_follows_its_rule() {
    let row = sgemm_config(Arch::Sm90);
    let workspace = default_split_workspace_bytes(row, H200_SMS);
    // Row-major A and B as stored, neither transposed (the canonical operands of `Sgemm::new`).
    let choose_with = |ops: SgemmOperands, m: usize, n: usize, k: usize, batch: usize| choose_kernel(m, n, k, batch, ops, row, H200_SMS, workspace).to_string();
    let choose = |m: usize, n: usize, k: usize, batch: usize| choose_with(SgemmOperands::Nn, m, n, k, batch);
    // Up to GEMV_DISPATCH_MAX rows or columns: `gemv`, either way round.
    for m in [1, 4] {
        assert_eq!(choose(m, 4096, 4096, 1), "gemv");
        assert_eq!(choose(4096, m, 4096, 1), "gemv");
    }
    // From m = 5 16-row tiles stream B once, their k split over 6 blocks through the workspace
    // (64 tiles alone leave most SMs idle; H200, 16 × 4096²: 32 µs against 35 over a cluster
    // of 5 and 71 unsplit); from 9 `gemv` would need two passes.
    for m in [5, 8, 9, 16] {
        assert_eq!(choose(m, 4096, 4096, 1), "skinny/w6");
    }
    assert_ne!(choose(16384, 8, 16384, 1), "gemv");
    assert_ne!(choose(17, 4096, 4096, 1), "gemv");
    // A short k leaves `gemv` only for problems too small to matter (GEMV_TINY_OUTPUTS): the
    // randomized sweep's 2197 × (1 × 162 × 9) goes to the tiles, 16 × (21 × 3 × 3) stays.
    assert_ne!(choose(1, 162, 9, 2197), "gemv");
    assert_ne!(choose(1518, 3, 27, 764), "gemv");
    assert_eq!(choose(21, 3, 3, 16), "gemv");
    assert_eq!(choose(1, 162, GEMV_MIN_K, 2197), "gemv");
    assert_ne!(choose(1, 162, GEMV_MIN_K - 1, 2197), "gemv");
    // `gemv`'s column body (the streamed operand not k-contiguous) gives each block 32
    // columns of the long side: 13 of them leave 59% of its lanes idle, and `tiny` takes the
    // problem (the held-out sweep's 3125 × (1 × 13 × 861): 1.47x faster). The dot body
    // (k-contiguous B, or A where `gemv` runs turned around) keeps it.
    assert_eq!(choose(1, 13, 861, 3125), "tiny");
    assert_eq!(choose_with(SgemmOperands::Nt, 1, 13, 861, 3125), "gemv");
    assert_eq!(choose(13, 1, 861, 3125), "gemv");
    assert_eq!(choose_with(SgemmOperands::Tn, 13, 1, 861, 3125), "tiny");
    // 17 of a block's columns used fall below the rule, 18 meet it.
    let columns = GEMV_COLUMNS as f64;
    assert!(columns * GEMV_MIN_COLUMN_USE > 17.0 && columns * GEMV_MIN_COLUMN_USE < 18.0);
    assert_eq!(choose(1, 17, 861, 3125), "tiny");
    assert_eq!(choose(1, 18, 861, 3125), "gemv");
    // Past `gemv`'s rule, a short k goes to `tiny` (writing C is the work) unless the tiles
    // fit the problem well...
    assert_eq!(choose(1, 162, 9, 2197), "tiny");
    assert_eq!(choose(12, 2119, TINY_SHORT_K, 971), "tiny");
    assert!(best_tile_use(12, 2119, row) <= TINY_SHORT_K_MAX_TILE_USE);
    assert_ne!(choose(12, 2119, TINY_SHORT_K + 1, 971), "tiny");
    for (m, n) in [(1821, 12311), (7120, 104), (4096, 4096)] {
        assert!(best_tile_use(m, n, row) > TINY_SHORT_K_MAX_TILE_USE);
        assert_ne!(choose(m, n, 8, 9), "tiny");
    }
    // ... except at a k of a few products, where the tiles' one k-step is mostly padding
    // (k = 4 fills a quarter of a 16-deep step): the sweep's 9 × (1821 × 12311 × 4) ran 1.19×
    // faster on `tiny` than on `medium`.
    assert_eq!(choose(1821, 12311, 4, 9), "tiny");
    // ... and so do problems the small tiles would mostly pad: batches of tiny matrices (9 ×
    // 24: 21% of a turned 16×64 `skinny` tile).
    assert_eq!(choose(8, 8, 64, 20000), "tiny");
    assert_eq!(choose(9, 24, 337, 2880), "tiny");
    assert!(best_tile_use(24, 9, row) <= TINY_MAX_TILE_USE);
    // ... unless their grid is too small for the GPU and the cost model splits k, which
    // `tiny` does only over the lanes of a warp (the held-out sweep's 2 × (12 × 6 × 14278)
    // ran 2.94x faster split over 55 blocks).
    assert!(best_tile_use(12, 6, row) <= TINY_MAX_TILE_USE);
    assert_eq!(choose(12, 6, 14278, 2), "skinny/w55");
    assert_eq!(choose(14, 17, 2613, 6), "skinny/w10");
    // A handful of columns fills `skinny` turned around (247 × 9: 54% of a turned tile, 14%
    // of one as given): the cost model decides (the sweep's 15 × (10216 × 15 × 280) ran 2.16x
    // faster turned than on `tiny`; this one, 0.83x, is among the few it lost).
    assert!(best_tile_use(247, 9, row) > TINY_MAX_TILE_USE);
    assert_eq!(choose(247, 9, 65, 467), "skinny/t");
    assert_eq!(choose(10216, 15, 280, 15), "skinny/t");
    // 16 rows fill a `skinny` tile, 64 × 64 a `small` one: the tiles keep them.
    assert_eq!(best_tile_use(16, 4096, row), 1.0);
    assert_eq!(best_tile_use(64, 64, row), 1.0);
    // Large problems fill the GPU with the biggest tile, unsplit.
    for s in [2048, 4096, 8192] {
        assert_eq!(choose(s, s, s, 1), "huge");
    }
    assert_eq!(choose(2048, 2048, 2048, 8), "huge");
    // ... but not at a short k (HUGE_MIN_K): few k-steps cannot spread `huge`'s epilogue and
    // pipeline fill (the held-out sweep's 7 × (3217 × 9581 × 32) ran 2.39x faster on `large`).
    assert_eq!(choose(3217, 9581, 32, 7), "large");
    assert_eq!(choose(3854, 9102, 82, 1), "large");
    assert_eq!(choose(4096, 4096, HUGE_MIN_K, 1), "huge");
    assert_ne!(choose(4096, 4096, HUGE_MIN_K - 1, 1), "huge");
    // 1024 x 64³: 64×64 matrices; a 128-row tile would be half empty, and `medium` (6 blocks
    // per SM) would need two waves where `small` (8 per SM) needs one.
    assert_eq!(choose(64, 64, 64, 1024), "small");
    // 1024³ and 1000³: 256 64×64 tiles, two per SM, are too few warps; split over 2 blocks,
    // four per SM (H200: 62 µs against 66 µs unsplit).
    assert_eq!(choose(1024, 1024, 1024, 1), "medium/k2");
    assert_eq!(choose(1000, 1000, 1000, 1), "medium/k2");
    // 512³: 256 16×64 tiles; 256³: 64 of them, k split over 2.
    assert_eq!(choose(512, 512, 512, 1), "skinny");
    assert_eq!(choose(256, 256, 256, 1), "skinny/k2");
    // A long k over few tiles is split wide through the workspace, past a cluster's 8
    // blocks: 64 × 64 × 100 000 is one `small` tile.
    let long = choose_kernel(64, 64, 100_000, 1, SgemmOperands::Nn, row, H200_SMS, workspace);
    assert!(long.uses_workspace() && long.k_splits > MAX_K_SPLITS, "{long}");
    // Defined for every architecture: without clusters a split goes through the workspace,
    // and without a workspace it goes over a cluster or not at all.
    for arch in Arch::ALL {
        let row = sgemm_config(arch);
        for (m, n, k, b) in [(1000, 1000, 1000, 1), (33, 4097, 129, 1), (128, 4096, 128, 32), (2048, 2048, 2048, 8), (16, 4096, 4096, 1), (64, 64, 100_000, 1)] {
            let c = choose_kernel(m, n, k, b, SgemmOperands::Nn, row, 80, 0);
            assert!(c.k_splits == 1 || (arch.limits().has_clusters && !c.uses_workspace()), "{arch}: {c}");
            let c = choose_kernel(m, n, k, b, SgemmOperands::Nn, row, 80, default_split_workspace_bytes(row, 80));
            assert!(c.k_splits == 1 || c.uses_workspace() || arch.limits().has_clusters, "{arch}: {c}");
        }
        let long = choose_kernel(64, 64, 100_000, 1, SgemmOperands::Nn, row, 80, default_split_workspace_bytes(row, 80));
        assert!(long.uses_workspace() && long.k_splits >= 8, "{arch}: {long}");
    }
}

/// `k_slice`: the slices of every split cover k exactly once, in order, in whole k-steps but the
/// last, differing by at most one k-step, none empty while there are as many k-steps as blocks.
#[test]
fn k_slices_cover_k_evenly() {
    for bk in [8, 16, 32] {
        for k in 0..400u32 {
            let steps = k.div_ceil(bk);
            for splits in 1..=MAX_K_SPLITS {
                let slices: Vec<(u32, u32)> = (0..splits).map(|s| k_slice(k, bk, s, splits)).collect();
                let mut next = 0;
                for (i, &(first, len)) in slices.iter().enumerate() {
                    assert_eq!(first, next, "k {k} bk {bk} splits {splits}: {slices:?}");
                    assert!(first % bk == 0 && (len % bk == 0 || first + len == k), "k {k} bk {bk}: {slices:?}");
                    let whole = len.div_ceil(bk);
                    assert!(whole == steps / splits || whole == steps / splits + 1, "k {k} bk {bk} splits {splits} slice {i}: {slices:?}");
                    next = first + len;
                }
                assert_eq!(next, k, "k {k} bk {bk} splits {splits}: {slices:?}");
                if steps >= splits {
                    assert!(slices.iter().all(|&(_, len)| len > 0), "k {k} bk {bk} splits {splits}: {slices:?}");
                }
            }
        }
    }
}

/// `tile_origin_inside`: only the last tile moves, back to end exactly at the edge, never before
/// 0, and by a multiple of 4 unless any shift is allowed.
#[test]
fn edge_tiles_move_inside() {
    for tile in [16, 64, 128] {
        for total in 1..600u32 {
            for any_shift in [false, true] {
                for start in (0..total).step_by(tile as usize) {
                    let origin = tile_origin_inside(start, total, tile, any_shift);
                    let last = start + tile >= total;
                    if !last || start + tile == total {
                        assert_eq!(origin, start, "interior or exact tile moved: {start} {total} {tile}");
                    } else if total < tile {
                        assert_eq!(origin, 0, "a matrix smaller than the tile cannot move it");
                    } else if any_shift || (total - tile) % 4 == 0 {
                        assert_eq!(origin + tile, total, "{start} {total} {tile}");
                        assert!(origin <= start);
                    } else {
                        assert_eq!(origin, start, "an aligned operand moved by {} rows", start - (total - tile));
                    }
                    if !any_shift {
                        assert_eq!(origin % 4, 0, "{start} {total} {tile}: vectors would lose alignment");
                    }
                }
            }
        }
    }
}

/// `tiny` numbers 4×4 pieces of C over the whole batch in one grid along x (the batch is not
/// a grid dimension), capped at `TINY_GRID_WAVES` waves of its blocks (the kernel's
/// grid-stride loop takes the rest), with a team of lanes per piece that the plan picks by the
/// operands' layout, k and how many pieces there are, and passes in `flags`.
#[test]
fn tiny_plan_grid_and_teams() {
    let row = sgemm_config(Arch::Sm90);
    let resident = (H200_SMS * row.tiny.blocks_per_sm * row.tiny.threads()) as u64;
    let (nn, nt, tn, tt) = (SgemmOperands::Nn, SgemmOperands::Nt, SgemmOperands::Tn, SgemmOperands::Tt);
    let lanes = |k: u32, operands: SgemmOperands, pieces_n: u32, pieces: u64| TinyConfig::team_lanes(k, operands, pieces_n, pieces, resident);
    // Lines a warp's loads touch: a row of 32 or more pieces shares A's rows (k-contiguous A
    // costs one line); lanes along k cost a line each across m- or n-contiguous operands.
    assert_eq!(TinyConfig::warp_lines(1, nn, 32), 2);
    assert_eq!(TinyConfig::warp_lines(1, nn, 2), 17);
    assert_eq!(TinyConfig::warp_lines(32, nt, 1), 2);
    assert_eq!(TinyConfig::warp_lines(1, tt, 1), 2);
    // Plenty of pieces: A m-contiguous and B n-contiguous read coalesced with one lane per
    // piece (H200: 37 × (3271 × 11 × 1449) 4.5 ms with teams of 32, 0.5 ms without); a
    // k-contiguous A against 2 pieces per row and B n-contiguous takes the team whose lines
    // are fewest (4: 8 + 4 lines per load pair); both k-contiguous, the whole warp.
    assert_eq!(lanes(1449, tn, 3, resident), 1);
    assert_eq!(lanes(464, nn, 2, resident), 4);
    assert_eq!(lanes(2001, nt, 8, resident), 32);
    // k too short for any team, and too few pieces to fill the GPU: teams up to what k allows.
    assert_eq!(lanes(15, nt, 1, 1), 1);
    assert_eq!(lanes(16, tn, 1, resident), 1);
    assert_eq!(lanes(16, tn, 1, 1), 2);
    assert_eq!(lanes(100_000, tn, 3, resident / 8), 2);
    for k in [0u32, 1, 17, 100, 5000, 1 << 20] {
        for operands in SgemmOperands::ALL {
            for (pieces_n, pieces) in [(1, 1), (3, resident), (40, 1 << 30)] {
                let l = lanes(k, operands, pieces_n, pieces);
                assert!(l.is_power_of_two() && l <= 32 && (l == 1 || k >= l * TINY_K_PER_LANE), "k {k}: {l}");
            }
        }
    }
    let plan = |m: usize, n: usize, k: usize, batch: usize| {
        let g = Sgemm::new(m, n, k).batched(batch);
        g.plan(&buffers(batch * m * k, batch * k * n, batch * m * n), row, H200_SMS, Some(SgemmVariant::Tiny.into())).unwrap()
    };
    // 2880 × (9 × 24 × 337), row-major (A k-contiguous, B n-contiguous): 3 × 6 pieces per
    // problem; with 6 pieces a row, teams of 2 touch the fewest lines (3 + 2).
    let p = plan(9, 24, 337, 2880);
    assert_eq!((p.variant, p.block, p.smem_bytes, p.tiny_team_lanes()), (SgemmVariant::Tiny, row.tiny.threads(), 0, 2));
    assert_eq!(p.grid, ((2880 * 18 * 2u32).div_ceil(row.tiny.threads()), 1, 1));
    // More than MAX_GRID_Z problems: still one grid along x.
    let p = plan(3, 5, 2, 100_000);
    assert_eq!((p.grid, p.tiny_team_lanes()), (((100_000 * 2u32).div_ceil(row.tiny.threads()), 1, 1), 1));
    // Past the cap, the grid stays at TINY_GRID_WAVES waves.
    let p = plan(4000, 4000, 4, 3);
    assert_eq!(p.grid, ((H200_SMS as u64 * row.tiny.blocks_per_sm as u64 * TINY_GRID_WAVES) as u32, 1, 1));
}

#[test]
fn k_split_plans_and_their_errors() {
    let g = Sgemm::new(300, 200, 1000);
    let (a, b, c) = (300 * 1000, 1000 * 200, 300 * 200);
    let bufs = buffers(a, b, c);
    let forced = |arch: Arch, variant: SgemmVariant, k_splits: u32| g.plan(&bufs, sgemm_config(arch), H200_SMS, Some(SgemmChoice::cluster_split(variant, k_splits)));
    // A split plan: one cluster of `k_splits` blocks per tile along y, shared memory for the
    // partial tile (or the pipeline, whichever is larger).
    let p = forced(Arch::Sm90, SgemmVariant::Medium, 3).unwrap();
    let tile = sgemm_config(Arch::Sm90).medium;
    assert_eq!(p.grid, (5 * 4, 3, 1));
    assert_eq!(p.smem_bytes, tile.split_k_smem_bytes());
    assert!(p.smem_bytes >= tile.smem_bytes() && p.smem_bytes >= tile.bm * (tile.bn + SMEM_ROW_PAD) * 4);
    let skinny = forced(Arch::Sm90, SgemmVariant::Skinny, MAX_K_SPLITS).unwrap();
    assert_eq!(skinny.grid.1, MAX_K_SPLITS);
    // Unsplit plans are unchanged.
    assert_eq!(forced(Arch::Sm90, SgemmVariant::Medium, 1).unwrap().grid.1, 1);
    // The dispatcher splits a deep k over few tiles, but not when A and B are not read (alpha =
    // 0: C = beta·C, no k loop at all).
    let deep = Sgemm::new(300, 200, 100_000);
    let deep_plan = deep.plan(&buffers(300 * 100_000, 100_000 * 200, c), sgemm_config(Arch::Sm90), H200_SMS, None).unwrap();
    assert!(deep_plan.grid.1 > 1, "{deep_plan:?}");
    let scaled = deep.alpha_beta(0.0, 2.0).plan(&buffers(0, 0, c), sgemm_config(Arch::Sm90), H200_SMS, None).unwrap();
    assert_eq!((scaled.grid.1, scaled.params.k), (1, 0));
    // Refused: 0 or more than a portable cluster, gemv, 128-wide tiles (compiled without the
    // split), architectures without clusters.
    for (arch, variant, k_splits) in [
        (Arch::Sm90, SgemmVariant::Medium, 0),
        (Arch::Sm90, SgemmVariant::Medium, MAX_K_SPLITS + 1),
        (Arch::Sm90, SgemmVariant::Gemv, 2),
        (Arch::Sm90, SgemmVariant::Tiny, 2),
        (Arch::Sm90, SgemmVariant::Huge, 2),
        (Arch::Sm90, SgemmVariant::Large, 2),
        (Arch::Sm80, SgemmVariant::Medium, 2),
        (Arch::Sm89, SgemmVariant::Skinny, 3),
    ] {
        let e = forced(arch, variant, k_splits).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { name: "k_splits", .. }), "{arch} {variant:?}/k{k_splits}: {e}");
    }
    // Which tiles split, and which move their edge tiles inside: the small ones; over a
    // cluster only on architectures with clusters (moving needs none).
    for arch in Arch::ALL {
        let row = sgemm_config(arch);
        for v in SgemmVariant::TILED {
            let t = row.tile(v);
            let small = t.bm * t.bn <= SMALL_TILE_MAX_ELEMENTS;
            assert_eq!(t.splits_k(), small, "{arch} {v:?}");
            assert_eq!(t.can_split_k(&arch.limits()), small && arch.limits().has_clusters, "{arch} {v:?}");
            assert_eq!(t.moves_edge_tiles(), small, "{arch} {v:?}");
        }
    }
}

#[test]
fn workspace_split_plans_and_their_errors() {
    let g = Sgemm::new(300, 200, 100_000).alpha_beta(1.5, 0.5);
    let bufs = buffers(300 * 100_000, 100_000 * 200, 300 * 200);
    let forced = |arch: Arch, bufs: &SgemmBuffers, choice: SgemmChoice| g.plan(bufs, sgemm_config(arch), H200_SMS, Some(choice));
    let medium = |k_splits: u32| SgemmChoice::workspace_split(SgemmVariant::Medium, k_splits);
    // On an architecture without clusters: the tiles along x, the split along y, the
    // pipeline's shared memory (no partial tile there), and the workspace's two parts.
    let tile = sgemm_config(Arch::Sm80).medium;
    let tiles = 5 * 4;
    let need = g.split_workspace_bytes(sgemm_config(Arch::Sm80), H200_SMS, Some(medium(24)));
    let layout = SplitWorkspaceLayout::of(need);
    assert!(layout.fits(tiles, tiles * 24 * (tile.bm * tile.bn * 4) as u64), "{layout:?}");
    let p = forced(Arch::Sm80, &with_workspace(bufs, need), medium(24)).unwrap();
    assert_eq!(p.grid, (tiles as u32, 24, 1));
    assert_eq!(p.smem_bytes, tile.smem_bytes());
    assert!(p.uses_workspace() && p.params.flags & sgemm_flags::SPLIT_WORKSPACE != 0);
    assert_eq!(p.params.split_counters.addr(), W_BASE);
    assert_eq!(p.params.split_partials.addr(), W_BASE + layout.partials_offset as u64);
    assert_eq!(layout.partials_offset % 256, 0);
    // The smallest workspace that fits is the one the query names: one alignment step less
    // does not fit.
    let short = forced(Arch::Sm80, &with_workspace(bufs, need - 256), medium(24)).unwrap_err();
    assert!(matches!(short, Error::BufferTooSmall { name: "workspace", required, .. } if required == need), "{short}");
    let none = forced(Arch::Sm80, &bufs, medium(2)).unwrap_err();
    assert!(matches!(none, Error::BufferTooSmall { name: "workspace", .. }), "{none}");
    // The same split over a cluster needs no workspace, and is refused where there are none.
    assert!(!forced(Arch::Sm90, &bufs, SgemmChoice::cluster_split(SgemmVariant::Medium, 3)).unwrap().uses_workspace());
    // The workspace must not overlap A, B or C, and must be aligned.
    for (addr, what) in [(C_BASE + 64, "overlaps C"), (A_BASE, "overlaps A")] {
        let e = forced(Arch::Sm80, &SgemmBuffers { workspace_addr: addr, workspace_bytes: need, ..bufs }, medium(24)).unwrap_err();
        assert!(matches!(e, Error::Overlap(ref s) if s.contains(what)), "{what}: {e}");
    }
    let e = forced(Arch::Sm80, &SgemmBuffers { workspace_addr: W_BASE + 16, workspace_bytes: need, ..bufs }, medium(24)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { name: "workspace", .. }), "{e}");
    // Refused: 0 or too many blocks, gemv, tiny, and the 128-wide tiles.
    let big = with_workspace(bufs, usize::MAX / 4);
    for choice in [
        medium(0),
        medium(MAX_WORKSPACE_K_SPLITS + 1),
        SgemmChoice::workspace_split(SgemmVariant::Gemv, 2),
        SgemmChoice::workspace_split(SgemmVariant::Tiny, 2),
        SgemmChoice::workspace_split(SgemmVariant::Large, 2),
        SgemmChoice::workspace_split(SgemmVariant::Huge, 2),
    ] {
        let e = forced(Arch::Sm80, &big, choice).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { name: "k_splits", .. }), "{choice}: {e}");
    }
    assert!(forced(Arch::Sm80, &big, medium(MAX_WORKSPACE_K_SPLITS)).is_ok());
    // Batches past the grid's z: every (batch, tile) slot has its counter and partial tiles.
    let many = Sgemm::new(5, 5, 64).batched(70_000);
    let choice = SgemmChoice::workspace_split(SgemmVariant::Skinny, 2);
    let need = many.split_workspace_bytes(sgemm_config(Arch::Sm75), H200_SMS, Some(choice));
    let t = sgemm_config(Arch::Sm75).skinny;
    assert!(SplitWorkspaceLayout::of(need).fits(70_000, 70_000 * 2 * (t.bm * t.bn * 4) as u64));
    let p = many.plan(&with_workspace(buffers(70_000 * 5 * 64, 70_000 * 64 * 5, 70_000 * 25), need), sgemm_config(Arch::Sm75), H200_SMS, Some(choice)).unwrap();
    assert_eq!(p.grid, (1, 2, 65_535));
}

/// The workspace's layout: the counters never move with the plan (a larger plan never reads
/// as a counter what a smaller one left as a partial tile), the smallest fitting size is the
/// one `bytes_for` names, and a handle's own workspace holds every split the dispatcher
/// considers.
#[test]
fn workspace_layout_and_the_handles_size() {
    for bytes in [256, 4096, 1 << 20, 17 << 20, 123_456_789] {
        let l = SplitWorkspaceLayout::of(bytes);
        assert_eq!(l.partials_offset + l.partial_bytes, bytes);
        assert!(l.counters * 4 <= l.partials_offset && l.partials_offset % 256 == 0 || l.partial_bytes == 0, "{l:?}");
        // Every slot a fitting plan has (each with two or more 1024-float partial tiles) has
        // its counter inside the counters' part.
        assert!(l.partial_bytes as u64 / 8192 <= l.counters as u64, "{l:?}");
    }
    for (slots, partial_bytes) in [(1u64, 8192u64), (20, 20 * 24 * 16384), (70_000, 70_000 * 2 * 4096), (3, 3 * 1024 * 65536)] {
        let bytes = SplitWorkspaceLayout::bytes_for(slots, partial_bytes);
        assert!(SplitWorkspaceLayout::of(bytes).fits(slots, partial_bytes));
        assert!(!SplitWorkspaceLayout::of(bytes - 256).fits(slots, partial_bytes), "{slots} {partial_bytes}: {bytes}");
    }
    let mut r = rng("workspace layout");
    for arch in Arch::ALL {
        let row = sgemm_config(arch);
        for sms in [28, 80, 132] {
            let own = default_split_workspace_bytes(row, sms);
            assert!(own < 64 << 20, "{arch} {sms}: {own}");
            for _ in 0..300 {
                let (m, n) = (r.random_range(1..600usize), r.random_range(1..600usize));
                let (k, batch) = (r.random_range(1..300_000usize), r.random_range(1..4usize));
                let unlimited = kernel_candidates(m, n, k, batch, row, sms, usize::MAX);
                assert_eq!(unlimited, kernel_candidates(m, n, k, batch, row, sms, own), "{arch} {sms}: {batch} x {m}x{n}x{k}");
                assert_eq!(choose_kernel(m, n, k, batch, SgemmOperands::Nn, row, sms, usize::MAX), choose_kernel(m, n, k, batch, SgemmOperands::Nn, row, sms, own));
            }
        }
    }
}

#[test]
fn device_toolchain_pin_matches_rust_toolchain_toml() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let toml = std::fs::read_to_string(root.join("rust-toolchain.toml")).unwrap();
    let build = std::fs::read_to_string(root.join("host/build.rs")).unwrap();
    let channel = toml.lines().find_map(|l| l.strip_prefix("channel = ")).unwrap().trim_matches('"');
    assert!(build.contains(&format!("const DEVICE_TOOLCHAIN: &str = \"{channel}\";")), "host/build.rs must pin {channel}");
}

#[test]
fn no_gpu_is_an_error_not_a_panic() {
    let result = std::panic::catch_unwind(|| cukernels::device_context(0).map(|_| ()));
    let result = result.expect("device_context must not panic, with or without a GPU");
    match result {
        Ok(()) => eprintln!("a GPU is present: nothing to check here"),
        Err(e @ (Error::NoDriver | Error::Driver(_))) => assert!(e.to_string().contains("CUDA"), "{e}"),
        Err(e) => panic!("unexpected error without a GPU: {e}"),
    }
}

/// The builder does not depend on call order: leading dimensions not given explicitly follow
/// the layout and transposes, batch strides not given follow the leading dimensions (so padded
/// leading dimensions never make batches overlap), and explicit ones stay whatever comes
/// after them.
#[test]
fn builder_setters_commute() {
    type Step = fn(Sgemm) -> Sgemm;
    let steps: [(&str, Step); 4] = [
        ("layout", |g| g.layout(Layout::ColMajor)),
        ("transpose", |g| g.transpose(Transpose::Yes, Transpose::No)),
        ("leading_dims", |g| g.leading_dims(40, 37, 36)),
        ("batched", |g| g.batched(3)),
    ];
    let mut reference: Option<Sgemm> = None;
    // Every order of the four setters (4! = 24) builds the same problem.
    let mut orders = 0;
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                for d in 0..4 {
                    let order = [a, b, c, d];
                    if (0..4).any(|x| !order.contains(&x)) {
                        continue;
                    }
                    let g = order.iter().fold(Sgemm::new(30, 35, 33), |g, &i| (steps[i].1)(g));
                    let names: Vec<&str> = order.iter().map(|&i| steps[i].0).collect();
                    match &reference {
                        None => reference = Some(g),
                        Some(r) => assert_eq!(&g, r, "order {names:?}"),
                    }
                    orders += 1;
                }
            }
        }
    }
    assert_eq!(orders, 24);
    let g = reference.unwrap();
    // Column-major, A transposed (stored k × m = 33 × 30, lda 40), B as is (33 × 35, ldb 37):
    // each batch one padded matrix after the other.
    assert_eq!((g.lda, g.ldb, g.ldc), (40, 37, 36));
    assert_eq!((g.stride_a, g.stride_b, g.stride_c), (30 * 40, 35 * 37, 35 * 36));
    // Without explicit leading dimensions, the layout set last still gives tight ones.
    let late = Sgemm::new(30, 35, 33).batched(2).transpose(Transpose::No, Transpose::Yes).layout(Layout::ColMajor);
    assert_eq!((late.lda, late.ldb, late.ldc), (30, 35, 30));
    assert_eq!((late.stride_a, late.stride_b, late.stride_c), (30 * 33, 35 * 33, 30 * 35));
    // Explicit strides stay; `tight()` forgets everything explicit.
    let mut s = Sgemm::new(4, 4, 4).strides(0, 16, 20).leading_dims(8, 8, 8).batched(2);
    assert_eq!((s.stride_a, s.stride_b, s.stride_c, s.lda), (0, 16, 20, 8));
    s.tight();
    assert_eq!((s.stride_a, s.stride_b, s.stride_c, s.lda), (16, 16, 16, 4));
}

/// `gemv` takes every problem with at most `GEMV_DISPATCH_MAX` rows or columns, streams the larger
/// operand (a product with fewer columns than rows runs turned around, C written transposed),
/// uses its dot body exactly where the streamed operand is k-contiguous, and sizes the grid
/// from the kernel's own column count.
#[test]
fn gemv_orientation_and_grid() {
    use cukernels::sgemm_flags::{A_VECTOR, B_VECTOR, C_TRANSPOSED};
    use cukernels::{SgemmOperands, GEMV_COLUMNS};
    let gemv = sgemm_config(Arch::Sm90).gemv;
    let big = buffers(1 << 31, 1 << 31, 1 << 31);
    let row = |m, n, k, ta, tb| plan(&Sgemm::new(m, n, k).transpose(ta, tb), &big).unwrap();
    let (no, yes) = (Transpose::No, Transpose::Yes);
    // m = 1 against weights [out, in]: the dot body over 32000 columns.
    let p = row(1, 32000, 4096, no, yes);
    assert_eq!((p.variant, p.operands, p.params.m, p.params.n), (SgemmVariant::Gemv, SgemmOperands::Nt, 1, 32000));
    assert_eq!(p.params.flags & C_TRANSPOSED, 0);
    assert_eq!(p.params.flags & (A_VECTOR | B_VECTOR), A_VECTOR | B_VECTOR);
    assert_eq!(p.grid.0, 32000u32.div_ceil(gemv.dot_columns_per_block(32000, 4096)));
    // m = 1 against B n-contiguous: the column body, 32 columns per block.
    let p = row(1, 32000, 4096, no, no);
    assert_eq!((p.operands, p.grid.0), (SgemmOperands::Nn, 32000u32.div_ceil(GEMV_COLUMNS)));
    // n = 1, A k-contiguous: turned around, A streamed by the dot body, C transposed.
    let p = row(16384, 1, 4096, no, no);
    assert_eq!((p.variant, p.operands, p.params.m, p.params.n), (SgemmVariant::Gemv, SgemmOperands::Nt, 1, 16384));
    assert_ne!(p.params.flags & C_TRANSPOSED, 0);
    assert_eq!((p.params.a.addr(), p.params.b.addr()), (B_BASE, A_BASE));
    // n = 3, A stored transposed (m-contiguous): turned around, the column body.
    let p = row(5000, 3, 700, yes, no);
    assert_eq!((p.operands, p.params.m, p.params.n), (SgemmOperands::Tn, 3, 5000));
    assert_ne!(p.params.flags & C_TRANSPOSED, 0);
    // Both small: the larger operand is streamed.
    assert_eq!(row(7, 3, 100, no, no).params.n, 7);
    assert_eq!(row(3, 7, 100, no, no).params.n, 7);
    // A forced `gemv` on a square problem is not turned; tile kernels never are.
    let p = Sgemm::new(40, 40, 40).plan(&big, sgemm_config(Arch::Sm90), H200_SMS, Some(SgemmVariant::Gemv.into())).unwrap();
    assert_eq!(p.params.flags & C_TRANSPOSED, 0);
    let p = Sgemm::new(40, 3, 40).plan(&big, sgemm_config(Arch::Sm90), H200_SMS, Some(SgemmVariant::Large.into())).unwrap();
    assert_eq!((p.params.flags & C_TRANSPOSED, p.params.m), (0, 40));
    // Odd leading dimensions: no 16-byte loads along k.
    let p = plan(&Sgemm::new(1, 500, 4099).transpose(no, yes), &big).unwrap();
    assert_eq!(p.params.flags & (A_VECTOR | B_VECTOR), 0);
}

/// A tile run turned around (`skinny/t`): the operands swap and transpose, m and n swap and C
/// is written transposed, exactly as `gemv` turns; only `skinny` turns (its 16 rows then lie
/// along the caller's few columns), the dispatcher weighs it only where C has fewer columns
/// than rows, and takes it for the randomized sweep's 549 × (2248 × 23 × 184) `tn`, which
/// the 64×64 tiles ran at 36% use (0.46x cuBLAS on the H200).
#[test]
fn turned_tiles() {
    use cukernels::sgemm_flags::C_TRANSPOSED;
    let row = sgemm_config(Arch::Sm90);
    let big = buffers(1 << 31, 1 << 31, 1 << 31);
    let turned = SgemmChoice::from(SgemmVariant::Skinny).turn();
    let p = Sgemm::new(2248, 23, 184).plan(&big, row, H200_SMS, Some(turned)).unwrap();
    assert_eq!((p.variant, p.params.m, p.params.n), (SgemmVariant::Skinny, 23, 2248));
    assert_ne!(p.params.flags & C_TRANSPOSED, 0);
    assert_eq!((p.params.a.addr(), p.params.b.addr()), (B_BASE, A_BASE));
    assert_eq!(p.grid.0 as u64, row.skinny.tile_count(23, 2248));
    for variant in [SgemmVariant::Huge, SgemmVariant::Medium, SgemmVariant::Tiny] {
        let refused = Sgemm::new(2248, 23, 184).plan(&big, row, H200_SMS, Some(SgemmChoice::from(variant).turn()));
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "choice", .. })), "{variant:?}: {refused:?}");
    }
    assert_eq!(SgemmChoice::workspace_split(SgemmVariant::Skinny, 6).turn().to_string(), "skinny/t/w6");
    assert_eq!(turned.to_string(), "skinny/t");
    // A turned split's workspace is sized for the turned grid.
    let g = Sgemm::new(2248, 23, 184);
    let split = SgemmChoice::workspace_split(SgemmVariant::Skinny, 3).turn();
    let needed = g.split_workspace_bytes(row, H200_SMS, Some(split));
    assert!(needed > 0);
    assert!(g.plan(&with_workspace(big, needed), row, H200_SMS, Some(split)).is_ok());
    assert!(g.plan(&with_workspace(big, needed - 1), row, H200_SMS, Some(split)).is_err());
    let workspace = default_split_workspace_bytes(row, H200_SMS);
    let candidates = |m, n| kernel_candidates(m, n, 184, 549, row, H200_SMS, workspace);
    assert!(candidates(2248, 23).iter().any(|c| c.turned && c.variant == SgemmVariant::Skinny));
    assert!(candidates(23, 2248).iter().all(|c| !c.turned));
    assert_eq!(choose_kernel(2248, 23, 184, 549, SgemmOperands::Nn, row, H200_SMS, workspace).to_string(), "skinny/t");
    assert_eq!(choose_kernel(23, 2248, 184, 549, SgemmOperands::Nn, row, H200_SMS, workspace).to_string(), "skinny");
}

/// The dot body's split of k over the warps of a block: a power of two dividing the block's
/// warps, at least `GEMV_DOT_MIN_K_PER_WARP` of k each, the grid under
/// `GEMV_DOT_FILL_WARPS` warps, as many as that allows; the columns per block follow.
#[test]
fn gemv_dot_k_split_rule() {
    use cukernels::{GEMV_DOT_FILL_WARPS as FILL, GEMV_DOT_MIN_K_PER_WARP as MIN};
    for row in SGEMM_CONFIGS {
        let g = row.gemv;
        for n in [1u32, 2, 3, 64, 1000, 4096, 16384, 32000, 1 << 30] {
            let groups = n.div_ceil(g.dot_columns) as u64;
            let mut last = 1;
            for k in [0u32, 1, 1023, MIN, 2 * MIN - 1, 2 * MIN, 4099, 17001, 100_000, u32::MAX] {
                let w = g.dot_k_warps(n, k);
                let at = format!("{} n {n} k {k} -> {w} warps", row.arch);
                assert!(w.is_power_of_two() && g.warps % w == 0, "{at}");
                assert!(w == 1 || (w as u64 * MIN as u64 <= k as u64 && groups * w as u64 <= FILL), "{at}: slices under {MIN} or grid over {FILL} warps");
                let doubled = 2 * w as u64;
                assert!(w == g.warps || doubled * MIN as u64 > k as u64 || groups * doubled > FILL, "{at}: could split further");
                assert!(w >= last, "{at}: more k never means fewer warps on it");
                last = w;
                assert_eq!(g.dot_columns_per_block(n, k), g.warps / w * g.dot_columns);
            }
        }
        // One column against a long k takes the whole block; many columns never split.
        assert_eq!(g.dot_k_warps(1, u32::MAX), g.warps);
        assert_eq!(g.dot_k_warps(32000, 4096), 1);
    }
    // The checker refuses a dot body that would not fit its registers or shared memory.
    let bad = cukernels::GemvConfig { dot_columns: 5, ..sgemm_config(Arch::Sm90).gemv };
    assert!(bad.check(Arch::Sm90).is_err());
    let bad = cukernels::GemvConfig { dot_unroll: 0, ..sgemm_config(Arch::Sm90).gemv };
    assert!(bad.check(Arch::Sm90).is_err());
}

/// The dispatcher's view of the operands (`Sgemm::canonical_operands`, which decides `gemv`'s
/// body in `choose_kernel`) is the plan's: for every layout and transpose pair, a `gemv` plan
/// streams a k-contiguous operand (its dot body) exactly where the canonical operand it
/// streams (the right one, or the left one turned around where C has fewer columns than
/// rows) is k-contiguous.
#[test]
fn canonical_operands_match_the_plan_of_gemv() {
    let row = sgemm_config(Arch::Sm90);
    for layout in [Layout::RowMajor, Layout::ColMajor] {
        for (ta, tb) in [(Transpose::No, Transpose::No), (Transpose::No, Transpose::Yes), (Transpose::Yes, Transpose::No), (Transpose::Yes, Transpose::Yes)] {
            for (m, n, k) in [(3, 500, 300), (500, 3, 300), (4, 4, 64)] {
                let g = Sgemm::new(m, n, k).layout(layout).transpose(ta, tb);
                let ops = g.canonical_operands();
                // Row-major C: op(A) on the left; column-major: op(B)ᵀ. An operand stored
                // as given is k-contiguous in row-major A and in column-major B...
                let expected = match layout {
                    Layout::RowMajor => SgemmOperands::new(ta == Transpose::No, tb == Transpose::Yes),
                    Layout::ColMajor => SgemmOperands::new(tb == Transpose::No, ta == Transpose::Yes),
                };
                assert_eq!(ops, expected, "{layout:?} {ta:?} {tb:?}");
                let (a_len, b_len, c_len) = (m * k, k * n, m * n);
                let plan = g.plan(&buffers(a_len, b_len, c_len), row, H200_SMS, Some(SgemmVariant::Gemv.into())).unwrap();
                let (cm, cn) = if layout == Layout::RowMajor { (m, n) } else { (n, m) };
                let streamed_k_contiguous = if cn < cm { ops.a_k_contiguous() } else { ops.b_k_contiguous() };
                assert_eq!(plan.operands.b_k_contiguous(), streamed_k_contiguous, "{layout:?} {ta:?} {tb:?} {m}x{n}x{k}");
            }
        }
    }
}
