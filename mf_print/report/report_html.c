/* --format html: one self-contained HTML file with an interactive flame graph.
 *
 * The page is mf_print/report/flame_graph/flame_graph.html, built into the binary (the .incbin
 * below), with three holes this file fills: {{MF:title}}, {{MF:header}} (the exact totals,
 * the programs, their processes and how each ended, the sampling mode: HTML,
 * escaped here) and {{MF:data}} (the flame graph's data: JSON, escaped so that it can never
 * end its <script> element). The page's script draws the graph on a canvas.
 *
 * The data is the model's stacks (mf_model_frames: transformed as for the other reports,
 * with "[via xmalloc]" above a site a wrapper was folded into, as in collapsed) read
 * outermost first, as a prefix tree keyed by function name, so that one function under one
 * path is one frame however many addresses, lines or processes it came from (the caller tree
 * merges the same way, from the other end). Compact for 10^5 stacks:
 *   strings  every function and file name once
 *   frames   [name, file, line] triples: a tree node's function and its location with the
 *            most calls (file 0 and line 0 when unknown)
 *   nodes    two numbers per node, in preorder, children sorted by name: how many levels
 *            the node lies above the previous node's child level (0: it is that node's
 *            first child), and its frame
 *   ends     the stacks, per node where stacks end, in preorder: its distance from the
 *            previous such node times 2 plus 1 if an estimate, calls, bytes (and the
 *            variance of calls in an estimated profile); the page sums them up the tree.
 *            When the profile has a live heap (MALLOC_FREQ_LIVE, read by mf_live_attach
 *            whether or not --live is given: "live" in the data) the distance is times 4
 *            plus 2 if something of the stacks is alive, and those add their live
 *            allocations and live bytes (and their variances, estimated)
 * Numbers in nodes and ends are written 5 bits a character (mf_varint), without commas:
 * as JSON arrays of numbers a page of 10^5 stacks was twice the size and drawn twice as late.
 * A node's calls, bytes and variance are the sums of the stacks through it, as in the tree,
 * and the page computes the ± error from them as report_tree.c does. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call_tree.h"
#include "mf_print.h"
#include "process_life.h"
#include "report.h"

/* The template, as the assembler reads it: make runs the compiler from the top directory. */
#ifndef MF_FLAME_GRAPH_HTML
#define MF_FLAME_GRAPH_HTML "mf_print/report/flame_graph/flame_graph.html"
#endif
__asm__(".pushsection .rodata,\"a\",@progbits\n"
        ".globl mf_flame_graph_html\n"
        ".hidden mf_flame_graph_html\n"
        ".type mf_flame_graph_html, @object\n"
        "mf_flame_graph_html:\n"
        ".incbin \"" MF_FLAME_GRAPH_HTML "\"\n"
        ".globl mf_flame_graph_html_end\n"
        ".hidden mf_flame_graph_html_end\n"
        "mf_flame_graph_html_end:\n"
        ".byte 0\n"
        ".popsection\n");
extern const char mf_flame_graph_html[], mf_flame_graph_html_end[];

/* ---- the header ----------------------------------------------------------------------- */

static const char *mf_exe(const struct mf_process *pr)
{
    return pr->has_file && pr->exe[0] ? pr->exe : "?";
}

static void mf_html_sampling(FILE *out, const struct mf_profile *p)
{
    char text[512];
    mf_sampling_text(p, text, sizeof text); /* plain text: only '<' needs escaping */
    for (const char *c = text; *c; c++)
        if (*c == '<')
            fputs("&lt;", out);
        else
            fputc(*c, out);
}

static const char *const mf_life_text[] = {
    [MF_LIFE_EXITED] = "<span class=\"mf-exited\">exited</span>",
    [MF_LIFE_RUNNING] = "<span class=\"mf-running\">still running when read</span>",
    [MF_LIFE_ENDED] = "<span class=\"mf-ended\">ended without exiting</span> (_exit, a signal or "
                      "a crash: no exit recorded)",
    [MF_LIFE_EXECED] = "<span class=\"mf-exited\">exec'd another program</span>",
    [MF_LIFE_UNKNOWN] = "<span class=\"mf-running\">no exit recorded</span> (still running, or "
                        "ended by _exit, a signal or a crash)",
};

#define MF_HTML_PROCESSES_SHOWN 12

static void mf_html_header(FILE *out, const struct mf_model *m, const struct mf_report_options *o,
                           uint32_t nstacks)
{
    const struct mf_profile *p = m->p;
    char a[40], b[40], c[40];
    fputs("<h1>malloc_freq: ", out);
    mf_html_text(out, o->dirs[0]);
    if (o->ndirs > 1)
        fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
    fputs("</h1>\n<table id=\"mf-facts\">\n<tr><th>program</th><td id=\"mf-programs\">", out);
    int shown = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const char *exe = mf_exe(&p->procs[i]);
        bool dup = false;
        for (uint32_t j = 0; j < i && !dup; j++)
            dup = strcmp(exe, mf_exe(&p->procs[j])) == 0;
        if (dup)
            continue;
        if (shown == 8) {
            fputs(", …", out);
            break;
        }
        fputs(shown++ ? ", <code>" : "<code>", out);
        mf_html_text(out, exe);
        fputs("</code>", out);
    }
    fputs("</td></tr>\n", out);

    /* The processes: pid, program, how it ended or that it still runs. */
    uint32_t running = 0;
    for (uint32_t i = 0; i < p->nprocs; i++)
        running += mf_process_running(p, i);
    fprintf(out, "<tr><th>process%s</th><td id=\"mf-processes\">", p->nprocs == 1 ? "" : "es");
    for (uint32_t i = 0; i < p->nprocs && i < MF_HTML_PROCESSES_SHOWN; i++) {
        const struct mf_process *pr = &p->procs[i];
        fprintf(out, "%s<span class=\"mf-proc\">pid <b>%u</b>", i ? "<br>" : "", pr->pid);
        if (p->nprocs > 1) {
            fputs(" <code>", out);
            mf_html_text(out, mf_basename(mf_exe(pr)));
            fputs("</code>", out);
        }
        fprintf(out, ": %s calls, %u thread%s, %s</span>", mf_fmt_count(a, pr->calls),
                pr->nthreads, pr->nthreads == 1 ? "" : "s", mf_life_text[mf_life(p, i)]);
    }
    if (p->nprocs > MF_HTML_PROCESSES_SHOWN)
        fprintf(out, "<br>… %u more (%u of all %u still running)", p->nprocs - MF_HTML_PROCESSES_SHOWN,
                running, p->nprocs);
    fputs("</td></tr>\n", out);

    fprintf(out, "<tr><th>calls</th><td><b id=\"mf-total-calls\">%s</b> (exact), "
            "<b id=\"mf-total-bytes\">%s</b> requested (%s B)</td></tr>\n",
            mf_fmt_count(a, mf_profile_total_calls(p)),
            mf_fmt_bytes(b, (double)mf_profile_total_bytes(p)),
            mf_fmt_count(c, mf_profile_total_bytes(p)));
    fputs("<tr><th>functions</th><td>", out);
    fputs(mf_put_functions(out, p, "") ? "</td></tr>\n" : "none</td></tr>\n", out);
    fprintf(out, "<tr><th>threads</th><td>%u</td></tr>\n", p->nthreads);
    if (p->live) { /* MALLOC_FREQ_LIVE: the live heap, the page's live weights */
        uint64_t live_calls = 0, live_bytes = 0;
        for (uint32_t i = 0; i < p->nstacks; i++) {
            live_calls += p->live[i].calls;
            live_bytes += p->live[i].bytes;
        }
        const char *est = m->estimated ? "~" : "";
        fprintf(out, "<tr><th>live heap</th><td id=\"mf-live\">%s: <b id=\"mf-live-calls\">%s%s</b> "
                "allocations, <b id=\"mf-live-bytes\">%s%s</b> (%s%s B), the weights "
                "“live allocations” and “live bytes” (<code>MALLOC_FREQ_LIVE</code>)</td></tr>\n",
                running ? "alive when read" : "still allocated when the process ended", est,
                mf_fmt_count(a, live_calls), est, mf_fmt_bytes(b, (double)live_bytes), est,
                mf_fmt_count(c, live_bytes));
    }
    fputs("<tr><th>sampling</th><td id=\"mf-sampling\">", out);
    mf_html_sampling(out, p);
    if (m->estimated)
        fputs("<br>~ marks estimates, ± their relative standard error", out);
    fputs("</td></tr>\n", out);
    fprintf(out, "<tr><th>stacks</th><td>%s distinct, %s frames in the graph after %smerging "
            "by function</td></tr>\n</table>\n",
            mf_fmt_count(a, mf_profile_image_stacks(p)), mf_fmt_count(b, nstacks),
            o->trim ? "trimming allocator frames and " : "");
}

/* ---- the data ------------------------------------------------------------------------- */

/* Interned id -> index in the emitted string table (0 is ""). */
struct mf_hstrings {
    struct mf_map ids;
    uint32_t *order; /* emitted index -> interned id */
    uint32_t n, cap;
};

static uint32_t mf_hstring(struct mf_hstrings *s, uint32_t id)
{
    if (!s->n) {
        MF_GROW(s->order, s->n, s->cap);
        s->order[s->n++] = 0;
    }
    if (id == 0)
        return 0;
    bool added;
    uint32_t k = mf_map_put(&s->ids, id, NULL, NULL, s->n, &added);
    if (added) {
        MF_GROW(s->order, s->n, s->cap);
        s->order[s->n++] = id;
    }
    return k;
}

struct mf_hframe {
    uint32_t name, file, line; /* emitted string indices */
};

struct mf_hframe_key {
    const struct mf_hframe *frames, *f;
};

static bool mf_hframe_eq(const void *ctx, uint32_t val)
{
    const struct mf_hframe_key *k = ctx;
    const struct mf_hframe *a = &k->frames[val];
    return a->name == k->f->name && a->file == k->f->file && a->line == k->f->line;
}

/* Numbers for the page, without separators: 5 bits a character, most significant first,
 * from an alphabet of 64 that JSON, HTML and the page's decoder all take as they are: the
 * first 32 characters say that more follow, the last 32 end the number (0..31 is one). */
static const char mf_varint_digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

struct mf_varint {
    char *s; /* the text so far */
    size_t n, cap;
    unsigned col; /* a new line now and then keeps the file fit for line tools */
};

static void mf_varint(struct mf_varint *v, uint64_t x)
{
    char buf[16];
    int n = 0;
    buf[n++] = mf_varint_digits[32 + (x & 31)];
    while (x >>= 5)
        buf[n++] = mf_varint_digits[x & 31];
    if (v->n + sizeof buf + 8 > v->cap) {
        v->cap = (v->n + sizeof buf + 8) * 2;
        v->s = mf_xrealloc(v->s, v->cap);
    }
    while (n)
        v->s[v->n++] = buf[--n];
    if (++v->col % 4096 == 0) { /* the next string of the array, between two numbers */
        memcpy(v->s + v->n, "\",\n\"", 4);
        v->n += 4;
    }
}

/* A variance of bytes for the page: a whole number, held below 2^64 (its square root, 4 GiB,
 * is then already far beyond any live site's bytes in a sampled profile). */
static uint64_t mf_var_number(double v)
{
    return v >= 1.8e19 ? (uint64_t)1.8e19 : (uint64_t)(v + 0.5);
}

/* ---- the graph: the stacks outermost first, grouped in place ---------------------------- */

/* The nodes and the stacks' ends as the page reads them, made in one walk over the stacks
 * grouped outermost first (call_tree.h's paths, as the caller tree groups them innermost
 * first): no node is kept, only the numbers written for it. A tree built whole took 2.2 GB
 * and 8.9 s for 10^5 stacks 80 frames deep, 18.8 GB and 113 s for 10^6. */
struct mf_hgraph {
    struct mf_paths ps;
    const struct mf_model *m;
    bool live;
    struct mf_varint nodes, ends; /* the tables come before them in the page */
    uint32_t n;                   /* nodes written, the root not counted */
    uint32_t depth;               /* the last node's */
    uint32_t last_end;            /* the last node with stacks ending there */
    uint64_t live_calls, live_bytes;
    struct mf_hstrings strs;
    struct mf_map frame_ids;
    struct mf_hframe *frames;
    uint32_t nframes, frames_cap;
    uint32_t *frame_of; /* per group of ps.groups: its node's frame */
    size_t frame_of_cap;
    /* The frame each location (a ps.ft index) and each name without a location gave, + 1;
     * 0: none yet. Millions of nodes share a few thousand of them: no map lookup a node. */
    uint32_t *by_ref, *by_name;
    uint32_t nby_ref, nby_name;
    uint32_t *end_node; /* per model stack: the node where it ends (UINT32_MAX: none) */
};

static int mf_group_name_cmp(const void *a, const void *b)
{
    return strcmp(mf_str(((const struct mf_group *)a)->name),
                  mf_str(((const struct mf_group *)b)->name));
}

static uint32_t mf_hframe_make(struct mf_hgraph *w, uint32_t name, uint32_t ref);

/* The frame of a node: its function and the location where the stacks through it made the
 * most calls; each distinct one once. */
static uint32_t mf_hframe_of(struct mf_hgraph *w, uint32_t name, uint32_t ref)
{
    uint32_t *known;
    if (ref != UINT32_MAX) { /* the location's frame has the group's name */
        w->by_ref = mf_grow_zeroed(w->by_ref, &w->nby_ref, ref, sizeof *w->by_ref);
        known = &w->by_ref[ref];
    } else {
        w->by_name = mf_grow_zeroed(w->by_name, &w->nby_name, name, sizeof *w->by_name);
        known = &w->by_name[name];
    }
    if (!*known)
        *known = mf_hframe_make(w, name, ref) + 1;
    return *known - 1;
}

static uint32_t mf_hframe_make(struct mf_hgraph *w, uint32_t name, uint32_t ref)
{
    const struct mf_frame *loc = ref == UINT32_MAX ? NULL : &w->ps.ft[ref];
    struct mf_hframe f = {mf_hstring(&w->strs, name), loc ? mf_hstring(&w->strs, loc->file) : 0,
                          loc ? loc->line : 0};
    struct mf_hframe_key k = {w->frames, &f};
    bool added;
    uint32_t id = mf_map_put(&w->frame_ids, mf_hash_u64((uint64_t)f.name << 32 | f.file) ^ f.line,
                             mf_hframe_eq, &k, w->nframes, &added);
    if (added) {
        MF_GROW(w->frames, w->nframes, w->frames_cap);
        w->frames[w->nframes++] = f;
    }
    return id;
}

/* The node `node` (preorder index; 0 the root) holds the stacks order[lo, hi), whose frames
 * agree up to depth d - 1: the stacks that end there, then its children by name, each
 * followed by its own subtree. */
static void mf_hwalk_node(struct mf_hgraph *w, uint32_t node, uint32_t lo, uint32_t hi, uint32_t d)
{
    struct mf_paths *ps = &w->ps;
    const struct mf_model *m = w->m;
    uint32_t nends;
    size_t g0 = mf_paths_partition(ps, lo, hi, d, &nends);
    if (nends) {
        uint64_t calls = 0, bytes = 0, var = 0, live_calls = 0, live_bytes = 0, live_var = 0;
        double live_bytes_var = 0;
        bool estimated = false;
        for (uint32_t i = lo; i < lo + nends; i++) {
            const struct mf_stack *s = &m->stacks[ps->order[i]];
            w->end_node[ps->order[i]] = node;
            calls += s->calls;
            bytes += s->bytes;
            var += s->var;
            estimated |= s->estimated;
            if (w->live && s->raw != UINT32_MAX) {
                const struct mf_live_count *l = &m->p->live[s->raw];
                live_calls += l->calls;
                live_bytes += l->bytes;
                live_var += l->var;
                live_bytes_var += l->bytes_var;
            }
        }
        w->live_calls += live_calls;
        w->live_bytes += live_bytes;
        bool alive = w->live && live_calls; /* most stacks have nothing alive: no numbers */
        if (w->live)
            mf_varint(&w->ends, (uint64_t)(node - w->last_end) << 2 | (uint64_t)alive << 1 | estimated);
        else
            mf_varint(&w->ends, (uint64_t)(node - w->last_end) << 1 | estimated);
        mf_varint(&w->ends, calls);
        mf_varint(&w->ends, bytes);
        if (m->estimated)
            mf_varint(&w->ends, var);
        if (alive) {
            mf_varint(&w->ends, live_calls);
            mf_varint(&w->ends, live_bytes);
            if (m->estimated) {
                mf_varint(&w->ends, live_var);
                mf_varint(&w->ends, mf_var_number(live_bytes_var));
            }
        }
        w->last_end = node;
    }
    size_t ng = ps->ngroups - g0;
    if (ng > 1)
        qsort(ps->groups + g0, ng, sizeof *ps->groups, mf_group_name_cmp);
    /* The children's frames before any child is walked: walking one regroups the frames
     * (ps->cur) that mf_paths_loc reads. */
    if (ps->ngroups > w->frame_of_cap) {
        w->frame_of_cap = ps->ngroups * 2;
        w->frame_of = mf_xrealloc(w->frame_of, w->frame_of_cap * sizeof *w->frame_of);
    }
    for (size_t g = g0; g < ps->ngroups; g++)
        w->frame_of[g] = mf_hframe_of(w, ps->groups[g].name,
                                      mf_paths_loc(ps, ps->groups[g].lo, ps->groups[g].hi, d));
    for (size_t g = g0; g < g0 + ng; g++) {
        const struct mf_group gr = ps->groups[g];
        mf_varint(&w->nodes, w->depth + 1 - (d + 1)); /* levels above the last node's children */
        mf_varint(&w->nodes, w->frame_of[g]);
        w->depth = d + 1;
        mf_hwalk_node(w, ++w->n, gr.lo, gr.hi, d + 1);
    }
    ps->ngroups = g0;
}

/* The graph of m: its stacks walked once, the walk's own state given back after. */
static void mf_hgraph_make(struct mf_hgraph *g, const struct mf_model *m)
{
    memset(g, 0, sizeof *g);
    g->m = m;
    g->live = m->p->live != NULL;
    g->end_node = mf_xmalloc(((size_t)m->nstacks + 1) * sizeof *g->end_node);
    memset(g->end_node, 0xff, ((size_t)m->nstacks + 1) * sizeof *g->end_node);
    mf_paths_build(&g->ps, m, true);
    mf_hwalk_node(g, 0, 0, g->ps.n, 0);
    mf_paths_free(&g->ps);
    mf_map_free(&g->frame_ids);
    free(g->frame_of);
    free(g->by_ref);
    free(g->by_name);
}

static void mf_hgraph_free(struct mf_hgraph *g)
{
    free(g->nodes.s);
    free(g->ends.s);
    free(g->frames);
    free(g->end_node);
    mf_map_free(&g->strs.ids);
    free(g->strs.order);
}

/* ---- the timeline: the chart's series and each point's stacks, by the node they end at -- */

struct mf_hend {
    uint32_t node;
    uint64_t calls, bytes, var;
};

static int mf_hend_cmp(const void *a, const void *b)
{
    const struct mf_hend *x = a, *y = b;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* "timeline": t (the points' borders, seconds from the first's start), calls and bytes (the
 * exact totals per point), sites (the top sites' calls per point: mf_tl_series_build), and
 * ends: per point, node, calls, bytes and variance of the stacks ending at each node, which
 * the page sums over a window instead of the whole run's. */
static void mf_html_timeline(FILE *out, const struct mf_model *m, const struct mf_hgraph *g,
                             const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_timeline *t = v->timeline;
    struct mf_tl_series s;
    mf_tl_series_build(&s, m, t, v->stack_ids, o->top);
    uint64_t t0 = t->points[0].h.start_ns;
    fputs(",\n\"timeline\":{\"t\":[0", out);
    for (uint32_t j = 0; j < t->npoints; j++)
        fprintf(out, ",%.6f", (double)(t->points[j].h.end_ns - t0) / 1e9);
    fputs("],\"calls\":[", out);
    for (uint32_t j = 0; j < t->npoints; j++)
        fprintf(out, "%s%llu", j ? "," : "", (unsigned long long)t->points[j].h.calls);
    fputs("],\"bytes\":[", out);
    for (uint32_t j = 0; j < t->npoints; j++)
        fprintf(out, "%s%llu", j ? "," : "", (unsigned long long)t->points[j].h.bytes);
    fputs("],\n\"sites\":[", out);
    for (uint32_t i = 0; i < s.nsites; i++) {
        fputs(i ? ",{\"name\":" : "{\"name\":", out);
        mf_json_str_in_script(out, mf_str(s.names[i]));
        fputs(",\"calls\":[", out);
        for (uint32_t j = 0; j < s.npoints; j++)
            fprintf(out, "%s%llu", j ? "," : "", (unsigned long long)s.calls[(size_t)i * s.npoints + j]);
        fputs("]}", out);
    }
    fputs("],\n\"ends\":[", out);
    struct mf_hend *e = NULL;
    size_t cap = 0;
    for (uint32_t j = 0; j < t->npoints; j++) {
        const struct mf_tl_pt *pt = &t->points[j];
        if (pt->h.nstacks > cap) {
            cap = pt->h.nstacks;
            e = mf_xrealloc(e, cap * sizeof *e);
        }
        uint32_t n = 0;
        for (uint32_t i = pt->first; i < pt->first + pt->h.nstacks; i++) {
            uint32_t k = s.stack_of[i];
            if (k != UINT32_MAX && g->end_node[k] != UINT32_MAX)
                e[n++] = (struct mf_hend){g->end_node[k], t->recs[i].calls, t->recs[i].bytes,
                                          t->recs[i].var};
        }
        qsort(e, n, sizeof *e, mf_hend_cmp);
        fputs(j ? ",\n[" : "\n[", out);
        for (uint32_t i = 0, first = 1; i < n; first = 0) {
            struct mf_hend sum = e[i];
            while (++i < n && e[i].node == sum.node) {
                sum.calls += e[i].calls;
                sum.bytes += e[i].bytes;
                sum.var += e[i].var;
            }
            fprintf(out, "%s%u,%llu,%llu,%llu", first ? "" : ",",
                    sum.node, (unsigned long long)sum.calls, (unsigned long long)sum.bytes,
                    (unsigned long long)sum.var);
        }
        fputc(']', out);
    }
    fputs("]}", out);
    free(e);
    mf_tl_series_free(&s);
}

static void mf_html_data(FILE *out, const struct mf_model *m, const struct mf_hgraph *g,
                         const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_profile *p = m->p;
    fprintf(out, "{\"version\":1,\"weight\":\"%s\",\"total_calls\":%llu,\"total_bytes\":%llu,"
            "\"interval\":%llu,\"estimated\":%s,",
            o->live ? "live_bytes" : o->weight_bytes ? "bytes" : "calls", /* --live */
            (unsigned long long)mf_profile_total_calls(p),
            (unsigned long long)mf_profile_total_bytes(p),
            (unsigned long long)m->sample_interval, m->estimated ? "true" : "false");
    if (p->live)
        fprintf(out, "\"live\":true,\"live_calls\":%llu,\"live_bytes\":%llu,",
                (unsigned long long)g->live_calls, (unsigned long long)g->live_bytes);
    fputs("\n\"strings\":[", out);
    for (uint32_t i = 0; i < g->strs.n; i++) {
        if (i)
            fputc(',', out);
        if (i % 16 == 0)
            fputc('\n', out);
        mf_json_str_in_script(out, mf_str(g->strs.order[i]));
    }
    fputs("],\n\"frames\":[", out);
    for (uint32_t i = 0; i < g->nframes; i++)
        fprintf(out, "%s%u,%u,%u", i ? "," : "", g->frames[i].name, g->frames[i].file,
                g->frames[i].line);
    fputs("],\n\"nodes\":[\"", out);
    fwrite(g->nodes.s, 1, g->nodes.n, out);
    fputs("\"],\n\"ends\":[\"", out);
    fwrite(g->ends.s, 1, g->ends.n, out);
    fputs("\"]", out);
    if (v->timeline && v->timeline->npoints)
        mf_html_timeline(out, m, g, v, o);
    fputc('}', out);
}

/* ---- the page ------------------------------------------------------------------------- */

bool mf_report_html(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    struct mf_hgraph g;
    mf_hgraph_make(&g, m);
    const char *s = mf_flame_graph_html, *end = mf_flame_graph_html_end;
    bool failed = false;
    while (s < end) {
        const char *hole = memmem(s, (size_t)(end - s), "{{MF:", 5);
        if (!hole) {
            fwrite(s, 1, (size_t)(end - s), out);
            break;
        }
        fwrite(s, 1, (size_t)(hole - s), out);
        const char *name = hole + 5, *close = memmem(name, (size_t)(end - name), "}}", 2);
        size_t len = close ? (size_t)(close - name) : 0;
        if (len == 5 && memcmp(name, "title", 5) == 0) {
            fputs("malloc_freq: ", out);
            const struct mf_profile *p = m->p;
            mf_html_text(out, p->nprocs ? mf_basename(mf_exe(&p->procs[0])) : "?");
            if (p->nprocs == 1)
                fprintf(out, " (pid %u)", p->procs[0].pid);
            else
                fprintf(out, " and more: %u processes", p->nprocs);
        } else if (len == 6 && memcmp(name, "header", 6) == 0) {
            mf_html_header(out, m, o, g.n);
        } else if (len == 4 && memcmp(name, "data", 4) == 0) {
            mf_html_data(out, m, &g, v, o);
        } else {
            mf_error("the HTML template has an unknown hole at byte %td", hole - mf_flame_graph_html);
            failed = true;
            break;
        }
        s = close + 2;
    }
    mf_hgraph_free(&g);
    return failed;
}
