/* The core linked statically (as the Rust crate links it) into a program built with a
 * sanitizer: several threads count allocation calls at known sites while the profile is
 * written, paused and resumed. run_sanitizers.sh checks the exact counts with mf_print. */
#include <pthread.h>
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
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("%s\n", malloc_freq_dir() ? malloc_freq_dir() : "(none)");
    return 0;
}
