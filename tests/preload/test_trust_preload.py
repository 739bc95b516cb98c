"""The preload library in front of another allocator: jemalloc or tcmalloc preloaded after it
(`LD_PRELOAD="libmalloc_freq.so libjemalloc.so.2"`), which the README promises works.

- Programs nobody here wrote (coreutils' ls, id, cp, stat and GNU sed) must behave exactly as
  with that allocator alone: same stdout bytes, same exit status, no crash, within a time
  bound. They used to die of SIGSEGV under jemalloc: until the profiler's constructor had
  looked up the next allocator, it handed out glibc's memory, which jemalloc's free then got.
- Every call goes to the next allocator from the very first one, also from threads that a
  library's constructor starts before the profiler's has run (early_alloc).
- C++ operator new in all its forms is counted exactly, once: jemalloc and tcmalloc export
  their own operator new, which never reaches malloc (10,000 calls used to be missing from a
  total labelled exact); libstdc++'s calls malloc, which counts it.
- new_handler and std::bad_alloc behave as without the profiler.

Needs libjemalloc2 and libtcmalloc-minimal4 (`make test` installs them when run as root)."""

import os
import shutil
import subprocess

import harness as rt

NEXT_ALLOCATORS = {
    "jemalloc": "libjemalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
}
LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
COMMAND_TIMEOUT = 60  # seconds; these commands take milliseconds


def allocator_path(name):
    soname = NEXT_ALLOCATORS[name]
    for d in LIB_DIRS:
        path = os.path.join(d, soname)
        if os.path.exists(path):
            return path
    raise rt.TestFailure(f"{soname} is not installed: apt-get install libjemalloc2 "
                         "libtcmalloc-minimal4 (make test does it when run as root)")


def run_with(argv, allocator, profiled, cwd, sample="1"):
    """Runs argv with `allocator` (a path, or None for glibc's) preloaded, after the profiler
    if profiled. Returns (CompletedProcess, the profile directory it wrote, or None)."""
    outdir = rt.fresh_dir()
    preload = ([rt.LIB] if profiled else []) + ([allocator] if allocator else [])
    if profiled:
        env = rt.profiled_env(outdir, sample)
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_FREQ_")}
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = " ".join(preload)
    env["LC_ALL"] = "C"
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise rt.TestFailure(f"{' '.join(argv)} with LD_PRELOAD={env.get('LD_PRELOAD')!r} "
                             f"did not finish within {COMMAND_TIMEOUT} s")
    dirs = [os.path.join(outdir, d) for d in os.listdir(outdir) if d.startswith("malloc_freq.")]
    rt.expect(len(dirs) <= 1, f"{' '.join(argv)} wrote {len(dirs)} profile directories")
    return p, dirs[0] if dirs else None


def describe(p):
    status = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exit {p.returncode}"
    return f"{status}, stderr {p.stderr.decode(errors='replace').strip()[-300:]!r}"


def expect_same_run(argv, allocator, cwd, what):
    """argv behaves the same with the profiler in front of `allocator` as with `allocator`
    alone: no signal, the same exit status and stdout. Returns the profiled run's stdout and
    its profile."""
    plain, _ = run_with(argv, allocator, False, cwd)
    rt.expect(plain.returncode >= 0, f"{what} without the profiler: {describe(plain)}")
    prof, profile = run_with(argv, allocator, True, cwd)
    rt.expect(prof.returncode >= 0, f"{what} with the profiler: {describe(prof)}")
    rt.expect_eq(prof.returncode, plain.returncode, f"{what}: exit status")
    rt.expect_eq(prof.stdout, plain.stdout, f"{what}: stdout")
    rt.expect(profile, f"{what}: no profile directory")
    return prof.stdout.decode(errors="replace"), profile


def coreutils_fixture():
    """A directory of files for the commands to list, copy, edit and stat."""
    d = rt.fresh_dir()
    src = os.path.join(d, "src")
    os.makedirs(os.path.join(src, "sub"))
    for i in range(40):
        with open(os.path.join(src, "sub" if i % 3 else "", f"file{i:02}.txt"), "w") as f:
            f.write("".join(f"line {j} of file {i}: lorem ipsum dolor\n" for j in range(i * 7)))
    return d


@rt.test
def test_coreutils_with_jemalloc_or_tcmalloc_after_us():
    fixture = coreutils_fixture()
    src = os.path.join(fixture, "src")
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs)
    commands = [
        ["ls", "/"],
        ["ls", "-laR", src],
        ["id"],
        ["stat", "-c", "%n %s %F %a %h %u %g", src] + files,
        ["sed", "-e", "s/o/0/g; s/\\([0-9]\\+\\) of/of \\1/", "-e", "/file 1[0-9]/d"] + files,
    ]
    for name in NEXT_ALLOCATORS:
        allocator = allocator_path(name)
        for argv in commands:
            _, profile = expect_same_run(argv, allocator, fixture, f"{argv[0]} under {name}")
            total = rt.exact_total_calls(profile)
            rt.expect(total > 0, f"{argv[0]} under {name}: no call counted")
            rt.expect_eq(rt.csv_total(rt.csv_rows(profile)), total,
                         f"{argv[0]} under {name}: CSV total vs the headers' totals")
        # cp: what it makes is the copy.
        for profiled in (False, True):
            dst = os.path.join(fixture, f"copy_{name}_{int(profiled)}")
            p, _ = run_with(["cp", "-r", src, dst], allocator, profiled, fixture)
            what = f"cp under {name}" + (" with the profiler" if profiled else "")
            rt.expect(p.returncode == 0 and not p.stdout, f"{what}: {describe(p)}")
            rt.expect(tree_bytes(dst) == tree_bytes(src), f"{what}: the copy differs")
            shutil.rmtree(dst)


def tree_bytes(root):
    """{path relative to root: contents} of every file under root."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            with open(os.path.join(dirpath, n), "rb") as f:
                files[os.path.relpath(os.path.join(dirpath, n), root)] = f.read()
    return files


# tests/programs/early_alloc.c
EARLY_MAIN_SITE = {"site_main": (1000, 1000 * 40)}


@rt.test
def test_first_call_already_goes_to_the_next_allocator():
    """A library's constructor, run before the profiler's, allocates from four threads at
    once; main() then checks, grows and frees those blocks. Not one call may reach glibc's
    heap when jemalloc or tcmalloc follows the profiler; main's calls are counted exactly."""
    lib = rt.build("libearly_alloc.so", ["early_alloc_lib.c"], shared=True, libs=("-lpthread",))
    prog = rt.build("early_alloc", ["early_alloc.c"],
                    libs=(lib, f"-Wl,-rpath,{os.path.dirname(lib)}", "-lpthread"))
    for name in [None] + list(NEXT_ALLOCATORS):
        allocator = allocator_path(name) if name else None
        what = f"early_alloc under {name or 'glibc'}"
        out, profile = expect_same_run([prog], allocator, rt.fresh_dir(), what)
        heap = "used" if name is None else "untouched"
        rt.expect_eq(out, "early blocks: constructor ran, 0 bytes wrong\n"
                     f"glibc heap: {heap}\n", f"{what}: output")
        rows = rt.csv_rows(profile)
        rt.expect_sites(rows, EARLY_MAIN_SITE)
        rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile),
                     f"{what}: CSV total vs the headers' totals")


# tests/programs/cxx_new_kinds.cpp: site -> (calls, bytes), at scale 1. 10,000 calls.
NEW_SITES = {
    "site_new": (3000, 3000 * 24),
    "site_new_array": (2000, 2000 * 96),
    "site_new_nothrow": (1000, 1000 * 24),
    "site_new_array_nothrow": (1000, 1000 * 48),
    "site_new_aligned": (1000, 1000 * 128),
    "site_new_array_aligned": (800, 800 * 384),
    "site_new_aligned_nothrow": (700, 700 * 128),
    "site_new_array_aligned_nothrow": (500, 500 * 256),
}
NEW_CALLS = sum(c for c, _ in NEW_SITES.values())
# What each allocation function's exact total gains from the sites: a call counts once, in
# the first of our entry points it reaches. Behind glibc, libstdc++'s operator new calls
# malloc (the aligned forms aligned_alloc), which counts it. tcmalloc's operator new calls
# no allocation function of ours: the operator new counts. jemalloc's aligned forms call
# aligned_alloc through the PLT (ours), its others do not.
NEW_PER_FN = {
    "glibc": {"malloc": 7000, "aligned_alloc": 3000},
    "jemalloc": {"operator new": 4000, "operator new[]": 3000, "aligned_alloc": 3000},
    "tcmalloc": {"operator new": 4000, "operator new[]": 3000, "operator new aligned": 1700,
                 "operator new[] aligned": 1300},
}


def per_fn_delta(profile, baseline):
    after, before = rt.exact_calls_per_fn(profile), rt.exact_calls_per_fn(baseline)
    return {rt.MF_FN_NAMES[i]: a - b for i, (a, b) in enumerate(zip(after, before)) if a != b}


@rt.test
def test_cxx_new_counted_once_behind_any_allocator():
    prog = rt.build("cxx_new_kinds", ["cxx_new_kinds.cpp"], cxx=True)
    for name in [None] + list(NEXT_ALLOCATORS):
        allocator = allocator_path(name) if name else None
        what = f"cxx_new_kinds under {name or 'glibc'}"
        cwd = rt.fresh_dir()
        _, profile = expect_same_run([prog, "1"], allocator, cwd, what)
        _, baseline = expect_same_run([prog, "0"], allocator, cwd, f"{what} 0")
        rows = rt.csv_rows(profile)
        rt.expect_sites(rows, NEW_SITES)
        # Nothing counted twice or left out: the run makes exactly NEW_CALLS calls more
        # than the same program with no site run (what the C++ runtime allocates itself).
        total, base = rt.exact_total_calls(profile), rt.exact_total_calls(baseline)
        rt.expect_eq(total - base, NEW_CALLS, f"{what}: exact total minus the 0-scale run's")
        rt.expect_eq(rt.csv_total(rows), total, f"{what}: CSV total vs the headers' totals")
        rt.expect_eq(per_fn_delta(profile, baseline), NEW_PER_FN[name or "glibc"],
                     f"{what}: calls per allocation function")
        # The tree's header names each function counted.
        tree = rt.tree_text(profile)
        rt.expect_eq(rt.tree_header_total(tree), total, f"{what}: tree header total")
        functions = [line for line in tree.splitlines() if line.startswith("  functions")]
        for fn in NEW_PER_FN[name or "glibc"]:
            rt.expect(functions and f" {fn} " in functions[0],
                      f"{what}: the tree header does not name {fn}: {functions}")
        # Out of memory: the new_handler is called and bad_alloc thrown (or nullptr returned)
        # exactly as without the profiler.
        plain, _ = run_with([prog, "oom"], allocator, False, cwd)
        prof, _ = run_with([prog, "oom"], allocator, True, cwd)
        rt.expect_eq(plain.returncode, 3, f"{what} oom: unprofiled exit status")
        rt.expect_eq(prof.returncode, 3, f"{what} oom: exit status")
        rt.expect_eq(prof.stdout, plain.stdout, f"{what} oom: stdout")
        rt.expect(b"new[] aligned nothrow: null after 3 handler calls" in plain.stdout,
                  f"{what} oom: unexpected output {plain.stdout!r}")
        # A form whose first call runs out of memory may take another path then (jemalloc
        # retries through malloc): the calls after it are still counted exactly, once.
        _, after_oom = expect_same_run([prog, "oom", "1"], allocator, cwd, f"{what} oom 1")
        rows = rt.csv_rows(after_oom)
        rt.expect_sites(rows, NEW_SITES)
        rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(after_oom),
                     f"{what} oom 1: CSV total vs the headers' totals")

    # The library interposes operator new without needing libstdc++: C programs do not
    # load it.
    needed = subprocess.run(["readelf", "-d", rt.LIB], capture_output=True, text=True,
                            check=True).stdout
    rt.expect("libstdc++" not in needed, f"libmalloc_freq.so needs libstdc++:\n{needed}")
    r = rt.run_ok(["sh", "-c", "cat /proc/$$/maps"])
    rt.expect("libstdc++" not in r.stdout, "libstdc++ is mapped into a profiled C program")


# tests/programs/cxx_new_race.cpp: 8 threads x 500 rounds, one call of each form a round.
RACE_SITES = {site: (4000, 4000 * size) for site, size in [
    ("race_new", 8), ("race_new_array", 24), ("race_new_nothrow", 8),
    ("race_new_array_nothrow", 24), ("race_new_aligned", 64), ("race_new_array_aligned", 128),
    ("race_new_aligned_nothrow", 64), ("race_new_array_aligned_nothrow", 128)]}


@rt.test
def test_cxx_new_first_calls_race():
    """Each form's first call decides where that form counts; eight threads make theirs at
    once. Every call is counted once, whichever thread decided, behind every allocator."""
    prog = rt.build("cxx_new_race", ["cxx_new_race.cpp"], cxx=True, libs=("-lpthread",))
    for name in [None] + list(NEXT_ALLOCATORS):
        allocator = allocator_path(name) if name else None
        what = f"cxx_new_race under {name or 'glibc'}"
        cwd = rt.fresh_dir()
        _, baseline = expect_same_run([prog, "0"], allocator, cwd, f"{what} 0")
        for attempt in range(5):
            _, profile = expect_same_run([prog, "1"], allocator, cwd, what)
            rows = rt.csv_rows(profile)
            rt.expect_sites(rows, RACE_SITES)
            rt.expect_eq(rt.exact_total_calls(profile) - rt.exact_total_calls(baseline),
                         8 * 4000, f"{what} (run {attempt + 1}): exact total minus the "
                         "0-scale run's")
            rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile),
                         f"{what} (run {attempt + 1}): CSV total vs the headers' totals")



@rt.test
def test_c_host_cxx_plugin_behind_any_allocator():
    """A C program dlopens a C++ plugin (RTLD_LOCAL): the plugin's operator new binds to ours,
    and the next one (libstdc++'s, jemalloc's, tcmalloc's) is found though dlsym(RTLD_NEXT)
    cannot see a locally loaded libstdc++. Output, exceptions and thread cancellation as
    without the profiler, and the plugin's 100 `new long` counted once each."""
    plugin = rt.build("cxx_plugin.so", ["cxx_plugin.cpp"], cxx=True, shared=True)
    host = rt.c_program("dlopen_host", libs=("-ldl", "-lpthread"))
    for name in [None] + list(NEXT_ALLOCATORS):
        allocator = allocator_path(name) if name else None
        what = f"dlopen_host under {name or 'glibc'}"
        out, profile = expect_same_run([host, plugin], allocator, rt.fresh_dir(), what)
        rt.expect("plugin reader cancelled yes, destructors 11" in out,
                  f"{what}: output {out!r}")
        rows = rt.csv_rows(profile)
        rt.expect_sites(rows, {"plugin_site": (100, 800)})
        rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile),
                     f"{what}: CSV total vs the headers' totals")


# ---- the guarded calls: the program must not notice them ------------------------------------

GUARDED_CALLS = ["pthread_create", "setrlimit", "prlimit", "setgroups", "setgid", "setegid",
                 "setresgid", "seteuid", "setreuid", "setresuid", "setuid", "chroot", "prctl"]


@rt.test
def test_guarded_calls_leave_errno_alone():
    """Each call the preload library guards (it makes the profile, loads libunwind, adds the
    modules first), made first in its process and then again, succeeds with errno as the
    program set it, as glibc's alone does; the counts stay exact. Before: the first guarded
    call of a process set errno to 0 (libunwind's loading), the first pthread_create of
    every program among them. As root (setuid(0), chroot("/"))."""
    if os.geteuid() != 0:
        return
    prog = rt.c_program("guard_errno")
    problems = []
    for first in GUARDED_CALLS:
        plain = rt.run([prog, first], profile=False)
        r = rt.run([prog, first])
        want = "".join(f"{name} 0 42\n" for name in [first] + GUARDED_CALLS)
        rt.expect_eq(plain.stdout, want, f"{first} first, without the profiler")
        if (r.rc, r.stdout, r.stderr) != (0, want, ""):
            got = [l for l in r.stdout.splitlines() if not l.endswith(" 0 42")]
            problems.append(f"{first} first: status {r.rc}, stderr {r.stderr!r}, calls that "
                            f"changed errno: {got}")
            continue
        rt.expect_sites(rt.csv_rows(r.profile), {"site_after": (200, 9600)})
    rt.expect(not problems, "; ".join(problems))
