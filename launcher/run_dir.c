/* The run directory: made before the program may start (0700, like the profile directories
 * in it), and run.txt in it, the run's description for people and scripts (its keys are
 * listed in malloc_freq(1)), written before the program starts and completed when it has
 * ended. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"

#define MF_RUN_FILE "run.txt"

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

bool mf_is_process_dir_name(const char *name)
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
