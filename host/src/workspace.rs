//! Workspaces a handle owns: device memory allocated once, with a family's module, that the
//! family's launches on one stream use instead of allocating per call.
//!
//! A launch that needs scratch memory (SGEMM's k splits, attention's split-KV partial results)
//! either takes the handle's own workspace or allocates its own. Owning one means no call
//! allocates, so the launches stay capturable in a CUDA graph and cost the host less. An own
//! workspace serves **one stream**: the first on which a launch uses it. Calls on other streams
//! plan without it, so two streams never share it and no event orders them. (A graph that holds
//! such a launch must not run concurrently with that stream's other work, as for any graph that
//! writes memory the stream also uses.) Streams are told apart by their handle value: the
//! per-thread default stream (one value, a stream per thread) never owns it. A new stream that
//! reuses a destroyed stream's handle value inherits the workspace; were the old stream's last
//! launch still running (CUDA finishes a destroyed stream's work without waiting for it), the
//! two would overlap, so a stream that used it should be synchronized before it is destroyed.
//! A call that queues more than one launch using it (attention's split, then its merge) holds
//! its lock ([`OwnWorkspace::lock_launches`]) until all are queued, so that two threads
//! queueing on the bound stream cannot interleave them. A CUDA graph that captured such a
//! launch holds the workspace's address: it must not be replayed after the handle (every
//! clone) is dropped, which frees the workspace.

use crate::error::Result;

/// A handle's own device memory for one family's launches (see the module docs), zeroed once
/// when it is allocated.
pub(crate) struct OwnWorkspace {
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    addr: u64,
    bytes: usize,
    /// The stream it serves (a `CUstream` as an integer), once one has used it;
    /// [`OwnWorkspace::UNBOUND`] before. Set once, by compare-and-swap.
    stream: std::sync::atomic::AtomicUsize,
    /// Held by a call while it queues several launches that use the workspace.
    launches: std::sync::Mutex<()>,
}

/// `CU_STREAM_PER_THREAD` (`cuda.h` defines it as the handle value 2): each thread's own default
/// stream, so the value names a different stream in every thread.
const PER_THREAD_DEFAULT_STREAM: usize = 0x2;

impl OwnWorkspace {
    /// `stream` before any stream is bound (the null stream is 0, so 0 cannot mean none).
    const UNBOUND: usize = usize::MAX;

    /// Allocates and zeroes `bytes`, and waits for the zeroing: a memset of device memory may
    /// return before it is done, and it runs on the legacy default stream, which cudarc's
    /// non-blocking streams do not wait for.
    pub(crate) fn new(ctx: &std::sync::Arc<cudarc::driver::CudaContext>, bytes: usize) -> Result<OwnWorkspace> {
        ctx.bind_to_thread()?;
        // SAFETY: a plain allocation of `bytes` in the current (this handle's) context, zeroed
        // before anything can use it, and freed once, on drop.
        let addr = unsafe { cudarc::driver::result::malloc_sync(bytes) }?;
        let workspace = OwnWorkspace { ctx: ctx.clone(), addr, bytes, stream: std::sync::atomic::AtomicUsize::new(Self::UNBOUND), launches: std::sync::Mutex::new(()) };
        // SAFETY: `addr` holds `bytes` bytes (just allocated).
        unsafe { cudarc::driver::result::memset_d8_sync(addr, 0, bytes) }?;
        ctx.synchronize()?;
        Ok(workspace)
    }

    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether `stream` may plan with it: no stream is bound yet, or this one is. Never the
    /// per-thread default stream: one handle value for as many streams as there are threads,
    /// it cannot own the workspace (it plans without it, as another stream).
    pub(crate) fn free_for(&self, stream: usize) -> bool {
        let bound = self.stream.load(std::sync::atomic::Ordering::Acquire);
        stream != PER_THREAD_DEFAULT_STREAM && (bound == Self::UNBOUND || bound == stream)
    }

    /// The lock a call holds while it queues several launches that use the workspace (on the
    /// bound stream: see the module docs). Uncontended unless threads share that stream.
    pub(crate) fn lock_launches(&self) -> std::sync::MutexGuard<'_, ()> {
        // A thread that panicked while holding it queued nothing wrong: the lock orders
        // queueing only.
        self.launches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Binds it to `stream` for a launch that uses it; false when another stream bound it
    /// since [`free_for`](Self::free_for) said it was free.
    pub(crate) fn bind(&self, stream: usize) -> bool {
        use std::sync::atomic::Ordering;
        match self.stream.compare_exchange(Self::UNBOUND, stream, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(bound) => bound == stream,
        }
    }
}

impl Drop for OwnWorkspace {
    fn drop(&mut self) {
        // The handle's last clone is gone, so no call can queue another launch with the
        // workspace; `cuMemFree` waits for the launches already queued. (A captured graph
        // that still holds its address must not be replayed: see the module docs.)
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `malloc_sync` in `new`, freed only here.
            let _ = unsafe { cudarc::driver::result::free_sync(self.addr) };
        }
    }
}
