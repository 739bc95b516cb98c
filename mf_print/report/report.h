/* The reports: each a function of the model (model.h), or of the caller tree built from it. */
#ifndef MF_REPORT_H
#define MF_REPORT_H

#include <stdio.h>

#include "call_tree.h"
#include "diff.h"
#include "mf_print.h"
#include "model.h"
#include "profile_read.h"
#include "timeline.h"

/* --check RULES (report_check.c, docs/budgets.md): allocation budgets. */
enum mf_check_qty { MF_CHECK_CALLS, MF_CHECK_BYTES, MF_CHECK_LIVE_CALLS, MF_CHECK_LIVE_BYTES, MF_CHECK_NQTY };
enum mf_check_op { MF_CHECK_LE, MF_CHECK_LT, MF_CHECK_GE, MF_CHECK_GT, MF_CHECK_EQ, MF_CHECK_NOPS,
                   MF_CHECK_GROW = MF_CHECK_NOPS };
struct mf_check_rule {
    char *text;         /* as written, for the verdict */
    enum mf_check_qty qty;
    char *function;     /* calls(f): the sites named f; NULL: the whole profile */
    enum mf_check_op op;
    double limit;       /* the bound, or (MF_CHECK_GROW) the growth allowed */
    bool percent;       /* the growth allowed is in percent of OLD */
};
struct mf_check {
    struct mf_check_rule *v;
    uint32_t n;
};
/* An estimate breaks a rule only when it is more than this many standard errors past it. */
#define MF_CHECK_SIGMAS 3
/* mf_print's exit status when a rule is broken. */
#define MF_EXIT_BROKEN 4
/* Adds the rules of text to chk. file: where text was read from, for messages (NULL: the
 * command line). False on a bad rule, with one line in err naming it and its column, as
 * given (mf_usage_error shows it escaped). */
bool mf_check_parse(struct mf_check *chk, const char *text, const char *file, char *err,
                    size_t errsize);
/* Whether chk has a growth rule (growth), a live heap rule (live). */
bool mf_check_has(const struct mf_check *chk, bool growth, bool live);

struct mf_report_options {
    double threshold; /* percent of all calls below which entries are folded */
    uint32_t depth;   /* --depth: the tree's levels shown, 0 all */
    uint32_t top;     /* --top: the tree's top-level entries shown at least, under the threshold too */
    bool trim;
    bool full_names;   /* --full-names: the tree shows names as demangled */
    unsigned width;    /* tree: lines cut to this many columns, 0 not cut */
    bool weight_bytes; /* --weight bytes: collapsed counts bytes, html shows bytes first */
    bool live;         /* --live: the html page opens on live bytes (its model keeps calls) */
    bool sort_temporary; /* --sort temporary: --live's sites by temporary share */
    const char *output; /* -o FILE, or NULL for standard output */
    const char *const *dirs;
    int ndirs;
    const char *program; /* --by program: the program this section of the tree is about */
    bool by_site;        /* --by site: CSV rows by site (report_sites.c) */
    bool by_size;        /* --by site,size: each site split by size class */
    uint32_t site_depth; /* --site-depth: the frames of a site (4) */
    const char *tune_header; /* --tune-header FILE */
    const char *sysroot;     /* --sysroot: the unresolved modules' package lists */
    const struct mf_check *check; /* --check's rules */
};

/* ---- the one report interface ----------------------------------------------------------
 *
 * Every report is a function of a view: the models a request made, each weighed as its
 * view says (model.h), and the options. The registry (registry.c) holds one line per
 * report: the format it writes, the kinds of request it serves, what it reads, and the
 * function. The usage text, the option compatibility rules (request.c) and the dispatch
 * (run.c) are all made from it: a new format is a report file and one registry line. */

/* What a report reads. */
struct mf_report_input {
    const struct mf_profile *p;   /* the profile read (NULL for a comparison) */
    const struct mf_model *model; /* the whole profile's model (NULL for a comparison) */
    /* --by program: a model per program, with their names; else the one model, unnamed */
    const struct mf_model *const *parts;
    const char *const *part_names;
    uint32_t nparts;
    const struct mf_diff *diff; /* --base */
    /* The run's timeline (--timeline; html when the directory has one), else NULL, and the
     * ids of p's raw stacks it names them by (mf_stack_ids). */
    const struct mf_timeline *timeline;
    const uint64_t *stack_ids;
};

/* Returns true if the report failed (after saying why on stderr). */
typedef bool mf_report_fn(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o);

/* The kinds of request, each served by some formats' reports. */
enum mf_kind {
    MF_KIND_PLAIN = 1,      /* the calls */
    MF_KIND_LIVE = 2,       /* --live */
    MF_KIND_SIZES = 4,      /* --sizes */
    MF_KIND_TUNE = 8,       /* --sizes --tune */
    MF_KIND_SITES = 16,     /* --by site */
    MF_KIND_BY_PROGRAM = 32, /* --by program */
    MF_KIND_BASE = 64,      /* --base */
    MF_KIND_TIMELINE = 128, /* --timeline */
    MF_KIND_CHECK = 256,    /* --check */
    MF_KIND_CHECK_BASE = 512, /* --check --base */
};

/* What the request builds for a report. */
enum mf_input {
    MF_INPUT_MODEL, /* one model of the whole profile */
    MF_INPUT_PARTS, /* a model per program with --by program, else the one model */
    MF_INPUT_DIFF,  /* the comparison of two sides */
};

struct mf_report {
    const char *format;
    const char *help;  /* --format's usage text, on the format's first line (NULL there: a
                          format --format does not offer) */
    unsigned kinds;    /* enum mf_kind bits */
    enum mf_input input;
    bool cut;          /* text for people: lines cut to --width */
    bool attach_live;  /* the live heap read beside the calls, which the model keeps (--live
                          only required: the flame graph offers both) */
    int fail_status;   /* the exit status when the report returns true: 1, or a check's
                          MF_EXIT_BROKEN (a rule broken: the report said which) */
    mf_report_fn *fn;
    bool by_process;   /* it tells a stack's processes apart (json's process, pprof's pid
                          label): the images of one program are not merged for it
                          (mf_profile.merge_images) */
};

/* The first report that writes format for a request of one of these kinds (enum mf_kind
 * bits), or NULL. */
const struct mf_report *mf_report_find(const char *format, unsigned kinds);
/* Whether --format offers format (the check report is chosen by --check only). */
bool mf_report_listed(const char *format);
/* The formats that serve kind (0: any), each once, in the registry's order, as words:
 * "tree, csv or json". */
void mf_formats_text(char *buf, size_t size, unsigned kind);
/* --format's lines of the usage text. */
void mf_usage_formats(FILE *out);

/* The reports (each file's one function; the registry's lines). */
mf_report_fn mf_report_tree, mf_report_tree_by_program, mf_report_csv,
    mf_report_live_csv, mf_report_sites, mf_report_collapsed, mf_report_pprof, mf_report_html,
    mf_report_json, mf_report_sizes_text, mf_report_sizes_csv, mf_report_sizes_json,
    mf_report_tune, mf_report_diff_tree, mf_report_diff_csv, mf_report_diff_pprof,
    mf_report_timeline_text, mf_report_timeline_csv, mf_report_timeline_json,
    mf_report_check, mf_report_check_diff;
#ifdef MF_TEST_REPORT
mf_report_fn mf_report_test;
#endif


/* The caller tree of m (report_tree.c), with its header: a section of mf_report_tree and
 * of mf_report_tree_by_program. */
/* The headers' list of allocation functions, "malloc 12 (1.2 KiB), calloc ...", each after
 * its separator (first, then ", "); false if no function was called (report_tree.c). */
bool mf_put_functions(FILE *out, const struct mf_profile *p, const char *first);
void mf_tree_print(FILE *out, const struct mf_model *m, const struct mf_tree *t,
                   const struct mf_report_options *o);

/* One interned string as a CSV field, percent-encoded and quoted as the CSV report's frames
 * are (report_csv.c). */
void mf_csv_name_field(FILE *out, uint32_t id);
/* n interned names joined by ';' as one CSV field, as the CSV report's stack column. */
void mf_csv_names_field(FILE *out, const uint32_t *names, uint32_t n);
/* n frames as one CSV field: their names (locs false) as the stack column, or their
 * file:line (?? for none) as the locations column. These three are every CSV writer's way
 * to write a name: none writes one itself. */
void mf_csv_frames_field(FILE *out, const struct mf_frame *f, uint32_t n, bool locs);

/* --by site (report_sites.c): rows keyed by the innermost `depth` frames shown of each stack
 * and its via (0 pads a stack with fewer frames), per part (a program of --by program),
 * split by size class when by_size. */
#define MF_SITE_ALL_SIZES UINT32_MAX          /* a row of every size */
#define MF_SITE_SIZE_UNKNOWN (UINT32_MAX - 1) /* calls of no known class ([not profiled]) */
struct mf_site_row {
    uint64_t samples, calls, bytes, var;
    double bytes_var;
    bool estimated;
    uint32_t part, via, size_class;
    uint32_t key; /* its names: mf_site_names */
};
struct mf_sites {
    struct mf_site_row *rows;
    uint32_t n, cap, depth;
    uint32_t *names;
    size_t names_cap;
    struct mf_map map;
};
void mf_sites_build(struct mf_sites *t, const struct mf_model *const *models, uint32_t n,
                    uint32_t depth, bool by_size);
void mf_sites_sort(struct mf_sites *t); /* by calls, then by the names */
void mf_sites_free(struct mf_sites *t);
const uint32_t *mf_site_names(const struct mf_sites *t, const struct mf_site_row *r);
uint64_t mf_size_class_hi(uint32_t c); /* the largest size of class c; UINT64_MAX: no end */
/* --tune-header FILE (report_tune.c): the measured size classes as a C header. Returns true
 * if it failed. */
bool mf_write_tune_header(const char *path, const struct mf_model *m,
                          const struct mf_report_options *o);

/* --live (report_live.c): the tree's header for the live heap; the lifetime table printed
 * after the tree, per allocation site, sorted as --sort says (o->sort_temporary: the largest
 * temporary share first, else the most live bytes); on a narrow width each site's name on
 * a line of its own above its numbers. */
void mf_report_live_header(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
void mf_report_lifetimes(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* Whether the text is cut to a narrow width (below 120 columns): numbers compact first, so
 * that the sites' names and lines keep the room. */
#define MF_NARROW_BELOW 120
static inline bool mf_narrow(const struct mf_report_options *o)
{
    return o->width && o->width < MF_NARROW_BELOW;
}
/* A JSON number, %.6g; null for infinity or NaN, which JSON has not (a damaged file's
 * variance can make either): every JSON writer's standard errors. */
void mf_json_number(FILE *out, double v);

/* By program (programs.c). --program: keeps the processes of the programs named (the
 * executable's basename or path) in p; an unknown name is one line on stderr listing the
 * programs there are, and true. --by program: a model of each program's processes, most
 * calls first, with their names (*models and *names allocated). */
bool mf_programs_keep(struct mf_profile *p, const char *const *names, int n);
uint32_t mf_programs_models(const struct mf_profile *p, const struct mf_model_config *c,
                            const struct mf_model ***models, const char ***names);
/* The programs of p, most calls first, with their exact totals (*out allocated). */
struct mf_program {
    const char *name;
    uint64_t calls, bytes; /* exact, from the thread headers */
    uint32_t nprocs;      /* process images */
};
uint32_t mf_programs(const struct mf_profile *p, struct mf_program **out);

/* The tree's footer (unresolved.c): add each model reported to a list (zeroed first), then
 * print once the modules whose frames could not be named in full (no debug information,
 * stripped, missing or rebuilt), with the calls whose stacks pass through each (and their
 * share of the calls of every stack added: estimates, like the tree's) and what would fix
 * it (sysroot: --sysroot, whose package lists are looked at first). Nothing if there are
 * none. Printing frees the list. */
struct mf_unresolved_list {
    struct mf_unresolved *v;
    uint32_t n, cap;
    uint64_t total; /* calls of every stack added */
};
void mf_unresolved_add(struct mf_unresolved_list *u, const struct mf_model *m);
void mf_report_unresolved(FILE *out, struct mf_unresolved_list *u,
                          const struct mf_report_options *o);

/* The timeline by site (report_timeline.c): the top sites' series over the timeline's
 * points, for the timeline's reports and the HTML page's chart. A site is a stack's
 * innermost frame shown (its function); the sites after the top ones are "[other sites]",
 * with the calls of stacks beyond a point's records and of stacks the profile no longer
 * holds. calls, bytes and var are [site * npoints + point]. */
struct mf_tl_series {
    uint32_t nsites, npoints;
    uint32_t *names;          /* interned */
    uint64_t *calls, *bytes, *var;
    bool estimated;           /* some count is an estimate (var > 0 somewhere, or sampled) */
    /* per record of the timeline: its stack's index in the model, UINT32_MAX if none */
    uint32_t *stack_of;
};
void mf_tl_series_build(struct mf_tl_series *s, const struct mf_model *m,
                        const struct mf_timeline *t, const uint64_t *ids, uint32_t top);
void mf_tl_series_free(struct mf_tl_series *s);

#endif
