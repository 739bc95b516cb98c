/* What a front end (lib_preload, the Rust crate) needs from the core: the hot path, start-up,
 * and the calls the preload library's guards make. */
#ifndef MF_CORE_H
#define MF_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mf_format.h"

#define MF_LIKELY(x) __builtin_expect(!!(x), 1)

/* A table: a file's header and segments, mapped MAP_SHARED, and a private index over all of
 * them (mf_table.c). Normally one thread writes it; a thread that cannot have a file of its
 * own (full disk, setuid, chroot) records into the process's first table, which is then
 * `shared` and written under `lock`. */
/* One of a table's private indexes (mf_table.c): open addressing, linear probing, at most
 * three quarters full. A slot is one word: the key's top MF_INDEX_TAG_BITS bits, and a
 * reference + 1 (0 = empty) below them. A key's home slot is its top bits too, so that
 * rebuilding the index larger reads no node or entry. */
#define MF_INDEX_REF_BITS 26
#define MF_INDEX_TAG_BITS (64 - MF_INDEX_REF_BITS)
struct mf_index {
    uint64_t *slot; /* anonymous memory; NULL until the first key, or without memory */
    uint64_t slots; /* a power of two, at most 2^MF_INDEX_TAG_BITS */
    uint32_t bits;  /* log2(slots) */
    uint64_t used;
    /* Where its first tables lie, each after the one before, never unmapped (mf_table.c):
     * MF_INDEX_SMALL_BYTES of small pages, then one 2 MiB block of a huge page. */
    char *small, *huge;
};

/* The depth of the stacks a table's path cache holds (MF_DEPTH_MAX, mf_format.h). */
#define MF_STACK_PATH_MAX MF_DEPTH_MAX

struct mf_table {
    struct mf_thread_header *hdr; /* NULL until the file exists */
    uint32_t nseg;
    uint32_t lock;            /* taken by every writer once `shared` */
    volatile uint32_t shared; /* more than one thread may write */
    struct mf_segment_header *seg[MF_MAX_SEGMENTS];
    uint64_t reserved_entries, reserved_nodes; /* the last segment's with disk blocks */
    struct mf_index nodes;   /* path hash -> node: a new stack's frames */
    struct mf_index entries; /* (path hash, flags, size class) -> entry */
    /* The last stack looked up, outermost frame first, with each frame's path hash (of the
     * frames from the outermost to it). The next stack shares a prefix with it more often
     * than not (a compile's stacks differ from the one before in their innermost 3 frames
     * out of 40): only the frames after that prefix are hashed. */
    uint32_t path_len;
    bool path_truncated;   /* its stack was cut at max_depth: its outermost frame moves */
    const void *path_slot; /* the slot whose walk number path_seq it is */
    uint64_t path_seq;
    uint64_t path_pc[MF_STACK_PATH_MAX];
    uint64_t path_hash[MF_STACK_PATH_MAX];
    /* The entry found or made last: a thread's next call comes from the same stack more
     * often than not, which is then found by one comparison, no probe. The comparison leaves
     * out the size class (a loop allocates at one site in many sizes): the entries of the
     * last stack are kept by class, those of generation last_gen being that stack's (the
     * generation moves on when its path or flags change). */
    uint64_t last_path;
    uint32_t last_depth, last_flags;
    uint64_t last_gen;
    struct {
        struct mf_entry *e;
        uint64_t gen;
    } last_by_class[MF_SIZE_CLASSES + 1]; /* the last one for an entry without a size */
};

struct mf_slot; /* a thread's cold state, its table and its slow path's stack (mf_internal.h) */

/* Per-thread state: what the hot path and the decision to sample need, and no more, so that
 * a thread's static TLS stays small (a 16 KiB thread must still run). Initial-exec TLS: one
 * instruction to reach it (global-dynamic costs 3-6 ns more per call, DESIGN §1).
 * Zero-initialized: a new thread's first call takes the slow path, which sets the thread up.
 * The hot path counts into `pending`, here in TLS, and the slow path moves those counts into
 * the thread's file at least every MF_FLUSH_CALLS calls. Counting straight into the file
 * costs a third load on the hot path's critical path (TLS -> file pointer -> counter):
 * measured, that made the hook twice as expensive (docs/design.md). */
struct mf_thread {
    int64_t countdown;        /* calls left until the slow path: the next sample or flush */
    /* Calls of this size and more take the slow path without counting down: MALLOC_FREQ_LARGE,
     * or UINT64_MAX when it is off. 0 (every call) until the thread's first slow path call,
     * which sets it (and on every later one, from the options). */
    uint64_t large;
    struct mf_totals pending; /* counted since the last flush */
    struct mf_totals *totals; /* the table's exact counters; NULL without one (pending keeps all) */
    struct mf_slot *slot;     /* NULL until set-up */
    int64_t sample_left;      /* calls after the countdown ends until the next sample */
    uint64_t weight;          /* calls the next sample stands for; 0 = no interval drawn yet */
    uint64_t drawn;           /* calls the current sampling interval covers (the rate's denominator) */
    uint64_t exact_left;      /* calls of the process-wide exact budget this thread holds */
    uint64_t early_calls;     /* calls before start-up finished: unprofiled, weight 1 */
    uint64_t early_bytes;
    uint32_t state;           /* enum mf_thread_state (mf_internal.h) */
    uint32_t paused;          /* malloc_freq_pause() depth */
    volatile uint32_t busy;   /* inside the slow path: a sample due now is not profiled */
    uint32_t exit_round;      /* thread-exit destructor rounds seen */
    bool exact;               /* the sample now due belongs to the exact stretch */
    bool exiting;             /* runs the process's exit: flush every call (mf_arm) */
    bool in_slow;             /* inside mf_record_slow (busy marks only the sample) */
    /* `pending` was all 0 when the last slow path left, and the countdown it left was at
     * most 1, so the hot path has counted nothing into it since (mf_count_call). */
    bool clean;
    bool in_loader;           /* inside dl_iterate_phdr for the profiler (mf_dl_iterate) */
};

/* The alignment of mf_tls. The preload library's build sets it to 512 (Makefile), the next
 * power of two above sizeof(struct mf_thread): then its TLS block sits exactly 512 bytes below
 * the thread pointer whenever the program's own TLS fits in the rest (glibc rounds a
 * module's offset up to the block's alignment), and the entry points can address it as
 * %fs:-MF_TLS_ALIGN, an immediate, instead of loading its offset from the GOT first
 * (lib_preload/mf_entry.c). A page, as before, cost every thread up to ~10 KiB of its stack
 * (the block's padding and the thread pointer's alignment): a 16 KiB thread died. */
#ifndef MF_TLS_ALIGN
#define MF_TLS_ALIGN 8
#endif

extern __thread struct mf_thread mf_tls
    __attribute__((tls_model("initial-exec"), aligned(MF_TLS_ALIGN)));

/* mf_tls is at %fs:-MF_TLS_ALIGN in every thread of this process: set by the preload library
 * before mf_core_init(), recorded in the process file (MF_PROCESS_TLS_DIRECT). */
extern bool mf_tls_direct __attribute__((visibility("hidden")));

/* Takes the sample, sets up the thread on its first call; out of line and cold. */
void mf_record_slow(enum mf_fn fn, size_t size) __attribute__((noinline, cold));

/* A pending counter's increment. Under TSan, a relaxed atomic: the process's exit reads
 * other threads' pending counts (mf_flush_others). Otherwise one add to memory, which a
 * signal handler cannot split. */
#ifdef __SANITIZE_THREAD__
#define MF_PENDING_ADD(counter, n)                                                          \
    __atomic_store_n(&(counter), __atomic_load_n(&(counter), __ATOMIC_RELAXED) + (n),       \
                     __ATOMIC_RELAXED)
#else
#define MF_PENDING_ADD(counter, n) ((counter) += (n))
#endif

/* Counts the countdown down by one; true while calls are left. On x86-64 one subtraction
 * from memory whose flags are the test: the compiler's load, subtract, store and test were
 * three instructions more, on every call (callgrind, docs/design.md). */
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__) && !defined(__SANITIZE_THREAD__)
#define MF_COUNTDOWN_LEFT(t)                                                                \
    __extension__({                                                                         \
        bool mf_left_;                                                                      \
        __asm__("subq $1, %0" : "+m"((t)->countdown), "=@ccg"(mf_left_));                  \
        mf_left_;                                                                           \
    })
#else
#define MF_COUNTDOWN_LEFT(t) (--(t)->countdown > 0)
#endif

/* The hot path: a size test, a countdown and two exact counters, all in TLS. No lock, no
 * system call, no allocation. False when the size is large (then the countdown is left as
 * it is) or the countdown ran out: the caller must then call mf_record_slow(). The size
 * histogram is the slow path's, from the samples. A macro so that `t` may also be a
 * __seg_fs pointer (mf_entry.c). */
#define MF_COUNT_AT(t, fn, size)                                                            \
    (MF_LIKELY((size) < (t)->large) && MF_LIKELY(MF_COUNTDOWN_LEFT(t))                      \
         ? (MF_PENDING_ADD((t)->pending.calls[fn], 1),                                      \
            MF_PENDING_ADD((t)->pending.bytes[fn], (size)), true)                           \
         : false)

static inline __attribute__((always_inline)) bool mf_count(enum mf_fn fn, size_t size)
{
    struct mf_thread *t = &mf_tls;
    return MF_COUNT_AT(t, fn, size);
}

static inline __attribute__((always_inline)) void mf_record(enum mf_fn fn, size_t size)
{
    if (!mf_count(fn, size))
        mf_record_slow(fn, size);
}

/* mf_record() out of line, for front ends that cannot inline it (the Rust crate). */
void mf_record_call(uint32_t fn, size_t size);

/* Process start-up: environment, output directory, unwinder. Run from a constructor
 * (single-threaded, never from inside malloc: dlopen takes the loader lock, DESIGN §4).
 * Idempotent. */
void mf_core_init(void);

/* The live heap (mf_live.c, MALLOC_FREQ_LIVE). mf_live_filter counts the recorded
 * allocations per 16-byte address granule, modulo MF_LIVE_FILTER_SLOTS; NULL when the live
 * heap is off. A free looks there first: only a non-zero count sends it to mf_live_free. */
#define MF_LIVE_FILTER_SLOTS (1u << 20)
#define MF_LIVE_FILTER_INDEX(a) (((uint64_t)(uintptr_t)(a) >> 4) & (MF_LIVE_FILTER_SLOTS - 1u))
extern uint8_t *mf_live_filter __attribute__((visibility("hidden")));

static inline __attribute__((always_inline)) bool mf_live_filter_hit(const void *p)
{
    /* Relaxed atomic loads: plain moves on x86, and what TSan must see (other threads
     * count in the filter while this one reads it; a stale count is harmless: a record is
     * inserted before its block can reach another thread's free). */
    const uint8_t *f = __atomic_load_n(&mf_live_filter, __ATOMIC_RELAXED);
    return __builtin_expect(f != NULL, 0) &&
           __atomic_load_n(&f[MF_LIVE_FILTER_INDEX(p)], __ATOMIC_RELAXED);
}

/* After an allocation call that went through mf_record_slow: p is what the allocator
 * returned (NULL if it failed). Records p if the call's sample is to be followed. */
void mf_live_alloc(void *p);
/* Before p is freed (or reallocated): forgets p if it is recorded. For a filter hit. */
void mf_live_free(void *p);
/* MALLOC_FREQ_LIVE is sampled or all (after mf_core_init). */
bool mf_live_enabled(void);
/* The filter check and mf_live_free, out of line, for the Rust crate. */
void mf_live_free_call(void *p);

/* ---- start-up and the guards: what lib_preload/mf_preload.c and mf_guard.c call ---- */

/* A front end that sees seccomp filters coming (prctl) allows the PROCMAP_QUERY ioctl, and
 * calls mf_procmap_query_off() before one is installed; a kernel without the query turns it
 * off too (mf_unwind.c, mf_stack_bounds). */
extern bool mf_procmap_query_allowed;
void mf_procmap_query_off(void);
/* Set by a front end before mf_core_init(): files and libunwind wait for the first
 * allocation call (mf_process.c); mf_core_start_now() makes them at once. */
extern bool mf_lazy_start;
void mf_core_start_now(void);
void mf_core_before_threads(void); /* pthread_create: load libunwind while it may be */
/* setuid, chroot, setrlimit... (the front end's guards): everything made while it can be;
 * uid: the effective uid a setuid sets, else UINT64_MAX. */
bool mf_core_before_loss(uint64_t uid);
void mf_core_after_loss(bool handed, bool failed, uint64_t uid); /* root again: back to root */
/* A seccomp filter is installed, or about to be (the front end's prctl): nothing may be
 * opened from then on, a refused open may kill the process. */
void mf_filter_seen(void);

#endif
