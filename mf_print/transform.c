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

static struct mf_transform mf_xf = {.fold = true, .cut = true};
static uint8_t *mf_classes; /* per interned name */
static uint32_t mf_classes_cap;

void mf_transform_set(const struct mf_transform *t)
{
    mf_xf = *t;
    if (mf_classes)
        memset(mf_classes, 0, mf_classes_cap);
}

const struct mf_transform *mf_transform_get(void)
{
    return &mf_xf;
}

static bool mf_any_match(const regex_t *re, uint32_t n, const char *s)
{
    for (uint32_t i = 0; i < n; i++)
        if (regexec(&re[i], s, 0, NULL, 0) == 0)
            return true;
    return false;
}

static uint8_t mf_class(uint32_t name)
{
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
    if (mf_wrapper_function(s) || mf_any_match(mf_xf.fold_re, mf_xf.nfold, s))
        c |= MF_CLASS_WRAPPER;
    if (mf_startup_function(s))
        c |= MF_CLASS_STARTUP;
    if (strncmp(s, "std::rt::lang_start", 19) == 0)
        c |= MF_CLASS_LANG_START;
    if (mf_any_match(mf_xf.hide_re, mf_xf.nhide, s))
        c |= MF_CLASS_HIDE;
    mf_classes[name] = c;
    return c;
}

bool mf_name_hidden(uint32_t name)
{
    return mf_xf.nhide && (mf_class(name) & MF_CLASS_HIDE);
}

/* The frames of stack s, innermost first, into tmp. */
static void mf_stack_all_frames(const struct mf_model *m, const struct mf_stack *s,
                                struct mf_frames *tmp)
{
    tmp->n = 0;
    for (uint32_t i = 0; i < s->depth; i++) {
        const struct mf_location *l = &m->locs[m->stack_locs[s->first + i]];
        for (uint32_t j = 0; j < l->n; j++) {
            MF_GROW(tmp->v, tmp->n, tmp->cap);
            tmp->v[tmp->n++] = m->frames[l->first + j];
        }
    }
}

static void mf_transform_stack(struct mf_model *m, struct mf_stack *s, struct mf_frames *fr)
{
    s->trimmed = s->cut = s->via = 0;
    s->flags &= ~MF_STACK_ALL_HIDDEN;
    if (s->flags & MF_STACK_NOT_PROFILED)
        return;
    mf_stack_all_frames(m, s, fr);
    uint32_t n = fr->n;
    if (n == 0)
        return;
    /* Trim: plumbing at the innermost end, the outermost frame always stays. */
    uint32_t lo = 0;
    if (m->trim)
        while (lo + 1 < n && (fr->v[lo].plumbing_module || (mf_class(fr->v[lo].name) & MF_CLASS_PLUMBING)))
            lo++;
    /* Cut: start-up frames at the outermost end, down to main or the thread's start
     * routine; the innermost frame left stays. A stack cut short by the depth limit may end
     * in some of them too (__libc_start_call_main, with _start unrecorded): they go, and
     * [deeper frames not recorded] still says that frames are missing. */
    uint32_t hi = n;
    if (mf_xf.cut) {
        while (hi - 1 > lo) {
            uint8_t c = mf_class(fr->v[hi - 1].name);
            if (!(c & MF_CLASS_STARTUP) &&
                !(strcmp(mf_str(fr->v[hi - 1].name), "main") == 0 &&
                  (mf_class(fr->v[hi - 2].name) & MF_CLASS_LANG_START)))
                break;
            hi--;
        }
    }
    /* Fold: wrappers next to the plumbing (and plumbing they call: a wrapper may call the
     * profiler's API, or the allocator twice); the site is the caller of the outermost,
     * which is the via. */
    if (m->trim && mf_xf.fold) {
        uint32_t k = lo;
        while (k + 1 < hi && (fr->v[k].plumbing_module ||
                               (mf_class(fr->v[k].name) & (MF_CLASS_WRAPPER | MF_CLASS_PLUMBING))))
            k++;
        if (k > lo)
            s->via = fr->v[k - 1].name;
        lo = k;
    }
    s->trimmed = lo;
    s->cut = n - hi;
    m->transformed.folded_stacks += s->via != 0;
    m->transformed.cut_stacks += s->cut != 0;
    if (mf_xf.nhide) {
        uint32_t hidden = 0;
        for (uint32_t k = lo; k < hi; k++)
            hidden += (mf_class(fr->v[k].name) & MF_CLASS_HIDE) != 0;
        if (hidden) {
            m->transformed.hidden_frames += hidden;
            m->transformed.hidden_stacks++;
            m->transformed.hidden_calls += s->calls;
            if (hidden == hi - lo)
                s->flags |= MF_STACK_ALL_HIDDEN;
        }
    }
}

void mf_model_transform(struct mf_model *m)
{
    struct mf_frames fr = {0};
    memset(&m->transformed, 0, sizeof m->transformed);
    for (uint32_t i = 0; i < m->nstacks; i++)
        mf_transform_stack(m, &m->stacks[i], &fr);
    free(fr.v);
}
