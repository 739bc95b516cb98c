/* Between the preload library's entry points (mf_entry.c) and their set-up and slow paths
 * (mf_preload.c). All hidden: the library exports only the allocation ABI (exports.map). */
#ifndef MF_PRELOAD_H
#define MF_PRELOAD_H

#include <stddef.h>

#include "mf_core.h"

/* The next allocator in line: glibc's entry points until dlsym(RTLD_NEXT) has answered.
 * Declared hidden so that an entry point reaches them in one instruction, not via the GOT. */
#pragma GCC visibility push(hidden)
extern void *(*mf_next_malloc)(size_t);
extern void *(*mf_next_calloc)(size_t, size_t);
extern void *(*mf_next_realloc)(void *, size_t);
extern int (*mf_next_posix_memalign)(void **, size_t, size_t);
extern void *(*mf_next_aligned_alloc)(size_t, size_t);
extern void *(*mf_next_memalign)(size_t, size_t);
extern void *(*mf_next_valloc)(size_t);
extern void *(*mf_next_pvalloc)(size_t);
#pragma GCC visibility pop

/* Record a call whose countdown ran out, then allocate. Out of line, never inlined into an
 * entry point: the entry point tail-calls them and so needs no stack frame of its own. */
#define MF_SLOW __attribute__((noinline, cold))
MF_SLOW void *mf_slow_malloc(size_t size);
MF_SLOW void *mf_slow_calloc(size_t n, size_t size, size_t bytes);
MF_SLOW void *mf_slow_realloc(void *p, size_t size);
MF_SLOW int mf_slow_posix_memalign(void **out, size_t align, size_t size);
MF_SLOW void *mf_slow_aligned_alloc(size_t align, size_t size);
MF_SLOW void *mf_slow_memalign(size_t align, size_t size);
MF_SLOW void *mf_slow_valloc(size_t size);
MF_SLOW void *mf_slow_pvalloc(size_t size);

#endif
