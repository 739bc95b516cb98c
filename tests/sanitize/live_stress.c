/* The live heap (c_core/mf_live.c) under sanitizers, the core linked statically as in the
 * Rust crate, MALLOC_FREQ_LIVE=all: 4 threads each allocate 5,000 blocks at
 * stress_live_kept, then (after a barrier) free the next thread's blocks while allocating
 * and freeing their own at stress_live_churn (5,000 each), and keep 25 more each to the end.
 * Records are inserted and removed by different threads at once; run_sanitizers.sh checks
 * the live view's exact counts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "malloc_freq.h"
#include "mf_core.h"

#define THREADS 4
#define BLOCKS 5000
#define KEPT 25

static void *blocks[THREADS][BLOCKS];
void *volatile kept[THREADS][KEPT];
static pthread_barrier_t barrier;

static void *counted_alloc(size_t size)
{
    mf_record_call(MF_FN_RUST_ALLOC, size);
    void *p = malloc(size);
    mf_live_alloc(p);
    return p;
}

static void counted_free(void *p)
{
    mf_live_free_call(p);
    free(p);
}

__attribute__((noinline)) static void *stress_live_kept(void)
{
    return counted_alloc(48);
}

__attribute__((noinline)) static void *stress_live_churn(void)
{
    return counted_alloc(16);
}

static void *worker(void *arg)
{
    long k = (long)arg;
    for (int i = 0; i < BLOCKS; i++)
        blocks[k][i] = stress_live_kept();
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < BLOCKS; i++) {
        counted_free(blocks[(k + 1) % THREADS][i]);
        counted_free(stress_live_churn());
    }
    for (int i = 0; i < KEPT; i++)
        kept[k][i] = stress_live_kept();
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%s\n", malloc_freq_dir() ? malloc_freq_dir() : "(none)");
    return 0;
}
