"""The launcher (build/malloc_freq) and `make install`.

The launcher runs a program with the preload library and every process of the run writing
into one run directory; the program must not notice: same output, same exit status (the
launcher dies of the signal that ended it), same signal dispositions, signals sent to the
launcher reach it once. Known programs give exact counts through it: a shell script that runs ls, a forking program, an
exec'd pair and exact_sites; `make -j2` of tests/make_project (make, gcc, cc1, as, collect2,
ld); CPython with PYTHONMALLOC=malloc set for it, and kept when the user set it.

`make install` into a DESTDIR installs exactly nine files, whose launcher finds the library
beside it; as root (CI) a real install to /usr/local lets `LD_PRELOAD=libmalloc_freq.so`
work by name from any directory, and `make uninstall` takes it all back (a previous install
of these files is put back afterwards). The man pages list exactly the options --help
lists."""

import glob
import os
import pty
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import time

import harness as rt
from harness import (LAUNCHER, MAKE_PROJECT, clean_env, launch, launch_ok, process_dirs,
                     process_images, python_script)

MAN = os.path.join(rt.REPO, "man")


def run_images(run_dir):
    return [img for d in process_dirs(run_dir) for img in process_images(d)]


def run_file(run_dir):
    """run.txt as a list of (key, value)."""
    with open(os.path.join(run_dir, "run.txt")) as f:
        lines = f.read().splitlines()
    pairs = []
    for line in lines:
        key, sep, value = line.partition(": ")
        rt.expect(sep, f"run.txt line without `key: value`: {line!r}")
        pairs.append((key, value))
    return pairs


def values(pairs, key):
    return [v for k, v in pairs if k == key]


def exact_total(run_dir):
    return rt.exact_total_calls(*process_dirs(run_dir))


def one_line_error(r, pattern):
    rt.expect_eq(r.stdout, "", "stdout")
    lines = r.stderr.splitlines()
    rt.expect(len(lines) == 1 and re.search(pattern, lines[0]) and
              lines[0].startswith("malloc_freq: "),
              f"stderr should be one `malloc_freq: ...{pattern}...` line: {r.stderr!r}")


# ---- the program runs as without us ------------------------------------------------------

@rt.test
def test_launcher_exit_status_passthrough():
    prog = rt.c_program("signal_wait")
    for args, rc in [(["sh", "-c", "exit 0"], 0), (["sh", "-c", "exit 3"], 3),
                     ([rt.c_program("output_status")], 3),
                     ([prog, "self"], -signal.SIGTERM)]:
        r = launch_ok(["-q", "--"] + args, rc=rc)
        rt.expect_eq(r.stderr.count("malloc_freq:"), 0, f"launcher lines under -q ({args})")
        pairs = run_file(r.run_dir)
        want = f"signal 15 SIGTERM" if rc < 0 else f"exit {rc}"
        rt.expect_eq(values(pairs, "status"), [want], f"run.txt status of {args}")
    # Not -q: the launcher says what killed it, then dies of it.
    r = launch_ok(["--", prog, "self"], rc=-signal.SIGTERM)
    rt.expect("malloc_freq: " + prog + " was killed by SIGTERM" in r.stderr,
              f"no `killed by SIGTERM` line: {r.stderr[-600:]!r}")


@rt.test
def test_launcher_output_unchanged():
    prog = rt.c_program("output_status")
    plain = rt.run([prog], profile=False)
    rt.expect_eq(plain.rc, 3, "output_status's own exit status")
    quiet = launch_ok(["-q", "--", prog], rc=3)
    rt.expect_eq((quiet.stdout, quiet.stderr), (plain.stdout, plain.stderr),
                 "stdout and stderr under malloc_freq -q")
    loud = launch_ok([prog], rc=3)
    rt.expect_eq(loud.stdout, plain.stdout, "stdout under malloc_freq")
    rt.expect(loud.stderr.startswith(plain.stderr),
              f"the program's stderr does not come first: {loud.stderr[:300]!r}")
    summary = loud.stderr[len(plain.stderr):]
    run_dir = loud.run_dir
    rt.expect(summary.startswith(f"malloc_freq: profile of 1 process in {run_dir}\n"),
              f"summary's first line: {summary[:300]!r}")
    rt.expect(re.search(r"^\s+100\s.*main via __strdup", summary, re.M),
              f"the summary has no 'main via __strdup' site with output_status's 100 calls: "
              f"{summary!r}")
    rt.expect("└─" not in summary and "├─" not in summary,
              f"the summary shows callers, not only the sites: {summary!r}")
    rt.expect(summary.endswith(f"malloc_freq: the sites' callers: {rt.MF_PRINT} {run_dir}\n"),
              f"summary's last line: {summary[-300:]!r}")
    # Standard input is the program's.
    r = launch_ok(["-q", "--", "sh", "-c", "read a b; echo \"[$b] [$a]\"; cat"],
                  stdin=b"one two\nthree\n")
    rt.expect_eq(r.stdout, "[two] [one]\nthree\n", "output of a program reading stdin")


@rt.test
def test_launcher_stderr_closed_keeps_status():
    # The summary is written to a pipe nobody reads any more: the launcher must not die of
    # SIGPIPE, and must still return the program's status. The program ends only once the
    # pipe is closed (it waits for a line; a `sleep 0.3` let a loaded machine close the pipe
    # after the summary, and the test pass without a SIGPIPE).
    cwd = rt.fresh_dir()
    p = subprocess.Popen([LAUNCHER, "--", "sh", "-c", "read line; exit 5"], cwd=cwd,
                         env=clean_env(), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    p.stderr.close()
    p.stdin.write(b"go\n")
    p.stdin.close()
    rt.expect_eq(p.wait(timeout=rt.TIMEOUT), 5, "exit status with stderr closed")


@rt.test
def test_launcher_signal_dispositions_unchanged():
    prog = rt.c_program("signal_wait")

    def ignore_hup():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    for preexec in (None, ignore_hup):
        plain = subprocess.run([prog, "show"], capture_output=True, text=True, env=clean_env(),
                               preexec_fn=preexec, timeout=rt.TIMEOUT)
        cwd = rt.fresh_dir()
        under = subprocess.run([LAUNCHER, "-q", "--", prog, "show"], capture_output=True,
                               text=True, env=clean_env(), cwd=cwd, preexec_fn=preexec,
                               timeout=rt.TIMEOUT)
        rt.expect_eq(under.stdout, plain.stdout, "signal dispositions and mask of the program")
    rt.expect("SIGHUP ignored\n" in under.stdout, f"SIGHUP ignored: {under.stdout!r}")


def _hangup_default():
    # Under nohup the runner ignores SIGHUP, and so would the launcher and its program (an
    # ignored signal stays ignored): the tests that send it would wait for nothing.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start_waiting(args, cwd, options=("-q",)):
    """Starts the launcher on signal_wait and returns it once the program said `ready`."""
    p = subprocess.Popen([LAUNCHER, *options, "--", rt.c_program("signal_wait")] + args, cwd=cwd,
                         env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=_hangup_default)
    ready, _, _ = select.select([p.stdout], [], [], 60)
    line = p.stdout.readline() if ready else b""
    if line != b"ready\n":
        p.kill()
        p.communicate()
        raise rt.TestFailure(f"signal_wait {args} did not say ready: {line!r}")
    return p


@rt.test
def test_launcher_forwards_signals():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        p = start_waiting(["catch"], rt.fresh_dir())
        p.send_signal(sig)
        out, err = p.communicate(timeout=rt.TIMEOUT)
        rt.expect_eq((p.returncode, out.decode()), (64 + sig, f"caught {sig.name}\n"),
                     f"exit status and output after {sig.name} to the launcher")


@rt.test
def test_launcher_dies_of_the_signal_that_ended_the_program():
    # Not caught: the program dies of it; the launcher prints its summary, then dies of the
    # same signal (not exit 128+N), as time, env and timeout do, so that whoever waits for
    # it sees what the program did: a shell stops its script or loop at an interrupted child.
    prog = rt.c_program("signal_wait")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        cwd = rt.fresh_dir()
        p = start_waiting(["default"], cwd, options=())
        p.send_signal(sig)
        _, err = p.communicate(timeout=rt.TIMEOUT)
        err = err.decode(errors="replace")
        rt.expect_eq(p.returncode, -sig, f"the launcher's end after {sig.name} to it "
                                         f"(negative: killed by that signal); stderr {err!r}")
        rt.expect(f"malloc_freq: {prog} was killed by {sig.name}\n" in err and
                  "malloc_freq: the sites' callers: " in err,
                  f"{sig.name}: the summary before the launcher's end: {err!r}")
        (run_dir,) = glob.glob(os.path.join(cwd, "malloc_freq.*"))
        rt.expect_eq(values(run_file(run_dir), "status"), [f"signal {int(sig)} {sig.name}"],
                     f"{sig.name}: run.txt status")
        # signal_wait's 100 calls before it waits, all of them: the process never reaches
        # its exit, but the default mode's exact stretch writes every call at once.
        rt.expect("\n  calls      100 (exact), " in err, f"{sig.name}: the summary's calls: {err!r}")


def type_interrupt(argv, cwd, env, again=False):
    """Runs argv on a terminal in cwd and types ^C once it says "ready"; with again, a second
    "ready" (a loop going on) ends the run, killing what is left. Returns (exit status, what
    the terminal showed, whether ^C was typed)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    sent = False
    deadline = time.monotonic() + 60  # a bound on a test gone wrong, not a measurement
    while time.monotonic() < deadline and not (again and out.count(b"ready") >= 2):
        if not sent and b"ready" in out:
            os.write(fd, b"\x03")
            sent = True
        r, _, _ = select.select([fd], [], [], 1)
        if not r:
            continue
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # EIO: every process of the terminal has ended
            break
        if not chunk:
            break
        out += chunk
    if again and (out.count(b"ready") >= 2 or time.monotonic() >= deadline):
        os.killpg(pid, signal.SIGKILL)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace"), sent


def terminal_interrupt(mode):
    """Runs signal_wait MODE under the launcher on a terminal, types ^C once it is ready;
    returns (exit status, what the terminal showed)."""
    cwd, prog, env = rt.fresh_dir(), rt.c_program("signal_wait"), clean_env()
    status, out, sent = type_interrupt([LAUNCHER, "-q", "--", prog, mode], cwd, env)
    rt.expect(sent, f"signal_wait {mode} never said ready on the terminal: {out!r}")
    return status, out


@rt.test
def test_launcher_terminal_interrupt_arrives_once():
    # ^C on a terminal signals its whole foreground process group, the program with the
    # launcher: the launcher must not send it a second SIGINT.
    rt.expect_eq(terminal_interrupt("count"), (0, "ready\r\n^CSIGINT 1\r\n"),
                 "exit status and terminal after ^C")
    # A program that left the launcher's process group does not get the terminal's: the
    # launcher sends it on.
    rt.expect_eq(terminal_interrupt("count-alone"), (0, "ready\r\n^CSIGINT 1\r\n"),
                 "exit status and terminal after ^C, the program in a group of its own")


@rt.test
def test_launcher_terminal_interrupt_stops_a_shell_loop():
    # `while :; do malloc_freq -- prog; done` in bash on a terminal, ^C typed while prog
    # waits: the terminal signals bash, the launcher and prog (one foreground group). bash
    # goes on with its loop unless its child died of SIGINT; the launcher must, after prog
    # did, so that the loop stops at the first ^C as it does without the launcher. The loop
    # going on shows as a second "ready" (or the "next" after the launcher).
    bash = shutil.which("bash")
    cwd, prog, env = rt.fresh_dir(), rt.c_program("signal_wait"), clean_env()
    loop = 'while :; do "$0" -q -- "$1" default; echo "next $?"; done'
    status, out, sent = type_interrupt(
        [bash, "--norc", "--noprofile", "-c", loop, LAUNCHER, prog], cwd, env, again=True)
    rt.expect(sent, f"signal_wait never said ready on the terminal: {out!r}")
    rt.expect_eq((status, out), (-signal.SIGINT, "ready\r\n^C"),
                 "bash's end (negative: killed by that signal) and the terminal after ^C")
    # The launcher on its own: killed by SIGINT, as the program was.
    rt.expect_eq(terminal_interrupt("default"), (-signal.SIGINT, "ready\r\n^C"),
                 "the launcher's end and the terminal after ^C")


@rt.test
def test_launcher_summary_on_a_full_file_system():
    # A run directory on a 1 MiB tmpfs filled but for 8 KiB, then 20 KiB: room for run.txt
    # and the first process's process file (a page each), then for its thread table (12 KiB:
    # the header's 8 and a first segment of 64 entry slots and 256 node slots, 4) too, never
    # for fork_children's three children. The library says on stderr what it
    # could not make and runs on; the summary must not add up what was written and call it
    # the program's exact count ("calls 0 (exact) ... every call was recorded" it said of a
    # program that made 1,000 calls), but say whose data is missing and why.
    if os.geteuid() != 0:
        print("  not root (mount): skipped")
        return
    prog = rt.c_program("fork_children")
    top = rt.fresh_dir()
    mnt = os.path.join(top, "small")
    os.mkdir(mnt, 0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mnt],
                   check=True, capture_output=True)
    try:
        for keep in (8, 20):
            for name in os.listdir(mnt):
                path = os.path.join(mnt, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
            with open(os.path.join(mnt, "fill"), "wb") as f:
                f.write(b"\0" * ((1024 - keep) << 10))
            run = os.path.join(mnt, "run")
            r = launch(["-o", run, "--", prog, "fork"], cwd=top)
            what = f"{keep} KiB free"
            rt.expect_eq(r.rc, 0, f"{what}: the program's exit status; stderr {r.stderr!r}")
            children = re.findall(r"^child \d (\d+)$", r.stdout, re.M)
            rt.expect_eq(len(children), 3, f"{what}: the program's output {r.stdout!r}")
            (parent,) = values(run_file(run), "pid")
            nodata = ", ".join(f"process {pid}" + (f" ({prog})" if pid == parent else "")
                               for pid in sorted([parent] + children if keep == 8 else children,
                                                 key=int))
            room = (": its file system has no room for another profile file (No space left on "
                    "device)")
            summary = [line for line in r.stderr.splitlines()
                       if line.startswith("malloc_freq: ") and " cannot " not in line]
            if keep == 8:
                rt.expect_eq(summary, [f"malloc_freq: no data in {run} (none from {nodata}){room}; "
                                       "the program's count is not known"],
                             f"{what}: the summary")
                continue
            rt.expect_eq(summary[0], f"malloc_freq: profile of 4 processes in {run}, incomplete "
                         f"(no data from {nodata}){room}; the program's own count is not "
                         "known, the sites below are those of the data written",
                         f"{what}: the summary's first line")
            sites = [line.split() for line in r.stderr.splitlines()
                     if re.match(r"[\d,]+ +[\d.]+% ", line)]
            rt.expect_eq([(s[0], s[-2]) for s in sites], [("1,000", "site_parent")],
                         f"{what}: the sites (the parent's 1,000 calls): {r.stderr!r}")
            rt.expect("(exact)" not in r.stderr and "every call" not in r.stderr,
                      f"{what}: the summary claims exact totals: {r.stderr!r}")
    finally:
        subprocess.run(["umount", mnt], check=False)


@rt.test
def test_launcher_summary_under_a_file_size_limit():
    # RLIMIT_FSIZE of 8 KiB, below a thread table's 12 KiB: every process makes its process
    # file and no table (EFBIG, not SIGXFSZ), the launcher none of its own either.
    prog = rt.c_program("fork_children")
    cwd = rt.fresh_dir()
    limit = 8 << 10
    p = subprocess.Popen([LAUNCHER, "--", prog, "fork"], cwd=cwd, env=clean_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                               (limit, limit)))
    out, err = p.communicate(timeout=rt.TIMEOUT)
    out, err = out.decode(), err.decode(errors="replace")
    rt.expect_eq(p.returncode, 0, f"the program's exit status; stderr {err!r}")
    (run,) = glob.glob(os.path.join(cwd, "malloc_freq.*"))
    pids = sorted([values(run_file(run), "pid")[0]] + re.findall(r"^child \d (\d+)$", out, re.M),
                  key=int)
    rt.expect_eq(len(pids), 4, f"the program's output {out!r}")
    summary = [line for line in err.splitlines()
               if line.startswith("malloc_freq: ") and " cannot " not in line]
    nodata = ", ".join(f"process {pid} ({prog})" for pid in pids)
    rt.expect_eq(summary, [f"malloc_freq: no data in {run} (none from {nodata}): RLIMIT_FSIZE is "
                           "below a profile file's size (File too large); the program's count "
                           "is not known"], "the summary")


@rt.test
def test_launcher_summary_of_a_killed_or_execd_program_in_every_mode():
    # An image that ends without running its exit (kill -9, exec) leaves out of its totals
    # the calls its threads had counted and not yet written, when sampling (docs/guarantees.md,
    # limitations): signal_wait's 100 calls were "calls 1 (exact)" with -s 100. The summary
    # says so instead of giving the totals as the program's; every call is written at once
    # with -s 1 and in the default mode's exact stretch, and it gives them, exact.
    signal_wait = rt.c_program("signal_wait")
    first, second = rt.c_program("exec_first"), rt.c_program("exec_second")
    for mode in (["-s", "100"], [], ["-s", "1"]):
        cwd = rt.fresh_dir()
        p = start_waiting(["default"], cwd, options=mode)
        (run_dir,) = glob.glob(os.path.join(cwd, "malloc_freq.*"))
        pid = int(run_dir.rsplit(".", 1)[1])
        os.kill(pid, signal.SIGKILL)
        _, err = p.communicate(timeout=rt.TIMEOUT)
        err = err.decode(errors="replace")
        r = launch_ok(mode + ["--", first, second], cwd=rt.fresh_dir())
        cases = ((err, run_dir, pid, signal_wait, "100", "killed"),
                 (r.stderr, r.run_dir, values(run_file(r.run_dir), "pid")[0], first, "1,600",
                  "exec'd"))
        for stderr, run, image, exe, calls, how in cases:
            what = f"{mode}, {how}"
            head = [line for line in stderr.splitlines() if line.startswith("malloc_freq: profile")]
            if mode != ["-s", "100"]:
                rt.expect_eq(head, [f"malloc_freq: profile of 1 process in {run}"], what)
                rt.expect(f"\n  calls      {calls} (exact), " in stderr,
                          f"{what}: the summary's calls, {calls} (exact): {stderr!r}")
                continue
            rt.expect_eq(head, [
                f"malloc_freq: profile of 1 process in {run}; 1 process image did not run its "
                "exit (ended by a signal, exec or _exit, or still running) while sampling: up to "
                "4095 calls of each of the 1 thread then running can be missing from its totals "
                f"(process {image} ({exe})); the program's own count is not known, the sites below are "
                "those of the data written"], what)
            rt.expect("(exact)" not in stderr and "every call" not in stderr,
                      f"{what}: the summary claims exact totals: {stderr!r}")
        rt.expect_eq(p.returncode, -signal.SIGKILL, f"{mode}: the launcher's end; {err!r}")


# ---- the summary's sites ---------------------------------------------------------------

def summary_table(stderr):
    """The summary's lines from its column titles to the line before the callers line."""
    lines = stderr.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.endswith("allocation site, then its callers")]
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("malloc_freq: "))
    return lines[start:end]


def site_lines(lines):
    """(calls ~, calls, ±, percent, bytes, bytes ±, text) of each site line: mf_print's tree
    line (rt._TREE_LINE), here never indented."""
    out = []
    for line in lines:
        m = rt._TREE_LINE.match(line)
        if m and not m.group(7).startswith("… "):
            out.append(m.groups())
    return out


def gcc_source(path, functions):
    """A C file of `functions` functions with loops and switches, for cc1 to work on."""
    with open(path, "w") as f:
        f.write("#include <stdio.h>\n#include <string.h>\n")
        for i in range(functions):
            f.write(f"struct s{i} {{ int a; long b[{i % 7 + 1}]; const char *name; }};\n"
                    f"int f{i}(struct s{i} *p, int n) {{\n  int t = 0;\n"
                    f"  for (int k = 0; k < n; k++)\n    switch ((k * {i + 3}) % 4) {{\n"
                    f"    case 0: t += p->a * k; break;\n"
                    f"    case 1: t ^= (int)p->b[k % {i % 7 + 1}]; break;\n"
                    f"    case 2: t -= (int)strlen(p->name); break;\n"
                    f"    default: t += printf(\"%d {i}\\n\", t);\n    }}\n  return t;\n}}\n")


@rt.test
def test_launcher_summary_of_a_gcc_compile_matches_mf_print():
    # A real compile spreads its calls over thousands of sites: the summary parsed the
    # tree at 5 % and showed none of them. Now its sites are mf_print's: the summary's
    # header and notes are those of mf_print's report of the run directory, and its site
    # lines the report's top-level lines, number for number (names in full where the tree
    # shortens a template's arguments to <…>), at least 5, and every site of 5 % or more.
    cwd = rt.fresh_dir()
    gcc_source(os.path.join(cwd, "gen.c"), 40)
    r = launch_ok(["--", "gcc", "-O2", "-c", "gen.c", "-o", "gen.o"], cwd=cwd)
    run_dir = r.run_dir
    table = summary_table(r.stderr)
    sites = site_lines(table)
    rt.expect(len(sites) >= 5, f"the summary's sites: {table!r}")
    low = min(float(s[3]) for s in sites)
    tree = rt.tree_text(run_dir, threshold=max(low - 0.01, 0))
    header, _, rest = tree.partition("\n\n")
    rt.expect(header + "\n\n" + table[0] in r.stderr,
              f"mf_print's header is not the summary's: {header!r} in {r.stderr!r}")
    notes = rest.partition("\n\n")[2]
    rt.expect(notes.startswith("not symbolized in full") and
              "\n" + notes + "malloc_freq: the sites' callers: " in r.stderr,
              f"mf_print's notes are not the summary's: {notes!r} in {r.stderr!r}")
    top = site_lines([line for line in tree.splitlines()
                      if (m := rt._TREE_LINE.match(line)) and rt.TreeLine(m).top])
    rt.expect_eq(len(sites), max(5, sum(float(t[3]) >= 5 for t in top)),
                 f"sites shown (5, or all of 5 % and more): {table!r}")
    for s, t in zip(sites, top):
        rt.expect_eq(s[:6], t[:6], f"the numbers of {s[6]!r} in the summary and in the tree")
        pattern = re.escape(t[6]).replace(re.escape("<…>"), "<.*>")
        rt.expect(re.fullmatch(pattern, s[6]), f"site {s[6]!r} is not the tree's {t[6]!r}")


@rt.test
def test_launcher_summary_shows_top_sites_under_the_threshold():
    # spread_sites' thirty sites are 2.92 % to 3.75 % of its 3,465 calls: mf_print's tree at
    # the summary's 5 % folds them all into one line, and the summary still names the five
    # largest, then adds up the other 25.
    prog = rt.c_program("spread_sites")
    r = launch_ok(["--", prog])
    tree = rt.tree_lines(rt.tree_text(r.run_dir, threshold=5))
    rt.expect_eq([t.text for t in tree], ["… 30 more entries below 5%"], "mf_print's tree at 5 %")
    with open(os.path.join(rt.PROGRAMS, "spread_sites.c")) as f:
        line = next(i for i, text in enumerate(f, 1) if text.startswith("COUNTED_SITE(26)"))
    want = ["calls        %      bytes  allocation site, then its callers"]
    for k in range(30, 25, -1):
        calls = 100 + k
        want.append(f"{calls:5} {100 * calls / 3465:7.2f}% {32 * calls / 1024:6.1f} KiB  "
                    f"site_{k} (spread_sites.c:{line})")
    want.append(f"2,825 {100 * 2825 / 3465:7.2f}% {32 * 2825 / 1024:6.1f} KiB  "
                "… 25 more entries below 5%")
    rt.expect_eq(summary_table(r.stderr), want, "the summary's sites")


@rt.test
def test_launcher_summary_escapes_hostile_names():
    # hostile_names' ten largest sites renamed to terminal escapes (clear screen, OSC 52,
    # a hyperlink, BEL CR LF, U+2028, bytes that are not UTF-8, C1 CSI), formula starts
    # and a '@'-led wrapper with OSC 52: the summary, mf_print's own text, writes each as
    # mf_print writes it for a terminal, on its line with its exact count, and no raw
    # control character or byte that is not UTF-8.
    plain = rt.build("hostile_names", ["hostile_names.c"], libs=("-g0",))
    renamed = plain + ".summary"
    names = {17 - k: name for k, name in rt.HOSTILE_NAMES.items()}  # the nastiest the largest
    argv = [b"objcopy", b"--redefine-sym", b"wrap=" + rt.HOSTILE_WRAPPER]
    for k, name in names.items():
        argv += [b"--redefine-sym", b"hostile_%d=" % k + name]
    p = subprocess.run(argv + [plain.encode(), renamed.encode()], capture_output=True)
    rt.expect(p.returncode == 0, f"objcopy failed: {p.stderr!r}")
    cwd = rt.fresh_dir()
    p = subprocess.run([LAUNCHER, "-s", "1", "--", renamed], cwd=cwd, env=clean_env(),
                       capture_output=True, timeout=rt.TIMEOUT)
    rt.expect_eq(p.returncode, 0, f"the program's exit status; stderr {p.stderr!r}")
    text = rt.check_text("the launcher's summary", p.stderr)
    got = sorted((int(s[1]), s[6]) for s in site_lines(summary_table(text)))
    want = sorted([(2 * k, rt.esc(names[k])) for k in range(8, 17)] + [(30, rt.esc(rt.HOSTILE_WRAPPER))])
    rt.expect_eq(got, want, "the summary's sites, (calls, name as a terminal shows it)")


@rt.test
def test_launcher_lines_show_a_hostile_directory_and_program_escaped():
    """The launcher's own lines name the run directory and the program, which may come from
    someone else's repository (a directory under the working one, a script's name): each is
    shown as mf_print shows names, with no control character or byte that is not UTF-8 sent
    to the terminal (before, a directory holding OSC 52 wrote the clipboard at the end of
    every run), and the command the summary offers for the sites' callers, quoted as $'...',
    reads the same directory back in bash. A missing program and a bad option value alike."""
    cwd = rt.fresh_dir()
    name = b"r\x1b]52;c;QQ==\x07 it's\xff\\x"
    run_dir = os.path.join(cwd.encode(), name)
    p = subprocess.run([LAUNCHER.encode(), b"-s", b"1", b"-o", run_dir, b"--", b"ls", b"/"],
                       cwd=cwd, env=clean_env(), capture_output=True, timeout=rt.TIMEOUT)
    rt.expect_eq(p.returncode, 0, f"the launcher's status; stderr {p.stderr!r}")
    text = rt.check_text("the launcher's lines", p.stderr)
    shown = rt.esc(run_dir)
    rt.expect(f"malloc_freq: profile of 1 process in {shown}\n" in text,
              f"no line naming the run directory as {shown!r}: {text[:400]!r}")
    offer = re.search(r"^malloc_freq: the sites' callers: (.*)$", text, re.M)
    rt.expect(offer, f"no command offered for the sites' callers: {text[-400:]!r}")
    r = subprocess.run(["bash", "-c", offer.group(1)], capture_output=True, timeout=rt.TIMEOUT)
    rt.expect_eq(r.returncode, 0, f"bash -c {offer.group(1)!r}: {r.stderr[-300:]!r}")
    rt.expect(b"malloc_freq report: " + shown.encode() in r.stdout,
              f"the offered command read another directory: {r.stdout[:200]!r}")
    # A program that is not there, by a name of the same kind.
    prog = b"no\x1b[2Jsuch\x07"
    p = subprocess.run([LAUNCHER.encode(), b"--", prog], cwd=cwd, env=clean_env(),
                       capture_output=True, timeout=rt.TIMEOUT)
    text = rt.check_text("the launcher's line for a missing program", p.stderr)
    rt.expect_eq((p.returncode, text), (127, f"malloc_freq: {rt.esc(prog)}: command not found\n"),
                 "a program not found, named escaped")
    # An option's bad value, of the same kind.
    p = subprocess.run([LAUNCHER.encode(), b"--depth", prog, b"--", b"ls"], cwd=cwd,
                       env=clean_env(), capture_output=True, timeout=rt.TIMEOUT)
    text = rt.check_text("the launcher's line for a bad --depth", p.stderr)
    rt.expect_eq((p.returncode, text),
                 (2, f"malloc_freq: --depth wants a number of frames from 1 to 512, not "
                     f"'{rt.esc(prog)}' (see malloc_freq --help)\n"), "a bad --depth, named escaped")


# ---- every process of the run in one directory -----------------------------------------

FORK_EXEC_SCRIPT = """#!/bin/sh
ls / > /dev/null
"$1"
"$2" fork > /dev/null
exec "$3" "$4"
"""


@rt.test
def test_launcher_children_and_exec_in_one_run_dir():
    cwd = rt.fresh_dir()
    script = os.path.join(cwd, "children.sh")
    with open(script, "w") as f:
        f.write(FORK_EXEC_SCRIPT)
    os.chmod(script, 0o755)
    exact, forking = rt.c_program("exact_sites"), rt.c_program("fork_children")
    first, second = rt.c_program("exec_first"), rt.c_program("exec_second")
    r = launch_ok(["-q", "-s", "1", "--", script, exact, forking, first, second], cwd=cwd)
    rt.expect_eq(r.stdout, "exact_sites done\nexec_second done\n", "the script's output")
    run_dir = r.run_dir
    rt.expect(os.path.basename(run_dir).startswith("malloc_freq."), f"run directory {run_dir}")
    rt.expect_eq(stat_mode(run_dir), 0o700, "the run directory's mode")
    dirs = process_dirs(run_dir)
    # sh (then exec_first, then exec_second, in its pid's directory), ls, exact_sites,
    # fork_children and its three children: seven processes, nine images.
    images = run_images(run_dir)
    names = sorted(os.path.basename(exe) for _, _, exe in images)
    rt.expect_eq(names, sorted(["dash", "ls", "exact_sites", "exec_first", "exec_second"] +
                               ["fork_children"] * 4), "the run's process images")
    rt.expect_eq(len(dirs), 7, "process directories in the run directory")
    shell = [pid for pid, _, exe in images if exe.endswith("/dash")]
    rt.expect_eq(os.path.basename(run_dir), f"malloc_freq.{shell[0]}",
                 "the run directory is named after the launched program's pid")
    # Every process is a descendant of the shell.
    parent = {pid: ppid for pid, ppid, _ in images}
    for pid in parent:
        p = pid
        while p in parent and p != shell[0]:
            p = parent[p]
        rt.expect_eq(p, shell[0], f"process {pid}'s ancestry")
    # Exact counts (-s 1 reached every process).
    by_exe = {}
    for d in dirs:
        for _, _, exe in process_images(d):
            by_exe.setdefault(os.path.basename(exe), set()).add(d)
    (exact_dir,) = by_exe["exact_sites"]
    rt.expect_sites(rt.csv_rows(exact_dir), rt.EXACT_SITES)
    (exec_dir,) = by_exe["exec_second"]
    rt.expect_sites(rt.csv_rows(exec_dir), {"site_before_exec": (700, 14000),
                                            "site_after_exec": (900, 27000)})
    forks = sorted(by_exe["fork_children"])
    parent_dir = [d for d in forks if rt.site_totals(rt.csv_rows(d), "site_parent")[0]]
    rt.expect_eq(len(parent_dir), 1, "fork_children's parent directory")
    rt.expect_sites(rt.csv_rows(parent_dir[0]), {"site_parent": (1000, 64000)})
    children = sorted(rt.site_totals(rt.csv_rows(d), "site_child")[:2]
                      for d in forks if d != parent_dir[0])
    rt.expect_eq(children, [(100, 3200), (200, 6400), (300, 9600)],
                 "fork_children's children (calls, bytes) at site_child")
    # run.txt: the command and what was set.
    pairs = run_file(run_dir)
    rt.expect_eq(pairs[0], ("malloc_freq run", "1"), "run.txt's first line")
    rt.expect_eq(values(pairs, "command"), [" ".join([script, exact, forking, first, second])],
                 "run.txt command")
    rt.expect_eq(values(pairs, "pid"), [str(shell[0])], "run.txt pid")
    rt.expect_eq(values(pairs, "cwd"), [os.path.realpath(cwd)], "run.txt cwd")
    rt.expect_eq(values(pairs, "set"), [f"LD_PRELOAD={os.path.realpath(rt.LIB)}",
                                        f"MALLOC_FREQ_DIR={run_dir}", "MALLOC_FREQ_SAMPLE=1"],
                 "run.txt set")
    rt.expect_eq(values(pairs, "status"), ["exit 0"], "run.txt status")
    rt.expect_eq(stat_mode(os.path.join(run_dir, "run.txt")), 0o600, "run.txt's mode")


def stat_mode(path):
    return os.stat(path).st_mode & 0o7777


@rt.test
def test_launcher_make_j2_in_one_run_dir():
    cwd = rt.fresh_dir()
    project = os.path.join(cwd, "project")
    shutil.copytree(MAKE_PROJECT, project)
    r = launch_ok(["-q", "--", "make", "-j2"], cwd=project)
    out = subprocess.run([os.path.join(project, "wordfreq")], capture_output=True, text=True)
    rt.expect_eq(out.stdout, "11 words, 9 distinct, 'the' 3 times\n", "the built program")
    images = run_images(r.run_dir)
    kinds = {}
    for _, _, exe in images:
        base = os.path.basename(exe)
        kind = ("as" if base == "as" or base.endswith("-as") else
                "ld" if re.fullmatch(r"(.*-)?ld(\.\w+)?", base) else
                "gcc" if re.fullmatch(r"(.*-)?gcc(-\d+)?", base) else base)
        kinds[kind] = kinds.get(kind, 0) + 1
    # Three sources compiled (gcc, cc1, as each), one link (gcc, collect2, ld).
    rt.expect_eq(kinds, {"make": 1, "gcc": 4, "cc1": 3, "as": 3, "collect2": 1, "ld": 1},
                 "the run's processes by program")
    rt.expect_eq(len(process_dirs(r.run_dir)), len(images), "one directory per process")
    total = exact_total(r.run_dir)
    rt.expect(total > 10000, f"{total} calls in all: cc1 alone makes thousands")
    # mf_print RUN_DIR --by program: cc1, as and ld each on their own, with their exact calls
    # (the files' totals per executable), and the sum is the run's.
    want = rt.calls_by_program(process_dirs(r.run_dir))
    by = rt.mf_print([r.run_dir, "--by", "program"])
    rt.expect_eq(by.stderr, "", "mf_print --by program's stderr")
    table = rt.by_program_table(by.stdout)
    rt.expect_eq({k: v[0] for k, v in table.items()}, want, "calls per program")
    names = {("as" if k.endswith("-as") else "ld" if re.fullmatch(r"(.*-)?ld(\.\w+)?", k) else k): v
             for k, v in table.items()}
    rt.expect(all(k in names for k in ("cc1", "as", "ld", "make")),
              f"cc1, as, ld and make in the table: {sorted(table)}")
    rt.expect_eq((names["cc1"][1], names["as"][1], names["ld"][1]), (3, 3, 1),
                 "processes of cc1, as and ld")
    rt.expect_eq(sum(v[0] for v in table.values()), total, "the programs' calls add up to the run's")


# ---- options ------------------------------------------------------------------------------

@rt.test
def test_launcher_bad_options_one_line_exit_2():
    cases = [(["-s", "0", "true"], r"-s wants a number of calls from 1 to 1000000000, not '0'"),
             (["-s", "12x", "true"], r"not '12x'"),
             (["-s", "-5", "true"], r"not '-5'"),
             (["--sample=1000000001", "true"], r"not '1000000001'"),
             (["--depth", "0", "true"], r"--depth wants a number of frames from 1 to 512"),
             (["--depth", "513", "true"], r"not '513'"),
             (["--unwind", "dwarf", "true"], r"--unwind is fp or libunwind, not 'dwarf'"),
             (["--bogus", "true"], r"unknown option '--bogus'"),
             (["-x", "true"], r"unknown option '-x'"),
             (["-s"], r"-s needs a value"),
             (["--depth"], r"--depth needs a value"),
             ([], r"no program given"),
             (["--"], r"no program given"),
             (["-q"], r"no program given"),
             (["-o", "", "true"], r"-o needs a directory")]
    for args, pattern in cases:
        cwd = rt.fresh_dir()
        r = launch(args, cwd=cwd)
        rt.expect_eq(r.rc, 2, f"exit status of malloc_freq {args}")
        one_line_error(r, re.escape(pattern) if "'" in pattern else pattern)
        rt.expect_eq(os.listdir(cwd), [], f"files left by malloc_freq {args}")
    # Options stop at the program: its own options are its own.
    r = launch_ok(["-q", "sh", "-c", "echo \"$0 $1\"", "-s", "--bogus"])
    rt.expect_eq(r.stdout, "-s --bogus\n", "the program's own options")
    help_text = launch_ok(["--help"]).stdout
    rt.expect(help_text.startswith("usage: malloc_freq [options] [--] PROGRAM [ARGS...]\n"),
              f"--help: {help_text[:200]!r}")


@rt.test
def test_launcher_program_not_run():
    cwd = rt.fresh_dir()
    r = launch(["--", "/nonexistent/prog"], cwd=cwd)
    rt.expect_eq(r.rc, 127, "exit status for a missing program")
    one_line_error(r, r"cannot run /nonexistent/prog: No such file or directory")
    r = launch(["no-such-command-mf"], cwd=cwd)
    rt.expect_eq(r.rc, 127, "exit status for a command not in PATH")
    one_line_error(r, r"no-such-command-mf: command not found")
    text = os.path.join(cwd, "not_executable")
    with open(text, "w") as f:
        f.write("x\n")
    r = launch([text], cwd=cwd)
    rt.expect_eq(r.rc, 126, "exit status for a file without execute permission")
    one_line_error(r, r"Permission denied")
    rt.expect_eq(os.listdir(cwd), ["not_executable"], "files left when nothing could run")


@rt.test
def test_launcher_output_dir_and_options_reach_the_program():
    cwd = rt.fresh_dir()
    show = ["sh", "-c", 'echo "$LD_PRELOAD|$MALLOC_FREQ_DIR|$MALLOC_FREQ_SAMPLE|'
                        '$MALLOC_FREQ_DEPTH|$MALLOC_FREQ_UNWIND|$MALLOC_FREQ_SEED"']
    other = "/lib/x86_64-linux-gnu/libm.so.6"
    extra = {"LD_PRELOAD": f"{rt.LIB}:{other}", "MALLOC_FREQ_SAMPLE": "7",
             "MALLOC_FREQ_SEED": "42"}
    r = launch_ok(["-q", "-o", "out/run", "--depth", "9", "--unwind", "fp", "--"] + show,
                  cwd=cwd, extra_env=extra)
    run_dir = os.path.join(os.path.realpath(cwd), "out", "run")
    lib = os.path.realpath(rt.LIB)
    # Ours first, the user's after it without a second copy of ours; the user's
    # MALLOC_FREQ_SAMPLE and SEED kept (no -s given).
    rt.expect_eq(r.stdout, f"{lib} {other}|{run_dir}|7|9|fp|42\n", "the program's environment")
    rt.expect_eq(stat_mode(run_dir), 0o700, "-o DIR's mode")
    pairs = run_file(run_dir)
    rt.expect_eq(values(pairs, "set"), [f"LD_PRELOAD={lib} {other}", f"MALLOC_FREQ_DIR={run_dir}",
                                        "MALLOC_FREQ_DEPTH=9", "MALLOC_FREQ_UNWIND=fp"],
                 "run.txt set")
    rt.expect_eq(sorted(values(pairs, "kept")), ["MALLOC_FREQ_SAMPLE=7", "MALLOC_FREQ_SEED=42"],
                 "run.txt kept")
    rt.expect_eq(len(process_dirs(run_dir)), 1, "process directories in -o DIR")
    # A trailing slash names the same directory, made 0700 too; a file is not one.
    launch_ok(["-q", "-o", "out/run2/", "true"], cwd=cwd)
    rt.expect_eq(stat_mode(os.path.join(cwd, "out", "run2")), 0o700, "-o DIR/'s mode")
    r = launch(["-q", "-o", "/etc/passwd/x", "true"], cwd=cwd)
    rt.expect_eq(r.rc, 2, "exit status for -o under a file")
    one_line_error(r, r"-o /etc/passwd/x: Not a directory")
    # The same -o again: it holds a run.
    r = launch(["-q", "-o", "out/run", "true"], cwd=cwd)
    rt.expect_eq(r.rc, 2, "exit status for an -o DIR holding a run")
    one_line_error(r, r"-o out/run holds a previous run")
    # MALLOC_FREQ_DIR is the base of the default run directory, made absolute.
    r = launch_ok(["-q", "-s", "3", "--"] + show, cwd=cwd,
                  extra_env={"MALLOC_FREQ_DIR": "base"})
    (run_dir,) = glob.glob(os.path.join(cwd, "base", "malloc_freq.*"))
    rt.expect_eq(r.stdout, f"{lib}|{run_dir}|3|||\n", "the program's environment")


# ---- Python -------------------------------------------------------------------------------

PY_OBJECTS = """import os
objects = [(i, str(i), [i]) for i in range(300000)]
print(os.environ.get("PYTHONMALLOC"), len(objects))
"""


def python_line(run_dir):
    """The tree header's python line: what the profile holds of a Python program."""
    lines = [l[len("  python     "):] for l in rt.mf_print([run_dir]).stdout.splitlines()
             if l.startswith("  python     ")]
    rt.expect(len(lines) == 1, f"python lines in the header: {lines}")
    return lines[0]


@rt.test
def test_launcher_python_gets_pythonmalloc():
    py = sys.executable
    cwd = rt.fresh_dir()
    script = python_script(cwd, PY_OBJECTS)
    r = launch_ok(["--", py, script], cwd=cwd)
    rt.expect_eq(r.stdout, "malloc 300000\n", "the script's output (its PYTHONMALLOC)")
    rt.expect(r.stderr.startswith(f"malloc_freq: {py} is Python: PYTHONMALLOC=malloc"),
              f"the note on stderr: {r.stderr[:300]!r}")
    with_malloc = exact_total(r.run_dir)
    pairs = run_file(r.run_dir)
    rt.expect("PYTHONMALLOC=malloc" in values(pairs, "set"), f"run.txt set: {pairs}")
    rt.expect_eq(values(pairs, "python"), [py], "run.txt python")
    # 300,000 tuples, ints, strs, lists and list arrays: each one a malloc call.
    rt.expect(with_malloc > 1500000, f"{with_malloc} calls with PYTHONMALLOC=malloc")
    name = os.path.basename(os.path.realpath(py))
    rt.expect_eq(python_line(r.run_dir), f"{name} ran with PYTHONMALLOC=malloc: every object "
                 "allocation is a malloc call, counted here", "mf_print's python line")

    # The user's PYTHONMALLOC is kept: pymalloc serves the small objects from its pools.
    cwd = rt.fresh_dir()
    script = python_script(cwd, PY_OBJECTS)
    r = launch_ok(["--", py, script], cwd=cwd, extra_env={"PYTHONMALLOC": "pymalloc"})
    rt.expect_eq(r.stdout, "pymalloc 300000\n", "the script's output (its PYTHONMALLOC)")
    rt.expect(r.stderr.startswith(f"malloc_freq: {py} is Python: PYTHONMALLOC=pymalloc kept"),
              f"the note on stderr: {r.stderr[:300]!r}")
    with_pymalloc = exact_total(r.run_dir)
    pairs = run_file(r.run_dir)
    rt.expect_eq(values(pairs, "kept"), ["PYTHONMALLOC=pymalloc"], "run.txt kept")
    rt.expect(not any(v.startswith("PYTHONMALLOC") for v in values(pairs, "set")),
              f"run.txt set: {pairs}")
    rt.expect(with_pymalloc < 100000, f"{with_pymalloc} calls with pymalloc")
    rt.expect_eq(python_line(r.run_dir), f"{name} ran with pymalloc: most object allocations "
                 "never reach malloc and are not counted; PYTHONMALLOC=malloc counts them (the "
                 "launcher sets it)", "mf_print's python line")


@rt.test
def test_launcher_debian_python3_says_the_cost_and_starts_at_py_bytesmain():
    """Debian's python3: the launcher's line says what PYTHONMALLOC=malloc costs by itself;
    main tail-calls Py_BytesMain, so main is never on the stack: the tree's stacks start at
    Py_BytesMain (the start-up frames below it cut), and no site
    under it is marked outside main (--live)."""
    py = "/usr/bin/python3"
    rt.need(os.path.exists(py), "Debian's python3 at /usr/bin/python3")
    cwd = rt.fresh_dir()
    script = python_script(cwd, "keep = [bytearray(1000 + i) for i in range(300)]\n")
    r = launch_ok(["--", py, script], cwd=cwd, extra_env={"MALLOC_FREQ_LIVE": "all"})
    rt.expect_eq(r.stderr.splitlines()[0],
                 f"malloc_freq: {py} is Python: PYTHONMALLOC=malloc, so that its object "
                 "allocations reach malloc and are counted; that alone makes Python about 1.4x "
                 "slower (glibc's malloc instead of pymalloc's pools)", "the Python line")
    rows = rt.csv_rows(r.run_dir)
    under = [row for row in rows if "Py_BytesMain" in row.stack]
    rt.expect(sum(row.calls for row in under) * 2 > sum(row.calls for row in rows),
              f"most calls under Py_BytesMain: {len(under)} of {len(rows)} stacks")
    # A stack cut by the recorded depth ends in its marker, the start-up frames unrecorded.
    ends = {tuple(row.stack[row.stack.index("Py_BytesMain"):]) for row in under}
    rt.expect(ends <= {("Py_BytesMain",), ("Py_BytesMain", "[deeper frames not recorded]")},
              f"stacks going on past Py_BytesMain: {ends}")
    live = rt.mf_print(["--live", "--format", "csv", r.run_dir]).stdout.splitlines()
    marked = [l for l in live[1:] if "Py_BytesMain" in l and l.split(",")[8] != "0"]
    rt.expect_eq(marked, [], "sites under Py_BytesMain marked outside main")


@rt.test
def test_launcher_python_found_by_shebang_and_env():
    py = sys.executable
    small = 'import os\nprint(os.environ.get("PYTHONMALLOC"))\n'
    cwd = rt.fresh_dir()
    script = python_script(cwd, small, shebang=py)
    r = launch_ok(["-q", "./script.py"], cwd=cwd)
    rt.expect_eq(r.stdout, "malloc\n", "PYTHONMALLOC of a script whose #! line names Python")
    rt.expect_eq(values(run_file(r.run_dir), "python"), [f"./script.py (its #! line runs {py})"],
                 "run.txt python")
    cwd = rt.fresh_dir()
    python_script(cwd, small)
    r = launch_ok(["-q", "env", "X=1", py, "script.py"], cwd=cwd)
    rt.expect_eq(r.stdout, "malloc\n", "PYTHONMALLOC of Python run by env")
    # Not Python: nothing set.
    r = launch_ok(["-q", "sh", "-c", 'echo "${PYTHONMALLOC-unset}"'])
    rt.expect_eq(r.stdout, "unset\n", "PYTHONMALLOC of a shell")
    rt.expect_eq(values(run_file(r.run_dir), "python"), [], "run.txt python of a shell")


# ---- man pages ------------------------------------------------------------------------------

_OPTION = re.compile(r"(?:(-[A-Za-z]), )?(--[a-z][a-z-]*)(?: (\S+))?")


def help_options(text):
    """(short, long, argument) of each option line of a --help text, and the words listed
    under --format (mf_print's formats)."""
    options, formats, in_format = [], [], False
    for line in text.splitlines():
        m = re.match(r"  \s*" + _OPTION.pattern + r"(?:\s{2,}|$)", line)
        if m and line.lstrip().startswith("-"):
            options.append(m.groups())
            in_format = m.group(2) == "--format"
            words = line[m.end():].split()
            if in_format and words:
                formats.append(words[0])
        elif in_format and re.match(r"\s{20,}\S", line):
            formats.append(line.split()[0])
        else:
            in_format = False
    return options, formats


def roff_text(line):
    """A roff line without font changes and escapes: `\\fB\\-d\\fR, ...` -> `-d, ...`."""
    line = re.sub(r"\\f[BIRP]", "", line)
    return line.replace("\\-", "-").replace("\\&", "").replace("\\(bv", "|")


def man_options(path):
    """The same from a man page's OPTIONS section: each .TP entry whose tag is an option,
    and the .B tags of the .RS list inside --format's entry."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = lines.index(".SH OPTIONS")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(".SH "))
    options, formats, current, depth = [], [], None, 0
    for i in range(start + 1, end):
        line = lines[i]
        if line == ".RS":
            depth += 1
        elif line == ".RE":
            depth -= 1
        elif line.startswith(".TP") and i + 1 < end:
            tag = roff_text(lines[i + 1])
            if depth == 0:
                m = _OPTION.fullmatch(tag)
                if m:
                    options.append(m.groups())
                    current = m.group(2)
            elif current == "--format" and tag.startswith(".B "):
                formats.append(tag[3:].strip())
    return options, formats


@rt.test
def test_man_pages_list_the_help_options():
    for prog, page in [(rt.MF_PRINT, "mf_print.1"), (LAUNCHER, "malloc_freq.1")]:
        text = subprocess.run([prog, "--help"], capture_output=True, text=True).stdout
        helped, man = help_options(text), man_options(os.path.join(MAN, page))
        rt.expect(helped[0], f"no options found in {prog} --help")
        rt.expect_eq(sorted(man[0], key=str), sorted(helped[0], key=str),
                     f"man/{page}'s options vs {os.path.basename(prog)} --help")
        rt.expect_eq(man[1], helped[1], f"man/{page}'s formats vs --help")
        # The page renders without a warning (groff-base: `make test` installs it).
        if shutil.which("groff"):
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z",
                                os.path.join(MAN, page)], capture_output=True, text=True)
            rt.expect_eq((r.returncode, r.stderr), (0, ""), f"groff's warnings on man/{page}")


# ---- make install --------------------------------------------------------------------------

INSTALLED = {"lib/libmalloc_freq.so": 0o644, "bin/mf_print": 0o755, "bin/malloc_freq": 0o755,
             "share/man/man1/malloc_freq.1": 0o644, "share/man/man1/mf_print.1": 0o644,
             "include/malloc_freq.h": 0o644, "lib/pkgconfig/malloc_freq.pc": 0o644,
             "share/bash-completion/completions/malloc_freq": 0o644,
             "share/bash-completion/completions/mf_print": 0o644}
SOURCES = {"lib/libmalloc_freq.so": os.path.join(rt.BUILD, "libmalloc_freq.so"),
           "bin/mf_print": rt.MF_PRINT, "bin/malloc_freq": LAUNCHER,
           "share/man/man1/malloc_freq.1": os.path.join(MAN, "malloc_freq.1"),
           "share/man/man1/mf_print.1": os.path.join(MAN, "mf_print.1"),
           "include/malloc_freq.h": os.path.join(rt.REPO, "c_core", "malloc_freq.h"),
           "share/bash-completion/completions/malloc_freq":
               os.path.join(rt.REPO, "completion", "malloc_freq"),
           "share/bash-completion/completions/mf_print":
               os.path.join(rt.REPO, "completion", "mf_print")}


def make(*args):
    r = subprocess.run(["make", "-C", rt.REPO, "--no-print-directory"] + list(args),
                       capture_output=True, text=True, timeout=rt.TIMEOUT)
    rt.expect(r.returncode == 0, f"make {' '.join(args)} exited {r.returncode}: "
                                 f"{(r.stdout + r.stderr).strip()[-800:]}")
    return r.stdout


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)


def same_file(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def installed_exact_sites(bindir, env, cwd):
    """exact_sites under the launcher in bindir: exact counts, read by the mf_print there."""
    r = launch_ok(["-q", "-s", "1", rt.c_program("exact_sites")], cwd=cwd, env=env,
                  launcher=os.path.join(bindir, "malloc_freq"))
    (profile,) = process_dirs(r.run_dir)
    csv = subprocess.run([os.path.join(bindir, "mf_print"), "--format", "csv", profile],
                         capture_output=True, text=True, timeout=rt.TIMEOUT)
    rt.expect_eq((csv.returncode, csv.stderr), (0, ""), "the installed mf_print's status, stderr")
    rt.expect_sites(rt.parse_csv(csv.stdout), rt.EXACT_SITES)
    return r


@rt.test
def test_make_install_into_destdir():
    for prefix in ("/usr/local", "/opt/mf"):
        destdir = rt.fresh_dir()
        make("install", f"DESTDIR={destdir}", f"PREFIX={prefix}")
        root = destdir + prefix
        rt.expect_eq(files_under(destdir),
                     sorted(os.path.join(prefix.lstrip("/"), f) for f in INSTALLED),
                     f"files installed into DESTDIR with PREFIX={prefix}")
        for f, mode in INSTALLED.items():
            rt.expect_eq(stat_mode(os.path.join(root, f)), mode, f"mode of {f}")
            if f in SOURCES:
                rt.expect(same_file(os.path.join(root, f), SOURCES[f]), f"{f} is not {SOURCES[f]}")
        # The pkg-config file names the PREFIX's directories (generated by make install).
        with open(os.path.join(root, "lib/pkgconfig/malloc_freq.pc")) as f:
            pc = f.read()
        for line in (f"libdir={prefix}/lib", f"includedir={prefix}/include",
                     "Libs: -L${libdir} -lmalloc_freq", "Cflags: -I${includedir}"):
            rt.expect(line in pc.splitlines(), f"malloc_freq.pc has no line {line!r}: {pc!r}")
        # The installed launcher finds the library installed beside it, not the build's.
        r = installed_exact_sites(os.path.join(root, "bin"), clean_env(), rt.fresh_dir())
        rt.expect_eq(values(run_file(r.run_dir), "set")[0],
                     f"LD_PRELOAD={root}/lib/libmalloc_freq.so", "the library the launcher used")
        make("uninstall", f"DESTDIR={destdir}", f"PREFIX={prefix}")
        rt.expect_eq(files_under(destdir), [], f"files left after make uninstall (PREFIX={prefix})")


@rt.test
def test_make_install_real_preload_by_name():
    """As root (CI): a real `make install` to /usr/local; LD_PRELOAD=libmalloc_freq.so by
    name works from an unrelated directory. As another user it checks nothing."""
    if os.geteuid() != 0:
        return
    prefix = "/usr/local"
    paths = [os.path.join(prefix, f) for f in INSTALLED]
    backup = rt.fresh_dir()
    saved = [p for p in paths if os.path.lexists(p)]
    for p in saved:  # a previous install of these files is put back afterwards
        shutil.copy2(p, os.path.join(backup, p.replace("/", "%")), follow_symlinks=False)
    try:
        make("install")
        for p in paths:
            rt.expect(os.path.isfile(p), f"{p} not installed")
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        rt.expect(f"=> {prefix}/lib/libmalloc_freq.so" in cache,
                  "libmalloc_freq.so is not in the loader's cache after make install")
        # Literally LD_PRELOAD=libmalloc_freq.so, from a directory unrelated to the build.
        cwd = rt.fresh_dir()
        env = clean_env({"LD_PRELOAD": "libmalloc_freq.so", "MALLOC_FREQ_SAMPLE": "1"})
        p = subprocess.run([rt.c_program("exact_sites")], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=rt.TIMEOUT)
        rt.expect_eq((p.returncode, p.stdout, p.stderr), (0, "exact_sites done\n", ""),
                     "exact_sites under LD_PRELOAD=libmalloc_freq.so")
        (profile,) = glob.glob(os.path.join(cwd, "malloc_freq.*"))
        csv = subprocess.run([f"{prefix}/bin/mf_print", "--format", "csv", profile],
                             capture_output=True, text=True, timeout=rt.TIMEOUT, cwd="/")
        rt.expect_eq(csv.returncode, 0, "the installed mf_print's exit status")
        rows = rt.parse_csv(csv.stdout)
        rt.expect_sites(rows, rt.EXACT_SITES)
        rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile), "CSV total vs headers")
        # The launcher as installed, found by PATH, uses the installed library.
        r = installed_exact_sites(f"{prefix}/bin", clean_env(), rt.fresh_dir())
        rt.expect_eq(values(run_file(r.run_dir), "set")[0],
                     f"LD_PRELOAD={prefix}/lib/libmalloc_freq.so", "the installed launcher's library")
        if shutil.which("man"):
            m = subprocess.run(["man", "-w", "malloc_freq", "mf_print"], capture_output=True,
                               text=True, env=clean_env({"MANPATH": f"{prefix}/share/man"}))
            rt.expect_eq(m.stdout.split(), [f"{prefix}/share/man/man1/malloc_freq.1",
                                            f"{prefix}/share/man/man1/mf_print.1"], "man -w")
    finally:
        out = make("uninstall")
        for p in saved:
            shutil.copy2(os.path.join(backup, p.replace("/", "%")), p, follow_symlinks=False)
        if saved:
            subprocess.run(["ldconfig"])
    rt.expect("ldconfig" in out, f"make uninstall did not run ldconfig: {out!r}")
    for p in paths:
        rt.expect(p in saved or not os.path.lexists(p), f"{p} left after make uninstall")
    if not saved:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        rt.expect("libmalloc_freq.so" not in cache, "libmalloc_freq.so still in the loader's cache")
