/* Allocates, prints to stdout and stderr, and exits with status 5: run set-user-ID root by
 * another user (test_setuid_program_is_not_profiled), its output must be the same with the
 * profiler's variables set as without. Built plain (for the preload library) and with the
 * core compiled in (-DMF_LINKED_CORE, as the Rust crate links it), which then counts a few
 * calls through mf_record_call(). Prints its effective uid, so that the test knows the
 * set-user-ID bit took effect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef MF_LINKED_CORE
#include "mf_core.h"
#endif

int main(void)
{
    size_t total = 0;
    for (int i = 0; i < 200; i++) {
#ifdef MF_LINKED_CORE
        mf_record_call(MF_FN_MALLOC, 24);
#endif
        char *s = strdup("secure");
        total += strlen(s);
        free(s);
    }
    printf("euid %d total %zu\n", (int)geteuid(), total);
    fprintf(stderr, "a line on stderr\n");
    fflush(stdout);
    return 5;
}
