/* The reports: each a function of the model (model.h), or of the caller tree built from it. */
#ifndef MF_REPORT_H
#define MF_REPORT_H

#include <stdio.h>

#include "call_tree.h"
#include "diff.h"
#include "mf_print.h"
#include "model.h"
#include "profile_read.h"

enum mf_format {
    MF_FORMAT_TREE,
    MF_FORMAT_CSV,
    MF_FORMAT_COLLAPSED,
    MF_FORMAT_PPROF,
    MF_FORMAT_HTML,
    MF_FORMAT_JSON,
};

struct mf_report_options {
    double threshold; /* percent of all calls below which entries are folded */
    bool trim;
    bool full_names;   /* --full-names: the tree shows names as demangled */
    unsigned width;    /* tree: lines cut to this many columns, 0 not cut */
    bool weight_bytes; /* --weight bytes: collapsed counts bytes, html shows bytes first */
    const char *output; /* -o FILE, or NULL for standard output */
    const char *const *dirs;
    int ndirs;
    const char *program; /* --by program: the program this section of the tree is about */
    bool by_site;        /* --by site: CSV rows by site (report_sites.c) */
    bool by_size;        /* --by site,size: each site split by size class */
    uint32_t site_depth; /* --site-depth: the frames of a site (4) */
    const char *tune_header; /* --tune-header FILE */
};

/* Header with exact totals, then the caller tree (report_tree.c). */
void mf_report_tree(FILE *out, const struct mf_profile *p, const struct mf_tree *t,
                    const struct mf_report_options *o);

/* calls,bytes,samples,stack,locations,via: one row per merged stack (report_csv.c); frames
 * joined by ';', each percent-encoded where it holds '%', ';', a control character, a line
 * separator or a byte that is not UTF-8. */
void mf_report_csv(FILE *out, const struct mf_model *m);
/* --by program: the same rows for each program's model, with a last column, program (the
 * executable's basename), sorted by calls (then by program, then as mf_report_csv). */
void mf_report_csv_by_program(FILE *out, const struct mf_model *const *models,
                              const char *const *programs, uint32_t n);

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
/* The standard error of an estimate of calls or bytes, as the tree's ± takes it. */
uint64_t mf_size_class_hi(uint32_t c); /* the largest size of class c; UINT64_MAX: no end */
/* pc0..pc{K-1},calls,calls_stderr,bytes,bytes_stderr,mean_size,samples,via[,size_min,size_max]
 * [,program]: one row per site (and size class), sorted by calls. */
void mf_report_sites(FILE *out, const struct mf_model *const *models,
                     const char *const *programs, uint32_t n, const struct mf_report_options *o);
/* --sizes --tune (report_tune.c): what the size histogram means for an allocator, and
 * --tune-header FILE: the measured classes as a C header. Return true if they failed. */
bool mf_report_tune(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
bool mf_write_tune_header(const char *path, const struct mf_model *m,
                          const struct mf_report_options *o);

/* The others return true if they failed (after saying why on stderr). */
/* root;...;site COUNT, one line per stack (report_collapsed.c). */
bool mf_report_collapsed(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* gzip-compressed profile.proto (report_pprof.c). */
bool mf_report_pprof(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* A comparison (--base, diff.h): the sites and their stacks by the size of the change, as a
 * table (report_diff.c), as CSV rows (report_diff.c), or as one pprof profile holding NEW and
 * OLD negated, as go tool pprof -diff_base sees them (report_pprof.c). */
void mf_report_diff_tree(FILE *out, const struct mf_diff *d, const struct mf_report_options *o);
void mf_report_diff_csv(FILE *out, const struct mf_diff *d);
bool mf_report_diff_pprof(FILE *out, const struct mf_diff *d, const struct mf_report_options *o);
/* One self-contained HTML file with an interactive flame graph (report_html.c). */
bool mf_report_html(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* --live (report_live.c): the tree's header for the live heap; the lifetime table printed
 * after the tree, per allocation site; the CSV of the same per stack. sort_temporary:
 * --sort temporary, the largest temporary share first (else the most live bytes). */
void mf_report_live_header(FILE *out, const struct mf_profile *p, const struct mf_report_options *o);
void mf_report_lifetimes(FILE *out, const struct mf_model *m, bool sort_temporary);
void mf_report_live_csv(FILE *out, const struct mf_model *m, bool sort_temporary);
/* m's stacks without those of no calls (nothing alive), in a new array: m is a copy. */
void mf_model_keep_counted(struct mf_model *m);
/* The model as JSON (report_json.c). */
bool mf_report_json(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* A JSON number, %.6g; null for infinity or NaN, which JSON has not (a damaged file's
 * variance can make either): every JSON writer's standard errors. */
void mf_json_number(FILE *out, double v);
/* --sizes (report_sizes.c): the size histogram, estimated from the samples with its errors
 * (exact where every call was recorded); text (the tree format), csv or json. */
bool mf_report_sizes(FILE *out, const struct mf_model *m, enum mf_format format,
                     const struct mf_report_options *o);

/* By program (programs.c). --program: keeps the processes of the programs named (the
 * executable's basename or path) in p; an unknown name is one line on stderr listing the
 * programs there are, and true. --by program: the tree as a table of the programs then a
 * section per program with its own header, or CSV with a program column. */
bool mf_programs_keep(struct mf_profile *p, const char *const *names, int n);
bool mf_report_by_program(FILE *out, const struct mf_profile *p, enum mf_format format,
                          const struct mf_report_options *o);

/* The tree's footer (unresolved.c): add each model reported, then print once the modules
 * whose frames could not be named in full (no debug information, stripped, missing or
 * rebuilt), with the calls whose stacks pass through each (and their share of the calls
 * of every stack added: estimates, like the tree's) and what would fix it. Nothing if
 * there are none. */
void mf_unresolved_add(const struct mf_model *m);
void mf_report_unresolved(FILE *out);
void mf_unresolved_sysroot(const char *sysroot); /* --sysroot: its package lists first */

#endif
