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
 * that space becomes '_'.
 *
 * The live view (--live) says so in a first line, "# ...", which has no count: readers of
 * the format skip it (flamegraph.pl counts it among the lines it ignores). */
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "mf_print.h"
#include "report.h"

/* A name as a line holds it: escaped (a character at a time, once a name). */
static void mf_escape(struct mf_text *t, uint32_t id)
{
    const char *s = mf_str(id);
    if (!*s)
        mf_text_add(t, "?", 1);
    while (*s) {
        uint32_t cp;
        size_t len = mf_utf8_decode(s, &cp);
        if (len == 0 || mf_is_control(cp))
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
 * tokens do, token by token. Tokens are interned: equal texts (two names that escape alike)
 * are one id, so lines merge as equal text does, and an id's rank in the strings' strcmp
 * order (mf_str_ranks) orders two tokens. 10^6 lines of 80 frames sort on 4-byte ids, not
 * on their long common text (strcmp was 2 s of the report), and are kept as ids, not as
 * 0.75 GB of text. */
enum { MF_TOK_MID, MF_TOK_LAST, MF_TOK_VIA, MF_TOK_KINDS };

struct mf_tokens {
    uint32_t *of[MF_TOK_KINDS]; /* per kind and name id: 1 + its token's id, 0 none yet */
    uint32_t nof[MF_TOK_KINDS];
    uint32_t *len;              /* per token id: its text's length */
    uint32_t nlen;
    struct mf_text text;        /* the token being made */
};

static uint32_t mf_token(struct mf_tokens *tk, int kind, uint32_t id)
{
    if (id < tk->nof[kind] && tk->of[kind][id]) /* made: nearly every frame */
        return tk->of[kind][id] - 1;
    tk->of[kind] = mf_grow_zeroed(tk->of[kind], &tk->nof[kind], id, sizeof *tk->of[kind]);
    tk->text.n = 0;
    mf_text_add(&tk->text, "", 0);
    if (kind == MF_TOK_VIA)
        mf_text_add(&tk->text, "[via ", 5);
    mf_escape(&tk->text, id);
    if (kind == MF_TOK_VIA)
        mf_text_add(&tk->text, "]", 1);
    else if (kind == MF_TOK_LAST)
        mf_guard_last_number(tk->text.s);
    else
        mf_text_add(&tk->text, ";", 1);
    uint32_t token = mf_intern(tk->text.s);
    tk->len = mf_grow_zeroed(tk->len, &tk->nlen, token, sizeof *tk->len);
    tk->len[token] = (uint32_t)strlen(tk->text.s);
    tk->of[kind][id] = token + 1;
    return token;
}

struct mf_folded {
    size_t first;   /* its tokens: tokens[first, first + n) */
    uint32_t n;
    uint64_t count;
};

static const uint32_t *mf_sort_tokens, *mf_sort_rank;

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
    const uint32_t *x = mf_sort_tokens + a->first, *y = mf_sort_tokens + b->first;
    uint32_t n = a->n < b->n ? a->n : b->n, k = mf_first_difference(x, y, n);
    if (k < n)
        return mf_sort_rank[x[k]] < mf_sort_rank[y[k]] ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
}

static bool mf_folded_eq(const uint32_t *tokens, const struct mf_folded *a,
                         const struct mf_folded *b)
{
    return a->n == b->n && memcmp(tokens + a->first, tokens + b->first, a->n * sizeof *tokens) == 0;
}

bool mf_report_collapsed(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    struct mf_folded *lines = NULL;
    uint32_t n = 0, cap = 0;
    uint32_t *tokens = NULL; /* the lines' tokens, one after another */
    size_t ntokens = 0, tokens_cap = 0;
    struct mf_tokens tk = {0};
    struct mf_frames fr = {0};
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        uint64_t count = o->weight_bytes ? s->bytes : s->calls;
        if (count == 0)
            continue;
        mf_model_frames(m, s, &fr);
        size_t need = ntokens + fr.n + 1;
        if (need > tokens_cap) {
            tokens_cap = need * 2;
            tokens = mf_xrealloc(tokens, tokens_cap * sizeof *tokens);
        }
        size_t first = ntokens;
        for (uint32_t k = fr.n; k-- > 0;) /* root first */
            tokens[ntokens++] = mf_token(&tk, k || s->via ? MF_TOK_MID : MF_TOK_LAST, fr.v[k].name);
        if (s->via) /* the wrapper folded into the site, as a pseudo-frame above it */
            tokens[ntokens++] = mf_token(&tk, MF_TOK_VIA, s->via);
        MF_GROW(lines, n, cap);
        lines[n++] = (struct mf_folded){first, (uint32_t)(ntokens - first), count};
    }
    free(fr.v);
    uint32_t *rank = mf_str_ranks(); /* no string is interned from here on */
    mf_sort_tokens = tokens;
    mf_sort_rank = rank;
    if (n > 1)
        qsort(lines, n, sizeof *lines, mf_folded_cmp);
    free(rank);
    if (m->view == MF_VIEW_LIVE)
        fprintf(out, "# malloc_freq --live: counts are %s alive, not calls\n",
                o->weight_bytes ? "bytes" : "allocations");
    struct mf_text line = {0};
    for (uint32_t i = 0; i < n;) {
        uint64_t count = 0;
        uint32_t j = i;
        for (; j < n && mf_folded_eq(tokens, &lines[j], &lines[i]); j++)
            count += lines[j].count; /* stacks that differ only in addresses or lines */
        line.n = 0;
        for (uint32_t k = 0; k < lines[i].n; k++) {
            uint32_t token = tokens[lines[i].first + k];
            mf_text_add(&line, mf_str(token), tk.len[token]);
        }
        char num[32];
        int len = snprintf(num, sizeof num, " %llu\n", (unsigned long long)count);
        mf_text_add(&line, num, (size_t)len);
        fwrite(line.s, 1, line.n, out);
        i = j;
    }
    free(line.s);
    free(tokens);
    free(lines);
    for (int k = 0; k < MF_TOK_KINDS; k++)
        free(tk.of[k]);
    free(tk.len);
    free(tk.text.s);
    return false;
}
