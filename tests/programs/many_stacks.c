/* 8,192 distinct stacks in one thread, each called a known number of times: path k goes
 * through 13 levels of left() or right(), bit i of k choosing at level i + 1, down to
 * site_leaf(), and is taken (k % 3) + 1 times, in three passes over all paths so that old
 * stacks are looked up again after thousands of newer ones. The thread's table grows
 * through nine segments. For test_many_stacks_exact. No stdio.
 * `many_stacks wait` first allocates once and waits for a byte on stdin, so that a test can
 * tamper with the profile directory before the table grows
 * (test_directory_replaced_after_creation). */
#include <stdlib.h>
#include <unistd.h>

#define LEVELS 13
#define PATHS (1u << LEVELS)

static volatile int sink;

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline)) void site_leaf(void)
{
    release(malloc(16));
}

void left(int level, unsigned k);
void right(int level, unsigned k);

static inline __attribute__((always_inline)) void step(int level, unsigned k)
{
    if (level == LEVELS)
        site_leaf();
    else if (k >> level & 1)
        right(level + 1, k);
    else
        left(level + 1, k);
}

__attribute__((noinline)) void left(int level, unsigned k)
{
    step(level, k);
    sink++; /* not a tail call: each level keeps its frame */
}

__attribute__((noinline)) void right(int level, unsigned k)
{
    step(level, k);
    sink++;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        char c;
        release(malloc(1));
        if (read(0, &c, 1) != 1)
            return 2;
    }
    for (unsigned pass = 0; pass < 3; pass++)
        for (unsigned k = 0; k < PATHS; k++)
            if (k % 3 >= pass)
                step(0, k);
    static const char done[] = "many_stacks done\n";
    return write(1, done, sizeof done - 1) < 0;
}
