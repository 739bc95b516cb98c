/* One site, one stack, again and again: `repeat_site N BYTES` makes N malloc/free pairs of
 * BYTES each from site_repeat, one after another, so that every call after the first is the
 * thread's last stack again, whole (counted on the program's stack, mf_sample_again). 70,000
 * calls of 65,000 bytes pass 2^32 - 1 bytes in one stack below MALLOC_FREQ_LARGE's 64 KiB
 * (tests/core/test_sizes.py). No stdio. */
#include <stdlib.h>
#include <unistd.h>

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline)) void site_repeat(long n, size_t bytes)
{
    for (long i = 0; i < n; i++) {
        char *p = malloc(bytes);
        if (p)
            p[0] = 1;
        release(p);
    }
}

int main(int argc, char **argv)
{
    long n = argc > 2 ? atol(argv[1]) : 0;
    long bytes = argc > 2 ? atol(argv[2]) : 0;
    if (n < 1 || bytes < 1)
        return 2;
    site_repeat(n, (size_t)bytes);
    static const char done[] = "repeat_site done\n";
    return write(1, done, sizeof done - 1) < 0;
}
