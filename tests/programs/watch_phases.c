/* For --watch (tests/viewer/test_watch.py). "phases SECONDS": three phases of SECONDS each,
 * one allocation site each, in order: phase_a (malloc 16), phase_b (malloc 64), phase_c
 * (malloc 256), each a loop of malloc and free until its time is up; prints "phase X" to
 * standard output as each starts and "done" at the end. "mixed SECONDS": one loop for
 * SECONDS where site_many makes 8 calls of 16 bytes for each call of 65536 bytes that
 * site_large makes: calls and bytes disagree on which site is first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) static void release(void *p)
{
    free(p);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define PHASE(name, size)                                                                   \
    SITE void name(double seconds)                                                          \
    {                                                                                       \
        double end = now() + seconds;                                                       \
        while (now() < end)                                                                 \
            for (int i = 0; i < 100; i++)                                                   \
                release(malloc(size));                                                      \
    }
PHASE(phase_a, 16)
PHASE(phase_b, 64)
PHASE(phase_c, 256)

SITE void site_many(void)
{
    for (int i = 0; i < 8; i++)
        release(malloc(16));
}

SITE void site_large(void)
{
    release(malloc(65536));
}

int main(int argc, char **argv)
{
    double seconds = argc > 2 ? atof(argv[2]) : 1;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "mixed") == 0) {
        double end = now() + seconds;
        while (now() < end) {
            site_many();
            site_large();
        }
    } else {
        printf("phase a\n");
        phase_a(seconds);
        printf("phase b\n");
        phase_b(seconds);
        printf("phase c\n");
        phase_c(seconds);
    }
    printf("done\n");
    return 0;
}
