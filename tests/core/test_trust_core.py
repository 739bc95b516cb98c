"""The recorder must not be noticed by the program it profiles (the trust issue, the core's
part): small stacks, fork children of threaded programs, vfork children, files that can no
longer be made after start-up, a full disk, thread churn. Each test runs the real library on
a program of tests/programs/ and compares with the same program run without it."""
import csv
import glob
import io
import os
import re
import shutil
import subprocess

import harness as rt
from harness import expect, expect_eq


def same_as_without(argv, sample="1", extra_env=None, **kw):
    """Runs argv with and without the profiler: same exit status, same stdout."""
    plain = rt.run(argv, profile=False, extra_env=extra_env)
    profiled = rt.run(argv, sample=sample, extra_env=extra_env, **kw)
    expect_eq(profiled.rc, plain.rc, f"{os.path.basename(argv[0])} exit status under the profiler")
    expect_eq(profiled.stdout, plain.stdout, f"{os.path.basename(argv[0])} stdout under the profiler")
    return plain, profiled


def numbers(text):
    return {k: int(v) for k, v in re.findall(r"^(\w+) (\d+)$", text, re.M)}


@rt.test
def test_small_stacks_run():
    # A 16 KiB thread and a handler on an 8 KiB signal stack allocate under the profiler
    # (before: the thread died at its first call, the handler in the slow path).
    prog = rt.c_program("small_stacks")
    for sample in ("1", None):
        _, r = same_as_without([prog], sample=sample)
        expect_eq(r.stdout, "ok\n", "small_stacks output")
    _, r = same_as_without([prog], sample="1")
    rows = rt.csv_rows(r.profile)
    rt.expect_sites(rows, {"site_small_a": (100, 1600), "site_small_b": (200, 3200),
                           "site_small_c": (300, 30000), "site_in_handler": (200, 6400)})
    # What the profiler takes of a 64 KiB thread's stack: its TLS block, and what a sample
    # of a new stack writes below the caller's frame, against glibc's malloc alone.
    plain = numbers(rt.run([prog, "measure"], profile=False).stdout)
    for unwind in ("libunwind", "fp"):
        r = rt.run([prog, "measure"], sample="1", extra_env={"MALLOC_FREQ_UNWIND": unwind})
        got = numbers(r.stdout)
        expect(set(got) == {"tls_left", "slow_path_bytes"}, f"measure output {r.stdout!r}")
        tls = plain["tls_left"] - got["tls_left"]
        slow = got["slow_path_bytes"] - plain["slow_path_bytes"]
        print(f"  {unwind}: TLS takes {tls} bytes of a thread's stack; a sample "
              f"{got['slow_path_bytes']} bytes below the caller (glibc alone "
              f"{plain['slow_path_bytes']})")
        # 368 bytes of state, aligned to 512 for the entry points' direct path: no page.
        expect(tls <= 1536, f"the profiler's TLS takes {tls} bytes of each thread's stack")
        expect(slow <= 256, f"a sample takes {slow} bytes more of the program's stack")


@rt.test
def test_fork_children_of_a_threaded_program_never_hang():
    # Other threads hold the loader's lock now and then (dl_iterate_phdr, dlopen); glibc
    # does not reset it in a fork child, so a child that asks the loader hangs. Before: 8 of
    # 10 children hung in our atfork handler.
    prog = rt.build("fork_threads", ["fork_threads.c"], libs=("-lpthread", "-ldl"))
    for mode in ("iterate", "dlopen"):
        for sample in ("1", None):
            r = rt.run_ok([prog, mode], sample=sample)
            expect_eq(r.stdout, "children 40 hung 0\n", f"{mode} children (sample {sample})")
            children = [os.path.join(r.outdir, d) for d in os.listdir(r.outdir)
                        if d.startswith("malloc_freq.") and d != f"malloc_freq.{r.pid}"]
            expect_eq(len(children), 40, f"child profiles ({mode})")
            for child in children[:8] + children[-2:]:
                rows = rt.csv_rows(child)
                rt.expect_sites(rows, {"site_child": (100, 2400)}, exact=sample == "1")


@rt.test
def test_vfork_child_leaves_the_parent_whole():
    # A vfork child runs in its parent's memory until it execs: its calls are the parent's
    # address space's, and nothing of the parent's state may be reset (before: the parent's
    # profile went on in a directory named after the child, one call lost each time).
    prog = rt.c_program("vfork_child")
    for argv in ([prog], [prog, "/bin/true"]):
        r = rt.run_ok(argv)
        expect_eq(len(rt.process_files(r.profile)), 1, "process files in the parent's directory")
        rows = rt.csv_rows(r.profile)
        rt.expect_sites(rows, {"site_parent_before": (300, 4800), "site_parent_after": (700, 22400),
                               "site_vfork_child": (15, 960)})
        expect_eq(rt.csv_total(rows), rt.exact_total_calls(r.profile), "CSV total vs headers")
    # dash runs commands with vfork and allocates before exec.
    script = "i=0; while [ $i -lt 20 ]; do /bin/true; i=$((i+1)); done; echo done"
    plain, r = same_as_without(["/bin/dash", "-c", script], sample=None)
    expect_eq(len(rt.process_files(r.profile)), 1, "process files in dash's directory")
    rows = rt.csv_rows(r.profile)
    expect_eq(rt.csv_total(rows), rt.exact_total_calls(r.profile), "dash: CSV total vs headers")


@rt.test
def test_files_made_at_start_up_serve_later_threads():
    # Taken away before the first allocation: the right to write the directory (setuid), the
    # directory itself (chroot), descriptors (RLIMIT_NOFILE). The start-up thread's table was
    # made at start-up; the threads that cannot make their own record into it (before: an
    # empty profile, "0 (exact)" for 16,000 calls).
    # A setuid from root gives the directory to the new user first: its threads make
    # their own files, there is nothing to warn of (before: one shared table, one line).
    prog = rt.c_program("after_startup")
    jail = rt.fresh_dir()
    for what in ("setuid", "chroot", "nofile"):
        plain, r = same_as_without([prog, what, jail])
        rows = rt.csv_rows(r.profile)
        rt.expect_sites(rows, {"site_worker": (15000, 600000), "site_main": (1000, 8000)})
        expect_eq(rt.csv_total(rows), rt.exact_total_calls(r.profile), f"{what}: CSV vs headers")
        files = rt.thread_files(r.profile)
        if what == "setuid":
            expect_eq([rt.table_threads(f) for f in files], [1, 1, 1, 1], f"{what}: threads per file")
            expect_eq(r.stderr, "", f"{what}: stderr")
            expect_eq({os.stat(p).st_uid for p in [r.profile] + files}, {65534},
                      f"{what}: the owners of the directory and its files")
            continue
        expect_eq(len(files), 1, f"{what}: thread files")
        expect_eq(rt.table_threads(files[0]), 4, f"{what}: threads in the table")
        expect_eq(len(r.stderr.splitlines()), 1, f"{what}: warning lines {r.stderr!r}")


def live_csv(profile):
    """mf_print --live --format csv: {stack: (alive, freed)}."""
    out = subprocess.run([rt.MF_PRINT, "--live", "--format", "csv", "--dir", profile],
                         capture_output=True, text=True, timeout=rt.TIMEOUT)
    expect(out.returncode == 0, f"mf_print --live: {out.returncode} {out.stderr.strip()!r}")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    return {r["stack"]: (int(r["alive"]), int(r["freed"])) for r in rows}


@rt.test
def test_live_heap_made_before_setuid_chroot_nofile():
    # MALLOC_FREQ_LIVE and a program that gives up, before its first allocation, what
    # making files needs: the guard makes the live heap's file too (before: "cannot create
    # live.....mfl", no live heap at all).
    prog = rt.c_program("after_startup")
    jail = rt.fresh_dir()
    for what in ("setuid", "chroot", "nofile"):
        _, r = same_as_without([prog, what, jail], extra_env={"MALLOC_FREQ_LIVE": "all"})
        lives = glob.glob(os.path.join(r.profile, "live.*.mfl"))
        expect(len(lives) == 1 and "live" not in r.stderr,
               f"{what}: live files {lives}, stderr {r.stderr!r}")
        rows = live_csv(r.profile)
        expect_eq((rows.get("site_worker;worker"), rows.get("site_main;main")),
                  ((0, 15000), (0, 1000)), f"{what}: (alive, freed) of site_worker and site_main")


# tests/programs/guard_errno.c late: site_before before the setuid, site_after after it.
@rt.test
def test_setuid_after_start_up_warns_only_of_what_is_lost():
    # The profile is made at the first allocation; the setuid guard then loads libunwind and
    # adds it to the process file before the call: nothing is lost, nothing said (before:
    # "cannot add modules ... stacks in them will show no function names", every run).
    if os.geteuid() != 0:
        return
    prog = rt.c_program("guard_errno")
    for base_mode in (0o700, 0o755):  # the directory out of the new user's reach, or not
        outdir = rt.fresh_dir()
        os.chmod(outdir, base_mode)
        _, r = same_as_without([prog, "late"], outdir=outdir)
        expect_eq(r.stderr, "", f"stderr (base {base_mode:o})")
        rt.expect_sites(rt.csv_rows(r.profile), {"site_before": (100, 1600),
                                                 "site_after": (200, 9600)})


@rt.test
def test_large_takes_the_whole_range_it_states():
    # MALLOC_FREQ_LARGE=2^64-1 is in "0..18446744073709551615" (before: refused as not in it).
    prog = rt.c_program("exact_sites")
    for value, large, warning in (("18446744073709551615", 2**64 - 1, ""),
                                  ("18446744073709551616", 65536,
                                   "malloc_freq: MALLOC_FREQ_LARGE=18446744073709551616 is not "
                                   "a number in 0..18446744073709551615; using the default "
                                   "(65536)\n")):
        r = rt.run_ok([prog], extra_env={"MALLOC_FREQ_LARGE": value})
        expect_eq(r.stderr, warning, f"MALLOC_FREQ_LARGE={value}: stderr")
        got = rt.read_struct(rt.process_files(r.profile)[0], rt.F.process_header, "large_bytes")
        expect_eq(got, large, f"MALLOC_FREQ_LARGE={value}: large_bytes in the process file")
        rt.expect_sites(rt.csv_rows(r.profile), rt.EXACT_SITES)


@rt.test
def test_seccomp_filter_is_not_a_death():
    # A filter that kills the process for open and openat, installed after the first
    # allocations through the prctl the library sees, or through raw system calls it does
    # not (then PR_GET_SECCOMP tells): no file is opened from then on, one line says so, the
    # program runs to its end with every call counted, at its stacks (before: killed by
    # SIGSYS at its first new thread). The new threads record into the first table; their
    # stacks' bounds come from the thread pointer, not from /proc/self/maps.
    prog = rt.c_program("seccomp_threads")
    for how in ("prctl", "syscall"):
        _, r = same_as_without([prog, how])
        expect_eq(r.stdout, "done\n", f"{how}: stdout")
        lines = r.stderr.splitlines()
        expect(len(lines) == 1 and "seccomp filter is installed" in lines[0],
               f"{how}: expected one line about the filter, got {lines}")
        rows = rt.csv_rows(r.profile)
        rt.expect_sites(rows, {"site_before": (100, 1600), "site_after": (200, 9600),
                               "site_worker": (3000, 120000)})
        expect_eq(len(rt.thread_files(r.profile)), 1, f"{how}: thread files")
        expect_eq(rt.csv_total(rows), rt.exact_total_calls(r.profile), f"{how}: CSV vs headers")


@rt.test
def test_full_disk_leaves_no_debris_and_counts_every_call():
    # 100 threads alive at once on a 256 KiB file system: 15 get a table of their own, the
    # rest record into the first table. Before: thousands of empty files and "655 (exact)"
    # for 100,000 calls.
    disk = rt.fresh_dir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", disk],
                       capture_output=True, text=True)
    expect(m.returncode == 0, f"cannot mount a small tmpfs (root needed): {m.stderr.strip()}")
    try:
        r = rt.run_ok([rt.c_program("after_startup"), "threads", "100"], outdir=disk)
        expect_eq(r.stdout, "done\n", "program output on a full disk")
        files = rt.thread_files(r.profile)
        expect([f for f in files if os.path.getsize(f) == 0] == [], "empty thread files left")
        expect_eq(sum(rt.table_threads(f) for f in files), 101, "threads over the thread files")
        rows = rt.csv_rows(r.profile)
        rt.expect_sites(rows, {"site_worker": (100000, 4000000), "site_main": (1000, 8000)})
        expect_eq(rt.csv_total(rows), rt.exact_total_calls(r.profile), "CSV total vs headers")
        lines = r.stderr.splitlines()
        expect(len(lines) == 1 and "No space left" in lines[0], f"warnings {r.stderr!r}")
    finally:
        subprocess.run(["umount", disk])


@rt.test
def test_library_loaded_at_a_previous_address():
    # liba.so is closed and libb.so mapped at its address: B's calls must carry B's names
    # and A's keep A's (before: all 1,000 were shown at site_in_a).
    liba = rt.build("liba_same_address.so", ["same_address_lib.c"], shared=True,
                    libs=("-DSITE_NAME=site_in_a",))
    libb = rt.build("libb_same_address.so", ["same_address_lib.c"], shared=True,
                    libs=("-DSITE_NAME=site_in_b",))
    host = rt.build("same_address_host", ["same_address_host.c"], libs=("-ldl",))
    r = rt.run_ok([host, liba, libb])
    expect_eq(r.stdout, "same address\n", "where libb.so was mapped (else this proves nothing)")
    rows = rt.csv_rows(r.profile)
    rt.expect_sites(rows, {"site_in_a": (400, 19200), "site_in_b": (600, 28800)})


@rt.test
def test_geometric_draw_unbiased():
    # The sampling draw's logarithms are the core's own (no libm to load at start-up): they
    # must match libm's, and the draw's mean interval must be n (each sample counts n calls).
    prog = rt.build("geometric_draw", ["geometric_draw.c"],
                    libs=("-I" + os.path.join(rt.REPO, "c_core"), "-lm"))
    out = subprocess.run([prog], capture_output=True, text=True, check=True).stdout
    err = float(re.search(r"^log_err (\S+)$", out, re.M).group(1))
    expect(err < 1e-14, f"mf_log/mf_log1p against libm: worst relative error {err}")
    rows = re.findall(r"^n (\d+) mean (\S+) z (\S+)$", out, re.M)
    expect_eq(len(rows), 7, "draw rows")
    for n, mean, z in rows:
        expect(abs(float(z)) < 5, f"n={n}: mean interval {mean}, {z} standard errors from n")


@rt.test
def test_process_that_never_allocates_leaves_nothing():
    # The profile starts at the first allocation call: /bin/true makes none, so it gets no
    # directory, no file and no libunwind (before: a directory, two files and ~140 system
    # calls). A program that allocates still gets its files and its stacks by libunwind.
    outdir = rt.fresh_dir()
    r = subprocess.run(["/bin/true"], env=rt.profiled_env(outdir, None), cwd=outdir,
                       capture_output=True, text=True)
    expect_eq((r.returncode, r.stderr), (0, ""), "/bin/true under the profiler")
    expect_eq(os.listdir(outdir), [], "files left by a process that never allocates")
    if shutil.which("strace"):
        trace = os.path.join(rt.fresh_dir(), "trace")
        subprocess.run(["strace", "-f", "-o", trace, "/bin/true"],
                       env=rt.profiled_env(outdir, None), cwd=outdir, check=True)
        with open(trace) as f:
            text = f.read()
        expect("libunwind" not in text, "/bin/true loaded libunwind")
        expect("mkdir(" not in text and not re.search(r"malloc_freq\.\d", text),
               "/bin/true made a directory")
    # Nor does it look up the next allocator or bind imports it never calls (lazy binding;
    # docs/performance.md, start-up): the loader binds the library's data references and the
    # functions its constructor calls, nothing else (63 symbols with -z now and the lookups
    # in the constructor). The environment is fixed: reading it binds strncmp (for PATH and
    # MALLOC_FREQ_DIR, which start as a variable of ours may) and strlen (for the second).
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": rt.LIB, "MALLOC_FREQ_DIR": outdir,
           "LD_DEBUG": "bindings"}
    r = subprocess.run(["/bin/true"], env=env, cwd=outdir, capture_output=True, text=True)
    bound = sorted(re.findall(r"binding file \S*libmalloc_freq\.so \[0\] to \S+ \[0\]: "
                              r"normal symbol `([^']+)'", r.stderr))
    expect_eq(bound, sorted(["_r_debug", "__libc_single_threaded", "environ", "__cxa_finalize",
                             "getauxval", "strncmp", "strlen", "pthread_key_create",
                             "__register_atfork", "getpid"]), "imports /bin/true bound in the library")
    r = rt.run_ok([rt.c_program("exact_sites")])
    rt.expect_sites(csv_rows := rt.csv_rows(r.profile), rt.EXACT_SITES)
    expect_eq(rt.csv_total(csv_rows), rt.exact_total_calls(r.profile), "CSV total vs headers")
