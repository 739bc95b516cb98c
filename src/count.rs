//! Exact per-thread allocation counts (`malloc_freq_thread_counts` in `c_core/malloc_freq.h`):
//! the crate's own core when it is the global allocator, else the preload library's, found
//! with `dlsym`.

use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::ffi::{self, MallocFreqCounts, FUNCTIONS};

/// The calling thread's allocation calls, exact: totals and per allocation function.
/// Returned by [`count`] (what a closure made) and [`thread_counts`] (all so far); the
/// difference of two `thread_counts` is a `count` (`later - earlier`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Allocation calls, over every function.
    pub calls: u64,
    /// Bytes asked for by those calls.
    pub bytes: u64,
    functions: [(u64, u64); FUNCTIONS],
}

/// The allocation functions' names as the reports print them, by the core's numbering.
const FUNCTION_NAMES: [&str; 15] = [
    "malloc", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign", "valloc",
    "pvalloc", "rust alloc", "rust alloc_zeroed", "rust realloc", "operator new",
    "operator new[]", "operator new aligned", "operator new[] aligned",
];

impl Counts {
    /// The calls and bytes of one allocation function, by the name the reports use
    /// (`"rust alloc"`, `"rust alloc_zeroed"`, `"rust realloc"`, `"malloc"`, `"calloc"`,
    /// `"operator new"`, ...); `(0, 0)` for a name that is not one.
    pub fn function(&self, name: &str) -> (u64, u64) {
        FUNCTION_NAMES
            .iter()
            .position(|n| *n == name)
            .map_or((0, 0), |i| self.functions[i])
    }

    /// Each function called: its name, calls and bytes.
    pub fn by_function(&self) -> impl Iterator<Item = (&'static str, u64, u64)> + '_ {
        FUNCTION_NAMES
            .iter()
            .zip(self.functions.iter())
            .filter(|(_, c)| c.0 != 0)
            .map(|(n, c)| (*n, c.0, c.1))
    }

    fn from_raw(c: &MallocFreqCounts) -> Counts {
        let mut functions = [(0, 0); FUNCTIONS];
        for (i, f) in functions.iter_mut().enumerate() {
            *f = (c.fn_calls[i], c.fn_bytes[i]);
        }
        Counts { calls: c.calls, bytes: c.bytes, functions }
    }
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, earlier: Counts) -> Counts {
        let mut functions = [(0, 0); FUNCTIONS];
        for (i, f) in functions.iter_mut().enumerate() {
            *f = (
                self.functions[i].0.wrapping_sub(earlier.functions[i].0),
                self.functions[i].1.wrapping_sub(earlier.functions[i].1),
            );
        }
        Counts {
            calls: self.calls.wrapping_sub(earlier.calls),
            bytes: self.bytes.wrapping_sub(earlier.bytes),
            functions,
        }
    }
}

/// Why there are no counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountError {
    /// No profiler counts this program's allocations: the crate is not its
    /// `#[global_allocator]` and `libmalloc_freq.so` is not preloaded.
    NoProfiler,
    /// This thread records into a table other threads share (they could have no file of
    /// their own: a full disk, a setuid), so its counts include theirs.
    Shared,
}

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CountError::NoProfiler => {
                "malloc_freq: no profiler loaded (install malloc_freq::ProfAllocator as the \
                 #[global_allocator], or run under LD_PRELOAD=libmalloc_freq.so)"
            }
            CountError::Shared => {
                "malloc_freq: this thread shares its profile table with other threads: its \
                 counts include theirs"
            }
        })
    }
}

impl std::error::Error for CountError {}

type CountsFn = unsafe extern "C" fn(*mut MallocFreqCounts) -> c_int;

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// The function that counts, found once: 0 not looked for yet, 1 none.
static COUNTS_FN: AtomicUsize = AtomicUsize::new(0);

fn read(f: CountsFn) -> Result<Counts, CountError> {
    let mut raw = MallocFreqCounts::new();
    // SAFETY: raw is a valid struct whose size field says how large it is.
    match unsafe { f(&mut raw) } {
        0 => Ok(Counts::from_raw(&raw)),
        1 => Err(CountError::Shared),
        _ => Err(CountError::NoProfiler),
    }
}

/// Whether f counts this program's allocations: one allocation through the global
/// allocator between two readings.
fn counts_allocations(f: CountsFn) -> bool {
    let before = match read(f) {
        Ok(c) => c.calls,
        Err(_) => return true, // it counts, whatever the reading says
    };
    // The box goes through a volatile read (std::hint::black_box is Rust 1.66), or the
    // optimizer drops the allocation.
    let probe = std::mem::ManuallyDrop::new(Box::new(0u8));
    // SAFETY: reads the valid box once; the copy read is the one dropped.
    drop(unsafe { std::ptr::read_volatile(&*probe as *const Box<u8>) });
    read(f).map_or(true, |c| c.calls != before)
}

fn counts_fn() -> Option<CountsFn> {
    match COUNTS_FN.load(Ordering::Acquire) {
        0 => {}
        1 => return None,
        // SAFETY: only CountsFn values are stored above 1.
        p => return Some(unsafe { std::mem::transmute::<usize, CountsFn>(p) }),
    }
    // The crate's own core when it is the global allocator; else the preload library's.
    let own: CountsFn = ffi::malloc_freq_thread_counts;
    let found = if counts_allocations(own) {
        Some(own)
    } else {
        // SAFETY: RTLD_DEFAULT (NULL in glibc) and a NUL-terminated name.
        let p = unsafe { dlsym(std::ptr::null_mut(), b"malloc_freq_thread_counts\0".as_ptr().cast()) };
        // SAFETY: the symbol has this C signature (c_core/malloc_freq.h).
        let f = (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, CountsFn>(p) });
        f.filter(|&f| f as usize != own as usize && counts_allocations(f))
    };
    COUNTS_FN.store(found.map_or(1, |f| f as usize), Ordering::Release);
    found
}

/// The calling thread's allocation calls so far, exact (every call, sampled or not).
/// `Err(CountError::NoProfiler)` when no profiler counts this program's allocations.
pub fn thread_counts() -> Result<Counts, CountError> {
    read(counts_fn().ok_or(CountError::NoProfiler)?)
}

/// Runs `f` and returns the allocation calls it made on this thread, exactly: calls and
/// bytes, and per allocation function ([`Counts::function`]). Allocations of other threads
/// meanwhile are not counted, nor those of threads `f` starts. Cheap: two readings of the
/// thread's counters, no system call, no lock; so a unit test can assert an allocation
/// budget.
///
/// It works with the crate as the `#[global_allocator]` ([`ProfAllocator`](crate::ProfAllocator)
/// or [`Profiled`](crate::Profiled)), and in a program run under `LD_PRELOAD=libmalloc_freq.so`
/// (found with `dlsym`); otherwise `f` still runs and the result is
/// `Err(CountError::NoProfiler)`.
///
/// ```no_run
/// #[global_allocator]
/// static GLOBAL: malloc_freq::ProfAllocator = malloc_freq::ProfAllocator;
///
/// fn parse_line(line: &str) -> Vec<String> {
///     line.split(',').map(str::to_owned).collect()
/// }
///
/// # fn main() {
/// let mut fields = Vec::new();
/// let counts = malloc_freq::count(|| fields = parse_line("a,b,c")).expect("profiler");
/// assert!(counts.calls <= 4, "parse_line allocated {} times", counts.calls);
/// assert_eq!(counts.function("rust alloc").0, counts.calls);
/// # }
/// ```
pub fn count<F: FnOnce()>(f: F) -> Result<Counts, CountError> {
    let counter = counts_fn();
    let before = counter.map(read);
    f();
    let counter = counter.ok_or(CountError::NoProfiler)?;
    let before = before.unwrap_or(Err(CountError::NoProfiler))?;
    Ok(read(counter)? - before)
}
