//! `mul_mat_id` on the host: shape validation, the routing reference, the f64 reference the
//! GPU kernels are tested against (here checked against a dense product of weights that
//! quantize without loss), and the launch plan (workspace layout, path, grid, every bad buffer
//! an error before anything launches).

use cukernels::moe::{check_ids, mul_mat_id_reference, routing_reference};
use cukernels::quant::quantize;
use cukernels::{Error, GgufFormat, MoePath, MulMatId};

fn invalid_name(r: Result<impl std::fmt::Debug, Error>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { name, .. }) => name,
        other => panic!("expected an InvalidArgument error, got {other:?}"),
    }
}

#[test]
fn buffer_lengths_follow_ggml_shapes() {
    // Qwen3-30B-A3B-like gate projection: 128 experts of 768 × 2048 in q4_K, 512 tokens, 8 used.
    let d = MulMatId::new(GgufFormat::Q4K, 128, 768, 2048, 512, 8);
    let n = d.buffer_lengths().unwrap();
    assert_eq!(n.weight_bytes, 128 * 768 * (2048 / 256) * 144);
    assert_eq!((n.x, n.ids, n.y), (512 * 2048, 512 * 8, 512 * 8 * 768));
    // The down projection reads one row per slot.
    let n = d.clone().per_slot_input().buffer_lengths().unwrap();
    assert_eq!(n.x, 512 * 8 * 2048);
    // No tokens is a valid, empty call.
    let n = MulMatId::new(GgufFormat::Q8_0, 8, 64, 64, 0, 2).buffer_lengths().unwrap();
    assert_eq!((n.x, n.ids, n.y), (0, 0, 0));
}

#[test]
fn bad_shapes_and_buffers_are_typed_errors_naming_the_argument() {
    let d = MulMatId::new(GgufFormat::Q4_0, 8, 64, 96, 5, 2);
    let n = d.buffer_lengths().unwrap();
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4_0, 8, 64, 100, 5, 2).buffer_lengths()), "k"); // not a multiple of 32
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4K, 8, 64, 96, 5, 2).buffer_lengths()), "k"); // not a multiple of 256
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4_0, 8, 64, 96, 5, 9).buffer_lengths()), "n_used");
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4_0, 8, 64, 96, 5, 0).buffer_lengths()), "n_used");
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4_0, 0, 64, 96, 5, 1).buffer_lengths()), "experts");
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4_0, 8, 0, 96, 5, 1).buffer_lengths()), "n");
    assert_eq!(invalid_name(d.clone().expert_range(4, 4).buffer_lengths()), "expert_range");
    assert_eq!(invalid_name(d.clone().expert_range(2, 9).buffer_lengths()), "expert_range");
    assert_eq!(invalid_name(MulMatId::new(GgufFormat::Q4_0, usize::MAX / 2, 1 << 20, 96, 5, 1).buffer_lengths()), "experts");
    assert_eq!(invalid_name(d.check_buffers(n.weight_bytes - 18, n.x, n.ids, n.y)), "weights");
    assert_eq!(invalid_name(d.check_buffers(n.weight_bytes, n.x + 1, n.ids, n.y)), "x");
    assert_eq!(invalid_name(d.check_buffers(n.weight_bytes, n.x, n.ids - 1, n.y)), "ids");
    assert_eq!(invalid_name(d.check_buffers(n.weight_bytes, n.x, n.ids, n.y + 64)), "y");
    assert!(d.check_buffers(n.weight_bytes, n.x, n.ids, n.y).is_ok());
    assert_eq!(invalid_name(check_ids(&d, &[0, 1, 2, 8, 3, 4, 5, 6, 7, 0])), "ids");
    assert_eq!(invalid_name(check_ids(&d, &[0, 1, 2, -1, 3, 4, 5, 6, 7, 0])), "ids");
    let bad_ids = [0, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    assert_eq!(invalid_name(mul_mat_id_reference(&d, &vec![0u8; n.weight_bytes], &vec![0.0; n.x], &bad_ids)), "ids");
}

#[test]
fn routing_keeps_duplicates_skips_unused_experts_and_respects_the_range() {
    // 4 tokens, 3 slots over 6 experts: token 1 routes to expert 2 three times; experts 4 and
    // 5 get nothing.
    let d = MulMatId::new(GgufFormat::Q8_0, 6, 32, 32, 4, 3);
    let ids = [0, 2, 3, 2, 2, 2, 1, 0, 3, 3, 1, 0];
    let r = routing_reference(&d, &ids).unwrap();
    assert_eq!(r[0], [(0, 0), (2, 1), (3, 2)]);
    assert_eq!(r[1], [(2, 0), (3, 1)]);
    assert_eq!(r[2], [(0, 1), (1, 0), (1, 1), (1, 2)]);
    assert_eq!(r[3], [(0, 2), (2, 2), (3, 0)]);
    assert!(r[4].is_empty() && r[5].is_empty());
    assert_eq!(r.iter().map(Vec::len).sum::<usize>(), ids.len(), "every slot routed once");
    let r = routing_reference(&d.clone().expert_range(1, 3), &ids).unwrap();
    assert!(r[0].is_empty() && r[3].is_empty());
    assert_eq!(r[1].len() + r[2].len(), 6);
}

/// Weights `q · 2^-4` with integer `q` in -127..=127 and a block maximum of 127: q8_0 stores
/// them exactly (scale 2^-4, exact in f16), so the reference must equal a dense f64 product.
fn exact_q8_0_weights(experts: usize, n: usize, k: usize) -> Vec<f32> {
    (0..experts * n * k)
        .map(|i| if i % 32 == 5 { 127.0 / 16.0 } else { (((i * 7919) % 255) as f32 - 127.0) / 16.0 })
        .collect()
}

#[test]
fn reference_is_the_routed_dense_product_with_duplicates_and_per_slot_rows() {
    let (experts, n, k, tokens, n_used) = (5, 7, 64, 3, 3);
    let w = exact_q8_0_weights(experts, n, k);
    let wq = quantize(GgufFormat::Q8_0, &w).unwrap();
    let ids = [4, 4, 0, 1, 3, 1, 2, 2, 2];
    for d in [MulMatId::new(GgufFormat::Q8_0, experts, n, k, tokens, n_used), MulMatId::new(GgufFormat::Q8_0, experts, n, k, tokens, n_used).per_slot_input()] {
        let x: Vec<f32> = (0..d.buffer_lengths().unwrap().x).map(|i| ((i * 31 % 97) as f32 - 48.0) / 64.0).collect();
        let y = mul_mat_id_reference(&d, &wq, &x, &ids).unwrap();
        for t in 0..tokens {
            for s in 0..n_used {
                let e = ids[t * n_used + s] as usize;
                let row = if d.x_rows() == 1 { t } else { t * n_used + s };
                for j in 0..n {
                    let want: f64 = (0..k).map(|c| w[(e * n + j) * k + c] as f64 * x[row * k + c] as f64).sum();
                    assert_eq!(y[(t * n_used + s) * n + j], Some(want), "{:?} token {t} slot {s} row {j}", d.input);
                }
            }
        }
        // An expert range leaves the other slots untouched.
        let y = mul_mat_id_reference(&d.clone().expert_range(2, 4), &wq, &x, &ids).unwrap();
        for (i, &e) in ids.iter().enumerate() {
            let computed = (2..4).contains(&e);
            assert!(y[i * n..(i + 1) * n].iter().all(|v| v.is_some() == computed), "slot {i} (expert {e})");
        }
        assert_eq!(d.flops(&ids), 2.0 * 9.0 * n as f64 * k as f64);
        assert_eq!(d.clone().expert_range(2, 4).flops(&ids), 2.0 * 4.0 * n as f64 * k as f64);
    }
}

/// Buffers of exactly the right lengths at well-separated fake device addresses.
fn buffers_for(d: &MulMatId) -> cukernels::MoeBuffers {
    let n = d.buffer_lengths().unwrap();
    let gib = 1u64 << 30;
    cukernels::MoeBuffers {
        weights: (gib, n.weight_bytes),
        x: (2 * gib, n.x),
        ids: (3 * gib, n.ids),
        y: (4 * gib, n.y),
        workspace: (5 * gib, d.workspace_bytes().unwrap()),
    }
}

#[test]
fn workspace_parts_are_aligned_disjoint_and_sized_from_the_call() {
    for (tokens, n_used, per_slot) in [(1, 2, false), (513, 8, true), (4096, 10, false), (0, 4, false)] {
        let mut d = MulMatId::new(GgufFormat::Q4K, 512, 768, 2048, tokens, n_used);
        if per_slot {
            d = d.per_slot_input();
        }
        let l = d.workspace_layout().unwrap();
        let x_values = tokens * d.x_rows() * 2048;
        let parts = [
            (l.x_q, x_values),
            (l.x_d, x_values / 32 * 4),
            (l.row_start, 513 * 4),
            (l.tiles_before, 513 * 4),
            (l.slot_list, tokens * n_used * 4),
            (l.error, 4),
        ];
        for (i, &(start, len)) in parts.iter().enumerate() {
            assert_eq!(start % 16, 0, "part {i} at {start}");
            let end = parts.get(i + 1).map_or(l.bytes, |p| p.0);
            assert!(start + len <= end, "part {i} ({start} + {len}) overruns the next at {end}");
        }
        assert_eq!(d.workspace_bytes().unwrap(), l.bytes);
    }
}

/// A dense matmul (one expert) has many rows per expert at any T, but its tiled grid is
/// ⌈T / 32⌉ × 32 blocks at n = 4096: the decode path keeps the GPU full until that grid does.
/// The direct path re-reads an expert's weights per slot: the light formats (at most 4.5 bits
/// per weight) take it up to the config's rows per expert, the others at one row per expert.
#[test]
fn the_direct_path_takes_repeated_experts_only_for_light_formats() {
    use GgufFormat::*;
    for f in [Q4_0, Q4K, Q2K, Q3K, Iq4Nl, Iq4Xs, Mxfp4] {
        assert!(cukernels::direct_rereads_pay(f), "{f}");
    }
    for f in [Q4_1, Q5_0, Q5_1, Q8_0, Q5K, Q6K] {
        assert!(!cukernels::direct_rereads_pay(f), "{f}");
    }
    for config in cukernels::MOE_CONFIGS.iter() {
        // 128 experts × 8: 16 tokens are one row per expert, 32 two.
        for (format, tokens, direct) in [(Q4_0, 16, true), (Q8_0, 16, true), (Q4K, 32, true), (Q8_0, 32, false), (Q6K, 32, false), (Q4_0, 64, false)] {
            let d = MulMatId::new(format, 128, 768, 2048, tokens, 8);
            assert_eq!(d.matmul_path(config) == MoePath::Direct, direct, "{} {format} T{tokens}", config.arch);
        }
        // One dense expert: 8 tokens take the direct path in q4_K, not in q6_K.
        assert_eq!(MulMatId::new(Q4K, 1, 4096, 4096, 8, 1).matmul_path(config), MoePath::Direct);
        assert_ne!(MulMatId::new(Q6K, 1, 4096, 4096, 8, 1).matmul_path(config), MoePath::Direct);
        assert_eq!(MulMatId::new(Q6K, 1, 4096, 4096, 1, 1).matmul_path(config), MoePath::Direct);
    }
}

/// Up to 8 tokens take the direct path (a dense layer's decode: each block re-reads the one
/// expert's weights per token, from L2), 9 do not.
#[test]
fn a_small_tiled_grid_takes_the_decode_path() {
    for config in cukernels::MOE_CONFIGS.iter() {
        for tokens in [1, 2, 8] {
            let d = MulMatId::new(GgufFormat::Q4_0, 1, 4096, 4096, tokens, 1);
            assert_eq!(d.matmul_path(config), MoePath::Direct, "{} T{tokens}", config.arch);
        }
        let nine = MulMatId::new(GgufFormat::Q4_0, 1, 4096, 4096, 9, 1);
        assert_ne!(nine.matmul_path(config), MoePath::Direct, "{}: nine rows of one expert", config.arch);
    }
    // (sm_70's `dp4a` tiled tile has 8 features per block: 512 blocks at n = 4096 and any T,
    // so there the rows per expert decide alone.)
    for config in cukernels::MOE_CONFIGS.iter().filter(|c| c.tiled.engine != cukernels::MoeEngine::Dp4a) {
        for (tokens, decode) in [(9usize, true), (32, true), (2048, false)] {
            let d = MulMatId::new(GgufFormat::Q4_0, 1, 4096, 4096, tokens, 1);
            let tiled_blocks = tokens.div_ceil(config.tiled.rows as usize) * 4096usize.div_ceil(config.tiled.features() as usize);
            assert_eq!(tiled_blocks < config.tiled_min_blocks as usize, decode, "{} T{tokens}: {tiled_blocks} tiled blocks", config.arch);
            assert_eq!(d.decode_path(config), decode, "{} T{tokens}", config.arch);
        }
    }
}

#[test]
fn tall_tiles_per_format_share_the_grid_and_the_launch_follows_the_format() {
    // The tall tile may differ per format (over warps), never in rows or features per block:
    // the path rule and the grid use `config.tall`. And the plan launches the format's tile.
    for config in cukernels::MOE_CONFIGS.iter() {
        for format in GgufFormat::ALL {
            let tall = config.tile(MoePath::TiledTall, format);
            assert_eq!((tall.rows, tall.features()), (config.tall.rows, config.tall.features()), "{} {}", config.arch, format.name());
            let d = MulMatId::new(format, 128, 768, 2048, 4096, 8).force_path(MoePath::TiledTall);
            let plan = d.plan(0, &buffers_for(&d), config).unwrap();
            assert_eq!((plan.matmul_threads, plan.matmul_smem), (tall.threads(), tall.smem_bytes()), "{} {}", config.arch, format.name());
        }
    }
    // sm_90's rows as measured: 8 warps × 16 features for the 32-row tile, and for the tall tile
    // of the formats with a scale per 16 weights; 4 warps × 32 features for the other tall tiles.
    let sm90 = cukernels::MOE_CONFIGS.iter().find(|c| c.arch.sm() == 90).unwrap();
    for format in GgufFormat::ALL {
        assert_eq!((sm90.tile(MoePath::Tiled, format).warps, sm90.tile(MoePath::Tiled, format).features_per_warp), (8, 16), "{}", format.name());
        let tall = sm90.tile(MoePath::TiledTall, format);
        let expected = if format.scales_per_16_weights() { (8, 16, 2) } else { (4, 32, 3) };
        assert_eq!((tall.warps, tall.features_per_warp, tall.blocks_per_sm), expected, "{}", format.name());
    }
}

#[test]
fn plan_picks_the_path_by_tokens_and_bounds_the_grid() {
    for config in cukernels::MOE_CONFIGS.iter() {
        for tokens in [1usize, 8, 9, 64, 65, 256, 257, 512, 4096] {
            let d = MulMatId::new(GgufFormat::Q4_0, 128, 768, 2048, tokens, 8);
            let plan = d.plan(0, &buffers_for(&d), config).unwrap();
            // 8 of 128 experts per token: the rows per expert average tokens / 16.
            let tiled_blocks = (tokens * 8).div_ceil(config.tiled.rows as usize) * 768usize.div_ceil(config.tiled.features() as usize);
            let decode = tokens * 8 <= config.decode_max_rows as usize * 128 || tiled_blocks < config.tiled_min_blocks as usize;
            let tall_blocks = (tokens * 8).div_ceil(config.tall.rows as usize) * 768usize.div_ceil(config.tall.features() as usize);
            let tall = tokens * 8 >= config.tall_min_rows as usize * 128 && tall_blocks >= config.tall_min_blocks as usize;
            let direct = tokens * 8 <= config.direct_max_slots as usize && (tokens * 8 <= config.direct_max_rows as usize * 128 || tokens * 8 <= config.direct_any_rows_slots as usize);
            let path = if direct {
                MoePath::Direct
            } else if decode {
                MoePath::Decode
            } else if tall {
                MoePath::TiledTall
            } else {
                MoePath::Tiled
            };
            assert_eq!((d.matmul_path(config), plan.path), (path, path), "{} T{tokens}", config.arch);
            assert_eq!(d.decode_path(config), path == MoePath::Decode);
            if tokens == 1 {
                assert_eq!(path, MoePath::Direct, "{}: one token of 8 experts takes the direct path", config.arch);
            }
            if tokens == 256 {
                assert_eq!(path, MoePath::Tiled, "{}: 256 tokens of 128 experts (16 rows each) take the tiled path", config.arch);
            }
            if tokens >= 512 {
                let expected = if config.tall_min_rows == u32::MAX { MoePath::Tiled } else { MoePath::TiledTall };
                assert_eq!(path, expected, "{}: 512 tokens of 128 experts (32 rows each) take the tall tiles", config.arch);
            }
            let tile = config.tile(plan.path, GgufFormat::Q4_0);
            assert_eq!(plan.matmul_threads, tile.threads());
            assert_eq!(plan.matmul_smem, tile.smem_bytes());
            assert_eq!(plan.params.tile_rows, tile.rows);
            let slots = (tokens * 8) as u32;
            // Only builds with programmatic launch overlap the direct path with the quantizer.
            assert_eq!(plan.overlaps_previous, config.arch.sm() >= 90, "{} T{tokens}", config.arch);
            assert_eq!(plan.params.flags & cukernels::moe_flags::QUANTIZE_ONLY != 0, path == MoePath::Direct);
            if path == MoePath::Direct {
                // One block per slot.
                assert_eq!(plan.matmul_grid.0, slots);
            } else {
                // Enough tiles for any routing: all slots on one expert, or one slot per expert.
                assert!(plan.matmul_grid.0 >= slots.div_ceil(tile.rows));
                assert!(plan.matmul_grid.0 >= slots.min(128));
            }
            assert_eq!(plan.matmul_grid.1, 768u32.div_ceil(tile.features()));
            // The router's block (not on the direct path), then one block per 128 q8_1 blocks
            // of activations.
            let router = usize::from(path != MoePath::Direct);
            assert_eq!(plan.prepare_grid as usize, router + (tokens * 2048 / 32).div_ceil(128));
        }
    }
}

#[test]
fn plan_rejects_bad_buffers_before_anything_launches() {
    let config = &cukernels::MOE_CONFIGS[5];
    let d = MulMatId::new(GgufFormat::Q5_0, 32, 100, 320, 7, 4);
    let good = buffers_for(&d);
    assert!(d.plan(0, &good, config).is_ok());
    let name = |b: cukernels::MoeBuffers| match d.plan(0, &b, config) {
        Err(Error::InvalidArgument { name, .. }) | Err(Error::BufferTooSmall { name, .. }) => name.to_string(),
        Err(Error::Overlap(what)) => format!("overlap: {what}"),
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(name(cukernels::MoeBuffers { weights: (good.weights.0, good.weights.1 - 1), ..good }), "weights");
    assert_eq!(name(cukernels::MoeBuffers { x: (good.x.0, good.x.1 + 1), ..good }), "x");
    assert_eq!(name(cukernels::MoeBuffers { ids: (good.ids.0, good.ids.1 - 1), ..good }), "ids");
    assert_eq!(name(cukernels::MoeBuffers { y: (good.y.0, good.y.1 + 4), ..good }), "y");
    assert_eq!(name(cukernels::MoeBuffers { workspace: (good.workspace.0, good.workspace.1 - 1), ..good }), "workspace");
    // q5_0 blocks hold an f16: they start on even addresses.
    assert_eq!(name(cukernels::MoeBuffers { weights: (good.weights.0 + 1, good.weights.1), ..good }), "weights");
    assert_eq!(name(cukernels::MoeBuffers { workspace: (good.workspace.0 + 8, good.workspace.1), ..good }), "workspace");
    // y over any input or the workspace.
    for (what, addr) in [("weights", good.weights.0 + 64), ("x", good.x.0 + 4), ("ids", good.ids.0), ("workspace", good.workspace.0 + 16)] {
        assert_eq!(name(cukernels::MoeBuffers { y: (addr, good.y.1), ..good }), format!("overlap: y overlaps {what} in device memory"));
    }
    // y ending exactly where x starts is fine.
    let y_bytes = 4 * good.y.1 as u64;
    assert!(d.plan(0, &cukernels::MoeBuffers { y: (good.x.0 - y_bytes, good.y.1), ..good }, config).is_ok());
    // q4_K and q5_K chunks are read in 32-bit words: their blocks start on multiples of 4.
    for format in [GgufFormat::Q4K, GgufFormat::Q5K] {
        let kq = MulMatId::new(format, 4, 3, 256, 2, 2);
        let b = buffers_for(&kq);
        assert_eq!(invalid_name(kq.plan(0, &cukernels::MoeBuffers { weights: (b.weights.0 + 2, b.weights.1), ..b }, config)), "weights", "{format}");
        assert!(kq.plan(0, &cukernels::MoeBuffers { weights: (b.weights.0 + 4, b.weights.1), ..b }, config).is_ok(), "{format}");
    }
    // mxfp4 blocks (17 bytes) may start anywhere.
    let m = MulMatId::new(GgufFormat::Mxfp4, 4, 3, 64, 2, 2);
    let b = buffers_for(&m);
    assert!(m.plan(0, &cukernels::MoeBuffers { weights: (b.weights.0 + 1, b.weights.1), ..b }, config).is_ok());
    // More feature blocks than gridDim.y allows.
    let features = config.tile(cukernels::MoePath::Decode, GgufFormat::Q8_0).features() as usize;
    let wide = MulMatId::new(GgufFormat::Q8_0, 1, 65535 * features + 1, 32, 1, 1);
    assert_eq!(invalid_name(wide.plan(0, &buffers_for(&wide), config)), "n");
    // A forced path overrides the batch-size rule (the benchmark measures both so).
    let forced = MulMatId::new(GgufFormat::Q5_0, 32, 100, 320, 1, 4).force_path(cukernels::MoePath::Tiled);
    let plan = forced.plan(0, &buffers_for(&forced), config).unwrap();
    assert_eq!((plan.path, plan.params.tile_rows), (cukernels::MoePath::Tiled, config.tiled.rows));
    assert!(!forced.decode_path(config));
    // The direct path reads its activations from the workspace, so any K takes it (Llama-3-70B's
    // FFN down projection: 28672).
    let long = MulMatId::new(GgufFormat::Q8_0, 8, 16, 28672, 1, 2);
    assert_eq!(long.matmul_path(config), cukernels::MoePath::Direct);
    assert!(long.plan(0, &buffers_for(&long), config).is_ok());
    // No tokens: a valid plan that launches nothing.
    let empty = MulMatId::new(GgufFormat::Q8_0, 8, 16, 64, 0, 2);
    assert!(empty.plan(0, &buffers_for(&empty), config).unwrap().empty);
}
