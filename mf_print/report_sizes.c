/* --sizes: what sizes the program asked for.
 *
 * Without --site: the exact histogram every thread keeps (every call counted by size class,
 * four classes per doubling, mf_format.h), merged over threads, processes and directories.
 * With --site NAME: the sizes of the calls made at one allocation site (the innermost frame
 * a report shows, after trimming), estimated from its stacks' samples, one class per
 * doubling: each sample adds its weight to its size's class, so a class's calls are
 * estimated like a stack's, and their error is taken from the stack's samples (a class
 * gets the share of the stack's variance that its weight is of the stack's calls: exact
 * when every sample of the stack had the same weight, as at a fixed MALLOC_FREQ_SAMPLE).
 *
 * Text: a table with a bar per class (its share of the calls); CSV: one row per class;
 * JSON: one object. Only classes with calls are listed. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

#define MF_BAR_WIDTH 30

/* Newton's method: the Makefile links no libm. */
static double mf_sqrt(double x)
{
    double r = x > 1 ? x / 2 : 1;
    for (int i = 0; i < 64 && x > 0; i++)
        r = (r + x / r) / 2;
    return x > 0 ? r : 0;
}

/* One row of either table: a size range and what fell into it. */
struct mf_size_row {
    uint64_t lo, hi; /* sizes lo .. hi, both included */
    uint64_t calls, bytes;
    double var;     /* the variance of calls, estimated (site rows) */
    bool has_bytes; /* bytes are known (the exact histogram) */
    bool estimated; /* calls are an estimate */
};

struct mf_size_table {
    struct mf_size_row rows[MF_SIZE_CLASSES];
    uint32_t n;
    uint64_t calls, bytes; /* the totals over the rows */
    bool estimated;
};

/* The exact histogram's classes with calls. */
static void mf_exact_rows(const struct mf_profile *p, struct mf_size_table *t)
{
    memset(t, 0, sizeof *t);
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) {
        if (!p->sizes.calls[c])
            continue;
        struct mf_size_row *r = &t->rows[t->n++];
        r->lo = mf_size_class_lo(c);
        /* Sizes 1, 2 and 3 have a class each; the next class's start ends the others. */
        uint64_t next = c + 1 < MF_SIZE_CLASSES ? mf_size_class_lo(c + 1) : 0;
        r->hi = c + 1 == MF_SIZE_CLASSES ? UINT64_MAX : next > r->lo ? next - 1 : r->lo;
        r->calls = p->sizes.calls[c];
        r->bytes = p->sizes.bytes[c];
        r->has_bytes = true;
        t->calls += r->calls;
        t->bytes += r->bytes;
    }
}

/* The site's name as reports show it: the stack's innermost frame after trimming. */
static bool mf_stack_at_site(const struct mf_model *m, const struct mf_stack *s, uint32_t site,
                             struct mf_frames *fr)
{
    mf_model_frames(m, s, fr);
    return fr->n && fr->v[0].name == site;
}

/* The site's sampled sizes, by doubling; false if no stack has the site. */
static bool mf_site_rows(const struct mf_model *m, const char *name, struct mf_size_table *t,
                         uint32_t *nstacks)
{
    memset(t, 0, sizeof *t);
    uint64_t calls[MF_SITE_CLASSES] = {0};
    double var[MF_SITE_CLASSES] = {0};
    bool estimated[MF_SITE_CLASSES] = {0};
    uint32_t site = mf_intern(name);
    struct mf_frames fr = {0};
    *nstacks = 0;
    double interval = (double)m->sample_interval;
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        if (s->raw == UINT32_MAX || !mf_stack_at_site(m, s, site, &fr))
            continue;
        const struct mf_raw_stack *rs = &m->p->stacks[s->raw];
        ++*nstacks;
        t->estimated |= s->estimated;
        /* As the tree's ±: with no weighted sample yet, one sample at the interval. The
         * variance is the sampled calls': classes wholly above the large threshold have
         * none (all their calls were recorded). */
        double v = s->estimated ? (double)s->var : 0;
        if (s->estimated && m->sample_interval > 1 && v < interval * (interval - 1))
            v = interval * (interval - 1);
        uint64_t large = m->p->procs[s->process].large_bytes;
        uint64_t sampled = s->calls > rs->large ? s->calls - rs->large : 0;
        for (uint32_t c = 0; c < MF_SITE_CLASSES; c++) {
            if (!rs->site_sizes[c])
                continue;
            calls[c] += rs->site_sizes[c];
            bool all_large = large && c && ((uint64_t)1 << (c - 1)) >= large;
            if (sampled && !all_large)
                var[c] += v * (double)rs->site_sizes[c] / (double)sampled;
            estimated[c] |= s->estimated && !all_large;
        }
        t->bytes += s->bytes;
    }
    free(fr.v);
    for (uint32_t c = 0; c < MF_SITE_CLASSES; c++) {
        if (!calls[c])
            continue;
        struct mf_size_row *r = &t->rows[t->n++];
        r->lo = c ? (uint64_t)1 << (c - 1) : 0;
        r->hi = c + 1 == MF_SITE_CLASSES ? UINT64_MAX : c ? ((uint64_t)1 << c) - 1 : 0;
        r->calls = calls[c];
        r->var = var[c];
        r->estimated = estimated[c];
        t->calls += calls[c];
    }
    return *nstacks > 0;
}

/* "±4.1%", "±12%", "±>999%", as the tree shows errors. */
static const char *mf_fmt_error(char *buf, size_t size, double stderr_, uint64_t of)
{
    double e = of ? 100.0 * stderr_ / (double)of : 0;
    if (e < 999.5)
        snprintf(buf, size, "±%.*f%%", e < 9.95 ? 1 : 0, e);
    else
        snprintf(buf, size, "±>999%%");
    return buf;
}

static void mf_fmt_range(char *buf, size_t size, const struct mf_size_row *r)
{
    char a[40], b[40];
    if (r->hi == UINT64_MAX)
        snprintf(buf, size, "%s and more", mf_fmt_count(a, r->lo));
    else if (r->lo == r->hi)
        snprintf(buf, size, "%s", mf_fmt_count(a, r->lo));
    else
        snprintf(buf, size, "%s - %s", mf_fmt_count(a, r->lo), mf_fmt_count(b, r->hi));
}

static void mf_text(FILE *out, const struct mf_size_table *t, bool site)
{
    char range[96], a[40], b[40], err[32];
    int width = 4;
    uint64_t most = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        mf_fmt_range(range, sizeof range, &t->rows[i]);
        int w = (int)strlen(range);
        width = w > width ? w : width;
        most = t->rows[i].calls > most ? t->rows[i].calls : most;
    }
    fprintf(out, "%*s %14s%s %8s", width, "size", "calls", t->estimated ? " ±error" : "", "%");
    if (!site)
        fprintf(out, " %10s %8s", "bytes", "%");
    fputc('\n', out);
    for (uint32_t i = 0; i < t->n; i++) {
        const struct mf_size_row *r = &t->rows[i];
        mf_fmt_range(range, sizeof range, r);
        snprintf(b, sizeof b, "%s%s", r->estimated ? "~" : "", mf_fmt_count(a, r->calls));
        fprintf(out, "%*s %14s", width, range, b);
        if (t->estimated) /* 7 wide, as the tree's */
            fprintf(out, " %-*s", r->estimated ? 8 : 7,
                    r->estimated ? mf_fmt_error(err, sizeof err, mf_sqrt(r->var), r->calls) : "");
        fprintf(out, " %7.2f%%", t->calls ? 100.0 * (double)r->calls / (double)t->calls : 0);
        if (!site)
            fprintf(out, " %10s %7.2f%%", mf_fmt_bytes(a, (double)r->bytes),
                    t->bytes ? 100.0 * (double)r->bytes / (double)t->bytes : 0);
        fputs("  ", out);
        /* The bar: calls against the class with the most, at least one mark if any. */
        int n = most ? (int)((r->calls * MF_BAR_WIDTH + most - 1) / most) : 0;
        for (int k = 0; k < n; k++)
            fputs("#", out);
        fputc('\n', out);
    }
}

static void mf_csv(FILE *out, const struct mf_size_table *t, bool site)
{
    fputs(site ? "size_min,size_max,calls,calls_stderr\n" : "size_min,size_max,calls,bytes\n", out);
    for (uint32_t i = 0; i < t->n; i++) {
        const struct mf_size_row *r = &t->rows[i];
        fprintf(out, "%llu,%llu,%llu,", (unsigned long long)r->lo, (unsigned long long)r->hi,
                (unsigned long long)r->calls);
        if (site)
            fprintf(out, "%.6g\n", mf_sqrt(r->var));
        else
            fprintf(out, "%llu\n", (unsigned long long)r->bytes);
    }
}

/* A JSON string: escapes, and U+FFFD for bytes that are not UTF-8. */
static void mf_json_str(FILE *out, const char *s)
{
    fputc('"', out);
    while (*s) {
        bool control;
        size_t n = mf_utf8_char(s, &control);
        unsigned char ch = (unsigned char)*s;
        if (n == 0) {
            fputs("\\ufffd", out);
            s++;
        } else if (ch == '"' || ch == '\\') {
            fputc('\\', out);
            fputc(ch, out);
            s++;
        } else if (ch < 0x20 || control) {
            if (n == 1)
                fprintf(out, "\\u%04x", ch);
            else
                fwrite(s, 1, n, out);
            s += n;
        } else {
            fwrite(s, 1, n, out);
            s += n;
        }
    }
    fputc('"', out);
}

static void mf_json(FILE *out, const struct mf_size_table *t, const char *site)
{
    fputs("{\n", out);
    if (site) {
        fputs("  \"site\": ", out);
        mf_json_str(out, site);
        fprintf(out, ",\n  \"estimated\": %s,\n", t->estimated ? "true" : "false");
    } else {
        fputs("  \"exact\": true,\n", out);
    }
    fprintf(out, "  \"calls\": %llu,\n  \"bytes\": %llu,\n  \"classes\": [",
            (unsigned long long)t->calls, (unsigned long long)t->bytes);
    for (uint32_t i = 0; i < t->n; i++) {
        const struct mf_size_row *r = &t->rows[i];
        fprintf(out, "%s\n    {\"size_min\": %llu, \"size_max\": %llu, \"calls\": %llu, ",
                i ? "," : "", (unsigned long long)r->lo, (unsigned long long)r->hi,
                (unsigned long long)r->calls);
        if (site)
            fprintf(out, "\"estimated\": %s, \"calls_stderr\": %.6g}",
                    r->estimated ? "true" : "false", mf_sqrt(r->var));
        else
            fprintf(out, "\"bytes\": %llu}", (unsigned long long)r->bytes);
    }
    fputs(t->n ? "\n  ]\n}\n" : "]\n}\n", out);
}

/* The large threshold of the profile's processes, if they agree; 0 if off or unknown. */
static uint64_t mf_large_bytes(const struct mf_profile *p)
{
    uint64_t large = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        if (!p->procs[i].has_file)
            continue;
        if (large && p->procs[i].large_bytes != large)
            return 0;
        large = p->procs[i].large_bytes;
    }
    return large;
}

bool mf_report_sizes(FILE *out, const struct mf_model *m, enum mf_format format,
                     const char *site, const struct mf_report_options *o)
{
    const struct mf_profile *p = m->p;
    struct mf_size_table *t = mf_xmalloc(sizeof *t);
    uint32_t nstacks = 0;
    if (site) {
        if (!mf_site_rows(m, site, t, &nstacks)) {
            mf_error("no allocation site named '%s' in the profile (the innermost function the "
                     "tree shows%s)", site, o->trim ? ", after trimming allocator frames" : "");
            free(t);
            return true;
        }
    } else {
        mf_exact_rows(p, t);
    }
    char a[40], b[40], c[40], d[40], err[32];
    if (format == MF_FORMAT_CSV) {
        mf_csv(out, t, site != NULL);
    } else if (format == MF_FORMAT_JSON) {
        mf_json(out, t, site);
    } else if (!site) {
        fprintf(out, "malloc_freq sizes: %s", o->dirs[0]);
        if (o->ndirs > 1)
            fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
        fprintf(out, "\n  calls      %s (exact), %s requested\n",
                mf_fmt_count(a, mf_profile_total_calls(p)),
                mf_fmt_bytes(b, (double)mf_profile_total_bytes(p)));
        fputs("  sizes      every call counted by size, exactly; 4 classes per doubling\n\n",
              out);
        mf_text(out, t, false);
    } else {
        /* The site's calls and bytes as the tree shows them, with their errors. */
        uint64_t calls = 0, bytes = 0;
        double var = 0, bvar = 0, n = (double)m->sample_interval;
        uint32_t id = mf_intern(site);
        struct mf_frames fr = {0};
        for (uint32_t i = 0; i < m->nstacks; i++) {
            const struct mf_stack *s = &m->stacks[i];
            if (s->raw == UINT32_MAX || !mf_stack_at_site(m, s, id, &fr))
                continue;
            calls += s->calls;
            bytes += s->bytes;
            var += s->estimated ? (double)s->var : 0;
            bvar += s->estimated ? s->bytes_var : 0;
        }
        free(fr.v);
        if (t->estimated && m->sample_interval > 1 && var < n * (n - 1)) {
            double mean = calls ? (double)bytes / (double)calls : 0;
            var = n * (n - 1);
            bvar = bvar > var * mean * mean ? bvar : var * mean * mean;
        }
        fprintf(out, "malloc_freq sizes at %s: %s\n", site, o->dirs[0]);
        if (t->estimated)
            fprintf(out, "  calls      ~%s %s, ~%s %s requested, in %u stack%s\n",
                    mf_fmt_count(a, calls), mf_fmt_error(err, sizeof err, mf_sqrt(var), calls),
                    mf_fmt_bytes(b, (double)bytes),
                    mf_fmt_error(c, sizeof c, mf_sqrt(bvar), bytes), nstacks,
                    nstacks == 1 ? "" : "s");
        else
            fprintf(out, "  calls      %s (exact), %s requested, in %u stack%s\n",
                    mf_fmt_count(a, calls), mf_fmt_bytes(b, (double)bytes), nstacks,
                    nstacks == 1 ? "" : "s");
        fprintf(out, "  sizes      %s; 1 class per doubling\n",
                t->estimated ? "estimated from its samples (~), ± their standard error"
                             : "every call recorded, exactly");
        uint64_t large = mf_large_bytes(p);
        if (t->estimated && large)
            fprintf(out, "             calls of %s bytes and more were all recorded\n",
                    mf_fmt_count(d, large));
        fputc('\n', out);
        mf_text(out, t, true);
    }
    free(t);
    return false;
}
