/* 100,000 distinct stacks, for test_html_100k_stacks (how fast mf_print's HTML page opens):
 * path k (0 <= k < 100,000) goes through 17 levels of left() or right(), bit i of k choosing
 * at level i + 1, down to site_leaf(), which allocates 16 * (k % 4 + 1) bytes once. Every
 * path is taken once: 100,000 calls, 4,000,000 bytes (k % 4 cycles through 1..4: 25,000 paths
 * each of 16, 32, 48 and 64 bytes). No stdio. `html_100k_stacks keep` frees none of them: all
 * 100,000 stacks alive at exit (MALLOC_FREQ_LIVE=all: the page's live weights). */
#include <stdlib.h>
#include <unistd.h>

#define LEVELS 17
#define PATHS 100000u

static volatile int sink;
static int keep;
static void *volatile kept;

__attribute__((noipa)) void release(void *p)
{
    if (keep)
        kept = p;
    else
        free(p);
}

__attribute__((noinline)) void site_leaf(unsigned k)
{
    release(malloc(16 * (k % 4 + 1)));
}

void left(int level, unsigned k);
void right(int level, unsigned k);

__attribute__((noinline)) void left(int level, unsigned k)
{
    if (level == LEVELS)
        site_leaf(k);
    else if (k >> level & 1)
        right(level + 1, k);
    else
        left(level + 1, k);
    sink++; /* not a tail call: each level keeps its frame */
}

__attribute__((noinline)) void right(int level, unsigned k)
{
    if (level == LEVELS)
        site_leaf(k);
    else if (k >> level & 1)
        right(level + 1, k);
    else
        left(level + 1, k);
    sink++;
}

int main(int argc, char **argv)
{
    keep = argc > 1 && argv[1][0] == 'k';
    for (unsigned k = 0; k < PATHS; k++)
        left(0, k);
    static const char done[] = "html_100k_stacks done\n";
    return write(1, done, sizeof done - 1) == (ssize_t)(sizeof done - 1) ? 0 : 1;
}
