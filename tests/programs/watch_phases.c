/* For --watch (tests/viewer/test_watch.py). "phases SECONDS": three phases of SECONDS each,
 * one allocation site each, in order: phase_a (malloc 16), phase_b (malloc 64), phase_c
 * (malloc 256), each a loop of malloc and free until its time is up; prints "phase X" to
 * standard output as each starts and "done" at the end. "gated DIR": the same phases, each
 * until the file DIR/a, DIR/b or DIR/c exists: the tests make it once the view has shown
 * the phase, so that no phase ends unseen however late the watcher gets the CPU.
 * "mixed SECONDS": one loop for SECONDS where site_many makes 8 calls of 16 bytes for each
 * call of 65536 bytes that site_large makes: calls and bytes disagree on which site is
 * first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* A phase's end: its time (gate NULL) or its file; access() allocates nothing. */
static const char *gate;
static double seconds;

static double phase_end(void)
{
    return now() + seconds;
}

static int phase_goes_on(const char *file, double end)
{
    if (!gate)
        return now() < end;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", gate, file);
    return access(path, F_OK) != 0;
}

#define PHASE(name, size, file)                                                             \
    SITE void name(void)                                                                    \
    {                                                                                       \
        double end = phase_end();                                                           \
        while (phase_goes_on(file, end))                                                    \
            for (int i = 0; i < 100; i++)                                                   \
                release(malloc(size));                                                      \
    }
PHASE(phase_a, 16, "a")
PHASE(phase_b, 64, "b")
PHASE(phase_c, 256, "c")

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
    if (argc > 2 && strcmp(argv[1], "gated") == 0)
        gate = argv[2];
    else
        seconds = argc > 2 ? atof(argv[2]) : 1;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 1 && strcmp(argv[1], "mixed") == 0) {
        double end = now() + seconds;
        while (now() < end) {
            site_many();
            site_large();
        }
    } else {
        printf("phase a\n");
        phase_a();
        printf("phase b\n");
        phase_b();
        printf("phase c\n");
        phase_c();
    }
    printf("done\n");
    return 0;
}
