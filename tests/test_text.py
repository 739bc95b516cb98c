"""mf_print's text module (mf_print/text.c) on its own: tests/unit/text_test.c checks the UTF-8
decoder (valid, invalid, overlong, surrogate and cut-short input), display widths (CJK,
combining, control characters) and line cutting, and the terminal, JSON, HTML and CSV escapers
(formula starts among them), each against the exact text expected."""

import os
import re
import subprocess

import run_tests as rt
from run_tests import expect, expect_eq

UNIT = os.path.join(rt.REPO, "tests", "unit")
# Every check in text_test.c: a check lost by an edit shows here.
TEXT_CHECKS = 123


@rt.test
def test_text_unit():
    os.makedirs(rt.OUT, exist_ok=True)
    exe = os.path.join(rt.OUT, "text_test")
    src = [os.path.join(UNIT, "text_test.c")] + \
          [os.path.join(rt.REPO, "mf_print", f) for f in ("text.c", "util.c")]
    r = subprocess.run(["gcc"] + rt.CFLAGS + ["-std=gnu11", "-D_GNU_SOURCE",
                        "-I" + os.path.join(rt.REPO, "c_core"),
                        "-I" + os.path.join(rt.REPO, "mf_print"), "-o", exe] + src +
                       ["-lpthread"], capture_output=True, text=True)
    expect(r.returncode == 0, f"cannot compile text_test: {r.stderr.strip()}")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=rt.TIMEOUT)
    m = re.search(r"^(\d+) checks, (\d+) failed$", r.stdout, re.M)
    expect(m, f"text_test printed no summary (exit {r.returncode}): {r.stdout[-500:]!r}")
    expect(r.returncode == 0 and m.group(2) == "0", f"text_test: {r.stdout[-2000:]}")
    expect_eq(int(m.group(1)), TEXT_CHECKS, "checks run")
