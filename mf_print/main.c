/* mf_print: reads the profile a malloc_freq run wrote and reports where the program calls
 * the allocator: the command line becomes a request (request.c), checked against the option
 * rules and the registry of reports (registry.c); then read+validate, merge (read/),
 * symbolize, transform (model/), and the one report the registry names (report/). Exit
 * status: 0 reported, 1 nothing readable or the output failed, 2 bad usage or directory,
 * 3 out of memory, 4 a --check rule broken (MF_EXIT_BROKEN). */
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "request.h"
#include "watch.h"

/* Asks glibc's malloc for transparent huge pages (its tunable glibc.malloc.hugetlb=1, read
 * only at start-up: so mf_print runs itself again with it, once) where the kernel gives
 * them only to memory that asks (THP "madvise", Debian's default). mf_print's arrays are
 * hundreds of megabytes, touched once: the summary of a build's 109 MB run directory took
 * 82,500 page faults and 2.4 s, 4,500 and 1.6-1.8 s with huge pages. */
static void mf_huge_heap(char **argv)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "glibc.malloc.hugetlb"))
        return; /* the user's choice, or this is the second start */
    char mode[64] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
    if (!f)
        return;
    bool madvise_only = fgets(mode, sizeof mode, f) && strstr(mode, "[madvise]");
    fclose(f);
    if (!madvise_only)
        return;
    size_t n = (t ? strlen(t) : 0) + sizeof ":glibc.malloc.hugetlb=1";
    char *v = malloc(n);
    if (!v)
        return;
    snprintf(v, n, "%s%sglibc.malloc.hugetlb=1", t ? t : "", t && *t ? ":" : "");
    if (setenv("GLIBC_TUNABLES", v, 1) == 0)
        execv("/proc/self/exe", argv); /* on failure, on without */
    free(v);
}

int main(int argc, char **argv)
{
    mf_huge_heap(argv);
    /* Memory freed is kept for the next allocation, large blocks too, not given back: a page
     * new to the process is a fault, 14-20 us in this VM, and mf_print frees and grows large
     * arrays file after file. The launcher's summary of a build's 109 MB run directory took
     * 2.95-3.8 s, 2.4-2.6 s with these (peak RSS 304 -> 296-327 MB). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 16 << 20);
    struct mf_request r;
    int rc = mf_request_parse(&r, argc, argv);
    if (rc >= 0)
        return rc;
    mf_request_check(&r);
    return r.watch ? mf_watch(&r) : mf_run(&r);
}
