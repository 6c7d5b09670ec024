//! Compiles every kernel family of `kernels-gpu` with rust-cuda for sm_100 and sm_120 (see
//! Cargo.toml). Each (family, architecture) gets a generated crate whose library is
//! `kernels-gpu/src/lib.rs` itself, built as a `cdylib` (one linked PTX module) with
//! `cukernels_backend = "nvvm"` and the family and config row as cfgs: cuda_builder owns
//! RUSTFLAGS, so a generated build script sets them. The kernel sources are the nvptx build's;
//! the backend differences stay in the entry-point macro (`abi.rs`) and `device/ptx.rs`.
use cuda_builder::{CudaBuilder, NvvmArch};
use std::path::{Path, PathBuf};

const FAMILIES: [&str; 3] = ["sgemm", "attention", "moe"];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let lib = here.join("../kernels-gpu/src/lib.rs").canonicalize().expect("kernels-gpu beside this crate");
    println!("cargo::rerun-if-changed={}", here.join("../kernels-gpu/src").display());
    let ptx_dir = out.join("ptx");
    std::fs::create_dir_all(&ptx_dir).unwrap();
    for family in FAMILIES {
        for (arch, nvvm_arch) in [("sm_100", NvvmArch::Compute100), ("sm_120", NvvmArch::Compute120)] {
            let krate = out.join(format!("{family}.{arch}"));
            write_crate(&krate, &lib, family, arch);
            CudaBuilder::new(&krate)
                .arch(nvvm_arch)
                .copy_to(ptx_dir.join(format!("{family}.{arch}.ptx")))
                .build()
                .unwrap_or_else(|e| panic!("rust-cuda build of {family} for {arch}: {e:?}"));
        }
    }
    println!("cargo::rustc-env=CUKERNELS_RUST_CUDA_PTX_DIR={}", ptx_dir.display());
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
