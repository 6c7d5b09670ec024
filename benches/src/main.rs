//! `cukernels-bench`: the main job.
//!
//! - On a machine with a CUDA GPU: checks our SGEMM against cuBLAS, then times both over the
//!   sweep and prints shape, our TFLOP/s, cuBLAS TFLOP/s, ratio, % of the FP32 FMA peak, the
//!   dispatcher's choice and its regret; writes the same as JSON lines (`--out FILE`, appended to;
//!   every subcommand writes each row as it is measured, load its rows at the end).
//! - Without one (or with `report`): prints each architecture's configs and the ptxas resources
//!   of every kernel.
//!
//! - `load`: per kernel family, the time from `Cukernels::new` to the end of the first launch
//!   in a fresh process with the driver's JIT cache off, with the cubin and forced to PTX, beside
//!   cuBLAS (medians of `--reps` processes, default 5); JSON lines with `op: "load"`.
//!
//! - `attention`: our flash attention over the attention issue's shapes, JSON lines with
//!   `op: "attention"` (`benches/attention_torch.py` adds PyTorch's baselines).
//!
//! Usage: `cukernels-bench [report | sgemm | load | attention] [--quick] [--reps N] [--config sm_XX] [--artifact cubin|ptx] [--compiler nvptx|rust-cuda] [--out FILE] [--shape LABEL]...`

use cukernels::cudarc::cublas::CudaBlas;
use cukernels::{device_context, Arch, ArtifactKind, Compiler, Cukernels};
use cukernels_bench::load_bench::{load_cases, measure_in_children, measure_in_this_process, median_of};
use cukernels_bench::report::{config_table, resource_table};
use cukernels_bench::sgemm_bench::{bench_shape, cross_check, random_sweep, shape, shape_classes, sweep, DeviceInfo, Row, Shape};
use cukernels_bench::COMMIT;
use std::io::Write;

struct Options {
    mode: Option<String>,
    quick: bool,
    reps: Option<usize>,
    config: Option<Arch>,
    /// Force the kind of artifact (`ptx`: the driver JIT-compiles it) instead of the default.
    artifact: Option<ArtifactKind>,
    /// Force the compiler of the kernels (a build embedding the rust-cuda sm_100/sm_120 modules
    /// beside the nvptx ones: README "rust-cuda").
    compiler: Option<Compiler>,
    out: Option<String>,
    /// Only the shapes with one of these labels (e.g. `4096x4096x4096`).
    shapes: Vec<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options { mode: None, quick: false, reps: None, config: None, artifact: None, compiler: None, out: None, shapes: Vec::new() };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "report" | "sgemm" | "load" | "attention" | "moe" => o.mode = Some(a),
            "load-child" => {
                // Internal: one load measurement in this (fresh) process.
                let family = args.next().ok_or("load-child takes a family and an artifact")?;
                let artifact = args.next().ok_or("load-child takes a family and an artifact")?;
                o.mode = Some(format!("load-child {family} {artifact}"));
            }
            "--quick" => o.quick = true,
            "--reps" => o.reps = Some(args.next().and_then(|v| v.parse().ok()).ok_or("--reps takes a number")?),
            "--config" => {
                let v = args.next().ok_or("--config takes an architecture such as sm_80")?;
                o.config = Some(Arch::from_name(&v).ok_or(format!("unknown architecture {v}"))?);
            }
            "--out" => o.out = Some(args.next().ok_or("--out takes a file")?),
            "--artifact" => {
                o.artifact = Some(match args.next().as_deref() {
                    Some("cubin") => ArtifactKind::Cubin,
                    Some("ptx") => ArtifactKind::Ptx,
                    _ => return Err("--artifact takes cubin or ptx".into()),
                })
            }
            "--compiler" => {
                let v = args.next().ok_or("--compiler takes nvptx or rust-cuda")?;
                o.compiler = Some(Compiler::from_name(&v).ok_or(format!("unknown compiler {v}: nvptx or rust-cuda"))?);
            }
            "--shape" => o.shapes.push(args.next().ok_or("--shape takes a shape label such as 4096x4096x4096")?),
            "-h" | "--help" => return Err("usage: cukernels-bench [report | sgemm | load | attention | moe] [--quick] [--reps N] [--config sm_XX] [--artifact cubin|ptx] [--compiler nvptx|rust-cuda] [--out FILE] [--shape LABEL]...".into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let ctx = device_context(0);
    let mode = o.mode.clone().unwrap_or_else(|| if ctx.is_ok() { "sgemm".into() } else { "report".into() });
    if mode == "report" {
        if let Err(e) = &ctx {
            println!("No GPU here ({e}): printing the configuration and resource report.\n");
        }
        print!("{}", config_table());
        println!();
        match resource_table() {
            Ok((kernels, table)) => {
                print!("{table}");
                let known = cukernels_bench::resources::known_rust_cuda_spills();
                let bad: Vec<String> = kernels.iter().flat_map(|k| k.checked_violations(&known)).collect();
                if !bad.is_empty() {
                    eprintln!("\n{} violations:\n{}", bad.len(), bad.join("\n"));
                    std::process::exit(1);
                }
            }
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let ctx = ctx.unwrap_or_else(|e| {
        eprintln!("the {mode} benchmark needs a GPU: {e}");
        std::process::exit(1)
    });
    if let Some(case) = mode.strip_prefix("load-child ") {
        let (family, artifact) = case.split_once(' ').expect("two words");
        match measure_in_this_process(&ctx, family, artifact) {
            Ok(t) => println!("{}", t.to_line()),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if mode == "load" {
        run_load(&ctx, &o);
        return;
    }
    if mode == "attention" {
        run_attention(&ctx, &o);
        return;
    }
    if mode == "moe" {
        run_moe(&ctx, &o);
        return;
    }
    run_sgemm(&ctx, &o);
}

/// The handle of a run: the device's own config, or `--config`'s and `--artifact`'s. Another
/// architecture's config runs as its PTX when the device can load that, else as the build of
/// that config for the device's own target (the config probes).
fn handle(ctx: &std::sync::Arc<cukernels::cudarc::driver::CudaContext>, o: &Options) -> Cukernels {
    match (o.config, o.artifact, o.compiler) {
        (None, None, None) => Cukernels::new(ctx),
        (config, artifact, compiler) => {
            let (major, minor) = ctx.compute_capability().unwrap();
            let device = Arch::for_compute_capability(major as u32, minor as u32, &Arch::ALL).unwrap_or(Arch::Sm70);
            let config = config.unwrap_or(device);
            let target = config.min(device);
            match (artifact, compiler) {
                (Some(kind), None) => Cukernels::with_artifact(ctx, target, config, kind),
                (None, None) => Cukernels::with_config(ctx, target, config),
                (kind, Some(compiler)) => {
                    let cubin_runs = cukernels::artifacts::runs_on(target, ArtifactKind::Cubin, major as u32, minor as u32);
                    let kind = kind.unwrap_or(if cubin_runs { ArtifactKind::Cubin } else { ArtifactKind::Ptx });
                    Cukernels::with_compiled_artifact(ctx, target, config, kind, compiler)
                }
            }
        }
    }
    .unwrap_or_else(|e| panic!("cannot create the cukernels handle: {e}"))
}

/// The benchmarks' stream: a stream of its own (the legacy default stream cannot be captured
/// into a CUDA graph, which the decode rows are also timed from), with cudarc's event tracking
/// off. With it, every use of a buffer would wait for an event recorded after its last use:
/// inside a capture a wait on an event recorded before it is an error, and between launches it
/// keeps a launch (ours or the baseline's) from starting while the one before drains
/// (programmatic dependent launch, sm_90+), as a framework that turns tracking off gets it.
fn bench_stream(ctx: &std::sync::Arc<cukernels::cudarc::driver::CudaContext>) -> std::sync::Arc<cukernels::cudarc::driver::CudaStream> {
    let stream = ctx.new_stream().unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: every buffer of a benchmark is used on this stream alone, in order.
    unsafe { ctx.disable_event_tracking() };
    stream
}

fn run_sgemm(ctx: &std::sync::Arc<cukernels::cudarc::driver::CudaContext>, o: &Options) {
    let stream = bench_stream(ctx);
    let kernels = handle(ctx, o);
    let blas = CudaBlas::new(stream.clone()).expect("cuBLAS");
    let info = DeviceInfo::of(ctx);
    let (major, minor) = ctx.compute_capability().unwrap();
    let device_arch = Arch::for_compute_capability(major as u32, minor as u32, &Arch::ALL).unwrap_or(Arch::Sm70);
    let peak = info.fp32_peak_tflops(device_arch.limits().fp32_lanes_per_sm);
    let date = today();
    println!(
        "{} (sm_{major}{minor}, {} SMs, {:.0} MHz, FP32 peak {peak:.1} TFLOP/s); cukernels: {}; commit {COMMIT}; {date}",
        info.name,
        info.sm_count,
        info.clock_khz as f64 / 1e3,
        kernels.artifact(cukernels::KernelFamily::Sgemm),
    );

    // Correctness before speed: our result must match cuBLAS's on an odd shape.
    // (Also `gemv` in both bodies and turned around, through cuBLAS's transposed operands.)
    let probes = [
        shape("check", 3, 257, 383, 511),
        Shape { trans_b: true, ..shape("check", 2, 3, 1000, 301) },
        Shape { trans_a: true, ..shape("check", 1, 1000, 2, 301) },
    ];
    for probe in probes {
        let diff = cross_check(&kernels, &blas, &stream, &probe);
        println!("cross-check against cuBLAS on {}: max |ours - cuBLAS| / sqrt(k) = {diff:.2e}", probe.label());
        let agrees = diff < 1e-5; // false for NaN too
        if !agrees {
            eprintln!("our SGEMM disagrees with cuBLAS; not benchmarking");
            std::process::exit(1);
        }
    }

    // The randomized sweep (group "random") is left out of quick runs.
    let random = if o.quick { Vec::new() } else { random_sweep() };
    let mut shapes: Vec<Shape> = sweep()
        .into_iter()
        .chain(shape_classes())
        .chain(random)
        .filter(|s| !o.quick || s.flops() < 2e11)
        .filter(|s| o.shapes.is_empty() || o.shapes.iter().any(|want| s.label() == *want))
        .collect();
    // A label outside the sweep (`MxNxK` or `B,MxNxK`) is benchmarked as an extra shape.
    for want in &o.shapes {
        if !shapes.iter().any(|s| s.label() == *want) {
            match Shape::parse(want) {
                Some(s) => shapes.push(s),
                None => {
                    eprintln!("--shape {want}: not a sweep label, nor MxNxK or B,MxNxK");
                    std::process::exit(2);
                }
            }
        }
    }
    let mut out = open_out(o);
    println!(
        "\n{:<8} {:<26} {:>9} {:>9} {:>7} {:>7} {:>7} {:>8} {:>8} {:>7}",
        "group", "shape", "ours TF/s", "cuBLAS", "ratio", "%peak", "TB/s", "chosen", "best", "regret"
    );
    let mut rows: Vec<Row> = Vec::new();
    for s in &shapes {
        let r = bench_shape(&kernels, &blas, &stream, s, &info, o.reps.unwrap_or(25));
        println!(
            "{:<8} {:<26} {:>9.2} {:>9.2} {:>7.3} {:>6.1}% {:>7.2} {:>8} {:>8} {:>6.1}%",
            s.group,
            s.label(),
            r.ours_tflops(),
            r.cublas_tflops(),
            r.ratio(),
            100.0 * r.ours_tflops() / peak,
            s.bytes() / r.ours_ms / 1e9,
            r.chosen.to_string(),
            r.best().0.to_string(),
            100.0 * r.regret()
        );
        if let Some(f) = out.as_mut() {
            let variants: Vec<String> = r.variants_ms.iter().map(|(v, ms)| format!("\"{}\":{:.5}", v, ms)).collect();
            writeln!(
                f,
                "{{\"op\":\"sgemm\",\"shape\":\"{}\",\"group\":\"{}\",\"batch\":{},\"m\":{},\"n\":{},\"k\":{},\"trans_a\":{},\"trans_b\":{},\"layout\":\"{}\",\"ours_ms\":{:.5},\"baseline_ms\":{:.5},\"ours_tbps\":{:.3},\"ours_tflops\":{:.3},\"baseline\":\"cublasSgemmStridedBatched\",\"baseline_tflops\":{:.3},\"ratio\":{:.4},\"pct_fp32_peak\":{:.2},\"variant\":\"{}\",\"best_variant\":\"{}\",\"regret\":{:.4},\"variant_ms\":{{{}}},\"gpu\":\"{}\",\"arch\":\"sm_{major}{minor}\",\"config\":\"{}\",\"artifact\":\"{}\",\"build\":\"{}\",\"commit\":\"{COMMIT}\",\"date\":\"{date}\"}}",
                s.label(), s.group, s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, if s.col_major { "col" } else { "row" }, r.ours_ms, r.cublas_ms, s.bytes() / r.ours_ms / 1e9, r.ours_tflops(), r.cublas_tflops(), r.ratio(),
                100.0 * r.ours_tflops() / peak, r.chosen.to_string(), r.best().0.to_string(), r.regret(), variants.join(","),
                info.name, kernels.config(), kernels.artifact(cukernels::KernelFamily::Sgemm).kind, kernels.artifact(cukernels::KernelFamily::Sgemm).compiler
            )
            .unwrap();
        }
        rows.push(r);
    }
    // The sweep's summary, then each shape class's on its own (their figures answer different
    // targets).
    let classes: Vec<&str> = shape_classes().iter().map(|s| s.group).chain(["extra", "random"]).collect();
    for (what, in_group) in [("sweep", None), ("gemv", Some("gemv")), ("long-k", Some("long-k")), ("random", Some("random")), ("extra", Some("extra"))] {
        let part: Vec<&Row> = rows.iter().filter(|r| match in_group { None => !classes.contains(&r.shape.group), Some(g) => r.shape.group == g }).collect();
        if part.is_empty() {
            continue;
        }
        let geo = (part.iter().map(|r| r.ratio().ln()).sum::<f64>() / part.len() as f64).exp();
        let worst = part.iter().map(|r| r.ratio()).fold(f64::INFINITY, f64::min);
        let worst_regret = part.iter().map(|r| r.regret()).fold(0.0, f64::max);
        println!(
            "{what}: geometric mean ratio vs cuBLAS {geo:.3}; lowest ratio {worst:.3}; largest dispatch regret {:.1}%",
            100.0 * worst_regret
        );
        if what == "random" {
            // The targets for the randomized sweep: the 10th percentile of the ratio,
            // and the share of shapes within 10% of their best candidate.
            let mut ratios: Vec<f64> = part.iter().map(|r| r.ratio()).collect();
            ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let p10 = ratios[ratios.len() / 10];
            let near = part.iter().filter(|r| r.regret() <= 0.10).count() as f64 / part.len() as f64;
            println!("random: {} shapes; 10th percentile ratio {p10:.3}; dispatch regret <= 10% on {:.0}% of them", part.len(), 100.0 * near);
            let mut worst: Vec<&&Row> = part.iter().collect();
            worst.sort_by(|a, b| a.ratio().partial_cmp(&b.ratio()).unwrap());
            for r in worst.iter().take(5) {
                println!("random: worst {} ratio {:.3} ({} chosen, {} best, regret {:.1}%)", r.shape.label(), r.ratio(), r.chosen, r.best().0, 100.0 * r.regret());
            }
        }
    }
}

fn run_load(ctx: &std::sync::Arc<cukernels::cudarc::driver::CudaContext>, o: &Options) {
    let reps = o.reps.unwrap_or(5);
    let runs = measure_in_children(reps).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let (gpu, date) = (DeviceInfo::of(ctx).name, today());
    println!("{gpu}: first launch in a fresh process, JIT cache off (CUDA_CACHE_DISABLE=1); median of {reps} processes; commit {COMMIT}; {date}");
    println!("{:<8} {:<8} {:>11} {:>11} {:>11}", "family", "artifact", "module ms", "launch ms", "total ms");
    let mut lines = Vec::new();
    for (family, artifact) in load_cases() {
        let Some(t) = median_of(&runs, &family, &artifact) else { continue };
        println!("{:<8} {:<8} {:>11.1} {:>11.1} {:>11.1}", t.family, t.artifact, t.module_ms, t.launch_ms, t.total_ms());
        let all: Vec<String> = runs.iter().filter(|r| r.family == family && r.artifact == artifact).map(|r| format!("{:.1}", r.total_ms())).collect();
        lines.push(format!(
            "{{\"op\":\"load\",\"family\":\"{}\",\"artifact\":\"{}\",\"module_ms\":{:.3},\"launch_ms\":{:.3},\"total_ms\":{:.3},\"runs_total_ms\":[{}],\"jit_cache\":\"disabled\",\"gpu\":\"{gpu}\",\"commit\":\"{COMMIT}\",\"date\":\"{date}\"}}",
            t.family, t.artifact, t.module_ms, t.launch_ms, t.total_ms(), all.join(",")
        ));
    }
    if let Some(f) = open_out(o).as_mut() {
        write_rows(f, &lines);
    }
}

/// Our attention over the shapes (`--shape` filters by a substring of the label);
/// JSON lines for `benches/attention_torch.py`, which adds PyTorch's baselines.
fn run_attention(ctx: &std::sync::Arc<cukernels::cudarc::driver::CudaContext>, o: &Options) {
    use cukernels_bench::attention_bench::{bench_attention, shapes};
    let stream = bench_stream(ctx);
    let kernels = handle(ctx, o);
    kernels.preload_family(cukernels::KernelFamily::Attention).unwrap_or_else(|e| panic!("{e}"));
    let artifact = kernels.artifact(cukernels::KernelFamily::Attention).to_string();
    let (info, date) = (DeviceInfo::of(ctx), today());
    let samples = o.reps.unwrap_or(if o.quick { 5 } else { 21 });
    println!("{}: flash attention, median of {samples} samples of back-to-back launches; {artifact}; commit {COMMIT}; {date}", info.name);
    println!("{:<48} {:>10} {:>9} {:>8} {:>7} {:>9} {:>9}", "shape", "ms", "TFLOP/s", "TB/s", "splits", "host ms", "graph ms");
    let mut out = open_out(o);
    for s in shapes() {
        if !o.shapes.is_empty() && !o.shapes.iter().any(|f| s.label().contains(f.as_str())) {
            continue;
        }
        let row = bench_attention(&kernels, &stream, &s, samples);
        let graph = row.graph_ms.map_or("-".to_string(), |g| format!("{g:.4}"));
        println!("{:<48} {:>10.4} {:>9.1} {:>8.2} {:>7} {:>9.4} {:>9}", s.label(), row.ms, row.tflops(), row.tbps(), row.splits, row.host_ms, graph);
        if let Some(f) = out.as_mut() {
            write_rows(f, &[row.to_json(&info, COMMIT, &date, kernels.artifact(cukernels::KernelFamily::Attention))]);
        }
    }
}

/// Our MoE quantized matmul over the shapes against cuBLAS f16 (`--shape` filters by a
/// substring of the label); JSON lines with `op: "moe"`.
fn run_moe(ctx: &std::sync::Arc<cukernels::cudarc::driver::CudaContext>, o: &Options) {
    use cukernels_bench::moe_bench::{bench_moe, shapes};
    let stream = bench_stream(ctx);
    let kernels = handle(ctx, o);
    kernels.preload_family(cukernels::KernelFamily::Moe).unwrap_or_else(|e| panic!("{e}"));
    let blas = CudaBlas::new(stream.clone()).unwrap_or_else(|e| panic!("cannot create the cuBLAS handle: {e}"));
    let artifact = kernels.artifact(cukernels::KernelFamily::Moe).to_string();
    let (info, date) = (DeviceInfo::of(ctx), today());
    let samples = o.reps.unwrap_or(if o.quick { 5 } else { 21 });
    println!("{}: MoE mul_mat_id, median of {samples} samples of back-to-back calls; {artifact}; commit {COMMIT}; {date}", info.name);
    println!("{:<48} {:>7} {:>10} {:>9} {:>8} {:>11} {:>9} {:>7}", "shape", "path", "ms", "TFLOP/s", "TB/s", "cuBLAS ms", "TFLOP/s", "x cuBLAS");
    let mut out = open_out(o);
    for s in shapes(o.quick) {
        if !o.shapes.is_empty() && !o.shapes.iter().any(|f| s.label().contains(f.as_str())) {
            continue;
        }
        let r = bench_moe(&kernels, &blas, &stream, &s, samples);
        println!("{:<48} {:>7} {:>10.4} {:>9.2} {:>8.2} {:>11.4} {:>9.2} {:>7.3}", s.label(), r.path.name(), r.ms, r.tflops(), r.tbps(), r.cublas_ms, r.cublas_tflops(), r.cublas_ms / r.ms);
        if let Some(f) = out.as_mut() {
            write_rows(f, &[r.to_json(&info, COMMIT, &date, kernels.artifact(cukernels::KernelFamily::Moe))]);
        }
    }
}

/// The `--out` file, opened for appending: a second run (another round, another side of an A/B)
/// adds its rows to those already there instead of replacing them.
fn open_out(o: &Options) -> Option<std::fs::File> {
    o.out.as_ref().map(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap_or_else(|e| panic!("cannot open {p}: {e}")))
}

/// Appends JSON lines to the `--out` file.
fn write_rows(f: &mut std::fs::File, lines: &[String]) {
    for line in lines {
        writeln!(f, "{line}").unwrap_or_else(|e| panic!("cannot write the --out file: {e}"));
    }
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}
