"""malloc_freq_thread_counts() (c_core/malloc_freq.h) under the preload library, found with
dlsym as a program's unit test would (tests/programs/thread_counts.c): the calls of a window
exactly, nested windows, another thread's calls left out, a thread on an exited thread's slot
starting from 0, the versioned struct; sampled or exact alike; and "no profiler loaded"
without the library."""
import harness as rt
from harness import expect_eq

# thread_counts.c's windows. outer: 37 malloc(24), 5 calloc(4, 10) (the inner window), and
# realloc(NULL, 30) (counted as malloc), realloc to 60 and 90; the other thread's 10,000
# calls run inside it.
EXPECTED = """\
outer calls 45 bytes 1268 malloc 38 calloc 5 realloc 2 bytes 150
inner calls 5 bytes 200
other thread calls 10000
long calls 50000 bytes 5000000
fresh thread before 0 malloc 100 bytes 800
small rc 0 size 24 untouched 12345
tiny rc -1 einval 1
"""


def thread_counts_program():
    return rt.build("thread_counts", ["thread_counts.c"], libs=("-lpthread", "-ldl"))


@rt.test
def test_thread_counts_exact_under_preload():
    prog = thread_counts_program()
    for sample in ("1", "1000", None):  # exact, 1 in 1,000, the default mode
        r = rt.run_ok([prog], sample=sample)
        expect_eq(r.stdout, EXPECTED, f"MALLOC_FREQ_SAMPLE={sample}: counts")


@rt.test
def test_thread_counts_without_profiler():
    r = rt.run([thread_counts_program()], profile=False)
    expect_eq((r.rc, r.stdout), (0, "no profiler loaded\n"), "without LD_PRELOAD")
