/* The allocation entry points the preload library exports. Each counts the call and
 * tail-calls the next allocator; the call that ends a countdown tail-calls the slow path.
 *
 * Built with -fomit-frame-pointer (Makefile): with no frame to set up and tear down, the hook
 * costs about half as much on a malloc-bound loop (bench/RESULTS.md). The frame-pointer
 * unwinder loses nothing: these functions are never on the stack when it runs, the slow
 * path they tail-call is, with a frame pointer and the program's return address. */
#include <stdint.h>

#include "mf_preload.h"

#define MF_EXPORT __attribute__((visibility("default")))

/* The count every entry point makes. In a shared library, reaching initial-exec TLS takes two
 * loads in a row: the block's offset from the GOT, then the counter. When the loader put
 * mf_tls at the fixed offset this build aligns it for (mf_tls_direct; MF_TLS_ALIGN in
 * mf_core.h), the counter is one load, an immediate offset from %fs. The flag's load does
 * not hold up the counter's: the branch on it is predicted, the GOT's load is the address.
 * Measured (perf share of the hook, docs/design.md): the microbenchmark 8.7-9.1 % ->
 * 4.7-5.3 %, Python 2.4-2.8 % -> 1.8-2.4 %. */
static inline __attribute__((always_inline)) bool mf_entry_count(enum mf_fn fn, size_t size)
{
#if defined(__SEG_FS) && !defined(__SANITIZE_THREAD__)
    _Static_assert(sizeof(struct mf_thread) <= MF_TLS_ALIGN,
                   "mf_tls no longer fits below the offset the direct path assumes");
    if (MF_LIKELY(mf_tls_direct)) {
        __seg_fs struct mf_thread *t = (__seg_fs struct mf_thread *)-(intptr_t)MF_TLS_ALIGN;
        return MF_COUNT_AT(t, fn, size);
    }
#endif
    return mf_count(fn, size);
}

MF_EXPORT void *malloc(size_t size)
{
    if (mf_entry_count(MF_FN_MALLOC, size))
        return mf_next_malloc(size);
    return mf_slow_malloc(size);
}

MF_EXPORT void *calloc(size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        bytes = SIZE_MAX;
    if (mf_entry_count(MF_FN_CALLOC, bytes))
        return mf_next_calloc(n, size);
    return mf_slow_calloc(n, size, bytes);
}

MF_EXPORT void *realloc(void *p, size_t size)
{
    if (mf_entry_count(MF_FN_REALLOC, size)) {
        if (MF_LIKELY(!mf_live_filter_hit(p)))
            return mf_next_realloc(p, size);
        return mf_live_realloc(p, size);
    }
    return mf_slow_realloc(p, size);
}

/* One jump: to the next free, or with MALLOC_FREQ_LIVE on to mf_free_filtered, which looks
 * at the live heap's filter first (mf_free_route, mf_preload.h). Off, a free costs what
 * being interposed costs, no more. */
MF_EXPORT void free(void *p)
{
    return __atomic_load_n(&mf_free_route, __ATOMIC_RELAXED)(p);
}

/* free with the live heap on: one byte of the filter, zero for every address no recorded
 * allocation shares a granule with (mf_live.c); both ways end in a tail call, no frame. */
void mf_free_filtered(void *p)
{
    if (mf_live_filter_hit(p))
        return mf_slow_free(p);
    return mf_next_free(p);
}

MF_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (mf_entry_count(MF_FN_POSIX_MEMALIGN, size))
        return mf_next_posix_memalign(out, align, size);
    return mf_slow_posix_memalign(out, align, size);
}

MF_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (mf_entry_count(MF_FN_ALIGNED_ALLOC, size))
        return mf_next_aligned_alloc(align, size);
    return mf_slow_aligned_alloc(align, size);
}

MF_EXPORT void *memalign(size_t align, size_t size)
{
    if (mf_entry_count(MF_FN_MEMALIGN, size))
        return mf_next_memalign(align, size);
    return mf_slow_memalign(align, size);
}

MF_EXPORT void *valloc(size_t size)
{
    if (mf_entry_count(MF_FN_VALLOC, size))
        return mf_next_valloc(size);
    return mf_slow_valloc(size);
}

MF_EXPORT void *pvalloc(size_t size)
{
    if (mf_entry_count(MF_FN_PVALLOC, size))
        return mf_next_pvalloc(size);
    return mf_slow_pvalloc(size);
}

/* The global operator new, every form: one jump through mf_new_route (mf_preload.h), to the
 * next operator new itself when that one calls our malloc (libstdc++'s), or to the counting
 * function below when it does not (jemalloc's, tcmalloc's), so that each call counts once.
 * Neither has a frame: an exception the next operator new throws (std::bad_alloc) passes
 * through none of ours. */
#define MF_NEW_ENTRY(form, sym, fn, params, args)                                           \
    MF_EXPORT void *sym params                                                              \
    {                                                                                       \
        mf_fnptr to = __atomic_load_n(&mf_new_route[MF_NEW_##form], __ATOMIC_ACQUIRE);      \
        return ((mf_new_##form##_t *)to) args;                                              \
    }                                                                                       \
                                                                                            \
    void *mf_new_counted_##form params                                                      \
    {                                                                                       \
        if (mf_entry_count(fn, size))                                                       \
            return ((mf_new_##form##_t *)mf_next_new[MF_NEW_##form]) args;                  \
        return mf_slow_new_##form args;                                                     \
    }
MF_NEW_FORMS(MF_NEW_ENTRY)
#undef MF_NEW_ENTRY
