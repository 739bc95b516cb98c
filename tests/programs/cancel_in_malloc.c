/* A thread with a deferred cancel pending holds a mutex and calls malloc for the first
 * time (the profiler then creates its thread file), for test_pending_cancel_not_acted_on_in_malloc.
 * malloc is no cancellation point: the call must return, the thread unlock the mutex and
 * be cancelled only at its own pthread_testcancel(). Prints what happened; never hangs (the
 * main thread waits for the mutex 10 s at most). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stage; /* 1: the thread holds the lock; 2: the cancel is pending */
static volatile int malloc_returned, unlocked;

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline, noclone)) void site_cancel_pending(void)
{
    for (int i = 0; i < 10; i++)
        release(malloc(40));
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    __atomic_store_n(&stage, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&stage, __ATOMIC_ACQUIRE) != 2)
        ; /* no cancellation point while waiting */
    site_cancel_pending();
    malloc_returned = 1;
    pthread_mutex_unlock(&lock);
    unlocked = 1;
    pthread_testcancel();
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 2;
    while (__atomic_load_n(&stage, __ATOMIC_ACQUIRE) != 1)
        ;
    pthread_cancel(t);
    __atomic_store_n(&stage, 2, __ATOMIC_RELEASE);
    void *res;
    pthread_join(t, &res);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    int rc = pthread_mutex_timedlock(&lock, &until);
    printf("malloc returned %d, unlocked %d, cancelled %d, mutex %s\n", malloc_returned,
           unlocked, res == PTHREAD_CANCELED, rc == 0 ? "free" : rc == ETIMEDOUT ? "held" : "?");
    return rc == 0 ? 0 : 1;
}
