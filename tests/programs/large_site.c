/* Ten huge allocations among millions of small ones: site_huge allocates 8 MiB ten times,
 * one every 500,000 small calls; site_small_a makes 3,000,000 calls of 32 bytes and
 * site_small_b 2,000,000 of 100 bytes. Sampled by calls alone, site_huge is not seen at all;
 * recorded for their size (MALLOC_FREQ_LARGE), its calls and bytes are exact. No stdio.
 * For tests/core/test_sizes.py and bench/run_bench.py. Usage: large_site [SCALE [HUGE_MIB]]
 * (SCALE times as many small calls, default 1; site_huge's calls of HUGE_MIB MiB, default 8:
 * one that fails still counts). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

static size_t huge_bytes = 8u << 20;

SITE void site_huge(void)
{
    char *p = malloc(huge_bytes);
    if (p)
        p[0] = 1;
    release(p);
}

SITE void site_small_a(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(32));
}

SITE void site_small_b(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(100));
}

int main(int argc, char **argv)
{
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    if (scale < 1)
        scale = 1;
    if (argc > 2 && atoi(argv[2]) > 0)
        huge_bytes = (size_t)atoi(argv[2]) << 20;
    for (int huge = 0; huge < 10; huge++) {
        for (int round = 0; round < 100000 * scale; round++) {
            site_small_a(3);
            site_small_b(2);
        }
        site_huge();
    }
    static const char done[] = "large_site done\n";
    return write(1, done, sizeof done - 1) < 0;
}
