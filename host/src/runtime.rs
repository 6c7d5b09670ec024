//! The handle that owns a CUDA context's cukernels modules: one module per kernel family
//! ([`KernelFamily`]), each chosen when the handle is made (a cubin for the device's
//! architecture, else PTX: [`crate::artifacts`]), loaded lazily on the family's first launch
//! (or by [`Cukernels::preload`]), and checked against its config before any launch.

use crate::artifacts::{self, Artifact, ArtifactKind, Compiler};
use crate::error::{Error, Result};
use crate::workspace::OwnWorkspace;
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cukernels_gpu::{
    attention_config, attention_kernel_index, sgemm_config, sgemm_kernel_index, Arch, AttentionArchConfig, AttentionDtype, AttentionHead, AttentionTileKind, KernelFamily, KernelSpec,
    SgemmArchConfig, SgemmOperands, SgemmVariant,
};
use std::sync::{Arc, Mutex, OnceLock};

/// Opens CUDA device `ordinal`, or says why not (no driver, no such device) instead of
/// panicking as `CudaContext::new` does without a driver.
pub fn device_context(ordinal: usize) -> Result<Arc<CudaContext>> {
    // SAFETY: only tries to dlopen the driver library; no other state is touched.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Error::NoDriver);
    }
    Ok(CudaContext::new(ordinal)?)
}

/// cukernels on one CUDA context. Cheap to clone; clones share the loaded modules. `Send` and
/// `Sync`: one handle may serve every thread of a process.
#[derive(Clone)]
pub struct Cukernels {
    inner: Arc<Inner>,
}

const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Cukernels>();
};

struct Inner {
    ctx: Arc<CudaContext>,
    /// Compute capability of the device.
    capability: (u32, u32),
    sm_count: u32,
    /// Per family (in [`KernelFamily::ALL`] order): the artifact chosen for it, and its module
    /// once loaded.
    families: Vec<FamilyModule>,
}

struct FamilyModule {
    artifact: &'static Artifact,
    loaded: OnceLock<Loaded>,
    loading: Mutex<()>,
    /// The family's own workspace ([`Cukernels::own_workspace`]), set when its module loads.
    own_workspace: OnceLock<Result<OwnWorkspace>>,
}

struct Loaded {
    _module: Arc<CudaModule>,
    /// One function per entry point of the family, in [`KernelFamily::kernel`] order.
    functions: Vec<CudaFunction>,
}

/// What the driver reports of one loaded function, checked by [`check_kernel_limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadedKernelAttributes {
    /// Registers per thread.
    pub registers: u32,
    /// Local memory per thread (stack frame and spills), bytes.
    pub local_bytes: u32,
    /// The largest block the function can be launched with.
    pub max_threads_per_block: u32,
    /// Blocks of the designed size and shared memory that fit on one SM
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    pub blocks_per_sm: u32,
}

/// The load-time check of one function against its config: no local memory (a stack array or
/// spills: the kernels keep everything in registers and shared memory), its designed block size
/// allowed, and its designed occupancy reached. The driver's JIT is not the `ptxas` that CI
/// checked, and a device is not always the architecture a config was written for, so this is
/// checked on the device itself, once per load.
pub fn check_kernel_limits(spec: &KernelSpec, attributes: &LoadedKernelAttributes) -> std::result::Result<(), String> {
    let a = attributes;
    if a.local_bytes > 0 {
        return Err(format!("{} bytes of local memory per thread (spills or a stack array; must be 0), {} registers", a.local_bytes, a.registers));
    }
    if a.max_threads_per_block < spec.threads {
        return Err(format!("at most {} threads per block with {} registers; it is launched with {}", a.max_threads_per_block, a.registers, spec.threads));
    }
    if a.blocks_per_sm < spec.blocks_per_sm {
        return Err(format!(
            "{} blocks of {} threads and {} B of shared memory fit on an SM ({} registers); it was designed for {}",
            a.blocks_per_sm, spec.threads, spec.smem_bytes, a.registers, spec.blocks_per_sm
        ));
    }
    Ok(())
}

impl Cukernels {
    /// A handle for `ctx` that runs, for each family, the artifact chosen for the device
    /// ([`artifacts::for_device`]: its architecture's cubin, else PTX). Nothing is loaded until
    /// a family's first launch.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let (major, minor) = capability(ctx)?;
        let families = KernelFamily::ALL.iter().map(|&f| artifacts::for_device(f, major, minor)).collect::<Result<Vec<_>>>()?;
        Self::with_artifacts(ctx, (major, minor), families)
    }

    /// A handle that runs the kernels compiled for `target` with the config row of `config`,
    /// as a cubin where one runs on this device, else as PTX: runs older architectures'
    /// configs on a newer GPU (the sm_70 config on an H200), and, with the `config-probes`
    /// feature, the sm_100/sm_120 rows built for sm_90.
    pub fn with_config(ctx: &Arc<CudaContext>, target: Arch, config: Arch) -> Result<Self> {
        let (major, minor) = capability(ctx)?;
        let kind = if artifacts::runs_on(target, ArtifactKind::Cubin, major, minor) { ArtifactKind::Cubin } else { ArtifactKind::Ptx };
        Self::with_artifact(ctx, target, config, kind)
    }

    /// As [`with_config`](Self::with_config), with the kind of artifact forced: `Ptx` makes the
    /// driver JIT-compile the kernels even where a cubin would run (tests of the PTX path,
    /// the load benchmark).
    pub fn with_artifact(ctx: &Arc<CudaContext>, target: Arch, config: Arch, kind: ArtifactKind) -> Result<Self> {
        Self::with_build(ctx, target, config, kind, None)
    }

    /// As [`with_artifact`](Self::with_artifact), with the compiler of the kernels chosen too
    /// (a build that embeds both the nvptx and the rust-cuda sm_100/sm_120 modules: tests and
    /// benchmarks of one beside the other).
    pub fn with_compiled_artifact(ctx: &Arc<CudaContext>, target: Arch, config: Arch, kind: ArtifactKind, compiler: Compiler) -> Result<Self> {
        Self::with_build(ctx, target, config, kind, Some(compiler))
    }

    fn with_build(ctx: &Arc<CudaContext>, target: Arch, config: Arch, kind: ArtifactKind, compiler: Option<Compiler>) -> Result<Self> {
        let (major, minor) = capability(ctx)?;
        if !artifacts::runs_on(target, kind, major, minor) {
            return Err(Error::invalid("target", target, format!("a {kind} for {target} cannot run on a device of compute capability {major}.{minor}")));
        }
        let pick = |f| match compiler {
            Some(c) => artifacts::find_compiled(f, target, config, kind, c),
            None => artifacts::find(f, target, config, kind),
        };
        let families = KernelFamily::ALL.iter().map(|&f| pick(f)).collect::<Result<Vec<_>>>()?;
        Self::with_artifacts(ctx, (major, minor), families)
    }

    fn with_artifacts(ctx: &Arc<CudaContext>, capability: (u32, u32), chosen: Vec<&'static Artifact>) -> Result<Self> {
        let sm_count = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let families = chosen.into_iter().map(|artifact| FamilyModule { artifact, loaded: OnceLock::new(), loading: Mutex::new(()), own_workspace: OnceLock::new() }).collect();
        Ok(Cukernels { inner: Arc::new(Inner { ctx: ctx.clone(), capability, sm_count, families }) })
    }

    /// The CUDA context of this handle.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }
    /// The artifact this handle runs for `family` (cubin or PTX, its architecture and config).
    pub fn artifact(&self, family: KernelFamily) -> &'static Artifact {
        self.inner.families[family.index()].artifact
    }
    /// The architecture of the SGEMM artifact this handle runs.
    pub fn target(&self) -> Arch {
        self.artifact(KernelFamily::Sgemm).target
    }
    /// The config row this handle's SGEMM kernels were compiled with.
    pub fn config(&self) -> Arch {
        self.artifact(KernelFamily::Sgemm).config
    }
    /// The SGEMM config row this handle's kernels were compiled with.
    pub fn sgemm_config(&self) -> &'static SgemmArchConfig {
        sgemm_config(self.config())
    }
    /// The attention config row this handle's attention kernels were compiled with.
    pub fn attention_config(&self) -> &'static AttentionArchConfig {
        attention_config(self.artifact(KernelFamily::Attention).config)
    }
    /// The workspace this handle owns for `family`'s launches (`crate::workspace`), allocated
    /// with the family's module, which this loads if it is not loaded yet. `None`: the family
    /// owns none; `Some(Err)`: the device could not spare it (SGEMM then splits k only over
    /// clusters, or not at all; attention's split launches allocate their own, per call).
    pub(crate) fn own_workspace(&self, family: KernelFamily) -> Result<Option<&Result<OwnWorkspace>>> {
        self.loaded(family)?;
        Ok(self.inner.families[family.index()].own_workspace.get())
    }
    /// Bytes of the workspace `family` owns: SGEMM's k splits
    /// ([`default_split_workspace_bytes`](crate::sgemm::default_split_workspace_bytes)),
    /// attention's split-KV partial results
    /// ([`own_split_workspace_bytes`](crate::attention::own_split_workspace_bytes), after the
    /// record of bad device-side tables).
    fn own_workspace_bytes(&self, family: KernelFamily) -> Option<usize> {
        match family {
            KernelFamily::Sgemm => Some(crate::sgemm::default_split_workspace_bytes(self.sgemm_config(), self.inner.sm_count)),
            KernelFamily::Attention => Some(crate::attention::own_workspace_bytes(self.attention_config(), self.inner.sm_count)),
            _ => None,
        }
    }
    /// Streaming multiprocessors of the device.
    pub fn sm_count(&self) -> u32 {
        self.inner.sm_count
    }
    /// Whether `family`'s module is loaded.
    pub fn is_loaded(&self, family: KernelFamily) -> bool {
        self.inner.families[family.index()].loaded.get().is_some()
    }

    /// Loads every family's module now rather than at its first launch (and allocates the
    /// families' own workspaces: SGEMM's k splits, attention's split-KV partial results). Call
    /// it before capturing launches into a CUDA graph or before timing, so neither includes
    /// the load or the allocation.
    pub fn preload(&self) -> Result<()> {
        KernelFamily::ALL.iter().try_for_each(|&f| self.preload_family(f))
    }

    /// Loads one family's module now (the others stay unloaded).
    pub fn preload_family(&self, family: KernelFamily) -> Result<()> {
        self.loaded(family).map(|_| ())
    }

    /// The family's module, loaded (and checked) on first use.
    fn loaded(&self, family: KernelFamily) -> Result<&Loaded> {
        let slot = &self.inner.families[family.index()];
        if let Some(l) = slot.loaded.get() {
            return Ok(l);
        }
        let _guard = slot.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = slot.loaded.get() {
            return Ok(l);
        }
        let loaded = self.load(slot.artifact)?;
        if let Some(bytes) = self.own_workspace_bytes(family) {
            // Allocated here, with the module, rather than in `new`: handles that never run
            // the family spare the memory, and `preload` (which graph capture needs anyway)
            // makes it before any capture, where an allocation would break the capture.
            slot.own_workspace.get_or_init(|| OwnWorkspace::new(&self.inner.ctx, bytes));
        }
        let _ = slot.loaded.set(loaded);
        Ok(slot.loaded.get().expect("just set"))
    }

    fn load(&self, artifact: &'static Artifact) -> Result<Loaded> {
        let bytes = artifact.bytes()?;
        let image = match artifact.kind {
            ArtifactKind::Cubin => cudarc::nvrtc::Ptx::from_binary(bytes),
            ArtifactKind::Ptx => cudarc::nvrtc::Ptx::from_src(String::from_utf8(bytes).map_err(|e| Error::CorruptArtifact(format!("{artifact}: {e}")))?),
        };
        let module = self.inner.ctx.load_module(image)?;
        let family = artifact.family;
        let mut functions = Vec::with_capacity(family.kernel_count());
        for index in 0..family.kernel_count() {
            let spec = family.kernel(artifact.config, index);
            let f = module.load_function(spec.entry_point)?;
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, spec.max_smem_bytes as i32)?;
            // The largest shared-memory carveout, so that `blocks_per_sm` blocks fit.
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)?;
            let attributes = LoadedKernelAttributes {
                registers: f.get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)? as u32,
                local_bytes: f.get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)? as u32,
                max_threads_per_block: f.get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32,
                blocks_per_sm: f.occupancy_max_active_blocks_per_multiprocessor(spec.threads, spec.smem_bytes as usize, None)?,
            };
            // The opt-in rust-cuda build may keep a few bytes of spills in the kernels that
            // `rust-cuda/known-spills.txt` lists (CI checks each against its listed bytes with
            // ptxas): slower, not wrong, so only its other limits are checked here.
            let checked = match artifact.compiler {
                Compiler::Nvptx => attributes,
                Compiler::RustCuda => LoadedKernelAttributes { local_bytes: 0, ..attributes },
            };
            check_kernel_limits(&spec, &checked).map_err(|reason| Error::KernelLimits {
                kernel: spec.entry_point,
                artifact: artifact.to_string(),
                reason,
            })?;
            functions.push(f);
        }
        Ok(Loaded { _module: module, functions })
    }

    pub(crate) fn sgemm_function(&self, variant: SgemmVariant, operands: SgemmOperands) -> Result<&CudaFunction> {
        let loaded = self.loaded(KernelFamily::Sgemm)?;
        Ok(&loaded.functions[sgemm_kernel_index(variant, operands)])
    }

    /// The forward entry point of (`head`, `dtype`) of `kind` (prefill, plain prefill or
    /// decode), or the merge kernel of `dtype` (`head` None).
    pub(crate) fn attention_function(&self, head: Option<AttentionHead>, dtype: AttentionDtype, kind: AttentionTileKind) -> Result<&CudaFunction> {
        let loaded = self.loaded(KernelFamily::Attention)?;
        Ok(&loaded.functions[attention_kernel_index(head, dtype, kind)])
    }

    /// The `moe` entry point of `kind`.
    pub(crate) fn moe_function(&self, kind: cukernels_gpu::MoeKernelKind) -> Result<&CudaFunction> {
        let loaded = self.loaded(KernelFamily::Moe)?;
        Ok(&loaded.functions[cukernels_gpu::moe_kernel_index(kind)])
    }

    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.inner.ctx.cu_ctx() {
            return Err(Error::WrongContext);
        }
        Ok(())
    }

    /// Refuses to load `family`'s module during a CUDA graph capture on `stream` where the
    /// family owns a workspace: loading allocates it and waits for its zeroing, which a capture
    /// cannot hold (the capture would be invalidated, and the caller left with a driver error
    /// at its end). A loaded module, a family without a workspace, or a stream that is not
    /// capturing passes. Call it before anything of a call is queued; `stream` must belong to
    /// this handle's context.
    pub(crate) fn check_loadable_on(&self, family: KernelFamily, stream: cudarc::driver::sys::CUstream) -> Result<()> {
        if self.is_loaded(family) || self.own_workspace_bytes(family).is_none() {
            return Ok(());
        }
        if self.is_capturing(stream)? {
            return Err(Error::invalid(
                "stream",
                "capturing a CUDA graph",
                format!("the {family} module is not loaded yet, and loading it allocates and synchronizes, which a capture cannot hold: call Cukernels::preload (or preload_family) before capturing"),
            ));
        }
        Ok(())
    }

    /// Whether a CUDA graph capture is under way on `stream` (which must belong to this
    /// handle's context).
    pub(crate) fn is_capturing(&self, stream: cudarc::driver::sys::CUstream) -> Result<bool> {
        self.inner.ctx.bind_to_thread()?;
        // SAFETY: only reads the stream's capture status; the caller checked that the stream
        // belongs to this context (a handle the driver does not know is reported as an error).
        let status = unsafe { cudarc::driver::result::stream::is_capturing(stream) }?;
        Ok(status != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// Checks that a raw stream handle belongs to this handle's context.
    pub(crate) fn check_raw_stream(&self, stream: cudarc::driver::sys::CUstream) -> Result<()> {
        self.inner.ctx.bind_to_thread()?;
        let mut ctx: cudarc::driver::sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `cuStreamGetCtx` only reads the handle and writes `ctx`; a stream handle that
        // is not valid is reported as an error by the driver (the caller of the raw entry
        // point promises it is a live stream).
        unsafe { cudarc::driver::sys::cuStreamGetCtx(stream, &mut ctx) }.result()?;
        if ctx != self.inner.ctx.cu_ctx() {
            return Err(Error::WrongContext);
        }
        Ok(())
    }

    /// Compute capability of the device.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.capability
    }
}

fn capability(ctx: &Arc<CudaContext>) -> Result<(u32, u32)> {
    let (major, minor) = ctx.compute_capability()?;
    Ok((major as u32, minor as u32))
}

impl std::fmt::Debug for Cukernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let artifacts: Vec<String> = self.inner.families.iter().map(|m| m.artifact.to_string()).collect();
        f.debug_struct("Cukernels").field("artifacts", &artifacts).field("sm_count", &self.sm_count()).finish()
    }
}

/// A launch attribute of [`launch`].
#[derive(Clone, Copy)]
pub(crate) enum LaunchAttribute {
    /// Thread-block clusters of this many blocks along y (sm_90 and newer).
    ClusterY(u32),
    /// The launch may start before the one before it on the stream ends; its kernel waits for
    /// that grid itself (`griddepcontrol.wait`, sm_90 and newer).
    ProgrammaticDependent,
}

impl LaunchAttribute {
    /// `[ProgrammaticDependent]` where `overlaps` (the plan's choice: sm_90+ and a kernel
    /// that waits for its prerequisite grid), else no attribute.
    pub(crate) fn programmatic_if(overlaps: bool) -> &'static [LaunchAttribute] {
        if overlaps {
            &[LaunchAttribute::ProgrammaticDependent]
        } else {
            &[]
        }
    }
}

/// Launches `f` through `cuLaunchKernelEx` with these launch attributes, or, with none,
/// through `cuLaunchKernel` (the callers that take an attribute only on some builds, a
/// programmatic dependent on sm_90 and newer, launch through here either way).
///
/// Safety: as `cuLaunchKernel`: `args` matches `f`'s parameters, every address they carry is
/// valid for what the kernel does with it for the duration of the launch, and each attribute
/// is one the kernel was built for (a cluster reduction, a wait for its prerequisite grid).
pub(crate) unsafe fn launch(
    f: cudarc::driver::sys::CUfunction,
    grid: (u32, u32, u32),
    block: u32,
    smem_bytes: u32,
    stream: cudarc::driver::sys::CUstream,
    args: &mut [*mut std::ffi::c_void],
    attributes: &[LaunchAttribute],
) -> Result<()> {
    use cudarc::driver::sys::{CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig};
    if attributes.is_empty() {
        // SAFETY: the caller's promises above.
        unsafe { cudarc::driver::result::launch_kernel(f, grid, (block, 1, 1), smem_bytes, stream, args) }?;
        return Ok(());
    }
    let mut attributes: Vec<CUlaunchAttribute> = attributes
        .iter()
        .map(|attribute| {
            // SAFETY (zeroed): a C union of plain integers; all zeros is a valid value of it.
            let mut value: CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
            let id = match *attribute {
                LaunchAttribute::ClusterY(blocks) => {
                    value.clusterDim.x = 1;
                    value.clusterDim.y = blocks;
                    value.clusterDim.z = 1;
                    CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                }
                LaunchAttribute::ProgrammaticDependent => {
                    value.programmaticStreamSerializationAllowed = 1;
                    CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                }
            };
            CUlaunchAttribute { id, pad: [0; 4], value }
        })
        .collect();
    let config = CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: smem_bytes,
        hStream: stream,
        attrs: attributes.as_mut_ptr(),
        numAttrs: attributes.len() as u32,
    };
    // SAFETY: the caller's promises above; `config` and `attributes` live until the call returns.
    unsafe { cudarc::driver::sys::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) }.result()?;
    Ok(())
}
