/* Uses blocks that a library's constructor allocated before the preload library's
 * constructor ran (early_alloc_lib.c): checks their contents, grows and frees them, then
 * allocates a known number of blocks at site_main (MAIN_CALLS, tests/preload/test_trust_preload.py).
 * Prints whether glibc's own heap was ever used: with jemalloc or tcmalloc preloaded after
 * the profiler, every call must reach them, from the very first one. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "early_alloc.h"

#define SITE __attribute__((noinline, noclone))

static char *kept[256];

SITE void site_main(int n) /* n x malloc(40) */
{
    for (int i = 0; i < n; i++) {
        free(kept[i % 256]);
        kept[i % 256] = malloc(40);
    }
}

int main(void)
{
    long bad = 0;
    for (int k = 0; k < EARLY_THREADS; k++) {
        for (int i = 0; i < EARLY_KEPT; i++) {
            char *p = early_blocks[k][i];
            for (size_t j = 0; j < EARLY_SIZE(i); j++)
                bad += p[j] != 'a' + k;
            p = realloc(p, 4096 + EARLY_SIZE(i));
            bad += p[0] != 'a' + k;
            free(p);
        }
    }
    site_main(1000);
    for (int i = 0; i < 256; i++)
        free(kept[i]);
    struct mallinfo2 m = mallinfo2();
    printf("early blocks: constructor %s, %ld bytes wrong\n",
           early_constructor_done ? "ran" : "did not run", bad);
    printf("glibc heap: %s\n", m.arena || m.hblkhd ? "used" : "untouched");
    return 0;
}
