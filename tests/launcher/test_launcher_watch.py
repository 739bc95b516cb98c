"""malloc_freq --watch without a terminal: mf_print --watch's text blocks on the launcher's
standard output while the program runs, ending with it; the program's own output in the
run directory's output file, said at the end before the usual summary; and --interval's
checks (the terminal view is tests/viewer/test_watch.py's)."""
import os
import subprocess

import harness as rt
from harness import expect, expect_eq


@rt.test
def test_launcher_watch_without_a_terminal_writes_text_and_keeps_the_output_apart():
    """Each phase of watch_phases.c on top of the text while it runs (the next phase let go
    only once the text has shown it); the last block the ended program's."""
    prog = rt.c_program("watch_phases")
    cwd = rt.fresh_dir()
    gates = os.path.join(cwd, "gates")
    os.mkdir(gates, 0o700)
    raw = bytearray()
    with open(os.path.join(cwd, "stderr"), "w+b") as err:
        p = subprocess.Popen([rt.LAUNCHER, "--watch", "--interval", "0.2", "--", prog, "gated",
                              gates], cwd=cwd, env=rt.clean_env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=err)
        try:
            tops = rt.drive_watch_phases(rt.watch_blocks(p.stdout, raw), gates)
        finally:
            for gate in "abc":  # after a failure, the program is not left waiting for them
                open(os.path.join(gates, gate), "a").close()
            p.stdout.close()
            p.wait(timeout=rt.TIMEOUT)
        err.seek(0)
        r = rt.Launched(p, raw.decode(errors="replace"), err.read().decode(errors="replace"), cwd)
    expect_eq(r.rc, 0, f"malloc_freq --watch's status ({r.stderr[-800:]!r})")
    expect_eq(tops, list(rt.WATCH_PHASES), "the sites on top, in turn")
    expect(r.stdout and "\x1b" not in r.stdout, f"the view's text: {r.stdout[:300]!r}")
    blocks = r.stdout.strip("\n").split("\n\n")
    expect("phase_c" in blocks[-1] and "processes: 0 running, 1 ended" in blocks[-1],
           f"the last block is not the ended program's: {blocks[-1]!r}")
    expect("phase a" not in r.stdout, "the program's output is mixed with the view's")
    out = os.path.join(r.run_dir, "output")
    with open(out) as f:
        expect_eq(f.read(), "phase a\nphase b\nphase c\ndone\n", "the output file")
    expect(f"malloc_freq: {prog}'s output (29 bytes) is in {out}\n" in r.stderr,
           f"where the output went is not said: {r.stderr!r}")
    expect("phase_c (watch_phases.c:" in r.stderr, f"no summary: {r.stderr!r}")


@rt.test
def test_launcher_watch_interval_is_checked_before_the_program_runs():
    for args, msg in ((["--watch", "--interval", "0.01"], "--interval wants seconds from 0.1 "
                                                          "to 3600, not '0.01'"),
                      (["--interval", "2"], "--interval is --watch's refresh: add --watch")):
        cwd = rt.fresh_dir()
        r = rt.launch(args + ["--", "true"], cwd=cwd)
        expect_eq(r.rc, 2, f"malloc_freq {' '.join(args)}'s status")
        expect_eq(r.stderr, f"malloc_freq: {msg} (see malloc_freq --help)\n", "its message")
        expect_eq(os.listdir(cwd), [], "what it left")
