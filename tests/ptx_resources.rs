//! Every embedded PTX module of every kernel family (the source of every cubin) assembled with
//! ptxas 12.9 (no GPU needed): it assembles; every entry point of its family is there; no kernel
//! uses local memory or spills; shared memory fits the architecture; registers × threads allow
//! the blocks per SM the config was designed for. ptxas missing is a failure, not a skip.

use cukernels::{artifacts, ArtifactKind, KernelFamily};
use cukernels_bench::resources::{find_ptxas, ptxas_resources};

#[test]
fn every_kernel_of_every_architecture_fits_its_config() {
    let ptxas = find_ptxas().unwrap_or_else(|e| panic!("{e}"));
    let mut checked = 0;
    let mut violations = Vec::new();
    let modules: Vec<_> = artifacts::embedded().iter().filter(|a| a.kind == ArtifactKind::Ptx).collect();
    for family in KernelFamily::ALL {
        assert!(modules.iter().any(|m| m.family == family), "no {family} PTX module is embedded");
    }
    for &module in &modules {
        let kernels = ptxas_resources(&ptxas, module).unwrap_or_else(|e| panic!("{e}"));
        for k in &kernels {
            eprintln!(
                "{} (config {}) {:<9} {:<40} {:>3} regs, {} B stack, {} B spills, {} B smem, {} blocks/SM (designed {})",
                k.target,
                k.config,
                k.family.name(),
                k.kernel,
                k.registers,
                k.stack_frame,
                k.spill_stores + k.spill_loads,
                k.static_smem + k.dynamic_smem,
                k.blocks_per_sm(),
                k.designed_blocks_per_sm
            );
            violations.extend(k.violations());
            checked += 1;
        }
    }
    let expected: usize = modules.iter().map(|m| m.family.kernel_count()).sum();
    assert!(checked == expected, "checked {checked} kernels, expected {expected}");
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}
