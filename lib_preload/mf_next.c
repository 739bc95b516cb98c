/* The next allocator in line: glibc's, or jemalloc's or tcmalloc's when they are preloaded
 * after us (or linked into the program), and where our operator new counts.
 *
 * The C functions. Every entry point forwards to mf_next_<name> (mf_preload.h), which starts
 * as mf_first_<name>: it looks up all eight with dlsym(RTLD_NEXT), then calls the one asked
 * for. So the very first call reaches the next allocator, also when it is made before our
 * constructor runs; other libraries' constructors run first, and allocate. This library once
 * served those calls from glibc until its constructor had run, and jemalloc's free, given
 * glibc's memory, crashed every coreutils program (docs/profiling.md).
 * glibc's dlsym allocates nothing when it finds the symbol (since 2.34 its error state is
 * allocated only for an error; malloc and friends are always found, in libc if nowhere
 * before it). Older glibc calls calloc from dlsym: a call the lookup makes itself gets NULL
 * (ENOMEM), which glibc handles with a static buffer, instead of recursing or getting memory
 * that the next allocator's free would not know. No lock is held across dlsym (it takes the
 * loader's lock): threads that race the first call each look up and store the same answers.
 *
 * The global operator new. jemalloc and tcmalloc export their own, which never calls malloc:
 * our operator new must count it. libstdc++'s calls malloc (through the PLT: ours), which
 * counts it already: ours must not. Neither rule holds for a whole library: jemalloc's
 * aligned operator new calls aligned_alloc through the PLT, its plain one does not. So each
 * form's first call decides for that form: while it runs, the pointers our counting entry
 * points forward through are swapped for detectors that note, per thread, a call that passed
 * one; if the next operator new made such a call, it is counted there and our operator new
 * forwards to it from then on without counting; if not, the first call is counted after it
 * returns and the form is routed through mf_new_counted_<form>. Nothing is allocated for the
 * decision and no call is counted twice or left out, and the steady state costs malloc
 * nothing (the detectors are gone) and operator new one jump.
 *
 * The next operator new is looked up in the loaded objects' dynamic symbol tables, in load
 * order after this library, not with dlsym: a C program that dlopens a C++ plugin
 * (RTLD_LOCAL) binds the plugin's operator new to ours, and RTLD_NEXT cannot see the
 * libstdc++ loaded with it; and a failed dlsym would allocate and leave an error for the
 * program's next dlerror(). dl_iterate_phdr allocates nothing. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mf_elf.h"
#include "mf_preload.h"

/* Per thread: the lookup in progress, and the decisions in progress (probes). */
#define MF_PROBE_DEPTH 8 /* nested first calls: libstdc++'s nothrow new calls our plain one */
struct mf_next_thread {
    bool resolving;  /* inside dlsym: a call it makes gets NULL */
    uint32_t depth;  /* probes of this thread in flight */
    uint64_t hits;   /* this thread's calls that passed a detector */
    uintptr_t frame[MF_PROBE_DEPTH]; /* each probe's frame: one at or below a later call's
                                      * frame was left by an exception */
};
static __thread struct mf_next_thread mf_nt __attribute__((tls_model("initial-exec")));

/* Process-wide, under mf_lock(): probes in flight (the detectors are in place while there
 * are any), and the process they were counted in. */
static uint32_t mf_probes;
static pid_t mf_probes_pid;
static int mf_lock_word; /* the pid of the process whose thread holds it; 0 when free */

static void mf_detectors_set(void);

/* A spin lock, held only while pointers are stored, never across a call out. A fork child
 * may inherit it held by a thread that does not exist there: the pid tells. The probes in
 * flight in the child are its one thread's own. */
static void mf_lock(void)
{
    int me = getpid();
    for (;;) {
        int seen = 0;
        if (__atomic_compare_exchange_n(&mf_lock_word, &seen, me, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            break;
        if (seen != me && __atomic_compare_exchange_n(&mf_lock_word, &seen, me, false,
                                                      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            break; /* held in the parent at fork: nobody here will release it */
        sched_yield();
    }
    if (mf_probes_pid != me) {
        mf_probes_pid = me;
        mf_probes = mf_nt.depth;
        mf_detectors_set();
    }
}

static void mf_unlock(void)
{
    __atomic_store_n(&mf_lock_word, 0, __ATOMIC_RELEASE);
}

#define MF_STORE(ptr, value) __atomic_store_n(&(ptr), (value), __ATOMIC_RELEASE)

/* ---- the C functions ------------------------------------------------------------------- */

/* X(name, return type, parameters, arguments, what a call made inside dlsym returns) */
#define MF_ALLOC_FNS(X)                                                                     \
    X(malloc, void *, (size_t size), (size), (errno = ENOMEM, NULL))                        \
    X(calloc, void *, (size_t n, size_t size), (n, size), (errno = ENOMEM, NULL))           \
    X(realloc, void *, (void *p, size_t size), (p, size), (errno = ENOMEM, NULL))           \
    X(posix_memalign, int, (void **out, size_t align, size_t size), (out, align, size),     \
      ENOMEM)                                                                               \
    X(aligned_alloc, void *, (size_t align, size_t size), (align, size),                    \
      (errno = ENOMEM, NULL))                                                               \
    X(memalign, void *, (size_t align, size_t size), (align, size), (errno = ENOMEM, NULL)) \
    X(valloc, void *, (size_t size), (size), (errno = ENOMEM, NULL))                        \
    X(pvalloc, void *, (size_t size), (size), (errno = ENOMEM, NULL))

/* glibc's own, only if dlsym found nothing (libc.so defines them all, so it cannot happen
 * in a process we can be preloaded into): better than no allocator at all. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);
/* Called, never taken by address: a call binds lazily, on this path that never runs, where
 * an address taken would cost every process a symbol lookup at load (docs/performance.md, start-up). */
static void *mf_libc_malloc(size_t size) { return __libc_malloc(size); }
static void *mf_libc_calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
static void *mf_libc_realloc(void *p, size_t size) { return __libc_realloc(p, size); }
static void *mf_libc_memalign(size_t align, size_t size) { return __libc_memalign(align, size); }
static void *mf_libc_valloc(size_t size) { return __libc_valloc(size); }
static void *mf_libc_pvalloc(size_t size) { return __libc_pvalloc(size); }
static void mf_libc_free(void *p) { __libc_free(p); }

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

/* mf_real_<name>: the next allocator's, once found. mf_first_<name>: looks up, then calls.
 * mf_detect_<name>: in mf_next_<name>'s place while a probe is in flight. */
#define MF_ALLOC_DEFINE(name, ret, params, args, failed)                                    \
    static ret(*mf_real_##name) params;                                                     \
    static ret mf_first_##name params;                                                      \
    ret(*mf_next_##name) params = mf_first_##name;                                          \
                                                                                            \
    static ret mf_first_##name params                                                       \
    {                                                                                       \
        if (mf_nt.resolving)                                                                \
            return failed;                                                                  \
        mf_next_resolve();                                                                  \
        return mf_next_##name args;                                                         \
    }                                                                                       \
                                                                                            \
    static ret mf_detect_##name params                                                      \
    {                                                                                       \
        mf_nt.hits++;                                                                       \
        ret(*real) params = __atomic_load_n(&mf_real_##name, __ATOMIC_ACQUIRE);             \
        if (!real) { /* a thread that has not seen the lookup's stores yet (not x86) */     \
            mf_next_resolve();                                                              \
            real = __atomic_load_n(&mf_real_##name, __ATOMIC_ACQUIRE);                      \
        }                                                                                   \
        return real args;                                                                   \
    }
MF_ALLOC_FNS(MF_ALLOC_DEFINE)
#undef MF_ALLOC_DEFINE

static int mf_alloc_resolved;

/* free: looked up with the others; a free made inside the lookup (of memory dlsym got from
 * an earlier allocator) is left undone, never given to an allocator that did not make it. */
static void (*mf_real_free)(void *);
static void mf_first_free(void *p)
{
    if (mf_nt.resolving)
        return;
    mf_next_resolve();
    void (*real)(void *) = __atomic_load_n(&mf_real_free, __ATOMIC_ACQUIRE);
    if (real)
        real(p);
}
void (*mf_next_free)(void *) = mf_first_free;
void (*mf_free_route)(void *) = mf_first_free;
static bool mf_free_filtering;

void mf_free_route_filtered(void)
{
    mf_free_filtering = true;
    MF_STORE(mf_free_route, mf_free_filtered);
}

void mf_next_resolve(void)
{
    if (__atomic_load_n(&mf_alloc_resolved, __ATOMIC_ACQUIRE) || mf_nt.resolving)
        return;
    mf_nt.resolving = true;
#define MF_ALLOC_LOOKUP(name, ret, params, args, failed)                                    \
    void *found_##name = dlsym(RTLD_NEXT, #name);
    MF_ALLOC_FNS(MF_ALLOC_LOOKUP)
#undef MF_ALLOC_LOOKUP
    void *found_free = dlsym(RTLD_NEXT, "free");
    mf_nt.resolving = false;
    mf_lock();
    if (!mf_alloc_resolved) {
#define MF_ALLOC_STORE(name, ret, params, args, failed)                                     \
    MF_STORE(mf_real_##name, found_##name ? (ret(*) params)found_##name : mf_libc_##name);
        MF_ALLOC_FNS(MF_ALLOC_STORE)
#undef MF_ALLOC_STORE
        MF_STORE(mf_real_free, found_free ? (void (*)(void *))found_free : mf_libc_free);
        MF_STORE(mf_next_free, mf_real_free);
        if (!mf_free_filtering)
            MF_STORE(mf_free_route, mf_real_free);
        __atomic_store_n(&mf_alloc_resolved, 1, __ATOMIC_RELEASE);
        mf_detectors_set();
    }
    mf_unlock();
}

/* ---- the global operator new ----------------------------------------------------------- */

mf_fnptr mf_next_new[MF_NEW_FORM_COUNT];
/* Each form's decision, once made: mf_new_counted_<form>, or the next operator new itself. */
static mf_fnptr mf_new_decided[MF_NEW_FORM_COUNT];

#define MF_NEW_FIRST_DECL(form, sym, fn, params, args) static void *mf_new_first_##form params;
MF_NEW_FORMS(MF_NEW_FIRST_DECL)
#undef MF_NEW_FIRST_DECL

#define MF_NEW_FIRST_REF(form, sym, fn, params, args) (mf_fnptr)mf_new_first_##form,
mf_fnptr mf_new_route[MF_NEW_FORM_COUNT] = {MF_NEW_FORMS(MF_NEW_FIRST_REF)};
static const mf_fnptr mf_new_first[MF_NEW_FORM_COUNT] = {MF_NEW_FORMS(MF_NEW_FIRST_REF)};
#undef MF_NEW_FIRST_REF

#define MF_NEW_COUNTED_REF(form, sym, fn, params, args) (mf_fnptr)mf_new_counted_##form,
static const mf_fnptr mf_new_counted[MF_NEW_FORM_COUNT] = {MF_NEW_FORMS(MF_NEW_COUNTED_REF)};
#undef MF_NEW_COUNTED_REF

#define MF_NEW_NAME(form, sym, fn, params, args) #sym,
static const char *const mf_new_names[MF_NEW_FORM_COUNT] = {MF_NEW_FORMS(MF_NEW_NAME)};
#undef MF_NEW_NAME

/* In mf_new_route's place, for a form that counts, while a probe is in flight. */
#define MF_NEW_DETECT(form, sym, fn, params, args)                                          \
    static void *mf_new_detect_##form params                                                \
    {                                                                                       \
        mf_nt.hits++;                                                                       \
        return mf_new_counted_##form args;                                                  \
    }
MF_NEW_FORMS(MF_NEW_DETECT)
#undef MF_NEW_DETECT
#define MF_NEW_DETECT_REF(form, sym, fn, params, args) (mf_fnptr)mf_new_detect_##form,
static const mf_fnptr mf_new_detect[MF_NEW_FORM_COUNT] = {MF_NEW_FORMS(MF_NEW_DETECT_REF)};
#undef MF_NEW_DETECT_REF

/* Under mf_lock(): the pointers the entry points forward through, from the real ones, with
 * the detectors in the place of those that count while a probe is in flight. */
static void mf_detectors_set(void)
{
    bool on = mf_probes > 0;
    if (mf_alloc_resolved) {
#define MF_ALLOC_SET(name, ret, params, args, failed)                                       \
    MF_STORE(mf_next_##name, on ? mf_detect_##name : mf_real_##name);
        MF_ALLOC_FNS(MF_ALLOC_SET)
#undef MF_ALLOC_SET
    }
    for (int f = 0; f < MF_NEW_FORM_COUNT; f++) {
        mf_fnptr d = mf_new_decided[f];
        if (d)
            MF_STORE(mf_new_route[f], on && d == mf_new_counted[f] ? mf_new_detect[f] : d);
    }
}

/* ---- finding the next operator new ----------------------------------------------------- */

static bool mf_object_contains(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && addr - (info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
            return true;
    }
    return false;
}

/* The object's dynamic symbol table; false without one, or without a hash table to find a
 * name in it. */
static bool mf_dynsym_read(const struct dl_phdr_info *info, struct mf_elf_dynamic *o)
{
    const ElfW(Dyn) *dyn = mf_elf_dynamic_of(info);
    if (!dyn)
        return false;
    mf_elf_dynamic_read(dyn, info->dlpi_addr, o);
    return o->symtab && o->strtab && (o->gnu_hash || o->sysv_hash);
}

/* Symbol i, if it defines `name` as the dynamic linker would bind an unversioned reference
 * to it: a global or weak function, not a hidden (non-default) version. */
static mf_fnptr mf_dynsym_match(const struct mf_elf_dynamic *o, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &o->symtab[i];
    int type = s->st_info & 0xf, bind = s->st_info >> 4; /* ELF{32,64}_ST_TYPE, _ST_BIND */
    if (s->st_shndx == SHN_UNDEF || s->st_value == 0 || (bind != STB_GLOBAL && bind != STB_WEAK))
        return NULL;
    if (type != STT_FUNC && type != STT_GNU_IFUNC)
        return NULL;
    if (o->versym && ((o->versym[i] & 0x8000) || o->versym[i] == 0))
        return NULL;
    if (strcmp(o->strtab + s->st_name, name) != 0)
        return NULL;
    uintptr_t at = o->base + s->st_value;
    if (type == STT_GNU_IFUNC)
        return ((mf_fnptr(*)(void))at)();
    return (mf_fnptr)at;
}

static mf_fnptr mf_dynsym_lookup(const struct mf_elf_dynamic *o, const char *name)
{
    if (o->gnu_hash) {
        const uint32_t *h = o->gnu_hash;
        uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2], bloom_shift = h[3];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(h + 4);
        const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t hash = 5381;
        for (const char *c = name; *c; c++)
            hash = hash * 33 + (unsigned char)*c;
        const unsigned bits = sizeof(ElfW(Addr)) * 8;
        ElfW(Addr) word = bloom[(hash / bits) & (bloom_size - 1)];
        ElfW(Addr) mask = ((ElfW(Addr))1 << (hash % bits)) |
                          ((ElfW(Addr))1 << ((hash >> bloom_shift) % bits));
        if (nbuckets == 0 || (word & mask) != mask)
            return NULL;
        uint32_t i = buckets[hash % nbuckets];
        if (i < symoffset)
            return NULL;
        for (;; i++) {
            uint32_t h2 = chain[i - symoffset];
            if ((h2 | 1) == (hash | 1)) {
                mf_fnptr f = mf_dynsym_match(o, i, name);
                if (f)
                    return f;
            }
            if (h2 & 1)
                return NULL;
        }
    }
    const ElfW(Word) *h = o->sysv_hash;
    uint32_t nbucket = h[0], hash = 0;
    for (const char *c = name; *c; c++) {
        hash = (hash << 4) + (unsigned char)*c;
        uint32_t g = hash & 0xf0000000u;
        hash ^= g >> 24;
        hash &= ~g;
    }
    const ElfW(Word) *chain = h + 2 + nbucket;
    for (uint32_t i = h[2 + hash % nbucket]; i != STN_UNDEF; i = chain[i]) {
        mf_fnptr f = mf_dynsym_match(o, i, name);
        if (f)
            return f;
    }
    return NULL;
}

struct mf_search {
    uintptr_t self; /* an address in this library */
    bool after_self;
    mf_fnptr found[MF_NEW_FORM_COUNT];
};

static int mf_search_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct mf_search *s = arg;
    (void)size;
    if (!s->after_self) {
        s->after_self = mf_object_contains(info, s->self);
        return 0;
    }
    struct mf_elf_dynamic o;
    if (!mf_dynsym_read(info, &o))
        return 0;
    bool all = true;
    for (int f = 0; f < MF_NEW_FORM_COUNT; f++) {
        if (!s->found[f])
            s->found[f] = mf_dynsym_lookup(&o, mf_new_names[f]);
        all = all && s->found[f];
    }
    return all; /* non-zero ends the walk */
}

void mf_next_new_resolve(void)
{
    struct mf_search s = {.self = (uintptr_t)&mf_search_object};
    dl_iterate_phdr(mf_search_object, &s);
    for (int f = 0; f < MF_NEW_FORM_COUNT; f++)
        if (s.found[f] && !__atomic_load_n(&mf_next_new[f], __ATOMIC_ACQUIRE))
            MF_STORE(mf_next_new[f], s.found[f]);
}

/* ---- deciding, at a form's first call -------------------------------------------------- */

/* Starts a probe at `frame`; false if this thread has too many in flight. Probes of this
 * thread whose frames are at or above `frame` are gone: an exception took them. */
static bool mf_probe_enter(uintptr_t frame, uint32_t *slot, uint64_t *hits)
{
    mf_lock();
    uint32_t gone = 0;
    while (mf_nt.depth > 0 && frame >= mf_nt.frame[mf_nt.depth - 1]) {
        mf_nt.depth--;
        gone++;
    }
    mf_probes -= gone < mf_probes ? gone : mf_probes;
    bool ok = mf_nt.depth < MF_PROBE_DEPTH;
    if (ok) {
        *slot = mf_nt.depth;
        mf_nt.frame[mf_nt.depth++] = frame;
        mf_probes++;
    }
    mf_detectors_set();
    mf_unlock();
    *hits = mf_nt.hits;
    return ok;
}

/* Ends the probe in `slot` (and any nested one an exception ended) and records the form's
 * decision, unless another thread's came first or the call failed: out of memory, an
 * operator new may take another path (jemalloc's retries through malloc, ours). Returns
 * whether this call must be counted here: the next operator new made no call that counts. */
static bool mf_probe_leave(int form, uint32_t slot, uint64_t hits, bool allocated)
{
    bool reached = mf_nt.hits != hits;
    mf_lock();
    uint32_t gone = mf_nt.depth > slot ? mf_nt.depth - slot : 0;
    mf_nt.depth -= gone;
    mf_probes -= gone < mf_probes ? gone : mf_probes;
    if (!mf_new_decided[form] && allocated)
        mf_new_decided[form] = reached ? mf_next_new[form] : mf_new_counted[form];
    mf_detectors_set();
    mf_unlock();
    return !reached;
}

/* No operator new after us (a C program calling a C++ one it cannot see): malloc's, as
 * libstdc++'s would do without a C++ runtime to throw std::bad_alloc. */
static void *mf_new_fallback(size_t size, size_t align, bool nothrow)
{
    mf_next_resolve();
    void *p = NULL;
    if (size == 0)
        size = 1;
    if (align <= 2 * sizeof(void *))
        p = mf_real_malloc(size);
    else if (mf_real_posix_memalign(&p, align, size) != 0)
        p = NULL;
    if (!p && !nothrow)
        abort();
    return p;
}

static void *mf_new_fallback_PLAIN(size_t size) { return mf_new_fallback(size, 0, false); }
static void *mf_new_fallback_ARRAY(size_t size) { return mf_new_fallback(size, 0, false); }
static void *mf_new_fallback_NOTHROW(size_t size, const void *nt)
{
    (void)nt;
    return mf_new_fallback(size, 0, true);
}
static void *mf_new_fallback_ARRAY_NOTHROW(size_t size, const void *nt)
{
    (void)nt;
    return mf_new_fallback(size, 0, true);
}
static void *mf_new_fallback_ALIGNED(size_t size, size_t align)
{
    return mf_new_fallback(size, align, false);
}
static void *mf_new_fallback_ARRAY_ALIGNED(size_t size, size_t align)
{
    return mf_new_fallback(size, align, false);
}
static void *mf_new_fallback_ALIGNED_NOTHROW(size_t size, size_t align, const void *nt)
{
    (void)nt;
    return mf_new_fallback(size, align, true);
}
static void *mf_new_fallback_ARRAY_ALIGNED_NOTHROW(size_t size, size_t align, const void *nt)
{
    (void)nt;
    return mf_new_fallback(size, align, true);
}

/* A form's first calls, until one has decided: the call is the probe. */
#define MF_NEW_FIRST(form, sym, fn, params, args)                                           \
    static void *mf_new_first_##form params                                                 \
    {                                                                                       \
        uintptr_t frame = (uintptr_t)__builtin_frame_address(0);                            \
        mf_fnptr to = __atomic_load_n(&mf_new_route[MF_NEW_##form], __ATOMIC_ACQUIRE);      \
        if (to != mf_new_first[MF_NEW_##form]) /* decided meanwhile */                      \
            return ((mf_new_##form##_t *)to) args;                                          \
        if (!__atomic_load_n(&mf_next_new[MF_NEW_##form], __ATOMIC_ACQUIRE))                \
            mf_next_new_resolve(); /* a C++ library loaded since */                          \
        mf_fnptr next = __atomic_load_n(&mf_next_new[MF_NEW_##form], __ATOMIC_ACQUIRE);     \
        if (!next) {                                                                        \
            mf_nt.hits++;                                                                   \
            mf_record(fn, size);                                                            \
            return mf_new_fallback_##form args;                                             \
        }                                                                                   \
        uint32_t slot;                                                                      \
        uint64_t hits;                                                                      \
        if (!mf_probe_enter(frame, &slot, &hits))                                           \
            return ((mf_new_##form##_t *)next) args; /* cannot tell: as it comes */         \
        void *p = ((mf_new_##form##_t *)next) args;                                         \
        if (mf_probe_leave(MF_NEW_##form, slot, hits, p != NULL)) {                        \
            mf_nt.hits++; /* for a probe this one is nested in */                           \
            mf_record(fn, size);                                                            \
        }                                                                                   \
        return p;                                                                           \
    }
MF_NEW_FORMS(MF_NEW_FIRST)
#undef MF_NEW_FIRST
