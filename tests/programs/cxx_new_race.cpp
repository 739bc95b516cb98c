// Eight threads make their first call of every form of operator new at the same moment
// (a barrier), then RACE_ROUNDS more of each: the forms' first calls, which decide where a
// form counts (lib_preload/mf_next.c), race each other and the other threads' calls. For
// tests/preload/test_trust_preload.py: every call counted exactly once, per site.
//   cxx_new_race SCALE   (0: the threads start and allocate nothing)
#include <cstdio>
#include <cstdlib>
#include <new>
#include <pthread.h>

#define SITE __attribute__((noinline, noclone))
#define RACE_THREADS 8
#define RACE_ROUNDS 500

struct alignas(64) Wide {
    char bytes[64];
};

__attribute__((noipa)) void keep(void *p) { (void)p; }

SITE void race_new() { long *p = new long; keep(p); delete p; }
SITE void race_new_array() { long *p = new long[3]; keep(p); delete[] p; }
SITE void race_new_nothrow() { long *p = new (std::nothrow) long; keep(p); delete p; }
SITE void race_new_array_nothrow() { long *p = new (std::nothrow) long[3]; keep(p); delete[] p; }
SITE void race_new_aligned() { Wide *p = new Wide; keep(p); delete p; }
SITE void race_new_array_aligned() { Wide *p = new Wide[2]; keep(p); delete[] p; }
SITE void race_new_aligned_nothrow() { Wide *p = new (std::nothrow) Wide; keep(p); delete p; }
SITE void race_new_array_aligned_nothrow()
{
    Wide *p = new (std::nothrow) Wide[2];
    keep(p);
    delete[] p;
}

static pthread_barrier_t start;
static int rounds;

static void *racer(void *)
{
    pthread_barrier_wait(&start);
    for (int i = 0; i < rounds; i++) {
        race_new();
        race_new_array();
        race_new_nothrow();
        race_new_array_nothrow();
        race_new_aligned();
        race_new_array_aligned();
        race_new_aligned_nothrow();
        race_new_array_aligned_nothrow();
    }
    return nullptr;
}

int main(int argc, char **argv)
{
    rounds = argc == 2 ? RACE_ROUNDS * std::atoi(argv[1]) : RACE_ROUNDS;
    pthread_t threads[RACE_THREADS];
    pthread_barrier_init(&start, nullptr, RACE_THREADS);
    for (auto &t : threads)
        if (pthread_create(&t, nullptr, racer, nullptr) != 0)
            std::abort();
    for (auto &t : threads)
        pthread_join(t, nullptr);
    std::printf("cxx_new_race: %d threads, %d rounds\n", RACE_THREADS, rounds);
    return 0;
}
