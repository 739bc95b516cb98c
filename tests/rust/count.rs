//! `malloc_freq::count` with ProfAllocator as the global allocator, in this process (the
//! default, sampled mode: the counts are exact all the same): exactly the closure's
//! allocations, nested, and none of other threads'.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use malloc_freq::ProfAllocator;
use support::*;

#[global_allocator]
static GLOBAL: ProfAllocator = ProfAllocator;

#[inline(never)]
fn boxes(n: u64) {
    for i in 0..n {
        black_box(Box::new(black_box(i)));
    }
}

/// 1000 u64 pushed into Vec::new(): 1 alloc of 32 bytes, 8 reallocs up to 8192 (profile.rs).
#[inline(never)]
fn vec_growth() {
    let mut v = Vec::new();
    for i in 0..1000u64 {
        v.push(black_box(i));
    }
    black_box(v);
}

fn counts_the_closure_exactly() {
    // 100,000 calls: past many of the hot path's flushes (every 4,096 calls) and samples
    let c = malloc_freq::count(|| boxes(100_000)).expect("the crate is the allocator");
    assert_eq!((c.calls, c.bytes), (100_000, 800_000));
    assert_eq!(c.function("rust alloc"), (100_000, 800_000));
    assert_eq!(c.by_function().count(), 1);
    let c = malloc_freq::count(vec_growth).unwrap();
    assert_eq!((c.calls, c.bytes), (9, 32 + 16320));
    assert_eq!(c.function("rust alloc"), (1, 32));
    assert_eq!(c.function("rust realloc"), (8, 16320));
    let c = malloc_freq::count(|| drop(black_box(vec![0u8; 100]))).unwrap();
    assert_eq!(c.function("rust alloc_zeroed"), (1, 100));
    assert_eq!(malloc_freq::count(|| ()).unwrap().calls, 0);
}

fn nested_counts_add_up() {
    let mut inner = None;
    let outer = malloc_freq::count(|| {
        boxes(10);
        inner = Some(malloc_freq::count(vec_growth).unwrap());
        boxes(5);
    })
    .unwrap();
    let inner = inner.unwrap();
    assert_eq!(inner.calls, 9);
    assert_eq!((outer.calls, outer.bytes), (10 + 9 + 5, 15 * 8 + 32 + 16320));
    let before = malloc_freq::thread_counts().unwrap();
    boxes(7);
    assert_eq!((malloc_freq::thread_counts().unwrap() - before).calls, 7);
}

static GO: AtomicBool = AtomicBool::new(false);
static DONE: AtomicBool = AtomicBool::new(false);

fn other_threads_are_not_counted() {
    let other = thread::spawn(|| {
        while !GO.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let c = malloc_freq::count(|| boxes(50_000)).unwrap();
        DONE.store(true, Ordering::Release);
        c
    });
    // The other thread's 50,000 calls run inside this window; no allocation waits for them.
    let mine = malloc_freq::count(|| {
        boxes(30);
        GO.store(true, Ordering::Release);
        while !DONE.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        boxes(20);
    })
    .unwrap();
    assert_eq!((mine.calls, mine.bytes), (50, 400));
    assert_eq!(other.join().unwrap().calls, 50_000);
}

fn main() {
    run_tests(&[
        ("counts_the_closure_exactly", counts_the_closure_exactly),
        ("nested_counts_add_up", nested_counts_add_up),
        ("other_threads_are_not_counted", other_threads_are_not_counted),
    ]);
}
