/* What the run's files hold, read from their headers alone before mf_print reads them: the
 * process directories, the images with data and their exact total of calls, and what the
 * summary must say is missing: processes without data, images whose last calls were not
 * written, a file system without room for one more profile. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../c_core/mf_format.h"
#include "launcher.h"

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
            if (n == cap)
                v = mf_xrealloc(v, (cap *= 2) * sizeof *v);
            v[n].pid = strtol(e->d_name + 12, NULL, 10);
            v[n++].path = mf_xasprintf("%s/%s", run_dir, e->d_name);
        }
        closedir(d);
    }
    qsort(v, n, sizeof *v, mf_by_pid);
    *out = v;
    return n;
}

/* ---- what they hold, and what not ---------------------------------------------------- */

/* The lines that name processes without data or with calls missing, being written. */
struct mf_gaps {
    FILE *missing_f, *unflushed_f;
    size_t missing_len, unflushed_len;
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
        fputs(exe, f); /* the line goes out through mf_msg, which shows it escaped */
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
static void mf_scan_process_dir(int run_fd, const char *dir_name, long pid, struct mf_scan *s,
                                struct mf_gaps *g)
{
    int dfd = openat(run_fd, dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        mf_gap_name(g->missing_f, ++s->nmissing, pid, NULL);
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
            mf_gap_name(g->missing_f, ++s->nmissing, pid, ph.exe);
            continue;
        }
        s->images++;
        s->calls += calls;
        /* Every call is written when each is a sample: with MALLOC_FREQ_SAMPLE=1, and in
         * the default mode's exact stretch, which one thread takes in order. */
        bool exact_stretch = ph.sample_interval == 0 && running <= 1 && calls < ph.exact_calls;
        if (!(ph.flags & MF_PROCESS_EXITED) && ph.sample_interval != 1 && !exact_stretch &&
            running) {
            mf_gap_name(g->unflushed_f, ++s->nunflushed, pid, ph.exe);
            s->running += running;
        }
    }
    closedir(d);
    if (!nprocs)
        mf_gap_name(g->missing_f, ++s->nmissing, pid, NULL);
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

void mf_scan_run(const char *run_dir, struct mf_scan *s)
{
    memset(s, 0, sizeof *s);
    struct mf_proc_dir *dirs;
    s->dirs = mf_process_dirs(run_dir, &dirs);
    struct mf_gaps g = {0};
    g.missing_f = open_memstream(&s->missing, &g.missing_len);
    g.unflushed_f = open_memstream(&s->unflushed, &g.unflushed_len);
    if (!g.missing_f || !g.unflushed_f)
        mf_die("out of memory");
    int run_fd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < s->dirs && run_fd >= 0; i++)
        mf_scan_process_dir(run_fd, strrchr(dirs[i].path, '/') + 1, dirs[i].pid, s, &g);
    if (run_fd >= 0)
        close(run_fd);
    for (size_t i = 0; i < s->dirs; i++)
        free(dirs[i].path);
    free(dirs);
    if (s->nmissing > MF_GAPS_NAMED)
        fprintf(g.missing_f, " and %zu more", s->nmissing - MF_GAPS_NAMED);
    if (s->nunflushed > MF_GAPS_NAMED)
        fprintf(g.unflushed_f, " and %zu more", s->nunflushed - MF_GAPS_NAMED);
    if (fclose(g.missing_f) | fclose(g.unflushed_f))
        mf_die("out of memory");
    s->room = mf_room_for_a_profile(run_dir);
}
