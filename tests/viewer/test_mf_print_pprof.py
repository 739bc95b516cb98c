"""mf_print's pprof output and profile comparison (--format pprof, --save, --base).

pprof files are checked with the real consumer: Debian's `go tool pprof` (golang-go, which
`scripts/ensure_deps.sh test` installs). Known counts come from tests/programs/exact_sites.c
(EXACT_SITES) and tests/programs/diff_sites.c, run twice with one site's count doubled."""

import csv
import gzip
import io
import os
import random
import re
import resource
import select
import shutil
import subprocess

import harness as rt
from harness import expect, expect_eq

GO_TIMEOUT = 120

# tests/programs/diff_sites.c: site -> (calls, bytes per call); site_changing makes N calls.
DIFF_SITES = {"site_steady": (20000, 24), "site_two_callers": (20000, 16), "site_small": (300, 8)}
DIFF_CHANGING_SIZE = 64


# ---- go tool pprof ---------------------------------------------------------------------

def pprof(args):
    """go tool pprof's standard output for args; it must succeed."""
    go = shutil.which("go")
    rt.need(go, "no `go` on PATH: `make deps-test` installs Debian's golang-go")
    # A home of its own: pprof keeps nothing there for local files, but must not need one.
    env = dict(os.environ, HOME=rt.fresh_dir())
    r = subprocess.run([go, "tool", "pprof"] + args, capture_output=True, text=True,
                       timeout=GO_TIMEOUT, env=env)
    expect(r.returncode == 0, f"go tool pprof {' '.join(args)} exited {r.returncode}: "
                              f"{r.stderr.strip()[-800:]}")
    return r.stdout


_TOP_LINE = re.compile(r"^\s*(-?\d+)[A-Za-z]*\s+-?[\d.]+%\s+-?[\d.]+%\s+(-?\d+)[A-Za-z]*\s+"
                       r"-?[\d.]+%\s+(.+?)\s*$")


def top(args):
    """-top rows as [(flat, cum, name)], and the total it states (`... of N total`)."""
    out = pprof(["-top", "-nodefraction=0", "-edgefraction=0"] + args)
    m = re.search(r"of (-?\d+)[A-Za-z]* total", out)
    expect(m, f"no total in go tool pprof -top's output: {out[:600]!r}")
    rows = [(int(x.group(1)), int(x.group(2)), x.group(3))
            for x in map(_TOP_LINE.match, out.splitlines()) if x]
    expect(rows, f"no rows in go tool pprof -top's output: {out[:600]!r}")
    return rows, int(m.group(1))


def flat_by_name(rows):
    flat = {}
    for f, _, name in rows:
        flat[name] = flat.get(name, 0) + f
    return flat


def traces(path, index="calls"):
    """-traces as [(value, [frames innermost first], {label: value})]."""
    out = pprof(["-traces", f"-sample_index={index}", path])
    result = []
    for block in re.split(r"\n-+\+-+\n", out)[1:]:
        labels, value, frames = {}, None, []
        for line in block.splitlines():
            if not line.strip():
                continue
            m = re.match(r"^\s*(-?\d+)\s+(\S.*)$", line)
            if value is None and m:
                value = int(m.group(1))
                frames.append(m.group(2).strip())
            elif value is None:
                key, _, v = line.strip().partition(":")
                labels[key.strip()] = v.strip()
            else:
                frames.append(line.strip())
        if value is not None:
            frames = [re.sub(r" \((partial-)?inline\)$", "", f) for f in frames]
            result.append((value, frames, labels))
    expect(result, f"no traces in go tool pprof -traces' output: {out[:600]!r}")
    return result


def source_line(program, text):
    """The 1-based number of the one line of tests/programs/<program> that contains text."""
    with open(os.path.join(rt.PROGRAMS, program)) as f:
        hits = [i + 1 for i, line in enumerate(f) if text in line]
    expect_eq(len(hits), 1, f"lines of {program} with {text!r}")
    return hits[0]


def raw_locations(out):
    """go tool pprof -raw's locations: address -> their lines' text."""
    text = out.split("\nLocations\n")[1].split("\nMappings\n")[0]
    locs, addr = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s*\d+: (0x[0-9a-f]+) M=\d+ ?(.*)$", line)
        if m:
            addr = m.group(1)
            locs[addr] = m.group(2).strip()
        elif addr:
            locs[addr] += " | " + line.strip()
    return locs


def pb_encode(fields):
    return b"".join(rt.pb_field(num, v) for num, _, v in fields)


def strip_lines(raw):
    """The profile without its locations' lines and its mappings' has_* flags, as a profile
    of addresses only."""
    out = []
    for num, wire, v in rt.pb_fields(raw):
        if num == 4:  # Location: drop its Lines
            v = pb_encode([f for f in rt.pb_fields(v) if f[0] != 4])
        elif num == 3:  # Mapping: drop has_functions .. has_inline_frames
            v = pb_encode([f for f in rt.pb_fields(v) if f[0] < 7])
        out.append((num, wire, v))
    return pb_encode(out)


# ---- mf_print ------------------------------------------------------------------------------

def save(profile, path, extra=()):
    r = rt.mf_print(["--save", path, profile] + list(extra))
    expect(r.stderr == "", f"mf_print --save wrote to stderr: {r.stderr.strip()!r}")
    expect(r.stdout.startswith(f"saved {path} ("), f"mf_print --save said {r.stdout!r}")
    expect_eq(oct(os.stat(path).st_mode & 0o777), oct(0o600), f"mode of {path} (made anew)")
    return path


def diff_rows(old, new, extra=()):
    """mf_print --base old --format csv new, as dicts; stderr must be empty."""
    r = rt.mf_print(["--base", old, "--format", "csv", new] + list(extra))
    expect(r.stderr == "", f"mf_print --base wrote to stderr: {r.stderr.strip()!r}")
    reader = csv.DictReader(io.StringIO(r.stdout))
    expect_eq(reader.fieldnames, ["level", "significant", "calls_change", "calls_error",
                                  "bytes_change", "old_calls", "new_calls", "old_bytes",
                                  "new_bytes", "old_samples", "new_samples", "stack",
                                  "locations"], "comparison CSV header")
    rows = list(reader)
    for row in rows:
        for k in ("calls_change", "calls_error", "bytes_change", "old_calls", "new_calls",
                  "old_bytes", "new_bytes", "old_samples", "new_samples"):
            row[k] = int(row[k])
        row["frames"] = [rt.function_name(f) for f in row["stack"].split(";")]
    return rows, r.stdout


def diff_sites_runs(sample="1", seeds=(None, None)):
    """diff_sites run with N = 20,000 and 40,000 (site_changing doubled); each run's counts are
    checked against its CSV first (exactly, or bytes = calls x size when sampled)."""
    prog = rt.c_program("diff_sites")
    runs = []
    for n, seed in zip((20000, 40000), seeds):
        extra = {"MALLOC_FREQ_SEED": seed} if seed else None
        r = rt.run_ok([prog, str(n)], sample=sample, extra_env=extra)
        expect_eq(r.stdout, "diff_sites done\n", "diff_sites output")
        rows = rt.csv_rows(r.profile)
        sites = dict(DIFF_SITES, site_changing=(n, DIFF_CHANGING_SIZE))
        if sample == "1":
            rt.expect_sites(rows, {s: (c, c * size) for s, (c, size) in sites.items()})
        else:
            for site, (_, size) in sites.items():
                calls, nbytes, _ = rt.site_totals(rows, site)
                expect_eq(nbytes, calls * size, f"{site}'s estimated bytes vs calls x {size}")
        runs.append(r)
    return runs


def expect_only_changing_significant(rows, exact):
    sites = {r["frames"][0]: r for r in rows if r["level"] == "site"}
    for site in list(DIFF_SITES) + ["site_changing"]:
        expect(site in sites, f"no site row for {site}: {sorted(sites)}")
    sig = sorted(s for s, r in sites.items() if r["significant"] == "yes")
    expect_eq(sig, ["site_changing"], "sites that changed significantly")
    sig_stacks = [r["frames"] for r in rows if r["level"] == "stack" and r["significant"] == "yes"]
    expect_eq(len(sig_stacks), 1, "stacks that changed significantly")
    expect_eq(sig_stacks[0][:2], ["site_changing", "main"], "the stack that changed")
    ch = sites["site_changing"]
    if exact:
        expect_eq((ch["old_calls"], ch["new_calls"], ch["calls_change"], ch["calls_error"]),
                  (20000, 40000, 20000, 0), "site_changing old, new, change, error")
        expect_eq(ch["bytes_change"], 20000 * DIFF_CHANGING_SIZE, "site_changing's bytes change")
        for site, (calls, size) in DIFF_SITES.items():
            r = sites[site]
            expect_eq((r["old_calls"], r["new_calls"], r["calls_change"], r["bytes_change"],
                       r["calls_error"]), (calls, calls, 0, 0, 0), f"{site} in the comparison")
    else:
        for site, r in sites.items():
            if site in DIFF_SITES or site == "site_changing":
                expect(r["calls_error"] > 0, f"{site}: an estimate with no error: {r}")
        # An estimate of +20,000, within three of its standard errors, and far beyond them.
        expect(abs(ch["calls_change"] - 20000) <= 3 * ch["calls_error"],
               f"site_changing changed by {ch['calls_change']} ± {ch['calls_error']}")
        expect(ch["calls_change"] > 3 * ch["calls_error"], f"site_changing: {ch}")
    # Rows are sorted by the size of the change: the site that changed comes first.
    expect_eq(rows[0]["frames"][0], "site_changing", "first row of the comparison")
    # Each site's stacks add up to it.
    for site, r in sites.items():
        stacks = [x for x in rows if x["level"] == "stack" and x["frames"][0] == site]
        for k in ("calls_change", "old_calls", "new_calls", "old_bytes", "new_bytes"):
            expect_eq(sum(x[k] for x in stacks), r[k], f"{site}: {k} of its stacks")


def expect_tree_marks(text, rows):
    """The table marks (*) the site that changed and its stack, nothing else, and its verdict
    counts the CSV's rows."""
    marked = [line for line in text.splitlines() if line.startswith("* ")]
    expect_eq(len(marked), 2, f"lines marked * in the comparison table:\n{text}")
    expect("site_changing (diff_sites.c:" in marked[0], f"first marked line: {marked[0]!r}")
    # The stack line: its callers down to main, where stacks start (start-up frames cut).
    expect(re.search(r"← main$", marked[1]), f"second marked line: {marked[1]!r}")
    nsites = sum(r["level"] == "site" for r in rows)
    nstacks = sum(r["level"] == "stack" for r in rows)
    expect(f"1 of {nsites} sites and 1 of {nstacks} stacks changed" in text,
           f"verdict of the comparison table:\n{text}")


def tree_diff(old, new, extra=()):
    r = rt.mf_print(["--base", old, new, "--threshold", "0"] + list(extra))
    expect(r.stderr == "", f"mf_print --base wrote to stderr: {r.stderr.strip()!r}")
    return r.stdout


# ---- pprof output -----------------------------------------------------------------------

@rt.test
def test_pprof_exact_sites_read_by_go_tool_pprof():
    r = rt.run_ok([rt.c_program("exact_sites")])
    rows = rt.csv_rows(r.profile)
    rt.expect_sites(rows, rt.EXACT_SITES)
    total = rt.csv_total(rows)
    expect_eq(total, rt.exact_total_calls(r.profile), "CSV total vs the thread headers")
    pb = os.path.join(r.outdir, "exact.pb.gz")
    out = rt.mf_print(["--format", "pprof", "-o", pb, r.profile])
    expect_eq((out.stdout, out.stderr), ("", ""), "mf_print --format pprof -o's output")
    with open(pb, "rb") as f:
        expect_eq(f.read(2), b"\x1f\x8b", "the pprof file's first bytes (gzip)")

    # -top: each site's own (flat) calls and bytes, and the total, are the known numbers.
    calls, calls_total = top(["-sample_index=calls", pb])
    nbytes, bytes_total = top(["-sample_index=bytes", "-unit=B", pb])
    flat_calls, flat_bytes = flat_by_name(calls), flat_by_name(nbytes)
    for site, (c, b) in rt.EXACT_SITES.items():
        expect_eq(flat_calls.get(site), c, f"go tool pprof -top: {site}'s calls")
        expect_eq(flat_bytes.get(site), b, f"go tool pprof -top -sample_index=bytes: {site}")
    expect_eq(calls_total, total, "go tool pprof's total calls vs mf_print's CSV total")
    expect_eq(bytes_total, sum(row.bytes for row in rows), "go tool pprof's total bytes vs CSV")
    # The default sample type is calls.
    expect_eq(top([pb])[1], total, "go tool pprof's total with the default sample index")

    # -traces: one trace per stack, with the program's name and pid; merged by function names
    # they are the CSV's rows, number for number.
    ts = traces(pb)
    expect_eq(sum(v for v, _, _ in ts), total, "sum of go tool pprof -traces vs CSV total")
    for v, frames, labels in ts:
        expect_eq(labels.get("program"), "exact_sites", f"program label of {frames[0]}")
        expect_eq(labels.get("pid"), str(r.pid), f"pid label of {frames[0]}")
    for site, (c, _) in rt.EXACT_SITES.items():
        expect_eq(sum(v for v, f, _ in ts if f[0] == site), c, f"-traces: {site}'s calls")
    work = sorted((v, f.count("descend")) for v, f, _ in ts if f[0] == "site_thread_work")
    expect_eq(work, [(250, 1), (500, 6), (750, 11), (1000, 16)],
              "site_thread_work's traces (calls, descend frames)")
    expect_eq(traces_by_names(pb), csv_by_names(rows),
              "go tool pprof -traces merged by function names vs mf_print's CSV rows")


@rt.test
def test_pprof_lines_are_the_call_lines():
    r = rt.run_ok([rt.c_program("exact_sites")])
    pb = os.path.join(r.outdir, "exact.pb.gz")
    rt.mf_print(["--format", "pprof", "-o", pb, r.profile])
    rows, _ = top(["-lines", "-sample_index=calls", pb])
    lines = {}  # function -> {line: (flat, cum)}
    for flat, cum, text in rows:
        m = re.match(r"^(\S+) (\S*exact_sites\.c):(\d+)$", text)
        if m:
            f, c = lines.setdefault(m.group(1), {}).get(int(m.group(3)), (0, 0))
            lines[m.group(1)][int(m.group(3))] = (f + flat, c + cum)
    calls_at = {"site_malloc": "release(malloc(24));", "site_calloc": "release(calloc(10, 8));",
                "site_realloc": "p = realloc(p, 8 * (size_t)i);",
                "site_posix_memalign": "if (posix_memalign(&p, 64, 100) == 0)",
                "site_aligned_alloc": "release(aligned_alloc(32, 64));",
                "site_memalign": "release(memalign(128, 40));",
                "site_valloc": "release(valloc(10));", "site_pvalloc": "release(pvalloc(5));",
                "site_deep": "release(malloc(1000));", "site_thread_work": "release(malloc(48));",
                "site_lingering": "release(malloc(7));"}
    for site, text in calls_at.items():
        want = source_line("exact_sites.c", text)
        calls = rt.EXACT_SITES[site][0]
        expect_eq(lines.get(site), {want: (calls, calls)}, f"-lines: {site}'s line (flat, cum)")
    # main's lines are its calls of descend, each with the calls of the site it leads to.
    for site, levels in rt.EXACT_DESCEND.items():
        want = source_line("exact_sites.c", f"descend({levels - 1}, {site}, ")
        expect_eq(lines["main"].get(want), (0, rt.EXACT_SITES[site][0]),
                  f"-lines: main's call towards {site} (flat, cum)")
    # descend calls the site on one line and itself on another.
    expect_eq(set(lines["descend"]), {source_line("exact_sites.c", "descend(levels - 1, site, n);"),
                                      source_line("exact_sites.c", "site(n);")}, "descend's lines")
    # The addresses and mappings are right too: with the lines taken out of the file, pprof
    # symbolizing the addresses itself (the program is here) finds the program's locations'
    # functions, files and call lines as mf_print did.
    ours = raw_locations(pprof(["-raw", pb]))
    bare = os.path.join(r.outdir, "bare.pb.gz")
    with open(pb, "rb") as f, open(bare, "wb") as g:
        g.write(gzip.compress(strip_lines(gzip.decompress(f.read()))))
    theirs = raw_locations(pprof(["-raw", "-symbolize=force", bare]))
    found = {k: v for k, v in theirs.items() if "exact_sites.c:" in v}
    expect(len(found) >= 20, f"pprof symbolized {len(found)} locations in exact_sites: {theirs}")
    for k, v in found.items():
        expect_eq(v, ours[k], f"location at {k} symbolized by pprof vs by mf_print")


def traces_by_names(pb):
    merged = {}
    for v, frames, _ in traces(pb):
        key = tuple(rt.function_name(f) for f in frames)
        merged[key] = merged.get(key, 0) + v
    return merged


def csv_by_names(rows):
    return {tuple(rt.function_name(f) for f in row.stack): row.calls for row in rows}


@rt.test
def test_pprof_pseudo_frames_as_in_the_csv():
    # [not profiled] (a table that could not grow under `ulimit -f`) and [deeper frames not
    # recorded] (MALLOC_FREQ_DEPTH=8) are frames in pprof as in the CSV; a snapshot with them
    # compares to its own directory without a change.
    prog = rt.c_program("many_stacks")
    outdir = rt.fresh_dir()
    limit = 256 * 1024
    p = subprocess.run([prog], env=rt.profiled_env(outdir), cwd=outdir, capture_output=True,
                       timeout=rt.TIMEOUT,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    expect_eq(p.returncode, 0, f"many_stacks under `ulimit -f 256`: {p.stderr[-400:]!r}")
    dirs = [d for d in os.listdir(outdir) if d.startswith("malloc_freq.")]
    expect_eq(len(dirs), 1, "profile directories of many_stacks")
    full = os.path.join(outdir, dirs[0])
    deep = rt.run_ok([rt.c_program("exact_sites")], extra_env={"MALLOC_FREQ_DEPTH": "8"})
    for profile, pseudo in ((full, "[not profiled]"),
                            (deep.profile, "[deeper frames not recorded]")):
        rows = rt.csv_rows(profile)
        expect(any(pseudo in row.stack for row in rows), f"no {pseudo} in the CSV of {profile}")
        pb = save(profile, os.path.join(outdir, "pseudo.pb.gz"))
        expect_eq(traces_by_names(pb), csv_by_names(rows),
                  f"{pseudo}: go tool pprof -traces merged by function names vs the CSV rows")
        changes, _ = diff_rows(pb, profile)
        expect_eq([r["stack"] for r in changes if r["calls_change"] or r["bytes_change"]], [],
                  f"{pseudo}: snapshot vs its own directory, rows that changed")
        # The snapshot names the same process ([not profiled] has no labels of its own).
        sides = re.findall(r"^  (?:old|new) +\S+(?: \(pprof\))?: (.*)$",
                           tree_diff(pb, profile), re.M)
        expect(len(sides) == 2 and sides[0] == sides[1], f"{pseudo}: the sides' programs {sides}")


@rt.test
def test_pprof_no_trim_keeps_the_allocator_frames():
    # --no-trim: the plumbing frames (the profiler's, malloc & co.) stay, in pprof as in CSV.
    r = rt.run_ok([rt.c_program("exact_sites")])
    pb = os.path.join(r.outdir, "notrim.pb.gz")
    rt.mf_print(["--format", "pprof", "--no-trim", "-o", pb, r.profile])
    rows = rt.csv_rows(r.profile, extra=["--no-trim"])
    ts = traces(pb)
    expect_eq(traces_by_names(pb), csv_by_names(rows),
              "--no-trim: go tool pprof -traces vs mf_print's CSV rows")
    # The sites are no longer innermost: the profiler's and allocator's frames are inside them.
    for site in rt.EXACT_SITES:
        inner = {f[0] for _, f, _ in ts if site in f}
        expect(inner and site not in inner, f"--no-trim: innermost frames of {site}: {inner}")
    # A snapshot is compared as it was written: its frames cannot be trimmed again or back.
    rc = rt.mf_print(["--base", pb, r.profile], check=False)
    expect_eq(rc.returncode, 2, "--base of a --no-trim snapshot without --no-trim: exit status")
    expect_eq(rc.stderr.strip().count("\n"), 0, f"one line: {rc.stderr!r}")
    expect("--no-trim" in rc.stderr, f"says why: {rc.stderr!r}")
    diff, _ = diff_rows(pb, r.profile, extra=["--no-trim"])
    expect(all(x["calls_change"] == 0 for x in diff), "a --no-trim snapshot vs its own run")


@rt.test
def test_go_tool_pprof_diff_base_on_two_saved_profiles():
    old, new = diff_sites_runs()
    old_pb = save(old.profile, os.path.join(old.outdir, "old.pb.gz"))
    new_pb = save(new.profile, os.path.join(new.outdir, "new.pb.gz"))
    rows, total = top(["-sample_index=calls", "-diff_base", old_pb, new_pb])
    flat = flat_by_name(rows)
    expect_eq(flat.get("site_changing"), 20000, "go tool pprof -diff_base: site_changing")
    for site in DIFF_SITES:
        expect_eq(flat.get(site, 0), 0, f"go tool pprof -diff_base: {site}")
    expect_eq(total, rt.exact_total_calls(old.profile), "go tool pprof -diff_base's total (OLD's)")
    # mf_print's own comparison as pprof: NEW plus OLD negated, labelled; pprof sees the same.
    d_pb = os.path.join(new.outdir, "diff.pb.gz")
    r = rt.mf_print(["--base", old.profile, "--format", "pprof", "-o", d_pb, new.profile])
    expect_eq((r.stdout, r.stderr), ("", ""), "mf_print --base --format pprof's output")
    ours, ours_total = top(["-sample_index=calls", d_pb])
    expect_eq(sorted(ours), sorted(rows), "-top of mf_print --base --format pprof vs -diff_base")
    expect_eq(ours_total, total, "total of mf_print's comparison vs -diff_base")
    sig, _ = top(["-sample_index=calls", "-tagfocus=change=significant", d_pb])
    expect_eq({n: f for f, _, n in sig if f}, {"site_changing": 20000},
              "-tagfocus=change=significant: the sites with calls of their own")
    # Such a file is a comparison, not a profile: --base refuses it in one line.
    rc = rt.mf_print(["--base", d_pb, new.profile], check=False)
    expect_eq((rc.returncode, rc.stdout), (1, ""), "--base of a comparison: status, output")
    expect(rc.stderr.count("\n") == 1 and "comparison" in rc.stderr, f"says so: {rc.stderr!r}")


# ---- --base --------------------------------------------------------------------------------

@rt.test
def test_base_exact_doubled_site_is_the_one_change():
    old, new = diff_sites_runs()
    rows, _ = diff_rows(old.profile, new.profile)
    expect_only_changing_significant(rows, exact=True)
    expect_tree_marks(tree_diff(old.profile, new.profile), rows)
    # The default threshold (1 % of the larger side's calls) folds the sites that did not move.
    text = rt.mf_print(["--base", old.profile, new.profile]).stdout
    expect(re.search(r"… 3 more sites changed by under 1% of calls \(0 of them significantly\)",
                     text), f"fold line of the comparison table:\n{text}")
    # Both sides' exact totals in the header.
    expect(re.search(r"old .*\n\s+60,300 calls \(exact\)", text) and
           re.search(r"new .*\n\s+80,300 calls \(exact\)", text), f"header:\n{text}")
    expect("change     +20,000 calls (+33.2%)" in text, f"change line:\n{text}")


@rt.test
def test_base_sampled_doubled_site_is_the_one_significant_change():
    # 1 in 100 calls sampled, with independent seeds: every number is an estimate with an
    # error bar; only the doubled site moves beyond its error bars.
    old, new = diff_sites_runs(sample="100", seeds=("1", "2"))
    rows, text = diff_rows(old.profile, new.profile)
    expect_only_changing_significant(rows, exact=False)
    moved = [r for r in rows if r["level"] == "site" and r["calls_change"] != 0 and
             r["frames"][0] != "site_changing"]
    expect(moved, "no unchanged site moved at all: the two runs' samples are not independent")
    expect_tree_marks(tree_diff(old.profile, new.profile), rows)
    # A snapshot keeps the variance: comparing saved pprof files says exactly the same.
    old_pb = save(old.profile, os.path.join(old.outdir, "old.pb.gz"))
    new_pb = save(new.profile, os.path.join(new.outdir, "new.pb.gz"))
    expect_eq(diff_rows(old_pb, new.profile)[1], text, "CSV: --base OLD.pb.gz NEW vs OLD NEW")
    expect_eq(diff_rows(old_pb, new_pb)[1], text, "CSV: --base OLD.pb.gz NEW.pb.gz vs OLD NEW")
    # Exact totals survive the snapshot too.
    expect(re.search(r"old .*\n\s+60,300 calls \(exact\)", tree_diff(old_pb, new_pb)),
           "exact total of a saved sampled profile")


@rt.test
def test_base_snapshot_against_its_own_run_changes_nothing():
    old, _ = diff_sites_runs(sample="100", seeds=("3", "4"))
    pb = save(old.profile, os.path.join(old.outdir, "self.pb.gz"))
    rows, _ = diff_rows(pb, old.profile)
    for r in rows:
        expect_eq((r["calls_change"], r["bytes_change"], r["significant"]), (0, 0, "no"),
                  f"snapshot vs its own directory: {r['stack']}")
        expect_eq(r["old_samples"], r["new_samples"], f"samples of {r['stack']}")


@rt.test
def test_save_snapshot_of_a_running_process():
    # The use --save is for: keep a snapshot of a live process, compare later.
    prog = rt.c_program("live_phases")
    outdir = rt.fresh_dir()
    p = subprocess.Popen([prog], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=rt.profiled_env(outdir), cwd=outdir)
    try:
        def said(word):
            ready, _, _ = select.select([p.stdout], [], [], rt.TIMEOUT)
            expect(ready, f"live_phases did not say {word!r}")
            expect_eq(p.stdout.readline(), word.encode() + b"\n", "live_phases said")
        said("one")
        profile = os.path.join(outdir, f"malloc_freq.{p.pid}")
        snap = save(profile, os.path.join(outdir, "one.pb.gz"))
        p.stdin.write(b"\n")
        p.stdin.flush()
        said("two")
        rows, _ = diff_rows(snap, profile)
        text = tree_diff(snap, profile)
        p.stdin.close()
        p.wait(timeout=rt.TIMEOUT)
        expect_eq(p.returncode, 0, "live_phases' exit status")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    sites = {r["frames"][0]: r for r in rows if r["level"] == "site"}
    expect_eq({s: (r["old_calls"], r["new_calls"], r["old_bytes"], r["new_bytes"],
                   r["significant"]) for s, r in sites.items() if s.startswith("site_phase")},
              {"site_phase_one": (1000, 1250, 32000, 40000, "yes"),
               "site_phase_two": (0, 500, 0, 64000, "yes")}, "snapshot at phase one vs two")
    others = sorted(s for s, r in sites.items()
                    if r["calls_change"] and not s.startswith("site_phase"))
    expect_eq(others, [], "other sites that changed between the phases")
    expect(re.search(r"^\* +\+500 +0 +500 +new +\+62\.5 KiB  site_phase_two", text, re.M),
           f"site_phase_two in the table:\n{text}")


# ---- bad input -----------------------------------------------------------------------------

def foreign_pprof():
    """A valid pprof profile of another tool: a Go heap profile's sample types."""
    strings = ["", "alloc_objects", "count", "alloc_space", "bytes", "main.f"]
    p = rt.pb_field(1, rt.pb_field(1, 1) + rt.pb_field(2, 2)) + rt.pb_field(1, rt.pb_field(1, 3) + rt.pb_field(2, 4))
    p += rt.pb_field(2, rt.pb_field(1, rt.pb_varint(1)) + rt.pb_field(2, rt.pb_varint(5) + rt.pb_varint(80)))
    p += rt.pb_field(4, rt.pb_field(1, 1) + rt.pb_field(4, rt.pb_field(1, 1)))
    p += rt.pb_field(5, rt.pb_field(1, 1) + rt.pb_field(2, 5))
    for s in strings:
        p += rt.pb_field(6, s.encode())
    return gzip.compress(p)


@rt.test
def test_base_bad_pprof_files_get_one_line_and_lose_nothing():
    old, new = diff_sites_runs()
    good = save(old.profile, os.path.join(old.outdir, "good.pb.gz"))
    with open(good, "rb") as f:
        data = f.read()
    raw = gzip.decompress(data)
    d = rt.fresh_dir()
    comparison = os.path.join(d, "comparison.pb.gz")
    rt.mf_print(["--base", old.profile, "--format", "pprof", "-o", comparison, new.profile])
    cases = {
        "truncated.pb.gz": (data[:len(data) // 2], "truncated gzip data"),
        "garbage.pb.gz": (bytes(random.Random(5).randrange(256) for _ in range(4000)),
                          "not a pprof profile"),
        "empty.pb.gz": (b"", "is empty"),
        "gzip_of_garbage.pb.gz": (gzip.compress(b"\x0a\xff\xff\xff\x7f garbage"),
                                  "not a pprof profile"),
        "cut_profile.pb.gz": (gzip.compress(raw[:len(raw) * 2 // 3]), "damaged"),
        "damaged_gzip.pb.gz": (data[:10] + bytes(x ^ 0x55 for x in data[10:40]) + data[40:],
                               "damaged gzip data"),
        "foreign.pb.gz": (foreign_pprof(), "not one mf_print wrote"),
    }
    out_csv = os.path.join(d, "report.csv")
    snap = os.path.join(d, "snap.pb.gz")
    for name, (content, says) in list(cases.items()) + [("comparison.pb.gz", (None, "comparison"))]:
        path = os.path.join(d, name)
        if content is not None:
            with open(path, "wb") as f:
                f.write(content)
        for old_new in ([path, new.profile], [new.profile, path]):
            for fmt in (["--format", "csv"], ["--format", "csv", "-o", out_csv], ["--save", snap]):
                with open(out_csv, "w") as f:
                    f.write("keep\n")
                with open(snap, "wb") as f:
                    f.write(data)
                r = rt.mf_print(["--base", old_new[0]] + fmt + [old_new[1]], check=False)
                what = f"{name} as {'OLD' if old_new[0] == path else 'NEW'} {' '.join(fmt)}"
                expect_eq((r.returncode, r.stdout), (1, ""), f"{what}: exit status, output")
                expect(r.stderr.count("\n") == 1 and r.stderr.startswith(f"mf_print: {path}") and
                       says in r.stderr, f"{what}: one line naming the file: {r.stderr!r}")
                with open(out_csv) as f:
                    expect_eq(f.read(), "keep\n", f"{what}: -o's file")
                with open(snap, "rb") as f:
                    expect(f.read() == data, f"{what}: --save's file was changed")
        with open(path, "rb") as f:
            expect(content is None or f.read() == content, f"{name} was changed")
    expect_eq(sorted(os.listdir(d)), sorted(list(cases) + ["comparison.pb.gz", "report.csv",
                                                           "snap.pb.gz"]),
              "files left in the directory (no temporary file stays)")
    # The good file still compares.
    diff_rows(good, new.profile)


@rt.test
def test_pprof_and_base_usage_errors():
    old, new = diff_sites_runs()
    pb = save(old.profile, os.path.join(old.outdir, "old.pb.gz"))
    for args, says in [
            (["--base", old.profile], "--base OLD needs NEW"),
            (["--base", old.profile, "--format", "json", new.profile], "tree, csv or pprof"),
            (["--save", pb, "--format", "csv", new.profile], "--save writes pprof"),
            (["--save", pb, "-o", pb, new.profile], "give one of them"),
            (["--base", old.profile, old.profile], "both OLD and NEW"),
            (["--base", pb, "--base", old.profile, new.profile], "one pprof file"),
            ([pb], "a pprof file is read by --base")]:
        r = rt.mf_print(args, check=False)
        expect_eq((r.returncode, r.stdout), (2, ""), f"mf_print {' '.join(args)}")
        expect(r.stderr.count("\n") == 1 and says in r.stderr,
               f"mf_print {' '.join(args)}: one line saying {says!r}: {r.stderr!r}")
    help_text = rt.mf_print(["--help"]).stdout
    for opt in ("--base OLD", "--save FILE", "pprof      gzipped profile.proto"):
        expect(opt in help_text, f"--help does not mention {opt!r}")


@rt.test
def test_pprof_and_base_under_sanitizers():
    # An ASan+UBSan build writes pprof and compares in every format without a report; the
    # reader is hand-written: every prefix and 300 random corruptions of a real profile give a
    # comparison or one line, never a sanitizer report.
    exe = os.path.join(rt.OUT, "mf_print_asan_pprof")
    src, inc = rt.mf_print_sources()
    r = subprocess.run(["gcc", "-O1", "-g", "-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra",
                        "-Werror", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        "-o", exe] + inc + src + ["-ldw", "-ldebuginfod", "-lelf", "-liberty", "-lz"],
                       cwd=rt.REPO, capture_output=True, text=True)
    expect(r.returncode == 0, f"cannot build mf_print with sanitizers: {r.stderr[-800:]}")
    old, new = diff_sites_runs(sample="100", seeds=("5", "6"))
    pb = save(old.profile, os.path.join(old.outdir, "old.pb.gz"))
    with open(pb, "rb") as f:
        raw = gzip.decompress(f.read())
    rng = random.Random(12)
    cases = [raw[:n] for n in range(0, len(raw), max(1, len(raw) // 200))]
    for _ in range(300):
        b = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        cases.append(bytes(b))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:exitcode=86",
               UBSAN_OPTIONS="exitcode=86:print_stacktrace=1")
    out_pb = os.path.join(old.outdir, "out.pb.gz")
    for args in (["--format", "pprof", "-o", out_pb, old.profile],
                 ["--format", "pprof", "--no-trim", "-o", out_pb, old.profile],
                 ["--base", old.profile, new.profile],
                 ["--base", pb, "--format", "csv", new.profile],
                 ["--base", pb, "--format", "pprof", "-o", out_pb, new.profile],
                 ["--base", old.profile, "--format", "pprof", "-o", out_pb, pb]):
        r = subprocess.run([exe] + args, capture_output=True, text=True, env=env,
                           timeout=rt.TIMEOUT)
        expect((r.returncode, r.stderr) == (0, ""),
               f"mf_print {' '.join(args)} under sanitizers: {r.returncode} {r.stderr[-1500:]}")
    path = os.path.join(old.outdir, "case.pb")
    status = {}
    for k, data in enumerate(cases):
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run([exe, "--base", path, "--format", "csv", new.profile],
                           capture_output=True, text=True, errors="replace", env=env,
                           timeout=rt.TIMEOUT)
        status[r.returncode] = status.get(r.returncode, 0) + 1
        expect(r.returncode in (0, 1), f"case {k}: exit {r.returncode}: {r.stderr[-1500:]}")
        if r.returncode == 1:
            expect(r.stderr.count("\n") == 1 and r.stdout == "",
                   f"case {k}: not one line: {r.stderr[-800:]!r}")
        else:
            expect(r.stderr == "" and r.stdout.startswith("level,"), f"case {k}: {r.stderr!r}")
    expect(status.get(1, 0) > len(cases) // 2, f"exit statuses {status}: few corruptions seen")
