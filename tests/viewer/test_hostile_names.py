"""Names and files from hostile input: profiles and saved profiles are shared between people,
so every name in them may be an attack on whoever reads the report. tests/programs/
hostile_names.c's sites, renamed to terminal escapes, formula starts, </script>, bytes that
are not UTF-8 and a name of 5,000 bytes, go through every format mf_print --help lists, in
every mode (plain, --live, --base of a directory and of a saved profile, --by program,
--by site, --sizes, --tune; and --timeline and --check, whose rules name the sites): no raw
control character reaches text for a terminal, every CSV cell of text is neutralised for
spreadsheets and parses, JSON parses, and names come back exactly where the format promises
it (CSV percent-decoded, pprof's string table, --save read back by --base). Then the saved-profile reader's limits, on files made here, and --save's
refusal of anything but a regular file."""

import csv
import gzip
import io
import json
import os
import re
import resource
import stat
import struct
import subprocess
import zlib

import harness as rt
from harness import expect, expect_eq

HOSTILE_NAMES, WRAPPER, RAW = rt.HOSTILE_NAMES, rt.HOSTILE_WRAPPER, rt.RAW
FOLD = ["--fold", "^@wrap"]
NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?$")


def hostile_run():
    return rt.run_ok([rt.hostile_program()], extra_env={"MALLOC_FREQ_LIVE": "all"})


esc = rt.esc


def formats_from_help():
    """The formats `mf_print --help` lists under --format: a new one is tested here too."""
    text = rt.mf_print(["--help"]).stdout
    block = text[text.index("--format FORMAT"):text.index("-o, --output")]
    first = re.match(r"--format FORMAT\s+(\w+)", block).group(1)
    rest = re.findall(r"^\s{20,}(\w+)\s{2,}\S", block, re.M)
    formats = [first] + rest
    expect(len(formats) >= 6, f"formats in mf_print --help: {formats}")
    return formats


check_text = rt.check_text


def check_csv(what, data):
    """Parses; every cell of text that starts with = + - @ TAB or CR is neutralised (a
    number, or '-', the pad of --by site's frame columns, is not text)."""
    text = check_text(what, data)
    rows = list(csv.reader(io.StringIO(text)))
    expect(len(rows) > 1, f"{what}: no rows")
    width = len(rows[0])
    for row in rows[1:]:
        expect(len(row) == width, f"{what}: a row of {len(row)} cells, the header has {width}")
        for cell in row:
            expect(not (cell[:1] and cell[0] in "=+-@\t\r" and not NUMBER.match(cell)
                        and cell != "-"), f"{what}: a cell a spreadsheet runs: {cell[:80]!r}")
    return [dict(zip(rows[0], row)) for row in rows[1:]]


def decoded(field):
    return [f.encode("utf-8", "surrogateescape") for f in rt.csv_frames(field)]


def check_json(what, data):
    text = check_text(what, data)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise rt.TestFailure(f"{what}: not JSON: {e}: {text[max(0, e.pos - 100):e.pos + 100]!r}")


def check_collapsed(what, data):
    text = check_text(what, data)
    lines = text.splitlines()
    if what.startswith("live "):  # the live view says so in a first line, which readers skip
        expect(lines[:1] == ["# malloc_freq --live: counts are allocations alive, not calls"],
               f"{what}: no live view line: {lines[:1]!r}")
        lines = lines[1:]
    bad = [l for l in lines if not re.match(r"^.+ \d+$", l)]
    expect(not bad, f"{what}: lines that do not parse: {bad[:2]!r}")


def pprof_strings(what, data):
    try:
        raw = gzip.decompress(data)
    except OSError as e:
        raise rt.TestFailure(f"{what}: not gzip: {e}")
    return {v for num, _, v in rt.pb_fields(raw) if num == 6}


def check_html(what, data):
    text = check_text(what, data)
    expect("<script>alert(1)" not in text, f"{what}: a name ends the page's <script>")


CHECKERS = {"tree": check_text, "csv": check_csv, "json": check_json,
            "collapsed": check_collapsed, "pprof": pprof_strings, "html": check_html}


def all_names():
    return set(HOSTILE_NAMES.values())


@rt.test
def test_hostile_names_through_every_format_and_mode():
    """Every format of mf_print --help in every mode, on names made to attack the reader;
    combinations mf_print refuses must be refused in one line (exit 2), and the ones the
    README offers must work."""
    formats = formats_from_help()
    expect(set(formats) <= set(CHECKERS), f"formats without a check here: "
                                          f"{sorted(set(formats) - set(CHECKERS))}")
    a, b = hostile_run(), hostile_run()
    saved = os.path.join(a.outdir, "a.pb.gz")
    r = rt.mf_print(["--save", saved, a.profile] + FOLD)
    modes = {
        "plain": [a.profile],
        "live": ["--live", a.profile],
        "base": ["--base", a.profile, b.profile],
        "base-saved": ["--base", saved, b.profile],
        "by-program": ["--by", "program", a.profile],
        "by-site": ["--by", "site", a.profile],
        "sizes": ["--sizes", a.profile],
        "tune": ["--sizes", "--tune", a.profile],
    }
    must = {("plain", f) for f in formats} | {("live", f) for f in formats} | {
        ("base", "tree"), ("base", "csv"), ("base", "pprof"), ("base-saved", "tree"),
        ("base-saved", "csv"), ("by-program", "tree"), ("by-program", "csv"),
        ("by-site", "csv"), ("sizes", "tree"), ("sizes", "csv"), ("sizes", "json"),
        ("tune", "tree")}
    outdir = rt.fresh_dir()
    done, bad = set(), []
    for mode, args in modes.items():
        for fmt in formats:
            what = f"{mode} --format {fmt}"
            out = os.path.join(outdir, "out")
            argv = [rt.MF_PRINT, "--format", fmt, "--threshold", "0", "--width", "0"] + FOLD
            argv += (["--full-names"] if fmt == "tree" else []) + args
            argv += ["-o", out] if fmt == "pprof" else []
            p = subprocess.run(argv, capture_output=True, timeout=rt.TIMEOUT)
            check_text(f"{what}: stderr", p.stderr)
            if p.returncode == 2 and p.stderr.count(b"\n") == 1 and not p.stdout:
                expect((mode, fmt) not in must, f"{what} refused: {p.stderr!r}")
                continue
            if p.returncode != 0:
                bad.append(f"{what} exited {p.returncode}: {p.stderr[-300:]!r}")
                continue
            data = p.stdout
            if fmt == "pprof":
                with open(out, "rb") as f:
                    data = f.read()
            got = CHECKERS[fmt](what, data)
            done.add((mode, fmt))
            # Names as the format promises them.
            want = all_names() if mode not in ("sizes", "tune") else set()
            if fmt == "csv" and mode != "sizes":
                col = "pc0" if mode == "by-site" else "stack"
                names = {decoded(row[col])[0] for row in got}
                names |= {decoded(row["via"])[0] for row in got if "via" in row}
                missing = (want | ({WRAPPER} if not mode.startswith("base") else set())) - names
                if missing:
                    bad.append(f"{what}: names not given back exactly: {sorted(missing)[:3]!r}")
            elif fmt == "json" and mode != "sizes":
                names = {fr["function"] for s in got["stacks"] for fr in s["frames"]}
                names |= {s["via"] for s in got["stacks"] if s["via"]}
                for n in want | {WRAPPER}:
                    if n.decode("utf-8", "replace") not in names:
                        bad.append(f"{what}: {n[:40]!r} is not in the JSON")
            elif fmt == "pprof":
                missing = (want | {WRAPPER}) - got
                if missing:
                    bad.append(f"{what}: names not in the string table: {sorted(missing)[:3]!r}")
            elif fmt == "tree":
                missing = [n for n in want if esc(n) not in got]
                if missing:
                    bad.append(f"{what}: names not shown escaped: {missing[:3]!r}")
    expect(not bad, "; ".join(bad[:6]))
    expect(must <= done, f"not tested: {sorted(must - done)}")
    # --save read back: the same profile, no change.
    p = rt.mf_print(["--base", saved, a.profile, "--threshold", "0"] + FOLD)
    sites = len(HOSTILE_NAMES) + 2  # and the wrapped site, and [not profiled]? (counted below)
    m = re.search(r"verdict +(\d+) of (\d+) sites? and (\d+) of (\d+) stacks? changed", p.stdout)
    expect(m, f"no verdict: {p.stdout[:600]!r}")
    expect_eq((m.group(1), m.group(3)), ("0", "0"),
              f"a profile against its own --save (of {m.group(2)} sites, {sites} expected at most)")


@rt.test
def test_hostile_names_in_base_and_live_tables():
    """The two tables that printed names raw: --base's (sites, callers, the saved profile's
    sampling comment) and --live's lifetimes (the via): each name escaped as mf_esc does,
    with its exact counts."""
    a, b = hostile_run(), hostile_run()
    text = check_text("--live", rt.mf_print(["--live", "--threshold", "0", a.profile] + FOLD)
                      .stdout.encode())
    for k, name in HOSTILE_NAMES.items():
        line = [l for l in text.splitlines() if l.endswith("  " + esc(name))]
        expect(line, f"lifetimes: no line for {esc(name)[:60]!r}")
        m = re.match(r"\s*(\d+)\s+[\d.]+ \w*B\s+(\d+)\s", line[-1])  # the table, after the tree
        expect(m and m.groups() == (str(k), str(k)),
               f"lifetimes of {esc(name)[:40]!r}: not {k} alive and {k} freed: {line[0][:90]!r}")
    expect(" via " + esc(WRAPPER) in text, "lifetimes: the wrapper is not shown escaped")
    p = subprocess.run([rt.MF_PRINT, "--base", a.profile, "--threshold", "0", b.profile] + FOLD,
                       capture_output=True, timeout=rt.TIMEOUT)
    text = check_text("--base", p.stdout)
    for k, name in HOSTILE_NAMES.items():
        expect(re.search(r"\s0\s+%d\s+%d\s+.*  %s\n" % (2 * k, 2 * k, re.escape(esc(name))),
                         text), f"--base: no row of 0 change, {2 * k} calls for "
                                f"{esc(name)[:40]!r}")


@rt.test
def test_hostile_names_in_the_timeline_and_the_budget_check():
    """The reports the modes above do not reach. --timeline of a launcher run (text, CSV,
    JSON, and the page's chart): no raw control character, CSV cells neutralised, every site named in each, exactly
    in the CSV (percent-decoded) and the JSON, escaped in the text. --check: a rule naming
    each site that a rule can name (no new line, ';' or '#'), which echoes the name in its
    line, escaped, with the site's exact count (hostile_K makes 2K calls)."""
    out = rt.fresh_dir()
    run, again = os.path.join(out, "run"), os.path.join(out, "again")
    for d in (run, again):
        r = subprocess.run([rt.LAUNCHER, "-q", "-s", "1", "-o", d, "--", rt.hostile_program()],
                           cwd=out, capture_output=True, timeout=rt.TIMEOUT)
        expect_eq(r.returncode, 0, f"the launcher's status (stderr {r.stderr[-300:]!r})")
    names = {k: n for k, n in HOSTILE_NAMES.items()}
    base = [rt.MF_PRINT, "--timeline", "--top", str(len(names) + 4), "--width", "0"] + FOLD
    got = {}
    for fmt in ("tree", "csv", "json"):
        p = subprocess.run(base + ["--format", fmt, run], capture_output=True, timeout=rt.TIMEOUT)
        expect_eq((p.returncode, p.stderr), (0, b""), f"--timeline --format {fmt}")
        got[fmt] = CHECKERS[fmt](f"--timeline --format {fmt}", p.stdout)
    text = got["tree"]
    missing = [esc(n)[:40] for n in names.values() if "] " + esc(n) not in text]
    expect(not missing, f"--timeline: sites not shown escaped: {missing[:3]!r}")
    in_csv = {decoded(row["site"])[0] for row in got["csv"]}
    missing = [n[:40] for n in names.values() if n not in in_csv]
    expect(not missing, f"--timeline --format csv: sites not given back exactly: {missing[:3]!r}")
    in_json = {site["name"] for site in got["json"]["sites"]}
    missing = [n[:40] for n in names.values() if n.decode("utf-8", "replace") not in in_json]
    expect(not missing, f"--timeline --format json: sites not in it: {missing[:3]!r}")
    # The page of a run with a timeline charts its sites by name.
    p = subprocess.run([rt.MF_PRINT, "--format", "html", "--threshold", "0"] + FOLD + [run],
                       capture_output=True, timeout=rt.TIMEOUT)
    expect_eq(p.returncode, 0, f"--format html of a run with a timeline ({p.stderr[-300:]!r})")
    expect(b'"timeline":{' in p.stdout, "the page has no timeline")
    check_html("--format html with a timeline", p.stdout)
    # --check: a rule a site, each holding (the site's exact count), each line the rule.
    nameable = {k: n for k, n in names.items()
                if not any(c in n for c in b"\n\r;#") and not n[:1].isspace()}
    expect(len(nameable) >= 8, f"only {len(nameable)} names a rule can hold")
    rules = os.path.join(out, "budget.rules")
    with open(rules, "wb") as f:
        f.write(b"".join(b"calls(%s) == %d\n" % (n, 2 * k) for k, n in nameable.items()))
    p = subprocess.run([rt.MF_PRINT, "--check", rules] + FOLD + [run], capture_output=True,
                       timeout=rt.TIMEOUT)
    text = check_text("--check", p.stdout)
    expect_eq((p.returncode, p.stderr), (0, b""), f"--check's status and stderr ({text[-300:]!r})")
    for k, n in nameable.items():
        line = " calls(%s) == %d: %d" % (esc(n), 2 * k, 2 * k)
        expect(line in text.splitlines(), f"--check: no line {line[:60]!r}")
    # With --base, rules of growth: the run against another of the same, none grown.
    with open(rules, "wb") as f:
        f.write(b"".join(b"calls(%s) +0\n" % n for n in nameable.values()))
    p = subprocess.run([rt.MF_PRINT, "--check", rules, "--base", again] + FOLD + [run],
                       capture_output=True, timeout=rt.TIMEOUT)
    text = check_text("--check --base", p.stdout)
    expect_eq((p.returncode, p.stderr), (0, b""), f"--check --base ({text[-300:]!r})")
    for k, n in nameable.items():
        line = " calls(%s) +0: %d -> %d, +0" % (esc(n), 2 * k, 2 * k)
        expect(any(l.startswith(line) for l in text.splitlines()),
               f"--check --base: no line {line[:60]!r} in {text[:300]!r}")


@rt.test
def test_hostile_option_values_are_shown_escaped():
    """A bad value for an option, an unknown option, a bad rule, a directory that is not
    there and a program the profile does not hold are each one line (exit status 2, or 1
    when nothing was read), naming what was given as names are shown (ESC as \\x1b, BEL as
    \\x07): before, the usage errors and --program's echoed it raw."""
    value = "\x1b]52;c;QQ==\x07"
    shown = esc(value.encode())
    rules = os.path.join(rt.fresh_dir(), "budget.rules")
    with open(rules, "w") as f:
        f.write("calls(f%s) <== 4\n" % value)
    cases = [(["--format", value, "x"], f"--format is tree, csv, collapsed, pprof, html or json, "
                                          f"not '{shown}'"),
             (["--top", value, "x"], f"--top wants sites from 0 to 1000, not '{shown}'"),
             (["--width", value, "x"], f"not '{shown}'"),
             (["--by", value, "x"], f"--by is program, site, site,size or program,site, "
                                    f"not '{shown}'"),
             (["--bogus" + value, "x"], f"unknown option '--bogus{shown}'"),
             (["--check", rules, "x"], f"{rules}:1: rule 'calls(f\\x1b]52', column "),
             ([value], f"cannot open directory {shown}: No such file or directory"),
             (["--program", value, hostile_run().profile], f"no program '{shown}' in the profile"),
             (["--debug-dir", value, "x"], f"--debug-dir {shown}: No such file or directory"),
             (["--sysroot", value, "x"], f"--sysroot {shown}: No such file or directory")]
    bad = []
    for args, want in cases:
        p = subprocess.run([rt.MF_PRINT] + args, capture_output=True, timeout=rt.TIMEOUT)
        text = check_text(f"mf_print {args!r}", p.stderr)
        lines = text.splitlines()
        if p.returncode not in (1, 2) or len(lines) != 1 or want not in lines[0] or p.stdout:
            bad.append(f"{args!r}: status {p.returncode}, stderr {text!r}, expected one line "
                       f"with {want!r}")
    expect(not bad, "; ".join(bad))


def pb_profile(strings, samples, locations, functions, comments=(), mappings=()):
    """A profile.proto of the sample types mf_print writes, from parts given as field lists."""
    f = lambda num, v: rt.pb_field(num, v)
    index = {s: i for i, s in enumerate(strings)}
    out = b""
    for t, u in ((b"calls", b"count"), (b"bytes", b"bytes"), (b"samples", b"count")):
        out += f(1, f(1, index[t]) + f(2, index[u]))
    out += b"".join(f(2, s) for s in samples)
    out += b"".join(f(3, m) for m in mappings)
    out += b"".join(f(4, l) for l in locations)
    out += b"".join(f(5, fn) for fn in functions)
    out += b"".join(f(6, s) for s in strings)
    out += b"".join(f(13, index[c]) for c in comments)
    return out


def packed(values):
    return b"".join(rt.pb_varint(v) for v in values)


def sample(locs, calls, nbytes, samples):
    f = lambda num, v: rt.pb_field(num, v)
    return f(1, packed(locs)) + f(2, packed([calls, nbytes, samples]))


BASE_STRINGS = [b"", b"calls", b"count", b"bytes", b"samples", b"f", b"g.c",
                b"frames: allocator and profiler frames trimmed"]


def function(fid, name=5, file=6):
    f = lambda num, v: rt.pb_field(num, v)
    return f(1, fid) + f(2, name) + f(4, file)


def location(lid, fids):
    f = lambda num, v: rt.pb_field(num, v)
    return f(1, lid) + b"".join(f(4, f(1, fid) + f(2, 1)) for fid in fids)


def read_saved(path, limit_mb=512):
    """mf_print --base FILE DIR with at most limit_mb of address space."""
    d = rt.fresh_dir()

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
    return subprocess.run([rt.MF_PRINT, "--base", path, d], capture_output=True, text=True,
                          timeout=rt.TIMEOUT, preexec_fn=limit)


def expect_refused(path, why):
    r = read_saved(path)
    expect(r.returncode == 1 and r.stderr.count("\n") == 1 and why in r.stderr,
           f"{os.path.basename(path)}: exit {r.returncode}, stderr {r.stderr[-300:]!r} "
           f"(wanted one line with {why!r})")


@rt.test
def test_saved_profile_reader_is_bounded():
    """Saved profiles made to cost: a gzip of empty strings (1 MB unpacking to 1 GiB), a
    62 KB file of one location of 10,000 lines on a stack of 10,000 (it took 3.1 GB), stacks
    within those limits whose frames add up past 16 a byte, counts that add up past 2^64,
    totals of "-1": each refused in one line within 512 MiB of address space."""
    d = rt.fresh_dir()
    path = os.path.join(d, "bomb.pb.gz")
    with open(path, "wb") as f:
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\x32\x00" * (1 << 20)
        for _ in range(512):
            f.write(z.compress(chunk))
        f.write(z.flush())
    expect(os.path.getsize(path) < (2 << 20), f"the bomb is {os.path.getsize(path)} bytes")
    expect_refused(path, "unpacks to more than")
    # One location of 10,000 lines, 10,000 times on a stack.
    deep = pb_profile(BASE_STRINGS, [sample([1] * 10000, 1, 8, 1)],
                      [location(1, [1] * 10000)], [function(1)])
    path = os.path.join(d, "deep.pb")
    with open(path, "wb") as f:
        f.write(deep)
    expect_refused(path, "more locations than the deepest stack")
    path = os.path.join(d, "lines.pb")
    with open(path, "wb") as f:
        f.write(pb_profile(BASE_STRINGS, [sample([1] * 10, 1, 8, 1)],
                           [location(1, [1] * 10000)], [function(1)]))
    expect_refused(path, "more lines than mf_print writes")
    # Within both limits, but 400 stacks of 513 x 256 frames from 200 KB.
    locs = [location(1, [1] * 256)] + [location(i, [1]) for i in range(2, 402)]
    samples = [sample([1] * 512 + [i], 1, 8, 1) for i in range(2, 402)]
    path = os.path.join(d, "frames.pb")
    with open(path, "wb") as f:
        f.write(pb_profile(BASE_STRINGS, samples, locs, [function(1)]))
    expect_refused(path, "more frames than 16 a byte")
    # Counts that wrap.
    big = (1 << 63) - 1
    path = os.path.join(d, "wrap.pb")
    with open(path, "wb") as f:
        f.write(pb_profile(BASE_STRINGS, [sample([1], big, 8, 1)] * 3, [location(1, [1])],
                           [function(1)]))
    expect_refused(path, "add up past 2^64")
    strings = BASE_STRINGS + [b"totals: calls=-1 bytes=8 (exact, over every thread)"]
    path = os.path.join(d, "totals.pb")
    with open(path, "wb") as f:
        f.write(pb_profile(strings, [sample([1], 1, 8, 1)], [location(1, [1])], [function(1)],
                           comments=[strings[-1]]))
    expect_refused(path, "its totals are not two numbers")
    # The same file with honest totals is read (the checks above are the limits, not the
    # files' shape), its name 6,000 bytes long kept whole.
    long_name = b"n" * 6000
    strings = BASE_STRINGS + [b"totals: calls=1 bytes=8 (exact, over every thread)", long_name]
    path = os.path.join(d, "ok.pb")
    with open(path, "wb") as f:
        f.write(pb_profile(strings, [sample([1], 1, 8, 1)], [location(1, [1])],
                           [function(1, name=len(strings) - 1)], comments=[strings[-2]]))
    os.mkdir(path + ".new")
    r = subprocess.run([rt.MF_PRINT, "--base", path, "--format", "csv", path + ".new"],
                       capture_output=True, text=True, timeout=rt.TIMEOUT)
    # NEW is an empty directory: nothing readable, exit 1; OLD was read before it.
    expect("a damaged" not in r.stderr and "not a profile" not in r.stderr,
           f"an honest file refused: {r.stderr!r}")


@rt.test
def test_saved_profile_names_round_trip_and_save_refuses_devices():
    """A 5,000-byte name survives --save and --base (it was cut at 4,095 bytes, and the
    profile compared with its own snapshot showed changes); --save refuses a FIFO, a
    symbolic link and (as root) a character device, leaving each as it was; a new FILE is
    0600."""
    a = hostile_run()
    d = rt.fresh_dir()
    saved = os.path.join(d, "s.pb.gz")
    rt.mf_print(["--save", saved, a.profile] + FOLD)
    expect_eq(os.stat(saved).st_mode & 0o777, 0o600, "a new --save file's mode")
    r = rt.mf_print(["--base", saved, "--format", "csv", a.profile] + FOLD)
    rows = check_csv("--base saved csv", r.stdout.encode())
    names = {decoded(row["stack"])[0] for row in rows}
    expect(HOSTILE_NAMES[15] in names, "the 5,000-byte name does not come back whole")
    changed = [row for row in rows if row["significant"] == "yes"]
    expect(not changed, f"a profile against its own --save: {len(changed)} rows changed")
    fifo, link = os.path.join(d, "fifo"), os.path.join(d, "link")
    os.mkfifo(fifo)
    os.symlink(saved, link)
    targets = [fifo, link]
    if os.geteuid() == 0:
        dev = os.path.join(d, "null")
        os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
        targets.append(dev)
    for t in targets:
        before = os.lstat(t)
        p = subprocess.run([rt.MF_PRINT, "--save", t, a.profile], capture_output=True,
                           text=True, timeout=rt.TIMEOUT)
        after = os.lstat(t)
        expect(p.returncode == 1 and p.stderr.count("\n") == 1 and
               "--save replaces only a regular file" in p.stderr,
               f"--save {os.path.basename(t)}: exit {p.returncode}, {p.stderr!r}")
        expect_eq((after.st_ino, after.st_mode), (before.st_ino, before.st_mode),
                  f"{os.path.basename(t)} after --save")
    expect_eq(sorted(os.listdir(d)), sorted(["s.pb.gz"] + [os.path.basename(t) for t in targets]),
              "files left beside them")


@rt.test
def test_stripped_main_keeps_no_libc_start_frames():
    """A stripped program (main has no name): its stacks start at main's frame, without
    __libc_start_call_main and __libc_start_main_impl (the cut needed main's name), and each
    site's calls are exact."""
    plain = rt.build("hostile_names_plain", ["hostile_names.c"], libs=("-g0",))
    stripped = plain + ".stripped"
    subprocess.run(["strip", "-o", stripped, plain], check=True)
    r = rt.run_ok([stripped])
    text = rt.mf_print(["--format", "collapsed", r.profile]).stdout
    bad = [l for l in text.splitlines() if "_start" in l]
    expect(not bad, f"start-up frames kept: {bad[:2]!r}")
    # Every frame left is the program's own (unnamed): main's, the site's, wrap's.
    frames = {f for l in text.splitlines() for f in l.rsplit(" ", 1)[0].split(";")}
    expect(all(f.startswith("[hostile_names_plain.stripped+0x") for f in frames),
           f"frames of other modules: {sorted(frames)[:4]}")
    depths = sorted({len(l.split(";")) for l in text.splitlines()})
    expect_eq(depths, [2, 3], "frames a stack (main, the site, and wrap for the wrapped site)")
    total = sum(int(l.rsplit(" ", 1)[1]) for l in text.splitlines())
    expect_eq(total, rt.exact_total_calls(r.profile), "the stacks' calls against the total")


def strict_json(what, text):
    """json.loads that refuses NaN and Infinity (Python takes them; JSON has neither)."""
    def refuse(name):
        raise rt.TestFailure(f"{what}: {name} is not JSON")
    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as e:
        raise rt.TestFailure(f"{what}: not JSON: {e}: {text[max(0, e.pos - 80):e.pos + 80]!r}")


@rt.test
def test_json_infinite_variance_is_null():
    """A thread file whose bytes variances are infinite (damaged, or shared by someone who
    wants to break a pipeline): the JSON of the tree and of --sizes gives each such standard
    error as null (it printed inf, and -nan for NaN: neither is JSON), every count exact as
    read, each finite standard error a number."""
    # One sample in 10 on average: each worker makes a few hundred calls, so each has a
    # sampled stack but for odds of about e^-25 (at 1 in 100, about 2.5 samples a worker:
    # one had none in half the runs).
    r = rt.run_ok([rt.c_program("four_threads")], sample="10")
    inf = struct.pack("<d", float("inf"))
    for path in rt.thread_files(r.profile):
        data = bytearray(open(path, "rb").read())
        for e in rt.thread_file_stacks(data):
            expect(e["wide"], "an entry of samples of weight 1 at 1 in 10")
            at = e["var_at"] + rt.F.entry_var.bytes_var
            data[at:at + 8] = inf
        for c in range(rt.F.SIZE_CLASSES):  # the size histogram's classes
            at = rt.F.thread_header.sizes + rt.F.size_class.size * c
            if struct.unpack_from("<Q", data, at + rt.F.size_class.calls)[0]:
                data[at + rt.F.size_class.bytes_var:at + rt.F.size_class.bytes_var + 8] = inf
        with open(path, "wb") as f:
            f.write(data)
    got = strict_json("--format json", rt.mf_print(["--format", "json", r.profile]).stdout)
    workers = [s for s in got["stacks"] if any(fr["function"].startswith("site_worker_")
                                               for fr in s["frames"])]
    expect_eq(len(workers), 4, "the workers' stacks")
    for s in workers:
        expect(s["bytes_stderr"] is None and isinstance(s["calls_stderr"], (int, float)),
               f"a worker's standard errors: {s['calls_stderr']!r}, {s['bytes_stderr']!r}")
    got = strict_json("--sizes --format json",
                      rt.mf_print(["--sizes", "--format", "json", r.profile]).stdout)
    expect_eq(got["exact_calls"], rt.exact_total_calls(r.profile), "--sizes: the exact calls")
    forty = [c for c in got["classes"] if c["size_min"] <= 40 <= c["size_max"]]
    expect(forty and forty[0]["bytes_stderr"] is None and got["bytes_stderr"] is None,
           f"--sizes: the 40-byte class's and the total's bytes_stderr: {forty!r}, "
           f"{got['bytes_stderr']!r}")


@rt.test
def test_save_replaces_only_the_file_it_checked():
    """--save checks that FILE is a regular file (or absent), writes beside it, then renames:
    here FILE becomes a FIFO, or a symbolic link to a file of the user's, at the last moment
    before the rename (a preloaded rename makes the race certain). The FIFO or link must be
    left where it is, whole, and the user's file untouched, with one line and exit status 1
    (the old code's rename replaced them); without the race the same runs save."""
    a = hostile_run()
    race = rt.build("rename_race.so", ["rename_race.c"], shared=True, libs=("-ldl",))
    d = rt.fresh_dir()
    precious = os.path.join(d, "precious")
    with open(precious, "w") as f:
        f.write("keep me\n")
    for kind, existed in (("fifo", True), ("fifo", False), ("symlink", True),
                          ("symlink", False)):
        path = os.path.join(d, f"{kind}.{'old' if existed else 'new'}.pb.gz")
        if existed:
            rt.mf_print(["--save", path, a.profile])
        env = dict(os.environ, LD_PRELOAD=race, MF_RACE_PATH=path, MF_RACE_KIND=kind,
                   MF_RACE_TARGET=precious)
        p = subprocess.run([rt.MF_PRINT, "--save", path, a.profile], capture_output=True,
                           text=True, timeout=rt.TIMEOUT, env=env)
        what = f"--save over a {'file' if existed else 'name'} made a {kind} at the last moment"
        st = os.lstat(path)
        expect((stat.S_ISFIFO if kind == "fifo" else stat.S_ISLNK)(st.st_mode),
               f"{what}: the {kind} was replaced (exit {p.returncode}, {p.stderr!r})")
        expect(p.returncode == 1 and p.stderr.count("\n") == 1 and
               "while the report was written" in p.stderr, f"{what}: exit {p.returncode}, "
                                                           f"{p.stderr!r}")
        os.unlink(path)
    with open(precious) as f:
        expect_eq(f.read(), "keep me\n", "the link's target")
    expect_eq(sorted(os.listdir(d)), ["precious"], "files left behind")


@rt.test
def test_tune_header_escapes_names_and_writes_only_regular_files():
    """--tune-header's comment names the profile directories: a name with a newline, a
    line of C and a star before a slash (the path given with a trailing slash) is written
    escaped as mf_esc writes it, the star as \\x2a, so the header still compiles and its
    comment gives the name back (it was written with each such byte as _); a symbolic link
    at FILE is refused in one line, its target untouched (it was followed and overwritten),
    and a new FILE is 0600."""
    r = rt.run_ok([rt.c_program("four_threads")])
    d = rt.fresh_dir()
    name = "evil\n#error out of the comment\n*"
    evil = os.path.join(d, name)
    os.rename(r.profile, evil)
    header = os.path.join(d, "tune.h")
    rt.mf_print(["--sizes", "--tune-header", header, evil + "/"])
    text = open(header).read()
    want = esc((evil + "/").encode()).replace("*", "\\x2a")
    expect_eq(text.splitlines()[1], " *  " + want, "the comment's line naming the directory")
    expect_eq(os.stat(header).st_mode & 0o777, 0o600, "a new header's mode")
    src = os.path.join(d, "use.c")
    with open(src, "w") as f:
        f.write('#include "tune.h"\nint main(void) { return MF_TUNE_NCLASSES ? 0 : 1; }\n')
    c = subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-o", src + ".out", src],
                       capture_output=True, text=True)
    expect(c.returncode == 0, f"the header does not compile: {c.stderr[-400:]!r}")
    precious = os.path.join(d, "precious")
    with open(precious, "w") as f:
        f.write("keep me\n")
    link = os.path.join(d, "link.h")
    os.symlink(precious, link)
    p = subprocess.run([rt.MF_PRINT, "--sizes", "--tune-header", link, evil], capture_output=True,
                       text=True, timeout=rt.TIMEOUT)
    expect(p.returncode == 1 and p.stderr.count("\n") == 1 and
           "--tune-header replaces only a regular file" in p.stderr,
           f"--tune-header onto a symbolic link: exit {p.returncode}, {p.stderr!r}")
    with open(precious) as f:
        expect_eq(f.read(), "keep me\n", "the link's target")
    expect(os.path.islink(link), "the link was replaced")
