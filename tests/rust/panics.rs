//! Panics and backtraces behave as without the profiler: one small program, compiled twice
//! with the rustc that built this crate (once plain, once with ProfAllocator as its global
//! allocator), panics in a thread, in catch_unwind and then in main; both builds must print
//! the same messages and backtraces of the program's own frames, and end with the same
//! status, with RUST_BACKTRACE=0 and =1.

mod support;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

const PROGRAM: &str = r#"
#[cfg(profiled)]
#[global_allocator]
static GLOBAL: malloc_freq::ProfAllocator = malloc_freq::ProfAllocator;

#[inline(never)]
fn message(n: usize) -> String {
    format!("main gives up after {} words", n)
}

fn main() {
    let words: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let worker = std::thread::Builder::new()
        .name("worker".into())
        .spawn(|| {
            let bytes = vec![1u8; 10];
            panic!("worker failed with {} bytes", bytes.len());
        })
        .unwrap();
    assert!(worker.join().is_err());
    let caught = std::panic::catch_unwind(|| -> u32 { panic!("caught: {}", "x".repeat(3)) });
    assert!(caught.is_err());
    panic!("{}", message(words.len()));
}
"#;

/// The rustc next to the cargo that built this test, else the one on PATH.
fn rustc() -> PathBuf {
    let next_to_cargo = Path::new(env!("CARGO")).with_file_name("rustc");
    if next_to_cargo.is_file() {
        next_to_cargo
    } else {
        PathBuf::from("rustc")
    }
}

/// `rustc --version` of `rustc`, e.g. "rustc 1.63.0" or "rustc 1.95.0 (59807616e 2026-04-14)".
fn rustc_version(rustc: &Path) -> String {
    let output = Command::new(rustc)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {}", rustc.display(), e));
    assert!(output.status.success(), "{} --version failed", rustc.display());
    String::from_utf8(output.stdout).expect("rustc --version is not UTF-8").trim().to_owned()
}

/// This crate's rlib, built by cargo for this test with the same rustc:
/// `<target>/<profile>/deps/libmalloc_freq-*.rlib`. A target directory shared by two
/// toolchains (`make test` runs Debian's rustc 1.63 and a newer one) holds an rlib of each,
/// and a rustc reads only its own: an rlib's metadata starts with its compiler's version,
/// `rustc --version` as a length-prefixed string.
fn malloc_freq_rlib(deps: &Path, version: &str) -> PathBuf {
    assert!(version.len() < 128, "a version string this long has a longer length prefix: {:?}", version);
    let mut needle = vec![version.len() as u8];
    needle.extend_from_slice(version.as_bytes());
    let candidates: Vec<PathBuf> = fs::read_dir(deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("libmalloc_freq-") && name.ends_with(".rlib")
        })
        .collect();
    candidates
        .iter()
        .filter(|p| fs::read(p).unwrap().windows(needle.len()).any(|w| w == needle.as_slice()))
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .cloned()
        .unwrap_or_else(|| panic!("no libmalloc_freq-*.rlib built by {:?} in {}: {:?}", version, deps.display(), candidates))
}

fn compile(dir: &Path, profiled: bool) -> PathBuf {
    let exe = env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let source = dir.join("panic_prog.rs");
    fs::write(&source, PROGRAM).unwrap();
    let out = dir.join(if profiled { "profiled" } else { "plain" });
    let rustc = rustc();
    let mut cmd = Command::new(&rustc);
    cmd.args(["--edition", "2021", "-O", "-C", "debuginfo=1", "--crate-name", "panic_prog", "-o"])
        .arg(&out)
        .arg(&source);
    if profiled {
        cmd.args(["--cfg", "profiled", "--extern"])
            .arg(format!("malloc_freq={}", malloc_freq_rlib(deps, &rustc_version(&rustc)).display()))
            .arg("-L")
            .arg(format!("dependency={}", deps.display()));
    }
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {:?}: {}", cmd, e));
    assert!(output.status.success(), "{:?} failed:\n{}", cmd, String::from_utf8_lossy(&output.stderr));
    out
}

/// Replaces the thread ids that std prints (`thread 'main' (12345) panicked`) with `N`:
/// they differ from run to run.
fn without_thread_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("' (") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(')') {
            out.push('N');
        } else {
            out.push_str(&tail[..digits]);
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// stderr without what legitimately differs between two builds of one program: thread ids,
/// and backtrace frames of std (inlining inside std's panic machinery depends on the rest of
/// the program). The messages, and each backtrace's frames of the program itself with their
/// source lines, are kept.
fn comparable(stderr: &str) -> String {
    let mut out = String::new();
    let mut in_own_frame = false;
    for line in without_thread_ids(stderr).lines() {
        let trimmed = line.trim_start();
        let frame = trimmed.split_once(": ").filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if let Some((_, name)) = frame {
            in_own_frame = name.starts_with("panic_prog::");
            if in_own_frame {
                out.push_str(&format!("frame {}\n", name));
            }
        } else if trimmed.starts_with("at ") && line.starts_with(' ') {
            if in_own_frame {
                out.push_str(&format!("{}\n", trimmed));
            }
        } else {
            in_own_frame = false;
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn panics_print_and_exit_as_without_the_profiler() {
    let dir = fresh_dir("panics");
    let plain = compile(&dir, false);
    let profiled = compile(&dir, true);
    for backtrace in ["0", "1"] {
        let run = |exe: &Path, out: &Path| {
            fs::create_dir_all(out).unwrap();
            let mut cmd = Command::new(exe);
            cmd.current_dir(&dir)
                .env("RUST_BACKTRACE", backtrace)
                .env("MALLOC_FREQ_SAMPLE", "1")
                .env("MALLOC_FREQ_DIR", out)
                .env_remove("LD_PRELOAD");
            run_with_timeout(&mut cmd)
        };
        let (_, plain_status, _, plain_err) = run(&plain, &dir.join("plain-out"));
        let (pid, prof_status, _, prof_err) = run(&profiled, &dir.join("profiled-out"));
        let (plain_err, prof_err) = (comparable(&plain_err), comparable(&prof_err));
        assert_eq!(plain_status.code(), Some(101), "plain build: {}\n{}", plain_status, plain_err);
        assert_eq!(prof_status.code(), plain_status.code(), "exit status, RUST_BACKTRACE={}", backtrace);
        assert_eq!(prof_err, plain_err, "stderr differs, RUST_BACKTRACE={}", backtrace);
        for expected in ["thread 'worker'", "worker failed with 10 bytes", "caught: xxx", "main gives up after 100 words"] {
            assert!(prof_err.contains(expected), "no {:?} in:\n{}", expected, prof_err);
        }
        if backtrace == "1" {
            assert_eq!(prof_err.matches("stack backtrace:").count(), 3, "{}", prof_err);
            assert!(prof_err.contains("frame panic_prog::main"), "{}", prof_err);
        }
        // The profiled build did profile: its thread files hold the calls of the run.
        let profile = dir.join("profiled-out").join(format!("malloc_freq.{}", pid));
        let threads = thread_totals(&profile);
        assert!(threads.len() >= 2, "expected main and worker thread files in {}", profile.display());
        assert!(threads.iter().map(|t| t.calls[MF_FN_RUST_ALLOC]).sum::<u64>() >= 100);
        assert_eq!(fs::read_dir(dir.join("plain-out")).unwrap().count(), 0, "plain build wrote a profile");
        fs::remove_dir_all(dir.join("profiled-out")).unwrap();
    }
    let _ = fs::remove_dir_all(&dir);
}

fn main() {
    run_tests(&[("panics_print_and_exit_as_without_the_profiler", panics_print_and_exit_as_without_the_profiler)]);
}
