/* Known sizes for the exact size histogram (mf_print --sizes): site_spread allocates each
 * size of SIZES (0 and the edges of classes, 64 KiB, 1 MiB) COUNT times, through malloc,
 * calloc and realloc; site_bulk makes 600,000 calls of 24 bytes and 400,000 of 1,000 bytes
 * in a second thread (so that the default mode samples, and counts pending in two threads
 * reach the files). The test computes every class from the list below. No stdio.
 * For tests/core/test_sizes.py. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

/* size, count: keep in step with SPREAD in tests/core/test_sizes.py */
static const unsigned long spread[][2] = {
    {0, 3},      {1, 5},       {2, 7},       {3, 11},      {4, 13},     {5, 2},
    {7, 3},      {8, 17},      {12, 4},      {15, 6},      {16, 19},    {20, 8},
    {100, 23},   {1000, 29},   {1023, 3},    {1024, 31},   {4095, 5},   {4096, 37},
    {65535, 41}, {65536, 43},  {65537, 2},   {100000, 9},  {1048576, 7}, {5000000, 3},
};

SITE void site_spread(void)
{
    for (unsigned i = 0; i < sizeof spread / sizeof *spread; i++)
        for (unsigned long k = 0; k < spread[i][1]; k++)
            release(malloc(spread[i][0]));
}

/* calloc(n, size) counts n * size bytes; realloc counts its new size. */
SITE void site_calloc(void)
{
    for (int k = 0; k < 50; k++)
        release(calloc(10, 30)); /* 300 bytes */
}

SITE void site_realloc(void)
{
    void *p = NULL;
    for (unsigned long size = 64; size <= (1ul << 20); size *= 2) /* 64 .. 1 MiB: 15 calls */
        p = realloc(p, size);
    release(p);
}

SITE void site_bulk(void)
{
    for (int round = 0; round < 200000; round++) {
        release(malloc(24));
        release(malloc(24));
        release(malloc(24));
        release(malloc(1000));
        release(malloc(1000));
    }
}

static void *worker(void *arg)
{
    (void)arg;
    site_bulk();
    site_spread();
    return NULL;
}

int main(void)
{
    site_spread();
    site_calloc();
    site_realloc();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    static const char done[] = "size_classes done\n";
    return write(1, done, sizeof done - 1) < 0;
}
