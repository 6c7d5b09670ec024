#!/usr/bin/env bash
# What a user of the published crates gets (CI runs this through scripts/test.sh):
# 1. `cargo package` of cukernels-gpu and cukernels succeeds (it also builds the packaged crates)
#    and each .crate is within crates.io's 10 MB limit;
# 2. a crate outside the workspace that depends on the *packaged* cukernels builds and runs with
#    stable Rust alone: PATH holds only the stable toolchain's own cargo and rustc (no rustup,
#    so no nightly can be reached) and no ptxas; without a GPU it must report "no CUDA driver"
#    as an error, not panic, and see the packaged artifacts;
# 3. the declared rust-version builds the host crate.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
limit=$((10 * 1000 * 1000))

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
echo "== cargo package"
# cargo verifies the packaged cukernels against the packaged cukernels-gpu through a local
# registry overlay, but unpacks that crate into CARGO_HOME's registry/src, and reuses a copy
# unpacked there by an earlier run of the same version as it is: stale sources (seen in CI:
# "no variant KernelFamily::Attention"). Remove our own unpacked copies first; neither crate
# is published, so nothing else owns these paths.
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
for crate in cukernels-gpu cukernels; do
  rm -rf "$cargo_home"/registry/src/*/"$crate-$version" "$cargo_home"/registry/cache/*/"$crate-$version.crate"
done
cargo +stable package -p cukernels-gpu -p cukernels --locked
for f in target/package/cukernels-gpu-*.crate target/package/cukernels-[0-9]*.crate; do
  size=$(stat -c %s "$f")
  echo "$f: $size bytes"
  [ "$size" -lt "$limit" ] || { echo "$f is over crates.io's 10 MB limit" >&2; exit 1; }
done

echo "== a downstream crate on stable Rust alone"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "target/package/cukernels-gpu-$version.crate" -C "$work"
tar -xzf "target/package/cukernels-$version.crate" -C "$work"
mkdir -p "$work/downstream/src"
cat > "$work/downstream/Cargo.toml" <<TOML
[package]
name = "downstream"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
cukernels = { path = "../cukernels-$version" }

[patch.crates-io]
# The packaged cukernels asks for cukernels-gpu from crates.io; until it is published, the
# packaged copy stands in for it.
cukernels-gpu = { path = "../cukernels-gpu-$version" }

[workspace]
TOML
cat > "$work/downstream/src/main.rs" <<'RS'
fn main() {
    let embedded = cukernels::artifacts::embedded();
    let kinds: Vec<String> = embedded.iter().map(|a| a.to_string()).collect();
    println!("embedded: {}", kinds.join(", "));
    assert!(!cukernels::artifacts::FROM_SOURCE);
    // A cubin of each of the eight architectures, for every kernel family.
    for family in cukernels::KernelFamily::ALL {
        let cubins = embedded.iter().filter(|a| a.family == family && a.kind == cukernels::ArtifactKind::Cubin).count();
        assert_eq!(cubins, 8, "{family}");
    }
    match cukernels::device_context(0) {
        Ok(ctx) => {
            let kernels = cukernels::Cukernels::new(&ctx).expect("a handle");
            println!("GPU: {:?}", kernels);
        }
        Err(e) => println!("no GPU: {e}"),
    }
}
RS
stable_bin="$(rustup +stable which cargo | xargs dirname)"
# The lockfile of the workspace pins the versions CI tested; the downstream crate resolves its
# own, as a user's would.
(
  cd "$work/downstream"
  env -i HOME="$HOME" PATH="$stable_bin:/usr/bin:/bin" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" \
    CARGO_TARGET_DIR="$work/target" bash -c '
      set -e
      ! command -v rustup >/dev/null || { echo "rustup is on PATH" >&2; exit 1; }
      ! command -v ptxas >/dev/null || { echo "ptxas is on PATH" >&2; exit 1; }
      cargo --version; rustc --version
      cargo build --release
      cargo run --release -q' | tee "$work/run.log"
)
grep -q "^embedded: sgemm cubin for sm_70" "$work/run.log"

echo "== rust-version"
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1 || rustup toolchain install "$msrv" --profile minimal
cargo "+$msrv" build --locked -p cukernels --target-dir "$root/target/msrv"
echo "check-package: ok (package, stable-only downstream build, rust-version $msrv)"
