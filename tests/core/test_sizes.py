"""Sizes: the size histogram every thread keeps from its samples (mf_print --sizes): exact
when every call is recorded, an unbiased estimate with its standard error otherwise; and
size-dependent sampling (MALLOC_FREQ_LARGE: every call of 64 KiB and more recorded with
weight 1, outside the countdown, so those classes and sites are exact in every mode). Real
programs at numbers known from their source (tests/programs/size_classes.c, large_site.c)."""
import csv
import io
import json
import math
import subprocess

import harness as rt
from harness import expect, expect_eq

# tests/programs/size_classes.c: site_spread's sizes and counts (it runs twice: main, worker)
SPREAD = [(0, 3), (1, 5), (2, 7), (3, 11), (4, 13), (5, 2), (7, 3), (8, 17), (12, 4), (15, 6),
          (16, 19), (20, 8), (100, 23), (1000, 29), (1023, 3), (1024, 31), (4095, 5),
          (4096, 37), (65535, 41), (65536, 43), (65537, 2), (100000, 9), (1048576, 7),
          (5000000, 3)]
LARGE = 65536  # MALLOC_FREQ_LARGE's default


def size_class(size):
    """mf_size_class (c_core/mf_format.h): 0 for 0, else 1 + 4e + the two bits below the
    leading one (bit e); every size from 2^48 in class 193."""
    if size == 0:
        return 0
    e = size.bit_length() - 1
    if e >= 48:
        return 193
    m = (size >> (e - 2) if e >= 2 else size << (2 - e)) & 3
    return 1 + 4 * e + m


def class_lo(c):
    if c == 0:
        return 0
    e, m = divmod(c - 1, 4)
    return (4 + m) << (e - 2) if e >= 2 else (4 + m) >> (2 - e)


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
    """{size_min: [calls, bytes, calls_stderr, bytes_stderr]} from --sizes --format csv."""
    text = sizes_output(profile, fmt="csv").stdout
    reader = csv.DictReader(io.StringIO(text))
    expect_eq(reader.fieldnames,
              ["size_min", "size_max", "calls", "calls_stderr", "bytes", "bytes_stderr"],
              "--sizes CSV header")
    return {int(r["size_min"]): [int(r["calls"]), int(r["bytes"]), float(r["calls_stderr"]),
                                 float(r["bytes_stderr"])] for r in reader}


def exact_totals(profile):
    calls = sum(sum(rt.file_totals(f)[0]) for f in rt.thread_files(profile))
    nbytes = sum(sum(rt.file_totals(f)[1]) for f in rt.thread_files(profile))
    return calls, nbytes


@rt.test
def test_size_histogram_exact_when_every_call_is_recorded():
    """MALLOC_FREQ_SAMPLE=1: every call is a sample of weight 1, so the histogram the slow
    path keeps from the samples is the program's, class by class, with no error; it adds up
    to the exact totals. JSON and the text table agree with the CSV."""
    prog = rt.c_program("size_classes")
    r = rt.run_ok([prog], sample="1")
    expect_eq(r.stdout, "size_classes done\n", "program output")
    want = expected_histogram(size_classes_calls(glibc_calls(r.profile)))
    got = csv_histogram(r.profile)
    bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k, [None, None])[:2] != v}
    bad.update({k: (v, None) for k, v in got.items() if k not in want})
    expect(not bad, f"classes (got, want) that differ: {sorted(bad.items())[:6]}")
    expect(all(v[2] == 0 and v[3] == 0 for v in got.values()), "an error at N=1")
    calls, nbytes = exact_totals(r.profile)
    expect_eq((sum(v[0] for v in got.values()), sum(v[1] for v in got.values())),
              (calls, nbytes), "the histogram's totals vs the exact totals")
    doc = json.loads(sizes_output(r.profile, fmt="json").stdout)
    expect(not doc["estimated"] and doc["calls"] == calls and doc["bytes"] == nbytes
           and doc["exact_calls"] == calls and doc["calls_stderr"] == 0,
           f"JSON totals {doc['calls']}, {doc['bytes']}, estimated {doc['estimated']}")
    expect_eq({c["size_min"]: [c["calls"], c["bytes"], c["calls_stderr"], c["bytes_stderr"]]
               for c in doc["classes"]}, got, "JSON classes vs CSV")
    text = sizes_output(r.profile).stdout
    expect("every call recorded: exact" in text and "~" not in text and "±" not in text,
           f"the N=1 table is not shown exact:\n{text}")
    rows = [l for l in text.splitlines() if l.rstrip().endswith("#")]
    expect_eq(len(rows), len(want), "table rows with a bar")
    big = [l for l in rows if l.split()[0] == "24"]
    expect(big and big[0].endswith("#" * 30), f"the biggest class's bar: {big}")


@rt.test
def test_size_histogram_estimated_in_the_default_mode():
    """The default mode samples the worker's million calls: each class is an estimate with
    its standard error, within 4 of them of the N=1 histogram; the classes of 64 KiB and more
    are exact (every such call is recorded, MALLOC_FREQ_LARGE); classes that got no sample
    add up to less than 4 standard errors of the whole; the tree's ~ and ± in the table."""
    prog = rt.c_program("size_classes")
    exact = rt.run_ok([prog], sample="1")
    want = expected_histogram(size_classes_calls(glibc_calls(exact.profile)))
    r = rt.run_ok([prog], sample=None, extra_env={"MALLOC_FREQ_SEED": "7"})
    got = csv_histogram(r.profile)
    doc = json.loads(sizes_output(r.profile, fmt="json").stdout)
    expect(doc["estimated"] and doc["calls_stderr"] > 0, f"default mode not estimated: {doc}")
    bad, missing = [], 0
    for lo, (calls, nbytes) in sorted(want.items()):
        if lo >= LARGE:
            expect_eq(got.get(lo, [0, 0])[:2], [calls, nbytes], f"class {lo}: all recorded")
            expect(got[lo][2] == 0, f"class {lo} has an error")
            continue
        if lo not in got:
            missing += calls
            continue
        c, b, se, bse = got[lo]
        if abs(c - calls) > 4 * se or abs(b - nbytes) > 4 * bse:
            bad.append(f"{lo}: {c} ± {se:.0f} calls (known {calls}), {b} ± {bse:.0f} bytes "
                       f"(known {nbytes})")
    expect(not bad, "classes beyond 4 SE: " + "; ".join(bad))
    expect(not set(got) - set(want), f"classes not in the program: {set(got) - set(want)}")
    expect(missing <= 4 * doc["calls_stderr"],
           f"{missing} calls in classes with no sample, SE of the total {doc['calls_stderr']:.0f}")
    for lo in (24, 896):  # site_bulk's 600,000 calls of 24 bytes and 400,000 of 1,000
        expect(got[lo][2] > 0, f"class {lo} is not an estimate: {got[lo]}")
    calls, _ = exact_totals(r.profile)
    expect(abs(doc["calls"] - calls) <= 4 * doc["calls_stderr"],
           f"the histogram's {doc['calls']} ± {doc['calls_stderr']:.0f} calls vs {calls} exact")
    text = sizes_output(r.profile).stdout
    row24 = [l for l in text.splitlines() if l.split()[:1] == ["24"]]
    expect(row24 and "~" in row24[0] and row24[0].count("±") == 2, f"the 24-byte row: {row24}")
    row_big = [l for l in text.splitlines() if l.startswith("1,048,576")]
    expect(row_big and "~" not in row_big[0] and "±" not in row_big[0],
           f"the 1 MiB row is not exact: {row_big}")
    expect("calls of 64.0 KiB and more all recorded: exact" in text, text)
    # Bad uses: a format it has not; --site, which is gone (no per-stack sizes).
    r4 = sizes_output(r.profile, fmt="pprof", rc=2)
    expect("tree, csv or json" in r4.stderr, r4.stderr)
    r5 = subprocess.run([rt.MF_PRINT, "--sizes", "--site", "x", r.profile], capture_output=True,
                        text=True)
    expect(r5.returncode == 2, f"--site: {r5.returncode} {r5.stderr!r}")


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
    raw = ("--uncalibrated",)  # the estimates as the file holds them, to compare with it
    rows = rt.csv_rows(r.profile, extra=raw)
    calls, nbytes, samples = rt.site_totals(rows, "site_huge")
    expect_eq((calls, nbytes, samples), (10, 10 * (8 << 20), 10), "site_huge in the default mode")
    calibrated = rt.site_totals(rt.csv_rows(r.profile), "site_huge")
    expect_eq(calibrated, (10, 10 * (8 << 20), 10), "site_huge, calibrated: exact stays exact")
    tree = rt.tree_text(r.profile, threshold=0, extra=raw)
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
def test_calls_of_4_gib_and_more_counted_exactly():
    """Calls of 4 GiB and more (site_huge's 256 TiB, refused, and 5 GiB, made) keep the
    totals exact with MALLOC_FREQ_LARGE off (the hot path counts them), at its default and
    set above them, sampled or not, with the frame-pointer walk or the rules. A hook that
    packed a call and its bytes into one word (tried: calls in the top 16 bits, docs/design.md) would carry one call of 256 TiB into its calls."""
    prog = rt.c_program("large_site")
    small = 3000000 * 32 + 2000000 * 100
    for mib, env, samples in ((1 << 28, {"MALLOC_FREQ_LARGE": "0"}, (None, "1", "1000")),
                              (1 << 28, {"MALLOC_FREQ_LARGE": str(1 << 50)}, (None, "1000")),
                              (1 << 28, {}, (None,)),
                              (5 << 10, {"MALLOC_FREQ_LARGE": "0", "MALLOC_FREQ_UNWIND": "fp"},
                               (None, "1000"))):
        for sample in samples:
            r = rt.run_ok([prog, "1", str(mib)], sample=sample,
                          extra_env=dict(env, MALLOC_FREQ_SEED="3"))
            expect_eq(r.stdout, "large_site done\n", "program output")
            calls, nbytes = rt.fn_totals(r.profile)[0]  # malloc
            expect_eq((calls, nbytes), (5000010, small + 10 * (mib << 20)),
                      f"malloc's exact totals, {mib} MiB calls, {env}, sample {sample}")


@rt.test
def test_a_stacks_bytes_past_4_gib_go_on_in_a_wide_entry():
    """A narrow entry counts in 32 bits (c_core/mf_format.h, format 9): the call its bytes
    could not hold makes the stack's wide entry, which takes it and the later ones, and a
    stack whose first call is 4 GiB or more starts wide. site_huge's ten calls, of 1 GiB
    (made) and of 256 TiB (refused, still counted), recorded for their size in the default
    mode and every call at N=1: mf_print gives them exactly, 10 calls of 10 times the size;
    in the file, 1 GiB calls are a narrow entry of 3 calls (3 GiB; a fourth would pass
    2^32 - 1) and a wide one of 7, 256 TiB calls one wide entry of 10."""
    prog = rt.c_program("large_site")
    for mib, split in ((1 << 10, [(False, 3), (True, 7)]), (1 << 28, [(True, 10)])):
        for sample in (None, "1"):
            r = rt.run_ok([prog, "1", str(mib)], sample=sample,
                          extra_env={"MALLOC_FREQ_SEED": "3"})
            expect_eq(r.stdout, "large_site done\n", "program output")
            what = f"{mib} MiB calls, sample {sample}"
            expect_eq(rt.site_totals(rt.csv_rows(r.profile), "site_huge"),
                      (10, 10 * (mib << 20), 10), f"site_huge, {what}")
            (path,) = rt.thread_files(r.profile)
            with open(path, "rb") as f:
                huge = [e for e in rt.thread_file_stacks(f.read()) if e["bytes"] >= mib << 20]
            expect_eq([(e["wide"], e["calls"]) for e in huge], split, f"entries, {what}")
            expect_eq([e["bytes"] for e in huge], [n * (mib << 20) for _, n in split],
                      f"entries' bytes, {what}")


@rt.test
def test_a_loops_bytes_past_4_gib_go_on_in_a_wide_entry():
    """The same at one stack called again and again (repeat_site: 70,000 calls of 65,000
    bytes, under MALLOC_FREQ_LARGE's 64 KiB), each call after the first counted on the
    program's stack into the last entry (mf_sample_again): at N=1 and in the default mode's
    exact stretch the narrow entry takes the first 66,076 calls (4,294,940,000 bytes; one
    more would pass 2^32 - 1) and a wide entry the other 3,924; mf_print gives the site's
    70,000 calls and 4,550,000,000 bytes exactly."""
    prog = rt.c_program("repeat_site")
    for sample in ("1", None):
        r = rt.run_ok([prog, "70000", "65000"], sample=sample)
        expect_eq(r.stdout, "repeat_site done\n", "program output")
        expect_eq(rt.site_totals(rt.csv_rows(r.profile), "site_repeat"),
                  (70000, 70000 * 65000, 70000), f"site_repeat, sample {sample}")
        (path,) = rt.thread_files(r.profile)
        with open(path, "rb") as f:
            mine = [e for e in rt.thread_file_stacks(f.read()) if e["bytes"] >= 65000 * 3900]
        expect_eq([(e["wide"], e["calls"], e["bytes"]) for e in mine],
                  [(False, 66076, 66076 * 65000), (True, 3924, 3924 * 65000)],
                  f"site_repeat's entries, sample {sample}")


@rt.test
def test_large_threshold_setting():
    """MALLOC_FREQ_LARGE=1000 records every call of 1,000 bytes and more exactly (weight 1)
    and the process file says so; at 1 in 100,000 the histogram's classes of those sizes are
    exact, the others sampled."""
    prog = rt.c_program("size_classes")
    glibc = glibc_calls(rt.run_ok([prog], sample="1").profile)
    r = rt.run_ok([prog], sample="100000", extra_env={"MALLOC_FREQ_LARGE": "1000",
                                                       "MALLOC_FREQ_SEED": "5"})
    expect_eq(rt.read_struct(rt.process_files(r.profile)[0], rt.F.process_header, "large_bytes"),
              1000, "large_bytes in the process file")
    large = sum(e["large"] for e in rt.file_entries_full(r.profile))
    calls = size_classes_calls(glibc)
    want = sum(n for s, n in calls if s >= 1000)
    expect_eq(large, want, "calls recorded for their size (>= 1000 bytes)")
    got = csv_histogram(r.profile)
    # 896 - 1,023 holds sizes 1,000 and 1,023 only: all recorded, though the class starts lower
    expected = expected_histogram([(s, n) for s, n in calls if s >= 1000])
    expect_eq({lo: v[:2] for lo, v in got.items() if lo >= 896}, expected,
              "the classes of 1,000 bytes and more with MALLOC_FREQ_LARGE=1000")
    # 896 - 1,023 is still shown as an estimate (sizes 896 - 999 would be sampled)
    expect(all(v[2] == 0 for lo, v in got.items() if lo >= 1024), "an error above 1,023 bytes")

