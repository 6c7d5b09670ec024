//! The one error type of the crate: every invalid argument is reported before anything launches,
//! naming the argument and its value.

use crate::artifacts::{ArtifactKind, Compiler};
use cukernels_gpu::{Arch, KernelFamily};

/// Everything that can go wrong in cukernels. New variants may be added in minor releases.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA driver library could be loaded on this machine.
    #[error("no CUDA driver found (libcuda could not be loaded): cukernels needs an NVIDIA GPU and driver")]
    NoDriver,
    /// The device is older than the oldest architecture cukernels builds (sm_70).
    #[error("device has compute capability {major}.{minor}; cukernels needs sm_70 (Volta) or newer")]
    UnsupportedDevice { major: u32, minor: u32 },
    /// No embedded artifact of the family runs on the device (e.g. a build limited by
    /// CUKERNELS_ARCHS).
    #[error("no {family} artifact for compute capability {major}.{minor} is embedded in this build (embedded: {embedded})")]
    NoMatchingArtifact { family: KernelFamily, major: u32, minor: u32, embedded: String },
    /// A specific artifact was asked for but is not embedded.
    #[error("no {kind} of the {family} kernels compiled by {compiler} for {target} with the {config} config is embedded (PTX of every architecture and the config probes come with the `from-source` and `config-probes` features, the rust-cuda build with CUKERNELS_RUST_CUDA_PTX_DIR)")]
    ArtifactNotEmbedded { family: KernelFamily, target: Arch, config: Arch, kind: ArtifactKind, compiler: Compiler },
    /// An embedded artifact does not decompress to what the build recorded.
    #[error("corrupt embedded artifact: {0}")]
    CorruptArtifact(String),
    /// A loaded kernel does not have the resources it was designed with on this device (the
    /// driver's JIT is not the ptxas that CI checked): it would spill or run below its
    /// designed occupancy.
    #[error("kernel `{kernel}` ({artifact}) fails its load-time check: {reason}")]
    KernelLimits { kernel: &'static str, artifact: String, reason: String },
    /// An argument is out of its valid range.
    #[error("invalid argument `{name}` = {value}: {reason}")]
    InvalidArgument { name: &'static str, value: String, reason: String },
    /// A buffer is shorter than the problem addresses.
    #[error("buffer `{name}` holds {len} elements but the problem addresses {required}")]
    BufferTooSmall { name: &'static str, len: usize, required: usize },
    /// Batches of C overlap, or C overlaps an input: the result would depend on launch order.
    #[error("output overlap: {0}")]
    Overlap(String),
    /// The stream belongs to another CUDA context than this handle.
    #[error("the stream belongs to another CUDA context than this cukernels handle")]
    WrongContext,
    /// An error from the CUDA driver (module load, launch, ...).
    #[error("CUDA driver error: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl Error {
    pub(crate) fn invalid(name: &'static str, value: impl std::fmt::Display, reason: impl Into<String>) -> Error {
        Error::InvalidArgument { name, value: value.to_string(), reason: reason.into() }
    }
}
