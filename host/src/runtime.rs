//! The handle that owns a CUDA context's cukernels module: loads the right PTX lazily (once per
//! handle; clone the handle to share it), and launches kernels on the caller's stream.

use crate::error::{Error, Result};
use crate::ptx::{self, EmbeddedPtx};
use cudarc::driver::sys::{CUfunction_attribute, CUdevice_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cukernels_gpu::{sgemm_config, sgemm_kernel_index, Arch, SgemmArchConfig, SgemmOperands, SgemmVariant, SGEMM_KERNELS};
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

/// cukernels on one CUDA context. Cheap to clone; clones share the loaded module.
#[derive(Clone)]
pub struct Cukernels {
    inner: Arc<Inner>,
}

struct Inner {
    ctx: Arc<CudaContext>,
    ptx: &'static EmbeddedPtx,
    sm_count: u32,
    loaded: OnceLock<Loaded>,
    loading: Mutex<()>,
}

struct Loaded {
    _module: Arc<CudaModule>,
    /// One function per entry of `SGEMM_KERNELS`, in that order.
    sgemm: Vec<CudaFunction>,
}

impl Cukernels {
    /// A handle for `ctx`, using the PTX built for the device's architecture (the newest built
    /// one not newer than the device). Nothing is loaded until the first launch.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let (major, minor) = ctx.compute_capability()?;
        let ptx = ptx::for_compute_capability(major as u32, minor as u32)?;
        Self::with_ptx(ctx, ptx)
    }

    /// A handle that runs the PTX compiled for `target` with the config row of `config`:
    /// runs older architectures' configs on a newer GPU (e.g. the sm_70 config on an H200),
    /// and, with the `config-probes` feature, the sm_100/sm_120 rows built for sm_90.
    pub fn with_config(ctx: &Arc<CudaContext>, target: Arch, config: Arch) -> Result<Self> {
        let (major, minor) = ctx.compute_capability()?;
        let device = (major * 10 + minor) as u32;
        if target.sm() > device {
            return Err(Error::invalid("target", target, format!("PTX for {target} cannot run on a device of compute capability {major}.{minor}")));
        }
        Self::with_ptx(ctx, ptx::find(target, config)?)
    }

    fn with_ptx(ctx: &Arc<CudaContext>, ptx: &'static EmbeddedPtx) -> Result<Self> {
        let sm_count = ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        Ok(Cukernels {
            inner: Arc::new(Inner { ctx: ctx.clone(), ptx, sm_count, loaded: OnceLock::new(), loading: Mutex::new(()) }),
        })
    }

    /// The CUDA context of this handle.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }
    /// The architecture of the PTX this handle runs.
    pub fn target(&self) -> Arch {
        self.inner.ptx.target
    }
    /// The config row this handle's kernels were compiled with.
    pub fn config(&self) -> Arch {
        self.inner.ptx.config
    }
    /// The SGEMM config row this handle's kernels were compiled with.
    pub fn sgemm_config(&self) -> &'static SgemmArchConfig {
        sgemm_config(self.inner.ptx.config)
    }
    /// Streaming multiprocessors of the device.
    pub fn sm_count(&self) -> u32 {
        self.inner.sm_count
    }

    /// Loads the module now rather than at the first launch: the driver compiles the PTX for
    /// the device then, which takes a moment. Call it before capturing launches into a CUDA
    /// graph or before timing, so neither includes the load.
    pub fn preload(&self) -> Result<()> {
        self.loaded().map(|_| ())
    }

    /// Loads the module on first use (the driver compiles the PTX for the device then).
    fn loaded(&self) -> Result<&Loaded> {
        if let Some(l) = self.inner.loaded.get() {
            return Ok(l);
        }
        let _guard = self.inner.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = self.inner.loaded.get() {
            return Ok(l);
        }
        let module = self.inner.ctx.load_module(cudarc::nvrtc::Ptx::from_src(self.inner.ptx.ptx))?;
        let row = self.sgemm_config();
        let mut sgemm = Vec::with_capacity(SGEMM_KERNELS.len());
        for kernel in SGEMM_KERNELS {
            let f = module.load_function(kernel.entry_point)?;
            // The most any launch of this variant asks for (a k-split launch may need more than
            // its pipeline: `split_k_smem_bytes`).
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                row.launch(kernel.variant).split_k_smem_bytes as i32,
            )?;
            // Ask for the largest shared-memory carveout so `blocks_per_sm` blocks fit.
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)?;
            sgemm.push(f);
        }
        let _ = self.inner.loaded.set(Loaded { _module: module, sgemm });
        Ok(self.inner.loaded.get().expect("just set"))
    }

    pub(crate) fn sgemm_function(&self, variant: SgemmVariant, operands: SgemmOperands) -> Result<&CudaFunction> {
        let loaded = self.loaded()?;
        Ok(&loaded.sgemm[sgemm_kernel_index(variant, operands)])
    }

    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.inner.ctx.cu_ctx() {
            return Err(Error::WrongContext);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Cukernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cukernels")
            .field("target", &self.target())
            .field("config", &self.config())
            .field("sm_count", &self.sm_count())
            .finish()
    }
}
