/* Threads that allocate without a pause until the process is killed: a running program for
 * mf_print to read again and again (tests/viewer/test_live_reads.py).
 *   busy_stacks HAMMERS GROW
 * HAMMERS threads each go round 256 distinct stacks (path k through 8 levels of left() or
 * right(), bit i of k choosing at level i + 1, down to site_leaf()) forever, path k at size
 * SIZES[(k + round) % 8], so that each thread's table holds 2,048 entries (a stack per size
 * class) and every one of them keeps changing. Says "ready" on stdout once every hammer has
 * been round 8 times (all its entries exist). With GROW > 0 one more thread then makes new
 * stacks at GROW a second (path k through 15 levels down to site_grow(), each once at 24
 * bytes, 32,768 in all), so that its table grows new segments while it is read, and says
 * "grown" when it has made them all. Runs until killed. No stdio. */
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define HAMMER_LEVELS 8
#define GROW_LEVELS 15

static const size_t SIZES[8] = {16, 48, 100, 200, 400, 800, 1600, 3200};
static volatile int sink;

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline)) void site_leaf(size_t size)
{
    release(malloc(size));
}

__attribute__((noinline)) void site_grow(size_t size)
{
    release(malloc(size));
}

void left(int level, int levels, unsigned k, size_t size);
void right(int level, int levels, unsigned k, size_t size);

static inline __attribute__((always_inline)) void step(int level, int levels, unsigned k,
                                                       size_t size)
{
    if (level == levels)
        levels == GROW_LEVELS ? site_grow(size) : site_leaf(size);
    else if (k >> level & 1)
        right(level + 1, levels, k, size);
    else
        left(level + 1, levels, k, size);
}

__attribute__((noinline)) void left(int level, int levels, unsigned k, size_t size)
{
    step(level, levels, k, size);
    sink++; /* not a tail call: each level keeps its frame */
}

__attribute__((noinline)) void right(int level, int levels, unsigned k, size_t size)
{
    step(level, levels, k, size);
    sink++;
}

static sem_t round_eight;

static void *hammer(void *arg)
{
    (void)arg;
    for (unsigned round = 0;; round++) {
        for (unsigned k = 0; k < 1u << HAMMER_LEVELS; k++)
            step(0, HAMMER_LEVELS, k, SIZES[(k + round) % 8]);
        if (round == 7)
            sem_post(&round_eight);
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *grower(void *arg)
{
    double rate = *(double *)arg, start = now();
    unsigned made = 0;
    while (made < 1u << GROW_LEVELS) {
        double want = (now() - start) * rate;
        while (made < want && made < 1u << GROW_LEVELS)
            step(0, GROW_LEVELS, made++, 24);
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    static const char grown[] = "grown\n";
    if (write(1, grown, sizeof grown - 1) < 0)
        exit(2);
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    int hammers = argc > 1 ? atoi(argv[1]) : 2;
    static double rate;
    rate = argc > 2 ? atof(argv[2]) : 0;
    sem_init(&round_eight, 0, 0);
    pthread_t t;
    for (int i = 0; i < hammers; i++)
        if (pthread_create(&t, NULL, hammer, NULL) != 0)
            return 2;
    for (int i = 0; i < hammers; i++)
        while (sem_wait(&round_eight) != 0)
            ;
    static const char ready[] = "ready\n";
    if (write(1, ready, sizeof ready - 1) < 0)
        return 2;
    if (rate > 0 && pthread_create(&t, NULL, grower, &rate) != 0)
        return 2;
    for (;;)
        pause();
}
