/* Debug files from debuginfod servers (debuginfod.h). libdw owns the client and does the
 * fetching (the debug file, and the files it refers to); mf_print's part is what libdw does
 * not do: say that a download runs, bound the time they take, check what comes back. */
#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "debuginfod.h"
#include "mf_print.h"

/* What no module got, by cause, for the one line at the end: the first module's label and
 * how many more. */
struct mf_missed {
    const char *first;
    unsigned n;
    int err; /* the first failure's errno */
};

static struct {
    bool on, offline, tty;
    double limit_s;
    double spent;          /* seconds downloads have run, all together */
    double last;           /* the progress function's last call (0: none yet) */
    bool expired;          /* the time limit is spent: every download is cancelled */
    bool asked;            /* the server was asked during the current lookup */
    bool shown;            /* a progress line is on the terminal */
    const char *missed;    /* the module whose last lookup found nothing */
    struct mf_missed failed, timed_out, rejected;
} mf_dl;

#define MF_PROGRESS_GAP_S 2.0

static double mf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void mf_debuginfod_config(bool offline, unsigned timeout_s)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    mf_dl.offline = offline;
    /* libdw asks the servers whenever DEBUGINFOD_URLS is set: --offline must clear it. */
    if (offline)
        unsetenv("DEBUGINFOD_URLS");
    mf_dl.on = !offline && urls && urls[strspn(urls, " \t")];
    mf_dl.limit_s = timeout_s;
    mf_dl.tty = isatty(STDERR_FILENO);
}

enum mf_debuginfod_use mf_debuginfod_use(void)
{
    return mf_dl.offline ? MF_DEBUGINFOD_OFFLINE : mf_dl.on ? MF_DEBUGINFOD_ON : MF_DEBUGINFOD_UNSET;
}

static void mf_progress_clear(void)
{
    if (mf_dl.shown)
        fputs("\r\033[K", stderr);
    mf_dl.shown = false;
}

/* libdebuginfod calls this while a download runs; non-zero cancels it. b is the size once
 * the server said it, a the bytes so far (before that a counts the calls). A terminal gets
 * one line, rewritten, erased when the download ends. */
static int mf_progress(debuginfod_client *c, long a, long b)
{
    const char *label = debuginfod_get_user_data(c);
    double now = mf_now();
    mf_dl.asked = true;
    /* libdebuginfod calls at least once a second while a download runs: a longer gap is
     * time no download ran (symbolizing, reading), which the limit does not count. */
    if (mf_dl.last && now - mf_dl.last < MF_PROGRESS_GAP_S)
        mf_dl.spent += now - mf_dl.last;
    mf_dl.last = now;
    if (mf_dl.expired || mf_dl.spent > mf_dl.limit_s) {
        mf_dl.expired = true;
        return 1;
    }
    if (!mf_dl.tty) /* a pipe gets the outcome only (mf_debuginfod_end) */
        return 0;
    char got[32], size[32];
    fprintf(stderr, "\r\033[Kmf_print: debuginfod: %s's debug information", mf_esc(label));
    if (b > 0)
        fprintf(stderr, ": %s of %s", mf_fmt_bytes(got, (double)a), mf_fmt_bytes(size, (double)b));
    else
        fputs(": waiting for the server", stderr);
    mf_dl.shown = true;
    return 0;
}

void mf_debuginfod_attach(Dwfl *dwfl, const char *label)
{
    if (!mf_dl.on)
        return;
    debuginfod_client *c = dwfl_get_debuginfod_client(dwfl);
    if (!c)
        return;
    debuginfod_set_user_data(c, (void *)label);
    debuginfod_set_progressfn(c, mf_progress);
}

static void mf_missed_add(struct mf_missed *m, const char *label, int err)
{
    if (!m->n++) {
        m->first = label;
        m->err = err;
    }
}

/* The build id of the ELF file open at fd, or 0 if it has none. */
static int mf_fd_build_id(int fd, const void **id)
{
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf)
        return 0;
    /* The id points into elf's data: copied before elf_end. */
    static unsigned char buf[64];
    const void *bits;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &bits);
    if (n > 0 && (size_t)n <= sizeof buf)
        memcpy(buf, bits, (size_t)n);
    else
        n = 0;
    elf_end(elf);
    *id = buf;
    return (int)n;
}

int mf_debuginfod_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                                 Dwarf_Addr base, const char *file_name,
                                 const char *debuglink_file, GElf_Word debuglink_crc,
                                 char **debuginfo_file_name)
{
    /* libdw looks twice for a module without one (for its symbols, for its DWARF): the
     * servers are asked once. */
    if (modname == mf_dl.missed)
        return -ENOENT;
    mf_dl.asked = false;
    int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
                                          debuglink_file, debuglink_crc, debuginfo_file_name);
    bool asked = mf_dl.asked;
    mf_progress_clear();
    const unsigned char *want;
    GElf_Addr vaddr;
    int want_len = dwfl_module_build_id(mod, &want, &vaddr);
    if (fd >= 0) {
        const void *got;
        int got_len = mf_fd_build_id(fd, &got);
        if (want_len > 0 && (got_len != want_len || memcmp(got, want, (size_t)want_len) != 0)) {
            mf_missed_add(&mf_dl.rejected, modname, 0);
            mf_dl.missed = modname;
            close(fd);
            free(*debuginfo_file_name);
            *debuginfo_file_name = NULL;
            return -1;
        }
        return fd;
    }
    mf_dl.missed = modname;
    /* libdw passes on libdebuginfod's -errno; -ENOENT: the servers do not have it, which
     * the footer says. */
    if (asked && mf_dl.expired)
        mf_missed_add(&mf_dl.timed_out, modname, ETIME);
    else if (mf_dl.on && want_len > 0 && fd < -1 && fd != -ENOENT)
        mf_missed_add(&mf_dl.failed, modname, -fd);
    return fd;
}

static void mf_missed_say(const struct mf_missed *m, const char *why)
{
    if (!m->n)
        return;
    char more[48] = "";
    if (m->n > 1)
        snprintf(more, sizeof more, " and %u more module%s", m->n - 1, m->n > 2 ? "s" : "");
    mf_error("debuginfod: %s for %s%s; %s frames stay unsymbolized", why, mf_esc(m->first), more,
             m->n > 1 ? "their" : "its");
}

void mf_debuginfod_end(void)
{
    mf_progress_clear();
    char why[300];
    if (mf_dl.failed.n) {
        const char *urls = getenv("DEBUGINFOD_URLS");
        snprintf(why, sizeof why, "%s: %s: no debug information", urls ? mf_esc(urls) : "",
                 strerror(mf_dl.failed.err));
        mf_missed_say(&mf_dl.failed, why);
    }
    snprintf(why, sizeof why, "gave up after %g s (--debuginfod-timeout): no debug information",
             mf_dl.limit_s);
    mf_missed_say(&mf_dl.timed_out, why);
    mf_missed_say(&mf_dl.rejected, "the debug file served has another build id: refused");
    mf_dl.spent = mf_dl.last = 0;
    mf_dl.expired = false;
    mf_dl.missed = NULL;
    mf_dl.failed = mf_dl.timed_out = mf_dl.rejected = (struct mf_missed){0};
}
