/* The profile directory and its files (DESIGN §12, §13). A profiler runs as root as often
 * as not, and its base directory may be /tmp or a relative MALLOC_FREQ_DIR: what it creates
 * is private (directory 0700, files 0600, whatever the umask), it writes only into a
 * directory that it created or that is its own user's and writable by nobody else, it never
 * follows a symlink, and every time it opens a file it checks that the directory is still
 * the one it accepted (device, inode, owner, mode). No descriptor stays open (the program
 * may close or reuse any number): the directory is opened (O_PATH) for each file operation,
 * checked, and the file opened relative to it (openat), under a short name whatever the
 * directory's path. Start-up alone keeps the descriptor it accepted the directory with, for
 * the files its thread makes next in the same allocation call, signals blocked (the process
 * file, the live heap's, the thread's own: mf_files_start_end). The calls that glibc makes
 * cancellation points go through mf_sys.c: these run inside malloc. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mf_internal.h"

extern char **environ;

#define MF_DIR_PREFIX "/malloc_freq."
#define MF_PID_DIGITS_MAX 10u /* any pid_t */
/* The longest base directory whose malloc_freq.<pid> is still a path the kernel takes. */
#define MF_BASE_MAX (MF_PATH_MAX - 1u - (sizeof MF_DIR_PREFIX - 1u) - MF_PID_DIGITS_MAX)

/* The absolute base directory, settled when the library is loaded and kept: a program that
 * runs after a chdir, and its fork children, write where it started. */
static char mf_base[MF_PATH_MAX] MF_LARGE_ZEROED;
static int mf_base_state; /* 0: not settled yet; 1: settled; -1: unusable */
/* The directory mf_files_start() accepted: every later opening must find the same one. */
static dev_t mf_dir_dev;
static ino_t mf_dir_ino;
static uid_t mf_dir_uid;
/* After a setuid that left the directory out of the new user's reach by its path (a base
 * directory only root may search), the directory is reached through this descriptor, kept
 * from before the call (close-on-exec: a fork child inherits it and writes beside its
 * parent, mf_dir_fall_back). -1: none, the directory is opened by its path each time. The
 * program may close or reuse the number: each use checks it is still the directory. */
static int mf_dir_fd = -1;
static int mf_dir_fd_spare = -1; /* opened before the setuid, kept if it is needed after */
static int mf_dir_fd_start = -1; /* mf_files_start()'s, until mf_files_start_end() */
static const struct mf_thread *mf_dir_fd_owner; /* the thread starting: its files only */

static int mf_dir_open(void);

static void mf_dir_close(int fd)
{
    if (fd != mf_dir_fd && fd != mf_dir_fd_start)
        mf_sys_close(fd);
}

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

/* MALLOC_FREQ_DIR=<the settled base> in the environment, for the images the program execs
 * after a chdir: a relative value is replaced (add false), an unset one added (add true;
 * the environment's array is copied with the new entry first). The new memory is mapped
 * of its own and never freed: the allocator is not ours to call, and the old strings and
 * array may be the kernel's. A later setenv copies the array (glibc's does, into memory of
 * its own, when environ is not its last array). errno is kept. */
static void mf_env_put(bool add)
{
    static const char key[] = "MALLOC_FREQ_DIR=";
    const size_t klen = sizeof key - 1;
    size_t n = 0;
    for (char **e = environ; e && *e; e++, n++) {
        if (strncmp(*e, key, klen) == 0) { /* getenv() answers with the first match: so do we */
            if (add)
                return;
            break;
        }
    }
    if (!add && !(environ && environ[n]))
        return;
    size_t blen = strlen(mf_base), slen = (klen + blen + 1 + 7) & ~(size_t)7;
    size_t size = (slen + (add ? (n + 2) * sizeof(char *) : 0) + 4095) & ~(size_t)4095;
    int err = errno;
    char *s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = err;
    if (s == MAP_FAILED)
        return;
    memcpy(s, key, klen);
    memcpy(s + klen, mf_base, blen + 1);
    if (!add) {
        environ[n] = s;
        return;
    }
    char **env = (char **)(s + slen);
    env[0] = s;
    for (size_t i = 0; i < n; i++)
        env[i + 1] = environ[i];
    env[n + 1] = NULL;
    __atomic_store_n(&environ, env, __ATOMIC_RELEASE);
}

/* MALLOC_FREQ_DIR, or the working directory, as an absolute path without trailing '/',
 * settled when the library is loaded (mf_files_settle), before the program can chdir: one
 * getcwd, and only for a relative or unset MALLOC_FREQ_DIR. What went wrong is said at the
 * first start-up, so that a process that never allocates prints nothing. */
static size_t mf_base_len;  /* too long: the length it would have had */

void mf_files_settle(void)
{
    if (mf_base_state || mf_opt.secure)
        return;
    mf_base_state = -1;
    const char *b = mf_opt.base_dir;
    size_t len = 0;
    while (b && b[0] == '.' && (b[1] == '/' || !b[1])) /* "./out" is "out", "." the cwd */
        b += b[1] ? 2 : 1;
    if (!b || b[0] != '/') {
        if (!mf_getcwd(mf_base, sizeof mf_base)) /* ENAMETOOLONG, or deleted, or unreachable */
            return;
        len = strlen(mf_base);
    }
    if (b && *b) {
        size_t blen = strlen(b), slash = len && mf_base[len - 1] != '/';
        if (len + slash + blen >= sizeof mf_base) {
            mf_base_len = len + slash + blen;
            return;
        }
        if (slash)
            mf_base[len++] = '/';
        memcpy(mf_base + len, b, blen + 1);
        len += blen;
    }
    while (len && mf_base[len - 1] == '/') /* "/" itself becomes "": its "/malloc_freq.N" */
        mf_base[--len] = '\0';
    if (len > MF_BASE_MAX) {
        mf_base_len = len;
        return;
    }
    if (mf_opt.base_dir && mf_opt.base_dir[0] != '/')
        mf_env_put(false);
    mf_base_state = 1;
}

static bool mf_base_settled(void)
{
    mf_files_settle(); /* a front end that did not settle it at load */
    if (mf_base_state > 0)
        return true;
    static int said;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        return false;
    if (mf_base_len)
        mf_base_too_long(mf_base_len);
    else
        mf_warn("cannot find the working directory (too long, removed or out of reach)",
                "; not profiling", NULL, NULL);
    return false;
}

static bool mf_dir_refuse(const char *what, const char *dir, const char *why)
{
    const char *parts[] = {what, dir, ": ", why, "; not profiling"};
    mf_warnv(NULL, parts, 5);
    mf_dir[0] = '\0';
    return true;
}

/* Whether the directory open at fd (O_PATH) is one of the effective user's that nobody else
 * can write to: NULL, or why not (*what: what it did). One it created is made 0700. */
static const char *mf_dir_check(int fd, const char *dir, bool created, struct stat *st,
                                const char **what)
{
    *what = "refusing ";
    if (fstat(fd, st) != 0) {
        *what = "cannot use ";
        return mf_strerror(errno);
    }
    if (st->st_uid != geteuid() || (st->st_mode & (S_IWGRP | S_IWOTH)))
        return st->st_uid != geteuid() ? "it belongs to another user" : "others can write to it";
    if (created && (st->st_mode & 0777) != 0700) {
        /* The umask took the owner's bits (mkdir never sets the others'). An O_PATH
         * descriptor cannot fchmod; its /proc link reaches the same inode, no name lookup. */
        char link[40];
        mf_append_u64(mf_append(link, link + sizeof link, "/proc/self/fd/"), link + sizeof link,
                      (uint64_t)fd);
        if (chmod(link, 0700) != 0)
            mf_warn("cannot make ", dir, " 0700: ", mf_strerror(errno));
    }
    return NULL;
}

/* Takes dir as the profile directory if it is a directory (not a symlink) of the effective
 * user's that nobody else can write to; else returns why not, and what it did (*what).
 * keep: the descriptor is kept in mf_dir_fd_start. */
static const char *mf_dir_accept(const char *dir, bool created, const char **what, bool keep)
{
    *what = "refusing ";
    int fd = mf_sys_openat(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return errno == ENOTDIR ? "not a directory (a symbolic link?)" : mf_strerror(errno);
    struct stat st;
    const char *why = mf_dir_check(fd, dir, created, &st, what);
    if (why || !keep) {
        mf_sys_close(fd);
    } else {
        mf_dir_fd_start = fd;
        mf_dir_fd_owner = &mf_tls;
    }
    if (why)
        return why;
    mf_dir_dev = st.st_dev;
    mf_dir_ino = st.st_ino;
    mf_dir_uid = st.st_uid;
    return NULL;
}

int mf_base_subdir_open(const char *name, bool create, struct stat *st)
{
    if (mf_opt.secure || __atomic_load_n(&mf_base_state, __ATOMIC_RELAXED) <= 0 ||
        mf_files_sealed()) {
        errno = EPERM;
        return -1;
    }
    char dir[MF_PATH_MAX], *end = dir + sizeof dir;
    char *p = mf_append(mf_append(mf_append(dir, end, mf_base), end, "/"), end, name);
    if (p + 1 >= end) {
        errno = ENAMETOOLONG;
        return -1;
    }
    bool created = create && mkdir(dir, 0700) == 0;
    if (create && !created && errno != EEXIST)
        return -1;
    int fd = mf_sys_openat(AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    const char *what;
    if (mf_dir_check(fd, dir, created, st, &what)) {
        mf_sys_close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* A process that may not make its directory in the base (a root daemon's child after
 * setuid, in root's base directory) writes beside the process it comes from, in a
 * directory of its own user's: a fork child in its parent's (the very directory the parent
 * accepted, which the parent's setuid gave to the new user: mf_files_hand_over), an exec'd
 * child in malloc_freq.<ppid>. Its files carry its own stamp. */
static bool mf_dir_fall_back(bool forked, dev_t dev, ino_t ino, char *dir)
{
    const char *what;
    if (forked && mf_dir_fd >= 0) { /* the descriptor inherited: the directory it names */
        int fd = mf_dir_open();
        if (fd >= 0 && mf_dir_dev == dev && mf_dir_ino == ino)
            return true;
        mf_dir_fd = -1;
    }
    if (forked && !mf_dir_accept(mf_dir, false, &what, false) && mf_dir_dev == dev &&
        mf_dir_ino == ino)
        return true;
    char *end = dir + MF_PATH_MAX;
    mf_append_u64(mf_append(mf_append(dir, end, mf_base), end, MF_DIR_PREFIX), end,
                  (uint64_t)getppid());
    if (mf_dir_accept(dir, false, &what, false))
        return false;
    memcpy(mf_dir, dir, strlen(dir) + 1);
    return true;
}

bool mf_files_start(void)
{
    /* A fork child's mf_dir is its parent's directory still. */
    bool forked = mf_dir[0] != '\0';
    dev_t parent_dev = mf_dir_dev;
    ino_t parent_ino = mf_dir_ino;
    if (mf_opt.secure) { /* silently: a set-user-ID program's output must not change */
        mf_dir[0] = '\0';
        errno = EPERM;
        return true;
    }
    if (!mf_base_settled()) {
        mf_dir[0] = '\0';
        return true;
    }
    /* Unset, the base was the working directory at load: so it stays for the images this
     * one execs after a chdir (at the first start-up, not at load: a process that never
     * allocates pays nothing). */
    if (!mf_opt.base_dir)
        mf_env_put(true);
    if (mf_files_sealed()) {
        mf_dir[0] = '\0';
        errno = EPERM;
        return true;
    }
    char dir[MF_PATH_MAX], *end = dir + sizeof dir;
    mf_append_u64(mf_append(mf_append(dir, end, mf_base), end, MF_DIR_PREFIX), end,
                  (uint64_t)mf_pid); /* fits: mf_files_settle() checked the length */
    /* An exec'd image (same pid) finds its predecessor's directory: that is the one case
     * where it exists already, and it is then ours and private. */
    bool created = mkdir(dir, 0700) == 0;
    if (!created && errno != EEXIST) {
        int err = errno;
        char other[MF_PATH_MAX];
        if ((err == EACCES || err == EPERM) && mf_dir_fall_back(forked, parent_dev, parent_ino, other))
            return false;
        return mf_dir_refuse("cannot create ", dir, mf_strerror(err));
    }
    const char *what, *why = mf_dir_accept(dir, created, &what, true);
    if (why)
        return mf_dir_refuse(what, dir, why);
    memcpy(mf_dir, dir, strlen(dir) + 1);
    if (mf_dir_fd >= 0) { /* a fork child's, inherited: closed if it is still ours */
        struct stat st;
        if (fstat(mf_dir_fd, &st) == 0 && st.st_dev == parent_dev && st.st_ino == parent_ino)
            mf_sys_close(mf_dir_fd);
        mf_dir_fd = -1;
    }
    return false;
}

/* The directory and the files in it go to `uid` (root only: CAP_CHOWN), so that the
 * process can go on making and growing them once it is that user, and its children after
 * it (mf_dir_fall_back). Entries are changed relative to the directory, never following a
 * symlink. */
bool mf_files_hand_over(uid_t uid)
{
    if (!mf_dir[0] || uid == mf_dir_uid || geteuid() != 0 || mf_files_sealed())
        return false;
    int err = errno;
    int fd = mf_sys_openat(AT_FDCWD, mf_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != mf_dir_dev || st.st_ino != mf_dir_ino ||
        st.st_uid != mf_dir_uid) {
        if (fd >= 0)
            mf_sys_close(fd);
        errno = err;
        return false;
    }
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct mf_dirent {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (struct mf_dirent *)(buf + off);
            bool dots = d->name[0] == '.' && (!d->name[1] || (d->name[1] == '.' && !d->name[2]));
            /* ours: 0700. A file that cannot be handed over is passed by: what decides is
             * the directory's own fchown below. (Tested, not cast to void: _FORTIFY_SOURCE
             * marks fchownat warn_unused_result, which a (void) does not silence.) */
            if ((d->type == DT_REG || (d->type == DT_UNKNOWN && !dots)) &&
                fchownat(fd, d->name, uid, (gid_t)-1, AT_SYMLINK_NOFOLLOW) != 0) {
            }
            off += d->reclen;
        }
    }
    bool done = fchown(fd, uid, (gid_t)-1) == 0;
    if (done) {
        mf_dir_uid = uid;
        if (mf_dir_fd_spare >= 0)
            mf_sys_close(mf_dir_fd_spare);
        mf_dir_fd_spare = fd;
    } else {
        mf_sys_close(fd);
    }
    errno = err;
    return done;
}

/* After the setuid that mf_files_hand_over() prepared for: if it failed, the directory goes
 * back to root; if it succeeded and the new user cannot reach the directory by its path,
 * the descriptor opened before is kept. */
void mf_files_handed_over(bool failed)
{
    int err = errno, spare = mf_dir_fd_spare;
    mf_dir_fd_spare = -1;
    if (spare < 0)
        return;
    if (failed) {
        mf_sys_close(spare);
        mf_files_hand_over(0);
        if (mf_dir_fd_spare >= 0)
            mf_sys_close(mf_dir_fd_spare);
        mf_dir_fd_spare = -1;
        errno = err;
        return;
    }
    int fd = mf_sys_openat(AT_FDCWD, mf_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd >= 0) {
        mf_sys_close(fd);
        mf_sys_close(spare);
    } else {
        if (mf_dir_fd >= 0)
            mf_sys_close(mf_dir_fd);
        mf_dir_fd = spare;
    }
    errno = err;
}

bool mf_files_sealed(void)
{
    if (!mf_filtered())
        return false;
    static int said;
    mf_warn_once(&said, "a seccomp filter is installed: from now on no profile file is made "
                 "or opened (a new thread records into the first thread's table, a full "
                 "table counts its calls as not profiled)", NULL, NULL, NULL);
    return true;
}

void mf_files_start_end(bool forked)
{
    if (mf_dir_fd_start >= 0 && (forked || mf_dir_fd_owner == &mf_tls)) {
        int err = errno;
        mf_sys_close(mf_dir_fd_start);
        mf_dir_fd_start = -1;
        errno = err;
    }
}

/* The directory, if it is still the one mf_files_start() accepted: not replaced (by a
 * rename and a symlink in a directory others can write), not given away or opened to
 * others since. An O_PATH descriptor: it needs no permission on the directory itself.
 * Start-up's own descriptor was checked for a seccomp filter in the same call
 * (mf_files_start), with signals blocked: nothing of the program's ran since. */
static int mf_dir_open(void)
{
    if (!mf_dir[0]) {
        errno = ENOENT;
        return -1;
    }
    bool start = mf_dir_fd_start >= 0 && mf_dir_fd_owner == &mf_tls;
    if (!start && mf_files_sealed()) {
        errno = EPERM;
        return -1;
    }
    int fd = start ? mf_dir_fd_start : mf_dir_fd;
    if (fd < 0 && (fd = mf_sys_openat(AT_FDCWD, mf_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW |
                                      O_CLOEXEC, 0)) < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == mf_dir_dev &&
        st.st_ino == mf_dir_ino && st.st_uid == mf_dir_uid && !(st.st_mode & (S_IWGRP | S_IWOTH)))
        return fd;
    mf_dir_close(fd); /* the kept one, if the program closed or reused it, stays the program's */
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
    mf_dir_close(dfd);
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
    mf_dir_close(dfd);
    errno = err;
    return fd;
}

void mf_file_unlink(const char *name)
{
    int err = errno, dfd = mf_dir_open();
    if (dfd >= 0) {
        unlinkat(dfd, name, 0);
        mf_dir_close(dfd);
    }
    errno = err;
}

/* Past RLIMIT_FSIZE, fallocate and ftruncate raise SIGXFSZ, which kills the program. A
 * system call at each growth (rare) rather than a cached limit: the program may lower it at
 * any time. */
static bool mf_file_past_limit(uint64_t end)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        end > (uint64_t)rl.rlim_cur) {
        errno = EFBIG;
        return true;
    }
    return false;
}

bool mf_file_extend(int fd, uint64_t size)
{
    struct stat st;
    if (mf_file_past_limit(size) || fstat(fd, &st) != 0)
        return true;
    return (uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) != 0;
}

bool mf_file_reserve(int fd, uint64_t off, uint64_t len)
{
    if (mf_file_past_limit(off + len))
        return true;
    if (mf_sys_fallocate(fd, 0, off, len) == 0)
        return false;
    if (errno != EOPNOTSUPP)
        return true;
    struct stat st; /* no fallocate here: extend the file, at least */
    if (fstat(fd, &st) != 0)
        return true;
    return (uint64_t)st.st_size < off + len && ftruncate(fd, (off_t)(off + len)) != 0;
}

void mf_file_release(int fd, uint64_t off, uint64_t len)
{
    uint64_t lo = (off + 4095) & ~(uint64_t)4095, hi = (off + len) & ~(uint64_t)4095;
    int err = errno;
    if (hi > lo)
        mf_sys_fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, lo, hi - lo);
    errno = err;
}

void mf_file_warn(int *once, const char *what, const char *name, const char *tail)
{
    /* Out of space or past RLIMIT_FSIZE: every file would say so, the process file's and
     * each thread's. One line per process for all of them. */
    static int space_warned;
    if (errno == EPERM && mf_filtered()) /* mf_files_sealed() said why */
        return;
    if (errno == EFBIG || errno == ENOSPC || errno == EDQUOT)
        once = &space_warned;
    /* The directory last: a long one may be cut at the line's end, nothing else. */
    const char *parts[] = {what, " ", name, ": ", mf_strerror(errno), tail, " (in ", mf_dir, ")"};
    mf_warnv(once, parts, 9);
}
