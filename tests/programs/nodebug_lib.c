/* A shared library for test_footer_names_a_stripped_library and test_sysroot_*: built
 * without -g and stripped, or with -g and its debug information moved to a separate file.
 * nodebug_alloc(n) makes n allocations through a static helper, so that the library's own
 * frames are on every one of those stacks. */
#include <stdlib.h>

__attribute__((noinline)) static void *helper(size_t size)
{
    void *volatile p = malloc(size);
    return p;
}

void nodebug_alloc(int n)
{
    for (int i = 0; i < n; i++)
        free(helper(32));
}
