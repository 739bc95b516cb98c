/* One allocation per call from three sites in turn, each call a different size than the one
 * before, so that no two consecutive calls share both stack and size class: the recorder's
 * shortcut for "the same frames as the last call" must keep each (stack, size) apart
 * (tests/viewer/test_sites.py). 12,000 calls in two stretches:
 *   interleaved: call i from site i % 3 with size i % 4 of {24, 200, 3000, 100000}: each
 *       of the 12 pairs 500 times in a period of 12 calls (100,000 bytes is at or above
 *       MALLOC_FREQ_LARGE's default, recorded as a large call);
 *   one site: 6,000 calls from site_a, the size cycling through the four: 1,500 each.
 * So site_a: 2,000 calls of each size, site_b and site_c 500 of each. No stdio. */
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone))

volatile int sink; /* after each call: no tail call drops a frame */

static const size_t sizes[4] = {24, 200, 3000, 100000};

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_a(size_t size)
{
    release(malloc(size));
    sink++;
}

SITE void site_b(size_t size)
{
    release(malloc(size));
    sink++;
}

SITE void site_c(size_t size)
{
    release(malloc(size));
    sink++;
}

int main(void)
{
    void (*const sites[3])(size_t) = {site_a, site_b, site_c};
    for (int i = 0; i < 6000; i++)
        sites[i % 3](sizes[i % 4]);
    for (int i = 0; i < 6000; i++)
        site_a(sizes[i % 4]);
    return 0;
}
