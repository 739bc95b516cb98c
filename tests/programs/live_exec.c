/* An image that execs with blocks still allocated, for test_live_exec_leaves_the_old_heap:
 * "live_exec first" makes site_before_exec 1,000 x 32 bytes, keeps them, and execs itself
 * as "live_exec second" (same pid, a new image: the old heap is gone), which makes
 * site_after_exec 10 x 64 bytes, says "ready" on stdout and waits for a line on stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

void *volatile kept[1000];

SITE void site_before_exec(void)
{
    for (int i = 0; i < 1000; i++)
        kept[i] = malloc(32);
}

SITE void site_after_exec(void)
{
    for (int i = 0; i < 10; i++)
        kept[i] = malloc(64);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "first") == 0) {
        site_before_exec();
        char *args[] = {"/proc/self/exe", "second", NULL};
        execv(args[0], args);
        return 3;
    }
    if (argc != 2 || strcmp(argv[1], "second") != 0)
        return 2;
    site_after_exec();
    char line[16];
    if (write(1, "ready\n", 6) != 6 || !fgets(line, sizeof line, stdin))
        return 3;
    return 0;
}
