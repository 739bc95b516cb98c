"""Sizes: the exact size histogram every thread keeps (mf_print --sizes), the sizes of one
site's calls estimated from its samples (--sizes --site), and size-dependent sampling
(MALLOC_FREQ_LARGE: every call of 64 KiB and more recorded with weight 1, outside the
countdown). Real programs at numbers known from their source (tests/programs/size_classes.c,
large_site.c)."""
import csv
import io
import json
import math
import struct
import subprocess

import run_tests as rt
from run_tests import expect, expect_eq

# tests/programs/size_classes.c: site_spread's sizes and counts (it runs twice: main, worker)
SPREAD = [(0, 3), (1, 5), (2, 7), (3, 11), (4, 13), (5, 2), (7, 3), (8, 17), (12, 4), (15, 6),
          (16, 19), (20, 8), (100, 23), (1000, 29), (1023, 3), (1024, 31), (4095, 5),
          (4096, 37), (65535, 41), (65536, 43), (65537, 2), (100000, 9), (1048576, 7),
          (5000000, 3)]


def size_class(size):
    """mf_size_class (c_core/mf_format.h): 0 for 0, else 1 + 4e + the two bits below the
    leading one (bit e)."""
    if size == 0:
        return 0
    e = size.bit_length() - 1
    m = (size >> (e - 2) if e >= 2 else size << (2 - e)) & 3
    return 1 + 4 * e + m


def class_lo(c):
    if c == 0:
        return 0
    e, m = divmod(c - 1, 4)
    return (4 + m) << (e - 2) if e >= 2 else (4 + m) >> (2 - e)


def site_class(size):
    """mf_site_class: one class per doubling, from 4 MiB up one class."""
    return min(size.bit_length(), 23)


SIZE_CLASSES_SITES = ("site_spread", "site_calloc", "site_realloc", "site_bulk")


def glibc_calls(profile):
    """The calls glibc makes for size_classes itself (pthread_create's allocate_dtv: one of
    304 bytes here), from an every-call profile, as (size, count)."""
    out = []
    for row in rt.csv_rows(profile):
        if row.site not in SIZE_CLASSES_SITES:
            expect(row.bytes % row.calls == 0, f"glibc's {row.site}: calls of several sizes")
            out.append((row.bytes // row.calls, row.calls))
    return out


def size_classes_calls(extra=()):
    """Every call size_classes makes, as (size, count); extra: glibc's."""
    calls = [(s, 2 * n) for s, n in SPREAD] + list(extra)
    calls += [(300, 50)]                                   # site_calloc: calloc(10, 30)
    calls += [(64 << k, 1) for k in range(15)]             # site_realloc: 64 .. 1 MiB
    calls += [(24, 600000), (1000, 400000)]                # site_bulk
    return calls


def expected_histogram(calls):
    hist = {}
    for size, n in calls:
        c = hist.setdefault(class_lo(size_class(size)), [0, 0])
        c[0] += n
        c[1] += n * size
    return hist


def sizes_output(profile, *args, fmt=None, rc=0):
    argv = [rt.MF_PRINT, "--dir", profile, "--sizes"] + list(args)
    if fmt:
        argv += ["--format", fmt]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=rt.TIMEOUT)
    expect(r.returncode == rc, f"mf_print {' '.join(argv[3:])} exited {r.returncode}, "
                               f"expected {rc}: {r.stderr.strip()!r}")
    if rc == 0:
        expect_eq(r.stderr, "", f"mf_print {' '.join(argv[3:])} stderr")
    return r


def csv_histogram(profile):
    text = sizes_output(profile, fmt="csv").stdout
    reader = csv.DictReader(io.StringIO(text))
    expect_eq(reader.fieldnames, ["size_min", "size_max", "calls", "bytes"], "--sizes CSV header")
    return {int(r["size_min"]): [int(r["calls"]), int(r["bytes"])] for r in reader}


@rt.test
def test_size_histogram_exact():
    """Every call counted by size class, on the hot path (sizes under 64 KiB, in TLS) or the
    slow path (0, 64 KiB and more): the totals per class are the program's, exactly, when
    every call is recorded and in the default mode, which samples."""
    prog = rt.c_program("size_classes")
    want = None
    for sample in ("1", None):
        r = rt.run_ok([prog], sample=sample)
        if sample == "1":
            glibc = glibc_calls(r.profile)
            want = expected_histogram(size_classes_calls(glibc))
        expect_eq(r.stdout, "size_classes done\n", "program output")
        got = csv_histogram(r.profile)
        mode = "every call" if sample else "default mode"
        bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        bad.update({k: (v, None) for k, v in got.items() if k not in want})
        expect(not bad, f"{mode}: classes (got, want) that differ: {sorted(bad.items())[:6]}")
        calls = sum(sum(rt.file_totals(f)[0]) for f in rt.thread_files(r.profile))
        nbytes = sum(sum(rt.file_totals(f)[1]) for f in rt.thread_files(r.profile))
        expect_eq((sum(v[0] for v in got.values()), sum(v[1] for v in got.values())),
                  (calls, nbytes), f"{mode}: the histogram's totals vs the exact totals")
        # JSON: the same classes; the text table: a row with a bar per class.
        doc = json.loads(sizes_output(r.profile, fmt="json").stdout)
        expect(doc["exact"] and doc["calls"] == calls and doc["bytes"] == nbytes,
               f"{mode}: JSON totals {doc['calls']}, {doc['bytes']}")
        expect_eq({c["size_min"]: [c["calls"], c["bytes"]] for c in doc["classes"]}, got,
                  f"{mode}: JSON classes vs CSV")
        text = sizes_output(r.profile).stdout
        rows = [l for l in text.splitlines() if l.rstrip().endswith("#")]
        expect_eq(len(rows), len(want), f"{mode}: table rows with a bar")
        big = [l for l in rows if l.split()[0] == "24"]
        expect(big and big[0].endswith("#" * 30), f"{mode}: the biggest class's bar: {big}")


@rt.test
def test_size_histogram_of_a_site():
    """--sizes --site NAME: the sizes of one site's calls, from its samples: exact when every
    call is recorded, within 4 standard errors in the default mode."""
    prog = rt.c_program("size_classes")
    spread = {}
    for size, n in SPREAD:
        spread[site_class(size)] = spread.get(site_class(size), 0) + 2 * n
    r = rt.run_ok([prog], sample="1")

    def site_csv(profile, site):
        rows = csv.DictReader(io.StringIO(sizes_output(profile, "--site", site, fmt="csv").stdout))
        expect_eq(rows.fieldnames, ["size_min", "size_max", "calls", "calls_stderr"],
                  "--sizes --site CSV header")
        return {site_class(int(x["size_min"])): (int(x["calls"]), float(x["calls_stderr"]))
                for x in rows}

    expect_eq(site_csv(r.profile, "site_spread"), {c: (n, 0.0) for c, n in spread.items()},
              "site_spread's sizes at N=1")
    text = sizes_output(r.profile, "--site", "site_bulk").stdout
    expect("1,000,000 (exact)" in text and "~" not in text, f"site_bulk at N=1: {text}")
    # The default mode: site_bulk's two sizes are estimates, within 4 SE of the truth.
    d = rt.run_ok([prog], sample=None, extra_env={"MALLOC_FREQ_SEED": "7"})
    got = site_csv(d.profile, "site_bulk")
    for size, known in ((24, 600000), (1000, 400000)):
        calls, se = got.get(site_class(size), (0, 0.0))
        expect(se > 0, f"site_bulk's {size}-byte calls are not an estimate: {calls} ± {se}")
        expect(abs(calls - known) <= 4 * se,
               f"site_bulk's {size}-byte calls: {calls} ± {se:.0f}, known {known}")
    doc = json.loads(sizes_output(d.profile, "--site", "site_bulk", fmt="json").stdout)
    expect(doc["site"] == "site_bulk" and doc["estimated"], f"JSON: {doc}")
    # Bad uses: --site without --sizes, a site that is not there, a format it has not.
    r2 = subprocess.run([rt.MF_PRINT, "--site", "x", d.profile], capture_output=True, text=True)
    expect(r2.returncode == 2 and "--sizes" in r2.stderr, f"--site alone: {r2.stderr!r}")
    r3 = sizes_output(d.profile, "--site", "no_such_site", rc=1)
    expect("no_such_site" in r3.stderr and len(r3.stderr.splitlines()) == 1, r3.stderr)
    r4 = sizes_output(d.profile, fmt="pprof", rc=2)
    expect("tree, csv or json" in r4.stderr, r4.stderr)


def large_site_runs(extra=None):
    prog = rt.c_program("large_site")
    env = {"MALLOC_FREQ_SEED": "11"}
    env.update(extra or {})
    r = rt.run_ok([prog], sample=None, extra_env=env)
    expect_eq(r.stdout, "large_site done\n", "program output")
    return r


LARGE_SITES = {"site_small_a": (3000000, 32), "site_small_b": (2000000, 100),
               "site_huge": (10, 8 << 20)}


@rt.test
def test_large_allocations_recorded_exactly():
    """Ten 8 MiB calls among 5 million small ones: in the default mode (MALLOC_FREQ_LARGE
    64 KiB) site_huge's calls and bytes are exact and shown without ~; the small sites stay
    unbiased: within 4 standard errors of the every-call run, bytes with their own error.
    With MALLOC_FREQ_LARGE=0 nothing guarantees site_huge: sampled by calls, it is an
    estimate if it is there at all."""
    prog = rt.c_program("large_site")
    exact = rt.run_ok([prog], sample="1", extra_env={"MALLOC_FREQ_UNWIND": "fp"})
    rt.expect_sites(rt.csv_rows(exact.profile),
                    {s: (n, n * size) for s, (n, size) in LARGE_SITES.items()})
    r = large_site_runs()
    rows = rt.csv_rows(r.profile)
    calls, nbytes, samples = rt.site_totals(rows, "site_huge")
    expect_eq((calls, nbytes, samples), (10, 10 * (8 << 20), 10), "site_huge in the default mode")
    tree = rt.tree_text(r.profile, threshold=0)
    top = {e.name: e for e in rt.tree_lines(tree) if e.top}
    expect("site_huge" in top, f"site_huge is not in the tree:\n{tree}")
    expect(top["site_huge"].error is None and top["site_huge"].bytes_error is None
           and "~" not in [l for l in tree.splitlines() if "site_huge" in l][0],
           f"site_huge is not shown exact: {[l for l in tree.splitlines() if 'site_huge' in l]}")
    # Its entry says why: every sample was recorded for its size.
    huge = [e for e in rt.file_entries_full(r.profile) if e["calls"] == 10 and e["large"] == 10]
    expect_eq(len(huge), 1, "entries with 10 calls, all recorded for their size")
    entries = rt.file_entries_full(r.profile)
    bad = []
    for site in ("site_small_a", "site_small_b"):
        known, size = LARGE_SITES[site]
        calls, nbytes, samples = rt.site_totals(rows, site)
        (e,) = [e for e in entries if (e["calls"], e["samples"]) == (calls, samples)]
        expect_eq(e["large"], 0, f"{site}: samples recorded for their size")
        se = math.sqrt(max(e["calls_sq"] - calls, 1))
        if abs(calls - known) > 4 * se:
            bad.append(f"{site}: {calls} calls, known {known}, SE {se:.0f}")
        bse = math.sqrt(e["bytes_var"])
        expect(abs(bse - se * size) <= 1e-6 * bse + 1, f"{site}: bytes SE {bse} vs {se} * {size}")
        rel = 100.0 * bse / nbytes
        want = f"{rel:.1f}%" if rel < 9.95 else f"{rel:.0f}%"
        expect_eq(top[site].bytes_error, want, f"{site}'s bytes ± in the tree")
    expect(not bad, "; ".join(bad))
    # Off: site_huge, if sampled at all, is an estimate.
    off = large_site_runs({"MALLOC_FREQ_LARGE": "0"})
    tree = rt.tree_text(off.profile, threshold=0)
    top = {e.name: e for e in rt.tree_lines(tree) if e.top}
    if "site_huge" in top:
        expect(top["site_huge"].error is not None, f"site_huge exact with MALLOC_FREQ_LARGE=0")
    expect(all(e["large"] == 0 for e in rt.file_entries_full(off.profile)),
           "MALLOC_FREQ_LARGE=0 recorded calls for their size")


@rt.test
def test_large_threshold_setting():
    """MALLOC_FREQ_LARGE=1000 records site_spread's calls of 1,000 bytes and more exactly
    (weight 1) and the process file says so; the histogram stays exact."""
    prog = rt.c_program("size_classes")
    glibc = glibc_calls(rt.run_ok([prog], sample="1").profile)
    r = rt.run_ok([prog], sample="100000", extra_env={"MALLOC_FREQ_LARGE": "1000",
                                                       "MALLOC_FREQ_SEED": "5"})
    with open(rt.process_files(r.profile)[0], "rb") as f:
        data = f.read()
    expect_eq(struct.unpack_from("<Q", data, PROCESS_LARGE_BYTES)[0], 1000,
              "large_bytes in the process file")
    large = sum(e["large"] for e in rt.file_entries_full(r.profile))
    calls = size_classes_calls(glibc)
    want = sum(n for s, n in calls if s >= 1000)
    expect_eq(large, want, "calls recorded for their size (>= 1000 bytes)")
    expect_eq(csv_histogram(r.profile), expected_histogram(calls),
              "the histogram with MALLOC_FREQ_LARGE=1000")


# struct mf_process_header.large_bytes: after exe[256] and exact_recorded
PROCESS_LARGE_BYTES = 80 + 256 + 8
