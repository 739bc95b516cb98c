/* The transform stage (transform.h): per stack, how many frames plumbing and wrappers take
 * at the innermost end, how many start-up frames at the outermost, the wrapper folded, and
 * whether --hide takes any. Each distinct name is classified once. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "model.h"
#include "transform.h"
#include "trim.h"

enum {
    MF_CLASS_KNOWN = 1,
    MF_CLASS_PLUMBING = 2,
    MF_CLASS_WRAPPER = 4, /* built-in or --fold */
    MF_CLASS_STARTUP = 8,
    MF_CLASS_HIDE = 16,
    MF_CLASS_LANG_START = 32, /* Rust's std::rt::lang_start*: the C main calling it is start-up */
};

/* Each interned name's class, made once: a memo of the configuration it was made for,
 * started afresh for another (models built with other --fold or --hide patterns). */
static uint8_t *mf_classes;
static uint32_t mf_classes_cap;
static struct mf_transform mf_classes_xf;

static bool mf_any_match(const regex_t *re, uint32_t n, const char *s)
{
    for (uint32_t i = 0; i < n; i++)
        if (regexec(&re[i], s, 0, NULL, 0) == 0)
            return true;
    return false;
}

static uint8_t mf_class(const struct mf_transform *xf, uint32_t name)
{
    if (xf->fold_re != mf_classes_xf.fold_re || xf->nfold != mf_classes_xf.nfold ||
        xf->hide_re != mf_classes_xf.hide_re || xf->nhide != mf_classes_xf.nhide) {
        mf_classes_xf = *xf;
        if (mf_classes)
            memset(mf_classes, 0, mf_classes_cap);
    }
    if (name >= mf_classes_cap) {
        uint32_t cap = mf_classes_cap ? mf_classes_cap : 1024;
        while (cap <= name)
            cap *= 2;
        mf_classes = mf_xrealloc(mf_classes, cap);
        memset(mf_classes + mf_classes_cap, 0, cap - mf_classes_cap);
        mf_classes_cap = cap;
    }
    uint8_t c = mf_classes[name];
    if (c)
        return c;
    const char *s = mf_str(name);
    c = MF_CLASS_KNOWN;
    if (mf_trim_function(s))
        c |= MF_CLASS_PLUMBING;
    if (mf_wrapper_function(s) || mf_any_match(xf->fold_re, xf->nfold, s))
        c |= MF_CLASS_WRAPPER;
    if (mf_startup_function(s))
        c |= MF_CLASS_STARTUP;
    if (strncmp(s, "std::rt::lang_start", 19) == 0)
        c |= MF_CLASS_LANG_START;
    if (mf_any_match(xf->hide_re, xf->nhide, s))
        c |= MF_CLASS_HIDE;
    mf_classes[name] = c;
    return c;
}

bool mf_name_hidden(const struct mf_model *m, uint32_t name)
{
    return m->xf.nhide && (mf_class(&m->xf, name) & MF_CLASS_HIDE);
}

/* The k-th frame of a stack (innermost first), found from where the last one was: trim,
 * fold and cut look at a few frames at either end, so no stack's frames are copied. */
struct mf_cursor {
    const struct mf_model *m;
    const uint32_t *sl; /* the stack's locations */
    uint32_t i, k0;     /* location i holds frames [k0, k0 + its n) */
};

static const struct mf_frame *mf_frame_at(struct mf_cursor *c, uint32_t k)
{
    const struct mf_location *locs = c->m->locs;
    while (k < c->k0)
        c->k0 -= locs[c->sl[--c->i]].n;
    while (k >= c->k0 + locs[c->sl[c->i]].n)
        c->k0 += locs[c->sl[c->i++]].n;
    const struct mf_location *l = &locs[c->sl[c->i]];
    return &c->m->frames[l->first + (k - c->k0)];
}

static void mf_transform_stack(struct mf_model *m, struct mf_stack *s, struct mf_transform_counts *counts)
{
    s->trimmed = s->cut = s->via = 0;
    s->flags &= ~(MF_STACK_ALL_HIDDEN | MF_STACK_VIA_FOUND);
    if (s->flags & MF_STACK_NOT_PROFILED)
        return;
    const uint32_t *sl = s->depth ? m->stack_locs + s->first : NULL; /* none: no stack_locs */
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->depth; i++)
        n += m->locs[sl[i]].n;
    if (n == 0)
        return;
    struct mf_cursor front = {m, sl, 0, 0}, back = {m, sl, 0, 0};
#define FR(k) mf_frame_at(&front, (k))
#define BK(k) mf_frame_at(&back, (k))
    /* Trim: plumbing at the innermost end, the outermost frame always stays. */
    uint32_t lo = 0;
    if (m->trim)
        while (lo + 1 < n && (FR(lo)->plumbing_module || (mf_class(&m->xf, FR(lo)->name) & MF_CLASS_PLUMBING)))
            lo++;
    /* Cut: start-up frames at the outermost end, down to main or the thread's start
     * routine; the innermost frame left stays. A stack cut short by the depth limit may end
     * in some of them too (__libc_start_call_main, with _start unrecorded): they go, and
     * [deeper frames not recorded] still says that frames are missing. Frames without a
     * name ([prog+0x10a0]) outside the outermost start-up frame are cut with it: a stripped
     * program's _start is one. Inside, the first frame that is not start-up stays, named or
     * not (a stripped program's main). */
    uint32_t hi = n;
    if (m->xf.cut) {
        for (uint32_t k = n; k - 1 > lo; k--) {
            uint32_t name = BK(k - 1)->name;
            if ((mf_class(&m->xf, name) & MF_CLASS_STARTUP) ||
                (strcmp(mf_str(name), "main") == 0 &&
                 (mf_class(&m->xf, BK(k - 2)->name) & MF_CLASS_LANG_START)))
                hi = k - 1;
            else if (hi < n || mf_str(name)[0] != '[')
                break;
        }
    }
    /* Fold: wrappers next to the plumbing (and plumbing they call: a wrapper may call the
     * profiler's API, or the allocator twice); the site is the caller of the outermost,
     * which is the via. */
    if (m->trim && m->xf.fold) {
        uint32_t k = lo;
        while (k + 1 < hi && (FR(k)->plumbing_module ||
                               (mf_class(&m->xf, FR(k)->name) & (MF_CLASS_WRAPPER | MF_CLASS_PLUMBING))))
            k++;
        if (k > lo)
            s->via = FR(k - 1)->name;
        lo = k;
    }
    s->trimmed = lo;
    s->cut = n - hi;
    counts->folded_stacks += s->via != 0 ? s->images : 0;
    counts->cut_stacks += s->cut != 0 ? s->images : 0;
    if (m->xf.nhide) {
        uint32_t hidden = 0;
        for (uint32_t k = lo; k < hi; k++)
            hidden += (mf_class(&m->xf, FR(k)->name) & MF_CLASS_HIDE) != 0;
        if (hidden) {
            counts->hidden_frames += (uint64_t)hidden * s->images;
            counts->hidden_stacks += s->images;
            counts->hidden_calls += s->calls;
            if (hidden == hi - lo)
                s->flags |= MF_STACK_ALL_HIDDEN;
        }
    }
#undef FR
#undef BK
}

/* ---- wrappers found without a name ----------------------------------------------------- */

/* A function without a name (a stripped module's: its frames are "[module+0xOFF]", one per
 * return address; the module's unwind table says which are one function's) is a wrapper
 * when, over the whole model,
 *   - every frame of it is the innermost one left after the trim, at one return address:
 *     it calls the allocator from one place and calls nothing else that allocates;
 *   - that place has at least MF_FOUND_CALLERS distinct callers, or one caller that has
 *     as many (the allocator behind a function pointer, as sqlite's sqlite3MemMalloc).
 * Only a frame that calls the allocator itself is judged: above a folded wrapper every
 * function that allocates once looks like one (measured on cc1, see docs/reports.md). */
#define MF_FOUND_CALLERS 8

struct mf_fn_stat {
    uint32_t modfile;
    uint64_t entry;
    uint32_t addr;  /* the name of its one return address above the allocator */
    bool other;     /* a frame of it elsewhere, or at a second return address */
    bool wrapper;
    uint8_t ncallers, ncallers2;
    uint32_t callers[MF_FOUND_CALLERS], callers2[MF_FOUND_CALLERS]; /* names, distinct */
};

struct mf_fn_key {
    const struct mf_fn_stat *fns;
    uint32_t modfile;
    uint64_t entry;
};

static bool mf_fn_eq(const void *ctx, uint32_t val)
{
    const struct mf_fn_key *k = ctx;
    return k->fns[val].entry == k->entry && k->fns[val].modfile == k->modfile;
}

static void mf_add_caller(uint32_t *v, uint8_t *n, uint32_t name)
{
    for (uint8_t i = 0; i < *n; i++)
        if (v[i] == name)
            return;
    if (*n < MF_FOUND_CALLERS)
        v[(*n)++] = name;
}

/* The frames a stack has, and the first after the trim (a candidate's) when nothing named
 * was folded and a caller is left to be the site; UINT32_MAX if none. */
static uint32_t mf_candidate(const struct mf_model *m, const struct mf_stack *s, uint32_t *n)
{
    *n = 0;
    if (s->flags & MF_STACK_NOT_PROFILED)
        return UINT32_MAX;
    for (uint32_t i = 0; i < s->depth; i++)
        *n += m->locs[m->stack_locs[s->first + i]].n;
    return s->via == 0 && s->trimmed + 1 < *n - s->cut ? s->trimmed : UINT32_MAX;
}

static void mf_find_wrappers(struct mf_model *m, struct mf_transform_counts *counts)
{
    /* Each location of one unnamed frame in a module: its function. */
    uint32_t *loc_fn = mf_xmalloc(((size_t)m->nlocs + 1) * sizeof *loc_fn);
    struct mf_fn_stat *fns = NULL;
    uint32_t nfns = 0, fns_cap = 0;
    struct mf_map map = {0};
    for (uint32_t i = 0; i < m->nlocs; i++) {
        const struct mf_location *l = &m->locs[i];
        loc_fn[i] = UINT32_MAX;
        if (l->n != 1 || l->module == MF_NO_MODULE || m->frames[l->first].plumbing_module ||
            mf_str(m->frames[l->first].name)[0] != '[')
            continue;
        struct mf_process *pr = (struct mf_process *)&m->p->procs[l->process];
        struct mf_fn_key k = {NULL, 0, 0};
        if (!mf_function_entry(&pr->modules[l->module], l->pc, &k.modfile, &k.entry))
            continue;
        k.fns = fns;
        bool added;
        loc_fn[i] = mf_map_put(&map, mf_hash_u64(k.entry ^ mf_hash_u64(k.modfile)), mf_fn_eq, &k,
                               nfns, &added);
        if (added) {
            MF_GROW(fns, nfns, fns_cap);
            fns[nfns++] = (struct mf_fn_stat){.modfile = k.modfile, .entry = k.entry, .addr = 0};
        }
    }
    if (nfns) {
        /* One pass: each candidate's return address and callers, and every frame of such a
         * function elsewhere. */
        for (uint32_t si = 0; si < m->nstacks; si++) {
            struct mf_stack *s = &m->stacks[si];
            uint32_t n, lo = mf_candidate(m, s, &n);
            if (s->flags & MF_STACK_NOT_PROFILED)
                continue;
            struct mf_cursor c = {m, m->stack_locs + s->first, 0, 0};
            uint32_t from = 0; /* the first location whose frames are all "elsewhere" */
            if (lo != UINT32_MAX) {
                const struct mf_frame *f = mf_frame_at(&c, lo);
                from = c.i + 1;
                uint32_t fn = loc_fn[c.sl[c.i]];
                if (fn != UINT32_MAX && c.k0 == lo) {
                    struct mf_fn_stat *x = &fns[fn];
                    if (x->addr && x->addr != f->name)
                        x->other = true;
                    x->addr = f->name;
                    uint32_t hi = n - s->cut;
                    mf_add_caller(x->callers, &x->ncallers, mf_frame_at(&c, lo + 1)->name);
                    if (lo + 2 < hi)
                        mf_add_caller(x->callers2, &x->ncallers2, mf_frame_at(&c, lo + 2)->name);
                } else if (fn != UINT32_MAX) {
                    fns[fn].other = true;
                }
            } else if (n) {
                mf_frame_at(&c, s->trimmed < n ? s->trimmed : n - 1);
                from = c.i;
            }
            for (uint32_t i = from; i < s->depth; i++) {
                uint32_t fn = loc_fn[c.sl[i]];
                if (fn != UINT32_MAX)
                    fns[fn].other = true;
            }
        }
        for (uint32_t i = 0; i < nfns; i++) {
            struct mf_fn_stat *x = &fns[i];
            x->wrapper = x->addr && !x->other &&
                         (x->ncallers >= MF_FOUND_CALLERS ||
                          (x->ncallers == 1 && x->ncallers2 >= MF_FOUND_CALLERS));
            counts->found_wrappers += x->wrapper;
        }
        /* The fold: the wrapper's caller is the site. */
        for (uint32_t si = 0; counts->found_wrappers && si < m->nstacks; si++) {
            struct mf_stack *s = &m->stacks[si];
            uint32_t n, lo = mf_candidate(m, s, &n);
            if (lo == UINT32_MAX)
                continue;
            struct mf_cursor c = {m, m->stack_locs + s->first, 0, 0};
            const struct mf_frame *f = mf_frame_at(&c, lo);
            uint32_t fn = loc_fn[c.sl[c.i]];
            if (fn == UINT32_MAX || !fns[fn].wrapper)
                continue;
            s->via = f->name;
            s->trimmed = lo + 1;
            s->flags |= MF_STACK_VIA_FOUND;
            counts->folded_stacks += s->images;
            counts->found_stacks += s->images;
        }
    }
    mf_map_free(&map);
    free(fns);
    free(loc_fn);
}

struct mf_transform_halves {
    struct mf_model *m;
    struct mf_transform_counts counts[2];
};

static void mf_transform_half(void *arg, int half, uint32_t lo, uint32_t hi)
{
    struct mf_transform_halves *t = arg;
    for (uint32_t i = lo; i < hi; i++)
        mf_transform_stack(t->m, &t->m->stacks[i], &t->counts[half]);
}

void mf_model_transform(struct mf_model *m)
{
    /* The names' classes are made lazily: made first, the halves only read them. */
    for (uint32_t r = 0; r < m->nframes; r++)
        mf_class(&m->xf, m->frames[r].name);
    struct mf_transform_halves t = {m, {{0}, {0}}};
    mf_in_halves(m->nstacks, mf_transform_half, &t);
    struct mf_transform_counts *c = &m->transformed, *a = &t.counts[0], *b = &t.counts[1];
    c->folded_stacks = a->folded_stacks + b->folded_stacks;
    c->cut_stacks = a->cut_stacks + b->cut_stacks;
    c->hidden_frames = a->hidden_frames + b->hidden_frames;
    c->hidden_stacks = a->hidden_stacks + b->hidden_stacks;
    c->hidden_calls = a->hidden_calls + b->hidden_calls;
    c->found_wrappers = c->found_stacks = 0;
    if (m->trim && m->xf.fold)
        mf_find_wrappers(m, c);
}
