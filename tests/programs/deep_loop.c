/* 2,000,000 malloc/free pairs from the bottom of a 400-frame recursion: every sample walks
 * ~400 frames (~4 us with libunwind), so the default mode's exact stretch reaches its 5 ms
 * cap long before its 20,000 calls; the sampled stretch after it is long enough to draw tens
 * of samples at the interval such deep samples get (~20,000-40,000), so that their error
 * estimate means something. For test_exact_stretch_is_capped_in_time. No stdio. */
#include <stdlib.h>
#include <unistd.h>

#define DEEP_FRAMES 400
#define DEEP_CALLS 2000000

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline)) void site_bottom(void)
{
    for (int i = 0; i < DEEP_CALLS; i++)
        release(malloc(24));
}

__attribute__((noinline)) int descend(int depth)
{
    if (depth == 0) {
        site_bottom();
        return 0;
    }
    return descend(depth - 1) + 1; /* not a tail call: each level keeps its frame */
}

int main(void)
{
    int d = descend(DEEP_FRAMES);
    static const char done[] = "deep_loop done\n";
    return (write(1, done, sizeof done - 1) < 0) + (d != DEEP_FRAMES);
}
