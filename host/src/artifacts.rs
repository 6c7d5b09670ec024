//! The device code embedded in this build (by `build.rs`): for each kernel family, a cubin
//! (machine code) per architecture and PTX, each compressed (one zstd frame).
//!
//! # Which artifact a device gets ([`choose`])
//! 1. The cubin of the same major version with the highest minor not above the device's: a
//!    cubin runs on any GPU of its own major version whose minor is at least its own (sm_86's
//!    on an sm_87, sm_100's on an sm_103, sm_120's on an sm_121). The driver loads it at once.
//! 2. Otherwise the PTX of the newest architecture not newer than the device, which the driver
//!    JIT-compiles for it (seconds, once per process unless its JIT cache keeps the result).
//!    The package ships the PTX of sm_120 (for 13.0 and later) and sm_100 (for 11.x, which no
//!    cubin's major covers); a `from-source` build embeds the PTX of every architecture.
//!
//! Below sm_70 nothing runs ([`Error::UnsupportedDevice`]).

use crate::error::{Error, Result};
pub use cukernels_gpu::{Arch, ArtifactKind, Compiler, KernelFamily};

pub use crate::zstd_frame::decompress;

/// One embedded module of one kernel family.
#[derive(Debug)]
pub struct Artifact {
    pub family: KernelFamily,
    /// The architecture it was compiled for (PTX `.target`, cubin `-arch`).
    pub target: Arch,
    /// The config row its kernels were compiled with (equal to `target` except for the
    /// `config-probes` builds).
    pub config: Arch,
    pub kind: ArtifactKind,
    /// What compiled the kernel sources: the nvptx build (everything that ships) or, in a
    /// build that asked for it, rust-cuda (sm_100 and sm_120; README "rust-cuda").
    pub compiler: Compiler,
    /// Bytes once decompressed.
    pub raw_len: usize,
    /// SHA-256 of the decompressed bytes (as the manifest lists it).
    pub sha256: &'static str,
    compressed: &'static [u8],
}

impl Artifact {
    /// The module's bytes (cubin or PTX text), decompressed.
    pub fn bytes(&self) -> Result<Vec<u8>> {
        let raw = decompress(self.compressed, self.raw_len).map_err(|e| Error::CorruptArtifact(format!("{self}: {e}")))?;
        if raw.len() != self.raw_len {
            return Err(Error::CorruptArtifact(format!("{self}: {} bytes after decompression, {} expected", raw.len(), self.raw_len)));
        }
        Ok(raw)
    }

    /// Whether a device of compute capability `major.minor` can load it.
    pub fn runs_on(&self, major: u32, minor: u32) -> bool {
        runs_on(self.target, self.kind, major, minor)
    }
}

impl std::fmt::Display for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} for {}", self.family, self.kind, self.target)?;
        if self.config != self.target {
            write!(f, " (config {})", self.config)?;
        }
        if self.compiler != Compiler::Nvptx {
            write!(f, " built by {}", self.compiler)?;
        }
        Ok(())
    }
}

include!(concat!(env!("OUT_DIR"), "/embedded_artifacts.rs"));

/// Every embedded artifact.
pub fn embedded() -> &'static [Artifact] {
    EMBEDDED
}

fn major_minor(arch: Arch) -> (u32, u32) {
    (arch.sm() / 10, arch.sm() % 10)
}

/// Whether an artifact of `kind` compiled for `target` loads on compute capability
/// `major.minor`: a cubin on its own major version at a minor not below its own, PTX on any
/// device not older than its target.
pub fn runs_on(target: Arch, kind: ArtifactKind, major: u32, minor: u32) -> bool {
    let (t_major, t_minor) = major_minor(target);
    match kind {
        ArtifactKind::Cubin => t_major == major && t_minor <= minor,
        ArtifactKind::Ptx => target.sm() <= major * 10 + minor,
    }
}

/// The selection rule (module docs) over the `available` (architecture, kind) pairs: the
/// cubin of the device's major version with the highest minor not above its own, else the
/// newest PTX not newer than the device; `None` when nothing fits.
pub fn choose(available: &[(Arch, ArtifactKind)], major: u32, minor: u32) -> Option<(Arch, ArtifactKind)> {
    let newest = |kind: ArtifactKind| {
        available.iter().copied().filter(|&(a, k)| k == kind && runs_on(a, k, major, minor)).max_by_key(|&(a, _)| a.sm())
    };
    newest(ArtifactKind::Cubin).or_else(|| newest(ArtifactKind::Ptx))
}

/// The artifact of `family` for a device of compute capability `major.minor` ([`choose`] over
/// the embedded native builds).
pub fn for_device(family: KernelFamily, major: u32, minor: u32) -> Result<&'static Artifact> {
    if major * 10 + minor < 70 {
        return Err(Error::UnsupportedDevice { major, minor });
    }
    let native: Vec<(Arch, ArtifactKind)> =
        EMBEDDED.iter().filter(|a| a.family == family && a.target == a.config).map(|a| (a.target, a.kind)).collect();
    let (target, kind) = choose(&native, major, minor).ok_or_else(|| Error::NoMatchingArtifact {
        family,
        major,
        minor,
        embedded: native.iter().map(|(a, k)| format!("{k} {a}")).collect::<Vec<_>>().join(", "),
    })?;
    find(family, target, target, kind)
}

/// The artifact of `family` of `kind` compiled for `target` with the config row of `config`:
/// the rust-cuda build where this build embeds one (it is only there when asked for: README
/// "rust-cuda"), else the nvptx build.
pub fn find(family: KernelFamily, target: Arch, config: Arch, kind: ArtifactKind) -> Result<&'static Artifact> {
    find_compiled(family, target, config, kind, Compiler::RustCuda).or_else(|_| find_compiled(family, target, config, kind, Compiler::Nvptx))
}

/// As [`find`], built by `compiler`.
pub fn find_compiled(family: KernelFamily, target: Arch, config: Arch, kind: ArtifactKind, compiler: Compiler) -> Result<&'static Artifact> {
    EMBEDDED
        .iter()
        .find(|a| a.family == family && a.target == target && a.config == config && a.kind == kind && a.compiler == compiler)
        .ok_or(Error::ArtifactNotEmbedded { family, target, config, kind, compiler })
}
