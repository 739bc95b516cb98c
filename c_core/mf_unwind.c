/* Stack capture behind one function: libunwind's unw_backtrace (correct without frame
 * pointers, DESIGN §3) or a frame-pointer walk (several times cheaper, for programs built
 * with frame pointers). libunwind is dlopen'd RTLD_LOCAL at start-up, never linked, so its
 * _Unwind_* never replace libgcc's in the program (DESIGN §4). */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
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

/* libunwind's cursor API, for learning unwind rules (mf_unwind_learn). Its header is not
 * needed: on x86-64 unw_context_t is a ucontext_t and unw_cursor_t 127 words. */
#define MF_UNW_CURSOR_WORDS 127
#define MF_UNW_RBP 6
#define MF_UNW_RSP 7
#define MF_UNW_RIP 16
static int (*mf_unw_getcontext)(ucontext_t *);
static int (*mf_unw_init_local)(void *cursor, ucontext_t *);
static int (*mf_unw_step)(void *cursor);
static int (*mf_unw_get_reg)(void *cursor, int reg, uint64_t *value);
/* unw_proc_info_t starts with start_ip, end_ip; for a frame without CFI libunwind returns
 * success all the same, with [ip, ip + 1). */
static int (*mf_unw_get_proc_info)(void *cursor, uint64_t *info);
/* unw_save_loc_t: {int type; 8-byte aligned union {addr, regnum}; ...}: where the
 * register's value in the cursor's frame is kept. */
static int (*mf_unw_get_save_loc)(void *cursor, int reg, uint64_t *loc);
#define MF_UNW_SLT_MEMORY 1
#define MF_UNW_SLT_REG 2
#define MF_UNW_PROC_INFO_WORDS 32 /* unw_proc_info_t takes 11 */

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

static void mf_rules_init(void *lib);

void mf_unwind_init(void)
{
    if (mf_opt.unwinder != MF_UNWIND_LIBUNWIND || mf_unw_backtrace || mf_unwind_tried)
        return;
    mf_unwind_tried = true;
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
    mf_unw_backtrace = (int (*)(void **, int))bt;
    mf_rules_init(lib);
}

/* The mapping that holds `here`, from /proc/self/maps read with raw system calls:
 * pthread_getattr_np allocates and locks (DESIGN §5). */
static void mf_stack_bounds(struct mf_slot *s, uintptr_t here)
{
    s->stack_lo = s->stack_hi = here; /* nothing found: walk no frames rather than guess */
    int fd = mf_sys_openat(AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return;
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
                s->stack_lo = lo;
                s->stack_hi = hi;
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

/* Walks the frame-pointer chain from mf_record_slow's frame on the program's stack (the
 * walk itself runs on the slot's stack, mf_stack.c). */
int mf_unwind_fp(void **out, int max)
{
    struct mf_slot *s = mf_tls.slot;
    uintptr_t *pcs = (uintptr_t *)out;
    uintptr_t *fp = (uintptr_t *)s->entry_fp;
    uintptr_t lo = (uintptr_t)fp; /* frames only ever lie above this one */
    /* Only the mapping that holds the first frame is known to be readable. Another one
     * (first call, a signal's alternate stack, a coroutine's) is looked up again; the walk
     * stops where that mapping ends. */
    if (lo < s->stack_lo || lo >= s->stack_hi)
        mf_stack_bounds(s, lo);
    int n = 0;
    /* fp + 2 would wrap for a garbage fp near the top of the address space: compare fp
     * itself against the last slot that still holds a whole frame record. Each frame lies
     * above the one before, so the first is the only one to check against the bottom; the
     * top is held in a local (stores to pcs could alias the slot's fields). */
    uintptr_t top = s->stack_hi - 2 * sizeof *fp;
    if ((uintptr_t)fp < s->stack_lo || s->stack_hi < 2 * sizeof *fp)
        return 0;
    while (n < max && (uintptr_t)fp <= top && ((uintptr_t)fp & 7) == 0) {
        uintptr_t pc = fp[1];
        uintptr_t *next = (uintptr_t *)fp[0];
        if (!pc)
            break;
        pcs[n++] = pc;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

/* ---- unwind rules per return address ------------------------------------------------
 * libunwind takes ~10 ns a frame on x86-64 (its fast trace looks each return address up in
 * a hash table, and that lookup lies on the walk's chain of dependent loads), a frame-
 * pointer walk ~2 ns but is wrong through code without frame pointers. For each return
 * address libunwind has stepped from, this table keeps how it did: by the frame pointer
 * (CFA = rbp + 16, return address and caller's rbp below it), by the stack pointer
 * (CFA = rsp + k, rbp left as it was or saved at CFA - 8 * off), or that the stack ends
 * there. A stack whose every frame has such a rule is walked from the rules
 * (mf_unwind_cached), the loads of the rules off the walk's chain; a frame with another
 * rule (a signal frame, a realigned frame) takes libunwind's unw_backtrace, one with none
 * yet libunwind's cursor, which learns it (mf_unwind_learn). Only frames with CFI get a rule (without, libunwind guesses from the
 * frame pointer and what it may read, which differs from one call to the next): the rule
 * of an address is then the CFI's there, so one observation holds for all; a later one
 * that differs marks the address for libunwind all the same.
 * Rules carry the module epoch they were learnt in: a library loaded where another one was
 * is learnt anew. Shared by the threads: slots are claimed by compare-and-swap, lookups are
 * plain loads, nothing is ever freed. */
#define MF_RULES_BITS 15
#define MF_RULES_SLOTS (1u << MF_RULES_BITS)
#define MF_RULES_PROBES 8
#define MF_RULE_EPOCH_SHIFT 8
#define MF_RULE_KIND_BITS 24 /* kind and epoch */
#define MF_RULE_OFF_SHIFT 24 /* MF_RULE_SP_SAVED: rbp lies at CFA - 8 * off */
#define MF_RULE_K_SHIFT 40   /* MF_RULE_SP*: CFA = sp + k */
#define MF_RULE_FRAME_MAX (64u << 10) /* larger frames are left to libunwind */
enum { MF_RULE_NONE, MF_RULE_FP, MF_RULE_SP, MF_RULE_SP_SAVED, MF_RULE_END, MF_RULE_OTHER };
struct mf_rule_slot {
    uintptr_t pc;
    uint64_t rule; /* kind | epoch << 8 | off << 24 | k << 40; 0 = none yet */
};
struct mf_rule_slot *mf_rules;
/* An address found no room: from then on an address without a rule is libunwind's, not
 * learnt (a learning walk costs several unw_backtrace's, and would be made at every sample
 * through that address). */
static bool mf_rules_full;

static void mf_rules_init(void *lib)
{
    if (!mf_opt.unwind_rules)
        return;
    mf_unw_getcontext = (int (*)(ucontext_t *))dlsym(lib, "_Ux86_64_getcontext");
    mf_unw_init_local = (int (*)(void *, ucontext_t *))dlsym(lib, MF_UNW_PREFIX "init_local");
    mf_unw_step = (int (*)(void *))dlsym(lib, MF_UNW_PREFIX "step");
    mf_unw_get_reg = (int (*)(void *, int, uint64_t *))dlsym(lib, MF_UNW_PREFIX "get_reg");
    mf_unw_get_proc_info = (int (*)(void *, uint64_t *))dlsym(lib, MF_UNW_PREFIX "get_proc_info");
    mf_unw_get_save_loc = (int (*)(void *, int, uint64_t *))dlsym(lib, MF_UNW_PREFIX "get_save_loc");
#if defined(__x86_64__)
    if (!mf_unw_getcontext || !mf_unw_init_local || !mf_unw_step || !mf_unw_get_reg ||
        !mf_unw_get_proc_info || !mf_unw_get_save_loc)
        return;
    void *m = mmap(NULL, MF_RULES_SLOTS * sizeof *mf_rules, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED)
        __atomic_store_n(&mf_rules, (struct mf_rule_slot *)m, __ATOMIC_RELEASE);
#endif
}

static uint32_t mf_rule_home(uintptr_t pc)
{
    return (uint32_t)((pc * 0x9e3779b97f4a7c15u) >> (64 - MF_RULES_BITS));
}

/* The rule kept for pc, of whatever epoch, or MF_RULE_NONE. */
static __attribute__((noinline)) uint64_t mf_rule_get(const struct mf_rule_slot *r, uintptr_t pc)
{
    for (uint32_t i = 0, j = mf_rule_home(pc); i < MF_RULES_PROBES; i++, j = (j + 1) & (MF_RULES_SLOTS - 1)) {
        uintptr_t p = __atomic_load_n(&r[j].pc, __ATOMIC_ACQUIRE);
        if (p == pc)
            return __atomic_load_n(&r[j].rule, __ATOMIC_ACQUIRE);
        if (!p)
            break;
    }
    return MF_RULE_NONE;
}

/* Records what libunwind did at pc: the first observation in an epoch is the rule, a later
 * one that differs makes it MF_RULE_OTHER (libunwind for good). A full neighbourhood keeps
 * nothing: that address takes libunwind. */
static void mf_rule_observe(uintptr_t pc, uint64_t rule)
{
    struct mf_rule_slot *r = mf_rules;
    uint64_t epoch = __atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE) & 0xffff;
    rule |= epoch << MF_RULE_EPOCH_SHIFT;
    for (uint32_t i = 0, j = mf_rule_home(pc); i < MF_RULES_PROBES; i++, j = (j + 1) & (MF_RULES_SLOTS - 1)) {
        uintptr_t p = 0;
        if (!__atomic_compare_exchange_n(&r[j].pc, &p, pc, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
            p != pc)
            continue;
        uint64_t old = __atomic_load_n(&r[j].rule, __ATOMIC_ACQUIRE);
        for (;;) {
            uint64_t want = rule;
            if (old && ((old >> MF_RULE_EPOCH_SHIFT) & 0xffff) == epoch)
                want = old == rule ? old : (MF_RULE_OTHER | epoch << MF_RULE_EPOCH_SHIFT);
            if (want == old || __atomic_compare_exchange_n(&r[j].rule, &old, want, false,
                                                           __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
                return;
        }
    }
    __atomic_store_n(&mf_rules_full, true, __ATOMIC_RELAXED);
}

static bool mf_on_stack(const struct mf_slot *s, uintptr_t lo, uintptr_t hi)
{
    return s->stack_lo <= lo && lo <= hi && hi <= s->stack_hi;
}

/* The rule of the frame at ip (its stack pointer sp, frame pointer bp, whether it has
 * CFI) from the step libunwind made to its caller's (nip, nsp, nbp, and where the CFI put
 * nbp: loc, a word of unw_save_loc_t each). A frame-pointer frame is told by its record; a
 * stack-pointer frame left rbp alone or saved it inside the frame, where the record is not
 * (a frame realigned at run time keeps one at rbp, and its size varies). Where the CFI
 * keeps the caller's rbp, libunwind says: in this frame if saved here, else further down
 * (a callee's frame, the context) or in a register. Anything else is libunwind's. */
static void mf_rule_learn(const struct mf_slot *s, bool cfi, uint64_t ip, uint64_t sp,
                          uint64_t bp, uint64_t nip, uint64_t nsp, uint64_t nbp,
                          const uint64_t *loc)
{
    uint64_t rule = MF_RULE_OTHER;
    if (!cfi || !mf_on_stack(s, sp, nsp) || (sp & 7) || (nsp & 7))
        ;
    else if (bp >= sp && bp + 16 == nsp && ((const uintptr_t *)bp)[1] == nip &&
             ((const uintptr_t *)bp)[0] == nbp)
        rule = MF_RULE_FP;
    else if (nsp > sp && nsp - sp <= MF_RULE_FRAME_MAX && ((const uintptr_t *)nsp)[-1] == nip) {
        uint32_t type = (uint32_t)loc[0];
        uint64_t at = loc[1];
        bool in_frame = type == MF_UNW_SLT_MEMORY && at >= sp && at < nsp;
        if (!in_frame && (type == MF_UNW_SLT_MEMORY || type == MF_UNW_SLT_REG) && nbp == bp)
            rule = MF_RULE_SP; /* kept by a callee or in a register: not this frame's */
        else if (in_frame && at + 8 < nsp && !(at & 7) && at != bp && *(const uintptr_t *)at == nbp)
            rule = MF_RULE_SP_SAVED | (nsp - at) / 8 << MF_RULE_OFF_SHIFT;
        if (rule != MF_RULE_OTHER)
            rule |= (nsp - sp) << MF_RULE_K_SHIFT;
    }
    mf_rule_observe(ip, rule);
}

/* Called like unw_backtrace (mf_backtrace_on_stack, on the slot's stack): libunwind's
 * cursor stepped frame by frame teaches the rule of each frame it stepped from; the stack
 * returned is unw_backtrace's all the same, so that libunwind's own cache sees every walk
 * it saw before (through a frame without CFI its answers depend on what it cached). */
static __attribute__((noinline)) void mf_unwind_learn_rules(void)
{
    struct mf_slot *s = mf_tls.slot;
    ucontext_t uc;
    uint64_t cursor[MF_UNW_CURSOR_WORDS];
    if (mf_unw_getcontext(&uc) < 0 || mf_unw_init_local(cursor, &uc) < 0)
        return;
    uint64_t ip = 0, sp = 0, bp = 0, info[MF_UNW_PROC_INFO_WORDS];
    int max = MF_DEPTH_MAX + MF_OWN_FRAMES_MAX + 1;
    bool have = false, cfi = false;
    int n = 0, r = 1;
    while (n < max) {
        if (have)
            cfi = mf_unw_get_proc_info(cursor, info) == 0 && !(info[0] == ip && info[1] == ip + 1);
        if ((r = mf_unw_step(cursor)) <= 0)
            break;
        uint64_t nip, nsp, nbp, loc[8];
        if (mf_unw_get_reg(cursor, MF_UNW_RIP, &nip) < 0 || mf_unw_get_reg(cursor, MF_UNW_RSP, &nsp) < 0 ||
            mf_unw_get_reg(cursor, MF_UNW_RBP, &nbp) < 0 || mf_unw_get_save_loc(cursor, MF_UNW_RBP, loc) < 0) {
            have = false;
            break;
        }
        if (have)
            mf_rule_learn(s, cfi, ip, sp, bp, nip, nsp, nbp, loc);
        n++;
        ip = nip, sp = nsp, bp = nbp, have = true;
    }
    if (have && r <= 0)
        mf_rule_observe(ip, r == 0 && cfi ? MF_RULE_END : MF_RULE_OTHER);
}

static int mf_unwind_learn(void **pcs, int max)
{
    uint64_t t0 = mf_mono_ns();
    mf_unwind_learn_rules();
    mf_tls.slot->learn_credit_ns -= (int64_t)(mf_mono_ns() - t0);
    return mf_unw_backtrace(pcs, max);
}

/* The stack from mf_record_slow's frame by the rules alone, starting at its return address
 * (no profiler frame), or -1 with *bt set to the libunwind function to ask instead: where a
 * rule is missing the learner, where a frame has another rule or the walk would leave the
 * stack mapping, unw_backtrace. Reads only inside the mapping that holds the first frame. */
int mf_unwind_cached(struct mf_slot *s, int max, int (**bt)(void **, int))
{
    const struct mf_rule_slot *rules = mf_rules;
    uint64_t epoch = (uint64_t)(__atomic_load_n(&mf_module_epoch, __ATOMIC_ACQUIRE) & 0xffff)
                     << MF_RULE_EPOCH_SHIFT;
    uintptr_t *pcs = s->pcs, fp = s->entry_fp;
    if (fp < s->stack_lo || fp >= s->stack_hi)
        mf_stack_bounds(s, fp);
    uintptr_t top = s->stack_hi - 16; /* the last place a frame record fits */
    *bt = mf_unw_backtrace;
    if (fp < s->stack_lo || fp > top || (fp & 7))
        return -1;
    uintptr_t pc = ((const uintptr_t *)fp)[1], bp = ((const uintptr_t *)fp)[0], sp = fp + 16;
    int n = 0;
    for (;;) {
        pcs[n++] = pc;
        if (MF_UNLIKELY(n == max))
            break;
        /* Most addresses sit in their home slot: one load, off the walk's chain. The kind
         * and the epoch are compared at once. */
        const struct mf_rule_slot *home = &rules[mf_rule_home(pc)];
        uint64_t rule = __atomic_load_n(&home->pc, __ATOMIC_ACQUIRE) == pc
                            ? __atomic_load_n(&home->rule, __ATOMIC_ACQUIRE)
                            : mf_rule_get(rules, pc);
        uint64_t kind = rule & ((1u << MF_RULE_KIND_BITS) - 1);
        if (MF_LIKELY(kind == (MF_RULE_FP | epoch))) {
            if (bp < sp || bp > top || (bp & 7))
                return -1;
            pc = ((const uintptr_t *)bp)[1];
            sp = bp + 16;
            bp = ((const uintptr_t *)bp)[0];
        } else if (kind == (MF_RULE_SP | epoch) || kind == (MF_RULE_SP_SAVED | epoch)) {
            sp += rule >> MF_RULE_K_SHIFT;
            if (sp > top + 16 || (sp & 7))
                return -1;
            pc = ((const uintptr_t *)sp)[-1];
            if (kind == (MF_RULE_SP_SAVED | epoch)) /* off <= k / 8: inside this frame */
                bp = ((const uintptr_t *)sp)[-(ptrdiff_t)((rule >> MF_RULE_OFF_SHIFT) & 0xffff)];
        } else {
            if (kind == (MF_RULE_END | epoch))
                break;
            if (kind != (MF_RULE_OTHER | epoch) && /* none yet, or from another epoch */
                !__atomic_load_n(&mf_rules_full, __ATOMIC_RELAXED) && s->learn_credit_ns > 0)
                *bt = mf_unwind_learn;
            return -1;
        }
    }
    if (s->learn_credit_ns < MF_LEARN_CREDIT_NS)
        s->learn_credit_ns += MF_RULE_SAVES_NS_PER_FRAME * n;
    return n;
}
