/* The image exec_first execs: site_after_exec 900 x 30 bytes. */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_after_exec(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(30));
}

int main(void)
{
    site_after_exec(900);
    static const char done[] = "exec_second done\n";
    return write(1, done, sizeof done - 1) < 0;
}
