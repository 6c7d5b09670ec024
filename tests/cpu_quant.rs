//! GGUF block formats on the host: layouts, dequantization and the reference quantizers,
//! against PyPI's `gguf` package (ggml's Python implementation of its formats).
//!
//! `tests/data/gguf_vectors.bin` holds `gguf`'s results (written by
//! `tests/data/make_gguf_vectors.py`, fixed seeds; `scripts/test.sh` checks that the script
//! reproduces it and also runs it with a fresh seed, handing that file to this test through
//! `CUKERNELS_GGUF_VECTORS`). Every comparison is bit for bit, element by element.

use cukernels::quant::{dequantize, dot_q8_1, quantize, quantize_q8_1};
use cukernels::{Error, GgufFormat, QK, QK_K};
use rand::{Rng, SeedableRng};

/// One record of the vector file.
struct Record {
    format: GgufFormat,
    /// f32 input (quantize records only).
    input: Option<Vec<f32>>,
    blocks: Vec<u8>,
    dequantized: Vec<f32>,
}

fn read_vectors(bytes: &[u8]) -> Vec<Record> {
    let mut at = 0;
    let mut take = |n: usize| {
        let s = &bytes[at..at + n];
        at += n;
        s
    };
    assert_eq!(take(4), b"CKGV", "not a gguf vector file");
    let u32_of = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap());
    assert_eq!(u32_of(take(4)), 1, "vector file version");
    let count = u32_of(take(4));
    let floats = |s: &[u8]| s.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<f32>>();
    (0..count)
        .map(|_| {
            let name_len = take(1)[0] as usize;
            let name = std::str::from_utf8(take(name_len)).unwrap().to_string();
            let format = GgufFormat::from_name(&name).unwrap_or_else(|| panic!("unknown format {name}"));
            let kind = take(1)[0];
            let (elements, n_bytes) = (u32_of(take(4)) as usize, u32_of(take(4)) as usize);
            let input = (kind == 0).then(|| floats(take(4 * elements)));
            let blocks = take(n_bytes).to_vec();
            let dequantized = floats(take(4 * elements));
            Record { format, input, blocks, dequantized }
        })
        .collect()
}

fn vector_files() -> Vec<(String, Vec<u8>)> {
    let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/data/gguf_vectors.bin");
    let mut files = vec![(committed.to_string(), std::fs::read(committed).expect("tests/data/gguf_vectors.bin"))];
    if let Ok(fresh) = std::env::var("CUKERNELS_GGUF_VECTORS") {
        let bytes = std::fs::read(&fresh).unwrap_or_else(|e| panic!("CUKERNELS_GGUF_VECTORS={fresh}: {e}"));
        files.push((fresh, bytes));
    }
    files
}

/// Element-by-element bit equality, reporting the first difference.
fn assert_bits_equal(what: &str, ours: &[f32], reference: &[f32]) {
    assert_eq!(ours.len(), reference.len(), "{what}: lengths");
    for (i, (a, b)) in ours.iter().zip(reference).enumerate() {
        assert!(a.to_bits() == b.to_bits(), "{what}: element {i}: ours {a:e} ({:#010x}), gguf {b:e} ({:#010x})", a.to_bits(), b.to_bits());
    }
}

#[test]
fn dequantization_matches_gguf_bit_for_bit_in_every_format() {
    for (file, bytes) in vector_files() {
        let records = read_vectors(&bytes);
        for format in GgufFormat::ALL {
            assert!(records.iter().any(|r| r.format == format && r.input.is_none()), "{file}: no dequantize record of {format}");
        }
        for r in &records {
            let ours = dequantize(r.format, &r.blocks).unwrap();
            assert_bits_equal(&format!("{file}: dequantize {}", r.format), &ours, &r.dequantized);
        }
    }
}

#[test]
fn quantization_matches_gguf_bit_for_bit_where_gguf_quantizes() {
    for (file, bytes) in vector_files() {
        let records = read_vectors(&bytes);
        let quantized: Vec<_> = records.iter().filter(|r| r.input.is_some()).collect();
        let formats: Vec<_> = quantized.iter().map(|r| r.format).collect();
        assert_eq!(formats, [GgufFormat::Q4_0, GgufFormat::Q4_1, GgufFormat::Q5_0, GgufFormat::Q5_1, GgufFormat::Q8_0, GgufFormat::Mxfp4], "{file}");
        for r in quantized {
            let input = r.input.as_ref().unwrap();
            let ours = quantize(r.format, input).unwrap();
            let size = r.format.block_bytes();
            for (b, (a, g)) in ours.chunks_exact(size).zip(r.blocks.chunks_exact(size)).enumerate() {
                assert_eq!(a, g, "{file}: {} block {b} (input {:?})", r.format, &input[b * r.format.block_elements()..][..r.format.block_elements()]);
            }
            assert_eq!(ours.len(), r.blocks.len());
        }
    }
}

/// Inputs for the quantizers gguf cannot check: normal rows at several scales, plus the
/// degenerate blocks (zeros, a constant, one non-zero weight, an outlier).
fn test_rows(seed: u64, elements: usize) -> Vec<Vec<f32>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut normal = move || {
        // Box-Muller: rand's distributions crate is not a dependency.
        let (u, v): (f32, f32) = (rng.random_range(1e-7..1.0), rng.random_range(0.0..1.0));
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    };
    let mut rows = Vec::new();
    for scale in [1e-3f32, 0.02, 1.0, 30.0] {
        rows.push((0..elements).map(|_| normal() * scale).collect::<Vec<_>>());
    }
    rows.push(vec![0.0; elements]);
    rows.push(vec![0.37; elements]);
    let mut one = vec![0.0; elements];
    one[elements / 3] = -2.5;
    rows.push(one);
    let mut outlier: Vec<f32> = (0..elements).map(|_| normal() * 0.1).collect();
    outlier[7] = 12.0;
    rows.push(outlier);
    rows
}

/// Root-mean-square error of a block over its largest magnitude that ggml's reference
/// quantizers stay under on these rows, per format: about 1.5 times the largest ratio
/// measured (printed by the test). Relative to the largest magnitude, not the block's
/// root-mean-square, because the step of every format follows its block's largest weight (an
/// outlier coarsens the whole block).
fn relative_error_bound(format: GgufFormat) -> f32 {
    // Measured (2026-12-01): q2_K 0.114, q3_K 0.058, q4_0 0.043, q4_1 0.042, iq4_nl 0.044,
    // iq4_xs 0.031, mxfp4 0.088, q4_K 0.026, q5_0 0.021, q5_1 0.020, q5_K 0.014, q6_K 0.007,
    // q8_0 0.0026 (uniform rounding: step/√12 = 1/(127·√12) = 0.0023).
    match format {
        GgufFormat::Q2K => 0.17,
        GgufFormat::Q3K => 0.09,
        GgufFormat::Q4_0 | GgufFormat::Q4_1 | GgufFormat::Iq4Nl => 0.065,
        GgufFormat::Iq4Xs => 0.046,
        GgufFormat::Mxfp4 => 0.13,
        GgufFormat::Q4K => 0.04,
        GgufFormat::Q5_0 | GgufFormat::Q5_1 => 0.032,
        GgufFormat::Q5K => 0.022,
        GgufFormat::Q6K => 0.011,
        GgufFormat::Q8_0 => 0.004,
    }
}

#[test]
fn every_quantizer_round_trips_within_its_error_bound_block_by_block() {
    for format in GgufFormat::ALL {
        // Four super-blocks (or 32 blocks) per row.
        let elements = 4 * QK_K;
        let mut worst = 0f32;
        for (r, row) in test_rows(format as u64, elements).iter().enumerate() {
            let q = quantize(format, row).unwrap();
            assert_eq!(q.len(), format.row_bytes(1, elements).unwrap(), "{format}");
            let y = dequantize(format, &q).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{format} row {r}: non-finite output");
            let block = format.block_elements();
            for (b, (xb, yb)) in row.chunks(block).zip(y.chunks(block)).enumerate() {
                let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
                let err = (xb.iter().zip(yb).map(|(a, b)| (a - b) * (a - b)).sum::<f32>() / block as f32).sqrt();
                if amax == 0.0 {
                    assert!(yb.iter().all(|&v| v == 0.0), "{format} row {r} block {b}: zeros became {yb:?}");
                } else {
                    worst = worst.max(err / amax);
                    assert!(err <= relative_error_bound(format) * amax, "{format} row {r} block {b}: rms error {err} against largest magnitude {amax}");
                }
            }
        }
        println!("{format}: largest rms error / largest magnitude {worst:.4} (bound {})", relative_error_bound(format));
    }
}

#[test]
fn block_layouts_are_ggmls() {
    // Sizes (also const-asserted in cukernels-gpu), ggml type ids, names.
    let expected = [
        ("q4_0", 2, 32, 18),
        ("q4_1", 3, 32, 20),
        ("q5_0", 6, 32, 22),
        ("q5_1", 7, 32, 24),
        ("q8_0", 8, 32, 34),
        ("q2_K", 10, 256, 84),
        ("q3_K", 11, 256, 110),
        ("q4_K", 12, 256, 144),
        ("q5_K", 13, 256, 176),
        ("q6_K", 14, 256, 210),
        ("iq4_nl", 20, 32, 18),
        ("iq4_xs", 23, 256, 136),
        ("mxfp4", 39, 32, 17),
    ];
    for (format, (name, id, elements, bytes)) in GgufFormat::ALL.into_iter().zip(expected) {
        assert_eq!((format.name(), format.ggml_type(), format.block_elements(), format.block_bytes()), (name, id, elements, bytes));
        assert_eq!(GgufFormat::from_name(&name.to_uppercase()), Some(format));
    }
    // A known block, field by field: q4_K's scale packing (ggml's get_scale_min_k4).
    let scales = [0xC1, 0x02, 0x03, 0x3F, 0x85, 0x06, 0x07, 0x08, 0x9A, 0x0B, 0x0C, 0xFD];
    let got: Vec<_> = (0..8).map(|j| cukernels::quant::scale_min_k4(j, &scales)).collect();
    assert_eq!(got, [(1, 5), (2, 6), (3, 7), (63, 8), (0x3A, 0x29), (0x0B, 0), (0x0C, 0), (0x0D, 0x0F)]);
}

#[test]
fn q8_1_activations_carry_their_block_sums() {
    let x: Vec<f32> = (0..4 * QK).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
    let blocks = quantize_q8_1(&x).unwrap();
    assert_eq!(blocks.len(), 4);
    for (b, block) in blocks.iter().enumerate() {
        // s is Σq times the unrounded scale (ggml: `sum*d` before d becomes f16).
        let amax = x[b * QK..][..QK].iter().fold(0f32, |m, v| m.max(v.abs()));
        let sum: i32 = block.qs.iter().map(|&q| q as i32).sum();
        assert_eq!(block.d, half::f16::from_f32(amax / 127.0));
        assert_eq!(block.s, half::f16::from_f32(sum as f32 * (amax / 127.0)));
        let d = amax / 127.0;
        for (j, &q) in block.qs.iter().enumerate() {
            assert!((q as f32 * d - x[b * QK + j]).abs() <= d * 0.5 + 1e-7, "block {b} element {j}");
        }
    }
}

#[test]
fn wrong_lengths_are_typed_errors_naming_the_argument() {
    for format in GgufFormat::ALL {
        match quantize(format, &vec![1.0; format.block_elements() + 1]) {
            Err(Error::InvalidArgument { name: "x", .. }) => {}
            other => panic!("{format}: {other:?}"),
        }
        match dequantize(format, &vec![0u8; format.block_bytes() * 2 - 1]) {
            Err(Error::InvalidArgument { name: "bytes", .. }) => {}
            other => panic!("{format}: {other:?}"),
        }
        assert_eq!(format.row_bytes(3, format.block_elements() * 5), Some(15 * format.block_bytes()));
        assert_eq!(format.row_bytes(1, format.block_elements() + 1), None);
        assert_eq!(format.row_bytes(usize::MAX, format.block_elements()), None);
    }
    assert!(matches!(quantize_q8_1(&[0.0; 33]), Err(Error::InvalidArgument { name: "x", .. })));
}

/// The tensor-core tiles take a chunk of a format without scales per 16 weights in one k32
/// product with the scale and offset of its first half: the halves must agree.
#[test]
fn chunk_halves_share_their_scales_unless_the_format_scales_every_16_weights() {
    for format in GgufFormat::ALL {
        let mut halves_differ = false;
        for row in test_rows(300 + format as u64, 2 * QK_K) {
            for chunk in cukernels::quant::chunks(format, &quantize(format, &row).unwrap()).unwrap() {
                let differ = chunk.scale[0] != chunk.scale[1] || chunk.offset[0] != chunk.offset[1];
                assert!(format.scales_per_16_weights() || !differ, "{format}: halves of a chunk differ: {chunk:?}");
                halves_differ |= differ;
            }
        }
        // And the formats that claim a scale per 16 weights use it on these rows.
        assert_eq!(halves_differ, format.scales_per_16_weights(), "{format}");
    }
}

/// The GPU kernels read chunks with wide loads (`BlockFormat::chunk_at`: q4_0, q5_0 and q8_0
/// as a scale and aligned words and q2_K, q3_K and q6_K by aligned words, at both of their
/// blocks' alignments, q4_1, q5_1 and iq4_nl in 16-bit words, q4_K/q5_K chunks in 32-bit
/// words): the same chunks, bit for bit, as the decoder the host dequantizes with, for every
/// chunk of every format.
#[test]
fn chunks_read_with_wide_loads_equal_the_decoded_chunks() {
    for format in GgufFormat::ALL {
        for row in test_rows(400 + format as u64, 4 * QK_K) {
            let blocks = quantize(format, &row).unwrap();
            let (decoded, read) = (cukernels::quant::chunks(format, &blocks).unwrap(), cukernels::quant::chunks_as_the_gpu_reads_them(format, &blocks).unwrap());
            assert_eq!(decoded.len(), 4 * QK_K / QK, "{format}");
            for (i, (d, r)) in decoded.iter().zip(&read).enumerate() {
                let bits = |c: &cukernels::quant::Chunk| (c.values, c.scale.map(f32::to_bits), c.offset.map(f32::to_bits));
                assert_eq!(bits(d), bits(r), "{format} chunk {i}");
            }
        }
    }
}

/// The integer form the GPU kernels compute (`chunk_dot`: int8 chunk values against q8_1
/// activations, `dp4a`, then the chunk's scales and offsets) against f64 products of the
/// dequantized weights and the dequantized activations, row by row, in every format; and the
/// direct path's form of it (the values as stored, `BlockFormat::VALUE_BIAS` taken off the
/// integer dots) bit for bit against the first.
#[test]
fn integer_dot_products_equal_dequantized_products_in_every_format() {
    for format in GgufFormat::ALL {
        let k = 4 * QK_K;
        for (r, row) in test_rows(100 + format as u64, k).iter().enumerate() {
            let weights = quantize(format, row).unwrap();
            let activations: Vec<f32> = (0..k).map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.05 + if i % 5 == 0 { 0.8 } else { 0.0 }).collect();
            let xq = quantize_q8_1(&activations).unwrap();
            let w = dequantize(format, &weights).unwrap();
            let x: Vec<f64> = xq.iter().flat_map(|b| b.qs.iter().map(move |&q| q as f64 * b.d.to_f32() as f64)).collect();
            let reference: f64 = w.iter().zip(&x).map(|(&a, &b)| a as f64 * b).sum();
            let magnitude: f64 = w.iter().zip(&x).map(|(&a, &b)| (a as f64 * b).abs()).sum();
            let ours = dot_q8_1(format, &weights, &xq).unwrap();
            assert!((ours as f64 - reference).abs() <= 1e-5 * magnitude, "{format} row {r}: {ours} against {reference} (magnitude {magnitude})");
            // The direct path's form: the values as stored, their bias taken off the integer
            // dots. The same integers, so the same bits.
            let stored = cukernels::quant::dot_q8_1_with_stored_values(format, &weights, &xq).unwrap();
            assert_eq!(stored.to_bits(), ours.to_bits(), "{format} row {r}: stored values give {stored}, decoded {ours}");
        }
        assert!(matches!(dot_q8_1(format, &vec![0u8; format.block_bytes()], &[]), Err(Error::InvalidArgument { name: "x", .. })));
    }
    // The host's dp4a is the PTX instruction's arithmetic: four signed byte products, added.
    // a = [1, 127, -1, -128], b = [-128, -1, 1, 127] (little-endian bytes).
    assert_eq!(cukernels::quant::dp4a(0x80ff_7f01, 0x7f01_ff80, 10), 10 - 128 - 127 - 1 - 128 * 127);
}
