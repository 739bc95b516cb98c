/* Millions of calls at four sites with known counts, interleaved so the exact start-up
 * stretch of the default mode covers every site: per round site_hot 100, site_warm 25,
 * site_mild 5, site_rare 1 calls; 20000 rounds -> 2,000,000 / 500,000 / 100,000 / 20,000
 * calls of 16 / 32 / 64 / 128 bytes. For test_sampled_estimates_within_4_se and
 * test_default_mode_agrees_with_exact. No stdio. */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_hot(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(16));
}

SITE void site_warm(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(32));
}

SITE void site_mild(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(64));
}

SITE void site_rare(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(128));
}

int main(void)
{
    for (int round = 0; round < 20000; round++) {
        site_hot(100);
        site_warm(25);
        site_mild(5);
        site_rare(1);
    }
    static const char done[] = "sampled_sites done\n";
    return write(1, done, sizeof done - 1) < 0;
}
