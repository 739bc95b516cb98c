"""The Rust quick start (examples/quickstart.rs) built and run with cargo, its counts read back
with mf_print against the table at the top of its source. `make test-rust` runs it with
`tests/run_tests.py --rust-example`: it needs cargo, which the C suite does not."""

import glob
import os
import re
import subprocess

import harness as rt


def cargo_command():
    """scripts/cargo: `cargo` with Debian's packaged crates when they are installed, as the
    Makefile runs it (its environment, MALLOC_FREQ_WERROR and RUSTFLAGS, is inherited)."""
    return [os.path.join(rt.REPO, "scripts", "cargo")]


def quickstart_expectations(path):
    """The table at the top of examples/quickstart.rs: `//!   FUNCTION  N calls  B bytes`,
    the calls and bytes of the stacks that go through FUNCTION."""
    expected = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"//!\s+(\S+)\s+(\d+) calls\s+(\d+) bytes", line)
            if m:
                expected[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return expected


def rust_quickstart():
    source = os.path.join(rt.REPO, "examples", "quickstart.rs")
    rt.expect(os.path.exists(source), f"{source} does not exist yet")
    expected = quickstart_expectations(source)
    rt.expect(expected, f"no `//!   FUNCTION  N calls  B bytes` lines in {source}")
    outdir = rt.fresh_dir()
    env = rt.profiled_env(outdir)
    del env["LD_PRELOAD"]  # the crate links the core itself
    r = subprocess.run(cargo_command() + ["run", "--release", "--example", "quickstart"],
                       cwd=rt.REPO, env=env, capture_output=True, text=True, timeout=1200)
    rt.expect(r.returncode == 0, f"cargo run exited {r.returncode}: {r.stderr.strip()[-800:]}")
    dirs = glob.glob(os.path.join(outdir, "malloc_freq.*"))
    rt.expect_eq(len(dirs), 1, "profile directories written by the quickstart")
    rows = rt.csv_rows(dirs[0])
    bad = []
    for fn, want in expected.items():
        rs = [row for row in rows if fn in row.stack]
        got = (sum(row.calls for row in rs), sum(row.bytes for row in rs))
        if got != want:
            bad.append(f"stacks through {fn}: expected {want[0]} calls {want[1]} bytes, "
                       f"got {got[0]} calls {got[1]} bytes")
    rt.expect(not bad, "; ".join(bad))
