/* Linked into early_alloc. A program's own libraries are initialised before the libraries
 * preloaded into it, so this constructor runs before the preload library's: it allocates
 * from four threads at once and keeps blocks that main() checks, grows and frees later.
 * Every block must come from the allocator that frees it, also when jemalloc or tcmalloc
 * is preloaded after the profiler (it used to hand out glibc's memory until its own
 * constructor ran, and jemalloc's free crashed on it). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "early_alloc.h"

char *early_blocks[EARLY_THREADS][EARLY_KEPT];
int early_constructor_done;

static pthread_barrier_t early_start;

static void *early_worker(void *arg)
{
    long k = (long)arg;
    pthread_barrier_wait(&early_start); /* all four allocate at once */
    for (int round = 0; round < EARLY_ROUNDS; round++) {
        for (int i = 0; i < EARLY_KEPT; i++) {
            char *p = malloc(EARLY_SIZE(i));
            memset(p, 'a' + (int)k, EARLY_SIZE(i));
            char *q = realloc(p, 2 * EARLY_SIZE(i));
            free(early_blocks[k][i]); /* free(NULL) in the first round */
            early_blocks[k][i] = q;
        }
    }
    return NULL;
}

__attribute__((constructor)) static void early_alloc_start(void)
{
    pthread_t threads[EARLY_THREADS];
    pthread_barrier_init(&early_start, NULL, EARLY_THREADS);
    for (long k = 0; k < EARLY_THREADS; k++)
        if (pthread_create(&threads[k], NULL, early_worker, (void *)k) != 0)
            abort();
    for (int k = 0; k < EARLY_THREADS; k++)
        pthread_join(threads[k], NULL);
    pthread_barrier_destroy(&early_start);
    early_constructor_done = 1;
}
