/* --check RULES: allocation budgets (docs/budgets.md). Each rule bounds a count of the
 * profile, or with --base its growth from OLD to NEW; the verdict lists every rule, diff
 * style: a broken rule as "-" the rule, "+" what was measured and by how much it is over.
 * An estimate (a sampled profile) breaks a rule only when it is beyond its error bar: more
 * than MF_CHECK_SIGMAS standard errors past the limit, the comparison's significance rule
 * (diff.h); exact counts compare exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "names.h"
#include "report.h"
#include "text.h"

/* ---- the rules' grammar -------------------------------------------------------------
 *
 *   rule     := quantity [ "(" function ")" ] bound
 *   quantity := calls | bytes | live_calls | live_bytes
 *   bound    := ( "<=" | "<" | ">=" | ">" | "==" ) number   a limit
 *             | "+" number [ "%" ]                          growth allowed (--base)
 *   number   := digits [ "." digits ] [ k | M | G | Ki | Mi | Gi ] [ B ]
 *
 * Rules are separated by newlines or ';'; '#' starts a comment. */

static const char *const mf_check_qty_names[] = {"calls", "bytes", "live_calls", "live_bytes"};
static const char *const mf_check_op_names[] = {"<=", "<", ">=", ">", "=="};

struct mf_check_cursor {
    const char *rule, *p; /* the rule (its first character) and where parsing is */
    const char *where;    /* "--check" or "FILE:LINE" */
    char *err;
    size_t errsize;
};

static bool mf_check_fail(struct mf_check_cursor *c, const char *why)
{
    size_t len = strcspn(c->rule, ";\n#");
    while (len && (c->rule[len - 1] == ' ' || c->rule[len - 1] == '\t'))
        len--;
    char *rule = mf_xmalloc(len + 1);
    memcpy(rule, c->rule, len);
    rule[len] = '\0';
    snprintf(c->err, c->errsize, "%s: rule '%s', column %d: %s", c->where, rule,
             (int)(c->p - c->rule) + 1, why);
    free(rule);
    return false;
}

static void mf_check_blanks(struct mf_check_cursor *c)
{
    while (*c->p == ' ' || *c->p == '\t')
        c->p++;
}

static bool mf_check_number(struct mf_check_cursor *c, double *out)
{
    const char *start = c->p;
    double v = 0;
    bool digits = false;
    for (; *c->p >= '0' && *c->p <= '9'; c->p++, digits = true)
        v = v * 10 + (*c->p - '0');
    if (*c->p == '.') {
        double scale = 0.1;
        for (c->p++; *c->p >= '0' && *c->p <= '9'; c->p++, digits = true, scale /= 10)
            v += (*c->p - '0') * scale;
    }
    if (!digits) {
        c->p = start;
        return mf_check_fail(c, "expected a number (1000, 2.5k, 64KiB)");
    }
    static const struct {
        const char *suffix;
        double factor;
    } units[] = {{"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0},
                 {"k", 1e3},     {"K", 1e3},        {"M", 1e6},
                 {"G", 1e9}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strncmp(c->p, units[i].suffix, strlen(units[i].suffix)) == 0) {
            v *= units[i].factor;
            c->p += strlen(units[i].suffix);
            break;
        }
    if (*c->p == 'B')
        c->p++;
    if (v > 1.8e19) /* also infinity */
        return mf_check_fail(c, "the number is too large");
    *out = v;
    return true;
}

/* One rule at c->p (blanks skipped), up to its end: ';', a newline, '#' or the end. */
static bool mf_check_rule(struct mf_check_cursor *c, struct mf_check_rule *r)
{
    memset(r, 0, sizeof *r);
    size_t n = 0;
    while ((c->p[n] >= 'a' && c->p[n] <= 'z') || c->p[n] == '_')
        n++;
    r->qty = MF_CHECK_NQTY;
    for (int q = 0; q < MF_CHECK_NQTY; q++)
        if (n == strlen(mf_check_qty_names[q]) && strncmp(c->p, mf_check_qty_names[q], n) == 0)
            r->qty = (enum mf_check_qty)q;
    if (r->qty == MF_CHECK_NQTY)
        return mf_check_fail(c, "expected calls, bytes, live_calls or live_bytes");
    c->p += n;
    mf_check_blanks(c);
    if (*c->p == '(') {
        const char *name = ++c->p;
        int depth = 1; /* a C++ name has parentheses of its own: f(int) */
        for (; *c->p && *c->p != '\n' && depth; c->p++)
            depth += *c->p == '(' ? 1 : *c->p == ')' ? -1 : 0;
        if (depth)
            return mf_check_fail(c, "expected ')' after the function's name");
        size_t len = (size_t)(c->p - 1 - name);
        while (len && (*name == ' ' || *name == '\t'))
            name++, len--;
        while (len && (name[len - 1] == ' ' || name[len - 1] == '\t'))
            len--;
        if (!len) {
            c->p = name;
            return mf_check_fail(c, "expected a function's name between the parentheses");
        }
        r->function = mf_xmalloc(len + 1);
        memcpy(r->function, name, len);
        r->function[len] = '\0';
        mf_check_blanks(c);
    }
    if (*c->p == '+') {
        c->p++;
        mf_check_blanks(c);
        r->op = MF_CHECK_GROW;
        if (!mf_check_number(c, &r->limit))
            return false;
        if (*c->p == '%') {
            r->percent = true;
            c->p++;
        }
    } else {
        r->op = MF_CHECK_NOPS;
        for (int o = 0; o < MF_CHECK_NOPS; o++) /* "<=" before "<" */
            if (strncmp(c->p, mf_check_op_names[o], strlen(mf_check_op_names[o])) == 0) {
                r->op = (enum mf_check_op)o;
                c->p += strlen(mf_check_op_names[o]);
                break;
            }
        if (r->op == MF_CHECK_NOPS)
            return mf_check_fail(c, "expected <=, <, >=, >, == or +N% (growth, with --base)");
        mf_check_blanks(c);
        if (!mf_check_number(c, &r->limit))
            return false;
    }
    mf_check_blanks(c);
    if (*c->p && *c->p != ';' && *c->p != '\n' && *c->p != '#')
        return mf_check_fail(c, "expected the end of the rule (';' or a new line)");
    size_t len = (size_t)(c->p - c->rule);
    while (len && (c->rule[len - 1] == ' ' || c->rule[len - 1] == '\t'))
        len--;
    r->text = mf_xmalloc(len + 1);
    memcpy(r->text, c->rule, len);
    r->text[len] = '\0';
    return true;
}

bool mf_check_parse(struct mf_check *chk, const char *text, const char *file, char *err,
                    size_t errsize)
{
    char where[600];
    unsigned line = 1;
    struct mf_check_cursor c = {.p = text, .where = where, .err = err, .errsize = errsize};
    for (;;) {
        while (*c.p == ' ' || *c.p == '\t' || *c.p == ';' || *c.p == '\n' || *c.p == '\r') {
            line += *c.p == '\n';
            c.p++;
        }
        if (*c.p == '#') {
            c.p += strcspn(c.p, "\n");
            continue;
        }
        if (!*c.p)
            return true;
        if (file)
            snprintf(where, sizeof where, "%s:%u", file, line);
        else
            snprintf(where, sizeof where, "--check");
        c.rule = c.p;
        chk->v = mf_xrealloc(chk->v, (chk->n + 1) * sizeof *chk->v);
        if (!mf_check_rule(&c, &chk->v[chk->n]))
            return false;
        chk->n++;
    }
}

bool mf_check_has(const struct mf_check *chk, bool growth, bool live)
{
    for (uint32_t i = 0; i < chk->n; i++)
        if ((growth && chk->v[i].op == MF_CHECK_GROW) ||
            (live && (chk->v[i].qty == MF_CHECK_LIVE_CALLS || chk->v[i].qty == MF_CHECK_LIVE_BYTES)))
            return true;
    return false;
}

/* ---- measuring ---------------------------------------------------------------------- */

/* A count as measured: its value and standard error (0 when exact). */
struct mf_check_val {
    double value, se;
    bool estimated;
};

/* Whether a site's name is the function a rule names: the name as the CSV shows it, as the
 * tree shows it (generic arguments collapsed), or without its parameter list. */
static bool mf_check_names(uint32_t site, const char *function)
{
    const char *name = mf_str(site);
    size_t n = strlen(function);
    return strcmp(name, function) == 0 || strcmp(mf_str(mf_short_name(site)), function) == 0 ||
           (strncmp(name, function, n) == 0 && name[n] == '(');
}

/* The rule's quantity in model m of profile p (totals: the exact calls and bytes). */
static struct mf_check_val mf_check_measure(const struct mf_model *m, const struct mf_check_rule *r,
                                            uint64_t total_calls, uint64_t total_bytes)
{
    const struct mf_profile *p = m->p;
    bool live = r->qty == MF_CHECK_LIVE_CALLS || r->qty == MF_CHECK_LIVE_BYTES;
    if (!r->function && !live)
        return (struct mf_check_val){
            (double)(r->qty == MF_CHECK_CALLS ? total_calls : total_bytes), 0, false};
    uint64_t calls = 0, bytes = 0, var = 0;
    double bytes_var = 0;
    bool estimated = false;
    struct mf_frames fr = {0};
    struct mf_map seen = {0}; /* site name -> 1 + whether it matches */
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        if (r->function) {
            mf_model_frames(m, s, &fr);
            if (!fr.n)
                continue;
            uint32_t site = fr.v[0].name, hit = mf_map_get(&seen, site, NULL, NULL);
            if (hit == UINT32_MAX) {
                bool added;
                hit = mf_check_names(site, r->function);
                mf_map_put(&seen, site, NULL, NULL, hit, &added);
            }
            if (!hit)
                continue;
        }
        if (live) {
            if (s->raw == UINT32_MAX)
                continue;
            const struct mf_live_count *l = &p->live[s->raw];
            calls += l->calls;
            bytes += l->bytes;
            var += l->var;
            bytes_var += l->bytes_var;
            estimated |= l->var != 0 || l->bytes_var != 0;
        } else {
            calls += s->calls;
            bytes += s->bytes;
            var += s->var;
            bytes_var += s->bytes_var;
            estimated |= s->estimated;
        }
    }
    mf_map_free(&seen);
    free(fr.v);
    uint64_t interval = estimated ? m->sample_interval : 1;
    bool c = r->qty == MF_CHECK_CALLS || r->qty == MF_CHECK_LIVE_CALLS;
    return (struct mf_check_val){(double)(c ? calls : bytes),
                                 !estimated ? 0
                                 : c        ? mf_calls_se(calls, var, interval)
                                            : mf_bytes_se(calls, bytes, bytes_var, interval),
                                 estimated};
}

/* ---- the verdict -------------------------------------------------------------------- */

static const char *mf_check_num(char *buf, double v)
{
    return mf_fmt_count(buf, v <= 0 ? 0 : (uint64_t)(v + 0.5));
}

/* "1,234" or "1,234 ± 56 (estimated)" */
static void mf_check_put_val(FILE *out, struct mf_check_val v)
{
    char a[40], b[40];
    if (v.estimated)
        fprintf(out, "%s ± %s (estimated)", mf_check_num(a, v.value), mf_check_num(b, v.se));
    else
        fputs(mf_check_num(a, v.value), out);
}

/* Whether value v breaks the bound op limit: beyond MF_CHECK_SIGMAS standard errors of it
 * (0 when exact). */
static bool mf_check_breaks(enum mf_check_op op, double limit, struct mf_check_val v)
{
    double lo = v.value - MF_CHECK_SIGMAS * v.se, hi = v.value + MF_CHECK_SIGMAS * v.se;
    switch (op) {
    case MF_CHECK_LE:
        return lo > limit;
    case MF_CHECK_LT:
        return lo >= limit;
    case MF_CHECK_GE:
        return hi < limit;
    case MF_CHECK_GT:
        return hi <= limit;
    case MF_CHECK_EQ:
        return lo > limit || hi < limit;
    default:
        return false;
    }
}

/* " over by 523 (52.3 %)": how far v is past the limit, in the direction that breaks it */
static void mf_check_put_excess(FILE *out, enum mf_check_op op, double limit, double value)
{
    char a[40];
    double by = value - limit;
    const char *how = by >= 0 ? "over" : "under";
    if (op == MF_CHECK_GE || op == MF_CHECK_GT || (op == MF_CHECK_EQ && by < 0))
        by = -by;
    if (by < 0)
        by = -by;
    if (by == 0) { /* a strict bound, met exactly */
        fputs("at the limit", out);
        return;
    }
    fprintf(out, "%s by %s", how, mf_check_num(a, by));
    if (limit > 0)
        fprintf(out, " (%.1f %%)", 100.0 * by / limit);
}

/* "calls(parse_line)" */
static void mf_check_put_label(FILE *out, const struct mf_check_rule *r)
{
    fputs(mf_check_qty_names[r->qty], out);
    if (r->function)
        fprintf(out, "(%s)", mf_esc(r->function));
}

/* One rule of a single profile; returns whether it is broken. */
static bool mf_check_one(FILE *out, const struct mf_check_rule *r, struct mf_check_val v)
{
    bool broken = mf_check_breaks(r->op, r->limit, v);
    const char *text = mf_esc(r->text);
    if (!broken) {
        fprintf(out, " %s: ", text);
        mf_check_put_val(out, v);
        if (v.estimated && mf_check_breaks(r->op, r->limit, (struct mf_check_val){v.value, 0, false})) {
            fputs(", ", out);
            mf_check_put_excess(out, r->op, r->limit, v.value);
            fprintf(out, ", within %d standard errors", MF_CHECK_SIGMAS);
        }
        fputc('\n', out);
        return false;
    }
    fprintf(out, "-%s\n+", text);
    mf_check_put_label(out, r);
    fputs(" = ", out);
    mf_check_put_val(out, v);
    fputs(": ", out);
    mf_check_put_excess(out, r->op, r->limit, v.value);
    if (v.estimated)
        fprintf(out, ", beyond %d standard errors", MF_CHECK_SIGMAS);
    fputc('\n', out);
    return true;
}

static bool mf_check_summary(FILE *out, uint32_t broken, uint32_t n)
{
    if (broken)
        fprintf(out, "check: %u of %u rule%s broken\n", broken, n, n == 1 ? "" : "s");
    else
        fprintf(out, "check: %s %u rule%s hold%s\n", n == 1 ? "the" : "all", n, n == 1 ? "" : "s",
                n == 1 ? "s" : "");
    return broken != 0;
}

bool mf_report_check(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_check *chk = o->check;
    const struct mf_profile *p = v->p;
    uint32_t broken = 0;
    for (uint32_t i = 0; i < chk->n; i++) {
        const struct mf_check_rule *r = &chk->v[i];
        if ((r->qty == MF_CHECK_LIVE_CALLS || r->qty == MF_CHECK_LIVE_BYTES) && !p->live) {
            fprintf(out, "-%s\n+no live heap recorded: run the program with "
                         "MALLOC_FREQ_LIVE=sampled or all\n", mf_esc(r->text));
            broken++;
            continue;
        }
        broken += mf_check_one(out, r,
                               mf_check_measure(v->model, r, mf_profile_total_calls(p),
                                                mf_profile_total_bytes(p)));
    }
    return mf_check_summary(out, broken, chk->n);
}

/* --base OLD NEW: a growth rule compares the sides; a limit applies to NEW. */
bool mf_report_check_diff(FILE *out, const struct mf_report_input *v,
                          const struct mf_report_options *o)
{
    const struct mf_check *chk = o->check;
    const struct mf_side *const *side = v->diff->side;
    uint32_t broken = 0;
    for (uint32_t i = 0; i < chk->n; i++) {
        const struct mf_check_rule *r = &chk->v[i];
        struct mf_check_val val[2];
        for (int k = 0; k < 2; k++)
            val[k] = mf_check_measure(&side[k]->model, r, side[k]->calls, side[k]->bytes);
        if (r->op != MF_CHECK_GROW) {
            broken += mf_check_one(out, r, val[1]);
            continue;
        }
        double growth = val[1].value - val[0].value;
        double se = mf_sqrt(val[0].se * val[0].se + val[1].se * val[1].se);
        double allowed = r->percent ? val[0].value * r->limit / 100.0 : r->limit;
        bool estimated = val[0].estimated || val[1].estimated;
        bool is_broken = growth - MF_CHECK_SIGMAS * se > allowed;
        char a[40], b[40], c[40], d[40];
        fprintf(out, "%s%s%s", is_broken ? "-" : " ", mf_esc(r->text), is_broken ? "\n+" : ": ");
        if (is_broken) {
            mf_check_put_label(out, r);
            fputc(' ', out);
        }
        fprintf(out, "%s -> %s", mf_check_num(a, val[0].value), mf_check_num(b, val[1].value));
        fprintf(out, ", %s%s", growth < 0 ? "-" : "+", mf_check_num(c, growth < 0 ? -growth : growth));
        if (val[0].value > 0)
            fprintf(out, " (%+.1f %%)", 100.0 * growth / val[0].value);
        if (estimated)
            fprintf(out, " ± %s (estimated)", mf_check_num(d, se));
        if (growth > allowed)
            fprintf(out, ": %s over the %s allowed%s", mf_check_num(a, growth - allowed),
                    mf_check_num(b, allowed),
                    !estimated   ? ""
                    : is_broken ? ", beyond the error bar (3 standard errors)"
                                : ", within the error bar (3 standard errors)");
        fputc('\n', out);
        broken += is_broken;
    }
    return mf_check_summary(out, broken, chk->n);
}
