//! `Profiled<A>` around an allocator of one's own: every call reaches the inner allocator's
//! own method exactly once (realloc stays realloc, zeroed stays zeroed), and the profile
//! counts the same calls as the inner allocator saw.
// The inner allocator's unsafe calls are in unsafe blocks, as in the crate (Rust 1.63 would
// otherwise call those blocks unnecessary).
#![deny(unsafe_op_in_unsafe_fn)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use malloc_freq::Profiled;
use support::*;

/// The system allocator, counting how often each of its methods is called.
struct CountingSystem {
    alloc: AtomicU64,
    alloc_zeroed: AtomicU64,
    realloc: AtomicU64,
    dealloc: AtomicU64,
}

impl CountingSystem {
    const fn new() -> Self {
        CountingSystem {
            alloc: AtomicU64::new(0),
            alloc_zeroed: AtomicU64::new(0),
            realloc: AtomicU64::new(0),
            dealloc: AtomicU64::new(0),
        }
    }

    fn snapshot(&self) -> [u64; 4] {
        [&self.alloc, &self.alloc_zeroed, &self.realloc, &self.dealloc].map(|c| c.load(Relaxed))
    }
}

// No defaults: a call that reaches a method here was forwarded as that method.
unsafe impl GlobalAlloc for CountingSystem {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.alloc.fetch_add(1, Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.dealloc.fetch_add(1, Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.alloc_zeroed.fetch_add(1, Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.realloc.fetch_add(1, Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Profiled<CountingSystem> = Profiled::new(CountingSystem::new());

/// One Box<u64> (alloc, 8 bytes); 1000 u64 pushed into Vec::new() (alloc of 32 bytes, then
/// 8 reallocs of 64..8192 bytes); vec![0u8; 4096] (alloc_zeroed); all freed: 3 deallocs.
#[inline(never)]
fn site_wrapped() {
    black_box(Box::new(black_box(7u64)));
    let mut v = Vec::new();
    for i in 0..1000u64 {
        v.push(black_box(i));
    }
    black_box(v);
    black_box(vec![0u8; 4096]);
}
const WRAPPED_CALLS: u64 = 1 + 9 + 1;
const WRAPPED_BYTES: u64 = 8 + 32 + (64 + 128 + 256 + 512 + 1024 + 2048 + 4096 + 8192) + 4096;

fn workload_wrapped() {
    let before = GLOBAL.inner().snapshot();
    site_wrapped();
    let after = GLOBAL.inner().snapshot();
    let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    println!("inner alloc={} alloc_zeroed={} realloc={} dealloc={}", d[0], d[1], d[2], d[3]);
}

fn each_call_reaches_the_inner_allocators_own_method() {
    let run = run_workload("wrapped");
    expect_exit(&run, 0);
    assert_eq!(run.stdout.trim(), "inner alloc=2 alloc_zeroed=1 realloc=8 dealloc=3");
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    assert_site(&profile, "site_wrapped", WRAPPED_CALLS, WRAPPED_BYTES);
    let threads = thread_totals(&run.profile);
    let process = |f: usize| threads.iter().map(|t| t.calls[f]).sum::<u64>();
    assert!(process(MF_FN_RUST_REALLOC) >= 8 && process(MF_FN_RUST_ALLOC_ZEROED) >= 1);
    run.clean_up();
}

fn main() {
    if let Ok(workload) = std::env::var(WORKLOAD_VAR) {
        assert_eq!(workload, "wrapped");
        workload_wrapped();
        return;
    }
    run_tests(&[("each_call_reaches_the_inner_allocators_own_method", each_call_reaches_the_inner_allocators_own_method)]);
}
