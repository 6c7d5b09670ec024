//! Reading one zstd frame (the artifacts' container), shared by `build.rs` (which checks the
//! packaged artifacts) and the runtime (`artifacts::decompress`): pure-Rust `ruzstd`, so
//! neither needs libzstd.

/// The bytes of one zstd frame, reading at most `limit + 1` of them (an artifact that
/// decompresses to more than its manifest says is corrupt, and is not inflated further).
pub fn decompress(compressed: &[u8], limit: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let decoder = ruzstd::decoding::StreamingDecoder::new(compressed).map_err(std::io::Error::other)?;
    let mut raw = Vec::with_capacity(limit);
    decoder.take(limit as u64 + 1).read_to_end(&mut raw)?;
    Ok(raw)
}
