//! Criterion bench: our MoE quantized matmul (`mul_mat_id`, q4_K, Qwen3-30B-A3B's gate
//! projection) at a decode and a prefill batch, each iteration timed with CUDA events
//! (criterion's `iter_custom`). Needs a GPU; without one it says so and measures nothing. The
//! full comparison with cuBLAS (every format and batch size) is `cukernels-bench moe`.

use criterion::{criterion_group, criterion_main, Criterion};
use cukernels::cudarc::driver::sys::CUevent_flags;
use cukernels::{device_context, Cukernels, GgufFormat, MulMatId};
use std::time::Duration;

fn moe(c: &mut Criterion) {
    let ctx = match device_context(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("moe bench skipped: no GPU ({e})");
            return;
        }
    };
    let stream = ctx.default_stream();
    let kernels = Cukernels::new(&ctx).expect("cukernels handle");
    let mut group = c.benchmark_group("moe");
    for tokens in [1usize, 512] {
        let desc = MulMatId::new(GgufFormat::Q4K, 128, 768, 2048, tokens, 8);
        let lens = desc.buffer_lengths().unwrap();
        // Zero weights and activations: the kernels' work does not depend on the values.
        let w = stream.alloc_zeros::<u8>(lens.weight_bytes).unwrap();
        let x = stream.alloc_zeros::<f32>(lens.x).unwrap();
        let ids: Vec<i32> = (0..lens.ids).map(|i| (i % 128) as i32).collect();
        let ids = stream.clone_htod(&ids).unwrap();
        let mut y = stream.alloc_zeros::<f32>(lens.y).unwrap();
        let mut ws = stream.alloc_zeros::<u8>(desc.workspace_bytes().unwrap()).unwrap();
        group.throughput(criterion::Throughput::Elements(desc.flops(&vec![0; lens.ids]) as u64));
        group.bench_function(format!("q4_K gate T{tokens}"), |bench| {
            bench.iter_custom(|iters| {
                let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
                let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
                start.record(&stream).unwrap();
                for _ in 0..iters {
                    kernels.mul_mat_id(&stream, &desc, &w, &x, &ids, &mut y, &mut ws).unwrap();
                }
                end.record(&stream).unwrap();
                end.synchronize().unwrap();
                Duration::from_secs_f64(start.elapsed_ms(&end).unwrap() as f64 / 1e3)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, moe);
criterion_main!(benches);
