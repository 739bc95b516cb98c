/* A program with its own allocation wrapper, as gcc, binutils and coreutils have: xmalloc,
 * called from three sites with known counts, and an xstrdup over it. mf_print folds the
 * wrappers into their callers, so the sites are parse_args, build_table and read_lines, each
 * "via xmalloc" (format_name "via xstrdup"). Also a user wrapper of its own name (arena_get)
 * for --fold, and a frame to --hide (helper_layer). The numbers are repeated in
 * tests/viewer/test_fold.py (WRAPPER_SITES). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

SITE char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

/* The program's own allocator layer: a site until --fold 'arena_' folds it. */
SITE void *arena_get(size_t n)
{
    return xmalloc(n);
}

SITE void parse_args(int n) /* n x 16 bytes */
{
    for (int i = 0; i < n; i++)
        release(xmalloc(16));
}

SITE void build_table(int n) /* n x 32 bytes */
{
    for (int i = 0; i < n; i++)
        release(xmalloc(32));
}

SITE void read_lines(int n) /* n x 48 bytes */
{
    for (int i = 0; i < n; i++)
        release(xmalloc(48));
}

SITE void format_name(int n) /* n x 6 bytes ("name5" and its NUL) */
{
    for (int i = 0; i < n; i++)
        release(xstrdup("name5"));
}

SITE void use_arena(int n) /* n x 64 bytes */
{
    for (int i = 0; i < n; i++)
        release(arena_get(64));
}

/* A layer between main and two sites, for --hide. */
SITE void helper_layer(int n)
{
    build_table(n);
    use_arena(n);
}

static void *worker(void *arg)
{
    read_lines((int)(long)arg);
    return NULL;
}

int main(void)
{
    parse_args(300);
    helper_layer(500);
    format_name(70);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)700L) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    static const char done[] = "wrapper_sites done\n";
    return write(1, done, sizeof done - 1) == sizeof done - 1 ? 0 : 1;
}
