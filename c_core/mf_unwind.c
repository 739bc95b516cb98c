/* Stack capture behind one function: libunwind's unw_backtrace (correct without frame
 * pointers, DESIGN §3) or a frame-pointer walk (several times cheaper, for programs built
 * with frame pointers). libunwind is dlopen'd RTLD_LOCAL at start-up, never linked, so its
 * _Unwind_* never replace libgcc's in the program (DESIGN §4). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/single_threaded.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "mf_internal.h"
#include "mf_unwind_imports.h"

#if defined(__x86_64__)
#define MF_UNW_PREFIX "_ULx86_64_"
#elif defined(__aarch64__)
#define MF_UNW_PREFIX "_ULaarch64_"
#else
#define MF_UNW_PREFIX "_UL_unknown_"
#endif
#define MF_UNW_CACHE_PER_THREAD 2 /* enum unw_caching_policy_t */

int (*mf_unw_backtrace)(void **, int);
bool mf_unwind_frozen;
static bool mf_unwind_tried;

/* dlopen from inside malloc risks the loader's lock (DESIGN §4): another thread may hold it
 * and wait for a lock our caller holds, or this thread may be inside the loader, half-way
 * through changing its lists. Neither can be when the process has one thread and the
 * loader's debugger interface says its list is consistent (r_state, which it sets to
 * RT_ADD before it adds an object and back after; dlopen from a constructor, which glibc
 * supports, is what remains). Otherwise stacks are walked by frame pointers meanwhile. */
void mf_unwind_load_if_safe(void)
{
    if (mf_opt.unwinder != MF_UNWIND_LIBUNWIND || mf_unw_backtrace || mf_unwind_tried ||
        mf_unwind_frozen || !__libc_single_threaded ||
        __atomic_load_n(&_r_debug.r_state, __ATOMIC_ACQUIRE) != RT_CONSISTENT)
        return;
    mf_unwind_init();
}

void mf_unwind_init(void)
{
    if (mf_opt.unwinder != MF_UNWIND_LIBUNWIND || mf_unw_backtrace || mf_unwind_tried)
        return;
    mf_unwind_tried = true;
    if (mf_filtered()) /* the loader opens files, which a seccomp filter may kill us for */
        return;
    void *lib = dlopen(mf_opt.libunwind, RTLD_NOW | RTLD_LOCAL);
    void *bt = lib ? dlsym(lib, "unw_backtrace") : NULL;
    if (!bt) {
        mf_warn("cannot load ", mf_opt.libunwind,
                " (install libunwind8); using frame-pointer unwinding: stacks through code "
                "without frame pointers will be cut short", NULL);
        mf_opt.unwinder = MF_UNWIND_FP;
        return;
    }
    /* Before libunwind's first call, which opens its memory-checking pipe: its pipe, reads,
     * writes, opens and closes become ours, with no descriptor the program could reuse and
     * no cancellation point (mf_unwind_imports.c). */
    if (mf_unwind_redirect_imports(lib)) {
        mf_warn("cannot redirect the system calls of ", mf_opt.libunwind,
                "; using frame-pointer unwinding: stacks through code without frame pointers "
                "will be cut short", NULL);
        mf_opt.unwinder = MF_UNWIND_FP;
        return;
    }
    int (*set_policy)(void *, int) = (int (*)(void *, int))dlsym(lib, MF_UNW_PREFIX "set_caching_policy");
    void **local_as = dlsym(lib, MF_UNW_PREFIX "local_addr_space");
    if (set_policy && local_as)
        set_policy(*local_as, MF_UNW_CACHE_PER_THREAD);
    __atomic_store_n(&mf_unw_backtrace, (int (*)(void **, int))bt, __ATOMIC_RELEASE);
}

static void mf_unwind_load_on_stack(void *arg)
{
    (void)arg;
    mf_unwind_load_if_safe();
}

int (*mf_unwind_fallback(struct mf_slot *s))(void **, int)
{
    if (!mf_unw_backtrace && !mf_unwind_tried)
        mf_call_on_stack(s->stack_top, mf_unwind_load_on_stack, NULL);
    return mf_unw_backtrace ? mf_unw_backtrace : mf_unwind_fp;
}

/* Linux 6.11's query of one mapping by address (PROCMAP_QUERY, <linux/fs.h>; Debian 12's
 * headers predate it): the kernel looks the mapping up instead of printing them all. */
struct mf_procmap_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode; /* out */
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
_Static_assert(sizeof(struct mf_procmap_query) == 104, "struct procmap_query's layout");
#define MF_PROCMAP_QUERY _IOWR('f', 17, struct mf_procmap_query)
#define MF_PROCMAP_QUERY_VMA_READABLE 1u

/* A seccomp filter may answer an ioctl it does not know by killing the process (sandboxes
 * allow the few they need), where it answers a refused open or read with an error. So the
 * query is asked only by a front end that sees a filter coming (the preload library's
 * prctl: an unprivileged filter needs no_new_privs first), and only in a process that had
 * neither when the profiler first looked (/proc/self/status, once). */
bool mf_procmap_query_allowed;
static int mf_procmap_state; /* 0: not looked yet; 1: the query is asked; -1: it is not */

void mf_procmap_query_off(void)
{
    __atomic_store_n(&mf_procmap_state, -1, __ATOMIC_RELAXED);
}

/* Neither a seccomp mode (mf_filtered) nor no_new_privs (without which an unprivileged
 * process cannot install a filter), asked with prctl: reading /proc/self/status for the same
 * took 28 us of a short process here, the calls 3.4 us. errno is kept. */
static bool mf_unfiltered(void)
{
    if (mf_filtered())
        return false;
    int err = errno;
    bool none = syscall(SYS_prctl, PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0;
    errno = err;
    return none;
}

static bool mf_procmap_usable(void)
{
    if (!mf_procmap_query_allowed)
        return false;
    int state = __atomic_load_n(&mf_procmap_state, __ATOMIC_RELAXED);
    if (state == 0) {
        int seen = mf_unfiltered() ? 1 : -1;
        __atomic_compare_exchange_n(&mf_procmap_state, &state, seen, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED);
        state = __atomic_load_n(&mf_procmap_state, __ATOMIC_RELAXED);
    }
    return state > 0;
}

/* The mapping that holds `here`, from /proc/self/maps with raw system calls
 * (pthread_getattr_np allocates and locks: DESIGN §5): asked by address where the kernel
 * can answer that (6.11 and later) and no seccomp filter may object, else read line by
 * line. Printing every mapping took ~47 us of each short process here (docs/performance.md, start-up). */
#define MF_FILTERED_STACK_MAX (1ull << 30)
static void mf_stack_bounds(struct mf_slot *s, uintptr_t here)
{
    s->stack_lo = s->stack_hi = here; /* nothing found: walk no frames rather than guess */
    if (mf_filtered()) {
        /* A seccomp filter may kill the process for the open. glibc puts a thread's
         * descriptor, where the thread pointer points, at the top of its stack block (its
         * own or the one pthread_attr_setstack gave): the frames lie between here and it.
         * The main thread's lies elsewhere (then no frame is walked). */
        uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
        if (here < tp && tp - here <= MF_FILTERED_STACK_MAX)
            s->stack_hi = tp;
        return;
    }
    int fd = mf_sys_openat(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return;
    int err = errno; /* an older kernel's ENOTTY is not the program's to see */
    if (mf_procmap_usable()) {
        struct mf_procmap_query q = {.size = sizeof q, .query_addr = here};
        if (mf_sys_ioctl(fd, MF_PROCMAP_QUERY, &q) == 0 || errno == ENOENT) {
            if (q.vma_start <= here && here < q.vma_end &&
                (q.vma_flags & MF_PROCMAP_QUERY_VMA_READABLE)) {
                s->stack_lo = q.vma_start;
                s->stack_hi = q.vma_end;
            }
            mf_sys_close(fd);
            errno = err;
            return;
        }
        mf_procmap_query_off(); /* not this kernel's: not asked again */
    }
    errno = err;
    char buf[1024];
    size_t have = 0;
    for (;;) {
        ssize_t n = mf_sys_read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
            uintptr_t lo = 0, hi = 0;
            char *p = line;
            for (; *p != '-'; p++)
                lo = lo * 16 + (uintptr_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
            for (p++; *p != ' '; p++)
                hi = hi * 16 + (uintptr_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
            if (lo <= here && here < hi) {
                if (p[1] == 'r') { /* "lo-hi rwxp ...": a mapping that cannot be read holds
                                    * no frame to walk */
                    s->stack_lo = lo;
                    s->stack_hi = hi;
                }
                mf_sys_close(fd);
                return;
            }
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        if (have == sizeof buf - 1) /* a line longer than the buffer: drop its start */
            have = 0;
        memmove(buf, line, have);
    }
    mf_sys_close(fd);
}

/* Whether m is a memo of this walker made under what else decides a walk: its limit, the
 * rules' epoch (0 for fp) and the stack bounds. */
static bool mf_memo_applies(const struct mf_walk_memo *m, const struct mf_slot *s, uint32_t kind,
                            int max, uintptr_t epoch)
{
    return m->kind == kind && m->max == max && m->epoch == epoch && m->lo == s->stack_lo &&
           m->hi == s->stack_hi;
}

/* m now describes a walk of this walker from entry, under what mf_memo_applies checks. */
static void mf_memo_stamp(struct mf_walk_memo *m, const struct mf_slot *s, uint32_t kind,
                          int max, uintptr_t epoch, uintptr_t entry)
{
    m->kind = kind;
    m->max = max;
    m->epoch = epoch;
    m->lo = s->stack_lo;
    m->hi = s->stack_hi;
    m->entry = entry;
}

/* Whether the last frame-pointer walk's stack, still in pcs, is what a walk from fp would
 * find: each frame record it read holds the same link and return address (one 16-byte
 * compare a frame), and the frame whose null return address ended it still has one. */
static bool mf_fp_memo_holds(const struct mf_slot *s, uintptr_t fp, int max)
{
    typedef uintptr_t mf_pair __attribute__((vector_size(2 * sizeof(uintptr_t))));
    const struct mf_walk_memo *m = &s->memo;
    if (!mf_memo_applies(m, s, MF_MEMO_FP, max, 0) || m->entry != fp)
        return false;
    mf_pair diff = {m->zero_at ? ((const uintptr_t *)m->zero_at)[1] : 0, 0};
    /* Unrolled: the loop's own count, add and branch were a third of its instructions
     * (callgrind, micro at N=1 with fp: 34 fewer a sample, 181.5 M -> 174.7 M in all). */
#pragma GCC unroll 4
    for (uint32_t i = 0; i < m->n; i++) {
        mf_pair now, then;
        memcpy(&now, (const void *)m->frame[i].sp, sizeof now);
        memcpy(&then, &m->frame[i].bp, sizeof then);
        diff |= now ^ then;
    }
    return (diff[0] | diff[1]) == 0;
}

/* Walks the frame-pointer chain from mf_record_slow's frame on the program's stack (the
 * walk itself runs on the slot's stack, mf_stack.c). */
int mf_unwind_fp(void **out, int max)
{
    struct mf_slot *s = mf_tls.slot;
    struct mf_walk_memo *m = &s->memo;
    uintptr_t *pcs = (uintptr_t *)out;
    uintptr_t *fp = (uintptr_t *)s->entry_fp;
    uintptr_t lo = (uintptr_t)fp; /* frames only ever lie above this one */
    /* Only the mapping that holds the first frame is known to be readable. Another one
     * (first call, a signal's alternate stack, a coroutine's) is looked up again; the walk
     * stops where that mapping ends. */
    if (lo < s->stack_lo || lo >= s->stack_hi)
        mf_stack_bounds(s, lo);
    if (max > (int)MF_WALK_MAX)
        max = (int)MF_WALK_MAX;
    bool own = pcs == s->pcs; /* the memo describes s->pcs */
    if (own && s->walk_changed < 0 && mf_fp_memo_holds(s, lo, max)) {
        s->walk_repeated = true;
        s->walk_same = m->n;
        return (int)m->n;
    }
    m->kind = MF_MEMO_NONE;
    int n = 0;
    /* fp + 2 would wrap for a garbage fp near the top of the address space: compare fp
     * itself against the last slot that still holds a whole frame record. Each frame lies
     * above the one before, so the first is the only one to check against the bottom; the
     * top is held in a local (stores to pcs could alias the slot's fields). */
    uintptr_t top = s->stack_hi - 2 * sizeof *fp;
    if ((uintptr_t)fp < s->stack_lo || s->stack_hi < 2 * sizeof *fp)
        return 0;
    struct mf_memo_frame *frame = m->frame;
    uintptr_t zero_at = 0;
    while (n < max && (uintptr_t)fp <= top && ((uintptr_t)fp & 7) == 0) {
        uintptr_t pc = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (!pc) {
            zero_at = (uintptr_t)fp;
            break;
        }
        frame[n].sp = (uintptr_t)fp;
        frame[n].bp = (uintptr_t)next;
        frame[n].pc = pc;
        pcs[n++] = pc;
        if (next <= fp)
            break;
        fp = next;
    }
    if (own && n > 0) {
        mf_memo_stamp(m, s, MF_MEMO_FP, max, 0, lo);
        m->n = (uint32_t)n;
        m->zero_at = zero_at;
    }
    return n;
}

/* ---- unwind rules per return address ------------------------------------------------
 * libunwind takes ~10 ns a frame on x86-64 (its fast trace looks each return address up in
 * a hash table, and that lookup lies on the walk's chain of dependent loads), a frame-
 * pointer walk ~2 ns but is wrong through code without frame pointers. For each return
 * address the walk meets, this table keeps how to step from it, read once from the
 * module's CFI (mf_cfi.c): by the frame pointer (CFA = rbp + 16, return address and
 * caller's rbp below it), by the stack pointer (CFA = rsp + k, rbp left as it was or saved
 * at CFA - 8 * off), that the stack ends there, or that libunwind must walk it (a signal
 * frame, a realigned frame, code without CFI). A stack whose every frame has a rule the
 * walk follows is walked from the rules (mf_unwind_cached), the loads of the rules off the
 * walk's chain; any other takes libunwind's unw_backtrace, loaded then.
 * Rules carry the module epoch they were read in: a library loaded where another one was
 * is read anew. Shared by the threads: slots are claimed by compare-and-swap, lookups are
 * plain loads, a table once in use is never freed. */
#define MF_RULES_FIRST_BITS 10 /* 16 KiB: the few hundred addresses of a short process */
#define MF_RULES_MAX_BITS 16 /* grown fourfold from 10 bits: 1 MiB, touched where used */
#define MF_RULES_PROBES 8
#define MF_RULE_EPOCH_SHIFT 8
#define MF_RULE_KIND_BITS 24 /* kind and epoch */
#define MF_RULE_KIND_MASK 0xffu
#define MF_RULE_EPOCH_MASK ((1u << MF_RULE_KIND_BITS) - 1 - MF_RULE_KIND_MASK)
#define MF_RULE_OFF_SHIFT 24 /* MF_RULE_SP_SAVED: rbp lies at CFA - 8 * off */
#define MF_RULE_K_SHIFT 40   /* MF_RULE_SP*: CFA = sp + k */
enum { MF_RULE_NONE, MF_RULE_FP, MF_RULE_SP, MF_RULE_SP_SAVED, MF_RULE_END, MF_RULE_OTHER };
struct mf_rule_slot {
    uintptr_t pc;
    uint64_t rule; /* kind | epoch << 8 | off << 24 | k << 40; 0 = none yet */
};
/* The table starts small and grows fourfold past half full: a hashed table touches a page
 * per few addresses, and one of 512 KiB from the start cost `ls /usr/lib` 110 page faults,
 * 246 in all against 146 now. A grown table replaces the old one, which stays mapped for
 * the walks still reading it; a rule stored into the old one meanwhile is read again. */
struct mf_rules {
    uint32_t shift; /* 64 - bits */
    uint32_t mask;
    uint32_t used; /* slots claimed */
    uint32_t pad;
    struct mf_rule_slot slot[];
};
struct mf_rules *mf_rules;
static struct {
    struct mf_rules head;
    struct mf_rule_slot slot[1u << MF_RULES_FIRST_BITS];
} mf_rules_first MF_LARGE_ZEROED;
/* The largest table found no room for an address: from then on an address without a rule
 * is libunwind's (its CFI would be read at every sample through it). */
static bool mf_rules_full;

void mf_rules_setup(void)
{
    bool cfi = false; /* mf_cfi.c reads x86-64's CFI only */
#if defined(__x86_64__)
    cfi = true;
#endif
    if (!cfi || !mf_opt.unwind_rules || mf_opt.unwinder != MF_UNWIND_LIBUNWIND || mf_rules)
        return;
    mf_rules_first.head.shift = 64 - MF_RULES_FIRST_BITS;
    mf_rules_first.head.mask = (1u << MF_RULES_FIRST_BITS) - 1;
    __atomic_store_n(&mf_rules, &mf_rules_first.head, __ATOMIC_RELEASE);
    /* Hashed: a few hundred return addresses reach most of its pages, each looked up (a
     * read) before it is written: 6 faults of `ls`, 1 system call instead. */
    mf_prefault(&mf_rules_first, sizeof mf_rules_first);
}

/* The walk follows kind (with its epoch) itself: FP, SP or SP_SAVED of this epoch. */
static inline bool mf_rule_walkable(uint64_t kind, uint64_t epoch)
{
    _Static_assert(MF_RULE_SP == MF_RULE_FP + 1 && MF_RULE_SP_SAVED == MF_RULE_FP + 2,
                   "the kinds a walk follows, one range");
    return kind - (MF_RULE_FP | epoch) <= MF_RULE_SP_SAVED - MF_RULE_FP;
}

static inline uint32_t mf_rule_home(const struct mf_rules *r, uintptr_t pc)
{
    return (uint32_t)((pc * 0x9e3779b97f4a7c15u) >> r->shift);
}

/* The rule kept for pc, of whatever epoch, or MF_RULE_NONE. */
static __attribute__((noinline)) uint64_t mf_rule_get(const struct mf_rules *r, uintptr_t pc)
{
    for (uint32_t i = 0, j = mf_rule_home(r, pc); i < MF_RULES_PROBES; i++, j = (j + 1) & r->mask) {
        uintptr_t p = __atomic_load_n(&r->slot[j].pc, __ATOMIC_ACQUIRE);
        if (p == pc)
            return __atomic_load_n(&r->slot[j].rule, __ATOMIC_ACQUIRE);
        if (!p)
            break;
    }
    return MF_RULE_NONE;
}

/* Keeps pc's rule in r; false if its neighbourhood is full. Two threads reading the same
 * CFI store the same rule. */
static bool mf_rule_put(struct mf_rules *r, uintptr_t pc, uint64_t rule)
{
    for (uint32_t i = 0, j = mf_rule_home(r, pc); i < MF_RULES_PROBES; i++, j = (j + 1) & r->mask) {
        uintptr_t p = 0;
        if (__atomic_compare_exchange_n(&r->slot[j].pc, &p, pc, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            __atomic_fetch_add(&r->used, 1, __ATOMIC_RELAXED);
        else if (p != pc)
            continue;
        __atomic_store_n(&r->slot[j].rule, rule, __ATOMIC_RELEASE);
        return true;
    }
    return false;
}

/* A table of 2^bits slots (bits above r's, at most MF_RULES_MAX_BITS), holding r's rules,
 * made the current one, unless memory is short or another thread replaced r first (no
 * lock: a fork cannot leave one held). */
static void mf_rules_grow_to(struct mf_rules *r, uint32_t bits)
{
    if (bits > MF_RULES_MAX_BITS)
        bits = MF_RULES_MAX_BITS;
    if (bits <= 64 - r->shift || __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE) != r)
        return;
    size_t size = sizeof *r + ((size_t)1 << bits) * sizeof r->slot[0];
    void *m = mf_anon_table(size); /* the old rules land all over it */
    if (m == MAP_FAILED)
        return;
    struct mf_rules *n = m;
    n->shift = 64 - bits;
    n->mask = (1u << bits) - 1;
    for (uint32_t j = 0; j <= r->mask; j++) {
        uintptr_t pc = __atomic_load_n(&r->slot[j].pc, __ATOMIC_ACQUIRE);
        uint64_t rule = pc ? __atomic_load_n(&r->slot[j].rule, __ATOMIC_ACQUIRE) : 0;
        if (rule)
            mf_rule_put(n, pc, rule);
    }
    if (!__atomic_compare_exchange_n(&mf_rules, &r, n, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        munmap(m, mf_anon_size(size));
}

/* Four times r's. */
static void mf_rules_grow(struct mf_rules *r)
{
    mf_rules_grow_to(r, 64 - r->shift + 2);
}

void mf_rules_reserve(uint64_t more)
{
    struct mf_rules *r = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    uint64_t want = __atomic_load_n(&r->used, __ATOMIC_RELAXED) + more;
    uint32_t bits = 64 - r->shift;
    while (bits < MF_RULES_MAX_BITS && want * 2 > ((uint64_t)1 << bits) - 1)
        bits += 2; /* fourfold, as the table grows */
    mf_rules_grow_to(r, bits);
}

/* Keeps pc's rule (with its epoch), growing the table past half full or when pc finds no
 * room; once the largest table has no room, nothing more is kept. */
static void mf_rule_store(uintptr_t pc, uint64_t rule)
{
    struct mf_rules *r = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    bool kept = mf_rule_put(r, pc, rule);
    if (__atomic_load_n(&r->used, __ATOMIC_RELAXED) * 2 <= r->mask && kept)
        return;
    mf_rules_grow(r);
    struct mf_rules *now = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    if (now != r) /* grown, here or by another thread */
        kept = mf_rule_put(now, pc, rule) || kept;
    if (!kept && now->shift == 64 - MF_RULES_MAX_BITS) /* else read again at its next walk */
        __atomic_store_n(&mf_rules_full, true, __ATOMIC_RELAXED);
}

/* ---- the rule table's side of the rule cache (mf_rule_cache.c) ----------------------
 * A cached rule is the table's word without its epoch; it is stored with the epoch of the
 * walk that found its module. */
uint64_t mf_rules_learned; /* rules read from the CFI by this process image */

uint64_t mf_rule_epoch_now(void)
{
    return (uint64_t)(__atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE) & 0xffff)
           << MF_RULE_EPOCH_SHIFT;
}

/* Whether rule (without its epoch) is one mf_rule_read could have made: a known kind, k and
 * off only where the kind has them and within what mf_cfi.c gives. */
bool mf_rule_sane(uint64_t rule)
{
    uint64_t kind = rule & MF_RULE_KIND_MASK, k = rule >> MF_RULE_K_SHIFT;
    uint64_t off = (rule >> MF_RULE_OFF_SHIFT) & 0xffff;
    if (rule & MF_RULE_EPOCH_MASK)
        return false;
    switch (kind) {
    case MF_RULE_FP:
    case MF_RULE_END:
    case MF_RULE_OTHER:
        return k == 0 && off == 0;
    case MF_RULE_SP:
        return off == 0 && k >= 8 && k <= MF_CFI_FRAME_MAX && !(k & 7);
    case MF_RULE_SP_SAVED: /* rbp inside the frame, below the return address */
        return k >= 16 && k <= MF_CFI_FRAME_MAX && !(k & 7) && off >= 2 && off * 8 <= k;
    default:
        return false;
    }
}

/* Keeps a cached rule for pc unless the table is at its largest and a third full: the rest
 * of its room is left to the rules the process learns. False: no more are kept. */
bool mf_rule_load(uintptr_t pc, uint64_t rule, uint64_t epoch)
{
    struct mf_rules *r = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    if (r->shift == 64 - MF_RULES_MAX_BITS && __atomic_load_n(&r->used, __ATOMIC_RELAXED) * 3 > r->mask)
        return false;
    bool kept = mf_rule_put(r, pc, rule | epoch);
    if (__atomic_load_n(&r->used, __ATOMIC_RELAXED) * 2 <= r->mask && kept)
        return true;
    mf_rules_grow(r);
    struct mf_rules *now = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    if (now != r)
        mf_rule_put(now, pc, rule | epoch);
    return true;
}

/* The table's rules of this epoch as pairs (pc, rule without its epoch) in out, at most max
 * of them; returns how many. */
uint64_t mf_rules_in(uint64_t epoch, uint64_t *out, uint64_t max)
{
    const struct mf_rules *r = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    uint64_t n = 0;
    for (uint32_t j = 0, slots = r ? r->mask + 1 : 0; j < slots && n < max; j++) {
        uintptr_t pc = __atomic_load_n(&r->slot[j].pc, __ATOMIC_ACQUIRE);
        uint64_t rule = pc ? __atomic_load_n(&r->slot[j].rule, __ATOMIC_ACQUIRE) : 0;
        if ((rule & MF_RULE_EPOCH_MASK) != epoch || !(rule & MF_RULE_KIND_MASK))
            continue;
        out[2 * n] = pc;
        out[2 * n + 1] = rule & ~(uint64_t)MF_RULE_EPOCH_MASK;
        n++;
    }
    return n;
}

/* pc's rule from its module's CFI, kept (MF_RULE_NONE if the table is full). Called from
 * the walk, on the slot's stack: the loader's iteration and the CFI's rows take more than a
 * sample may take of the program's. The module's cached rules come first, at its first
 * miss. */
static __attribute__((noinline)) uint64_t mf_rule_read(uintptr_t pc, uint64_t epoch)
{
    struct mf_cfi_rule c;
    if (__atomic_load_n(&mf_rules_full, __ATOMIC_RELAXED))
        return MF_RULE_NONE;
    uint32_t module = mf_rule_cache_module(pc, epoch);
    /* Loaded from the cache just now or at the module's first miss, into a table the walk
     * may not be reading (grown since it started), or kept by another thread meanwhile. */
    uint64_t kept = mf_rule_get(__atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE), pc);
    if ((kept & MF_RULE_KIND_MASK) && (kept & MF_RULE_EPOCH_MASK) == epoch)
        return kept;
    uint64_t cached = mf_rule_cache_find(module, pc);
    if (cached) {
        mf_rule_store(pc, cached | epoch);
        return cached | epoch;
    }
    __atomic_fetch_add(&mf_rules_learned, 1, __ATOMIC_RELAXED);
    mf_rule_cache_learned(module);
    /* No module holds pc (code made at run time, on the live stack so mapped now): it has
     * no CFI, libunwind's then. */
    if (!mf_cfi_rule_at(pc, &c))
        c.kind = MF_CFI_OTHER;
    static const uint64_t kinds[] = {
        [MF_CFI_OTHER] = MF_RULE_OTHER, [MF_CFI_FP] = MF_RULE_FP, [MF_CFI_SP] = MF_RULE_SP,
        [MF_CFI_SP_SAVED] = MF_RULE_SP_SAVED, [MF_CFI_END] = MF_RULE_END};
    uint64_t rule = kinds[c.kind] | epoch;
    if (c.kind == MF_CFI_SP || c.kind == MF_CFI_SP_SAVED)
        rule |= (uint64_t)c.k << MF_RULE_K_SHIFT | (uint64_t)c.off << MF_RULE_OFF_SHIFT;
    mf_rule_store(pc, rule);
    return rule;
}

/* The smallest root-first index below `upto` of a word the last rule walk read that changed
 * since, or upto: in one pass, a branch for every four words (a walk's first check runs over
 * all the words its last walk read, and the change it finds is near their end, among the
 * innermost frames'; two passes, one to tell and one to find, cost cc1 45 instructions a
 * recorded call more). */
static __attribute__((noinline)) uint32_t mf_memo_first_change(const struct mf_walk_memo *m,
                                                                uint32_t upto)
{
    const struct mf_memo_read *p = m->read, *fours = p + (upto & ~3u), *end = p + upto;
    for (; p < fours; p += 4)
        if ((*(const uintptr_t *)p[0].addr ^ p[0].val) | (*(const uintptr_t *)p[1].addr ^ p[1].val) |
            (*(const uintptr_t *)p[2].addr ^ p[2].val) | (*(const uintptr_t *)p[3].addr ^ p[3].val))
            break;
    for (; p < end; p++)
        if (*(const uintptr_t *)p->addr != p->val)
            return (uint32_t)(p - m->read);
    return upto;
}

/* The memo m (root first) from the walk in hand (w: frames 0 .. i, r words read, each
 * array filled from its end down, so that its last entries are root first too). w's frame
 * i is m's frame k (root-first index), which m keeps with the frames and words beyond; w's
 * frames below i and its r words are copied above them. With no kept part (k = -1, i = n)
 * the whole walk is. The stack's return addresses go the same way into pcs, which ends
 * where the slot's array ends: root-first frame t at pcs[MF_WALK_MAX - 1 - t], so the kept
 * part's are in place. (Copying each frame, word and return address by itself was 280 of
 * cc1's instructions a recorded call, this 109.) Returns the frames. */
static __attribute__((noinline)) uint32_t mf_memo_put(struct mf_walk_memo *m,
                                                      const struct mf_walk_memo *w,
                                                      uintptr_t *pcs, uint32_t i, int64_t k,
                                                      uint32_t r)
{
    uint32_t kept = k < 0 ? 0 : m->frame[k].rd; /* words read from frame i on */
    uint32_t n = (uint32_t)(k + 1) + i, at = (uint32_t)(k + 1);
    memcpy(&m->frame[at], &w->frame[MF_WALK_MAX - i], i * sizeof m->frame[0]);
    for (uint32_t t = at; t < n; t++) { /* words read before it -> words read from it on */
        m->frame[t].rd = kept + (r - m->frame[t].rd);
        pcs[MF_WALK_MAX - 1 - t] = m->frame[t].pc;
    }
    memcpy(&m->read[kept], &w->read[MF_MEMO_READS - r], r * sizeof m->read[0]);
    m->n = n;
    m->nreads = kept + r;
    return n;
}

/* The stack from mf_record_slow's frame by the rules alone, starting at its return address
 * (no profiler frame), or -1 where libunwind must walk it: a frame it has no rule for, or a
 * walk that would leave the stack mapping. Reads only inside the mapping that holds the
 * first frame. The stack's n frames end where s->pcs ends (mf_memo_put). */
static int mf_unwind_cached(struct mf_slot *s, int max)
{
    const struct mf_rules *rules = __atomic_load_n(&mf_rules, __ATOMIC_ACQUIRE);
    uint32_t module_epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
    uint64_t epoch = (uint64_t)(module_epoch & 0xffff) << MF_RULE_EPOCH_SHIFT;
    struct mf_walk_memo *l = &s->memo; /* the last walk */
    uintptr_t *pcs = s->pcs, fp = s->entry_fp;
    if (max > (int)MF_WALK_MAX)
        max = (int)MF_WALK_MAX;
    if (fp < s->stack_lo || fp >= s->stack_hi)
        mf_stack_bounds(s, fp);
    uintptr_t top = s->stack_hi - 16; /* the last place a frame record fits */
    if (fp < s->stack_lo || fp > top || (fp & 7)) {
        l->kind = MF_MEMO_NONE;
        return -1;
    }
    /* From the same first frame, with no word the last walk read changed, the stack is the
     * last walk's, still in pcs. Else its stack ends like this one's more often than not
     * (the same callers, a different leaf): from the frame where both walks are in the same
     * state (return address, stack and frame pointers), the rest is the last walk's if
     * every word it read from there on is unchanged. Stack pointers only grow along a walk,
     * so that frame is found by one pass over the last walk's. */
    bool splice = mf_memo_applies(l, s, MF_MEMO_RULES, max, module_epoch);
    /* the first changed word of the last walk's (root first), once looked for */
    int64_t changed = s->walk_changed;
    if (splice && l->entry == fp && changed < 0 &&
        (changed = mf_memo_first_change(l, l->nreads)) == l->nreads) {
        s->walk_repeated = true;
        s->walk_same = l->n;
        return (int)l->n;
    }
    /* The last walk's frame (root first) the search is at, -1 once past its root. */
    int64_t t = splice ? (int64_t)l->n - 1 : -1;
    int64_t keep = -1; /* the last walk's frame where this one joins it */
    struct mf_walk_memo *c = &s->walk;
    bool truncated = false;
    /* Each word read from the stack, and where: at most two a frame. */
    uint32_t r = 0;
    struct mf_memo_read *cr = &c->read[MF_MEMO_READS - 1]; /* filled from the end down */
    struct mf_memo_frame *cf = &c->frame[MF_WALK_MAX - 1];
#define MF_STACK_WORD(a) (cr[-(ptrdiff_t)r].addr = (uintptr_t)(a), cr[-(ptrdiff_t)r].val = *(a), cr[-(ptrdiff_t)r++].val)
    uintptr_t pc = MF_STACK_WORD((const uintptr_t *)fp + 1), sp = fp + 16;
    /* Where the frame pointer of the frame in hand is saved, read only where a frame's CFA
     * is reckoned from it: a compile's functions save it more often than they use it. */
    uintptr_t bp_at = fp;
    int n = 0;
    for (;;) {
        uint32_t i = (uint32_t)n++;
        cf[-(ptrdiff_t)i] = (struct mf_memo_frame){sp, bp_at, pc, r};
        if (t >= 0) {
            while (t >= 0 && l->frame[t].sp < sp)
                t--;
            const struct mf_memo_frame *lf = &l->frame[t < 0 ? 0 : t];
            /* The joined stack (t + 1 frames from the last walk) must fit in max, and a last
             * walk cut at max has no frames beyond its own to give. */
            if (t >= 0 && lf->sp == sp && lf->pc == pc && lf->bp == bp_at &&
                i + (uint64_t)t + 1 <= (uint64_t)max && (!l->truncated || t + 1 + i == l->n)) {
                if (changed < 0)
                    changed = mf_memo_first_change(l, lf->rd);
                if (changed >= lf->rd) {
                    keep = t;
                    truncated = l->truncated;
                    break;
                }
            }
        }
        if (MF_UNLIKELY(n == max)) {
            truncated = true;
            break;
        }
        /* Most addresses sit in their home slot: one load, off the walk's chain. The kind
         * and the epoch are compared at once. */
        const struct mf_rule_slot *home = &rules->slot[mf_rule_home(rules, pc)];
        uint64_t rule = __atomic_load_n(&home->pc, __ATOMIC_ACQUIRE) == pc
                            ? __atomic_load_n(&home->rule, __ATOMIC_ACQUIRE)
                            : mf_rule_get(rules, pc);
        uint64_t kind = rule & ((1u << MF_RULE_KIND_BITS) - 1);
        if (MF_UNLIKELY(!mf_rule_walkable(kind, epoch))) {
            if ((kind & ~(uint64_t)0xff) != epoch || kind == epoch) { /* none yet, or stale */
                rule = mf_rule_read(pc, epoch);
                kind = rule & ((1u << MF_RULE_KIND_BITS) - 1);
            }
            if (kind == (MF_RULE_END | epoch))
                break;
            if (!mf_rule_walkable(kind, epoch))
                goto unwalkable;
        }
        if (kind == (MF_RULE_FP | epoch)) {
            uintptr_t bp = MF_STACK_WORD((const uintptr_t *)bp_at);
            if (bp < sp || bp > top || (bp & 7))
                goto unwalkable;
            pc = MF_STACK_WORD((const uintptr_t *)bp + 1);
            sp = bp + 16;
            bp_at = bp;
        } else {
            sp += rule >> MF_RULE_K_SHIFT;
            if (sp > top + 16 || (sp & 7))
                goto unwalkable;
            pc = MF_STACK_WORD((const uintptr_t *)sp - 1);
            if (kind == (MF_RULE_SP_SAVED | epoch)) /* off <= k / 8: inside this frame */
                bp_at = sp - 8 * ((rule >> MF_RULE_OFF_SHIFT) & 0xffff);
        }
    }
#undef MF_STACK_WORD
    /* Joined: frame n - 1 is the last walk's frame `keep`, which stays with its words. */
    n = (int)mf_memo_put(l, c, pcs, keep < 0 ? (uint32_t)n : (uint32_t)n - 1, keep, r);
    s->walk_same = (uint32_t)(keep + 1);
    mf_memo_stamp(l, s, MF_MEMO_RULES, max, module_epoch, fp);
    l->truncated = truncated;
    return n;
unwalkable: /* pcs no longer holds the last walk's stack */
    l->kind = MF_MEMO_NONE;
    return -1;
}

/* The rule walk as mf_backtrace_on_stack calls an unwinder, on the slot's stack: the
 * program's stack pays for the slow path's frame and the switch, not for the walk's. */
int mf_unwind_rules(void **pcs, int max)
{
    (void)pcs; /* the slot's pcs, which the walk's memo describes */
    return mf_unwind_cached(mf_tls.slot, max);
}

int mf_unwind_again(struct mf_slot *s, int max, uint32_t kind)
{
    struct mf_walk_memo *m = &s->memo;
    uintptr_t fp = s->entry_fp;
    if (max > (int)MF_WALK_MAX)
        max = (int)MF_WALK_MAX;
    if (fp < s->stack_lo || fp >= s->stack_hi) /* the walk looks its mapping up */
        return -1;
    if (kind == MF_MEMO_FP) {
        if (!mf_fp_memo_holds(s, fp, max)) {
            s->walk_changed = 0;
            return -1;
        }
    } else {
        uint32_t module_epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE);
        if (!mf_memo_applies(m, s, MF_MEMO_RULES, max, module_epoch) || m->entry != fp)
            return -1;
        s->walk_changed = mf_memo_first_change(m, m->nreads);
        if (s->walk_changed != m->nreads)
            return -1;
    }
    s->walk_repeated = true;
    s->walk_same = m->n;
    return (int)m->n;
}
