//! Criterion bench: our flash attention on a prefill and a decode shape, each iteration timed
//! with CUDA events (criterion's `iter_custom`). Needs a GPU; without one it says so and
//! measures nothing. The full comparison with PyTorch (the shapes, ratios) is
//! `cukernels-bench attention` followed by `benches/attention_torch.py`.

use criterion::{criterion_group, criterion_main, Criterion};
use cukernels::cudarc::driver::sys::CUevent_flags;
use cukernels::{device_context, Attention, AttentionExtras, Cukernels};
use half::f16;
use std::time::Duration;

fn attention(c: &mut Criterion) {
    let ctx = match device_context(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("attention bench skipped: no GPU ({e})");
            return;
        }
    };
    let stream = ctx.default_stream();
    let kernels = Cukernels::new(&ctx).expect("cukernels handle");
    let mut group = c.benchmark_group("attention");
    let shapes = [
        ("prefill b4 s4096 h16 d128 causal", Attention::new(4, 4096, 4096, 16, 16, 128).causal()),
        ("decode b1 k16384 h32/8 d128", Attention::new(1, 1, 16384, 32, 8, 128)),
    ];
    for (name, desc) in shapes {
        let n = desc.buffer_lengths().unwrap();
        let q = stream.clone_htod(&vec![f16::from_f32(0.01); n.q]).unwrap();
        let k = stream.clone_htod(&vec![f16::from_f32(0.02); n.k]).unwrap();
        let v = stream.clone_htod(&vec![f16::from_f32(0.5); n.v]).unwrap();
        let mut o = stream.clone_htod(&vec![f16::ZERO; n.o]).unwrap();
        group.throughput(criterion::Throughput::Elements(desc.flops() as u64));
        group.bench_function(name, |bench| {
            bench.iter_custom(|iters| {
                let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
                let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
                start.record(&stream).unwrap();
                for _ in 0..iters {
                    kernels.attention(&stream, &desc, &q, &k, &v, &mut o, AttentionExtras::default()).unwrap();
                }
                end.record(&stream).unwrap();
                end.synchronize().unwrap();
                Duration::from_secs_f64(start.elapsed_ms(&end).unwrap() as f64 / 1e3)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, attention);
criterion_main!(benches);
