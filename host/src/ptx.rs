//! The PTX embedded by `build.rs`: one module per architecture (plus, with the `config-probes`
//! feature, the sm_100 and sm_120 config rows compiled for sm_90).

use crate::error::{Error, Result};
pub use cukernels_gpu::Arch;

/// One embedded PTX module.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedPtx {
    /// The architecture the PTX was compiled for (`.target`).
    pub target: Arch,
    /// The config row its kernels were compiled with (equal to `target` except for probes).
    pub config: Arch,
    /// The PTX text, with launch bounds applied.
    pub ptx: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/embedded_ptx.rs"));

/// Every embedded PTX module.
pub fn embedded() -> &'static [EmbeddedPtx] {
    EMBEDDED
}

/// The architectures built natively (not probes).
pub fn built_archs() -> Vec<Arch> {
    EMBEDDED.iter().filter(|p| p.target == p.config).map(|p| p.target).collect()
}

/// The module for a device of compute capability `major.minor`: the newest built architecture
/// that is not newer than the device (sm_87 → sm_86, sm_103 → sm_100, sm_121 → sm_120).
pub fn for_compute_capability(major: u32, minor: u32) -> Result<&'static EmbeddedPtx> {
    if major * 10 + minor < 70 {
        return Err(Error::UnsupportedDevice { major, minor });
    }
    let built = built_archs();
    let arch = Arch::for_compute_capability(major, minor, &built).ok_or_else(|| Error::NoMatchingPtx {
        major,
        minor,
        built: built.iter().map(|a| a.name()).collect::<Vec<_>>().join(", "),
    })?;
    find(arch, arch)
}

/// The module compiled for `target` with the config row of `config`.
pub fn find(target: Arch, config: Arch) -> Result<&'static EmbeddedPtx> {
    EMBEDDED
        .iter()
        .find(|p| p.target == target && p.config == config)
        .ok_or(Error::PtxNotEmbedded { target, config })
}
