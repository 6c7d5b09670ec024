//! The report printed without a GPU: each architecture's SGEMM configs, and what ptxas makes of
//! every entry point of every kernel family's embedded PTX modules. Column meanings are in
//! README.md ("Reading the report").

use crate::resources::{find_ptxas, known_rust_cuda_spills, ptxas_resources, KernelResources};
use cukernels::{artifacts, decode_features_per_warp, direct_features_per_warp, moe_config, sgemm_config, Arch, ArtifactKind, Compiler, GgufFormat, MoePath, MoeTile, SgemmVariant};
use std::fmt::Write;

/// The config table: one line per (architecture, variant).
pub fn config_table() -> String {
    let mut s = String::new();
    writeln!(s, "SGEMM configs (block tile bm x bn x bk, thread tile tm x tn, warp tile, threads, stages, designed blocks/SM, k split, edge tiles)").unwrap();
    writeln!(
        s,
        "{:<7} {:<7} {:>13} {:>7} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6}",
        "arch", "variant", "block", "thread", "warp", "threads", "stages", "smem B", "blk/SM", "pipeline", "k split", "edges"
    )
    .unwrap();
    for arch in Arch::ALL {
        let row = sgemm_config(arch);
        for v in SgemmVariant::TILED {
            let t = row.tile(v);
            writeln!(
                s,
                "{:<7} {:<7} {:>13} {:>7} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6}",
                arch.name(),
                v.name(),
                format!("{}x{}x{}", t.bm, t.bn, t.bk),
                format!("{}x{}", t.tm, t.tn),
                format!("{}x{}", t.warp_tile_m(), t.warp_tile_n()),
                t.threads(),
                t.stages,
                t.smem_bytes(),
                t.blocks_per_sm,
                if arch.limits().has_cp_async { "cp.async" } else { "regs x2" },
                // `c<=8`: over a cluster of up to 8 blocks; `w`: through a workspace.
                match (t.can_split_k(&arch.limits()), t.splits_k()) {
                    (true, _) => format!("c<={}+w", cukernels::MAX_K_SPLITS),
                    (false, true) => "w".to_string(),
                    (false, false) => "-".to_string(),
                },
                if t.moves_edge_tiles() { "moved" } else { "zeros" }
            )
            .unwrap();
        }
        // The streaming kernel's two bodies: the column body (B n-contiguous: 32 columns per
        // block, k over the warps, loads in flight per lane for m ≥ 3 / m ≤ 2) and the dot body
        // (B k-contiguous: dot_columns rows of B per warp, k over 1 to `warps` warps by k's
        // length, 16-byte loads in flight per lane × rows of B per warp).
        let g = row.gemv;
        let bodies = [
            ("gemv", format!("<={}x{}xk", cukernels::GEMV_MAX_M, cukernels::GEMV_COLUMNS), format!("k/{}", g.warps), format!("u{}/{}", g.unroll, g.unroll_narrow)),
            (
                "gemv.dot",
                format!("<={}x{}-{}xk", cukernels::GEMV_MAX_M, g.dot_columns, g.warps * g.dot_columns),
                format!("k/1-{}", g.warps),
                format!("u{}x{}", g.dot_unroll, g.dot_columns),
            ),
        ];
        for (name, block, split, loads) in bodies {
            writeln!(
                s,
                "{:<7} {:<7} {:>13} {:>7} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6}",
                arch.name(),
                name,
                block,
                "-",
                split,
                g.threads(),
                loads,
                g.smem_bytes(),
                g.blocks_per_sm,
                "stream",
                "-",
                "-"
            )
            .unwrap();
        }
        // The tiny kernel: 4×4 pieces of C per thread (or per team of lanes splitting k), no
        // shared memory.
        let t = row.tiny;
        writeln!(
            s,
            "{:<7} {:<7} {:>13} {:>7} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8} {:>8} {:>6}",
            arch.name(),
            "tiny",
            "-",
            format!("{}x{}", cukernels::TINY_TILE, cukernels::TINY_TILE),
            "-",
            t.threads(),
            format!("u{}", t.unroll),
            0,
            t.blocks_per_sm,
            "direct",
            "lanes",
            "reread"
        )
        .unwrap();
    }
    writeln!(s, "\nMoE mul_mat_id configs (tile rows x features, warps x features per warp, engine, smem, designed blocks/SM; direct path up to the slots shown (* light formats; the others at 1 row per expert), then decode up to the average rows per expert shown, then tiled, tall tiles from the average rows per expert shown)").unwrap();
    writeln!(s, "{:<7} {:<7} {:>10} {:>7} {:<13} {:>7} {:>7} {:>11}", "arch", "path", "tile", "warps", "engine", "smem B", "blk/SM", "up to").unwrap();
    for arch in Arch::ALL {
        let row = moe_config(arch);
        for path in MoePath::ALL {
            // The decode and direct tiles' features per warp depend on the format (listed below).
            let t = row.tile(path, GgufFormat::Q4_0);
            let bound = match path {
                MoePath::Direct => format!("{}sl {}/exp|{}sl*", row.direct_max_slots, row.direct_max_rows, row.direct_any_rows_slots),
                MoePath::Decode => format!("{} rows/exp", row.decode_max_rows),
                MoePath::Tiled => "-".to_string(),
                MoePath::TiledTall => format!("from {} rows/exp", row.tall_min_rows),
            };
            writeln!(
                s,
                "{:<7} {:<7} {:>10} {:>7} {:<13} {:>7} {:>7} {:>11}",
                arch.name(),
                path.name(),
                format!("{}x{}", t.rows, t.features()),
                format!("{}x{}", t.warps, t.features_per_warp),
                t.engine.name(),
                t.smem_bytes(),
                t.blocks_per_sm,
                bound
            )
            .unwrap();
        }
        // The tensor-core tiles may also differ by format (`MoeArchConfig::tall_half_scales`):
        // one line per tile other than q4_0's, with its formats.
        for path in [MoePath::Tiled, MoePath::TiledTall] {
            let q4_0_tile = row.tile(path, GgufFormat::Q4_0);
            let mut tiles: Vec<MoeTile> = Vec::new();
            for f in GgufFormat::ALL {
                let t = row.tile(path, f);
                if t != q4_0_tile && !tiles.contains(&t) {
                    tiles.push(t);
                }
            }
            for t in tiles {
                let formats: Vec<String> = GgufFormat::ALL.iter().filter(|&&f| row.tile(path, f) == t).map(|f| f.to_string()).collect();
                writeln!(s, "{:<7} {} tile of {}: {}x{}, {}x{} warps x features, {} B, {} blk/SM", arch.name(), path.name(), formats.join(", "), t.rows, t.features(), t.warps, t.features_per_warp, t.smem_bytes(), t.blocks_per_sm).unwrap();
            }
        }
        for (path, features) in [("decode", decode_features_per_warp as fn(Arch, GgufFormat) -> u32), ("direct", direct_features_per_warp)] {
            let per_format: Vec<String> = GgufFormat::ALL.iter().map(|&f| format!("{f} {}", features(arch, f))).collect();
            writeln!(s, "{:<7} {path} features per warp by format (the rows show q4_0's): {}", arch.name(), per_format.join(", ")).unwrap();
        }
    }
    s
}

/// Runs ptxas on every embedded PTX module of every family; returns the resources and the
/// printed table (one line per (module, entry point)).
pub fn resource_table() -> Result<(Vec<KernelResources>, String), String> {
    let ptxas = find_ptxas()?;
    let mut all = Vec::new();
    for module in artifacts::embedded().iter().filter(|a| a.kind == ArtifactKind::Ptx) {
        all.extend(ptxas_resources(&ptxas, module)?);
    }
    let family_w = all.iter().map(|k| k.family.name().len()).chain(["family".len()]).max().unwrap_or(0);
    let kernel_w = all.iter().map(|k| k.kernel.len()).chain(["kernel".len()]).max().unwrap_or(0);
    let known = known_rust_cuda_spills();
    let mut s = String::new();
    writeln!(s, "ptxas resources ({}), per kernel", ptxas.display()).unwrap();
    writeln!(
        s,
        "{:<7} {:<7} {:<9} {:<family_w$} {:<kernel_w$} {:>5} {:>7} {:>7} {:>9} {:>7} {:>8} {:>6}",
        "target", "config", "build", "family", "kernel", "regs", "stack B", "spill B", "smem B", "blk/SM", "designed", "ok"
    )
    .unwrap();
    for k in &all {
        writeln!(
            s,
            "{:<7} {:<7} {:<9} {:<family_w$} {:<kernel_w$} {:>5} {:>7} {:>7} {:>9} {:>7} {:>8} {:>6}",
            k.target.name(),
            k.config.name(),
            k.compiler.name(),
            k.family.name(),
            k.kernel,
            k.registers,
            k.stack_frame,
            k.spill_stores + k.spill_loads,
            k.static_smem + k.dynamic_smem,
            k.blocks_per_sm(),
            k.designed_blocks_per_sm,
            if k.checked_violations(&known).is_empty() { if k.stack_frame > 0 { "known" } else { "yes" } } else { "NO" }
        )
        .unwrap();
    }
    s += &compiler_comparison(&all);
    Ok((all, s))
}

/// Where the build embeds the rust-cuda modules: each of their kernels beside the nvptx build of
/// the same target and config (registers, stack frame, spills), and how many kernels use more
/// or fewer registers. Empty otherwise.
pub fn compiler_comparison(all: &[KernelResources]) -> String {
    let rust_cuda: Vec<&KernelResources> = all.iter().filter(|k| k.compiler == Compiler::RustCuda).collect();
    if rust_cuda.is_empty() {
        return String::new();
    }
    let kernel_w = rust_cuda.iter().map(|k| k.kernel.len()).max().unwrap_or(0);
    let mut s = String::new();
    writeln!(s, "\nrust-cuda beside nvptx (registers / stack B / spill B)").unwrap();
    writeln!(s, "{:<7} {:<7} {:<kernel_w$} {:>17} {:>17}", "target", "config", "kernel", "nvptx", "rust-cuda").unwrap();
    let (mut more, mut fewer, mut same) = (0, 0, 0);
    for r in &rust_cuda {
        let nvptx = all.iter().find(|k| k.compiler == Compiler::Nvptx && k.target == r.target && k.config == r.config && k.kernel == r.kernel);
        let cell = |k: &KernelResources| format!("{} / {} / {}", k.registers, k.stack_frame, k.spill_stores + k.spill_loads);
        let left = nvptx.map(|k| cell(k)).unwrap_or_else(|| "(not built)".into());
        writeln!(s, "{:<7} {:<7} {:<kernel_w$} {:>17} {:>17}", r.target.name(), r.config.name(), r.kernel, left, cell(r)).unwrap();
        if let Some(n) = nvptx {
            match r.registers.cmp(&n.registers) {
                std::cmp::Ordering::Greater => more += 1,
                std::cmp::Ordering::Less => fewer += 1,
                std::cmp::Ordering::Equal => same += 1,
            }
        }
    }
    writeln!(s, "rust-cuda kernels: {} ({more} with more registers than nvptx's, {fewer} with fewer, {same} the same)", rust_cuda.len()).unwrap();
    s
}
