/* Comparing two profiles (mf_print --base OLD NEW): one more transform of the model. Each
 * side is read into a model (profile directories as usual, or a pprof file mf_print wrote:
 * pprof_read.h); mf_diff_build matches the two models' stacks as the reports show them
 * (trimmed, merged by function names: the rows of the CSV) and sums them per allocation site,
 * with the change in calls and bytes and whether it is larger than both sides' error bars.
 * Each format renders the result (report.h). */
#ifndef MF_DIFF_H
#define MF_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "profile_read.h"

/* One side of a comparison, as read. */
struct mf_side {
    const char *const *paths; /* what was given: directories, or one pprof file */
    int npaths;
    bool pprof;               /* read from a pprof file */
    struct mf_profile profile; /* directories; for a pprof file, the processes it names */
    struct mf_model model;
    uint64_t calls, bytes;    /* the view's totals: the exact ones over every thread, or the
                                 live heap's */
    char sampling[512];       /* how it was sampled, in words */
};

/* Reads a side: one or more profile directories, or one pprof file written by mf_print.
 * Returns 0, or the exit status after one line on stderr (1: nothing readable, 2: no such
 * directory, or a pprof file among directories). c: the model's; with MF_VIEW_LIVE the
 * directories' live heap is read too. A pprof file written with the other c->trim is
 * refused, since trimmed frames cannot be brought back. */
int mf_side_read(struct mf_side *s, const char *const *paths, int npaths,
                 const struct mf_model_config *c);

/* The significance rule: an estimate that moved by no more than this many standard errors of
 * the change is not called a change. */
#define MF_DIFF_SIGMAS 3

struct mf_diff_vals {
    uint64_t calls, bytes, samples;
    uint64_t var;   /* estimated variance of calls (sum over the stacks) */
    bool estimated; /* some count is an estimate, or the row is absent from a side that
                       samples (a stack no sample hit) */
};

struct mf_diff_row {
    uint32_t site;            /* interned name of the allocation site */
    struct mf_frame *frames;  /* the frames shown, innermost first (a site row: the site) */
    uint32_t nframes;
    struct mf_diff_vals v[2]; /* [0] old, [1] new */
    int64_t dcalls, dbytes;   /* new - old */
    double error;             /* standard error of dcalls: sqrt(var old + var new), 0 exact */
    bool significant;         /* exact counts that differ, or |dcalls| > MF_DIFF_SIGMAS x error */
    uint32_t first, n;        /* a site row: its stack rows, stacks[first .. first + n) */
    uint64_t best_calls;      /* the calls of the stack the frames were taken from */
};

struct mf_diff {
    const struct mf_side *side[2]; /* old, new */
    /* Sites sorted by the size of the change in calls (then bytes, then name); each site's
     * stacks sorted the same way, at stacks[site.first ..]. */
    struct mf_diff_row *sites;
    uint32_t nsites;
    struct mf_diff_row *stacks;
    uint32_t nstacks;
    /* Per side, per model stack: the stack row it was counted in. */
    uint32_t *row_of[2];
    uint64_t interval[2]; /* each side's sample interval (1 if exact) */
    uint32_t sig_sites, sig_stacks; /* rows that changed significantly */
};

void mf_diff_build(struct mf_diff *d, const struct mf_side *old, const struct mf_side *new_);
/* Whether d compares live heaps (--live, or a --live snapshot): its counts are allocations
 * alive and their bytes, not calls. */
bool mf_diff_live(const struct mf_diff *d);

/* The sampling mode of a profile's processes in words ("exact: every call recorded", "1 in
 * 100 calls sampled", ...), and its programs ("twice (pid 123)"), in buf. */
void mf_sampling_text(const struct mf_profile *p, char *buf, size_t size);
void mf_side_programs(const struct mf_profile *p, char *buf, size_t size);

/* "+1,234", "-5", "0" in buf (at least 40 bytes). */
const char *mf_fmt_signed(char *buf, int64_t v);

#endif
