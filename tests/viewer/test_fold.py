"""The transform stage on real programs: allocation wrappers folded into their callers
(the site is the caller, shown "caller via wrapper"), start-up frames cut at main and at the
thread's start routine, --fold and --hide with the user's own patterns, --no-fold and
--full-stacks to see everything; names shortened in the tree and lines cut to --width.
Programs: tests/programs/wrapper_sites.c (its own xmalloc), cxx_containers.cpp, gcc's cc1
building tests/make_project under the launcher, and CPython under the launcher."""

import os
import re
import shutil
import subprocess
import sys

import harness as rt

WRAPPER_SITES = rt.WRAPPER_SITES
# What the tree must not show unless --full-stacks: the frames outside main and the thread's
# start routine.
STARTUP = re.compile(r"(^|[─ ])(_start|__libc_start_main\w*|__libc_start_call_main|"
                     r"start_thread|clone3?|std::rt::lang_start\w*)( \(|$)")
# What is not a site where the program's own work is: the wrappers folded by default.
WRAPPER_NAMES = re.compile(r"^(xmalloc|xcalloc|xrealloc|xstrdup|xmemdup|_?obstack\w*|"
                           r"_?PyObject_(Malloc|Calloc|Realloc)|_?PyMem_\w+|pymalloc_\w+|"
                           r"_?PyObject_GC_\w+|gc_alloc|_PyObject_New\w*)( \(|$)")


def tree(profile_dirs, *args):
    argv = []
    for d in profile_dirs:
        argv += ["--dir", d]
    r = rt.mf_print(argv + list(args))
    rt.expect(r.stderr == "", f"mf_print {' '.join(args)} wrote to stderr: {r.stderr.strip()!r}")
    return r.stdout


def top_sites(text):
    """[(name as shown, calls)] of the tree's top-level lines, largest first."""
    return [(line.name, line.calls) for line in rt.tree_lines(text)
            if line.top and not line.text.startswith("…")]


def startup_lines(text):
    return [line.text for line in rt.tree_lines(text) if STARTUP.search(line.text)]


@rt.test
def test_fold_wrapper_sites_exact():
    """xmalloc called from three sites: the tree's sites are the three callers "via xmalloc"
    with their exact counts (and xstrdup's caller via xstrdup); --no-fold shows xmalloc as the
    site of them all; --fold folds the program's own arena_get, --hide leaves helper_layer
    out and the header says how many frames and calls that touched."""
    r = rt.run_ok([rt.c_program("wrapper_sites")])
    rt.expect_eq(r.stdout, "wrapper_sites done\n", "program output")
    text = tree([r.profile], "--threshold", "0")
    sites = dict(top_sites(text))
    for site, (calls, _) in WRAPPER_SITES.items():
        rt.expect_eq(sites.get(site), calls, f"tree site {site!r}")
    rt.expect(not [s for s in sites if s.split(" via ")[0] in ("xmalloc", "xstrdup")],
              f"a wrapper is a site: {sites}")
    rt.expect(re.search(r"^  folded     wrappers into their callers in 5 stacks", text, re.M),
              f"the header's folded line:\n{text[:900]}")
    rows = rt.csv_rows(r.profile)
    for site, (calls, nbytes) in WRAPPER_SITES.items():
        name, via = site.split(" via ")
        got = [(x.calls, x.bytes) for x in rows if x.site == name and x.via == via]
        rt.expect_eq(got, [(calls, nbytes)], f"CSV rows of {site}")
    # --no-fold: the wrapper is the site of every call through it.
    sites = dict(top_sites(tree([r.profile], "--threshold", "0", "--no-fold")))
    rt.expect_eq(sites.get("xmalloc"), 2070, "--no-fold: xmalloc's calls")
    rt.expect(not [s for s in sites if " via " in s], f"--no-fold still folds: {sites}")
    # --fold REGEX: the program's own allocator layer folds too (xmalloc under it as well).
    sites = dict(top_sites(tree([r.profile], "--threshold", "0", "--fold", "^arena_")))
    rt.expect_eq(sites.get("use_arena via arena_get"), 500, "--fold ^arena_")
    rt.expect("arena_get via xmalloc" not in sites, f"--fold ^arena_: {sites}")
    # --hide REGEX: helper_layer is gone from the stacks of build_table and use_arena.
    text = tree([r.profile], "--threshold", "0", "--hide", "helper_lay(er)?$")
    rt.expect("helper_layer" not in text.split("\n\n", 1)[1], f"--hide left helper_layer:\n{text}")
    rt.expect(re.search(r"^  hidden     2 frames matching --hide, in 2 stacks of 1,000 calls$",
                        text, re.M), f"--hide's header line:\n{text[:900]}")
    lines = rt.tree_lines(text)
    for i, line in enumerate(lines):
        if line.name == "build_table via xmalloc":
            rt.expect_eq(lines[i + 1].name, "main", "build_table's caller once helper_layer is hidden")
    rt.expect_eq(rt.tree_header_total(text), rt.exact_total_calls(r.profile), "total with --hide")
    # Every frame hidden: the stack is still counted, as [every frame hidden] (via the
    # wrapper folded into it, which is not a frame of the stack any more).
    sites = dict(top_sites(tree([r.profile], "--threshold", "0", "--hide", ".")))
    rt.expect_eq(sites, {"[every frame hidden] via xmalloc": 2000,
                         "[every frame hidden] via xstrdup": 70, "[every frame hidden]": 1},
                 "--hide . hides every frame but no call")
    # A pattern that is not a regular expression: one line, exit status 2.
    bad = rt.mf_print(["--fold", "x(", r.profile], check=False)
    rt.expect(bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
              and "--fold" in bad.stderr, f"--fold 'x(': {bad.returncode} {bad.stderr!r}")


@rt.test
def test_startup_frames_cut_unless_full_stacks():
    """No tree line shows _start, __libc_start_main, __libc_start_call_main, start_thread or
    clone3: the main thread's stacks end at main, a thread's at its start routine; with
    --full-stacks they are all there, the numbers the same."""
    r = rt.run_ok([rt.c_program("wrapper_sites")])
    text = tree([r.profile], "--threshold", "0")
    rt.expect_eq(startup_lines(text), [], "start-up frames in the tree")
    lines = rt.tree_lines(text)
    roots = {lines[i].name for i in range(len(lines))
             if i + 1 == len(lines) or lines[i + 1].top}  # the last line of each site's chain
    rt.expect(roots <= {"main", "worker", "read_lines via xmalloc"} and "worker" in roots,
              f"stacks end at main or the thread's start routine: {roots}")
    full = tree([r.profile], "--threshold", "0", "--full-stacks")
    shown = " ".join(startup_lines(full))
    for name in ("_start", "__libc_start_call_main", "start_thread", "clone3"):
        rt.expect(name in shown, f"--full-stacks does not show {name}: {shown}")
    rt.expect_eq(top_sites(full), top_sites(text), "sites and counts with --full-stacks")
    rt.expect(not re.search(r"^  cut ", full, re.M), "--full-stacks: the header says cut")


# tests/programs/cxx_containers.cpp: the program's functions, the sites (calls at
# MALLOC_FREQ_SAMPLE=1 follow from libstdc++'s growth rules: map nodes and their strings, one
# shared_ptr block and one vector each, 97 vectors doubling to 41 or 42 elements, 97 buckets'
# nodes and 4 rehashes).
CXX_CONTAINER_SITES = {
    "app::thread_fill_map(int)": 3000,
    "app::make_shared_objects(int)": 1000,
    "app::Index<…>::add_all(int)": 679 + 101,
}


@rt.test
def test_cxx_containers_sites_are_the_programs_functions():
    """The C++ standard library's frames fold into the program's functions: the top sites
    are app::*, not std::vector<…>::_M_realloc_insert or _Rb_tree::_M_get_node; template
    arguments are collapsed to <…> in the tree; with --width 70 no line is wider; the
    thread's stacks start at its function (libstdc++'s start routine and std::thread's
    invoker cut)."""
    prog = rt.build("cxx_containers", ["cxx_containers.cpp"], cxx=True, libs=("-lpthread",))
    r = rt.run_ok([prog])
    text = tree([r.profile])
    sites = {}
    for name, calls in top_sites(text):
        base = name.split(" via ")[0]
        sites[base] = sites.get(base, 0) + calls
    for site, calls in CXX_CONTAINER_SITES.items():
        rt.expect_eq(sites.get(site), calls, f"calls at {site}")
    top = top_sites(text)[0][0]
    rt.expect(top.startswith("app::thread_fill_map(int) via std::map<…>::emplace<…>("),
              f"the top site: {top!r}")
    rt.expect(not any(n.startswith(("std::", "__gnu_cxx::")) for n in sites), f"sites {sites}")
    rt.expect_eq(startup_lines(text), [], "start-up frames in the tree")
    rt.expect(not [line for line in rt.tree_lines(text) if "[libstdc++" in line.text],
              "libstdc++'s thread start in the tree")
    narrow = tree([r.profile], "--width", "70")
    wide = [line for line in narrow.splitlines() if len(line) > 70]
    rt.expect_eq(wide, [], "lines wider than --width 70")
    rt.expect(any(line.endswith("…") for line in narrow.splitlines()), "no line was cut")
    full = tree([r.profile], "--full-names")
    rt.expect("std::map<int, std::__cxx11::basic_string<char" in full, "--full-names")


def launcher_run(args, cwd):
    r = rt.launch_ok(["-q", "-s", "1", "--"] + args, cwd=cwd)
    return r, rt.process_dirs(r.run_dir)


@rt.test
def test_cc1_top_site_is_not_a_wrapper():
    """gcc building tests/make_project with make -j2 under the launcher: cc1's largest site
    is gcc's own code, not xmalloc, xcalloc, xrealloc or obstack growth (77 % of its calls
    went through them before folding), and no start-up frame is shown."""
    cwd = rt.fresh_dir()
    project = os.path.join(cwd, "project")
    shutil.copytree(rt.MAKE_PROJECT, project)
    r, dirs = launcher_run(["make", "-j2"], project)
    cc1 = [d for d in dirs if any(os.path.basename(exe) == "cc1" for _, _, exe in rt.process_images(d))]
    rt.expect_eq(len(cc1), 3, "cc1 processes")
    text = tree(cc1, "--threshold", "0")
    sites = top_sites(text)
    top = sites[0][0]
    rt.expect(not WRAPPER_NAMES.match(top.split(" via ")[0]), f"cc1's top site is a wrapper: {top}")
    rt.expect(" via " in top, f"cc1's top site folded no wrapper: {top}")
    rt.expect(not [s for s, _ in sites if WRAPPER_NAMES.match(s)], f"a wrapper is a site: {sites[:8]}")
    rt.expect_eq(startup_lines(tree(dirs)), [], "start-up frames in the run's tree")
    unfolded = top_sites(tree(cc1, "--threshold", "0", "--no-fold"))
    rt.expect(WRAPPER_NAMES.match(unfolded[0][0]), f"--no-fold: cc1's top site {unfolded[0]}")


PY_WORK = """import json
def build(n):
    return [{"id": i, "name": "item%d" % i, "tags": [str(i), str(i * 2)]} for i in range(n)]
records = build(20000)
text = json.dumps(records)
print(len(json.loads(text)))
"""


@rt.test
def test_python_top_site_does_real_work():
    """A CPython script under the launcher (PYTHONMALLOC=malloc): the top site is a CPython
    function that makes objects (PyList_New, PyUnicode_New, dict resizing, ...), not
    PyObject_Malloc, a PyMem_ helper or the GC allocator, which fold into it."""
    cwd = rt.fresh_dir()
    script = rt.python_script(cwd, PY_WORK)
    r, dirs = launcher_run([sys.executable, script], cwd)
    rt.expect_eq(r.stdout, "20000\n", "the script's output")
    text = tree(dirs, "--threshold", "0")
    sites = top_sites(text)
    top = sites[0][0]
    rt.expect(not WRAPPER_NAMES.match(top.split(" via ")[0]), f"Python's top site is a wrapper: {top}")
    rt.expect(not [s for s, _ in sites[:10] if WRAPPER_NAMES.match(s)],
              f"a wrapper among the top sites: {sites[:10]}")
    rt.expect_eq(startup_lines(text), [], "start-up frames in the tree")
    rt.expect([s for s, _ in sites if s.endswith(" via _PyObject_GC_New")],
              f"no site folds CPython's GC allocator: {sites[:10]}")
    # Without folding, the GC allocator is a site of its own among the largest (whether
    # PyObject_Malloc is too depends on the build: this one may inline it).
    unfolded = top_sites(tree(dirs, "--threshold", "0", "--no-fold"))
    rt.expect([s for s, _ in unfolded[:5] if WRAPPER_NAMES.match(s)],
              f"--no-fold: no wrapper among the top sites {unfolded[:5]}")
