/* A library built twice, as liba.so (-DSITE_NAME=site_in_a) and libb.so
 * (-DSITE_NAME=site_in_b): the same size, so that the second is likely mapped where the
 * first was after the first is closed. For test_library_loaded_at_a_previous_address. */
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone, visibility("default")))

__attribute__((noipa)) static void release(void *p)
{
    free(p);
}

SITE void SITE_NAME(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(48));
}
