"""Wrappers found without their names (transform.c's rule: a stripped function that calls
the allocator from one place and nothing else that allocates, from at least 8 callers or
one caller that has 8): tests/programs/unnamed_wrappers.c built with -g, its debug
information moved to a private directory and the program stripped. Its sites with the rule
are those of the same run symbolized with that debug file and the wrappers named by --fold;
sites that do more than forward to malloc stay sites. Then Debian's own sqlite3 and git."""

import collections
import json
import os
import re
import shutil
import subprocess

import harness as rt


def build_stripped(where):
    """The fixture as where/prog, stripped; its debug file under where/debug/.build-id/."""
    prog = os.path.join(where, "prog")
    subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror",
                    "-o", prog, os.path.join(rt.PROGRAMS, "unnamed_wrappers.c")], check=True)
    out = subprocess.run(["readelf", "-n", prog], capture_output=True, text=True).stdout
    build_id = re.search(r"Build ID: ([0-9a-f]+)", out).group(1)
    debug_dir = os.path.join(where, "debug")
    debug = os.path.join(debug_dir, ".build-id", build_id[:2], build_id[2:] + ".debug")
    os.makedirs(os.path.dirname(debug))
    subprocess.run(["objcopy", "--only-keep-debug", prog, debug], check=True)
    subprocess.run(["strip", prog], check=True)
    return prog, debug_dir, debug


def functions(debug):
    """[(start, end, name)] of the debug file's functions."""
    out = subprocess.run(["nm", "-S", "--defined-only", debug], capture_output=True,
                         text=True, check=True).stdout
    fns = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tT":
            fns.append((int(f[0], 16), int(f[0], 16) + int(f[1], 16), f[3]))
    return fns


def name_of(fns, frame):
    """A frame's function: its own name, or for "[prog+0xOFF]" the function OFF lies in."""
    m = re.match(r"\[prog\+0x([0-9a-f]+)\]$", frame)
    if not m:
        return frame
    off = int(m.group(1), 16) - 1  # inside the call
    hits = [n for lo, hi, n in fns if lo <= off < hi]
    rt.expect(len(hits) == 1, f"{frame} lies in {hits}")
    return hits[0]


def by_site(rows, fns):
    """{(site function, via function or ""): calls}."""
    out = collections.Counter()
    for row in rows:
        out[(name_of(fns, row.stack[0]), name_of(fns, row.via) if row.via else "")] += row.calls
    return dict(out)


# The fixture's sites, as its debug information names them (unnamed_wrappers.c's comment).
WANT = {("make_record", ""): 110, ("build_list", ""): 55, ("build_list", "my_alloc"): 55,
        ("pool_get", "backend_malloc"): 45, ("small_site", ""): 6}
WANT.update({(f"use_alloc_{k}", "my_alloc"): k for k in range(1, 11)})


@rt.test
def test_unnamed_wrappers_fold_as_named():
    where = rt.fresh_dir()
    prog, debug_dir, debug = build_stripped(where)
    fns = functions(debug)
    r = rt.run_ok([prog])
    stripped = rt.csv_rows(r.profile)
    rt.expect(all(row.stack[0].startswith("[prog+0x") for row in stripped),
              f"the stripped program's sites have no names: {[row.stack[0] for row in stripped]}")
    rt.expect_eq(by_site(stripped, fns), WANT, "sites folded by the rule, named by the debug file")
    named = rt.csv_rows(r.profile, extra=["--debug-dir", debug_dir, "--fold", "^my_alloc$",
                                          "--fold", "^backend_malloc$"])
    rt.expect_eq(by_site(named, fns), WANT, "sites folded by name with the debug file")
    # With the names the rule finds nothing: the names' fold already took the wrappers.
    doc = json.loads(rt.mf_print([r.profile, "-f", "json", "--debug-dir", debug_dir, "--fold",
                                  "^my_alloc$", "--fold", "^backend_malloc$"]).stdout)
    rt.expect_eq(doc["wrappers_found"], 0, "wrappers found when the names are there")
    # JSON says which stacks' via was found: exactly the stripped run's folded ones.
    doc = json.loads(rt.mf_print([r.profile, "-f", "json"]).stdout)
    rt.expect_eq(doc["wrappers_found"], 2, "wrappers found without names")
    found = collections.Counter()
    for s in doc["stacks"]:
        rt.expect_eq(s["via_found"], s["via"] is not None, f"via_found of a stack via {s['via']}")
        if s["via"]:
            found[name_of(fns, s["via"])] += s["calls"]
    rt.expect_eq(dict(found), {"my_alloc": 110, "backend_malloc": 45}, "JSON's found vias")
    # The tree's header says so; --no-fold keeps the wrappers as sites.
    tree = rt.mf_print([r.profile]).stdout
    rt.expect(re.search(r"^  found      2 of them without a name, by their calls, in 32 stacks \(docs/reports.md\)$", tree, re.M),
              f"the header's found line: {tree[:900]!r}")
    bare = rt.csv_rows(r.profile, extra=["--no-fold"])
    rt.expect(not any(row.via for row in bare), "--no-fold folds nothing")
    sites = collections.Counter()
    for row in bare:
        sites[name_of(fns, row.stack[0])] += row.calls
    rt.expect_eq(dict(sites), {"my_alloc": 110, "backend_malloc": 45, "make_record": 110,
                               "build_list": 55, "small_site": 6}, "--no-fold's sites")
    rt.expect("found " not in rt.mf_print([r.profile, "--no-fold"]).stdout,
              "--no-fold's header has no found line")


def debian_tool(name):
    path = shutil.which(name)
    rt.need(path and subprocess.run(["readelf", "-S", path], capture_output=True,
                                    text=True).stdout.find(".symtab") < 0,
            f"Debian's stripped {name}")
    return path


def found_vs_bare(profile):
    """The rule's sites and the --no-fold ones: totals equal, and each found via's calls those
    of the --no-fold site at that address."""
    rows = rt.csv_rows(profile)
    bare = rt.csv_rows(profile, extra=["--no-fold"])
    rt.expect_eq(rt.csv_total(rows), rt.csv_total(bare), "calls with and without the fold")
    doc = json.loads(rt.mf_print([profile, "-f", "json"]).stdout)
    vias = collections.Counter()
    for s in doc["stacks"]:
        if s["via_found"]:
            vias[s["via"]] += s["calls"]
    bare_sites = collections.Counter()
    for row in bare:
        bare_sites[row.stack[0]] += row.calls
    for via, calls in vias.items():
        rt.expect_eq(calls, bare_sites[via], f"calls via {via} and --no-fold's site there")
    return rows, doc, vias


@rt.test
def test_unnamed_wrappers_debian_sqlite3():
    sqlite3 = debian_tool("sqlite3")
    where = rt.fresh_dir()
    script = ("create table t(a integer primary key, b text);\n"
              "with recursive n(i) as (select 1 union all select i + 1 from n where i < 2000) "
              "insert into t select i, printf('row %d', i) from n;\n"
              "select count(*) from t where b like 'row 1%';\n")
    r = rt.run([sqlite3, ":memory:", "-cmd", script.replace("\n", " "), ".quit"], outdir=where)
    rt.expect(r.rc == 0 and r.stdout == "1111\n", f"sqlite3: {r.rc} {r.stdout!r} {r.stderr!r}")
    rows, doc, vias = found_vs_bare(r.profile)
    rt.expect(len(vias) >= 1 and all(v.startswith("[libsqlite3.so.0+0x") for v in vias),
              f"the wrapper inside libsqlite3 found: {dict(vias)}")
    top = max(rows, key=lambda row: row.calls)
    sites = collections.Counter()
    for row in rows:
        sites[(row.stack[0], row.via)] += row.calls
    (site, via), calls = sites.most_common(1)[0]
    rt.expect(not site.startswith("[") and via in vias,
              f"the top site is named, the wrapper folded into it: {site} via {via} ({calls})")


@rt.test
def test_unnamed_wrappers_debian_git():
    git = debian_tool("git")
    where = rt.fresh_dir()
    repo = os.path.join(where, "repo")
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@b", GIT_AUTHOR_DATE="2020-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2020-01-01T00:00:00Z", HOME=where)
    subprocess.run([git, "init", "-q", repo], check=True, env=env)
    for i in range(20):
        with open(os.path.join(repo, f"f{i % 5}.txt"), "a") as f:
            f.write("".join(f"line {i} {k}\n" for k in range(40)))
        subprocess.run([git, "-C", repo, "add", "-A"], check=True, env=env)
        subprocess.run([git, "-C", repo, "commit", "-qm", f"c{i}"], check=True, env=env)
    r = rt.run([git, "-C", repo, "log", "-p"], outdir=where, extra_env={"HOME": where})
    rt.expect(r.rc == 0 and r.stdout.count("\ncommit ") == 19, f"git log -p: {r.rc} {r.stderr!r}")
    profile = os.path.join(where, f"malloc_freq.{r.pid}")
    rows, doc, vias = found_vs_bare(profile)
    rt.expect(len(vias) >= 2 and all(v.startswith("[git+0x") for v in vias),
              f"git's xmalloc and the like found: {dict(vias)}")
    bare = rt.csv_rows(profile, extra=["--no-fold"])
    bare_sites = collections.Counter()
    for row in bare:
        bare_sites[row.stack[0]] += row.calls
    top = bare_sites.most_common(1)[0][0]
    rt.expect(top in vias, f"--no-fold's top site {top} is a wrapper found: {dict(vias)}")
