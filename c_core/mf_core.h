/* What a front end (lib_preload, the Rust crate) needs from the core: the hot path. */
#ifndef MF_CORE_H
#define MF_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mf_format.h"

#define MF_LIKELY(x) __builtin_expect(!!(x), 1)

/* A thread's table: its file's header and segments, mapped MAP_SHARED, and a private index
 * over all of them (mf_table.c). */
struct mf_table {
    struct mf_thread_header *hdr; /* NULL until the thread file exists */
    uint32_t nseg;
    struct mf_segment_header *seg[MF_MAX_SEGMENTS];
    uint64_t *index; /* anonymous memory; NULL with one segment, or if it could not be had:
                      * then each segment is probed */
    uint64_t index_slots; /* a power of two */
};

/* Per-thread state. Initial-exec TLS: one instruction to reach it (global-dynamic costs
 * 3-6 ns more per call, DESIGN §1). Zero-initialized: a new thread's first call takes the
 * slow path, which sets the thread up.
 * The hot path counts into `pending`, here in TLS, and the slow path moves those counts into
 * the thread file at least every MF_FLUSH_CALLS calls. Counting straight into the file
 * costs a third load on the hot path's critical path (TLS -> file pointer -> counter):
 * measured, that made the hook twice as expensive (README, "How it works"). */
struct mf_thread {
    int64_t countdown;        /* calls left until the slow path: the next sample or flush */
    struct mf_totals pending; /* counted since the last flush */
    struct mf_totals *totals; /* the thread file's exact counters, or `local` before it exists */
    int64_t sample_left;      /* calls after the countdown ends until the next sample */
    uint64_t weight;          /* calls the next sample stands for; 0 = no interval drawn yet */
    uint64_t drawn;           /* calls the current sampling interval covers (the rate's denominator) */
    uint64_t exact_left;      /* calls of the process-wide exact budget this thread holds */
    uint64_t exact_ns;        /* time its exact samples took, not yet taken off the budget */
    uint32_t state;           /* enum mf_thread_state (mf_internal.h) */
    uint32_t paused;          /* malloc_freq_pause() depth */
    volatile uint32_t busy;   /* inside the slow path: a sample due now is not profiled */
    uint32_t exit_round;      /* thread-exit destructor rounds seen */
    bool exact;               /* the sample now due belongs to the exact stretch */
    bool exiting;             /* runs the process's exit: flush every call (mf_arm) */
    uint32_t flush_lock;      /* the owner's flush against the process exit's (mf_flush_others) */
    uint64_t rng[2];          /* xoroshiro128+ state */
    uint64_t samples;         /* samples taken by this thread */
    /* Default mode (mf_adapt): the mean interval the cost budget allows now, and what it
     * is computed from: the program's time per call and the profiler's time per sample. */
    uint64_t interval;
    uint64_t sample_end_ns; /* CLOCK_MONOTONIC when the last sample finished */
    double call_ns, sample_ns;
    uintptr_t stack_lo, stack_hi; /* the stack mapping the frame-pointer unwinder walks */
    struct mf_table table;
    struct mf_totals local; /* counts made before the thread file exists */
    struct mf_totals proxied; /* the part of `pending` the process's exit already flushed */
    struct mf_thread *next, *prev; /* the threads with a file (mf_threads), for the exit */
    bool listed;                   /* on that list */
    uint64_t local_unprofiled_samples, local_unprofiled_calls, local_unprofiled_bytes,
        local_unprofiled_calls_sq;
};

/* The alignment of mf_tls. The preload library's build sets it to a page (Makefile): then
 * its TLS block sits exactly one page below the thread pointer whenever the program's own TLS
 * is small enough to fit in the rest of that page (glibc rounds a module's offset up to the
 * block's alignment), and the entry points can address it as %fs:-MF_TLS_ALIGN, an
 * immediate, instead of loading its offset from the GOT first (lib_preload/mf_entry.c). */
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

/* The hot path: a countdown and two exact counters, all in TLS. No lock, no system call,
 * no allocation. False when the countdown ran out: the caller must then call
 * mf_record_slow(). A macro so that `t` may also be a __seg_fs pointer (mf_entry.c). */
#define MF_COUNT_AT(t, fn, size)                                                            \
    (MF_LIKELY(--(t)->countdown > 0)                                                        \
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

#endif
