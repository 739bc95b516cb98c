"""mf_print's formats for tools and scripts (collapsed, CSV, JSON) against the tree, against
each other and against counts known from the programs' source; names that could break a
format (C++ templates and operators, symbols holding ';', control characters, '%', bytes
that are not UTF-8) must come through every one of them.

Each format is read back into a Summary: the totals and, per allocation site (the innermost
frame, as written, followed by " via W" where a wrapper W was folded into it: the tree's
text, the CSV's via column, collapsed's "[via W]" leaf, JSON's via field), calls and bytes. FORMAT_READERS lists the formats that can be read back;
test_formats_agree_exactly checks every one of them."""

import json
import os
import re
import shutil
import subprocess
import unicodedata

import harness as rt


def mf_print_text(profile, *args):
    """mf_print's output for one profile directory, which must be UTF-8, with an empty
    stderr and exit status 0."""
    argv = [rt.MF_PRINT, "--dir", profile] + list(args)
    r = subprocess.run(argv, capture_output=True, timeout=rt.TIMEOUT)
    rt.expect(r.returncode == 0 and not r.stderr,
              f"mf_print {' '.join(args)} exited {r.returncode}: {r.stderr[-500:]!r}")
    try:
        return r.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        raise rt.TestFailure(f"mf_print {' '.join(args)} wrote bytes that are not UTF-8: {e}")


def exact_total_bytes(profile):
    return sum(sum(rt.file_totals(f)[1]) for f in rt.thread_files(profile))


def fmt_bytes(n):
    """mf_print's byte counts for people (util.c, mf_fmt_bytes): "512 B", "23.4 KiB"."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    b, u = float(n), 0
    while b >= 1024.0 and u + 1 < len(units):
        b /= 1024.0
        u += 1
    return f"{b:.0f} B" if u == 0 else f"{b:.1f} {units[u]}"


class Summary:
    """What one format says: total calls and bytes, and {site: [calls, bytes]}. The tree
    shows bytes rounded for people (text like "23.4 KiB"): bytes_text is then True and its
    byte values are that text."""

    def __init__(self, fmt, calls, nbytes, sites, bytes_text=False):
        self.fmt, self.calls, self.bytes, self.sites = fmt, calls, nbytes, sites
        self.bytes_text = bytes_text

    def bytes_as_shown(self, n):
        """n bytes as this format would show them."""
        return fmt_bytes(n) if self.bytes_text else n


def add_site(sites, site, calls, nbytes):
    got = sites.setdefault(site, [0, 0])
    got[0] += calls
    got[1] += nbytes


# ---- collapsed -------------------------------------------------------------------------

# How the tools split a line: flamegraph.pl takes the count with this and then, for
# differential graphs, a second count from what is left; speedscope's importer matches the
# second; inferno splits at the last space.
_FLAMEGRAPH_PL = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")
_SPEEDSCOPE = re.compile(r"^(.*) (\d+)$")


def parse_collapsed(text):
    """--format collapsed as [(frames root first, count)]. Every line must read the same way
    in flamegraph.pl, inferno and speedscope: the frames, exactly one space, an integer; no
    control character or line separator, no empty frame, and no number at the end of the
    frames that flamegraph.pl would take for a second count column."""
    rt.expect(text == "" or text.endswith("\n"), "collapsed output does not end in a newline")
    lines = []
    for line in text[:-1].split("\n") if text else []:
        bad = [c for c in line if unicodedata.category(c) == "Cc" or c in "\u2028\u2029"]
        rt.expect(not bad, f"control characters {bad} in the collapsed line {line!r}")
        m = _SPEEDSCOPE.match(line)
        rt.expect(m, f"collapsed line is not `frames COUNT`: {line!r}")
        stack, count = m.group(1), m.group(2)
        rt.expect(stack and not stack[-1].isspace(), f"not one space before the count: {line!r}")
        fg = _FLAMEGRAPH_PL.match(line)
        rt.expect(fg and (fg.group(1), fg.group(2)) == (stack, count),
                  f"flamegraph.pl reads {line!r} differently")
        rt.expect(not _FLAMEGRAPH_PL.match(stack),
                  f"flamegraph.pl would read a second count column in {line!r}")
        rt.expect(stack.rsplit(" ", 1)[-1] != "" and line.rsplit(" ", 1) == [stack, count],
                  f"inferno (last space) reads {line!r} differently")
        frames = stack.split(";")
        rt.expect(all(frames), f"an empty frame in {line!r}")
        lines.append((frames, int(count)))
    return lines


def collapsed_lines(profile, weight="calls", *args):
    return parse_collapsed(mf_print_text(profile, "--format", "collapsed", "--weight", weight,
                                         *args))


# ---- JSON ------------------------------------------------------------------------------

def check_json_schema(doc):
    """The keys and types docs/reports.md's JSON section promises."""
    def has(obj, key, types, where):
        rt.expect(isinstance(obj, dict) and key in obj, f"JSON {where} has no {key!r}")
        rt.expect(isinstance(obj[key], types) and not (types in (int, (int, type(None)))
                                                       and isinstance(obj[key], bool)),
                  f"JSON {where}.{key} is {obj[key]!r}")
        return obj[key]
    opt_int, opt_str = (int, type(None)), (str, type(None))
    rt.expect_eq(has(doc, "format", str, "top"), "malloc_freq", "JSON format")
    rt.expect_eq(has(doc, "version", int, "top"), 1, "JSON version")
    has(doc, "directories", list, "top")
    totals = has(doc, "totals", dict, "top")
    for key in ("calls", "bytes", "threads", "wall_ns"):
        has(totals, key, int, "totals")
    for name, f in has(totals, "functions", dict, "totals").items():
        has(f, "calls", int, f"totals.functions.{name}")
        has(f, "bytes", int, f"totals.functions.{name}")
    for key in ("estimated", "trimmed", "folded", "cut"):
        has(doc, key, bool, "top")
    for key in ("sample_interval", "files_read", "files_skipped", "hidden_frames"):
        has(doc, key, int, "top")
    for p in has(doc, "processes", list, "top"):
        has(p, "pid", int, "process")
        has(p, "program", opt_str, "process")
        has(p, "directory", str, "process")
        has(p, "exited", bool, "process")
        for key in ("threads", "calls"):
            has(p, key, int, "process")
        for key in ("start_ns", "end_ns"):
            has(p, key, opt_int, "process")
        sampling = has(p, "sampling", (dict, type(None)), "process")
        if sampling is not None:
            rt.expect(sampling.get("mode") in ("exact", "interval", "adaptive"),
                      f"JSON sampling mode {sampling!r}")
        has(p, "estimated", bool, "process")
    for s in has(doc, "stacks", list, "top"):
        has(s, "process", opt_int, "stack")
        for key in ("calls", "bytes", "samples"):
            has(s, key, int, "stack")
        has(s, "estimated", bool, "stack")
        has(s, "calls_stderr", (int, float), "stack")
        has(s, "truncated", bool, "stack")
        has(s, "via", opt_str, "stack")
        frames = has(s, "frames", list, "stack")
        rt.expect(frames, f"a JSON stack without frames: {s!r}")
        for f in frames:
            has(f, "function", str, "frame")
            has(f, "file", opt_str, "frame")
            has(f, "line", opt_int, "frame")
            has(f, "module", opt_str, "frame")
            has(f, "inlined", bool, "frame")


def json_doc(profile, *args):
    text = mf_print_text(profile, "--format", "json", *args)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise rt.TestFailure(f"--format json is not JSON: {e}: {text[max(0, e.pos - 200):e.pos + 200]!r}")
    check_json_schema(doc)
    return doc


# ---- readers: each format as a Summary ---------------------------------------------------

_TREE_HEADER = re.compile(r"^\s*calls\s+([\d,]+) \(exact\), (.+) requested$", re.M)


def tree_summary(profile, *args):
    """The tree at --threshold 0 (nothing folded): the header's exact totals, and the
    top-level lines, which are the allocation sites. Names in full (--full-names): the tree
    shortens template arguments by default."""
    text = mf_print_text(profile, "--threshold", "0", "--full-names", *args)
    m = _TREE_HEADER.search(text)
    rt.expect(m, f"no totals in the tree's header: {text[:400]!r}")
    sites = {}
    for m2 in map(rt._TREE_LINE.match, text.splitlines()):
        if m2 and rt.TreeLine(m2).top:
            line = rt.TreeLine(m2)
            rt.expect(line.name not in sites, f"site {line.name} twice at the tree's top level")
            sites[line.name] = [line.calls, m2.group(5)]
    return Summary("tree", int(m.group(1).replace(",", "")), m.group(2), sites, bytes_text=True)


def with_via(site, via):
    return f"{site} via {via}" if via else site


def csv_summary(profile, *args):
    rows = rt.csv_rows(profile, extra=args)
    sites = {}
    for row in rows:
        add_site(sites, with_via(row.stack[0], row.via), row.calls, row.bytes)
    return Summary("csv", rt.csv_total(rows), sum(r.bytes for r in rows), sites)


def collapsed_site(frames):
    """The site of a collapsed line's frames: the last, or "f via W" when the last is the
    pseudo-frame "[via W]" above f."""
    if len(frames) > 1 and frames[-1].startswith("[via ") and frames[-1].endswith("]"):
        return with_via(frames[-2], frames[-1][5:-1])
    return frames[-1]


def collapsed_summary(profile, *args):
    """Both weights: --weight calls for calls, --weight bytes for bytes (a stack of 0 bytes
    has no line there)."""
    sites = {}
    calls = collapsed_lines(profile, "calls", *args)
    nbytes = collapsed_lines(profile, "bytes", *args)
    for frames, n in calls:
        add_site(sites, collapsed_site(frames), n, 0)
    for frames, n in nbytes:
        add_site(sites, collapsed_site(frames), 0, n)
    return Summary("collapsed", sum(n for _, n in calls), sum(n for _, n in nbytes), sites)


def json_summary(profile, *args):
    doc = json_doc(profile, *args)
    sites = {}
    for s in doc["stacks"]:
        add_site(sites, with_via(s["frames"][0]["function"], s["via"]), s["calls"], s["bytes"])
    return Summary("json", doc["totals"]["calls"], doc["totals"]["bytes"], sites)


# The formats read back for the cross-format test. pprof (report_pprof.c) and html
# (report_html.c) are written elsewhere: once they can be read back, add a reader here,
# e.g. FORMAT_READERS["pprof"] = pprof_summary (a function of the profile directory that
# returns a Summary), and test_formats_agree_exactly holds them to the same numbers.
FORMAT_READERS = {
    "tree": tree_summary,
    "csv": csv_summary,
    "collapsed": collapsed_summary,
    "json": json_summary,
}


# ---- tests -----------------------------------------------------------------------------

@rt.test
def test_formats_agree_exactly():
    """One real profile of exact_sites at MALLOC_FREQ_SAMPLE=1: every format gives the exact
    totals of the thread headers, every known site's calls and bytes, and the same numbers
    for every other site (libc's own allocations, [not profiled] if any) as the CSV."""
    r = rt.run_ok([rt.c_program("exact_sites")])
    total_calls, total_bytes = rt.exact_total_calls(r.profile), exact_total_bytes(r.profile)
    summaries = {name: read(r.profile) for name, read in FORMAT_READERS.items()}
    reference = summaries["csv"]
    bad = []
    for name, s in summaries.items():
        if (s.calls, s.bytes) != (total_calls, s.bytes_as_shown(total_bytes)):
            bad.append(f"{name}: totals {s.calls} calls {s.bytes} bytes, the thread headers "
                       f"{total_calls} and {s.bytes_as_shown(total_bytes)}")
        for site, (calls, nbytes) in rt.EXACT_SITES.items():
            got = s.sites.get(site)
            if got != [calls, s.bytes_as_shown(nbytes)]:
                bad.append(f"{name}: {site} {got}, known {calls} calls {nbytes} bytes")
        for site in set(s.sites) | set(reference.sites):
            ref = reference.sites.get(site, [0, 0])
            got = s.sites.get(site, [0, s.bytes_as_shown(0)])
            if got != [ref[0], s.bytes_as_shown(ref[1])]:
                bad.append(f"{name}: {site} {got}, the CSV {ref}")
    rt.expect(not bad, "; ".join(bad))
    # The flame graph's width is the header's total: the collapsed lines add up to it.
    rt.expect_eq(sum(n for _, n in collapsed_lines(r.profile)),
                 rt.tree_header_total(mf_print_text(r.profile)),
                 "collapsed lines vs the tree header's total")
    doc = json_doc(r.profile)
    rt.expect_eq((sum(s["calls"] for s in doc["stacks"]), sum(s["bytes"] for s in doc["stacks"])),
                 (total_calls, total_bytes), "JSON's stacks vs the exact totals")
    rt.expect_eq([(p["pid"], os.path.basename(p["program"]), p["exited"], p["threads"],
                   p["calls"], p["sampling"], p["estimated"]) for p in doc["processes"]],
                 [(r.pid, "exact_sites", True, 6, total_calls, {"mode": "exact"}, False)],
                 "JSON processes")
    inexact = [s for s in doc["stacks"]
               if s["estimated"] or s["calls"] != s["samples"] or s["calls_stderr"] != 0]
    rt.expect(not inexact, f"JSON stacks not exact at MALLOC_FREQ_SAMPLE=1: {inexact[:2]}")
    site_malloc = [s for s in doc["stacks"] if s["frames"][0]["function"] == "site_malloc"]
    rt.expect_eq([(f["function"], f["file"] and os.path.basename(f["file"]),
                   f["module"] and os.path.basename(f["module"]))
                  for f in site_malloc[0]["frames"][:3]],
                 [("site_malloc", "exact_sites.c", "exact_sites"),
                  ("descend", "exact_sites.c", "exact_sites"),
                  ("main", "exact_sites.c", "exact_sites")], "JSON frames of site_malloc")


# tests/programs/cxx_names.cpp: each site's name as the demangler writes it -> calls, bytes
CXX_NAMES = {
    "Table<int, std::pair<char, long> >::put(int)": (101, 101 * 24),
    "Adder::operator()(int) const": (202, 202 * 32),
    "main::{lambda(int)#1}::operator()(int) const": (303, 303 * 40),
    'operator"" _blob(unsigned long long)': (404, 404 * 48),
    "operator,(Chain&, unsigned long)": (505, 505 * 56),
}


WRAPPER_SITES = rt.WRAPPER_SITES


@rt.test
def test_formats_agree_on_folded_sites():
    """wrapper_sites at MALLOC_FREQ_SAMPLE=1: every format names the same sites, each with
    the wrapper folded into it, and the same exact numbers; with --no-fold, --fold and --hide
    too, where the sites change but every format still agrees and sums to the total."""
    r = rt.run_ok([rt.c_program("wrapper_sites")])
    total = rt.exact_total_calls(r.profile)
    cases = [((), WRAPPER_SITES),
             # xstrdup calls xmalloc: every call's site is xmalloc then.
             (("--no-fold",), {"xmalloc": (2070, 300 * 16 + 500 * 32 + 700 * 48 + 500 * 64
                                           + 70 * 6)}),
             (("--fold", "^arena_", "--hide", "helper_layer"),
              {"use_arena via arena_get": (500, 500 * 64),
               "build_table via xmalloc": (500, 500 * 32)})]
    bad = []
    for args, known in cases:
        summaries = {name: read(r.profile, *args) for name, read in FORMAT_READERS.items()}
        ref = summaries["csv"]
        for name, s in summaries.items():
            if s.calls != total:
                bad.append(f"{args} {name}: total {s.calls}, the thread headers {total}")
            for site, (calls, nbytes) in known.items():
                if s.sites.get(site) != [calls, s.bytes_as_shown(nbytes)]:
                    bad.append(f"{args} {name}: {site} {s.sites.get(site)}, known {calls}")
            for site in set(s.sites) | set(ref.sites):
                want = ref.sites.get(site, [0, 0])
                if s.sites.get(site, [0, s.bytes_as_shown(0)]) != [want[0], s.bytes_as_shown(want[1])]:
                    bad.append(f"{args} {name}: {site} {s.sites.get(site)}, the CSV {want}")
    rt.expect(not bad, "; ".join(bad))


@rt.test
def test_cxx_names_in_every_format():
    """C++ names with ',' ' ' '<>' '"' '{}' '#' and operator(): the CSV (RFC 4180 quoting)
    and the JSON give each back exactly, the collapsed lines and the tree carry it unchanged,
    all with the known counts."""
    prog = rt.build("cxx_names", ["cxx_names.cpp"], cxx=True)
    r = rt.run_ok([prog])
    summaries = {name: read(r.profile) for name, read in FORMAT_READERS.items()}
    bad = []
    for name, (calls, nbytes) in CXX_NAMES.items():
        for fmt, s in summaries.items():
            got = s.sites.get(name)
            if got != [calls, s.bytes_as_shown(nbytes)]:
                bad.append(f"{fmt}: {name!r} {got}, known {calls} calls {nbytes} bytes")
    rt.expect(not bad, "; ".join(bad))
    # The tree above had --full-names: by default it collapses template arguments (and
    # only the tree does: the CSV, collapsed and JSON names above are whole).
    text = mf_print_text(r.profile, "--threshold", "0")
    names = {rt.TreeLine(m).name for m in map(rt._TREE_LINE.match, text.splitlines())
             if m and rt.TreeLine(m).top}
    rt.expect("Table<\u2026>::put(int)" in names and not any("std::pair" in n for n in names),
              f"the tree's default names: {sorted(names)}")


# tests/programs/odd_names.c: odd_K renamed to these symbols; it makes 11*K calls of 8*K
# bytes. Each: the name's bytes, then as the collapsed lines show it, then as JSON's string.
ODD_NAMES = {
    1: (b"semi;colon [u8; 4]", "semi:colon [u8: 4]", "semi;colon [u8; 4]"),
    2: (b"new\nline", "new?line", "new\nline"),
    3: (b"tab\there\x1b[31m", "tab?here?[31m", "tab\there\x1b[31m"),
    4: (b'quote"comma, x', 'quote"comma, x', 'quote"comma, x'),
    5: (b"100% sure", "100% sure", "100% sure"),
    6: (b"bad\xff\xfeutf8", "bad??utf8", "bad\ufffd\ufffdutf8"),
    7: (b"ends in 12", "ends in_12", "ends in 12"),
    8: (b"back\\slash caf\xc3\xa9\xc2\x85", "back\\slash caf\u00e9?", "back\\slash caf\u00e9\u0085"),
}
ODD_PAUSED = (99, 99 * 8)  # calls inside malloc_freq_pause(): [not profiled]


def odd_names_program():
    """odd_names.c without debug information (-g0 after the runner's -g), so that names come
    from the symbol table, with odd_K renamed by objcopy."""
    plain = rt.build("odd_names", ["odd_names.c"], libs=("-g0", "-ldl"))
    renamed = plain + ".renamed"  # made anew each run, as the plain build is
    argv = [b"objcopy"]
    for k, (name, _, _) in ODD_NAMES.items():
        argv += [b"--redefine-sym", b"odd_%d=" % k + name]
    r = subprocess.run(argv + [plain.encode(), renamed.encode()], capture_output=True)
    rt.expect(r.returncode == 0, f"objcopy failed: {r.stderr!r}")
    return renamed


@rt.test
def test_odd_symbol_names_never_break_a_format():
    """Symbols holding ';', a newline, a tab and an escape, '"' and ',', '%', bytes that are
    not UTF-8, a trailing " 12", a backslash and a C1 control: the CSV gives each back byte
    for byte (percent-decoded), the JSON as docs/reports.md says (U+FFFD for a byte that is not
    UTF-8), and the collapsed lines all parse, with the replacements docs/reports.md lists. The
    99 paused calls are the one-frame stack [not profiled] everywhere, and the collapsed
    lines add up to the header's exact total."""
    r = rt.run_ok([odd_names_program()])
    bad = []
    # CSV: valid UTF-8 (mf_print_text checks), 5 fields a row, names back byte for byte.
    csv_text = mf_print_text(r.profile, "--format", "csv")
    rows = rt.parse_csv(csv_text)
    for k, (name, _, _) in ODD_NAMES.items():
        rs = [row for row in rows if row.stack[0].encode("utf-8", "surrogateescape") == name]
        got = (sum(x.calls for x in rs), sum(x.bytes for x in rs))
        if got != (11 * k, 11 * k * 8 * k):
            bad.append(f"CSV: {name!r} {got}, known {11 * k} calls {88 * k * k} bytes")
    rt.expect_eq(rt.site_totals(rows, "[not profiled]")[:2], ODD_PAUSED, "CSV [not profiled]")
    # collapsed: every line parses (parse_collapsed); each name as documented.
    for weight, index in (("calls", 0), ("bytes", 1)):
        lines = collapsed_lines(r.profile, weight)
        leaves = {}
        for frames, n in lines:
            leaves[frames[-1]] = leaves.get(frames[-1], 0) + n
        for k, (name, folded, _) in ODD_NAMES.items():
            want = (11 * k, 88 * k * k)[index]
            if leaves.get(folded) != want:
                bad.append(f"collapsed {weight}: {folded!r} {leaves.get(folded)}, known {want}")
        rt.expect_eq(leaves.get("[not profiled]"), ODD_PAUSED[index],
                     f"collapsed {weight}: [not profiled]")
        total = rt.exact_total_calls(r.profile) if index == 0 else exact_total_bytes(r.profile)
        rt.expect_eq(sum(n for _, n in lines), total, f"collapsed {weight}: sum vs the exact total")
    # JSON: parses; names as documented.
    doc = json_doc(r.profile)
    names = {}
    for s in doc["stacks"]:
        f = s["frames"][0]["function"]
        names[f] = (names.get(f, (0, 0))[0] + s["calls"], names.get(f, (0, 0))[1] + s["bytes"])
    for k, (name, _, as_json) in ODD_NAMES.items():
        if names.get(as_json) != (11 * k, 88 * k * k):
            bad.append(f"JSON: {as_json!r} {names.get(as_json)}, known {11 * k} calls")
    paused = [s for s in doc["stacks"] if s["frames"][0]["function"] == "[not profiled]"]
    rt.expect_eq([(s["process"], s["calls"], s["bytes"], len(s["frames"])) for s in paused],
                 [(None, *ODD_PAUSED, 1)], "JSON [not profiled] stack")
    rt.expect(not bad, "; ".join(bad))


@rt.test
def test_sampled_formats_show_the_same_estimates():
    """Sampled 1 in 1,000: collapsed, CSV and JSON carry the model's estimates unchanged
    (not scaled to the exact total), and JSON's calls_stderr is the tree's ± error."""
    r = rt.run_ok([rt.c_program("sampled_sites")], sample="1000",
                  extra_env={"MALLOC_FREQ_SEED": "42"})
    csv_s, col_s, json_s = csv_summary(r.profile), collapsed_summary(r.profile), json_summary(r.profile)
    tree = tree_summary(r.profile)
    bad = []
    for site in rt.SAMPLED_SITES:
        if not csv_s.sites[site] == col_s.sites.get(site) == json_s.sites.get(site):
            bad.append(f"{site}: CSV {csv_s.sites[site]}, collapsed {col_s.sites.get(site)}, "
                       f"JSON {json_s.sites.get(site)}")
    rt.expect(not bad, "; ".join(bad))
    rt.expect_eq((col_s.calls, col_s.bytes), (csv_s.calls, csv_s.bytes),
                 "collapsed sums vs CSV sums (the estimates)")
    rt.expect_eq((json_s.calls, tree.calls), (rt.exact_total_calls(r.profile),) * 2,
                 "JSON's and the tree's exact totals")
    # The tree's ±: the relative standard error, "%.1f" under 9.95 %, "%.0f" above.
    text = mf_print_text(r.profile, "--threshold", "0")
    errors = {rt.TreeLine(m).name: rt.TreeLine(m).error
              for m in map(rt._TREE_LINE.match, text.splitlines()) if m and rt.TreeLine(m).top}
    doc = json_doc(r.profile)
    for site in rt.SAMPLED_SITES:
        stacks = [s for s in doc["stacks"] if s["frames"][0]["function"] == site]
        rt.expect_eq(len(stacks), 1, f"JSON stacks at {site}")
        s = stacks[0]
        rt.expect(s["estimated"] and s["calls_stderr"] > 0, f"{site} is not an estimate: {s}")
        e = 100.0 * s["calls_stderr"] / s["calls"]
        shown = f"{e:.1f}%" if e < 9.95 else f"{e:.0f}%"
        rt.expect_eq(shown, errors.get(site), f"{site}: JSON's relative error vs the tree's ±")


MF_CACHED_OUT = 64 << 20  # mf_print/output.c: a file's bytes past this are written uncached


@rt.test
def test_a_large_csv_in_a_file_is_the_csv_through_a_pipe():
    """html_100k_stacks' CSV is 108 MB: past its first 64 MiB a regular file is written with
    RWF_DONTCACHE (Linux 6.14; elsewhere as usual). With -o, with > and with >> after a line
    of its own, the file holds byte for byte what a pipe carries; strace sees the uncached
    writes tried."""
    r = rt.run_ok([rt.c_program("html_100k_stacks")])
    piped = subprocess.run([rt.MF_PRINT, "--dir", r.profile, "--format", "csv"],
                           capture_output=True, check=True).stdout
    rt.expect(len(piped) > MF_CACHED_OUT + (16 << 20), f"the CSV is {len(piped):,} bytes")
    d = rt.fresh_dir()
    out = os.path.join(d, "o.csv")
    subprocess.run([rt.MF_PRINT, "--dir", r.profile, "--format", "csv", "-o", out], check=True)
    with open(out, "rb") as f:
        rt.expect(f.read() == piped, "-o FILE differs from the pipe's bytes")
    redirected = os.path.join(d, "r.csv")
    with open(redirected, "wb") as f:
        subprocess.run([rt.MF_PRINT, "--dir", r.profile, "--format", "csv"], stdout=f, check=True)
    with open(redirected, "rb") as f:
        rt.expect(f.read() == piped, "> FILE differs from the pipe's bytes")
    appended = os.path.join(d, "a.csv")
    with open(appended, "wb") as f:
        f.write(b"a line of its own\n")
    with open(appended, "ab") as f:
        subprocess.run([rt.MF_PRINT, "--dir", r.profile, "--format", "csv"], stdout=f, check=True)
    with open(appended, "rb") as f:
        rt.expect(f.read() == b"a line of its own\n" + piped, ">> FILE differs")
    if shutil.which("strace"):
        trace = os.path.join(d, "trace")
        subprocess.run(["strace", "-f", "-e", "trace=pwritev2", "-o", trace, rt.MF_PRINT,
                        "--dir", r.profile, "--format", "csv", "-o", out], check=True)
        with open(trace) as f:
            calls = [l for l in f if "pwritev2(" in l]
        rt.expect(calls and all("0x80" in l or "RWF_DONTCACHE" in l for l in calls),
                  f"uncached writes: {calls[:2]}")
        with open(out, "rb") as f:
            rt.expect(f.read() == piped, "-o FILE under strace differs")


@rt.test
def test_a_full_disk_is_named_in_one_line():
    """The same 108 MB CSV into an ext4 of 80 MiB (loop-mounted: as root only): the disk
    fills in the uncached part, and the error is the disk's (it was the main thread's stale
    errno, "Invalid argument": the second thread that writes had met the error), with -o and
    with >, exit status 1."""
    mkfs = shutil.which("mkfs.ext4") or "/usr/sbin/mkfs.ext4"
    if os.geteuid() != 0 or not os.path.exists(mkfs):
        return
    r = rt.run_ok([rt.c_program("html_100k_stacks")])
    d = rt.fresh_dir()
    image, mnt = os.path.join(d, "small.img"), os.path.join(d, "small")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(80 << 20)
    subprocess.run([mkfs, "-q", "-F", image], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", image, mnt], check=True, capture_output=True)
    try:
        out = os.path.join(mnt, "o.csv")
        p = subprocess.run([rt.MF_PRINT, "--dir", r.profile, "--format", "csv", "-o", out],
                           capture_output=True)
        rt.expect_eq((p.returncode, p.stderr.decode()),
                     (1, f"mf_print: cannot write the report to {out}: No space left on device\n"),
                     "-o on a full disk: status, stderr")
        os.unlink(out)
        with open(os.path.join(mnt, "r.csv"), "wb") as f:
            p = subprocess.run([rt.MF_PRINT, "--dir", r.profile, "--format", "csv"], stdout=f,
                               stderr=subprocess.PIPE)
        rt.expect_eq((p.returncode, p.stderr.decode()),
                     (1, "mf_print: cannot write the report: No space left on device\n"),
                     "> on a full disk: status, stderr")
    finally:
        subprocess.run(["umount", mnt], check=False)


@rt.test
def test_tree_depth_and_top():
    """--depth N cuts the tree to N levels; --top N shows at least the N largest sites under
    the threshold, without their callers. spread_sites: thirty sites of 101..130 calls (2.9 to
    3.75 % of 3,465), each called from main."""
    r = rt.run_ok([rt.c_program("spread_sites")])
    full = rt.tree_lines(rt.mf_print(["--threshold", "0", r.profile]).stdout)
    sites = [x for x in full if x.name.startswith("site_")]
    rt.expect_eq(len(sites), 30, "sites in the whole tree")
    rt.expect(any(x.name == "main" for x in full), "main under the sites in the whole tree")
    one = rt.tree_lines(rt.mf_print(["--threshold", "0", "--depth", "1", r.profile]).stdout)
    rt.expect_eq([(x.name, x.calls) for x in one], [(x.name, x.calls) for x in sites],
                 "--depth 1: the sites alone, with the whole tree's counts")
    text = rt.mf_print(["--threshold", "5", "--top", "3", "--depth", "1", r.profile]).stdout
    top = rt.tree_lines(text)
    rt.expect_eq([(x.name, x.calls) for x in top[:3]], [("site_30", 130), ("site_29", 129),
                                                        ("site_28", 128)], "--top 3's sites")
    rt.expect_eq(len(top), 4, f"--top 3: three sites and the rest's line: {text!r}")
    rt.expect("… 27 more entries below 5%" in text and top[3].calls == 3465 - 387,
              f"the rest's line: 27 entries, {3465 - 387} calls: {text!r}")
    two = rt.tree_lines(rt.mf_print(["--threshold", "0", "--depth", "2", r.profile]).stdout)
    rt.expect_eq(len(two), 60, "--depth 2: each site and its caller, main")
    for args, want in ((["--depth", "0"], "--depth wants levels from 1 to 512, not '0'"),
                       (["--top", "x"], "--top wants sites from 0 to 1000, not 'x'")):
        p = rt.mf_print(args + [r.profile], check=False)
        rt.expect_eq((p.returncode, p.stderr), (2, f"mf_print: {want} (see mf_print --help)\n"),
                     f"mf_print {args}")
