/* --format html: one self-contained HTML file with an interactive flame graph.
 *
 * The page is mf_print/flame_graph/flame_graph.html, built into the binary (the .incbin
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

#include "mf_print.h"
#include "process_life.h"
#include "report.h"

/* The template, as the assembler reads it: make runs the compiler from the top directory. */
#ifndef MF_FLAME_GRAPH_HTML
#define MF_FLAME_GRAPH_HTML "mf_print/flame_graph/flame_graph.html"
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

static const char *const mf_fn_names[] = {MF_FN_NAMES};

/* ---- the prefix tree ------------------------------------------------------------------ */

struct mf_hloc {
    uint32_t file, line;
    uint64_t calls;
};

struct mf_hnode {
    uint32_t name;
    uint32_t *children; /* sorted by name once built */
    uint32_t nchildren, children_cap;
    struct mf_hloc *locs; /* where this function was, with the calls it made there */
    uint32_t nlocs, locs_cap;
    uint32_t frame;       /* index into the emitted frames */
    uint32_t end;         /* index into ends + 1, 0 if no stack ends here */
};

struct mf_hend {
    uint64_t calls, bytes, var;
    uint64_t live_calls, live_bytes, live_var; /* the live heap's, when read (mf_live_attach) */
    double live_bytes_var;
    bool estimated;
};

struct mf_htree {
    struct mf_hnode *nodes; /* nodes[0] is the root ("all") */
    uint32_t n, cap;
    struct mf_hend *ends;
    uint32_t nends, ends_cap;
    struct mf_map child_ids; /* (parent, name) -> node */
};

static uint32_t mf_hchild(struct mf_htree *t, uint32_t parent, uint32_t name)
{
    bool added;
    uint32_t id = mf_map_put(&t->child_ids, (uint64_t)parent << 32 | name, NULL, NULL, t->n,
                             &added);
    if (added) {
        MF_GROW(t->nodes, t->n, t->cap);
        struct mf_hnode *c = &t->nodes[t->n++];
        memset(c, 0, sizeof *c);
        c->name = name;
        struct mf_hnode *p = &t->nodes[parent];
        MF_GROW(p->children, p->nchildren, p->children_cap);
        p->children[p->nchildren++] = id;
    }
    return id;
}

static void mf_hloc_add(struct mf_hnode *x, uint32_t file, uint32_t line, uint64_t calls)
{
    if (!file)
        return;
    for (uint32_t i = 0; i < x->nlocs; i++) {
        if (x->locs[i].file == file && x->locs[i].line == line) {
            x->locs[i].calls += calls;
            return;
        }
    }
    MF_GROW(x->locs, x->nlocs, x->locs_cap);
    x->locs[x->nlocs++] = (struct mf_hloc){file, line, calls};
}

static const struct mf_htree *mf_sort_htree;

static int mf_hchild_cmp(const void *a, const void *b)
{
    const struct mf_hnode *x = &mf_sort_htree->nodes[*(const uint32_t *)a];
    const struct mf_hnode *y = &mf_sort_htree->nodes[*(const uint32_t *)b];
    return strcmp(mf_str(x->name), mf_str(y->name));
}

static void mf_htree_build(struct mf_htree *t, const struct mf_model *m)
{
    memset(t, 0, sizeof *t);
    MF_GROW(t->nodes, t->n, t->cap);
    memset(&t->nodes[t->n++], 0, sizeof *t->nodes);
    struct mf_frames fr = {0};
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        mf_model_frames(m, s, &fr); /* never empty: [no stack] at least */
        uint32_t node = 0;
        for (uint32_t k = fr.n; k-- > 0;) { /* outermost first */
            node = mf_hchild(t, node, fr.v[k].name);
            mf_hloc_add(&t->nodes[node], fr.v[k].file, fr.v[k].line, s->calls);
        }
        if (s->via) { /* the wrapper folded into the site: "[via xmalloc]" above it */
            char buf[4096];
            snprintf(buf, sizeof buf, "[via %s]", mf_str(s->via));
            node = mf_hchild(t, node, mf_intern(buf));
        }
        struct mf_hnode *x = &t->nodes[node];
        if (!x->end) {
            MF_GROW(t->ends, t->nends, t->ends_cap);
            memset(&t->ends[t->nends++], 0, sizeof *t->ends);
            x->end = t->nends;
        }
        struct mf_hend *e = &t->ends[x->end - 1];
        e->calls += s->calls;
        e->bytes += s->bytes;
        e->var += s->var;
        e->estimated |= s->estimated;
        if (m->p->live && s->raw != UINT32_MAX) {
            const struct mf_live_count *l = &m->p->live[s->raw];
            e->live_calls += l->calls;
            e->live_bytes += l->bytes;
            e->live_var += l->var;
            e->live_bytes_var += l->bytes_var;
        }
    }
    free(fr.v);
    mf_map_free(&t->child_ids);
    mf_sort_htree = t;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->nodes[i].nchildren > 1)
            qsort(t->nodes[i].children, t->nodes[i].nchildren, sizeof(uint32_t), mf_hchild_cmp);
}

static void mf_htree_free(struct mf_htree *t)
{
    for (uint32_t i = 0; i < t->n; i++) {
        free(t->nodes[i].children);
        free(t->nodes[i].locs);
    }
    free(t->nodes);
    free(t->ends);
}

/* ---- escaping ------------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one (overlong
 * forms, surrogates and code points past U+10FFFF are not). */
static int mf_utf8_len(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    int n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* Text into HTML (element content or a quoted attribute): markup characters as entities,
 * control characters as spaces, bytes that are not UTF-8 as U+FFFD. */
static void mf_html_text(FILE *out, const char *text)
{
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        uint32_t cp;
        int n = mf_utf8_len(s, &cp);
        if (n == 0) {
            fputs("\xef\xbf\xbd", out);
            s++;
            continue;
        }
        switch (cp) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default:
            if (cp < 0x20 || cp == 0x7f)
                fputc(' ', out);
            else
                fwrite(s, 1, (size_t)n, out);
        }
        s += n;
    }
}

/* A JSON string that is safe inside <script>: no '<', '>' or '&' (so no "</script>" and no
 * "<!--"), no raw control characters or line separators, bytes that are not UTF-8 as
 * U+FFFD. */
static void mf_json_str(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        uint32_t cp;
        int n = mf_utf8_len(s, &cp);
        if (n == 0) {
            fputs("\\ufffd", out);
            s++;
            continue;
        }
        if (cp == '"' || cp == '\\')
            fprintf(out, "\\%c", (char)cp);
        else if (cp < 0x20 || cp == 0x7f || cp == '<' || cp == '>' || cp == '&' ||
                 cp == 0x2028 || cp == 0x2029)
            fprintf(out, "\\u%04x", (unsigned)cp);
        else
            fwrite(s, 1, (size_t)n, out);
        s += n;
    }
    fputc('"', out);
}

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
        running += mf_life(p, i) == MF_LIFE_RUNNING;
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
    const char *sep = "";
    for (int f = 0; f < MF_FN_COUNT; f++) {
        if (!p->totals.calls[f])
            continue;
        char name[32];
        if (f < MF_FN_NAMED)
            snprintf(name, sizeof name, "%s", mf_fn_names[f]);
        else
            snprintf(name, sizeof name, "function #%d", f);
        fprintf(out, "%s%s %s (%s)", sep, name, mf_fmt_count(a, p->totals.calls[f]),
                mf_fmt_bytes(b, (double)p->totals.bytes[f]));
        sep = ", ";
    }
    fputs(*sep ? "</td></tr>\n" : "none</td></tr>\n", out);
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
            mf_fmt_count(a, p->nstacks), mf_fmt_count(b, nstacks),
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
    FILE *out;
    unsigned col; /* a new line now and then keeps the file fit for line tools */
};

static void mf_varint(struct mf_varint *v, uint64_t x)
{
    char buf[16];
    int n = 0;
    buf[n++] = mf_varint_digits[32 + (x & 31)];
    while (x >>= 5)
        buf[n++] = mf_varint_digits[x & 31];
    while (n)
        fputc(buf[--n], v->out);
    if (++v->col % 4096 == 0)
        fputs("\",\n\"", v->out); /* the next string of the array, between two numbers */
}

/* A variance of bytes for the page: a whole number, held below 2^64 (its square root, 4 GiB,
 * is then already far beyond any live site's bytes in a sampled profile). */
static uint64_t mf_var_number(double v)
{
    return v >= 1.8e19 ? (uint64_t)1.8e19 : (uint64_t)(v + 0.5);
}

static void mf_html_data(FILE *out, const struct mf_model *m, struct mf_htree *t,
                         const struct mf_report_options *o)
{
    /* Frames: each distinct (function, location) once. */
    struct mf_hstrings strs = {0};
    struct mf_map frame_ids = {0};
    struct mf_hframe *frames = NULL;
    uint32_t nframes = 0, frames_cap = 0;
    for (uint32_t i = 1; i < t->n; i++) {
        struct mf_hnode *x = &t->nodes[i];
        const struct mf_hloc *best = NULL;
        for (uint32_t k = 0; k < x->nlocs; k++)
            if (!best || x->locs[k].calls > best->calls)
                best = &x->locs[k];
        struct mf_hframe f = {mf_hstring(&strs, x->name), best ? mf_hstring(&strs, best->file) : 0,
                              best ? best->line : 0};
        struct mf_hframe_key k = {frames, &f};
        bool added;
        x->frame = mf_map_put(&frame_ids, mf_hash_u64((uint64_t)f.name << 32 | f.file) ^ f.line,
                              mf_hframe_eq, &k, nframes, &added);
        if (added) {
            MF_GROW(frames, nframes, frames_cap);
            frames[nframes++] = f;
        }
    }
    mf_map_free(&frame_ids);

    const struct mf_profile *p = m->p;
    bool live = p->live != NULL;
    uint64_t live_calls = 0, live_bytes = 0;
    for (uint32_t i = 0; live && i < t->nends; i++) {
        live_calls += t->ends[i].live_calls;
        live_bytes += t->ends[i].live_bytes;
    }
    fprintf(out, "{\"version\":1,\"weight\":\"%s\",\"total_calls\":%llu,\"total_bytes\":%llu,"
            "\"interval\":%llu,\"estimated\":%s,",
            mf_live_wanted ? "live_bytes" : o->weight_bytes ? "bytes" : "calls", /* --live */
            (unsigned long long)mf_profile_total_calls(p),
            (unsigned long long)mf_profile_total_bytes(p),
            (unsigned long long)m->sample_interval, m->estimated ? "true" : "false");
    if (live)
        fprintf(out, "\"live\":true,\"live_calls\":%llu,\"live_bytes\":%llu,",
                (unsigned long long)live_calls, (unsigned long long)live_bytes);
    fputs("\n\"strings\":[", out);
    for (uint32_t i = 0; i < strs.n; i++) {
        if (i)
            fputc(',', out);
        if (i % 16 == 0)
            fputc('\n', out);
        mf_json_str(out, mf_str(strs.order[i]));
    }
    fputs("],\n\"frames\":[", out);
    for (uint32_t i = 0; i < nframes; i++)
        fprintf(out, "%s%u,%u,%u", i ? "," : "", frames[i].name, frames[i].file, frames[i].line);

    /* The nodes in preorder, children by name. */
    uint32_t *order = mf_xmalloc((size_t)t->n * sizeof *order);
    uint32_t *depth = mf_xmalloc((size_t)t->n * sizeof *depth);
    uint32_t *stack = mf_xmalloc((size_t)t->n * sizeof *stack);
    uint32_t norder = 0, nstack = 0;
    depth[0] = 0;
    stack[nstack++] = 0;
    while (nstack) {
        uint32_t i = stack[--nstack];
        order[norder++] = i;
        const struct mf_hnode *x = &t->nodes[i];
        for (uint32_t k = x->nchildren; k-- > 0;) {
            depth[x->children[k]] = depth[i] + 1;
            stack[nstack++] = x->children[k];
        }
    }
    fputs("],\n\"nodes\":[\"", out);
    struct mf_varint v = {out, 0};
    for (uint32_t k = 1; k < norder; k++) { /* order[0] is the root */
        mf_varint(&v, depth[order[k - 1]] + 1 - depth[order[k]]);
        mf_varint(&v, t->nodes[order[k]].frame);
    }
    fputs("\"],\n\"ends\":[\"", out);
    v.col = 0;
    uint32_t last = 0;
    for (uint32_t k = 1; k < norder; k++) {
        const struct mf_hnode *x = &t->nodes[order[k]];
        if (!x->end)
            continue;
        const struct mf_hend *e = &t->ends[x->end - 1];
        bool alive = live && e->live_calls; /* most stacks have nothing alive: no numbers */
        if (live)
            mf_varint(&v, (uint64_t)(k - last) << 2 | (uint64_t)alive << 1 | e->estimated);
        else
            mf_varint(&v, (uint64_t)(k - last) << 1 | e->estimated);
        mf_varint(&v, e->calls);
        mf_varint(&v, e->bytes);
        if (m->estimated)
            mf_varint(&v, e->var);
        if (alive) {
            mf_varint(&v, e->live_calls);
            mf_varint(&v, e->live_bytes);
            if (m->estimated) {
                mf_varint(&v, e->live_var);
                mf_varint(&v, mf_var_number(e->live_bytes_var));
            }
        }
        last = k;
    }
    fputs("\"]}", out);
    free(order);
    free(depth);
    free(stack);
    free(frames);
    mf_map_free(&strs.ids);
    free(strs.order);
}

/* ---- the page ------------------------------------------------------------------------- */

bool mf_report_html(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    struct mf_htree t;
    mf_htree_build(&t, m);
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
            mf_html_header(out, m, o, t.n - 1);
        } else if (len == 4 && memcmp(name, "data", 4) == 0) {
            mf_html_data(out, m, &t, o);
        } else {
            mf_error("the HTML template has an unknown hole at byte %td", hole - mf_flame_graph_html);
            failed = true;
            break;
        }
        s = close + 2;
    }
    mf_htree_free(&t);
    return failed;
}
