"""Packaging: the Debian package (debian/), built once per run by dpkg-buildpackage from a copy
of the tree, its contents, lintian's verdict, and, as root, installed with dpkg into a
copy-on-write clone of this machine (an overlay over /, in a private mount namespace, so the
machine itself is untouched), used there (LD_PRELOAD by bare name, the launcher, man,
pkg-config and the header, bash completion) and purged leaving nothing behind. Also the bash
completion against the getopt_long tables, and the Rust crate as `cargo package` makes it."""

import atexit
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

import harness as rt

TOOLS = os.path.join(rt.REPO, "scripts")
VERSION = re.search(r'^version = "(.*)"$', open(os.path.join(rt.REPO, "Cargo.toml")).read(),
                    re.M).group(1)
MULTIARCH = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                           text=True).stdout.strip()
COMPLETIONS = "/usr/share/bash-completion/bash_completion"
# What the package installs (dpkg-deb -c, files only); dh adds the changelog, copyright and
# lintian overrides.
PACKAGE_FILES = sorted([
    "usr/bin/malloc_freq", "usr/bin/mf_print", "usr/include/malloc_freq.h",
    f"usr/lib/{MULTIARCH}/libmalloc_freq.so", f"usr/lib/{MULTIARCH}/pkgconfig/malloc_freq.pc",
    "usr/share/bash-completion/completions/malloc_freq",
    "usr/share/bash-completion/completions/mf_print",
    "usr/share/doc/malloc-freq/changelog.gz", "usr/share/doc/malloc-freq/copyright",
    "usr/share/lintian/overrides/malloc-freq",
    "usr/share/man/man1/malloc_freq.1.gz", "usr/share/man/man1/mf_print.1.gz"])


def sh(cmd, what, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=rt.TIMEOUT, **kw)
    rt.expect(r.returncode == 0, f"{what} exited {r.returncode}: "
                                 f"{(r.stdout + r.stderr).strip()[-1500:]}")
    return r.stdout


# ---- bash completion vs getopt_long --------------------------------------------------------

def getopt_table(source):
    """{long option: takes a value} and the short options string of the getopt_long call."""
    text = open(os.path.join(rt.REPO, source)).read()
    table = re.search(r"struct option longopts\[\] = \{(.*?)\n\s*\};", text, re.S).group(1)
    longs = {name: arg == "required_argument" for name, arg in
             re.findall(r'\{"([\w-]+)",\s*(\w+),\s*NULL,\s*[^}]+\}', table)}
    shorts = re.search(r'getopt_long\(argc, argv, "([^"]*)"', text).group(1)
    return longs, shorts


def complete(command, words):
    """COMPREPLY for the command line `words` (the last is the word being completed) from
    completion/<command>, as bash-completion runs it."""
    script = (f'source {COMPLETIONS}; source "$1"; shift; COMP_WORDS=("$@"); '
              'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; '
              f'_{command} "$1" "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    out = sh(["bash", "-c", script, "bash", os.path.join(rt.REPO, "completion", command)] +
             words, f"completion of {' '.join(words)!r}")
    return sorted(set(out.split()))


@rt.test
def test_package_completion_covers_getopt_options():
    """Each command's completion offers exactly the long options of its getopt_long table,
    and says what follows each option that takes a value (long and short): a new option
    left out of either fails here."""
    rt.need(os.path.exists(COMPLETIONS), "bash-completion is not installed (apt-get install "
                                         "bash-completion)")
    launcher = os.path.join(rt.BUILD, "malloc_freq")
    for command, binary, source in (("mf_print", rt.MF_PRINT, "mf_print/request.c"),
                                    ("malloc_freq", launcher, "launcher/main.c")):
        longs, shorts = getopt_table(source)
        extra = ["--"] if command == "malloc_freq" else []  # before PROGRAM
        rt.expect_eq(complete(command, [binary, "--"]), sorted(["--" + o for o in longs] + extra),
                     f"{command}'s completed options vs its getopt_long table")
        text = open(os.path.join(rt.REPO, "completion", command)).read()
        handled = set()
        for pattern in re.findall(r"^\s+(-[-\w |]*)\)$", text, re.M):
            handled |= {p.strip() for p in pattern.split("|")}
        valued = {"--" + o for o, arg in longs.items() if arg}
        valued |= {"-" + c for c in re.findall(r"(\w):", shorts)}
        rt.expect_eq(sorted(valued - handled), [],
                     f"options of {command} that take a value, not in its completion's cases")
    # The values offered: mf_print's formats as its registry lists them; a launched
    # program's own completion after the launcher's options.
    err = subprocess.run([rt.MF_PRINT, "--format", "?"], capture_output=True, text=True).stderr
    formats = re.search(r"--format is (.*), not '\?'", err).group(1).replace(" or ", ", ")
    rt.expect_eq(complete("mf_print", [rt.MF_PRINT, "--format", ""]),
                 sorted(formats.split(", ")), "formats completed")
    rt.expect_eq(complete("malloc_freq", [launcher, "--unwind", ""]), ["fp", "libunwind"],
                 "--unwind's values completed")


# ---- the Debian package ---------------------------------------------------------------------

_deb = {}


def built_package():
    """The .deb, built once per run from a copy of the tree (dpkg-buildpackage cleans the tree
    it builds in, and this one's build/ is the tests')."""
    if "path" in _deb:
        return _deb["path"]
    for tool, pkg in (("dpkg-buildpackage", "dpkg-dev"), ("dh", "debhelper")):
        rt.need(shutil.which(tool), f"{tool} is missing (apt-get install {pkg})")
    # Kept until the run ends (a test's own directories go when it passes): the tests share it.
    work = tempfile.mkdtemp(prefix="mf_pkg_")
    atexit.register(shutil.rmtree, work, True)
    src = os.path.join(work, "malloc-freq")
    files = sh(["git", "ls-files", "-co", "--exclude-standard", "-z"], "git ls-files",
               cwd=rt.REPO).split("\0")
    for f in files:
        if f and os.path.isfile(os.path.join(rt.REPO, f)) and "node_modules/" not in f:
            os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
            shutil.copy2(os.path.join(rt.REPO, f), os.path.join(src, f))
    start = time.monotonic()
    env = dict(os.environ, DEB_BUILD_OPTIONS="parallel=2")
    sh(["dpkg-buildpackage", "-us", "-uc", "-b"], "dpkg-buildpackage -us -uc -b", cwd=src,
       env=env)
    print(f"  (dpkg-buildpackage: {time.monotonic() - start:.0f} s)", flush=True)
    arch = sh(["dpkg", "--print-architecture"], "dpkg").strip()
    _deb["path"] = os.path.join(work, f"malloc-freq_{VERSION}_{arch}.deb")
    rt.expect(os.path.isfile(_deb["path"]), f"no {_deb['path']}: {os.listdir(work)}")
    return _deb["path"]


@rt.test
def test_package_contents():
    """The package holds exactly the set make install installs (Debian's paths) and its
    docs; the changelog's version is the crate's."""
    deb = built_package()
    listing = sh(["dpkg-deb", "-c", deb], "dpkg-deb -c").splitlines()
    files = sorted(line.split()[-1][2:] for line in listing if not line.startswith("d"))
    rt.expect_eq(files, PACKAGE_FILES, "files in the package")
    modes = {line.split()[-1][2:]: line.split()[0] for line in listing}
    rt.expect_eq(modes[f"usr/lib/{MULTIARCH}/libmalloc_freq.so"], "-rw-r--r--", "library mode")
    rt.expect_eq(sh(["dpkg-deb", "-f", deb, "Version"], "dpkg-deb -f").strip(), VERSION,
                 "the package's version vs Cargo.toml's")
    # Hardening from dpkg-buildflags: the stack protector and fortified calls reach the
    # binaries; the library keeps its lazy binding (no BIND_NOW).
    root = rt.fresh_dir()
    sh(["dpkg-deb", "-x", deb, root], "dpkg-deb -x")
    for f in ("usr/bin/mf_print", "usr/bin/malloc_freq"):
        syms = sh(["nm", "-D", os.path.join(root, f)], "nm -D")
        rt.expect("__stack_chk_fail" in syms, f"{f} is built without -fstack-protector-strong")
        dyn = sh(["readelf", "-d", os.path.join(root, f)], "readelf -d")
        rt.expect("BIND_NOW" in dyn, f"{f} is built without -z now")
    dyn = sh(["readelf", "-d", os.path.join(root, f"usr/lib/{MULTIARCH}/libmalloc_freq.so")],
             "readelf -d")
    rt.expect("BIND_NOW" not in dyn, "the preload library lost its lazy binding")


@rt.test
def test_package_lintian_clean():
    """lintian finds no error and no warning (debian/malloc-freq.lintian-overrides says why
    each override is there)."""
    rt.need(shutil.which("lintian"), "lintian is missing (apt-get install lintian)")
    deb = built_package()
    r = subprocess.run(["lintian", "--fail-on", "error,warning", "--pedantic", deb],
                       capture_output=True, text=True, timeout=rt.TIMEOUT)
    tags = [line for line in r.stdout.splitlines() if line[:2] in ("E:", "W:", "P:")]
    rt.expect_eq((r.returncode, tags), (0, []),
                 f"lintian's errors, warnings, pedantic tags ({r.stderr.strip()[-300:]})")


LINKED_PROGRAM = r"""
#include <malloc_freq.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void *linked_site(size_t n) { return malloc(n); }

int main(void)
{
    for (int i = 0; i < 321; i++)
        free(linked_site(40));
    printf("%s\n", malloc_freq_dir() ? "profiled" : "not profiled");
    return 0;
}
"""

# In the clone, as root: install, use, purge. Each step's output is marked for the test.
CLONE_SCRIPT = r"""
set -e
deb=$1 stage=$2
mount --make-rprivate /
mount -t tmpfs tmpfs "$stage/fs"
mkdir "$stage/fs/upper" "$stage/fs/work" "$stage/fs/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$stage/fs/upper,workdir=$stage/fs/work" \
    "$stage/fs/root"
R=$stage/fs/root
mount --bind /proc "$R/proc"
mount --bind /dev "$R/dev"
mkdir "$R/mf_pkg"
cp "$deb" "$stage/exact_sites" "$stage/linked.c" "$R/mf_pkg/"
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/mf_pkg LANG=C.UTF-8 "$@"; }
in_root dpkg -i "/mf_pkg/$(basename "$deb")" >/dev/null
echo "== by name"
in_root sh -c 'mkdir /mf_pkg/by_name && cd /mf_pkg/by_name &&
    LD_PRELOAD=libmalloc_freq.so MALLOC_FREQ_SAMPLE=1 /mf_pkg/exact_sites >/dev/null &&
    mf_print --format csv malloc_freq.*'
echo "== launcher"
in_root sh -c 'malloc_freq -q -s 1 -o /mf_pkg/launched -- /mf_pkg/exact_sites >/dev/null &&
    mf_print --format csv /mf_pkg/launched'
echo "== man"
in_root man -w mf_print malloc_freq
in_root sh -c 'MANWIDTH=80 man -P cat mf_print 2>&1 | head -4'
echo "== pkg-config"
in_root pkg-config --cflags --libs malloc_freq
in_root sh -c 'cd /mf_pkg && gcc -O1 -g -fno-omit-frame-pointer -o linked linked.c $(pkg-config --cflags --libs malloc_freq) &&
    mkdir linked_out && cd linked_out && MALLOC_FREQ_SAMPLE=1 ../linked && mf_print --format csv malloc_freq.*'
echo "== completion"
in_root bash -c 'source /usr/share/bash-completion/bash_completion &&
    _completion_loader mf_print; _completion_loader malloc_freq
    complete -p mf_print malloc_freq'
in_root dpkg --purge malloc-freq >/dev/null
rm -rf "$R/mf_pkg"
echo "== left"
cd "$stage/fs/upper"
find . -mindepth 1 \( -type c -printf 'deleted %P\n' \) -o \( ! -type d -printf '%P\n' \) -o \
    \( -type d -printf '%P/\n' \) | while read -r p; do
    case $p in deleted\ *) echo "$p" ;;
        */) [ -d "/${p%/}" ] || echo "new dir $p" ;;
        *) [ -e "/$p" ] && echo "changed $p" || echo "new $p" ;;
    esac
done
"""


def sections(out):
    parts, name = {}, None
    for line in out.splitlines():
        if line.startswith("== "):
            name = line[3:]
            parts[name] = []
        elif name:
            parts[name].append(line)
    return {k: "\n".join(v) + "\n" for k, v in parts.items()}


# What dpkg and man-db change in their own records when a package comes and goes: dpkg's
# database and log, man-db's index and its cache of formatted pages (`man mf_print` at 80
# columns saves one; man-db's mandb drops it once the page is gone), with the cache's
# directories where a fresh machine had none (var/cache/man/oldlocal/cat1/)).
BOOKKEEPING = re.compile(r"^changed (var/lib/dpkg/|var/log/dpkg\.log$|etc/ld\.so\.cache$)|"
                         r"^new var/lib/dpkg/|^(new|new dir|changed) var/cache/man/")


@rt.test
def test_package_installed_used_and_purged():
    """Installed by dpkg into a clone of this machine: LD_PRELOAD=libmalloc_freq.so (bare
    name) and `malloc_freq -- prog` count exact_sites exactly, man finds mf_print's page,
    pkg-config's flags compile and link a program against the header and library (which
    then profiles itself), bash-completion loads both completions; purged, nothing of it is
    left anywhere (the overlay's upper layer: every file made, changed or deleted)."""
    rt.need(os.geteuid() == 0, "installing the package needs root (CI runs as root)")
    for tool in ("unshare", "chroot", "man", "pkg-config"):
        rt.need(shutil.which(tool), f"{tool} is missing")
    deb = built_package()
    stage = rt.fresh_dir()
    os.mkdir(os.path.join(stage, "fs"))
    shutil.copy(rt.c_program("exact_sites"), stage)
    with open(os.path.join(stage, "linked.c"), "w") as f:
        f.write(LINKED_PROGRAM)
    r = subprocess.run(["unshare", "--mount", "sh", "-c", CLONE_SCRIPT, "sh", deb, stage],
                       capture_output=True, text=True, timeout=rt.TIMEOUT)
    if r.returncode != 0 and "== by name" not in r.stdout:
        rt.need("overlay" not in r.stderr and "mount" not in r.stderr,
                f"no overlay mount here to clone the machine into: {r.stderr.strip()[-200:]}")
    rt.expect_eq((r.returncode, r.stderr), (0, ""), "install, use and purge in the clone")
    out = sections(r.stdout)
    rt.expect_sites(rt.parse_csv(out["by name"]), rt.EXACT_SITES)
    rt.expect_sites(rt.parse_csv(out["launcher"]), rt.EXACT_SITES)
    rt.expect_eq(out["man"].splitlines()[:2], ["/usr/share/man/man1/mf_print.1.gz",
                                               "/usr/share/man/man1/malloc_freq.1.gz"], "man -w")
    rt.expect(re.search(r"NAME\n\s+mf_print\s+-\s+report", out["man"]),
              f"man mf_print's NAME: {out['man']!r}")
    flags, _, linked = out["pkg-config"].partition("\n")
    rt.expect_eq(flags.strip(), "-lmalloc_freq", "pkg-config --cflags --libs malloc_freq")
    linked_out, _, csv = linked.partition("\n")
    rt.expect_eq(linked_out, "profiled", "the linked program's malloc_freq_dir()")
    rt.expect_sites(rt.parse_csv(csv), {"linked_site": (321, 321 * 40)})
    rt.expect_eq(out["completion"].split("\n")[:2],
                 ["complete -F _mf_print mf_print", "complete -F _malloc_freq malloc_freq"],
                 "completions bash-completion loads")
    left = [p for p in out["left"].splitlines() if not BOOKKEEPING.match(p)]
    rt.expect_eq(left, [], "what the package left behind after dpkg --purge")


# ---- the Rust crate --------------------------------------------------------------------------

@rt.test
def test_package_cargo_crate():
    """`cargo package`: the crate holds its Rust sources, build.rs and every C core file that
    build.rs compiles, and nothing of the viewer, preload library or tests; its metadata is
    filled in; and it builds from the packaged .crate (cargo's verify step, offline with
    Debian's cc crate)."""
    rt.need(shutil.which("cargo"), "cargo is missing (apt-get install cargo)")
    rt.need(glob.glob("/usr/share/cargo/registry/cc-*"),
            "Debian's cc crate is missing, and crates.io may not be reachable "
            "(apt-get install librust-cc-dev)")
    cargo = os.path.join(TOOLS, "cargo")
    listed = sh([cargo, "package", "--list", "--allow-dirty"], "cargo package --list",
                cwd=rt.REPO).split()
    tracked = sh(["git", "ls-files", "-co", "--exclude-standard", "src", "c_core"],
                 "git ls-files", cwd=rt.REPO).split()
    want = sorted(["Cargo.lock", "Cargo.toml", "Cargo.toml.orig", "README.md", "build.rs",
                   "examples/quickstart.rs"] + [f for f in tracked
                                                if f.endswith((".rs", ".c", ".h"))])
    # A cargo that sees the git checkout adds where it came from.
    rt.expect_eq(sorted(f for f in listed if f != ".cargo_vcs_info.json"), want,
                 "the crate's files")
    target = rt.fresh_dir()
    sh([cargo, "package", "--allow-dirty", "--target-dir", target], "cargo package (verified)",
       cwd=rt.REPO, env=dict(os.environ, RUSTFLAGS="-Dwarnings", MALLOC_FREQ_WERROR="1"))
    crate = os.path.join(target, "package", f"malloc_freq-{VERSION}.crate")
    rt.expect(os.path.isfile(crate), f"no {crate}")
    manifest = sh(["tar", "-xzOf", crate, f"malloc_freq-{VERSION}/Cargo.toml"], "tar")
    for field in ("description", "license", "readme", "keywords", "categories",
                  "documentation", "rust-version"):
        rt.expect(re.search(rf"^{field} = .+", manifest, re.M),
                  f"the packaged Cargo.toml has no {field}")
