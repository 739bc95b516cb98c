/* Three phases, each a second of one site's calls at a fixed pace: phase_a makes
 * PHASE_CALLS calls of 16 bytes, then phase_b of 100 bytes, then phase_c of 1000 bytes,
 * PHASE_CALLS / 1000 every millisecond. Each phase's start and end (CLOCK_REALTIME ns) are
 * written to argv[1], "a START END" a line, so a test knows each site's true rate. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PHASE_MS 1000
#define PER_MS 50
#define PHASE_CALLS (PHASE_MS * PER_MS)

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void sleep_until(struct timespec *t)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) != 0)
        ;
}

/* PER_MS calls of `size` bytes at each millisecond from now on, PHASE_MS times. */
#define PHASE(name, size)                                                                  \
    __attribute__((noinline)) static void name(void)                                       \
    {                                                                                      \
        struct timespec t;                                                                 \
        clock_gettime(CLOCK_MONOTONIC, &t);                                                \
        for (int ms = 0; ms < PHASE_MS; ms++) {                                            \
            for (int i = 0; i < PER_MS; i++) {                                             \
                void *volatile p = malloc(size); /* kept: a malloc freed unused is elided */ \
                free(p);                                                                   \
            }                                                                              \
            t.tv_nsec += 1000000;                                                          \
            if (t.tv_nsec >= 1000000000) {                                                 \
                t.tv_nsec -= 1000000000;                                                   \
                t.tv_sec++;                                                                \
            }                                                                              \
            sleep_until(&t);                                                               \
        }                                                                                  \
    }

PHASE(phase_a, 16)
PHASE(phase_b, 100)
PHASE(phase_c, 1000)

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    setvbuf(f, NULL, _IONBF, 0); /* its buffer allocated before phase_a, not within it */
    void (*phases[])(void) = {phase_a, phase_b, phase_c};
    for (int i = 0; i < 3; i++) {
        unsigned long long start = now_ns();
        phases[i]();
        fprintf(f, "%c %llu %llu %d\n", 'a' + i, start, now_ns(), PHASE_CALLS);
    }
    fclose(f);
    return 0;
}
