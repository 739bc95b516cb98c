/* argv[1] malloc/free pairs two frames below main: cheap samples, so that the default
 * mode's exact stretch can record its 20,000 calls within its 5 ms cap (with the
 * frame-pointer unwinder), then sample the rest. For test_sampling_line_says_how_the_run_was_sampled. */
#include <stdlib.h>

__attribute__((noinline)) static void site_shallow(long n)
{
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(24);
        free(p);
    }
}

int main(int argc, char **argv)
{
    site_shallow(argc > 1 ? atol(argv[1]) : 50000);
    return 0;
}
