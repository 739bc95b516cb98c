/* Thread life: flushing the hot path's counts into the file, the slot pool (a thread's cold
 * state, table and stack), thread set-up and exit. */
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

/* The slots of threads with a table, so that the process's exit can flush the pending
 * counts of threads still running (mf_flush_others); the slots of exited threads, for the
 * next new thread. Changed at thread set-up and exit only. */
static struct mf_slot *mf_slots_used, *mf_slots_free;
static uint32_t mf_slots_lock;

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
void mf_totals_add(struct mf_table *tab, struct mf_totals *to, int fn, uint64_t calls,
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


/* The owner's flush: the pending counts, less what the process's exit already took, go to
 * the file. Without a table they stay pending. The lock only excludes mf_flush_others, so a
 * thread no longer on the list takes none (TSan's atomics crash in a thread's last
 * destructor round). The thread is busy meanwhile (mf_enter), so a signal handler's call
 * cannot flush into it. */
void mf_flush(struct mf_thread *t)
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
void mf_flush_others(struct mf_thread *self)
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


/* ---- slots: a thread's cold state, table and stack ---------------------------------- */


void mf_slots_forget(void)
{
    mf_slots_used = NULL;
    mf_slots_lock = 0;
}


/* A slot from the pool, or a new one: [guard page][stack][struct mf_slot]. No file yet. */
struct mf_slot *mf_slot_acquire(void)
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
        mf_prefault(&s->walk.frame[MF_WALK_MAX - 1], sizeof s->walk.frame[0]);
        mf_prefault(&s->walk.read[MF_MEMO_READS - 1], sizeof s->walk.read[0]);
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

void mf_slots_unlist(struct mf_slot *s)
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

void mf_slot_release(struct mf_slot *s)
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
void mf_thread_setup(struct mf_thread *t)
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
        s->interval = 0, s->sample_ns = s->span_ns = s->span_calls = 0;
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
    for (int fn = 0; fn < MF_FN_COUNT; fn++) { /* malloc_freq_thread_counts: this thread's */
        s->totals_base.calls[fn] = __atomic_load_n(&h->totals.calls[fn], __ATOMIC_RELAXED);
        s->totals_base.bytes[fn] = __atomic_load_n(&h->totals.bytes[fn], __ATOMIC_RELAXED);
    } /* are what the totals gain from here on (others add to a shared table's atomically) */
    mf_table_unlock(tab);
    t->early_calls = t->early_bytes = 0;
    t->totals = &h->totals;
    t->state = MF_THREAD_READY;
    s->owner = t;
    pthread_setspecific(mf_thread_key, t);
    mf_slots_list(s);
}


/* The first slow-path call of a thread, or of a fork child: what needs files and stack.
 * errno is the program's: start-up's system calls may fail as expected (mkdir finds the
 * directory of the image this one was exec'd from: EEXIST), and a program may read errno
 * after a call that allocated (getpwnam's "not found" is NULL with errno unchanged). */
void mf_setup_on_stack(void *arg)
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
    if (!vfork_child)
        mf_files_start_end(false);
    mf_signals_restore(&mask);
    errno = err;
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

void mf_thread_exit(void *arg)
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
    t->clean = false;
    t->totals = NULL;
    t->slot = NULL;
    if (s && s->gen == mf_gen)
        mf_slot_release(s);
}

/* The calls the exact stretch recorded: those handed to threads, less what the threads
 * still running hold unused. */
uint64_t mf_exact_recorded(void)
{
    uint64_t taken = __atomic_load_n(&mf_exact_taken, __ATOMIC_RELAXED), held = 0;
    mf_spin_lock(&mf_slots_lock);
    for (struct mf_slot *o = mf_slots_used; o; o = o->next)
        if (o->owner)
            held += __atomic_load_n(&o->owner->exact_left, __ATOMIC_RELAXED);
    mf_spin_unlock(&mf_slots_lock);
    return held < taken ? taken - held : 0;
}
