"""mf_print --watch and malloc_freq --watch: the terminal view driven in a tmux pane (each
phase of tests/programs/watch_phases.c tops the view while it runs; c and b re-sort; q and ^C
quit and leave the terminal as it was; hostile names escaped), and the plain text blocks
written when standard output is not a terminal (no escape byte; the last block's totals are
the profile's own)."""
import os
import re
import shutil
import subprocess
import time

import harness as rt
from harness import expect, expect_eq

TIME = re.compile(r"^\d\d:\d\d:\d\d  ([\d,]+) calls ")


def phases_program():
    return rt.c_program("watch_phases")


class Pane:
    """A shell in a tmux pane of its own server (its own socket), for one test."""

    def __init__(self, cwd, width=160, height=40):
        rt.need(shutil.which("tmux"), "tmux is not installed (apt-get install tmux)")
        self.socket = os.path.join(cwd, "tmux.sock")
        self.cwd = cwd
        env = rt.clean_env({"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PS1": "$ "})
        env.pop("TMUX", None)
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-x",
                        str(width), "-y", str(height), "-c", cwd, "sh"], env=env, check=True)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-S", self.socket] + list(args), capture_output=True,
                              timeout=rt.TIMEOUT)

    def send(self, *keys):
        self.tmux("send-keys", *keys)

    def type(self, line):
        self.send("-l", line)
        self.send("Enter")

    def text(self):
        return self.tmux("capture-pane", "-p").stdout.decode("utf-8", errors="replace")

    def wait(self, what, cond):
        """Polls the pane until cond(text) holds; returns the text."""
        end = time.monotonic() + rt.WATCH_DEADLINE
        while True:
            text = self.text()
            if cond(text):
                return text
            expect(time.monotonic() < end, f"the pane never showed {what}:\n{text}")
            time.sleep(0.05)

    def views(self, until):
        """The pane's text, captured again and again until it holds until (a command's
        ending marker); each capture may show a view drawn in part."""
        while True:
            text = self.text()
            yield text
            if until in text:
                return
            time.sleep(0.05)

    def close(self):
        self.tmux("kill-server")


def top_site(text):
    """The first site under the view's column heads, or None."""
    row = rt.watch_top_row(text)
    return row[-1] if row else None


def sorted_by(text):
    m = re.search(r"sorted by (\S+)", text)
    return m and m.group(1)


def finished_mixed_profile():
    return rt.run_ok([phases_program(), "mixed", "0.3"], sample=None).profile


@rt.test
def test_watch_under_the_launcher_shows_each_phase_on_top_while_it_runs():
    cwd = rt.fresh_dir()
    gates = os.path.join(cwd, "gates")
    os.mkdir(gates, 0o700)
    pane = Pane(cwd)
    try:
        run_dir = os.path.join(cwd, "run")
        # (the markers are written so that the command line does not hold them)
        pane.type(f"stty -g > before; echo MA\"\"RK; {rt.LAUNCHER} --watch --interval 0.2 "
                  f"-o run -- {phases_program()} gated {gates}; echo \"RC\"=$?; stty -g > after")
        tops = rt.drive_watch_phases(pane.views(until="RC="), gates)
        expect_eq(tops, list(rt.WATCH_PHASES), "the sites on top, in turn")
        text = pane.wait("the summary", lambda t: "RC=0" in t)
        expect("MARK" in text, f"the screen before the view is not back:\n{text}")
        expect("calls/s" not in text, f"the view is still on the screen:\n{text}")
        expect(f"watch_phases's output (29 bytes) is in {run_dir}/output" in text,
               f"no word of where the output went:\n{text}")
        expect("phase_c (watch_phases.c:" in text, f"no summary:\n{text}")
        pane.wait("the shell's stty", lambda t: os.path.exists(os.path.join(cwd, "after")))
    finally:
        for gate in "abc":  # after a failure, the program is not left waiting for them
            open(os.path.join(gates, gate), "a").close()
        pane.close()
    with open(os.path.join(run_dir, "output")) as f:
        expect_eq(f.read(), "phase a\nphase b\nphase c\ndone\n", "the program's output file")
    expect_eq(os.stat(os.path.join(run_dir, "output")).st_mode & 0o777, 0o600, "its mode")
    with open(os.path.join(cwd, "before")) as a, open(os.path.join(cwd, "after")) as b:
        expect_eq(b.read(), a.read(), "the terminal's settings after the view")


@rt.test
def test_watch_keys_sort_and_quit_and_the_terminal_is_restored():
    """On a finished profile where calls and bytes disagree (site_many: 8 calls of 16 bytes
    for each of site_large's 65536): c sorts by calls, b by bytes; q quits with status 0,
    ^C as an interrupt (130), each leaving the terminal's settings and screen as they were."""
    profile = finished_mixed_profile()
    cwd = rt.fresh_dir()
    pane = Pane(cwd)
    try:
        for n, key, rc in ((1, "q", 0), (2, "C-c", 130)):
            # ^C ends the shell's command list too: what follows is typed after it
            pane.type(f"stty -g > before{n}; echo MA\"\"RK{n}; {rt.MF_PRINT} --watch {profile}")
            pane.wait("site_many on top, sorted by calls",
                      lambda t: sorted_by(t) == "calls/s" and top_site(t) == "site_many")
            pane.send("b")
            pane.wait("site_large on top, sorted by bytes",
                      lambda t: sorted_by(t) == "bytes/s" and top_site(t) == "site_large")
            pane.send("c")
            pane.wait("site_many on top again, sorted by calls",
                      lambda t: sorted_by(t) == "calls/s" and top_site(t) == "site_many")
            pane.send(key)
            pane.wait("the view gone", lambda t: "calls/s" not in t)
            pane.type(f"echo \"RC{n}\"=$?; stty -g > after{n}")
            text = pane.wait(f"the shell after {key}", lambda t: f"RC{n}=" in t)
            expect(f"RC{n}={rc}" in text, f"after {key}, the status is not {rc}:\n{text}")
            expect(f"MARK{n}" in text and "calls/s" not in text,
                   f"after {key}, the screen before the view is not back:\n{text}")
            pane.wait("stty", lambda t: os.path.exists(os.path.join(cwd, f"after{n}")))
            with open(os.path.join(cwd, f"before{n}")) as a, \
                    open(os.path.join(cwd, f"after{n}")) as b:
                expect_eq(b.read(), a.read(), f"the terminal's settings after {key}")
    finally:
        pane.close()


@rt.test
def test_watch_shows_hostile_names_escaped_in_the_terminal_and_in_text():
    r = rt.run_ok([rt.hostile_program()], extra_env={"MALLOC_FREQ_LIVE": "all"})
    cwd = rt.fresh_dir()
    pane = Pane(cwd, width=200, height=40)
    try:
        pane.type(f"{rt.MF_PRINT} --watch {r.profile}")
        want = [rt.esc(rt.HOSTILE_NAMES[k]) for k in (1, 2, 4, 16)]
        text = pane.wait(f"the names escaped ({want})", lambda t: all(w in t for w in want))
        expect("L" * 100 + "\u2026" in text and "L" * 200 not in text,
               f"the name of 5,000 bytes is not cut to the pane's width:\n{text}")
        pane.send("q")
    finally:
        pane.close()
    p = subprocess.run([rt.MF_PRINT, "--watch", "--top", "100", r.profile], capture_output=True,
                       timeout=rt.TIMEOUT)
    expect_eq(p.returncode, 0, f"mf_print --watch's status ({p.stderr!r})")
    text = rt.check_text("--watch's text", p.stdout)
    for k, name in rt.HOSTILE_NAMES.items():
        expect(rt.esc(name) in text, f"hostile_{k} ({rt.esc(name)!r}) is not in the text")
    # The live heap (recorded exactly: every call sampled): hostile_K keeps K of 8K bytes.
    expect("; live 11.7 KiB;" in text.splitlines()[0],
           f"the live bytes (8 * (1 + 4 + ... + 256) = 11,968) are not in {text[:200]!r}")
    row = next(l for l in text.splitlines() if l.endswith(rt.esc(rt.HOSTILE_NAMES[16])))
    expect_eq(row[64:76].strip(), "2.0 KiB", "hostile_16's live bytes (16 of 128)")


@rt.test
def test_watch_without_a_terminal_writes_plain_blocks_until_the_processes_end():
    """mf_print --watch on a running program, its output a pipe: text blocks, a time first,
    no escape byte; each phase on top while it runs; it ends by itself when the program has
    ended, and its last block's totals are the profile's (the exact total, and each site's
    calls as --format csv gives them: the same sites)."""
    outdir = rt.fresh_dir()
    gates = os.path.join(outdir, "gates")
    os.mkdir(gates, 0o700)
    prog = subprocess.Popen([phases_program(), "gated", gates], cwd=outdir,
                            env=rt.profiled_env(outdir, sample=None), stdout=subprocess.PIPE)
    profile = os.path.join(outdir, f"malloc_freq.{prog.pid}")
    raw = bytearray()
    with open(os.path.join(outdir, "stderr"), "w+b") as err:
        p = subprocess.Popen([rt.MF_PRINT, "--watch", "--interval", "0.2", outdir],
                             stdout=subprocess.PIPE, stderr=err)
        try:
            tops = rt.drive_watch_phases(rt.watch_blocks(p.stdout, raw), gates)
        except BaseException:
            prog.kill()  # not left waiting for its gates
            raise
        finally:
            p.stdout.close()
            p.wait(timeout=rt.TIMEOUT)
            prog.communicate(timeout=rt.TIMEOUT)
        err.seek(0)
        expect_eq(p.returncode, 0, f"mf_print --watch's status ({err.read()!r})")
    expect_eq(tops, list(rt.WATCH_PHASES), "the sites on top, in turn")
    expect(b"\x1b" not in raw, f"an escape byte in the text: {bytes(raw[:300])!r}")
    blocks = raw.decode().strip("\n").split("\n\n")
    for b in blocks:
        expect(TIME.match(b), f"a block that does not start with the time: {b!r}")
    last = blocks[-1].splitlines()
    expect_eq(last[1], "processes: 0 running, 1 ended", "the last block's processes")
    expect_eq(int(TIME.match(last[0]).group(1).replace(",", "")),
              rt.exact_total_calls(profile), "the last block's total calls")
    rows = rt.csv_rows(profile)
    for line in last[3:]:
        # columns: calls/s 13, ±error 8, bytes/s 11, calls 15, bytes 11, growth 12, site
        # (read by place: units hold spaces)
        site, calls = line[77:], int(line[35:50].replace(",", ""))
        expect_eq(calls, rt.site_totals(rows, site)[0], f"{site}'s calls in the last block")
    expect_eq(sorted(line[77:] for line in last[3:]), list(rt.WATCH_PHASES),
              "the last block's sites")


@rt.test
def test_watch_options_are_checked():
    d = rt.fresh_dir()
    for args, msg in (
            (["--watch", "--interval", "0", d], "--interval wants seconds from 0.1 to 3600, not '0'"),
            (["--watch", "--interval", "x", d], "--interval wants seconds from 0.1 to 3600, not 'x'"),
            (["--interval", "1", d], "--interval is --watch's refresh: add --watch"),
            (["--watch", "--format", "csv", d], "--watch is a view of its own"),
            (["--watch", os.path.join(d, "nothing")], "cannot watch")):
        r = rt.mf_print(args, check=False)
        expect(r.returncode == 2 and len(r.stderr.splitlines()) == 1 and msg in r.stderr,
               f"mf_print {' '.join(args)}: status {r.returncode}, {r.stderr!r}")


@rt.test
def test_a_process_execd_into_an_image_not_yet_written_is_still_running():
    """exec_late's first image makes 500 calls and execs a copy that writes nothing until a
    gate opens, then makes 700. In between, the process runs on in an image the profile does
    not hold yet: the tree says the process is running, the live heap is 'alive' (not 'at
    exit'), and mf_print --watch goes on through the pause (it used to take the exec'd
    image for the end of the run, say '0 running' and stop at 500 calls) to the end: its last
    block counts both images' 1,200 calls."""
    prog = rt.c_program("exec_late")
    copy = os.path.join(rt.fresh_dir(), "exec_late_copy")
    shutil.copy(prog, copy)
    gate = os.path.join(rt.fresh_dir(), "gate")
    outdir = rt.fresh_dir()
    run = subprocess.Popen([prog, "first", copy, gate], cwd=outdir,
                           env=rt.profiled_env(outdir, extra={"MALLOC_FREQ_LIVE": "all"}))
    profile = os.path.join(outdir, f"malloc_freq.{run.pid}")
    watch = None
    try:
        deadline = time.monotonic() + rt.WATCH_DEADLINE
        while True:  # the copy runs, its image yet unwritten, the first image's calls whole
            try:
                execd = os.readlink(f"/proc/{run.pid}/exe") == copy
                calls = rt.exact_total_calls(profile) if execd else 0
            except OSError:
                calls = 0
            if calls == 500:
                break
            expect(time.monotonic() < deadline, "exec_late never reached its pause")
            time.sleep(0.02)
        tree = rt.mf_print([profile]).stdout
        expect(f"  running    pid {run.pid} was still running when read" in tree,
               f"the tree's header does not say the process runs:\n{tree[:900]}")
        live = rt.mf_print(["--live", profile]).stdout.splitlines()
        expect_eq(live[2].split()[0], "alive", f"the live header's view ({live[:3]})")
        raw = bytearray()
        watch = subprocess.Popen([rt.MF_PRINT, "--watch", "--interval", "0.2", outdir],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        blocks = rt.watch_blocks(watch.stdout, raw)
        for _ in range(2):
            block = next(blocks, None)
            expect(block is not None, f"the view ended during the pause: {bytes(raw)!r}")
            expect_eq(block.splitlines()[1], "processes: 1 running (exec_late), 0 ended",
                      "the processes during the pause")
        open(gate, "w").close()
        last = None
        for block in blocks:
            last = block
        watch.wait(timeout=rt.TIMEOUT)
        expect_eq(watch.returncode, 0, f"mf_print --watch's status ({watch.stderr.read()!r})")
        expect_eq(run.wait(timeout=rt.TIMEOUT), 0, "exec_late's status")
        lines = last.splitlines()
        expect_eq((int(TIME.match(lines[0]).group(1).replace(",", "")), lines[1]),
                  (1200, "processes: 0 running, 2 ended"), "the last block")
    finally:
        open(gate, "a").close()  # never left waiting
        if watch and watch.poll() is None:
            watch.kill()
        if watch:
            watch.stdout.close()
            watch.stderr.close()
            watch.wait()
        run.wait(timeout=rt.TIMEOUT)
