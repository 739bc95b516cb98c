/* The LD_PRELOAD front end's set-up and slow paths: the constructor, and the out-of-line path
 * an entry point (mf_entry.c) takes when its countdown runs out. Finding the next allocator
 * in line is mf_next.c's. */
#include "mf_preload.h"

/* Runs before the core's constructor (priority 101). The next allocator is looked up at the
 * first allocation call (mf_next.c), not here: a process that never allocates does not pay
 * for the lookups (13,500 instructions of /bin/true's 63,000 over an empty library), and
 * one that does makes its first call in the main thread before any other thread exists
 * (pthread_create allocates); the core's start-up runs at that call too (mf_lazy_start). */
__attribute__((constructor(101))) static void mf_preload_start(void)
{
    /* Static TLS has the same offset in every thread: one check serves them all. */
    mf_tls_direct = (char *)&mf_tls - (char *)__builtin_thread_pointer() == -(ptrdiff_t)MF_TLS_ALIGN;
    /* The files and libunwind wait for the first allocation call, or for a call that would
     * take away the means to make the files (mf_guard.c): a process that never allocates
     * pays for neither. */
    mf_lazy_start = true;
    mf_procmap_query_allowed = true; /* prctl is ours (mf_guard.c) */
    mf_core_init();
    if (mf_live_enabled())
        mf_free_route_filtered();
}

/* The slow paths: record the call (it ends a countdown), then allocate. Compiled with frame
 * pointers: the frame-pointer unwinder reaches the program's frame through theirs. */
/* mf_live_alloc after each: the address of a call whose sample the live heap follows. */
void *mf_slow_malloc(size_t size)
{
    mf_record_slow(MF_FN_MALLOC, size);
    return mf_live_alloc_ret(mf_next_malloc(size));
}

void *mf_slow_calloc(size_t n, size_t size, size_t bytes)
{
    mf_record_slow(MF_FN_CALLOC, bytes);
    return mf_live_alloc_ret(mf_next_calloc(n, size));
}

/* For the live heap a realloc frees the old block and allocates the new one. The old
 * record goes first: once the block is given back another thread may be handed its address
 * and record it. (A realloc that fails keeps the old block, which is then no longer
 * recorded: a lost live allocation, never a wrong one.) */
void *mf_slow_realloc(void *p, size_t size)
{
    mf_record_slow(MF_FN_REALLOC, size); /* the call counts before the old block goes, as
                                           * on the hot path (mf_live_realloc) */
    if (mf_live_filter_hit(p))
        mf_live_free(p);
    return mf_live_alloc_ret(mf_next_realloc(p, size));
}

/* A realloc the hot path counted, of a block the filter says may be recorded. */
void *mf_live_realloc(void *p, size_t size)
{
    mf_live_free(p);
    return mf_next_realloc(p, size);
}

int mf_slow_posix_memalign(void **out, size_t align, size_t size)
{
    mf_record_slow(MF_FN_POSIX_MEMALIGN, size);
    int rc = mf_next_posix_memalign(out, align, size);
    mf_live_alloc(rc == 0 ? *out : NULL);
    return rc;
}

void mf_slow_free(void *p)
{
    mf_live_free(p);
    mf_next_free(p);
}

void *mf_slow_aligned_alloc(size_t align, size_t size)
{
    mf_record_slow(MF_FN_ALIGNED_ALLOC, size);
    return mf_live_alloc_ret(mf_next_aligned_alloc(align, size));
}

void *mf_slow_memalign(size_t align, size_t size)
{
    mf_record_slow(MF_FN_MEMALIGN, size);
    return mf_live_alloc_ret(mf_next_memalign(align, size));
}

void *mf_slow_valloc(size_t size)
{
    mf_record_slow(MF_FN_VALLOC, size);
    return mf_live_alloc_ret(mf_next_valloc(size));
}

void *mf_slow_pvalloc(size_t size)
{
    mf_record_slow(MF_FN_PVALLOC, size);
    return mf_live_alloc_ret(mf_next_pvalloc(size));
}

#define MF_NEW_SLOW(form, sym, fn, params, args)                                            \
    void *mf_slow_new_##form params                                                         \
    {                                                                                       \
        mf_record_slow(fn, size);                                                           \
        return mf_live_alloc_ret(((mf_new_##form##_t *)mf_next_new[MF_NEW_##form]) args);   \
    }
MF_NEW_FORMS(MF_NEW_SLOW)
#undef MF_NEW_SLOW
