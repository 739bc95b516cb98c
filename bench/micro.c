/* The malloc-bound microbenchmark of `make bench`: small malloc/free pairs (16..256 bytes)
 * from 8 distinct sites, each reached through a call chain about 20 frames deep, on 1 or
 * more threads. Usage: micro THREADS ITERATIONS (malloc/free pairs per thread).
 * Built with -O2 -fno-omit-frame-pointer so that MALLOC_FREQ_UNWIND=fp sees every frame. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MICRO_SITES 8
#define MICRO_CHAIN 17 /* frames between the worker and a site: ~20 deep at malloc */
#define MICRO_BATCH 256 /* pairs per descent, so walking the chain costs little */

/* Keeps the compiler from pairing up and deleting malloc/free (GCC does since 10). */
#define MICRO_USE(p) __asm__ volatile("" : : "r"(p) : "memory")

/* One site: the same source line allocates every time, sizes cycle through 16..256. */
#define MICRO_SITE(k)                                                                   \
    static __attribute__((noinline)) long micro_site##k(long n, unsigned seed)          \
    {                                                                                   \
        long sum = 0;                                                                   \
        for (long i = 0; i < n; i++) {                                                  \
            size_t size = 16 + ((seed + (unsigned)i * 37u) % 241u);                     \
            char *p = malloc(size);                                                     \
            if (!p)                                                                     \
                abort();                                                                \
            p[0] = (char)i;                                                             \
            MICRO_USE(p);                                                               \
            sum += p[0];                                                                \
            free(p);                                                                    \
        }                                                                               \
        return sum;                                                                     \
    }
MICRO_SITE(0)
MICRO_SITE(1)
MICRO_SITE(2)
MICRO_SITE(3)
MICRO_SITE(4)
MICRO_SITE(5)
MICRO_SITE(6)
MICRO_SITE(7)

static long (*const micro_sites[MICRO_SITES])(long, unsigned) = {
    micro_site0, micro_site1, micro_site2, micro_site3,
    micro_site4, micro_site5, micro_site6, micro_site7,
};

/* Recursion to the site; the work after the call keeps it from becoming a tail call. */
static __attribute__((noinline)) long micro_chain(int depth, int site, long n, unsigned seed)
{
    long r = depth ? micro_chain(depth - 1, site, n, seed) : micro_sites[site](n, seed);
    MICRO_USE(&r);
    return r + 1;
}

struct micro_job {
    long iterations;
    long result;
};

static void *micro_worker(void *arg)
{
    struct micro_job *job = arg;
    long sum = 0;
    unsigned seed = 0;
    for (long done = 0; done < job->iterations; done += MICRO_BATCH, seed++) {
        long n = job->iterations - done < MICRO_BATCH ? job->iterations - done : MICRO_BATCH;
        sum += micro_chain(MICRO_CHAIN, (int)(seed % MICRO_SITES), n, seed);
    }
    job->result = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    char *end1 = NULL, *end2 = NULL;
    long threads = argc == 3 ? strtol(argv[1], &end1, 10) : 0;
    long iterations = argc == 3 ? strtol(argv[2], &end2, 10) : 0;
    if (argc != 3 || *end1 || *end2 || threads < 1 || threads > 64 || iterations < 1) {
        fprintf(stderr, "usage: micro THREADS(1..64) ITERATIONS(>0 malloc/free pairs per thread)\n");
        return 2;
    }
    pthread_t tid[64];
    struct micro_job jobs[64];
    memset(jobs, 0, sizeof jobs);
    for (long t = 0; t < threads; t++) {
        jobs[t].iterations = iterations;
        if (pthread_create(&tid[t], NULL, micro_worker, &jobs[t]) != 0) {
            fprintf(stderr, "micro: pthread_create failed\n");
            return 1;
        }
    }
    long total = 0;
    for (long t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        total += jobs[t].result;
    }
    printf("%ld\n", total);
    return 0;
}
