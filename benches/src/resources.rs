//! Per-kernel resources from `ptxas -v` (no GPU needed): registers, stack frame, spills and
//! shared memory of every entry point of every embedded PTX module of every kernel family
//! ([`KernelFamily`]), checked against the [`KernelSpec`](cukernels::KernelSpec) that the
//! module's family gives for the config row the module was built with. `cukernels-bench report`
//! prints these; the `ptx_resources` test fails on any violation.

use cukernels::{Artifact, ArtifactKind, Compiler};
use cukernels::{Arch, KernelFamily};
use std::path::PathBuf;
use std::process::Command;

/// What ptxas reports for one entry point, with the config values it is checked against.
#[derive(Clone, Debug)]
pub struct KernelResources {
    /// The family whose module holds the entry point.
    pub family: KernelFamily,
    pub target: Arch,
    pub config: Arch,
    /// What compiled the module (nvptx, or rust-cuda where the build embeds it).
    pub compiler: Compiler,
    /// The entry point's name.
    pub kernel: &'static str,
    pub registers: u32,
    pub stack_frame: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub static_smem: u32,
    pub dynamic_smem: u32,
    pub threads: u32,
    pub designed_blocks_per_sm: u32,
}

impl KernelResources {
    /// Resident blocks per SM these resources allow on the config's architecture: registers
    /// (allocated per warp in units of 256), shared memory (plus the per-block reservation),
    /// threads, and the block limit.
    pub fn blocks_per_sm(&self) -> u32 {
        let l = self.config.limits();
        let warps = self.threads.div_ceil(32);
        let regs_per_warp = (self.registers * 32).div_ceil(256) * 256;
        let by_regs = if regs_per_warp == 0 { u32::MAX } else { l.regs_per_sm / (regs_per_warp * warps) };
        let smem = self.static_smem + self.dynamic_smem + l.reserved_smem_per_block;
        let by_smem = l.smem_per_sm / smem.max(1);
        let by_threads = l.max_threads_per_sm / self.threads;
        by_regs.min(by_smem).min(by_threads).min(l.max_blocks_per_sm)
    }

    /// Every rule the kernel must satisfy; empty when it does.
    pub fn violations(&self) -> Vec<String> {
        let l = self.config.limits();
        let mut v = Vec::new();
        let who = format!("{} {} kernel `{}` (config {}, {} build)", self.target, self.family, self.kernel, self.config, self.compiler);
        if self.stack_frame != 0 {
            v.push(format!("{who}: {} bytes of stack frame (local memory); must be 0", self.stack_frame));
        }
        if self.spill_stores + self.spill_loads != 0 {
            v.push(format!("{who}: spills ({} B stores, {} B loads)", self.spill_stores, self.spill_loads));
        }
        if self.registers > l.max_regs_per_thread {
            v.push(format!("{who}: {} registers > {}", self.registers, l.max_regs_per_thread));
        }
        if self.static_smem + self.dynamic_smem > l.max_smem_per_block {
            v.push(format!("{who}: {} B of shared memory > the {} B per-block limit", self.static_smem + self.dynamic_smem, l.max_smem_per_block));
        }
        if self.blocks_per_sm() < self.designed_blocks_per_sm {
            v.push(format!(
                "{who}: {} registers x {} threads allow {} blocks per SM; the config was designed for {}",
                self.registers,
                self.threads,
                self.blocks_per_sm(),
                self.designed_blocks_per_sm
            ));
        }
        v
    }
}

/// The `ptxas` to check the PTX with: `$CUKERNELS_PTXAS`, else the one the `from-source` build
/// assembled the cubins with (found by `host/build.rs`: PyPI's `nvidia-cuda-nvcc-cu12`, else
/// `PATH`), so that the check and the shipped cubins use the same assembler.
pub fn find_ptxas() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CUKERNELS_PTXAS") {
        return Ok(PathBuf::from(p));
    }
    let path = cukernels::artifacts::BUILD_PTXAS.ok_or("this build embeds prebuilt artifacts: no ptxas was used; set CUKERNELS_PTXAS")?;
    if Command::new(path).arg("--version").output().is_ok_and(|o| o.status.success()) {
        Ok(PathBuf::from(path))
    } else {
        Err(format!("ptxas `{path}` does not run: install it with `python3 -m pip install nvidia-cuda-nvcc-cu12==12.9.86` or set CUKERNELS_PTXAS"))
    }
}

/// Assembles one embedded PTX module with `ptxas -v` (as the build did to make its cubin) and
/// returns the resources of each entry point of its family (`0..module.family.kernel_count()`),
/// with the threads, designed blocks per SM and (largest) dynamic shared memory that
/// `module.family.kernel(module.config, i)` gives.
pub fn ptxas_resources(ptxas: &PathBuf, module: &Artifact) -> Result<Vec<KernelResources>, String> {
    if module.kind != ArtifactKind::Ptx {
        return Err(format!("{module} is not PTX"));
    }
    let dir = std::env::temp_dir().join(format!("cukernels-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let stem = format!("{}_{}_{}_{}", module.family.name(), module.config.name(), module.target.name(), module.compiler.name());
    let ptx_path = dir.join(format!("{stem}.ptx"));
    std::fs::write(&ptx_path, module.bytes().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let out = Command::new(ptxas)
        .arg(format!("-arch={}", module.target.ptx_target()))
        .arg("-v")
        .arg(&ptx_path)
        .arg("-o")
        .arg(dir.join(format!("{stem}.cubin")))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("ptxas rejected the {module}:\n{log}"));
    }
    let mut kernels = Vec::new();
    for i in 0..module.family.kernel_count() {
        let spec = module.family.kernel(module.config, i);
        let section = function_section(&log, spec.entry_point).ok_or_else(|| {
            format!("ptxas output has no entry `{}` for the {} {} PTX:\n{log}", spec.entry_point, module.target, module.family)
        })?;
        kernels.push(KernelResources {
            family: module.family,
            target: module.target,
            config: module.config,
            compiler: module.compiler,
            kernel: spec.entry_point,
            registers: number_before(section, " registers").unwrap_or(0),
            stack_frame: number_before(section, " bytes stack frame").unwrap_or(0),
            spill_stores: number_before(section, " bytes spill stores").unwrap_or(0),
            spill_loads: number_before(section, " bytes spill loads").unwrap_or(0),
            static_smem: number_before(section, " bytes smem").unwrap_or(0),
            // The most any launch of the kernel asks for (e.g. an SGEMM k split may need more
            // than its pipeline).
            dynamic_smem: spec.max_smem_bytes,
            threads: spec.threads,
            designed_blocks_per_sm: spec.blocks_per_sm,
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(kernels)
}

/// The lines ptxas prints for one function: from "Compiling entry function 'name'" to the next
/// "Compiling".
fn function_section<'a>(log: &'a str, name: &str) -> Option<&'a str> {
    let marker = format!("Compiling entry function '{name}'");
    let start = log.find(&marker)? + marker.len();
    let rest = &log[start..];
    let end = rest.find("Compiling entry function").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The integer right before `suffix` in `text` ("Used 128 registers" → 128).
fn number_before(text: &str, suffix: &str) -> Option<u32> {
    let at = text.find(suffix)?;
    let digits: String = text[..at].chars().rev().take_while(|c| c.is_ascii_digit()).collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// `rust-cuda/known-spills.txt`: (target, config, kernel) → (stack frame, spill) bytes allowed.
pub fn known_rust_cuda_spills() -> Vec<(String, u32, u32)> {
    include_str!("../../rust-cuda/known-spills.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 5, "malformed line in rust-cuda/known-spills.txt: {l}");
            (format!("{} {} {}", f[0], f[1], f[2]), f[3].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect()
}

impl KernelResources {
    /// [`violations`](Self::violations), with a rust-cuda kernel's local memory allowed up to what
    /// `known` ([`known_rust_cuda_spills`]) lists for it, and an allowance it no longer needs
    /// reported (the `ptx_resources` test and `cukernels-bench report` check with this).
    pub fn checked_violations(&self, known: &[(String, u32, u32)]) -> Vec<String> {
        let k = self;
        let key = format!("{} {} {}", k.target.name(), k.config.name(), k.kernel);
        let listed = known.iter().find(|(name, _, _)| *name == key).filter(|_| k.compiler == Compiler::RustCuda);
        let Some(&(_, stack, spill)) = listed else { return k.violations() };
        let used = (k.stack_frame, k.spill_stores + k.spill_loads);
        let mut v = KernelResources { stack_frame: 0, spill_stores: 0, spill_loads: 0, ..k.clone() }.violations();
        if used.0 > stack || used.1 > spill {
            v.push(format!("rust-cuda {key}: {} B stack frame and {} B of spills, more than the {stack} and {spill} of rust-cuda/known-spills.txt", used.0, used.1));
        }
        if used == (0, 0) {
            v.push(format!("rust-cuda {key} no longer uses local memory: delete its line from rust-cuda/known-spills.txt"));
        }
        v
    }
}
