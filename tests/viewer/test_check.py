"""Allocation budgets (mf_print --check RULES, docs/budgets.md) on real programs with known
counts: exact_sites (EXACT_SITES) at MALLOC_FREQ_SAMPLE=1, where a rule at its limit holds and
one a call under it breaks by exactly 1; sampled_sites (SAMPLED_SITES) sampled 1 in 1,000,
where an estimate just over its limit holds (within 3 standard errors) and one far over
breaks, while the exact totals still compare exactly; live_heap's leaks (live_bytes);
diff_sites run with N and 2N (--base growth rules); and bad rules."""
import csv
import io
import os

import harness as rt
from harness import expect, expect_eq

BROKEN = 4  # mf_print's exit status when a rule is broken


def check(args):
    r = rt.mf_print(args, check=False)
    expect_eq(r.stderr, "", f"mf_print {' '.join(args)}: stderr")
    return r


def verdict(r):
    """The verdict's lines: ' ' held, '-' and '+' a broken rule and what was measured."""
    return r.stdout.splitlines()


@rt.test
def test_check_exact_rules_hold_and_break():
    r = rt.run_ok([rt.c_program("exact_sites")])
    calls = sum(c for c, _ in rt.thread_totals(r.profile))
    rules = ("calls(site_malloc) <= 1000; calls(site_calloc) < 701; bytes(site_deep) == 90000;"
             f"calls <= {calls}; calls(nothing_here) == 0")
    out = check([r.profile, "--check", rules])
    expect_eq(out.returncode, 0, "every rule holds: exit status")
    expect_eq(verdict(out), [" calls(site_malloc) <= 1000: 1,000", " calls(site_calloc) < 701: 700",
                             " bytes(site_deep) == 90000: 90,000", f" calls <= {calls}: {calls:,}",
                             " calls(nothing_here) == 0: 0", "check: all 5 rules hold"], "verdict")
    # a call under the limit: broken by exactly 1, exact counts compare exactly
    rules_file = os.path.join(r.outdir, "budget.rules")
    with open(rules_file, "w") as f:
        f.write("# the budget\ncalls(site_malloc) <= 999   # one under\n\n"
                f"calls < {calls}; bytes(site_realloc) <= 1MiB\ncalls(site_valloc) >= 121\n")
    out = check([r.profile, "--check", rules_file])
    expect_eq(out.returncode, BROKEN, "broken rules: exit status")
    expect_eq(verdict(out), ["-calls(site_malloc) <= 999",
                             "+calls(site_malloc) = 1,000: over by 1 (0.1 %)",
                             f"-calls < {calls}", f"+calls = {calls:,}: at the limit",
                             " bytes(site_realloc) <= 1MiB: 1,002,000",
                             "-calls(site_valloc) >= 121", "+calls(site_valloc) = 120: under by 1 (0.8 %)",
                             "check: 3 of 4 rules broken"], "verdict")


@rt.test
def test_check_sampled_estimates_and_their_error_bars():
    r = rt.run_ok([rt.c_program("sampled_sites")], sample="1000",
                  extra_env={"MALLOC_FREQ_SEED": "7"})
    total = sum(c for c, _ in rt.thread_totals(r.profile))
    expect_eq(total, sum(c for c, _ in rt.SAMPLED_SITES.values()), "sampled_sites' exact calls")
    hot = rt.SAMPLED_SITES["site_hot"][0]  # 2,000,000
    # Its estimate and standard error as mf_print gives them (calibrated to the exact total):
    # a limit one standard error under the estimate is broken by less than three of them.
    sites = csv.DictReader(io.StringIO(rt.mf_print([r.profile, "--format", "csv", "--by", "site",
                                                    "--site-depth", "1"]).stdout))
    (row,) = [x for x in sites if x["pc0"] == "site_hot"]
    est, se = int(row["calls"]), float(row["calls_stderr"])
    expect(se > 1000, f"site_hot's standard error {se}: not sampled")
    just_under = int(est - se)
    out = check([r.profile, "--check", f"calls(site_hot) <= {just_under}",
                 "--check", f"calls(site_hot) <= {hot * 3 // 4}",
                 "--check", f"calls <= {total - 1}; calls <= {total}"])
    expect_eq(out.returncode, BROKEN, "exit status")
    lines = verdict(out)
    expect_eq(len(lines), 7, f"verdict lines: {lines}")
    expect(lines[0].startswith(f" calls(site_hot) <= {just_under}: ") and "(estimated)" in lines[0]
           and lines[0].endswith("within 3 standard errors"),
           f"an estimate just over its limit holds: {lines[0]!r}")
    expect_eq(lines[1], f"-calls(site_hot) <= {hot * 3 // 4}", "far over: broken")
    expect(lines[2].startswith("+calls(site_hot) = ") and lines[2].endswith("beyond 3 standard errors"),
           f"far over: what was measured: {lines[2]!r}")
    expect_eq(lines[3:], [f"-calls <= {total - 1}", f"+calls = {total:,}: over by 1 (0.0 %)",
                          f" calls <= {total}: {total:,}", "check: 2 of 4 rules broken"],
              "the exact total, sampled or not")


@rt.test
def test_check_live_bytes_at_exit():
    r = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None,
                  extra_env={"MALLOC_FREQ_LIVE": "all"})
    # site_leak: 1,000 x 48 bytes; site_before_main: 3 x 16 bytes
    out = check([r.profile, "--check", "live_bytes(site_leak) <= 48000; live_calls(site_leak) == 1000;"
                 "live_bytes <= 48047"])
    expect_eq(out.returncode, BROKEN, "exit status")
    expect_eq(verdict(out), [" live_bytes(site_leak) <= 48000: 48,000",
                             " live_calls(site_leak) == 1000: 1,000",
                             "-live_bytes <= 48047", "+live_bytes = 48,048: over by 1 (0.0 %)",
                             "check: 1 of 3 rules broken"], "verdict")
    plain = rt.run_ok([rt.c_program("live_heap"), "leaks"], sample=None)
    out = check([plain.profile, "--check", "live_bytes <= 1Gi; calls(site_leak) == 1000"])
    expect_eq(out.returncode, BROKEN, "no live heap: the rule cannot hold")
    expect_eq(verdict(out), ["-live_bytes <= 1Gi",
                             "+no live heap recorded: run the program with MALLOC_FREQ_LIVE=sampled or all",
                             " calls(site_leak) == 1000: 1,000", "check: 1 of 2 rules broken"],
              "a live rule without a live heap; the other rules checked")


@rt.test
def test_check_growth_against_base():
    prog = rt.c_program("diff_sites")
    old, new = (rt.run_ok([prog, str(n)]) for n in (20000, 40000))
    out = check(["--base", old.profile, new.profile, "--check",
                 "calls(site_changing) +0; calls(site_changing) +100%; calls(site_steady) +0;"
                 "bytes(site_changing) +1000000; calls(site_small) <= 300"])
    expect_eq(out.returncode, BROKEN, "exit status")
    expect_eq(verdict(out), [
        "-calls(site_changing) +0",
        "+calls(site_changing) 20,000 -> 40,000, +20,000 (+100.0 %): 20,000 over the 0 allowed",
        " calls(site_changing) +100%: 20,000 -> 40,000, +20,000 (+100.0 %)",
        " calls(site_steady) +0: 20,000 -> 20,000, +0 (+0.0 %)",
        "-bytes(site_changing) +1000000",
        "+bytes(site_changing) 1,280,000 -> 2,560,000, +1,280,000 (+100.0 %): 280,000 over the "
        "1,000,000 allowed",
        " calls(site_small) <= 300: 300",
        "check: 2 of 5 rules broken"], "verdict")
    out = check(["--base", old.profile, new.profile, "--check", "calls(site_steady) +0"])
    expect_eq((out.returncode, verdict(out)[-1]), (0, "check: the 1 rule holds"), "a rule that holds")


@rt.test
def test_check_bad_rules_are_one_line_errors():
    r = rt.run_ok([rt.c_program("exact_sites")])
    bad = os.path.join(r.outdir, "bad.rules")
    with open(bad, "w") as f:
        f.write("calls <= 10\n# fine so far\ncalls(x) <== 4\n")
    cases = [
        (["--check", "callz <= 3"],
         "mf_print: --check: rule 'callz <= 3', column 1: expected calls, bytes, live_calls or live_bytes"),
        (["--check", "calls <= 1; bytes(f) <= 1x0"],
         "mf_print: --check: rule 'bytes(f) <= 1x0', column 14: expected the end of the rule (';' or a new line)"),
        (["--check", "calls(f <= 3"], None),
        (["--check", "calls ~ 3"], None),
        (["--check", bad], f"mf_print: {bad}:3: rule 'calls(x) <== 4', column 12: expected a number (1000, 2.5k, 64KiB)"),
        (["--check", "calls +10%"], "mf_print: --check: a growth rule (calls +10%) compares with --base OLD"),
        (["--check", "calls <= 1", "--format", "csv"], None),
        (["--check", "calls <= 1", "--sizes"], None),
        (["--format", "check"], None),  # not a format: --check chooses it
    ]
    for args, first in cases:
        out = rt.mf_print(args + [r.profile], check=False)
        expect_eq(out.returncode, 2, f"mf_print {args}: exit status")
        lines = out.stderr.splitlines()
        expect_eq(len(lines), 1, f"mf_print {args}: one line on stderr: {out.stderr!r}")
        if first:
            expect_eq(lines[0], first + " (see mf_print --help)", f"mf_print {args}: the message")
        expect_eq(out.stdout, "", f"mf_print {args}: nothing reported")
