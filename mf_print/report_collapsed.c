/* --format collapsed: the folded-stack text flamegraph.pl reads, and inferno, speedscope and
 * others with it. One line per distinct stack (after trimming and merging by function
 * name, as the tree shows it): its frames root first (the outermost caller first, the
 * allocation site last; then "[via xmalloc]" when a wrapper was folded into the site, so
 * that a flame graph shows it above the site) joined by ';', one space, and an integer
 * count: calls, or bytes with --weight bytes. Lines are sorted by their text; a stack whose
 * count is 0 (bytes of malloc(0)) has no line. The counts are the model's, so they are the
 * tree's and the CSV's numbers: estimates when sampled (whole numbers already: sums of
 * integer weights), exact otherwise, when they add up to the header's exact totals, the
 * calls no stack could be recorded for included as the one-frame stack "[not profiled]".
 *
 * A name never breaks a line: ';' becomes ':' (as flamegraph.pl's stackcollapse scripts
 * do: `<[u8: 4] as T>::f`), a control character (C0, DEL, C1), U+2028, U+2029 and each byte
 * that is not UTF-8 become '?', an empty name is "?", and when the last frame ends in a
 * space and a number ("f 12", which flamegraph.pl would read as a second count column)
 * that space becomes '_'. */
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "mf_print.h"
#include "report.h"

/* A growing buffer of text. */
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

/* A name as a line holds it: escaped (a character at a time, once a name). */
static void mf_escape(struct mf_text *t, uint32_t id)
{
    const char *s = mf_str(id);
    if (!*s)
        mf_text_add(t, "?", 1);
    while (*s) {
        bool control;
        size_t len = mf_utf8_char(s, &control);
        if (len == 0 || control)
            mf_text_add(t, "?", 1);
        else
            mf_text_add(t, *s == ';' ? ":" : s, len);
        s += len ? len : 1;
    }
}

/* flamegraph.pl takes a line's count from /\s+?(\d+(?:\.\d*)?)$/ and then, for differential
 * graphs, a second one from what is left: a stack must not end in a space and a number. The
 * last space of a line that ends in a number lies in its last frame (a ';' would end the
 * number), so guarding the last frame's text guards the line. */
static void mf_guard_last_number(char *text)
{
    char *space = strrchr(text, ' ');
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

/* A line is a sequence of tokens: each frame's text followed by ';', and at its end the
 * last frame's (guarded) or "[via W]". A token is never the start of another (no escaped
 * name holds a ';', and only a line's end ends without one), so lines compare as their
 * tokens do, token by token, and each token by its rank among the tokens' texts: 10^6 lines
 * of 80 frames sort on 4-byte ranks, not on their long common text (strcmp was 2 s of the
 * report), and are kept as ranks, not as 0.75 GB of text. Tokens of equal text (two names
 * that escape alike) share a rank, so their lines merge as equal text does. */
enum { MF_TOK_MID, MF_TOK_LAST, MF_TOK_VIA, MF_TOK_KINDS };

struct mf_tokens {
    struct mf_text text;   /* each token's text, NUL-terminated */
    size_t *at;            /* per token: its text's offset */
    uint32_t *len;         /* per token: its text's length */
    uint32_t n, cap;
    uint32_t *of[MF_TOK_KINDS]; /* per kind and name id: 1 + its token, 0 none yet */
    uint32_t nof[MF_TOK_KINDS];
    uint32_t *rank;        /* per token */
    uint32_t *by_rank;     /* per rank: a token with that text */
};

static uint32_t mf_token(struct mf_tokens *tk, int kind, uint32_t id)
{
    if (id < tk->nof[kind] && tk->of[kind][id]) /* made: nearly every frame */
        return tk->of[kind][id] - 1;
    tk->of[kind] = mf_grow_zeroed(tk->of[kind], &tk->nof[kind], id, sizeof *tk->of[kind]);
    if (tk->of[kind][id])
        return tk->of[kind][id] - 1;
    uint32_t cap = tk->cap;
    MF_GROW(tk->at, tk->n, tk->cap);
    if (tk->cap != cap)
        tk->len = mf_xrealloc(tk->len, tk->cap * sizeof *tk->len);
    size_t start = tk->text.n;
    if (kind == MF_TOK_VIA)
        mf_text_add(&tk->text, "[via ", 5);
    mf_escape(&tk->text, id);
    if (kind == MF_TOK_VIA)
        mf_text_add(&tk->text, "]", 1);
    else if (kind == MF_TOK_LAST)
        mf_guard_last_number(tk->text.s + start);
    else
        mf_text_add(&tk->text, ";", 1);
    tk->len[tk->n] = (uint32_t)strlen(tk->text.s + start);
    tk->text.n++; /* past the NUL */
    tk->at[tk->n] = start;
    tk->of[kind][id] = tk->n + 1;
    return tk->n++;
}

static const struct mf_tokens *mf_sort_tokens;

static int mf_token_cmp(const void *a, const void *b)
{
    const struct mf_tokens *tk = mf_sort_tokens;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return strcmp(tk->text.s + tk->at[x], tk->text.s + tk->at[y]);
}

/* Ranks the tokens by text (equal texts one rank). */
static void mf_tokens_rank(struct mf_tokens *tk)
{
    uint32_t *order = mf_xmalloc(((size_t)tk->n + 1) * sizeof *order);
    for (uint32_t i = 0; i < tk->n; i++)
        order[i] = i;
    mf_sort_tokens = tk;
    qsort(order, tk->n, sizeof *order, mf_token_cmp);
    tk->rank = mf_xmalloc(((size_t)tk->n + 1) * sizeof *tk->rank);
    tk->by_rank = mf_xmalloc(((size_t)tk->n + 1) * sizeof *tk->by_rank);
    uint32_t r = 0;
    for (uint32_t i = 0; i < tk->n; i++) {
        if (i && mf_token_cmp(&order[i], &order[i - 1]) != 0)
            r++;
        tk->rank[order[i]] = r;
        tk->by_rank[r] = order[i];
    }
    free(order);
}

struct mf_folded {
    size_t first;   /* its ranks: ranks[first, first + n) */
    uint32_t n;
    uint64_t count;
};

static const uint32_t *mf_sort_ranks;

/* The first k < n where x[k] != y[k], or n. Lines share long runs of leading tokens (every
 * line of a program starts at main): compared four ranks at a time where SSE2 is there. */
static uint32_t mf_first_difference(const uint32_t *x, const uint32_t *y, uint32_t n)
{
    uint32_t k = 0;
#ifdef __SSE2__
    for (; k + 4 <= n; k += 4) {
        __m128i a = _mm_loadu_si128((const __m128i *)(x + k));
        __m128i b = _mm_loadu_si128((const __m128i *)(y + k));
        unsigned same = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi32(a, b));
        if (same != 0xffff)
            return k + (uint32_t)__builtin_ctz(~same) / 4;
    }
#endif
    while (k < n && x[k] == y[k])
        k++;
    return k;
}

static int mf_folded_cmp(const void *pa, const void *pb)
{
    const struct mf_folded *a = pa, *b = pb;
    const uint32_t *x = mf_sort_ranks + a->first, *y = mf_sort_ranks + b->first;
    uint32_t n = a->n < b->n ? a->n : b->n, k = mf_first_difference(x, y, n);
    if (k < n)
        return x[k] < y[k] ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
}

static bool mf_folded_eq(const uint32_t *ranks, const struct mf_folded *a,
                         const struct mf_folded *b)
{
    return a->n == b->n && memcmp(ranks + a->first, ranks + b->first, a->n * sizeof *ranks) == 0;
}

bool mf_report_collapsed(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    struct mf_folded *lines = NULL;
    uint32_t n = 0, cap = 0;
    uint32_t *ranks = NULL; /* the lines' tokens, then their ranks */
    size_t nranks = 0, ranks_cap = 0;
    struct mf_tokens tk = {0};
    struct mf_frames fr = {0};
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        uint64_t count = o->weight_bytes ? s->bytes : s->calls;
        if (count == 0)
            continue;
        mf_model_frames(m, s, &fr);
        size_t need = nranks + fr.n + 1;
        if (need > ranks_cap) {
            ranks_cap = need * 2;
            ranks = mf_xrealloc(ranks, ranks_cap * sizeof *ranks);
        }
        size_t first = nranks;
        for (uint32_t k = fr.n; k-- > 0;) /* root first */
            ranks[nranks++] = mf_token(&tk, k || s->via ? MF_TOK_MID : MF_TOK_LAST, fr.v[k].name);
        if (s->via) /* the wrapper folded into the site, as a pseudo-frame above it */
            ranks[nranks++] = mf_token(&tk, MF_TOK_VIA, s->via);
        MF_GROW(lines, n, cap);
        lines[n++] = (struct mf_folded){first, (uint32_t)(nranks - first), count};
    }
    free(fr.v);
    mf_tokens_rank(&tk);
    for (size_t i = 0; i < nranks; i++)
        ranks[i] = tk.rank[ranks[i]];
    mf_sort_ranks = ranks;
    if (n > 1)
        qsort(lines, n, sizeof *lines, mf_folded_cmp);
    struct mf_text line = {0};
    for (uint32_t i = 0; i < n;) {
        uint64_t count = 0;
        uint32_t j = i;
        for (; j < n && mf_folded_eq(ranks, &lines[j], &lines[i]); j++)
            count += lines[j].count; /* stacks that differ only in addresses or lines */
        line.n = 0;
        for (uint32_t k = 0; k < lines[i].n; k++) {
            uint32_t token = tk.by_rank[ranks[lines[i].first + k]];
            mf_text_add(&line, tk.text.s + tk.at[token], tk.len[token]);
        }
        char num[32];
        int len = snprintf(num, sizeof num, " %llu\n", (unsigned long long)count);
        mf_text_add(&line, num, (size_t)len);
        fwrite(line.s, 1, line.n, out);
        i = j;
    }
    free(line.s);
    free(ranks);
    free(lines);
    free(tk.text.s);
    free(tk.at);
    free(tk.len);
    for (int k = 0; k < MF_TOK_KINDS; k++)
        free(tk.of[k]);
    free(tk.rank);
    free(tk.by_rank);
    return false;
}
