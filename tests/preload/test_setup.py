"""Set-up on plain Debian 12: the main job (`make demo`) needs no Rust and no Python."""
import os
import re
import subprocess

import harness as rt
from harness import expect


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
