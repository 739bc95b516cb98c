/* The slow path of a call: counting it, setting its thread up, and taking its sample (the
 * stack, the table entry, the cost); the re-entry guard and unprofiled samples. */
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

/* ---- the slow path: unprofiled samples, the re-entry guard ------------------------ */

/* A shared table is written under its lock by every writer. */
struct mf_table *mf_table_lock(struct mf_table *tab)
{
    if (tab->shared)
        mf_spin_lock(&tab->lock);
    return tab;
}

void mf_table_unlock(struct mf_table *tab)
{
    if (tab->shared)
        mf_spin_unlock(&tab->lock);
}

/* A sample's weight w in the size histogram (under the table's lock): w calls and w * size
 * bytes, and their variances' w(w-1) and w(w-1) * size^2; nothing for those with w = 1.
 * cls is mf_size_class(size), which the caller has. */
void mf_size_add(struct mf_thread_header *h, uint64_t w, uint64_t size, uint32_t cls)
{
    struct mf_size_class *c = &h->sizes[cls];
    c->calls += w;
    c->bytes += w * size;
    if (w > 1) {
        c->calls_var += w * (w - 1);
        c->bytes_var += (double)w * (double)(w - 1) * (double)size * (double)size;
    }
}

void mf_unprofiled(struct mf_thread *t, uint64_t weight, size_t size)
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
int64_t mf_enter(struct mf_thread *t)
{
    int64_t saved = t->countdown;
    t->busy = 1;
    t->countdown = 1;
    return saved;
}

void mf_leave(struct mf_thread *t, int64_t countdown)
{
    t->countdown = countdown;
    t->busy = 0;
}

/* The table's last path is this slot's last walk, whole (a truncated stack's outermost frame
 * moves with its depth): the walk's outermost frames that are the last walk's are its. */
static inline bool mf_path_follows(const struct mf_table *tab, const struct mf_slot *s)
{
    return tab->path_slot == s && tab->path_seq + 1 == s->walk_seq && !tab->path_truncated;
}

/* A narrow entry holds a sample of weight w and size bytes (its 32-bit counts with room). */
static inline bool mf_narrow_takes(const struct mf_entry *e, uint64_t w, uint64_t size)
{
    return w == 1 && e->calls != UINT32_MAX && size <= UINT32_MAX - e->bytes;
}

/* The sample in s (its weight and size, class cls) added to entry e (v: its counts when it is
 * wide) and to the size histogram. */
static inline __attribute__((always_inline)) void
mf_sample_count(struct mf_table *tab, struct mf_slot *s, struct mf_entry *e,
                struct mf_entry_var *v, uint32_t cls)
{
    uint64_t w = s->weight;
    if (v) { /* samples before calls (mf_format.h) */
        v->samples++;
        v->calls_sq += w * w;
        if (w > 1)
            v->bytes_var += (double)w * (double)(w - 1) * (double)s->size * (double)s->size;
        v->calls += w;
        v->bytes += w * s->size;
    } else {
        e->calls++;
        e->bytes += (uint32_t)s->size;
    }
    mf_size_add(tab->hdr, w, s->size, cls);
    if ((++s->samples & 63) == 1) /* the clock costs as much as the rest of an exact sample */
        tab->hdr->last_ns = mf_now_ns();
}

/* Runs on the slot's stack: the stack, the table entry, the cost. */
static void mf_sample_on_stack(void *arg)
{
    struct mf_thread *t = arg;
    struct mf_slot *s = t->slot;
    uint32_t max = mf_opt.max_depth, first = s->first, n = s->npcs;
    uint32_t flags = (s->large ? MF_ENTRY_LARGE : 0) | MF_ENTRY_SIZED;
    uintptr_t *pcs = s->pcs + first;
    n -= first;
    if (n > max) {
        n = max;
        flags |= MF_ENTRY_TRUNCATED;
    }
    uint32_t cls = mf_size_class(s->size); /* entries are keyed by it (MF_ENTRY_SIZED) */
    struct mf_table *tab = mf_table_lock(s->table);
    uint32_t epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
    uint32_t same = mf_path_follows(tab, s) && !(flags & MF_ENTRY_TRUNCATED) ? s->walk_same : 0;
    struct mf_table_miss miss;
    struct mf_entry *e =
        mf_table_find(tab, pcs, n, flags | epoch << MF_ENTRY_EPOCH_SHIFT, cls, same, &miss);
    if (!e) {
        uint32_t new_frames = n - miss.found;
        /* A new stack. With frames never met before: are they in the modules we know? A
         * library loaded since, or one mapped where another was (then the epoch grows and
         * the stack is the new epoch's). A stack whose frames were all met (a size class
         * new to it) is as known as they are, like any stack found: no system call then.
         * Not in a vfork child: the loader's lock may be held by a thread of the parent,
         * which waits for us. The module records and the table's growth make system
         * calls, whose failures are not the program's (errno). New frames all in modules
         * the image started with need neither: nothing can have replaced those (a getpid
         * a new stack was 2 % of a compile's time in its exact stretch). */
        int err = errno;
        bool wide = s->weight != 1 || s->size > UINT32_MAX;
        if (new_frames && !(mf_rules && mf_modules_permanent(pcs, new_frames))) {
            mf_table_unlock(tab);
            if (mf_check_pid()) {
                if (!mf_rules) /* deferred libunwind, from the next sample on; with rules it
                                * waits until a stack needs it */
                    mf_unwind_load_if_safe();
                if (!mf_modules_cover(pcs, new_frames) || mf_modules_changed())
                    mf_modules_refresh();
            }
            epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
            /* unlocked: another thread may have made it, or the epoch moved */
            tab = mf_table_lock(s->table);
            e = mf_table_upsert(tab, pcs, n, flags | epoch << MF_ENTRY_EPOCH_SHIFT, cls, wide);
        } else {
            e = mf_table_insert(tab, n, flags | epoch << MF_ENTRY_EPOCH_SHIFT, cls, wide, &miss);
        }
        errno = err;
    }
    struct mf_entry_var *v = e && mf_entry_wide(e) ? (struct mf_entry_var *)(e + 1) : NULL;
    bool new_stack = e && (v ? v->calls : e->calls) == 0; /* a sample adds a weight of at least 1 */
    /* The exact stretch's entry, sampled, or one whose 32-bit counts this call would overflow */
    if (e && !v && !mf_narrow_takes(e, s->weight, s->size)) {
        e = mf_table_widen(tab, e, cls);
        v = e ? (struct mf_entry_var *)(e + 1) : NULL;
    }
    if (e) {
        mf_sample_count(tab, s, e, v, cls);
        if (mf_opt.live) /* off, no call: 21 instructions of a sample at N=1 */
            mf_live_note(t, tab, e);
    }
    tab->path_slot = s;
    tab->path_seq = s->walk_seq;
    tab->path_truncated = flags & MF_ENTRY_TRUNCATED;
    mf_table_unlock(tab);
    if (!e)
        mf_unprofiled(t, s->weight, s->size);
    s->new_stack = new_stack;
}

/* The sample of a stack that is the thread's last one again, whole (its walk's memo found
 * every word it read unchanged), where counting it into that stack's last entry of its class
 * is all there is to do: weight 1 (the exact stretch, or every call recorded), a narrow
 * entry with room for it, no live heap. On the program's stack: the switch to the slot's,
 * the lookup's set-up and its checks for a new stack were a third of such a sample's
 * instructions (a loop's calls, the microbenchmark's). False: the full sample
 * (mf_sample_on_stack) takes it. */
static inline __attribute__((always_inline)) bool mf_sample_again(struct mf_slot *s)
{
    uint32_t n = s->npcs - s->first;
    if (s->weight != 1 || mf_opt.live || n > mf_opt.max_depth)
        return false;
    uint32_t cls = mf_size_class(s->size);
    struct mf_table *tab = mf_table_lock(s->table); /* shared: the process's first table */
    uint32_t epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
    struct mf_entry *e =
        mf_path_follows(tab, s)
            ? mf_table_again(tab, n, MF_ENTRY_SIZED | epoch << MF_ENTRY_EPOCH_SHIFT, cls)
            : NULL;
    bool counted = e && !mf_entry_wide(e) && mf_narrow_takes(e, 1, s->size);
    if (counted) {
        mf_sample_count(tab, s, e, NULL, cls);
        tab->path_seq = s->walk_seq;
        s->new_stack = false;
    }
    mf_table_unlock(tab);
    return counted;
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
    s->npcs = mf_unwind(s, mf_opt.max_depth + MF_OWN_FRAMES_MAX + 1, &s->first);
    mf_call_on_stack(s->stack_top, mf_sample_on_stack, t);
    if (adaptive && s->sample_end_ns)
        s->sample_end_ns += mf_mono_ns() - t0;
    mf_leave(t, saved);
}

static void mf_slow_done(struct mf_thread **t)
{
    (*t)->clean = (*t)->clean && (*t)->countdown <= 1;
    (*t)->in_slow = false;
}

/* Step 1: the call counted, exactly. With nothing pending (recording every call) the
 * process's exit never writes this thread's totals (mf_flush_others): the call goes straight
 * in, no lock. Otherwise it goes through `pending` and the flush, under the lock the exit
 * takes too. Returns the totals it went into straight, or NULL. Nothing pending is known
 * without a look when the last slow path left it so, with a countdown of 1 (t->clean: every
 * call recorded, the exact stretch); the look at the 16 counters was 36 of a recorded
 * call's instructions. t->clean, cleared at entry, says on the way out that it was so. */
static inline __attribute__((always_inline)) struct mf_totals *
mf_count_call(struct mf_thread *t, enum mf_fn fn, size_t size)
{
    struct mf_totals *counted = t->totals;
    bool clean = t->clean;
    t->clean = false;
    if (t->totals && (clean || mf_nothing_pending(t))) {
        t->clean = true;
        mf_totals_add(t->slot->table, t->totals, fn, 1, size);
        t->slot->live_calls++;
        return counted;
    }
    MF_PENDING_ADD(t->pending.calls[fn], 1);
    MF_PENDING_ADD(t->pending.bytes[fn], size);
    mf_flush(t);
    return NULL;
}

/* Step 2: the thread set up to take samples (its slot, table and file), the first time.
 * False when the call ends here: before start-up (counted as such), profiling off, no slot.
 * counted: the totals step 1 added the call to. */
static inline __attribute__((always_inline)) bool
mf_thread_ready(struct mf_thread *t, enum mf_fn fn, size_t size, struct mf_totals *counted)
{
    if (MF_LIKELY(t->state == MF_THREAD_READY && mf_ready))
        return true;
    if (t->state == MF_THREAD_EXITED || t->state == MF_THREAD_FAILED) {
        t->countdown = MF_COUNTDOWN_OFF;
        return false;
    }
    if (!mf_ready && !mf_start_pending) {
        /* Before start-up finished (or never, if profiling is off): count every call. */
        t->early_calls++;
        t->early_bytes += size;
        __atomic_fetch_add(&mf_early_sizes.calls[mf_size_class(size)], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&mf_early_sizes.bytes[mf_size_class(size)], size, __ATOMIC_RELAXED);
        t->countdown = mf_disabled ? MF_COUNTDOWN_OFF : 1;
        return false;
    }
    if (!t->slot && !(t->slot = mf_slot_acquire())) {
        t->state = MF_THREAD_FAILED;
        t->countdown = MF_COUNTDOWN_OFF;
        return false;
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
            return false;
        }
        if (t->state == MF_THREAD_NEW && !mf_ready) /* profiling is off */
            t->state = MF_THREAD_FAILED;
        t->countdown = MF_COUNTDOWN_OFF;
        return false;
    }
    mf_flush(t); /* what was counted before the table existed */
    /* This call went into the parent's totals, and a fork from a signal handler that
     * interrupted it made this image (mf_after_fork_child): its sample, below, goes into
     * this image's table, so its count does too. */
    if (counted && counted != t->totals)
        mf_totals_add(t->slot->table, t->totals, fn, 1, size);
    return true;
}

/* Step 3: the sample of the stream this call ends the countdown of: the stack from
 * mf_record_slow's frame (inlined there: entry_fp, ret), its table entry, the cost, and the
 * next countdown. */
static inline __attribute__((always_inline)) void mf_take_sample(struct mf_thread *t,
                                                                 size_t size, uintptr_t ret)
{
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
    s->npcs = mf_unwind(s, mf_opt.max_depth + MF_OWN_FRAMES_MAX + 1, &s->first);
    if (!(s->walk_repeated && mf_sample_again(s)))
        mf_call_on_stack(s->stack_top, mf_sample_on_stack, t); /* the table */
    if (timed)
        mf_adapt(t, t0, mf_mono_ns(), s->new_stack);
    else if (adaptive)
        s->sample_end_ns = phase == MF_EXACT_TIMED - 1 ? mf_mono_ns() : 0;
    mf_leave(t, mf_arm(t, mf_next_countdown(t)));
}

/* A call the hot path sent here: its countdown ended, or it is at least the thread's
 * `large`. Counted (step 1), then, for a call that is sampled, the thread set up (step 2)
 * and the sample taken (step 3, or the large call's own). */
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
    struct mf_totals *counted = mf_count_call(t, fn, size);
    if (!large) {
        if (size >= limit && --t->countdown > 0) /* not counted down on the hot path */
            return;
    } else if (size < limit) {
        t->countdown++; /* counted down on the hot path: a large call is not of the stream */
    }
    if (!mf_thread_ready(t, fn, size, counted))
        return;
    if (large)
        mf_record_large(t, size, ret);
    else
        mf_take_sample(t, size, ret);
}
