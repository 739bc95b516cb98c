"""The live heap (MALLOC_FREQ_LIVE, mf_print --live): the sampled allocations still alive,
read from the running process at checkpoints it waits at (a pipe handshake, no sleeps),
exact with MALLOC_FREQ_LIVE=all and within the error bars the weights give when sampled;
temporaries (100 % / 0 %), leaks at exit, realloc moves and frees the profiler never saw
(tests/programs/live_heap.c); pprof's inuse_* types read by go tool pprof; --save/--base."""
import csv
import io
import math
import os
import re
import shutil
import struct
import subprocess

import harness as rt
from harness import expect, expect_eq

SETS = {"site_keep_small": 100, "site_keep_big": 5000}  # site -> block size
SETS_N = {"site_keep_small": 2000, "site_keep_big": 300}


def live_csv(profile, *extra):
    r = rt.mf_print(["--live", "--format", "csv", *extra, profile])
    expect(r.stderr == "", f"mf_print --live wrote to stderr: {r.stderr.strip()!r}")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    for row in rows:
        row["site"] = rt.function_name(rt.csv_frames(row["stack"])[0])
    return rows


def site_sum(rows, site, field):
    return sum(int(r[field]) for r in rows if r["site"] == site)


class Checkpoints:
    """live_heap sets under the profiler: stops at each "ready" until told to go on."""

    def __init__(self, mode, extra):
        self.outdir = rt.fresh_dir()
        env = rt.profiled_env(self.outdir, sample=None, extra=dict(extra, MALLOC_FREQ_LIVE=mode))
        self.p = subprocess.Popen([rt.c_program("live_heap"), "sets"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  text=True, cwd=self.outdir)
        self.profile = os.path.join(self.outdir, f"malloc_freq.{self.p.pid}")

    def wait_ready(self):
        line = self.p.stdout.readline()
        expect(line == "ready\n", f"live_heap said {line!r}, not ready")

    def go_on(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def finish(self):
        self.go_on()
        out, err = self.p.communicate(timeout=rt.TIMEOUT)
        expect(self.p.returncode == 0, f"live_heap exited {self.p.returncode}: {err[-300:]!r}")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate()


def expect_sets(rows, fraction, exact):
    for site, size in SETS.items():
        want = SETS_N[site] * fraction
        got = site_sum(rows, site, "alive")
        nbytes = site_sum(rows, site, "alive_bytes")
        expect_eq(nbytes, got * size, f"{site}: live bytes of {got} blocks of {size}")
        if exact:
            expect_eq(got, want, f"{site}: live allocations")
            expect_eq(site_sum(rows, site, "alive_variance"), 0, f"{site}: variance")
        else:
            sd = math.sqrt(site_sum(rows, site, "alive_variance"))
            expect(sd > 0, f"{site}: sampled, but no error bar")
            expect(abs(got - want) <= 4 * sd, f"{site}: {got} live, expected {want} ± {sd:.0f} "
                                              f"(4 standard errors)")


@rt.test
def test_live_sets_exact_at_checkpoints():
    """MALLOC_FREQ_LIVE=all: each site's live blocks exactly, on the running process; after
    it frees half, half; after it exits, none."""
    c = Checkpoints("all", {})
    try:
        c.wait_ready()
        expect_sets(live_csv(c.profile), 1, exact=True)
        tree = rt.mf_print(["--live", c.profile]).stdout
        expect("(pid %d, running)" % c.p.pid in tree, f"the tree does not say running: {tree[:400]}")
        c.go_on()
        c.wait_ready()
        expect_sets(live_csv(c.profile), 0.5, exact=True)
        c.finish()
        rows = live_csv(c.profile)
        for site in SETS:
            expect_eq(site_sum(rows, site, "alive"), 0, f"{site}: alive at exit")
            expect_eq(site_sum(rows, site, "freed"), SETS_N[site], f"{site}: freed")
    finally:
        c.kill()


@rt.test
def test_live_sets_sampled_within_error_bars():
    """MALLOC_FREQ_LIVE=sampled at a sample interval of 4: live counts are estimates whose
    error bars (the weights' variance) hold the true counts."""
    c = Checkpoints("sampled", {"MALLOC_FREQ_SAMPLE": "4", "MALLOC_FREQ_SEED": "7"})
    try:
        c.wait_ready()
        expect_sets(live_csv(c.profile), 1, exact=False)
        c.go_on()
        c.wait_ready()
        expect_sets(live_csv(c.profile), 0.5, exact=False)
        c.finish()
    finally:
        c.kill()


@rt.test
def test_live_temporaries():
    """A site whose blocks are freed before the next allocation is 100 % temporary, one
    that keeps them 0 %; --sort temporary lists the first one first."""
    r = rt.run_ok([rt.c_program("live_heap"), "temps"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    rows = live_csv(r.profile)
    temp = [x for x in rows if x["site"] == "site_temporary"]
    kept = [x for x in rows if x["site"] == "site_kept"]
    expect(len(temp) == 1 and len(kept) == 1, f"rows: {[x['site'] for x in rows]}")
    expect_eq((temp[0]["freed"], temp[0]["temporary_pct"], temp[0]["median_life_calls"]),
              ("5000", "100.00", "0"), "site_temporary: freed, temporary %, median life")
    expect_eq((kept[0]["freed"], kept[0]["temporary_pct"]), ("5000", "0.00"),
              "site_kept: freed, temporary %")
    # kept i lives through 4,999 - i more site_kept calls and 5,000 site_temporary ones:
    # 5,000..9,999 calls, median 7,500: bucket 4,096-8,191
    expect_eq(kept[0]["median_life_calls"], "8191", "site_kept: median life (bucket top)")
    tree = rt.mf_print(["--live", "--sort", "temporary", r.profile]).stdout
    table = tree.split("Lifetimes by allocation site", 1)[1]
    expect(table.index("site_temporary") < table.index("site_kept"),
           f"--sort temporary does not list site_temporary first:\n{table}")
    expect("100.0 %" in table, f"no 100.0 % in the table:\n{table}")


@rt.test
def test_live_leaks_at_exit():
    """1,000 blocks leaked from one site: the live view of the ended process shows them."""
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    rows = live_csv(r.profile)
    expect_eq((site_sum(rows, "site_leak", "alive"), site_sum(rows, "site_leak", "alive_bytes")),
              (1000, 48000), "site_leak: leaked blocks, bytes")
    expect_eq([x["outside_main"] for x in rows if x["site"] == "site_leak"], ["0"],
              "site_leak is made in main")
    early = [x for x in rows if x["site"] == "site_before_main"]
    expect_eq([(x["alive"], x["outside_main"]) for x in early], [("3", "1")],
              "site_before_main (a constructor's): alive, outside main")
    # the live CSV's stack and via columns are the plain CSV's, byte for byte
    plain = list(csv.DictReader(io.StringIO(rt.mf_print(["--format", "csv", r.profile]).stdout)))
    leak_stack = [(x["stack"], x["via"]) for x in rows if x["site"] == "site_leak"]
    expect_eq(leak_stack, [(x["stack"], x["via"]) for x in plain
                           if rt.function_name(rt.csv_frames(x["stack"])[0]) == "site_leak"],
              "site_leak's stack and via: live CSV against the plain CSV")
    html = os.path.join(r.outdir, "live.html")
    rt.mf_print(["--live", "--weight", "bytes", "--format", "html", "-o", html, r.profile])
    with open(html, encoding="utf-8") as f:
        page = f.read()
    expect('<td id="mf-live">still allocated when the process ended' in page,
           "the flame graph does not say it has the live heap")
    expect('"weight":"live_bytes"' in page and '"live_calls":1003,"live_bytes":48048' in page,
           "the flame graph's live totals, opened on live bytes")
    tree = rt.mf_print(["--live", r.profile]).stdout
    expect("at exit    1,003 allocations, 46.9 KiB" in tree, f"tree header:\n{tree[:600]}")
    expect("1,000   99.70%   46.9 KiB  site_leak" in tree, f"tree:\n{tree}")
    expect("site_before_main  [outside main]" in tree, f"no [outside main] mark:\n{tree}")


@rt.test
def test_live_edge_cases_never_crash():
    """realloc moves (each a free and an allocation), free(NULL), realloc(NULL, n),
    realloc(p, 0), frees of memory the profiler never saw (glibc's __libc_malloc) and a
    buggy free of mmap'd memory: the program runs as without the profiler; foreign frees
    are ignored (no record), the moves counted."""
    for mode in ("all", "sampled"):
        r = rt.run_ok([rt.c_program("live_heap"), "edges"], sample=None,
                      extra_env={"MALLOC_FREQ_LIVE": mode})
        expect_eq(r.stdout, "edges done\n", f"{mode}: live_heap's output")
        expect_eq(r.stderr, "", f"{mode}: live_heap's stderr")
        if mode != "all":
            continue
        rows = live_csv(r.profile)
        expect_eq(site_sum(rows, "site_edge_kept", "alive"), 10, "site_edge_kept alive")
        # 1, 2, 4 .. 1 MiB: 21 blocks, 20 freed by the next realloc, the last by free
        expect_eq((site_sum(rows, "site_grow", "alive"), site_sum(rows, "site_grow", "freed")),
                  (0, 21), "site_grow: alive, freed")


@rt.test
def test_live_off_by_default():
    """Without MALLOC_FREQ_LIVE no live file is made; --live says how to get one."""
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"])
    expect(not [f for f in os.listdir(r.profile) if f.startswith("live.")],
           f"a live file without MALLOC_FREQ_LIVE: {os.listdir(r.profile)}")
    p = rt.mf_print(["--live", r.profile], check=False)
    expect(p.returncode == 1 and "MALLOC_FREQ_LIVE=sampled" in p.stderr,
           f"mf_print --live without a live file: rc {p.returncode}, {p.stderr!r}")
    bad = rt.run_ok([rt.c_program("live_heap"), "leaks"], extra_env={"MALLOC_FREQ_LIVE": "yes"})
    expect("MALLOC_FREQ_LIVE=yes is not off, sampled or all" in bad.stderr,
           f"bad MALLOC_FREQ_LIVE: {bad.stderr!r}")


@rt.test
def test_live_pprof_inuse_for_go_tool_pprof():
    """--live --format pprof: inuse_objects/inuse_space (and alloc_*) as a Go heap profile."""
    go = shutil.which("go")
    rt.need(go, "no `go` on PATH: `make deps-test` installs Debian's golang-go")
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    out = os.path.join(r.outdir, "live.pb.gz")
    rt.mf_print(["--live", "--format", "pprof", "-o", out, r.profile])
    env = dict(os.environ, HOME=rt.fresh_dir())
    for index, want in (("inuse_space", "48000B"), ("inuse_objects", "1000"),
                        ("alloc_objects", "1000")):
        p = subprocess.run([go, "tool", "pprof", "-sample_index=" + index, "-top", "-unit=B"
                            if index == "inuse_space" else "-unit=count", out],
                           capture_output=True, text=True, timeout=300, env=env)
        expect(p.returncode == 0, f"go tool pprof: {p.stderr[-500:]}")
        line = [x for x in p.stdout.splitlines() if x.rstrip().endswith("site_leak")]
        expect(line and line[0].split()[0] == want,
               f"-sample_index={index}: site_leak's line {line}, expected flat {want}:\n{p.stdout}")


@rt.test
def test_live_save_and_base_show_growth():
    """--live --save at the first checkpoint, --live --base at the second: what shrank."""
    c = Checkpoints("all", {})
    try:
        c.wait_ready()
        saved = os.path.join(c.outdir, "first.pb.gz")
        r = rt.mf_print(["--live", "--save", saved, c.profile])
        expect(os.path.exists(saved), f"--save made no file: {r.stdout}")
        c.go_on()
        c.wait_ready()
        d = rt.mf_print(["--live", "--base", saved, "--format", "csv", c.profile]).stdout
        rows = [x for x in csv.DictReader(io.StringIO(d)) if x["level"] == "site"]
        got = {rt.function_name(rt.csv_frames(x["stack"])[0]): int(x["alive_change"])
               for x in rows}
        expect_eq({k: got.get(k) for k in SETS}, {"site_keep_small": -1000, "site_keep_big": -150},
                  "live allocations' change from the first checkpoint")
        c.finish()
    finally:
        c.kill()


@rt.test
def test_live_threads_and_frees_on_other_threads():
    """4 threads allocate and free at once (all temporary), hand 1,000 blocks each to the
    main thread, which frees them after they exited (freed, never temporary, no lifetime
    in the allocating thread's calls), and keep 5 each to the end."""
    r = rt.run_ok([rt.c_program("live_heap"), "threads"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    rows = live_csv(r.profile)
    expect_eq((site_sum(rows, "site_churn", "alive"), site_sum(rows, "site_churn", "freed")),
              (0, 80000), "site_churn: alive, freed")
    expect_eq({x["temporary_pct"] for x in rows if x["site"] == "site_churn"}, {"100.00"},
              "site_churn: temporary")
    expect_eq((site_sum(rows, "site_handoff", "alive"), site_sum(rows, "site_handoff", "freed")),
              (0, 4000), "site_handoff: alive, freed")
    hand = [x for x in rows if x["site"] == "site_handoff"]
    expect_eq({(x["temporary_pct"], x["median_life_calls"]) for x in hand}, {("0.00", "")},
              "site_handoff: freed by another thread: not temporary, no life in calls")
    expect(all(x["median_life_ns"] for x in hand), "site_handoff: no lifetime in time")
    expect_eq((site_sum(rows, "site_thread_kept", "alive"),
               site_sum(rows, "site_thread_kept", "alive_bytes")), (20, 20 * 56),
              "site_thread_kept: alive at exit")


@rt.test
def test_live_damaged_files_are_named_and_survived():
    """A truncated live file is named and skipped; one whose tables hold garbage (records
    with any state, address, weight and stack reference) is read without a crash, and what
    its references cannot find is counted, not followed."""
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    live = [f for f in os.listdir(r.profile) if f.startswith("live.")]
    expect_eq(len(live), 1, "live files")
    short = rt.fresh_dir()
    shutil.copytree(r.profile, os.path.join(short, "p"))
    path = os.path.join(short, "p", live[0])
    with open(path, "r+b") as f:
        f.truncate(100)
    p = rt.mf_print(["--live", os.path.join(short, "p")], check=False)
    expect(p.returncode == 1 and live[0] in p.stderr and "skipped" in p.stderr,
           f"truncated live file: rc {p.returncode}, stderr {p.stderr!r}")
    noisy = rt.fresh_dir()
    shutil.copytree(r.profile, os.path.join(noisy, "p"))
    path = os.path.join(noisy, "p", live[0])
    cap, scap, roff, soff = live_geometry(path)
    with open(path, "r+b") as f:
        for i in range(0, cap, 7):  # live records with random fields
            f.seek(roff + RECORD.size * i)
            f.write(struct.pack("<II", F.LIVE_RECORD_LIVE, 0) + os.urandom(RECORD.size - 8))
        for i in range(0, scap, 3):  # statistics with random keys and counts
            f.seek(soff + F.live_stats.size * i)
            f.write(os.urandom(F.live_stats.size))
    for fmt in ("tree", "csv"):
        p = rt.mf_print(["--live", "--format", fmt, os.path.join(noisy, "p")], check=False)
        expect(p.returncode == 0, f"garbage tables, {fmt}: rc {p.returncode}, {p.stderr[-300:]!r}")


@rt.test
def test_live_table_full_is_counted_never_waited_for():
    """300,000 blocks alive, more than the 262,144 records of MALLOC_FREQ_LIVE=all: the
    program runs as usual, every allocation is either recorded or counted as missing, and
    the header says how many are missing."""
    r = rt.run_ok([rt.c_program("live_heap"), "many"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    alive = site_sum(live_csv(r.profile), "site_many", "alive")
    tree = rt.mf_print(["--live", r.profile]).stdout
    m = re.search(r"; ([\d,]+) allocations found the table full and were not recorded \(up to "
                  r"that many alive may be missing\)", tree)
    expect(m, f"the header does not say the table was full:\n{tree[:800]}")
    dropped = int(m.group(1).replace(",", ""))
    expect(dropped > 0 and alive <= 262144, f"alive {alive}, dropped {dropped}")
    expect_eq(alive + dropped, 300000, "site_many recorded + missing")


@rt.test
def test_live_fork_child_frees_leave_the_parent():
    """A child made by fork(), _Fork() or a raw clone frees the 1,000 blocks it inherited:
    those are its own copies, so the parent's live heap still holds all 1,000 at its exit
    and none freed (_Fork and clone run no atfork handler: the child must still not write
    its parent's file)."""
    for mode in ("fork", "_Fork", "clone"):
        r = rt.run_ok([rt.c_program("live_fork"), mode], sample=None,
                      extra_env={"MALLOC_FREQ_LIVE": "all"})
        rows = live_csv(r.profile)
        expect_eq((site_sum(rows, "site_inherited", "alive"),
                   site_sum(rows, "site_inherited", "freed")), (1000, 0),
                  f"{mode}: the parent's site_inherited alive, freed")


@rt.test
def test_live_json_says_it_is_the_live_view():
    """--live --format json: "view": "live", each stack's counts named alive / live_bytes /
    live_records (its calls as alloc_calls, its frees as freed), the live heap's totals and
    what its files missed in "live"; "totals" and each process's "calls" stay the run's calls,
    as the plain JSON of the same profile has them (and no "view")."""
    import json
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    doc = json.loads(rt.mf_print(["--live", "--format", "json", r.profile]).stdout)
    plain = json.loads(rt.mf_print(["--format", "json", r.profile]).stdout)
    expect_eq(doc.get("view"), "live", "the live JSON's view")
    expect_eq(doc.get("live"), {"when": "at exit", "alive": 1003, "live_bytes": 48048, "files": 1,
                                "records": 1003, "not_recorded": 0, "lifetimes_not_recorded": 0,
                                "records_without_stack": 0, "ended_images_left_out": 0,
                                "ended_allocations_left_out": 0},
              "the live JSON's live object")
    expect_eq(doc["totals"], plain["totals"], "the live JSON's totals (the run's)")
    expect_eq([(p.get("calls"), p.get("alive")) for p in doc["processes"]],
              [(plain["processes"][0]["calls"], 1003)], "the process's calls and alive")
    leak = [s for s in doc["stacks"] if s["frames"][0]["function"] == "site_leak"]
    expect_eq([(s.get("alive"), s.get("live_bytes"), s.get("live_records"), s.get("alive_stderr"),
                s.get("freed"), s.get("alloc_calls")) for s in leak],
              [(1000, 48000, 1000, 0, 0, 1000)], "site_leak's live stack")
    expect(all("calls" not in s and "bytes" not in s for s in doc["stacks"]),
           "a live stack still has calls or bytes")
    expect("view" not in plain and "live" not in plain, "the plain JSON names a view")
    expect_eq(plain["totals"]["calls"], plain["totals"]["functions"]["malloc"]["calls"],
              "the plain JSON's calls")
    expect(all("alive" not in p for p in plain["processes"]), "a plain process has alive")
    # temps: 10,003 calls made, 3 blocks alive at exit (site_before_main's): the totals are
    # the calls, the live object the 3.
    t = rt.run_ok([rt.c_program("live_heap"), "temps"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    doc = json.loads(rt.mf_print(["--live", "--format", "json", t.profile]).stdout)
    expect_eq((doc["totals"]["calls"], doc["totals"]["bytes"], doc["live"]["alive"],
               doc["live"]["live_bytes"], doc["processes"][0]["calls"], doc["processes"][0]["alive"]),
              (10003, 640048, 3, 48, 10003, 3), "temps: the run's calls and what is alive")


@rt.test
def test_live_every_format_says_it_is_the_live_view():
    """--live in each format (and a comparison of live heaps) says that its counts are the
    live heap's, and the run's totals stay the calls made: live_heap temps made 10,003 calls
    of 640,048 bytes, and 3 blocks of 16 bytes (site_before_main's) are alive at exit."""
    import gzip
    import json
    r = rt.run_ok([rt.c_program("live_heap"), "temps"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    out = lambda fmt: subprocess.run([rt.MF_PRINT, "--live", "--format", fmt, r.profile],
                                     capture_output=True, timeout=rt.TIMEOUT).stdout
    tree = out("tree").decode().splitlines()
    expect_eq((tree[0].split(":")[0], tree[2]), ("malloc_freq live heap", "  at exit    3 allocations, 48 B"),
              "the tree's live header")
    expect(any(l.split()[:1] == ["alive"] for l in tree), "the tree's alive column")
    csv_lines = out("csv").decode().splitlines()
    expect(csv_lines[0].startswith("alive,alive_bytes,"), f"the CSV's header: {csv_lines[0]!r}")
    doc = json.loads(out("json"))
    expect_eq((doc["view"], doc["totals"]["calls"], doc["totals"]["bytes"], doc["live"]["alive"],
               doc["live"]["live_bytes"]), ("live", 10003, 640048, 3, 48), "the JSON's view")
    collapsed = out("collapsed").decode().splitlines()
    expect_eq((collapsed[0], sum(int(l.rsplit(" ", 1)[1]) for l in collapsed[1:])),
              ("# malloc_freq --live: counts are allocations alive, not calls", 3),
              "the collapsed lines")
    pprof = gzip.decompress(out("pprof"))
    for want in (b"inuse_objects", b"inuse_space", b"the live heap (--live)",
                 b"totals: calls=10003 bytes=640048 (exact, over every thread)"):
        expect(want in pprof, f"pprof has no {want!r}")
    html = out("html").decode()
    for want in ('"weight":"live_bytes"', '"total_calls":10003', '"live_calls":3,'):
        expect(want in html, f"the page has no {want}")
    # A comparison of live heaps: a --live snapshot against the directory.
    saved = os.path.join(r.outdir, "live.pb.gz")
    rt.mf_print(["--live", "--save", saved, r.profile])
    diff = rt.mf_print(["--live", "--base", saved, r.profile]).stdout.splitlines()
    expect_eq((diff[0], diff[2].split(";")[0], diff[5]),
              ("malloc_freq comparison: new against old, of the live heap",
               "             3 allocations alive, 48 B", "  change     0 allocations alive (+0.0%), 0 B"),
              "the live comparison's header")
    diff_csv = rt.mf_print(["--live", "--base", saved, "--format", "csv", r.profile]).stdout
    expect(diff_csv.startswith("level,significant,alive_change,alive_error,live_bytes_change,"),
           f"the live comparison's CSV header: {diff_csv[:80]!r}")


def live_copy(r):
    """A copy of r's profile directory to damage, and its live file's path."""
    d = os.path.join(rt.fresh_dir(), "p")
    shutil.copytree(r.profile, d)
    live = [f for f in os.listdir(d) if f.startswith("live.")]
    expect_eq(len(live), 1, "live files")
    return d, os.path.join(d, live[0])


F = rt.F  # c_core/mf_format.h
RECORD = struct.Struct(F.live_record.format)  # F.live_record.fields


def live_geometry(path):
    h = F.live_header
    return tuple(rt.read_struct(path, h, field, fmt) for field, fmt in (
        ("capacity", "<I"), ("stats_capacity", "<I"), ("records_offset", "<Q"),
        ("stats_offset", "<Q")))


def live_records(path):
    """(slot, fields) of each live record: state, reserved, addr, size, weight, stack, ..."""
    cap, _, roff, _ = live_geometry(path)
    with open(path, "rb") as f:
        f.seek(roff)
        table = f.read(RECORD.size * cap)
    return [(i, r) for i, r in enumerate(RECORD.iter_unpack(table))
            if r[0] == F.LIVE_RECORD_LIVE]


@rt.test
def test_live_hostile_files_are_bounded_and_checked():
    """What a live file claims is checked, one line each, and what fails is left out: a
    sparse file larger than the writer ever makes is refused unread; records with a weight
    the process never samples with, more records on an entry than it made samples (600 copies
    of site_leak's records on its 1,000 samples: 1,000 alive, not 1,599), sizes no block
    can have (2^63: two would wrap the sum), records of a thread file the profile skipped, misaligned tables; a file with
    no record at all gives an empty table."""
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})

    d, path = live_copy(r)
    os.truncate(path, 256 << 20)  # sparse: the bound is the format's geometry, ~19.9 MB
    p = rt.mf_print(["--live", "--format", "csv", d], check=False)
    expect(p.returncode == 1 and re.search(r"live\.[0-9a-f]{16}\.mfl: too large \(268,435,456 "
                                           r"bytes; at most 19,927,040\) \(skipped\)", p.stderr),
           f"a 256 MiB live file: rc {p.returncode}, {p.stderr!r}")

    d, path = live_copy(r)
    cap, _, roff, _ = live_geometry(path)
    recs = live_records(path)
    leak = [(i, x) for i, x in recs if x[3] == 48]
    used = {i for i, _ in recs}
    free_slots = [i for i in range(cap) if i not in used]
    with open(path, "r+b") as f:
        i, x = leak[0]
        f.seek(roff + RECORD.size * i)
        f.write(RECORD.pack(*(x[:4] + (4000,) + x[5:])))  # weight 4,000 in "all"
        for k in range(600):  # copies of another record of site_leak
            f.seek(roff + RECORD.size * free_slots[k])
            f.write(RECORD.pack(*leak[1 + k][1]))
    p = rt.mf_print(["--live", "--format", "csv", d], check=False)
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    alive = sum(int(x["alive"]) for x in rows
                if rt.function_name(rt.csv_frames(x["stack"])[0]) == "site_leak")
    # 999 good records and 600 copies on an entry of 1,000 samples: never more than 1,000
    expect_eq(alive, 1000, "site_leak alive: its entry's 1,000 samples at most")
    expect("1 records with a weight this process never samples with (left out)" in p.stderr and
           "599 records more than their stack's entry made allocations (left out)" in p.stderr,
           f"the lines for the bad records: {p.stderr!r}")

    d, path = live_copy(r)
    cap, _, roff, _ = live_geometry(path)
    leak = [(i, x) for i, x in live_records(path) if x[3] == 48]
    with open(path, "r+b") as f:
        for i, x in leak[:2]:  # 2 x 2^63 bytes (together they would wrap the sum)
            f.seek(roff + RECORD.size * i)
            f.write(RECORD.pack(*(x[:3] + (1 << 63,) + x[4:])))
    p = rt.mf_print(["--live", "--format", "csv", d], check=False)
    rows = [x for x in csv.DictReader(io.StringIO(p.stdout))
            if rt.function_name(rt.csv_frames(x["stack"])[0]) == "site_leak"]
    expect_eq([(x["alive"], x["alive_bytes"]) for x in rows], [("998", str(998 * 48))],
              "site_leak with two records of 2^63 bytes: alive, bytes")
    expect("2 records with a size no allocation can have (left out)" in p.stderr,
           f"the line for the records of impossible sizes: {p.stderr!r}")

    d, path = live_copy(r)
    rt.write_struct(path, F.live_header, "records_offset", 4100)
    p = rt.mf_print(["--live", d], check=False)
    expect(p.returncode == 1 and "misaligned tables (skipped)" in p.stderr,
           f"misaligned records: rc {p.returncode}, {p.stderr!r}")

    d, path = live_copy(r)
    cap, scap, roff, soff = live_geometry(path)
    with open(path, "r+b") as f:
        f.seek(roff)
        f.write(bytes(RECORD.size * cap))
        f.seek(soff)
        f.write(bytes(F.live_stats.size * scap))
    p = rt.mf_print(["--live", d], check=False)
    expect(p.returncode == 0 and "no sampled allocation alive or freed" in p.stdout,
           f"an empty live file: rc {p.returncode}, {p.stderr!r}")

    # 4 threads with the same stacks: records of a thread file the profile skipped name none
    t = rt.run_ok([rt.c_program("live_heap"), "threads"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    d, path = live_copy(t)
    kept = [x for _, x in live_records(path) if x[3] == 56]
    seq = sorted({x[5] >> 32 for x in kept})
    expect_eq(len(seq), 4, "thread files holding site_thread_kept's records")
    name = [f for f in os.listdir(d) if f.startswith("thread.") and f.split(".")[2] == str(seq[0])]
    expect_eq(len(name), 1, f"thread file of seq {seq[0]}")
    # a format version no reader knows: skipped
    rt.write_struct(os.path.join(d, name[0]), F.thread_header, "version", 999, "<I")
    p = rt.mf_print(["--live", "--format", "csv", d], check=False)
    expect("skipping" in p.stderr and name[0] in p.stderr, f"the thread file is not skipped: "
                                                           f"{p.stderr!r}")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    expect_eq(sum(int(x["alive"]) for x in rows
                  if rt.function_name(rt.csv_frames(x["stack"])[0]) == "site_thread_kept"), 15,
              "site_thread_kept alive without the skipped thread's 5")


@rt.test
def test_live_exec_leaves_the_old_heap():
    """An image that exec'd with 1,000 blocks allocated: while the new image runs, a read
    counts only what is alive now (the new image's 10), says the old image exec'd and how
    many of its allocations are left out; once the new image has ended too, the view is
    what each image left, the old one's 1,000 among them."""
    outdir = rt.fresh_dir()
    env = rt.profiled_env(outdir, sample=None, extra={"MALLOC_FREQ_LIVE": "all"})
    p = subprocess.Popen([rt.c_program("live_exec"), "first"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                         cwd=outdir)
    try:
        expect_eq(p.stdout.readline(), "ready\n", "live_exec second's first line")
        profile = os.path.join(outdir, f"malloc_freq.{p.pid}")
        rows = live_csv(profile)
        expect_eq((site_sum(rows, "site_before_exec", "alive"),
                   site_sum(rows, "site_after_exec", "alive")), (0, 10),
                  "alive now: the exec'd image's blocks, the running image's")
        tree = rt.mf_print(["--live", profile]).stdout
        expect(f"(pid {p.pid}, exec'd)" in tree and f"(pid {p.pid}, running)" in tree,
               f"the images' states:\n{tree[:600]}")
        m = re.search(r"left out   ([\d,]+) allocations still recorded for 1 process image that "
                      r"ended \(exited, exec'd or killed\): their heap went with them", tree)
        expect(m and int(m.group(1).replace(",", "")) >= 1000, f"no left-out line:\n{tree[:800]}")
        p.stdin.write("go\n")
        p.stdin.flush()
        p.communicate(timeout=rt.TIMEOUT)
        expect_eq(p.returncode, 0, "live_exec's exit status")
        rows = live_csv(profile)
        expect_eq((site_sum(rows, "site_before_exec", "alive"),
                   site_sum(rows, "site_after_exec", "alive")), (1000, 10),
                  "at exit: what each image left")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


@rt.test
def test_live_outside_main_from_the_start_up_frames():
    """[outside main] is decided from the start-up and exit frames, not from main's name: a
    main that tail-calls its work (main is not on the stack) allocates inside main; an
    atexit handler allocates outside it also when exit() was called from inside main; a
    constructor outside. Debian's python3 reaches its code through a tail call from main
    (Py_BytesMain under __libc_start_call_main): none of its sites is outside main."""
    for mode, want in (("tail", {"site_before_main": ("3", "1"), "site_in_main": ("5", "0"),
                                 "site_at_exit": ("2", "1")}),
                       ("exit", {"site_before_main": ("3", "1"), "site_in_main": ("5", "0"),
                                 "site_at_exit": ("2", "1")})):
        r = rt.run_ok([rt.c_program("live_outside"), mode], sample=None,
                      extra_env={"MALLOC_FREQ_LIVE": "all"})
        rows = live_csv(r.profile)
        got = {x["site"]: (x["alive"], x["outside_main"]) for x in rows if x["site"] in want}
        expect_eq(got, want, f"{mode}: alive, outside main")
    python = "/usr/bin/python3"
    expect(os.path.exists(python), "no Debian python3 at /usr/bin/python3")
    script = os.path.join(rt.fresh_dir(), "keep.py")
    with open(script, "w") as f:
        f.write("keep = [bytearray(1000 + i) for i in range(100)]\n")
    r = rt.run_ok([python, script], sample=None, extra_env={"MALLOC_FREQ_LIVE": "all",
                                                           "PYTHONMALLOC": "malloc"})
    p = rt.mf_print(["--live", "--format", "csv", "--full-stacks", r.profile])
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    py = [x for x in rows if "Py_BytesMain" in rt.csv_frames(x["stack"])]
    expect(len(py) >= 10, f"python3's sites under Py_BytesMain: {len(py)}")
    expect_eq([x["stack"][:200] for x in py if x["outside_main"] != "0"], [],
              "python3's sites marked outside main")


@rt.test
def test_live_missing_records_are_said_and_in_the_csv():
    """What the live files could not record is said as it is and is in the CSV: 300,000
    blocks alive at once at MALLOC_FREQ_LIVE=all (262,144 records), then all freed: the
    header says how many allocations were not recorded (not that they are missing now), and
    the CSV's "[allocations not recorded ...]" row holds them in alloc_calls, so that
    site_many's freed and it add up to 300,000; 100,000 stacks each freeing one block (more
    than the 4,096 lifetime slots): the header says how many frees have no lifetime, and the
    CSV's "[lifetimes not recorded ...]" row's freed makes the freed column sum to 100,000."""
    r = rt.run_ok([rt.c_program("live_heap"), "many_freed"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    tree = rt.mf_print(["--live", r.profile]).stdout
    m = re.search(r"; ([\d,]+) allocations found the table full and were not recorded \(up to "
                  r"that many alive may be missing\)\n", tree)
    expect(m, f"the header on the allocations not recorded:\n{tree[:800]}")
    missing = int(m.group(1).replace(",", ""))
    rows = live_csv(r.profile)
    extra = [x for x in rows if x["site"] == "[allocations not recorded: the live table was full]"]
    expect_eq([(x["alive"], x["samples"], x["alloc_calls"]) for x in extra],
              [("", "0", str(missing))], "the CSV's row of allocations not recorded")
    expect_eq((site_sum(rows, "site_many", "alive"), site_sum(rows, "site_many", "freed") + missing),
              (0, 300000), "site_many: alive, freed + not recorded")
    r = rt.run_ok([rt.c_program("html_100k_stacks")], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    tree = rt.mf_print(["--live", r.profile]).stdout
    m = re.search(r"; the lifetimes of ([\d,]+) frees are not counted \(their stacks found the "
                  r"lifetime table full: more than 4,096 stacks freed\)", tree)
    expect(m, f"the header on the lifetimes not counted:\n{tree[:800]}")
    rows = live_csv(r.profile)
    extra = [x for x in rows if x["site"] == "[lifetimes not recorded: the lifetime table was full]"]
    expect_eq([(x["alive"], x["freed"]) for x in extra], [("0", m.group(1).replace(",", ""))],
              "the CSV's row of lifetimes not recorded")
    expect_eq(sum(int(x["freed"]) for x in rows), 100000, "the freed column's sum")


def sets_first_checkpoint(extra):
    """live_heap sets under MALLOC_FREQ_LIVE=sampled with extra settings: its live CSV at the
    first checkpoint, and whether the process's counts are estimates (the JSON's)."""
    import json
    c = Checkpoints("sampled", extra)
    try:
        c.wait_ready()
        rows = live_csv(c.profile)
        doc = json.loads(rt.mf_print(["--live", "--format", "json", c.profile]).stdout)
        c.go_on()
        c.wait_ready()
        c.finish()
    finally:
        c.kill()
    return rows, doc["processes"][0]["estimated"]


@rt.test
def test_live_sampled_error_bars_are_honest():
    """MALLOC_FREQ_LIVE=sampled: the estimates are unbiased and their error bars honest.
    In the default mode with a short exact stretch (MALLOC_FREQ_EXACT=140: a site whose
    records are all of weight 1 while the process goes on sampling, "~137 ±0%"), no row of a
    process that sampled has variance 0: its error is at least one sample at the process's
    interval, as the tree's is. At a fixed interval of 40, 20 runs: site_keep_small's 2,000
    live blocks are ~50 samples (Poisson), so an estimate 5 standard errors off has a
    chance of 2.4e-5 a run (P(k <= 23) for a mean of 50; 5e-4 for all 20 runs): every run is
    within 5, and the mean of the 20 estimates within 4 standard errors of the mean."""
    for run in range(3):
        rows, estimated = sets_first_checkpoint({"MALLOC_FREQ_EXACT": "140"})
        if not estimated:
            continue  # every call was recorded: variance 0 is right
        zero = [(x["site"], x["alive"]) for x in rows if x["alive"] and int(x["alive"]) > 0 and
                int(x["alive_variance"]) == 0]
        expect_eq(zero, [], f"run {run}: rows of a sampling process with variance 0")
    est, var = [], []
    for run in range(20):
        rows, _ = sets_first_checkpoint({"MALLOC_FREQ_SAMPLE": "40"})
        got, v = site_sum(rows, "site_keep_small", "alive"), site_sum(rows, "site_keep_small",
                                                                      "alive_variance")
        expect(v > 0 and abs(got - 2000) <= 5 * math.sqrt(v),
               f"run {run}: site_keep_small ~{got} ± {math.sqrt(v):.0f}, truth 2,000")
        est.append(got)
        var.append(v)
    mean, se = sum(est) / len(est), math.sqrt(sum(var)) / len(est)
    expect(abs(mean - 2000) <= 4 * se, f"the mean of 20 estimates {mean:.0f} ± {se:.0f}")
