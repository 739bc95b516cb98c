/* Allocations made outside main and inside it, kept to the end, for
 * test_live_outside_main_from_the_start_up_frames:
 *   site_before_main  3 x 16 bytes, from a constructor (before main: outside)
 *   site_in_main      5 x 32 bytes, from run(), which main reaches by a tail call (so main
 *                     is not on the stack, as in Debian's python3: inside)
 *   site_at_exit      2 x 48 bytes, from an atexit handler (after main: outside); with
 *                     argv[1] "exit" the process ends by exit() called from inside main
 *                     (main on the stack, the handler still after it). */
#include <stdlib.h>
#include <string.h>

#define SITE __attribute__((noinline, noclone))

void *volatile kept[10];

SITE void site_before_main(void)
{
    for (int i = 0; i < 3; i++)
        kept[i] = malloc(16);
}

SITE void site_in_main(void)
{
    for (int i = 0; i < 5; i++)
        kept[3 + i] = malloc(32);
}

SITE void site_at_exit(void)
{
    for (int i = 0; i < 2; i++)
        kept[8 + i] = malloc(48);
}

__attribute__((constructor)) static void before_main(void)
{
    site_before_main();
}

static void at_exit(void)
{
    site_at_exit();
}

__attribute__((noinline)) int run(void)
{
    atexit(at_exit);
    site_in_main();
    return 0;
}

__attribute__((noinline)) void run_then_exit(void)
{
    run();
    exit(0);
}

/* A sibling call even at -O1: main's frame is gone when run runs. "exit": main calls
 * run_then_exit (no tail call: main stays on the stack through exit's handlers). */
__attribute__((optimize("optimize-sibling-calls"))) int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exit") == 0) {
        run_then_exit();
        return 1;
    }
    return run();
}
