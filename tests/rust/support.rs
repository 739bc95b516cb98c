//! What the test binaries share: a small test runner (each binary is its own `main`, so a
//! child re-executed from it runs its workload on thread 'main' like a user's program), the
//! child-process runner, and readers for mf_print's CSV and the thread files' exact totals.
#![allow(dead_code)] // each test binary uses a different part

use std::env;
use std::fs;
use std::io::Read;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Set in a child: the name of the workload to run instead of the tests.
pub const WORKLOAD_VAR: &str = "MF_TEST_WORKLOAD";

/// `std::hint::black_box` (Rust 1.66) for the crate's oldest supported Rust (1.63): the
/// value goes through a volatile read, so the optimizer can neither drop an allocation
/// whose result is unused nor fold a value into a constant (criterion's stable black box).
#[inline]
pub fn black_box<T>(value: T) -> T {
    let value = std::mem::ManuallyDrop::new(value);
    // SAFETY: reads a valid, aligned T that is never used or dropped again.
    unsafe { std::ptr::read_volatile(&*value as *const T) }
}

/// A child that takes longer than this is taken for a deadlock.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

pub type Test = (&'static str, fn());

/// Runs the named tests (all, or those whose name contains a command-line argument), prints
/// one line each like libtest, and exits non-zero if any failed.
pub fn run_tests(tests: &[Test]) {
    let filters: Vec<String> = env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Test> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} test{}", selected.len(), if selected.len() == 1 { "" } else { "s" });
    let mut failed = Vec::new();
    for (name, test) in selected.iter().copied() {
        let started = Instant::now();
        let result = panic::catch_unwind(AssertUnwindSafe(test));
        let verdict = if result.is_ok() { "ok" } else { "FAILED" };
        println!("test {} ... {} ({:.2} s)", name, verdict, started.elapsed().as_secs_f64());
        if result.is_err() {
            failed.push(*name);
        }
    }
    // This driver process is profiled too (the core starts in every binary that links it),
    // into the working directory: leave nothing behind in the source tree.
    if let Some(dir) = malloc_freq::profile_dir() {
        let _ = fs::remove_dir_all(dir);
    }
    println!(
        "\ntest result: {}. {} passed; {} failed\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        println!("failures: {}", failed.join(", "));
        println!("(their children's profiles are kept in {}/malloc_freq-test-{}-*)", env::temp_dir().display(), std::process::id());
        std::process::exit(101);
    }
}

/// A fresh, empty directory under the system's temporary directory.
pub fn fresh_dir(label: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = env::temp_dir().join(format!("malloc_freq-test-{}-{}-{}", std::process::id(), label, n));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("cannot create a temporary directory");
    dir
}

/// What a finished child left: its output and its profile directory.
pub struct Run {
    pub pid: u32,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// `<MALLOC_FREQ_DIR>/malloc_freq.<pid>`
    pub profile: PathBuf,
    base: PathBuf,
}

impl Run {
    /// Removes the child's output directory (left in place when a test fails, to look at).
    pub fn clean_up(self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

/// Re-executes this test binary as a profiled child running `workload`, with every call
/// recorded (`MALLOC_FREQ_SAMPLE=1`) into a fresh directory.
pub fn run_workload(workload: &str) -> Run {
    run_workload_with(workload, &[])
}

/// `run_workload` with more environment variables for the child.
pub fn run_workload_with(workload: &str, vars: &[(&str, &str)]) -> Run {
    let base = fresh_dir(workload);
    let mut cmd = Command::new(env::current_exe().expect("cannot find this test binary"));
    cmd.env(WORKLOAD_VAR, workload)
        .env("MALLOC_FREQ_SAMPLE", "1")
        .env("MALLOC_FREQ_DIR", &base)
        .env("RUST_BACKTRACE", "0")
        .env_remove("MALLOC_FREQ_DEPTH")
        .env_remove("MALLOC_FREQ_SEED")
        .env_remove("MALLOC_FREQ_UNWIND")
        .env_remove("LD_PRELOAD");
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let (pid, status, stdout, stderr) = run_with_timeout(&mut cmd);
    let profile = base.join(format!("malloc_freq.{}", pid));
    Run { pid, status, stdout, stderr, profile, base }
}

/// Runs `cmd` to the end (killing it after CHILD_TIMEOUT); returns pid, status and output.
pub fn run_with_timeout(cmd: &mut Command) -> (u32, ExitStatus, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {}", cmd, e));
    let pid = child.id();
    // Drain both pipes on threads so that a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).map(|_| s)
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).map(|_| s)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("cannot wait for the child") {
            break status;
        }
        if started.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{:?} (pid {}) did not finish in {:?}: deadlocked?", cmd, pid, CHILD_TIMEOUT);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out_reader.join().unwrap().expect("child stdout is not UTF-8");
    let stderr = err_reader.join().unwrap().expect("child stderr is not UTF-8");
    (pid, status, stdout, stderr)
}

/// The viewer: `$MF_PRINT` if set, else `<crate root>/build/mf_print`, built by `make`.
pub fn mf_print_path() -> PathBuf {
    if let Some(path) = env::var_os("MF_PRINT") {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "MF_PRINT={} is not a file", path.display());
        return path;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("build/mf_print");
    assert!(
        path.is_file(),
        "{} is missing: run `make` in {} first (it builds the viewer these tests read profiles with)",
        path.display(),
        env!("CARGO_MANIFEST_DIR")
    );
    path
}

/// One row of `mf_print --format csv`.
#[derive(Debug, Clone)]
pub struct Row {
    pub calls: u64,
    pub bytes: u64,
    pub samples: u64,
    /// Function names, the allocation site first (decoded: see `csv_frames`).
    pub stack: Vec<String>,
    /// `file:line` (or `??`) of each frame of `stack`, decoded the same way.
    pub locations: Vec<String>,
    /// The wrapper folded into the site (`alloc::vec::Vec<T>::push`), empty if none.
    pub via: String,
}

/// A profile as mf_print reports it.
pub struct Profile {
    pub rows: Vec<Row>,
    pub csv: String,
}

/// True if `frame` is the function `name` (`name` alone, or a path ending in `::name`).
pub fn frame_is(frame: &str, name: &str) -> bool {
    frame == name || frame.ends_with(&format!("::{}", name))
}

impl Profile {
    /// Reads `dir` with `mf_print --format csv [extra...]`.
    pub fn read(dir: &Path, extra: &[&str]) -> Profile {
        let mut cmd = Command::new(mf_print_path());
        cmd.arg("--dir").arg(dir).arg("--format").arg("csv").args(extra);
        let output = cmd.output().expect("cannot run mf_print");
        let csv = String::from_utf8(output.stdout).expect("mf_print's CSV is not UTF-8");
        assert!(
            output.status.success(),
            "{:?} failed ({}): {}",
            cmd,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let mut records = parse_csv(&csv).into_iter();
        assert_eq!(
            records.next().expect("mf_print printed no CSV header"),
            ["calls", "bytes", "samples", "stack", "locations", "via"],
            "unexpected CSV header"
        );
        let rows = records
            .map(|r| {
                assert_eq!(r.len(), 6, "CSV row without 6 fields: {:?}", r);
                let number = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("not a count: {:?}", s));
                Row {
                    calls: number(&r[0]),
                    bytes: number(&r[1]),
                    samples: number(&r[2]),
                    stack: csv_frames(&r[3]),
                    locations: csv_frames(&r[4]),
                    via: csv_frames(&r[5]).remove(0),
                }
            })
            .collect();
        Profile { rows, csv }
    }

    /// Rows whose stack has the function `name` in it.
    pub fn rows_with(&self, name: &str) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.stack.iter().any(|f| frame_is(f, name))).collect()
    }

    /// Calls and bytes of every stack that went through the function `name`.
    pub fn site(&self, name: &str) -> (u64, u64) {
        self.rows_with(name).iter().fold((0, 0), |(c, b), r| (c + r.calls, b + r.bytes))
    }

    /// Calls and bytes of all rows, `[not profiled]` included.
    pub fn total(&self) -> (u64, u64) {
        self.rows.iter().fold((0, 0), |(c, b), r| (c + r.calls, b + r.bytes))
    }

    /// The `[not profiled]` row's calls and bytes, (0, 0) if there is none.
    pub fn not_profiled(&self) -> (u64, u64) {
        self.rows
            .iter()
            .filter(|r| r.stack == ["[not profiled]"])
            .fold((0, 0), |(c, b), r| (c + r.calls, b + r.bytes))
    }
}

/// A CSV stack or locations field as its frames: split at `;`, each percent-decoded
/// (mf_print writes `%`, `;`, control characters and bytes that are not UTF-8 as `%XX`).
/// A name that is not UTF-8 comes back with U+FFFD for its stray bytes.
pub fn csv_frames(field: &str) -> Vec<String> {
    field.split(';').map(|f| String::from_utf8_lossy(&percent_decode(f)).into_owned()).collect()
}

/// The bytes `%XX` escapes stand for; anything else as it is.
pub fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// RFC 4180: comma-separated fields, `"`-quoted when they hold `,` `"` or a line break,
/// `""` for a quote inside quotes; lines end with LF or CRLF.
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(!quoted, "CSV ends inside a quoted field");
    if !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    records
}

/// `enum mf_fn` values (c_core/mf_format.h) of the Rust front end.
pub const MF_FN_RUST_ALLOC: usize = 8;
pub const MF_FN_RUST_ALLOC_ZEROED: usize = 9;
pub const MF_FN_RUST_REALLOC: usize = 10;
const MF_FN_COUNT: usize = 16;

/// The exact counters at the head of one thread file (`struct mf_thread_header`).
#[derive(Debug, Clone)]
pub struct ThreadTotals {
    pub seq: u64,
    pub tid: u32,
    pub calls: [u64; MF_FN_COUNT],
    pub bytes: [u64; MF_FN_COUNT],
    pub unprofiled_calls: u64,
    /// Threads that recorded into this file: a table passes to the next new thread when its
    /// thread exits.
    pub threads: u64,
}

/// Every `thread.*.mft` file of a profile directory, in creation order (`seq`).
pub fn thread_totals(profile: &Path) -> Vec<ThreadTotals> {
    let mut threads: Vec<ThreadTotals> = fs::read_dir(profile)
        .unwrap_or_else(|e| panic!("cannot read {}: {}", profile.display(), e))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("thread.") && name.ends_with(".mft")
        })
        .map(|path| {
            let data = fs::read(&path).unwrap();
            let u32_at = |off: usize| u32::from_le_bytes(data[off..off + 4].try_into().unwrap());
            let u64_at = |off: usize| u64::from_le_bytes(data[off..off + 8].try_into().unwrap());
            // Offsets of struct mf_thread_header's fields (8-byte aligned, no padding).
            assert_eq!(&data[0..8], b"MFREQTHR", "{} is not a thread file", path.display());
            assert_eq!(u32_at(8), 11, "format version of {}", path.display()); // MF_FORMAT_VERSION
            let mut t = ThreadTotals {
                seq: u64_at(32),
                tid: u32_at(28),
                calls: [0; MF_FN_COUNT],
                bytes: [0; MF_FN_COUNT],
                unprofiled_calls: u64_at(328),
                threads: u64_at(872),
            };
            for f in 0..MF_FN_COUNT {
                t.calls[f] = u64_at(64 + 8 * f);
                t.bytes[f] = u64_at(64 + 8 * MF_FN_COUNT + 8 * f);
            }
            t
        })
        .collect();
    threads.sort_by_key(|t| t.seq);
    threads
}

/// Calls and bytes of all functions of one thread.
pub fn thread_sum(t: &ThreadTotals) -> (u64, u64) {
    (t.calls.iter().sum(), t.bytes.iter().sum())
}

/// Panics with the child's output when it did not exit with `code`.
pub fn expect_exit(run: &Run, code: i32) {
    assert_eq!(
        run.status.code(),
        Some(code),
        "child {} ended with {}\nstdout:\n{}\nstderr:\n{}",
        run.pid,
        run.status,
        run.stdout,
        run.stderr
    );
}

/// Every call the threads counted exactly is in the CSV, on a stack or as [not profiled].
pub fn assert_profile_complete(run: &Run, profile: &Profile) {
    let threads = thread_totals(&run.profile);
    let exact = threads.iter().map(thread_sum).fold((0, 0), |(c, b), (tc, tb)| (c + tc, b + tb));
    assert_eq!(profile.total(), exact, "CSV total vs thread files' exact totals\n{}", profile.csv);
}

/// Asserts the calls and bytes of all stacks through the function `name`.
pub fn assert_site(profile: &Profile, name: &str, calls: u64, bytes: u64) {
    assert_eq!(profile.site(name), (calls, bytes), "calls, bytes through {}\n{}", name, profile.csv);
}
