//! ProfAllocator as the global allocator of a real program: each test re-executes this
//! binary as a child running one workload with `MALLOC_FREQ_SAMPLE=1`, then checks the
//! exact calls and bytes per site in `mf_print --format csv` and in the thread files.
//!
//! The sites are `#[inline(never)]` functions named `site_*`; their counts follow from
//! std's documented growth rules and were confirmed by real runs (rustc 1.63, Debian 12's,
//! and 1.95, x86_64).

mod support;

use std::collections::HashMap;
use std::sync::{mpsc, Arc, Barrier};
use std::thread;

use malloc_freq::ProfAllocator;
use support::*;

#[global_allocator]
static GLOBAL: ProfAllocator = ProfAllocator;

// ---- workloads (run in the child) ---------------------------------------------------------

/// `Box::new(u64)` 1000 times: 1000 calls of 8 bytes.
const BOXES: u64 = 1000;
#[inline(never)]
fn site_boxes() {
    for i in 0..BOXES {
        black_box(Box::new(black_box(i)));
    }
}

/// 1000 `u64` pushed into `Vec::new()`: capacity 4 (32 bytes, alloc), then doubled 8 times
/// up to 1024 (reallocs of 64, 128, ..., 8192 bytes): 9 calls, 32 + 16320 bytes.
const VEC_CALLS: u64 = 9;
const VEC_BYTES: u64 = 32 + (64 + 128 + 256 + 512 + 1024 + 2048 + 4096 + 8192);
#[inline(never)]
fn site_vec_growth() {
    let mut v = Vec::new();
    for i in 0..1000u64 {
        v.push(black_box(i));
    }
    black_box(v);
}

/// A `Vec<u64>` sized by hand: `with_capacity(10)` allocates 80 bytes; `reserve(100)` on
/// an empty Vec grows to max(2 * 10, 100) = 100 (realloc, 800); `reserve_exact(300)` to
/// exactly 300 (realloc, 2400); one push, then `shrink_to_fit` to 1 (realloc, 8 bytes).
const RESERVE_CALLS: u64 = 4;
const RESERVE_BYTES: u64 = 80 + 800 + 2400 + 8;
#[inline(never)]
fn site_vec_reserve() {
    let mut v: Vec<u64> = Vec::with_capacity(black_box(10));
    v.reserve(black_box(100));
    v.reserve_exact(black_box(300));
    v.push(black_box(1));
    v.shrink_to_fit();
    black_box(v);
}

/// `format!("item-{}", i)` for i < 100: the literal piece is 5 bytes, so the String starts
/// with twice that, 10 bytes, and "item-99" fits: 100 calls of 10 bytes.
const FORMATS: u64 = 100;
#[inline(never)]
fn site_format() {
    for i in 0..FORMATS {
        black_box(format!("item-{}", black_box(i)));
    }
}

/// 100 inserts into `HashMap<u64, u64>::new()`: the table is allocated at 4 buckets and
/// reallocated (alloc + free) at 8, 16, 32, 64 and 128; a table of b buckets takes
/// 16 b (entries) + b + 16 (control bytes, SSE2 group) bytes.
const MAP_CALLS: u64 = 6;
const MAP_BYTES: u64 = 17 * (4 + 8 + 16 + 32 + 64 + 128) + 16 * 6;
#[inline(never)]
fn site_hashmap() {
    let mut m = HashMap::new();
    for i in 0..100u64 {
        m.insert(black_box(i), i);
    }
    black_box(m);
}

/// `vec![0u8; 4096]` 10 times: alloc_zeroed of 4096 bytes each.
const ZEROED: u64 = 10;
#[inline(never)]
fn site_zeroed() {
    for _ in 0..ZEROED {
        black_box(vec![0u8; 4096]);
    }
}

/// 500 boxes inside a pause() guard: counted only as "not profiled".
const PAUSED: u64 = 500;
#[inline(never)]
fn site_paused() {
    let _quiet = malloc_freq::pause();
    for i in 0..PAUSED {
        black_box(Box::new(black_box(i)));
    }
}

fn workload_sites() {
    site_boxes();
    site_vec_growth();
    site_vec_reserve();
    site_format();
    site_hashmap();
    site_zeroed();
    site_paused();
    let dir = malloc_freq::profile_dir().expect("profiling is off in the child");
    println!("profile_dir={}", dir.display());
}

/// Two threads, one after the other: A makes one Box, B the same Box plus the Vec growth and
/// one zeroed vector, so B's exact totals minus A's are exactly what those sites called.
fn workload_per_function() {
    // A and B live at once, so each has a table of its own (a table passes to the next new
    // thread only when its thread has exited), and do the same but for B's work.
    let both = Arc::new(Barrier::new(2));
    let a = {
        let both = Arc::clone(&both);
        thread::spawn(move || {
            black_box(Box::new(black_box(1u64)));
            both.wait();
        })
    };
    let b = thread::spawn(move || {
        black_box(Box::new(black_box(2u64)));
        site_vec_growth();
        black_box(vec![0u8; 4096]);
        both.wait();
    });
    a.join().unwrap();
    b.join().unwrap();
}

/// Workers that finish, and one thread still allocating-ready (parked) when main calls
/// `std::process::exit`.
const WORKERS: u64 = 4;
const WORKER_BOXES: u64 = 250;
const LINGERING_BOXES: u64 = 300;
#[inline(never)]
fn site_worker() {
    for i in 0..WORKER_BOXES {
        black_box(Box::new(black_box(i)));
    }
}
#[inline(never)]
fn site_lingering() {
    for i in 0..LINGERING_BOXES {
        black_box(Box::new(black_box(i)));
    }
}
fn lingering(done: mpsc::Sender<()>) -> ! {
    site_lingering();
    done.send(()).unwrap();
    loop {
        thread::park();
    }
}
fn workload_threads_then_exit() {
    let workers: Vec<_> = (0..WORKERS).map(|_| thread::spawn(site_worker)).collect();
    for w in workers {
        w.join().unwrap();
    }
    let (done, finished) = mpsc::channel();
    thread::spawn(move || lingering(done));
    finished.recv().unwrap();
    std::process::exit(0);
}

/// 2000 threads, 8 at a time, each making 3 boxes: thread ids and stacks are reused.
const SHORT_THREADS: u64 = 2000;
#[inline(never)]
fn site_short_thread() {
    for i in 0..3u64 {
        black_box(Box::new(black_box(i)));
    }
}
fn workload_short_threads() {
    for _ in 0..SHORT_THREADS / 8 {
        let batch: Vec<_> = (0..8).map(|_| thread::spawn(site_short_thread)).collect();
        for t in batch {
            t.join().unwrap();
        }
    }
}

/// A thread that allocates then panics (joined as Err), and a panic caught in main. The
/// sites return before the panic, so what panicking allocates is not theirs.
const BEFORE_PANIC: u64 = 200;
const IN_CATCH_UNWIND: u64 = 100;
#[inline(never)]
fn site_before_panic() {
    for i in 0..BEFORE_PANIC {
        black_box(Box::new(black_box(i)));
    }
}
#[inline(never)]
fn site_in_catch_unwind() {
    for i in 0..IN_CATCH_UNWIND {
        black_box(Box::new(black_box(i)));
    }
}
fn workload_panics() {
    let panicked = thread::spawn(|| {
        site_before_panic();
        panic!("thread panics on purpose");
    })
    .join();
    assert!(panicked.is_err());
    let caught = std::panic::catch_unwind(|| {
        site_in_catch_unwind();
        panic!("caught on purpose");
    });
    assert!(caught.is_err());
    println!("survived both panics");
}

/// The live heap (MALLOC_FREQ_LIVE=all): 100 boxes of 40 bytes leaked (alive at exit), 500
/// of 24 bytes dropped at once (freed through `dealloc`, each before the next allocation:
/// temporary), 64 grown in place or moved by `realloc` and then dropped.
const LIVE_LEAKED: u64 = 100;
const LIVE_TEMPORARY: u64 = 500;
#[inline(never)]
fn site_live_leaked() {
    for _ in 0..LIVE_LEAKED {
        black_box(Box::leak(Box::new([7u8; 40])));
    }
}

#[inline(never)]
fn site_live_temporary() {
    for _ in 0..LIVE_TEMPORARY {
        drop(black_box(Box::new([1u8; 24])));
    }
}

#[inline(never)]
fn site_live_grown() {
    for _ in 0..64 {
        let mut v: Vec<u8> = Vec::with_capacity(8);
        v.extend_from_slice(&[0u8; 8]);
        v.reserve_exact(4096); // a realloc: the old block freed, the new one recorded
        drop(black_box(v));
    }
}

fn workload_live() {
    site_live_leaked();
    site_live_temporary();
    site_live_grown();
}

fn run_workload_named(name: &str) {
    match name {
        "live" => workload_live(),
        "sites" => workload_sites(),
        "per_function" => workload_per_function(),
        "threads_then_exit" => workload_threads_then_exit(),
        "short_threads" => workload_short_threads(),
        "panics" => workload_panics(),
        other => panic!("unknown workload {:?}", other),
    }
}

// ---- checks (run in the test driver) ------------------------------------------------------

/// Frames that are the profiler's or the allocator's plumbing, never the code that allocated.
fn is_plumbing(frame: &str) -> bool {
    frame.contains("mf_record")
        || frame.contains("malloc_freq::")
        || frame.contains("__rust_alloc")
        || frame.contains("__rust_realloc")
        || frame.contains("__rg_")
        || frame.contains("__rdl_")
        || frame.starts_with("alloc::alloc::")
        || frame.contains("alloc::alloc::Global")
        || frame.contains("GlobalAlloc")
        || frame.contains("finish_grow")
        || frame.contains("grow_amortized")
        || frame.contains("grow_exact")
        || frame.contains("do_reserve_and_handle")
        || frame.contains("allocate_in")
        || frame.contains("try_reserve_exact")
        || frame.contains("RawVecInner")
}

fn sites_run() -> (Run, Profile) {
    let run = run_workload("sites");
    expect_exit(&run, 0);
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    (run, profile)
}

fn mf_fn_numbers_match_the_format_header() {
    let header = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/c_core/mf_format.h")).unwrap();
    let body = header.split("enum mf_fn {").nth(1).unwrap().split('}').next().unwrap();
    let names: Vec<&str> = body
        .split(',')
        .map(|s| s.split_whitespace().next().unwrap_or(""))
        .filter(|s| !s.is_empty())
        .collect();
    let index = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{} not in enum mf_fn", n));
    assert_eq!(index("MF_FN_RUST_ALLOC"), MF_FN_RUST_ALLOC);
    assert_eq!(index("MF_FN_RUST_ALLOC_ZEROED"), MF_FN_RUST_ALLOC_ZEROED);
    assert_eq!(index("MF_FN_RUST_REALLOC"), MF_FN_RUST_REALLOC);
}

fn sites_have_exact_calls_and_bytes() {
    let (run, profile) = sites_run();
    assert_site(&profile, "site_boxes", BOXES, 8 * BOXES);
    assert_site(&profile, "site_vec_growth", VEC_CALLS, VEC_BYTES);
    assert_site(&profile, "site_vec_reserve", RESERVE_CALLS, RESERVE_BYTES);
    assert_site(&profile, "site_format", FORMATS, 10 * FORMATS);
    assert_site(&profile, "site_hashmap", MAP_CALLS, MAP_BYTES);
    assert_site(&profile, "site_zeroed", ZEROED, 4096 * ZEROED);
    for row in profile.rows.iter().filter(|r| r.stack[0] != "[not profiled]") {
        assert_eq!(row.calls, row.samples, "MALLOC_FREQ_SAMPLE=1 records every call: {:?}", row);
    }
    run.clean_up();
}

fn allocator_plumbing_is_trimmed() {
    let (run, profile) = sites_run();
    for row in &profile.rows {
        assert!(!is_plumbing(&row.stack[0]), "a stack starts in allocator plumbing: {:?}", row.stack);
    }
    // By default std's code is folded into its caller: Vec growth is reported at the
    // function that pushes, via Vec::push; sizing by hand via the Vec method it called.
    let vec_rows = profile.rows_with("site_vec_growth");
    assert!(
        !vec_rows.is_empty()
            && vec_rows.iter().all(|r| frame_is(&r.stack[0], "site_vec_growth") && r.via.ends_with("::push")),
        "Vec growth not reported at site_vec_growth via Vec::push: {:?}",
        vec_rows
    );
    let mut vias: Vec<String> = profile
        .rows_with("site_vec_reserve")
        .iter()
        .inspect(|r| assert!(frame_is(&r.stack[0], "site_vec_reserve"), "{:?}", r))
        .map(|r| r.via.rsplit("::").next().unwrap().to_owned())
        .collect();
    vias.sort();
    assert_eq!(
        vias,
        ["reserve", "reserve_exact", "shrink_to_fit", "with_capacity"],
        "wrappers folded into site_vec_reserve\n{}",
        profile.csv
    );
    // --no-fold: Vec growth is reported where the Vec grows: RawVec's grow_one (Rust >= 1.79;
    // reserve_for_push before), inside the site.
    let unfolded = Profile::read(&run.profile, &["--no-fold"]);
    assert_eq!(unfolded.total(), profile.total());
    let vec_rows = unfolded.rows_with("site_vec_growth");
    assert!(
        vec_rows.iter().all(|r| r.stack[0].contains("RawVec")
            && (r.stack[0].ends_with("::grow_one") || r.stack[0].ends_with("::reserve_for_push"))),
        "Vec growth not reported at RawVec's grow_one or reserve_for_push: {:?}",
        vec_rows
    );
    // Sizing a Vec by hand is reported at RawVec's method of the same name (the layers
    // under it, RawVecInner, grow_exact, do_reserve_and_handle, ..., are trimmed).
    let mut reserve_sites: Vec<String> = unfolded
        .rows_with("site_vec_reserve")
        .iter()
        .map(|r| r.stack[0].rsplit("::").next().unwrap().to_owned())
        .collect();
    reserve_sites.sort();
    assert_eq!(
        reserve_sites,
        ["reserve", "reserve_exact", "shrink_to_fit", "with_capacity_in"],
        "sites of site_vec_reserve with --no-fold\n{}",
        unfolded.csv
    );
    // The plumbing is there to trim: --no-trim shows it (here at least in std's own
    // allocations, which call the __rust_alloc shim).
    let untrimmed = Profile::read(&run.profile, &["--no-trim"]);
    assert_eq!(untrimmed.total(), profile.total());
    assert!(untrimmed.rows.iter().any(|r| is_plumbing(&r.stack[0])), "--no-trim\n{}", untrimmed.csv);
    run.clean_up();
}

/// The tree starts at the program's code: each workload's site is its own `site_*`
/// function (std's Vec, String, Box, HashMap and format! code folded into it), no line is
/// wider than --width, and no start-up frame (_start, __libc_start_main, clone3, lang_start)
/// is shown unless --full-stacks.
fn sites_are_the_programs_functions() {
    let (run, profile) = sites_run();
    for site in ["site_boxes", "site_vec_growth", "site_vec_reserve", "site_format", "site_hashmap", "site_zeroed"] {
        let rows = profile.rows_with(site);
        assert!(!rows.is_empty(), "no stack through {}\n{}", site, profile.csv);
        for r in rows {
            assert!(frame_is(&r.stack[0], site), "{}'s stack starts at {:?}, via {:?}", site, r.stack[0], r.via);
        }
    }
    let tree = |args: &[&str]| {
        let out = std::process::Command::new(mf_print_path())
            .arg("--dir")
            .arg(&run.profile)
            .args(["--threshold", "0"])
            .args(args)
            .output()
            .expect("cannot run mf_print");
        assert!(out.status.success(), "mf_print {:?}: {}", args, String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("the tree is not UTF-8")
    };
    let text = tree(&["--width", "72"]);
    for line in text.lines() {
        assert!(line.chars().count() <= 72, "a line wider than --width 72: {:?}", line);
    }
    let startup = |text: &str| {
        text.lines().any(|l| {
            ["─ _start", "─ __libc_start_main", "─ clone3", "─ std::rt::lang_start"].iter().any(|s| l.contains(s))
        })
    };
    let text = tree(&["--width", "0"]);
    assert!(!startup(&text), "start-up frames in the tree\n{}", text);
    assert!(text.contains("site_vec_growth via alloc::vec::Vec<…>::push"), "the Vec::push site\n{}", text);
    assert!(startup(&tree(&["--full-stacks"])), "--full-stacks shows no start-up frame");
    run.clean_up();
}

fn paused_region_counts_as_not_profiled() {
    let (run, profile) = sites_run();
    assert!(profile.rows_with("site_paused").is_empty(), "paused site on a stack\n{}", profile.csv);
    assert_eq!(profile.not_profiled(), (PAUSED, 8 * PAUSED), "[not profiled]\n{}", profile.csv);
    run.clean_up();
}

fn profile_dir_names_the_directory_written() {
    let (run, _) = sites_run();
    let line = format!("profile_dir={}", run.profile.display());
    assert!(run.stdout.lines().any(|l| l == line), "expected {:?} in {:?}", line, run.stdout);
    assert!(std::fs::read_dir(&run.profile).unwrap().any(|e| {
        e.unwrap().file_name().to_string_lossy().starts_with("process.")
    }));
    run.clean_up();
}

fn realloc_and_zeroed_are_counted_as_themselves() {
    let run = run_workload("per_function");
    expect_exit(&run, 0);
    let threads = thread_totals(&run.profile);
    // A and B ran at once, so either may have made its file first: B is the one that
    // reallocated.
    let (a, b) = match threads.as_slice() {
        [.., x, y] if y.calls[MF_FN_RUST_REALLOC] > 0 => (x, y),
        [.., y, x] if y.calls[MF_FN_RUST_REALLOC] > 0 => (x, y),
        _ => panic!("expected main, A and B thread files, found {:?}", threads),
    };
    let diff = |f: usize| (b.calls[f] - a.calls[f], b.bytes[f] - a.bytes[f]);
    assert_eq!(diff(MF_FN_RUST_ALLOC), (1, 32), "rust alloc: B {:?} A {:?}", b, a);
    assert_eq!(diff(MF_FN_RUST_REALLOC), (VEC_CALLS - 1, VEC_BYTES - 32), "rust realloc");
    assert_eq!(diff(MF_FN_RUST_ALLOC_ZEROED), (1, 4096), "rust alloc_zeroed");
    for t in &threads {
        let others: u64 = (0..16).filter(|f| !(8..=10).contains(f)).map(|f| t.calls[f]).sum();
        assert_eq!(others, 0, "calls counted under C functions: {:?}", t);
    }
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    assert_site(&profile, "site_vec_growth", VEC_CALLS, VEC_BYTES);
    run.clean_up();
}

fn threads_running_at_exit_are_in_the_profile() {
    let run = run_workload("threads_then_exit");
    expect_exit(&run, 0);
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    assert_site(&profile, "site_worker", WORKERS * WORKER_BOXES, 8 * WORKERS * WORKER_BOXES);
    assert_site(&profile, "site_lingering", LINGERING_BOXES, 8 * LINGERING_BOXES);
    run.clean_up();
}

fn thousands_of_short_lived_threads_are_all_counted() {
    let run = run_workload("short_threads");
    expect_exit(&run, 0);
    // Eight at a time: their tables pass from thread to thread, a few files serve them all.
    let threads = thread_totals(&run.profile);
    let recorded: u64 = threads.iter().map(|t| t.threads).sum();
    assert_eq!(recorded, SHORT_THREADS + 1, "threads recorded in {} thread files", threads.len());
    assert!(threads.len() <= 9 + 1, "{} thread files for {} threads, 8 at a time", threads.len(), SHORT_THREADS);
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    assert_site(&profile, "site_short_thread", 3 * SHORT_THREADS, 24 * SHORT_THREADS);
    run.clean_up();
}

fn panics_keep_their_counts_and_messages() {
    let run = run_workload("panics");
    expect_exit(&run, 0);
    assert!(run.stdout.contains("survived both panics"), "{}", run.stdout);
    for message in ["thread panics on purpose", "caught on purpose"] {
        assert!(run.stderr.contains(message), "no {:?} in stderr:\n{}", message, run.stderr);
    }
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    assert_site(&profile, "site_before_panic", BEFORE_PANIC, 8 * BEFORE_PANIC);
    assert_site(&profile, "site_in_catch_unwind", IN_CATCH_UNWIND, 8 * IN_CATCH_UNWIND);
    run.clean_up();
}

/// `dealloc` and `realloc` are followed: `mf_print --live` shows the leaked boxes alive,
/// the dropped ones freed and temporary, the reallocated ones freed.
fn live_heap_follows_dealloc_and_realloc() {
    let run = run_workload_with("live", &[("MALLOC_FREQ_LIVE", "all")]);
    expect_exit(&run, 0);
    let out = std::process::Command::new(mf_print_path())
        .args(["--live", "--format", "csv"])
        .arg(&run.profile)
        .output()
        .expect("cannot run mf_print");
    assert!(out.status.success(), "mf_print --live: {}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8(out.stdout).expect("the CSV is not UTF-8");
    let rows = parse_csv(&csv);
    let header = &rows[0];
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {}", name));
    let (alive, alive_bytes, freed, temp) = (col("alive"), col("alive_bytes"), col("freed"), col("temporary_pct"));
    let stack = col("stack");
    let sum = |site: &str, c: usize| -> u64 {
        rows[1..]
            .iter()
            .filter(|r| frame_is(&csv_frames(&r[stack])[0], site))
            .map(|r| r[c].parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!((sum("site_live_leaked", alive), sum("site_live_leaked", alive_bytes)), (LIVE_LEAKED, 40 * LIVE_LEAKED), "{}", csv);
    assert_eq!((sum("site_live_temporary", alive), sum("site_live_temporary", freed)), (0, LIVE_TEMPORARY), "{}", csv);
    for r in rows[1..].iter().filter(|r| frame_is(&csv_frames(&r[stack])[0], "site_live_temporary")) {
        assert_eq!(r[temp], "100.00", "site_live_temporary is all temporary: {}", csv);
    }
    // 64 blocks of 8 bytes freed by their realloc, 64 of 4,104 by the drop
    assert_eq!((sum("site_live_grown", alive), sum("site_live_grown", freed)), (0, 128), "{}", csv);
    run.clean_up();
}

fn main() {
    if let Ok(workload) = std::env::var(WORKLOAD_VAR) {
        run_workload_named(&workload);
        return;
    }
    run_tests(&[
        ("mf_fn_numbers_match_the_format_header", mf_fn_numbers_match_the_format_header),
        ("sites_have_exact_calls_and_bytes", sites_have_exact_calls_and_bytes),
        ("allocator_plumbing_is_trimmed", allocator_plumbing_is_trimmed),
        ("sites_are_the_programs_functions", sites_are_the_programs_functions),
        ("paused_region_counts_as_not_profiled", paused_region_counts_as_not_profiled),
        ("profile_dir_names_the_directory_written", profile_dir_names_the_directory_written),
        ("realloc_and_zeroed_are_counted_as_themselves", realloc_and_zeroed_are_counted_as_themselves),
        ("threads_running_at_exit_are_in_the_profile", threads_running_at_exit_are_in_the_profile),
        ("thousands_of_short_lived_threads_are_all_counted", thousands_of_short_lived_threads_are_all_counted),
        ("panics_keep_their_counts_and_messages", panics_keep_their_counts_and_messages),
        ("live_heap_follows_dealloc_and_realloc", live_heap_follows_dealloc_and_realloc),
    ]);
}
