/* Known allocation counts at known sites, for test_exact_counts_per_site and
 * test_depth_truncation. Every allocation function is used; sites sit at different stack
 * depths; four threads do known work; one more thread is still alive (blocked in pause())
 * when main returns. No stdio: the only allocations besides the sites are libc's own.
 * The expected numbers are repeated in tests/lib/harness.py (EXACT_SITES). */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
__attribute__((noipa)) void release(void *p)
{
    free(p);
}

/* Recurses `levels` times before calling the site: the site's stack depth is levels + 1
 * frames above main. The counter keeps the calls out of tail position. */
typedef void (*site_fn)(int);
static volatile int depth_sink;
SITE void descend(int levels, site_fn site, int n)
{
    if (levels > 0)
        descend(levels - 1, site, n);
    else
        site(n);
    depth_sink++;
}

SITE void site_malloc(int n) /* n x 24 bytes */
{
    for (int i = 0; i < n; i++)
        release(malloc(24));
}

SITE void site_calloc(int n) /* n x 10*8 bytes */
{
    for (int i = 0; i < n; i++)
        release(calloc(10, 8));
}

SITE void site_realloc(int n) /* realloc(NULL, 8), realloc(p, 16), ... realloc(p, 8n) */
{
    void *p = NULL;
    for (int i = 1; i <= n; i++)
        p = realloc(p, 8 * (size_t)i);
    release(p);
}

SITE void site_posix_memalign(int n) /* n x 100 bytes */
{
    for (int i = 0; i < n; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, 100) == 0)
            release(p);
    }
}

SITE void site_aligned_alloc(int n) /* n x 64 bytes */
{
    for (int i = 0; i < n; i++)
        release(aligned_alloc(32, 64));
}

SITE void site_memalign(int n) /* n x 40 bytes */
{
    for (int i = 0; i < n; i++)
        release(memalign(128, 40));
}

SITE void site_valloc(int n) /* n x 10 bytes */
{
    for (int i = 0; i < n; i++)
        release(valloc(10));
}

SITE void site_pvalloc(int n) /* n x 5 bytes requested */
{
    for (int i = 0; i < n; i++)
        release(pvalloc(5));
}

SITE void site_deep(int n) /* n x 1000 bytes, 18 levels down */
{
    for (int i = 0; i < n; i++)
        release(malloc(1000));
}

SITE void site_thread_work(int n) /* n x 48 bytes */
{
    for (int i = 0; i < n; i++)
        release(malloc(48));
}

SITE void site_lingering(int n) /* n x 7 bytes, by a thread alive at exit */
{
    for (int i = 0; i < n; i++)
        release(malloc(7));
}

static void *worker(void *arg)
{
    int k = (int)(long)arg; /* thread k: (k+1)*250 calls, 5k levels down */
    descend(5 * k, site_thread_work, (k + 1) * 250);
    return NULL;
}

static sem_t lingering_done;

static void *lingering(void *arg)
{
    (void)arg;
    site_lingering(333);
    sem_post(&lingering_done);
    for (;;)
        pause();
    return NULL;
}

int main(void)
{
    descend(0, site_malloc, 1000);
    descend(2, site_calloc, 700);
    descend(4, site_realloc, 500);
    descend(6, site_posix_memalign, 300);
    descend(8, site_aligned_alloc, 200);
    descend(10, site_memalign, 150);
    descend(12, site_valloc, 120);
    descend(14, site_pvalloc, 110);
    descend(17, site_deep, 90);

    pthread_t t[4], l;
    for (long k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker, (void *)k) != 0)
            return 1;
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);

    sem_init(&lingering_done, 0, 0);
    if (pthread_create(&l, NULL, lingering, NULL) != 0)
        return 1;
    while (sem_wait(&lingering_done) != 0)
        ;
    static const char done[] = "exact_sites done\n";
    if (write(1, done, sizeof done - 1) < 0)
        return 1;
    return 0; /* the lingering thread is still in pause() */
}
