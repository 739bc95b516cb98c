"""The recorder end to end: each test compiles a small program from tests/programs/, runs it
under build/libmalloc_freq.so, reads the profile back with build/mf_print and asserts exact
numbers that the program's source makes known: counts per site and per allocation function,
whole stacks, fork and exec children, kill -9, sampling's estimates and their errors."""

import glob
import gzip
import math
import os
import re
import shutil
import struct
import subprocess

from harness import (ALLOC_API, EXACT_SITES, F, GUARD_API, HOSTILE_SITES, LIB, MF_FN_NAMES,
                     MF_PRINT, SAMPLED_SITES, TIMEOUT, Skip, build, c_program, csv_rows, csv_total,
                     exact_calls_per_fn, exact_total_calls, expect, expect_eq,
                     expect_exact_sites_with, expect_one_line_error, expect_sites, file_entries,
                     file_totals, fn_totals, fresh_dir, function_name, killed_live_sleeper,
                     mf_print, parse_csv, process_files, process_flags, profiled_env, run,
                     read_struct, run_ok, sample_interval, site_rows, site_totals, table_threads, test,
                     thread_file_stacks, thread_files, thread_flags, thread_segments, tree_header_total,
                     tree_lines, tree_text, write_struct)


@test
def test_exact_counts_per_site():
    # The stacks are whole: every level of recursion is there, down to main.
    r, rows = expect_exact_sites_with({}, reach_main=True)
    # Each worker thread k recursed 5k levels: four distinct stacks, one per thread.
    work = sorted((r.calls, [function_name(f) for f in r.stack].count("descend"))
                  for r in site_rows(rows, "site_thread_work"))
    expect_eq(work, [(250, 1), (500, 6), (750, 11), (1000, 16)],
              "site_thread_work (calls, descend levels) per stack")
    # Functions libc never calls on its own are counted exactly in the thread headers.
    per_fn = exact_calls_per_fn(r.profile)
    for fn, site in [(2, "site_realloc"), (3, "site_posix_memalign"), (4, "site_aligned_alloc"),
                     (5, "site_memalign"), (6, "site_valloc"), (7, "site_pvalloc")]:
        expect_eq(per_fn[fn], EXACT_SITES[site][0], f"exact {MF_FN_NAMES[fn]} total")
    # Every call is in exactly one row: CSV sum == exact header totals == tree header total.
    known = sum(c for c, _ in EXACT_SITES.values())
    total = csv_total(rows)
    expect(total >= known, f"CSV total {total} < the {known} calls the program made")
    expect_eq(total, exact_total_calls(r.profile), "CSV total vs the thread headers' totals")
    expect_eq(tree_header_total(tree_text(r.profile)), total, "tree header total vs CSV total")
    # Six threads recorded. The four workers exited (the tables they left are marked
    # finished; a later worker may have taken one over); main and the thread still in pause()
    # at exit did not, and the latter's 333 calls are counted all the same.
    files = thread_files(r.profile)
    expect_eq(sum(table_threads(f) for f in files), 6, "threads over the thread files")
    flags = sorted(thread_flags(f) & 1 for f in files)
    expect_eq(flags, [0, 0] + [1] * (len(files) - 2), "MF_THREAD_FINISHED flags of the thread files")


@test
def test_fp_unwinder_exact_on_frame_pointer_code():
    r, _ = expect_exact_sites_with({"MALLOC_FREQ_UNWIND": "fp"})
    expect_eq(r.stderr, "", "stderr")


@test
def test_hostile_frame_pointers():
    """Garbage in %rbp, a signal's alternate stack, a coroutine's heap stack: both unwinders
    count every call and the program never crashes."""
    if os.uname().machine != "x86_64":
        return  # the program sets %rbp with x86-64 assembly
    prog = c_program("hostile_frames")
    for unwind in ("fp", "libunwind"):
        r = run_ok([prog], extra_env={"MALLOC_FREQ_UNWIND": unwind})
        expect_eq(r.stdout, "hostile_frames done\n", f"output with MALLOC_FREQ_UNWIND={unwind}")
        expect_eq(r.stderr, "", f"stderr with MALLOC_FREQ_UNWIND={unwind}")
        rows = csv_rows(r.profile)
        expect_sites(rows, HOSTILE_SITES)
        expect_eq(csv_total(rows), exact_total_calls(r.profile), f"CSV total ({unwind})")


@test
def test_missing_libunwind_warns_once_and_falls_back_to_fp():
    r, _ = expect_exact_sites_with({"MALLOC_FREQ_LIBUNWIND": "/nonexistent/libunwind.so.8"})
    lines = r.stderr.splitlines()
    expect_eq(len(lines), 1, f"stderr lines ({r.stderr!r})")
    expect("/nonexistent/libunwind.so.8" in lines[0] and "frame-pointer" in lines[0],
           f"warning names the library and the fallback: {lines[0]!r}")


@test
def test_threshold_folds_and_sums():
    r = run_ok([c_program("threshold_sites")])
    rows = csv_rows(r.profile)
    sites = {"site_big_a": 6000, "site_big_b": 3000, "site_mid": 800, "site_small_1": 40,
             "site_small_2": 30, "site_small_3": 20, "site_small_4": 10}
    expect_sites(rows, {s: (c, 24 * c) for s, c in sites.items()})
    total = csv_total(rows)
    threshold = 1.0  # percent of all calls: hides site_small_* (< 0.5 % each)
    text = tree_text(r.profile, threshold=threshold)
    expect_eq(tree_header_total(text), total, "tree header total vs CSV total")
    for s in ("site_big_a", "site_big_b", "site_mid"):
        expect(s in text, f"{s} missing from the tree at --threshold {threshold}")
    for s in ("site_small_1", "site_small_2", "site_small_3", "site_small_4"):
        expect(s not in text, f"{s} shown at --threshold {threshold}")
    # Top-level entries are allocation sites: the CSV rows grouped by their first frame.
    by_site = {}
    for row in rows:
        by_site[row.stack[0]] = by_site.get(row.stack[0], 0) + row.calls
    hidden = {s: c for s, c in by_site.items() if 100.0 * c / total < threshold}
    shown = {s: c for s, c in by_site.items() if s not in hidden}
    top = [e for e in tree_lines(text) if e.top]
    folds = [e for e in top if re.search(r"more entries below", e.text)]
    expect_eq(len(folds), 1, f"top-level fold lines at --threshold {threshold}")
    fold = folds[0]
    expect_eq(fold.calls, sum(hidden.values()), f"calls on the fold line {fold.text!r} "
                                                f"(hidden sites {sorted(hidden.items())})")
    expect_eq(int(re.search(r"(\d+) more entries", fold.text).group(1)), len(hidden),
              f"entries the fold line {fold.text!r} hides")
    expect_eq(sorted((e.name, e.calls) for e in top if e is not fold),
              sorted(shown.items()), "top-level entries shown")
    pct_sum = sum(e.percent for e in top)
    expect(abs(pct_sum - 100.0) <= 0.1, f"top-level percentages add up to {pct_sum}, not 100")


# tests/programs/cxx_new_delete.cpp: site -> (calls, bytes)
CXX_SITES = {
    "site_new_node": (1000, 1000 * 16),
    "site_new_array": (400, 400 * 80),
    "site_new_dtor_array": (300, 300 * 28),
}


@test
def test_cxx_new_delete_exceptions():
    prog = build("cxx_new_delete", ["cxx_new_delete.cpp"], cxx=True)
    plain = run([prog], profile=False)
    r = run_ok([prog], rc=plain.rc)
    expect_eq(plain.rc, 5, "unprofiled exit status")
    expect_eq(r.stdout, plain.stdout, "stdout under the profiler")
    expect_eq(r.stderr, plain.stderr, "stderr under the profiler")
    rows = csv_rows(r.profile)
    expect_sites(rows, CXX_SITES)
    # Each of the 100 `throw i` allocates its exception once, inside site_throw: the site is
    # site_throw via __cxa_allocate_exception (folded into its caller; --no-fold keeps it).
    throws = [row for row in rows
              if "site_throw" in [function_name(f) for f in row.stack]]
    expect_eq(sum(row.calls for row in throws), 100, "calls under site_throw")
    expect_eq([(function_name(row.stack[0]), row.via) for row in throws],
              [("site_throw", "__cxa_allocate_exception")], "allocation site of the exceptions")
    throws = [row for row in csv_rows(r.profile, extra=["--no-fold"])
              if "site_throw" in [function_name(f) for f in row.stack]]
    expect_eq([(function_name(row.stack[0]), row.calls, row.via) for row in throws],
              [("__cxa_allocate_exception", 100, "")], "the exceptions' site with --no-fold")


@test
def test_c_host_dlopen_cxx_plugin_throws():
    plugin = build("cxx_plugin.so", ["cxx_plugin.cpp"], cxx=True, shared=True)
    host = c_program("dlopen_host", libs=("-ldl", "-lpthread"))
    plain = run([host, plugin], profile=False)
    expect_eq(plain.rc, 7, "unprofiled exit status")
    # Unprofiled, both cancelled threads unwind fully; the one in the plugin's C++ frames
    # runs its catch (...) and destructor (a host linked with -lunwind prints "destructors 0").
    for want in ("reader cancelled yes, cleanup ran 1",
                 "plugin reader cancelled yes, destructors 11"):
        expect(want in plain.stdout, f"unprofiled output lacks {want!r}: {plain.stdout!r}")
    for mode in ("1", None):  # exact, and the default mode
        r = run_ok([host, plugin], rc=7, sample=mode)
        expect_eq(r.stdout, plain.stdout, f"stdout with MALLOC_FREQ_SAMPLE={mode}")
        expect_eq(r.stderr, plain.stderr, f"stderr with MALLOC_FREQ_SAMPLE={mode}")
        if mode == "1":  # two plugin_run() calls, 50 `new long` each, in the dlopen'd module
            expect_sites(csv_rows(r.profile), {"plugin_site": (100, 800)})


def fork_children_test(mode):
    r = run_ok([c_program("fork_children"), mode])
    children = {}
    for line in r.stdout.splitlines():
        _, k, pid = line.split()
        children[int(k)] = int(pid)
    expect_eq(sorted(children), [0, 1, 2], "children reported")
    dirs = sorted(os.path.basename(d) for d in glob.glob(os.path.join(r.outdir, "malloc_freq.*")))
    expect_eq(dirs, sorted(f"malloc_freq.{p}" for p in [r.pid] + list(children.values())),
              "profile directories")
    problems = []

    def check(what, got, want):
        if got != want:
            problems.append(f"{what}: expected {want}, got {got}")

    # (directory, own site, own calls, own bytes per call, the other site)
    expected = [("parent", r.profile, "site_parent", 1000, 64, "site_child")]
    for k, pid in sorted(children.items()):
        expected.append((f"child {k}", os.path.join(r.outdir, f"malloc_freq.{pid}"),
                         "site_child", (k + 1) * 100, 32, "site_parent"))
    for who, d, site, calls, size, other in expected:
        rows = csv_rows(d)
        got = site_totals(rows, site)
        check(f"{who}: {site} calls/bytes/samples", got, (calls, calls * size, calls))
        check(f"{who}: {other} calls", site_totals(rows, other)[0], 0)
        check(f"{who}: process files", len(process_files(d)), 1)
        # Every counted call is in one row, and no other process wrote into these files.
        check(f"{who}: CSV total vs exact header totals", csv_total(rows), exact_total_calls(d))
        check(f"{who}: rows with 0 calls", [row.stack[0] for row in rows if row.calls == 0], [])
        tree = tree_text(d)
        top = sum(e.percent for e in tree_lines(tree) if e.top)
        if abs(top - 100.0) > 0.1:
            problems.append(f"{who}: top-level percentages add up to {top:.2f}")
    expect(not problems, "; ".join(problems))


@test
def test_fork_children_exact():
    fork_children_test("fork")


@test
def test_raw_fork_children_exact():
    """_Fork() skips the atfork handlers: the core's pid check must catch the child."""
    fork_children_test("_Fork")


@test
def test_fork_loop_children_exact():
    """A shell's pattern: a profiled parent that allocates and forks, again and again. Exact
    counts in the parent and in every child that allocated, at its own site, with stacks
    that reach main; the child keeps the forking thread's stack bounds (no /proc/self/maps
    opened in a child); a child that did not allocate leaves no directory."""
    prog = c_program("fork_loop")
    rounds = 100
    r = run_ok([prog, str(rounds)])
    dirs = glob.glob(os.path.join(r.outdir, "malloc_freq.*"))
    expect_eq(len(dirs), 1 + rounds // 2, "profile directories: the parent's and one per "
                                           "child that allocated")
    rows = csv_rows(r.profile)
    expect_eq(site_totals(rows, "site_parent"), (6 * (rounds + 1), 6 * (rounds + 1) * 48,
                                                 6 * (rounds + 1)), "the parent's site")
    for d in dirs:
        if d == r.profile:
            continue
        rows = csv_rows(d)
        expect_eq(site_totals(rows, "site_child"), (10, 240, 10), f"{d}: the child's site")
        expect_eq(site_totals(rows, "site_parent")[0], 0, f"{d}: the parent's site")
        for row in rows:
            names = [function_name(f) for f in row.stack]
            expect("main" in names, f"{d}: a stack that does not reach main: {row.stack}")
    if shutil.which("strace"):
        outdir = fresh_dir()
        trace = os.path.join(outdir, "strace.out")
        p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat", "-o", trace, prog, "8"],
                           env=profiled_env(outdir), capture_output=True, timeout=TIMEOUT)
        expect_eq(p.returncode, 0, "fork_loop under strace")
        with open(trace) as f:
            lines = f.read().splitlines()
        parent = lines[0].split()[0]
        maps = [l for l in lines if "/proc/self/maps" in l and l.split()[0] != parent]
        expect_eq(maps, [], "children that opened /proc/self/maps")


@test
def test_fork_from_a_signal_handler_mid_sample():
    """A signal handler that forks, often while it interrupts the profiler's slow path
    (every call recorded: most of the loop's time is there); the child returns from the
    handler into whatever it interrupted, allocates on and exits. The child must find the
    profiler's state as the parent had it: a version that did not share the slots' state
    with fork children (MADV_WIPEONFORK) crashed 24-78 of 100 such children. The parent's
    profile stays exact."""
    forks = 100
    r = run_ok([c_program("fork_in_handler"), str(forks)])
    expect_eq(r.stdout, f"forks {forks}, children failed 0\n", "fork_in_handler's report")
    dirs = glob.glob(os.path.join(r.outdir, "malloc_freq.*"))
    expect_eq(len(dirs), 1 + forks, "profile directories: the parent's and each child's")
    # A child that goes on with its parent's sample does so in copies of the parent's table
    # (mf_table_privatize): the parent's stacks hold every call its header counts (before,
    # children's writes racing the parent's own lost 0.1-0.3 % of them).
    expect_eq(csv_total(csv_rows(r.profile)), exact_total_calls(r.profile),
              "the parent's calls in its stacks against its exact header")


@test
def test_exec_keeps_both_images():
    second = c_program("exec_second")
    r = run_ok([c_program("exec_first"), second])
    expect_eq(r.stdout, "exec_second done\n", "program output")
    expect_eq(len(process_files(r.profile)), 2, "process files in malloc_freq.<pid>")
    stamps = {os.path.basename(f).split(".")[1] for f in thread_files(r.profile)}
    expect_eq(len(stamps), 2, "process images (stamps) among the thread files")
    rows = csv_rows(r.profile)
    expect_sites(rows, {"site_before_exec": (700, 14000), "site_after_exec": (900, 27000)})
    expect_eq(csv_total(rows), exact_total_calls(r.profile), "CSV total vs the headers' totals")


@test
def test_nm_exports_only_alloc_api():
    out = subprocess.run(["nm", "-D", "--defined-only", LIB], capture_output=True, text=True,
                         check=True).stdout
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    extra = sorted(n for n in names if n not in ALLOC_API | GUARD_API
                   and not n.startswith("malloc_freq_"))
    expect(not extra, f"exported beyond the allocation API: {extra}")
    missing = sorted((ALLOC_API | GUARD_API | {"malloc_freq_dir", "malloc_freq_pause",
                                   "malloc_freq_resume"}) - names)
    expect(not missing, f"not exported: {missing}")


@test
def test_killed_process_loses_nothing():
    # Exact mode: every call is in the file the moment it is made.
    expected = {"site_live_main": (1234, 1234 * 8), "site_live_thread": (567, 567 * 16)}
    live_total = []

    def while_alive(profile):
        live = csv_rows(profile)
        expect_sites(live, expected)
        live_total.append(csv_total(live))
        expect_eq(live_total[0], exact_total_calls(profile), "live CSV total vs headers' totals")

    profile, _ = killed_live_sleeper("1", while_alive)
    dead = csv_rows(profile)
    expect_sites(dead, expected)
    expect_eq(csv_total(dead), live_total[0], "CSV total after kill -9 vs while running")


@test
def test_killed_sampled_process_loses_less_than_a_flush():
    # Sampled, the hot path's counts reach the file every MF_FLUSH_CALLS (4096) calls: a
    # thread killed by a signal can leave fewer than that uncounted, and nothing else.
    _, exact = killed_live_sleeper("1")
    _, sampled = killed_live_sleeper("100000")
    expect_eq(len(sampled), len(exact), "thread files")
    for k, ((calls, nbytes), (exact_calls, exact_bytes)) in enumerate(zip(sampled, exact)):
        expect(exact_calls - 4096 < calls <= exact_calls,
               f"thread {k}: {calls} calls after kill -9, exact {exact_calls}")
        expect(nbytes <= exact_bytes, f"thread {k}: {nbytes} bytes, exact {exact_bytes}")


@test
def test_sampled_totals_exact_at_exit():
    # Every end but a signal flushes: thread exit, and at the process's exit the counts still
    # pending in every thread, the one blocked in pause() too (its 333 calls never reach a
    # flush of its own). Per thread, the totals equal those of the exact run.
    exact = run_ok([c_program("exact_sites")])
    sampled = run_ok([c_program("exact_sites")], sample="100000",
                     extra_env={"MALLOC_FREQ_SEED": "7"})
    expect_eq(fn_totals(sampled.profile), fn_totals(exact.profile),
              "(calls, bytes) per allocation function at N=100000 vs N=1")
    per_fn = exact_calls_per_fn(sampled.profile)
    for fn, site in [(2, "site_realloc"), (7, "site_pvalloc")]:
        expect_eq(per_fn[fn], EXACT_SITES[site][0], f"exact {MF_FN_NAMES[fn]} total at N=100000")


@test
def test_hot_path_with_the_programs_own_tls():
    # The entry points address their TLS at a fixed offset from %fs when the loader put it
    # there, which depends on the program's own TLS: none or a little, and it is there; a
    # lot, and they load its offset from the GOT. The process file says which ran. Either
    # way every count is exact, and sampled totals equal the exact ones.
    for tls_bytes, direct in ((0, True), (64, True), (512, False)):
        prog = c_program("exact_sites") if not tls_bytes else build(
            f"exact_sites_tls{tls_bytes}", ["exact_sites.c", "exe_tls.c"],
            libs=("-lpthread", f"-DEXE_TLS_BYTES={tls_bytes}"))
        exact, _ = expect_exact_sites_with({}, program=prog)
        sampled = run_ok([prog], sample="100000", extra_env={"MALLOC_FREQ_SEED": "3"})
        for r in (exact, sampled):
            expect_eq(bool(process_flags(r.profile) & F.PROCESS_TLS_DIRECT), direct,
                      f"direct TLS path with {tls_bytes} bytes of the program's own TLS")
        expect_eq(fn_totals(sampled.profile), fn_totals(exact.profile),
                  f"totals per function at N=100000 vs N=1, {tls_bytes} bytes of program TLS")


@test
def test_thread_ids_reused():
    r = run_ok([c_program("thread_reuse")])
    m = re.match(r"2000 threads, (\d+) distinct pthread_t\n$", r.stdout)
    expect(m, f"program output {r.stdout!r}")
    expect(int(m.group(1)) < 2000, "glibc reused no pthread_t; the test proves nothing")
    # One after another, the threads hand one table on: two files, not 2,001.
    files = thread_files(r.profile)
    expect_eq(len(files), 2, "thread files for main + 2000 threads one after another")
    expect_eq(sum(table_threads(f) for f in files), 2001, "threads over the thread files")
    rows = csv_rows(r.profile)
    expect_sites(rows, {"site_short_thread": (10000, 240000)})
    expect_eq(csv_total(rows), exact_total_calls(r.profile), "CSV total vs headers' totals")


@test
def test_mf_print_bad_input():
    r = run_ok([c_program("four_threads")])
    good = r.profile
    empty = fresh_dir()
    expect_one_line_error(["--dir", os.path.join(empty, "missing")], "missing dir")
    expect_one_line_error(["--dir", empty], "empty dir")
    expect_one_line_error(["--dir", good, "--no-such-option"], "unknown option")
    expect_one_line_error(["--dir", good, "--threshold", "abc"], "--threshold abc")
    expect_one_line_error(["--dir", good, "--threshold", "150"], "--threshold 150")
    expect_one_line_error(["--dir", good, "--threshold", "-1"], "--threshold -1")
    expect_one_line_error(["--dir", good, "--format", "xml"], "--format xml")

    # Damage worker 0's file (truncated) and worker 1's (garbage); 2 and 3 must survive.
    tids = {}
    for line in r.stdout.splitlines():
        _, k, tid = line.split()
        tids[int(k)] = tid
    damaged = os.path.join(fresh_dir(), "damaged")
    shutil.copytree(good, damaged)
    by_tid = {os.path.basename(f).split(".")[3]: f for f in thread_files(damaged)}
    truncated, garbage = by_tid[tids[0]], by_tid[tids[1]]
    with open(truncated, "r+b") as f:
        f.truncate(100)
    size = os.path.getsize(garbage)
    with open(garbage, "wb") as f:
        f.write(os.urandom(size))
    out = mf_print(["--dir", damaged, "--format", "csv"], check=False)
    for path in (truncated, garbage):
        expect(os.path.basename(path) in out.stderr,
               f"{os.path.basename(path)} not named on stderr: {out.stderr!r}")
    rows = parse_csv(out.stdout)
    expect_sites(rows, {"site_worker_2": (300, 12000), "site_worker_3": (400, 16000)})
    for k in (0, 1):
        expect_eq(site_totals(rows, f"site_worker_{k}")[0], 0,
                  f"site_worker_{k} calls from a damaged file")
    tree = mf_print(["--dir", damaged], check=False)
    expect("site_worker_3" in tree.stdout, "the tree of the damaged profile lost site_worker_3")
    # Every format: one line per bad file on stderr, the rest of the report, status 0.
    for fmt in ("tree", "csv", "collapsed", "json", "pprof", "html"):
        out_file = os.path.join(fresh_dir(), "report")
        r2 = subprocess.run([MF_PRINT, "--dir", damaged, "--format", fmt, "-o", out_file],
                            capture_output=True, timeout=TIMEOUT)
        expect_eq(r2.returncode, 0, f"--format {fmt} of a damaged profile: exit status")
        err = r2.stderr.decode(errors="replace").splitlines()
        for path in (truncated, garbage):
            named = [l for l in err if os.path.basename(path) in l]
            expect(len(named) == 1, f"--format {fmt}: {os.path.basename(path)} named in "
                                    f"{len(named)} lines of stderr: {err}")
        with open(out_file, "rb") as f:
            data = f.read()
        if fmt == "pprof":
            data = gzip.decompress(data)
        for site in ("site_worker_2", "site_worker_3"):
            expect(site.encode() in data, f"--format {fmt} of a damaged profile lost {site}")


@test
def test_bad_environment_values():
    prog = c_program("output_status")
    plain = run([prog], profile=False)
    bad = [("MALLOC_FREQ_SAMPLE", "abc"), ("MALLOC_FREQ_SAMPLE", "0"),
           ("MALLOC_FREQ_SAMPLE", "-5"), ("MALLOC_FREQ_SAMPLE", "99999999999999999999"),
           ("MALLOC_FREQ_DEPTH", "abc"), ("MALLOC_FREQ_DEPTH", "0"),
           ("MALLOC_FREQ_SEED", "xyz"), ("MALLOC_FREQ_UNWIND", "bogus"),
           ("MALLOC_FREQ_LARGE", "64k"), ("MALLOC_FREQ_LARGE", "-1")]
    failures = []

    def check(env, sample, want_lines, want_names):
        r = run([prog], sample=sample, extra_env=env)
        what = " ".join(f"{k}={v}" for k, v in env.items())
        if (r.stdout, r.rc) != (plain.stdout, plain.rc):
            failures.append(f"{what}: stdout/status {r.stdout!r}/{r.rc}, "
                            f"expected {plain.stdout!r}/{plain.rc}")
            return
        extra = [l for l in r.stderr.splitlines() if l not in plain.stderr.splitlines()]
        if len(extra) != want_lines or any(not any(n in l for l in extra) for n in want_names):
            failures.append(f"{what}: expected {want_lines} warning line(s) naming "
                            f"{want_names}, got {extra}")

    for name, value in bad:
        check({name: value}, "1" if name != "MALLOC_FREQ_SAMPLE" else None, 1, [name])
    check({"MALLOC_FREQ_SAMPLE": "abc", "MALLOC_FREQ_DEPTH": "abc",
           "MALLOC_FREQ_UNWIND": "bogus"}, None, 3,
          ["MALLOC_FREQ_SAMPLE", "MALLOC_FREQ_DEPTH", "MALLOC_FREQ_UNWIND"])
    check({"MALLOC_FREQ_DIR": "/proc/nonexistent"}, "1", 1, ["/proc/nonexistent"])
    expect(not failures, "; ".join(failures))


@test
def test_hostile_environment_values_are_shown_escaped():
    """A MALLOC_FREQ_* value and a MALLOC_FREQ_DIR may come from someone else's script or
    repository: each warning shows them as mf_print shows names (ESC as \\x1b, BEL \\x07, a
    C1 control as \\u0085, a byte that is not UTF-8 as \\xff, a backslash doubled) and sends
    the terminal no control character. Before, the value and the path were written raw (an
    OSC 52 in MALLOC_FREQ_UNWIND wrote the clipboard). The program's output and status are
    unchanged."""
    prog = c_program("output_status")
    plain = run([prog], profile=False)
    missing = os.path.join(fresh_dir(), "no\x1b[2Jdir\udcff")  # \udcff: the byte 0xff
    cases = [
        ({"MALLOC_FREQ_SAMPLE": "x\x1b[2J\\y"}, None,
         "malloc_freq: MALLOC_FREQ_SAMPLE=x\\x1b[2J\\\\y is not a number in 1..1000000000; "),
        ({"MALLOC_FREQ_UNWIND": "\x1b]52;c;QQ==\x07"}, "1",
         "malloc_freq: MALLOC_FREQ_UNWIND=\\x1b]52;c;QQ==\\x07 is not libunwind, "),
        ({"MALLOC_FREQ_LIVE": "all\x85"}, "1",
         "malloc_freq: MALLOC_FREQ_LIVE=all\\u0085 is not off, sampled or all; "),
        ({"MALLOC_FREQ_DIR": missing}, "1",
         "malloc_freq: cannot create %s/malloc_freq." % missing.replace("\x1b", "\\x1b")
         .replace("\udcff", "\\xff")),
    ]
    failures = []
    for env, sample, want in cases:
        r = run([prog], sample=sample, extra_env=env)
        what = " ".join(f"{k}={v!r}" for k, v in env.items())
        if (r.stdout, r.rc) != (plain.stdout, plain.rc):
            failures.append(f"{what}: stdout/status {r.stdout!r}/{r.rc}")
        extra = [l for l in r.stderr.splitlines() if l not in plain.stderr.splitlines()]
        if len(extra) != 1 or not extra[0].startswith(want):
            failures.append(f"{what}: expected one line starting {want!r}, got {extra!r}")
        bad = [c for c in r.stderr if c in "\x1b\x07\x85\ufffd"]
        if bad:
            failures.append(f"{what}: raw {bad[:3]!r} on stderr")
    expect(not failures, "; ".join(failures))


@test
def test_program_output_unchanged():
    prog = c_program("output_status")
    plain = run([prog], profile=False)
    expect_eq(plain.rc, 3, "unprofiled exit status")
    for sample in ("1", None):
        r = run_ok([prog], rc=3, sample=sample)
        expect_eq(r.stdout, plain.stdout, f"stdout with MALLOC_FREQ_SAMPLE={sample}")
        expect_eq(r.stderr, plain.stderr, f"stderr with MALLOC_FREQ_SAMPLE={sample}")
    # The 100 strdup() calls made from main, through libc's strdup (folded into main).
    rows = csv_rows(r.profile)
    dup = [row for row in rows if "strdup" in row.via and row.site == "main"]
    expect_eq(sum(row.calls for row in dup), 100, "strdup calls from main")


@test
def test_depth_truncation():
    r = run_ok([c_program("exact_sites")], extra_env={"MALLOC_FREQ_DEPTH": "8"})
    rows = csv_rows(r.profile)
    expect_sites(rows, EXACT_SITES)
    # 8 frames recorded: malloc (trimmed), site_deep and 6 of its 18 descend frames.
    expect_eq([row.stack for row in site_rows(rows, "site_deep")],
              [["site_deep"] + ["descend"] * 6 + ["[deeper frames not recorded]"]],
              "site_deep's stacks at MALLOC_FREQ_DEPTH=8")
    tree = tree_text(r.profile, threshold=0)
    expect(re.search(r"^\s*90\s.*└─ \[deeper frames not recorded\]$", tree, re.M),
           "the tree has no `[deeper frames not recorded]` line with site_deep's 90 calls")
    expect_eq(csv_total(rows), exact_total_calls(r.profile), "CSV total vs headers' totals")


_exact_sampled = {}


def exact_sampled_run():
    """The N=1 run of sampled_sites, shared by the sampling tests."""
    if not _exact_sampled:
        r = run_ok([c_program("sampled_sites")])
        rows = csv_rows(r.profile)
        expect_sites(rows, {s: (c, c * b) for s, (c, b) in SAMPLED_SITES.items()})
        _exact_sampled["total"] = exact_total_calls(r.profile)
        _exact_sampled["tree_total"] = tree_header_total(tree_text(r.profile))
    return _exact_sampled


def expect_estimates(rows, se_of, label):
    bad = []
    for site, (known, size) in SAMPLED_SITES.items():
        calls, nbytes, samples = site_totals(rows, site)
        se = se_of(known, calls, samples)
        if abs(calls - known) > 4 * se:
            bad.append(f"{site}: estimate {calls} ({samples} samples), known {known}, "
                       f"off by {abs(calls - known) / se:.1f} SE (SE {se:.0f})")
        if nbytes != calls * size:
            bad.append(f"{site}: {nbytes} bytes for {calls} calls of {size} bytes")
    expect(not bad, f"{label}: " + "; ".join(bad))


@test
def test_sampled_estimates_within_4_se():
    exact = exact_sampled_run()
    n = 1000
    r = run_ok([c_program("sampled_sites")], sample=str(n),
               extra_env={"MALLOC_FREQ_SEED": "42"})
    rows = csv_rows(r.profile)
    # Sampled with p = 1/N, weight N: Var = known * (N - 1).
    expect_estimates(rows, lambda known, calls, samples: math.sqrt(known * (n - 1)),
                     f"MALLOC_FREQ_SAMPLE={n}")
    hot = site_totals(rows, "site_hot")
    expect(hot[2] < hot[0], f"site_hot has {hot[2]} samples for {hot[0]} calls: not sampled")
    expect_eq(exact_total_calls(r.profile), exact["total"], "exact total vs the N=1 run")
    expect_eq(tree_header_total(tree_text(r.profile)), exact["tree_total"],
              "tree header total vs the N=1 run")


@test
def test_the_interval_ramps_up_past_the_exact_stretch():
    """Past the exact stretch the default mode's k-th sample is drawn at k / 6 calls (at
    least 1), or at the budget's interval if that is less, not at the budget's interval at
    once (c_core/mf_sample.c, mf_ramp). 300,000 calls at one site: the first 100,000 exact,
    then about 1,550 samples whose weights are 1 (eleven times), 2 (six times), 3, ... (the
    budget's interval, in the thousands on a loop this fast, comes into it only where the
    machine stalls the program). The files keep each weight as calls (sum w) and calls_sq
    (sum w^2), the stretch's calls as 1 and 1: so the m samples past the stretch add at most
    the ramp's first m weights' sums, and nearly those."""
    r = run_ok([c_program("shallow_calls"), "300000"], sample=None,
               extra_env={"MALLOC_FREQ_SEED": "7"})
    proc = process_files(r.profile)[0]
    expect_eq((read_struct(proc, F.process_header, "ramp_samples", "<I"),
               read_struct(proc, F.process_header, "ramp_step", "<I")), (4096, 6),
              "the ramp in the process file (samples, step)")
    entries = file_entries(r.profile)
    m = sum(samples for _, samples, _, _ in entries) - read_struct(
        proc, F.process_header, "exact_recorded")
    s1 = sum(calls - samples for calls, samples, _, _ in entries)  # sum (w - 1)
    s2 = sum(sq - samples for _, samples, sq, _ in entries)  # sum (w^2 - 1)
    ramp = [max(1, k // 6) for k in range(1, m + 1)]
    f1, f2 = sum(w - 1 for w in ramp), sum(w * w - 1 for w in ramp)
    expect(s1 <= f1 and s2 <= f2 and s1 >= 0.9 * f1,
           f"{m} samples past the stretch weigh sum(w-1) {s1}, sum(w^2-1) {s2}; the ramp's "
           f"first {m} weights {f1}, {f2}")
    # About sqrt(12 * 200,000) = 1,549 samples, the last of weight ~258.
    expect(1300 <= m <= 1800, f"{m} samples past the stretch, expected about 1,549")
    calls, _, _ = site_totals(csv_rows(r.profile, extra=("--uncalibrated",)), "site_shallow")
    expect(abs(calls - 300000) < 6 * math.sqrt(s2), f"site_shallow: {calls} calls estimated "
                                                     f"for 300,000")
    line = [x for x in tree_text(r.profile).splitlines() if "sampling" in x]
    expect(line and "then adaptive (a ramp of 4,096 samples, then samples take <= 0.3% of "
                    "time)" in line[0], f"the sampling line: {line}")
    # No stretch, no ramp: MALLOC_FREQ_EXACT=0 samples at the budget's interval from the
    # first call, as MALLOC_FREQ_SAMPLE=N at N.
    for env in ({"MALLOC_FREQ_EXACT": "0"}, {"MALLOC_FREQ_SAMPLE": "1000"}):
        q = run_ok([c_program("shallow_calls"), "300000"], sample=None, extra_env=env)
        expect_eq(read_struct(process_files(q.profile)[0], F.process_header, "ramp_samples",
                              "<I"), 0, f"the ramp with {env}")
        text = tree_text(q.profile)
        expect("ramp" not in text, f"{env}: the report tells of a ramp")


@test
def test_default_mode_agrees_with_exact():
    """The default mode records the first calls exactly (weight 1), then samples at the
    interval each thread's cost budget allows (weight = that interval). A sample of weight w
    adds w(w-1) to an estimate's variance; the files keep sum w^2 per stack."""
    exact = exact_sampled_run()
    r = run_ok([c_program("sampled_sites")], sample=None, extra_env={"MALLOC_FREQ_SEED": "42"})
    expect_eq(sample_interval(r.profile), 0, "the default mode's interval in the process file")
    # The estimates as the files hold them (not calibrated to the totals: that test is below).
    raw = ("--uncalibrated",)
    rows = csv_rows(r.profile, extra=raw)
    entries = file_entries(r.profile)
    # Every site is one stack: find its entry by (calls, samples).
    sq_of = {}
    for site in SAMPLED_SITES:
        calls, _, samples = site_totals(rows, site)
        sq = [e[2] for e in entries if e[:2] == (calls, samples)]
        expect(len(sq) == 1, f"{site}: {len(sq)} file entries with {calls} calls, {samples} samples")
        sq_of[site] = sq[0]
    # One sample at the largest weight: the error of a site no weighted sample has hit yet.
    w = max(e[2] // e[0] for e in entries if e[0])
    expect(w > 1, f"the default mode sampled nothing (largest weight {w}) on "
                  f"{exact['total']} malloc-bound calls")

    # The variance the samples imply (sum w(w-1)) understates it for a site that few
    # weighted samples hit (site_rare gets about five a run; one run put it 4.1 of those
    # SEs off with one): take at least that of its known calls sampled at the largest
    # weight, n(w-1). A bias still shows: weights left out put site_hot ~20 of these off.
    def var(site, calls):
        return max(sq_of[site] - calls, w * (w - 1))

    def var_known(site, calls):
        return max(var(site, calls), SAMPLED_SITES[site][0] * (w - 1))
    hot = site_totals(rows, "site_hot")
    # At most the exact stretch (the first 100,000 calls) and 1 in 100 of the rest.
    expect(hot[2] < 100000 + hot[0] // 100, f"site_hot: {hot[2]} samples for {hot[0]} calls")
    bad = []
    for site, (known, size) in SAMPLED_SITES.items():
        calls, nbytes, samples = site_totals(rows, site)
        se = math.sqrt(var_known(site, calls))
        # A site no weighted sample hit (every sample weight 1, the exact stretch's): the
        # Gaussian tail understates how often that happens; ask instead how likely it is
        # that its calls after the stretch all fell between samples at the largest interval.
        missed = calls == samples and calls < known
        likely_miss = missed and (1 - 1 / w) ** (known - calls) >= 1e-4
        if abs(calls - known) > 4 * se and not likely_miss:
            bad.append(f"{site}: estimate {calls} ({samples} samples), known {known}, "
                       f"off by {abs(calls - known) / se:.1f} SE (SE {se:.0f})")
        if nbytes != calls * size:
            bad.append(f"{site}: {nbytes} bytes for {calls} calls of {size} bytes")
    expect(not bad, "default mode: " + "; ".join(bad))
    tree = tree_text(r.profile, threshold=0, extra=raw)
    expect_eq(exact_total_calls(r.profile), exact["total"], "exact total vs the N=1 run")
    expect_eq(tree_header_total(tree), exact["tree_total"], "tree header total vs the N=1 run")
    # The tree's ± column is that standard error, relative to the estimate.
    shown = {e.name: e for e in tree_lines(tree) if e.top}
    for site in SAMPLED_SITES:
        calls, _, samples = site_totals(rows, site)
        rel = 100.0 * math.sqrt(var(site, calls)) / calls
        want = f"{rel:.1f}%" if rel < 9.95 else f"{rel:.0f}%" if rel < 999.5 else ">999%"
        expect(site in shown, f"{site} is not a top-level entry of the tree")
        expect_eq(shown[site].error, want, f"{site}'s ± in the tree ({calls} calls, "
                                           f"{samples} samples, largest weight {w})")


@test
def test_calibrated_estimates_add_up_to_the_exact_totals():
    """A finished thread's estimates are adjusted to add up to its exact call count (the
    header's), the difference spread in proportion to each estimate's variance: exact counts
    stay, every sum of stacks equals the totals, and the estimates stay within their errors
    of the known counts. On sampled_sites at a fixed interval, and on sqlite3, a program
    nobody here wrote, in the default mode without its exact stretch."""
    exact = exact_sampled_run()
    n = 1000
    r = run_ok([c_program("sampled_sites")], sample=str(n), extra_env={"MALLOC_FREQ_SEED": "7"})
    raw, rows = csv_rows(r.profile, extra=("--uncalibrated",)), csv_rows(r.profile)
    total = exact_total_calls(r.profile)
    expect_eq(total, exact["total"], "exact total vs the N=1 run")
    expect(sum(x.calls for x in raw) != total,
           f"the raw estimates add up to the exact {total} calls: nothing to calibrate")
    expect_eq(sum(x.calls for x in rows), total, "the calibrated estimates' sum")
    # Calibrated, each site's error is what remains of Var = known (N - 1), less than that.
    expect_estimates(rows, lambda known, calls, samples: math.sqrt(known * (n - 1)),
                     f"calibrated, MALLOC_FREQ_SAMPLE={n}")
    # The tree's header and its rows agree too: 100 % is the exact total.
    tree = tree_text(r.profile, threshold=0)
    expect_eq(tree_header_total(tree), total, "tree header total")
    expect_eq(sum(e.calls for e in tree_lines(tree) if e.top), total, "the tree's sites' sum")
    # Exact profiles are left as they are.
    exact_run = run_ok([c_program("sampled_sites")])
    def key(rows):
        return sorted((x.calls, x.bytes, x.samples, x.stack) for x in rows)
    expect_eq(key(csv_rows(exact_run.profile)),
              key(csv_rows(exact_run.profile, extra=("--uncalibrated",))),
              "an exact profile's rows, calibrated or not")

    sqlite = shutil.which("sqlite3")
    if not sqlite:
        print("  skipped the sqlite3 half: no sqlite3 (apt-get install sqlite3)")
        return
    sql = ("create table t(a integer primary key, b text);"
           "with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000)"
           " insert into t(b) select printf('row %d %s', x, hex(randomblob(x % 50))) from c;"
           "select count(*), sum(length(b)) from t where b like '%7%';"
           "create index i on t(b); select count(*) from t where b > 'row 5';")
    r = run_ok([sqlite, ":memory:", sql], sample=None, extra_env={"MALLOC_FREQ_EXACT": "0"})
    rows, raw = csv_rows(r.profile), csv_rows(r.profile, extra=("--uncalibrated",))
    total = exact_total_calls(r.profile)
    expect(sum(x.samples for x in rows) < total // 10,
           f"sqlite3: {sum(x.samples for x in rows)} samples for {total} calls: not sampled")
    expect(sum(x.calls for x in raw) != total, f"sqlite3: raw estimates add up to {total}")
    expect_eq(sum(x.calls for x in rows), total, "sqlite3: the calibrated estimates' sum")
    expect_eq(sum(x.samples for x in rows), sum(x.samples for x in raw), "sqlite3: samples")


@test
def test_exact_stretch_is_counted_in_calls():
    """The exact stretch is the first 100,000 calls whatever a sample costs: 400 frames deep
    (a few microseconds a sample, the old 5 ms time cap ended it near 1,250 calls), then
    the estimate for the rest is unbiased."""
    r = run_ok([c_program("deep_loop")], sample=None, extra_env={"MALLOC_FREQ_DEPTH": "512"})
    recorded = read_struct(process_files(r.profile)[0], F.process_header, "exact_recorded")
    expect_eq(recorded, 100000, "calls the exact stretch recorded (process file)")
    rows = csv_rows(r.profile, extra=("--uncalibrated",))  # as the file holds them
    calls, nbytes, samples = site_totals(rows, "site_bottom")
    expect(100000 <= samples < 200000, f"site_bottom: {samples} samples of 2,000,000 calls "
                                        "(the exact stretch alone gives 100,000)")
    (sq,) = [e[2] for e in file_entries(r.profile) if e[:2] == (calls, samples)]
    se = math.sqrt(max(sq - calls, 1))
    expect(abs(calls - 2000000) <= 4 * se,
           f"site_bottom: estimate {calls}, known 2000000, SE {se:.0f}")
    expect_eq(nbytes, calls * 24, "site_bottom's bytes")
    expect_eq(exact_calls_per_fn(r.profile)[0], 2000000, "exact malloc calls in the thread headers")


@test
def test_many_stacks_exact():
    # 8,192 stacks in one thread: its table grows through five segments (64 entries, then
    # four times as many each), and every stack, looked up again after thousands of newer
    # ones, keeps its exact count.
    r = run_ok([c_program("many_stacks")])
    expect_eq(r.stdout, "many_stacks done\n", "program output")
    counts = {}
    for row in site_rows(csv_rows(r.profile), "site_leaf"):
        # The level 13 choice first; step() is inlined, and mf_print names inlined frames.
        names = [n for n in map(function_name, row.stack[1:]) if n != "step"][:13]
        expect(set(names) <= {"left", "right"}, f"site_leaf's callers: {names}")
        k = sum(1 << (12 - j) for j, name in enumerate(names) if name == "right")
        expect(k not in counts, f"path {k} in two rows")
        counts[k] = row.calls
    expect_eq(len(counts), 8192, "distinct paths to site_leaf")
    wrong = {k: c for k, c in counts.items() if c != k % 3 + 1}
    expect(not wrong, f"{len(wrong)} paths with a wrong count, e.g. {sorted(wrong.items())[:3]}")
    (path,) = thread_files(r.profile)
    segments = read_struct(path, F.thread_header, "nsegments")
    expect_eq(segments, 5, "segments in the thread's table")
    with open(path, "rb") as f:  # unmerged: a stack's narrow and wide entries are two
        keys = [(tuple(d["stack"]), d["flags"], d["size_class"], d["wide"])
                for d in thread_file_stacks(f.read())]
    expect_eq(len(keys) - len(set(keys)), 0, "stacks stored twice in the thread's table")
    expect_eq(thread_flags(path) & 2, 0, "MF_THREAD_TABLE_FULL")
    # Disk blocks: what its entries and nodes use, but for the partial pages at the end of
    # each area and under MF_TRIM_FROM (32 KiB) in the last segment. The room reserved 64 KiB
    # at a time and never used is given back (design.md §7): without that, 294,384 bytes.
    with open(path, "rb") as f:
        data = f.read()
    used = F.THREAD_HEADER_BYTES
    for off, _ in thread_segments(data):
        e, n = (struct.unpack_from("<Q", data, off + getattr(F.segment_header, k))[0]
                for k in ("entries_used", "nodes_used"))
        used += F.SEGMENT_ENTRIES_OFFSET + e * F.entry.size + n * F.frame_node.size
    spare = os.stat(path).st_blocks * 512 - used
    expect(spare <= segments * 2 * 4096 + (32 << 10),
           f"{spare:,} bytes of disk blocks past the {used:,} its {segments} segments use")


@test
def test_code_in_more_regions_than_a_header_holds_is_kept_whole():
    # A node keeps its return address's low half and which of the thread header's high
    # halves is its own (format 10); code_regions calls malloc from code in 70 regions of
    # 4 GiB, as a JIT's code may lie, more than the header's MF_PC_HI_MAX: the rest are
    # wide nodes, their high halves beside them. Region r's copy made r + 1 calls of r + 1
    # bytes, in the default mode too (every call falls in the exact stretch).
    for sample in ("1", None):
        r = run_ok([c_program("code_regions"), "sites.txt"], sample=sample)
        with open(os.path.join(r.outdir, "sites.txt")) as f:
            sites = [int(line, 16) for line in f]
        expect_eq(len(sites), 70, "code regions")
        want = {pc: (k + 1, (k + 1) ** 2) for k, pc in enumerate(sites)}
        got = {}
        for row in csv_rows(r.profile):
            # a frame of no module is its address in brackets
            pc = int(row.stack[0][1:-1], 16) if row.stack[0].startswith("[0x") else None
            if pc in want:
                got[pc] = (got.get(pc, (0, 0))[0] + row.calls, got.get(pc, (0, 0))[1] + row.bytes)
        expect_eq(got, want, f"calls and bytes per code region (sample {sample})")
        (path,) = thread_files(r.profile)
        with open(path, "rb") as f:
            data = f.read()
        expect_eq(read_struct(path, F.thread_header, "npc_hi", "<I"), F.PC_HI_MAX,
                  "high halves in the thread header")
        stored = {pc for d in thread_file_stacks(data) for pc in d["stack"]}
        expect_eq(sorted(pc for pc in stored if pc in want), sorted(sites),
                  "the regions' return addresses as the file stores them")


@test
def test_new_stacks_in_start_up_modules_ask_no_one():
    # A new stack whose new frames all lie in modules the process started with (the program,
    # libc) needs no look at the loader: nothing can have replaced those. Before, each of
    # many_stacks' 8,192 new stacks made a getpid (the vfork guard before the loader's lock):
    # 8,200 in all, 2 % of a compile's exact stretch. Libraries loaded later are still
    # checked (test_library_loaded_at_a_previous_address).
    if not shutil.which("strace"):
        raise Skip("no strace")
    outdir = fresh_dir()
    trace = os.path.join(fresh_dir(), "trace")
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=getpid", "-o", trace,
                        c_program("many_stacks")], env=profiled_env(outdir, "1"), cwd=outdir,
                       capture_output=True, text=True, timeout=120)
    expect_eq((p.returncode, p.stdout), (0, "many_stacks done\n"), "many_stacks under strace")
    with open(trace) as f:
        calls = sum(1 for line in f if "getpid()" in line)
    expect(0 < calls <= 16, f"{calls} getpid calls for 8,192 new stacks")
    rows = site_rows(csv_rows(outdir), "site_leaf")
    expect_eq(len(rows), 8192, "stacks of site_leaf")
    expect_eq(sum(row.calls for row in rows), sum(k % 3 + 1 for k in range(8192)),
              "site_leaf's calls")


@test
def test_calls_without_a_sample_are_not_called_exact():
    # Default mode: calls after the exact stretch that drew no sample before the program
    # ended are in no stack (a short, malloc-bound program after its 5 ms of exact
    # recording). Every stack then has only weight-1 samples, yet the counts are not the
    # whole story: mf_print must mark them as estimates, with an error that covers the calls
    # it cannot place. Made from an exact profile: the process file is set to the default
    # mode, and one thread header gets 30,000 more malloc calls than its stacks hold.
    r = run_ok([c_program("exact_sites")])
    proc = process_files(r.profile)[0]
    write_struct(proc, F.process_header, "sample_interval", 0)
    write_struct(proc, F.process_header, "exact_calls", 20000)
    write_struct(proc, F.process_header, "cost_share_ppm", 3000, "<I")
    path = thread_files(r.profile)[0]
    calls, _ = file_totals(path)
    write_struct(path, F.thread_header, "totals_calls", calls[0] + 30000)
    text = tree_text(r.profile)
    expect("~ marks estimates" in text and "every count below is exact" not in text,
           f"sampling note: {text[:800]!r}")
    site = [e for e in tree_lines(text) if e.top and e.name == "site_malloc"]
    expect_eq([(e.calls, e.error) for e in site], [(1000, ">999%")],
              "site_malloc (calls, error): 30,000 calls unplaced against its 1,000")
