"""The rule cache (c_core/mf_rule_cache.c): the unwind rules a process learned from its
modules' CFI are kept in <base>/.malloc_freq-rules.<euid>/, one file per build id, and a
later process of the same build takes them instead of learning them. Shown by the process
file's counts of rules learned and loaded (struct mf_process_header.rules_learned and
rules_loaded): a second run learns nothing and finds the same stacks, exact counts and all.
A cache file that is stale (another build id, another build under the same id), truncated,
corrupt, insane under a right checksum, another user's, 0644, a symlink, a FIFO or a
directory is ignored, the module learned again, the file replaced by the right one; a cache
directory that is a symlink, another user's or writable by others is not used at all."""
import os
import stat
import struct
import subprocess

import harness as rt
from harness import expect, expect_eq

SHORT_SITES, _short_runs, _stacks = rt.SHORT_SITES, rt.short_runs_program, rt.unwound_stacks

PROCESS_RULES_OFFSET = rt.F.process_header.rules_learned  # then rules_loaded
HEADER = rt.F.rule_cache_header.size  # then (pc - bias, rule) pairs of 8 bytes each
CHECKSUM_AT = rt.F.rule_cache_header.checksum
NOBODY = 65534
CALLS = 1000
# -O2 without frame pointers: rules of every kind the walk follows (SP, SP_SAVED, FP), and
# stacks 30 frames deep.
FLAGS = ("-O2", "-fomit-frame-pointer")


def _prog():
    return _short_runs(FLAGS)


def _rules(profile):
    """(rules learned, rules loaded) from the profile's process file."""
    (path,) = rt.process_files(profile)
    with open(path, "rb") as f:
        data = f.read()
    expect(struct.unpack_from("<I", data, rt.F.process_header.header_size)[0] >=
           PROCESS_RULES_OFFSET + 16,
           f"{path}: a header without the rule counts")
    return struct.unpack_from("<QQ", data, PROCESS_RULES_OFFSET)


def _cache_dir(base):
    return os.path.join(base, f".malloc_freq-rules.{os.geteuid()}")


def _build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                         check=True).stdout
    ids = [line.split(":", 1)[1].strip() for line in out.splitlines() if "Build ID:" in line]
    expect(len(ids) == 1, f"{path}: build ids {ids}")
    return ids[0]


def _cache_file(base, prog):
    return os.path.join(_cache_dir(base), _build_id(prog) + ".rules")


def _checksum(data):
    """mf_rc_sum: the file's words, its checksum taken as 0."""
    h, mask = 0x6a09e667f3bcc909, (1 << 64) - 1
    for i, (w,) in enumerate(struct.iter_unpack("<Q", data)):
        h = ((h ^ (0 if i * 8 == CHECKSUM_AT else w)) * 0x9e3779b97f4a7c15) & mask
        h ^= h >> 29
    return h


def _count(data):
    return struct.unpack_from("<Q", data, rt.F.rule_cache_header.count)[0]


def _run(argv, base, extra_env=None, stdout=None):
    r = rt.run_ok(argv, outdir=base, extra_env=extra_env)
    expect_eq(r.stderr, "", f"{os.path.basename(argv[0])}: stderr")
    if stdout is not None:
        expect_eq(r.stdout, stdout, f"{os.path.basename(argv[0])}: output")
    return r


def _short(prog, base, extra_env=None):
    """short_runs at N=1: its stacks (exact counts checked) and its rule counts."""
    r = _run([prog, str(CALLS)], base, extra_env, stdout=f"{CALLS} calls\n")
    rows = rt.csv_rows(r.profile)
    rt.expect_sites(rows, {s: (CALLS // 50 * k, CALLS // 50 * k * size)
                           for s, (k, size) in SHORT_SITES.items()})
    return _stacks(r.profile), _rules(r.profile)


def _expect_private(path, what):
    st = os.lstat(path)
    expect(stat.S_ISREG(st.st_mode), f"{what}: not a regular file")
    expect_eq((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, os.geteuid()),
              f"{what}: mode and owner")


@rt.test
def test_rule_cache_second_run_learns_nothing_and_finds_the_same_stacks():
    prog = _prog()
    base = rt.fresh_dir()
    cold, (learned, loaded) = _short(prog, base)
    expect(learned > 15, f"a cold run learned {learned} rules")
    expect_eq(loaded, 0, "rules a cold run loaded")
    st = os.lstat(_cache_dir(base))
    expect_eq((stat.S_ISDIR(st.st_mode), stat.S_IMODE(st.st_mode)), (True, 0o700),
              "the cache directory (a directory, 0700)")
    names = sorted(os.listdir(_cache_dir(base)))
    expect(os.path.basename(_cache_file(base, prog)) in names, f"no file for short_runs: {names}")
    total = 0
    for name in names:
        expect(name.endswith(".rules"), f"a file left in the cache: {name}")
        path = os.path.join(_cache_dir(base), name)
        _expect_private(path, name)
        with open(path, "rb") as f:
            total += _count(f.read())
    expect_eq(total, learned, "rules in the cache files: every rule the cold run learned")
    for i in range(2):
        warm, rules = _short(prog, base)
        expect_eq(rules, (0, learned), f"warm run {i + 1}: rules (learned, loaded)")
        expect(warm == cold, "the warm run's stacks differ from the cold run's")
    off_base = rt.fresh_dir()
    off, rules = _short(prog, off_base, {"MALLOC_FREQ_RULE_CACHE": "0"})
    expect_eq(rules, (learned, 0), "MALLOC_FREQ_RULE_CACHE=0: rules (learned, loaded)")
    expect(off == cold, "the stacks without the cache differ from those with it")
    expect(not os.path.exists(_cache_dir(off_base)), "MALLOC_FREQ_RULE_CACHE=0 made a cache")
    os.unlink(_cache_file(base, prog))
    _, rules = _short(prog, base, {"MALLOC_FREQ_RULE_CACHE": "0"})
    expect_eq(rules, (learned, 0), "MALLOC_FREQ_RULE_CACHE=0 with a warm cache")
    expect(not os.path.exists(_cache_file(base, prog)), "MALLOC_FREQ_RULE_CACHE=0 wrote a file")
    # Someone else's program, and a short process: ls learns nothing the second time.
    ls = ["/bin/ls", "-l", "/usr/lib"]
    env = {"LC_ALL": "C", "TZ": "UTC"}
    base = rt.fresh_dir()
    first = _run(ls, base, env)
    learned, loaded = _rules(first.profile)
    expect(learned > 30 and loaded == 0, f"ls, cold: learned {learned}, loaded {loaded}")
    second = _run(ls, base, env, stdout=first.stdout)
    expect_eq(_rules(second.profile), (0, learned), "ls, warm: rules (learned, loaded)")
    expect(_stacks(second.profile) == _stacks(first.profile), "ls: the warm run's stacks differ")


# The largest cache file whose rules go into the rule table at once (MF_RC_BUF_BYTES): a
# larger one's rules are taken one by one as walks meet their addresses.
RC_BUF_BYTES = 16 << 10
WIDE = 1500  # functions of the wide program, each calling malloc from its own place


def _wide_program():
    """A program of WIDE functions (not folded into each other: -fno-ipa-icf), each
    allocating (i % 7 + 1) * 16 bytes i % 3 + 1 times:
    WIDE stacks, 2 * WIDE return addresses to unwind, and so a cache file of ~48 KiB."""
    work = rt.fresh_dir()
    src, prog = os.path.join(work, "wide.c"), os.path.join(work, "wide")
    with open(src, "w") as f:
        f.write("#include <stdlib.h>\n#include <stdio.h>\n")
        for i in range(WIDE):
            f.write(f"__attribute__((noinline)) static void f{i}(void) {{ for (int k = 0; "
                    f"k < {i % 3 + 1}; k++) {{ void *p = malloc({(i % 7 + 1) * 16}); "
                    "__asm__ volatile(\"\" : : \"r\"(p) : \"memory\"); free(p); } }\n")
        f.write("int main(void) {\n")
        for i in range(WIDE):
            f.write(f"    f{i}();\n")
        f.write('    puts("wide done");\n    return 0;\n}\n')
    subprocess.run(["gcc", "-g", "-O2", "-fomit-frame-pointer", "-fno-ipa-icf", "-o", prog, src], check=True)
    return prog


def _cc1(base, src, extra_env=None, sample="1"):
    """cc1 (gcc's compiler proper, a 30 MB program) on src at -O2: its path, its rule counts
    and its stacks' return addresses (stored_return_addresses)."""
    cc1 = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True, text=True,
                         check=True).stdout.strip()
    argv = [cc1, "-fpreprocessed", "-quiet", src, "-O2", "-o", os.devnull]
    r = rt.run_ok(argv, outdir=base, extra_env=extra_env, sample=sample)
    expect_eq(r.stderr, "", "cc1: stderr")
    return cc1, _rules(r.profile), rt.stored_return_addresses(r.profile)


def _cached(base):
    """The rules in each of the cache's files, by name."""
    d = _cache_dir(base)
    return {n: _count(open(os.path.join(d, n), "rb").read()) for n in os.listdir(d)}


@rt.test
def test_rule_cache_takes_a_large_files_rules_as_walks_meet_them():
    """A cache file of more rules than the read buffer holds is kept in memory and its rules
    taken one at a time as walks meet their addresses (storing all of cc1's 7,441 wrote every
    page of a 1 MiB table, 8 ms a process). A warm run meets every address the cold one
    learned: it loads exactly those and finds the same stacks (a program of ours, whose
    stacks do not move from run to run); cc1's warm run loads a rule for each return address
    its cold run met too, and a sampled one only the few it meets."""
    prog = _wide_program()
    base = rt.fresh_dir()
    sites = {f"f{i}": ((i % 3 + 1), (i % 3 + 1) * (i % 7 + 1) * 16) for i in range(WIDE)}

    def wide():
        r = _run([prog], base, stdout="wide done\n")
        rows = rt.csv_rows(r.profile)
        got = {s: (sum(x.calls for x in rows if x.site == s), sum(x.bytes for x in rows if x.site == s))
               for s in sites}
        expect(got == sites, f"wide: {sum(got[s] != sites[s] for s in sites)} of {WIDE} sites "
                             "counted wrong")
        return _stacks(r.profile), _rules(r.profile)

    cold, (learned, loaded) = wide()
    expect_eq(loaded, 0, "wide, cold: rules loaded")
    size = os.path.getsize(_cache_file(base, prog))
    expect(size > RC_BUF_BYTES, f"wide's cache file: {size} bytes (a file of at most 16 KiB is "
                                "loaded whole: this would prove nothing)")
    for i in range(2):
        warm, rules = wide()
        expect_eq(rules, (0, learned), f"wide, warm run {i + 1}: rules (learned, loaded)")
        expect(warm == cold, "wide: the warm run's stacks differ from the cold run's")
    # gcc's compiler on this project's largest source, preprocessed.
    src = os.path.join(rt.fresh_dir(), "mf_table.i")
    subprocess.run(["gcc", "-E", "-D_GNU_SOURCE", "-I" + os.path.join(rt.REPO, "c_core"),
                    "-o", src, os.path.join(rt.REPO, "c_core", "mf_table.c")], check=True)
    base = rt.fresh_dir()
    cc1, (learned, loaded), cold = _cc1(base, src)
    expect_eq((loaded, learned), (0, len(cold)),
              "cc1, cold: rules (loaded, learned: one a return address its stacks hold)")
    cached = _cached(base)
    own = cached.pop(os.path.basename(_cache_file(base, cc1)))
    expect(own * 16 > RC_BUF_BYTES and own + sum(cached.values()) == learned,
           f"cc1's cache file holds {own} rules, the others {cached}, of {learned} learned")
    # cc1 is not the same from run to run (its vectorizer walks hash tables of pointers):
    # the warm run loads a rule for each return address the cold run met too, and learns
    # only those of the few it alone met.
    _, rules, warm = _cc1(base, src)
    expect_eq(rules, (len(warm - cold), len(warm & cold)), "cc1, warm: rules (learned, loaded)")
    expect(len(warm ^ cold) * 100 < len(cold),
           f"cc1's runs met {len(cold)} and {len(warm)} return addresses, {len(warm & cold)} "
           "of them both")
    # 1 call in 1,000 sampled: the small files are loaded whole, of cc1's only what is met.
    _, (learned, loaded), _ = _cc1(base, src, {"MALLOC_FREQ_EXACT": "0"}, sample="1000")
    others = sum(cached.values())
    expect(learned == 0 and others < loaded < others + own // 4,
           f"cc1 sampled: learned {learned}, loaded {loaded} rules; the small files hold "
           f"{others}, cc1's {own}")


@rt.test
def test_rule_cache_merges_what_each_program_learned():
    # short_runs and ls share libc: each one's save merges its libc rules with the other's,
    # so neither learns again after both have run.
    prog, base = _prog(), rt.fresh_dir()
    ls = ["/bin/ls", "/usr/lib"]
    env = {"LC_ALL": "C"}
    _, (a, _) = _short(prog, base)
    b, _ = _rules(_run(ls, base, env).profile)
    expect(a > 0 and b > 0, f"cold runs learned {a} and {b} rules")
    _, (learned, _) = _short(prog, base)
    expect_eq(learned, 0, "short_runs after ls: rules learned")
    expect_eq(_rules(_run(ls, base, env).profile)[0], 0, "ls after short_runs: rules learned")


def _bad_files(good, other, outside):
    """name -> a function that puts a bad cache file in place of `good` at path."""
    def write(path, data, mode=0o600):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)

    def insane(path):
        # A rule of no kind the walk knows (9), under a checksum that is right for it.
        data = bytearray(good)
        data[HEADER + 8] = 9
        struct.pack_into("<Q", data, CHECKSUM_AT, _checksum(bytes(data)))
        write(path, bytes(data))

    def flipped(path):
        # A rule changed into another sane one (frame pointer -> end of stack, or a stack
        # pointer rule's frame 8 bytes larger): only the checksum tells.
        data = bytearray(good)
        for at in range(HEADER + 8, len(data), 16):
            rule = struct.unpack_from("<Q", data, at)[0]
            if rule & 0xff in (1, 2):
                struct.pack_into("<Q", data, at, rule + 3 if rule & 0xff == 1 else rule + (8 << 40))
                break
        else:
            raise rt.TestFailure("no frame pointer or stack pointer rule to change")
        write(path, bytes(data))

    def owned_by_nobody(path):
        write(path, good)
        os.chown(path, NOBODY, NOBODY)

    def symlink(path):
        write(outside, good)
        os.symlink(outside, path)

    cases = {
        "truncated": lambda p: write(p, good[:-8]),
        "the header only": lambda p: write(p, good[:HEADER]),
        "a wrong checksum": flipped,
        "an insane rule under a right checksum": insane,
        "another build id's file": lambda p: write(p, other),
        "mode 0644": lambda p: write(p, good, 0o644),
        "a symlink to a good file": symlink,
        "a FIFO": lambda p: os.mkfifo(p, 0o600),
        "a directory": lambda p: os.mkdir(p, 0o700),
    }
    if os.geteuid() == 0:
        cases["another user's"] = owned_by_nobody
    return cases


@rt.test
def test_rule_cache_ignores_and_replaces_bad_files():
    prog, base = _prog(), rt.fresh_dir()
    cold, (learned, _) = _short(prog, base)
    path = _cache_file(base, prog)
    with open(path, "rb") as f:
        good = f.read()
    own = _count(good)  # the rules of short_runs' own module
    expect(0 < own < learned, f"short_runs' file holds {own} of {learned} rules")
    others = [n for n in os.listdir(_cache_dir(base)) if n != os.path.basename(path)]
    with open(os.path.join(_cache_dir(base), others[0]), "rb") as f:
        other = f.read()
    outside = os.path.join(rt.fresh_dir(), "elsewhere.rules")
    for what, plant in _bad_files(good, other, outside).items():
        os.unlink(path)
        plant(path)
        stacks, rules = _short(prog, base)
        # Ignored: the module is learned again, the others' rules are loaded as before.
        expect_eq(rules, (own, learned - own), f"{what}: rules (learned, loaded)")
        expect(stacks == cold, f"{what}: the stacks differ from the cold run's")
        # Replaced, by the very file a cold run wrote.
        _expect_private(path, f"{what}: the replaced file")
        with open(path, "rb") as f:
            expect(f.read() == good, f"{what}: the replaced file is not the cold run's")
        if what.startswith("a symlink"):
            with open(outside, "rb") as f:
                expect(f.read() == good, "the symlink's target was written to")
            _expect_private(outside, "the symlink's target")
        _, rules = _short(prog, base)
        expect_eq(rules, (0, learned), f"{what}: the run after the replacement")


@rt.test
def test_rule_cache_tells_builds_under_one_build_id_apart():
    # Two builds of short_runs given the same build id (-Wl,--build-id=0x...), -O2 and -O1:
    # the module's layout, recorded beside the id, differs, so neither takes the other's
    # rules; each run replaces the file with its own build's.
    same = "-Wl,--build-id=0x" + "5a" * 20
    a, b = _short_runs(FLAGS + (same,)), _short_runs(("-O1", "-fomit-frame-pointer", same))
    expect_eq(_build_id(a), _build_id(b), "the two builds' build ids")
    base = rt.fresh_dir()
    stacks_a, (learned_a, _) = _short(a, base)
    with open(_cache_file(base, a), "rb") as f:
        own_a = _count(f.read())
    stacks_b, (learned_b, loaded_b) = _short(b, base)
    with open(_cache_file(base, b), "rb") as f:
        own_b = _count(f.read())
    expect_eq((learned_b, loaded_b), (own_b, learned_a - own_a),
              "the -O1 build after the -O2 one: rules (learned, loaded)")
    again, (learned, loaded) = _short(a, base)
    expect_eq((learned, loaded), (own_a, learned_a - own_a),
              "the -O2 build after the -O1 one: rules (learned, loaded)")
    expect(again == stacks_a, "the -O2 build's stacks differ between its runs")


@rt.test
def test_rule_cache_directory_is_used_only_if_private():
    prog = _prog()
    _, (learned, _) = _short(prog, rt.fresh_dir(), {"MALLOC_FREQ_RULE_CACHE": "0"})
    plants = {"a symlink to a directory of ours": "symlink", "writable by others": "0777"}
    if os.geteuid() == 0:
        plants["another user's"] = "nobody"
    for what, how in plants.items():
        base = rt.fresh_dir()
        target = os.path.join(rt.fresh_dir(), "rules")
        if how == "symlink":
            os.mkdir(target, 0o700)
            os.symlink(target, _cache_dir(base))
        else:
            os.mkdir(_cache_dir(base), 0o700)
            if how == "0777":
                os.chmod(_cache_dir(base), 0o777)
            else:
                os.chown(_cache_dir(base), NOBODY, NOBODY)
        for i in range(2):
            _, rules = _short(prog, base)
            expect_eq(rules, (learned, 0), f"cache directory {what}: run {i + 1}'s rules")
        inside = target if how == "symlink" else _cache_dir(base)
        expect_eq(os.listdir(inside), [], f"cache directory {what}: files written in it")


@rt.test
def test_rule_cache_keeps_no_module_without_a_build_id():
    prog = _short_runs(FLAGS + ("-Wl,--build-id=none",))
    base = rt.fresh_dir()
    _, (learned, _) = _short(prog, base)
    files = os.listdir(_cache_dir(base))
    cached = 0
    for name in files:
        with open(os.path.join(_cache_dir(base), name), "rb") as f:
            cached += _count(f.read())
    expect(0 < cached < learned, f"{cached} of {learned} rules cached")
    _, rules = _short(prog, base)
    expect_eq(rules, (learned - cached, cached), "the second run: rules (learned, loaded)")
    expect_eq(sorted(os.listdir(_cache_dir(base))), sorted(files), "files in the cache")


@rt.test
def test_rule_cache_setting_is_checked():
    r = rt.run_ok([_prog(), "50"], extra_env={"MALLOC_FREQ_RULE_CACHE": "yes"})
    expect_eq(r.stderr, "malloc_freq: MALLOC_FREQ_RULE_CACHE=yes is not a number in 0..1; "
                        "using the default (1)\n", "the warning")
    expect(os.path.isdir(_cache_dir(r.outdir)), "the cache was not used (the default)")


@rt.test
def test_rule_cache_leaves_errno_alone_and_stops_at_a_seccomp_filter():
    # thread_errno checks errno after each of its calls (exit 1 if one changed it), in four
    # threads; the cache is read at the main thread's first walks and written at the exit.
    # With "filter" (root) a seccomp filter comes after the main thread's calls: a cold run
    # writes nothing at its exit, a warm one still loads every rule at its first walks.
    prog = rt.c_program("thread_errno")
    sealed = ("malloc_freq: a seccomp filter is installed: from now on no profile file is "
              "made or opened (a new thread records into the first thread's table, a full "
              "table counts its calls as not profiled)\n")

    def run(argv, base, stderr=""):
        r = rt.run_ok(argv, outdir=base)
        expect_eq(r.stderr, stderr, f"{argv[1:]}: stderr")
        rt.expect_sites(rt.csv_rows(r.profile), rt.THREAD_ERRNO_SITES)
        return _rules(r.profile)

    base = rt.fresh_dir()
    learned, _ = run([prog], base)
    expect(learned > 0, f"thread_errno, cold: learned {learned} rules")
    expect_eq(run([prog], base), (0, learned), "thread_errno, warm: rules (learned, loaded)")
    if os.geteuid() != 0:
        return
    filtered = rt.fresh_dir()
    cold = run([prog, "filter"], filtered, sealed)
    expect(cold[0] > 0, f"thread_errno filter, cold: learned {cold[0]} rules")
    expect(not os.path.exists(_cache_dir(filtered)), "a cache written behind a seccomp filter")
    expect_eq(run([prog, "filter"], base, sealed), (0, learned),
              "thread_errno filter, warm: rules (learned, loaded)")


@rt.test
def test_rule_cache_is_private_whatever_the_umask():
    prog = _prog()
    for umask in (0o000, 0o777):
        base = rt.fresh_dir()
        r = subprocess.run([prog, "50"], env=rt.profiled_env(base), cwd=base,
                           capture_output=True, timeout=rt.TIMEOUT,
                           preexec_fn=lambda: os.umask(umask))
        expect_eq((r.returncode, r.stderr), (0, b""), f"umask {umask:o}: exit status, stderr")
        st = os.lstat(_cache_dir(base))
        expect_eq(stat.S_IMODE(st.st_mode), 0o700, f"umask {umask:o}: the cache directory's mode")
        names = os.listdir(_cache_dir(base))
        expect(os.path.basename(_cache_file(base, prog)) in names, f"umask {umask:o}: {names}")
        for name in names:
            _expect_private(os.path.join(_cache_dir(base), name), f"umask {umask:o}: {name}")
