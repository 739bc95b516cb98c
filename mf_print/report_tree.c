/* The default report: exact totals, then the caller tree with allocation sites first.
 *
 * Every line: calls (with "~" and the relative error when estimated), percent of ALL calls
 * (the exact total over every thread, process and directory), bytes, then the tree. A node's
 * calls are the sum of its children's (its callers') plus the calls of stacks that end at it
 * (no frame further out, e.g. at _start or a thread's start routine); stacks deeper than the
 * recorded depth end in a "[deeper frames not recorded]" child, so nothing is hidden. Children
 * under the threshold are folded into one "… N more below T%" line: shown + folded = parent
 * - ended-here, exactly, for exact profiles. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

static const char *const mf_fn_names[] = {MF_FN_NAMES};

/* Newton's method: the Makefile links no libm. */
static double mf_sqrt(double x)
{
    double r = x > 1 ? x / 2 : 1;
    for (int i = 0; i < 64 && x > 0; i++)
        r = (r + x / r) / 2;
    return x > 0 ? r : 0;
}

/* The relative standard error of an estimate, in percent. A sample of weight w adds w(w-1)
 * to the variance (the writer keeps the sum of w^2 per stack: var = sum w^2 - calls), so
 * samples of weight 1 (the exact stretch) add none; for a run sampled 1 in N throughout
 * this is 100/sqrt(samples), as DESIGN §2 says. With no weighted sample yet, calls after
 * the exact stretch may still have been missed: count one sample at the interval. */
static double mf_rel_error_pct(uint64_t calls, uint64_t var, uint64_t interval)
{
    if (!calls)
        return 0;
    double v = (double)var, n = (double)interval;
    if (interval > 1 && v < n * (n - 1))
        v = n * (n - 1);
    return 100.0 * mf_sqrt(v) / (double)calls;
}

/* The same for bytes: a sample of weight w and size s adds w(w-1)s^2 (the writer keeps that
 * sum per stack); with no weighted sample yet, one sample at the interval of the mean size. */
static double mf_bytes_error_pct(uint64_t calls, uint64_t bytes, double var, uint64_t interval)
{
    if (!bytes)
        return 0;
    double n = (double)interval, mean = calls ? (double)bytes / (double)calls : 0;
    if (interval > 1 && var < n * (n - 1) * mean * mean)
        var = n * (n - 1) * mean * mean;
    return 100.0 * mf_sqrt(var) / (double)bytes;
}

/* "±4.1%", "±12%", "±>999%" */
static void mf_fmt_error(char *buf, size_t size, double e)
{
    if (e < 999.5)
        snprintf(buf, size, "±%.*f%%", e < 9.95 ? 1 : 0, e);
    else
        snprintf(buf, size, "±>999%%");
}

struct mf_tree_ctx {
    FILE *out;
    const struct mf_tree *t;
    double threshold;
    uint64_t total;  /* exact calls: the 100 % */
    uint64_t interval; /* the sample interval behind the estimates */
    int calls_width; /* widest calls column text */
    bool err_column; /* some number is an estimate */
    char *prefix;    /* tree glyphs of the current line's ancestors */
    size_t prefix_len, prefix_cap;
};

/* Display width of UTF-8 text: bytes that do not continue a character. */
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

static void mf_line(struct mf_tree_ctx *c, uint64_t calls, uint64_t var, uint64_t bytes,
                    double bytes_var, bool estimated, const char *glyph, const char *text,
                    const struct mf_loc *loc)
{
    char num[40], calls_s[48], err[32] = "", bytes_err[32] = "", bytes_s[32], pct[32];
    snprintf(calls_s, sizeof calls_s, "%s%s", estimated ? "~" : "", mf_fmt_count(num, calls));
    if (estimated) {
        mf_fmt_error(err, sizeof err, mf_rel_error_pct(calls, var, c->interval));
        mf_fmt_error(bytes_err, sizeof bytes_err,
                     mf_bytes_error_pct(calls, bytes, bytes_var, c->interval));
    }
    snprintf(pct, sizeof pct, "%.2f%%", c->total ? (double)calls * 100.0 / (double)c->total : 0.0);
    mf_fmt_bytes(bytes_s, (double)bytes);
    mf_pad(c->out, c->calls_width - mf_width(calls_s));
    fputs(calls_s, c->out);
    if (c->err_column) {
        fputc(' ', c->out);
        fputs(err, c->out);
        mf_pad(c->out, 7 - mf_width(err));
    }
    fprintf(c->out, " %8s %10s", pct, bytes_s);
    if (c->err_column) { /* always 7 wide: the tree's glyphs follow */
        fputc(' ', c->out);
        fputs(bytes_err, c->out);
        mf_pad(c->out, 7 - mf_width(bytes_err));
    }
    fprintf(c->out, "  %.*s%s%s", (int)c->prefix_len, c->prefix, glyph, text);
    if (loc)
        fprintf(c->out, " (%s:%u)", mf_basename(mf_str(loc->file)), loc->line);
    fputc('\n', c->out);
}

static void mf_prefix_push(struct mf_tree_ctx *c, const char *s)
{
    size_t len = strlen(s);
    if (c->prefix_len + len > c->prefix_cap) {
        c->prefix_cap = (c->prefix_len + len) * 2;
        c->prefix = mf_xrealloc(c->prefix, c->prefix_cap);
    }
    memcpy(c->prefix + c->prefix_len, s, len);
    c->prefix_len += len;
}

static bool mf_below(const struct mf_tree_ctx *c, uint64_t calls)
{
    return c->total && (double)calls * 100.0 / (double)c->total < c->threshold;
}

/* Prints the children of node; top-level entries (the root's children) get no glyph. */
static void mf_children(struct mf_tree_ctx *c, uint32_t node)
{
    const struct mf_node *n = &c->t->nodes[node];
    uint32_t shown = 0, folded = 0;
    uint64_t f_calls = 0, f_bytes = 0, f_var = 0;
    double f_bytes_var = 0;
    bool f_est = false;
    for (uint32_t i = 0; i < n->nchildren; i++) { /* sorted: the small ones are at the end */
        const struct mf_node *x = &c->t->nodes[n->children[i]];
        if (!mf_below(c, x->calls)) {
            shown++;
            continue;
        }
        folded++;
        f_calls += x->calls;
        f_bytes += x->bytes;
        f_var += x->var;
        f_bytes_var += x->bytes_var;
        f_est |= x->estimated;
    }
    bool top = node == 0;
    uint32_t lines = shown + (folded ? 1 : 0);
    for (uint32_t i = 0; i < n->nchildren; i++) {
        const struct mf_node *x = &c->t->nodes[n->children[i]];
        if (mf_below(c, x->calls))
            continue;
        bool last = --lines == 0;
        /* This recursion is as deep as the deepest stack: keep its frame small. */
        mf_line(c, x->calls, x->var, x->bytes, x->bytes_var, x->estimated,
                top ? "" : last ? "└─ " : "├─ ", mf_str(x->name), mf_node_loc(x));
        size_t saved = c->prefix_len;
        if (!top)
            mf_prefix_push(c, last ? "   " : "│  ");
        mf_children(c, n->children[i]);
        c->prefix_len = saved;
    }
    if (folded) {
        char text[64];
        snprintf(text, sizeof text, "… %u %s below %g%%", folded, top ? "more entries" : "more",
                 c->threshold);
        mf_line(c, f_calls, f_var, f_bytes, f_bytes_var, f_est, top ? "" : "└─ ", text, NULL);
    }
}

static void mf_fmt_duration(char *buf, size_t size, uint64_t ns)
{
    uint64_t ms = ns / 1000000;
    if (ms >= 60000)
        snprintf(buf, size, "%llu min %llu.%llu s", (unsigned long long)(ms / 60000),
                 (unsigned long long)(ms % 60000 / 1000), (unsigned long long)(ms % 1000 / 100));
    else if (ms >= 1000)
        snprintf(buf, size, "%.2f s", (double)ns / 1e9);
    else
        snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
}

/* "exact: every call recorded", "first 20,000 calls exact, then 1 in 1,000 sampled", or for
 * the default mode "first 20,000 calls exact (5 ms at most), then adaptive (samples take
 * <= 0.3% of time)". */
static void mf_print_sampling(FILE *out, const struct mf_profile *p, const struct mf_tree *t)
{
    uint64_t seen[8][3];
    int nseen = 0;
    bool any_file = false;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        if (!pr->has_file)
            continue;
        any_file = true;
        uint64_t iv = pr->sample_interval == 1 ? 1 : pr->sample_interval;
        uint64_t ex = iv == 1 ? 0 : pr->exact_calls;
        uint64_t ppm = iv == 0 ? pr->cost_share_ppm : 0;
        int k = 0;
        while (k < nseen && !(seen[k][0] == iv && seen[k][1] == ex && seen[k][2] == ppm))
            k++;
        if (k == nseen && nseen < 8) {
            seen[nseen][0] = iv;
            seen[nseen][1] = ex;
            seen[nseen++][2] = ppm;
        }
    }
    fputs("  sampling   ", out);
    if (!any_file)
        fputs("unknown (no process file)", out);
    for (int k = 0; k < nseen; k++) {
        char a[32], b[32];
        if (k)
            fputs("; ", out);
        if (seen[k][0] == 1)
            fputs("exact: every call recorded", out);
        else if (seen[k][0] == 0)
            fprintf(out, "first %s calls exact (%g ms at most), then adaptive (samples take"
                    " <= %g%% of time)", mf_fmt_count(a, seen[k][1]), MF_EXACT_NS_MAX / 1e6,
                    (double)seen[k][2] / 1e4);
        else if (seen[k][1])
            fprintf(out, "first %s calls exact, then 1 in %s sampled", mf_fmt_count(a, seen[k][1]),
                    mf_fmt_count(b, seen[k][0]));
        else
            fprintf(out, "1 in %s calls sampled", mf_fmt_count(b, seen[k][0]));
    }
    if (t->estimated)
        fputs("\n             ~ marks estimates, ± their relative standard error", out);
    else if (nseen > 1 || (nseen == 1 && seen[0][0] != 1))
        fputs("\n             every count below is exact (every call was recorded)",
              out);
    fputc('\n', out);
}

static const char *mf_exe(const struct mf_process *pr)
{
    return pr->has_file && pr->exe[0] ? pr->exe : "?";
}

static void mf_print_header(FILE *out, const struct mf_profile *p, const struct mf_tree *t,
                            const struct mf_report_options *o)
{
    char a[40], b[40], c[40];
    fprintf(out, "malloc_freq report: %s", o->dirs[0]);
    if (o->ndirs > 1)
        fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
    fputc('\n', out);

    /* The programs, each once. */
    fputs("  program    ", out);
    int shown = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        const char *exe = mf_exe(pr);
        bool dup = false;
        for (uint32_t j = 0; j < i && !dup; j++)
            dup = strcmp(exe, mf_exe(&p->procs[j])) == 0;
        if (dup)
            continue;
        if (shown == 4) {
            fputs(", …", out);
            break;
        }
        fprintf(out, "%s%s", shown ? ", " : "", exe);
        shown++;
    }
    if (p->nprocs == 1)
        fprintf(out, " (pid %u)", p->procs[0].pid);
    fputc('\n', out);

    fprintf(out, "  calls      %s (exact), %s requested\n",
            mf_fmt_count(a, mf_profile_total_calls(p)),
            mf_fmt_bytes(b, (double)mf_profile_total_bytes(p)));
    fputs("  functions ", out);
    const char *sep = " ";
    for (int f = 0; f < MF_FN_COUNT; f++) {
        if (!p->totals.calls[f])
            continue;
        char name[32];
        if (f < MF_FN_NAMED)
            snprintf(name, sizeof name, "%s", mf_fn_names[f]);
        else
            snprintf(name, sizeof name, "function #%d", f);
        fprintf(out, "%s%s %s (%s)", sep, name, mf_fmt_count(a, p->totals.calls[f]),
                mf_fmt_bytes(c, (double)p->totals.bytes[f]));
        sep = ", ";
    }
    fputs(*sep == ' ' ? " none\n" : "\n", out);
    char wall[64];
    mf_fmt_duration(wall, sizeof wall, mf_profile_wall_ns(p));
    uint32_t npids = 0; /* an exec'd image keeps its pid: count both */
    for (uint32_t i = 0; i < p->nprocs; i++) {
        uint32_t j = 0;
        while (j < i && p->procs[j].pid != p->procs[i].pid)
            j++;
        npids += j == i;
    }
    fprintf(out, "  threads    %u in %u process%s", p->nthreads, npids, npids == 1 ? "" : "es");
    if (p->nprocs != npids)
        fprintf(out, " (%u process images: exec keeps the pid)", p->nprocs);
    fprintf(out, ", wall time %s\n", wall);
    mf_print_sampling(out, p, t);
    fprintf(out, "  stacks     %s distinct, %s after %smerging by function\n",
            mf_fmt_count(a, t->raw_stacks), mf_fmt_count(b, t->merged_stacks),
            o->trim ? "trimming allocator frames and " : "");
}

void mf_report_tree(FILE *out, const struct mf_profile *p, const struct mf_tree *t,
                    const struct mf_report_options *o)
{
    struct mf_tree_ctx c = {.out = out, .t = t, .threshold = o->threshold};
    c.total = mf_profile_total_calls(p);
    mf_print_header(out, p, t, o);
    fputc('\n', out);
    if (t->nodes[0].nchildren == 0) {
        fputs("no stacks recorded\n", out);
        return;
    }
    char num[40];
    uint64_t widest = c.total > t->nodes[0].calls ? c.total : t->nodes[0].calls;
    c.calls_width = (int)strlen(mf_fmt_count(num, widest)) + (t->estimated ? 1 : 0);
    if (c.calls_width < 5)
        c.calls_width = 5;
    c.err_column = t->estimated;
    c.interval = t->sample_interval;
    mf_pad(out, c.calls_width - 5);
    fputs("calls", out);
    if (c.err_column)
        fputs(" ±error", out);
    fprintf(out, " %8s %10s%s  %s\n", "%", "bytes", c.err_column ? " ±error" : "",
            "allocation site, then its callers");
    mf_children(&c, 0);
    free(c.prefix);
}
