/* --format collapsed: the folded-stack text flamegraph.pl reads, and inferno, speedscope and
 * others with it. One line per distinct stack (after trimming and merging by function
 * name, as the tree shows it): its frames root first (the outermost caller first, the
 * allocation site last; then "[via xmalloc]" when a wrapper was folded into the site, so
 * that a flame graph shows it above the site) joined by ';', one space, and an integer count: calls, or bytes
 * with --weight bytes. Lines are sorted by their text; a stack whose count is 0 (bytes of
 * malloc(0)) has no line. The counts are the model's, so they are the tree's and the CSV's
 * numbers: estimates when sampled (whole numbers already: sums of integer weights), exact
 * otherwise, when they add up to the header's exact totals, the calls no stack could be
 * recorded for included as the one-frame stack "[not profiled]".
 *
 * A name never breaks a line: ';' becomes ':' (as flamegraph.pl's stackcollapse scripts
 * do: `<[u8: 4] as T>::f`), a control character (C0, DEL, C1), U+2028, U+2029 and each byte
 * that is not UTF-8 become '?', an empty name is "?", and when the last frame ends in a space and a number ("f 12", which
 * flamegraph.pl would read as a second count column) that space becomes '_'. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

struct mf_folded {
    size_t text; /* offset of the line's text in the arena */
    uint64_t count;
};

/* Every line's text in one growing buffer (10^6 lines of 80 frames are 0.75 GB: a buffer of
 * their own each, doubled as it grew, took twice that). */
struct mf_text {
    char *s;
    size_t n, cap;
};

static void mf_text_add(struct mf_text *t, const char *s, size_t len)
{
    if (t->n + len + 1 > t->cap) {
        t->cap = (t->n + len + 1) * 2;
        t->s = mf_xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, s, len);
    t->n += len;
    t->s[t->n] = '\0';
}

/* Each name escaped once (a character at a time it was most of the report's time). */
struct mf_escaped {
    char *s; /* NULL: not made yet */
    size_t len;
};
static struct mf_escaped *mf_escaped;
static uint32_t mf_nescaped;

static const struct mf_escaped *mf_escape(uint32_t id)
{
    mf_escaped = mf_grow_zeroed(mf_escaped, &mf_nescaped, id, sizeof *mf_escaped);
    struct mf_escaped *e = &mf_escaped[id];
    if (e->s)
        return e;
    struct mf_text t = {0};
    mf_text_add(&t, "", 0);
    const char *s = mf_str(id);
    if (!*s)
        mf_text_add(&t, "?", 1);
    while (*s) {
        bool control;
        size_t len = mf_utf8_char(s, &control);
        if (len == 0 || control)
            mf_text_add(&t, "?", 1);
        else
            mf_text_add(&t, *s == ';' ? ":" : s, len);
        s += len ? len : 1;
    }
    e->s = t.s;
    e->len = t.n;
    return e;
}

static void mf_add_name(struct mf_text *t, uint32_t id)
{
    const struct mf_escaped *e = mf_escape(id);
    mf_text_add(t, e->s, e->len);
}

/* flamegraph.pl takes a line's count from /\s+?(\d+(?:\.\d*)?)$/ and then, for differential
 * graphs, a second one from what is left: a stack must not end in a space and a number. */
static void mf_guard_last_number(char *line)
{
    char *space = strrchr(line, ' ');
    if (!space || space[1] < '0' || space[1] > '9')
        return;
    const char *p = space + 1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    if (!*p)
        *space = '_';
}

static const char *mf_sort_text;

static int mf_folded_cmp(const void *a, const void *b)
{
    return strcmp(mf_sort_text + ((const struct mf_folded *)a)->text,
                  mf_sort_text + ((const struct mf_folded *)b)->text);
}

bool mf_report_collapsed(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    struct mf_folded *lines = NULL;
    uint32_t n = 0, cap = 0;
    struct mf_text t = {0};
    struct mf_frames fr = {0};
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        uint64_t count = o->weight_bytes ? s->bytes : s->calls;
        if (count == 0)
            continue;
        mf_model_frames(m, s, &fr);
        size_t start = t.n;
        mf_text_add(&t, "", 0);
        for (uint32_t k = fr.n; k-- > 0;) { /* root first */
            mf_add_name(&t, fr.v[k].name);
            if (k)
                mf_text_add(&t, ";", 1);
        }
        if (s->via) { /* the wrapper folded into the site, as a pseudo-frame above it */
            mf_text_add(&t, ";[via ", 6);
            mf_add_name(&t, s->via);
            mf_text_add(&t, "]", 1);
        }
        mf_guard_last_number(t.s + start);
        t.n++; /* past the line's NUL */
        MF_GROW(lines, n, cap);
        lines[n++] = (struct mf_folded){start, count};
    }
    free(fr.v);
    mf_sort_text = t.s;
    if (n > 1)
        qsort(lines, n, sizeof *lines, mf_folded_cmp);
    for (uint32_t i = 0; i < n;) {
        uint64_t count = 0;
        const char *text = t.s + lines[i].text;
        uint32_t j = i;
        for (; j < n && strcmp(t.s + lines[j].text, text) == 0; j++)
            count += lines[j].count; /* stacks that differ only in addresses or lines */
        fprintf(out, "%s %llu\n", text, (unsigned long long)count);
        i = j;
    }
    free(t.s);
    free(lines);
    return false;
}
