"""Set-up on plain Debian 12: the main job (`make demo`) needs no Rust and no Python."""
import os
import re
import subprocess

import harness as rt
from harness import expect, expect_eq


@rt.test
def test_demo_needs_no_rust_or_python():
    # A C-only user's PATH: everything in /usr/bin and /bin but python, cargo and rustc.
    # `make demo` in a fresh clone must build, profile the example and print its report,
    # asking apt for nothing (all the demo's packages are here: a missing one would be
    # installed, and the run would say "installing").
    top = rt.fresh_dir()
    bindir = os.path.join(top, "bin")
    os.makedirs(bindir)
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for name in os.listdir(d):
            if name.startswith(("python", "cargo", "rustc", "rustup", "pip")):
                continue
            link = os.path.join(bindir, name)
            if not os.path.lexists(link):
                os.symlink(os.path.join(d, name), link)
    clone = os.path.join(top, "clone")
    subprocess.run(["git", "clone", "-q", rt.REPO, clone], check=True)
    env = {"PATH": bindir, "HOME": top, "LANG": "C"}
    r = subprocess.run(["make", "-s", "demo"], cwd=clone, env=env, capture_output=True,
                       text=True, timeout=rt.TIMEOUT)
    expect(r.returncode == 0, f"make demo without Rust or Python exited {r.returncode}: "
                              f"{r.stderr.strip()[-600:]!r}")
    expect("installing" not in r.stderr, f"make demo installed packages: {r.stderr!r}")
    expect("malloc_freq report:" in r.stdout and "split_words via __strndup (demo.c:" in r.stdout,
           f"no demo report in the output: {r.stdout[-600:]!r}")


def clone_repository():
    """A fresh clone of the repository's committed state."""
    clone = os.path.join(rt.fresh_dir(), "clone")
    subprocess.run(["git", "clone", "-q", rt.REPO, clone], check=True)
    return clone


def make_in(clone, *args):
    r = subprocess.run(["make", "--no-print-directory"] + list(args), cwd=clone,
                       capture_output=True, text=True, timeout=rt.TIMEOUT)
    expect(r.returncode == 0, f"make {' '.join(args)} exited {r.returncode}: "
                              f"{r.stderr.strip()[-600:]!r}")
    return r.stdout


def compiled(make_output):
    """The sources a make run (or dry run) compiles: the `-c -o OBJ SRC` commands."""
    return sorted(m.group(1) for m in re.finditer(r" -c -o \S+ (\S+\.c)$", make_output, re.M))


@rt.test
def test_make_builds_each_object_once_and_installs_nothing():
    """make, make all and make install never install packages (only the deps targets, which
    make demo and make test run first, may); each source is its own object, rebuilt when a
    header it includes changes and only then; a .c file added in a new folder of mf_print is
    built without a Makefile edit."""
    clone = clone_repository()
    for args in (["all"], ["install", "DESTDIR=/nonexistent"], []):
        dry = make_in(clone, "-n", "-B", *args)
        expect("ensure_deps" not in dry and "apt-get" not in dry,
               f"make {' '.join(args)} would install packages: {dry[:400]!r}")
    expect("scripts/ensure_deps.sh demo" in make_in(clone, "-n", "demo"),
           "make demo does not install the demo's packages first")
    make_in(clone, "-j2", "all")
    expect_eq(compiled(make_in(clone, "-n", "all")), [], "sources compiled again by a second make")
    # Every mf_print source that includes protobuf.h, directly or through one of its headers.
    includers = {"protobuf.h"}
    for d, _, files in os.walk(os.path.join(clone, "mf_print")):
        for f in sorted(files):
            if f.endswith(".h") and '#include "protobuf.h"' in open(os.path.join(d, f)).read():
                includers.add(f)
    want = sorted(os.path.relpath(os.path.join(d, f), clone)
                  for d, _, files in os.walk(os.path.join(clone, "mf_print")) for f in files
                  if f.endswith(".c") and any(f'#include "{h}"' in open(os.path.join(d, f)).read()
                                              for h in includers))
    expect(len(want) >= 2, f"mf_print sources that include protobuf.h: {want}")
    protobuf_h = [os.path.join(d, "protobuf.h") for d, _, files in
                  os.walk(os.path.join(clone, "mf_print")) if "protobuf.h" in files][0]
    os.utime(protobuf_h)
    expect_eq(compiled(make_in(clone, "-n", "all")), want, "sources rebuilt after protobuf.h changed")
    extra = os.path.join(clone, "mf_print", "new_folder", "extra.c")
    os.makedirs(os.path.dirname(extra))
    with open(extra, "w") as f:
        f.write("int mf_extra_for_the_test(void);\nint mf_extra_for_the_test(void) { return 1; }\n")
    expect("mf_print/new_folder/extra.c" in compiled(make_in(clone, "-n", "all")),
           "a .c file added under mf_print/ is not built")
