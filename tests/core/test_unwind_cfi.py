"""The rule walk (c_core/mf_unwind.c) with its rules read from each module's CFI
(c_core/mf_cfi.c): every stack is the one libunwind alone gives, frame for frame, at
MALLOC_FREQ_SAMPLE=1, on programs nobody here wrote (CPython, ls, gcc, git) and ours (with
and without frame pointers; C++ templates; a signal handler on an alternate stack, a
coroutine on a heap stack and garbage in %rbp); and libunwind is loaded only when a stack
needs it: never by `ls`, which a short-process loop runs a thousand times, and by the
program whose signal frame only libunwind can step through."""
import os
import shutil
import subprocess

import harness as rt
from harness import expect, expect_eq


_stacks = rt.unwound_stacks


def _same_stacks_both_ways(argv, what, extra_env=None, stdout=None):
    """Runs argv at N=1 with the rule walk and with libunwind alone: the same stacks."""
    runs = {}
    for unwind in ("libunwind", "libunwind-only"):
        env = dict(extra_env or {}, MALLOC_FREQ_UNWIND=unwind)
        r = rt.run_ok(argv, extra_env=env)
        expect_eq(r.stderr, "", f"{what} ({unwind}): stderr")
        if stdout is not None:
            expect_eq(r.stdout, stdout, f"{what} ({unwind}): output")
        runs[unwind] = _stacks(r.profile)
    a, b = runs["libunwind"], runs["libunwind-only"]
    expect(len(a) > 1, f"{what}: {len(a)} stacks")
    diff = sorted(set(a) ^ set(b))[:4]
    expect(a == b, f"{what}: the CFI rules' stacks differ from libunwind's, e.g. {diff}")
    return a


@rt.test
def test_rule_walk_gives_libunwinds_stacks():
    # With frame pointers, without (-O2: rbp saved and reused), and a program built by
    # someone else with neither (git, through libc and libz).
    _same_stacks_both_ways([rt.short_runs_program(), "20000"], "short_runs")
    _same_stacks_both_ways([rt.short_runs_program(("-O2", "-fomit-frame-pointer")), "20000"],
                           "short_runs -O2 -fomit-frame-pointer")
    git = shutil.which("git")
    if git:
        repo = rt.small_repository()
        _same_stacks_both_ways([git, "-C", repo, "--no-pager", "log", "-p"], "git log -p",
                               rt.git_env(repo))


@rt.test
def test_cfi_rules_give_libunwinds_stacks_in_other_peoples_programs():
    python = shutil.which("python3")
    expect(python is not None, "python3 is needed")
    stacks = _same_stacks_both_ways(
        [python, "-c", "import json; d = {str(i): [i] * (i % 7) for i in range(20000)}; "
                       "print(len(json.dumps(d)))"],
        "python3", {"PYTHONHASHSEED": "0"}, stdout="601275\n")
    expect(len(stacks) > 500, f"python3: {len(stacks)} stacks")
    _same_stacks_both_ways(["/bin/ls", "-l", "/usr/lib"], "ls -l", {"LC_ALL": "C"})
    gcc = shutil.which("gcc")
    if gcc:
        src = os.path.join(rt.PROGRAMS, "exact_sites.c")
        out = os.path.join(rt.fresh_dir(), "exact_sites.o")
        _same_stacks_both_ways([gcc, "-O2", "-c", "-o", out, src], "gcc -O2 -c")


@rt.test
def test_cfi_rules_give_libunwinds_stacks_in_cxx_and_hostile_frames():
    prog = rt.build("cxx_containers", ["cxx_containers.cpp"], cxx=True, libs=("-lpthread",))
    _same_stacks_both_ways([prog], "cxx_containers")
    if os.uname().machine == "x86_64":
        _same_stacks_both_ways([rt.c_program("hostile_frames")], "hostile_frames",
                               stdout="hostile_frames done\n")


def _loads_libunwind(argv, extra_env=None):
    r = rt.run_ok(argv, extra_env=dict(extra_env or {}, LD_DEBUG="files"))
    return "file=libunwind" in r.stderr, r


@rt.test
def test_libunwind_is_loaded_only_when_a_stack_needs_it():
    loaded, r = _loads_libunwind(["/bin/ls", "/usr/lib"], {"LC_ALL": "C"})
    expect(not loaded, "ls /usr/lib loaded libunwind: its stacks all have CFI rules")
    expect(rt.exact_total_calls(r.profile) > 50, "ls /usr/lib: its calls were recorded")
    if os.uname().machine == "x86_64":
        # A signal frame (glibc's __restore_rt is marked so in its CFI) is libunwind's.
        loaded, r = _loads_libunwind([rt.c_program("hostile_frames")])
        expect(loaded, "hostile_frames did not load libunwind for its signal frame")
        rt.expect_sites(rt.csv_rows(r.profile), rt.HOSTILE_SITES)


@rt.test
def test_cfi_cache_forgets_a_closed_library():
    """mf_cfi.c keeps the objects its lookups found while the loader's counts of loads and
    unloads stand still. A library closed and another mapped at its address (of other code:
    one built with frame pointers, one without and in another order) must get its own rules:
    those of every 4th byte of its code, read after the first one's were, are those a
    process that never loaded the first one reads. (With the counts not checked, 64 of
    187 differ.)"""
    core = os.path.join(rt.REPO, "c_core")
    liba = rt.build("libcfi_variant1.so", ["cfi_variant_lib.c"], shared=True,
                    libs=("-DVARIANT=1",))
    libb = rt.build("libcfi_variant2.so", ["cfi_variant_lib.c"], shared=True,
                    libs=("-DVARIANT=2", "-O2", "-fomit-frame-pointer"))
    prog = rt.build("cfi_reload", ["cfi_reload.c", os.path.join(core, "mf_cfi.c")],
                    libs=("-D_GNU_SOURCE", "-I" + core, "-ldl"))
    fresh = subprocess.run([prog, libb], capture_output=True, text=True, check=True).stdout
    after = subprocess.run([prog, liba, libb], capture_output=True, text=True, check=True).stdout
    first, _, rules = after.partition("\n")
    expect_eq(first, "same address", "where the second library was mapped (else this proves nothing)")
    kinds = {line.split()[2] for line in fresh.splitlines()}
    expect(len(fresh.splitlines()) > 100 and len(kinds) >= 2, f"rules read: {fresh[:200]!r}")
    expect(rules == fresh, "rules after the first library was closed differ from a fresh "
           f"process's: {sum(a != b for a, b in zip(rules.splitlines(), fresh.splitlines()))} lines")


THREAD_ERRNO_SITES = rt.THREAD_ERRNO_SITES


@rt.test
def test_stack_mapping_found_by_query_and_by_reading_the_maps():
    """A walk stays inside the mapping that holds its first frame; each thread's is looked up
    at its first sample. On Linux 6.11 and later the kernel answers by address
    (PROCMAP_QUERY); a process that has a seccomp filter or no_new_privs (the step before an
    unprivileged filter) reads /proc/self/maps instead, for a filter may kill the process for
    an ioctl it does not know; so does a kernel that answers ENOTTY; and once a filter is
    installed nothing is opened (a filter may kill the process for an open too): a thread's
    stack then ends at its thread pointer, and the new threads record into the first table,
    which one line says. The program's threads
    run one at a time: with the filter, two racing could both be refused. Four ways: plain (four
    queries, one per thread); under setpriv --no-new-privs (none from the program: seen in
    its /proc/self/status); no_new_privs set by the program after its main thread's calls
    (one: seen in its prctl); a filter that answers the query ENOTTY, installed by the seccomp system call after the
    main thread's calls, as root (one: the main thread's, before it). Each way: every
    thread's stacks whole (exact counts at the sites), errno as the program left it (under
    setpriv also in an image exec'd from a profiled one, whose start-up's mkdir finds the
    directory already there: EEXIST reached the program before)."""
    prog = rt.c_program("thread_errno")
    ways = [("plain", [prog], 4, 0), ("nnp", [prog, "nnp"], 1, 0)]
    if shutil.which("setpriv"):
        # one query: setpriv's own, before it sets no_new_privs and execs the program
        ways.append(("setpriv", ["setpriv", "--no-new-privs", prog], 1, 0))
    if os.geteuid() == 0:
        ways.append(("filter", [prog, "filter"], 1, 0))
    sealed = ("malloc_freq: a seccomp filter is installed: from now on no profile file is made "
              "or opened (a new thread records into the first thread's table, a full table "
              "counts its calls as not profiled)\n")
    for what, argv, queries, refused in ways:
        r = rt.run_ok(argv)
        expect_eq(r.stderr, sealed if what == "filter" else "", f"thread_errno {what}: stderr")
        rt.expect_sites(rt.csv_rows(r.profile), THREAD_ERRNO_SITES)
        if not shutil.which("strace"):
            continue
        trace = os.path.join(rt.fresh_dir(), "trace")
        subprocess.run(["strace", "-f", "-e", "trace=ioctl", "-o", trace] + argv,
                       env=rt.profiled_env(rt.fresh_dir()), check=True)
        with open(trace) as f:
            text = f.read()
        asked = text.count("_IOC(_IOC_READ|_IOC_WRITE, 0x66, 0x11, 0x68)")
        got_refused = text.count("= -1 ENOTTY")
        if what == "plain" and got_refused:
            return  # a kernel before 6.11 here: every query is refused, the rest proves nothing
        expect_eq((asked, got_refused), (queries, refused), f"{what}: queries asked, refused")
