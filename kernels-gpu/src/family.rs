//! Kernel families: each is compiled into a module of its own (a cubin per architecture, and
//! PTX), loaded lazily and separately, so a user of one family never loads, or waits for the
//! driver to JIT-compile, another.

use crate::arch::Arch;
use crate::attention_config::{attention_config, ATTENTION_KERNELS, MERGE_SMEM_BYTES, MERGE_THREADS};
use crate::moe_config::{moe_config, MoeKernelKind, MOE_KERNELS, MOE_PREPARE_BLOCKS_PER_SM, MOE_PREPARE_THREADS, MOE_ROUTE_SMEM_BYTES};
use crate::sgemm_config::{sgemm_config, SGEMM_KERNELS};

/// Designed occupancy of the attention merge kernel (4.6 KB of shared memory, 256 threads): its
/// launch bound, which leaves each thread up to 128 registers. A merge has one block per output
/// row, so one decode step has few blocks; occupancy does not limit it.
const MERGE_BLOCKS_PER_SM: u32 = 2;

/// A family of kernels that ships as one module per architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelFamily {
    /// FP32 SGEMM, strided-batched (block-tile variants and `gemv`).
    Sgemm,
    /// Flash attention forward (prefill, decode with split keys, paged K/V) and the merge of
    /// split launches.
    Attention,
    /// Quantized matmul on GGUF weights with MoE routing (`mul_mat_id`): the activation
    /// quantizer and router (one prepare kernel) and the matmuls of every block format.
    Moe,
}

/// The two forms a family's module ships in (the host's build script writes them, the runtime
/// picks one; both read this one definition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArtifactKind {
    /// Machine code for one major version (`ptxas` output): loads in milliseconds.
    Cubin,
    /// PTX: the driver JIT-compiles it for the device at load.
    Ptx,
}

impl ArtifactKind {
    pub const ALL: [ArtifactKind; 2] = [ArtifactKind::Cubin, ArtifactKind::Ptx];

    /// Lower-case name: artifact file names and the manifest.
    pub const fn name(self) -> &'static str {
        match self {
            ArtifactKind::Cubin => "cubin",
            ArtifactKind::Ptx => "ptx",
        }
    }

    pub fn from_name(name: &str) -> Option<ArtifactKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl core::fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The compiler that turned the kernel sources into PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Compiler {
    /// rustc's own `nvptx64-nvidia-cuda` target (LLVM's NVPTX backend), with the pinned
    /// nightly: every architecture, and everything that ships.
    Nvptx,
    /// rust-cuda (`rustc_codegen_nvvm` on its LLVM 19 path, then libNVVM): sm_100 and sm_120
    /// only, opt-in (`scripts/rust-cuda-build.sh`, README "rust-cuda").
    RustCuda,
}

impl Compiler {
    pub const ALL: [Compiler; 2] = [Compiler::Nvptx, Compiler::RustCuda];

    /// The name in the manifest, in benchmark rows (`build`) and in artifact file names.
    pub const fn name(self) -> &'static str {
        match self {
            Compiler::Nvptx => "nvptx",
            Compiler::RustCuda => "rust-cuda",
        }
    }

    pub fn from_name(name: &str) -> Option<Compiler> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl core::fmt::Display for Compiler {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the host needs to know of one entry point to load and check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    pub entry_point: &'static str,
    /// Threads per block of every launch.
    pub threads: u32,
    /// Designed occupancy (the launch bound): the load-time check refuses a function that
    /// cannot reach it.
    pub blocks_per_sm: u32,
    /// Dynamic shared memory of an ordinary launch, with which occupancy is checked.
    pub smem_bytes: u32,
    /// The most dynamic shared memory any launch asks for (the function attribute to set).
    pub max_smem_bytes: u32,
}

impl KernelFamily {
    /// Every family, in the order of [`KernelFamily::index`].
    pub const ALL: [KernelFamily; 3] = [KernelFamily::Sgemm, KernelFamily::Attention, KernelFamily::Moe];

    /// Lower-case name: artifact file names, `--cfg cukernels_family="…"`, reports.
    pub const fn name(self) -> &'static str {
        match self {
            KernelFamily::Sgemm => "sgemm",
            KernelFamily::Attention => "attention",
            KernelFamily::Moe => "moe",
        }
    }

    /// LLVM's loop-unroll threshold for this family's device build (both compilers: the nvptx
    /// build passes it to rustc's LLVM, the rust-cuda build to the LLVM 19 pass it runs before
    /// libNVVM). Every loop over a register array must be unrolled: a loop left rolled indexes
    /// the array dynamically, which puts it in local memory. SGEMM's loops unroll under 5000;
    /// the attention kernels' shuffle path (sm_70, bf16 on sm_75) has bodies ten times a
    /// matrix instruction's and needs 30000, as do the MoE matmul's loops over rows, features
    /// and the 8 words of a chunk.
    pub const fn unroll_threshold(self) -> u32 {
        match self {
            KernelFamily::Sgemm => 5000,
            KernelFamily::Attention | KernelFamily::Moe => 30000,
        }
    }

    pub fn from_name(name: &str) -> Option<KernelFamily> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Position in [`KernelFamily::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Number of entry points of the family's module.
    pub const fn kernel_count(self) -> usize {
        match self {
            KernelFamily::Sgemm => SGEMM_KERNELS.len(),
            KernelFamily::Attention => ATTENTION_KERNELS.len(),
            KernelFamily::Moe => MOE_KERNELS.len(),
        }
    }

    /// Entry point `index` (`0..kernel_count()`) of the module built with `config`'s row.
    pub const fn kernel(self, config: Arch, index: usize) -> KernelSpec {
        match self {
            KernelFamily::Sgemm => {
                let k = &SGEMM_KERNELS[index];
                let launch = sgemm_config(config).launch(k.variant);
                KernelSpec {
                    entry_point: k.entry_point,
                    threads: launch.threads,
                    blocks_per_sm: launch.blocks_per_sm,
                    smem_bytes: launch.smem_bytes,
                    max_smem_bytes: launch.split_k_smem_bytes,
                }
            }
            KernelFamily::Attention => {
                let k = &ATTENTION_KERNELS[index];
                match k.head {
                    Some(head) => {
                        let row = attention_config(config);
                        let tile = row.tile_of(k.kind, head);
                        let smem = tile.smem_bytes(head);
                        KernelSpec { entry_point: k.entry_point, threads: tile.threads(), blocks_per_sm: tile.blocks_per_sm, smem_bytes: smem, max_smem_bytes: smem }
                    }
                    None => KernelSpec { entry_point: k.entry_point, threads: MERGE_THREADS, blocks_per_sm: MERGE_BLOCKS_PER_SM, smem_bytes: MERGE_SMEM_BYTES, max_smem_bytes: MERGE_SMEM_BYTES },
                }
            }
            KernelFamily::Moe => {
                let k = &MOE_KERNELS[index];
                let (threads, blocks_per_sm, smem) = match k.kind {
                    MoeKernelKind::MatMul(format, path) => {
                        let tile = moe_config(config).tile(path, format);
                        (tile.threads(), tile.blocks_per_sm, tile.smem_bytes())
                    }
                    MoeKernelKind::Prepare => (MOE_PREPARE_THREADS, MOE_PREPARE_BLOCKS_PER_SM, MOE_ROUTE_SMEM_BYTES),
                };
                KernelSpec { entry_point: k.entry_point, threads, blocks_per_sm, smem_bytes: smem, max_smem_bytes: smem }
            }
        }
    }
}

impl core::fmt::Display for KernelFamily {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
