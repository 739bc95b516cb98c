"""What libunwind does inside the program's process (docs/design.md, DESIGN §12):
it keeps no descriptor the program can see, so a daemon that closes its descriptors and
opens files gets its files to itself; and no system call it makes during a sample acts on a
pending pthread_cancel, so malloc stays no cancellation point.

The programs (tests/programs/unwind_*.c) allocate through a function without CFI whose
frame-pointer record lies on many different pages, a PROT_NONE page and an unmapped gap:
libunwind asks whether each page is readable before it reads it there (x86-64 assembly)."""

import filecmp
import glob
import os
import subprocess

import harness as rt

HANG_TIMEOUT = 60  # seconds: the programs take well under one


def _x86_64():
    return os.uname().machine == "x86_64"


def _run(argv, profile, sample, outdir):
    """Runs argv with a short timeout: a thread cancelled inside malloc may leave a lock
    held, and a hang is a failure too."""
    if profile:
        env = rt.profiled_env(outdir, sample)
    else:
        env = {k: v for k, v in os.environ.items()
               if k != "LD_PRELOAD" and not k.startswith("MALLOC_FREQ_")}
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=outdir,
                           timeout=HANG_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise rt.TestFailure(f"{' '.join(argv)} ({'profiled' if profile else 'alone'}, "
                             f"MALLOC_FREQ_SAMPLE={sample}) hung for {HANG_TIMEOUT} s")
    return p


def _what(name, profile, sample):
    if not profile:
        return f"{name} alone"
    return f"{name} under the profiler, " + (f"MALLOC_FREQ_SAMPLE={sample}" if sample
                                             else "the default mode")


def _checked_calls(calls):
    """(readable, unreadable): of unwind_frames_churn's first `calls` calls, those whose frame
    record is on a readable page (the walk goes on to the callers) and those on the PROT_NONE
    page or in the gap (it stops at nocfi_malloc): 2 in 20, the last two of each 20."""
    unreadable = calls // 20 * 2 + max(0, calls % 20 - 18)
    return calls - unreadable, unreadable


def _expect_checked_stacks(rows, calls, caller, what):
    """Every call through nocfi_malloc was a sample, and libunwind's memory check told the
    readable records from the unreadable ones: a "readable" answer for the PROT_NONE page
    would have crashed the program, an "unreadable" one for the others cut their stacks."""
    readable, unreadable = _checked_calls(calls)
    rows = rt.site_rows(rows, "nocfi_malloc")
    through = sum(r.calls for r in rows if r.stack[1:3] == ["unwind_frames_churn", caller])
    cut = sum(r.calls for r in rows if len(r.stack) == 1)
    rt.expect_eq((through, cut, sum(r.calls for r in rows), sum(r.samples for r in rows)),
                 (readable, unreadable + 1, calls + 1, calls + 1),
                 f"{what}: nocfi_malloc's calls through its callers, cut there (the first "
                 "call's record ends the walk), in all, sampled")


def _profile(outdir):
    """The profile directory of the one process that ran in outdir."""
    dirs = glob.glob(os.path.join(outdir, "malloc_freq.*"))
    rt.expect(len(dirs) == 1, f"profile directories in {outdir}: {dirs}")
    return dirs[0]


@rt.test
def test_libunwind_holds_no_descriptor_and_leaves_the_programs_files_alone():
    """unwind_fd_copy lists /proc/self/fd after start-up, closes every descriptor from 3 up
    and copies a file through the numbers that come back, allocating between each read and
    write. libunwind 1.6.2's memory check kept a pipe on 3 and 4: it showed in the listing,
    and then read a byte of the input and wrote a byte of memory into the output at each
    check (or, at end of file, closed both and the copy looped on its own pipe)."""
    if not _x86_64():
        return
    prog = rt.build("unwind_fd_copy", ["unwind_fd_copy.c"])
    src = os.path.join(rt.fresh_dir(), "input.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(300_000))

    def copy(profile, sample=None):
        d = rt.fresh_dir()
        out = os.path.join(d, "output.bin")
        p = _run([prog, src, out], profile, sample, d)
        what = _what("unwind_fd_copy", profile, sample)
        rt.expect(p.returncode == 0, f"{what} exited {p.returncode}: {p.stderr.strip()[-300:]!r}")
        rt.expect_eq(p.stderr, "", f"{what}: stderr")
        rt.expect(filecmp.cmp(src, out, shallow=False),
                  f"{what}: the copy differs from its input "
                  f"({os.path.getsize(out)} bytes for {os.path.getsize(src)})")
        return p, d

    alone, _ = copy(False)
    lines = alone.stdout.splitlines()
    rt.expect(len(lines) == 3 and lines[0] == "after start-up: descriptors 0 1 2" and
              lines[1] == "input on 3, output on 4",
              f"unwind_fd_copy alone printed {alone.stdout!r}")
    calls = int(lines[2].split(", ")[1].split()[0])
    for sample in ("1", None):
        p, d = copy(True, sample)
        rt.expect_eq(p.stdout, alone.stdout, _what("unwind_fd_copy", True, sample) + ": output")
        if sample == "1":  # every call through the checked frames was a sample
            prof = _profile(d)
            rows = rt.csv_rows(prof)
            _expect_checked_stacks(rows, calls, "main", "unwind_fd_copy")
            rt.expect_sites(rows, {"nocfi_malloc": (calls + 1, calls * 40 + 24)})
            rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(prof), "CSV total")


@rt.test
def test_pending_cancel_does_not_act_inside_libunwind():
    """unwind_cancel: a thread with a deferred cancel pending takes a mutex and allocates
    through samples (its first unwind, new stacks, checked frames), unlocks, and is
    cancelled at pthread_testcancel(). libunwind's read() of its pipe acted on the cancel
    inside malloc: the thread died holding the mutex, with none of its calls made.
    "warm": the thread makes one call before the cancel (its stacks paused under the
    profiler); "fresh": its very first call, which also sets the thread up, is made with the
    cancel pending."""
    if not _x86_64():
        return
    prog = rt.c_program("unwind_cancel", libs=("-lpthread", "-ldl"))
    for mode, profile, sample in ((m, p, s) for m in ("warm", "fresh")
                                  for p, s in ((False, None), (True, "1"), (True, None))):
        want = f"{mode}: 337 allocation calls made, cancelled, mutex released\n"
        d = rt.fresh_dir()
        p = _run([prog, mode], profile, sample, d)
        what = _what("unwind_cancel", profile, sample)
        rt.expect(p.returncode == 0, f"{what} exited {p.returncode}: {p.stderr.strip()[-300:]!r}")
        rt.expect_eq(p.stderr, "", f"{what}: stderr")
        rt.expect_eq(p.stdout, want, f"{what}: output")
        if profile and sample == "1":
            rows = rt.csv_rows(_profile(d))
            _expect_checked_stacks(rows, 300, "worker", "unwind_cancel")
            rt.expect_sites(rows, {"nocfi_malloc": (301, 300 * 40 + 24), "descend": (36, 36 * 16)})

