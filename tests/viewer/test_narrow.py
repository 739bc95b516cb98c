"""Reports on narrow terminals: at COLUMNS=80 and 100 the tree, the --live lifetimes and the
launcher's summary keep every site's 40-character function name whole (numbers compact:
"~300k", no bytes error column; the lifetimes' site on a line of its own), every line within
the width; piped output without COLUMNS keeps its full lines, numbers in full."""

import os
import re

import harness as rt

SITES = [f"narrow_terminal_site_with_forty_chars_0{i}" for i in range(1, 5)]
CALLER = "caller_of_the_sites_whose_name_has_forty"
EACH = 300000  # calls per site (tests/programs/long_site_names.c)


def mf_print(args, columns=None):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = str(columns)
    r = rt.subprocess.run([rt.MF_PRINT] + args, capture_output=True, text=True, env=env,
                          timeout=rt.TIMEOUT)
    rt.expect_eq(r.returncode, 0, f"mf_print {args} at COLUMNS={columns} ({r.stderr!r})")
    return r.stdout


def expect_within(text, columns, what):
    wide = [line for line in text.splitlines() if len(line) > columns]
    rt.expect(not wide, f"{what}: lines wider than {columns}: {wide}")


def site_lines(text):
    """The tree's top-level lines that name a site: {site: line}."""
    out = {}
    for line in text.splitlines():
        for site in SITES:
            if re.search(r"(B|KiB|MiB|%)\s+" + site + r" \(", line):
                out[site] = line
    return out


@rt.test
def test_narrow_tree_keeps_site_names_whole_at_80_and_100_columns():
    prog = rt.c_program("long_site_names")
    profile = rt.run_ok([prog], sample="100", extra_env={"MALLOC_FREQ_LIVE": "sampled"}).profile
    full = mf_print([profile])
    rt.expect_eq(full, mf_print(["--width", "0", profile]), "piped output without COLUMNS")
    rt.expect("…" not in full, f"piped output cut: {full!r}")
    wide = site_lines(full)
    rt.expect_eq(sorted(wide), SITES, "the sites in the full tree")
    for columns in (80, 100):
        text = mf_print([profile], columns)
        expect_within(text, columns, f"the tree at COLUMNS={columns}")
        narrow = site_lines(text)
        rt.expect_eq(sorted(narrow), SITES, f"sites named whole at COLUMNS={columns}")
        for site, line in narrow.items():
            # The same share as the full line; the count compact: ~300k for ~300,000.
            pct = re.search(r" ([\d.]+)% ", line).group(1)
            rt.expect(f" {pct}% " in wide[site], f"{site}: {line!r} vs {wide[site]!r}")
            calls = re.search(r"~([\d,]+) ", wide[site]).group(1).replace(",", "")
            want = f"~{round(int(calls) / 1000)}k"
            rt.expect(line.startswith(want + " "), f"{site} at {columns}: {line!r}, want {want}")
        callers = [line for line in text.splitlines() if f"└─ {CALLER} (" in line]
        rt.expect_eq(len(callers), 4, f"the caller named whole under each site at {columns}")
        # --live: each site's lifetimes on the line under its name.
        live = mf_print(["--live", profile], columns)
        expect_within(live, columns, f"--live at COLUMNS={columns}")
        table = live[live.index("Lifetimes by allocation site"):].splitlines()
        for site in SITES:
            rt.expect(site in table, f"{site} on a line of its own at {columns}: {table}")
            nums = table[table.index(site) + 1].split()
            rt.expect(nums and re.fullmatch(r"~?\d+(\.\d)?[kM]?", nums[0]),
                      f"{site}'s numbers under it: {nums}")


@rt.test
def test_narrow_launcher_summary_fits_80_columns():
    prog = rt.c_program("long_site_names")
    r = rt.launch_ok(["--", prog], extra_env={"COLUMNS": "80"})
    # The launcher's own lines (the command for the whole report) are not cut: copied whole.
    report = "\n".join(l for l in r.stderr.splitlines() if not l.startswith("malloc_freq: "))
    expect_within(report, 80, "the launcher's summary at COLUMNS=80")
    named = [s for s in SITES if re.search(r"(B|KiB|MiB|%)\s+" + s + r" \(", r.stderr)]
    rt.expect_eq(named, SITES, f"the sites named whole in the summary: {r.stderr!r}")
