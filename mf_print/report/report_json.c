/* --format json: the model for scripts. One object: the exact totals, the processes (pid,
 * program, sampling mode, whether they had exited), and every stack of the model as it is,
 * not merged by name: one per distinct stack of each process image, with its frames
 * innermost first (function, file, line, module, inlined), its counts and the standard
 * error of its calls. docs/reports.md's JSON section sketches the schema.
 *
 * Strings are JSON-escaped: '"', '\', control characters as \n, \t or \u00XX (C1 too), U+2028
 * and U+2029 as \u2028 and \u2029 (line breaks to JavaScript); a byte that is not UTF-8
 * becomes U+FFFD, so the output is always valid UTF-8 JSON. Each process and each stack is
 * one line, so that grep and line-based tools still work.
 *
 * --live: "view": "live", and each stack's counts are named for what they are (alive,
 * live_bytes, live_records, freed; its calls are alloc_calls); "live" holds the live heap's
 * totals (alive, live_bytes) and what its files miss. "totals" and each process's "calls"
 * stay the run's calls. Without --live the document is as it always was (no "view"). */
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "process_life.h"
#include "report.h"
#include "transform.h"

#define MF_JSON_VERSION 1

static void mf_json_key(FILE *out, const char *key)
{
    fputc('"', out);
    fputs(key, out);
    fputs("\": ", out);
}

static void mf_json_u64(FILE *out, const char *key, uint64_t v)
{
    fprintf(out, "\"%s\": %llu", key, (unsigned long long)v);
}

void mf_json_number(FILE *out, double v)
{
    if (__builtin_isfinite(v))
        fprintf(out, "%.6g", v);
    else
        fputs("null", out);
}

static const char *mf_bool(bool b)
{
    return b ? "true" : "false";
}

/* The tree's ± as standard errors; 0 for exact counts. */
static double mf_calls_stderr(const struct mf_model *m, const struct mf_stack *s)
{
    return s->estimated ? mf_calls_se(s->calls, s->var, m->sample_interval) : 0;
}

static double mf_bytes_stderr(const struct mf_model *m, const struct mf_stack *s)
{
    return s->estimated && s->calls ? mf_bytes_se(s->calls, s->bytes, s->bytes_var,
                                                  m->sample_interval) : 0;
}

static void mf_json_sampling(FILE *out, const struct mf_process *pr)
{
    if (!pr->has_file) {
        fputs("null", out);
    } else if (pr->sample_interval == 1) {
        fputs("{\"mode\": \"exact\"}", out);
    } else if (pr->sample_interval == 0) {
        /* exact_ns_max only where the stretch had a time cap (a file of an older core) */
        fprintf(out, "{\"mode\": \"adaptive\", \"exact_calls\": %llu, ",
                (unsigned long long)pr->exact_calls);
        if (!(pr->flags & MF_PROCESS_EXACT_BY_CALLS))
            fprintf(out, "\"exact_ns_max\": %u, ", MF_EXACT_NS_MAX);
        if (pr->ramp_samples) /* the k-th sample past the stretch at k / step calls */
            fprintf(out, "\"ramp_samples\": %u, \"ramp_step\": %u, ", pr->ramp_samples,
                    pr->ramp_step);
        fprintf(out, "\"cost_share\": %g}", (double)pr->cost_share_ppm / 1e6);
    } else {
        fprintf(out, "{\"mode\": \"interval\", \"interval\": %llu, \"exact_calls\": %llu}",
                (unsigned long long)pr->sample_interval, (unsigned long long)pr->exact_calls);
    }
}

/* The names of a stack's counts: the live view's, or the calls'. */
struct mf_json_names {
    const char *calls, *bytes, *samples, *calls_stderr, *bytes_stderr;
};

static const struct mf_json_names mf_json_calls = {"calls", "bytes", "samples", "calls_stderr",
                                                   "bytes_stderr"};
static const struct mf_json_names mf_json_live = {"alive", "live_bytes", "live_records",
                                                  "alive_stderr", "live_bytes_stderr"};

static const struct mf_json_names *mf_json_names_of(const struct mf_model *m)
{
    return m->view == MF_VIEW_LIVE ? &mf_json_live : &mf_json_calls;
}

/* alive: the process's live allocations (the live view), or UINT64_MAX for none. */
static void mf_json_process(FILE *out, const struct mf_process *pr, uint64_t alive)
{
    bool exited = pr->has_file && (pr->flags & MF_PROCESS_EXITED);
    fputs("    {", out);
    fprintf(out, "\"pid\": %u, ", pr->pid);
    mf_json_key(out, "program");
    mf_json_str(out, pr->has_file && pr->exe[0] ? pr->exe : NULL);
    fputs(", ", out);
    mf_json_key(out, "directory");
    mf_json_str(out, pr->dir);
    fprintf(out, ", \"exited\": %s, ", mf_bool(exited));
    mf_json_u64(out, "threads", pr->nthreads);
    fputs(", ", out);
    mf_json_u64(out, "calls", pr->calls);
    fputs(", ", out);
    if (alive != UINT64_MAX) {
        mf_json_u64(out, "alive", alive);
        fputs(", ", out);
    }
    mf_json_key(out, "start_ns");
    uint64_t start = pr->has_file ? pr->start_ns : pr->threads_start_ns;
    if (start == UINT64_MAX)
        fputs("null", out);
    else
        fprintf(out, "%llu", (unsigned long long)start);
    fputs(", ", out);
    mf_json_key(out, "end_ns");
    if (exited)
        fprintf(out, "%llu", (unsigned long long)pr->end_ns);
    else
        fputs("null", out);
    fputs(", ", out);
    mf_json_key(out, "sampling");
    mf_json_sampling(out, pr);
    fprintf(out, ", \"estimated\": %s}", mf_bool(pr->sampled || pr->weighted));
}

static void mf_json_frame(FILE *out, const struct mf_model *m, const struct mf_frame *f,
                          const struct mf_location *l, bool inlined)
{
    fputs("{", out);
    mf_json_key(out, "function");
    mf_json_str(out, mf_str(f->name));
    fputs(", ", out);
    mf_json_key(out, "file");
    mf_json_str(out, f->file ? mf_str(f->file) : NULL);
    fputs(", ", out);
    mf_json_key(out, "line");
    if (f->line)
        fprintf(out, "%u", f->line);
    else
        fputs("null", out);
    fputs(", ", out);
    mf_json_key(out, "module");
    const struct mf_process *pr = l ? &m->p->procs[l->process] : NULL;
    mf_json_str(out, pr && l->module != MF_NO_MODULE ? pr->modules[l->module].path : NULL);
    fprintf(out, ", \"inlined\": %s}", mf_bool(inlined));
}

/* Each frame's object as mf_json_frame writes it, made once: a frame of the model belongs
 * to one location, which gives its module and whether it is inlined. 10^5 stacks of ~80
 * frames are 8x10^6 objects of a few hundred distinct ones (escaping them one character at
 * a time was most of the report's time). */
struct mf_json_frames {
    char **text; /* per index of m->frames, NULL until made */
    size_t *len;
};

static void mf_json_frame_cached(FILE *out, struct mf_json_frames *c, const struct mf_model *m,
                                 uint32_t index, const struct mf_frame *f,
                                 const struct mf_location *l, bool inlined)
{
    if (!c->text) {
        c->text = mf_xcalloc((size_t)m->nframes + 1, sizeof *c->text);
        c->len = mf_xcalloc((size_t)m->nframes + 1, sizeof *c->len);
    }
    if (!c->text[index]) {
        FILE *ms = open_memstream(&c->text[index], &c->len[index]);
        if (!ms)
            mf_out_of_memory();
        mf_json_frame(ms, m, f, l, inlined);
        if (fclose(ms) != 0 || !c->text[index])
            mf_out_of_memory();
    }
    fwrite(c->text[index], 1, c->len[index], out);
}

static void mf_json_frames_free(struct mf_json_frames *c, const struct mf_model *m)
{
    for (uint32_t i = 0; c->text && i < m->nframes; i++)
        free(c->text[i]);
    free(c->text);
    free(c->len);
}

/* One stack: its frames are mf_model_frames()'s, each with the module of its location. */
static void mf_json_stack(FILE *out, const struct mf_model *m, const struct mf_stack *s,
                          struct mf_frames *fr, struct mf_json_frames *cache)
{
    mf_model_frames(m, s, fr);
    bool not_profiled = s->flags & MF_STACK_NOT_PROFILED;
    const struct mf_profile *p = m->p;
    const struct mf_json_names *nm = mf_json_names_of(m);
    fputs("    {", out);
    mf_json_key(out, "process");
    if (not_profiled)
        fputs("null", out);
    else
        fprintf(out, "%u", s->process);
    fputs(", ", out);
    mf_json_u64(out, nm->calls, s->calls);
    fputs(", ", out);
    mf_json_u64(out, nm->bytes, s->bytes);
    fputs(", ", out);
    mf_json_u64(out, nm->samples, s->samples);
    fprintf(out, ", \"estimated\": %s, \"%s\": ", mf_bool(s->estimated), nm->calls_stderr);
    mf_json_number(out, mf_calls_stderr(m, s));
    fprintf(out, ", \"%s\": ", nm->bytes_stderr);
    mf_json_number(out, mf_bytes_stderr(m, s));
    fprintf(out, ", \"truncated\": %s, ", mf_bool(s->flags & MF_ENTRY_TRUNCATED));
    if (m->view == MF_VIEW_LIVE) { /* the freed sampled allocations (weighted) and the calls */
        bool known = s->raw != UINT32_MAX;
        fprintf(out, "\"freed\": %llu, \"alloc_calls\": %llu, ",
                (unsigned long long)(known && p->lifetimes ? p->lifetimes[s->raw].freed : 0),
                (unsigned long long)(known ? p->stacks[s->raw].calls : 0));
    }
    fputs("\"via\": ", out);
    mf_json_str(out, s->via ? mf_str(s->via) : NULL);
    fprintf(out, ", \"via_found\": %s", mf_bool(s->flags & MF_STACK_VIA_FOUND));
    fputs(", \"frames\": [", out);
    /* Walk the locations' frames as mf_model_frames does, alongside fr. */
    uint32_t k = 0, total = mf_model_nframes(m, s), at = 0;
    for (uint32_t i = 0; i < s->depth && k < fr->n; i++) {
        const struct mf_location *l = &m->locs[m->stack_locs[s->first + i]];
        for (uint32_t j = 0; j < l->n && k < fr->n; j++, at++) {
            if (!mf_model_shows(m, s, at, total, m->frames[l->first + j].name))
                continue;
            fputs(k ? ", " : "", out);
            mf_json_frame_cached(out, cache, m, l->first + j, &fr->v[k++], l, j + 1 < l->n);
        }
    }
    for (; k < fr->n; k++) { /* pseudo-frames: [deeper frames not recorded], ... */
        fputs(k ? ", " : "", out);
        mf_json_frame(out, m, &fr->v[k], NULL, false);
    }
    fputs("]}", out);
}

static const struct mf_model *mf_sort_model;

static int mf_stack_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    const struct mf_stack *s = &mf_sort_model->stacks[x], *t = &mf_sort_model->stacks[y];
    if (s->calls != t->calls)
        return s->calls > t->calls ? -1 : 1;
    if (s->bytes != t->bytes)
        return s->bytes > t->bytes ? -1 : 1;
    return x < y ? -1 : x > y;
}

bool mf_report_json(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    const struct mf_profile *p = m->p;
    fputs("{\n", out);
    fprintf(out, "  \"format\": \"malloc_freq\",\n  \"version\": %d,\n", MF_JSON_VERSION);
    fputs("  \"directories\": [", out);
    for (int i = 0; i < o->ndirs; i++) {
        fputs(i ? ", " : "", out);
        mf_json_str(out, o->dirs[i]);
    }
    fputs("],\n", out);

    bool live = m->view == MF_VIEW_LIVE;
    if (live) /* what the stacks' counts are, their totals, and what the live files miss */
        fprintf(out, "  \"view\": \"live\",\n  \"live\": {\"when\": \"%s\", \"alive\": %llu, "
                     "\"live_bytes\": %llu, \"files\": %u, "
                     "\"records\": %llu, \"not_recorded\": %llu, \"lifetimes_not_recorded\": %llu, "
                     "\"records_without_stack\": %llu, \"ended_images_left_out\": %u, "
                     "\"ended_allocations_left_out\": %llu},\n",
                mf_all_ended(p) ? "at exit" : "now", (unsigned long long)m->view_calls,
                (unsigned long long)m->view_bytes, p->live_files,
                (unsigned long long)p->live_records, (unsigned long long)p->live_dropped,
                (unsigned long long)p->live_stats_dropped, (unsigned long long)p->live_unmatched,
                p->live_gone_images, (unsigned long long)p->live_gone);
    fputs("  \"totals\": {", out);
    mf_json_u64(out, "calls", mf_profile_total_calls(p));
    fputs(", ", out);
    mf_json_u64(out, "bytes", mf_profile_total_bytes(p));
    fputs(", ", out);
    mf_json_u64(out, "threads", p->nthreads);
    fputs(", ", out);
    mf_json_u64(out, "wall_ns", mf_profile_wall_ns(p));
    fputs(", \"functions\": {", out);
    bool first = true;
    for (int f = 0; f < MF_FN_COUNT; f++) {
        if (!p->totals.calls[f] && !p->totals.bytes[f])
            continue;
        char name[32];
        mf_fn_label(name, sizeof name, f);
        fprintf(out, "%s\"%s\": {\"calls\": %llu, \"bytes\": %llu}", first ? "" : ", ", name,
                (unsigned long long)p->totals.calls[f], (unsigned long long)p->totals.bytes[f]);
        first = false;
    }
    fputs("}},\n", out);

    fprintf(out, "  \"estimated\": %s,\n  \"sample_interval\": %llu,\n  \"trimmed\": %s,\n",
            mf_bool(m->estimated), (unsigned long long)m->sample_interval, mf_bool(m->trim));
    fprintf(out, "  \"folded\": %s,\n  \"wrappers_found\": %llu,\n  \"cut\": %s,\n  \"hidden_frames\": %llu,\n",
            mf_bool(m->trim && m->xf.fold), (unsigned long long)m->transformed.found_wrappers,
            mf_bool(m->xf.cut), (unsigned long long)m->transformed.hidden_frames);
    fprintf(out, "  \"files_read\": %u,\n  \"files_skipped\": %u,\n", p->nfiles_read,
            p->nfiles_skipped);

    uint64_t *alive = mf_xcalloc((size_t)p->nprocs + 1, sizeof *alive);
    for (uint32_t i = 0; live && i < m->nstacks; i++)
        if (m->stacks[i].process < p->nprocs && !(m->stacks[i].flags & MF_STACK_NOT_PROFILED))
            alive[m->stacks[i].process] += m->stacks[i].calls;
    fputs("  \"processes\": [", out);
    for (uint32_t i = 0; i < p->nprocs; i++) {
        fputs(i ? ",\n" : "\n", out);
        mf_json_process(out, &p->procs[i], live ? alive[i] : UINT64_MAX);
    }
    free(alive);
    fputs(p->nprocs ? "\n  ],\n" : "],\n", out);

    uint32_t *order = mf_xcalloc(m->nstacks ? m->nstacks : 1, sizeof *order);
    for (uint32_t i = 0; i < m->nstacks; i++)
        order[i] = i;
    mf_sort_model = m;
    if (m->nstacks > 1)
        qsort(order, m->nstacks, sizeof *order, mf_stack_cmp);
    struct mf_frames fr = {0};
    struct mf_json_frames cache = {0};
    fputs("  \"stacks\": [", out);
    for (uint32_t i = 0; i < m->nstacks; i++) {
        fputs(i ? ",\n" : "\n", out);
        mf_json_stack(out, m, &m->stacks[order[i]], &fr, &cache);
    }
    fputs(m->nstacks ? "\n  ]\n}\n" : "]\n}\n", out);
    mf_json_frames_free(&cache, m);
    free(fr.v);
    free(order);
    return false;
}
