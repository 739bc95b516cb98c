/* The core linked statically (as the Rust crate links it) into a program built with a
 * sanitizer: several threads count allocation calls at known sites while the profile is
 * written, paused and resumed, one thread's table grows through six segments (1,024 distinct
 * stacks, each recorded twice), and one more thread is still counting when the process exits
 * (whose pending counts the exit flushes). run_sanitizers.sh checks the exact counts. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "malloc_freq.h"
#include "mf_core.h"

#define THREADS 4
#define CALLS_A 20000
#define CALLS_B 5000
#define CALLS_PAUSED 300

__attribute__((noinline)) static void stress_site_a(void)
{
    mf_record_call(MF_FN_RUST_ALLOC, 32);
}

__attribute__((noinline)) static void stress_site_b(void)
{
    mf_record_call(MF_FN_RUST_REALLOC, 100);
}

__attribute__((noinline)) static void stress_site_racer(void)
{
    mf_record_call(MF_FN_RUST_ALLOC_ZEROED, 8);
}

static int racer_started;

/* Path k: MANY_LEVELS levels of many_left() or many_right(), bit i of k choosing at level
 * i + 1, then stress_site_many(): 1 << MANY_LEVELS distinct stacks. */
#define MANY_LEVELS 10
static volatile int many_sink;
static void many_left(int level, unsigned k);
static void many_right(int level, unsigned k);

__attribute__((noinline)) static void stress_site_many(void)
{
    mf_record_call(MF_FN_MALLOC, 16);
}

static inline __attribute__((always_inline)) void many_step(int level, unsigned k)
{
    if (level == MANY_LEVELS)
        stress_site_many();
    else if (k >> level & 1)
        many_right(level + 1, k);
    else
        many_left(level + 1, k);
}

__attribute__((noinline)) static void many_left(int level, unsigned k)
{
    many_step(level, k);
    many_sink++; /* not a tail call: each level keeps its frame */
}

__attribute__((noinline)) static void many_right(int level, unsigned k)
{
    many_step(level, k);
    many_sink++;
}

static void *many_stacks(void *arg)
{
    (void)arg;
    for (int pass = 0; pass < 2; pass++)
        for (unsigned k = 0; k < 1u << MANY_LEVELS; k++)
            many_step(0, k);
    return NULL;
}

static void *racer(void *arg)
{
    (void)arg;
    stress_site_racer(); /* the first call creates the thread's file */
    __atomic_store_n(&racer_started, 1, __ATOMIC_RELEASE);
    for (;;)
        stress_site_racer();
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < CALLS_A; i++)
        stress_site_a();
    for (int i = 0; i < CALLS_B; i++)
        stress_site_b();
    malloc_freq_pause();
    for (int i = 0; i < CALLS_PAUSED; i++)
        stress_site_a();
    malloc_freq_resume();
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS + 1];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    pthread_create(&t[THREADS], NULL, many_stacks, NULL);
    for (int i = 0; i <= THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_t r;
    if (pthread_create(&r, NULL, racer, NULL) == 0) {
        pthread_detach(r);
        while (!__atomic_load_n(&racer_started, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    printf("%s\n", malloc_freq_dir() ? malloc_freq_dir() : "(none)");
    return 0;
}
