/* Calls nodebug_alloc (nodebug_lib.c) for 300 allocations, and allocates 200 times itself:
 * at MALLOC_FREQ_SAMPLE=1, exactly 300 calls pass through the library. No stdio. */
#include <stdlib.h>

void nodebug_alloc(int n);

__attribute__((noinline)) static void own_allocs(int n)
{
    for (int i = 0; i < n; i++) {
        void *volatile p = malloc(16);
        free(p);
    }
}

int main(void)
{
    nodebug_alloc(300);
    own_allocs(200);
    return 0;
}
