/* The summary printed when the program has ended: where the profile is and whether its files
 * hold the program's count (scan.c), mf_print's header with the totals, the top allocation
 * sites, mf_print's notes (the modules it could not symbolize), and the command for the
 * whole report.
 *
 * The sites come from mf_print as data, its CSV of sites (--by site --site-depth 1: a row
 * per site and the wrapper folded into it, largest first, with the standard errors of
 * estimates), and are written in the columns of mf_print's tree, numbers formatted as it
 * formats them and shares of the same total, so that a line reads as the tree's line of
 * that site. Every site of at least MF_SUMMARY_THRESHOLD % of the calls is shown, and never
 * fewer than MF_SUMMARY_SITES: a compiler spreads its calls over thousands of sites, none
 * of which reaches 5 %. The header and the notes are mf_print's default report without
 * its tree (--threshold 100): its first paragraph, and those after the tree's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../c_core/mf_format.h"
#include "launcher.h"

#define MF_SUMMARY_THRESHOLD 5 /* percent of the calls: every site at or above it is shown */
#define MF_SUMMARY_SITES 5     /* and at least this many, the largest, whatever their share */

/* ---- numbers as mf_print's tree writes them ------------------------------------------ */

/* 1234567 -> "1,234,567" */
static const char *mf_fmt_count(char *buf, uint64_t n)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    char *p = buf;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            *p++ = ',';
        *p++ = digits[i];
    }
    *p = '\0';
    return buf;
}

/* "854 B", "4.0 KiB", "13.4 MiB" */
static const char *mf_fmt_bytes(char *buf, size_t size, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    while (bytes >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%.0f B", bytes);
    else
        snprintf(buf, size, "%.1f %s", bytes, units[u]);
    return buf;
}

/* A relative standard error: "±4.1%", "±12%", "±>999%"; "" for an exact number, and for
 * one whose error is not known (se < 0). */
static void mf_fmt_error(char *buf, size_t size, bool estimated, double se, double of)
{
    double e = of > 0 ? 100.0 * se / of : 0;
    if (!estimated || se < 0)
        buf[0] = '\0';
    else if (e < 999.5)
        snprintf(buf, size, "±%.*f%%", e < 9.95 ? 1 : 0, e);
    else
        snprintf(buf, size, "±>999%%");
}

/* Display columns of UTF-8 text: the bytes that do not continue a character. */
static int mf_width(const char *s)
{
    int w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void mf_pad(FILE *out, int n)
{
    while (n-- > 0)
        fputc(' ', out);
}

/* ---- the sites: mf_print's CSV ------------------------------------------------------- */

/* One CSV record (RFC 4180) as its fields, unquoted, in one buffer. */
struct mf_record {
    char *text;
    size_t len, cap;
    size_t *starts;
    size_t nfields, fields_cap;
};

static void mf_record_add(struct mf_record *r, char c)
{
    if (r->len + 1 >= r->cap)
        r->text = mf_xrealloc(r->text, r->cap = (r->len + 1) * 2 + 64);
    r->text[r->len++] = c;
}

static void mf_record_field(struct mf_record *r)
{
    if (r->nfields == r->fields_cap)
        r->starts = mf_xrealloc(r->starts, (r->fields_cap = r->fields_cap * 2 + 16) *
                                               sizeof *r->starts);
    r->starts[r->nfields++] = r->len;
}

/* Field i of the record and its length (fields end in a NUL each). */
static const char *mf_field(const struct mf_record *r, size_t i, size_t *len)
{
    const char *f = r->text + r->starts[i];
    if (len)
        *len = (i + 1 < r->nfields ? r->starts[i + 1] - 1 : r->len - 1) - r->starts[i];
    return f;
}

/* The next record, false at the end of the input. */
static bool mf_record_read(FILE *in, struct mf_record *r)
{
    r->len = r->nfields = 0;
    int c = getc(in);
    if (c == EOF)
        return false;
    mf_record_field(r);
    bool quoted = false;
    for (; c != EOF; c = getc(in)) {
        if (quoted) {
            if (c == '"' && (c = getc(in)) != '"') {
                quoted = false;
                ungetc(c, in);
                continue;
            }
            mf_record_add(r, (char)c);
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            mf_record_add(r, '\0');
            mf_record_field(r);
        } else if (c == '\n') {
            break;
        } else if (c != '\r') {
            mf_record_add(r, (char)c);
        }
    }
    mf_record_add(r, '\0');
    return true;
}

/* Undoes the CSV's percent-encoding of a name (%XX: a byte), in place; its new length. */
static size_t mf_percent_decode(char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *hi, *lo;
        if (s[i] == '%' && i + 2 < n && s[i + 1] && s[i + 2] && (hi = strchr(hex, s[i + 1])) &&
            (lo = strchr(hex, s[i + 2]))) {
            s[o++] = (char)((hi - hex) << 4 | (lo - hex));
            i += 2;
        } else {
            s[o++] = s[i];
        }
    }
    s[o] = '\0';
    return o;
}

/* The record's fields of these titles (the CSV's first line) in col[]; false (said why) if
 * one is not there. */
static bool mf_columns_of(FILE *in, struct mf_record *r, const char *const *titles, size_t n,
                          size_t *col, const char *what)
{
    if (!mf_record_read(in, r)) {
        mf_msg("mf_print wrote no %s", what);
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        col[k] = SIZE_MAX;
        for (size_t i = 0; i < r->nfields; i++)
            if (strcmp(mf_field(r, i, NULL), titles[k]) == 0)
                col[k] = i;
        if (col[k] == SIZE_MAX) {
            mf_msg("mf_print's %s: no %s column", what, titles[k]);
            return false;
        }
    }
    return true;
}

/* Field k of the row, or NULL if the row is short. */
static const char *mf_column(const struct mf_record *r, const size_t *col, size_t k, size_t *len)
{
    if (col[k] < r->nfields)
        return mf_field(r, col[k], len);
    if (len)
        *len = 0;
    return NULL;
}

static bool mf_parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    *v = s ? strtoull(s, &end, 10) : 0;
    return s && *s >= '0' && *s <= '9' && !*end && !errno;
}

static bool mf_parse_double(const char *s, double *v)
{
    char *end;
    *v = s ? strtod(s, &end) : 0;
    return s && *s && !*end && *v >= 0;
}

/* A copy of a name field, percent-decoded. */
static char *mf_name_copy(const char *field, size_t len, size_t *out_len)
{
    char *s = mf_xmalloc(len + 1);
    memcpy(s, field, len + 1);
    *out_len = mf_percent_decode(s, len);
    return s;
}

/* A line of a site's stacks' (file:line), with their calls. */
struct mf_line_calls {
    char *loc; /* as the CSV has it: the file percent-encoded, then ":line" */
    uint64_t calls;
};

struct mf_site {
    char *name, *via; /* as mf_print's CSV has them, percent-decoded: any bytes */
    size_t name_len, via_len;
    uint64_t calls, bytes;
    double calls_se, bytes_se;
    struct mf_line_calls *lines; /* where the site's frame is in its stacks */
    size_t nlines;
};

struct mf_sites {
    uint64_t total;         /* the exact total of calls, from the files' headers (scan.c) */
    struct mf_site *top;    /* the largest sites: those shown once mf_sites_choose ran */
    size_t ntop, top_cap;
    size_t nsites;          /* rows with a site (a stack with no frame left has none) */
    uint64_t stacks_calls;  /* the calls of every row: what the stacks hold */
    uint64_t largest;       /* the calls of the largest site */
    bool estimated;         /* some number is an estimate */
    uint64_t base;          /* what shares are of */
    size_t nrest;           /* the other sites, added up */
    uint64_t rest_calls, rest_bytes;
    bool rest_estimated;
};

static bool mf_below(uint64_t calls, uint64_t of)
{
    return of && (double)calls * 100.0 / (double)of < MF_SUMMARY_THRESHOLD;
}

static void mf_add_to_rest(struct mf_sites *t, const struct mf_site *x)
{
    t->nrest++;
    t->rest_calls += x->calls;
    t->rest_bytes += x->bytes;
    t->rest_estimated |= x->calls_se > 0 || x->bytes_se > 0;
}

enum { MF_SITE_NAME, MF_SITE_CALLS, MF_SITE_CALLS_SE, MF_SITE_BYTES, MF_SITE_BYTES_SE,
       MF_SITE_VIA, MF_SITE_COLUMNS };
static const char *const mf_site_titles[MF_SITE_COLUMNS] = {
    "pc0", "calls", "calls_stderr", "bytes", "bytes_stderr", "via"};

/* One row of the CSV of sites into t: kept while it may be shown, else added to the rest.
 * Rows come largest first, and every share is of at least the exact total: a row below the
 * threshold of that is below it of what the shares turn out to be of. */
static bool mf_add_site(struct mf_sites *t, const struct mf_record *r, const size_t *col)
{
    struct mf_site x = {0};
    size_t len, via_len;
    const char *site = mf_column(r, col, MF_SITE_NAME, &len);
    const char *via = mf_column(r, col, MF_SITE_VIA, &via_len);
    if (!site || !via || !mf_parse_u64(mf_column(r, col, MF_SITE_CALLS, NULL), &x.calls) ||
        !mf_parse_u64(mf_column(r, col, MF_SITE_BYTES, NULL), &x.bytes) ||
        !mf_parse_double(mf_column(r, col, MF_SITE_CALLS_SE, NULL), &x.calls_se) ||
        !mf_parse_double(mf_column(r, col, MF_SITE_BYTES_SE, NULL), &x.bytes_se))
        return false;
    t->stacks_calls += x.calls;
    t->estimated |= x.calls_se > 0 || x.bytes_se > 0;
    if (strcmp(site, "-") == 0) /* no frame (a name's own '-' is encoded) */
        return true;
    t->nsites++;
    if (x.calls > t->largest)
        t->largest = x.calls;
    if (t->ntop >= MF_SUMMARY_SITES && mf_below(x.calls, t->total)) {
        mf_add_to_rest(t, &x);
        return true;
    }
    x.name = mf_name_copy(site, len, &x.name_len);
    x.via = mf_name_copy(via, via_len, &x.via_len);
    if (t->ntop == t->top_cap)
        t->top = mf_xrealloc(t->top, (t->top_cap = t->top_cap * 2 + 8) * sizeof *t->top);
    t->top[t->ntop++] = x;
    return true;
}

/* Reads mf_print's CSV of sites to its end; false (said why) if it is not one. */
static bool mf_read_sites(FILE *in, void *ctx)
{
    struct mf_sites *t = ctx;
    struct mf_record r = {0};
    size_t col[MF_SITE_COLUMNS], line = 1;
    bool ok = mf_columns_of(in, &r, mf_site_titles, MF_SITE_COLUMNS, col, "sites");
    while (mf_record_read(in, &r)) { /* to the end: mf_print must not meet a closed pipe */
        line++;
        if (ok && !mf_add_site(t, &r, col)) {
            mf_msg("mf_print's sites: line %zu is not a site's numbers", line);
            ok = false;
        }
    }
    free(r.text);
    free(r.starts);
    return ok;
}

/* The sites shown, and what shares are of, as in mf_print's tree: the exact total; or the
 * stacks' sum where they hold more calls than it (calls counted in stacks that a thread had
 * not yet added to its total when it was killed), or estimated so high that a site would
 * show above 100 %. */
static void mf_sites_choose(struct mf_sites *t)
{
    t->base = t->total;
    if (t->stacks_calls > t->total && (!t->estimated || t->largest > t->total))
        t->base = t->stacks_calls;
    size_t shown = 0;
    while (shown < t->ntop &&
           (shown < MF_SUMMARY_SITES || !mf_below(t->top[shown].calls, t->base)))
        shown++;
    for (size_t i = shown; i < t->ntop; i++) {
        mf_add_to_rest(t, &t->top[i]);
        free(t->top[i].name);
        free(t->top[i].via);
    }
    t->ntop = shown;
}

enum { MF_STACK_CALLS, MF_STACK_FRAMES, MF_STACK_LINES, MF_STACK_VIA, MF_STACK_COLUMNS };
static const char *const mf_stack_titles[MF_STACK_COLUMNS] = {"calls", "stack", "locations",
                                                              "via"};

/* The first of a CSV field's frames (they are joined by ';', which names have encoded). */
static size_t mf_first_frame(const char *field)
{
    return strcspn(field, ";");
}

/* A row of mf_print's CSV of stacks: its calls to the line of its site's frame. */
static bool mf_add_stack(struct mf_sites *t, const struct mf_record *r, const size_t *col)
{
    uint64_t calls;
    size_t len;
    const char *frames = mf_column(r, col, MF_STACK_FRAMES, NULL);
    const char *lines = mf_column(r, col, MF_STACK_LINES, NULL);
    const char *via = mf_column(r, col, MF_STACK_VIA, &len);
    if (!frames || !lines || !via || !mf_parse_u64(mf_column(r, col, MF_STACK_CALLS, NULL), &calls))
        return false;
    size_t loc_len = mf_first_frame(lines);
    if (loc_len == 2 && strncmp(lines, "??", 2) == 0) /* no line known */
        return true;
    char *name = mf_name_copy(frames, mf_first_frame(frames), &len), *via_name;
    size_t name_len = len, via_len;
    via_name = mf_name_copy(via, strlen(via), &via_len);
    for (size_t i = 0; i < t->ntop; i++) {
        struct mf_site *x = &t->top[i];
        if (x->name_len != name_len || memcmp(x->name, name, name_len) != 0 ||
            x->via_len != via_len || memcmp(x->via, via_name, via_len) != 0)
            continue;
        size_t k = 0;
        while (k < x->nlines && !(strlen(x->lines[k].loc) == loc_len &&
                                  strncmp(x->lines[k].loc, lines, loc_len) == 0))
            k++;
        if (k == x->nlines) {
            x->lines = mf_xrealloc(x->lines, (x->nlines + 1) * sizeof *x->lines);
            x->lines[k].loc = mf_xasprintf("%.*s", (int)loc_len, lines);
            x->lines[x->nlines++].calls = 0;
        }
        x->lines[k].calls += calls;
        break;
    }
    free(name);
    free(via_name);
    return true;
}

/* Reads mf_print's CSV of stacks to its end, for the lines of the sites shown. */
static bool mf_read_stacks(FILE *in, void *ctx)
{
    struct mf_sites *t = ctx;
    struct mf_record r = {0};
    size_t col[MF_STACK_COLUMNS], line = 1;
    bool ok = mf_columns_of(in, &r, mf_stack_titles, MF_STACK_COLUMNS, col, "stacks");
    while (mf_record_read(in, &r)) {
        line++;
        if (ok && !mf_add_stack(t, &r, col)) {
            mf_msg("mf_print's stacks: line %zu is not a stack's", line);
            ok = false;
        }
    }
    free(r.text);
    free(r.starts);
    return ok;
}

/* " (file.c:12)": the line with the most of the site's calls (the first of equals), the
 * file's name without its directory, as the tree shows a site. */
static void mf_put_line(FILE *out, const struct mf_site *x)
{
    const struct mf_line_calls *best = NULL;
    for (size_t k = 0; k < x->nlines; k++)
        if (!best || x->lines[k].calls > best->calls)
            best = &x->lines[k];
    const char *colon = best ? strrchr(best->loc, ':') : NULL;
    if (!colon)
        return;
    size_t len;
    char *file = mf_name_copy(best->loc, (size_t)(colon - best->loc), &len);
    const char *base = file;
    for (const char *c = file; c < file + len; c++)
        if (*c == '/')
            base = c + 1;
    fputs(" (", out);
    mf_put_name(out, base, len - (size_t)(base - file));
    fprintf(out, "%s)", colon);
    free(file);
}

struct mf_columns {
    uint64_t base;   /* the 100 % */
    int calls_width; /* the widest calls column text */
    bool err;        /* the ± columns: some number is an estimate */
};

/* A line's numbers, up to where its text starts. */
static void mf_numbers(FILE *out, const struct mf_columns *c, uint64_t calls, double calls_se,
                       uint64_t bytes, double bytes_se, bool estimated)
{
    char num[40], calls_s[48], err[32], bytes_err[32], bytes_s[32], pct[32];
    snprintf(calls_s, sizeof calls_s, "%s%s", estimated ? "~" : "", mf_fmt_count(num, calls));
    mf_fmt_error(err, sizeof err, estimated, calls_se, (double)calls);
    mf_fmt_error(bytes_err, sizeof bytes_err, estimated, bytes_se, (double)bytes);
    snprintf(pct, sizeof pct, "%.2f%%", c->base ? (double)calls * 100.0 / (double)c->base : 0.0);
    mf_fmt_bytes(bytes_s, sizeof bytes_s, (double)bytes);
    mf_pad(out, c->calls_width - mf_width(calls_s));
    fputs(calls_s, out);
    if (c->err) {
        fputc(' ', out);
        fputs(err, out);
        mf_pad(out, 7 - mf_width(err));
    }
    fprintf(out, " %8s %10s", pct, bytes_s);
    if (c->err) {
        fputc(' ', out);
        fputs(bytes_err, out);
        mf_pad(out, 7 - mf_width(bytes_err));
    }
    fputs("  ", out);
}

static void mf_print_sites(FILE *out, const struct mf_sites *t)
{
    if (!t->nsites) {
        fputs("no stacks recorded\n", out);
        return;
    }
    struct mf_columns c = {.base = t->base, .err = t->estimated};
    char num[40];
    uint64_t widest = c.base > t->stacks_calls ? c.base : t->stacks_calls;
    c.calls_width = (int)strlen(mf_fmt_count(num, widest)) + (t->estimated ? 1 : 0);
    if (c.calls_width < 5)
        c.calls_width = 5;
    mf_pad(out, c.calls_width - 5);
    fputs("calls", out);
    if (c.err)
        fputs(" ±error ", out);
    fprintf(out, " %8s %10s%s  %s\n", "%", "bytes", c.err ? " ±error " : "",
            "allocation site, then its callers");
    for (size_t i = 0; i < t->ntop; i++) {
        const struct mf_site *x = &t->top[i];
        mf_numbers(out, &c, x->calls, x->calls_se, x->bytes, x->bytes_se,
                   x->calls_se > 0 || x->bytes_se > 0);
        mf_put_name(out, x->name, x->name_len);
        if (x->via_len) {
            fputs(" via ", out);
            mf_put_name(out, x->via, x->via_len);
        }
        mf_put_line(out, x);
        fputc('\n', out);
    }
    /* The rest's error is not the CSV's errors added up: each has its floor (a sampled row
     * of one sample is at least ±100 %), which the sum of their variances has once; the
     * tree has it, the CSV not: no error is better than a tenfold one. */
    if (t->nrest) {
        mf_numbers(out, &c, t->rest_calls, -1, t->rest_bytes, -1, t->rest_estimated);
        fprintf(out, "… %zu more entries below %d%%\n", t->nrest, MF_SUMMARY_THRESHOLD);
    }
}

static void mf_sites_free(struct mf_sites *t)
{
    for (size_t i = 0; i < t->ntop; i++) {
        for (size_t k = 0; k < t->top[i].nlines; k++)
            free(t->top[i].lines[k].loc);
        free(t->top[i].lines);
        free(t->top[i].name);
        free(t->top[i].via);
    }
    free(t->top);
}

/* ---- running mf_print ---------------------------------------------------------------- */

struct mf_text {
    char *s;
    size_t len;
};

/* All of it, in memory: the default report without its tree is a screen or two. */
static bool mf_read_text(FILE *in, void *ctx)
{
    struct mf_text *t = ctx;
    FILE *f = open_memstream(&t->s, &t->len);
    if (!f)
        mf_die("out of memory");
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, f);
    if (fclose(f))
        mf_die("out of memory");
    return true;
}

/* Runs mf_print with args, its output read by `read`; false if either failed (said why).
 * Its messages go to stderr, unless `quiet` names what it was run for: a second run on the
 * same directory would repeat them. */
static bool mf_print_run(const char *path, char *const args[], const char *quiet,
                         bool (*read)(FILE *in, void *ctx), void *ctx)
{
    FILE *in;
    pid_t pid = mf_start_reader(path, args, quiet != NULL, &in);
    if (pid < 0)
        return false;
    bool ok = read(in, ctx);
    fclose(in);
    int st = mf_wait_child(pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return ok;
    if (WIFSIGNALED(st))
        mf_msg("%s %s", path, mf_signal_name(WTERMSIG(st)));
    else if (quiet)
        mf_msg("%s failed (exit status %d) to write %s", path, WEXITSTATUS(st), quiet);
    else
        mf_msg("%s failed (above)", path);
    return false;
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

/* ---- the summary --------------------------------------------------------------------- */

/* mf_print's report of the run without its tree, then the sites: its first paragraph (the
 * header, with the totals: left out when they are not the program's), the sites, and the
 * paragraphs after the tree's (what could not be symbolized). */
static void mf_report(const char *mf_print, const char *run_dir, uint64_t total, bool header)
{
    char *report_args[] = {(char *)MF_PRINT_NAME, (char *)"--threshold", (char *)"100",
                           (char *)"--", (char *)run_dir, NULL};
    struct mf_text report = {0};
    if (!mf_print_run(mf_print, report_args, NULL, mf_read_text, &report)) {
        free(report.s);
        return;
    }
    const char *tree = memmem(report.s, report.len, "\n\n", 2);
    const char *notes =
        tree ? memmem(tree + 2, report.len - (size_t)(tree + 2 - report.s), "\n\n", 2) : NULL;
    if (header)
        fwrite(report.s, 1, tree ? (size_t)(tree + 2 - report.s) : report.len, stderr);
    char *sites_args[] = {(char *)MF_PRINT_NAME, (char *)"--format", (char *)"csv",
                          (char *)"--by", (char *)"site", (char *)"--site-depth", (char *)"1",
                          (char *)"--", (char *)run_dir, NULL};
    struct mf_sites sites = {.total = total};
    if (mf_print_run(mf_print, sites_args, "the sites", mf_read_sites, &sites)) {
        mf_sites_choose(&sites);
        char *stacks_args[] = {(char *)MF_PRINT_NAME, (char *)"--format", (char *)"csv",
                               (char *)"--", (char *)run_dir, NULL};
        if (!sites.ntop ||
            mf_print_run(mf_print, stacks_args, "the stacks", mf_read_stacks, &sites))
            mf_print_sites(stderr, &sites);
    }
    mf_sites_free(&sites);
    if (notes)
        fwrite(notes + 1, 1, report.len - (size_t)(notes + 1 - report.s), stderr);
    free(report.s);
}

void mf_summary(struct mf_launch *l, int status)
{
    if (WIFSIGNALED(status))
        mf_msg("%s was killed by %s%s", l->argv[0], mf_signal_name(WTERMSIG(status)),
               WCOREDUMP(status) ? " (core dumped)" : "");
    struct mf_scan s;
    mf_scan_run(l->run_dir, &s);
    size_t n = s.dirs;
    char *room = s.room == EFBIG ? mf_xasprintf(": RLIMIT_FSIZE is below a profile file's size "
                                                "(%s)", strerror(s.room))
                 : s.room ? mf_xasprintf(": its file system has no room for another profile "
                                         "file (%s)", strerror(s.room))
                          : "";
    if (n == 0) {
        if (s.room)
            mf_msg("no process wrote a profile into %s%s", l->run_dir, room);
        else
            mf_msg("no process wrote a profile into %s (a statically linked or set-user-ID "
                   "program cannot be profiled by preloading)",
                   l->run_dir);
        return;
    }
    if (!s.images) {
        mf_msg("no data in %s (none from %s)%s; the program's count is not known", l->run_dir,
               s.missing, room);
        return;
    }
    /* mf_print's header would give the totals of what was written as the program's: left
     * out when they are not, and the first line says why. */
    bool partial = s.nmissing || s.room || s.nunflushed;
    char *unflushed =
        s.nunflushed
            ? mf_xasprintf("; %zu process image%s did not run %s exit (ended by a signal, exec "
                           "or _exit, or still running) while sampling: up to %u calls of each "
                           "of the %zu thread%s then running can be missing from %s totals (%s)",
                           s.nunflushed, s.nunflushed == 1 ? "" : "s",
                           s.nunflushed == 1 ? "its" : "their", MF_FLUSH_CALLS - 1, s.running,
                           s.running == 1 ? "" : "s", s.nunflushed == 1 ? "its" : "their",
                           s.unflushed)
            : "";
    char *missing = s.nmissing ? mf_xasprintf(", incomplete (no data from %s)", s.missing)
                               : s.room ? ", perhaps incomplete" : "";
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
    mf_report(mf_print, l->run_dir, s.calls, !partial);
    fflush(stderr);
    char *const quoted_args[] = {l->run_dir, NULL};
    char *quoted = mf_shell_quote(quoted_args);
    mf_msg("the sites' callers: %s %s%s", mf_print_command(mf_print), quoted,
           n > 1 ? " (a report per program: add --by program)" : "");
    free(quoted);
}
