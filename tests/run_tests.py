#!/usr/bin/env python3
"""The test runner: the tests of tests/core/, tests/preload/, tests/viewer/ and
tests/launcher/ (test_*.py, each test marked @rt.test over the shared harness,
tests/lib/harness.py), run on the real library and programs.

    python3 tests/run_tests.py [-k SUBSTRING] [--keep]
    python3 tests/run_tests.py --rust-example

Prints `PASS name`, `FAIL name: reason` or `SKIP name` per test (the reason a test cannot
run here, once), then `N passed, M failed, K skipped`; exits non-zero if any test failed.
Standard library only."""

import argparse
import glob
import importlib.util
import os
import shutil
import signal
import sys

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
GROUPS = ("core", "preload", "viewer", "launcher", "docs", "package")
sys.path.insert(0, os.path.join(TESTS_DIR, "lib"))
import harness as rt  # noqa: E402 (after its directory is on the path)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_test_modules():
    """Imports every group's test_*.py under its own name (core.test_live, ...): a test
    module reaches the harness, never another test module."""
    for group in GROUPS:
        for path in sorted(glob.glob(os.path.join(TESTS_DIR, group, "test_*.py"))):
            load(path, f"{group}.{os.path.splitext(os.path.basename(path))[0]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", metavar="SUBSTRING", help="run only tests whose name contains it")
    ap.add_argument("--rust-example", action="store_true",
                    help="run only the Rust quickstart check")
    ap.add_argument("--keep", action="store_true", help="keep the temporary output directories")
    args = ap.parse_args()
    # Started as a background job of a script (`cmd &`), the runner inherits SIGINT and
    # SIGQUIT ignored, and so would every program it runs: the launcher, like a shell, keeps
    # an ignored signal ignored, and the tests that signal it would wait forever.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)

    if args.rust_example:
        quickstart = load(os.path.join(TESTS_DIR, "rust", "quickstart.py"), "rust.quickstart")
        tests = [("test_rust_quickstart_exact_counts", quickstart.rust_quickstart)]
    else:
        load_test_modules()
        tests = [(t.__name__, t) for t in rt.TESTS if not args.k or args.k in t.__name__]
    for path in (rt.LIB, rt.MF_PRINT):
        if not os.path.exists(path):
            print(f"run_tests.py: {path} is missing; run `make` first", file=sys.stderr)
            return 2
    passed = failed = 0
    skipped = {}  # reason -> names of the tests it skipped
    kept = []  # the output directories of failed tests, to look at
    for name, fn in tests:
        first_dir = len(rt._run_dirs)
        try:
            fn()
        except rt.Skip as e:
            reason = str(e)
            if reason not in skipped:
                print(f"SKIP {name}: {reason}", flush=True)
            else:
                print(f"SKIP {name}", flush=True)
            skipped.setdefault(reason, []).append(name)
        except rt.TestFailure as e:
            failed += 1
            print(f"FAIL {name}: {e}", flush=True)
            kept += rt._run_dirs[first_dir:]
            continue
        except Exception as e:  # a bug in the test or an unexpected tool failure
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            kept += rt._run_dirs[first_dir:]
            continue
        else:
            passed += 1
            print(f"PASS {name}", flush=True)
        if args.keep:
            kept += rt._run_dirs[first_dir:]
        else:
            for d in rt._run_dirs[first_dir:]:
                shutil.rmtree(d, ignore_errors=True)
    if kept:
        print(f"output directories kept: {' '.join(kept)}")
    nskipped = sum(len(names) for names in skipped.values())
    print(f"{passed} passed, {failed} failed" + (f", {nskipped} skipped" if nskipped else ""))
    for reason, names in skipped.items():
        print(f"  skipped {len(names)}: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
