//! Rust function names through mf_print's script formats: trait impls for `[u8; 4]` (a
//! `;` and spaces inside the name), `(u8, char)` and `Vec<(u8, u16)>` (`,`, `<>`) and a
//! closure make allocations with known counts. The CSV must give every name back
//! exactly (its frames are percent-encoded where they hold `;`), and every line of
//! `--format collapsed` must parse as `frames COUNT` with the same counts.

mod support;

use std::process::Command;

use malloc_freq::ProfAllocator;
use support::*;

#[global_allocator]
static GLOBAL: ProfAllocator = ProfAllocator;

// ---- workload (run in the child) -------------------------------------------------------

trait Site {
    fn site();
}

/// `Box<[u8; 4]>` 111 times: 111 calls of 4 bytes.
impl Site for [u8; 4] {
    #[inline(never)]
    fn site() {
        for i in 0..111u8 {
            black_box(Box::new(black_box([i; 4])));
        }
    }
}

/// `Box<(u8, char)>` 222 times: 222 calls of 8 bytes.
impl Site for (u8, char) {
    #[inline(never)]
    fn site() {
        for i in 0..222u8 {
            black_box(Box::new(black_box((i, 'x'))));
        }
    }
}

/// `Box<[u16; 3]>` 333 times: 333 calls of 6 bytes.
impl Site for Vec<(u8, u16)> {
    #[inline(never)]
    fn site() {
        for i in 0..333u16 {
            black_box(Box::new(black_box([i; 3])));
        }
    }
}

/// A closure, called through a `&dyn Fn` the optimizer cannot see through: `Box<u64>` 444
/// times, 444 calls of 8 bytes.
#[inline(never)]
fn closure_site() {
    let closure = |n: u64| {
        for i in 0..n {
            black_box(Box::new(black_box(i)));
        }
    };
    let f: &dyn Fn(u64) = black_box(&closure);
    f(444);
}

fn names_workload() {
    <[u8; 4] as Site>::site();
    <(u8, char) as Site>::site();
    <Vec<(u8, u16)> as Site>::site();
    closure_site();
}

// ---- tests (run in the parent) ---------------------------------------------------------

/// Each site's name as the demangler writes it (Rust 1.63 and 1.95 alike), its calls and
/// its bytes. (`Box::new`, inlined into each, is the innermost frame.)
const SITES: [(&str, u64, u64); 4] = [
    ("<[u8; 4] as frame_names::Site>::site", 111, 111 * 4),
    ("<(u8,char) as frame_names::Site>::site", 222, 222 * 8),
    ("<alloc::vec::Vec<(u8,u16)> as frame_names::Site>::site", 333, 333 * 6),
    ("frame_names::closure_site::{{closure}}", 444, 444 * 8),
];

/// `mf_print --format collapsed [extra]` of dir, as (frames root first, count); panics
/// unless every line is `frame;frame;... COUNT`: one space, then an integer, no control
/// character, no empty frame, and no space before a number at the end of the frames
/// (flamegraph.pl would read that as a second count column).
fn collapsed(dir: &std::path::Path, extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    let output = Command::new(mf_print_path())
        .arg("--dir")
        .arg(dir)
        .args(["--format", "collapsed"])
        .args(extra)
        .output()
        .expect("cannot run mf_print");
    assert!(output.status.success(), "mf_print --format collapsed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "mf_print wrote to stderr: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).expect("collapsed output is not UTF-8");
    assert!(text.ends_with('\n'), "collapsed output does not end in a newline");
    text.lines()
        .map(|line| {
            assert!(!line.chars().any(char::is_control), "control character in {:?}", line);
            let (frames, count) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no count in {:?}", line));
            assert!(!count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()), "count of {:?}", line);
            assert!(!frames.ends_with(' '), "two spaces before the count in {:?}", line);
            if let Some((_, last)) = frames.rsplit_once(' ') {
                assert!(!last.bytes().all(|b| b.is_ascii_digit() || b == b'.'), "{:?} ends in a number", line);
            }
            let frames: Vec<String> = frames.split(';').map(str::to_owned).collect();
            assert!(frames.iter().all(|f| !f.is_empty()), "an empty frame in {:?}", line);
            (frames, count.parse().unwrap())
        })
        .collect()
}

/// The sum of the collapsed lines with a frame named exactly `name`.
fn collapsed_through(lines: &[(Vec<String>, u64)], name: &str) -> u64 {
    lines.iter().filter(|(frames, _)| frames.iter().any(|f| f == name)).map(|(_, n)| n).sum()
}

fn names_survive_csv_and_collapsed() {
    let run = run_workload("names");
    expect_exit(&run, 0);
    let profile = Profile::read(&run.profile, &[]);
    assert_profile_complete(&run, &profile);
    let calls = collapsed(&run.profile, &[]);
    let bytes = collapsed(&run.profile, &["--weight", "bytes"]);
    for (name, want_calls, want_bytes) in SITES {
        // CSV: the decoded name is the demangler's, byte for byte.
        let rows: Vec<&Row> = profile.rows.iter().filter(|r| r.stack.iter().any(|f| f == name)).collect();
        let got = rows.iter().fold((0, 0), |(c, b), r| (c + r.calls, b + r.bytes));
        assert_eq!(got, (want_calls, want_bytes), "CSV calls, bytes at {:?}\n{}", name, profile.csv);
        // collapsed: the same name with ';' made ':', the same counts.
        let folded = name.replace(';', ":");
        assert_eq!(collapsed_through(&calls, &folded), want_calls, "collapsed calls at {:?}", folded);
        assert_eq!(collapsed_through(&bytes, &folded), want_bytes, "collapsed bytes at {:?}", folded);
    }
    // Every collapsed line adds up to the exact totals, like the CSV.
    let total = |lines: &[(Vec<String>, u64)]| lines.iter().map(|(_, n)| n).sum::<u64>();
    assert_eq!((total(&calls), total(&bytes)), profile.total(), "collapsed totals vs CSV totals");
    run.clean_up();
}

fn main() {
    if let Ok(workload) = std::env::var(WORKLOAD_VAR) {
        match workload.as_str() {
            "names" => names_workload(),
            other => panic!("unknown workload {}", other),
        }
        return;
    }
    run_tests(&[("names_survive_csv_and_collapsed", names_survive_csv_and_collapsed)]);
}
