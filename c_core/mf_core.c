/* The core: process start-up, the per-thread slow path (sampling decision, stack capture,
 * table update), fork and exit. The hot path is in mf_core.h. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "malloc_freq.h"
#include "mf_internal.h"

__thread struct mf_thread mf_tls __attribute__((tls_model("initial-exec"), aligned(MF_TLS_ALIGN)));
bool mf_tls_direct;

volatile int mf_ready;
static volatile int mf_disabled;
pid_t mf_pid;
uint64_t mf_stamp;
char mf_dir[MF_PATH_MAX];
uint64_t mf_thread_seq;
static int64_t mf_exact_budget;  /* calls still to record exactly, process-wide */
static int64_t mf_exact_ns_left; /* time the exact stretch may still take, process-wide */
/* A MADV_WIPEONFORK page: it reads 0 in any child, also one made by _Fork() or clone(),
 * which run no atfork handler. A load, where asking getpid() would be a system call. */
static volatile uint64_t *mf_fork_canary;
static pthread_key_t mf_thread_key;
/* The threads that have a file, so that the process's exit can flush the pending counts of
 * threads still running (mf_flush_others). Changed at thread set-up and exit only. */
static struct mf_thread *mf_threads;
static uint32_t mf_threads_lock;

#define MF_EXACT_CHUNK 64 /* a thread takes the exact budget in chunks: less contention */
#define MF_COST_SHARE (MF_COST_SHARE_PPM / 1e6)
#define MF_INTERVAL_MAX 100000u
#define MF_COUNTDOWN_OFF (INT64_MAX / 2) /* not profiling: the hot path only counts */

/* ---- sampling ---------------------------------------------------------------------- */

static uint64_t mf_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void mf_rng_seed(struct mf_thread *t, uint64_t seq)
{
    uint64_t x = mf_opt.seed_set ? mf_opt.seed : mf_stamp ^ mf_now_ns();
    x ^= seq * 0xd1b54a32d192ed03u;
    t->rng[0] = mf_splitmix(&x);
    t->rng[1] = mf_splitmix(&x) | 1;
}

static uint64_t mf_rng_next(struct mf_thread *t)
{
    uint64_t s0 = t->rng[0], s1 = t->rng[1], r = s0 + s1;
    s1 ^= s0;
    t->rng[0] = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
    t->rng[1] = (s1 << 37) | (s1 >> 27);
    return r;
}

/* The exact stretch ends after mf_opt.exact_calls calls or MF_EXACT_NS_MAX of recording,
 * whichever comes first: deep stacks (gcc's cc1 at ~1 us a sample) and processes that
 * live a few milliseconds each (a build's cc1 and as) would otherwise pay up to 20 ms
 * each. A thread settles its exact samples' time when it takes the next chunk. */
static bool mf_take_exact(struct mf_thread *t)
{
    if (t->exact_left)
        return true;
    if (t->exact_ns) {
        int64_t ns = __atomic_sub_fetch(&mf_exact_ns_left, (int64_t)t->exact_ns, __ATOMIC_RELAXED);
        t->exact_ns = 0;
        if (ns <= 0)
            __atomic_store_n(&mf_exact_budget, 0, __ATOMIC_RELAXED);
    }
    int64_t left = __atomic_load_n(&mf_exact_budget, __ATOMIC_RELAXED);
    while (left > 0) {
        int64_t take = left < MF_EXACT_CHUNK ? left : MF_EXACT_CHUNK;
        if (__atomic_compare_exchange_n(&mf_exact_budget, &left, left - take, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            t->exact_left = (uint64_t)take;
            return true;
        }
    }
    return false;
}

/* Draws the calls until the next sample and sets the weight that sample will carry: the
 * mean interval in force now, so each call counts 1/p in expectation (unbiased, also when
 * the interval changes from one sample to the next: it is fixed before the calls it covers). */
static int64_t mf_next_countdown(struct mf_thread *t)
{
    uint64_t n = mf_opt.sample_interval ? mf_opt.sample_interval : t->interval;
    t->exact = false;
    if (n > 1 && mf_take_exact(t)) {
        t->exact_left--;
        t->exact = true;
        n = 1;
    }
    if (n <= 1) {
        t->weight = t->drawn = 1;
        return 1;
    }
    t->weight = n;
    /* Geometric with p = 1/n: the calls up to and including the next sampled one. */
    double u = ((double)(mf_rng_next(t) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    double c = floor(log(u) / log1p(-1.0 / (double)n)) + 1.0;
    int64_t k = c < (double)MF_COUNTDOWN_OFF ? (int64_t)c : MF_COUNTDOWN_OFF;
    t->drawn = (uint64_t)k;
    return k;
}

/* Default mode: sets the mean interval so that samples take about MF_COST_SHARE of the
 * thread's time: interval = time per sample / (share * program time per call). Recording
 * a call costs the same whether malloc takes 10 ns or 1 us, so a program that allocates
 * rarely is recorded exactly (interval 1) and a malloc-bound one sparsely. The program's
 * time per call is measured between samples, the profiler's own time left out; a faster
 * rate is followed at once, a slower one gradually, so that a burst of calls after a quiet
 * spell never runs at the quiet spell's interval.
 * The cost of a sample is learnt from samples of stacks seen before: a new stack's first
 * sample pays once for the table insert (and a thread's first, for libunwind's set-up),
 * up to 100 us, and an interval sized from it would starve the thread of the samples that
 * correct it. For the same reason one measurement may at most double the estimate (the
 * thread may have been preempted), and the interval at most double from one sample on. */
static void mf_adapt(struct mf_thread *t, uint64_t t0, uint64_t t1, bool new_stack)
{
    double cost = (double)(t1 - t0);
    if (!new_stack) {
        if (t->sample_ns > 0 && cost > 2 * t->sample_ns)
            cost = 2 * t->sample_ns;
        t->sample_ns = t->sample_ns > 0 ? (3 * t->sample_ns + cost) / 4 : cost;
    }
    if (t->sample_end_ns && t0 > t->sample_end_ns && t->sample_ns > 0) {
        double per_call = (double)(t0 - t->sample_end_ns) / (double)t->drawn;
        t->call_ns = t->call_ns <= 0 || per_call < t->call_ns ? per_call
                                                               : (3 * t->call_ns + per_call) / 4;
        double n = t->sample_ns / (MF_COST_SHARE * t->call_ns);
        double most = t->interval ? 2.0 * (double)t->interval : 2.0;
        n = n > most ? most : n;
        t->interval = n < 1 ? 1 : n > MF_INTERVAL_MAX ? MF_INTERVAL_MAX : (uint64_t)n;
    }
    t->sample_end_ns = t1;
}

static void mf_fork_canary_arm(void)
{
    if (!mf_fork_canary) {
        void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return;
        if (madvise(p, 4096, MADV_WIPEONFORK) != 0) { /* Linux < 4.14: mf_check_pid() only */
            munmap(p, 4096);
            return;
        }
        mf_fork_canary = p;
    }
    *mf_fork_canary = 1;
}

static bool mf_forked(void)
{
    return mf_fork_canary && *mf_fork_canary == 0;
}

static void mf_after_fork_child(void);

/* ---- the slow path: unprofiled samples, the re-entry guard ------------------------ */

static void mf_unprofiled(struct mf_thread *t, uint64_t weight, size_t size)
{
    struct mf_thread_header *h = t->table.hdr;
    if (h) {
        h->unprofiled_samples++;
        h->unprofiled_calls += weight;
        h->unprofiled_bytes += weight * size;
        h->unprofiled_calls_sq += weight * weight;
    } else {
        t->local_unprofiled_samples++;
        t->local_unprofiled_calls += weight;
        t->local_unprofiled_bytes += weight * size;
        t->local_unprofiled_calls_sq += weight * weight;
    }
}

/* Profiler code runs between these: a call it makes (libunwind's first touch of its TLS in a
 * thread allocates, dlopen does) comes back to the slow path, which leaves it out: it is
 * the profiler's, not the program's. */
static int64_t mf_enter(struct mf_thread *t)
{
    int64_t saved = t->countdown;
    t->busy = 1;
    t->countdown = 1;
    return saved;
}

static void mf_leave(struct mf_thread *t, int64_t countdown)
{
    t->countdown = countdown;
    t->busy = 0;
}

/* ---- flushing the hot path's counts into the file -------------------------------- */

static void mf_spin_lock(uint32_t *lock)
{
    while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void mf_spin_unlock(uint32_t *lock)
{
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

/* The owner's flush: the pending counts, less what the process's exit already took, go to
 * the file (or `local`). The lock only excludes mf_flush_others, so a thread no longer on
 * the list takes none (TSan's atomics crash in a thread's last destructor round). The
 * thread is busy meanwhile (mf_enter), so a signal handler's call cannot flush into it. */
static void mf_flush(struct mf_thread *t)
{
    int first = 0;
    while (first < MF_FN_COUNT && !t->pending.calls[first])
        first++;
    if (first == MF_FN_COUNT) /* recording every call: the hot path counted nothing */
        return;
    int64_t saved = mf_enter(t);
    bool listed = t->listed;
    if (listed)
        mf_spin_lock(&t->flush_lock);
    for (int fn = first; fn < MF_FN_COUNT; fn++) {
        if (!t->pending.calls[fn]) /* then nothing was proxied either */
            continue;
        t->totals->calls[fn] += t->pending.calls[fn] - t->proxied.calls[fn];
        t->totals->bytes[fn] += t->pending.bytes[fn] - t->proxied.bytes[fn];
        t->pending.calls[fn] = t->pending.bytes[fn] = 0;
        t->proxied.calls[fn] = t->proxied.bytes[fn] = 0;
    }
    if (listed)
        mf_spin_unlock(&t->flush_lock);
    mf_leave(t, saved);
}

/* At the process's exit: the pending counts of the other threads, which may still be
 * running (or blocked forever), go to their files. Only what is pending now: an owner
 * adds its later calls to `pending`, which `proxied` keeps from being counted twice. */
static void mf_flush_others(struct mf_thread *self)
{
    mf_spin_lock(&mf_threads_lock);
    for (struct mf_thread *o = mf_threads; o; o = o->next) {
        if (o == self)
            continue;
        mf_spin_lock(&o->flush_lock);
        for (int fn = 0; fn < MF_FN_COUNT; fn++) {
            uint64_t calls = __atomic_load_n(&o->pending.calls[fn], __ATOMIC_RELAXED);
            uint64_t bytes = __atomic_load_n(&o->pending.bytes[fn], __ATOMIC_RELAXED);
            if (calls == o->proxied.calls[fn]) /* nothing new: the owner may be counting */
                continue;                        /* into its totals directly (mf_record_slow) */
            o->totals->calls[fn] += calls - o->proxied.calls[fn];
            o->totals->bytes[fn] += bytes - o->proxied.bytes[fn];
            o->proxied.calls[fn] = calls;
            o->proxied.bytes[fn] = bytes;
        }
        mf_spin_unlock(&o->flush_lock);
    }
    mf_spin_unlock(&mf_threads_lock);
}

static void mf_threads_add(struct mf_thread *t)
{
    mf_spin_lock(&mf_threads_lock);
    t->prev = NULL;
    t->next = mf_threads;
    if (mf_threads)
        mf_threads->prev = t;
    mf_threads = t;
    t->listed = true;
    mf_spin_unlock(&mf_threads_lock);
}

static void mf_threads_remove(struct mf_thread *t)
{
    mf_spin_lock(&mf_threads_lock);
    if (t->prev)
        t->prev->next = t->next;
    else if (mf_threads == t)
        mf_threads = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->next = t->prev = NULL;
    t->listed = false;
    mf_spin_unlock(&mf_threads_lock);
}

/* The countdown ends at the next sample or after MF_FLUSH_CALLS calls, whichever comes
 * first (every call in the thread that runs the process's exit); returns it and keeps the
 * rest. */
static int64_t mf_arm(struct mf_thread *t, int64_t calls)
{
    int64_t cap = t->exiting ? 1 : MF_FLUSH_CALLS;
    int64_t step = calls < cap ? calls : cap;
    t->sample_left = calls - step;
    return step;
}

/* ---- the slow path: set-up and samples ------------------------------------------- */

/* Creates the thread's file and moves what was counted before into it. */
static void mf_thread_setup(struct mf_thread *t)
{
    int64_t saved = mf_enter(t);
    uint64_t seq = __atomic_fetch_add(&mf_thread_seq, 1, __ATOMIC_RELAXED);
    mf_rng_seed(t, seq);
    if (mf_table_create(&t->table, seq)) {
        t->state = MF_THREAD_FAILED;
    } else {
        struct mf_thread_header *h = t->table.hdr;
        h->totals = t->local;
        h->unprofiled_samples = t->local_unprofiled_samples;
        h->unprofiled_calls = t->local_unprofiled_calls;
        h->unprofiled_bytes = t->local_unprofiled_bytes;
        h->unprofiled_calls_sq = t->local_unprofiled_calls_sq;
        t->totals = &h->totals;
        t->state = MF_THREAD_READY;
        pthread_setspecific(mf_thread_key, t);
        mf_threads_add(t);
    }
    mf_leave(t, saved);
}

/* Returns true if the stack was new to this thread's table. Inline: one frame fewer to unwind. */
static inline __attribute__((always_inline)) bool mf_sample(struct mf_thread *t, uint64_t weight, size_t size, uintptr_t ret)
{
    uintptr_t all[MF_DEPTH_MAX + MF_OWN_FRAMES_MAX + 1];
    uint32_t max = mf_opt.max_depth, own, flags = 0;
    uint32_t n = mf_unwind(all, max + MF_OWN_FRAMES_MAX + 1, ret, &own);
    const uintptr_t *pcs = all + own;
    n -= own;
    if (n > max) {
        n = max;
        flags = MF_ENTRY_TRUNCATED;
    }
    struct mf_entry *e = mf_table_upsert(&t->table, pcs, n, flags);
    if (!e) {
        mf_unprofiled(t, weight, size);
        return false;
    }
    bool new_stack = e->samples == 0;
    if (new_stack) { /* from a fork that skipped our handler? a new library? */
        if (!mf_check_pid())
            return true;
        if (!mf_modules_cover(pcs, n))
            mf_modules_refresh();
    }
    e->samples++;
    e->calls += weight;
    e->bytes += weight * size;
    e->calls_sq += weight * weight;
    if ((++t->samples & 63) == 1) /* the clock costs as much as the rest of an exact sample */
        t->table.hdr->last_ns = mf_now_ns();
    return new_stack;
}

void mf_record_slow(enum mf_fn fn, size_t size)
{
    struct mf_thread *t = &mf_tls;
    uintptr_t ret = (uintptr_t)__builtin_return_address(0);
    if (MF_UNLIKELY(mf_forked()))
        mf_after_fork_child(); /* _Fork() or clone() skipped our atfork handler */
    if (t->busy) {
        t->countdown = 1; /* the profiler's own call: see mf_enter() */
        return;
    }
    if (!t->totals)
        t->totals = &t->local;
    mf_flush(t);
    t->totals->calls[fn]++; /* after the flush: mf_flush_others no longer writes them */
    t->totals->bytes[fn] += size;

    if (MF_UNLIKELY(!mf_ready)) {
        /* Before start-up finished (or never, if profiling is off): count every call. */
        mf_unprofiled(t, 1, size);
        t->countdown = mf_disabled ? MF_COUNTDOWN_OFF : 1;
        return;
    }
    if (MF_UNLIKELY(t->state == MF_THREAD_EXITED)) {
        t->countdown = MF_COUNTDOWN_OFF;
        return;
    }
    if (MF_UNLIKELY(t->state == MF_THREAD_NEW))
        mf_thread_setup(t);
    if (t->sample_left > 0) { /* a flush only: the sample is further on */
        t->countdown = mf_arm(t, t->sample_left);
        return;
    }
    if (MF_UNLIKELY(t->weight == 0)) {
        /* No countdown covered this call yet: decide for it like for any other. */
        int64_t c = mf_next_countdown(t);
        if (c > 1) {
            t->countdown = mf_arm(t, c - 1);
            return;
        }
    }
    uint64_t weight = t->weight;
    if (t->paused || t->state != MF_THREAD_READY) {
        mf_unprofiled(t, weight, size);
        t->countdown = mf_arm(t, mf_next_countdown(t));
        return;
    }
    mf_enter(t);
    bool adaptive = !mf_opt.sample_interval;
    uint64_t t0 = adaptive ? mf_mono_ns() : 0;
    bool new_stack = mf_sample(t, weight, size, ret);
    if (adaptive) {
        uint64_t t1 = mf_mono_ns();
        if (t->exact)
            t->exact_ns += t1 - t0;
        mf_adapt(t, t0, t1, new_stack);
    }
    mf_leave(t, mf_arm(t, mf_next_countdown(t)));
}

/* ---- process start-up, fork and exit ------------------------------------------------ */

static uint64_t mf_new_stamp(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = 0;
    uint64_t x = r ^ mf_now_ns() ^ ((uint64_t)getpid() << 32);
    return mf_splitmix(&x);
}

/* Everything that depends on the pid: the directory, the process file, the module list. */
static void mf_process_start(void)
{
    mf_fork_canary_arm();
    mf_pid = getpid();
    mf_stamp = mf_new_stamp();
    __atomic_store_n(&mf_thread_seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mf_exact_budget, (int64_t)mf_opt.exact_calls, __ATOMIC_RELAXED);
    __atomic_store_n(&mf_exact_ns_left, (int64_t)MF_EXACT_NS_MAX, __ATOMIC_RELAXED);
    mf_modules_reset();
    /* <base>/malloc_freq.<pid>, private, under the base settled at the first start-up
     * (mf_files.c); under AT_SECURE it fails silently. */
    if (mf_files_start() || mf_process_file_create()) {
        mf_dir[0] = '\0';
        mf_disabled = 1;
        mf_ready = 0;
        return;
    }
    mf_modules_refresh();
    mf_ready = 1;
}

/* The child of fork() must never write into its parent's files (they are shared mappings):
 * it forgets the parent's tables and starts a directory of its own. */
static void mf_after_fork_child(void)
{
    struct mf_thread *t = &mf_tls;
    mf_table_forget_index(&t->table);
    memset(&t->table, 0, sizeof t->table);
    memset(&t->local, 0, sizeof t->local);
    memset(&t->pending, 0, sizeof t->pending); /* the parent's, which it flushes itself */
    memset(&t->proxied, 0, sizeof t->proxied);
    t->flush_lock = 0;
    t->next = t->prev = NULL;
    t->listed = false;
    mf_threads = NULL; /* the parent's other threads do not exist here */
    mf_threads_lock = 0;
    t->exiting = false;
    t->sample_left = 0;
    t->local_unprofiled_samples = t->local_unprofiled_calls = t->local_unprofiled_bytes = 0;
    t->local_unprofiled_calls_sq = 0;
    t->totals = &t->local;
    t->state = MF_THREAD_NEW;
    t->weight = 0;
    t->exact_left = t->exact_ns = 0;
    t->exact = false;
    t->exit_round = 0;
    t->countdown = 0;
    mf_process_start();
}

bool mf_check_pid(void)
{
    if (getpid() == mf_pid)
        return true;
    mf_after_fork_child(); /* a child made by _Fork() or clone(), which skip atfork handlers */
    return false;
}

/* glibc calls thread-specific destructors in up to PTHREAD_DESTRUCTOR_ITERATIONS rounds while
 * values are set. Other destructors (Rust's thread locals among them) still allocate, so the
 * table stays mapped until the last round; calls made after that, by destructors of keys
 * created after ours in that same last round, are counted nowhere. */
static void mf_thread_exit(void *arg)
{
    struct mf_thread *t = arg;
    if (++t->exit_round == 1 && t->listed) {
        /* Off the list in the first round, while TSan's per-thread state still exists. */
        mf_flush(t);
        mf_threads_remove(t);
    }
    if (t->exit_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
        pthread_setspecific(mf_thread_key, t);
        return;
    }
    if (t->table.hdr && getpid() == mf_pid) {
        mf_flush(t);
        t->table.hdr->last_ns = mf_now_ns();
        t->table.hdr->flags |= MF_THREAD_FINISHED;
        mf_table_unmap(&t->table);
    }
    memset(&t->local, 0, sizeof t->local);
    t->totals = &t->local;
    t->state = MF_THREAD_EXITED;
    t->countdown = MF_COUNTDOWN_OFF;
}

void mf_core_init(void)
{
    static int started;
    if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
        return;
    int64_t saved = mf_enter(&mf_tls);
    mf_options_read();
    mf_unwind_init();
    pthread_key_create(&mf_thread_key, mf_thread_exit);
    pthread_atfork(NULL, NULL, mf_after_fork_child);
    mf_process_start();
    mf_leave(&mf_tls, saved);
    /* The calls made before start-up are in TLS: put them in a file now, in case this
     * thread never allocates again. */
    if (mf_ready && mf_tls.state == MF_THREAD_NEW && mf_tls.totals)
        mf_thread_setup(&mf_tls);
}

__attribute__((constructor)) static void mf_core_constructor(void)
{
    mf_core_init();
}

/* Also flushes every thread's pending counts; from here on this thread flushes each call as
 * it is made, for the destructors and exit handlers that run after this one. Other threads
 * keep their pace: one still running at the very end can leave its last calls (fewer than
 * MF_FLUSH_CALLS) out, but a thread pool that a late destructor waits for is not slowed. */
__attribute__((destructor)) static void mf_core_destructor(void)
{
    if (mf_ready && getpid() == mf_pid) {
        struct mf_thread *t = &mf_tls;
        t->exiting = true;
        if (t->totals)
            mf_flush(t);
        int64_t saved = mf_enter(t);
        mf_flush_others(t);
        if (saved > 1 && t->state == MF_THREAD_READY) { /* the same sample, one call at a time */
            t->sample_left += saved - 1;
            saved = 1;
        }
        mf_leave(t, saved);
        mf_modules_refresh();
        mf_process_file_finish();
    }
}

/* ---- the public API ----------------------------------------------------------------- */

__attribute__((visibility("default"))) const char *malloc_freq_dir(void)
{
    return mf_ready ? mf_dir : NULL;
}

__attribute__((visibility("default"))) void malloc_freq_pause(void)
{
    mf_tls.paused++;
}

__attribute__((visibility("default"))) void malloc_freq_resume(void)
{
    if (mf_tls.paused)
        mf_tls.paused--;
}

/* For front ends that cannot inline the hot path (the Rust crate). */
void mf_record_call(uint32_t fn, size_t size)
{
    mf_record(fn < MF_FN_COUNT ? (enum mf_fn)fn : MF_FN_MALLOC, size);
}
