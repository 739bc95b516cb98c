/* Thirty sites, none of 5 % of the calls: site_K (K = 1..30) makes 100 + K calls of 32
 * bytes, 3,465 in all (site_30's 130 are 3.75 %), all from main. No stdio. For
 * test_launcher_summary_shows_top_sites_under_the_threshold. */
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

#define COUNTED_SITE(k)                                                                     \
    SITE void site_##k(void)                                                                \
    {                                                                                       \
        for (int i = 0; i < 100 + k; i++)                                                   \
            release(malloc(32));                                                            \
    }
COUNTED_SITE(1) COUNTED_SITE(2) COUNTED_SITE(3) COUNTED_SITE(4) COUNTED_SITE(5)
COUNTED_SITE(6) COUNTED_SITE(7) COUNTED_SITE(8) COUNTED_SITE(9) COUNTED_SITE(10)
COUNTED_SITE(11) COUNTED_SITE(12) COUNTED_SITE(13) COUNTED_SITE(14) COUNTED_SITE(15)
COUNTED_SITE(16) COUNTED_SITE(17) COUNTED_SITE(18) COUNTED_SITE(19) COUNTED_SITE(20)
COUNTED_SITE(21) COUNTED_SITE(22) COUNTED_SITE(23) COUNTED_SITE(24) COUNTED_SITE(25)
COUNTED_SITE(26) COUNTED_SITE(27) COUNTED_SITE(28) COUNTED_SITE(29) COUNTED_SITE(30)

int main(void)
{
    site_1(); site_2(); site_3(); site_4(); site_5(); site_6(); site_7(); site_8();
    site_9(); site_10(); site_11(); site_12(); site_13(); site_14(); site_15(); site_16();
    site_17(); site_18(); site_19(); site_20(); site_21(); site_22(); site_23(); site_24();
    site_25(); site_26(); site_27(); site_28(); site_29(); site_30();
    return 0;
}
