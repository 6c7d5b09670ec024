//! Criterion bench: our SGEMM and cuBLAS on a few shapes, each iteration timed with CUDA
//! events (criterion's `iter_custom`). Needs a GPU; without one it says so and measures nothing.
//! The full comparison (sweep, ratios, dispatch regret) is `cukernels-bench sgemm`.

use criterion::{criterion_group, criterion_main, Criterion};
use cukernels::cudarc::driver::sys::CUevent_flags;
use cukernels::{device_context, Cukernels, Sgemm};
use std::time::Duration;

fn sgemm(c: &mut Criterion) {
    let ctx = match device_context(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("sgemm bench skipped: no GPU ({e})");
            return;
        }
    };
    let stream = ctx.default_stream();
    let kernels = Cukernels::new(&ctx).expect("cukernels handle");
    let mut group = c.benchmark_group("sgemm");
    for (batch, m, n, k) in [(1, 4096, 4096, 4096), (1, 1000, 1000, 1000), (64, 512, 512, 512), (1, 16, 4096, 4096)] {
        let g = Sgemm::new(m, n, k).batched(batch);
        let a = stream.clone_htod(&vec![0.5f32; batch * m * k]).unwrap();
        let b = stream.clone_htod(&vec![0.25f32; batch * k * n]).unwrap();
        let mut out = stream.alloc_zeros::<f32>(batch * m * n).unwrap();
        group.throughput(criterion::Throughput::Elements(g.flops() as u64));
        group.bench_function(format!("{batch}x({m}x{n}x{k})"), |bench| {
            bench.iter_custom(|iters| {
                let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
                let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
                start.record(&stream).unwrap();
                for _ in 0..iters {
                    kernels.sgemm(&stream, &g, &a, &b, &mut out).unwrap();
                }
                end.record(&stream).unwrap();
                end.synchronize().unwrap();
                Duration::from_secs_f64(start.elapsed_ms(&end).unwrap() as f64 / 1e3)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sgemm);
criterion_main!(benches);
