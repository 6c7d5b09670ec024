//! Compiles every kernel family of `kernels-gpu` with rust-cuda for sm_100 and sm_120 (see
//! Cargo.toml). Each (family, architecture) gets a generated crate whose library is
//! `kernels-gpu/src/lib.rs` itself, built as a `cdylib` (one linked PTX module) with
//! `cukernels_backend = "nvvm"` and the family and config row as cfgs: cuda_builder owns
//! RUSTFLAGS, so a generated build script sets them. The kernel sources are the nvptx build's;
//! the backend differences stay in the entry-point macro (`abi.rs`) and `device/ptx.rs`.
//!
//! Three steps per module:
//! 1. cuda_builder runs `rustc_codegen_nvvm`, which writes the merged NVVM IR module (LLVM 19
//!    dialect) that it hands libNVVM (`final_module_path`). On its LLVM 19 path the backend runs
//!    no LLVM optimization itself (its legacy pass-manager hooks are empty there), so this IR is
//!    as rustc's MIR left it; its own libNVVM call is made without optimization (`-opt=0`, fast)
//!    and its PTX discarded.
//! 2. LLVM 19's `opt` runs the `O3` pipeline on that module with the family's unroll threshold
//!    (`KernelFamily::unroll_threshold`, the one the nvptx build gives rustc's LLVM). libNVVM
//!    has no option for it, and its own unroller leaves loops over register arrays rolled,
//!    which puts those arrays in local memory (64-864 B stack frames in 54 of 123 sm_100
//!    kernels without this step).
//! 3. libNVVM (`nvvm` crate, `-opt=3`) compiles the optimized module, with libdevice and
//!    rustc_codegen_nvvm's intrinsics as lazy modules, to `<family>.<arch>.ptx`.
use cuda_builder::{CudaBuilder, NvvmArch};
use cukernels_gpu::KernelFamily;
use nvvm::{NvvmOption, NvvmProgram};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The architectures libNVVM's LLVM 19 dialect can target (../shared/RUST-CUDA.md).
const ARCHS: [(&str, NvvmArch); 2] = [("sm_100", NvvmArch::Compute100), ("sm_120", NvvmArch::Compute120)];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let lib = here.join("../kernels-gpu/src/lib.rs").canonicalize().expect("kernels-gpu beside this crate");
    println!("cargo::rerun-if-changed={}", here.join("../kernels-gpu/src").display());
    println!("cargo::rerun-if-env-changed=CUDA_PATH");
    println!("cargo::rerun-if-env-changed=LLVM_CONFIG_19");
    let cuda = PathBuf::from(std::env::var("CUDA_PATH").expect("CUDA_PATH: the CUDA root of scripts/rust-cuda-build.sh"));
    let libdevice = std::fs::read(cuda.join("nvvm/libdevice/libdevice.10.bc")).expect("libdevice in $CUDA_PATH/nvvm/libdevice");
    let intrinsics = std::fs::read(here.join("../target/rust-cuda/rust-cuda-af05bcc/crates/rustc_codegen_nvvm/libintrinsics.bc"))
        .expect("rustc_codegen_nvvm's libintrinsics.bc in the unpacked rust-cuda source");
    let opt = llvm_opt();
    let ptx_dir = out.join("ptx");
    std::fs::create_dir_all(&ptx_dir).unwrap();
    for family in KernelFamily::ALL {
        for (arch, nvvm_arch) in ARCHS {
            let stem = format!("{}.{arch}", family.name());
            let krate = out.join(&stem);
            write_crate(&krate, &lib, family.name(), arch);
            let ir = ptx_dir.join(format!("{stem}.ll"));
            CudaBuilder::new(&krate)
                .arch(nvvm_arch)
                .nvvm_opts(false)
                .final_module_path(&ir)
                .copy_to(out.join(format!("{stem}.unoptimized.ptx")))
                .build()
                .unwrap_or_else(|e| panic!("rust-cuda build of {stem}: {e:?}"));
            let optimized = ptx_dir.join(format!("{stem}.bc"));
            let status = Command::new(&opt)
                .arg("-passes=default<O3>")
                .arg(format!("-unroll-threshold={}", family.unroll_threshold()))
                .arg(&ir)
                .arg("-o")
                .arg(&optimized)
                .status()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", opt.display()));
            assert!(status.success(), "{} failed on {}", opt.display(), ir.display());
            let ptx = libnvvm(&std::fs::read(&optimized).unwrap(), &libdevice, &intrinsics, nvvm_arch)
                .unwrap_or_else(|log| panic!("libNVVM on {stem}: {log}"));
            std::fs::write(ptx_dir.join(format!("{stem}.ptx")), ptx).unwrap();
            let _ = std::fs::remove_file(&ir);
            let _ = std::fs::remove_file(&optimized);
        }
    }
    println!("cargo::rustc-env=CUKERNELS_RUST_CUDA_PTX_DIR={}", ptx_dir.display());
}

/// LLVM 19's `opt`, from `$LLVM_CONFIG_19 --bindir` (the LLVM rustc_codegen_nvvm links).
fn llvm_opt() -> PathBuf {
    let config = std::env::var("LLVM_CONFIG_19").unwrap_or_else(|_| "llvm-config-19".into());
    let out = Command::new(&config).arg("--bindir").output().unwrap_or_else(|e| panic!("cannot run {config}: {e}"));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("opt")
}

/// The PTX libNVVM makes of `module` (optimizing, `-opt=3` being its default), or its log.
fn libnvvm(module: &[u8], libdevice: &[u8], intrinsics: &[u8], arch: NvvmArch) -> Result<Vec<u8>, String> {
    let fail = |p: &NvvmProgram, e: nvvm::NvvmError| format!("{e:?}\n{}", p.compiler_log().ok().flatten().unwrap_or_default());
    let program = NvvmProgram::new().map_err(|e| format!("{e:?}"))?;
    program.add_module(module, "kernels".into()).map_err(|e| fail(&program, e))?;
    program.add_lazy_module(libdevice, "libdevice".into()).map_err(|e| fail(&program, e))?;
    program.add_lazy_module(intrinsics, "libintrinsics".into()).map_err(|e| fail(&program, e))?;
    program.compile(&[NvvmOption::Arch(arch)]).map_err(|e| fail(&program, e))
}

/// A crate whose library is `lib` (kernels-gpu), compiled as a cdylib with the family's cfgs.
fn write_crate(dir: &Path, lib: &Path, family: &str, arch: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let manifest = format!(
        "[package]\nname = \"cukernels-gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"build.rs\"\n\n\
         [lib]\npath = {lib:?}\ncrate-type = [\"cdylib\"]\n\n[workspace]\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let build = format!(
        "fn main() {{\n    println!(\"cargo:rustc-cfg=cukernels_backend=\\\"nvvm\\\"\");\n    \
         println!(\"cargo:rustc-cfg=cukernels_family=\\\"{family}\\\"\");\n    \
         println!(\"cargo:rustc-cfg=cukernels_config=\\\"{arch}\\\"\");\n}}\n"
    );
    std::fs::write(dir.join("build.rs"), build).unwrap();
}
