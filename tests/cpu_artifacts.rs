//! The build and load machinery, without a GPU: which artifact every compute capability gets,
//! what a `from-source` build embeds, that the packaged artifacts (`host/artifacts`) are exactly
//! what the sources build today (the manifest check), the launch ABI against the PTX, and the
//! load-time limit check.

use cukernels::artifacts::{self, choose, runs_on, ArtifactKind, Compiler};
use cukernels::{check_kernel_limits, Arch, KernelFamily, KernelSpec, LoadedKernelAttributes, SgemmParams, SGEMM_KERNELS, sgemm_config};
use std::collections::BTreeMap;

use ArtifactKind::{Cubin, Ptx};

/// What the package ships: a cubin per architecture, PTX of sm_100 and sm_120.
fn packaged_set() -> Vec<(Arch, ArtifactKind)> {
    let mut set: Vec<_> = Arch::ALL.iter().map(|&a| (a, Cubin)).collect();
    set.extend([(Arch::Sm100, Ptx), (Arch::Sm120, Ptx)]);
    set
}

#[test]
fn every_compute_capability_from_7_0_to_12_1_gets_the_right_artifact() {
    let set = packaged_set();
    // (major, minor) → what it must load; every minor 0..=9 of every major 7..=12 is covered
    // by the ranges below, and so is what lies past them.
    let expected = |major: u32, minor: u32| -> Option<(Arch, ArtifactKind)> {
        match (major, minor) {
            (7, 0..=4) => Some((Arch::Sm70, Cubin)),
            (7, _) => Some((Arch::Sm75, Cubin)),
            (8, 0..=5) => Some((Arch::Sm80, Cubin)),
            (8, 6..=8) => Some((Arch::Sm86, Cubin)),
            (8, _) => Some((Arch::Sm89, Cubin)),
            (9, _) => Some((Arch::Sm90, Cubin)),
            (10, _) => Some((Arch::Sm100, Cubin)),
            // No cubin of major 11 (Jetson Thor): sm_100's PTX, JIT-compiled.
            (11, _) => Some((Arch::Sm100, Ptx)),
            (12, _) => Some((Arch::Sm120, Cubin)),
            // Newer than everything built: the newest PTX.
            (13.., _) => Some((Arch::Sm120, Ptx)),
            _ => None,
        }
    };
    for major in 5..=14 {
        for minor in 0..=9 {
            assert_eq!(choose(&set, major, minor), expected(major, minor), "compute capability {major}.{minor}");
        }
    }
    // Named devices.
    for (cc, want) in [
        ((7, 0), (Arch::Sm70, Cubin)),  // V100
        ((7, 2), (Arch::Sm70, Cubin)),  // Xavier
        ((7, 5), (Arch::Sm75, Cubin)),  // T4
        ((8, 0), (Arch::Sm80, Cubin)),  // A100
        ((8, 6), (Arch::Sm86, Cubin)),  // RTX 30, A10
        ((8, 7), (Arch::Sm86, Cubin)),  // Orin
        ((8, 9), (Arch::Sm89, Cubin)),  // RTX 40, L4
        ((9, 0), (Arch::Sm90, Cubin)),  // H100, H200
        ((10, 0), (Arch::Sm100, Cubin)), // B200
        ((10, 3), (Arch::Sm100, Cubin)), // B300
        ((11, 0), (Arch::Sm100, Ptx)),   // Thor
        ((12, 0), (Arch::Sm120, Cubin)), // RTX 50
        ((12, 1), (Arch::Sm120, Cubin)), // GB10
    ] {
        assert_eq!(choose(&set, cc.0, cc.1), Some(want), "{cc:?}");
    }
    // A cubin never crosses a major version; PTX runs on anything not older than its target.
    assert!(!runs_on(Arch::Sm90, Cubin, 10, 0));
    assert!(!runs_on(Arch::Sm86, Cubin, 8, 0));
    assert!(runs_on(Arch::Sm70, Ptx, 9, 0));
    assert!(!runs_on(Arch::Sm100, Ptx, 9, 0));
    // A from-source build embeds PTX of every architecture: still the cubin first.
    let mut all = set.clone();
    all.extend(Arch::ALL.iter().map(|&a| (a, Ptx)));
    assert_eq!(choose(&all, 8, 7), Some((Arch::Sm86, Cubin)));
    assert_eq!(choose(&all, 11, 0), Some((Arch::Sm100, Ptx)));
    // A build limited to sm_80: the sm_80 cubin on an RTX 40, its PTX on an H200.
    let partial = [(Arch::Sm80, Cubin), (Arch::Sm80, Ptx)];
    assert_eq!(choose(&partial, 8, 9), Some((Arch::Sm80, Cubin)));
    assert_eq!(choose(&partial, 9, 0), Some((Arch::Sm80, Ptx)));
    assert_eq!(choose(&partial, 7, 5), None);
    assert!(matches!(artifacts::for_device(KernelFamily::Sgemm, 6, 1), Err(cukernels::Error::UnsupportedDevice { major: 6, minor: 1 })));
}

/// The `from-source` build of the tests embeds, for every family, a cubin and PTX of every
/// architecture and of both config probes; each is what it claims to be.
#[test]
fn a_from_source_build_embeds_every_architecture_both_kinds_and_the_probes() {
    assert!(artifacts::FROM_SOURCE, "the tests build the device code from source");
    let partial = std::env::var_os("CUKERNELS_ARCHS").is_some();
    for family in KernelFamily::ALL {
        let mut builds: Vec<(Arch, Arch)> = Arch::ALL.iter().map(|&a| (a, a)).collect();
        builds.extend([(Arch::Sm90, Arch::Sm100), (Arch::Sm90, Arch::Sm120)]);
        for (target, config) in builds {
            for kind in [Cubin, Ptx] {
                let a = match artifacts::find(family, target, config, kind) {
                    Ok(a) => a,
                    Err(e) if partial => {
                        eprintln!("CUKERNELS_ARCHS is set (a partial build): {e}");
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                let bytes = a.bytes().unwrap();
                assert_eq!(bytes.len(), a.raw_len);
                match kind {
                    Cubin => {
                        // ELF, machine EM_CUDA (190), the SM number in e_flags: its low byte up
                        // to sm_90, the next byte in the newer layout ptxas uses from sm_100.
                        assert_eq!(&bytes[..4], b"\x7fELF", "{a}");
                        assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190, "{a}");
                        let e_flags = u32::from_le_bytes(bytes[48..52].try_into().unwrap());
                        let sm = if target.sm() < 100 { e_flags & 0xff } else { (e_flags >> 8) & 0xff };
                        assert_eq!(sm, target.sm(), "{a}: e_flags {e_flags:#x}");
                    }
                    Ptx => {
                        let text = String::from_utf8(bytes).unwrap();
                        assert!(text.contains(&format!(".target {}", target.ptx_target())), "{a}");
                        assert!(text.contains(".extern .shared .align 128 .b8"), "{a}: dynamic shared memory must be 128-byte aligned");
                        // Launch bounds from the config row the module was built with.
                        for index in 0..family.kernel_count() {
                            let spec = family.kernel(config, index);
                            let entry = format!(".entry {}(", spec.entry_point);
                            let at = text.find(&entry).unwrap_or_else(|| panic!("{a} lacks {entry}"));
                            let head = &text[at..at + text[at..].find('{').unwrap()];
                            assert!(head.contains(&format!(".maxntid {}, 1, 1", spec.threads)), "launch bounds of {entry} in {a}");
                            assert!(head.contains(&format!(".minnctapersm {}", spec.blocks_per_sm)), "launch bounds of {entry} in {a}");
                        }
                    }
                }
            }
        }
    }
}

/// The parameters of every SGEMM entry point, as the PTX declares them, are the fields of
/// `SgemmParams` in order and size: the host's kernel arguments cannot disagree with them.
#[test]
fn every_entry_point_takes_exactly_the_fields_of_its_parameter_struct() {
    let ptx_size = |decl: &str| -> usize {
        let ty = decl.split_whitespace().nth(1).unwrap_or("");
        match &ty[ty.len().saturating_sub(2)..] {
            "64" => 8,
            "32" => 4,
            "16" => 2,
            _ => panic!("unexpected parameter `{decl}`"),
        }
    };
    let mut checked = 0;
    for a in artifacts::embedded().iter().filter(|a| a.kind == Ptx) {
        let text = String::from_utf8(a.bytes().unwrap()).unwrap();
        let fields: &[usize] = match a.family {
            KernelFamily::Sgemm => &SgemmParams::FIELD_SIZES,
            KernelFamily::Attention => &cukernels::AttentionParams::FIELD_SIZES,
            KernelFamily::Moe => &cukernels::MoeParams::FIELD_SIZES,
        };
        for i in 0..a.family.kernel_count() {
            let k = a.family.kernel(a.config, i);
            let entry = format!(".entry {}(", k.entry_point);
            let at = text.find(&entry).unwrap_or_else(|| panic!("{} missing from {a}", k.entry_point)) + entry.len();
            let params = &text[at..at + text[at..].find(')').unwrap()];
            let sizes: Vec<usize> = params.split(',').map(|p| p.trim()).filter(|p| !p.is_empty()).map(ptx_size).collect();
            assert_eq!(sizes, fields.to_vec(), "{} in {a}", k.entry_point);
            checked += 1;
        }
    }
    assert!(checked >= SGEMM_KERNELS.len() + cukernels::ATTENTION_KERNELS.len() + cukernels::MOE_KERNELS.len());
    // The host passes one pointer per field, each pointing at its field.
    let mut p = SgemmParams {
        a: cukernels::GlobalPtr::new(1),
        b: cukernels::GlobalPtr::new(2),
        c: cukernels::GlobalPtr::new(3),
        m: 4,
        n: 5,
        k: 6,
        lda: 7,
        ldb: 8,
        ldc: 9,
        stride_a: 10,
        stride_b: 11,
        stride_c: 12,
        batch: 13,
        flags: 14,
        alpha: 15.0,
        beta: 16.0,
        split_partials: cukernels::GlobalPtr::new(17),
        split_counters: cukernels::GlobalPtr::new(18),
    };
    let args = p.kernel_args();
    assert_eq!(args.len(), SgemmParams::FIELD_SIZES.len());
    // SAFETY: each pointer points at a field of `p` of the size FIELD_SIZES gives.
    let read = |i: usize| unsafe {
        match SgemmParams::FIELD_SIZES[i] {
            8 => *(args[i] as *const u64),
            _ => *(args[i] as *const u32) as u64,
        }
    };
    let values: Vec<u64> = (0..args.len()).map(read).collect();
    assert_eq!(values[..14], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    assert_eq!(f32::from_bits(values[14] as u32), 15.0);
    assert_eq!(f32::from_bits(values[15] as u32), 16.0);
    assert_eq!(values[16..], [17, 18]);
}

/// One packaged manifest line: (family, target, config, kind) → raw SHA-256 (every packaged
/// artifact is the nvptx build's).
fn manifest_entries(text: &str) -> BTreeMap<(String, String, String, String), String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("artifact: "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 9, "manifest line `{l}`");
            assert_eq!(f[4], "nvptx", "manifest line `{l}`: only the nvptx build ships");
            ((f[0].into(), f[1].into(), f[2].into(), f[3].into()), f[7].into())
        })
        .collect()
}

/// CI rebuilds the artifacts from source (this test binary's build) and fails if the packaged
/// ones differ: same device sources, and every packaged cubin and PTX byte-identical
/// (SHA-256 of the decompressed bytes) to the one built now. Regenerate with
/// `scripts/build-artifacts.sh`.
#[test]
fn packaged_artifacts_are_exactly_what_the_sources_build() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../host/artifacts");
    let text = std::fs::read_to_string(format!("{dir}/manifest.txt")).expect("host/artifacts/manifest.txt is committed");
    let packaged_from = text.lines().find_map(|l| l.strip_prefix("source_sha256: ")).unwrap();
    let hint = "the packaged artifacts are stale: run scripts/build-artifacts.sh and commit host/artifacts";
    assert_eq!(packaged_from, artifacts::SOURCE_SHA256, "{hint}");
    for l in ["device_toolchain: nightly-2026-05-20", "ptxas: Cuda compilation tools, release 12.9, V12.9.86"] {
        assert!(text.lines().any(|x| x.starts_with(l)), "manifest lacks `{l}`");
    }
    let packaged = manifest_entries(&text);
    let expected: Vec<(String, String, String, String)> = KernelFamily::ALL
        .iter()
        .flat_map(|f| packaged_set().into_iter().map(move |(a, k)| (f.name().into(), a.name().into(), a.name().into(), k.name().into())))
        .collect();
    assert_eq!(packaged.keys().cloned().collect::<Vec<_>>(), { let mut e = expected.clone(); e.sort(); e }, "the packaged set");
    if std::env::var_os("CUKERNELS_ARCHS").is_some() {
        eprintln!("CUKERNELS_ARCHS is set: a partial build cannot be compared with the package");
        return;
    }
    for ((family, target, config, kind), sha) in &packaged {
        let built = artifacts::embedded()
            .iter()
            .find(|a| a.family.name() == family && a.target.name() == target && a.config.name() == config && a.kind.name() == kind && a.compiler == Compiler::Nvptx)
            .unwrap_or_else(|| panic!("{family} {kind} {target} is packaged but not built"));
        assert_eq!(sha, built.sha256, "{built}: {hint}");
        // The file on disk decompresses to those bytes (the packaged build checks it too).
        let file = format!("{dir}/{family}.{target}.{kind}.zst");
        let raw = cukernels::artifacts::decompress(&std::fs::read(&file).unwrap(), 64 << 20).unwrap();
        assert_eq!(raw, built.bytes().unwrap(), "{file}: {hint}");
    }
    // Within crates.io's 10 MB package limit, with room for the rest of the crate (the
    // sources compress to about 0.2 MB; scripts/check-package.sh checks the .crate itself).
    // With the attention family the artifacts reached 9.0 MiB as deflate; as zstd (level 19)
    // they take 5.3 MB, which leaves room for the MoE family.
    let total: u64 = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(total < 9_700_000, "host/artifacts holds {total} bytes");
}

#[test]
fn the_load_time_check_refuses_spills_small_blocks_and_lost_occupancy() {
    let spec = KernelFamily::Sgemm.kernel(Arch::Sm90, 0);
    assert_eq!(spec, KernelSpec { entry_point: SGEMM_KERNELS[0].entry_point, ..spec });
    let launch = sgemm_config(Arch::Sm90).launch(SGEMM_KERNELS[0].variant);
    assert_eq!((spec.threads, spec.blocks_per_sm, spec.smem_bytes), (launch.threads, launch.blocks_per_sm, launch.smem_bytes));
    let good = LoadedKernelAttributes { registers: 200, local_bytes: 0, max_threads_per_block: spec.threads, blocks_per_sm: spec.blocks_per_sm };
    assert_eq!(check_kernel_limits(&spec, &good), Ok(()));
    let spills = check_kernel_limits(&spec, &LoadedKernelAttributes { local_bytes: 32, ..good }).unwrap_err();
    assert!(spills.contains("32 bytes of local memory"), "{spills}");
    let small = check_kernel_limits(&spec, &LoadedKernelAttributes { max_threads_per_block: spec.threads / 2, ..good }).unwrap_err();
    assert!(small.contains("threads per block"), "{small}");
    if spec.blocks_per_sm > 0 {
        let lost = check_kernel_limits(&spec, &LoadedKernelAttributes { blocks_per_sm: spec.blocks_per_sm - 1, ..good }).unwrap_err();
        assert!(lost.contains(&format!("designed for {}", spec.blocks_per_sm)), "{lost}");
    }
    // More than designed is fine.
    assert_eq!(check_kernel_limits(&spec, &LoadedKernelAttributes { blocks_per_sm: spec.blocks_per_sm + 3, ..good }), Ok(()));
}
