/* Three big sites and four small ones, for test_threshold_folds_and_sums:
 * site_big_a 6000, site_big_b 3000, site_mid 800, site_small_1 40, site_small_2 30,
 * site_small_3 20, site_small_4 10 calls (24 bytes each), all called from main. */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

#define COUNTED_SITE(name)                                                                  \
    SITE void name(int n)                                                                   \
    {                                                                                       \
        for (int i = 0; i < n; i++)                                                         \
            release(malloc(24));                                                            \
    }
COUNTED_SITE(site_big_a)
COUNTED_SITE(site_big_b)
COUNTED_SITE(site_mid)
COUNTED_SITE(site_small_1)
COUNTED_SITE(site_small_2)
COUNTED_SITE(site_small_3)
COUNTED_SITE(site_small_4)

int main(void)
{
    site_big_a(6000);
    site_big_b(3000);
    site_mid(800);
    site_small_1(40);
    site_small_2(30);
    site_small_3(20);
    site_small_4(10);
    static const char done[] = "threshold_sites done\n";
    return write(1, done, sizeof done - 1) < 0;
}
