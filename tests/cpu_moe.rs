//! `mul_mat_id` on the host: shape validation, the routing reference, and the f64 reference
//! the GPU kernels will be tested against (here checked against a dense product of weights
//! that quantize without loss).

use cukernels::moe::{check_ids, mul_mat_id_reference, routing_reference};
use cukernels::quant::quantize;
use cukernels::{Error, GgufFormat, MulMatId};

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
