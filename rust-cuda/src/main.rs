//! Prints the folder holding the rust-cuda PTX that `build.rs` wrote (`<family>.<arch>.ptx`).
fn main() {
    println!("{}", env!("CUKERNELS_RUST_CUDA_PTX_DIR"));
}
