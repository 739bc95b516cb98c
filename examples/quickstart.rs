//! The Rust quick start: three lines make every allocation of the program counted.
//!
//!     MALLOC_FREQ_SAMPLE=1 cargo run --release --example quickstart
//!     (scripts/cargo in place of cargo on a machine without crates.io: see the README)
//!     build/mf_print --dir malloc_freq.<pid>
//!
//! With MALLOC_FREQ_SAMPLE=1 (every call recorded), the rows of `mf_print --format csv`
//! whose stack goes through each function add up to exactly:
//!
//!   quickstart::make_boxes   1000 calls   8000 bytes
//!   quickstart::grow_vec        9 calls  16352 bytes
//!   quickstart::name_items    100 calls   1000 bytes
//!
//! make_boxes: Box::new(u64), 8 bytes, 1000 times; the site shown is Box<T>::new, called
//! from make_boxes.
//! grow_vec: 1000 u64 pushed into Vec::new(): an alloc of 32 bytes at capacity 4, then 8
//! reallocs doubling up to 8192 bytes; the site shown is RawVec<T,A>::grow_one
//! (RawVec<T,A>::reserve_for_push before Rust 1.79).
//! name_items: format!("item-{}", i) for i < 100 starts each String at twice the literal's
//! length, 10 bytes, which fits; the site shown is RawVec<T,A>::with_capacity_in, reached
//! from String::with_capacity in alloc::fmt::format::format_inner.
//!
//! std's start-up, println! and profile_dir() allocate a few more times elsewhere (4 calls,
//! about 1.1 KiB with rustc 1.63, 1.6 KiB with 1.95); the exact totals are in the report's
//! header.

use malloc_freq::ProfAllocator;
#[global_allocator]
static GLOBAL: ProfAllocator = ProfAllocator;

/// Keeps the optimizer from removing an allocation whose result is unused, like
/// `std::hint::black_box` (Rust 1.66; this example builds with the crate's oldest Rust, 1.63).
#[inline]
fn black_box<T>(value: T) -> T {
    let value = std::mem::ManuallyDrop::new(value);
    // SAFETY: reads a valid, aligned T that is never used or dropped again.
    unsafe { std::ptr::read_volatile(&*value as *const T) }
}

#[inline(never)]
fn make_boxes() {
    for i in 0..1000u64 {
        black_box(Box::new(black_box(i)));
    }
}

#[inline(never)]
fn grow_vec() -> usize {
    let mut v = Vec::new();
    for i in 0..1000u64 {
        v.push(black_box(i));
    }
    v.len()
}

#[inline(never)]
fn name_items() -> usize {
    // A loop rather than `.map(..).sum()`: that compiles to a jump into Iterator::fold, so
    // name_items would leave no frame of its own on the stack (Rust 1.63 does this).
    let mut bytes = 0;
    for i in 0..100u64 {
        bytes += black_box(format!("item-{}", i)).len();
    }
    bytes
}

fn main() {
    make_boxes();
    let pushed = grow_vec();
    let name_bytes = name_items();
    println!("pushed {} values, named items in {} bytes", pushed, name_bytes);
    match malloc_freq::profile_dir() {
        Some(dir) => println!("profile: mf_print --dir {}", dir.display()),
        None => println!("profiling is off (see the message above)"),
    }
}
