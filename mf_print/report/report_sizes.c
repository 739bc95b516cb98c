/* --sizes: what sizes the program asked for.
 *
 * The size histogram every thread keeps from its samples (four classes per doubling,
 * mf_format.h), merged over threads, processes and directories. Each sample adds its weight
 * to its size's class, so a class's calls and bytes are unbiased estimates, with the
 * variance its samples carry (w(w-1) and w(w-1) * size^2 each), shown as the tree shows a
 * stack's: ~ and ± its standard error. A class is exact when every call in it was recorded:
 * every call is at MALLOC_FREQ_SAMPLE=1 and in a run that never left its exact stretch, and
 * calls at or above MALLOC_FREQ_LARGE (64 KiB by default) always are.
 *
 * Text: a table with a bar per class (its share of the calls); CSV: one row per class;
 * JSON: one object. Only classes with calls are listed. */
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "report.h"

#define MF_BAR_WIDTH 30

/* One row: a size range and what fell into it. */
struct mf_size_row {
    uint64_t lo, hi; /* sizes lo .. hi, both included */
    uint64_t calls, bytes;
    double calls_se, bytes_se; /* standard errors; 0 when exact */
    bool estimated;
};

struct mf_size_table {
    struct mf_size_row rows[MF_SIZE_CLASSES];
    uint32_t n;
    uint64_t calls, bytes; /* the sums over the rows */
    double calls_var, bytes_var;
    bool estimated;
};

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

/* A variance as the tree takes it: with no weighted sample yet, calls after the exact
 * stretch may still have been missed, so at least one sample's at the interval (of the mean
 * size, for bytes). */
static double mf_floor(const struct mf_model *m, double var, double mean)
{
    double n = (double)m->sample_interval, least = n * (n - 1) * mean * mean;
    return m->sample_interval > 1 && var < least ? least : var;
}

/* The classes with calls. A class is an estimate when a sample in it had a weight above 1,
 * or when some process sampled and the class lies below the large threshold (its calls
 * after the exact stretch may have been missed): then, as the tree does, its variance is at
 * least one sample's at the interval. */
static void mf_rows(const struct mf_model *m, struct mf_size_table *t)
{
    const struct mf_profile *p = m->p;
    memset(t, 0, sizeof *t);
    bool sampled = false;
    for (uint32_t i = 0; i < p->nprocs; i++)
        sampled |= p->procs[i].sampled;
    uint64_t large = mf_large_bytes(p);
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) {
        const struct mf_size_class *k = &p->sizes[c];
        if (!k->calls)
            continue;
        struct mf_size_row *r = &t->rows[t->n++];
        r->lo = mf_size_class_lo(c);
        /* Sizes 1, 2 and 3 have a class each; the next class's start ends the others. */
        uint64_t next = c + 1 < MF_SIZE_CLASSES ? mf_size_class_lo(c + 1) : 0;
        r->hi = c + 1 == MF_SIZE_CLASSES ? UINT64_MAX : next > r->lo ? next - 1 : r->lo;
        r->calls = k->calls;
        r->bytes = k->bytes;
        bool all_recorded = large && r->lo >= large;
        r->estimated = k->calls_var > 0 || (sampled && !all_recorded);
        if (r->estimated) {
            r->calls_se = mf_sqrt(mf_floor(m, (double)k->calls_var, 1));
            r->bytes_se = mf_sqrt(mf_floor(m, k->bytes_var, (double)k->bytes / (double)k->calls));
        }
        t->estimated |= r->estimated;
        t->calls += r->calls;
        t->bytes += r->bytes;
        t->calls_var += (double)k->calls_var;
        t->bytes_var += k->bytes_var;
    }
    /* The sum's variance is the classes' (no floor each: one for the whole). */
    if (t->estimated && t->calls) {
        t->calls_var = mf_floor(m, t->calls_var, 1);
        t->bytes_var = mf_floor(m, t->bytes_var, (double)t->bytes / (double)t->calls);
    }
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

/* An error column, 7 wide as the tree's (one more for the multi-byte ±). */
static void mf_err_col(FILE *out, const struct mf_size_table *t, const struct mf_size_row *r,
                       double se, uint64_t of)
{
    char err[32];
    if (t->estimated)
        fprintf(out, " %-*s", r->estimated ? 8 : 7,
                r->estimated ? mf_fmt_error(err, sizeof err, se, of) : "");
}

static void mf_text(FILE *out, const struct mf_size_table *t)
{
    char range[96], a[40], b[40];
    int width = 4;
    uint64_t most = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        mf_fmt_range(range, sizeof range, &t->rows[i]);
        int w = (int)strlen(range);
        width = w > width ? w : width;
        most = t->rows[i].calls > most ? t->rows[i].calls : most;
    }
    const char *err = t->estimated ? " ±error" : "";
    fprintf(out, "%*s %14s%s %8s %11s%s %8s\n", width, "size", "calls", err, "%", "bytes", err, "%");
    for (uint32_t i = 0; i < t->n; i++) {
        const struct mf_size_row *r = &t->rows[i];
        mf_fmt_range(range, sizeof range, r);
        snprintf(b, sizeof b, "%s%s", r->estimated ? "~" : "", mf_fmt_count(a, r->calls));
        fprintf(out, "%*s %14s", width, range, b);
        mf_err_col(out, t, r, r->calls_se, r->calls);
        fprintf(out, " %7.2f%%", t->calls ? 100.0 * (double)r->calls / (double)t->calls : 0);
        /* Size 0's bytes are 0 however many calls there were. */
        bool est = r->estimated && r->hi != 0;
        snprintf(b, sizeof b, "%s%s", est ? "~" : "", mf_fmt_bytes(a, (double)r->bytes));
        fprintf(out, " %11s", b);
        struct mf_size_row shown = *r;
        shown.estimated = est;
        mf_err_col(out, t, &shown, r->bytes_se, r->bytes);
        fprintf(out, " %7.2f%%  ", t->bytes ? 100.0 * (double)r->bytes / (double)t->bytes : 0);
        /* The bar: calls against the class with the most, at least one mark if any. */
        int n = most ? (int)((r->calls * MF_BAR_WIDTH + most - 1) / most) : 0;
        for (int k = 0; k < n; k++)
            fputs("#", out);
        fputc('\n', out);
    }
}

static void mf_csv(FILE *out, const struct mf_size_table *t)
{
    fputs("size_min,size_max,calls,calls_stderr,bytes,bytes_stderr\n", out);
    for (uint32_t i = 0; i < t->n; i++) {
        const struct mf_size_row *r = &t->rows[i];
        fprintf(out, "%llu,%llu,%llu,%.6g,%llu,%.6g\n", (unsigned long long)r->lo,
                (unsigned long long)r->hi, (unsigned long long)r->calls, r->calls_se,
                (unsigned long long)r->bytes, r->bytes_se);
    }
}

static void mf_json(FILE *out, const struct mf_size_table *t, const struct mf_profile *p)
{
    fprintf(out, "{\n  \"estimated\": %s,\n", t->estimated ? "true" : "false");
    fprintf(out, "  \"exact_calls\": %llu,\n  \"exact_bytes\": %llu,\n",
            (unsigned long long)mf_profile_total_calls(p),
            (unsigned long long)mf_profile_total_bytes(p));
    fprintf(out, "  \"calls\": %llu,\n  \"calls_stderr\": ", (unsigned long long)t->calls);
    mf_json_number(out, mf_sqrt(t->calls_var));
    fprintf(out, ",\n  \"bytes\": %llu,\n  \"bytes_stderr\": ", (unsigned long long)t->bytes);
    mf_json_number(out, mf_sqrt(t->bytes_var));
    fputs(",\n  \"classes\": [", out);
    for (uint32_t i = 0; i < t->n; i++) {
        const struct mf_size_row *r = &t->rows[i];
        fprintf(out,
                "%s\n    {\"size_min\": %llu, \"size_max\": %llu, \"estimated\": %s, "
                "\"calls\": %llu, \"calls_stderr\": ",
                i ? "," : "", (unsigned long long)r->lo, (unsigned long long)r->hi,
                r->estimated ? "true" : "false", (unsigned long long)r->calls);
        mf_json_number(out, r->calls_se);
        fprintf(out, ", \"bytes\": %llu, \"bytes_stderr\": ", (unsigned long long)r->bytes);
        mf_json_number(out, r->bytes_se);
        fputc('}', out);
    }
    fputs(t->n ? "\n  ]\n}\n" : "]\n}\n", out);
}

enum mf_sizes_format { MF_SIZES_TEXT, MF_SIZES_CSV, MF_SIZES_JSON };

static bool mf_report_sizes(FILE *out, const struct mf_model *m, enum mf_sizes_format format,
                            const struct mf_report_options *o)
{
    const struct mf_profile *p = m->p;
    struct mf_size_table *t = mf_xmalloc(sizeof *t);
    mf_rows(m, t);
    char a[40], b[40], c[40], d[40];
    if (format == MF_SIZES_CSV) {
        mf_csv(out, t);
    } else if (format == MF_SIZES_JSON) {
        mf_json(out, t, p);
    } else {
        fprintf(out, "malloc_freq sizes: %s", mf_esc(o->dirs[0]));
        if (o->ndirs > 1)
            fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
        fprintf(out, "\n  calls      %s (exact), %s requested\n",
                mf_fmt_count(a, mf_profile_total_calls(p)),
                mf_fmt_bytes(b, (double)mf_profile_total_bytes(p)));
        uint64_t large = mf_large_bytes(p);
        if (!t->estimated) {
            fputs("  sizes      every call recorded: exact; 4 classes per doubling\n", out);
        } else {
            fputs("  sizes      estimated from the samples (~), ± their standard error; "
                  "4 classes per doubling\n",
                  out);
            if (large)
                fprintf(out, "             calls of %s and more all recorded: exact\n",
                        mf_fmt_bytes(d, (double)large));
            fprintf(out, "             the classes add up to ~%s %s calls, ~%s %s\n",
                    mf_fmt_count(a, t->calls), mf_fmt_error(c, sizeof c, mf_sqrt(t->calls_var), t->calls),
                    mf_fmt_bytes(b, (double)t->bytes),
                    mf_fmt_error(d, sizeof d, mf_sqrt(t->bytes_var), t->bytes));
        }
        fputc('\n', out);
        mf_text(out, t);
    }
    free(t);
    return false;
}

bool mf_report_sizes_text(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    return mf_report_sizes(out, v->model, MF_SIZES_TEXT, o);
}

bool mf_report_sizes_csv(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    return mf_report_sizes(out, v->model, MF_SIZES_CSV, o);
}

bool mf_report_sizes_json(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    return mf_report_sizes(out, v->model, MF_SIZES_JSON, o);
}
