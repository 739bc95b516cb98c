/* Known live sets, temporaries and leaks, for tests/core/test_live.py.
 *
 *   live_heap sets   site_keep_small 2,000 x 100 bytes and site_keep_big 300 x 5,000 bytes
 *                    alive; says "ready" on stdout and waits for a line on stdin; frees
 *                    every second block of both; "ready", waits; frees the rest; exits.
 *   live_heap temps  site_temporary: 5,000 x (malloc 64, free at once); site_kept: 5,000 x
 *                    malloc 64, all freed at the end, after other calls; exits.
 *   live_heap leaks  site_leak 1,000 x 48 bytes, never freed; exits.
 *   live_heap many   site_many: 300,000 x 16 bytes alive at exit, more than the table at
 *                    MALLOC_FREQ_LIVE=all holds (262,144 records).
 *   live_heap many_freed  the same 300,000, then all freed before exit: the table was full
 *                    while they lived, none is alive at the end.
 *   (every mode)     site_before_main: 3 x 16 bytes from a constructor, kept to the end.
 *   live_heap edges  realloc moves (site_grow: 1 .. 1 MiB, then freed), free(NULL),
 *                    realloc(NULL, n), realloc(p, 0), memory from glibc's own __libc_malloc
 *                    (never seen by the profiler) freed through free, and a page from mmap
 *                    given to free with a chunk header glibc takes for an mmapped chunk
 *                    (glibc unmaps it); site_edge_kept 10 x 32 bytes alive at exit.
 *   live_heap threads 4 threads, ending together, each 20,000 x (site_churn: malloc 40,
 *                    free at once) and site_handoff: 1,000 x 24 bytes that the main thread
 *                    frees after they exit; site_thread_kept: 5 x 56 bytes per thread,
 *                    alive at exit. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SITE __attribute__((noinline, noclone))

extern void *__libc_malloc(size_t);

static void *keep_small[2000], *keep_big[300], *kept[5000];
void *volatile edge[10]; /* kept alive to the end */

/* free() through a pointer the compiler cannot see come from mmap (it would refuse). */
__attribute__((noipa)) static void buggy_free(void *p)
{
    free(p);
}

static void wait_line(void)
{
    char line[16];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        exit(3);
}

SITE void site_keep_small(void)
{
    for (int i = 0; i < 2000; i++)
        keep_small[i] = malloc(100);
}

SITE void site_keep_big(void)
{
    for (int i = 0; i < 300; i++)
        keep_big[i] = malloc(5000);
}

SITE void site_temporary(void)
{
    for (int i = 0; i < 5000; i++) {
        volatile char *p = malloc(64);
        p[0] = 1;
        free((void *)p);
    }
}

SITE void site_kept(void)
{
    for (int i = 0; i < 5000; i++)
        kept[i] = malloc(64);
}

SITE void site_leak(void)
{
    for (int i = 0; i < 1000; i++) {
        volatile char *p = malloc(48);
        p[0] = 1;
    }
}

SITE void *site_grow(void)
{
    char *p = NULL;
    for (size_t n = 1; n <= (1u << 20); n *= 2) {
        p = realloc(p, n);
        p[n - 1] = 1;
    }
    return p;
}

SITE void *site_edge_kept(void)
{
    return malloc(32);
}

SITE void site_churn(void)
{
    for (int i = 0; i < 20000; i++) {
        volatile char *p = malloc(40);
        p[0] = 1;
        free((void *)p);
    }
}

SITE void site_handoff(void **out)
{
    for (int i = 0; i < 1000; i++)
        out[i] = malloc(24);
}

SITE void *site_thread_kept(void)
{
    return malloc(56);
}

static void *handed[4][1000];
void *volatile thread_kept[4][5];
/* The workers end together: one that ended before the last started would hand it its
 * table, and the test counts a table a thread. */
static pthread_barrier_t all_done;

static void *worker(void *arg)
{
    long k = (long)arg;
    site_churn();
    site_handoff(handed[k]);
    for (int i = 0; i < 5; i++)
        thread_kept[k][i] = site_thread_kept();
    pthread_barrier_wait(&all_done);
    return NULL;
}

static int threads(void)
{
    pthread_t t[4];
    pthread_barrier_init(&all_done, NULL, 4);
    for (long k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker, (void *)k) != 0)
            return 1;
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 1000; i++)
            free(handed[k][i]);
    return 0;
}

SITE void *site_before_main(void)
{
    return malloc(16);
}

void *volatile early[3];

__attribute__((constructor)) static void before_main(void)
{
    for (int i = 0; i < 3; i++)
        early[i] = site_before_main();
}

static void *many[300000];

SITE void site_many(int keep)
{
    for (int i = 0; i < 300000; i++) {
        volatile char *p = malloc(16);
        p[0] = 1;
        if (keep)
            many[i] = (void *)p;
    }
}

static int edges(void)
{
    free(site_grow());
    free(NULL);
    void *p = realloc(NULL, 200); /* a malloc */
    p = realloc(p, 0);            /* glibc: a free, NULL back */
    free(p);
    for (int i = 0; i < 100; i++)
        free(__libc_malloc(24)); /* memory the profiler never saw */
    /* A buggy program's free of memory from mmap: glibc takes a chunk whose header says
     * "mmapped" (bit 1) for one of its own and unmaps it. */
    char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    ((size_t *)m)[0] = 0;
    ((size_t *)m)[1] = 8192 | 2;
    buggy_free(m + 16);
    for (int i = 0; i < 10; i++)
        edge[i] = site_edge_kept();
    printf("edges done\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "sets") == 0) {
        site_keep_small();
        site_keep_big();
        wait_line();
        for (int i = 0; i < 2000; i += 2)
            free(keep_small[i]);
        for (int i = 0; i < 300; i += 2)
            free(keep_big[i]);
        wait_line();
        for (int i = 1; i < 2000; i += 2)
            free(keep_small[i]);
        for (int i = 1; i < 300; i += 2)
            free(keep_big[i]);
        return 0;
    }
    if (strcmp(mode, "temps") == 0) {
        site_kept();
        site_temporary();
        for (int i = 0; i < 5000; i++)
            free(kept[i]);
        return 0;
    }
    if (strcmp(mode, "leaks") == 0) {
        site_leak();
        return 0;
    }
    if (strcmp(mode, "edges") == 0)
        return edges();
    if (strcmp(mode, "threads") == 0)
        return threads();
    if (strcmp(mode, "many") == 0) {
        site_many(0);
        return 0;
    }
    if (strcmp(mode, "many_freed") == 0) {
        site_many(1);
        for (int i = 0; i < 300000; i++)
            free(many[i]);
        return 0;
    }
    fprintf(stderr, "usage: live_heap sets|temps|leaks|edges|threads|many|many_freed\n");
    return 2;
}
