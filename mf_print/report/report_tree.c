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

#include "mf_math.h"
#include "mf_print.h"
#include "names.h"
#include "process_life.h"
#include "report.h"

/* The relative standard errors of an estimate, in percent (mf_calls_se, mf_bytes_se). */
static double mf_rel_error_pct(uint64_t calls, uint64_t var, uint64_t interval)
{
    return calls ? 100.0 * mf_calls_se(calls, var, interval) / (double)calls : 0;
}

static double mf_bytes_error_pct(uint64_t calls, uint64_t bytes, double var, uint64_t interval)
{
    return bytes ? 100.0 * mf_bytes_se(calls, bytes, var, interval) / (double)bytes : 0;
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
    uint32_t depth, top; /* --depth (0: all levels), --top */
    bool full_names; /* --full-names: names as demangled, not shortened (names.h) */
    uint64_t total;  /* exact calls: the 100 % */
    uint64_t interval; /* the sample interval behind the estimates */
    int calls_width; /* widest calls column text */
    bool err_column; /* some number is an estimate */
    bool compact;    /* a narrow terminal: counts as "1.2M", no bytes error column */
    char *prefix;    /* tree glyphs of the current line's ancestors */
    size_t prefix_len, prefix_cap;
};

static void mf_line(struct mf_tree_ctx *c, uint64_t calls, uint64_t var, uint64_t bytes,
                    double bytes_var, bool estimated, const char *glyph, const char *text,
                    const struct mf_loc *loc)
{
    char num[40], calls_s[48], err[32] = "", bytes_err[32] = "", bytes_s[32], pct[32];
    snprintf(calls_s, sizeof calls_s, "%s%s", estimated ? "~" : "",
             c->compact ? mf_fmt_compact(num, calls) : mf_fmt_count(num, calls));
    if (estimated) {
        mf_fmt_error(err, sizeof err, mf_rel_error_pct(calls, var, c->interval));
        mf_fmt_error(bytes_err, sizeof bytes_err,
                     mf_bytes_error_pct(calls, bytes, bytes_var, c->interval));
    }
    snprintf(pct, sizeof pct, "%.2f%%", c->total ? (double)calls * 100.0 / (double)c->total : 0.0);
    mf_fmt_bytes(bytes_s, (double)bytes);
    mf_pad(c->out, c->calls_width - mf_text_width(calls_s));
    fputs(calls_s, c->out);
    if (c->err_column) {
        fputc(' ', c->out);
        fputs(err, c->out);
        mf_pad(c->out, 7 - mf_text_width(err));
    }
    fprintf(c->out, " %*s %10s", c->compact ? 7 : 8, pct, bytes_s);
    if (c->err_column && !c->compact) { /* always 7 wide: the tree's glyphs follow */
        fputc(' ', c->out);
        fputs(bytes_err, c->out);
        mf_pad(c->out, 7 - mf_text_width(bytes_err));
    }
    fprintf(c->out, "  %.*s%s%s", (int)c->prefix_len, c->prefix, glyph, text);
    if (loc)
        fprintf(c->out, " (%s:%u)", mf_esc(mf_basename(mf_str(loc->file))), loc->line);
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

/* Whether the i-th largest child of a node is folded: under the threshold, unless it is
 * one of the --top largest entries of the top level (shown, not expanded: the tree was
 * built to the threshold). */
static bool mf_folded(const struct mf_tree_ctx *c, bool top, uint32_t i, uint64_t calls)
{
    return mf_below(c, calls) && !(top && i < c->top);
}

/* A node's function as the tree shows it: shortened unless --full-names, a site with the
 * wrapper folded into it ("parse_args via xmalloc"). */
static const char *mf_node_text(const struct mf_tree_ctx *c, const struct mf_node *x)
{
    uint32_t name = c->full_names ? x->name : mf_short_name(x->name);
    if (!x->via)
        return mf_str(name);
    uint32_t via = c->full_names ? x->via : mf_short_name(x->via);
    static char *buf;
    static size_t cap;
    size_t need = strlen(mf_str(name)) + strlen(mf_str(via)) + 6;
    if (need > cap) {
        cap = need * 2;
        buf = mf_xrealloc(buf, cap);
    }
    snprintf(buf, cap, "%s via %s", mf_str(name), mf_str(via));
    return buf;
}

/* One node whose children are being printed: the next child to look at, the lines still to
 * come (for the last one's glyph), what is folded, and the prefix to go back to after it. */
struct mf_level {
    uint32_t node, next, lines, folded;
    uint64_t f_calls, f_bytes, f_var;
    double f_bytes_var;
    bool f_est;
    size_t restore;
};

static void mf_level_init(const struct mf_tree_ctx *c, struct mf_level *l, uint32_t node,
                          size_t restore)
{
    const struct mf_node *n = &c->t->nodes[node];
    memset(l, 0, sizeof *l);
    l->node = node;
    l->restore = restore;
    uint32_t shown = 0;
    for (uint32_t i = 0; i < n->nchildren; i++) { /* sorted: the small ones are at the end */
        const struct mf_node *x = &c->t->nodes[n->children[i]];
        if (!mf_folded(c, node == 0, i, x->calls)) {
            shown++;
            continue;
        }
        l->folded++;
        l->f_calls += x->calls;
        l->f_bytes += x->bytes;
        l->f_var += x->var;
        l->f_bytes_var += x->bytes_var;
        l->f_est |= x->estimated;
    }
    l->lines = shown + (l->folded ? 1 : 0);
}

/* Prints the tree below the root, depth first; top-level entries (the root's children) get
 * no glyph. A loop with a stack of its own, not recursion: a stack is up to 512 return
 * addresses, each of which may expand into many inlined frames. */
static void mf_children(struct mf_tree_ctx *c)
{
    struct mf_level *st = NULL;
    uint32_t depth = 0, cap = 0;
    MF_GROW(st, depth, cap);
    mf_level_init(c, &st[depth++], 0, c->prefix_len);
    while (depth) {
        struct mf_level *l = &st[depth - 1];
        const struct mf_node *n = &c->t->nodes[l->node];
        bool top = l->node == 0;
        if (l->next < n->nchildren) {
            uint32_t i = l->next++, child = n->children[i];
            const struct mf_node *x = &c->t->nodes[child];
            if (mf_folded(c, top, i, x->calls))
                continue;
            bool last = --l->lines == 0;
            mf_line(c, x->calls, x->var, x->bytes, x->bytes_var, x->estimated,
                    top ? "" : last ? "└─ " : "├─ ", mf_esc(mf_node_text(c, x)), mf_node_loc(x));
            if (c->depth && depth >= c->depth) /* --depth: its callers are not shown */
                continue;
            size_t saved = c->prefix_len;
            if (!top)
                mf_prefix_push(c, last ? "   " : "│  ");
            MF_GROW(st, depth, cap);
            mf_level_init(c, &st[depth++], child, saved);
            continue;
        }
        if (l->folded) {
            char text[64];
            snprintf(text, sizeof text, "… %u %s below %g%%", l->folded,
                     top ? "more entries" : "more", c->threshold);
            mf_line(c, l->f_calls, l->f_var, l->f_bytes, l->f_bytes_var, l->f_est, top ? "" : "└─ ", text, NULL);
        }
        c->prefix_len = l->restore;
        depth--;
    }
    free(st);
}

bool mf_put_functions(FILE *out, const struct mf_profile *p, const char *first)
{
    char name[32], calls[40], bytes[40];
    const char *sep = first;
    for (int f = 0; f < MF_FN_COUNT; f++) {
        if (!p->totals.calls[f])
            continue;
        fprintf(out, "%s%s %s (%s)", sep, mf_fn_label(name, sizeof name, f),
                mf_fmt_count(calls, p->totals.calls[f]),
                mf_fmt_bytes(bytes, (double)p->totals.bytes[f]));
        sep = ", ";
    }
    return sep != first;
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

/* How the run was sampled, as each process's file says (mf_sampling_text: the exact
 * stretch as it really went), then what the marks below mean. */
static void mf_print_sampling(FILE *out, const struct mf_profile *p, const struct mf_tree *t)
{
    char text[512];
    mf_sampling_text(p, text, sizeof text);
    bool all_exact_mode = true;
    for (uint32_t i = 0; i < p->nprocs; i++)
        all_exact_mode &= !p->procs[i].has_file || p->procs[i].sample_interval == 1;
    fprintf(out, "  sampling   %s", text);
    if (t->estimated)
        fputs("\n             ~ marks estimates, ± their relative standard error", out);
    else if (!all_exact_mode)
        fputs("\n             every count below is exact (every call was recorded)",
              out);
    fputc('\n', out);
}

static const char *mf_exe(const struct mf_process *pr)
{
    return pr->has_file && pr->exe[0] ? pr->exe : "?";
}

/* CPython's pymalloc serves small objects from pools of its own, which never call malloc:
 * a profile of a Python program without PYTHONMALLOC=malloc holds a small fraction of its
 * allocations (a script: 4,809 calls with pymalloc, 6.56 M without), and says so. */
static void mf_print_python(FILE *out, const struct mf_profile *p)
{
    uint32_t with = 0, without = 0;
    const char *name = NULL;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        if (!pr->has_file || strncmp(mf_basename(pr->exe), "python", 6) != 0)
            continue;
        name = mf_basename(pr->exe);
        if (pr->flags & MF_PROCESS_PYTHONMALLOC)
            with++;
        else
            without++;
    }
    if (without)
        fprintf(out, "  python     %s%s ran with pymalloc: most object allocations never reach "
                     "malloc and are not counted; PYTHONMALLOC=malloc counts them (the launcher "
                     "sets it)\n", name, with ? " (some processes)" : "");
    else if (with)
        fprintf(out, "  python     %s ran with PYTHONMALLOC=malloc: every object allocation is "
                     "a malloc call, counted here\n", name);
}

/* What the transform stage did besides trimming (transform.h), and how to undo it. */
static void mf_print_transforms(FILE *out, const struct mf_tree *t)
{
    char a[40], b[40], c[40];
    const struct mf_transform_counts *x = &t->transformed;
    if (x->folded_stacks)
        fprintf(out, "  folded     wrappers into their callers in %s stacks: \"site via wrapper\" "
                "(--no-fold)\n", mf_fmt_count(a, x->folded_stacks));
    if (x->found_wrappers)
        fprintf(out, "  found      %s of them without a name, by their calls, in %s stacks "
                "(docs/reports.md)\n", mf_fmt_count(a, x->found_wrappers),
                mf_fmt_count(b, x->found_stacks));
    if (x->cut_stacks)
        fprintf(out, "  cut        start-up frames: stacks start at main or the thread's start "
                "(--full-stacks)\n");
    if (x->hidden_frames)
        fprintf(out, "  hidden     %s frames matching --hide, in %s stacks of %s%s calls\n",
                mf_fmt_count(a, x->hidden_frames), mf_fmt_count(b, x->hidden_stacks),
                t->estimated ? "~" : "", mf_fmt_count(c, x->hidden_calls));
}

/* A process still running when read: its files were read as they were being written. */
static void mf_print_running(FILE *out, const struct mf_profile *p)
{
    uint32_t running = 0, first = 0;
    for (uint32_t i = 0; i < p->nprocs; i++)
        if (mf_process_running(p, i) && !running++)
            first = p->procs[i].pid;
    if (running == 1 && p->nprocs == 1)
        fprintf(out, "  running    pid %u was still running when read: every count is a snapshot of "
                "that moment\n", first);
    else if (running)
        fprintf(out, "  running    %u of the %u processes were still running when read (pid %u%s): "
                "every count is a snapshot of that moment\n", running, p->nprocs, first,
                running > 1 ? ", ..." : "");
}

/* What shares are of: the exact total; or the stacks' sum where they hold more calls than
 * it, counted exactly (calls the threads had not yet added to their totals when the files
 * were read or the process was killed: they do every MF_FLUSH_CALLS calls), or estimated
 * so high that a site would show above 100 %. */
static uint64_t mf_share_base(const struct mf_model *m, const struct mf_tree *t)
{
    uint64_t total = m->view_calls, stacks = t->nodes[0].calls;
    if (stacks <= total)
        return total;
    if (!t->estimated)
        return stacks;
    for (uint32_t i = 0; i < t->nodes[0].nchildren; i++)
        if (t->nodes[t->nodes[0].children[i]].calls > total)
            return stacks;
    return total;
}

static void mf_print_above_total(FILE *out, const struct mf_model *m, const struct mf_tree *t)
{
    uint64_t total = m->view_calls, base = mf_share_base(m, t);
    if (base == total)
        return;
    char a[40], b[40], c[40];
    if (t->estimated)
        fprintf(out, "  note       the stacks' estimates add up to %s calls, more than the exact %s;"
                " shares below are of %s\n", mf_fmt_count(a, base), mf_fmt_count(b, total),
                mf_fmt_count(a, base));
    else
        fprintf(out, "  note       the stacks hold %s calls, more than the exact total %s (a thread "
                "adds to its total every %s calls: a live or killed process); shares below are "
                "of %s\n", mf_fmt_count(a, base), mf_fmt_count(b, total),
                mf_fmt_count(c, MF_FLUSH_CALLS), mf_fmt_count(a, base));
}

static void mf_print_header(FILE *out, const struct mf_model *m, const struct mf_tree *t,
                            const struct mf_report_options *o)
{
    const struct mf_profile *p = m->p;
    char a[40], b[40];
    fprintf(out, "malloc_freq report: %s", mf_esc(o->dirs[0]));
    if (o->ndirs > 1)
        fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
    if (p->ndirs_read != (uint32_t)o->ndirs) /* run directories, or a tree of them */
        fprintf(out, " (%u process director%s)", p->ndirs_read, p->ndirs_read == 1 ? "y" : "ies");
    if (o->program)
        fprintf(out, ", program %s", mf_esc(o->program));
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
        fprintf(out, "%s%s", shown ? ", " : "", mf_esc(exe));
        shown++;
    }
    if (p->nprocs == 1)
        fprintf(out, " (pid %u)", p->procs[0].pid);
    fputc('\n', out);

    fprintf(out, "  calls      %s (exact), %s requested\n",
            mf_fmt_count(a, mf_profile_total_calls(p)),
            mf_fmt_bytes(b, (double)mf_profile_total_bytes(p)));
    fputs("  functions ", out);
    fputs(mf_put_functions(out, p, " ") ? "\n" : " none\n", out);
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
    mf_print_running(out, p);
    mf_print_sampling(out, p, t);
    mf_print_python(out, p);
    fprintf(out, "  stacks     %s distinct, %s after %smerging by function\n",
            mf_fmt_count(a, t->raw_stacks), mf_fmt_count(b, t->merged_stacks),
            o->trim ? "trimming allocator frames and " : "");
    mf_print_transforms(out, t);
    mf_print_above_total(out, m, t);
}

void mf_tree_print(FILE *out, const struct mf_model *m, const struct mf_tree *t,
                   const struct mf_report_options *o)
{
    bool live = m->view == MF_VIEW_LIVE;
    struct mf_tree_ctx c = {.out = out, .t = t, .threshold = o->threshold, .depth = o->depth,
                            .top = o->top, .full_names = o->full_names};
    c.total = mf_share_base(m, t); /* never a share above 100 % */
    if (live)
        mf_report_live_header(out, m, o);
    else
        mf_print_header(out, m, t, o);
    fputc('\n', out);
    if (t->nodes[0].nchildren == 0) {
        fputs(live ? "nothing alive\n" : "no stacks recorded\n", out);
        return;
    }
    char num[40];
    uint64_t widest = c.total > t->nodes[0].calls ? c.total : t->nodes[0].calls;
    /* Below 120 columns the numbers would take the room of the names and lines. */
    c.compact = mf_narrow(o);
    c.calls_width = (int)strlen(c.compact ? mf_fmt_compact(num, widest) : mf_fmt_count(num, widest)) +
                    (t->estimated ? 1 : 0);
    if (c.calls_width < 5)
        c.calls_width = 5;
    c.err_column = t->estimated;
    c.interval = t->sample_interval;
    mf_pad(out, c.calls_width - 5);
    fputs(live ? "alive" : "calls", out);
    if (c.err_column) /* as wide as a line's " ±NN%" and its padding: 8 */
        fputs(" ±error ", out);
    fprintf(out, " %*s %10s%s  %s\n", c.compact ? 7 : 8, "%", "bytes",
            c.err_column && !c.compact ? " ±error " : "", "allocation site, then its callers");
    mf_children(&c);
    free(c.prefix);
}

bool mf_report_tree(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    bool live = m->view == MF_VIEW_LIVE;
    struct mf_tree tree;
    struct mf_model tree_model = *m;
    if (live) /* the tree shows what is alive; the lifetimes table what was freed too */
        mf_model_keep_counted(&tree_model);
    mf_tree_build(&tree, &tree_model, o->threshold, m->view_calls);
    mf_tree_print(out, m, &tree, o);
    mf_tree_free(&tree);
    if (live) {
        free(tree_model.stacks);
        mf_report_lifetimes(out, m, o);
    }
    struct mf_unresolved_list u = {0};
    mf_unresolved_add(&u, m);
    mf_report_unresolved(out, &u, o);
    return false;
}

/* --by program: a table of the programs, then a section per program with its own header. */
bool mf_report_tree_by_program(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_profile *p = v->p;
    struct mf_program *progs;
    uint32_t n = mf_programs(p, &progs);
    uint64_t total = mf_profile_total_calls(p);
    char a[40], b[40];
    fprintf(out, "malloc_freq report by program: %s", mf_esc(o->dirs[0]));
    if (o->ndirs > 1)
        fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
    fprintf(out, " (%u process director%s)\n", p->ndirs_read, p->ndirs_read == 1 ? "y" : "ies");
    fprintf(out, "  calls      %s (exact) in %u program%s, %u process image%s; each section's "
            "%% is of its program's calls\n\n", mf_fmt_count(a, total), n, n == 1 ? "" : "s",
            p->nprocs, p->nprocs == 1 ? "" : "s");
    int width = (int)strlen(mf_fmt_count(a, total));
    width = width < 5 ? 5 : width;
    fprintf(out, "%*s %8s %10s %9s  program\n", width, "calls", "%", "bytes", "processes");
    for (uint32_t i = 0; i < n; i++)
        fprintf(out, "%*s %7.2f%% %10s %9u  %s\n", width, mf_fmt_count(a, progs[i].calls),
                total ? (double)progs[i].calls * 100.0 / (double)total : 0.0,
                mf_fmt_bytes(b, (double)progs[i].bytes), progs[i].nprocs, mf_esc(progs[i].name));
    free(progs);
    struct mf_unresolved_list u = {0};
    for (uint32_t i = 0; i < v->nparts; i++) {
        const struct mf_model *m = v->parts[i];
        struct mf_report_options so = *o;
        so.program = v->part_names[i];
        struct mf_tree tree;
        mf_tree_build(&tree, m, o->threshold, m->view_calls);
        fputs("\n\n", out);
        mf_tree_print(out, m, &tree, &so);
        mf_tree_free(&tree);
        mf_unresolved_add(&u, m);
    }
    mf_report_unresolved(out, &u, o);
    return false;
}
