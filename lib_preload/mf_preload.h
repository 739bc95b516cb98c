/* Between the preload library's entry points (mf_entry.c), their set-up and slow paths
 * (mf_preload.c) and the search for the next allocator in line (mf_next.c). All hidden: the
 * library exports only the allocation ABI (exports.map). */
#ifndef MF_PRELOAD_H
#define MF_PRELOAD_H

#include <stddef.h>

#include "mf_core.h"

#pragma GCC visibility push(hidden)

/* The next allocator in line: glibc's, or jemalloc's or tcmalloc's when preloaded after us.
 * Each starts as a function that looks it up at the first call (mf_next.c): every call goes
 * there, from the very first one, also before our constructor has run. Declared hidden so
 * that an entry point reaches them in one instruction, not via the GOT. */
extern void *(*mf_next_malloc)(size_t);
extern void *(*mf_next_calloc)(size_t, size_t);
extern void *(*mf_next_realloc)(void *, size_t);
extern int (*mf_next_posix_memalign)(void **, size_t, size_t);
extern void *(*mf_next_aligned_alloc)(size_t, size_t);
extern void *(*mf_next_memalign)(size_t, size_t);
extern void *(*mf_next_valloc)(size_t);
extern void *(*mf_next_pvalloc)(size_t);
extern void (*mf_next_free)(void *);
/* Where the exported free jumps: mf_next_free's target once it is known, or
 * mf_free_filtered when the live heap is on (mf_next.c). */
extern void (*mf_free_route)(void *);
void mf_free_route_filtered(void);
void mf_free_filtered(void *p);

/* The global operator new, every form. X(FORM, exported symbol, enum mf_fn, parameters,
 * arguments): std::align_val_t is passed as a size_t, const std::nothrow_t & as a pointer.
 * The nothrow forms count as their throwing form. */
#define MF_NEW_FORMS(X)                                                                     \
    X(PLAIN, _Znwm, MF_FN_NEW, (size_t size), (size))                                       \
    X(ARRAY, _Znam, MF_FN_NEW_ARRAY, (size_t size), (size))                                 \
    X(NOTHROW, _ZnwmRKSt9nothrow_t, MF_FN_NEW, (size_t size, const void *nt), (size, nt))   \
    X(ARRAY_NOTHROW, _ZnamRKSt9nothrow_t, MF_FN_NEW_ARRAY, (size_t size, const void *nt),   \
      (size, nt))                                                                           \
    X(ALIGNED, _ZnwmSt11align_val_t, MF_FN_NEW_ALIGNED, (size_t size, size_t align),        \
      (size, align))                                                                        \
    X(ARRAY_ALIGNED, _ZnamSt11align_val_t, MF_FN_NEW_ARRAY_ALIGNED,                         \
      (size_t size, size_t align), (size, align))                                           \
    X(ALIGNED_NOTHROW, _ZnwmSt11align_val_tRKSt9nothrow_t, MF_FN_NEW_ALIGNED,               \
      (size_t size, size_t align, const void *nt), (size, align, nt))                       \
    X(ARRAY_ALIGNED_NOTHROW, _ZnamSt11align_val_tRKSt9nothrow_t, MF_FN_NEW_ARRAY_ALIGNED,   \
      (size_t size, size_t align, const void *nt), (size, align, nt))

#define MF_NEW_ENUM(form, sym, fn, params, args) MF_NEW_##form,
enum mf_new_form { MF_NEW_FORMS(MF_NEW_ENUM) MF_NEW_FORM_COUNT };
#undef MF_NEW_ENUM

/* One function type per form: mf_new_PLAIN_t etc. */
#define MF_NEW_TYPE(form, sym, fn, params, args) typedef void *mf_new_##form##_t params;
MF_NEW_FORMS(MF_NEW_TYPE)
#undef MF_NEW_TYPE

typedef void (*mf_fnptr)(void); /* any of them; cast to the form's type to call it */

/* Where our operator new of each form goes (an exported operator new is one jump through
 * this): at first a function that decides (mf_next.c), then either the next operator new
 * itself, when that one reaches our malloc (libstdc++'s: malloc counts the call), or
 * mf_new_counted_<form>, which counts and calls the next operator new, when it does not
 * (jemalloc's, tcmalloc's). Read with acquire: the next operator new is stored first. */
extern mf_fnptr mf_new_route[MF_NEW_FORM_COUNT];
extern mf_fnptr mf_next_new[MF_NEW_FORM_COUNT]; /* the next operator new, once known */

/* Count the call, then call the next operator new (mf_entry.c). */
#define MF_NEW_COUNTED(form, sym, fn, params, args) void *mf_new_counted_##form params;
MF_NEW_FORMS(MF_NEW_COUNTED)
#undef MF_NEW_COUNTED

/* Looks up the next allocator's C functions, if not done yet (mf_next.c). */
void mf_next_resolve(void);
/* Looks up the next operator new of every form (mf_next.c); which of them count is decided
 * at each form's first call. */
void mf_next_new_resolve(void);

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
MF_SLOW void mf_slow_free(void *p);
MF_SLOW void *mf_live_realloc(void *p, size_t size);

/* The live heap's note of an allocation's address (mf_live_alloc), passing it through. */
static inline void *mf_live_alloc_ret(void *p)
{
    mf_live_alloc(p);
    return p;
}
#define MF_NEW_SLOW(form, sym, fn, params, args) MF_SLOW void *mf_slow_new_##form params;
MF_NEW_FORMS(MF_NEW_SLOW)
#undef MF_NEW_SLOW

#pragma GCC visibility pop

#endif
