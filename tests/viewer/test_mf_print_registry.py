"""The registry of reports (mf_print/report/registry.c): a report added there alone, in a
build of mf_print with -DMF_TEST_REPORT (one more line: "test-report", for the plain, live
and --sizes kinds), shows in --help, in the format lists of the option rules' errors, and
is what mf_print runs for its format, with the model of the view asked for."""
import json
import os
import subprocess

import harness as rt
from harness import expect, expect_eq

HELP_LINE = " " * 25 + "test-report a line of what its model holds (a test build's)"


def test_build():
    exe = os.path.join(rt.OUT, "mf_print_test_report")
    src, inc = rt.mf_print_sources()
    r = subprocess.run(["gcc", "-O1", "-std=gnu11", "-D_GNU_SOURCE", "-DMF_TEST_REPORT", "-Wall",
                        "-Wextra", "-Werror", "-o", exe] + inc + src +
                       ["-ldw", "-ldebuginfod", "-lelf", "-liberty", "-lz"], cwd=rt.REPO, capture_output=True,
                      text=True)
    expect(r.returncode == 0, f"cannot build mf_print with MF_TEST_REPORT: {r.stderr[-800:]}")
    return exe


def run(exe, args):
    return subprocess.run([exe] + args, capture_output=True, text=True, timeout=rt.TIMEOUT)


@rt.test
def test_a_report_added_to_the_registry_alone_is_listed_checked_and_run():
    exe = test_build()
    helps = run(exe, ["--help"]).stdout.splitlines()
    expect(HELP_LINE in helps, f"--help has no test-report line: {helps[:20]}")
    expect_eq(helps.index(HELP_LINE) - helps.index(
        "                         json       the model, for scripts"), 1,
        "test-report's line, after json's")
    expect(HELP_LINE not in run(rt.MF_PRINT, ["--help"]).stdout, "the real build lists it")

    r = rt.run_ok([rt.c_program("live_heap"), "temps"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    errors = {
        ("--format", "xml"): "--format is tree, csv, collapsed, pprof, html, json or test-report, "
                             "not 'xml'",
        ("--sizes", "--format", "pprof"): "--sizes reports in tree, csv, json or test-report "
                                          "format, not pprof",
        ("--base", r.profile, "--format", "test-report"): "--base reports in tree, csv or pprof "
                                                          "format, not test-report",
        ("--by", "program", "--format", "test-report"):
            "--by program splits the tree and csv reports (pprof labels every sample with its "
            "program already), not test-report",
        ("--sizes", "--tune", "--format", "test-report"): "--tune is a text report, not test-report",
    }
    for args, want in errors.items():
        p = run(exe, list(args) + [r.profile])
        expect_eq((p.returncode, p.stdout, p.stderr),
                  (2, "", f"mf_print: {want} (see mf_print --help)\n"), " ".join(args))
    p = run(rt.MF_PRINT, ["--format", "test-report", r.profile])
    expect_eq(p.stderr, "mf_print: --format is tree, csv, collapsed, pprof, html or json, not "
                        "'test-report' (see mf_print --help)\n", "the real build's --format")

    # Dispatch: live_heap temps made 10,003 calls (5,000 freed at once, 5,000 kept then
    # freed, 3 from a constructor) of which the 3 are alive at exit.
    plain = json.loads(rt.mf_print(["--format", "json", r.profile]).stdout)
    calls = plain["totals"]["calls"]
    expect_eq(calls, 10003, "live_heap temps' calls")
    stacks = len(plain["stacks"])
    live_stacks = len(json.loads(rt.mf_print(["--live", "--format", "json", r.profile]).stdout)["stacks"])
    for args, want in [
            ([], f"view calls, {stacks} stacks, {calls} counted, {calls} calls made, width 0"),
            (["--live"], f"view live, {live_stacks} stacks, 3 counted, {calls} calls made, width 0"),
            (["--sizes", "--width", "200"],
             f"view calls, {stacks} stacks, {calls} counted, {calls} calls made, width 200")]:
        p = run(exe, args + ["--format", "test-report", r.profile])
        expect_eq((p.returncode, p.stdout, p.stderr), (0, f"test-report: {want}\n", ""),
                  " ".join(args + ["--format", "test-report"]))
