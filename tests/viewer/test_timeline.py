"""The timeline: the launcher records one for every run (mf_print --record on the run
directory), mf_print --timeline reports it.

tests/programs/timeline_phases.c runs three phases of a second each, 50,000 calls of one
site each (phase_a, phase_b, phase_c) at a fixed pace, and writes each phase's start and end
time: the timeline must show the three sites in that order, each with its exact count
(MALLOC_FREQ_SAMPLE=1) or within its error bar (sampled), at the rate the program measured.
A long run is simulated with the recorder's test clock (MF_PRINT_TEST_CLOCK: 2,000 times as
fast, so 3 s are 100 minutes): the file keeps its bound. A damaged or cut timeline gives one
line on stderr and the points before the damage; the profile's own reports are unaffected."""
import csv
import io
import json
import os
import re
import shutil
import stat
import struct
import subprocess

import harness as rt
from harness import F, expect, expect_eq

from harness import PHASE_CALLS, PHASES, phases_run, site_series


def expect_phases(sample):
    run, phases, tl = phases_run(sample)
    expect(tl["ended"], "the launcher's timeline is not marked recorded to its end")
    points = tl["points"]
    # Every call of the run is in the points: the thread headers' exact totals.
    total = rt.exact_total_calls(*rt.process_dirs(run))
    expect_eq(sum(p["calls"] for p in points), total, "the points' calls against the profile's")
    # Each point's busiest phase: phase_a's points, then phase_b's, then phase_c's (the
    # program's fopen before them may be a point of its own).
    order = []
    series = [site_series(tl, name) for name in PHASES]
    for j, p in enumerate(points):
        best = max(series, key=lambda s: s["calls"][j])
        if best["calls"][j] > 0 and (not order or order[-1] != best["name"]):
            order.append(best["name"])
    expect_eq(order, list(PHASES), "the sites in the order of the points")
    for name in PHASES:
        s = site_series(tl, name)
        calls, var = sum(s["calls"]), sum(s["calls_var"])
        se = var ** 0.5
        if sample == 1:
            expect_eq((calls, var), (PHASE_CALLS, 0), f"{name}'s calls and variance (exact)")
        else:
            expect(abs(calls - PHASE_CALLS) <= 4 * se and se > 0,
                   f"{name}: {calls} calls, {PHASE_CALLS} made, error bar {se:.0f}")
        # Its rate over the points inside its phase, against the rate the program kept:
        # the error bar, and the one burst of 50 calls the snapshots may cut at each end.
        start, end = phases[name]
        inside = [j for j, p in enumerate(points) if p["start_s"] >= start and p["end_s"] <= end]
        expect(len(inside) >= 5, f"{name}: only {len(inside)} points inside its phase")
        secs = sum(points[j]["end_s"] - points[j]["start_s"] for j in inside)
        got = sum(s["calls"][j] for j in inside) / secs
        err = (sum(s["calls_var"][j] for j in inside) ** 0.5) / secs
        truth = PHASE_CALLS / (end - start)
        slack = 2 * 50 / secs + 0.03 * truth  # a burst at each end; the pace under load
        expect(abs(got - truth) <= 4 * err + slack,
               f"{name}: {got:.0f} calls/s in its {len(inside)} points, the program made "
               f"{truth:.0f}/s (error bar {err:.0f}, slack {slack:.0f})")
        # Outside its phase (a point's length off its borders), none of its calls.
        outside = [j for j, p in enumerate(points) if p["end_s"] < start or p["start_s"] > end]
        expect_eq(sum(s["calls"][j] for j in outside), 0, f"{name}'s calls outside its phase")
    return run


@rt.test
def test_timeline_phases_exact():
    run = expect_phases(1)
    st = os.lstat(os.path.join(run, F.TL_FILE.decode()))
    expect_eq(stat.S_IMODE(st.st_mode), 0o600, "the timeline file's mode")
    # The text: a sparkline per site, the sites named, blocks in UTF-8 and ASCII otherwise.
    for lang, mark in (("C.UTF-8", "█"), ("C", "@")):
        env = dict(os.environ, LC_ALL=lang)
        r = subprocess.run([rt.MF_PRINT, "--timeline", run], capture_output=True, text=True,
                           env=env, timeout=rt.TIMEOUT)
        expect_eq((r.returncode, r.stderr), (0, ""), f"mf_print --timeline ({lang})")
        lines = {name: [l for l in r.stdout.splitlines() if l.endswith("] " + name)]
                 for name in PHASES}
        for name, found in lines.items():
            expect(len(found) == 1 and mark in found[0] and "50,000" in found[0],
                   f"{lang}: no sparkline line of {name} with its 50,000 calls: {r.stdout!r}")
            if lang == "C":
                expect(all(ord(c) < 128 for c in found[0]), f"not ASCII in C: {found[0]!r}")
        # The sparklines' blocks move right from phase to phase.
        first = [min(i for i, c in enumerate(lines[n][0]) if c == mark) for n in PHASES]
        expect(first == sorted(first) and len(set(first)) == 3,
               f"{lang}: the phases' sparklines start at columns {first}")
    # CSV: the same series.
    rows = list(csv.DictReader(io.StringIO(rt.mf_print(["--timeline", "-f", "csv", run]).stdout)))
    for name in PHASES:
        expect_eq(sum(int(r["calls"]) for r in rows if r["site"] == name), PHASE_CALLS,
                  f"{name}'s calls in the CSV")


@rt.test
def test_timeline_phases_sampled():
    expect_phases(16)


def read_timeline(path):
    """The file's header, its points (each with "at", its offset, and "recs", its records as
    (id, calls, bytes, var)), and its bytes. Version 2 packs a point's records unless the
    point says MF_TL_POINT_RAW (mf_format.h)."""
    with open(path, "rb") as f:
        data = f.read()
    h = struct.unpack_from(F.tl_header.format, data, 0)
    hdr = dict(zip(F.tl_header.fields, h))
    points, at = [], F.tl_header.size
    while at < len(data):
        p = dict(zip(F.tl_point.fields, struct.unpack_from(F.tl_point.format, data, at)))
        p["at"] = at
        at += F.tl_point.size
        p["recs"] = []
        for _ in range(p["nstacks"]):
            if hdr["version"] == 1 or p["flags"] & F.TL_POINT_RAW:
                p["recs"].append(struct.unpack_from(F.tl_stack.format, data, at))
                at += F.tl_stack.size
            else:
                sid = struct.unpack_from("<Q", data, at)[0]
                calls, at = rt.pb_read_varint(data, at + 8)
                nbytes, at = rt.pb_read_varint(data, at)
                var, at = rt.pb_read_varint(data, at)
                p["recs"].append((sid, calls, nbytes, var))
        points.append(p)
    return hdr, points, data


@rt.test
def test_timeline_long_run_bounded():
    # 3 s of timeline_phases, recorded by mf_print --record alone (no launcher) with a clock
    # 2,000 times as fast: 100 minutes, 60,000 snapshots at the first interval.
    prog = rt.c_program("timeline_phases")
    out = rt.fresh_dir()
    env = rt.profiled_env(out, "1")
    p = subprocess.Popen([prog, os.path.join(out, "borders.txt")], cwd=out, env=env)
    rec = subprocess.Popen([rt.MF_PRINT, "--record", out], env=dict(os.environ,
                           MF_PRINT_TEST_CLOCK="2000"), stderr=subprocess.PIPE, text=True)
    try:
        expect_eq(p.wait(timeout=rt.TIMEOUT), 0, "timeline_phases' exit status")
        # The recorder ends by itself once the run's processes have ended.
        err = rec.communicate(timeout=rt.TIMEOUT)[1]
    finally:
        for q in (p, rec):
            if q.poll() is None:
                q.kill()
                q.wait()
    expect_eq((rec.returncode, err), (0, ""), "mf_print --record's exit status and stderr")
    path = os.path.join(out, F.TL_FILE.decode())
    hdr, points, data = read_timeline(path)
    span = (points[-1]["end_ns"] - points[0]["start_ns"]) / 1e9
    expect(span >= 3600, f"the simulated run lasted {span:.0f} s, not an hour")
    expect(0 < len(points) <= F.TL_POINTS_MAX, f"{len(points)} points")
    expect(len(data) <= F.TL_FILE_MAX, f"{len(data)} bytes")
    # Merged at least 4 times (each doubles the interval) and nothing lost in merging.
    expect(hdr["interval_ns"] >= 16 * F.TL_INTERVAL_NS, f"interval {hdr['interval_ns']} ns")
    total = rt.exact_total_calls(*rt.process_dirs(out))
    expect_eq(sum(p["calls"] for p in points), total, "the points' calls against the profile's")
    expect(points[-1]["flags"] & F.TL_POINT_LAST, "the last point is not marked last")
    tl = json.loads(rt.mf_print(["--timeline", "-f", "json", out]).stdout)
    for name in PHASES:
        expect_eq(sum(site_series(tl, name)["calls"]), PHASE_CALLS, f"{name}'s calls")


@rt.test
def test_timeline_damaged():
    run, _, tl = phases_run(1)
    hdr, points, data = read_timeline(os.path.join(run, F.TL_FILE.decode()))
    expect(len(points) > 10, f"{len(points)} points")
    # A copy of the run (the shared one stays whole), its timeline damaged in turn.
    copy = os.path.join(rt.fresh_dir(), "run")
    shutil.copytree(run, copy, symlinks=True)
    path = os.path.join(copy, F.TL_FILE.decode())
    tree = rt.mf_print([run]).stdout

    def with_file(content):
        os.unlink(path)
        with open(path, "wb") as f:
            f.write(content)

    # A byte of point 6's counts flipped: points 1-5 shown, one line.
    at = points[5]["at"] + F.tl_point.calls
    with_file(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    r = rt.mf_print(["--timeline", "-f", "json", copy])
    expect(r.stderr.count("\n") == 1 and "point 6 is damaged" in r.stderr, repr(r.stderr))
    expect_eq(len(json.loads(r.stdout)["points"]), 5, "points shown before the damage")
    # Cut in the middle of the last point: all but that one, one line.
    with_file(data[:points[-1]["at"] + 20])
    r = rt.mf_print(["--timeline", "-f", "json", copy])
    expect(r.stderr.count("\n") == 1 and "cut short" in r.stderr, repr(r.stderr))
    expect_eq(len(json.loads(r.stdout)["points"]), len(points) - 1, "points before the cut")
    # Not a timeline at all: one line, no report; the tree and the page as without it.
    with_file(b"garbage" * 10)
    rt.expect_one_line_error(["--timeline", copy], "a timeline of garbage")
    expect_eq(rt.mf_print([copy]).stdout, tree.replace(run, copy), "the tree beside a bad timeline")
    html = os.path.join(rt.fresh_dir(), "p.html")
    r = rt.mf_print(["-f", "html", "-o", html, copy])
    expect(r.stderr.count("\n") == 1 and "not a timeline" in r.stderr, repr(r.stderr))
    expect(os.path.getsize(html) > 0, "no page written beside a bad timeline")
    # A symbolic link in its place is neither read nor replaced.
    os.unlink(path)
    os.symlink(os.path.join(run, F.TL_FILE.decode()), path)
    rt.expect_one_line_error(["--timeline", copy], "a timeline that is a symbolic link")
    r = rt.mf_print(["--record", copy], check=False)
    expect(r.returncode == 1 and r.stderr.count("\n") == 1, f"--record over a link: {r!r}")
    expect(os.path.islink(path), "--record replaced the symbolic link")


def fnv64(h, data):
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & M64
    return h


@rt.test
def test_timeline_of_version_1_still_read():
    """A timeline of version 1 names stacks by FNV-1a of the stamp, (flags << 32 | depth) and
    the frames innermost first (mf_format.h): one saved by an earlier mf_print shows the same
    series as today's file of the same run. A version from the future is one line."""
    run, _, _ = phases_run(1)
    hdr, points, data = read_timeline(os.path.join(run, F.TL_FILE.decode()))
    old_id = {0: 0}
    for d in rt.process_dirs(run):
        for path in rt.thread_files(d):
            with open(path, "rb") as f:
                tdata = f.read()
            stamp = struct.unpack_from("<Q", tdata, F.thread_header.stamp)[0]
            for e in rt.thread_file_stacks(tdata):
                flags = e["flags"] & ~F.ENTRY_SIZED
                head = struct.pack("<QQ", stamp, flags << 32 | e["depth"])
                v1 = fnv64(fnv64(0xcbf29ce484222325, head),
                           struct.pack(f"<{len(e['stack'])}Q", *e["stack"])) or 1
                old_id[tl_id(stamp, flags, e["depth"], e["stack"])] = v1
    out = bytearray(data[:F.tl_header.size])
    struct.pack_into("<I", out, F.tl_header.version, 1)
    for p in points:
        recs = bytearray()
        for sid, *rest in p["recs"]:
            recs += struct.pack(F.tl_stack.format, old_id[sid], *rest)
        point = bytearray(data[p["at"]:p["at"] + F.tl_point.size])
        struct.pack_into("<I", point, F.tl_point.flags, p["flags"] & ~F.TL_POINT_RAW)
        struct.pack_into("<Q", point, F.tl_point.checksum, 0)
        struct.pack_into("<Q", point, F.tl_point.checksum,
                         fnv64(fnv64(0xcbf29ce484222325, point), recs))
        out += point + recs
    # Version 2 packs the records: 12-15 bytes each here (an id and three small numbers),
    # where version 1 took 32.
    nrecs = sum(p["nstacks"] for p in points)
    packed = len(data) - F.tl_header.size - len(points) * F.tl_point.size
    expect(nrecs and packed * 2 <= nrecs * F.tl_stack.size, f"{nrecs} records in {packed} bytes")
    copy = os.path.join(rt.fresh_dir(), "run")
    shutil.copytree(run, copy, symlinks=True)
    path = os.path.join(copy, F.TL_FILE.decode())
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(out)
    new = rt.mf_print(["--timeline", "-f", "csv", run])
    old = rt.mf_print(["--timeline", "-f", "csv", copy])
    expect(old.stderr == "" and old.stdout == new.stdout,
           f"version 1's series {old.stderr}{old.stdout[:400]!r} against version 2's "
           f"{new.stdout[:400]!r}")
    expect(all(name in old.stdout for name in PHASES), f"the phases in {old.stdout[:300]!r}")
    struct.pack_into("<I", out, F.tl_header.version, F.TL_VERSION + 1)
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(out)
    rt.expect_one_line_error(["--timeline", copy], "a timeline of another version")


@rt.test
def test_timeline_off():
    for args, env in ((["--no-timeline"], {}), ([], {"MALLOC_FREQ_TIMELINE": "0"}),
                      ([], {})):
        r = rt.launch_ok(["-q"] + args + ["--", "sh", "-c", "exit 0"], extra_env=env)
        there = os.path.exists(os.path.join(r.run_dir, F.TL_FILE.decode()))
        expect_eq(there, not args and not env, f"a timeline with {args} {env}")


@rt.test
def test_watch_record_gives_a_run_without_the_launcher_a_timeline():
    """mf_print --watch --record DIR: the watch loop records the timeline too (a tick when one
    is due, a last one when the view ends), for a program run under LD_PRELOAD alone: the
    timeline is marked ended, holds every call of the run, and shows the phases in turn."""
    prog = rt.c_program("timeline_phases")
    outdir = rt.fresh_dir()
    watcher = subprocess.Popen([rt.MF_PRINT, "--watch", "--record", "--interval", "0.2", outdir],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r = subprocess.run([prog, os.path.join(outdir, "borders.txt")], cwd=outdir,
                       env=rt.profiled_env(outdir, sample="1"), capture_output=True,
                       timeout=rt.TIMEOUT)
    expect_eq(r.returncode, 0, f"timeline_phases' status ({r.stderr!r})")
    out, err = watcher.communicate(timeout=rt.TIMEOUT)
    expect_eq((watcher.returncode, err), (0, b""), "mf_print --watch --record's status and stderr")
    expect(b"phase_c" in out, f"the watch view's text: {out[-400:]!r}")
    path = os.path.join(outdir, "timeline.mftl")
    expect_eq(os.stat(path).st_mode & 0o777, 0o600, "the timeline file's mode")
    tl = json.loads(rt.mf_print(["--timeline", "--format", "json", outdir]).stdout)
    expect(tl["ended"], "the timeline is not marked recorded to its end")
    total = rt.exact_total_calls(*rt.process_dirs(outdir))
    expect_eq(sum(p["calls"] for p in tl["points"]), total, "the points' calls against the profile's")
    series = [site_series(tl, name) for name in PHASES]
    order = []
    for j in range(len(tl["points"])):
        best = max(series, key=lambda s: s["calls"][j])
        if best["calls"][j] > 0 and (not order or order[-1] != best["name"]):
            order.append(best["name"])
    expect_eq(order, list(PHASES), "the sites in the order of the points")
    for s in series:
        expect_eq(sum(s["calls"]), PHASE_CALLS, f"{s['name']}'s calls")


M64 = 0xFFFFFFFFFFFFFFFF


def tl_id_step(h, word):
    """mf_tl_id_step (c_core/mf_format.h)."""
    x = ((h ^ word) * 0x9e3779b97f4a7c15) & M64
    x ^= x >> 32
    x = (x * 0xd6e8feb86659fd93) & M64
    return x ^ (x >> 32)


def tl_id(stamp, flags, depth, frames):
    """A stack's timeline id (mf_tl_id): a chain over its frames from the outermost in, then
    the stamp and (flags << 32 | depth); frames innermost first, as the reader gives them."""
    h = 0x6a09e667f3bcc908
    for pc in reversed(frames):
        h = tl_id_step(h, pc)
    return tl_id_step(tl_id_step(h, stamp), (flags << 32 | depth) & M64) or 1


def profile_stack_counts(run):
    """The run's counts as recorded (uncalibrated), by the ids a timeline names stacks by
    (tl_id of the image's stamp, the flags without MF_ENTRY_SIZED and depth, and the
    frames): {id: [calls, bytes]}, id 0 [not profiled]."""
    counts = {0: [0, 0]}
    for d in rt.process_dirs(run):
        for path in rt.thread_files(d):
            with open(path, "rb") as f:
                data = f.read()
            stamp = struct.unpack_from("<Q", data, F.thread_header.stamp)[0]
            un = struct.unpack_from("<QQ", data, F.thread_header.unprofiled_calls)
            counts[0][0] += un[0]
            counts[0][1] += un[1]
            for e in rt.thread_file_stacks(data):
                if not e["calls"]:
                    continue
                sid = tl_id(stamp, e["flags"] & ~F.ENTRY_SIZED, e["depth"], e["stack"])
                c = counts.setdefault(sid, [0, 0])
                c[0] += e["calls"]
                c[1] += e["bytes"]
    return {k: v for k, v in counts.items() if v != [0, 0]}


def timeline_stack_counts(path):
    """The timeline file's growth summed over its points, per stack id, and its points."""
    _, points, data = read_timeline(path)
    counts = {}
    for p in points:
        for sid, calls, nbytes, _ in p["recs"]:
            c = counts.setdefault(sid, [0, 0])
            c[0] += calls
            c[1] += nbytes
    return counts, points


def expect_stacks_add_up(counts, want):
    """Per stack id, the timeline's growth summed over its points (counts) is the final
    profile's count (want), exactly."""
    wrong = {k: (counts.get(k), want.get(k)) for k in set(counts) | set(want)
             if counts.get(k) != want.get(k)}
    expect_eq(len(wrong), 0, f"stacks whose summed growth is not their count: "
                             f"{list(wrong.items())[:5]}")


def run_recorded(rec, argv, out):
    """argv under LD_PRELOAD alone (default mode) in out, beside the recorder rec
    (mf_print --record out, started): both must end well; the recorder ends by itself once
    every process of the run has ended."""
    try:
        r = subprocess.run(argv, cwd=out, env=rt.profiled_env(out, sample=None),
                           capture_output=True, text=True, timeout=rt.TIMEOUT)
        expect_eq((r.returncode, r.stderr), (0, ""), "the run's status and stderr")
        err = rec.communicate(timeout=rt.TIMEOUT)[1]
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    expect_eq((rec.returncode, err), (0, ""), "mf_print --record's status and stderr")


def short_processes_run(shorts, trace=None):
    """`sh -c` under LD_PRELOAD alone (default mode), recorded by mf_print --record with the
    test clock 20 times as fast (a snapshot every 5 ms): the shell runs throughout while
    `shorts` runs of short_runs (1,000 calls each, 30 frames deep) start and end one after
    another (a sleep after each), timeline_phases (3 s) beside them when trace is None. trace: a path for the
    recorder's `strace -f -e trace=openat` output. Returns the output directory."""
    short = rt.c_program("short_runs")
    out = rt.fresh_dir()
    rec_argv = [rt.MF_PRINT, "--record", out]
    if trace:
        rec_argv = ["strace", "-f", "-qq", "-ttt", "-e", "trace=openat", "-o", trace] + rec_argv
    rec = subprocess.Popen(rec_argv, env=dict(os.environ, MF_PRINT_TEST_CLOCK="20"),
                           stderr=subprocess.PIPE, text=True)
    script = ("i=0; while [ $i -lt %d ]; do \"$1\" 1000 >/dev/null; sleep 0.02; i=$((i + 1)); "
              "done" % shorts)
    if trace is None:
        script = "\"$2\" \"$3\" & " + script + "; wait"
    argv = ["sh", "-c", script, "sh", short, rt.c_program("timeline_phases"),
            os.path.join(out, "borders.txt")]
    run_recorded(rec, argv, out)
    progs = [os.path.basename(exe) for d in rt.process_dirs(out)
             for _, _, exe in rt.process_images(d)]
    expect_eq(progs.count("short_runs"), shorts, "short_runs' process images")
    return out


@rt.test
def test_timeline_short_processes_add_up_to_the_profile():
    """Processes that end while another runs are read until they have ended, then left out
    (their share carried): the timeline's growth, summed over its points, is the final
    profile's counts as recorded, exactly, per stack ([not profiled] included) and in
    total (the thread headers' exact calls and bytes)."""
    out = short_processes_run(30)
    counts, points = timeline_stack_counts(os.path.join(out, F.TL_FILE.decode()))
    expect(len(points) >= 10, f"only {len(points)} points")
    expect(points[-1]["flags"] & F.TL_POINT_LAST, "the last point is not marked last")
    expect_eq(sum(p["other_calls"] for p in points), 0, "calls outside the points' records")
    dirs = rt.process_dirs(out)
    expect_eq(sum(p["calls"] for p in points), rt.exact_total_calls(*dirs),
              "the points' calls against the thread headers'")
    expect_eq(sum(p["bytes"] for p in points),
              sum(sum(rt.file_totals(f)[1]) for d in dirs for f in rt.thread_files(d)),
              "the points' bytes against the thread headers'")
    want = profile_stack_counts(out)
    expect(len(want) > 30 * 5, f"only {len(want)} stacks in the profile")
    expect_eq(counts.get(0, [0, 0]), want.get(0, [0, 0]), "[not profiled]'s calls and bytes")
    expect_stacks_add_up(counts, want)


def recorded_held(out, gate_var, fifo, prog, meanwhile):
    """Once prog (running profiled into out) has a thread file, mf_print --record on out with
    the test gate gate_var (MF_PRINT_TEST_LIFE_GATE or MF_PRINT_TEST_LIST_GATE, timeline.c) at
    the FIFO fifo: its first snapshot waits at the gate while meanwhile() runs, then the
    FIFO's end of file lets every snapshot through and the recorder ends with the run.
    Returns its status and standard error; prog is not left running."""
    rec = None
    try:
        rt.wait_for(lambda: any(rt.thread_files(d) for d in rt.process_dirs(out)),
                    "the program's first thread file")
        rec = subprocess.Popen([rt.MF_PRINT, "--record", out], stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, **{gate_var: fifo}))
        with open(fifo, "wb", buffering=0):  # opened: the snapshot is at the gate
            meanwhile()
        err = rec.communicate(timeout=rt.TIMEOUT)[1]
        return rec.returncode, err
    finally:
        for proc in (prog, rec):
            if proc and proc.poll() is None:
                proc.kill()
                proc.communicate()


@rt.test
def test_timeline_recorder_reads_a_process_started_after_its_listing():
    """The run's last process can start after a snapshot listed the run and end, with its
    shell, before that snapshot checks whether the images it knows still run (a test FIFO
    holds the snapshot there). That snapshot finds them all ended, but the recording does not
    end on it: the next, taken at once, reads the last process, and only its point is the
    last. Without it the last process's 1,000 calls were missing from the timeline."""
    out = rt.fresh_dir()
    gate = os.path.join(rt.fresh_dir(), "gate")
    os.mkfifo(gate, 0o600)
    shell = subprocess.Popen(["sh", "-c", 'read x; "$1" 1000 >/dev/null', "sh",
                              rt.c_program("short_runs")], cwd=out, stdin=subprocess.PIPE,
                             env=rt.profiled_env(out, sample=None))
    def meanwhile():
        # The first snapshot has listed the run (the shell alone) and waits. The shell's
        # last command starts and ends meanwhile.
        shell.communicate(b"go\n", timeout=rt.TIMEOUT)
        expect_eq(shell.returncode, 0, "the shell's status")
        expect_eq(len(rt.process_dirs(out)), 2, "process directories")

    status = recorded_held(out, "MF_PRINT_TEST_LIFE_GATE", gate, shell, meanwhile)
    expect_eq(status, (0, ""), "mf_print --record's status and stderr")
    counts, points = timeline_stack_counts(os.path.join(out, F.TL_FILE.decode()))
    expect_eq([bool(p["flags"] & F.TL_POINT_LAST) for p in points][-1:], [True],
              "the last point marked last")
    expect_eq(sum(bool(p["flags"] & F.TL_POINT_LAST) for p in points), 1, "points marked last")
    dirs = rt.process_dirs(out)
    expect_eq(sum(p["calls"] for p in points), rt.exact_total_calls(*dirs),
              "the points' calls against the thread headers'")
    want = profile_stack_counts(out)
    expect_stacks_add_up(counts, want)


@rt.test
def test_timeline_process_gone_before_its_directory_is_looked_at_is_read_whole():
    """A snapshot lists a process's directory (its process file and main thread's file),
    and before it looks at it (a test FIFO holds it there) the process starts a thread that
    makes its own file and 500 calls, and ends. The process is gone when the snapshot looks:
    its reading would be whole but for the file made after the listing. The recorder used
    to leave the directory out on that reading, then took the thread's file, listed next
    time, for the left-out image's: its 500 calls were in the points' totals and in no
    stack of the timeline."""
    out = rt.fresh_dir()
    gate_dir = rt.fresh_dir()
    fifo, go = os.path.join(gate_dir, "fifo"), os.path.join(gate_dir, "go")
    os.mkfifo(fifo, 0o600)
    prog = subprocess.Popen([rt.c_program("late_thread"), go], cwd=out,
                            env=rt.profiled_env(out, sample=None))
    def meanwhile():
        # The first snapshot has listed the directory (2 files) and waits. The thread runs
        # and the process ends.
        open(go, "w").close()
        expect_eq(prog.wait(timeout=rt.TIMEOUT), 0, "late_thread's status")
        (d,) = rt.process_dirs(out)
        expect_eq(len(rt.thread_files(d)), 2, "late_thread's thread files")

    try:
        status = recorded_held(out, "MF_PRINT_TEST_LIST_GATE", fifo, prog, meanwhile)
    finally:
        open(go, "a").close()
    expect_eq(status, (0, ""), "mf_print --record's status and stderr")
    counts, points = timeline_stack_counts(os.path.join(out, F.TL_FILE.decode()))
    dirs = rt.process_dirs(out)
    expect_eq(sum(p["calls"] for p in points), rt.exact_total_calls(*dirs),
              "the points' calls against the thread headers'")
    expect_stacks_add_up(counts, profile_stack_counts(out))


@rt.test
def test_timeline_directory_read_again_counts_its_old_images_once():
    """A directory left out is read again when files appear in it (a later process with the
    same pid): here short_runs ends, its directory is left out, and the shell around it then
    copies another run's image into that directory. The recorder lets go of a left-out
    directory's stacks; read again, the old image's stacks must not count as new: the
    points add up to the profile, stack for stack (each of short_runs' stacks twice when
    they were counted again)."""
    other = rt.fresh_dir()
    rt.run_ok([rt.c_program("exact_sites")], sample=None, outdir=other)
    (image,) = rt.process_dirs(other)
    out = rt.fresh_dir()
    rec = subprocess.Popen([rt.MF_PRINT, "--record", out],
                           env=dict(os.environ, MF_PRINT_TEST_CLOCK="20"),
                           stderr=subprocess.PIPE, text=True)
    script = ('"$1" 1000 >/dev/null & a=$!; wait $a; sleep 1; '
              'cp -p "$2"/process.* "$2"/thread.* "malloc_freq.$a/"; sleep 0.5')
    run_recorded(rec, ["sh", "-c", script, "sh", rt.c_program("short_runs"), image], out)
    counts, points = timeline_stack_counts(os.path.join(out, F.TL_FILE.decode()))
    dirs = rt.process_dirs(out)
    (copied,) = [os.path.basename(f) for f in rt.process_files(image)]
    moved = [d for d in dirs if os.path.exists(os.path.join(d, copied))]
    expect_eq(len(moved), 1, "the directory that got the other run's image")
    expect_eq(sum(p["calls"] for p in points), rt.exact_total_calls(*dirs),
              "the points' calls against the thread headers'")
    expect_stacks_add_up(counts, profile_stack_counts(out))


@rt.test
def test_timeline_recorder_waits_for_an_image_execd_that_allocates_late():
    """An image exec'd into a process that allocates only after a pause (exec_late's second
    image: 1 s, then 700 calls) is part of the run: `mf_print --record` alone used to end
    once every image it saw had ended, the first one exec'd, and the timeline had its 500
    calls only. The points count the process as running throughout the pause (they said 0
    processes there, counting only images in state running), and none once it has ended."""
    prog = rt.c_program("exec_late")
    copy = os.path.join(rt.fresh_dir(), "exec_late_copy")
    shutil.copy(prog, copy)
    out = rt.fresh_dir()
    rec = subprocess.Popen([rt.MF_PRINT, "--record", out],
                           env=dict(os.environ, MF_PRINT_TEST_CLOCK="20"),
                           stderr=subprocess.PIPE, text=True)
    run_recorded(rec, [prog, "first", copy], out)
    counts, points = timeline_stack_counts(os.path.join(out, F.TL_FILE.decode()))
    dirs = rt.process_dirs(out)
    expect_eq(rt.exact_total_calls(*dirs), 1200, "the two images' calls")
    expect_eq(sum(p["calls"] for p in points), 1200, "the points' calls")
    expect_stacks_add_up(counts, profile_stack_counts(out))
    procs = [p["processes"] for p in points]
    running = procs.index(0) if 0 in procs else len(procs)
    expect_eq((set(procs[:running]), set(procs[running:])), ({1}, {0}),
              f"the points' processes running, then ended: {procs}")
    expect(running >= 10, f"only {running} points with the process running: {procs}")


@rt.test
def test_timeline_recorder_leaves_ended_directories_out():
    """A process directory whose images have all ended is read at most once more, then left
    out while the snapshots go on: under strace, each thread file of short_runs and of the
    loop's sleeps is opened at most twice after its process's end (its process file's end
    time), while the shell's, which runs throughout, is opened at every snapshot."""
    rt.need(shutil.which("strace"), "strace (Debian package strace)")
    trace = os.path.join(rt.fresh_dir(), "openat.txt")
    out = short_processes_run(20, trace)
    opened = {}  # thread file -> the times (ns) it was opened
    with open(trace) as f:
        for line in f:
            m = re.match(r'\d+ +(\d+)\.(\d{6}) openat\(.*"(thread\.[^"/]*\.mft)".* = \d+', line)
            if m:
                opened.setdefault(m.group(3), []).append(int(m.group(1)) * 10 ** 9 +
                                                         int(m.group(2)) * 1000)
    shell, ended = [], {}
    for d in rt.process_dirs(out):
        exes = [exe for _, _, exe in rt.process_images(d)]
        names = [os.path.basename(p) for p in rt.thread_files(d)]
        if any(os.path.basename(exe) in ("sh", "dash") for exe in exes):
            shell += names
            continue
        expect(rt.process_flags(d) & F.PROCESS_EXITED, f"{d} has not exited")
        end = rt.read_struct(rt.process_files(d)[0], F.process_header, "end_ns")
        for n in names:
            ended[n] = end
    expect_eq(len(shell), 1, "the shell's thread files")
    expect(len(ended) >= 20, f"{len(ended)} thread files of ended processes")
    # Per ended file: its openings after its process's end, against the snapshots taken
    # meanwhile (the shell's file is opened at each). A loaded machine takes fewer of
    # them; the files that saw at least 3 are the ones that tell.
    snaps = opened.get(shell[0], [])
    counts = {n: (len([t for t in opened.get(n, []) if t > end]),
                  len([t for t in snaps if t > end]), len(opened.get(n, [])))
              for n, end in ended.items()}
    expect(all(after <= 2 and total >= 1 for after, _, total in counts.values()),
           f"the ended processes' thread files opened (after their end, snapshots after "
           f"their end, in all) {sorted(counts.values())} times")
    telling = sum(1 for _, later, _ in counts.values() if later >= 3)
    expect(telling >= 5, f"only {telling} ended processes saw 3 snapshots after their end "
                         f"(the shell's file opened {len(snaps)} times): too few to tell")
