/* An image that execs another which allocates only after a pause: `exec_late first COPY
 * [GATE]` makes 500 calls at site_first and execs COPY (a copy of exec_late under another
 * name, so that the first image is seen exec'd) as `COPY second [GATE]`, which sleeps 1 s
 * (or waits until the file GATE exists) before its 700 calls at site_second. In between,
 * the process's directory holds only the first image, exec'd: the run goes on
 * (tests/viewer/test_timeline.py, tests/viewer/test_watch.py). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) void site_first(void)
{
    char *p = malloc(24);
    sink += p != NULL;
    free(p);
}

__attribute__((noinline)) void site_second(void)
{
    char *p = malloc(40);
    sink += p != NULL;
    free(p);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "first") == 0) {
        for (int i = 0; i < 500; i++)
            site_first();
        char *args[] = {argv[2], (char *)"second", argc > 3 ? argv[3] : NULL, NULL};
        execv(argv[2], args);
        return 1;
    }
    if (argc > 2) {
        struct timespec tick = {0, 10000000};
        while (access(argv[2], F_OK) != 0)
            nanosleep(&tick, NULL);
    } else {
        struct timespec pause = {1, 0};
        while (nanosleep(&pause, &pause) != 0)
            ;
    }
    for (int i = 0; i < 700; i++)
        site_second();
    return 0;
}
