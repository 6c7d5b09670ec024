//! The one error type of the crate: every invalid argument is reported before anything launches,
//! naming the argument and its value.

use cukernels_gpu::Arch;

/// Everything that can go wrong in cukernels.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No CUDA driver library could be loaded on this machine.
    #[error("no CUDA driver found (libcuda could not be loaded): cukernels needs an NVIDIA GPU and driver")]
    NoDriver,
    /// The device is older than the oldest architecture cukernels builds (sm_70).
    #[error("device has compute capability {major}.{minor}; cukernels needs sm_70 (Volta) or newer")]
    UnsupportedDevice { major: u32, minor: u32 },
    /// No PTX of a suitable architecture is embedded (e.g. a build limited by CUKERNELS_ARCHS).
    #[error("no PTX for compute capability {major}.{minor} is embedded in this build (built: {built}); rebuild with CUKERNELS_ARCHS unset or including it")]
    NoMatchingPtx { major: u32, minor: u32, built: String },
    /// A specific (target, config) PTX was asked for but is not embedded.
    #[error("no embedded PTX compiled for {target} with the {config} config (enable the `config-probes` feature for cross-config builds)")]
    PtxNotEmbedded { target: Arch, config: Arch },
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
