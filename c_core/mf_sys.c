/* Formatting, messages, clocks and system calls without malloc, stdio, locks or
 * cancellation points: these run inside the allocator (DESIGN §5, §12). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "mf_internal.h"
#include "mf_utf8.h"

char *mf_append(char *dst, char *end, const char *s)
{
    while (*s && dst < end - 1)
        *dst++ = *s++;
    *dst = '\0';
    return dst;
}

char *mf_append_u64(char *dst, char *end, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && dst < end - 1)
        *dst++ = tmp[--n];
    *dst = '\0';
    return dst;
}

char *mf_append_hex(char *dst, char *end, uint64_t v, int digits)
{
    for (int i = digits - 1; i >= 0 && dst < end - 1; i--)
        *dst++ = "0123456789abcdef"[(v >> (4 * i)) & 15];
    *dst = '\0';
    return dst;
}

/* Whether stderr takes len more bytes: a regular file at RLIMIT_FSIZE would answer our
 * line with SIGXFSZ, which kills the program. */
static bool mf_stderr_fits(size_t len)
{
    struct rlimit rl;
    struct stat st;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || fstat(2, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return true;
    off_t pos = lseek(2, 0, SEEK_CUR); /* O_APPEND writes at st_size: take the larger */
    uint64_t at = pos > st.st_size ? (uint64_t)pos : (uint64_t)st.st_size;
    return at + len <= (uint64_t)rl.rlim_cur;
}

/* s appended as mf_print shows a name (mf_esc_char), as much of it as fits whole. */
static char *mf_append_shown(char *dst, char *end, const char *s)
{
    while (*s) {
        char out[6];
        size_t len, n = mf_esc_char(s, out, &len);
        if (dst + n >= end)
            break;
        memcpy(dst, out, n);
        dst += n;
        s += len;
    }
    *dst = '\0';
    return dst;
}

/* One line on stderr, "malloc_freq: " + the parts; NULL parts are skipped. With `said`, at
 * most one such line per process (for errors that every thread would hit again). A part may
 * be a path or an environment variable's value: each is shown as mf_print shows names, so
 * that none sends the terminal a control character. */
void mf_warnv(int *said, const char *const *parts, int n)
{
    if (said && __atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
        return;
    char line[1024];
    char *end = line + sizeof line - 1, *p = mf_append(line, end, "malloc_freq: ");
    for (int i = 0; i < n; i++)
        if (parts[i])
            p = mf_append_shown(p, end, parts[i]);
    *p++ = '\n';
    int saved = errno;
    if (mf_stderr_fits((size_t)(p - line))) {
        ssize_t rc = mf_sys_write(2, line, (size_t)(p - line));
        (void)rc;
    }
    errno = saved;
}

void mf_warn(const char *a, const char *b, const char *c, const char *d)
{
    const char *parts[] = {a, b, c, d};
    mf_warnv(NULL, parts, 4);
}

void mf_warn_once(int *said, const char *a, const char *b, const char *c, const char *d)
{
    const char *parts[] = {a, b, c, d};
    mf_warnv(said, parts, 4);
}

/* ---- system calls that are no cancellation points --------------------------------------
 * glibc's open, read, write, pwrite, close and fallocate act on a pending pthread_cancel;
 * inside malloc that would end the thread with the program's locks held. syscall() does not
 * (DESIGN §12). */

/* Every signal that can be blocked, blocked, the old mask in *old; errno untouched (the
 * call cannot fail with these arguments). */
void mf_signals_block(uint64_t *old)
{
    uint64_t all = ~0ull;
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, old, sizeof all) != 0)
        *old = ~0ull; /* nothing to restore (mf_signals_restore) */
}

void mf_signals_restore(const uint64_t *old)
{
    if (*old != ~0ull)
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, sizeof *old);
}

int mf_sys_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}

ssize_t mf_sys_write(int fd, const void *buf, size_t len)
{
    return (ssize_t)syscall(SYS_write, fd, buf, len);
}

ssize_t mf_sys_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
    return (ssize_t)syscall(SYS_pwrite64, fd, buf, len, (off_t)off);
}

ssize_t mf_sys_pwritev(int fd, const struct iovec *iov, int n, uint64_t off)
{
    /* The offset's low and high halves: on 64-bit the first is the whole of it. */
    return (ssize_t)syscall(SYS_pwritev, fd, iov, n, (unsigned long)off,
                            (unsigned long)((off >> 16) >> 16));
}

ssize_t mf_sys_read(int fd, void *buf, size_t len)
{
    return (ssize_t)syscall(SYS_read, fd, buf, len);
}

int mf_sys_openat(int dirfd, const char *path, int flags, unsigned mode)
{
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

int mf_sys_ioctl(int fd, unsigned long request, void *arg)
{
    return (int)syscall(SYS_ioctl, fd, request, arg);
}

int mf_sys_fallocate(int fd, int mode, uint64_t off, uint64_t len)
{
    return (int)syscall(SYS_fallocate, fd, mode, (off_t)off, (off_t)len);
}

/* Maps the pages of [p, p + len) writable now, in one system call (Linux 5.14 and later;
 * before, nothing). A short process touches most of such a range anyway, and a page's first
 * touch costs it a fault, two if the first touch is a read (zero page, then copy): ~2.5 us
 * each on this machine (docs/performance.md). Anonymous memory only: a file's page written in
 * advance costs ext4 what its fault would have, and more pages get written. */
void mf_prefault(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
    syscall(SYS_madvise, lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}

/* A private table of `bytes`, zeroed, its pages mapped: mf_anon_size(bytes) of anonymous
 * memory at the address returned (MAP_FAILED without memory). From MF_HUGE_FROM bytes up
 * that is whole 2 MiB blocks, aligned and asked for transparent huge pages: in this VM a
 * 4 KiB page's first touch costs 14-20 us, a huge page's 0.1-0.2 ms when the kernel has one
 * (0.3-0.5 us per 4 KiB), so a 1 MiB index cost its 256 faults, 4-5 ms. Without huge pages
 * (THP "never", none free) it is 4 KiB pages as below, only `bytes` of them touched. */
#define MF_HUGE_BYTES ((size_t)2 << 20)
size_t mf_anon_size(size_t bytes)
{
    return bytes >= MF_HUGE_FROM ? (bytes + MF_HUGE_BYTES - 1) & ~(MF_HUGE_BYTES - 1) : bytes;
}

static void *mf_anon_map(size_t bytes)
{
    if (bytes < MF_HUGE_FROM) {
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED)
            mf_prefault(m, bytes);
        return m;
    }
    size_t size = mf_anon_size(bytes);
    char *raw = mmap(NULL, size + MF_HUGE_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return MAP_FAILED;
    char *m = (char *)(((uintptr_t)raw + MF_HUGE_BYTES - 1) & ~(uintptr_t)(MF_HUGE_BYTES - 1));
    if (m > raw)
        munmap(raw, (size_t)(m - raw));
    munmap(m + size, (size_t)(raw + MF_HUGE_BYTES - m));
#ifdef MADV_HUGEPAGE
    madvise(m, size, MADV_HUGEPAGE);
#endif
    mf_prefault(m, bytes);
    return m;
}

/* errno is the program's: the walk grows the rule table, and madvise fails where the
 * kernel has no huge pages. */
void *mf_anon_table(size_t bytes)
{
    int err = errno;
    void *m = mf_anon_map(bytes);
    errno = err;
    return m;
}

/* Address space for tables made in it later, a page mapped at a time (mf_prefault). */
void *mf_anon_reserve(size_t bytes)
{
    int err = errno;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    errno = err;
    return m;
}

/* Puts a private copy of [addr, addr + len) in place of what is mapped there (a fork
 * child's view of a file its parent shares): what is written there from now on is not
 * written to the file. Without memory for the copy the mapping stays as it was. */
void mf_privatize(void *addr, size_t len)
{
    void *copy = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return;
    memcpy(copy, addr, len);
    if (mremap(copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, addr) == MAP_FAILED)
        munmap(copy, len);
}

/* strerror() may translate, which allocates; strerrordesc_np() returns a constant. */
const char *mf_strerror(int err)
{
    const char *s = strerrordesc_np(err);
    return s ? s : "unknown error";
}

uint64_t mf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mf_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

pid_t mf_gettid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* The working directory into buf, or false: one system call, no import to bind and no
 * errno (on x86-64; elsewhere through syscall()). Run in every process the library is
 * loaded into, /bin/true's included: binding getcwd and __errno_location lazily cost more
 * than the call (2,700 instructions against ~300). */
bool mf_getcwd(char *buf, size_t size)
{
#if defined(__x86_64__)
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"((long)SYS_getcwd), "D"(buf), "S"(size)
                     : "rcx", "r11", "memory");
    return rc > 0 && buf[0] == '/'; /* "(unreachable)..." is no path */
#else
    int err = errno;
    long rc = syscall(SYS_getcwd, buf, size);
    errno = err;
    return rc > 0 && buf[0] == '/';
#endif
}

/* A seccomp filter may kill the process for a system call it refuses (open, openat...): once
 * one is seen, whether through the front end's prctl (mf_filter_seen) or installed behind
 * its back (a raw system call), the profiler opens nothing more. PR_GET_SECCOMP is the
 * cheap look: one system call, answered 2 under a filter. */
static int mf_filter;

void mf_filter_seen(void)
{
    __atomic_store_n(&mf_filter, 1, __ATOMIC_RELAXED);
}

bool mf_filtered(void)
{
    if (__atomic_load_n(&mf_filter, __ATOMIC_RELAXED))
        return true;
    int err = errno;
    long mode = syscall(SYS_prctl, PR_GET_SECCOMP, 0, 0, 0, 0);
    if (mode != 0 && !(mode < 0 && errno == EINVAL)) /* EINVAL: a kernel without seccomp */
        mf_filter_seen();
    errno = err;
    return __atomic_load_n(&mf_filter, __ATOMIC_RELAXED);
}

/* Decimal digits only, no sign, no overflow. */
bool mf_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

