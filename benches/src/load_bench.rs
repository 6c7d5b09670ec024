//! Load time: how long a fresh process waits from `Cukernels::new` to the end of its first
//! launch, per kernel family, with the cubin and forced to PTX (JIT-compiled by the driver),
//! beside cuBLAS's handle creation and first SGEMM.
//!
//! Each measurement runs in a fresh child process (`cukernels-bench load-child …`) with the
//! driver's JIT cache disabled (`CUDA_CACHE_DISABLE=1`), so that nothing compiled by an earlier
//! run is reused, as on a new container, CI runner or cluster node. The CUDA context is made
//! and the buffers allocated before the clock starts (every library pays for the context).
//! `module_ms` is `Cukernels::new` plus loading the family's module (decompression, the
//! driver's load or JIT, the load-time limit check; for SGEMM also the allocation and zeroing
//! of the handle's own k-split workspace, which that load makes, so it is counted where a user
//! pays for it); `launch_ms` the family's first launch until `synchronize` returns.

use crate::sgemm_bench::{cublas_config, shape, Shape};
use cukernels::artifacts::{self, ArtifactKind};
use cukernels::cudarc::cublas::{CudaBlas, Gemm};
use cukernels::cudarc::driver::CudaContext;
use cukernels::{Cukernels, KernelFamily, Sgemm};
use std::sync::Arc;
use std::time::Instant;

/// The first launch of each family: a small problem that every variant's rule reaches quickly.
const FIRST_SGEMM: Shape = shape("load", 1, 256, 256, 256);

/// One child's measurement.
#[derive(Clone, Debug)]
pub struct LoadTime {
    pub family: String,
    pub artifact: String,
    pub module_ms: f64,
    pub launch_ms: f64,
}

impl LoadTime {
    pub fn total_ms(&self) -> f64 {
        self.module_ms + self.launch_ms
    }
    /// The line a child prints for its parent.
    pub fn to_line(&self) -> String {
        format!("LOAD {} {} {:.3} {:.3}", self.family, self.artifact, self.module_ms, self.launch_ms)
    }
    pub fn from_line(line: &str) -> Option<LoadTime> {
        let f: Vec<&str> = line.strip_prefix("LOAD ")?.split(' ').collect();
        Some(LoadTime { family: f.first()?.to_string(), artifact: f.get(1)?.to_string(), module_ms: f.get(2)?.parse().ok()?, launch_ms: f.get(3)?.parse().ok()? })
    }
}

/// What a child measures: a family with an artifact kind, or cuBLAS (`family` "cublas").
pub fn measure_in_this_process(ctx: &Arc<CudaContext>, family: &str, artifact: &str) -> Result<LoadTime, String> {
    let stream = ctx.default_stream();
    let s = FIRST_SGEMM;
    let a = stream.clone_htod(&vec![1.0f32; s.m * s.k]).map_err(|e| e.to_string())?;
    let b = stream.clone_htod(&vec![0.5f32; s.k * s.n]).map_err(|e| e.to_string())?;
    let mut c = stream.alloc_zeros::<f32>(s.m * s.n).map_err(|e| e.to_string())?;
    stream.synchronize().map_err(|e| e.to_string())?;
    let start = Instant::now();
    let loaded_at;
    if family == "cublas" {
        let blas = CudaBlas::new(stream.clone()).map_err(|e| e.to_string())?;
        loaded_at = Instant::now();
        // SAFETY: the buffers hold the sizes the config describes.
        unsafe { blas.gemm_strided_batched(cublas_config(&s), &b, &a, &mut c) }.map_err(|e| e.to_string())?;
    } else {
        let fam = KernelFamily::from_name(family).ok_or(format!("unknown family {family}"))?;
        let kernels = match artifact {
            "cubin" => Cukernels::new(ctx),
            "ptx" => {
                // The PTX the selection rule would fall back to with no cubin embedded (in a
                // from-source build, the device's own architecture's).
                let (major, minor) = ctx.compute_capability().map_err(|e| e.to_string())?;
                let ptx: Vec<_> = artifacts::embedded()
                    .iter()
                    .filter(|x| x.family == fam && x.kind == ArtifactKind::Ptx && x.target == x.config)
                    .map(|x| (x.target, x.kind))
                    .collect();
                let (target, _) = artifacts::choose(&ptx, major as u32, minor as u32).ok_or("no PTX of this family runs on this device in this build")?;
                Cukernels::with_artifact(ctx, target, target, ArtifactKind::Ptx)
            }
            other => return Err(format!("unknown artifact {other}")),
        }
        .map_err(|e| e.to_string())?;
        if artifact == "cubin" && kernels.artifact(fam).kind != ArtifactKind::Cubin {
            return Err(format!("no cubin for this device: {}", kernels.artifact(fam)));
        }
        kernels.preload_family(fam).map_err(|e| e.to_string())?;
        loaded_at = Instant::now();
        match fam {
            KernelFamily::Sgemm => kernels.sgemm(&stream, &Sgemm::new(s.m, s.n, s.k), &a, &b, &mut c).map_err(|e| e.to_string())?,
            KernelFamily::Attention => {
                // One small head-128 prefill: the first launch's cost, not its speed.
                let d = cukernels::Attention::new(1, 128, 128, 8, 8, 128);
                let n = d.buffer_lengths().map_err(|e| e.to_string())?;
                let x = stream.clone_htod(&vec![half::f16::from_f32(0.5); n.q.max(n.k)]).map_err(|e| e.to_string())?;
                let mut o = stream.alloc_zeros::<half::f16>(n.o).map_err(|e| e.to_string())?;
                kernels.attention(&stream, &d, &x, &x, &x, &mut o, Default::default()).map_err(|e| e.to_string())?
            }
            KernelFamily::Moe => {
                // One small q4_0 call (8 experts, 2 used, 4 tokens): quantize, route, multiply.
                let d = cukernels::MulMatId::new(cukernels::GgufFormat::Q4_0, 8, 64, 256, 4, 2);
                let n = d.buffer_lengths().map_err(|e| e.to_string())?;
                let w = stream.alloc_zeros::<u8>(n.weight_bytes).map_err(|e| e.to_string())?;
                let x = stream.clone_htod(&vec![0.5f32; n.x]).map_err(|e| e.to_string())?;
                let ids = stream.clone_htod(&[0i32, 1, 2, 3, 4, 5, 6, 7]).map_err(|e| e.to_string())?;
                let mut y = stream.alloc_zeros::<f32>(n.y).map_err(|e| e.to_string())?;
                let mut ws = stream.alloc_zeros::<u8>(d.workspace_bytes().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
                kernels.mul_mat_id(&stream, &d, &w, &x, &ids, &mut y, &mut ws).map_err(|e| e.to_string())?
            }
        }
    }
    stream.synchronize().map_err(|e| e.to_string())?;
    let done = Instant::now();
    Ok(LoadTime {
        family: family.to_string(),
        artifact: artifact.to_string(),
        module_ms: (loaded_at - start).as_secs_f64() * 1e3,
        launch_ms: (done - loaded_at).as_secs_f64() * 1e3,
    })
}

/// Every (family, artifact) measured, and cuBLAS last.
pub fn load_cases() -> Vec<(String, String)> {
    let mut cases: Vec<(String, String)> = Vec::new();
    for f in KernelFamily::ALL {
        for a in ["cubin", "ptx"] {
            cases.push((f.name().into(), a.into()));
        }
    }
    cases.push(("cublas".into(), "cubin".into()));
    cases
}

/// Runs every case of [`load_cases`] in fresh child processes, `reps` times each, and returns
/// the runs (the caller reports medians).
pub fn measure_in_children(reps: usize) -> Result<Vec<LoadTime>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for _ in 0..reps {
        for (family, artifact) in &load_cases() {
            let child = std::process::Command::new(&exe)
                .args(["load-child", family, artifact])
                .env("CUDA_CACHE_DISABLE", "1")
                .output()
                .map_err(|e| e.to_string())?;
            let stdout = String::from_utf8_lossy(&child.stdout);
            match stdout.lines().find_map(LoadTime::from_line) {
                Some(t) if child.status.success() => out.push(t),
                _ => return Err(format!("load-child {family} {artifact} failed:\n{stdout}{}", String::from_utf8_lossy(&child.stderr))),
            }
        }
    }
    Ok(out)
}

/// Median of the runs of one case.
pub fn median_of(runs: &[LoadTime], family: &str, artifact: &str) -> Option<LoadTime> {
    let mut these: Vec<&LoadTime> = runs.iter().filter(|r| r.family == family && r.artifact == artifact).collect();
    if these.is_empty() {
        return None;
    }
    these.sort_by(|a, b| a.total_ms().total_cmp(&b.total_ms()));
    Some(these[these.len() / 2].clone())
}
