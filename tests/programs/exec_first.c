/* Allocates known counts, then execs exec_second (same pid), for
 * test_exec_keeps_both_images: site_before_exec 700 x 20 bytes.
 * Usage: exec_first PATH_TO_exec_second */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_before_exec(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(20));
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    site_before_exec(700);
    char *args[] = {argv[1], NULL};
    execv(argv[1], args);
    return 3; /* exec failed */
}
