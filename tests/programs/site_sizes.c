/* Sites of known depth and sizes, for mf_print --by site and --sizes --tune
 * (tests/viewer/test_sites.py). 9,000 calls of 32 bytes and 1,000 of 4,096 (90 % and 10 %):
 *   far_leaf <- mid1 <- mid2 <- mid3 <- top_a or top_b <- main: 3,000 calls of 32 bytes
 *       from each top: one site 4 frames deep (the callers differ at the 5th frame)
 *   near_leaf <- near_a <- main: 1,500 of 32 bytes and 500 of 4,096
 *   near_leaf <- near_b <- main: 1,500 of 32 bytes (two sites: they differ at the 2nd)
 *   big_site <- main: 500 of 4,096
 * With an argument, it then prints "ready" and waits for its standard input to close (a live
 * profile). No stdio: it would allocate. */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

volatile int sink; /* after each call: no tail call drops a frame */

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void far_leaf(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(32));
    sink++;
}

SITE void mid1(int n)
{
    far_leaf(n);
    sink++;
}

SITE void mid2(int n)
{
    mid1(n);
    sink++;
}

SITE void mid3(int n)
{
    mid2(n);
    sink++;
}

SITE void top_a(void)
{
    mid3(3000);
    sink++;
}

SITE void top_b(void)
{
    mid3(3000);
    sink++;
}

SITE void near_leaf(size_t size, int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(size));
    sink++;
}

SITE void near_a(void)
{
    near_leaf(32, 1500);
    near_leaf(4096, 500);
    sink++;
}

SITE void near_b(void)
{
    near_leaf(32, 1500);
    sink++;
}

SITE void big_site(void)
{
    for (int i = 0; i < 500; i++)
        release(malloc(4096));
    sink++;
}

int main(int argc, char **argv)
{
    (void)argv;
    top_a();
    top_b();
    near_a();
    near_b();
    big_site();
    if (argc > 1) {
        char c;
        if (write(1, "ready\n", 6) != 6)
            return 1;
        while (read(0, &c, 1) > 0)
            ;
    }
    return sink > 0 ? 0 : 1;
}
