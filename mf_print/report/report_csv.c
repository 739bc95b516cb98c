/* CSV: one row per distinct stack after the transforms and merging by function names (a node
 * of the caller tree where stacks end), sorted by calls descending. The via column names the
 * wrapper folded into the site (empty if none): the stack itself starts at the site. The
 * threshold does not apply: a spreadsheet can filter for itself. RFC 4180 quoting; lines
 * end in \n. --by program adds a program column (a model per program, each row's).
 *
 * The stack and locations columns join their frames with ';'. Inside a frame, '%', ';',
 * control characters (C0, DEL, C1), U+2028 and U+2029 (line breaks to some readers) and
 * bytes that are not UTF-8 are percent-encoded byte by byte (%25, %3B, %0A, %C2%85, %FF:
 * RFC 3986's %XX), so that splitting at ';' and percent-decoding each part gives back every
 * name byte for byte (Rust's `<[u8; 4] as T>::f`, a C++ `operator,`), and the file is valid
 * UTF-8. ',' '"' and spaces are left to the CSV quoting. A name's first byte is encoded too
 * when it is '=', '+', '-' or '@' (TAB and CR are control characters): a spreadsheet takes a
 * cell that starts so for a formula, and every cell of text here starts with a name
 * (mf_csv_encode, text.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

/* Each interned string percent-encoded once, with whether a CSV field holding it must be
 * quoted (after encoding only ',' and '"' can call for it) and its text with '"' doubled. */
struct mf_enc {
    char *text, *quoted;
    uint32_t len, quoted_len;
    bool needs_quotes;
};

#define MF_PAD 64

static struct mf_enc *mf_encs;
static uint32_t mf_nencs;

static const struct mf_enc *mf_enc_make(uint32_t id);

static inline const struct mf_enc *mf_enc_of(uint32_t id)
{
    return id < mf_nencs && mf_encs[id].text ? &mf_encs[id] : mf_enc_make(id);
}

static const struct mf_enc *mf_enc_make(uint32_t id)
{
    mf_encs = mf_grow_zeroed(mf_encs, &mf_nencs, id, sizeof *mf_encs);
    struct mf_enc *e = &mf_encs[id];
    if (!e->text) {
        struct mf_text b = {0}, q = {0};
        mf_csv_encode(&b, mf_str(id));
        e->text = b.s;
        e->len = (uint32_t)b.n;
        e->needs_quotes = mf_csv_needs_quotes(b.s);
        mf_csv_quote(&q, b.s);
        e->quoted = q.s;
        e->quoted_len = (uint32_t)q.n;
    }
    return e;
}

/* The rows: one per node where stacks end, in the order of their stack text (see
 * mf_item_cmp), then sorted by calls (stably). A row keeps one of its stacks, whose frames
 * are overwritten with its path's locations (each node's most frequent file:line, same
 * function name) when the row is made. */
struct mf_row {
    uint64_t calls, bytes, samples;
    uint32_t stack, depth; /* frames 0 .. depth of ps->order's stack `stack` */
    uint32_t seq;
    uint32_t via;  /* the wrapper folded into the site (every stack of the row has it) */
    uint32_t part; /* --by program: the program's index */
};

struct mf_csv {
    struct mf_paths ps;
    uint32_t part; /* the rows' program, --by program */
    struct mf_row *rows;
    uint32_t nrows, rows_cap;
    /* The next row's place in the stack text's order. A walk of n stacks makes at most n
     * rows (one a node where some of them end), so a range of places can be set aside for
     * a part of the walk before it is made. */
    uint32_t seq;
    uint32_t *path; /* per depth: the location frame of the node there, UINT32_MAX: none */
    size_t path_cap;
    struct mf_csv_helper *helper; /* the second walker's, NULL in the second walker */
};

/* A child's two places among its siblings: its own row (the stack text ends with its name)
 * and its callers' rows (the text goes on with ';'). */
struct mf_item {
    struct mf_group g;
    uint32_t loc;
    uint32_t stacks; /* of g, those whose rows this place makes */
    bool sub; /* its callers' rows; else its own row */
};

/* The second walker (a thread): the walk hands it the later places of a node, half of the
 * node's stacks, whenever it is idle, and goes on with the others. Its rows get the places
 * in the text's order set aside for them, so the sort by calls puts every row where one
 * walker would have (the same bytes). The names' encodings are all made before the walk
 * (mf_pieces_make, mf_csv_encode_vias): mf_item_cmp only reads them. At 10^6 stacks the walk took 1.1-1.3 s on
 * one CPU, 0.7-0.8 s on two. */
struct mf_csv_helper {
    struct mf_worker w;
    struct mf_csv c; /* its walker (mf_paths_walker), path and rows */
    struct mf_item *items; /* its task: these places at depth d */
    size_t nitems, items_cap;
    uint32_t d;
};

#define MF_CSV_SPLIT_MIN 512 /* stacks under a node worth handing over (a wake-up is ~10 us) */

/* Compares enc(a) + ta with enc(b) + tb as strcmp would, t being "" or ";": the order of
 * the rows' stack text, which shares everything before this frame. */
static int mf_item_cmp(const void *pa, const void *pb)
{
    const struct mf_item *a = pa, *b = pb;
    mf_enc_of(a->g.name); /* made before y: making one may move the others */
    const struct mf_enc *y = mf_enc_of(b->g.name), *x = mf_enc_of(a->g.name);
    size_t nx = x->len + a->sub, ny = y->len + b->sub;
    for (size_t i = 0;; i++) {
        unsigned char cx = i < x->len ? (unsigned char)x->text[i] : i < nx ? ';' : 0;
        unsigned char cy = i < y->len ? (unsigned char)y->text[i] : i < ny ? ';' : 0;
        if (cx != cy)
            return cx < cy ? -1 : 1;
        if (!cx) /* the same site by two wrappers ("f via xmalloc", "f via xrealloc") */
            return strcmp(mf_enc_of(a->g.via)->text, mf_enc_of(b->g.via)->text);
    }
}

static void mf_csv_path(struct mf_csv *c, uint32_t d, uint32_t loc)
{
    if (d >= c->path_cap) {
        c->path_cap = (d + 1) * 2;
        c->path = mf_xrealloc(c->path, c->path_cap * sizeof *c->path);
    }
    c->path[d] = loc;
}

/* The row of the stacks of group g that end at depth d. */
static void mf_csv_row(struct mf_csv *c, const struct mf_group *g, uint32_t d)
{
    struct mf_paths *ps = &c->ps;
    struct mf_row r = {0};
    r.stack = UINT32_MAX;
    r.depth = d;
    r.part = c->part;
    for (uint32_t i = g->lo; i < g->hi; i++) {
        uint32_t si = ps->order[i];
        if (ps->len[si] != d + 1)
            continue;
        const struct mf_stack *s = &ps->m->stacks[si];
        r.calls += s->calls;
        r.bytes += s->bytes;
        r.samples += s->samples;
        if (r.stack == UINT32_MAX)
            r.stack = si;
    }
    if (r.calls == 0 && r.samples == 0)
        return; /* as the tree counts ends */
    r.via = ps->m->stacks[r.stack].via;
    for (uint32_t k = 0; k <= d; k++)
        if (c->path[k] != UINT32_MAX)
            ps->refs[ps->first[r.stack] + k] = c->path[k];
    r.seq = c->seq++;
    MF_GROW(c->rows, c->nrows, c->rows_cap);
    c->rows[c->nrows++] = r;
}

static void mf_csv_walk(struct mf_csv *c, uint32_t lo, uint32_t hi, uint32_t d);

/* The rows of places items[0, n) of a node at depth d, in order. */
static void mf_csv_items(struct mf_csv *c, const struct mf_item *items, size_t n, uint32_t d)
{
    for (size_t k = 0; k < n; k++) {
        mf_csv_path(c, d, items[k].loc);
        if (items[k].sub)
            mf_csv_walk(c, items[k].g.lo, items[k].g.hi, d + 1);
        else
            mf_csv_row(c, &items[k].g, d);
    }
}

static void mf_csv_helper_run(void *arg)
{
    struct mf_csv_helper *h = arg;
    mf_csv_items(&h->c, h->items, h->nitems, h->d);
}

/* Hands items[k, n) of a node at depth d to the helper if it is idle, their rows at places
 * from `at` on; false if it is busy. */
static bool mf_csv_hand_over(struct mf_csv *c, const struct mf_item *items, size_t k, size_t n,
                             uint32_t d, uint32_t at)
{
    struct mf_csv_helper *h = c->helper;
    if (!mf_worker_idle(&h->w))
        return false;
    h->nitems = 0;
    for (size_t i = k; i < n; i++) {
        MF_GROW(h->items, h->nitems, h->items_cap);
        h->items[h->nitems++] = items[i];
    }
    h->d = d;
    for (uint32_t i = 0; i < d; i++)
        mf_csv_path(&h->c, i, c->path[i]);
    h->c.seq = at;
    h->c.part = c->part;
    mf_worker_give(&h->w);
    return true;
}

/* The rows under the node whose stacks are order[lo, hi), sharing depths up to d - 1. */
static void mf_csv_walk(struct mf_csv *c, uint32_t lo, uint32_t hi, uint32_t d)
{
    struct mf_paths *ps = &c->ps;
    uint32_t nends;
    if (hi - lo == 1) { /* one stack: its frames are its nodes' locations, one row */
        uint32_t si = ps->order[lo];
        __builtin_prefetch(&ps->m->stacks[si]); /* its counts, read by the row after the frames */
        for (uint32_t k = d; k < ps->len[si]; k++) {
            uint32_t ref = ps->refs[ps->first[si] + k];
            mf_csv_path(c, k, ps->ft[ref].file ? ref : UINT32_MAX);
        }
        struct mf_group g = {0, lo, hi, 0};
        mf_csv_row(c, &g, ps->len[si] - 1);
        return;
    }
    size_t g0 = mf_paths_partition(ps, lo, hi, d, &nends);
    size_t ng = ps->ngroups - g0;
    if (ng == 1) { /* one child: no order to find */
        struct mf_group g = ps->groups[g0];
        ps->ngroups = g0;
        mf_csv_path(c, d, mf_paths_loc(ps, g.lo, g.hi, d));
        bool more = false;
        for (uint32_t i = g.lo; i < g.hi; i++) {
            if (ps->len[ps->order[i]] == d + 1) {
                mf_csv_row(c, &g, d);
                break;
            }
        }
        for (uint32_t i = g.lo; i < g.hi && !more; i++)
            more = ps->len[ps->order[i]] > d + 1;
        if (more)
            mf_csv_walk(c, g.lo, g.hi, d + 1);
        return;
    }
    struct mf_item *items = mf_xmalloc(2 * ng * sizeof *items);
    size_t n = 0;
    for (size_t k = 0; k < ng; k++) {
        struct mf_group g = ps->groups[g0 + k];
        uint32_t loc = mf_paths_loc(ps, g.lo, g.hi, d);
        uint32_t ends = 0;
        for (uint32_t i = g.lo; i < g.hi; i++)
            ends += ps->len[ps->order[i]] == d + 1;
        if (ends)
            items[n++] = (struct mf_item){g, loc, ends, false};
        if (ends < g.hi - g.lo)
            items[n++] = (struct mf_item){g, loc, g.hi - g.lo - ends, true};
    }
    ps->ngroups = g0;
    qsort(items, n, sizeof *items, mf_item_cmp);
    /* Half the stacks (by their places, at least one) to the helper if it is idle: the
     * places from items[k] on, their rows at places after the ones this walker's may take. */
    size_t k = n;
    uint32_t end = c->seq;
    if (c->helper && hi - lo >= MF_CSV_SPLIT_MIN && n > 1) {
        uint32_t all = 0, kept = items[0].stacks;
        for (size_t i = 0; i < n; i++)
            all += items[i].stacks;
        for (k = 1; k < n - 1 && 2 * (kept + items[k].stacks) <= all; k++)
            kept += items[k].stacks;
        end += all;
        if (!mf_csv_hand_over(c, items, k, n, d, c->seq + kept))
            k = n;
    }
    mf_csv_items(c, items, k, d);
    if (k < n)
        c->seq = end;
    free(items);
}

static int mf_row_cmp(const void *a, const void *b)
{
    const struct mf_row *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq; /* the stack text's order */
}

/* Output through buffers of our own: the rows are millions of short pieces. A second
 * thread writes each full buffer while the next is filled (at 10^6 stacks the rows are
 * 4.3 GB: writing them to a file takes this machine as long as making them), in order, so
 * the bytes are the same. */
#define MF_OUT_BUF ((size_t)4 << 20)
struct mf_out {
    FILE *f;
    char *buf[2];  /* the one filled (cur), the other written or free */
    int cur;
    size_t n;      /* bytes in buf[cur] */
    size_t cap;    /* MF_OUT_BUF less room for one fixed move past the end */
    struct mf_worker writer;
    size_t pending; /* bytes of buf[!cur] the writer is to write */
    int err;          /* the first write's errno that failed (the writer thread's own) */
};

static void mf_out_write(struct mf_out *o, const char *p, size_t len)
{
    if (fwrite(p, 1, len, o->f) != len && !o->err)
        o->err = errno ? errno : EIO;
}

static void mf_out_writer(void *arg)
{
    struct mf_out *o = arg;
    mf_out_write(o, o->buf[!o->cur], o->pending);
}

static void mf_out_begin(struct mf_out *o, FILE *f)
{
    memset(o, 0, sizeof *o);
    o->f = f;
    o->buf[0] = mf_xmalloc(MF_OUT_BUF);
    o->buf[1] = mf_xmalloc(MF_OUT_BUF);
    o->cap = MF_OUT_BUF - MF_PAD;
    mf_worker_start(&o->writer, mf_out_writer, o);
}

/* Hands the filled buffer to the writer (once it has written the other). */
static void mf_out_flush(struct mf_out *o)
{
    if (!o->n)
        return;
    mf_worker_wait(&o->writer);
    o->cur = !o->cur;
    o->pending = o->n;
    mf_worker_give(&o->writer);
    o->n = 0;
}

static void mf_out_end(struct mf_out *o)
{
    mf_out_flush(o);
    mf_worker_stop(&o->writer);
    free(o->buf[0]);
    free(o->buf[1]);
    /* errno is per thread: the caller's message (mf_output_close) names the writer's error,
     * not whatever this thread's errno last held. A regular file's stream keeps its own
     * (mf_file_write); this is for a pipe, a terminal or a device. */
    if (o->err)
        errno = o->err;
}

static void mf_out_put(struct mf_out *o, const char *s, size_t len)
{
    while (len) {
        if (o->n == o->cap)
            mf_out_flush(o);
        size_t k = o->cap - o->n < len ? o->cap - o->n : len;
        memcpy(o->buf[o->cur] + o->n, s, k);
        o->n += k;
        s += k;
        len -= k;
    }
}

/* s has MF_PAD readable bytes past len (a piece, below): a short one is copied by one fixed
 * move (the buffer keeps MF_PAD bytes of room past cap). */
static inline void mf_out_padded(struct mf_out *o, const char *s, size_t len)
{
    if (len <= MF_PAD && o->n + len <= o->cap) {
        memcpy(o->buf[o->cur] + o->n, s, MF_PAD);
        o->n += len;
    } else {
        mf_out_put(o, s, len);
    }
}

static void mf_out_str(struct mf_out *o, const char *s)
{
    mf_out_put(o, s, strlen(s));
}

static char *mf_u64(char *end, uint64_t v)
{
    *--end = '\0';
    do
        *--end = (char)('0' + v % 10);
    while (v /= 10);
    return end;
}

/* ":line" ending at end (a buffer of 24), returned with its length. */
static const char *mf_colon_line(char *end, uint32_t line, size_t *len)
{
    char *p = mf_u64(end, line);
    *--p = ':';
    *len = (size_t)(end - 1 - p);
    return p;
}

/* Each frame's piece of the stack column (its name) and of the locations column (its
 * file:line, or ??), with the ';' that goes before it, percent-encoded: made once for every
 * frame of ps->ft (one piece a name), so that an unquoted row is whole pieces copied. The
 * pieces lie back to back in one arena with MF_PAD bytes after the last: any piece of up
 * to MF_PAD bytes is copied by one fixed move (mf_out_padded). At 10^6 stacks the rows
 * are 1.6x10^8 pieces. */
struct mf_piece {
    uint64_t at;  /* in the arena */
    uint32_t len; /* with the ';' */
    bool quote;   /* a field holding it must be quoted */
};

struct mf_pieces {
    struct mf_piece *name, *loc; /* per index of ps->ft */
    char *arena;
    size_t n, cap;
};

static struct mf_piece mf_piece_add(struct mf_pieces *pc, const char *text, size_t len,
                                    const char *tail, size_t tail_len, bool quote)
{
    size_t need = 1 + len + tail_len;
    if (pc->n + need + MF_PAD > pc->cap) {
        pc->cap = (pc->n + need + MF_PAD) * 2;
        pc->arena = mf_xrealloc(pc->arena, pc->cap);
    }
    struct mf_piece p = {pc->n, (uint32_t)need, quote};
    char *d = pc->arena + pc->n;
    d[0] = ';';
    memcpy(d + 1, text, len);
    memcpy(d + 1 + len, tail, tail_len);
    pc->n += need;
    memset(pc->arena + pc->n, 0, MF_PAD);
    return p;
}

static void mf_pieces_make(struct mf_pieces *pc, const struct mf_paths *ps)
{
    uint32_t n = ps->m->nframes + MF_REF_NPSEUDO, *by_name = NULL, nby = 0;
    memset(pc, 0, sizeof *pc);
    pc->name = mf_xmalloc(((size_t)n + 1) * sizeof *pc->name);
    pc->loc = mf_xmalloc(((size_t)n + 1) * sizeof *pc->loc);
    struct mf_piece unknown = mf_piece_add(pc, "??", 2, "", 0, false);
    for (uint32_t r = 0; r < n; r++) {
        const struct mf_frame *f = &ps->ft[r];
        by_name = mf_grow_zeroed(by_name, &nby, f->name, sizeof *by_name);
        if (by_name[f->name]) { /* 1 + the first frame with this name */
            pc->name[r] = pc->name[by_name[f->name] - 1];
        } else {
            const struct mf_enc *e = mf_enc_of(f->name);
            pc->name[r] = mf_piece_add(pc, e->text, e->len, "", 0, e->needs_quotes);
            by_name[f->name] = r + 1;
        }
        if (!f->file) {
            pc->loc[r] = unknown;
            continue;
        }
        const struct mf_enc *e = mf_enc_of(f->file);
        char line[24];
        size_t nl;
        const char *t = mf_colon_line(line + sizeof line, f->line, &nl);
        pc->loc[r] = mf_piece_add(pc, e->text, e->len, t, nl, e->needs_quotes);
    }
    free(by_name);
}

static void mf_pieces_free(struct mf_pieces *pc)
{
    free(pc->name);
    free(pc->loc);
    free(pc->arena);
    memset(pc, 0, sizeof *pc);
}

/* The frames' names (locs false) or file:line (locs true) of row r, as one CSV field. */
static void mf_csv_frames(struct mf_out *o, const struct mf_paths *ps, const struct mf_pieces *pc,
                          const struct mf_row *r, bool locs)
{
    const uint32_t *refs = ps->refs + ps->first[r->stack];
    const struct mf_piece *col = locs ? pc->loc : pc->name;
    bool quote = false;
    for (uint32_t k = 0; k <= r->depth; k++)
        quote |= col[refs[k]].quote;
    if (!quote) { /* the common case: whole pieces, the first without its ';' */
        for (uint32_t k = 0; k <= r->depth; k++) {
            const struct mf_piece *p = &col[refs[k]];
            mf_out_padded(o, pc->arena + p->at + (k == 0), p->len - (k == 0));
        }
        return;
    }
    mf_out_put(o, "\"", 1);
    for (uint32_t k = 0; k <= r->depth; k++) {
        const struct mf_frame *f = &ps->ft[refs[k]];
        if (k)
            mf_out_put(o, ";", 1);
        if (locs && !f->file) {
            mf_out_put(o, "??", 2);
            continue;
        }
        const struct mf_enc *e = mf_enc_of(locs ? f->file : f->name);
        mf_out_put(o, e->quoted, e->quoted_len);
        if (locs) {
            char line[24];
            size_t nl;
            const char *t = mf_colon_line(line + sizeof line, f->line, &nl);
            mf_out_put(o, t, nl);
        }
    }
    mf_out_put(o, "\"", 1);
}

/* One interned string as a CSV field, percent-encoded as a frame is. */
static void mf_csv_name(struct mf_out *o, uint32_t id)
{
    const struct mf_enc *e = mf_enc_of(id);
    if (e->needs_quotes) {
        mf_out_put(o, "\"", 1);
        mf_out_put(o, e->quoted, e->quoted_len);
        mf_out_put(o, "\"", 1);
    } else {
        mf_out_put(o, e->text, e->len);
    }
}

/* Every name the walk compares (mf_item_cmp) encoded before it starts: two walkers read the
 * encodings at once, and making one may move the others. The frames' names are encoded by
 * mf_pieces_make; the vias here. */
static void mf_csv_encode_vias(const struct mf_paths *ps)
{
    for (uint32_t i = 0; i < ps->n; i++)
        mf_enc_of(ps->m->stacks[i].via);
}

/* The rows of the n models (one a program with --by program, names given), printed
 * together. */
static void mf_csv_report(FILE *out, const struct mf_model *const *models,
                          const char *const *programs, uint32_t n)
{
    static struct mf_csv c;
    memset(&c, 0, sizeof c);
    struct mf_paths *paths = mf_xcalloc(n, sizeof *paths);
    uint32_t *program_ids = mf_xcalloc(n, sizeof *program_ids);
    struct mf_pieces *pcs = mf_xcalloc(n, sizeof *pcs);
    static struct mf_csv_helper h;
    memset(&h, 0, sizeof h);
    mf_worker_start(&h.w, mf_csv_helper_run, &h);
    bool threaded = h.w.threaded; /* else no node is handed over */
    for (uint32_t i = 0; i < n; i++) {
        mf_paths_build(&c.ps, models[i], false);
        mf_pieces_make(&pcs[i], &c.ps);
        mf_csv_encode_vias(&c.ps);
        c.part = i;
        if (threaded) {
            mf_paths_walker(&h.c.ps, &c.ps);
            c.helper = &h;
        }
        mf_csv_walk(&c, 0, c.ps.n, 0);
        if (threaded) {
            mf_worker_wait(&h.w);
            mf_paths_walker_free(&h.c.ps);
        }
        paths[i] = c.ps; /* the rows keep their stacks' frames there */
        if (programs)
            program_ids[i] = mf_intern(programs[i]);
    }
    mf_worker_stop(&h.w);
    for (uint32_t i = 0; i < h.c.nrows; i++) {
        MF_GROW(c.rows, c.nrows, c.rows_cap);
        c.rows[c.nrows++] = h.c.rows[i];
    }
    free(h.c.rows);
    free(h.c.path);
    free(h.items);
    if (c.nrows > 1)
        qsort(c.rows, c.nrows, sizeof *c.rows, mf_row_cmp);
    static struct mf_out o;
    mf_out_begin(&o, out);
    mf_out_str(&o, programs ? "calls,bytes,samples,stack,locations,via,program\n"
                            : "calls,bytes,samples,stack,locations,via\n");
    for (uint32_t i = 0; i < c.nrows; i++) {
        const struct mf_row *r = &c.rows[i];
        /* Rows are sorted by calls, their stacks' frames lie in the model's order: the loads
         * of a row's frames (two lines a stack in every ten) are started rows ahead. */
        if (i + 8 < c.nrows)
            __builtin_prefetch(&paths[c.rows[i + 8].part].first[c.rows[i + 8].stack]);
        if (i + 4 < c.nrows) {
            const struct mf_row *a = &c.rows[i + 4];
            const uint32_t *refs = paths[a->part].refs + paths[a->part].first[a->stack];
            mf_prefetch_range(refs, (a->depth + 1) * sizeof *refs);
        }
        char num[24];
        mf_out_str(&o, mf_u64(num + sizeof num, r->calls));
        mf_out_put(&o, ",", 1);
        mf_out_str(&o, mf_u64(num + sizeof num, r->bytes));
        mf_out_put(&o, ",", 1);
        mf_out_str(&o, mf_u64(num + sizeof num, r->samples));
        mf_out_put(&o, ",", 1);
        mf_csv_frames(&o, &paths[r->part], &pcs[r->part], r, false);
        mf_out_put(&o, ",", 1);
        mf_csv_frames(&o, &paths[r->part], &pcs[r->part], r, true);
        mf_out_put(&o, ",", 1);
        mf_csv_name(&o, r->via);
        if (programs) {
            mf_out_put(&o, ",", 1);
            mf_csv_name(&o, program_ids[r->part]);
        }
        mf_out_put(&o, "\n", 1);
    }
    mf_out_end(&o);
    for (uint32_t i = 0; i < n; i++)
        mf_pieces_free(&pcs[i]);
    free(pcs);
    free(c.rows);
    free(c.path);
    for (uint32_t i = 0; i < n; i++)
        mf_paths_free(&paths[i]);
    free(paths);
    free(program_ids);
}

bool mf_report_csv(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    (void)o;
    mf_csv_report(out, v->parts, v->part_names, v->nparts);
    return false;
}

void mf_csv_names_field(FILE *out, const uint32_t *names, uint32_t n)
{
    bool quote = false;
    for (uint32_t k = 0; k < n && !quote; k++)
        quote = mf_enc_of(names[k])->needs_quotes;
    if (quote)
        fputc('"', out);
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            fputc(';', out);
        const struct mf_enc *e = mf_enc_of(names[k]);
        fputs(quote ? e->quoted : e->text, out);
    }
    if (quote)
        fputc('"', out);
}

void mf_csv_name_field(FILE *out, uint32_t id)
{
    mf_csv_names_field(out, &id, 1);
}

void mf_csv_frames_field(FILE *out, const struct mf_frame *f, uint32_t n, bool locs)
{
    bool quote = false;
    for (uint32_t k = 0; k < n && !quote; k++)
        quote = (!locs || f[k].file) && mf_enc_of(locs ? f[k].file : f[k].name)->needs_quotes;
    if (quote)
        fputc('"', out);
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            fputc(';', out);
        if (locs && !f[k].file) {
            fputs("??", out);
            continue;
        }
        const struct mf_enc *e = mf_enc_of(locs ? f[k].file : f[k].name);
        fputs(quote ? e->quoted : e->text, out);
        if (locs)
            fprintf(out, ":%u", f[k].line);
    }
    if (quote)
        fputc('"', out);
}
