//! The C core's interface (`c_core/malloc_freq.h`, `c_core/mf_core.h`), linked statically
//! by `build.rs`.

use std::os::raw::{c_char, c_int};

/// `enum mf_fn` in `c_core/mf_format.h`: the allocation function a call is counted under.
/// `tests/rust/profile.rs` checks these against the header and against the per-thread totals.
pub(crate) const MF_FN_RUST_ALLOC: u32 = 8;
/// `MF_FN_RUST_ALLOC_ZEROED` in `enum mf_fn`.
pub(crate) const MF_FN_RUST_ALLOC_ZEROED: u32 = 9;
/// `MF_FN_RUST_REALLOC` in `enum mf_fn`.
pub(crate) const MF_FN_RUST_REALLOC: u32 = 10;

/// `MALLOC_FREQ_FUNCTIONS` in `c_core/malloc_freq.h`: the allocation functions counted.
pub(crate) const FUNCTIONS: usize = 16;

/// `struct malloc_freq_counts` in `c_core/malloc_freq.h`: versioned by its size field.
#[repr(C)]
pub(crate) struct MallocFreqCounts {
    pub(crate) size: u64,
    pub(crate) calls: u64,
    pub(crate) bytes: u64,
    pub(crate) fn_calls: [u64; FUNCTIONS],
    pub(crate) fn_bytes: [u64; FUNCTIONS],
}

impl MallocFreqCounts {
    pub(crate) fn new() -> Self {
        MallocFreqCounts {
            size: std::mem::size_of::<MallocFreqCounts>() as u64,
            calls: 0,
            bytes: 0,
            fn_calls: [0; FUNCTIONS],
            fn_bytes: [0; FUNCTIONS],
        }
    }
}

extern "C" {
    /// Fills `*out` with the calling thread's exact counts so far; 0, 1 when the thread
    /// shares its table (the counts include other threads'), -1 for a bad size.
    pub(crate) fn malloc_freq_thread_counts(out: *mut MallocFreqCounts) -> c_int;

    /// Counts one allocation call of `size` bytes made through function `fn_` (an
    /// `enum mf_fn` value) in the calling thread's exact totals, and samples its call stack
    /// when the thread's countdown runs out. Never allocates, never takes a lock; safe to
    /// call from any thread at any time, before or after the core's start-up.
    pub(crate) fn mf_record_call(fn_: u32, size: usize);

    /// After an allocation counted by `mf_record_call`: `p` is what the allocator returned
    /// (null if it failed). Records `p` in the live heap (`MALLOC_FREQ_LIVE`) if the call
    /// was sampled; does nothing otherwise. Never allocates.
    pub(crate) fn mf_live_alloc(p: *mut u8);

    /// Before `p` is deallocated or reallocated: forgets `p` in the live heap if it is
    /// recorded there (one load when it is not). Never allocates.
    pub(crate) fn mf_live_free_call(p: *mut u8);

    /// The directory this process writes its profile into (`.../malloc_freq.<pid>`, an
    /// absolute path, NUL-terminated, in a static buffer that a forked child rewrites), or
    /// NULL if profiling is off in this process (the directory could not be created).
    pub(crate) fn malloc_freq_dir() -> *const c_char;

    /// Leaves the calling thread's allocations out of the profile until the matching
    /// `malloc_freq_resume()`. Calls nest. What is left out still counts in the exact
    /// totals, as "not profiled".
    pub(crate) fn malloc_freq_pause();

    /// Ends the innermost `malloc_freq_pause()` of the calling thread; does nothing if the
    /// thread is not paused.
    pub(crate) fn malloc_freq_resume();
}
