"""Reading a running program (mf_print/read/profile_read.c): mf_print reads the files of a process
whose threads are writing them as fast as they can, one or more on each core, in every sampling
mode, many times; every read succeeds (status 0, nothing on stderr, so no file
skipped) and the exact totals never go back from one read to the next. A table that grows tens
of thousands of stacks while read; a profile deeper than PATH_MAX; a run tree of 80,000 empty
directories (tests/programs/busy_stacks.c)."""
import contextlib
import json
import os
import select
import subprocess
import tempfile

import harness as rt
from harness import expect, expect_eq

READS = 30  # per mode: tree, CSV and (with a live heap) --live in turn
# The program's busy threads are the load: at least one per core, so the reader competes
# with writers on every core.
HAMMERS = min(max(os.cpu_count() or 1, 2), 8)

# name -> (MALLOC_FREQ_SAMPLE, more environment)
MODES = {
    "default": (None, {}),
    # busy_stacks's sizes 1,600 and 3,200 recorded one by one, the others sampled
    "MALLOC_FREQ_SAMPLE=97 MALLOC_FREQ_LARGE=1000": ("97", {"MALLOC_FREQ_LARGE": "1000"}),
    "MALLOC_FREQ_SAMPLE=1": ("1", {}),
    "MALLOC_FREQ_LIVE=all": (None, {"MALLOC_FREQ_LIVE": "all"}),
    "MALLOC_FREQ_LIVE=sampled": (None, {"MALLOC_FREQ_LIVE": "sampled"}),
}


@contextlib.contextmanager
def busy_program(args, sample, extra):
    """busy_stacks ARGS under the profiler, once it said "ready"; killed after the block.
    Yields (its profile directory, its stdout)."""
    prog = rt.c_program("busy_stacks")
    outdir = rt.fresh_dir()
    p = subprocess.Popen([prog] + [str(a) for a in args], stdout=subprocess.PIPE,
                         env=rt.profiled_env(outdir, sample, extra), cwd=outdir)
    try:
        ready, _, _ = select.select([p.stdout], [], [], rt.TIMEOUT)
        expect(ready, f"busy_stacks said nothing in {rt.TIMEOUT} s")
        expect_eq(p.stdout.readline(), b"ready\n", "busy_stacks's first line")
        yield os.path.join(outdir, f"malloc_freq.{p.pid}"), p.stdout
        expect(p.poll() is None, f"busy_stacks ended ({p.returncode}) while it was read")
    finally:
        p.kill()
        p.wait()


def read_ok(what, args):
    """mf_print ARGS: status 0 and nothing on stderr (a skipped file says why there)."""
    r = rt.mf_print(args, check=False)
    expect(r.returncode == 0 and r.stderr == "",
           f"{what}: mf_print {' '.join(args[-3:])} exited {r.returncode}, stderr "
           f"{r.stderr.strip()[:600]!r}")
    return r.stdout


def csv_sums(text):
    """(calls, samples) over the CSV's rows."""
    rows = rt.parse_csv(text)
    return sum(r.calls for r in rows), sum(r.samples for r in rows)


@rt.test
def test_reads_of_a_busy_program_in_every_mode():
    for mode, (sample, extra) in MODES.items():
        live = "MALLOC_FREQ_LIVE" in extra
        with busy_program([HAMMERS, 0], sample, extra) as (profile, _):
            totals, sums = [], []
            for i in range(READS):
                what = f"{mode}, read {i + 1}"
                kind = i % 3
                if kind == 1:
                    sums.append(csv_sums(read_ok(what, ["--format", "csv", profile])))
                elif kind == 2 and live:
                    read_ok(what, ["--live", profile])
                else:
                    totals.append(rt.tree_header_total(read_ok(what, [profile])))
        # Every call is counted before its sample: the exact totals, and what the stacks
        # hold, only grow; the program ran on between the reads.
        expect(totals == sorted(totals), f"{mode}: the exact totals went back: {totals}")
        for k, name in enumerate(("calls", "samples")):
            seq = [s[k] for s in sums]
            expect(seq == sorted(seq), f"{mode}: the CSV's {name} went back: {seq}")
        expect(totals[-1] > totals[0], f"{mode}: no call between the reads: {totals}")


@rt.test
def test_reads_of_a_table_growing_new_segments():
    # site_grow's 32,768 stacks are made at 5,000 a second while the profile is read, each
    # read seeing more of them (the table grows through eleven segments), and once all are
    # made a read finds each exactly once, with 1 call of 24 bytes.
    with busy_program([HAMMERS, 5000], "1", {}) as (profile, out):
        seen, grown, reads = [], False, 0
        while True:
            grown = grown or bool(select.select([out], [], [], 0)[0])
            text = read_ok(f"read {reads + 1}", ["--format", "csv", profile])
            reads += 1
            rows = [r for r in rt.parse_csv(text) if r.site == "site_grow"]
            seen.append(len(rows))
            if grown:
                break
        expect_eq(out.readline(), b"grown\n", "busy_stacks's second line")
    expect(seen == sorted(seen), f"site_grow's stacks went back from one read to the next: {seen}")
    expect(any(0 < n < 32768 for n in seen), f"no read while the table grew: {seen}")
    expect_eq(len(rows), 32768, "site_grow's stacks once all are made")
    expect_eq({(r.calls, r.bytes, r.samples) for r in rows}, {(1, 24, 1)},
              "each site_grow stack's (calls, bytes, samples)")


def deep_dir(base, length):
    """A chain of directories under base whose path is longer than `length`, made a step at
    a time relative to the last (a path that long cannot be named whole). Returns the path
    and a descriptor of the deepest directory."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    path, k = base, 0
    while len(path) <= length:
        name = f"{k:03d}" + "d" * 197
        os.mkdir(name, 0o700, dir_fd=fd)
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd, path, k = sub, os.path.join(path, name), k + 1
    return path, fd


@rt.test
def test_profile_deeper_than_path_max():
    # exact_sites's profile moved 21 levels down, its path over 4,096 characters: read
    # through the directory above the chain (the walk goes down it) and through its own path,
    # with its live heap (MALLOC_FREQ_LIVE=all: every allocation of exact_sites is alive at
    # its exit, so the live view's total is the calls').
    r = rt.run_ok([rt.c_program("exact_sites")], extra_env={"MALLOC_FREQ_LIVE": "all"})
    top = rt.fresh_dir()
    path, fd = deep_dir(top, os.pathconf("/", "PC_PATH_MAX"))
    try:
        name = os.path.basename(r.profile)
        os.rename(r.profile, name, dst_dir_fd=fd)
    finally:
        os.close(fd)
    whole = os.path.join(path, name)
    expect(len(whole) > 4096, f"the profile's path is {len(whole)} characters")
    for given in (top, whole):
        rows = rt.csv_rows(given)
        rt.expect_sites(rows, rt.EXACT_SITES)
        expect_eq(rt.tree_header_total(read_ok("tree", [given])), rt.csv_total(rows),
                  "tree header total vs CSV total")
        live = json.loads(read_ok("live json", ["--live", "--format", "json", given]))
        expect_eq(live["live"]["files"], 1, f"live heap files read through {len(given)} characters")


def tmpfs_dir():
    """A fresh directory on tmpfs if there is one (removing 80,000 directories from a busy
    journaled disk took minutes), else on the disk."""
    if not os.access("/dev/shm", os.W_OK):
        return rt.fresh_dir()
    d = tempfile.mkdtemp(prefix="mf_test_", dir="/dev/shm")
    rt._run_dirs.append(d)  # removed with the others
    return d


@rt.test
def test_run_tree_of_80000_empty_directories():
    # Each directory is looked up once among those already read (a hash, not a list scanned
    # for each: 3.2 * 10^9 comparisons at 80,000); the one profile among them is read whole.
    tree = tmpfs_dir()
    for i in range(80000):
        os.mkdir(os.path.join(tree, f"d{i:05d}"))
    r = rt.run_ok([rt.c_program("exact_sites")], outdir=tree)
    rt.expect_sites(rt.csv_rows(tree), rt.EXACT_SITES)
    out = read_ok("tree", [tree])
    expect_eq(rt.tree_header_total(out), rt.exact_total_calls(r.profile),
              "tree header total vs the thread headers' totals")
