/* The LD_PRELOAD front end's set-up and slow paths: finding the next allocator in line
 * (glibc's, or jemalloc/tcmalloc if they come after us), and the out-of-line path an entry
 * point (mf_entry.c) takes when its countdown runs out. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "mf_preload.h"

/* glibc's own entry points, used only until dlsym(RTLD_NEXT) has answered: dlsym itself
 * allocates. Forwarding to them for good would break a different next allocator (DESIGN §6). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static int mf_libc_posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = __libc_memalign(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

static void *mf_libc_aligned_alloc(size_t align, size_t size)
{
    return __libc_memalign(align, size);
}

void *(*mf_next_malloc)(size_t) = __libc_malloc;
void *(*mf_next_calloc)(size_t, size_t) = __libc_calloc;
void *(*mf_next_realloc)(void *, size_t) = __libc_realloc;
int (*mf_next_posix_memalign)(void **, size_t, size_t) = mf_libc_posix_memalign;
void *(*mf_next_aligned_alloc)(size_t, size_t) = mf_libc_aligned_alloc;
void *(*mf_next_memalign)(size_t, size_t) = __libc_memalign;
void *(*mf_next_valloc)(size_t) = __libc_valloc;
void *(*mf_next_pvalloc)(size_t) = __libc_pvalloc;

#define MF_RESOLVE(name)                                                                    \
    do {                                                                                    \
        void *f = dlsym(RTLD_NEXT, #name);                                                  \
        if (f)                                                                              \
            __atomic_store_n((void **)&mf_next_##name, f, __ATOMIC_RELEASE);                \
    } while (0)

/* Runs before the core's constructor (priority 101): the core's start-up allocates. */
__attribute__((constructor(101))) static void mf_preload_resolve(void)
{
    MF_RESOLVE(malloc);
    MF_RESOLVE(calloc);
    MF_RESOLVE(realloc);
    MF_RESOLVE(posix_memalign);
    MF_RESOLVE(aligned_alloc);
    MF_RESOLVE(memalign);
    MF_RESOLVE(valloc);
    MF_RESOLVE(pvalloc);
    /* Static TLS has the same offset in every thread: one check serves them all. */
    mf_tls_direct = (char *)&mf_tls - (char *)__builtin_thread_pointer() == -(ptrdiff_t)MF_TLS_ALIGN;
    mf_core_init();
}

/* The slow paths: record the call (it ends a countdown), then allocate. Compiled with frame
 * pointers: the frame-pointer unwinder reaches the program's frame through theirs. */
void *mf_slow_malloc(size_t size)
{
    mf_record_slow(MF_FN_MALLOC, size);
    return mf_next_malloc(size);
}

void *mf_slow_calloc(size_t n, size_t size, size_t bytes)
{
    mf_record_slow(MF_FN_CALLOC, bytes);
    return mf_next_calloc(n, size);
}

void *mf_slow_realloc(void *p, size_t size)
{
    mf_record_slow(MF_FN_REALLOC, size);
    return mf_next_realloc(p, size);
}

int mf_slow_posix_memalign(void **out, size_t align, size_t size)
{
    mf_record_slow(MF_FN_POSIX_MEMALIGN, size);
    return mf_next_posix_memalign(out, align, size);
}

void *mf_slow_aligned_alloc(size_t align, size_t size)
{
    mf_record_slow(MF_FN_ALIGNED_ALLOC, size);
    return mf_next_aligned_alloc(align, size);
}

void *mf_slow_memalign(size_t align, size_t size)
{
    mf_record_slow(MF_FN_MEMALIGN, size);
    return mf_next_memalign(align, size);
}

void *mf_slow_valloc(size_t size)
{
    mf_record_slow(MF_FN_VALLOC, size);
    return mf_next_valloc(size);
}

void *mf_slow_pvalloc(size_t size)
{
    mf_record_slow(MF_FN_PVALLOC, size);
    return mf_next_pvalloc(size);
}
