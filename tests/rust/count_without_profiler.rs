//! `malloc_freq::count` in a program whose global allocator is not the crate's: an error
//! naming the fix; and the same binary under `LD_PRELOAD=libmalloc_freq.so` (the crate's core
//! counts nothing here, the preload library's is found with dlsym): exact counts of malloc.

mod support;

use std::env;
use std::path::Path;
use std::process::Command;

use malloc_freq::CountError;
use support::*;

#[inline(never)]
fn boxes(n: u64) {
    for i in 0..n {
        black_box(Box::new(black_box(i)));
    }
}

fn says_no_profiler_is_loaded() {
    let mut ran = false;
    let r = malloc_freq::count(|| {
        boxes(3);
        ran = true;
    });
    assert!(ran, "the closure runs all the same");
    assert_eq!(r, Err(CountError::NoProfiler));
    assert_eq!(malloc_freq::thread_counts(), Err(CountError::NoProfiler));
    let msg = CountError::NoProfiler.to_string();
    assert!(msg.starts_with("malloc_freq: no profiler loaded"), "{}", msg);
    assert!(msg.contains("LD_PRELOAD=libmalloc_freq.so"), "{}", msg);
}

fn counts_under_the_preload_library() {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("build/libmalloc_freq.so");
    assert!(lib.is_file(), "{} is missing: run `make` first", lib.display());
    let dir = fresh_dir("count-preload");
    let mut cmd = Command::new(env::current_exe().unwrap());
    cmd.env(WORKLOAD_VAR, "preloaded")
        .env("LD_PRELOAD", &lib)
        .env("MALLOC_FREQ_DIR", &dir)
        .env_remove("MALLOC_FREQ_SAMPLE");
    let (_, status, stdout, stderr) = run_with_timeout(&mut cmd);
    assert!(status.success(), "child failed: {}", stderr);
    assert_eq!(stdout, "malloc 1000 8000 total 1000 8000\n");
    let _ = std::fs::remove_dir_all(dir);
}

fn main() {
    if let Ok(workload) = env::var(WORKLOAD_VAR) {
        assert_eq!(workload, "preloaded");
        let c = malloc_freq::count(|| boxes(1000)).expect("the preload library counts");
        let (calls, bytes) = c.function("malloc");
        println!("malloc {} {} total {} {}", calls, bytes, c.calls, c.bytes);
        return;
    }
    run_tests(&[
        ("says_no_profiler_is_loaded", says_no_profiler_is_loaded),
        ("counts_under_the_preload_library", counts_under_the_preload_library),
    ]);
}
