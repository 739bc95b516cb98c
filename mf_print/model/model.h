/* The profile model: what every report is a function of, so that no two formats can
 * disagree on a number.
 *
 *   read+validate, merge  (profile_read.c: every file bounded by its size; identical stacks
 *                          of a process image's threads merged)
 *   -> symbolize          (model.c over symbolize.c: each distinct return address once)
 *   -> transform          (transform.c: trim allocator and profiler plumbing, fold
 *                          allocation wrappers into their callers, cut start-up frames,
 *                          hide frames the user names)
 *   -> report             (report_*.c: tree, CSV, ... each a function of the model)
 *
 * A stack is a list of locations, innermost first; a location is one return address of one
 * process image, symbolized into one or more frames (an address inside inlined code gives
 * the inlined functions first, then the function they were inlined into). */
#ifndef MF_MODEL_H
#define MF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "profile_read.h"
#include "symbolize.h"
#include "transform.h"

/* Pseudo-frames. */
#define MF_NAME_NOT_PROFILED "[not profiled]"  /* samples no stack could be recorded for */
#define MF_NAME_TRUNCATED "[deeper frames not recorded]" /* stack deeper than max_depth */
#define MF_NAME_NO_STACK "[no stack]"         /* the unwinder returned no frame */
#define MF_NAME_ALL_HIDDEN "[every frame hidden]" /* --hide matched all its frames */
/* --live --format csv's rows for what the live files could not record */
#define MF_NAME_LIVE_NOT_RECORDED "[allocations not recorded: the live table was full]"
#define MF_NAME_LIFETIMES_NOT_RECORDED "[lifetimes not recorded: the lifetime table was full]"

#define MF_NO_MODULE UINT32_MAX

struct mf_location {
    uint32_t process; /* index into profile->procs */
    uint32_t module;  /* index into that process's modules, or MF_NO_MODULE */
    uint64_t pc;      /* the return address as recorded (the leaf's: the call's return) */
    uint32_t first, n; /* its frames: model->frames[first .. first + n), innermost first */
};

#define MF_STACK_NOT_PROFILED 0x10000u /* the [not profiled] pseudo-stack: no locations */
#define MF_STACK_ALL_HIDDEN 0x20000u   /* --hide matched every frame left to show */
#define MF_STACK_VIA_FOUND 0x40000u    /* its via is a wrapper found without a name (transform.h) */

struct mf_stack {
    uint32_t process;
    uint32_t flags;       /* MF_ENTRY_TRUNCATED, MF_STACK_NOT_PROFILED */
    uint32_t first, depth; /* locations: model->stack_locs[first .. first + depth), innermost first */
    uint32_t trimmed;     /* frames at the innermost end left out of reports: plumbing, then
                             folded wrappers */
    uint32_t cut;         /* start-up frames at the outermost end, left out of reports */
    uint32_t via;         /* the folded wrapper the site called (interned), 0 if none */
    uint64_t samples, calls, bytes;
    uint64_t var;   /* the estimated variance of calls (0 when exact) */
    double bytes_var; /* the estimated variance of bytes (0 when exact) */
    /* calls and bytes are estimates (a weight > 1, or a sampled process), unless every
     * sample of it was recorded for its size (MALLOC_FREQ_LARGE) */
    bool estimated;
    uint32_t raw; /* its profile->stacks index; UINT32_MAX for [not profiled] */
    /* The stacks as the processes recorded them that it stands for (its raw stack's images):
     * what counts of stacks add up. */
    uint32_t images;
};

/* What the transform stage did (transform.c), for the report's header. */
struct mf_transform_counts {
    uint64_t folded_stacks; /* stacks whose site is a wrapper's caller */
    uint64_t found_wrappers, found_stacks; /* of them: wrappers found without a name, their stacks */
    uint64_t cut_stacks;    /* stacks that lost start-up frames */
    uint64_t hidden_frames, hidden_stacks, hidden_calls; /* --hide */
};

/* What the model's counts weigh. The profile is never rewritten: a view is chosen when the
 * model is built, and recorded in it so that every report can say which it shows. */
enum mf_view {
    MF_VIEW_CALLS, /* the calls made (each stack's samples, calls and bytes as read) */
    MF_VIEW_LIVE,  /* the live heap (--live): each stack's sampled allocations still alive,
                      weighted, with their variances; its calls stay in p->stacks */
};

/* How a model is built: passed in, so that two models may differ. */
struct mf_model_config {
    bool trim;                     /* leave allocator and profiler plumbing out */
    enum mf_view view;             /* MF_VIEW_LIVE needs p->live (mf_live_attach) */
    const struct mf_transform *xf; /* fold, cut, hide; NULL: fold and cut */
};

struct mf_model {
    const struct mf_profile *p; /* processes, modules, exact totals */
    enum mf_view view;
    /* The view's totals: the run's exact calls and bytes, or the live heap's allocations
     * and bytes alive (the sums of its stacks). The run's stay mf_profile_total_calls(p). */
    uint64_t view_calls, view_bytes;
    struct mf_transform xf; /* the transforms it was built with */
    struct mf_location *locs;
    uint32_t nlocs, locs_cap;
    struct mf_frame *frames;
    uint32_t nframes, frames_cap;
    uint32_t *stack_locs;
    uint32_t nstack_locs, stack_locs_cap;
    struct mf_stack *stacks;
    uint32_t nstacks, stacks_cap;
    bool trim;      /* plumbing frames are left out of the frames reports see */
    struct mf_transform_counts transformed; /* what the transform stage did */
    bool estimated; /* some count in it is an estimate */
    /* The largest interval of the sampled processes (default mode: their largest weight),
     * 1 if none. */
    uint64_t sample_interval;
};

/* Symbolizes and transforms a read profile, weighed as c->view says. */
void mf_model_build(struct mf_model *m, const struct mf_profile *p, const struct mf_model_config *c);
/* Frees what mf_model_build allocated (the profile is the caller's). */
void mf_model_free(struct mf_model *m);
/* m's stacks without those of no calls (nothing alive), in a new array: m is a copy. */
void mf_model_keep_counted(struct mf_model *m);

/* The frames a report shows for stack s, innermost first: its locations' frames less the
 * trimmed and folded ones at the innermost end, the cut start-up frames at the outermost
 * (never all of them) and hidden ones, then [deeper frames not recorded] if the stack was
 * cut short, [no stack] if it had none, [every frame hidden] if --hide took them all;
 * [not profiled] for that pseudo-stack. out is cleared. */
void mf_model_frames(const struct mf_model *m, const struct mf_stack *s, struct mf_frames *out);

/* For reports that walk the locations themselves: the number of frames of s's locations,
 * whether the k-th of them (innermost first) named name is shown, and the pseudo-frame to
 * add after `shown` frames (0: none). */
uint32_t mf_model_nframes(const struct mf_model *m, const struct mf_stack *s);
bool mf_model_shows(const struct mf_model *m, const struct mf_stack *s, uint32_t k,
                    uint32_t nframes, uint32_t name);
uint32_t mf_model_pseudo(const struct mf_stack *s, uint32_t shown);
/* The same frames as references: an index into m->frames, or an MF_REF_* pseudo-frame.
 * Appends them to the growable array (*v, *n, *cap) and returns how many. Reports that
 * group millions of stacks by frame keep these (4 bytes a frame) instead of copies. */
#define MF_REF_NPSEUDO 4u
#define MF_REF_PSEUDO (UINT32_MAX - MF_REF_NPSEUDO)
#define MF_REF_NOT_PROFILED (MF_REF_PSEUDO + 0)
#define MF_REF_TRUNCATED (MF_REF_PSEUDO + 1)
#define MF_REF_NO_STACK (MF_REF_PSEUDO + 2)
#define MF_REF_ALL_HIDDEN (MF_REF_PSEUDO + 3)
uint32_t mf_model_frame_refs(const struct mf_model *m, const struct mf_stack *s, uint32_t **v,
                             size_t *n, size_t *cap);
/* The frame a reference stands for. */
struct mf_frame mf_model_ref_frame(const struct mf_model *m, uint32_t ref);

/* The standard error of an estimate of calls (of bytes) whose samples' weights add var to its
 * variance, every report's ±: a sample of weight w adds w(w-1) (bytes: w(w-1)s^2), so the
 * exact stretch's samples of weight 1 add none; for a run sampled 1 in N throughout this is
 * calls/sqrt(samples), as DESIGN §2 says. With no weighted sample yet, calls after the exact
 * stretch may still have been missed: one sample at the interval (of the mean size) is the
 * floor. 0 for nothing counted. */
double mf_calls_se(uint64_t calls, uint64_t var, uint64_t interval);
double mf_bytes_se(uint64_t calls, uint64_t bytes, double var, uint64_t interval);

#endif
