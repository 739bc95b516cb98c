/* `make bench`'s mf_print workload (bench/mfprint_bench.py): a real profile of N distinct call
 * stacks, 40 levels deep, through four shared libraries with DWARF, recorded by the preload
 * library with MALLOC_FREQ_SAMPLE=1.
 *
 * Built five times from this file: with -DMS_MODULE=m (m = 0..3) as libms<m>.so, which holds
 * the levels L with L % 4 == m, and with -DMS_MAIN as the program. Level L has two functions,
 * ms_l<L>_a and ms_l<L>_b; each calls level L + 1's _a or _b as bit (L % 20) of the path
 * number k says, through an always-inlined step (so each return address symbolizes into two
 * frames, the inlined step and its function), and level 39 calls the allocation site. Path k
 * (0 <= k < 2^20) is the same bits twice over, so N paths are N distinct stacks of 40 levels
 * that differ from their innermost frames on (the caller tree's worst shape: ~25 nodes a
 * stack). Each path allocates once, 16 * (k % 4 + 1) bytes.
 *
 * Usage: many_stacks_gen N (at most 1,048,576). No stdio in the loop. */
#define MS_LEVELS 40
#define MS_BITS 20

extern volatile int ms_sink;
void ms_site(unsigned k);

#define MS_DECL(L) void ms_l##L##_a(unsigned k); void ms_l##L##_b(unsigned k);
MS_DECL(0) MS_DECL(1) MS_DECL(2) MS_DECL(3) MS_DECL(4) MS_DECL(5) MS_DECL(6) MS_DECL(7)
MS_DECL(8) MS_DECL(9) MS_DECL(10) MS_DECL(11) MS_DECL(12) MS_DECL(13) MS_DECL(14) MS_DECL(15)
MS_DECL(16) MS_DECL(17) MS_DECL(18) MS_DECL(19) MS_DECL(20) MS_DECL(21) MS_DECL(22) MS_DECL(23)
MS_DECL(24) MS_DECL(25) MS_DECL(26) MS_DECL(27) MS_DECL(28) MS_DECL(29) MS_DECL(30) MS_DECL(31)
MS_DECL(32) MS_DECL(33) MS_DECL(34) MS_DECL(35) MS_DECL(36) MS_DECL(37) MS_DECL(38) MS_DECL(39)
#define ms_l40_a(k) ms_site(k)
#define ms_l40_b(k) ms_site(k)

/* Level L, calling level N = L + 1. */
#define MS_LEVEL(L, N)                                                                  \
    static inline __attribute__((always_inline)) void ms_step##L(unsigned k)            \
    {                                                                                   \
        if (k >> ((L) % MS_BITS) & 1)                                                   \
            ms_l##N##_b(k);                                                             \
        else                                                                            \
            ms_l##N##_a(k);                                                             \
    }                                                                                   \
    __attribute__((noinline)) void ms_l##L##_a(unsigned k)                              \
    {                                                                                   \
        ms_step##L(k);                                                                  \
        ms_sink++; /* not a tail call: every level keeps its frame */                   \
    }                                                                                   \
    __attribute__((noinline)) void ms_l##L##_b(unsigned k)                              \
    {                                                                                   \
        ms_step##L(k ^ 0u);                                                             \
        ms_sink += 2;                                                                   \
    }

#if defined(MS_MODULE) && MS_MODULE == 0
MS_LEVEL(0, 1) MS_LEVEL(4, 5) MS_LEVEL(8, 9) MS_LEVEL(12, 13) MS_LEVEL(16, 17)
MS_LEVEL(20, 21) MS_LEVEL(24, 25) MS_LEVEL(28, 29) MS_LEVEL(32, 33) MS_LEVEL(36, 37)
#elif defined(MS_MODULE) && MS_MODULE == 1
MS_LEVEL(1, 2) MS_LEVEL(5, 6) MS_LEVEL(9, 10) MS_LEVEL(13, 14) MS_LEVEL(17, 18)
MS_LEVEL(21, 22) MS_LEVEL(25, 26) MS_LEVEL(29, 30) MS_LEVEL(33, 34) MS_LEVEL(37, 38)
#elif defined(MS_MODULE) && MS_MODULE == 2
MS_LEVEL(2, 3) MS_LEVEL(6, 7) MS_LEVEL(10, 11) MS_LEVEL(14, 15) MS_LEVEL(18, 19)
MS_LEVEL(22, 23) MS_LEVEL(26, 27) MS_LEVEL(30, 31) MS_LEVEL(34, 35) MS_LEVEL(38, 39)
#elif defined(MS_MODULE) && MS_MODULE == 3
MS_LEVEL(3, 4) MS_LEVEL(7, 8) MS_LEVEL(11, 12) MS_LEVEL(15, 16) MS_LEVEL(19, 20)
MS_LEVEL(23, 24) MS_LEVEL(27, 28) MS_LEVEL(31, 32) MS_LEVEL(35, 36) MS_LEVEL(39, 40)
#elif defined(MS_MAIN)
#include <stdlib.h>
#include <unistd.h>

volatile int ms_sink;

__attribute__((noipa)) static void ms_release(void *p)
{
    free(p);
}

__attribute__((noinline)) void ms_site(unsigned k)
{
    ms_release(malloc(16 * (k % 4 + 1)));
    ms_sink++;
}

int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
    if (n == 0 || n > (1ul << MS_BITS))
        return 2;
    for (unsigned k = 0; k < n; k++)
        ms_l0_a(k);
    static const char done[] = "many_stacks_gen done\n";
    return write(1, done, sizeof done - 1) == (ssize_t)(sizeof done - 1) ? 0 : 1;
}
#else
#error "build with -DMS_MODULE=0..3 or -DMS_MAIN"
#endif
