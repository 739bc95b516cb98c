/* Allocates in two phases, for test_save_snapshot_of_a_running_process: phase one makes
 * site_phase_one 1,000 x 32 bytes, says "one" on stdout and waits for a line on stdin; phase
 * two makes site_phase_one 250 x 32 and site_phase_two 500 x 128 bytes more, says "two" and
 * waits for end of input, then exits. No stdio: the only other allocations are libc's. */
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_phase_one(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(32));
}

SITE void site_phase_two(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(128));
}

/* Says what, then reads stdin up to a newline (or its end). */
static int step(const char *what, size_t len)
{
    if (write(1, what, len) != (ssize_t)len)
        return 1;
    char c;
    while (read(0, &c, 1) == 1)
        if (c == '\n')
            break;
    return 0;
}

int main(void)
{
    site_phase_one(1000);
    if (step("one\n", 4))
        return 1;
    site_phase_one(250);
    site_phase_two(500);
    return step("two\n", 4);
}
