/* A short run with known counts, for tests/core/test_short_runs.py: N allocation calls (argv[1],
 * a multiple of 50) from five sites, each reached through a call chain 30 frames deep, in
 * an interleaved order that repeats every 50 calls: site_a 20, site_b 15, site_c 10,
 * site_d 4, site_e 1 (40 %, 30 %, 20 %, 8 %, 2 %). Prints the calls made. */
#include <stdio.h>
#include <stdlib.h>

#define SHORT_DEPTH 28 /* chain frames between main and a site: 30 deep at malloc */

#define SHORT_SITE(name, size)                                      \
    __attribute__((noinline)) static void name(void)                \
    {                                                               \
        char *p = malloc(size);                                     \
        if (!p)                                                     \
            abort();                                                \
        __asm__ volatile("" : : "r"(p) : "memory");                \
        free(p);                                                    \
    }
SHORT_SITE(site_a, 24)
SHORT_SITE(site_b, 40)
SHORT_SITE(site_c, 72)
SHORT_SITE(site_d, 136)
SHORT_SITE(site_e, 264)

static void (*const short_sites[5])(void) = {site_a, site_b, site_c, site_d, site_e};

/* Recursion to the site; the work after the call keeps it from becoming a tail call. */
__attribute__((noinline)) static int short_chain(int depth, int site)
{
    int r = depth ? short_chain(depth - 1, site) : (short_sites[site](), 0);
    __asm__ volatile("" : "+r"(r) : : "memory");
    return r + 1;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;
    if (n <= 0 || n % 50) {
        fprintf(stderr, "usage: short_runs CALLS (a multiple of 50)\n");
        return 2;
    }
    /* One period of 50 calls: a b a c b a d a b c ..., each site spread over it. */
    static const char period[] = "abacbadabcabacbaeabcabacbadabcabacbadabcabacbaabcd";
    _Static_assert(sizeof period == 51, "50 calls a period");
    long sum = 0;
    for (long i = 0; i < n; i++)
        sum += short_chain(SHORT_DEPTH, period[i % 50] - 'a');
    printf("%ld calls\n", sum / (SHORT_DEPTH + 1));
    return 0;
}
