/* Process life: start-up, fork, exit, and the public API. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
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
volatile int mf_disabled;
volatile int mf_start_pending;
pid_t mf_start_pid;
bool mf_lazy_start;
pid_t mf_pid;
uint64_t mf_stamp;
char mf_dir[MF_PATH_MAX] MF_LARGE_ZEROED;
uint64_t mf_thread_seq;
uint64_t mf_gen = 1;
int64_t mf_exact_budget;
uint64_t mf_exact_taken;
uint64_t mf_ramp_taken;
/* A MADV_WIPEONFORK page: it reads 0 in any child, also one made by _Fork() or clone(),
 * which run no atfork handler. A load, where asking getpid() would be a system call. A
 * vfork child shares the page, and so is told apart from a fork child (mf_check_pid). */
volatile uint64_t *mf_fork_canary;
pthread_key_t mf_thread_key;
struct mf_table *mf_first_table;
struct mf_early_sizes mf_early_sizes MF_LARGE_ZEROED;

void mf_fork_canary_arm(void)
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
void mf_process_start(void)
{
    mf_fork_canary_arm();
    mf_pid = getpid();
    mf_stamp = mf_new_stamp();
    __atomic_store_n(&mf_thread_seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mf_exact_budget, (int64_t)mf_opt.exact_calls, __ATOMIC_RELAXED);
    __atomic_store_n(&mf_exact_taken, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mf_ramp_taken, 0, __ATOMIC_RELAXED);
    mf_rules_setup();
    if (mf_lazy_start && !mf_rules)
        mf_unwind_load_if_safe(); /* the process's first allocation call, if it is safe */
    /* <base>/malloc_freq.<pid>, private, under the base settled at the first start-up
     * (mf_files.c); under AT_SECURE it fails silently. */
    if (mf_files_start() || mf_process_file_create()) {
        mf_files_start_end(false);
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
void mf_after_fork_child(bool prepared)
{
    struct mf_thread *t = &mf_tls;
    if (mf_fork_canary)
        *mf_fork_canary = 1; /* this image's from now on */
    mf_files_start_end(true); /* another thread of the parent's was starting */
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
    mf_slots_forget(); /* the parent's other threads do not exist here */
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

/* The start-up thread's table is made now, while the process can: it may setuid, chroot or
 * lower RLIMIT_NOFILE later, and threads that cannot make a table of their own then share
 * this one. */
void mf_setup_start_thread(void)
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
         * makes no file and loads no libunwind (docs/performance.md, start-up). */
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
    mf_files_start_end(false); /* if the thread was not set up */
}

__attribute__((constructor)) static void mf_core_constructor(void)
{
    mf_core_init();
}

static void mf_exit_on_stack(void *arg)
{
    (void)arg;
    if (mf_modules_changed()) /* no system call when the loader did nothing since */
        mf_modules_refresh();
    mf_process_file_finish(mf_exact_recorded());
    mf_rule_cache_save();
    /* Its own table (the process's first, which other threads may write, under its lock). */
    struct mf_slot *s = mf_tls.slot;
    if (s && s->table == &s->own) {
        struct mf_table *tab = mf_table_lock(&s->own);
        mf_table_trim(tab);
        mf_table_unlock(tab);
    }
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

_Static_assert((int)MALLOC_FREQ_FUNCTIONS == (int)MF_FN_COUNT &&
                   (int)MALLOC_FREQ_FN_NEW_ARRAY_ALIGNED == (int)MF_FN_NEW_ARRAY_ALIGNED,
               "malloc_freq.h numbers the functions as mf_format.h does");

/* The thread's counts are what its table's totals gained since its set-up (the slot's
 * table may hold a thread's before it), plus what the hot path holds pending, less what the
 * process's exit already moved from there to the totals (proxied). Read without a lock: a
 * signal handler may call this inside a flush, and only this thread and the process's exit
 * write these. */
__attribute__((visibility("default"))) int malloc_freq_thread_counts(struct malloc_freq_counts *out)
{
    if (!out || out->size < offsetof(struct malloc_freq_counts, fn_calls)) {
        errno = EINVAL;
        return -1;
    }
    const struct mf_thread *t = &mf_tls;
    const struct mf_slot *s = t->totals ? t->slot : NULL;
    struct malloc_freq_counts c = {0};
    for (int fn = 0; fn < MF_FN_COUNT; fn++) {
        uint64_t calls = __atomic_load_n(&t->pending.calls[fn], __ATOMIC_RELAXED);
        uint64_t bytes = __atomic_load_n(&t->pending.bytes[fn], __ATOMIC_RELAXED);
        if (s) {
            calls += __atomic_load_n(&t->totals->calls[fn], __ATOMIC_RELAXED) -
                     s->totals_base.calls[fn] - s->proxied.calls[fn];
            bytes += __atomic_load_n(&t->totals->bytes[fn], __ATOMIC_RELAXED) -
                     s->totals_base.bytes[fn] - s->proxied.bytes[fn];
        }
        c.fn_calls[fn] = calls;
        c.fn_bytes[fn] = bytes;
        c.calls += calls;
        c.bytes += bytes;
    }
    c.size = out->size < sizeof c ? out->size : sizeof c;
    memcpy(out, &c, c.size);
    return s && (s->table != &s->own ||
                 (__atomic_load_n(&s->table->hdr->flags, __ATOMIC_RELAXED) & MF_THREAD_SHARED));
}

/* For front ends that cannot inline the hot path (the Rust crate). */
void mf_record_call(uint32_t fn, size_t size)
{
    mf_record(fn < MF_FN_COUNT ? (enum mf_fn)fn : MF_FN_MALLOC, size);
}
