/* Declarations shared by the core's files; nothing here is visible outside the core. */
#ifndef MF_INTERNAL_H
#define MF_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "mf_core.h"

#define MF_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* A large zeroed array, placed after every small variable (x86-64's large-data section
 * follows .bss): the variables start-up writes then share a page or two instead of being
 * spread between the arrays, each page they touch a fault (docs/performance.md, start-up). */
#if defined(__x86_64__) && defined(__ELF__)
#define MF_LARGE_ZEROED __attribute__((section(".lbss")))
#else
#define MF_LARGE_ZEROED
#endif
#define MF_DEPTH_DEFAULT 64u
#define MF_PATH_MAX 4096
/* Default mode: samples may take this share of a thread's time, in parts per million.
 * Chosen from `make bench`; see docs/sampling.md. */
#define MF_COST_SHARE_PPM 3000u
/* Default mode, past an exact stretch: the process's k-th sample is drawn at k / MF_RAMP_STEP
 * calls (at least 1) or at the budget's interval if that is less, up to its
 * MF_RAMP_SAMPLES-th; see mf_ramp() and docs/sampling.md. */
#define MF_RAMP_STEP 6u
#define MF_RAMP_SAMPLES 4096u
/* MF_FLUSH_CALLS (mf_format.h): the hot path's counts reach the thread file after at most
 * this many calls. docs/design.md says why the hot path counts in TLS. */

enum mf_thread_state {
    MF_THREAD_NEW = 0, /* no slot yet */
    MF_THREAD_READY,   /* a slot and a table to record into */
    MF_THREAD_FAILED,  /* no table could be had: count only */
    MF_THREAD_EXITED,  /* the thread has exited and given its slot back */
};

/* A thread's cold state: everything the slow path needs beyond the decision to sample, in
 * memory of our own (mmap), kept in a pool when the thread exits so that the next thread
 * takes it with its table and file: a thread that makes a handful of calls costs no file,
 * no system call and no page of its own (mf_thread.c, mf_slot_*). Below it lies the stack the
 * slow path runs on, so that the program's stack pays a few hundred bytes for a sample
 * whatever libunwind needs (a 16 KiB thread, an 8 KiB signal stack). */
#define MF_OWN_FRAMES_MAX 8
#define MF_WALK_MAX (MF_DEPTH_MAX + MF_OWN_FRAMES_MAX + 1) /* frames a walk may return */
/* The last walk of a slot (mf_unwind.c): a walk is a function of where it starts, the
 * stack bounds, its limit, the rules' epoch and the words it reads. When a new walk starts
 * where the last one did and every word the last one read still holds what it read, the new
 * one would find the same stack, which is still in pcs: the check is independent loads, the
 * walk a chain of dependent ones. */
enum { MF_MEMO_NONE, MF_MEMO_FP, MF_MEMO_RULES };
/* A frame of a walk. Rules: the state it was found in (stack pointer, where the frame
 * pointer is saved, return address) and `rd`: in the walk in hand, the number of words read
 * before it; in the memo, the number read from it on (the walk from there on reads only
 * those, so a walk that reaches the same state takes the rest as it was). fp: sp is the frame record's address,
 * bp and pc the two words it held (the link and the return address), in the record's
 * order so that one 16-byte compare checks both. */
struct mf_memo_frame {
    uintptr_t sp, bp, pc;
    uint32_t rd;
};
struct mf_memo_read {
    uintptr_t addr, val;
};
#define MF_MEMO_READS (2 * MF_WALK_MAX + 1) /* a walk reads at most two words a frame, and one */
/* Each kind of record in one array, so that a short walk touches two pages, not six: a
 * short process pays ~2.5 us for each page it touches (docs/performance.md). A frame-pointer
 * memo lists its frames leaf first. A rule walk's lists frames and words root first: the
 * next walk that reaches one of its frames keeps the part from there to the root where it
 * lies and writes only its own frames and words above it. */
struct mf_walk_memo {
    uint32_t kind;  /* the walker whose stack pcs holds now; MF_MEMO_NONE: nothing to check */
    uint32_t n;     /* its frames */
    uint32_t nreads; /* rules: words read */
    int max;
    bool truncated; /* rules: it stopped at max frames */
    uintptr_t entry, lo, hi, epoch; /* epoch: the rules' (0 for fp) */
    uintptr_t zero_at; /* fp: the frame whose null return address ended the walk, or 0 */
    struct mf_memo_frame frame[MF_WALK_MAX];
    struct mf_memo_read read[MF_MEMO_READS]; /* rules: each word read, and where */
};
struct mf_slot {
    struct mf_table own;    /* the table made for this slot (hdr NULL if it could not be) */
    struct mf_table *table; /* where this thread records: &own, or the shared table */
    struct mf_thread *owner; /* the thread's TLS while a thread uses the slot */
    struct mf_slot *next, *prev; /* slots in use (mf_slots_used), for the process's exit */
    struct mf_slot *next_free;
    bool listed;
    uint32_t flush_lock;      /* the owner's flush against the process exit's (mf_flush_others) */
    struct mf_totals proxied; /* the part of the owner's `pending` the process's exit flushed */
    struct mf_totals totals_base; /* the table's totals at the owner's set-up */
    uint64_t rng[2];          /* xoroshiro128+ state */
    uint64_t samples;         /* samples taken by this thread */
    /* Default mode (mf_adapt): the mean interval the cost budget allows now, and what it
     * is computed from: the program's time per call and the profiler's time per sample. */
    uint64_t interval;
    uint64_t draw_n;     /* the last draw's n (0: none yet), and its mf_log1p(-1.0 / n) */
    double draw_log_q;
    uint64_t sample_end_ns; /* CLOCK_MONOTONIC when the last sample finished */
    double sample_ns;
    double span_ns, span_calls; /* the program's recent time and calls, decayed sums */
    uint32_t exact_seq; /* samples of the exact stretch: the clock is read around a few */
    uintptr_t stack_lo, stack_hi; /* the stack mapping the frame-pointer unwinder walks */
    /* The sample in hand, for the function that runs on the slot's stack. */
    uintptr_t entry_fp;  /* mf_record_slow's frame on the program's stack */
    uintptr_t ret;       /* its return address: where the profiler's frames end */
    uint64_t weight, size;
    bool large;          /* the sample is a call at or above MALLOC_FREQ_LARGE */
    /* The stack captured: pcs[first .. npcs), the profiler's own frames before it; a rule
     * walk's ends where pcs ends (its memo keeps its outer frames in place there). */
    uint32_t first, npcs;
    bool new_stack;
    uint64_t gen;        /* the slot's table was first set up in this process generation */
    void *stack_top;     /* the slow path's own stack ends here (this struct starts here) */
    /* The live heap (mf_live.c): the thread's number in the process image, its allocation
     * calls moved out of `pending` so far, and the sample to record once the front end has
     * its address (live_pending). */
    uint64_t thread_seq, live_calls;
    bool live_pending;
    uint64_t live_stack, live_weight, live_size, live_call, live_ns;
    /* The table whose last entry has the frames of the stack in pcs, as of its generation
     * last_gen (mf_sample_on_stack): a walk that repeats the last one skips comparing them. */
    uintptr_t pcs[MF_WALK_MAX];
    bool walk_repeated; /* the stack in pcs is the last walk's, found by its memo's check */
    /* This walk's memo check as mf_unwind_again made it, for the walker not to make it again:
     * -1 not made; else the first word of the last walk's that changed (the rule walk's), or
     * 0 for a frame-pointer walk that does not repeat. */
    int64_t walk_changed;
    /* The walk's outermost frames that are the last walk's, as its memo found them, and
     * the walks so far: the table then looks up only the frames after them. */
    uint32_t walk_same;
    uint64_t walk_seq;
    struct mf_walk_memo memo; /* the last walk's */
    /* The rule walk in hand: its frames and words, leaf first from the arrays' ends down. */
    struct mf_walk_memo walk;
};

/* Settings, read once from the environment at start-up (mf_options.c). */
struct mf_options {
    uint64_t sample_interval; /* MALLOC_FREQ_SAMPLE; 0 = default mode (mf_adapt); 1 = exact */
    uint64_t exact_calls;     /* process-wide calls recorded exactly before sampling starts */
    uint64_t seed;
    bool seed_set;
    uint64_t large; /* MALLOC_FREQ_LARGE: calls of this many bytes and more are all recorded; 0 off */
    uint32_t max_depth;
    uint32_t unwinder; /* MF_UNWIND_* */
    bool unwind_rules; /* libunwind through the rule cache (not MALLOC_FREQ_UNWIND=libunwind-only) */
    bool rule_cache; /* MALLOC_FREQ_RULE_CACHE: rules kept on disk per build (mf_rule_cache.c) */
    const char *base_dir; /* MALLOC_FREQ_DIR, or NULL for the working directory */
    const char *libunwind; /* MALLOC_FREQ_LIBUNWIND: the library to dlopen */
    bool secure; /* AT_SECURE (set-user-ID...): nothing read, loaded or written */
    bool pythonmalloc; /* PYTHONMALLOC=malloc or malloc_debug (MF_PROCESS_PYTHONMALLOC) */
    uint32_t live; /* MALLOC_FREQ_LIVE: 0 off, MF_LIVE_SAMPLED, MF_LIVE_ALL */
};
extern struct mf_options mf_opt;
void mf_options_read(void);

/* ---- the core: process life (mf_process.c), thread life (mf_thread.c), the sampling
 * decision (mf_sample.c) and the slow path of a call (mf_record.c) ------------------- */

/* Process-wide state (mf_process.c). */
extern volatile int mf_ready; /* the output directory exists: threads may create tables */
extern volatile int mf_disabled; /* profiling is off in this process image */
/* A fork child starts its own profile at its first slow-path call, not in the atfork
 * handler: nothing that can block may run there (DESIGN §12). */
extern volatile int mf_start_pending;
/* The process image whose first call may start the profile: a vfork child (same memory,
 * another pid) never does. */
extern pid_t mf_start_pid;
extern pid_t mf_pid;
extern uint64_t mf_stamp;
extern char mf_dir[MF_PATH_MAX];
extern uint64_t mf_thread_seq;
/* Counts process images of this address space's line: a slot whose table was made in an
 * earlier one (the parent's, before fork) never writes into it again. */
extern uint64_t mf_gen;
extern int64_t mf_exact_budget;  /* calls still to record exactly, process-wide */
extern uint64_t mf_exact_taken;  /* calls of the exact stretch handed to threads */
extern uint64_t mf_ramp_taken;   /* samples drawn on the ramp past the stretch, process-wide */
extern pthread_key_t mf_thread_key;
/* The process image's first table: a thread that cannot have one of its own records here. */
extern struct mf_table *mf_first_table;
/* Calls made before start-up by size class (weight 1, unprofiled): the first thread set up
 * after them takes them into its histogram. */
extern struct mf_early_sizes {
    uint64_t calls[MF_SIZE_CLASSES], bytes[MF_SIZE_CLASSES];
} mf_early_sizes;
bool mf_check_pid(void); /* false in a vfork child (or a fork child, without the canary) */
/* A MADV_WIPEONFORK page: it reads 0 in any child, also one made by _Fork() or clone(),
 * which run no atfork handler (mf_process.c). */
extern volatile uint64_t *mf_fork_canary;
/* A child that no atfork handler told (_Fork(), clone()) and that has not yet made a call:
 * one load of the fork canary, no system call. Inline: it runs at every recorded call. */
static inline bool mf_forked(void)
{
    return mf_fork_canary && *mf_fork_canary == 0;
}
/* A fork child, told by the atfork handler (prepared) or by the canary: it lets its
 * parent's tables and files go and starts its own profile at its next call. */
void mf_after_fork_child(bool prepared);
void mf_process_start(void);

#define MF_EXACT_CHUNK 64 /* a thread takes the exact budget in chunks: less contention */
#define MF_EXACT_TIMED 16 /* one sample of the exact stretch in 16 is timed (mf_record_slow) */
#define MF_COST_SHARE (MF_COST_SHARE_PPM / 1e6)
#define MF_COUNTDOWN_OFF (INT64_MAX / 2) /* not profiling: the hot path only counts */
/* The slow path's own stack: libunwind's first use in a thread takes ~10 KiB, a signal
 * handler that interrupts a sample runs on it too; pages never touched cost nothing. */
#define MF_SLOT_STACK_BYTES (256u << 10)
#define MF_PAGE_BYTES 4096u


/* The sampling decision (mf_sample.c). */
uint64_t mf_splitmix(uint64_t *x);
void mf_rng_seed(struct mf_slot *s, uint64_t seq);
bool mf_take_exact(struct mf_thread *t);
int64_t mf_next_countdown(struct mf_thread *t);
/* The interval ramps up past the exact stretch (mf_ramp): in the default mode, where there
 * is a stretch (not with MALLOC_FREQ_EXACT=0). */
static inline bool mf_ramps(void)
{
    return !mf_opt.sample_interval && mf_opt.exact_calls;
}
void mf_adapt(struct mf_thread *t, uint64_t t0, uint64_t t1, bool new_stack);

/* Thread life (mf_thread.c). */
void mf_totals_add(struct mf_table *tab, struct mf_totals *to, int fn, uint64_t calls,
                   uint64_t bytes);
_Static_assert(MF_FN_COUNT % 4 == 0, "mf_nothing_pending reads the counters four at a time");

static inline bool mf_nothing_pending(const struct mf_thread *t)
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
void mf_flush(struct mf_thread *t);
void mf_flush_others(struct mf_thread *self);
/* The countdown ends at the next sample or after MF_FLUSH_CALLS calls, whichever comes
 * first (every call in the thread that runs the process's exit); returns it and keeps the
 * rest. */
static inline int64_t mf_arm(struct mf_thread *t, int64_t calls)
{
    int64_t cap = t->exiting ? 1 : MF_FLUSH_CALLS;
    int64_t step = calls < cap ? calls : cap;
    t->sample_left = calls - step;
    return step;
}
struct mf_slot *mf_slot_acquire(void);
void mf_slots_unlist(struct mf_slot *s);
void mf_slot_release(struct mf_slot *s);
void mf_thread_setup(struct mf_thread *t);
void mf_setup_on_stack(void *arg);
void mf_setup_start_thread(void);
void mf_thread_exit(void *arg);
void mf_slots_forget(void); /* a fork child's */
/* The calls the exact stretch recorded: those handed to threads, less what the threads
 * still running hold unused. */
uint64_t mf_exact_recorded(void);

/* The slow path of a call (mf_record.c). */
struct mf_table *mf_table_lock(struct mf_table *tab);
void mf_table_unlock(struct mf_table *tab);
void mf_size_add(struct mf_thread_header *h, uint64_t w, uint64_t size, uint32_t cls);
void mf_unprofiled(struct mf_thread *t, uint64_t weight, size_t size);
int64_t mf_enter(struct mf_thread *t);
void mf_leave(struct mf_thread *t, int64_t countdown);

/* Thread tables (mf_table.c). Each returns true on error. */
bool mf_table_create(struct mf_table *tab, uint64_t seq);
void mf_table_forget(struct mf_table *tab); /* a fork child's copy: unmapped, never written */
/* At the process's exit, by the thread whose table it is (under its lock): the room its
 * file reserved for stacks to come given back, when it is MF_TRIM_FROM bytes or more (three
 * system calls; a short process's first segment holds less). Stacks made after it reserve
 * theirs again. */
#define MF_TRIM_FROM ((uint64_t)32 << 10)
void mf_table_trim(struct mf_table *tab);
void mf_table_privatize(struct mf_table *tab); /* a fork child's copy: written, not to the file */
/* The entry of the stack pcs (innermost first, depth frames) with these flags and, with
 * MF_ENTRY_SIZED in flags, its samples' size class cls; made wide if new and wide. */
struct mf_entry *mf_table_upsert(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                                 uint32_t flags, uint32_t cls, bool wide);
/* A narrow entry's stack (of size class cls; the stack the table looked up last) from now
 * on: a new wide entry of the same key, which the table finds instead (mf_format.h,
 * MF_ENTRY_WIDE); NULL if the table is full. */
struct mf_entry *mf_table_widen(struct mf_table *tab, struct mf_entry *narrow, uint32_t cls);
/* Where entry e of tab lies: its segment *k and slot *i; false if it is not tab's. */
bool mf_table_entry_at(const struct mf_table *tab, const struct mf_entry *e, uint32_t *k,
                       uint64_t *i);
/* What mf_table_find learned of a stack it did not find: its path hash, how many of its
 * outer frames have nodes, and the innermost of those (0: none); valid false if it learned
 * nothing (a stack deeper than the path cache). */
struct mf_table_miss {
    uint64_t path;
    uint32_t found, leaf;
    bool valid;
};
/* The last stack's entry of class cls, when the stack is the last one again, whole (the
 * walk's memo found every frame the same: a loop's calls): no frame looked at. NULL when
 * the table's last stack is another, or has no entry of this class or these flags yet. */
struct mf_entry *mf_table_again(const struct mf_table *tab, uint32_t depth, uint32_t flags,
                                uint32_t cls);
/* The same, found only. same: pcs' outermost `same` frames are known to be those of tab's
 * last path. Without the stack's entry, *miss says what mf_table_insert needs, and its
 * innermost frames the table has no node for are pcs[0 .. depth - miss->found). */
struct mf_entry *mf_table_find(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                               uint32_t flags, uint32_t cls, uint32_t same,
                               struct mf_table_miss *miss);
/* The stack mf_table_find has just missed (miss) made, its flags those it was looked up with,
 * when the table has not changed since (its lock held since): mf_table_upsert without its
 * second lookup, which was a third of a new stack's time in a compile. */
struct mf_entry *mf_table_insert(struct mf_table *tab, uint32_t depth, uint32_t flags,
                                 uint32_t cls, bool wide, const struct mf_table_miss *miss);
void mf_spin_lock(uint32_t *lock);
void mf_spin_unlock(uint32_t *lock);

/* The live heap (mf_live.c). */
void mf_live_start(void);      /* at process start-up: the filter */
void mf_live_after_fork(void); /* a fork child forgets its parent's */
void mf_live_privatize(void);  /* a fork child's copy of its parent's file: not written to it */
void mf_live_file_now(void);   /* the file, if it is to be and not made yet */
/* The sample just counted in entry e (on the slot's stack, table locked) is followed. */
void mf_live_note(struct mf_thread *t, struct mf_table *tab, const struct mf_entry *e);
uint64_t mf_live_thread_calls(const struct mf_thread *t); /* the thread's calls so far */

/* Process file and module list (mf_modules.c). */
bool mf_process_file_create(void); /* with the module list: all loaded, or inherited */
void mf_process_file_finish(uint64_t exact_recorded); /* at exit: end time, flags, ... */
void mf_modules_refresh(void);
bool mf_modules_changed(void); /* the loader loaded or unloaded something since the last look */
extern uint32_t mf_module_epoch; /* grows when a library lies where another one was */
bool mf_modules_cover(const uintptr_t *pcs, uint32_t n); /* every pc lies in a known module */
/* Every pc lies in a module the process image started with, which no later load can
 * replace: a stack of them needs no look at the loader (no getpid, no loader lock). */
bool mf_modules_permanent(const uintptr_t *pcs, uint32_t n);
struct dl_phdr_info;
void mf_build_id(struct dl_phdr_info *info, struct mf_module_record *r); /* r->build_id* */
/* In a fork child: the next start writes the parent's module list, which is this image's
 * too; if the parent had other threads the loader is never asked again (`frozen`). */
void mf_modules_inherit(bool frozen);

/* Calls fn(arg) with the stack pointer at `top` (mf_stack.c): the slow path's own stack.
 * Unwinders go on through it to the caller's frames. */
void mf_call_on_stack(void *top, void (*fn)(void *), void *arg);
/* Calls bt(pcs, max) the same way and returns its result: the unwinder called straight from
 * the switch, so that it walks one profiler frame more than it would on the caller's stack,
 * not two. */
int mf_backtrace_on_stack(void *top, int (*bt)(void **, int), void **pcs, int max);

/* Stack capture (mf_unwind.c). */
void mf_unwind_init(void);
/* Deferred start-up: loads libunwind if it is wanted and not loaded yet, and only where that
 * is safe (a single-threaded process, the loader's list consistent, not a frozen fork
 * child); else the frame-pointer walk goes on until a later new stack. */
void mf_unwind_load_if_safe(void);
extern bool mf_unwind_frozen; /* a fork child of a threaded parent: never load it */
extern int (*mf_unw_backtrace)(void **, int); /* NULL: the frame-pointer walk */
int mf_unwind_fp(void **pcs, int max); /* from the calling thread's slot's entry_fp */
/* The stack from the unwind rules read from each return address's CFI (mf_unwind.c,
 * mf_cfi.c), or -1 when libunwind must walk it. */
extern struct mf_rules *mf_rules; /* NULL: no rules (MALLOC_FREQ_UNWIND=libunwind-only) */
void mf_rules_setup(void); /* at start-up, from the options */
int mf_unwind_rules(void **pcs, int max); /* from mf_backtrace_on_stack, into the slot's pcs */
/* The last walk of kind (MF_MEMO_RULES, MF_MEMO_FP) again, whole: its memo's check alone,
 * which needs no stack to speak of, made on the program's stack before the switch to the
 * slot's for a walk. Its frames (still in the slot's pcs), or -1: the walk is to be made. */
int mf_unwind_again(struct mf_slot *s, int max, uint32_t kind);
/* libunwind's unw_backtrace, loaded now if it is not yet and may be; else the frame-pointer
 * walk. Called on the program's stack: a load runs on the slot's. */
int (*mf_unwind_fallback(struct mf_slot *s))(void **, int);
/* The rule of a return address from its module's CFI (mf_cfi.c): false if no loaded module
 * holds it. FP: CFA = rbp + 16; SP: CFA = rsp + k, rbp as it was; SP_SAVED: the same with
 * rbp saved at CFA - 8 * off; END: the outermost frame; OTHER: libunwind's to walk. */
enum { MF_CFI_OTHER, MF_CFI_FP, MF_CFI_SP, MF_CFI_SP_SAVED, MF_CFI_END };
#define MF_CFI_FRAME_MAX (64u << 10) /* larger frames are left to libunwind */
struct mf_cfi_rule {
    int kind;
    uint32_t k, off;
};
bool mf_cfi_rule_at(uintptr_t pc, struct mf_cfi_rule *rule);
/* The rule table's side of the rule cache (mf_unwind.c): a rule there is the table's word
 * without its epoch; epoch is the walk's (mf_rule_epoch_now() at the exit). */
extern uint64_t mf_rules_learned; /* rules read from the CFI by this process image */
uint64_t mf_rule_epoch_now(void);
bool mf_rule_sane(uint64_t rule); /* a rule the CFI could have given */
bool mf_rule_load(uintptr_t pc, uint64_t rule, uint64_t epoch); /* false: the table keeps no more */
/* The rule table grown at once to hold `more` rules at most half full, as far as it may
 * grow: a module's cached rules, loaded one by one, grew and rehashed it up to three times
 * (1.2 % of a compile's time in its exact stretch). */
void mf_rules_reserve(uint64_t more);
uint64_t mf_rules_in(uint64_t epoch, uint64_t *out, uint64_t max); /* pairs (pc, rule) */
/* The rule cache (mf_rule_cache.c): each module's learned rules on disk, keyed by its build
 * id, so that the next process of the same build learns none of them. pc's module (0: none
 * or not cached), its cache file read at its first miss. */
extern uint64_t mf_rules_loaded; /* rules this process image took from the cache */
uint32_t mf_rule_cache_module(uintptr_t pc, uint64_t epoch);
/* A large cache file's rule for pc, of module (mf_rule_cache_module's answer), without its
 * epoch; 0 if it holds none. */
uint64_t mf_rule_cache_find(uint32_t module, uintptr_t pc);
void mf_rule_cache_learned(uint32_t module); /* a rule of it read from the CFI */
void mf_rule_cache_save(void); /* at exit: each module's rules, if it learned any */
/* Puts up to max return addresses in s->pcs, on the slot's stack, and returns where they
 * end; they start at *first, after the profiler's frames, at the front end's slow path
 * (s->ret). */
static inline __attribute__((always_inline)) uint32_t mf_unwind(struct mf_slot *s, uint32_t max,
                                                                uint32_t *first)
{
    int (*bt)(void **, int) = mf_unw_backtrace ? mf_unw_backtrace : mf_unwind_fp;
    /* After a walk that repeated the one before, the next is looked for among the last walk's
     * first, before the switch to the slot's stack (a loop's calls); after one that did not,
     * the walk does it (a compiler's calls, a twentieth of which repeat: the look there was
     * 32 instructions more a call). */
    bool again = s->walk_repeated;
    s->walk_repeated = false; /* the walkers with a memo set it */
    s->walk_same = 0;
    s->walk_seq++;
    s->walk_changed = -1;
    if (mf_rules && !mf_unwind_frozen && mf_opt.unwinder == MF_UNWIND_LIBUNWIND) {
        int c = again ? mf_unwind_again(s, (int)max, MF_MEMO_RULES) : -1;
        if (c < 0)
            c = mf_backtrace_on_stack(s->stack_top, mf_unwind_rules, (void **)s->pcs, (int)max);
        if (c >= 0) { /* the walk starts at s->ret; its stack ends where pcs ends */
            *first = MF_WALK_MAX - (uint32_t)c;
            return MF_WALK_MAX;
        }
        bt = mf_unwind_fallback(s);
    }
    if (bt != mf_unwind_fp) /* the frame-pointer walk keeps its memo itself */
        s->memo.kind = MF_MEMO_NONE;
    else if (again && mf_unwind_again(s, (int)max, MF_MEMO_FP) >= 0)
        return s->memo.n; /* pcs and *first as the last walk left them */
    uint32_t n = (uint32_t)mf_backtrace_on_stack(s->stack_top, bt, (void **)s->pcs, (int)max);
    *first = 0;
    for (uint32_t i = 0; i < n && i < MF_OWN_FRAMES_MAX; i++) {
        if (s->pcs[i] == s->ret) {
            *first = i;
            break;
        }
    }
    return n;
}

/* The profile directory and its files (mf_files.c). Profiles hold secrets and profilers run
 * as root: the directory is 0700 and owned by the effective uid, files are 0600, no symlink
 * is followed, nothing here is a cancellation point, and no descriptor is kept open (the
 * program may close or reuse any number) but one, after a setuid that leaves the directory
 * out of the new user's reach by its path. Each returns true / -1 on error, with errno set.
 * Files are named relative to the directory (openat), so a name is never longer than
 * MF_NAME_MAX whatever the directory's path. */
#define MF_NAME_MAX 64
void mf_files_settle(void); /* the absolute base directory, when the library is loaded */
bool mf_files_start(void); /* creates and checks mf_dir (malloc_freq.<pid> under the base,
                            * or beside its parent's after a setuid); warns on failure,
                            * except under AT_SECURE, where it fails silently */
/* mf_files_start() keeps the descriptor it accepted the directory with for the files its
 * thread makes next; this closes it at that thread's start-up's end, or in a fork child
 * (another thread of the parent's may have been starting). errno is kept. */
void mf_files_start_end(bool forked);
bool mf_files_hand_over(uid_t uid); /* mf_dir and its files to uid, before a setuid */
void mf_files_handed_over(bool failed); /* after it */
bool mf_files_sealed(void); /* a seccomp filter: no file is opened (said once) */
int mf_file_create(const char *name); /* a new file in mf_dir: O_RDWR, O_EXCL, 0600 */
int mf_file_open(const char *name);   /* an existing file of ours in mf_dir, O_RDWR */
void mf_file_unlink(const char *name);
/* <base>/<name>: a directory of the effective user's that nobody else can write to (made
 * 0700 if create and missing), not a symlink; an O_PATH descriptor for openat (*st: its
 * status), or -1. */
struct stat;
int mf_base_subdir_open(const char *name, bool create, struct stat *st);
/* Disk blocks for [off, off + len), so that a full disk is an error here and not a SIGBUS
 * later; past RLIMIT_FSIZE it fails with EFBIG instead of raising SIGXFSZ. */
bool mf_file_reserve(int fd, uint64_t off, uint64_t len);
/* The disk blocks of whole pages in [off, off + len) given back, the file's size kept (a
 * segment's reserved room that no entry or node will take); errno kept, failure ignored. */
void mf_file_release(int fd, uint64_t off, uint64_t len);
/* The file at least size bytes long (no blocks reserved); EFBIG past RLIMIT_FSIZE. */
bool mf_file_extend(int fd, uint64_t size);
/* "malloc_freq: <what> <mf_dir>/<name>: <strerror(errno)><tail>", once per *once if given. */
void mf_file_warn(int *once, const char *what, const char *name, const char *tail);

/* System calls without glibc's cancellation points (a pending pthread_cancel must not act
 * inside malloc) (mf_sys.c). */
int mf_sys_close(int fd);
ssize_t mf_sys_write(int fd, const void *buf, size_t len);
ssize_t mf_sys_pwrite(int fd, const void *buf, size_t len, uint64_t off);
struct iovec;
ssize_t mf_sys_pwritev(int fd, const struct iovec *iov, int n, uint64_t off);
ssize_t mf_sys_read(int fd, void *buf, size_t len);
int mf_sys_openat(int dirfd, const char *path, int flags, unsigned mode);
int mf_sys_ioctl(int fd, unsigned long request, void *arg);
int mf_sys_fallocate(int fd, int mode, uint64_t off, uint64_t len);
/* A signal handler that forks while the profiler makes its files would leave a child that
 * goes on making its parent's (same stamp, O_EXCL refused): set-up runs with signals
 * blocked, two system calls a process and a thread (mf_sys.c). */
void mf_signals_block(uint64_t *old);
void mf_signals_restore(const uint64_t *old);
/* dl_iterate_phdr, marked in the thread's state while it runs (mf_modules.c). */
int mf_dl_iterate(int (*visit)(struct dl_phdr_info *, size_t, void *), void *arg);
void mf_prefault(void *p, size_t len); /* MADV_POPULATE_WRITE, errors ignored */
/* Private tables (indexes, the rule table) from this size up get transparent huge pages. */
#define MF_HUGE_FROM ((size_t)256 << 10)
size_t mf_anon_size(size_t bytes);
void *mf_anon_table(size_t bytes); /* mf_anon_size(bytes) mapped, zeroed; munmap that much */
void *mf_anon_reserve(size_t bytes); /* zeroed, no page mapped yet (mf_prefault); MAP_FAILED */
void mf_privatize(void *addr, size_t len); /* a private copy in place of a shared mapping */

/* Small system helpers that neither allocate nor lock (mf_sys.c). */
void mf_warn(const char *a, const char *b, const char *c, const char *d);
void mf_warn_once(int *said, const char *a, const char *b, const char *c, const char *d);
void mf_warnv(int *said, const char *const *parts, int n); /* NULL parts skipped; said may be NULL */
char *mf_append(char *dst, char *end, const char *s);
char *mf_append_u64(char *dst, char *end, uint64_t v);
char *mf_append_hex(char *dst, char *end, uint64_t v, int digits);
const char *mf_strerror(int err);
uint64_t mf_now_ns(void);  /* CLOCK_REALTIME */
uint64_t mf_mono_ns(void); /* CLOCK_MONOTONIC */
pid_t mf_gettid(void);
bool mf_parse_u64(const char *s, uint64_t *out);
bool mf_getcwd(char *buf, size_t size); /* errno untouched */
bool mf_filtered(void);

#endif
