//! Device-only code: the kernels and the small wrappers over PTX they share.
//!
//! The config row these kernels are built with is chosen by `--cfg cukernels_config="sm_XX"`
//! (set by `host/build.rs`); it is independent of `-C target-cpu`, so the sm_100 and sm_120
//! rows can also be compiled for an sm_90 target and tested on an H200.

//! Each kernel family compiles into a module of its own: the build names the family with
//! `--cfg cukernels_family="…"` ([`crate::KernelFamily::name`]) and only that family's entry
//! points are compiled.

pub mod ptx;
#[cfg(cukernels_family = "attention")]
mod attention;
#[cfg(cukernels_family = "sgemm")]
mod gemv;
#[cfg(cukernels_family = "moe")]
mod moe;
#[cfg(cukernels_family = "sgemm")]
pub mod sgemm;
#[cfg(cukernels_family = "sgemm")]
mod tiny;

use crate::arch::Arch;

/// Atomic view of a `u32` in global or shared memory (the kernels use relaxed orderings, with
/// fences or barriers where an order is needed).
///
/// Safety: `ptr` is valid and aligned, and every concurrent access to it is atomic or ordered
/// by a barrier.
#[allow(dead_code)] // Families that use no atomics (sgemm) compile this module too.
#[inline(always)]
pub(crate) unsafe fn atomic<'a>(ptr: *mut u32) -> &'a core::sync::atomic::AtomicU32 {
    core::sync::atomic::AtomicU32::from_ptr(ptr)
}

/// The architecture whose config row this PTX is built with.
pub const BUILD_CONFIG: Arch = {
    if cfg!(cukernels_config = "sm_70") {
        Arch::Sm70
    } else if cfg!(cukernels_config = "sm_75") {
        Arch::Sm75
    } else if cfg!(cukernels_config = "sm_80") {
        Arch::Sm80
    } else if cfg!(cukernels_config = "sm_86") {
        Arch::Sm86
    } else if cfg!(cukernels_config = "sm_89") {
        Arch::Sm89
    } else if cfg!(cukernels_config = "sm_90") {
        Arch::Sm90
    } else if cfg!(cukernels_config = "sm_100") {
        Arch::Sm100
    } else if cfg!(cukernels_config = "sm_120") {
        Arch::Sm120
    } else {
        panic!("build the device crate with --cfg cukernels_config=\"sm_XX\" (host/build.rs does)")
    }
};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch error.
    unsafe { core::arch::nvptx::trap() }
}
