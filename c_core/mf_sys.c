/* Formatting, messages and clocks without malloc, stdio or locks: these run inside the
 * allocator (DESIGN §5). */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mf_internal.h"

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

/* One line on stderr, "malloc_freq: " + the parts; NULL parts are skipped. */
void mf_warn(const char *a, const char *b, const char *c, const char *d)
{
    char line[1024];
    char *end = line + sizeof line - 1, *p = mf_append(line, end, "malloc_freq: ");
    const char *parts[] = {a, b, c, d};
    for (int i = 0; i < 4; i++)
        if (parts[i])
            p = mf_append(p, end, parts[i]);
    *p++ = '\n';
    int saved = errno;
    ssize_t rc = write(2, line, (size_t)(p - line));
    (void)rc;
    errno = saved;
}

/* For errors that every thread would hit again (a full disk): one line per process. */
void mf_warn_once(int *said, const char *a, const char *b, const char *c, const char *d)
{
    if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
        mf_warn(a, b, c, d);
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

/* Decimal digits only, no sign, no overflow. */
bool mf_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* ---- system calls that are not cancellation points ---------------------------------- */

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
    return (ssize_t)syscall(SYS_pwrite64, fd, buf, len, off);
}

ssize_t mf_sys_read(int fd, void *buf, size_t len)
{
    return (ssize_t)syscall(SYS_read, fd, buf, len);
}

int mf_sys_openat(int dirfd, const char *path, int flags, unsigned mode)
{
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}
