/* --live reports (live_read.c made the view): the tree's header for the live heap, the
 * lifetime table that follows the tree (per allocation site: live allocations and bytes
 * with their error, the freed ones, the temporary share, median lifetimes), and the CSV of
 * the same per stack. Medians come from log2 buckets: a lifetime in bucket b >= 1 lies in
 * 2^(b-1) .. 2^b - 1, and the median is reported as its bucket's range. */
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "process_life.h"
#include "report.h"

/* Per site (or per stack for CSV): what the lifetime table shows. */
struct mf_live_row {
    uint32_t name, via, stack; /* stack: the first model stack of it (frames for CSV) */
    uint64_t alive, bytes, var, samples, alloc_calls;
    double bytes_var;
    bool estimated, outside_main;
    struct mf_lifetimes life;
};

static void mf_life_add(struct mf_lifetimes *to, const struct mf_lifetimes *x)
{
    to->freed += x->freed;
    to->freed_samples += x->freed_samples;
    to->freed_bytes += x->freed_bytes;
    to->temporary += x->temporary;
    to->same_thread += x->same_thread;
    for (uint32_t b = 0; b < MF_LIVE_CALL_BUCKETS; b++)
        to->life_calls[b] += x->life_calls[b];
    for (uint32_t b = 0; b < MF_LIVE_NS_BUCKETS; b++)
        to->life_ns[b] += x->life_ns[b];
}

/* The median's bucket of a histogram, or -1 if empty. */
static int mf_median_bucket(const uint64_t *h, uint32_t n)
{
    uint64_t total = 0, seen = 0;
    for (uint32_t b = 0; b < n; b++)
        total += h[b];
    if (!total)
        return -1;
    for (uint32_t b = 0; b < n; b++) {
        seen += h[b];
        if (2 * seen >= total)
            return (int)b;
    }
    return (int)n - 1;
}

/* The largest lifetime of bucket b (its range's top), as the CSV gives it. */
static uint64_t mf_bucket_top(int b)
{
    return b <= 0 ? 0 : b >= 64 ? UINT64_MAX : (1ull << b) - 1;
}

static double mf_temporary_pct(const struct mf_lifetimes *l)
{
    return l->freed ? 100.0 * (double)l->temporary / (double)l->freed : 0.0;
}

static void mf_fmt_calls_bucket(char *buf, size_t size, int b)
{
    if (b < 0)
        snprintf(buf, size, "-");
    else if (b == 0)
        snprintf(buf, size, "0");
    else if (b == 1)
        snprintf(buf, size, "1");
    else
        snprintf(buf, size, "%llu-%llu", 1ull << (b - 1), (unsigned long long)mf_bucket_top(b));
}

static void mf_fmt_ns(char *buf, size_t size, double ns)
{
    if (ns < 1e3)
        snprintf(buf, size, "%.0f ns", ns);
    else if (ns < 1e6)
        snprintf(buf, size, "%.3g us", ns / 1e3);
    else if (ns < 1e9)
        snprintf(buf, size, "%.3g ms", ns / 1e6);
    else
        snprintf(buf, size, "%.3g s", ns / 1e9);
}

static void mf_fmt_ns_bucket(char *buf, size_t size, int b)
{
    if (b < 0) {
        snprintf(buf, size, "-");
        return;
    }
    char hi[32];
    mf_fmt_ns(hi, sizeof hi, (double)mf_bucket_top(b) + 1);
    snprintf(buf, size, "<%s", hi);
}

/* Made outside main: before it (the loader, constructors: __libc_start_main runs them
 * before __libc_start_call_main calls main) or after it (the exit handlers, atexit's and
 * the destructors', which __run_exit_handlers runs, and _dl_fini). Told from the stack's
 * full frames (start-up frames included): inside main is under __libc_start_call_main, main
 * or a thread's start, and not under the exit handlers. main's own name is not needed: a
 * main that tail-calls its work (Debian's python3, into Py_BytesMain) or has no symbol
 * leaves __libc_start_call_main on the stack. */
#define MF_INSIDE_NAMES "__libc_start_call_main", "main", "start_thread", "clone", "clone3", \
                        "__clone", "thread_start"
#define MF_AFTER_NAMES "__run_exit_handlers", "_dl_fini"
static bool mf_outside_main(const struct mf_model *m, const struct mf_stack *s)
{
    static const char *const inside_names[] = {MF_INSIDE_NAMES}, *const after_names[] = {MF_AFTER_NAMES};
    enum { NI = sizeof inside_names / sizeof *inside_names, NA = sizeof after_names / sizeof *after_names };
    static uint32_t inside[NI], after[NA];
    if (!inside[0]) {
        for (int i = 0; i < NI; i++)
            inside[i] = mf_intern(inside_names[i]);
        for (int i = 0; i < NA; i++)
            after[i] = mf_intern(after_names[i]);
    }
    if (s->flags & (MF_ENTRY_TRUNCATED | MF_STACK_NOT_PROFILED) || !s->depth)
        return false;
    bool in = false;
    for (uint32_t i = 0; i < s->depth; i++) {
        const struct mf_location *l = &m->locs[m->stack_locs[s->first + i]];
        for (uint32_t j = 0; j < l->n; j++) {
            uint32_t name = m->frames[l->first + j].name;
            for (int k = 0; k < NA; k++)
                if (name == after[k])
                    return true;
            for (int k = 0; k < NI && !in; k++)
                in = name == inside[k];
        }
    }
    return !in;
}

static const struct mf_lifetimes mf_no_life;

static const struct mf_lifetimes *mf_stack_life(const struct mf_model *m, const struct mf_stack *s)
{
    return s->raw != UINT32_MAX && m->p->lifetimes ? &m->p->lifetimes[s->raw] : &mf_no_life;
}

static void mf_row_add(struct mf_live_row *r, const struct mf_model *m, uint32_t si)
{
    const struct mf_stack *s = &m->stacks[si];
    r->alive += s->calls;
    r->bytes += s->bytes;
    r->var += s->var;
    r->bytes_var += s->bytes_var;
    r->samples += s->samples;
    r->estimated |= s->estimated;
    if (s->raw != UINT32_MAX)
        r->alloc_calls += m->p->stacks[s->raw].calls;
    mf_life_add(&r->life, mf_stack_life(m, s));
    if (s->calls && mf_outside_main(m, s))
        r->outside_main = true;
}

static bool mf_sort_temporary;

static int mf_row_cmp(const void *a, const void *b)
{
    const struct mf_live_row *x = a, *y = b;
    if (mf_sort_temporary) {
        double tx = mf_temporary_pct(&x->life), ty = mf_temporary_pct(&y->life);
        if (tx != ty)
            return tx > ty ? -1 : 1;
        if (x->life.freed != y->life.freed)
            return x->life.freed > y->life.freed ? -1 : 1;
    }
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->life.freed != y->life.freed)
        return x->life.freed > y->life.freed ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The interned text of s's shown frames and via: stacks merged by function names, as the
 * CSV merges them. */
static uint32_t mf_stack_text(const struct mf_frames *fr, uint32_t via, char **buf, size_t *cap)
{
    size_t n = 0;
    for (uint32_t k = 0; k <= fr->n; k++) {
        const char *s = k < fr->n ? mf_str(fr->v[k].name) : mf_str(via);
        size_t len = strlen(s);
        if (n + len + 2 > *cap) {
            *cap = (n + len + 2) * 2;
            *buf = mf_xrealloc(*buf, *cap);
        }
        memcpy(*buf + n, s, len);
        n += len;
        (*buf)[n++] = k < fr->n ? '\n' : '\0';
    }
    return mf_intern(*buf);
}

/* Rows per site (by_stack false) or per stack merged by function names, with something
 * alive or freed. */
static struct mf_live_row *mf_live_rows(const struct mf_model *m, bool by_stack, uint32_t *n)
{
    struct mf_live_row *rows = NULL;
    uint32_t nrows = 0, cap = 0;
    struct mf_map sites = {0};
    struct mf_frames fr = {0};
    char *text = NULL;
    size_t text_cap = 0;
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        if (!s->calls && !mf_stack_life(m, s)->freed)
            continue;
        mf_model_frames(m, s, &fr);
        uint32_t name = fr.n ? fr.v[0].name : mf_intern(MF_NAME_NO_STACK), idx;
        uint64_t key = by_stack ? mf_stack_text(&fr, s->via, &text, &text_cap)
                                : ((uint64_t)name << 32) | s->via;
        bool added;
        idx = mf_map_put(&sites, key, NULL, NULL, nrows, &added);
        if (idx == nrows) {
            MF_GROW(rows, nrows, cap);
            memset(&rows[nrows], 0, sizeof rows[nrows]);
            rows[nrows].name = name;
            rows[nrows].via = s->via;
            rows[nrows].stack = i;
            nrows++;
        }
        mf_row_add(&rows[idx], m, i);
    }
    free(fr.v);
    free(text);
    mf_map_free(&sites);
    if (nrows > 1) /* rows is NULL when there are none */
        qsort(rows, nrows, sizeof *rows, mf_row_cmp);
    *n = nrows;
    return rows;
}

void mf_report_live_header(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    const struct mf_profile *p = m->p;
    char a[40], b[40];
    bool ended = mf_all_ended(p);
    fprintf(out, "malloc_freq live heap: %s%s\n", mf_esc(o->dirs[0]),
            o->ndirs > 1 ? " and more" : "");
    fputs("  program    ", out);
    for (uint32_t i = 0; i < p->nprocs && i < 4; i++)
        fprintf(out, "%s%s (pid %u, %s)", i ? ", " : "",
                p->procs[i].has_file && p->procs[i].exe[0] ? mf_esc(p->procs[i].exe) : "?",
                p->procs[i].pid, mf_life_word(mf_life(p, i)));
    fputs(p->nprocs > 4 ? ", …\n" : "\n", out);
    fprintf(out, "  %-10s %s%s allocations, %s%s\n", ended ? "at exit" : "alive",
            p->procs[0].sampled ? "~" : "", mf_fmt_count(a, m->view_calls),
            p->procs[0].sampled ? "~" : "", mf_fmt_bytes(b, (double)m->view_bytes));
    fprintf(out, "  what       %s\n",
            ended ? "still allocated when the process ended (leaks, and what is left for the OS "
                    "to take back: \"outside main\" in the table below)"
                  : "a snapshot of the allocations alive when read");
    fprintf(out, "  recorded   %s sampled allocations alive in %u live heap file%s", mf_fmt_count(a, p->live_records),
            p->live_files, p->live_files == 1 ? "" : "s");
    if (p->live_dropped) /* they may have been freed since: at most that many are missing */
        fprintf(out, "; %s allocations found the table full and were not recorded (up to that "
                     "many alive may be missing)",
                mf_fmt_count(b, p->live_dropped));
    if (p->live_stats_dropped) {
        char c[40];
        fprintf(out, "; the lifetimes of %s frees are not counted (their stacks found the "
                     "lifetime table full: more than %s stacks freed)",
                mf_fmt_count(b, p->live_stats_dropped), mf_fmt_count(c, MF_LIVE_STATS_CAPACITY));
    }
    if (p->live_unmatched)
        fprintf(out, "; %s with a stack not read", mf_fmt_count(b, p->live_unmatched));
    fputc('\n', out);
    if (p->live_gone)
        fprintf(out, "  left out   %s%s allocations still recorded for %u process image%s that "
                     "ended (exited, exec'd or killed): their heap went with them\n",
                p->procs[0].sampled ? "~" : "", mf_fmt_count(a, p->live_gone),
                p->live_gone_images, p->live_gone_images == 1 ? "" : "s");
}

/* The lifetime table, after the tree. */
void mf_report_lifetimes(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    bool sort_temporary = o->sort_temporary, narrow = mf_narrow(o);
    mf_sort_temporary = sort_temporary;
    uint32_t n;
    struct mf_live_row *rows = mf_live_rows(m, false, &n);
    fprintf(out, "\nLifetimes by allocation site (sorted by %s): alive and freed are the sampled "
                 "allocations' weights;\ntemporary: freed before the allocating thread's next "
                 "allocation call; life: the median, in that\nthread's allocation calls and in "
                 "time\n",
            sort_temporary ? "temporary share" : "live bytes");
    /* Narrow: the numbers compact, under the site's own line (the full row's numbers take
     * 98 columns). */
    int wn = narrow ? 6 : 14, we = narrow ? 6 : 8, wb = narrow ? 10 : 12, wf = narrow ? 6 : 12;
    fprintf(out, "%*s %*s %*s %*s %*s %12s %12s %10s%s\n", wn, "alive", we, "±error", wb, "bytes",
            we, "±error", wf, "freed", "temporary", "life calls", "life time", narrow ? "" : "  site");
    for (uint32_t i = 0; i < n; i++) {
        const struct mf_live_row *r = &rows[i];
        char a[40], b[40], c[40], ea[16] = "", eb[16] = "", lc[48], lt[48], tmp[16];
        if (r->estimated && r->alive) { /* as the tree's: at least one sample's error */
            snprintf(ea, sizeof ea, "±%.0f%%",
                     100.0 * mf_calls_se(r->alive, r->var, m->sample_interval) / (double)r->alive);
            if (r->bytes)
                snprintf(eb, sizeof eb, "±%.0f%%",
                         100.0 * mf_bytes_se(r->alive, r->bytes, r->bytes_var, m->sample_interval) /
                             (double)r->bytes);
        }
        snprintf(tmp, sizeof tmp, r->life.freed ? "%.1f %%" : "-", mf_temporary_pct(&r->life));
        mf_fmt_calls_bucket(lc, sizeof lc, mf_median_bucket(r->life.life_calls, MF_LIVE_CALL_BUCKETS));
        mf_fmt_ns_bucket(lt, sizeof lt, mf_median_bucket(r->life.life_ns, MF_LIVE_NS_BUCKETS));
        char alive[48];
        snprintf(alive, sizeof alive, "%s%s", r->estimated ? "~" : "",
                 narrow ? mf_fmt_compact(a, r->alive) : mf_fmt_count(a, r->alive));
        if (narrow)
            fprintf(out, "%s%s%s%s\n", mf_esc(mf_str(r->name)), r->via ? " via " : "",
                    r->via ? mf_esc(mf_str(r->via)) : "", r->outside_main ? "  [outside main]" : "");
        fprintf(out, "%*s %*s %*s %*s %*s %12s %12s %10s", wn, alive, we, ea, wb,
                mf_fmt_bytes(b, (double)r->bytes), we, eb, wf,
                narrow ? mf_fmt_compact(c, r->life.freed) : mf_fmt_count(c, r->life.freed), tmp,
                lc, lt);
        if (!narrow)
            fprintf(out, "  %s%s%s%s", mf_esc(mf_str(r->name)), r->via ? " via " : "",
                    r->via ? mf_esc(mf_str(r->via)) : "", r->outside_main ? "  [outside main]" : "");
        fputc('\n', out);
    }
    if (!n)
        fputs("no sampled allocation alive or freed\n", out);
    free(rows);
}

/* --live --format csv: the lifetimes table's numbers per stack. */
bool mf_report_live_csv(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    mf_sort_temporary = o->sort_temporary;
    uint32_t n;
    struct mf_live_row *rows = mf_live_rows(m, true, &n);
    fputs("alive,alive_bytes,alive_variance,samples,freed,temporary_pct,median_life_calls,"
          "median_life_ns,outside_main,alloc_calls,stack,via\n", out);
    struct mf_frames fr = {0};
    uint32_t *names = NULL;
    size_t names_cap = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct mf_live_row *r = &rows[i];
        /* lifetimes: empty where nothing was freed (or, in calls, freed by this thread) */
        char tmp[32] = "", lc[32] = "", lt[32] = "";
        int bc = mf_median_bucket(r->life.life_calls, MF_LIVE_CALL_BUCKETS);
        int bt = mf_median_bucket(r->life.life_ns, MF_LIVE_NS_BUCKETS);
        if (r->life.freed)
            snprintf(tmp, sizeof tmp, "%.2f", mf_temporary_pct(&r->life));
        if (bc >= 0)
            snprintf(lc, sizeof lc, "%llu", (unsigned long long)mf_bucket_top(bc));
        if (bt >= 0)
            snprintf(lt, sizeof lt, "%llu", (unsigned long long)mf_bucket_top(bt));
        double se = r->estimated ? mf_calls_se(r->alive, r->var, m->sample_interval) : 0;
        uint64_t var = r->estimated ? (uint64_t)(se * se + 0.5) : r->var; /* the tree's */
        fprintf(out, "%llu,%llu,%llu,%llu,%llu,%s,%s,%s,%d,%llu,", (unsigned long long)r->alive,
                (unsigned long long)r->bytes, (unsigned long long)var,
                (unsigned long long)r->samples, (unsigned long long)r->life.freed, tmp, lc, lt,
                r->outside_main, (unsigned long long)r->alloc_calls);
        mf_model_frames(m, &m->stacks[r->stack], &fr);
        if (fr.n > names_cap) {
            names_cap = fr.n;
            names = mf_xrealloc(names, names_cap * sizeof *names);
        }
        for (uint32_t k = 0; k < fr.n; k++)
            names[k] = fr.v[k].name;
        mf_csv_names_field(out, names, fr.n); /* encoded as the CSV's stack column */
        fputc(',', out);
        mf_csv_name_field(out, r->via);
        fputc('\n', out);
    }
    free(names);
    free(fr.v);
    free(rows);
    /* What the live files could not record, as rows a spreadsheet sums with the others:
     * allocations never recorded (alloc_calls; how many are alive is not known) and frees
     * whose lifetimes were not counted (freed: their allocations are gone). */
    const struct mf_profile *p = m->p;
    if (p->live_dropped) {
        fprintf(out, ",,,0,,,,,,%llu,", (unsigned long long)p->live_dropped);
        mf_csv_name_field(out, mf_intern(MF_NAME_LIVE_NOT_RECORDED));
        fputs(",\n", out);
    }
    if (p->live_stats_dropped) {
        fprintf(out, "0,0,0,0,%llu,,,,,,", (unsigned long long)p->live_stats_dropped);
        mf_csv_name_field(out, mf_intern(MF_NAME_LIFETIMES_NOT_RECORDED));
        fputs(",\n", out);
    }
    return false;
}

