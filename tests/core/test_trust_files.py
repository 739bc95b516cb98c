"""The profile's files can be trusted, and trust nothing: set-user-ID programs are left
alone, a directory or symlink planted by another user is refused, modes are private
whatever the umask, RLIMIT_FSIZE stops the profile and not the program, fork and exec
children find the directory settled at start-up after a chdir, a long base directory never
truncates a name, and a pending cancel is not acted on inside malloc.

The tests that need a second user (nobody, made with setresuid in the child or setpriv) or a
set-user-ID binary run only as root, as CI does; as another user they pass without checking
anything."""

import glob
import os
import re
import resource
import shutil
import stat
import struct
import subprocess
import tempfile
import time

import harness as rt

NOBODY = 65534  # the second user: what `setpriv --reuid=65534 --regid=65534 --clear-groups`
                # makes, done in the child itself so that no intermediate program is profiled
CORE = os.path.join(rt.REPO, "c_core")


def is_root():
    return os.geteuid() == 0


def clean_env(extra=None):
    """The test runner's environment without the profiler's variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("MALLOC_FREQ_")}
    env.update(extra or {})
    return env


def public_dir():
    """A fresh directory that nobody can enter too."""
    d = rt.fresh_dir()
    os.chmod(d, 0o755)
    return d


def execute(argv, env, cwd, umask=None, fsize=None, uid=None):
    """Runs argv (as uid and its group, with no other group, if given); returns (status,
    stdout, stderr); status is -SIGNAL if a signal killed it."""
    def setup():
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if umask is not None:
            os.umask(umask)
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=rt.TIMEOUT,
                       preexec_fn=setup)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def spawn_with_known_pid(argv, env, cwd, prepare):
    """Forks, lets prepare(pid) plant things for the child's pid, then execs argv in the
    child (same pid). Returns (status, stdout, stderr)."""
    r, w = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            try:
                os.close(w)
                os.read(r, 1)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                os.chdir(cwd)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        os.close(r)
        try:
            prepare(pid)
        finally:
            os.write(w, b"x")
            os.close(w)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return (os.waitstatus_to_exitcode(status), out.read().decode(errors="replace"),
                err.read().decode(errors="replace"))


def compile_c(out, sources, flags=()):
    cmd = ["gcc"] + rt.CFLAGS + ["-o", out] + sources + list(flags)
    r = subprocess.run(cmd, capture_output=True, text=True)
    rt.expect(r.returncode == 0, f"cannot compile {out}: {r.stderr.strip()[-800:]}")
    return out


def linked_core_flags():
    """Compiles c_core/*.c into a program, as the Rust crate does."""
    return ["-std=gnu11", "-D_GNU_SOURCE", "-DMF_LINKED_CORE", "-I" + CORE]


def core_sources():
    return sorted(glob.glob(os.path.join(CORE, "*.c")))


def trusted_library_dir(binary):
    """The system directory libc comes from: the loader preloads a library from there (by
    name, and only with the set-user-ID bit) into a set-user-ID program."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    rt.expect(m, f"no libc in `ldd {binary}`: {out!r}")
    return os.path.dirname(os.path.realpath(m.group(1)))


def profile_warnings(stderr, plain_stderr=""):
    return [l for l in stderr.splitlines() if l not in plain_stderr.splitlines()]


# ---- secure execution ---------------------------------------------------------------------

# Runs "$@" (VAR=value... PROGRAM) as nobody in an empty environment, in a private mount
# namespace; with MF_NAME set, first puts a set-user-ID copy of the preload library there,
# under that name, in an overlay of the system library directory that vanishes with the
# namespace: the real directory never holds it, even if the test is killed.
SETUID_SCRIPT = f"""
if [ -n "$MF_NAME" ]; then
    mount -t overlay overlay -o "lowerdir=$MF_LIBDIR,upperdir=$MF_UP,workdir=$MF_WORK" \\
        "$MF_LIBDIR" || exit 97
    cp "$MF_LIB" "$MF_LIBDIR/$MF_NAME" && chmod 4755 "$MF_LIBDIR/$MF_NAME" || exit 98
fi
cd "$MF_CWD" || exit 99
exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env -i "$@"
"""


def private_mount_namespace():
    """Whether the tools the set-user-ID test runs are there and `unshare` can make the
    private mount namespace it needs (not in a chroot without namespaces, say): (True, "")
    or (False, what is missing)."""
    for tool, package in (("unshare", "util-linux"), ("setpriv", "util-linux"),
                          ("mount", "mount")):
        if not shutil.which(tool):
            return False, f"`{tool}` is missing (Debian's {package})"
    try:
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "true"],
                           capture_output=True, text=True, timeout=rt.TIMEOUT)
    except OSError as e:
        return False, f"`unshare` cannot run: {e}"
    why = p.stderr.strip() or f"exit status {p.returncode}"
    return p.returncode == 0, f"`unshare --mount` cannot make a private mount namespace: {why}"


def run_setuid_as_nobody(prog, variables, cwd, libdir=None, name=None):
    scratch = rt.fresh_dir()
    for d in ("up", "work"):
        os.mkdir(os.path.join(scratch, d))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MF_CWD": cwd, "MF_LIB": rt.LIB,
           "MF_LIBDIR": libdir or "", "MF_NAME": name or "",
           "MF_UP": os.path.join(scratch, "up"), "MF_WORK": os.path.join(scratch, "work")}
    argv = (["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", SETUID_SCRIPT,
             "sh"] + [f"{k}={v}" for k, v in variables.items()] + [prog])
    status, out, err = execute(argv, env, "/")
    rt.expect(status not in (97, 98, 99), f"the set-up in the mount namespace failed ({status}): "
                                          f"{err.strip()!r}")
    # unshare, sh or setpriv could not run: say so rather than blame the set-user-ID bit.
    rt.expect("unshare:" not in err and status not in (126, 127),
              f"unshare, sh or setpriv could not run the program ({status}): {err.strip()!r}")
    return status, out, err


@rt.test
def test_setuid_program_is_not_profiled():
    """A set-user-ID root program run by nobody, with MALLOC_FREQ_DIR and
    MALLOC_FREQ_LIBUNWIND pointing at the attacker's files: nothing created, nothing
    loaded, the same output as without the profiler. Both through the preload library
    (by name, from the system's library directory, with the set-user-ID bit: the only way
    the loader preloads into such a program) and with the core linked in."""
    if not is_root():
        return
    usable, why = private_mount_namespace()
    if not usable:  # the environment lacks the facility: say so, check nothing else
        rt.need(False, f"{why}: the set-user-ID program cannot be installed where the loader "
                       "trusts it")
    base = public_dir()
    attacker = os.path.join(base, "attacker")
    os.mkdir(attacker)
    os.chown(attacker, NOBODY, NOBODY)
    marker = os.path.join(attacker, "loaded-as-root")
    evil = compile_c(os.path.join(attacker, "libevil.so"),
                     [os.path.join(rt.PROGRAMS, "evil_unwind.c")],
                     ["-shared", "-fPIC", f'-DMF_EVIL_MARKER="{marker}"'])
    os.chown(evil, NOBODY, NOBODY)
    src = os.path.join(rt.PROGRAMS, "secure_prog.c")
    plain = compile_c(os.path.join(base, "secure_plain"), [src])
    linked = compile_c(os.path.join(base, "secure_linked"), [src] + core_sources(),
                       linked_core_flags() + ["-ldl", "-lm", "-lpthread"])
    for prog in (plain, linked):
        os.chown(prog, 0, 0)
        os.chmod(prog, 0o4755)
    libdir = trusted_library_dir(plain)
    name = "libmalloc_freq_setuid_test.so"
    attack = {"MALLOC_FREQ_DIR": attacker, "MALLOC_FREQ_LIBUNWIND": evil,
              "MALLOC_FREQ_SAMPLE": "1", "MALLOC_FREQ_DEPTH": "bogus"}
    problems = []
    for what, prog, extra in (("preloaded", plain, {"LD_PRELOAD": name}), ("linked", linked, {})):
        install = (libdir, name) if extra else (None, None)
        ref = run_setuid_as_nobody(prog, {}, attacker, *install)
        if not ref[1].startswith("euid "):
            problems.append(f"{what}: the program did not run as nobody: {ref!r}")
            continue
        if not ref[1].startswith("euid 0 "):
            problems.append(f"{what}: the set-user-ID bit took no effect: {ref!r}")
            continue
        got = run_setuid_as_nobody(prog, {**attack, **extra}, attacker, *install)
        if got != ref:
            problems.append(f"{what}: (status, stdout, stderr) {got!r}, without the profiler "
                            f"{ref!r}")
        left = sorted(os.listdir(attacker))
        if left != ["libevil.so"]:
            problems.append(f"{what}: the attacker's directory holds {left}")
            for f in left:
                if f != "libevil.so":
                    p = os.path.join(attacker, f)
                    shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
    rt.expect(not os.path.exists(os.path.join(libdir, name)),
              f"{os.path.join(libdir, name)} is left in the system library directory")
    # The same library preloaded into the same program without the set-user-ID bit does
    # profile: the test above is not vacuous.
    os.chmod(plain, 0o755)
    r = rt.run([plain], extra_env={"MALLOC_FREQ_DEPTH": "8"})
    if not os.path.isdir(r.profile):
        problems.append(f"the plain program was not profiled without the set-user-ID bit: "
                        f"{r.stderr!r}")
    rt.expect(not problems, "; ".join(problems))


# ---- directories planted by another user ---------------------------------------------------

def planted_directory_case(prog, plain, base, plant):
    """Runs prog with MALLOC_FREQ_DIR=base after plant(path) put something at
    base/malloc_freq.<pid>; returns the problems found."""
    problems = []
    env = rt.profiled_env(base)
    planted = {}

    def prepare(pid):
        planted["path"] = os.path.join(base, f"malloc_freq.{pid}")
        plant(planted["path"])

    status, out, err = spawn_with_known_pid([prog], env, base, prepare)
    what = plant.__doc__
    if (status, out) != (plain[0], plain[1]):
        problems.append(f"{what}: status/stdout {status}/{out!r}, expected "
                        f"{plain[0]}/{plain[1]!r}")
    warnings = profile_warnings(err, plain[2])
    if len(warnings) != 1 or os.path.basename(planted["path"]) not in warnings[0]:
        problems.append(f"{what}: expected one warning line naming the directory, got "
                        f"{warnings}")
    return problems, planted["path"]


@rt.test
def test_planted_profile_directory_refused():
    """malloc_freq.<pid> made in advance by another user, owned by us but writable by
    others, or a symlink to a root-owned directory: the profiler refuses it (one line),
    writes nothing into or through it, and the program runs on unchanged."""
    if not is_root():
        return
    prog = rt.c_program("output_status")
    plain_run = rt.run([prog], profile=False)
    plain = (plain_run.rc, plain_run.stdout, plain_run.stderr)
    base = rt.fresh_dir()
    os.chmod(base, 0o1777)  # like /tmp
    victim = os.path.join(rt.fresh_dir(), "root-owned")
    os.mkdir(victim, 0o755)

    def foreign(path):
        """a directory of another user's"""
        os.mkdir(path)
        os.chmod(path, 0o777)
        os.chown(path, NOBODY, NOBODY)

    def foreign_private(path):
        """a private directory of another user's"""
        os.mkdir(path)
        os.chmod(path, 0o700)
        os.chown(path, NOBODY, NOBODY)

    def writable(path):
        """a directory of ours that others can write"""
        os.mkdir(path)
        os.chmod(path, 0o777)

    def symlink(path):
        """a symlink to a root-owned directory, made by another user"""
        os.symlink(victim, path)
        os.lchown(path, NOBODY, NOBODY)

    problems = []
    for plant in (foreign, foreign_private, writable, symlink):
        found, path = planted_directory_case(prog, plain, base, plant)
        problems += found
        inside = os.listdir(victim if plant is symlink else path)
        if inside:
            problems.append(f"{plant.__doc__}: files written into it: {inside}")
    rt.expect(not problems, "; ".join(problems))


@rt.test
def test_directory_replaced_after_creation():
    """The program's directory is moved away and another, holding symlinks under the names of
    its files that point at a root-owned file, put in its place (as another user can in a
    base directory that others may write to): growing a table, refreshing the modules and
    finishing the process file write nothing through it. One line; the program runs on."""
    prog = rt.c_program("many_stacks")
    base = rt.fresh_dir()
    os.chmod(base, 0o777)
    precious = os.path.join(rt.fresh_dir(), "precious")
    with open(precious, "wb") as f:
        f.write(b"root's own file\n")
    p = subprocess.Popen([prog, "wait"], env=rt.profiled_env(base), cwd=base,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    profile = os.path.join(base, f"malloc_freq.{p.pid}")
    try:
        for _ in range(1000):
            names = sorted(os.listdir(profile)) if os.path.isdir(profile) else []
            if any(n.startswith("thread.") for n in names):
                break
            time.sleep(0.01)
        rt.expect(any(n.startswith("thread.") for n in names), f"no thread file: {names}")
        os.rename(profile, profile + ".moved")
        os.mkdir(profile)
        for n in names:
            os.symlink(precious, os.path.join(profile, n))
        if is_root():
            os.chown(profile, NOBODY, NOBODY)
        out, err = p.communicate(b"x", timeout=rt.TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    rt.expect_eq((p.returncode, out), (0, b"many_stacks done\n"), "status and stdout")
    with open(precious, "rb") as f:
        rt.expect_eq(f.read(), b"root's own file\n", "the file behind the symlinks")
    rt.expect_eq(sorted(os.listdir(profile)), names, "the replacement directory's entries")
    warnings = err.decode(errors="replace").splitlines()
    rt.expect(len(warnings) == 1 and "cannot grow" in warnings[0],
              f"expected one line saying the table cannot grow, got {warnings}")


# ---- modes --------------------------------------------------------------------------------

def check_private(profile, uid, what):
    problems = []
    st = os.lstat(profile)
    if not stat.S_ISDIR(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o700 or st.st_uid != uid:
        problems.append(f"{what}: {os.path.basename(profile)} mode {oct(st.st_mode)} "
                        f"uid {st.st_uid}, expected a directory 0700 of uid {uid}")
    for f in sorted(os.listdir(profile)):
        st = os.lstat(os.path.join(profile, f))
        if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600 or st.st_uid != uid:
            problems.append(f"{what}: {f} mode {oct(st.st_mode)} uid {st.st_uid}, "
                            f"expected a regular file 0600 of uid {uid}")
    return problems


@rt.test
def test_modes_private_whatever_the_umask():
    """The directory is 0700 and every file 0600, owned by the user, under umask 0 (which
    would make them world-readable) and 0777 (which would leave them unusable); as root and,
    where possible, as nobody. The counts stay exact."""
    prog, lib = rt.c_program("four_threads"), rt.LIB
    users = [("root" if is_root() else "the user", None, os.geteuid())]
    if is_root():
        users.append(("nobody", NOBODY, NOBODY))
        # Copies that nobody can reach, wherever the repository is.
        shared = public_dir()
        prog = shutil.copy(prog, shared)
        lib = shutil.copy(lib, shared)
    problems = []
    for who, run_as, uid in users:
        for umask in (0o000, 0o777, 0o027):
            out = public_dir()
            os.chown(out, uid, -1)
            status, stdout, stderr = execute([prog], rt.profiled_env(out, extra={"LD_PRELOAD": lib}),
                                             out, umask=umask, uid=run_as)
            what = f"{who}, umask {umask:03o}"
            dirs = glob.glob(os.path.join(out, "malloc_freq.*"))
            if status != 0 or stderr or len(dirs) != 1:
                problems.append(f"{what}: status {status}, stderr {stderr!r}, "
                                f"profiles {dirs}")
                continue
            problems += check_private(dirs[0], uid, what)
            rows = rt.csv_rows(dirs[0])
            for k in range(4):
                got = rt.site_totals(rows, f"site_worker_{k}")[:2]
                if got != ((k + 1) * 100, (k + 1) * 4000):
                    problems.append(f"{what}: site_worker_{k} {got}")
    rt.expect(not problems, "; ".join(problems))


# ---- RLIMIT_FSIZE -------------------------------------------------------------------------

# tests/programs/many_stacks.c: site_leaf's calls ((k % 3) + 1 for each of 8,192 paths).
MANY_STACKS_CALLS = sum(k % 3 + 1 for k in range(1 << 13))


@rt.test
def test_file_size_limit_stops_the_profile_not_the_program():
    """`ulimit -f` below what a growing table needs: no SIGXFSZ, the same status and output,
    one warning line, the totals still exact (the stacks that did not fit are counted as not
    profiled)."""
    prog = rt.c_program("many_stacks")
    plain = execute([prog], clean_env(), rt.fresh_dir())
    limit = 256 * 1024
    out = rt.fresh_dir()
    status, stdout, stderr = execute([prog], rt.profiled_env(out), out, fsize=limit)
    rt.expect((status, stdout) == plain[:2],
              f"status/stdout {status}/{stdout!r} under `ulimit -f {limit // 1024}`, without "
              f"the profiler {plain[0]}/{plain[1]!r}")
    warnings = profile_warnings(stderr, plain[2])
    rt.expect(len(warnings) == 1 and "File too large" in warnings[0],
              f"expected one warning line (File too large), got {warnings}")
    dirs = glob.glob(os.path.join(out, "malloc_freq.*"))
    rt.expect_eq(len(dirs), 1, "profile directories")
    profile = dirs[0]
    sizes = [os.path.getsize(f) for f in glob.glob(os.path.join(profile, "*"))]
    rt.expect(max(sizes) <= limit, f"a file grew past the limit: {sizes}")
    rows = rt.csv_rows(profile)
    leaf, _, _ = rt.site_totals(rows, "site_leaf")
    unprofiled = sum(r.calls for r in rows if r.stack[0].startswith("[not profiled"))
    rt.expect(0 < leaf < MANY_STACKS_CALLS, f"site_leaf has {leaf} calls in the table: the "
              f"limit did not stop the table (or stopped it at once)")
    full = rt.run_ok([prog])
    rt.expect_eq(rt.exact_total_calls(profile), rt.exact_total_calls(full.profile),
                 "exact total calls with the limit vs without")
    rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile),
                 "CSV total (stacks + not profiled) vs the headers' totals")
    rt.expect(unprofiled >= MANY_STACKS_CALLS - leaf,
              f"{unprofiled} calls not profiled, {MANY_STACKS_CALLS - leaf} of site_leaf's "
              f"calls missing from the table")
    # `ulimit -f 0` with stderr a regular file: not even the process file fits, and the
    # warning would not either (writing it would raise SIGXFSZ): no line, no signal.
    out = rt.fresh_dir()
    err_path = os.path.join(out, "stderr")

    def limit_zero():
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    with open(err_path, "wb") as err_file:
        p = subprocess.run([prog], env=rt.profiled_env(out), cwd=out, stdout=subprocess.PIPE,
                           stderr=err_file, preexec_fn=limit_zero, timeout=rt.TIMEOUT)
    rt.expect_eq((p.returncode, p.stdout.decode()), plain[:2],
                 "status and stdout under `ulimit -f 0`, stderr a file")
    rt.expect_eq(os.path.getsize(err_path), 0, "bytes written to stderr under `ulimit -f 0`")


# ---- chdir, then fork or exec ---------------------------------------------------------------

def profiles_in(d):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "malloc_freq.*")))


def run_chdir_children(mode, relative, *args):
    """chdir_children MODE run in a fresh directory holding elsewhere/out and out, with
    MALLOC_FREQ_DIR relative (unset when None): (the directory, the finished process with
    its output as text, what the case is called)."""
    top = rt.fresh_dir()
    os.makedirs(os.path.join(top, "elsewhere", "out"))
    os.makedirs(os.path.join(top, "out"))
    env = rt.profiled_env(relative or top)
    if relative is None:
        del env["MALLOC_FREQ_DIR"]
    p = subprocess.Popen([rt.c_program("chdir_children"), "elsewhere", mode, *args], env=env,
                         cwd=top, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout, p.stderr = p.communicate(timeout=rt.TIMEOUT)
    what = f"{mode}, " + (f"MALLOC_FREQ_DIR={relative}" if relative else "MALLOC_FREQ_DIR unset")
    return top, p, what


@rt.test
def test_chdir_then_fork_child():
    """A program changes directory, after its first allocation or before it (the profile
    starts at the first allocation, the base directory is settled when the library is
    loaded), then forks a child that allocates: with a relative MALLOC_FREQ_DIR and without
    one, both profiles land where the program started, with exact counts."""
    problems = []
    for mode, relative in (("fork", "out"), ("fork", None), ("early-fork", "out"),
                           ("early-fork", None)):
        top, p, what = run_chdir_children(mode, relative)
        m = re.match(r"child (\d+)\n$", p.stdout)
        if p.returncode != 0 or not m or p.stderr:
            problems.append(f"{what}: status {p.returncode}, stdout {p.stdout!r}, "
                            f"stderr {p.stderr!r}")
            continue
        want_dir = os.path.join(top, relative) if relative else top
        want = sorted([f"malloc_freq.{p.pid}", f"malloc_freq.{m.group(1)}"])
        for d in (want_dir, os.path.join(top, "elsewhere"), os.path.join(top, "elsewhere", "out")):
            got = profiles_in(d)
            if got != (want if d == want_dir else []):
                problems.append(f"{what}: {os.path.relpath(d, top)} holds {got}")
        if profiles_in(want_dir) != want:
            continue
        parent = rt.csv_rows(os.path.join(want_dir, f"malloc_freq.{p.pid}"))
        child = rt.csv_rows(os.path.join(want_dir, f"malloc_freq.{m.group(1)}"))
        for who, rows, expected in (
                ("parent", parent, {"site_before": (100, 1600), "site_after": (200, 9600),
                                    "site_child": (0, 0)}),
                ("child", child, {"site_child": (300, 9600), "site_before": (0, 0)})):
            try:
                rt.expect_sites(rows, expected)
            except rt.TestFailure as e:
                problems.append(f"{what}, {who}: {e}")
    rt.expect(not problems, "; ".join(problems))


@rt.test
def test_chdir_then_exec_relative_dir():
    """A program with a relative MALLOC_FREQ_DIR, or none, changes directory (after its
    first allocation or before it) and execs another image: the new image writes next to
    the first in the same malloc_freq.<pid>, because the library put the base directory it
    settled at load in the environment, absolute (replacing a relative value, adding one
    when unset). Before, with MALLOC_FREQ_DIR unset, the image wrote in its new working
    directory."""
    second = rt.c_program("exec_second")
    for mode, relative in (("exec", "out"), ("early-exec", "out"), ("exec", None),
                           ("early-exec", None)):
        top, p, what = run_chdir_children(mode, relative, second)
        rt.expect((p.returncode, p.stdout, p.stderr) == (0, "exec_second done\n", ""),
                  f"{what}: status {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")
        want_dir = os.path.join(top, relative) if relative else top
        for d in (os.path.join(top, "elsewhere"), os.path.join(top, "elsewhere", "out")):
            rt.expect_eq(profiles_in(d), [], f"{what}: profiles in {os.path.relpath(d, top)}")
        rt.expect_eq(profiles_in(want_dir), [f"malloc_freq.{p.pid}"],
                     f"{what}: profiles in {os.path.relpath(want_dir, top)}")
        profile = os.path.join(want_dir, f"malloc_freq.{p.pid}")
        rt.expect_eq(len(rt.process_files(profile)), 2, f"{what}: process files (both images)")
        rows = rt.csv_rows(profile)
        rt.expect_sites(rows, {"site_before": (100, 1600), "site_after_exec": (900, 27000)})
        rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile),
                     f"{what}: CSV total vs the headers' totals")


# ---- setuid, then children ------------------------------------------------------------------

@rt.test
def test_children_after_setuid_are_profiled():
    """A root daemon's pattern: allocate, setuid(65534), fork a worker that allocates, and
    fork a child that execs another program. The setuid guard gives the profile directory
    and its files to the new user first, so the parent and the fork child (which may not
    create a directory in root's base) write there; the exec'd image, which inherits nothing
    of ours, writes there too (malloc_freq.<its parent's pid>) when the new user can reach
    it by its path, else it says in one line that it cannot create its own. Everything
    stays the new user's, 0700 and 0600. Before: the fork child's calls were lost ("cannot
    create ... Permission denied")."""
    if not is_root():
        return
    prog = rt.c_program("setuid_fork")
    second = shutil.copy(rt.c_program("exec_second"), public_dir())
    problems = []
    for base_mode in (0o700, 0o755):
        base = rt.fresh_dir()
        os.chmod(base, base_mode)
        what = f"base {base_mode:o}"
        status, out, err = execute([prog, second], rt.profiled_env(base), base)
        m = re.match(r"exec_second done\nchildren (\d+) (\d+)\n$", out)
        if status != 0 or not m:
            problems.append(f"{what}: status {status}, stdout {out!r}, stderr {err!r}")
            continue
        dirs = profiles_in(base)
        if len(dirs) != 1:
            problems.append(f"{what}: profiles {dirs}")
            continue
        profile = os.path.join(base, dirs[0])
        reachable = base_mode == 0o755
        want_err = "" if reachable else (f"malloc_freq: cannot create {base}/malloc_freq."
                                         f"{m.group(2)}: Permission denied; not profiling\n")
        if err != want_err:
            problems.append(f"{what}: stderr {err!r}, expected {want_err!r}")
        problems += check_private(profile, NOBODY, what)
        rows = rt.csv_rows(profile)
        try:
            rt.expect_sites(rows, {"site_before": (100, 1600), "site_after": (200, 9600),
                                   "site_child": (300, 9600),
                                   "site_after_exec": (900, 27000) if reachable else (0, 0)})
            rt.expect_eq(len(rt.process_files(profile)), 3 if reachable else 2, "process files")
            rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(profile),
                         "CSV total vs the headers' totals")
        except rt.TestFailure as e:
            problems.append(f"{what}: {e}")
    rt.expect(not problems, "; ".join(problems))


# ---- a long base directory ------------------------------------------------------------------

def long_directory(top, length):
    """A directory under top whose absolute path is `length` characters long."""
    path = top
    while len(path) < length:
        part = min(200, length - len(path) - 1)
        if part < 1:
            break
        path = os.path.join(path, "d" * part)
    os.makedirs(path)
    rt.expect_eq(len(path), length, "length of the long directory's path")
    return path


@rt.test
def test_long_base_directory():
    """A 4,050-character MALLOC_FREQ_DIR: every thread's file, under its whole name, with
    exact counts. One too long for malloc_freq.<pid> (4,085 characters): one line saying so,
    nothing created, the program unaffected."""
    prog = rt.c_program("many_threads")
    plain = execute([prog], clean_env(), rt.fresh_dir())
    problems = []
    base = long_directory(rt.fresh_dir(), 4050)
    status, out, err = execute([prog], rt.profiled_env(base), base)
    dirs = profiles_in(base)
    if (status, out, err) != plain or len(dirs) != 1:
        problems.append(f"4,050 characters: status {status}, stdout {out!r}, stderr {err!r}, "
                        f"profiles {dirs}")
    else:
        profile = os.path.join(base, dirs[0])
        names = sorted(os.listdir(profile))
        bad = [n for n in names if not re.match(r"(thread\.[0-9a-f]{16}\.\d+\.\d+\.mft|"
                                                r"process\.[0-9a-f]{16}\.mfp)$", n)]
        # A table passes to the next new thread when its thread exits: count the threads
        # each file says recorded into it.
        files = [os.path.join(profile, n) for n in names if n.startswith("thread.")]
        here = os.getcwd()
        try:
            os.chdir(base)  # the whole paths are longer than PATH_MAX
            threads = sum(rt.table_threads(os.path.relpath(f, base)) for f in files)
        finally:
            os.chdir(here)
        if bad or threads != 51:
            problems.append(f"4,050 characters: {threads} threads in {len(files)} thread files "
                            f"(51 expected), malformed names {bad}")
        # <dir>/<file> is longer than PATH_MAX here: mf_print and the header reader are
        # given paths relative to the base directory.
        r = subprocess.run([rt.MF_PRINT, "--dir", dirs[0], "--format", "csv"], cwd=base,
                           capture_output=True, text=True, timeout=rt.TIMEOUT)
        if r.returncode != 0 or r.stderr:
            problems.append(f"mf_print: {r.returncode} {r.stderr!r}")
        else:
            rows = rt.parse_csv(r.stdout)
            here = os.getcwd()
            try:
                os.chdir(base)
                rt.expect_sites(rows, {"site_thread": (1000, 56000), "site_main": (10, 80)})
                rt.expect_eq(rt.csv_total(rows), rt.exact_total_calls(dirs[0]),
                             "CSV total vs the headers' totals")
            except rt.TestFailure as e:
                problems.append(f"4,050 characters: {e}")
            finally:
                os.chdir(here)
    base = long_directory(rt.fresh_dir(), 4085)
    status, out, err = execute([prog], rt.profiled_env(base), base)
    warnings = profile_warnings(err, plain[2])
    if (status, out) != plain[:2]:
        problems.append(f"4,085 characters: status {status}, stdout {out!r}")
    if len(warnings) != 1 or "MALLOC_FREQ_DIR" not in warnings[0] or "too long" not in warnings[0]:
        problems.append(f"4,085 characters: expected one line saying MALLOC_FREQ_DIR is too "
                        f"long, got {warnings}")
    if os.listdir(base):
        problems.append(f"4,085 characters: created {os.listdir(base)}")
    rt.expect(not problems, "; ".join(problems))


# ---- cancellation ---------------------------------------------------------------------------

@rt.test
def test_pending_cancel_not_acted_on_in_malloc():
    """A thread with a deferred cancel pending, holding a mutex, makes its first allocation
    (the profiler creates its thread file): malloc returns, the thread unlocks and is
    cancelled at its own pthread_testcancel(); its calls are counted."""
    prog = rt.c_program("cancel_in_malloc")
    for unwind in ("libunwind", "fp"):
        r = rt.run([prog], extra_env={"MALLOC_FREQ_UNWIND": unwind})
        rt.expect_eq((r.rc, r.stdout, r.stderr),
                     (0, "malloc returned 1, unlocked 1, cancelled 1, mutex free\n", ""),
                     f"status, stdout, stderr ({unwind})")
        rt.expect_sites(rt.csv_rows(r.profile), {"site_cancel_pending": (10, 400)})


@rt.test
def test_long_program_path_in_the_module_records():
    """The main program's path is read once and kept apart from the other module records
    when it is long: exact_sites copied to paths of 254, 255 and 600 characters (the first
    kept among the small variables, the others read again whole) keeps its exact counts
    and names; the process file's first module record holds the whole path, its header the
    first 255 characters; with the 600-character path the records outgrow the first 1 KiB
    of the module log and are copied to memory of their own, all still in the file."""
    prog = rt.c_program("exact_sites")
    for length in (254, 255, 600):
        top = rt.fresh_dir()
        where = long_directory(top, length - len("/exact_sites"))
        path = os.path.join(where, "exact_sites")
        shutil.copy(prog, path)
        rt.expect_eq(len(path), length, "the program's path length")
        r, _ = rt.expect_exact_sites_with({}, program=path)
        [pf] = rt.process_files(r.profile)
        exe = rt.read_struct(pf, rt.F.process_header, "exe", "<256s")
        rt.expect_eq(exe.rstrip(b"\0").decode(), path[:255], f"{length}: the header's exe")
        records = rt.module_records(pf)
        paths = [p for p, _ in records]
        rt.expect_eq(paths[0], path, f"{length}: the first module record's path")
        rt.expect(rt.LIB in paths and any(os.path.basename(p).startswith("libc.so") for p in paths),
                  f"{length}: module records {paths}")
        if length == 600:
            rt.expect(sum(rec["record_size"] for _, rec in records) > 1024,
                      f"{length}: module records of {paths} fit in 1 KiB")
