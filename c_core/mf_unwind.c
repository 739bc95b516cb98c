/* Stack capture behind one function: libunwind's unw_backtrace (correct without frame
 * pointers, DESIGN §3) or a frame-pointer walk (several times cheaper, for programs built
 * with frame pointers). libunwind is dlopen'd RTLD_LOCAL at start-up, never linked, so its
 * _Unwind_* never replace libgcc's in the program (DESIGN §4). */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/single_threaded.h>
#include <string.h>
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
     * itself against the last slot that still holds a whole frame record. */
    while (n < max && (uintptr_t)fp >= lo && (uintptr_t)fp <= s->stack_hi - 2 * sizeof *fp &&
           ((uintptr_t)fp & 7) == 0) {
        uintptr_t pc = fp[1];
        if (!pc)
            break;
        pcs[n++] = pc;
        uintptr_t *next = (uintptr_t *)fp[0];
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}
