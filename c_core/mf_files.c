/* The profile directory and its files (DESIGN §12, §13). A profiler runs as root as often
 * as not, and its base directory may be /tmp or a relative MALLOC_FREQ_DIR: what it creates
 * is private (directory 0700, files 0600, whatever the umask), it writes only into a
 * directory that it created or that is its own user's and writable by nobody else, it never
 * follows a symlink, and every time it opens a file it checks that the directory is still
 * the one it accepted (device, inode, owner, mode). No descriptor stays open (the program
 * may close or reuse any number): the directory is opened (O_PATH) for each file operation,
 * checked, and the file opened relative to it (openat), under a short name whatever the
 * directory's path. The calls that glibc makes cancellation points go through mf_sys.c:
 * these run inside malloc. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mf_internal.h"

extern char **environ;

#define MF_DIR_PREFIX "/malloc_freq."
#define MF_PID_DIGITS_MAX 10u /* any pid_t */
/* The longest base directory whose malloc_freq.<pid> is still a path the kernel takes. */
#define MF_BASE_MAX (MF_PATH_MAX - 1u - (sizeof MF_DIR_PREFIX - 1u) - MF_PID_DIGITS_MAX)

/* The absolute base directory, settled at the program's first start-up and kept: a fork
 * child that runs after a chdir writes where its parent does. */
static char mf_base[MF_PATH_MAX] MF_LARGE_ZEROED;
static int mf_base_state; /* 0: not settled yet; 1: settled; -1: unusable (said once) */
/* The directory mf_files_start() accepted: every later opening must find the same one. */
static dev_t mf_dir_dev;
static ino_t mf_dir_ino;
static uid_t mf_dir_uid;

static void mf_base_too_long(size_t len)
{
    char n[24], max[24];
    mf_append_u64(n, n + sizeof n, len);
    mf_append_u64(max, max + sizeof max, MF_BASE_MAX);
    const char *parts[] = {mf_opt.base_dir ? "MALLOC_FREQ_DIR" : "the working directory", " is ",
                           n, " bytes long as an absolute path, too long for malloc_freq.<pid> "
                           "in it (", max, " at most); not profiling"};
    mf_warnv(NULL, parts, 6);
}

/* A relative MALLOC_FREQ_DIR becomes absolute in the environment too, for the images the
 * program execs after a chdir. The new entry lives in memory of its own (mmap, never
 * freed): the allocator is not ours to call, and the old string may be the kernel's. */
static void mf_env_rewrite(void)
{
    static const char key[] = "MALLOC_FREQ_DIR=";
    const size_t klen = sizeof key - 1;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, key, klen) != 0)
            continue; /* getenv() answers with the first match: so do we */
        size_t blen = strlen(mf_base), size = (klen + blen + 1 + 4095) & ~(size_t)4095;
        char *s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED)
            return;
        memcpy(s, key, klen);
        memcpy(s + klen, mf_base, blen + 1);
        *e = s;
        return;
    }
}

/* MALLOC_FREQ_DIR, or the working directory, as an absolute path without trailing '/'. */
static bool mf_base_settle(void)
{
    if (mf_base_state)
        return mf_base_state < 0;
    mf_base_state = -1;
    const char *b = mf_opt.base_dir;
    size_t len = 0;
    while (b && b[0] == '.' && (b[1] == '/' || !b[1])) /* "./out" is "out", "." the cwd */
        b += b[1] ? 2 : 1;
    if (!b || b[0] != '/') {
        if (!getcwd(mf_base, sizeof mf_base)) {
            mf_warn("cannot find the working directory: ", mf_strerror(errno), "; not profiling",
                    NULL);
            return true;
        }
        len = strlen(mf_base);
    }
    if (b && *b) {
        size_t blen = strlen(b), slash = len && mf_base[len - 1] != '/';
        if (len + slash + blen >= sizeof mf_base) {
            mf_base_too_long(len + slash + blen);
            return true;
        }
        if (slash)
            mf_base[len++] = '/';
        memcpy(mf_base + len, b, blen + 1);
        len += blen;
    }
    while (len && mf_base[len - 1] == '/') /* "/" itself becomes "": its "/malloc_freq.N" */
        mf_base[--len] = '\0';
    if (len > MF_BASE_MAX) {
        mf_base_too_long(len);
        return true;
    }
    if (mf_opt.base_dir && mf_opt.base_dir[0] != '/')
        mf_env_rewrite();
    mf_base_state = 1;
    return false;
}

static bool mf_dir_refuse(const char *what, const char *why)
{
    const char *parts[] = {what, mf_dir, ": ", why, "; not profiling"};
    mf_warnv(NULL, parts, 5);
    mf_dir[0] = '\0';
    return true;
}

bool mf_files_start(void)
{
    mf_dir[0] = '\0';
    if (mf_opt.secure) { /* silently: a set-user-ID program's output must not change */
        errno = EPERM;
        return true;
    }
    if (mf_base_settle())
        return true;
    char *end = mf_dir + sizeof mf_dir;
    mf_append_u64(mf_append(mf_append(mf_dir, end, mf_base), end, MF_DIR_PREFIX), end,
                  (uint64_t)mf_pid); /* fits: mf_base_settle() checked the length */
    /* An exec'd image (same pid) finds its predecessor's directory: that is the one case
     * where it exists already, and it is then ours and private. */
    bool created = mkdir(mf_dir, 0700) == 0;
    if (!created && errno != EEXIST)
        return mf_dir_refuse("cannot create ", mf_strerror(errno));
    int fd = mf_sys_openat(AT_FDCWD, mf_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return mf_dir_refuse("refusing ", errno == ENOTDIR ? "not a directory (a symbolic link?)"
                                                           : mf_strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        mf_sys_close(fd);
        return mf_dir_refuse("cannot use ", mf_strerror(errno));
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        mf_sys_close(fd);
        return mf_dir_refuse("refusing ", st.st_uid != geteuid()
                                              ? "it belongs to another user"
                                              : "others can write to it");
    }
    if (created && (st.st_mode & 0777) != 0700) {
        /* The umask took the owner's bits (mkdir never sets the others'). An O_PATH
         * descriptor cannot fchmod; its /proc link reaches the same inode, no name lookup. */
        char link[40];
        mf_append_u64(mf_append(link, link + sizeof link, "/proc/self/fd/"), link + sizeof link,
                      (uint64_t)fd);
        if (chmod(link, 0700) != 0)
            mf_warn("cannot make ", mf_dir, " 0700: ", mf_strerror(errno));
    }
    mf_dir_dev = st.st_dev;
    mf_dir_ino = st.st_ino;
    mf_dir_uid = st.st_uid;
    mf_sys_close(fd);
    return false;
}

/* The directory, if it is still the one mf_files_start() accepted: not replaced (by a
 * rename and a symlink in a directory others can write), not given away or opened to
 * others since. An O_PATH descriptor: it needs no permission on the directory itself. */
static int mf_dir_open(void)
{
    if (!mf_dir[0]) {
        errno = ENOENT;
        return -1;
    }
    int fd = mf_sys_openat(AT_FDCWD, mf_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_dev == mf_dir_dev && st.st_ino == mf_dir_ino &&
        st.st_uid == mf_dir_uid && !(st.st_mode & (S_IWGRP | S_IWOTH)))
        return fd;
    mf_sys_close(fd);
    errno = EPERM;
    return -1;
}

int mf_file_create(const char *name)
{
    int dfd = mf_dir_open();
    if (dfd < 0)
        return -1;
    int fd = mf_sys_openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int err = errno;
    if (fd >= 0)
        (void)fchmod(fd, 0600); /* the umask may have taken the owner's bits */
    mf_sys_close(dfd);
    errno = err;
    return fd;
}

int mf_file_open(const char *name)
{
    int dfd = mf_dir_open();
    if (dfd < 0)
        return -1;
    int fd = mf_sys_openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    int err = errno;
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != mf_dir_uid)) {
        mf_sys_close(fd);
        fd = -1;
        err = EPERM;
    }
    mf_sys_close(dfd);
    errno = err;
    return fd;
}

void mf_file_unlink(const char *name)
{
    int err = errno, dfd = mf_dir_open();
    if (dfd >= 0) {
        unlinkat(dfd, name, 0);
        mf_sys_close(dfd);
    }
    errno = err;
}

bool mf_file_reserve(int fd, uint64_t off, uint64_t len)
{
    /* Past RLIMIT_FSIZE, fallocate and ftruncate raise SIGXFSZ, which kills the program.
     * A system call at each growth (rare) rather than a cached limit: the program may
     * lower it at any time. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        off + len > (uint64_t)rl.rlim_cur) {
        errno = EFBIG;
        return true;
    }
    if (mf_sys_fallocate(fd, off, len) == 0)
        return false;
    if (errno != EOPNOTSUPP)
        return true;
    struct stat st; /* no fallocate here: extend the file, at least */
    if (fstat(fd, &st) != 0)
        return true;
    return (uint64_t)st.st_size < off + len && ftruncate(fd, (off_t)(off + len)) != 0;
}

void mf_file_warn(int *once, const char *what, const char *name, const char *tail)
{
    /* Out of space or past RLIMIT_FSIZE: every file would say so, the process file's and
     * each thread's. One line per process for all of them. */
    static int space_warned;
    if (errno == EFBIG || errno == ENOSPC || errno == EDQUOT)
        once = &space_warned;
    /* The directory last: a long one may be cut at the line's end, nothing else. */
    const char *parts[] = {what, " ", name, ": ", mf_strerror(errno), tail, " (in ", mf_dir, ")"};
    mf_warnv(once, parts, 9);
}
