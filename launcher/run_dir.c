/* The run directory: made before the program may start (0700, like the profile directories
 * in it), run.txt (the run's description; its format is documented in README.md, and
 * mf_print reads it), and the summary printed after the run. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../c_core/mf_format.h"
#include "launcher.h"

extern char **environ;

#define MF_RUN_FILE "run.txt"
#define MF_SUMMARY_THRESHOLD "5" /* percent: the summary shows the sites above it */

/* mkdir -p: the parents with the umask's mode, the last one with `mode`. *made says whether
 * the last one was created here. */
static bool mf_mkdir_p(const char *path, mode_t mode, bool *made)
{
    char *p = mf_xstrdup(path);
    for (size_t n = strlen(p); n > 1 && p[n - 1] == '/'; n--)
        p[n - 1] = '\0'; /* out/ is out */
    bool ok = true;
    for (char *s = p + 1; *s && ok; s++) {
        if (*s != '/' || s[-1] == '/')
            continue;
        *s = '\0';
        ok = mkdir(p, 0777) == 0 || errno == EEXIST;
        *s = '/';
    }
    struct stat st;
    *made = ok && mkdir(p, mode) == 0;
    if (ok && !*made && errno != EEXIST)
        ok = false;
    if (ok && stat(p, &st) != 0)
        ok = false;
    if (ok && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        ok = false;
    }
    /* The umask may have taken the owner's bits. */
    if (ok && *made && chmod(p, mode) != 0)
        ok = false;
    int e = errno;
    free(p);
    errno = e;
    return ok;
}

static bool mf_is_process_dir_name(const char *name)
{
    if (strncmp(name, "malloc_freq.", 12) != 0 || !name[12])
        return false;
    for (const char *c = name + 12; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    return true;
}

/* Before the program starts: -o DIR is made (or must be a directory that holds no run);
 * otherwise the base of the run directory, $MALLOC_FREQ_DIR or the working directory, is
 * made absolute. A bad directory is one line and exit 2. */
void mf_prepare_dirs(struct mf_launch *l)
{
    const char *dir = l->output, *what = "-o";
    if (!dir) {
        const char *env = getenv("MALLOC_FREQ_DIR");
        dir = env && *env ? env : ".";
        what = env && *env ? "MALLOC_FREQ_DIR" : "the working directory";
    }
    bool made;
    if (!mf_mkdir_p(dir, l->output ? 0700 : 0777, &made))
        mf_die("%s %s: %s", what, dir, strerror(errno));
    char *abs = realpath(dir, NULL);
    if (!abs)
        mf_die("%s %s: %s", what, dir, strerror(errno));
    if (access(abs, W_OK | X_OK) != 0)
        mf_die("%s %s: %s", what, dir, strerror(errno));
    if (!l->output) {
        l->base_dir = abs;
        return;
    }
    if (!made) {
        DIR *d = opendir(abs);
        if (!d)
            mf_die("-o %s: %s", dir, strerror(errno));
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, MF_RUN_FILE) == 0 || mf_is_process_dir_name(e->d_name))
                mf_die("-o %s holds a previous run (%s): name a new or empty directory", dir,
                       e->d_name);
        closedir(d);
    }
    l->run_dir = abs;
    l->run_dir_made = made;
}

/* After fork: the run directory malloc_freq.<pid> in the base (malloc_freq.<pid>-2, -3, ...
 * if a stale one has the name), 0700. */
bool mf_make_run_dir(struct mf_launch *l)
{
    if (l->run_dir)
        return true;
    const char *base = strcmp(l->base_dir, "/") == 0 ? "" : l->base_dir;
    for (int i = 1; i <= 1000; i++) {
        char *path = i == 1 ? mf_xasprintf("%s/malloc_freq.%d", base, (int)l->pid)
                            : mf_xasprintf("%s/malloc_freq.%d-%d", base, (int)l->pid, i);
        if (mkdir(path, 0700) == 0) {
            if (chmod(path, 0700) != 0) {
                mf_msg("cannot make %s 0700: %s", path, strerror(errno));
                rmdir(path);
                free(path);
                return false;
            }
            l->run_dir = path;
            l->run_dir_made = true;
            return true;
        }
        if (errno != EEXIST) {
            mf_msg("cannot create the run directory %s: %s", path, strerror(errno));
            free(path);
            return false;
        }
        free(path);
    }
    mf_msg("cannot create a run directory malloc_freq.%d in %s: the names are taken",
           (int)l->pid, l->base_dir);
    return false;
}

/* Removes what the launcher made when the program could not be run at all. */
void mf_remove_run_dir(struct mf_launch *l)
{
    if (!l->run_dir)
        return;
    char *file = mf_xasprintf("%s/%s", l->run_dir, MF_RUN_FILE);
    unlink(file);
    free(file);
    if (l->run_dir_made)
        rmdir(l->run_dir);
}

/* ---- run.txt ------------------------------------------------------------------------- */

/* A value on one line: backslash, control characters and DEL escaped (\\, \n, \t, \r, \xHH). */
static void mf_put_value(FILE *f, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '\\')
            fputs("\\\\", f);
        else if (*c == '\n')
            fputs("\\n", f);
        else if (*c == '\t')
            fputs("\\t", f);
        else if (*c == '\r')
            fputs("\\r", f);
        else if (*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\x%02x", *c);
        else
            fputc(*c, f);
    }
}

static void mf_put(FILE *f, const char *key, const char *value)
{
    fprintf(f, "%s: ", key);
    mf_put_value(f, value);
    fputc('\n', f);
}

/* Local time, ISO 8601 with milliseconds and the UTC offset: 2025-11-23T19:40:12.345+01:00 */
static void mf_iso_time(const struct timespec *t, char *out, size_t n)
{
    struct tm tm;
    localtime_r(&t->tv_sec, &tm);
    char date[24];
    if (strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        date[0] = '\0';
    long off = tm.tm_gmtoff / 60 % (100 * 60);
    snprintf(out, n, "%s.%03ld%c%02ld:%02ld", date, t->tv_nsec / 1000000, off < 0 ? '-' : '+',
             labs(off) / 60, labs(off) % 60);
}

static FILE *mf_open_run_file(struct mf_launch *l, int flags)
{
    char *path = mf_xasprintf("%s/%s", l->run_dir, MF_RUN_FILE);
    int fd = open(path, flags | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        mf_msg("cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    free(path);
    return f;
}

static bool mf_close_run_file(struct mf_launch *l, FILE *f)
{
    if (ferror(f) | fclose(f)) {
        mf_msg("cannot write %s/%s: %s", l->run_dir, MF_RUN_FILE, strerror(errno));
        return false;
    }
    return true;
}

/* Written before the program starts, so that a run still going, or one whose launcher was
 * killed, is described too; `end` and `status` are appended when the program has ended. */
bool mf_write_run_file(struct mf_launch *l, const struct timespec *start)
{
    l->envp[l->dir_slot] = mf_xasprintf("MALLOC_FREQ_DIR=%s", l->run_dir);
    FILE *f = mf_open_run_file(l, O_CREAT | O_EXCL);
    if (!f)
        return false;
    fputs("malloc_freq run: 1\n", f);
    char *cmd = mf_shell_quote(l->argv);
    mf_put(f, "command", cmd);
    free(cmd);
    mf_put(f, "program", l->program ? l->program : l->argv[0]);
    char *cwd = getcwd(NULL, 0);
    if (cwd)
        mf_put(f, "cwd", cwd);
    free(cwd);
    fprintf(f, "pid: %d\n", (int)l->pid);
    char when[64];
    mf_iso_time(start, when, sizeof when);
    mf_put(f, "start", when);
    if (l->python)
        mf_put(f, "python", l->python);
    for (size_t i = l->first_set; l->envp[i]; i++)
        mf_put(f, "set", l->envp[i]);
    /* What the user had set that the profiler (or Python, for us) reads, left as it was. */
    for (size_t i = 0; i < l->first_set; i++)
        if (strncmp(l->envp[i], "MALLOC_FREQ_", 12) == 0 ||
            (l->python && strncmp(l->envp[i], "PYTHONMALLOC=", 13) == 0))
            mf_put(f, "kept", l->envp[i]);
    return mf_close_run_file(l, f);
}

void mf_append_run_end(struct mf_launch *l, int status)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    FILE *f = mf_open_run_file(l, O_APPEND);
    if (!f)
        return;
    char when[64];
    mf_iso_time(&end, when, sizeof when);
    mf_put(f, "end", when);
    if (WIFSIGNALED(status))
        fprintf(f, "status: signal %d %s\n", WTERMSIG(status), mf_signal_name(WTERMSIG(status)));
    else
        fprintf(f, "status: exit %d\n", WEXITSTATUS(status));
    mf_close_run_file(l, f);
}

/* ---- the summary --------------------------------------------------------------------- */

struct mf_proc_dir {
    long pid;
    char *path;
};

static int mf_by_pid(const void *a, const void *b)
{
    long x = ((const struct mf_proc_dir *)a)->pid, y = ((const struct mf_proc_dir *)b)->pid;
    return (x > y) - (x < y);
}

/* The run's process directories, malloc_freq.<pid> (directories, not links), by pid. */
static size_t mf_process_dirs(const char *run_dir, struct mf_proc_dir **out)
{
    size_t n = 0, cap = 16;
    struct mf_proc_dir *v = mf_xmalloc(cap * sizeof *v);
    DIR *d = opendir(run_dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            struct stat st;
            if (!mf_is_process_dir_name(e->d_name) ||
                fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISDIR(st.st_mode))
                continue;
            if (n == cap) {
                struct mf_proc_dir *w = realloc(v, (cap *= 2) * sizeof *v);
                if (!w)
                    mf_die("out of memory");
                v = w;
            }
            v[n].pid = strtol(e->d_name + 12, NULL, 10);
            v[n++].path = mf_xasprintf("%s/%s", run_dir, e->d_name);
        }
        closedir(d);
    }
    qsort(v, n, sizeof *v, mf_by_pid);
    *out = v;
    return n;
}

/* ---- what the run's files do not hold ----------------------------------------------- */

/* What the summary must say before it shows totals: mf_print adds up the files there are,
 * and calls them exact; a process whose files could not be made (a full disk, a quota,
 * RLIMIT_FSIZE) is not in them, and an image that ended without running its exit while
 * sampling left its last calls out of its totals (README, Limitations). */
struct mf_gaps {
    size_t images;     /* process images with a process file and a thread file */
    size_t nmissing;   /* process directories or images without data */
    size_t nunflushed; /* images whose totals may lack calls */
    size_t running;    /* their threads still running when they ended */
    char *missing, *unflushed; /* "process 12 (/bin/x), ..." */
    size_t missing_len, unflushed_len;
    FILE *missing_f, *unflushed_f;
    int room; /* ENOSPC, EDQUOT or EFBIG: no room for one more profile file now; 0 */
};

#define MF_GAPS_NAMED 4 /* processes named in a line; the rest are counted */

static void mf_gap_name(FILE *f, size_t nth, long pid, const char *exe)
{
    if (nth > MF_GAPS_NAMED)
        return;
    fputs(nth > 1 ? ", " : "", f);
    fprintf(f, "process %ld", pid);
    if (exe) {
        fputs(" (", f);
        mf_put_value(f, exe);
        fputc(')', f);
    }
}

/* A regular file of the directory, for reading, or -1: no link followed, and no FIFO of
 * that name can keep the summary waiting. */
static int mf_open_regular(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A process file's header, or false if it is not one. */
static bool mf_read_process_header(int dfd, const char *name, struct mf_process_header *h)
{
    int fd = mf_open_regular(dfd, name);
    if (fd < 0)
        return false;
    bool ok = pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h &&
              memcmp(h->magic, MF_PROCESS_MAGIC, 8) == 0;
    close(fd);
    h->exe[sizeof h->exe - 1] = '\0';
    return ok;
}

static bool mf_read_thread_header(int dfd, const char *name, struct mf_thread_header *h)
{
    int fd = mf_open_regular(dfd, name);
    if (fd < 0)
        return false;
    /* The fields up to `threads`: the size histogram after them is not needed here. */
    size_t n = offsetof(struct mf_thread_header, unprofiled_bytes_var);
    bool ok = pread(fd, h, n, 0) == (ssize_t)n && memcmp(h->magic, MF_THREAD_MAGIC, 8) == 0;
    close(fd);
    return ok;
}

/* The stamp of a file named <kind>.<16 hex digits>.<...>, or 0. */
static uint64_t mf_file_stamp(const char *name, const char *kind)
{
    size_t k = strlen(kind);
    if (strncmp(name, kind, k) != 0 || name[k] != '.')
        return 0;
    char *end;
    uint64_t stamp = strtoull(name + k + 1, &end, 16);
    return end == name + k + 17 && *end == '.' ? stamp : 0;
}

/* One process directory: its images (process files), each with the thread files of its
 * stamp. */
static void mf_scan_process_dir(int run_fd, const char *dir_name, long pid, struct mf_gaps *g)
{
    int dfd = openat(run_fd, dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        mf_gap_name(g->missing_f, ++g->nmissing, pid, NULL);
        return;
    }
    size_t nprocs = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct mf_process_header ph;
        uint64_t stamp = mf_file_stamp(e->d_name, "process");
        if (!stamp || !mf_read_process_header(dfd, e->d_name, &ph))
            continue;
        nprocs++;
        /* Its threads: those that had a file, and what they had not written yet if the
         * image ended without its exit. */
        size_t tables = 0, running = 0;
        uint64_t calls = 0;
        int tfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *td = tfd >= 0 ? fdopendir(tfd) : NULL;
        for (struct dirent *f; td && (f = readdir(td));) {
            struct mf_thread_header th;
            if (mf_file_stamp(f->d_name, "thread") != stamp ||
                !mf_read_thread_header(dfd, f->d_name, &th))
                continue;
            tables++;
            for (int i = 0; i < MF_FN_COUNT; i++)
                calls += th.totals.calls[i];
            if (!(th.flags & MF_THREAD_FINISHED))
                running += th.flags & MF_THREAD_SHARED ? th.threads : 1;
        }
        if (td)
            closedir(td);
        else if (tfd >= 0)
            close(tfd);
        if (!tables) {
            mf_gap_name(g->missing_f, ++g->nmissing, pid, ph.exe);
            continue;
        }
        g->images++;
        /* Every call is written when each is a sample: with MALLOC_FREQ_SAMPLE=1, and in
         * the default mode's exact stretch, which one thread takes in order. */
        bool exact_stretch = ph.sample_interval == 0 && running <= 1 && calls < ph.exact_calls;
        if (!(ph.flags & MF_PROCESS_EXITED) && ph.sample_interval != 1 && !exact_stretch &&
            running) {
            mf_gap_name(g->unflushed_f, ++g->nunflushed, pid, ph.exe);
            g->running += running;
        }
    }
    closedir(d);
    if (!nprocs)
        mf_gap_name(g->missing_f, ++g->nmissing, pid, NULL);
}

/* Whether the run directory's file system takes one more process file and thread table
 * now: a process or thread that found no room when it started left no file, and a fork
 * child or an exec'd image no trace at all. Returns ENOSPC, EDQUOT or EFBIG, else 0 (also
 * when it cannot be told). */
static int mf_room_for_a_profile(const char *dir)
{
    const uint64_t need = 4096 + MF_THREAD_HEADER_BYTES + MF_SEG_BYTES(MF_SEG_ENTRIES_FIRST);
    /* Past RLIMIT_FSIZE fallocate would raise SIGXFSZ. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        return EFBIG;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == ENOSPC || errno == EDQUOT ? errno : 0;
    int err = fallocate(fd, 0, 0, (off_t)need) == 0 ? 0 : errno;
    close(fd); /* an O_TMPFILE file goes with its descriptor */
    if (err == EOPNOTSUPP) { /* no fallocate here: what is free, at least */
        struct statvfs sv;
        err = statvfs(dir, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < need ? ENOSPC : 0;
    }
    return err == ENOSPC || err == EDQUOT || err == EFBIG ? err : 0;
}

static void mf_find_gaps(const char *run_dir, struct mf_proc_dir *dirs, size_t n, struct mf_gaps *g)
{
    memset(g, 0, sizeof *g);
    g->missing_f = open_memstream(&g->missing, &g->missing_len);
    g->unflushed_f = open_memstream(&g->unflushed, &g->unflushed_len);
    if (!g->missing_f || !g->unflushed_f)
        mf_die("out of memory");
    int run_fd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < n && run_fd >= 0; i++)
        mf_scan_process_dir(run_fd, strrchr(dirs[i].path, '/') + 1, dirs[i].pid, g);
    if (run_fd >= 0)
        close(run_fd);
    if (g->nmissing > MF_GAPS_NAMED)
        fprintf(g->missing_f, " and %zu more", g->nmissing - MF_GAPS_NAMED);
    if (g->nunflushed > MF_GAPS_NAMED)
        fprintf(g->unflushed_f, " and %zu more", g->nunflushed - MF_GAPS_NAMED);
    if (fclose(g->missing_f) | fclose(g->unflushed_f))
        mf_die("out of memory");
    g->room = mf_room_for_a_profile(run_dir);
}

/* `mf_print` if that is the one $PATH finds, else its path. */
static const char *mf_print_command(const char *path)
{
    char *found = NULL;
    const char *env = getenv("PATH");
    for (const char *p = env ? env : ""; *p;) {
        const char *colon = strchrnul(p, ':');
        char *cand = mf_xasprintf("%.*s/%s", (int)(colon - p), p, MF_PRINT_NAME);
        if (colon > p && access(cand, X_OK) == 0) {
            found = cand;
            break;
        }
        free(cand);
        p = *colon ? colon + 1 : colon;
    }
    bool same = false;
    if (found) {
        struct stat a, b;
        same = stat(found, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
        free(found);
    }
    return same ? MF_PRINT_NAME : path;
}

/* The display column (characters, not bytes) where `text` starts in `line`. */
static size_t mf_column_of(const char *line, const char *text)
{
    size_t col = 0;
    for (const char *p = line; p < text; p++)
        col += ((unsigned char)*p & 0xc0) != 0x80;
    return col;
}

/* The byte where display column col starts in line, or NULL if the line is shorter. */
static const char *mf_at_column(const char *line, size_t col)
{
    const char *p = line;
    for (size_t c = 0; *p && c < col; c++)
        for (p++; ((unsigned char)*p & 0xc0) == 0x80; p++)
            ;
    return *p ? p : NULL;
}

/* mf_print's caller tree cut to its first level, the allocation sites: the header, the
 * column titles, then the lines whose text is not indented under a parent (deeper lines
 * start with spaces or the tree's box-drawing characters, U+2500..U+257F: bytes e2 94 xx or
 * e2 95 xx). A line's text starts where the titles' "allocation site" does: the columns
 * before it are of fixed width, whatever they are. Lines that are not tree lines (the
 * footer) are passed on. */
static void mf_copy_sites(FILE *in, FILE *out, bool header)
{
    char *line = NULL;
    size_t cap = 0, col = 0;
    ssize_t len;
    bool tree = false;
    while ((len = getline(&line, &cap, in)) > 0) {
        const unsigned char *t;
        const char *title;
        if (!tree) {
            if ((title = strstr(line, "allocation site"))) {
                tree = true;
                col = mf_column_of(line, title);
            } else if (!header) {
                continue;
            }
        } else if (line[0] == ' ' || line[0] == '~' || (line[0] >= '0' && line[0] <= '9')) {
            t = (const unsigned char *)mf_at_column(line, col);
            if (t && (t[0] == ' ' || (t[0] == 0xe2 && (t[1] == 0x94 || t[1] == 0x95))))
                continue;
        }
        fwrite(line, 1, (size_t)len, out);
    }
    free(line);
}

void mf_summary(struct mf_launch *l, int status)
{
    if (WIFSIGNALED(status))
        mf_msg("%s was killed by %s%s", l->argv[0], mf_signal_name(WTERMSIG(status)),
               WCOREDUMP(status) ? " (core dumped)" : "");
    struct mf_proc_dir *dirs;
    size_t n = mf_process_dirs(l->run_dir, &dirs);
    struct mf_gaps g;
    mf_find_gaps(l->run_dir, dirs, n, &g);
    char *room = g.room == EFBIG ? mf_xasprintf(": RLIMIT_FSIZE is below a profile file's size "
                                                "(%s)", strerror(g.room))
                 : g.room ? mf_xasprintf(": its file system has no room for another profile "
                                         "file (%s)", strerror(g.room))
                          : "";
    if (n == 0) {
        if (g.room)
            mf_msg("no process wrote a profile into %s%s", l->run_dir, room);
        else
            mf_msg("no process wrote a profile into %s (a statically linked or set-user-ID "
                   "program cannot be profiled by preloading)",
                   l->run_dir);
        return;
    }
    if (!g.images) {
        mf_msg("no data in %s (none from %s)%s; the program's count is not known", l->run_dir,
               g.missing, room);
        return;
    }
    /* mf_print's header would give the totals of what was written as the program's: left
     * out when they are not, and the first line says why. */
    bool partial = g.nmissing || g.room || g.nunflushed;
    char *unflushed =
        g.nunflushed
            ? mf_xasprintf("; %zu process image%s did not run %s exit (ended by a signal, exec "
                           "or _exit, or still running) while sampling: up to %u calls of each "
                           "of the %zu thread%s then running can be missing from %s totals (%s)",
                           g.nunflushed, g.nunflushed == 1 ? "" : "s",
                           g.nunflushed == 1 ? "its" : "their", MF_FLUSH_CALLS - 1, g.running,
                           g.running == 1 ? "" : "s", g.nunflushed == 1 ? "its" : "their",
                           g.unflushed)
            : "";
    char *missing = g.nmissing ? mf_xasprintf(", incomplete (no data from %s)", g.missing)
                               : g.room ? ", perhaps incomplete" : "";
    mf_msg("profile of %zu process%s in %s%s%s%s%s", n, n == 1 ? "" : "es", l->run_dir, missing,
           room, unflushed,
           partial ? "; the program's own count is not known, the sites below are those of the "
                     "data written"
                   : "");
    char *mf_print = mf_xasprintf("%s/%s", l->self_dir, MF_PRINT_NAME);
    if (access(mf_print, X_OK) != 0) {
        mf_msg("no %s beside the launcher (%s) to summarize it", MF_PRINT_NAME, mf_print);
        return;
    }

    /* One call on the run directory: mf_print reads every process directory in it. */
    char *args[] = {(char *)MF_PRINT_NAME, (char *)"--threshold", (char *)MF_SUMMARY_THRESHOLD,
                    (char *)"--", l->run_dir, NULL};
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        mf_msg("cannot make a pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        mf_msg("cannot fork to run %s: %s", mf_print, strerror(errno));
        close(out[0]);
        close(out[1]);
        return;
    }
    if (pid == 0) {
        /* mf_print is not profiled, even if the user's LD_PRELOAD names the library. */
        char *others = mf_other_preloads(getenv("LD_PRELOAD"));
        if (*others)
            setenv("LD_PRELOAD", others, 1);
        else
            unsetenv("LD_PRELOAD");
        dup2(out[1], 1);
        mf_restore_signals_in_child();
        execv(mf_print, args);
        mf_msg("cannot run %s: %s", mf_print, strerror(errno));
        _exit(127);
    }
    mf_current_child = pid;
    close(out[1]);
    FILE *in = fdopen(out[0], "r");
    if (in) {
        mf_copy_sites(in, stderr, !partial);
        fclose(in);
    } else {
        close(out[0]);
    }
    fflush(stderr);
    int st = mf_wait_child(pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        mf_msg("%s %s", mf_print,
               WIFSIGNALED(st) ? mf_signal_name(WTERMSIG(st)) : "failed (above)");
    char *const quoted_args[] = {l->run_dir, NULL};
    char *quoted = mf_shell_quote(quoted_args);
    mf_msg("the sites' callers: %s %s%s", mf_print_command(mf_print), quoted,
           n > 1 ? " (a report per program: add --by program)" : "");
    free(quoted);
}
