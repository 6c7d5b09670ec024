//! Finds (or builds) the device code's artifacts and embeds them: for every kernel family, a
//! cubin per architecture (machine code the driver loads at once) and PTX (which the driver
//! JIT-compiles: the fallback for GPUs newer than every cubin).
//!
//! Three sources, in this order:
//! - feature `from-source`: compiles the device crate (`cukernels-gpu`) with the pinned nightly
//!   (through `rustup run`) for `nvptx64-nvidia-cuda`, once per family and architecture, each
//!   with its own config row (`--cfg cukernels_config="sm_XX"`) and family
//!   (`--cfg cukernels_family="sgemm"`); adds the launch bounds each kernel was designed for
//!   (`.maxntid` / `.minnctapersm`, from the config table the host reads); assembles each PTX
//!   with `ptxas` 12.x into a cubin. Everything built is embedded (PTX of every architecture
//!   too, so a test can force the JIT path), and the subset that ships in the package is written
//!   to `OUT_DIR/package` (what `scripts/build-artifacts.sh` copies to `host/artifacts`).
//! - `CUKERNELS_ARTIFACT_DIR=/path`: artifacts and `manifest.txt` from that folder (as written by
//!   `scripts/build-artifacts.sh`).
//! - otherwise the artifacts packaged with the crate (`host/artifacts`): stable Rust only, no
//!   nightly, no `ptxas`, no CUDA toolkit.
//!
//! Prebuilt artifacts are checked against their manifest before they are embedded: the hash of
//! the device sources they were built from must be the hash of the sources beside this build
//! (else they are stale), and every file must have the size and SHA-256 the manifest gives.
//!
//! Other switches: `CUKERNELS_ARCHS=sm_90,sm_80` builds only those architectures (from source,
//! for quick development builds); feature `config-probes` (implies `from-source`) also builds
//! the sm_100 and sm_120 config rows for an sm_90 target, so that an H100/H200 can test them;
//! `CUKERNELS_PTXAS` names the `ptxas` to use.
//!
//! `CUKERNELS_RUST_CUDA_PTX_DIR=/path` (with `from-source`; the folder `scripts/rust-cuda-build.sh`
//! prints) also embeds the rust-cuda build of sm_100 and sm_120 (`<family>.<arch>.ptx` there:
//! the same kernel sources compiled by rustc_codegen_nvvm and libNVVM), given the same launch
//! bounds and assembled by the same `ptxas`; the runtime then prefers it over the nvptx build
//! of those architectures. With `config-probes`, its sm_100 and sm_120 rows are also retargeted
//! to sm_90 (`.target` rewritten; ptxas refuses an instruction sm_90 lacks), beside the nvptx
//! probes, so that an H100/H200 runs and times both.

use cukernels_gpu::{Arch, ArtifactKind, Compiler, KernelFamily};

#[path = "src/zstd_frame.rs"]
mod zstd_frame;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The nightly that compiles the device code. Keep equal to `rust-toolchain.toml`.
const DEVICE_TOOLCHAIN: &str = "nightly-2026-05-20";
/// `ptxas` major version that builds the cubins: 12.x is the last to assemble sm_70.
const PTXAS_RELEASE: &str = "release 12.";
/// Optimization level passed to `ptxas` (its default; stated so the manifest says it).
const PTXAS_FLAGS: &[&str] = &["-O3"];
/// Architectures whose PTX ships in the package beside the cubins: sm_120's for GPUs newer
/// than every cubin (compute capability 13.0 and later), sm_100's for 11.x (Jetson Thor), the
/// one major between our cubins that no cubin of its own major covers.
const SHIPPED_PTX: [Arch; 2] = [Arch::Sm100, Arch::Sm120];
/// zstd level of the artifacts: compressed once (libzstd, with `from-source`), decompressed at
/// every load (pure-Rust `ruzstd`; about 10 ms for a 1.6 MB cubin). Level 19 makes them 0.55
/// of what deflate's best made, which keeps the package under crates.io's 10 MB as families
/// are added; 20-22 gain under 1% more.
const ZSTD_LEVEL: i32 = 19;
const MANIFEST: &str = "manifest.txt";

/// One module to produce: `family`'s kernels compiled for `target` with the config row of
/// `config`.
#[derive(Clone, Copy)]
struct Build {
    family: KernelFamily,
    target: Arch,
    config: Arch,
    compiler: Compiler,
}

impl Build {
    fn stem(&self) -> String {
        let mut stem = if self.target == self.config {
            format!("{}.{}", self.family.name(), self.target.name())
        } else {
            format!("{}.{}_config_on_{}", self.family.name(), self.config.name(), self.target.name())
        };
        if self.compiler != Compiler::Nvptx {
            stem = format!("{stem}.{}", self.compiler.name());
        }
        stem
    }
}

/// The architectures rust-cuda builds (`rustc_codegen_nvvm`'s LLVM 19 path reaches no older one).
const RUST_CUDA_ARCHS: [Arch; 2] = [Arch::Sm100, Arch::Sm120];

/// One artifact file (compressed) and what the manifest says of it.
struct Entry {
    family: KernelFamily,
    target: Arch,
    config: Arch,
    kind: ArtifactKind,
    compiler: Compiler,
    file: String,
    raw_len: usize,
    raw_sha256: String,
    compressed_sha256: String,
}

impl Entry {
    fn manifest_line(&self) -> String {
        format!(
            "artifact: {} {} {} {} {} {} {} {} {}",
            self.family.name(),
            self.target.name(),
            self.config.name(),
            self.kind.name(),
            self.compiler.name(),
            self.file,
            self.raw_len,
            self.raw_sha256,
            self.compressed_sha256
        )
    }

    fn parse(line: &str) -> Option<Entry> {
        let f: Vec<&str> = line.strip_prefix("artifact: ")?.split(' ').collect();
        if f.len() != 9 {
            return None;
        }
        Some(Entry {
            family: KernelFamily::from_name(f[0])?,
            target: Arch::from_name(f[1])?,
            config: Arch::from_name(f[2])?,
            kind: ArtifactKind::from_name(f[3])?,
            compiler: Compiler::from_name(f[4])?,
            file: f[5].to_string(),
            raw_len: f[6].parse().ok()?,
            raw_sha256: f[7].to_string(),
            compressed_sha256: f[8].to_string(),
        })
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=CUKERNELS_ARCHS");
    println!("cargo:rerun-if-env-changed=CUKERNELS_ARTIFACT_DIR");
    println!("cargo:rerun-if-env-changed=CUKERNELS_PTXAS");
    println!("cargo:rerun-if-env-changed=CUKERNELS_RUST_CUDA_PTX_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let source_dir = PathBuf::from(
        std::env::var("DEP_CUKERNELS_GPU_SOURCE_DIR").expect("cukernels-gpu publishes its source dir (links = \"cukernels_gpu\")"),
    );
    let source_sha256 = source_hash(&source_dir, &manifest_dir.join("build.rs"));

    // (`build_ptxas`: the ptxas of a from-source build; None for prebuilt artifacts.)
    let (entries, dir, build_ptxas) = if std::env::var_os("CARGO_FEATURE_FROM_SOURCE").is_some() {
        println!("cargo:rerun-if-changed={}", source_dir.join("src").display());
        let dir = out_dir.join("artifacts");
        let ptxas = find_ptxas();
        let entries = build_from_source(&source_dir, &out_dir, &dir, &source_sha256, &ptxas);
        (entries, dir, Some(ptxas.display().to_string()))
    } else {
        if std::env::var_os("CUKERNELS_RUST_CUDA_PTX_DIR").is_some() {
            panic!("cukernels: CUKERNELS_RUST_CUDA_PTX_DIR needs the `from-source` feature (the rust-cuda PTX is assembled by this build)");
        }
        let dir = match std::env::var_os("CUKERNELS_ARTIFACT_DIR") {
            Some(d) => PathBuf::from(d),
            None => manifest_dir.join("artifacts"),
        };
        (read_prebuilt(&dir, &source_sha256), dir, None)
    };
    let from_source = build_ptxas.is_some();

    let mut table = format!(
        "// Generated by host/build.rs.\n/// SHA-256 of the device sources the embedded artifacts were built from.\npub const SOURCE_SHA256: &str = \"{source_sha256}\";\n\
         /// Whether the artifacts were built from source in this build (feature `from-source`).\npub const FROM_SOURCE: bool = {from_source};\n\
         /// The `ptxas` that assembled the cubins of a `from-source` build.\npub const BUILD_PTXAS: Option<&str> = {build_ptxas:?};\n\
         static EMBEDDED: &[Artifact] = &[\n"
    );
    for e in &entries {
        let path = dir.join(&e.file);
        table += &format!(
            "    Artifact {{ family: KernelFamily::{:?}, target: Arch::{:?}, config: Arch::{:?}, kind: ArtifactKind::{:?}, compiler: Compiler::{:?}, raw_len: {}, sha256: \"{}\", compressed: include_bytes!({:?}) }},\n",
            e.family,
            e.target,
            e.config,
            e.kind,
            e.compiler,
            e.raw_len,
            e.raw_sha256,
            path.display().to_string()
        );
    }
    table += "];\n";
    std::fs::write(out_dir.join("embedded_artifacts.rs"), table).unwrap();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 over the device crate's `src/` (every file, by path relative to it, in sorted order)
/// and this build script (which shapes the PTX: flags, launch bounds): what a set of
/// artifacts was built from.
fn source_hash(source_dir: &Path, build_script: &Path) -> String {
    fn walk(dir: &Path, rel: &str, files: &mut Vec<(String, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cukernels: cannot read {}: {e}", dir.display())) {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            if entry.path().is_dir() {
                walk(&entry.path(), &rel, files);
            } else {
                files.push((rel, entry.path()));
            }
        }
    }
    let mut files = Vec::new();
    walk(&source_dir.join("src"), "", &mut files);
    files.sort();
    files.push(("host/build.rs".into(), build_script.to_path_buf()));
    let mut h = Sha256::new();
    for (rel, path) in files {
        let bytes = std::fs::read(&path).unwrap();
        h.update(rel.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    hex(&h.finalize())
}

/// Reads prebuilt artifacts and checks them against their manifest.
fn read_prebuilt(dir: &Path, source_sha256: &str) -> Vec<Entry> {
    let manifest_path = dir.join(MANIFEST);
    println!("cargo:rerun-if-changed={}", manifest_path.display());
    let text = std::fs::read_to_string(&manifest_path).unwrap_or_else(|e| {
        panic!(
            "cukernels: the prebuilt device artifacts' manifest {} cannot be read ({e}); build them with \
             scripts/build-artifacts.sh, or enable the `from-source` feature",
            manifest_path.display()
        )
    });
    let built_from = text.lines().find_map(|l| l.strip_prefix("source_sha256: ")).unwrap_or("(none)");
    if built_from != source_sha256 {
        panic!(
            "cukernels: the artifacts in {} were built from other device sources (manifest source_sha256 {built_from}, \
             these sources {source_sha256}): they are stale. Rebuild them with scripts/build-artifacts.sh, or enable \
             the `from-source` feature",
            dir.display()
        );
    }
    let entries: Vec<Entry> = text.lines().filter(|l| l.starts_with("artifact: ")).map(|l| {
        Entry::parse(l).unwrap_or_else(|| panic!("cukernels: malformed line in {}: {l}", manifest_path.display()))
    }).collect();
    for e in &entries {
        let path = dir.join(&e.file);
        println!("cargo:rerun-if-changed={}", path.display());
        let compressed = std::fs::read(&path).unwrap_or_else(|err| panic!("cukernels: artifact {} cannot be read: {err}", path.display()));
        let raw = zstd_frame::decompress(&compressed, e.raw_len).unwrap_or_else(|err| panic!("cukernels: artifact {} is not a valid zstd frame: {err}", path.display()));
        if sha256(&compressed) != e.compressed_sha256 || raw.len() != e.raw_len || sha256(&raw) != e.raw_sha256 {
            panic!("cukernels: artifact {} does not match its manifest (size or SHA-256): rebuild with scripts/build-artifacts.sh", path.display());
        }
    }
    for family in KernelFamily::ALL {
        if !entries.iter().any(|e| e.family == family) {
            panic!("cukernels: {} lists no artifact of the `{family}` family", manifest_path.display());
        }
    }
    entries
}

fn selected_archs() -> Vec<Arch> {
    match std::env::var("CUKERNELS_ARCHS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|name| {
                Arch::from_name(name.trim()).unwrap_or_else(|| {
                    panic!("cukernels: CUKERNELS_ARCHS names `{name}`; known: sm_70, sm_75, sm_80, sm_86, sm_89, sm_90, sm_100, sm_120")
                })
            })
            .collect(),
        _ => Arch::ALL.to_vec(),
    }
}

fn install_hint() -> String {
    format!(
        "the `from-source` feature needs:\n    rustup toolchain install {DEVICE_TOOLCHAIN} --profile minimal -c rust-src -c llvm-tools\n    \
         python3 -m pip install nvidia-cuda-nvcc-cu12==12.9.86   # ptxas\n\
         (without `from-source`, the prebuilt artifacts packaged with the crate need neither)"
    )
}

/// Builds every (family, architecture) module, writes the compressed artifacts and the manifest
/// into `dir`, and the shipped subset (when every architecture was built) into `OUT_DIR/package`.
fn build_from_source(source_dir: &Path, out_dir: &Path, dir: &Path, source_sha256: &str, ptxas: &Path) -> Vec<Entry> {
    let archs = selected_archs();
    let probes = std::env::var_os("CARGO_FEATURE_CONFIG_PROBES").is_some();
    let rust_cuda_dir = std::env::var_os("CUKERNELS_RUST_CUDA_PTX_DIR").map(PathBuf::from);
    let mut builds = Vec::new();
    for family in KernelFamily::ALL {
        builds.extend(archs.iter().map(|&a| Build { family, target: a, config: a, compiler: Compiler::Nvptx }));
        if probes {
            for config in RUST_CUDA_ARCHS {
                builds.push(Build { family, target: Arch::Sm90, config, compiler: Compiler::Nvptx });
            }
        }
        if rust_cuda_dir.is_some() {
            for config in RUST_CUDA_ARCHS {
                if archs.contains(&config) {
                    builds.push(Build { family, target: config, config, compiler: Compiler::RustCuda });
                }
                if probes {
                    builds.push(Build { family, target: Arch::Sm90, config, compiler: Compiler::RustCuda });
                }
            }
        }
    }
    if let Some(dir) = &rust_cuda_dir {
        check_rust_cuda_ptx(dir, source_dir);
    }
    let rustc_version = check_toolchain();
    let ptxas_version = ptxas_version(ptxas);
    let crate_dir = stage_device_crate(source_dir, out_dir);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let ptx_dir = out_dir.join("ptx");
    std::fs::create_dir_all(&ptx_dir).unwrap();

    // A queue over the builds, one worker per core: each build is a nightly compilation
    // (one core, ~15 s) then ptxas (~5 s).
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Vec<Entry>)>> = Mutex::new(Vec::new());
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, builds.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&b) = builds.get(i) else { break };
                let ptx = match (b.compiler, &rust_cuda_dir) {
                    (Compiler::RustCuda, Some(dir)) => rust_cuda_ptx(dir, b),
                    _ => compile_ptx(&crate_dir, out_dir, b),
                };
                let ptx = with_launch_bounds(&ptx, b);
                let ptx_path = ptx_dir.join(format!("{}.ptx", b.stem()));
                std::fs::write(&ptx_path, &ptx).unwrap();
                let cubin = assemble_cubin(ptxas, &ptx_path, b);
                let entries = [(ArtifactKind::Ptx, ptx.into_bytes()), (ArtifactKind::Cubin, cubin)]
                    .into_iter()
                    .map(|(kind, raw)| write_artifact(dir, b, kind, &raw))
                    .collect();
                results.lock().unwrap().push((i, entries));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    let entries: Vec<Entry> = results.into_iter().flat_map(|r| r.1).collect();

    let header = format!(
        "# cukernels device artifacts, written by host/build.rs (feature `from-source`); do not edit.\n\
         # One line per artifact: family target config kind compiler file raw_bytes raw_sha256 compressed_sha256.\n\
         source_sha256: {source_sha256}\n\
         device_toolchain: {DEVICE_TOOLCHAIN} ({rustc_version})\n\
         ptxas: {ptxas_version}\n\
         ptxas_flags: {}\n\
         compression: zstd (libzstd level {ZSTD_LEVEL})\n",
        PTXAS_FLAGS.join(" ")
    );
    let manifest = |keep: &dyn Fn(&Entry) -> bool| {
        let mut text = header.clone();
        for e in entries.iter().filter(|e| keep(e)) {
            text += &e.manifest_line();
            text.push('\n');
        }
        text
    };
    std::fs::write(dir.join(MANIFEST), manifest(&|_| true)).unwrap();

    // The package's set: every native cubin, and the PTX of SHIPPED_PTX.
    let package_dir = out_dir.join("package");
    let _ = std::fs::remove_dir_all(&package_dir);
    if archs.len() == Arch::ALL.len() {
        let shipped = |e: &Entry| {
            e.target == e.config && e.compiler == Compiler::Nvptx && (e.kind == ArtifactKind::Cubin || SHIPPED_PTX.contains(&e.target))
        };
        std::fs::create_dir_all(&package_dir).unwrap();
        for e in entries.iter().filter(|e| shipped(e)) {
            std::fs::copy(dir.join(&e.file), package_dir.join(&e.file)).unwrap();
        }
        std::fs::write(package_dir.join(MANIFEST), manifest(&shipped)).unwrap();
    }
    entries
}

fn write_artifact(dir: &Path, b: Build, kind: ArtifactKind, raw: &[u8]) -> Entry {
    let compressed = compress(raw);
    let file = format!("{}.{}.zst", b.stem(), kind.name());
    std::fs::write(dir.join(&file), &compressed).unwrap();
    Entry {
        family: b.family,
        target: b.target,
        config: b.config,
        kind,
        compiler: b.compiler,
        file,
        raw_len: raw.len(),
        raw_sha256: sha256(raw),
        compressed_sha256: sha256(&compressed),
    }
}

/// One zstd frame of an artifact (libzstd, deterministic for a given level and version).
#[cfg(feature = "from-source")]
fn compress(raw: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(raw, ZSTD_LEVEL).expect("zstd compresses in memory")
}

#[cfg(not(feature = "from-source"))]
fn compress(_: &[u8]) -> Vec<u8> {
    unreachable!("artifacts are only built with the `from-source` feature")
}


/// Checks that the device toolchain and its `rust-src` are installed; returns `rustc -V`.
fn check_toolchain() -> String {
    let run = |args: &[&str]| Command::new("rustup").args(["run", DEVICE_TOOLCHAIN]).args(args).env_remove("RUSTUP_TOOLCHAIN").output();
    let sysroot = match run(&["rustc", "--print", "sysroot"]) {
        Ok(out) if out.status.success() => PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
        Ok(_) => panic!("cukernels: the device code is compiled by the Rust toolchain {DEVICE_TOOLCHAIN}, which is not installed; {}", install_hint()),
        Err(_) => panic!("cukernels: `rustup` was not found; the device code is compiled by the Rust toolchain {DEVICE_TOOLCHAIN}; {}", install_hint()),
    };
    if !sysroot.join("lib/rustlib/src/rust/library/core").exists() {
        panic!("cukernels: the toolchain {DEVICE_TOOLCHAIN} lacks the rust-src component; {}", install_hint());
    }
    let version = run(&["rustc", "-V"]).expect("rustc ran above");
    String::from_utf8_lossy(&version.stdout).trim().to_string()
}

/// `ptxas` 12.x: `$CUKERNELS_PTXAS`, then the PyPI package `nvidia-cuda-nvcc-cu12` of
/// `python3`, then `PATH`.
fn find_ptxas() -> PathBuf {
    if let Some(p) = std::env::var_os("CUKERNELS_PTXAS") {
        return PathBuf::from(p);
    }
    let py = Command::new("python3")
        .args(["-c", "import nvidia.cuda_nvcc, os; print(os.path.join(list(nvidia.cuda_nvcc.__path__)[0], 'bin', 'ptxas'))"])
        .output();
    if let Ok(out) = py {
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && path.exists() {
            return path;
        }
    }
    PathBuf::from("ptxas")
}

fn ptxas_version(ptxas: &Path) -> String {
    let out = Command::new(ptxas).arg("--version").output().unwrap_or_else(|e| {
        panic!("cukernels: cannot run ptxas ({}): {e}; set CUKERNELS_PTXAS, or {}", ptxas.display(), install_hint())
    });
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("release")).unwrap_or("").trim().to_string();
    if !line.contains(PTXAS_RELEASE) {
        panic!("cukernels: {} is `{line}`; the cubins need ptxas 12.x (13.x dropped sm_70); {}", ptxas.display(), install_hint());
    }
    line
}

fn assemble_cubin(ptxas: &Path, ptx: &Path, b: Build) -> Vec<u8> {
    let cubin = ptx.with_extension("cubin");
    let out = Command::new(ptxas)
        .arg(format!("-arch={}", b.target.ptx_target()))
        .args(PTXAS_FLAGS)
        .arg("-o")
        .arg(&cubin)
        .arg(ptx)
        .output()
        .unwrap_or_else(|e| panic!("cukernels: cannot run {}: {e}", ptxas.display()));
    if !out.status.success() {
        panic!("cukernels: ptxas failed on {} ({}):\n{}", ptx.display(), b.stem(), String::from_utf8_lossy(&out.stderr));
    }
    std::fs::read(&cubin).unwrap()
}

/// Copies the device crate's sources into OUT_DIR as a standalone crate (its own workspace,
/// cdylib, fat LTO), so the nightly build touches neither the caller's workspace nor its lock.
fn stage_device_crate(source_dir: &Path, out_dir: &Path) -> PathBuf {
    let dir = out_dir.join("device-crate");
    let _ = std::fs::remove_dir_all(dir.join("src"));
    copy_dir(&source_dir.join("src"), &dir.join("src"));
    let manifest = r#"[package]
name = "cukernels-gpu"
version = "0.0.0"
edition = "2021"

[lib]
crate-type = ["cdylib"]

[workspace]

[lints.rust]
unexpected_cfgs = { level = "allow" }
"#;
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// Environment variables of this build script that must not leak into the nested cargo.
fn is_inherited_build_var(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTC_LINKER", "RUSTDOC", "RUSTFLAGS", "RUSTDOCFLAGS",
        "RUSTUP_TOOLCHAIN", "CARGO", "TARGET", "HOST", "OUT_DIR", "OPT_LEVEL", "PROFILE", "DEBUG", "NUM_JOBS",
        "MAKEFLAGS", "MFLAGS", "CARGO_MAKEFLAGS", "CARGO_TARGET_DIR", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS", "CARGO_BUILD_TARGET_DIR", "CARGO_MANIFEST_DIR", "CARGO_MANIFEST_PATH", "CARGO_PRIMARY_PACKAGE",
        "CARGO_INCREMENTAL", "CARGO_BUILD_INCREMENTAL", "CARGO_ENCODED_RUSTDOCFLAGS",
    ];
    EXACT.contains(&key)
        || ["CARGO_PKG_", "CARGO_CFG_", "CARGO_FEATURE_", "CARGO_PROFILE_", "DEP_", "CARGO_TARGET_"].iter().any(|p| key.starts_with(p))
}

/// The release profile of the device build, passed as `--config` so that it wins over any
/// `[profile]` in the user's `.cargo/config.toml` (which cargo would otherwise apply to the
/// nested build, found from its working directory upwards). Fat LTO links core into the module
/// (without it, core's functions stay `.extern` and ptxas rejects the PTX); one codegen unit
/// and panic = abort keep the PTX self-contained.
const DEVICE_PROFILE: &[&str] = &[
    "profile.release.opt-level=3",
    "profile.release.lto=\"fat\"",
    "profile.release.codegen-units=1",
    "profile.release.panic=\"abort\"",
    "profile.release.debug=false",
    "profile.release.debug-assertions=false",
    "profile.release.overflow-checks=false",
    "profile.release.incremental=false",
    "profile.release.strip=\"none\"",
];

/// The rust-cuda PTX of `b`'s config row, from `dir` (`scripts/rust-cuda-build.sh`), retargeted
/// to `b.target` when that is older (the config probes: ptxas then checks that every
/// instruction exists there).
fn rust_cuda_ptx(dir: &Path, b: Build) -> String {
    let path = dir.join(format!("{}.{}.ptx", b.family.name(), b.config.name()));
    let ptx = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cukernels: the rust-cuda PTX {} cannot be read ({e}); run scripts/rust-cuda-build.sh", path.display()));
    let built_for = format!(".target {}", b.config.name());
    assert!(ptx.lines().any(|l| l.trim() == built_for), "cukernels: {} was not compiled for {} (no `{built_for}` line)", path.display(), b.config);
    if b.target == b.config {
        return ptx;
    }
    ptx.lines()
        .map(|l| if l.trim() == built_for { format!(".target {}", b.target.ptx_target()) } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Refuses rust-cuda PTX older than any device source: it would embed other kernels than the
/// ones this build describes (the rust-cuda crate rebuilds it whenever those sources change).
fn check_rust_cuda_ptx(dir: &Path, source_dir: &Path) {
    fn newest(dir: &Path) -> std::time::SystemTime {
        let mut t = std::time::UNIX_EPOCH;
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let m = if path.is_dir() { newest(&path) } else { entry.metadata().and_then(|m| m.modified()).unwrap_or(t) };
            t = t.max(m);
        }
        t
    }
    let sources = newest(&source_dir.join("src"));
    for family in KernelFamily::ALL {
        for arch in RUST_CUDA_ARCHS {
            let path = dir.join(format!("{}.{}.ptx", family.name(), arch.name()));
            println!("cargo:rerun-if-changed={}", path.display());
            let built = std::fs::metadata(&path).and_then(|m| m.modified()).unwrap_or_else(|e| {
                panic!("cukernels: the rust-cuda PTX {} cannot be read ({e}); run scripts/rust-cuda-build.sh", path.display())
            });
            if built < sources {
                panic!("cukernels: the rust-cuda PTX {} is older than the device sources; run scripts/rust-cuda-build.sh again", path.display());
            }
        }
    }
}

fn compile_ptx(crate_dir: &Path, out_dir: &Path, b: Build) -> String {
    let target_dir = out_dir.join("nvptx").join(b.stem());
    let rustflags = format!(
        "-C target-cpu={} -C llvm-args=-unroll-threshold={} --cfg cukernels_config=\"{}\" --cfg cukernels_family=\"{}\"",
        b.target.ptx_target(),
        b.family.unroll_threshold(),
        b.config.name(),
        b.family.name()
    );
    let mut cmd = Command::new("rustup");
    for (key, _) in std::env::vars_os() {
        if let Some(k) = key.to_str() {
            if is_inherited_build_var(k) {
                cmd.env_remove(k);
            }
        }
    }
    cmd.current_dir(crate_dir).args(["run", DEVICE_TOOLCHAIN, "cargo", "rustc", "--release", "--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"]);
    for setting in DEVICE_PROFILE {
        cmd.args(["--config", setting]);
    }
    cmd.arg("--target-dir")
        .arg(&target_dir)
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .args(["--", "--emit=asm"])
        .env("RUSTFLAGS", rustflags);
    let ptx_path = target_dir.join("nvptx64-nvidia-cuda/release/deps/cukernels_gpu.s");
    let _ = std::fs::remove_file(&ptx_path);
    let out = cmd.output().unwrap_or_else(|e| panic!("cukernels: cannot run rustup: {e}; {}", install_hint()));
    // The final link of the cdylib fails for lack of a bitcode linker, after the PTX (`.s`) is
    // written; that failure is expected. No PTX means the compilation itself failed: show the
    // compiler's own messages.
    if !ptx_path.exists() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        panic!("cukernels: compiling the device code of `{}` for {} (config {}) failed:\n{stderr}", b.family, b.target, b.config);
    }
    std::fs::read_to_string(&ptx_path).unwrap()
}

/// Adds `.maxntid` and `.minnctapersm` to each entry point of the family: the equivalent of
/// CUDA's `__launch_bounds__(threads, blocks_per_sm)`, taken from the config row the PTX was
/// built with. ptxas (and the driver's JIT) then fit the registers to the designed occupancy.
fn with_launch_bounds(ptx: &str, b: Build) -> String {
    let specs: Vec<_> = (0..b.family.kernel_count()).map(|i| b.family.kernel(b.config, i)).collect();
    let mut out = String::with_capacity(ptx.len() + 512);
    let mut pending: Option<String> = None;
    let mut placed = 0;
    for line in ptx.lines() {
        if let Some(rest) = line.strip_prefix(".visible .entry ") {
            let name = rest.split('(').next().unwrap_or("").trim();
            pending = specs.iter().find(|k| k.entry_point == name).map(|k| format!(".maxntid {}, 1, 1\n.minnctapersm {}\n", k.threads, k.blocks_per_sm));
        }
        if line.trim() == "{" {
            if let Some(bounds) = pending.take() {
                out += &bounds;
                placed += 1;
            }
        }
        out += line;
        out.push('\n');
    }
    assert!(placed == specs.len(), "cukernels: launch bounds placed on {placed} of the {} entry points of {}", specs.len(), b.stem());
    out
}
