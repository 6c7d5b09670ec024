//! The GPU architectures cukernels builds for, and the per-architecture hardware limits that
//! every config table is checked against (at compile time, see `config`).
//!
//! Figures are from the CUDA C++ Programming Guide ("Technical Specifications per Compute
//! Capability") and the tuning guides of each architecture.

/// A GPU architecture that cukernels builds for (a cubin and PTX per kernel family; the host's
/// `artifacts` module says which a device loads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    /// Volta (V100).
    Sm70,
    /// Turing (T4, RTX 20).
    Sm75,
    /// Ampere data-center (A100).
    Sm80,
    /// Ampere consumer (RTX 30, A10, A40).
    Sm86,
    /// Ada (RTX 40, L4, L40).
    Sm89,
    /// Hopper (H100, H200).
    Sm90,
    /// Blackwell data-center (B200).
    Sm100,
    /// Blackwell consumer (RTX 50).
    Sm120,
}

/// Hardware limits of one architecture that decide whether a tile config fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchLimits {
    /// Largest dynamic shared memory one block may opt in to, in bytes.
    pub max_smem_per_block: u32,
    /// Shared memory of one SM, in bytes (what all resident blocks share).
    pub smem_per_sm: u32,
    /// Shared memory the system reserves per resident block (1 KB from sm_80 on).
    pub reserved_smem_per_block: u32,
    /// Most resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Most resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM (64K on every architecture here).
    pub regs_per_sm: u32,
    /// Most registers one thread may use.
    pub max_regs_per_thread: u32,
    /// FP32 FMA lanes per SM: the peak is `2 * lanes * SMs * clock` FLOP/s.
    pub fp32_lanes_per_sm: u32,
    /// `cp.async` (global to shared copies that bypass registers) exists from sm_80 on.
    pub has_cp_async: bool,
    /// Thread-block clusters and distributed shared memory (a block reading the shared memory
    /// of the other blocks of its cluster) exist from sm_90 on.
    pub has_clusters: bool,
}

const KB: u32 = 1024;

impl Arch {
    /// Every architecture cukernels builds, oldest first.
    pub const ALL: [Arch; 8] = [
        Arch::Sm70,
        Arch::Sm75,
        Arch::Sm80,
        Arch::Sm86,
        Arch::Sm89,
        Arch::Sm90,
        Arch::Sm100,
        Arch::Sm120,
    ];

    /// Compute capability as a number: 70, 75, ..., 120.
    pub const fn sm(self) -> u32 {
        match self {
            Arch::Sm70 => 70,
            Arch::Sm75 => 75,
            Arch::Sm80 => 80,
            Arch::Sm86 => 86,
            Arch::Sm89 => 89,
            Arch::Sm90 => 90,
            Arch::Sm100 => 100,
            Arch::Sm120 => 120,
        }
    }

    /// Whether a launch can start as a programmatic dependent of the one before it on the stream
    /// (`griddepcontrol`, sm_90 and newer): its blocks start while that grid finishes and wait
    /// for it in the kernel.
    pub const fn has_programmatic_launch(self) -> bool {
        self.sm() >= 90
    }

    /// The name used for targets, cfgs and files: `"sm_90"`.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm70 => "sm_70",
            Arch::Sm75 => "sm_75",
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm100 => "sm_100",
            Arch::Sm120 => "sm_120",
        }
    }

    /// The target the device code of this architecture is compiled and assembled for (LLVM's
    /// `target-cpu`, `ptxas -arch`, the PTX `.target`): `sm_90a` for sm_90, whose attention
    /// tiles use the warpgroup MMA (`wgmma`) that only the architecture-specific target has
    /// (a cubin of it runs on compute capability 9.0 alone, which is all an sm_90 cubin serves);
    /// the name itself for the others, whose PTX also ships for newer GPUs to compile.
    pub const fn ptx_target(self) -> &'static str {
        match self {
            Arch::Sm90 => "sm_90a",
            arch => arch.name(),
        }
    }

    /// Parses `"sm_90"` (or `"90"`).
    pub fn from_name(name: &str) -> Option<Arch> {
        let digits = name.trim().strip_prefix("sm_").unwrap_or(name.trim());
        Arch::ALL.into_iter().find(|a| a.name()[3..] == *digits)
    }

    /// The architecture in `built` that best describes a device of compute capability
    /// `major.minor` (its limits, its config row): the newest one not newer than the device.
    /// `None` for devices older than sm_70. (Which artifact the device *loads* is the host's
    /// `artifacts::choose`: a cubin must also match the major version.)
    pub fn for_compute_capability(major: u32, minor: u32, built: &[Arch]) -> Option<Arch> {
        let device = major * 10 + minor;
        built.iter().copied().filter(|a| a.sm() <= device).max()
    }

    /// The hardware limits of this architecture.
    pub const fn limits(self) -> ArchLimits {
        let base = ArchLimits {
            max_smem_per_block: 0,
            smem_per_sm: 0,
            reserved_smem_per_block: KB,
            max_threads_per_sm: 2048,
            max_blocks_per_sm: 32,
            regs_per_sm: 64 * KB,
            max_regs_per_thread: 255,
            fp32_lanes_per_sm: 128,
            has_cp_async: true,
            has_clusters: false,
        };
        match self {
            Arch::Sm70 => ArchLimits {
                max_smem_per_block: 96 * KB,
                smem_per_sm: 96 * KB,
                reserved_smem_per_block: 0,
                fp32_lanes_per_sm: 64,
                has_cp_async: false,
                ..base
            },
            Arch::Sm75 => ArchLimits {
                max_smem_per_block: 64 * KB,
                smem_per_sm: 64 * KB,
                reserved_smem_per_block: 0,
                max_threads_per_sm: 1024,
                max_blocks_per_sm: 16,
                fp32_lanes_per_sm: 64,
                has_cp_async: false,
                ..base
            },
            Arch::Sm80 => ArchLimits {
                max_smem_per_block: 163 * KB,
                smem_per_sm: 164 * KB,
                fp32_lanes_per_sm: 64,
                ..base
            },
            Arch::Sm86 | Arch::Sm120 => ArchLimits {
                max_smem_per_block: 99 * KB,
                smem_per_sm: 100 * KB,
                max_threads_per_sm: 1536,
                max_blocks_per_sm: if matches!(self, Arch::Sm86) { 16 } else { 32 },
                has_clusters: matches!(self, Arch::Sm120),
                ..base
            },
            Arch::Sm89 => ArchLimits {
                max_smem_per_block: 99 * KB,
                smem_per_sm: 100 * KB,
                max_threads_per_sm: 1536,
                max_blocks_per_sm: 24,
                ..base
            },
            Arch::Sm90 | Arch::Sm100 => ArchLimits {
                max_smem_per_block: 227 * KB,
                smem_per_sm: 228 * KB,
                has_clusters: true,
                ..base
            },
        }
    }
}

impl ArchLimits {
    /// Checks that a block of `threads` threads with `smem` bytes of dynamic shared memory can
    /// be launched, and that `blocks_per_sm` of them fit on one SM (threads and shared memory);
    /// returns the registers per thread the launch bound then leaves (at most 255). Each config
    /// table checks its tiles with it at compile time.
    pub const fn check_blocks(&self, threads: u32, smem: u32, blocks_per_sm: u32) -> Result<u32, &'static str> {
        if threads == 0 || threads > 1024 || blocks_per_sm == 0 {
            return Err("a block must have 1 to 1024 threads and blocks_per_sm must be positive");
        }
        if smem > self.max_smem_per_block {
            return Err("shared memory exceeds the architecture's per-block limit");
        }
        if blocks_per_sm * (smem + self.reserved_smem_per_block) > self.smem_per_sm {
            return Err("blocks_per_sm blocks do not fit the SM's shared memory");
        }
        if blocks_per_sm * threads > self.max_threads_per_sm {
            return Err("blocks_per_sm blocks exceed the SM's threads");
        }
        let budget = self.regs_per_sm / (blocks_per_sm * threads);
        Ok(if budget > self.max_regs_per_thread { self.max_regs_per_thread } else { budget })
    }
}

impl core::fmt::Display for Arch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
