//! ```no_run
//! use malloc_freq::ProfAllocator;
//! #[global_allocator]
//! static GLOBAL: ProfAllocator = ProfAllocator;
//! # fn main() {}
//! ```
//!
//! With these three lines every heap allocation of the program is counted per call stack:
//! how often each piece of code allocates, and how many bytes. Reallocations and zeroed
//! allocations are counted as such and reach the system allocator as `realloc` and
//! `calloc`; frees are not counted.
//!
//! The profile is written while the program runs, into
//! `$MALLOC_FREQ_DIR/malloc_freq.<pid>/` (the working directory when `MALLOC_FREQ_DIR` is
//! unset): one file per thread, kept in shared file mappings, so the counts survive any
//! end of the process (`std::process::exit`, a panic, `abort`, a signal) and every thread
//! is in it, including threads still running at exit. Read it with the viewer:
//!
//! ```text
//! mf_print --dir malloc_freq.12345                 # caller tree, busiest sites first
//! mf_print --dir malloc_freq.12345 --format csv    # one row per call stack
//! ```
//!
//! The profiler starts before `main` and creates that directory then. Stacks are captured
//! with `libunwind.so.8` (Debian and Ubuntu package `libunwind8`), loaded at start-up; without
//! it the profiler says so and walks frame pointers instead. Frames are symbolized by the
//! viewer, not in the program: build with line tables (`debug = 1` in the Cargo profile) to
//! get `file:line` locations.
//!
//! # Sampling
//!
//! Totals (calls and bytes per thread and per allocation function) are exact: each thread
//! counts in thread-local storage and writes its counts to its file every 4,096 calls, at
//! every sample and at thread and process exit, so only a process that ends without running
//! any code (`kill -9`, a crash, `exec`) can leave fewer than 4,096 calls a thread out, and
//! only when sampling. Call stacks are recorded for the first 100,000 calls (a short run is
//! exact), then each thread samples as often as keeps the cost near 0.3 %
//! of its time, each sample standing for the calls around it;
//! `MALLOC_FREQ_SAMPLE=1` records every call (exact counts per stack, slower),
//! `MALLOC_FREQ_SAMPLE=N` samples 1 in N from the start, and with it `MALLOC_FREQ_SEED`
//! makes sampling reproducible. `MALLOC_FREQ_DEPTH` limits frames per stack (default 64).
//!
//! # Allocation budgets in tests
//!
//! [`count`] runs a closure and returns the allocation calls it made on this thread, exact,
//! so that a unit test can assert "this parser allocates at most 3 times per line":
//!
//! ```no_run
//! # #[global_allocator]
//! # static GLOBAL: malloc_freq::ProfAllocator = malloc_freq::ProfAllocator;
//! # fn main() {
//! let counts = malloc_freq::count(|| drop(vec![1u8; 100])).unwrap();
//! assert_eq!((counts.calls, counts.bytes), (1, 100));
//! # }
//! ```
//!
//! # Other allocators
//!
//! [`Profiled`] wraps any other [`GlobalAlloc`](std::alloc::GlobalAlloc):
//!
//! ```no_run
//! # use std::alloc::System as MyAlloc;
//! use malloc_freq::Profiled;
//! #[global_allocator]
//! static GLOBAL: Profiled<MyAlloc> = Profiled::new(MyAlloc);
//! # fn main() {}
//! ```
//!
//! Do not also run the program under the `LD_PRELOAD` library `libmalloc_freq.so`: each
//! allocation would then be counted twice, once by each front end.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod alloc;
mod count;
mod ffi;

use std::ffi::{CStr, OsStr};
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub use crate::alloc::{ProfAllocator, Profiled};
pub use crate::count::{count, thread_counts, CountError, Counts};

/// The directory this process writes its profile into, `.../malloc_freq.<pid>` as an
/// absolute path; `None` if profiling is off (the directory could not be created, which
/// the profiler reported on stderr at start-up). A forked child writes into a directory of
/// its own, so ask again after `fork`.
///
/// ```no_run
/// if let Some(dir) = malloc_freq::profile_dir() {
///     eprintln!("profile: mf_print --dir {}", dir.display());
/// }
/// ```
pub fn profile_dir() -> Option<PathBuf> {
    // SAFETY: no preconditions; the result is NULL or a NUL-terminated static buffer,
    // copied out before anything in this thread could rewrite it.
    let dir = unsafe { ffi::malloc_freq_dir() };
    if dir.is_null() {
        return None;
    }
    // SAFETY: non-NULL: a NUL-terminated string that lives as long as the process.
    let bytes = unsafe { CStr::from_ptr(dir) }.to_bytes();
    Some(PathBuf::from(OsStr::from_bytes(bytes)))
}

/// Leaves the calling thread's allocations out of the profile while the returned guard
/// lives; dropping it resumes profiling. Guards nest.
///
/// What is left out still counts in the exact totals, shown by the viewer as
/// `[not profiled]`, so totals and percentages stay true. Other threads are not affected.
///
/// ```no_run
/// let report = {
///     let _quiet = malloc_freq::pause();
///     format!("{:?}", vec![1, 2, 3]) // not attributed to this call stack
/// };
/// # drop(report);
/// ```
#[must_use = "profiling resumes as soon as the guard is dropped"]
pub fn pause() -> PauseGuard {
    // SAFETY: no preconditions; balanced by PauseGuard::drop on this same thread.
    unsafe { ffi::malloc_freq_pause() };
    PauseGuard {
        _same_thread: PhantomData,
    }
}

/// Returned by [`pause`]: the calling thread's allocations are left out of the profile
/// until it is dropped. It must be dropped on the thread that created it, so it is neither
/// `Send` nor `Sync`:
///
/// ```compile_fail
/// fn send<T: Send>(_: T) {}
/// send(malloc_freq::pause());
/// ```
#[derive(Debug)]
pub struct PauseGuard {
    // The pause depth is per thread: a raw pointer makes the guard !Send and !Sync.
    _same_thread: PhantomData<*const ()>,
}

impl Drop for PauseGuard {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: no preconditions; ends the pause this guard started on this thread.
        unsafe { ffi::malloc_freq_resume() };
    }
}
