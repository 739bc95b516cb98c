"""Sites and sizes for pivot tables and allocator tuning (mf_print --by site[,size],
--site-depth, --sizes --tune, --tune-header): a real program with sites of known depth and
sizes (tests/programs/site_sizes.c), exact at MALLOC_FREQ_SAMPLE=1; the size class each stack
entry keeps (format 5, MF_ENTRY_SIZED) and its validation."""
import csv
import io
import math
import os
import re
import select
import struct
import subprocess

import harness as rt
from harness import expect, expect_eq

OUR_SITES = ("far_leaf", "near_leaf", "big_site")

# site_sizes.c at depth 4: (pc0, pc1, pc2, pc3) -> (calls, bytes)
SITES_4 = {
    ("far_leaf", "mid1", "mid2", "mid3"): (6000, 6000 * 32),
    ("near_leaf", "near_a", "main", "-"): (2000, 1500 * 32 + 500 * 4096),
    ("near_leaf", "near_b", "main", "-"): (1500, 1500 * 32),
    ("big_site", "main", "-", "-"): (500, 500 * 4096),
}
# --by site,size: (pc0, pc1, size_min, size_max) -> calls (each of one size)
SITES_SIZE = {
    ("far_leaf", "mid1", 32, 39): 6000,
    ("near_leaf", "near_a", 32, 39): 1500,
    ("near_leaf", "near_a", 4096, 5119): 500,
    ("near_leaf", "near_b", 32, 39): 1500,
    ("big_site", "main", 4096, 5119): 500,
}


def sites_csv(dirs, *extra, depth=4):
    """mf_print --format csv --by site ... as (header, rows of dicts); stderr must be empty."""
    args = ["--format", "csv", "--by", "site"] + list(extra)
    if depth != 4:
        args += ["--site-depth", str(depth)]
    r = rt.mf_print(args + list(dirs))
    expect_eq(r.stderr, "", "mf_print --by site's stderr")
    reader = csv.DictReader(io.StringIO(r.stdout))
    return reader.fieldnames, list(reader)


def name(field):
    return rt.function_name(rt.csv_frames(field)[0]) if field != "-" else "-"


def ours(rows, depth=4):
    return [r for r in rows if name(r["pc0"]) in OUR_SITES]


def site_key(r, depth=4):
    return tuple(name(r[f"pc{d}"]) for d in range(depth))


def run_site_sizes(sample="1", outdir=None):
    return rt.run_ok([rt.c_program("site_sizes")], sample=sample, outdir=outdir)


@rt.test
def test_by_site_rows_exact():
    """--by site at MALLOC_FREQ_SAMPLE=1: one row per site (the innermost 4 frames shown),
    pc0..pc3 padded with '-', calls, bytes and mean size exact, no error; far_leaf, reached
    from top_a and top_b beyond depth 4, is one row; near_leaf from near_a and near_b (its
    2nd frame) is two."""
    r = run_site_sizes()
    header, rows = sites_csv([r.profile])
    expect_eq(header, ["pc0", "pc1", "pc2", "pc3", "calls", "calls_stderr", "bytes",
                       "bytes_stderr", "mean_size", "samples", "via"], "--by site's header")
    got = {site_key(x): (int(x["calls"]), int(x["bytes"])) for x in ours(rows)}
    expect_eq(got, SITES_4, "--by site's rows of site_sizes")
    for x in ours(rows):
        calls, nbytes = int(x["calls"]), int(x["bytes"])
        expect_eq((x["calls_stderr"], x["bytes_stderr"], int(x["samples"]), x["via"]),
                  ("0", "0", calls, ""), f"{site_key(x)}: exact, every call a sample, no via")
        mean = nbytes / calls
        want = str(nbytes // calls) if nbytes % calls == 0 else f"{mean:.2f}"
        expect_eq(x["mean_size"], want, f"{site_key(x)}'s mean size")
    expect_eq([int(x["calls"]) for x in rows], sorted((int(x["calls"]) for x in rows), reverse=True),
              "rows sorted by calls")
    expect_eq(sum(int(x["calls"]) for x in rows), rt.exact_total_calls(r.profile),
              "the rows' calls vs the exact total (every call of the run in a row)")
    # Depth 5: top_a and top_b now tell far_leaf's stacks apart; depth 1: the tree's sites.
    _, rows5 = sites_csv([r.profile], depth=5)
    far = {site_key(x, 5): int(x["calls"]) for x in ours(rows5) if name(x["pc0"]) == "far_leaf"}
    expect_eq(far, {("far_leaf", "mid1", "mid2", "mid3", "top_a"): 3000,
                    ("far_leaf", "mid1", "mid2", "mid3", "top_b"): 3000}, "far_leaf at depth 5")
    header1, rows1 = sites_csv([r.profile], depth=1)
    expect_eq(header1[:2], ["pc0", "calls"], "--site-depth 1's header")
    expect_eq({name(x["pc0"]): int(x["calls"]) for x in ours(rows1)},
              {"far_leaf": 6000, "near_leaf": 3500, "big_site": 500}, "the sites at depth 1")


@rt.test
def test_by_site_size_splits_by_class():
    """--by site,size: near_leaf from near_a asks for 32 and 4,096 bytes: two rows, one per
    size class (size_min, size_max as --sizes shows the class); the classes' rows add up to
    the site's."""
    r = run_site_sizes()
    header, rows = sites_csv([r.profile], "--by", "site,size")
    expect_eq(header[-3:], ["via", "size_min", "size_max"], "--by site,size's last columns")
    got = {site_key(x, 2) + (int(x["size_min"]), int(x["size_max"])): int(x["calls"])
           for x in ours(rows)}
    expect_eq(got, SITES_SIZE, "--by site,size's rows of site_sizes")
    for x in ours(rows):
        expect_eq(int(x["bytes"]), int(x["calls"]) * int(x["size_min"]),
                  f"{site_key(x)}: bytes of one size")
    _, plain = sites_csv([r.profile])
    by_site = {}
    for x in rows:
        k = site_key(x) + (x["via"],)
        by_site[k] = by_site.get(k, 0) + int(x["calls"])
    expect_eq(by_site, {site_key(x) + (x["via"],): int(x["calls"]) for x in plain},
              "the size classes' rows summed per site vs --by site")


@rt.test
def test_interleaved_sites_and_sizes_stay_apart():
    """tests/programs/interleaved_sizes.c at MALLOC_FREQ_SAMPLE=1, by the rules and by frame
    pointers: three sites in turn and four sizes in turn (no call shares both stack and size
    class with the one before), then one site through the four sizes. The recorder finds a
    call from the last stack's frames by its size class without hashing; every (site, size)
    keeps its exact count."""
    want = {(site, size): (2000 if site == "site_a" else 500)
            for site in ("site_a", "site_b", "site_c") for size in (24, 200, 3000, 100000)}
    prog = rt.c_program("interleaved_sizes")
    for unwinder in ("libunwind", "fp"):
        r = rt.run_ok([prog], extra_env={"MALLOC_FREQ_UNWIND": unwinder})
        _, rows = sites_csv([r.profile], "--by", "site,size", depth=1)
        got = {}
        for x in rows:
            if name(x["pc0"]).startswith("site_"):
                calls = int(x["calls"])
                got[(name(x["pc0"]), int(x["bytes"]) // calls)] = calls
        expect_eq(got, want, f"calls per site and size, MALLOC_FREQ_UNWIND={unwinder}")


@rt.test
def test_stacks_that_differ_only_in_an_outer_caller_stay_apart():
    """tests/programs/outer_callers.c at MALLOC_FREQ_SAMPLE=1, by the rules and by frame
    pointers: one site reached through via_a and via_b in turn, the two stacks at the same
    addresses, differing in one return address four frames above the allocation. A walk is
    taken from the last one's only where every word that walk read is unchanged: each outer
    caller keeps its exact count."""
    prog = rt.c_program("outer_callers")
    for unwinder in ("libunwind", "fp"):
        r = rt.run_ok([prog], extra_env={"MALLOC_FREQ_UNWIND": unwinder})
        _, rows = sites_csv([r.profile], depth=5)
        got = {}
        for x in rows:
            if name(x["pc0"]) == "leaf":
                key = tuple(name(x[f"pc{d}"]) for d in range(5))
                got[key] = got.get(key, 0) + int(x["calls"])
        want = {("leaf", "mid3", "mid2", "mid1", "via_a"): 3000,
                ("leaf", "mid3", "mid2", "mid1", "via_b"): 2000}
        expect_eq(got, want, f"calls per outer caller, MALLOC_FREQ_UNWIND={unwinder}")


@rt.test
def test_by_site_on_merged_runs_and_programs():
    """Two runs of site_sizes merged: every row doubles; --by program,site adds the program
    column."""
    outdir = rt.fresh_dir()
    a = run_site_sizes(outdir=outdir)
    b = run_site_sizes(outdir=outdir)
    _, rows = sites_csv([a.profile, b.profile])
    expect_eq({site_key(x): (int(x["calls"]), int(x["bytes"])) for x in ours(rows)},
              {k: (2 * c, 2 * n) for k, (c, n) in SITES_4.items()}, "two runs merged")
    header, rows = sites_csv([outdir], "--by", "program,site")
    expect_eq(header[-2:], ["via", "program"], "--by program,site's last columns")
    expect_eq({site_key(x) + (x["program"],): int(x["calls"]) for x in ours(rows)},
              {k + ("site_sizes",): 2 * c for k, (c, _) in SITES_4.items()},
              "--by program,site over the run directory")


@rt.test
def test_by_site_and_tune_on_a_live_profile():
    """While site_sizes still runs (it waits after its calls): the rows and the tuning
    summary are already exact."""
    prog = rt.c_program("site_sizes")
    outdir = rt.fresh_dir()
    p = subprocess.Popen([prog, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=rt.profiled_env(outdir, "1"), cwd=outdir)
    try:
        ready, _, _ = select.select([p.stdout], [], [], rt.TIMEOUT)
        expect(ready, f"site_sizes said nothing in {rt.TIMEOUT} s")
        expect_eq(p.stdout.readline(), b"ready\n", "site_sizes's first line")
        profile = os.path.join(outdir, f"malloc_freq.{p.pid}")
        _, rows = sites_csv([profile])
        expect_eq({site_key(x): (int(x["calls"]), int(x["bytes"])) for x in ours(rows)},
                  SITES_4, "--by site on the live profile")
        text = rt.mf_print(["--sizes", "--tune", profile]).stdout
        expect("far_leaf 67%, near_leaf 33%" in text, f"--tune on the live profile:\n{text}")
    finally:
        p.stdin.close()
        p.wait(timeout=rt.TIMEOUT)


@rt.test
def test_by_site_errors_match_the_tree():
    """Sampled (1 in 50): a site row's standard error is the tree's ± for the same site
    (depth 1 = the tree's first level: the variance summed over its stacks, with the same
    floor), and the size classes' rows still add up to the site's."""
    r = run_site_sizes(sample="50")
    _, rows = sites_csv([r.profile], depth=1)
    tree = rt.tree_text(r.profile, threshold=0)
    shown = {e.name: e for e in rt.tree_lines(tree) if e.top}
    expect_eq(sorted(name(x["pc0"]) for x in ours(rows)), sorted(OUR_SITES), "the sites found")
    expect(all(float(x["calls_stderr"]) > 0 for x in ours(rows)), "a site without an error at 1 in 50")
    for x in ours(rows):
        site, calls = name(x["pc0"]), int(x["calls"])
        expect(site in shown, f"{site} is not a top-level entry of the tree")
        expect_eq(shown[site].calls, calls, f"{site}'s calls in the tree and --by site")
        rel = 100.0 * float(x["calls_stderr"]) / calls
        want = f"{rel:.1f}%" if rel < 9.95 else f"{rel:.0f}%" if rel < 999.5 else ">999%"
        expect_eq(shown[site].error, want, f"{site}'s ± in the tree vs --by site's calls_stderr")
    _, sized = sites_csv([r.profile], "--by", "site,size", depth=1)
    per_site = {}
    for x in sized:
        k = (x["pc0"], x["via"])
        per_site[k] = per_site.get(k, 0) + int(x["calls"])
    expect_eq(per_site, {(x["pc0"], x["via"]): int(x["calls"]) for x in rows},
              "sampled: the classes' rows summed per site vs --by site")


def sizes_histogram(profile):
    r = rt.mf_print(["--sizes", "--format", "csv", profile])
    return {int(x["size_min"]): (int(x["size_max"]), int(x["calls"]), int(x["bytes"]))
            for x in csv.DictReader(io.StringIO(r.stdout))}


@rt.test
def test_tune_names_the_hot_classes_and_their_sites():
    """site_sizes: 90 % of its calls ask for 32 bytes, 10 % for 4,096. --tune names both
    classes (32 hot for calls, 4,096 for bytes) with their sites' shares, and says what a slab
    for sizes <= 39 would save."""
    r = run_site_sizes()
    hist = sizes_histogram(r.profile)
    total = sum(c for _, c, _ in hist.values())
    expect_eq({lo: v for lo, v in hist.items() if lo in (32, 4096)},
              {32: (39, 9000, 9000 * 32), 4096: (5119, 1000, 1000 * 4096)},
              "the histogram's classes of 32 and 4,096 bytes")
    text = rt.mf_print(["--sizes", "--tune", r.profile]).stdout
    lines = text.splitlines()

    def line_of(start):
        found = [x.strip() for x in lines if x.strip().startswith(start)]
        expect(len(found) == 1, f"one line starting {start!r} in --tune's output:\n{text}")
        return found[0].split()

    small = line_of("32 - 39")
    expect_eq(small[3:6], ["9,000", f"{100 * 9000 / total:.2f}%", "281.2"],
              "the 32-byte class's calls, share and KiB")
    expect_eq(small[8:], ["calls", "far_leaf", "67%,", "near_leaf", "33%"],
              "the 32-byte class: hot for calls, its sites")
    big = line_of("4,096 - 5,119")
    expect_eq(big[3:5], ["1,000", f"{100 * 1000 / total:.2f}%"], "the 4 KiB class's calls")
    expect_eq(big[8:], ["bytes", "big_site", "50%,", "near_leaf", "50%"],
              "the 4 KiB class: hot for bytes, its sites")
    if total == 10000:  # no call of glibc's own: the advice's numbers are the program's
        expect(f"90 % of calls are <= 39 bytes from 2 sites (far_leaf, near_leaf): a slab or "
               f"arena for sizes <= 39 serving them removes 9,000 calls to malloc" in text,
               f"--tune's advice:\n{text}")


@rt.test
def test_tune_header_compiles_and_matches_the_histogram():
    """--tune-header FILE: a C header that compiles (gcc -Wall -Wextra -Werror) and holds
    the histogram's classes, calls and bytes, its percentiles and hot classes."""
    r = run_site_sizes()
    header = os.path.join(r.outdir, "tune.h")
    rt.mf_print(["--sizes", "--tune-header", header, r.profile])
    main = os.path.join(r.outdir, "tune_main.c")
    with open(main, "w") as f:
        f.write('#include <stdio.h>\n#include "tune.h"\n#include "tune.h" /* guarded */\n'
                "static const unsigned hot[] = MF_TUNE_HOT;\n"
                "int main(void)\n{\n"
                '    printf("%d %llu %llu %d %u\\n", MF_TUNE_EXACT, MF_TUNE_CALLS, MF_TUNE_BYTES,\n'
                "           MF_TUNE_NCLASSES, MF_TUNE_NHOT);\n"
                "    for (int i = 0; i < MF_TUNE_NCLASSES; i++)\n"
                '        printf("%llu %llu %llu %llu\\n", mf_tune_classes[i].size_min,\n'
                "               mf_tune_classes[i].size_max, mf_tune_classes[i].calls,\n"
                "               mf_tune_classes[i].bytes);\n"
                "    for (unsigned i = 0; i < MF_TUNE_NHOT; i++)\n"
                '        printf("hot %u\\n", hot[i]);\n'
                '    printf("p %llu %llu %llu\\n", MF_TUNE_CALLS_P50_SIZE, MF_TUNE_CALLS_P99_SIZE,\n'
                "           MF_TUNE_BYTES_P50_SIZE);\n"
                '    printf("c0 %llu %llu\\n", MF_TUNE_CLASS0_MIN, MF_TUNE_CLASS0_CALLS);\n'
                "    return 0;\n}\n")
    exe = os.path.join(r.outdir, "tune_main")
    cc = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", exe, main],
                        capture_output=True, text=True)
    expect(cc.returncode == 0, f"the tune header does not compile: {cc.stderr}")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()
    hist = sizes_histogram(r.profile)
    classes = sorted(hist.items())
    total = sum(c for _, c, _ in hist.values())
    expect_eq(out[0].split()[:4], ["1", str(total), str(sum(b for _, _, b in hist.values())),
                                   str(len(classes))], "exact, calls, bytes, classes")
    got = [tuple(map(int, x.split())) for x in out[1:1 + len(classes)]]
    expect_eq(got, [(lo, hi, c, b) for lo, (hi, c, b) in classes], "the header's class table")
    hot = [classes[int(x.split()[1])][0] for x in out if x.startswith("hot ")]
    expect_eq(hot, [32, 4096], "the hot classes (by calls: 32 for calls, 4,096 for bytes)")
    expect_eq(out[-2].split()[1:3], ["39", "5119"], "the sizes holding 50 % and 99 % of calls")
    expect_eq(out[-1].split()[1:], [str(classes[0][0]), str(classes[0][1][1])],
              "MF_TUNE_CLASS0_MIN and _CALLS")


@rt.test
def test_by_site_and_tune_usage_errors():
    """One line and exit status 2 for what cannot be done."""
    r = run_site_sizes()
    cases = [
        (["--by", "site"], "--by site writes CSV: add --format csv"),
        (["--format", "csv", "--by", "size"], "--by size splits sites: --by site,size"),
        (["--format", "csv", "--by", "site", "--site-depth", "0"],
         "--site-depth wants frames from 1 to 64, not '0'"),
        (["--format", "csv", "--site-depth", "3"],
         "--site-depth is the depth of --by site's sites: add --by site"),
        (["--tune"], "--tune and --tune-header read the size histogram: add --sizes"),
        (["--sizes", "--tune", "--format", "csv"], "--tune is a text report, not csv"),
        (["--format", "csv", "--by", "sites"],
         "--by is program, site, site,size or program,site, not 'sites'"),
    ]
    for args, want in cases:
        p = rt.mf_print(args + [r.profile], check=False)
        expect_eq((p.returncode, p.stdout, p.stderr),
                  (2, "", f"mf_print: {want} (see mf_print --help)\n"), f"mf_print {args}")


@rt.test
def test_entries_keep_their_size_class():
    """The writer keys each stack's entries by size class: near_leaf's stack from near_a has
    an entry per size (32, 4,096 bytes), each with its class. The reader
    skips the file, with one line, where a class's entries hold more calls than the header's
    histogram counts for it (beyond a sample in flight), or a class is out of range."""
    r = run_site_sizes()
    entries = rt.file_entries_full(r.profile)
    expect(all(e["flags"] & rt.F.ENTRY_SIZED for e in entries), "an entry without MF_ENTRY_SIZED")
    (path,) = rt.thread_files(r.profile)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    classes = {}
    for e in entries:
        classes.setdefault(e["size_class"], []).append(e["calls"])
    expect(500 in classes.get(rt.size_class(4096), []) and 1500 in classes.get(rt.size_class(32), []),
           f"entries by class: {classes}")
    # The header's histogram short of what the entries of a class hold: the file is skipped.
    small = bytearray(data)
    c32 = rt.size_class(32)
    struct.pack_into("<Q", small, rt.F.thread_header.sizes + rt.F.size_class.size * c32
                     + rt.F.size_class.calls, 0)
    with open(path, "wb") as f:
        f.write(small)
    p = rt.mf_print(["--format", "csv", r.profile], check=False)
    expect(re.search(r"its stacks hold [0-9,]+ calls of sizes 32 and up, more than the 0 its "
                     r"size histogram counts", p.stderr) and p.stderr.count("\n") == 1,
           f"mf_print on a histogram without the 32-byte calls: {p.stderr!r}")
    rt.set_entry_class(data, rt.thread_file_stacks(data)[0], 250)
    with open(path, "wb") as f:
        f.write(data)
    p = rt.mf_print(["--format", "csv", r.profile], check=False)
    expect("bad size class 250" in p.stderr and p.stderr.count("\n") == 1,
           f"mf_print on a class of 250: {p.stderr!r}")
