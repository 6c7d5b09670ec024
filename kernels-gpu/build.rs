//! Publishes this crate's source directory to the build script of any crate that depends on it
//! (`links = "cukernels_gpu"` turns `cargo:source_dir` into `DEP_CUKERNELS_GPU_SOURCE_DIR`), so
//! the host can compile these same sources to PTX.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:source_dir={dir}");
    println!("cargo:rerun-if-changed=build.rs");
}
