"""mf_print on many programs and on other machines' files (issue 13, items 3, 6 and 7).

A shell script run under LD_PRELOAD (no launcher) leaves a malloc_freq.<pid> directory in
every directory its processes ran in: `mf_print PARENT` reads them all (walking the tree,
not following links), its totals the sum of the per-directory reports; `--by program`
reports each executable with its exact calls, `--program NAME` keeps one; the launcher's
`make -j2` run splits into cc1, as and ld. The footer names a stripped library with its
exact share of calls, `--debug-dir` finds its separate debug file, and a profile read with
`--sysroot` from a copy of the modules is the same, row for row, as the local one. The
sampling line says what the exact stretch really did: exact mode, fixed N, a run shorter
than the stretch, the stretch completed, cut short by its time cap."""

import csv
import io
import os
import re
import shutil
import struct
import subprocess

import harness as rt

F = rt.F  # c_core/mf_format.h


def process_dirs_under(root):
    """Every directory under root (links not followed) that holds profile files."""
    found = []
    for d, subdirs, files in os.walk(root):
        subdirs.sort()
        if any(f.endswith((".mfp", ".mft")) for f in files):
            found.append(d)
    return found


def csv_with_program(text):
    reader = csv.DictReader(io.StringIO(text))
    rt.expect_eq(reader.fieldnames, ["calls", "bytes", "samples", "stack", "locations", "via", "program"],
                 "--by program CSV header")
    return list(reader)


def scattered_run():
    """sh, run with LD_PRELOAD and no MALLOC_FREQ_DIR: cd a, output_status; cd b,
    exact_sites and ls. Each process writes malloc_freq.<pid> where it runs."""
    status, exact = rt.c_program("output_status"), rt.c_program("exact_sites")
    parent = rt.fresh_dir()
    for sub in ("a", "b"):
        os.mkdir(os.path.join(parent, sub))
    script = f"cd a && {status}; cd ../b && {exact} && ls >/dev/null; cd .."
    env = rt.profiled_env(parent)
    del env["MALLOC_FREQ_DIR"]
    p = subprocess.run(["sh", "-c", script], cwd=parent, env=env, capture_output=True,
                       text=True, timeout=rt.TIMEOUT)
    rt.expect_eq(p.returncode, 0, f"the script's status (stderr {p.stderr[-300:]!r})")
    return parent


@rt.test
def test_mf_print_reads_the_process_dirs_under_a_directory():
    parent = scattered_run()
    dirs = process_dirs_under(parent)
    where = sorted(os.path.relpath(os.path.dirname(d), parent) for d in dirs)
    rt.expect("a" in where and where.count("b") >= 2 and "." in where,
              f"process directories in ., a and b: {where}")
    # Nothing that is not a directory, and no symbolic link, is read: a link to another
    # run's process directory and a file named like one.
    other = rt.run_ok([rt.c_program("output_status")], rc=3)
    os.symlink(other.profile, os.path.join(parent, "a", "malloc_freq.999999"))
    with open(os.path.join(parent, "b", "malloc_freq.999998"), "w") as f:
        f.write("not a directory\n")

    tree = rt.mf_print([parent])
    rt.expect_eq(tree.stderr, "", "mf_print PARENT's stderr")
    first = tree.stdout.splitlines()[0]
    rt.expect_eq(first, f"malloc_freq report: {parent} ({len(dirs)} process directories)",
                 "the header's first line")
    # Its totals are the sum of the per-directory reports, and of the files' exact totals.
    each = [rt.tree_header_total(rt.tree_text(d)) for d in dirs]
    rt.expect_eq(rt.tree_header_total(tree.stdout), sum(each), "PARENT's total vs the directories'")
    rt.expect_eq(sum(each), rt.exact_total_calls(*dirs), "the directories' totals vs their files")
    rows = rt.parse_csv(rt.mf_print([parent, "--format", "csv"]).stdout)
    per_dir = [rt.csv_total(rt.csv_rows(d)) for d in dirs]
    rt.expect_eq(rt.csv_total(rows), sum(per_dir), "PARENT's CSV total vs the directories'")
    rt.expect_sites(rows, rt.EXACT_SITES)
    # --dir is the same; the parent and one of its directories again: read once.
    rt.expect_eq(rt.mf_print(["--dir", parent]).stdout, tree.stdout, "--dir PARENT")
    again = rt.mf_print([parent, dirs[0]])
    rt.expect_eq(rt.tree_header_total(again.stdout), sum(each), "PARENT and a directory in it")
    rt.expect(again.stderr.count("\n") == 1 and "reading it once" in again.stderr,
              f"a directory given twice is one line: {again.stderr!r}")
    # A directory with nothing under it is one line and status 2.
    empty = rt.fresh_dir()
    os.makedirs(os.path.join(empty, "x", "y"))
    rt.expect_one_line_error([empty], "a tree without profile files")


@rt.test
def test_mf_print_by_program_and_program():
    parent = scattered_run()
    dirs = process_dirs_under(parent)
    want = rt.calls_by_program(dirs)
    status, exact = "output_status", "exact_sites"
    rt.expect(status in want and exact in want and "ls" in want,
              f"the run's programs: {sorted(want)}")
    r = rt.mf_print([parent, "--by", "program"])
    rt.expect_eq(r.stderr, "", "--by program's stderr")
    table = rt.by_program_table(r.stdout)
    rt.expect_eq({k: v[0] for k, v in table.items()}, want, "each program's exact calls")
    order = [line.split("  ")[-1] for line in r.stdout.splitlines()
             if re.match(r"\s*[\d,]+\s+[\d.]+%\s+[\d.]+ \S+\s+\d+  \S", line)]
    rt.expect_eq(order, sorted(want, key=lambda k: (-want[k], k)), "programs ordered by calls")
    # A section per program, each with its own header and total.
    sections = r.stdout.split(f"malloc_freq report: {parent} ({len(dirs)} process directories), "
                              "program ")[1:]
    rt.expect_eq([s.split("\n", 1)[0] for s in sections], order, "one section per program")
    for s in sections:
        name = s.split("\n", 1)[0]
        rt.expect_eq(rt.tree_header_total(s), want[name], f"{name} section's total")
    # CSV: a program column; each program's rows sum to its calls.
    rows = csv_with_program(rt.mf_print([parent, "--by", "program", "-f", "csv"]).stdout)
    got = {}
    for row in rows:
        got[row["program"]] = got.get(row["program"], 0) + int(row["calls"])
    rt.expect_eq(got, want, "--by program CSV's calls per program")
    rt.expect(all(row["program"] == exact for row in rows
                  if rt.csv_frames(row["stack"])[0] == "site_malloc"),
              "site_malloc's rows are exact_sites'")
    # --program keeps one (by name, or by the executable's path), several may be given.
    only = rt.csv_rows(parent, extra=["--program", exact])
    rt.expect_sites(only, rt.EXACT_SITES)
    rt.expect_eq(rt.csv_total(only), want[exact], "--program exact_sites's total")
    by_path = rt.csv_rows(parent, extra=["--program", rt.c_program("exact_sites")])
    rt.expect_eq(rt.csv_total(by_path), want[exact], "--program by the executable's path")
    two = rt.tree_header_total(rt.mf_print([parent, "--program", exact, "--program", "ls"]).stdout)
    rt.expect_eq(two, want[exact] + want["ls"], "--program exact_sites --program ls")
    # An unknown program: one line that lists the ones there are.
    bad = rt.mf_print([parent, "--program", "no_such_prog"], check=False)
    rt.expect_eq(bad.returncode, 2, "status for an unknown program")
    rt.expect(bad.stderr.count("\n") == 1 and all(k in bad.stderr for k in want),
              f"one line naming the programs there are: {bad.stderr!r}")
    rt.expect_one_line_error([parent, "--by", "pid"], "--by pid")
    rt.expect_one_line_error([parent, "--by", "program", "-f", "json"], "--by program -f json")


def footer(text):
    """The footer's modules: {path: (calls, percent, the fix line)}."""
    lines = text.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"\s*(~?[\d,]+)\s+([\d.]+)%  (/.*)$", line)
        if m and i + 1 < len(lines) and any(l.startswith("not symbolized in full") for l in lines[:i]):
            out[m.group(3)] = (int(m.group(1).lstrip("~").replace(",", "")), m.group(2),
                               lines[i + 1].strip())
    return out


@rt.test
def test_footer_names_a_stripped_library_with_its_share():
    where = os.path.join(rt.fresh_dir(), "build")
    lib, prog = rt.build_nodebug(where, debug=False, strip=True)
    r = rt.run_ok([prog])
    tree = rt.mf_print([r.profile]).stdout
    total = rt.exact_total_calls(r.profile)
    got = footer(tree)
    rt.expect(lib in got, f"{lib} not in the footer: {tree[-1500:]!r}")
    calls, pct, fix = got[lib]
    rt.expect_eq(calls, 300, "calls through the stripped library")
    rt.expect_eq(pct, f"{300 * 100 / total:.2f}", "its share of all calls")
    rt.expect(fix.startswith("stripped, no debug information: rebuild it with -g, or give "
                             "--debug-dir"), f"the fix for it: {fix!r}")
    rt.expect(prog not in got, f"the program, built with -g, is not in the footer: {got}")
    # The library's frames: nodebug_alloc by its exported name, its static helper unnamed.
    rows = rt.csv_rows(r.profile)
    through = [row for row in rows if any(f == "nodebug_alloc" for f in row.stack)]
    rt.expect_eq(sum(row.calls for row in through), 300, "CSV rows through nodebug_alloc")
    rt.expect(all(row.stack[0].startswith("[libnodebug.so+0x") for row in through),
              f"the static helper has no name: {[row.stack for row in through]}")

    # --debug-dir: the same library with -g, its debug information moved out by build id.
    debug_dir = os.path.join(rt.fresh_dir(), "debug")
    where = os.path.join(rt.fresh_dir(), "build")
    lib, prog = rt.build_nodebug(where, debug=True, strip=True, debug_dir=debug_dir)
    r = rt.run_ok([prog])
    plain = rt.mf_print([r.profile]).stdout
    rt.expect(lib in footer(plain), f"{lib} (no debug information beside it) not in the footer")
    found = rt.mf_print([r.profile, "--debug-dir", debug_dir]).stdout
    rt.expect("not symbolized in full" not in found,
              f"--debug-dir left a footer: {found[found.find('not symbolized'):]!r}")
    rows = rt.csv_rows(r.profile, extra=["--debug-dir", debug_dir])
    helper = [row for row in rows if row.stack[:2] == ["helper", "nodebug_alloc"]]
    rt.expect_eq(sum(row.calls for row in helper), 300, "helper;nodebug_alloc rows with --debug-dir")
    rt.expect(all(row.locations[0].endswith("nodebug_lib.c:9") for row in helper),
              f"the helper's line: {[row.locations[0] for row in helper]}")
    rt.expect_one_line_error([r.profile, "--debug-dir", os.path.join(debug_dir, "nope")],
                             "--debug-dir of a missing directory")


def copy_modules(profile, root):
    """Copies every module file the profile's processes mapped (as /proc/self/maps named
    them, from the process files) into root, at the same path."""
    names = set()
    for path in rt.process_files(profile):
        with open(path, "rb") as f:
            data = f.read()
        off = struct.unpack_from("<I", data, F.process_header.header_size)[0]
        rec = F.module_record
        while off + rec.size <= len(data):  # struct mf_module_record, then the path
            size = struct.unpack_from("<I", data, off + rec.record_size)[0]
            path_len = struct.unpack_from("<I", data, off + rec.path_len)[0]
            names.add(data[off + rec.size:off + rec.size + path_len])
            off += size
    copied = []
    for name in names:
        name = name.decode()
        if name.startswith("/") and os.path.isfile(name):
            dest = root + name
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(name, dest)
            copied.append(name)
    return copied


@rt.test
def test_sysroot_symbolizes_from_a_copy_of_the_modules():
    base = rt.fresh_dir()
    where = os.path.join(base, "orig")
    lib, prog = rt.build_nodebug(where, debug=True, strip=False)
    r = rt.run_ok([prog])
    local = rt.mf_print([r.profile, "--format", "csv"]).stdout
    rt.expect("nodebug_lib.c:9" in local and "nodebug_main.c" in local,
              "the local profile has the library's and the program's lines")
    sysroot = os.path.join(base, "sysroot")
    copied = copy_modules(r.profile, sysroot)
    rt.expect(prog in copied and lib in copied, f"modules copied: {copied}")
    # The originals are gone: the program is rebuilt elsewhere, the first build deleted.
    rt.build_nodebug(os.path.join(base, "moved"), debug=True, strip=False)
    shutil.rmtree(where)
    gone = rt.mf_print([r.profile, "--format", "csv"])
    rt.expect(gone.stdout != local and prog in gone.stderr,
              f"without --sysroot the deleted program cannot be read: {gone.stderr!r}")
    tree = rt.mf_print([r.profile]).stdout
    rt.expect(prog in footer(tree) and "cannot be read" in footer(tree)[prog][2],
              f"the footer names the missing program: {tree[-800:]!r}")
    read = rt.mf_print([r.profile, "--format", "csv", "--sysroot", sysroot])
    rt.expect_eq(read.stderr, "", "--sysroot's stderr")
    rt.expect_eq(read.stdout, local, "the CSV with --sysroot vs the local one")
    # A copy whose build id differs (here: it has none) is refused, as a local file would be.
    subprocess.run(["objcopy", "--remove-section=.note.gnu.build-id", sysroot + lib], check=True)
    other = rt.mf_print([r.profile, "--sysroot", sysroot])
    rt.expect(f"{sysroot + lib} is not the file the profiled program ran" in other.stderr,
              f"a different copy is named: {other.stderr!r}")
    rt.expect("build-id differs" in footer(other.stdout)[sysroot + lib][2],
              "the footer says the copy is another build")


# ---- the sampling line -------------------------------------------------------------------

def sampling_line(text):
    m = re.search(r"^  sampling   (.*)$", text, re.M)
    rt.expect(m, f"no sampling line: {text[:500]!r}")
    return m.group(1)


def exact_recorded(profile):
    (path,) = rt.process_files(profile)
    return rt.read_struct(path, F.process_header, "exact_recorded")


@rt.test
def test_sampling_line_says_how_the_run_was_sampled():
    shallow = rt.c_program("shallow_calls")
    cases = {}
    # Exact mode, and a fixed interval.
    r = rt.run_ok([shallow, "5000"])
    cases["exact"] = (r, "exact: every call recorded")
    r = rt.run_ok([shallow, "50000"], sample="1000")
    cases["fixed"] = (r, "1 in 1,000 calls sampled")
    # Default mode, a run shorter than the exact stretch (100,000 calls): every call exact.
    r = rt.run_ok([shallow, "500"], sample=None)
    cases["short"] = (r, "every call exact: the process ended within its exact stretch (the "
                         "first 100,000 calls)")
    # Default mode, the stretch completed: counted in calls, so on a loaded machine too.
    r = rt.run_ok([shallow, "200000"], sample=None)
    rt.expect_eq(exact_recorded(r.profile), 100000, "shallow_calls' exact stretch")
    cases["completed"] = (r, "first 100,000 calls exact, then adaptive (a ramp of 4,096 samples, "
                             "then samples take <= 0.3% of time)")
    # A profile of an older core, whose stretch stopped after 5 ms of recording: no
    # MF_PROCESS_EXACT_BY_CALLS, fewer calls recorded than the setting, and no ramp.
    r = rt.run_ok([shallow, "200000"], sample=None)
    n = 1234
    proc = rt.process_files(r.profile)[0]
    flags = rt.read_struct(proc, F.process_header, "flags", "<I")
    rt.write_struct(proc, F.process_header, "flags", flags & ~F.PROCESS_EXACT_BY_CALLS, "<I")
    rt.write_struct(proc, F.process_header, "exact_recorded", n)
    rt.write_struct(proc, F.process_header, "ramp_samples", 0, "<I")
    rt.write_struct(proc, F.process_header, "ramp_step", 0, "<I")
    cases["capped"] = (r, f"first {n:,} calls exact (the 5 ms cap on the exact stretch came "
                          "before 100,000), then adaptive (samples take <= 0.3% of time)")
    for what, (r, want) in cases.items():
        rt.expect_eq(sampling_line(rt.tree_text(r.profile)), want, f"sampling line ({what})")
    # The processes together: each outcome counted.
    dirs = [cases[k][0].profile for k in ("short", "capped", "completed")]
    both = sampling_line(rt.tree_text(*dirs))
    rt.expect_eq(both, "first 100,000 calls of each process exact (5 ms at most), then adaptive "
                       "(a ramp of 4,096 samples, then samples take <= 0.3% of time); the exact "
                       "stretch completed in 1, cut "
                       f"short by its time cap in 1 ({n:,} calls exact), was the whole run in "
                       "1 (every call exact)", "sampling line of three default-mode runs")
