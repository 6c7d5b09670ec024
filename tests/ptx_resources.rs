//! Every embedded PTX module (the source of every cubin) assembled with ptxas 12.9 (no GPU needed): it assembles; no kernel
//! uses local memory or spills; shared memory fits the architecture; registers × threads allow
//! the blocks per SM the config was designed for. ptxas missing is a failure, not a skip.

use cukernels::{artifacts, ArtifactKind};
use cukernels_bench::resources::{find_ptxas, ptxas_resources};

#[test]
fn every_kernel_of_every_architecture_fits_its_config() {
    let ptxas = find_ptxas().unwrap_or_else(|e| panic!("{e}"));
    let mut checked = 0;
    let mut violations = Vec::new();
    let modules: Vec<_> = artifacts::embedded().iter().filter(|a| a.kind == ArtifactKind::Ptx).collect();
    for &module in &modules {
        let kernels = ptxas_resources(&ptxas, module).unwrap_or_else(|e| panic!("{e}"));
        for k in &kernels {
            eprintln!(
                "{} (config {}) {:<7} {:?} {:>3} regs, {} B stack, {} B spills, {} B smem, {} blocks/SM (designed {})",
                k.target,
                k.config,
                k.variant.name(),
                k.operands,
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
    assert!(checked == modules.len() * cukernels::SGEMM_KERNELS.len(), "checked {checked} kernels");
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}
