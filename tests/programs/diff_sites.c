/* Known allocation counts for comparing two runs (tests/viewer/test_mf_print_pprof.py):
 *
 *   diff_sites N
 *
 * site_changing makes N calls of 64 bytes; the others make the same calls in every run:
 * site_steady 20,000 x 24 bytes, site_two_callers 10,000 x 16 bytes from each of
 * caller_one and caller_two, site_small 300 x 8 bytes. Run with N and 2N, only
 * site_changing changes. No stdio: the only other allocations are libc's own. */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_steady(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(24));
}

SITE void site_changing(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(64));
}

SITE void site_two_callers(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(16));
}

SITE void site_small(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(8));
}

static volatile int sink; /* keeps the calls below out of tail position */

SITE void caller_one(void)
{
    site_two_callers(10000);
    sink++;
}

SITE void caller_two(void)
{
    site_two_callers(10000);
    sink++;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int n = atoi(argv[1]);
    site_steady(20000);
    site_changing(n);
    caller_one();
    caller_two();
    site_small(300);
    static const char done[] = "diff_sites done\n";
    if (write(1, done, sizeof done - 1) < 0)
        return 1;
    return 0;
}
