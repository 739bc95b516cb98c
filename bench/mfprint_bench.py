#!/usr/bin/env python3
"""`make bench`'s mf_print workload: how long mf_print takes, and how much memory, on real
profiles of 10^5 and 10^6 distinct stacks.

bench/many_stacks_gen.c is built as a program and four shared libraries (-g,
-fno-omit-frame-pointer) and run under the preload library with MALLOC_FREQ_SAMPLE=1: N
paths of 40 levels through the four libraries, each an allocation from a stack of its own
(about 80 frames once inlined calls are expanded). Each profile is made once (kept in
build/bench/mfprint/ while the generator, the library and N are the same) and checked: its
thread file holds exactly N + a few distinct stacks (the program's start-up allocations),
and mf_print's header says so. Then `mf_print --format F -o FILE` runs for F = tree, csv,
pprof, html and collapsed, BENCH_MFPRINT_RUNS times (default 3) on each, interleaved: the
median wall time and the largest peak RSS (GNU time's %M) are set against the targets of
tree, CSV and pprof, at most 5 s and at most twice the size of the thread files (html and
collapsed are measured, untargeted).
Next to each, what writing as many bytes to the same file takes by itself (dd): through the
page cache, and with O_DIRECT, the disk's own floor that no format with a large output goes
under.

Environment: BENCH_MFPRINT_SIZES (default 100000,1000000), BENCH_MFPRINT_RUNS, BENCH_LIB,
BENCH_MFPRINT_RESULTS (default bench/RESULTS-mfprint.md). Exit status 1 if a run failed or a
profile was not what it should be; a missed target is reported, not an error."""

import datetime
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "bench", "many_stacks_gen.c")
WORK = os.path.join(ROOT, "build", "bench", "mfprint")
LIB = os.path.abspath(os.environ.get("BENCH_LIB") or os.path.join(ROOT, "build", "libmalloc_freq.so"))
MF_PRINT = os.path.join(ROOT, "build", "mf_print")
FORMATS = ("tree", "csv", "pprof", "html", "collapsed")
TARGETED = ("tree", "csv", "pprof")  # the targets are these formats'; html and collapsed are measured
TIME_TARGET = 5.0  # seconds
RSS_TARGET = 2.0  # times the thread files' size
WRITE_PAUSE = 5.0  # seconds between deleting an output and timing dd's write of its size

# The thread files' stacks, decoded by the tests' harness (offsets from c_core/mf_format.h)
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import harness  # noqa: E402


def die(msg):
    sys.exit("mfprint_bench: " + msg)


def sizes():
    text = os.environ.get("BENCH_MFPRINT_SIZES", "100000,1000000")
    try:
        out = [int(x) for x in text.split(",") if x]
    except ValueError:
        die("BENCH_MFPRINT_SIZES=%s is not a list of whole numbers" % text)
    if not out or any(n < 1 or n > 1 << 20 for n in out):
        die("BENCH_MFPRINT_SIZES: each size is 1..1048576")
    return out


def build():
    os.makedirs(WORK, exist_ok=True)
    flags = ["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror"]
    for m in range(4):
        subprocess.run(flags + ["-fPIC", "-shared", "-DMS_MODULE=%d" % m, "-o",
                                os.path.join(WORK, "libms%d.so" % m), SRC], check=True)
    exe = os.path.join(WORK, "many_stacks_gen")
    subprocess.run(flags + ["-DMS_MAIN", "-o", exe, SRC, "-L" + WORK, "-lms0", "-lms1", "-lms2",
                            "-lms3", "-Wl,-rpath," + WORK], check=True)
    return exe


def thread_stacks(d):
    """Distinct stacks (their frames' bytes) and bytes of the thread files of directory d."""
    stacks, nbytes = set(), 0
    for name in os.listdir(d):
        if not name.startswith("thread."):
            continue
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        nbytes += len(data)
        stacks.update(tuple(e["stack"]) for e in harness.thread_file_stacks(data))
    return stacks, nbytes


def profile(exe, n):
    """The profile directory of N paths, made unless an identical one is there."""
    top = os.path.join(WORK, "p%d" % n)
    stamp = os.path.join(top, "made-by")
    key = "%s %d %d %d\n" % (LIB, os.stat(LIB).st_mtime_ns, os.stat(SRC).st_mtime_ns, n)
    if os.path.exists(stamp) and open(stamp).read() == key:
        d = [os.path.join(top, x) for x in os.listdir(top) if x.startswith("malloc_freq.")]
        if len(d) == 1:
            return d[0], False
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_FREQ_")}
    env.update({"MALLOC_FREQ_DIR": top, "MALLOC_FREQ_SAMPLE": "1", "LD_PRELOAD": LIB})
    t0 = time.perf_counter()
    subprocess.run([exe, str(n)], env=env, check=True, stdout=subprocess.DEVNULL)
    print("mfprint_bench: profile of %s paths made in %.1f s" % ("{:,}".format(n),
          time.perf_counter() - t0), flush=True)
    d = [os.path.join(top, x) for x in os.listdir(top) if x.startswith("malloc_freq.")]
    if len(d) != 1:
        die("expected one profile directory in %s" % top)
    with open(stamp, "w") as f:
        f.write(key)
    return d[0], True


TIME = shutil.which("time") or "/usr/bin/time"


def run(argv):
    """Wall seconds and peak RSS (KiB) of one mf_print run. The peak comes from GNU time
    (getrusage of its child): this script's own child would count the pages it shares
    with this process (hundreds of MB after reading a profile) until its exec."""
    use_time = os.access(TIME, os.X_OK)
    rss_file = os.path.join(WORK, "rss")
    cmd = [TIME, "-f", "%M", "-o", rss_file] + argv if use_time else argv
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s: exit status %d: %s" % (" ".join(argv), p.returncode,
                                                      err.decode(errors="replace")[-500:]))
    if use_time:
        with open(rss_file) as f:
            return wall, int(f.read().split()[-1])
    return wall, ru.ru_maxrss


def write_alone(path, size):
    """Wall seconds that writing size bytes to path takes by itself (dd, 1 MiB blocks, no
    sync, as mf_print writes): the file system's floor under a format's time. Like mf_print,
    which reads for seconds before it writes, dd starts a few seconds after the last output
    was deleted: on this virtual machine the kernel hands freed memory back to the host
    within seconds, and 3.9 GB of page cache made of memory the host must supply again took
    9-11 s to write where 2.7 s sufficed right after a delete. Then the same bytes with
    O_DIRECT (no page cache: the disk's own floor), None where the file system refuses it."""
    blocks = max(1, (size + (1 << 20) - 1) >> 20)
    if os.path.exists(path):
        os.unlink(path)
        os.sync()
    time.sleep(WRITE_PAUSE if size >= 1 << 27 else 0)
    walls = []
    for flags in ([], ["oflag=direct"]):
        t0 = time.perf_counter()
        done = subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=1M",
                               "count=%d" % blocks, "status=none"] + flags,
                              stderr=subprocess.DEVNULL).returncode == 0
        walls.append(time.perf_counter() - t0 if done else None)
        if os.path.exists(path):
            os.unlink(path)
            os.sync()
    return tuple(walls)


def verdict(fmt, met):
    return "-" if fmt not in TARGETED else "PASS" if met else "MISS"


def main():
    if not os.path.exists(LIB) or not os.path.exists(MF_PRINT):
        die("build/libmalloc_freq.so or build/mf_print is missing: run `make` first")
    runs = int(os.environ.get("BENCH_MFPRINT_RUNS") or 3)
    exe = build()
    failures, rows = [], []
    for n in sizes():
        d, _ = profile(exe, n)
        stacks, file_bytes = thread_stacks(d)
        # N paths, plus the few stacks of the program's start-up and exit
        if not n <= len(stacks) <= n + 16:
            failures.append("%d paths: the profile holds %d distinct stacks" % (n, len(stacks)))
        out = os.path.join(WORK, "out")
        header = subprocess.run([MF_PRINT, d], capture_output=True, text=True).stdout
        want = "stacks     %s distinct" % "{:,}".format(len(stacks))
        if want not in header:
            failures.append("%d paths: mf_print's header lacks '%s'" % (n, want))
        del stacks
        got = {f: [] for f in FORMATS}
        alone = {f: [] for f in FORMATS}
        for r in range(runs):
            for f in FORMATS:  # interleaved: this machine's speed drifts
                # Not timed: truncating the last run's output (4.3 GB of CSV on this ext4,
                # mounted with discard) took 1.5-2 s of the next run's time.
                if os.path.exists(out):
                    os.unlink(out)
                    os.sync()
                try:
                    got[f].append(run([MF_PRINT, "--format", f, "-o", out, d]))
                except RuntimeError as e:
                    failures.append(str(e))
                if r > 0 and os.path.exists(out):  # two suffice: each costs its pause
                    alone[f].append(write_alone(out, os.path.getsize(out)))
        out_bytes = {}
        for f in FORMATS:
            if os.path.exists(out):
                os.unlink(out)
            subprocess.run([MF_PRINT, "--format", f, "-o", out, d], check=True)
            out_bytes[f] = os.path.getsize(out)
        os.unlink(out)
        for f in FORMATS:
            if not got[f]:
                continue
            walls = sorted(w for w, _ in got[f])
            rss = max(r for _, r in got[f]) * 1024
            cached = [c for c, _ in alone[f]]
            direct = [x for _, x in alone[f] if x is not None]
            rows.append((n, file_bytes, f, statistics.median(walls), walls[0], walls[-1], rss,
                         out_bytes[f], statistics.median(cached) if cached else None,
                         statistics.median(direct) if direct else None))
    lines = ["# mf_print on large profiles (`make bench`, bench/mfprint_bench.py)", "",
             "%s; %d CPUs; median of %d runs each (formats interleaved), peak RSS the largest;"
             " targets (tree, CSV, pprof): at most %.0f s, peak RSS at most %.0fx the thread"
             " files." % (
                 datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), os.cpu_count() or 0,
                 runs, TIME_TARGET, RSS_TARGET), "",
             "| stacks | thread files | format | wall (median) | runs' range | time | peak RSS"
             " | RSS / files | memory | output | writing the output alone | the same, direct |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, fb, f, wall, lo, hi, rss, ob, wa, wd in rows:
        lines.append("| %s | %.0f MB | %s | %.2f s | %.2f-%.2f s | %s | %.0f MB | %.2fx | %s |"
                     " %.1f MB | %s | %s |" % ("{:,}".format(n), fb / 1e6, f, wall, lo, hi,
                                               verdict(f, wall <= TIME_TARGET), rss / 1e6,
                                               rss / fb, verdict(f, rss <= RSS_TARGET * fb),
                                               ob / 1e6, "-" if wa is None else "%.2f s" % wa,
                                               "-" if wd is None else "%.2f s" % wd))
    lines += ["", "Writing the output alone: the same number of bytes written to the same file"
              " by `dd` (1 MiB blocks, no sync), after an mf_print run, its output deleted and"
              " %.0f s of pause (outputs of 128 MiB and more; mf_print reads for seconds before"
              " it writes, and meanwhile this machine hands freed memory back to its host),"
              " median over the runs after the first: what the bytes take through the page"
              " cache. mf_print writes a file's bytes past its first 64 MiB uncached"
              " (RWF_DONTCACHE, Linux 6.14 and later), which can take less. The same, direct:"
              " the same bytes written by `dd oflag=direct` (O_DIRECT, no page cache at all):"
              " what the disk itself takes, a floor no way of writing gets under." % WRITE_PAUSE]
    for n, fb, f, wall, lo, hi, rss, ob, wa, wd in rows:
        if f in TARGETED and wall > TIME_TARGET and wd is not None:
            lines += ["", "%s stacks, %s: %.2f s against %.0f s; its %.1f GB alone take the disk"
                      " %.2f s (direct), which leaves %.2f s of the target for reading,"
                      " symbolizing and making the rows; the run took %.2f s beyond the write." % (
                          "{:,}".format(n), f, wall, TIME_TARGET, ob / 1e9, wd,
                          TIME_TARGET - wd, wall - wd)]
    if failures:
        lines += ["", "## Failures", ""] + ["- " + x.replace("\n", " ")[:600] for x in failures]
    text = "\n".join(lines) + "\n"
    dest = os.environ.get("BENCH_MFPRINT_RESULTS") or os.path.join(ROOT, "bench",
                                                                   "RESULTS-mfprint.md")
    with open(dest, "w") as f:
        f.write(text)
    print(text, end="")
    print("mfprint_bench: written to %s" % os.path.relpath(dest, ROOT))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
