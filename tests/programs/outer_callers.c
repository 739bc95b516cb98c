/* One allocation site reached from two outer callers of the same shape, so that two
 * consecutive calls' stacks lie at the same addresses and differ in one word only: the
 * return address into via_a or via_b, four frames above the allocation. The recorder may
 * take a call's stack from the last one's when every word the last walk read is unchanged
 * (tests/viewer/test_sites.py): that word must tell them apart.
 *   alternating: via_a, via_b, via_a, ... 4,000 calls (2,000 each);
 *   then via_a alone: 1,000 calls.
 * So leaf via via_a: 3,000 calls, via via_b: 2,000. No stdio. */
#include <stdlib.h>

#define STEP __attribute__((noinline, noclone))

volatile int sink; /* after each call: no tail call drops a frame */

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

STEP void leaf(void)
{
    release(malloc(40));
    sink++;
}

STEP void mid3(void)
{
    leaf();
    sink++;
}

STEP void mid2(void)
{
    mid3();
    sink++;
}

STEP void mid1(void)
{
    mid2();
    sink++;
}

STEP void via_a(void)
{
    mid1();
    sink++;
}

STEP void via_b(void)
{
    mid1();
    sink++;
}

int main(void)
{
    for (int i = 0; i < 2000; i++) {
        via_a();
        via_b();
    }
    for (int i = 0; i < 1000; i++)
        via_a();
    return 0;
}
