/* malloc_freq: the public C API, exported by libmalloc_freq.so and linked into the Rust crate.
 * A program under LD_PRELOAD can find these with dlsym(RTLD_DEFAULT, "malloc_freq_dir"). */
#ifndef MALLOC_FREQ_H
#define MALLOC_FREQ_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The directory this process writes its profile into (malloc_freq.<pid>, absolute path),
 * or NULL if profiling is off in this process (the directory could not be created). */
const char *malloc_freq_dir(void);

/* Leave the calling thread's allocations out of the profile until the matching
 * malloc_freq_resume(). Calls nest. What is left out still counts in the exact totals,
 * as "not profiled". */
void malloc_freq_pause(void);
void malloc_freq_resume(void);

/* The allocation functions counted, as indexes into struct malloc_freq_counts' fn_calls and
 * fn_bytes (the on-disk format's enum mf_fn). */
enum {
    MALLOC_FREQ_FN_MALLOC, MALLOC_FREQ_FN_CALLOC, MALLOC_FREQ_FN_REALLOC,
    MALLOC_FREQ_FN_POSIX_MEMALIGN, MALLOC_FREQ_FN_ALIGNED_ALLOC, MALLOC_FREQ_FN_MEMALIGN,
    MALLOC_FREQ_FN_VALLOC, MALLOC_FREQ_FN_PVALLOC, MALLOC_FREQ_FN_RUST_ALLOC,
    MALLOC_FREQ_FN_RUST_ALLOC_ZEROED, MALLOC_FREQ_FN_RUST_REALLOC, MALLOC_FREQ_FN_NEW,
    MALLOC_FREQ_FN_NEW_ARRAY, MALLOC_FREQ_FN_NEW_ALIGNED, MALLOC_FREQ_FN_NEW_ARRAY_ALIGNED,
    MALLOC_FREQ_FUNCTIONS = 16
};

/* The calling thread's allocation calls so far, exact: every call it made, sampled or not,
 * paused or not. Versioned by size: set it to sizeof(struct malloc_freq_counts) before the
 * call; the library fills what both it and the caller know, and sets size to that. Later
 * versions only add fields at the end. */
struct malloc_freq_counts {
    uint64_t size;
    uint64_t calls, bytes; /* over every function */
    uint64_t fn_calls[MALLOC_FREQ_FUNCTIONS];
    uint64_t fn_bytes[MALLOC_FREQ_FUNCTIONS];
};

/* Fills *out with the calling thread's counts. Cheap (no system call, no lock, no
 * allocation): take it before and after the code to measure and subtract. Returns 0; 1 when
 * the thread records into a table that other threads share (they could have no file of their
 * own: a full disk, a setuid), whose counts then include theirs; -1 with errno EINVAL when
 * out->size is too small for calls and bytes. A fork child's counts start again from 0. */
int malloc_freq_thread_counts(struct malloc_freq_counts *out);

/* The library may be absent (a program run without LD_PRELOAD): find it at run time.
 * Include <dlfcn.h> with _GNU_SOURCE defined before this header to have the helper:
 * malloc_freq_counts_fn() is NULL when no profiler is loaded. */
typedef int malloc_freq_thread_counts_fn(struct malloc_freq_counts *out);
#ifdef RTLD_DEFAULT
static inline malloc_freq_thread_counts_fn *malloc_freq_counts_fn(void)
{
    return (malloc_freq_thread_counts_fn *)dlsym(RTLD_DEFAULT, "malloc_freq_thread_counts");
}
#endif

#ifdef __cplusplus
}
#endif
#endif
