//! The `GlobalAlloc` front end: count the call, then forward it unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

use crate::ffi::{mf_live_alloc, mf_live_free_call, mf_record_call, MF_FN_RUST_ALLOC, MF_FN_RUST_ALLOC_ZEROED, MF_FN_RUST_REALLOC};

/// The profiling global allocator over the system allocator (`std::alloc::System`).
///
/// ```no_run
/// use malloc_freq::ProfAllocator;
/// #[global_allocator]
/// static GLOBAL: ProfAllocator = ProfAllocator;
/// # fn main() {}
/// ```
///
/// `alloc`, `alloc_zeroed` and `realloc` are counted, then forwarded to the same method of
/// `System` (so a reallocation stays a `realloc` and a zeroed allocation a `calloc`);
/// `dealloc` is forwarded (after the live heap, `MALLOC_FREQ_LIVE`, forgets the block). It is [`Profiled`]`<System>` as a unit struct, so that it
/// can be named in a `static` without a constructor call.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProfAllocator;

const PROFILED_SYSTEM: Profiled<System> = Profiled::new(System);

unsafe impl GlobalAlloc for ProfAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which we pass on.
        unsafe { PROFILED_SYSTEM.alloc(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr came from PROFILED_SYSTEM, which allocates from System.
        unsafe { PROFILED_SYSTEM.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        unsafe { PROFILED_SYSTEM.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: ptr came from PROFILED_SYSTEM; the caller upholds realloc's contract.
        unsafe { PROFILED_SYSTEM.realloc(ptr, layout, new_size) }
    }
}

/// A profiling wrapper around any other global allocator: jemalloc, mimalloc, your own.
///
/// ```no_run
/// use std::alloc::System; // or e.g. tikv_jemallocator::Jemalloc, mimalloc::MiMalloc
/// use malloc_freq::Profiled;
/// #[global_allocator]
/// static GLOBAL: Profiled<System> = Profiled::new(System);
/// # fn main() {}
/// ```
///
/// Each method of the inner allocator is called exactly once per call of the same method
/// here (the trait's default `realloc` and `alloc_zeroed` are never used in its place);
/// `alloc`, `alloc_zeroed` and `realloc` are counted first, with the requested size
/// (`new_size` for `realloc`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Profiled<A> {
    inner: A,
}

impl<A> Profiled<A> {
    /// Wraps `inner`; a `const fn`, so it can initialise a `static`.
    #[inline]
    pub const fn new(inner: A) -> Self {
        Profiled { inner }
    }

    /// The wrapped allocator, e.g. to read its own statistics.
    #[inline]
    pub const fn inner(&self) -> &A {
        &self.inner
    }
}

// Counting comes before forwarding: the inner allocator may itself allocate (jemalloc's
// first call initialises it), and the count must not depend on its behaviour. The core
// records into per-thread counters and memory it mapped itself: no allocation here.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Profiled<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mf_record_call has no preconditions.
        unsafe { mf_record_call(MF_FN_RUST_ALLOC, layout.size()) };
        // SAFETY: the caller upholds GlobalAlloc::alloc's contract, which we pass on.
        let p = unsafe { self.inner.alloc(layout) };
        // SAFETY: mf_live_alloc has no preconditions.
        unsafe { mf_live_alloc(p) };
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: mf_live_free_call has no preconditions.
        unsafe { mf_live_free_call(ptr) };
        // SAFETY: ptr was allocated by self.inner with this layout.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mf_record_call has no preconditions.
        unsafe { mf_record_call(MF_FN_RUST_ALLOC_ZEROED, layout.size()) };
        // SAFETY: as for alloc.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        // SAFETY: mf_live_alloc has no preconditions.
        unsafe { mf_live_alloc(p) };
        p
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: mf_record_call has no preconditions.
        unsafe { mf_record_call(MF_FN_RUST_REALLOC, new_size) };
        // SAFETY: mf_live_free_call has no preconditions.
        unsafe { mf_live_free_call(ptr) };
        // SAFETY: ptr was allocated by self.inner with layout; the caller upholds the rest.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        // SAFETY: mf_live_alloc has no preconditions.
        unsafe { mf_live_alloc(p) };
        p
    }
}
