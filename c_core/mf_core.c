/* The core: process start-up, the per-thread slow path (sampling decision, stack capture,
 * table update), thread set-up and exit, fork and exit. The hot path is in mf_core.h. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <unistd.h>

#include "malloc_freq.h"
#include "mf_internal.h"
#include "mf_math.h"

__thread struct mf_thread mf_tls __attribute__((tls_model("initial-exec"), aligned(MF_TLS_ALIGN)));
bool mf_tls_direct;

volatile int mf_ready;
static volatile int mf_disabled;
/* A fork child starts its own profile at its first slow-path call, not in the atfork
 * handler: nothing that can block may run there (DESIGN §12). */
static volatile int mf_start_pending;
/* The process image whose first call may start the profile: a vfork child (same memory,
 * another pid) never does. */
static pid_t mf_start_pid;
bool mf_lazy_start;
pid_t mf_pid;
uint64_t mf_stamp;
char mf_dir[MF_PATH_MAX] MF_LARGE_ZEROED;
uint64_t mf_thread_seq;
/* Counts process images of this address space's line: a slot whose table was made in an
 * earlier one (the parent's, before fork) never writes into it again. */
static uint64_t mf_gen = 1;
static int64_t mf_exact_budget;  /* calls still to record exactly, process-wide */
static uint64_t mf_exact_taken;  /* calls of the exact stretch handed to threads */
/* A MADV_WIPEONFORK page: it reads 0 in any child, also one made by _Fork() or clone(),
 * which run no atfork handler. A load, where asking getpid() would be a system call. A
 * vfork child shares the page, and so is told apart from a fork child (mf_check_pid). */
static volatile uint64_t *mf_fork_canary;
static pthread_key_t mf_thread_key;
/* The slots of threads with a table, so that the process's exit can flush the pending
 * counts of threads still running (mf_flush_others); the slots of exited threads, for the
 * next new thread. Changed at thread set-up and exit only. */
static struct mf_slot *mf_slots_used, *mf_slots_free;
static uint32_t mf_slots_lock;
/* The process image's first table: a thread that cannot have one of its own records here. */
static struct mf_table *mf_first_table;
/* Calls made before start-up by size class (weight 1, unprofiled): the first thread set up
 * after them takes them into its histogram. */
static struct {
    uint64_t calls[MF_SIZE_CLASSES], bytes[MF_SIZE_CLASSES];
} mf_early_sizes MF_LARGE_ZEROED;

#define MF_EXACT_CHUNK 64 /* a thread takes the exact budget in chunks: less contention */
#define MF_EXACT_TIMED 16 /* one sample of the exact stretch in 16 is timed (mf_record_slow) */
#define MF_COST_SHARE (MF_COST_SHARE_PPM / 1e6)
#define MF_COUNTDOWN_OFF (INT64_MAX / 2) /* not profiling: the hot path only counts */
/* The slow path's own stack: libunwind's first use in a thread takes ~10 KiB, a signal
 * handler that interrupts a sample runs on it too; pages never touched cost nothing. */
#define MF_SLOT_STACK_BYTES (256u << 10)
#define MF_PAGE_BYTES 4096u

/* ---- sampling ---------------------------------------------------------------------- */

static uint64_t mf_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void mf_rng_seed(struct mf_slot *s, uint64_t seq)
{
    uint64_t x = mf_opt.seed_set ? mf_opt.seed : mf_stamp ^ mf_now_ns();
    x ^= seq * 0xd1b54a32d192ed03u;
    s->rng[0] = mf_splitmix(&x);
    s->rng[1] = mf_splitmix(&x) | 1;
}

static uint64_t mf_rng_next(struct mf_slot *s)
{
    uint64_t s0 = s->rng[0], s1 = s->rng[1], r = s0 + s1;
    s1 ^= s0;
    s->rng[0] = ((s0 << 24) | (s0 >> 40)) ^ s1 ^ (s1 << 16);
    s->rng[1] = (s1 << 37) | (s1 >> 27);
    return r;
}

/* The exact stretch is the process's first mf_opt.exact_calls calls (100,000), a cap
 * counted in calls, not in time: a time cap (5 ms until this version) ran out on a busy
 * machine, or on a short run's first, cold samples, and left a short run sampled. */
static bool mf_take_exact(struct mf_thread *t)
{
    if (t->exact_left)
        return true;
    int64_t left = __atomic_load_n(&mf_exact_budget, __ATOMIC_RELAXED);
    while (left > 0) {
        int64_t take = left < MF_EXACT_CHUNK ? left : MF_EXACT_CHUNK;
        if (__atomic_compare_exchange_n(&mf_exact_budget, &left, left - take, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            __atomic_fetch_add(&mf_exact_taken, (uint64_t)take, __ATOMIC_RELAXED);
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
    uint64_t n = mf_opt.sample_interval ? mf_opt.sample_interval : t->slot->interval;
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
    struct mf_slot *s = t->slot;
    double u = ((double)(mf_rng_next(s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
    if (s->draw_n != n) { /* a fixed MALLOC_FREQ_SAMPLE keeps it; the default mode's moves */
        s->draw_n = n;
        s->draw_log_q = mf_log1p(-1.0 / (double)n);
    }
    double c = mf_geometric_by(u, s->draw_log_q);
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
    struct mf_slot *s = t->slot;
    double cost = (double)(t1 - t0);
    if (!new_stack) {
        if (s->sample_ns > 0 && cost > 2 * s->sample_ns)
            cost = 2 * s->sample_ns;
        s->sample_ns = s->sample_ns > 0 ? (3 * s->sample_ns + cost) / 4 : cost;
    }
    if (s->sample_end_ns && t0 > s->sample_end_ns && s->sample_ns > 0) {
        double per_call = (double)(t0 - s->sample_end_ns) / (double)t->drawn;
        s->call_ns = s->call_ns <= 0 || per_call < s->call_ns ? per_call
                                                               : (3 * s->call_ns + per_call) / 4;
        double n = s->sample_ns / (MF_COST_SHARE * s->call_ns);
        double most = s->interval ? 2.0 * (double)s->interval : 2.0;
        n = n > most ? most : n;
        s->interval = n < 1 ? 1 : n > MF_INTERVAL_MAX ? MF_INTERVAL_MAX : (uint64_t)n;
    }
    s->sample_end_ns = t1;
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

bool mf_forked(void)
{
    return mf_fork_canary && *mf_fork_canary == 0;
}

static void mf_after_fork_child(bool prepared);

/* ---- the slow path: unprofiled samples, the re-entry guard ------------------------ */

/* A shared table is written under its lock by every writer. */
static struct mf_table *mf_table_lock(struct mf_table *tab)
{
    if (tab->shared)
        mf_spin_lock(&tab->lock);
    return tab;
}

static void mf_table_unlock(struct mf_table *tab)
{
    if (tab->shared)
        mf_spin_unlock(&tab->lock);
}

/* A sample's weight w in the size histogram (under the table's lock): w calls and w * size
 * bytes, and their variances' w(w-1) and w(w-1) * size^2; nothing for those with w = 1.
 * cls is mf_size_class(size), which the caller has. */
static void mf_size_add(struct mf_thread_header *h, uint64_t w, uint64_t size, uint32_t cls)
{
    struct mf_size_class *c = &h->sizes[cls];
    c->calls += w;
    c->bytes += w * size;
    if (w > 1) {
        c->calls_var += w * (w - 1);
        c->bytes_var += (double)w * (double)(w - 1) * (double)size * (double)size;
    }
}

static void mf_unprofiled(struct mf_thread *t, uint64_t weight, size_t size)
{
    struct mf_table *tab = mf_table_lock(t->slot->table);
    struct mf_thread_header *h = tab->hdr;
    h->unprofiled_samples++;
    h->unprofiled_calls += weight;
    h->unprofiled_bytes += weight * size;
    h->unprofiled_calls_sq += weight * weight;
    if (weight > 1)
        h->unprofiled_bytes_var += (double)weight * (double)(weight - 1) * (double)size * (double)size;
    mf_size_add(h, weight, size, mf_size_class(size));
    mf_table_unlock(tab);
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

void mf_spin_lock(uint32_t *lock)
{
    while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

void mf_spin_unlock(uint32_t *lock)
{
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

/* Adds to a table's exact totals; a shared table's are added to atomically, so that its
 * writers need not hold the table's lock for it. */
static void mf_totals_add(struct mf_table *tab, struct mf_totals *to, int fn, uint64_t calls,
                          uint64_t bytes)
{
    if (tab->shared) {
        __atomic_fetch_add(&to->calls[fn], calls, __ATOMIC_RELAXED);
        __atomic_fetch_add(&to->bytes[fn], bytes, __ATOMIC_RELAXED);
    } else { /* one writer at a time (the flush lock, or nothing pending): plain adds */
        MF_PENDING_ADD(to->calls[fn], calls);
        MF_PENDING_ADD(to->bytes[fn], bytes);
    }
}

_Static_assert(MF_FN_COUNT % 4 == 0, "mf_nothing_pending reads the counters four at a time");

static bool mf_nothing_pending(const struct mf_thread *t)
{
    /* No branch per function and four chains of ORs: this runs at every recorded call, and
     * one chain through the 16 counters was 7 % of an exact run */
    const uint64_t *c = t->pending.calls;
    uint64_t a = 0, b = 0, d = 0, e = 0;
    for (int fn = 0; fn < MF_FN_COUNT; fn += 4) {
        a |= c[fn];
        b |= c[fn + 1];
        d |= c[fn + 2];
        e |= c[fn + 3];
    }
    return !(a | b | d | e);
}

/* The owner's flush: the pending counts, less what the process's exit already took, go to
 * the file. Without a table they stay pending. The lock only excludes mf_flush_others, so a
 * thread no longer on the list takes none (TSan's atomics crash in a thread's last
 * destructor round). The thread is busy meanwhile (mf_enter), so a signal handler's call
 * cannot flush into it. */
static void mf_flush(struct mf_thread *t)
{
    if (!t->totals)
        return;
    int first = 0;
    while (first < MF_FN_COUNT && !t->pending.calls[first])
        first++;
    if (first == MF_FN_COUNT) /* recording every call: the hot path counted nothing */
        return;
    struct mf_slot *s = t->slot;
    int64_t saved = mf_enter(t);
    bool listed = s->listed;
    if (listed)
        mf_spin_lock(&s->flush_lock);
    for (int fn = first; fn < MF_FN_COUNT; fn++) {
        if (!t->pending.calls[fn]) /* then nothing was proxied either */
            continue;
        mf_totals_add(s->table, t->totals, fn, t->pending.calls[fn] - s->proxied.calls[fn],
                      t->pending.bytes[fn] - s->proxied.bytes[fn]);
        s->live_calls += t->pending.calls[fn];
        t->pending.calls[fn] = t->pending.bytes[fn] = 0;
        s->proxied.calls[fn] = s->proxied.bytes[fn] = 0;
    }
    if (listed)
        mf_spin_unlock(&s->flush_lock);
    mf_leave(t, saved);
}

/* At the process's exit: the pending counts of the other threads, which may still be
 * running (or blocked forever), go to their files. Only what is pending now: an owner
 * adds its later calls to `pending`, which `proxied` keeps from being counted twice. */
static void mf_flush_others(struct mf_thread *self)
{
    mf_spin_lock(&mf_slots_lock);
    for (struct mf_slot *o = mf_slots_used; o; o = o->next) {
        struct mf_thread *ot = o->owner;
        if (ot == self)
            continue;
        mf_spin_lock(&o->flush_lock);
        for (int fn = 0; fn < MF_FN_COUNT; fn++) {
            uint64_t calls = __atomic_load_n(&ot->pending.calls[fn], __ATOMIC_RELAXED);
            uint64_t bytes = __atomic_load_n(&ot->pending.bytes[fn], __ATOMIC_RELAXED);
            if (calls == o->proxied.calls[fn]) /* nothing new: the owner may be counting */
                continue;                        /* into its totals directly (mf_record_slow) */
            mf_totals_add(o->table, ot->totals, fn, calls - o->proxied.calls[fn],
                          bytes - o->proxied.bytes[fn]);
            o->proxied.calls[fn] = calls;
            o->proxied.bytes[fn] = bytes;
        }
        mf_spin_unlock(&o->flush_lock);
    }
    mf_spin_unlock(&mf_slots_lock);
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

/* ---- slots: a thread's cold state, table and stack ---------------------------------- */

/* A slot from the pool, or a new one: [guard page][stack][struct mf_slot]. No file yet. */
static struct mf_slot *mf_slot_acquire(void)
{
    mf_spin_lock(&mf_slots_lock);
    struct mf_slot *s = mf_slots_free;
    if (s)
        mf_slots_free = s->next_free;
    mf_spin_unlock(&mf_slots_lock);
    if (s) {
        /* Another thread's stack, which may be unmapped by now. Only here: a fork child
         * sets up the forking thread's slot again, on the same stack, and keeps its bounds
         * (no /proc/self/maps read in a shell's child before it execs). */
        s->stack_lo = s->stack_hi = 0;
        s->memo.kind = MF_MEMO_NONE;
        return s;
    }
    size_t cold = (sizeof *s + MF_PAGE_BYTES - 1) & ~(size_t)(MF_PAGE_BYTES - 1);
    size_t total = MF_PAGE_BYTES + MF_SLOT_STACK_BYTES + cold;
    char *m = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m + MF_PAGE_BYTES, total - MF_PAGE_BYTES, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, total);
        return NULL;
    }
    s = (struct mf_slot *)(m + MF_PAGE_BYTES + MF_SLOT_STACK_BYTES);
    s->stack_top = s;
    static bool first = true;
    if (__atomic_exchange_n(&first, false, __ATOMIC_RELAXED)) {
        /* The process's first thread, often its only one: the pages of this slot that a
         * short walk touches, in four system calls instead of eight faults (`ls`). Not for
         * later threads, which would each hold the pages whether they walk or not. */
        mf_prefault((char *)s - 3 * MF_PAGE_BYTES,
                    3 * MF_PAGE_BYTES + offsetof(struct mf_slot, memo.frame) + 1);
        mf_prefault(&s->memo.read[0], 1);
        mf_prefault(&s->walk.frame[0], 1);
        mf_prefault(&s->walk.read[0], 1);
    }
    return s;
}

static void mf_slots_list(struct mf_slot *s)
{
    mf_spin_lock(&mf_slots_lock);
    s->prev = NULL;
    s->next = mf_slots_used;
    if (mf_slots_used)
        mf_slots_used->prev = s;
    mf_slots_used = s;
    s->listed = true;
    mf_spin_unlock(&mf_slots_lock);
}

static void mf_slots_unlist(struct mf_slot *s)
{
    mf_spin_lock(&mf_slots_lock);
    if (s->prev)
        s->prev->next = s->next;
    else if (mf_slots_used == s)
        mf_slots_used = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    s->listed = false;
    mf_spin_unlock(&mf_slots_lock);
}

static void mf_slot_release(struct mf_slot *s)
{
    s->owner = NULL;
    mf_spin_lock(&mf_slots_lock);
    s->next_free = mf_slots_free;
    mf_slots_free = s;
    mf_spin_unlock(&mf_slots_lock);
}

/* ---- the slow path: set-up and samples ------------------------------------------- */

/* Gives the thread's slot a table: its own (the one the slot had, or a new file), else the
 * process's first table, shared. Runs on the slot's stack. */
static void mf_thread_setup(struct mf_thread *t)
{
    struct mf_slot *s = t->slot;
    uint64_t seq = __atomic_fetch_add(&mf_thread_seq, 1, __ATOMIC_RELAXED);
    if (s->gen != mf_gen) { /* made before a fork: the parent's file */
        mf_table_forget(&s->own);
        s->gen = mf_gen;
    }
    mf_rng_seed(s, seq);
    /* A slot from the pool keeps the sampling rate its last thread learnt (threads of a
     * pool do alike): a short thread then draws its first interval at that rate, instead
     * of sampling every call until it has learnt one, and most take no sample at all (each
     * new thread's first samples cost libunwind ~100 us of cold caches). Unbiased all the
     * same: a sample's weight is the interval it was drawn with. */
    if (!s->own.hdr) /* new, or forgotten after a fork */
        s->interval = 0, s->call_ns = s->sample_ns = 0;
    s->sample_end_ns = s->samples = 0;
    s->thread_seq = seq;
    s->live_calls = 0;
    s->live_pending = false;
    s->flush_lock = 0;
    memset(&s->proxied, 0, sizeof s->proxied);
    s->table = NULL;

    if (s->own.hdr || !mf_table_create(&s->own, seq))
        s->table = &s->own;
    struct mf_table *first = NULL;
    bool sharing = false;
    if (s->table) {
        /* The process's first table is always written under its lock: a thread may join
         * it at any moment, and the owner must not be half-way through an entry then. */
        if (__atomic_compare_exchange_n(&mf_first_table, &first, s->table, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            s->table->shared = 1;
    } else if ((first = __atomic_load_n(&mf_first_table, __ATOMIC_ACQUIRE))) {
        s->table = first;
        sharing = true;
    } else {
        t->state = MF_THREAD_FAILED;
        return;
    }
    struct mf_table *tab = mf_table_lock(s->table);
    struct mf_thread_header *h = tab->hdr;
    if (sharing)
        h->flags |= MF_THREAD_SHARED;
    h->threads++;
    h->flags &= ~MF_THREAD_FINISHED;
    h->unprofiled_samples += t->early_calls;
    h->unprofiled_calls += t->early_calls;
    h->unprofiled_bytes += t->early_bytes;
    h->unprofiled_calls_sq += t->early_calls;
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) { /* calls before start-up, of any thread */
        if (!__atomic_load_n(&mf_early_sizes.calls[c], __ATOMIC_RELAXED))
            continue;
        h->sizes[c].calls += __atomic_exchange_n(&mf_early_sizes.calls[c], 0, __ATOMIC_RELAXED);
        h->sizes[c].bytes += __atomic_exchange_n(&mf_early_sizes.bytes[c], 0, __ATOMIC_RELAXED);
    }
    mf_table_unlock(tab);
    t->early_calls = t->early_bytes = 0;
    t->totals = &h->totals;
    t->state = MF_THREAD_READY;
    s->owner = t;
    pthread_setspecific(mf_thread_key, t);
    mf_slots_list(s);
}

static void mf_process_start(void);

/* The first slow-path call of a thread, or of a fork child: what needs files and stack.
 * errno is the program's: start-up's system calls may fail as expected (mkdir finds the
 * directory of the image this one was exec'd from: EEXIST), and a program may read errno
 * after a call that allocated (getpwnam's "not found" is NULL with errno unchanged). */
static void mf_setup_on_stack(void *arg)
{
    struct mf_thread *t = arg;
    int err = errno;
    uint64_t mask;
    mf_signals_block(&mask); /* a handler's fork must find the files made or not begun */
    bool vfork_child = false;
    if (__atomic_exchange_n(&mf_start_pending, 0, __ATOMIC_ACQ_REL)) {
        vfork_child = getpid() != mf_start_pid;
        if (vfork_child) /* the parent's to start */
            __atomic_store_n(&mf_start_pending, 1, __ATOMIC_RELEASE);
        else
            mf_process_start();
    }
    if (!vfork_child && mf_ready && t->state == MF_THREAD_NEW)
        mf_thread_setup(t);
    mf_signals_restore(&mask);
    errno = err;
}

/* Returns false if the pid is not this image's: a vfork child, which shares our memory
 * (and so the canary) and must leave the parent's state as it is. A child that skipped
 * the atfork handler is caught by the canary first (mf_record_slow). */
bool mf_check_pid(void)
{
    if (getpid() == mf_pid)
        return true;
    if (!mf_fork_canary)
        mf_after_fork_child(false); /* no canary (Linux < 4.14): taken for a fork child */
    return false;
}

/* Runs on the slot's stack: the stack, the table entry, the cost. */
static void mf_sample_on_stack(void *arg)
{
    struct mf_thread *t = arg;
    struct mf_slot *s = t->slot;
    uint32_t max = mf_opt.max_depth, own = s->nown, n = s->npcs;
    uint32_t flags = (s->large ? MF_ENTRY_LARGE : 0) | MF_ENTRY_SIZED;
    uintptr_t *pcs = s->pcs + own;
    n -= own;
    if (n > max) {
        n = max;
        flags |= MF_ENTRY_TRUNCATED;
    }
    /* Keyed by size class too (mf_format.h, MF_ENTRY_SIZED): the class word follows the
     * frames (pcs has room: n <= max_depth). */
    uintptr_t kept = pcs[n]; /* a frame past max_depth: the walk's memo keeps pcs as found */
    uint32_t cls = mf_size_class(s->size);
    pcs[n] = cls;
    struct mf_table *tab = mf_table_lock(s->table);
    uint32_t epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
    /* The walk's outermost frames that are the last walk's are the table's last path's, if
     * that was this thread's last walk, whole (a truncated stack's outermost frame moves
     * with its depth). */
    uint32_t same = tab->path_slot == s && tab->path_seq + 1 == s->walk_seq &&
                            !tab->path_truncated && !(flags & MF_ENTRY_TRUNCATED)
                        ? s->walk_same
                        : 0;
    uint32_t new_frames = 0;
    struct mf_entry *e =
        mf_table_find(tab, pcs, n, flags | epoch << MF_ENTRY_EPOCH_SHIFT, same, &new_frames);
    if (!e) {
        /* A new stack. With frames never met before: are they in the modules we know? A
         * library loaded since, or one mapped where another was (then the epoch grows and
         * the stack is the new epoch's). A stack whose frames were all met (a size class
         * new to it) is as known as they are, like any stack found: no system call then.
         * Not in a vfork child: the loader's lock may be held by a thread of the parent,
         * which waits for us. The module records and the table's growth make system
         * calls, whose failures are not the program's (errno). */
        int err = errno;
        if (new_frames) {
            mf_table_unlock(tab);
            if (mf_check_pid()) {
                if (!mf_rules) /* deferred libunwind, from the next sample on; with rules it
                                * waits until a stack needs it */
                    mf_unwind_load_if_safe();
                if (!mf_modules_cover(pcs, new_frames) || mf_modules_changed())
                    mf_modules_refresh();
            }
            epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
            tab = mf_table_lock(s->table);
        }
        e = mf_table_upsert(tab, pcs, n, flags | epoch << MF_ENTRY_EPOCH_SHIFT);
        errno = err;
    }
    bool new_stack = e && e->samples == 0;
    if (e) {
        uint64_t w = s->weight;
        e->samples++;
        e->calls += w;
        e->bytes += w * s->size;
        e->calls_sq += w * w;
        if (w > 1)
            e->bytes_var += (double)w * (double)(w - 1) * (double)s->size * (double)s->size;
        mf_size_add(tab->hdr, w, s->size, cls);
        if ((++s->samples & 63) == 1) /* the clock costs as much as the rest of an exact sample */
            tab->hdr->last_ns = mf_now_ns();
        if (mf_opt.live) /* off, no call: 21 instructions of a sample at N=1 */
            mf_live_note(t, tab, e);
    }
    tab->path_slot = s;
    tab->path_seq = s->walk_seq;
    tab->path_truncated = flags & MF_ENTRY_TRUNCATED;
    mf_table_unlock(tab);
    pcs[n] = kept;
    if (!e)
        mf_unprofiled(t, s->weight, s->size);
    s->new_stack = new_stack;
}

/* A call at or above MALLOC_FREQ_LARGE, counted, on a thread that is set up: a sample of
 * weight 1, outside the sampled stream (the countdown is left as it is, so the other calls'
 * samples stay unbiased). Its time is left out of the program's time per call, like a
 * sample's. Inlined: the unwinder starts from mf_record_slow's frame (entry_fp, ret). */
static inline __attribute__((always_inline)) void mf_record_large(struct mf_thread *t, size_t size,
                                                                uintptr_t ret)
{
    struct mf_slot *s = t->slot;
    if (t->paused) {
        mf_unprofiled(t, 1, size);
        return;
    }
    int64_t saved = mf_enter(t);
    s->entry_fp = (uintptr_t)__builtin_frame_address(0);
    s->ret = ret;
    s->weight = 1;
    s->size = size;
    s->large = true;
    bool adaptive = !mf_opt.sample_interval;
    uint64_t t0 = adaptive ? mf_mono_ns() : 0;
    s->npcs = mf_unwind(s, mf_opt.max_depth + MF_OWN_FRAMES_MAX + 1, &s->nown);
    mf_call_on_stack(s->stack_top, mf_sample_on_stack, t);
    if (adaptive && s->sample_end_ns)
        s->sample_end_ns += mf_mono_ns() - t0;
    mf_leave(t, saved);
}

static void mf_slow_done(struct mf_thread **t)
{
    (*t)->in_slow = false;
}

void mf_record_slow(enum mf_fn fn, size_t size)
{
    /* Cleared at every return: a fork from a signal handler that interrupted this call
     * tells the child it may go on with it (mf_after_fork_child). */
    struct mf_thread *t __attribute__((cleanup(mf_slow_done))) = &mf_tls;
    t->in_slow = true;
    uintptr_t ret = (uintptr_t)__builtin_return_address(0);
    /* The hot path sent this call here for its size (without counting it down) when it is
     * at least the thread's `large`, else because the countdown ended. `large` is 0 until
     * the thread's first call here, and follows the options from then on. */
    uint64_t limit = t->large;
    bool large = mf_opt.large && size >= mf_opt.large;
    t->large = mf_opt.large ? mf_opt.large : UINT64_MAX;
    if (MF_UNLIKELY(mf_forked()))
        mf_after_fork_child(false); /* _Fork() or clone() skipped our atfork handler */
    if (t->busy) {
        t->countdown = 1; /* the profiler's own call: see mf_enter() */
        return;
    }
    /* With nothing pending (recording every call) the process's exit never writes this
     * thread's totals (mf_flush_others): the call goes straight in, no lock. Otherwise it
     * goes through `pending` and the flush, under the lock the exit takes too. */
    struct mf_totals *counted = t->totals; /* where this call went, if straight in */
    if (t->totals && mf_nothing_pending(t)) {
        mf_totals_add(t->slot->table, t->totals, fn, 1, size);
        t->slot->live_calls++;
    } else {
        counted = NULL;
        MF_PENDING_ADD(t->pending.calls[fn], 1);
        MF_PENDING_ADD(t->pending.bytes[fn], size);
        mf_flush(t);
    }
    if (!large) {
        if (size >= limit && --t->countdown > 0) /* not counted down on the hot path */
            return;
    } else if (size < limit) {
        t->countdown++; /* counted down on the hot path: a large call is not of the stream */
    }

    if (MF_UNLIKELY(t->state != MF_THREAD_READY || !mf_ready)) {
        if (t->state == MF_THREAD_EXITED || t->state == MF_THREAD_FAILED) {
            t->countdown = MF_COUNTDOWN_OFF;
            return;
        }
        if (!mf_ready && !mf_start_pending) {
            /* Before start-up finished (or never, if profiling is off): count every call. */
            t->early_calls++;
            t->early_bytes += size;
            __atomic_fetch_add(&mf_early_sizes.calls[mf_size_class(size)], 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&mf_early_sizes.bytes[mf_size_class(size)], size, __ATOMIC_RELAXED);
            t->countdown = mf_disabled ? MF_COUNTDOWN_OFF : 1;
            return;
        }
        if (!t->slot && !(t->slot = mf_slot_acquire())) {
            t->state = MF_THREAD_FAILED;
            t->countdown = MF_COUNTDOWN_OFF;
            return;
        }
        int64_t saved = mf_enter(t);
        mf_call_on_stack(t->slot->stack_top, mf_setup_on_stack, t);
        mf_leave(t, saved);
        if (t->state != MF_THREAD_READY) {
            if (t->state == MF_THREAD_NEW && !mf_ready && !mf_disabled) {
                /* Another thread is starting the profile, or a vfork child waits for its
                 * parent to: counted as before start-up, set up at a later call. */
                t->early_calls++;
                t->early_bytes += size;
                t->countdown = 1;
                return;
            }
            if (t->state == MF_THREAD_NEW && !mf_ready) /* profiling is off */
                t->state = MF_THREAD_FAILED;
            t->countdown = MF_COUNTDOWN_OFF;
            return;
        }
        mf_flush(t); /* what was counted before the table existed */
        /* This call went into the parent's totals, and a fork from a signal handler that
         * interrupted it made this image (mf_after_fork_child): its sample, below, goes
         * into this image's table, so its count does too. */
        if (counted && counted != t->totals)
            mf_totals_add(t->slot->table, t->totals, fn, 1, size);
    }
    if (large) {
        mf_record_large(t, size, ret);
        return;
    }
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
    struct mf_slot *s = t->slot;
    if (t->paused) {
        mf_unprofiled(t, t->weight, size);
        t->countdown = mf_arm(t, mf_next_countdown(t));
        return;
    }
    mf_enter(t);
    s->entry_fp = (uintptr_t)__builtin_frame_address(0);
    s->ret = ret;
    s->weight = t->weight;
    s->size = size;
    s->large = false;
    /* The default mode times its samples (mf_adapt), two clock reads of ~30 ns each: as
     * much as the rest of a sample of the exact stretch. There, one sample in MF_EXACT_TIMED
     * is timed, and the end of the one before it read, which gives the program's time for
     * one call; the others leave no end time, so no interval spans an untimed sample. */
    bool adaptive = !mf_opt.sample_interval;
    uint32_t phase = t->exact ? s->exact_seq++ % MF_EXACT_TIMED : 0;
    bool timed = adaptive && phase == 0;
    uint64_t t0 = timed ? mf_mono_ns() : 0;
    s->npcs = mf_unwind(s, mf_opt.max_depth + MF_OWN_FRAMES_MAX + 1, &s->nown);
    mf_call_on_stack(s->stack_top, mf_sample_on_stack, t); /* the table */
    if (timed)
        mf_adapt(t, t0, mf_mono_ns(), s->new_stack);
    else if (adaptive)
        s->sample_end_ns = phase == MF_EXACT_TIMED - 1 ? mf_mono_ns() : 0;
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
    __atomic_store_n(&mf_exact_taken, 0, __ATOMIC_RELAXED);
    mf_rules_setup();
    if (mf_lazy_start && !mf_rules)
        mf_unwind_load_if_safe(); /* the process's first allocation call, if it is safe */
    /* <base>/malloc_freq.<pid>, private, under the base settled at the first start-up
     * (mf_files.c); under AT_SECURE it fails silently. */
    if (mf_files_start() || mf_process_file_create()) {
        mf_dir[0] = '\0';
        mf_disabled = 1;
        mf_ready = 0;
        return;
    }
    mf_live_start();
    mf_ready = 1;
}

/* Whether the parent had other threads when it forked: one of them may have held the
 * loader's lock, which glibc does not reset in the child (mf_modules_inherit). Noted by the
 * prepare handler (glibc runs one fork's handlers at a time), and written only when it
 * changed: fork write-protects the parent's pages, and a page of ours the parent writes
 * after a fork, or before the next one without having written it since, costs it a page
 * fault (a copy while the child still shares it). Nothing is written back after the fork:
 * the child handler is what tells the child that this note is its fork's. */
static bool mf_fork_threaded;

static void mf_before_fork(void)
{
    bool threaded = !__libc_single_threaded;
    if (mf_fork_threaded != threaded)
        mf_fork_threaded = threaded;
}

/* The child of fork() must never write into its parent's files (they are shared mappings):
 * it forgets the parent's tables, and starts a directory of its own at its first call.
 * Nothing here blocks or calls into the loader: in the child of a threaded program, a lock
 * another thread of the parent held stays held. prepared: our atfork handlers ran, and
 * mf_fork_threaded is this fork's (else the parent is taken to have had other threads:
 * _Fork(), clone()). */
static void mf_after_fork_child(bool prepared)
{
    struct mf_thread *t = &mf_tls;
    if (mf_fork_canary)
        *mf_fork_canary = 1; /* this image's from now on */
    /* Forked by a signal handler that interrupted this thread in the slow path: when the
     * handler returns, the child goes on with that call, with the parent's table and live
     * heap, which are shared mappings. Private copies take their place, so that the child
     * writes nothing into its parent's files (the parent lost counts to the child's writes
     * racing its own). The copies are forgotten at the child's set-up. */
    if (prepared && (t->in_slow || t->busy) && t->slot) {
        if (t->slot->table)
            mf_table_privatize(t->slot->table);
        mf_live_privatize();
    }
    /* The loader's lock may stay held here for ever: by a thread of the parent that does not
     * exist here, or by this thread's iteration, interrupted by the handler that forked
     * (mf_dl_iterate). */
    bool frozen = prepared ? mf_fork_threaded || t->in_loader : true;
    t->in_loader = false;
    mf_modules_inherit(frozen);
    /* libunwind looks up each new return address with dl_iterate_phdr: in such a child the
     * frame-pointer walk, which needs nothing from the loader, takes the stacks. */
    if (frozen) {
        mf_unw_backtrace = NULL;
        mf_unwind_frozen = true; /* nor loaded later (mf_unwind_load_if_safe) */
    }
    mf_gen++;
    mf_ready = 0;
    mf_slots_used = NULL; /* the parent's other threads do not exist here */
    mf_slots_lock = 0;
    mf_first_table = NULL;
    mf_live_after_fork();
    memset(&t->pending, 0, sizeof t->pending); /* the parent's, which it flushes itself */
    t->totals = NULL;
    t->early_calls = t->early_bytes = 0;
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) /* read first: zero after start-up, and */
        if (mf_early_sizes.calls[c])                 /* a page written is a page copied */
            mf_early_sizes.calls[c] = mf_early_sizes.bytes[c] = 0;
    if (t->slot) {
        t->slot->listed = false;
        t->slot->next = t->slot->prev = NULL;
        t->slot->owner = NULL;
    }
    if (t->state != MF_THREAD_EXITED)
        t->state = MF_THREAD_NEW;
    t->exiting = false;
    t->sample_left = 0;
    t->weight = 0;
    t->exact_left = 0;
    t->exact = false;
    t->exit_round = 0;
    if (!mf_disabled) {
        mf_start_pid = getpid(); /* not blocking, no lock: the child's own pid */
        mf_start_pending = 1;
        t->countdown = 0;
    }
}

static void mf_fork_child(void)
{
    mf_after_fork_child(true);
}

/* glibc calls thread-specific destructors in up to PTHREAD_DESTRUCTOR_ITERATIONS rounds while
 * values are set. Other destructors (Rust's thread locals among them) still allocate, so the
 * thread keeps its table until the last round; calls made after that, by destructors of keys
 * created after ours in that same last round, are counted nowhere. Then the slot, with its
 * table and file, goes back to the pool for the next new thread. */
#ifdef __SANITIZE_THREAD__
/* TSan destroys a thread's state in the last round, before our key's destructor runs in it
 * (its key is older), and an atomic operation after that crashes inside TSan: under TSan
 * the thread ends one round earlier. */
#define MF_THREAD_EXIT_ROUND (PTHREAD_DESTRUCTOR_ITERATIONS - 1)
#else
#define MF_THREAD_EXIT_ROUND PTHREAD_DESTRUCTOR_ITERATIONS
#endif

static void mf_thread_exit(void *arg)
{
    struct mf_thread *t = arg;
    struct mf_slot *s = t->slot;
    if (++t->exit_round == 1 && s && s->listed) {
        /* Off the list in the first round, while TSan's per-thread state still exists. */
        mf_flush(t);
        mf_slots_unlist(s);
    }
    if (t->exit_round < MF_THREAD_EXIT_ROUND) {
        pthread_setspecific(mf_thread_key, t);
        return;
    }
    /* A thread that ends gives back the calls of the exact stretch it did not use, or
     * thousands of short threads would each take a chunk and leave the stretch short. */
    if (t->exact_left) {
        __atomic_fetch_add(&mf_exact_budget, (int64_t)t->exact_left, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&mf_exact_taken, t->exact_left, __ATOMIC_RELAXED);
        t->exact_left = 0;
    }
    if (s && t->state == MF_THREAD_READY && s->gen == mf_gen) {
        mf_flush(t);
        struct mf_table *tab = mf_table_lock(s->table);
        tab->hdr->last_ns = mf_now_ns();
        if (tab == &s->own && !tab->shared)
            tab->hdr->flags |= MF_THREAD_FINISHED;
        mf_table_unlock(tab);
    }
    t->state = MF_THREAD_EXITED;
    t->countdown = MF_COUNTDOWN_OFF;
    t->totals = NULL;
    t->slot = NULL;
    if (s && s->gen == mf_gen)
        mf_slot_release(s);
}

/* The start-up thread's table is made now, while the process can: it may setuid, chroot or
 * lower RLIMIT_NOFILE later, and threads that cannot make a table of their own then share
 * this one. */
static void mf_setup_start_thread(void)
{
    struct mf_thread *t = &mf_tls;
    if ((!mf_ready && !mf_start_pending) || t->state != MF_THREAD_NEW || (!t->slot && !(t->slot = mf_slot_acquire())))
        return;
    int64_t saved = mf_enter(t);
    mf_call_on_stack(t->slot->stack_top, mf_setup_on_stack, t);
    mf_leave(t, saved);
    mf_flush(t); /* the calls made before start-up */
}

/* Deferred start-up: the last moment the process has one thread (pthread_create, from
 * lib_preload/mf_guard.c), or keeps the right to add to its files (setuid and the rest),
 * outside malloc: libunwind, which otherwise waits for a stack the rules cannot walk
 * (mf_unwind.c), is loaded now if it may be (its allocations are the profiler's), or it
 * never could be once other threads run. The files still wait for the first allocation
 * call. errno is the program's: a call that succeeds leaves it as it was. */
void mf_core_before_threads(void)
{
    struct mf_thread *t = &mf_tls;
    if (!mf_lazy_start || !mf_start_pid || t->busy)
        return;
    int err = errno;
    int64_t saved = mf_enter(t);
    mf_unwind_load_if_safe();
    mf_leave(t, saved);
    errno = err;
}

/* Deferred start-up (mf_lazy_start): the profile starts at the process's first allocation
 * call, or here, at a safe point outside malloc where the program is about to give up what
 * making its files needs (setuid, chroot, setrlimit...: lib_preload/mf_guard.c). */
void mf_core_start_now(void)
{
    if (__atomic_load_n(&mf_start_pending, __ATOMIC_ACQUIRE) && !mf_tls.busy) {
        int err = errno;
        mf_setup_start_thread();
        errno = err;
    }
}

static void mf_before_loss_on_stack(void *arg)
{
    const uint64_t *uid = arg;
    if (mf_modules_changed()) /* libunwind, just loaded, or the program's own dlopens */
        mf_modules_refresh();
    mf_live_file_now();
    if (*uid != UINT64_MAX)
        mf_files_hand_over((uid_t)*uid);
}

/* A guarded call (lib_preload/mf_guard.c) is about to take away what making and adding to
 * the files needs: the profile is started if it is not yet, libunwind loaded, the modules
 * loaded since the process file was written are added to it, the live heap's file made;
 * and before a setuid that gives up root (uid: the effective uid it sets, else
 * UINT64_MAX), the directory and its files are given to that user, so that the process and
 * its children after it can go on making theirs there. Returns whether they were given:
 * mf_core_after_loss() takes them back if the call failed. errno is the program's. */
bool mf_core_before_loss(uint64_t uid)
{
    struct mf_thread *t = &mf_tls;
    mf_core_before_threads();
    mf_core_start_now();
    if (!mf_ready || t->busy || getpid() != mf_pid) /* not started, or a vfork child */
        return false;
    int err = errno;
    uid_t before = geteuid();
    int64_t saved = mf_enter(t);
    if (t->slot && t->state == MF_THREAD_READY)
        mf_call_on_stack(t->slot->stack_top, mf_before_loss_on_stack, &uid);
    else
        mf_before_loss_on_stack(&uid);
    mf_leave(t, saved);
    errno = err;
    return uid != UINT64_MAX && uid != before && before == 0 && mf_ready;
}

void mf_core_after_loss(bool handed, bool failed, uint64_t uid)
{
    if (handed) {
        mf_files_handed_over(failed);
    } else if (!failed && uid == 0 && mf_ready && !mf_tls.busy && getpid() == mf_pid &&
               mf_files_hand_over(0)) { /* root again (seteuid(0) after seteuid(u)) */
        mf_files_handed_over(false);
    }
}

void mf_core_init(void)
{
    static int started;
    if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
        return;
    int64_t saved = mf_enter(&mf_tls);
    mf_options_read();
    pthread_key_create(&mf_thread_key, mf_thread_exit);
    pthread_atfork(mf_before_fork, NULL, mf_fork_child);
    if (mf_lazy_start && !mf_opt.secure) {
        /* Nothing more until the first allocation call: a process that never allocates
         * makes no file and loads no libunwind (README "Overhead": start-up). */
        mf_start_pid = mf_pid = getpid();
        mf_start_pending = 1;
        mf_files_settle(); /* before the program can chdir */
        mf_leave(&mf_tls, saved);
        return;
    }
    mf_unwind_init();
    mf_process_start();
    mf_leave(&mf_tls, saved);
    mf_setup_start_thread();
}

__attribute__((constructor)) static void mf_core_constructor(void)
{
    mf_core_init();
}

/* The calls the exact stretch recorded: those handed to threads, less what the threads
 * still running hold unused. */
static uint64_t mf_exact_recorded(void)
{
    uint64_t taken = __atomic_load_n(&mf_exact_taken, __ATOMIC_RELAXED), held = 0;
    mf_spin_lock(&mf_slots_lock);
    for (struct mf_slot *o = mf_slots_used; o; o = o->next)
        if (o->owner)
            held += __atomic_load_n(&o->owner->exact_left, __ATOMIC_RELAXED);
    mf_spin_unlock(&mf_slots_lock);
    return held < taken ? taken - held : 0;
}

static void mf_exit_on_stack(void *arg)
{
    (void)arg;
    if (mf_modules_changed()) /* no system call when the loader did nothing since */
        mf_modules_refresh();
    mf_process_file_finish(mf_exact_recorded());
    mf_rule_cache_save();
}

/* Also flushes every thread's pending counts; from here on this thread flushes each call as
 * it is made, for the destructors and exit handlers that run after this one. Other threads
 * keep their pace: one still running at the very end can leave its last calls (fewer than
 * MF_FLUSH_CALLS) out, but a thread pool that a late destructor waits for is not slowed. */
__attribute__((destructor)) static void mf_core_destructor(void)
{
    struct mf_thread *t = &mf_tls;
    if (!mf_ready && t->early_calls && !t->busy)
        mf_core_start_now(); /* calls made only before start-up: they are still counted */
    if (!mf_ready || t->busy || getpid() != mf_pid) /* a vfork child that called exit() */
        return;
    t->exiting = true;
    mf_flush(t);
    int64_t saved = mf_enter(t);
    mf_flush_others(t);
    if (saved > 1 && t->state == MF_THREAD_READY) { /* the same sample, one call at a time */
        t->sample_left += saved - 1;
        saved = 1;
    }
    /* Any thread may call exit(), a 16 KiB one too: the module list takes a page of stack. */
    if (t->slot && t->state == MF_THREAD_READY)
        mf_call_on_stack(t->slot->stack_top, mf_exit_on_stack, NULL);
    else
        mf_exit_on_stack(NULL);
    mf_leave(t, saved);
}

/* ---- the public API ----------------------------------------------------------------- */

__attribute__((visibility("default"))) const char *malloc_freq_dir(void)
{
    mf_core_start_now();
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
