//! Every embedded PTX module of every kernel family (the source of every cubin) assembled with
//! ptxas 12.9 (no GPU needed): it assembles; every entry point of its family is there; no kernel
//! uses local memory or spills; shared memory fits the architecture; registers × threads allow
//! the blocks per SM the config was designed for. ptxas missing is a failure, not a skip.
//!
//! A build that embeds the rust-cuda modules (README "rust-cuda") is checked the same way,
//! except for the kernels `rust-cuda/known-spills.txt` lists: those may use local memory up to
//! the bytes listed there (and must still use some, or the line must go).

use cukernels::{artifacts, Arch, ArtifactKind, Compiler, KernelFamily};
use cukernels_bench::report::compiler_comparison;
use cukernels_bench::resources::{find_ptxas, known_rust_cuda_spills, ptxas_resources};

#[test]
fn every_kernel_of_every_architecture_fits_its_config() {
    let ptxas = find_ptxas().unwrap_or_else(|e| panic!("{e}"));
    let known = known_rust_cuda_spills();
    let mut checked = 0;
    let mut violations = Vec::new();
    let mut all = Vec::new();
    let modules: Vec<_> = artifacts::embedded().iter().filter(|a| a.kind == ArtifactKind::Ptx).collect();
    for family in KernelFamily::ALL {
        assert!(modules.iter().any(|m| m.family == family), "no {family} PTX module is embedded");
    }
    for &module in &modules {
        let kernels = ptxas_resources(&ptxas, module).unwrap_or_else(|e| panic!("{e}"));
        for k in &kernels {
            eprintln!(
                "{} (config {}, {}) {:<9} {:<40} {:>3} regs, {} B stack, {} B spills, {} B smem, {} blocks/SM (designed {})",
                k.target,
                k.config,
                k.compiler,
                k.family.name(),
                k.kernel,
                k.registers,
                k.stack_frame,
                k.spill_stores + k.spill_loads,
                k.static_smem + k.dynamic_smem,
                k.blocks_per_sm(),
                k.designed_blocks_per_sm
            );
            violations.extend(k.checked_violations(&known));
            checked += 1;
        }
        all.extend(kernels);
    }
    eprint!("{}", compiler_comparison(&all));
    // The rust-cuda check (scripts/rust-cuda-build.sh check) must have checked rust-cuda modules.
    if std::env::var_os("CUKERNELS_RUST_CUDA_PTX_DIR").is_some() {
        for family in KernelFamily::ALL {
            for arch in [Arch::Sm100, Arch::Sm120] {
                let found = modules.iter().any(|m| m.family == family && m.config == arch && m.compiler == Compiler::RustCuda);
                assert!(found, "CUKERNELS_RUST_CUDA_PTX_DIR is set but no rust-cuda {family} PTX of {arch} is embedded");
            }
        }
    }
    let expected: usize = modules.iter().map(|m| m.family.kernel_count()).sum();
    assert!(checked == expected, "checked {checked} kernels, expected {expected}");
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}
