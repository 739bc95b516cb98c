/* --watch (watch.h): the loop, one tick read at a time, and its two views: ncurses on a
 * terminal (keys c, b, g sort; q or ^C quits; the terminal restored by endwin), plain text
 * blocks elsewhere (one per interval, until every process has ended or a SIGTERM). */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mf_print.h"
#include "process_life.h"
#include "profile_read.h"
#include "report.h"
#include "timeline.h"
#include "watch.h"

/* ---- a tick ---------------------------------------------------------------------------- */

static struct mf_watch_site *mf_watch_site(struct mf_watch *w, uint32_t name, uint32_t via)
{
    bool added;
    uint32_t i = mf_map_put(&w->map, (uint64_t)name << 32 | via, NULL, NULL, w->nsites, &added);
    if (added) {
        MF_GROW(w->sites, w->nsites, w->cap);
        w->sites[w->nsites] = (struct mf_watch_site){.name = name, .via = via};
        w->nsites++;
    }
    return &w->sites[i];
}

static double mf_seconds(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* The lines the reader wrote to w->msg_fd during the tick, each new one kept. */
static void mf_watch_messages(struct mf_watch *w, bool keep)
{
    off_t end = lseek(w->msg_fd, 0, SEEK_END);
    if (end > 0 && keep) {
        char *text = mf_xmalloc((size_t)end + 1);
        ssize_t n = pread(w->msg_fd, text, (size_t)end, 0);
        text[n > 0 ? n : 0] = '\0';
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            uint32_t id = mf_intern(line), k = 0;
            while (k < w->nsaid && w->said[k] != id)
                k++;
            if (k == w->nsaid) {
                MF_GROW(w->said, w->nsaid, w->said_cap);
                w->said[w->nsaid++] = id;
            }
        }
        free(text);
    }
    if (ftruncate(w->msg_fd, 0) != 0)
        return;
}

/* The sites of model m, its counts added to each site's calls (live false) or live heap. */
static void mf_watch_add(struct mf_watch *w, const struct mf_model *m, bool live, uint64_t *calls,
                         uint64_t *bytes, uint64_t *var, double *bytes_var)
{
    struct mf_sites t;
    mf_sites_build(&t, &m, 1, 1, false);
    for (uint32_t i = 0; i < t.n; i++) {
        const struct mf_site_row *r = &t.rows[i];
        struct mf_watch_site *s = mf_watch_site(w, mf_site_names(&t, r)[0], r->via);
        uint32_t k = (uint32_t)(s - w->sites);
        if (live) {
            s->live_calls = r->calls;
            s->live_bytes = r->bytes;
            continue;
        }
        calls[k] += r->calls;
        bytes[k] += r->bytes;
        var[k] += r->var;
        bytes_var[k] += r->bytes_var;
        s->estimated |= r->estimated;
    }
    mf_sites_free(&t);
}

/* "cc1 ×2, as" for the programs of the running images, into w->programs. */
static void mf_watch_programs(struct mf_watch *w, const char **names, uint32_t n)
{
    w->programs[0] = '\0';
    size_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t count = 0;
        bool first = true;
        for (uint32_t j = 0; j < n; j++) {
            first &= !(j < i && strcmp(names[j], names[i]) == 0);
            count += strcmp(names[j], names[i]) == 0;
        }
        if (!first)
            continue;
        char one[300];
        snprintf(one, sizeof one, "%s%s", at ? ", " : "", mf_esc(names[i]));
        if (count > 1)
            snprintf(one + strlen(one), sizeof one - strlen(one), " ×%u", count);
        if (at + strlen(one) + 1 >= sizeof w->programs)
            break;
        memcpy(w->programs + at, one, strlen(one) + 1);
        at += strlen(one);
    }
}

void mf_watch_step(struct mf_watch *w)
{
    if (w->rec && w->rec->fd >= 0 && mf_record_now() >= mf_record_due(w->rec))
        mf_record_tick(w->rec, false);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double dt = w->read_any ? mf_seconds(&w->at, &now) : 0;
    w->at = now;
    w->wall = time(NULL);

    /* The reader's messages go to w->msg_fd while it reads. */
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    bool redirect = saved >= 0 && dup2(w->msg_fd, STDERR_FILENO) >= 0;
    struct mf_profile p = {0};
    for (int i = 0; i < w->ndirs; i++)
        mf_profile_read_dir(&p, w->dirs[i]);
    mf_profile_finish(&p);
    bool read = p.nfiles_read > 0;
    w->live = read && !mf_live_attach(&p, false);
    fflush(stderr);
    if (redirect)
        dup2(saved, STDERR_FILENO);
    if (saved >= 0)
        close(saved);
    /* Before the first file, "no profile files" is what waiting looks like, not news. */
    mf_watch_messages(w, read);
    if (!read) {
        mf_profile_free(&p);
        return;
    }

    uint32_t before = w->nsites;
    struct mf_model m;
    mf_model_build(&m, &p, &w->config);
    w->sample_interval = m.sample_interval;
    /* The counts read now, by site: sites never seen before are added as they turn up. */
    size_t cap = (size_t)before + 2 * ((size_t)m.nstacks + 1); /* each pass adds <= nstacks + 1 */
    uint64_t *calls = mf_xcalloc(cap, sizeof *calls), *bytes = mf_xcalloc(cap, sizeof *bytes);
    uint64_t *var = mf_xcalloc(cap, sizeof *var);
    double *bytes_var = mf_xcalloc(cap, sizeof *bytes_var);
    mf_watch_add(w, &m, false, calls, bytes, var, bytes_var);
    mf_model_free(&m);
    uint64_t *prev_live = mf_xcalloc(cap, sizeof *prev_live);
    for (uint32_t i = 0; i < w->nsites; i++) {
        prev_live[i] = w->sites[i].live_bytes;
        w->sites[i].live_calls = w->sites[i].live_bytes = 0;
    }
    w->live_bytes = 0;
    if (w->live) {
        struct mf_model_config lc = w->config;
        lc.view = MF_VIEW_LIVE;
        mf_model_build(&m, &p, &lc);
        w->live_bytes = m.view_bytes;
        mf_watch_add(w, &m, true, NULL, NULL, NULL, NULL);
        mf_model_free(&m);
    }

    /* Totals only grow while a read skips a file (being replaced, say): it must not show as
     * a drop, nor its return as a burst. A whole read is taken as it is: a table whose
     * thread finished is calibrated to its exact total, which may lower its estimates. */
    bool whole = p.nfiles_skipped == 0;
    for (uint32_t i = 0; i < w->nsites; i++) {
        struct mf_watch_site *s = &w->sites[i];
        uint64_t dc = calls[i] > s->calls ? calls[i] - s->calls : 0;
        uint64_t db = bytes[i] > s->bytes ? bytes[i] - s->bytes : 0;
        uint64_t dv = var[i] > s->var ? var[i] - s->var : 0;
        double old_rate = s->calls_rate;
        if (dc || whole) {
            s->calls = calls[i];
            s->var = var[i];
        }
        if (db || whole) {
            s->bytes = bytes[i];
            s->bytes_var = bytes_var[i];
        }
        if (dt > 0) {
            s->calls_rate = (double)dc / dt;
            s->bytes_rate = (double)db / dt;
            s->calls_rate_se = s->estimated ? mf_calls_se(dc, dv, w->sample_interval) / dt : 0;
            s->growth = w->live ? ((double)s->live_bytes - (double)prev_live[i]) / dt
                                : s->calls_rate - old_rate;
        }
    }
    free(calls);
    free(bytes);
    free(var);
    free(bytes_var);
    free(prev_live);
    uint64_t tc = mf_profile_total_calls(&p), tb = mf_profile_total_bytes(&p);
    if (dt > 0) {
        w->calls_rate = tc > w->calls ? (double)(tc - w->calls) / dt : 0;
        w->bytes_rate = tb > w->bytes ? (double)(tb - w->bytes) / dt : 0;
        w->rates = true;
    }
    w->calls = tc > w->calls ? tc : w->calls;
    w->bytes = tb > w->bytes ? tb : w->bytes;

    const char **names = mf_xmalloc(((size_t)p.nprocs + 1) * sizeof *names);
    w->running = w->ended = 0;
    for (uint32_t i = 0; i < p.nprocs; i++) {
        if (!p.procs[i].has_file)
            continue;
        if (mf_process_running(&p, i)) /* one exec'd runs on: by the program it was */
            names[w->running++] = mf_process_program(&p.procs[i]);
        else
            w->ended++;
    }
    mf_watch_programs(w, names, w->running);
    free(names);
    mf_profile_free(&p);
    w->read_any = true;
}

static const struct mf_watch *mf_order_of;
static enum mf_watch_sort mf_order_key;

static double mf_sort_value(const struct mf_watch_site *s, enum mf_watch_sort key, int k)
{
    if (key == MF_SORT_GROWTH)
        return k == 0 ? s->growth : k == 1 ? s->calls_rate : (double)s->calls;
    if (key == MF_SORT_BYTES)
        return k == 0 ? s->bytes_rate : k == 1 ? (double)s->bytes : (double)s->calls;
    return k == 0 ? s->calls_rate : k == 1 ? (double)s->calls : (double)s->bytes;
}

static int mf_order_cmp(const void *a, const void *b)
{
    const struct mf_watch_site *x = &mf_order_of->sites[*(const uint32_t *)a],
                               *y = &mf_order_of->sites[*(const uint32_t *)b];
    for (int k = 0; k < 3; k++) {
        double u = mf_sort_value(x, mf_order_key, k), v = mf_sort_value(y, mf_order_key, k);
        if (u != v)
            return u > v ? -1 : 1;
    }
    int c = strcmp(mf_str(x->name), mf_str(y->name));
    return c ? c : strcmp(mf_str(x->via), mf_str(y->via));
}

uint32_t *mf_watch_order(const struct mf_watch *w, enum mf_watch_sort key)
{
    uint32_t *v = mf_xmalloc(((size_t)w->nsites + 1) * sizeof *v);
    for (uint32_t i = 0; i < w->nsites; i++)
        v[i] = i;
    mf_order_of = w;
    mf_order_key = key;
    qsort(v, w->nsites, sizeof *v, mf_order_cmp);
    return v;
}

/* ---- the lines both views show --------------------------------------------------------- */

static const char *const mf_sort_words[] = {"calls/s", "bytes/s", "growth"};

/* A rate for a column: "12,345" (calls) or "1.2 MiB" (bytes), "-" before the second tick. */
static const char *mf_rate(char *buf, const struct mf_watch *w, double v, bool is_bytes)
{
    if (!w->rates)
        return "-";
    return is_bytes ? mf_fmt_bytes(buf, v) : mf_fmt_count(buf, (uint64_t)(v + 0.5));
}

/* The view's lines into out, each ending in '\n': the time and totals, the processes, the
 * columns' heads, then up to rows sites (all if 0). */
static void mf_watch_lines(FILE *out, const struct mf_watch *w, enum mf_watch_sort key,
                           uint32_t rows)
{
    char a[32], b[32], c[32], d[32], t[16];
    strftime(t, sizeof t, "%H:%M:%S", localtime(&w->wall));
    fprintf(out, "%s  %s calls (%s/s), %s", t, mf_fmt_count(a, w->calls),
            mf_rate(b, w, w->calls_rate, false), mf_fmt_bytes(c, (double)w->bytes));
    fprintf(out, " (%s/s)", mf_rate(d, w, w->bytes_rate, true));
    if (w->live)
        fprintf(out, "; live %s", mf_fmt_bytes(a, (double)w->live_bytes));
    fprintf(out, "; sorted by %s\n", mf_sort_words[key]);
    if (!w->read_any)
        fprintf(out, "waiting for a profile in %s\n", mf_esc(w->dirs[0]));
    else
        fprintf(out, "processes: %u running%s%s%s, %u ended\n", w->running,
                w->running ? " (" : "", w->programs, w->running ? ")" : "", w->ended);
    fprintf(out, "%13s %9s %11s %15s %11s %12s  site\n", "calls/s", "±error", "bytes/s",
            "calls", "bytes", w->live ? "live" : "growth");
    uint32_t *order = mf_watch_order(w, key);
    for (uint32_t i = 0; i < w->nsites && (!rows || i < rows); i++) {
        const struct mf_watch_site *s = &w->sites[order[i]];
        char err[16] = "", g[32];
        if (w->rates && s->estimated && s->calls_rate > 0)
            snprintf(err, sizeof err, "±%.0f%%", 100 * s->calls_rate_se / s->calls_rate);
        else if (w->rates && s->estimated && s->calls_rate_se > 0)
            snprintf(err, sizeof err, "±%.0f", s->calls_rate_se);
        if (w->live)
            mf_fmt_bytes(g, (double)s->live_bytes);
        else if (w->rates) {
            char n[32];
            snprintf(g, sizeof g, "%c%s", s->growth < 0 ? '-' : '+',
                     mf_fmt_count(n, (uint64_t)(fabs(s->growth) + 0.5)));
        }
        else
            snprintf(g, sizeof g, "-");
        /* "%9s" holds the two bytes of a ± in eight columns */
        fprintf(out, "%13s %*s %11s %15s %11s %12s  %s%s%s\n",
                mf_rate(a, w, s->calls_rate, false), *err ? 9 : 8, err, mf_rate(b, w, s->bytes_rate, true),
                mf_fmt_count(c, s->calls), mf_fmt_bytes(d, (double)s->bytes), g,
                s->name ? mf_esc(mf_str(s->name)) : "?", s->via ? " via " : "",
                s->via ? mf_esc(mf_str(s->via)) : "");
    }
    free(order);
}

/* ---- the views ------------------------------------------------------------------------- */

static volatile sig_atomic_t mf_stop_signal;

static void mf_on_stop(int sig)
{
    mf_stop_signal = sig;
}

/* SIGINT, SIGTERM and SIGHUP end the view (the terminal restored first); set before
 * initscr, which then leaves them to us. No SA_RESTART: a sleep ends at once. */
static void mf_catch_stops(void)
{
    struct sigaction sa = {.sa_handler = mf_on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Ends as the signal would have ended it, so that a shell sees ^C (exit status for TERM:
 * the launcher's way to end the view, 0). */
static int mf_stopped(void)
{
    int sig = mf_stop_signal;
    if (sig == SIGINT || sig == SIGHUP) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    return 0;
}

static void mf_say_messages(struct mf_watch *w)
{
    for (; w->said_shown < w->nsaid; w->said_shown++)
        fprintf(stderr, "%s\n", mf_str(w->said[w->said_shown]));
}

static bool mf_all_gone(const struct mf_watch *w)
{
    return w->read_any && w->running == 0;
}

static void mf_sleep(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    if (!mf_stop_signal)
        nanosleep(&ts, NULL); /* a stop signal ends it early */
}

/* Text: a block per interval, the first after one interval (rates need two ticks). */
static int mf_watch_text(struct mf_watch *w, double interval, uint32_t rows)
{
    mf_watch_step(w);
    for (bool first = true;; first = false) {
        mf_sleep(interval);
        mf_watch_step(w); /* a SIGTERM (the launcher's) still gets the last counts shown */
        mf_say_messages(w);
        if (!first)
            fputc('\n', stdout); /* between blocks */
        mf_watch_lines(stdout, w, MF_SORT_CALLS, rows);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            mf_error("cannot write the view: %s", strerror(errno));
            return 1;
        }
        if (mf_stop_signal)
            return mf_stopped();
        if (mf_all_gone(w))
            return 0;
    }
}

/* What the lines say, cut to the screen's width, drawn from line y on. */
static void mf_draw(const struct mf_watch *w, enum mf_watch_sort key, double interval)
{
    char *text = NULL, *cut = NULL;
    size_t len = 0, cut_len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        mf_out_of_memory();
    unsigned width = COLS > 1 ? (unsigned)COLS - 1 : 1; /* the last column would wrap */
    mf_watch_lines(f, w, key, LINES > 6 ? (uint32_t)LINES - 6 : 1);
    fclose(f);
    f = open_memstream(&cut, &cut_len);
    if (!f)
        mf_out_of_memory();
    mf_cut_lines(f, text, len, width);
    fclose(f);
    erase();
    int y = 0;
    for (char *save = NULL, *line = strtok_r(cut, "\n", &save); line && y < LINES - 2;
         line = strtok_r(NULL, "\n", &save), y++) {
        if (y == 2)
            attron(A_REVERSE);
        mvaddstr(y, 0, line);
        if (y == 2)
            attroff(A_REVERSE);
    }
    char keys[200], *k = NULL;
    size_t klen = 0;
    snprintf(keys, sizeof keys,
             "every %g s  [c]alls/s [b]ytes/s [g]rowth sort, [q]uit%s%s%s", interval,
             mf_all_gone(w) ? "  (every process has ended)" : "",
             w->nsaid ? "  last message: " : "", w->nsaid ? mf_str(w->said[w->nsaid - 1]) : "");
    f = open_memstream(&k, &klen);
    if (!f)
        mf_out_of_memory();
    mf_cut_lines(f, keys, strlen(keys), width);
    fclose(f);
    mvaddstr(LINES - 1, 0, k);
    refresh();
    free(text);
    free(cut);
    free(k);
}

static int mf_watch_screen(struct mf_watch *w, double interval)
{
    setlocale(LC_CTYPE, ""); /* ncursesw writes UTF-8 where the terminal takes it */
    if (!initscr()) {
        const char *term = getenv("TERM");
        mf_error("cannot start the terminal view (TERM=%s)", mf_esc(term ? term : ""));
        return 1;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    enum mf_watch_sort key = MF_SORT_CALLS;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int rc = 0;
    while (!mf_stop_signal) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (mf_seconds(&next, &now) >= 0) {
            mf_watch_step(w);
            mf_draw(w, key, interval);
            next = w->at;
            next.tv_sec += (time_t)interval;
            next.tv_nsec += (long)((interval - (double)(time_t)interval) * 1e9);
            if (next.tv_nsec >= 1000000000) {
                next.tv_sec++;
                next.tv_nsec -= 1000000000;
            }
            continue;
        }
        /* Keys until the next tick, a tenth of a second at most at a time: a stop signal is
         * seen however getch treats it. */
        double left = -mf_seconds(&next, &now);
        timeout(left < 0.1 ? (int)(left * 1000) + 1 : 100);
        int ch = getch();
        if (ch == 'q' || ch == 'Q')
            break;
        enum mf_watch_sort was = key;
        if (ch == 'c')
            key = MF_SORT_CALLS;
        else if (ch == 'b')
            key = MF_SORT_BYTES;
        else if (ch == 'g')
            key = MF_SORT_GROWTH;
        if (key != was || ch == KEY_RESIZE)
            mf_draw(w, key, interval);
    }
    endwin();
    mf_say_messages(w);
    if (mf_stop_signal)
        rc = mf_stopped();
    return rc;
}

int mf_watch(const struct mf_request *r)
{
    for (int i = 0; i < r->ndirs; i++) {
        int fd = mf_open_dir(r->dirs[i]);
        if (fd < 0) {
            mf_error("cannot watch %s: %s", mf_esc(r->dirs[i]), strerror(errno));
            return 2;
        }
        close(fd);
    }
    static struct mf_watch w;
    w.dirs = r->dirs;
    w.ndirs = r->ndirs;
    w.config = (struct mf_model_config){r->o.trim, MF_VIEW_CALLS, &r->xf};
    w.msg_fd = memfd_create("mf_print messages", MFD_CLOEXEC);
    if (w.msg_fd < 0) {
        mf_error("cannot make a file for the reader's messages: %s", strerror(errno));
        return 1;
    }
    mf_symbolize_config(r->debug_dirs, r->ndebug_dirs, r->sysroot);
    /* --watch --record: the timeline too, from the same loop (a tick when one is due, and
     * a last one when the view ends). */
    static struct mf_recorder rec;
    if (r->record) {
        if (mf_record_start(&rec, r->dirs[0])) {
            mf_record_end(&rec);
            return 1;
        }
        w.rec = &rec;
    }
    mf_catch_stops();
    int rc = isatty(STDOUT_FILENO) ? mf_watch_screen(&w, r->interval)
                                   : mf_watch_text(&w, r->interval, r->o.top ? r->o.top : 10);
    if (w.rec) {
        if (rec.fd >= 0)
            mf_record_tick(&rec, true);
        mf_record_end(&rec);
    }
    return rc;
}
