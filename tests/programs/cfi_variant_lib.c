/* A library built twice for test_cfi_cache_forgets_a_closed_library: variant 1 with frame
 * pointers, variant 2 without them and with its functions in another order, so that the
 * same offset holds other code and other CFI; both take the same number of pages, so that
 * the second is mapped where the first was. */
#include <stdlib.h>

#define FN __attribute__((noinline, visibility("default")))

static volatile long sink;

FN long walk_a(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += (long)(size_t)malloc((size_t)(i & 63) + 1) & 1;
    return s;
}

#define WALK_C                                                                                \
    FN long walk_c(long n, long m)                                                            \
    {                                                                                         \
        long v[16];                                                                           \
        for (int i = 0; i < 16; i++)                                                          \
            v[i] = n * i + m;                                                                 \
        sink = v[n & 15];                                                                     \
        return walk_a(n) + v[m & 15];                                                         \
    }

#if VARIANT == 2
WALK_C
#endif

FN long walk_b(long n)
{
    char buf[256];
    for (int i = 0; i < 256; i++)
        buf[i] = (char)(n + i);
    sink = buf[n & 255];
    return walk_a(n - 1) + buf[3];
}

#if VARIANT == 1
WALK_C
#endif

FN long walk_d(long n)
{
    return walk_b(n) + walk_c(n, 3) + walk_b(n + 1);
}
