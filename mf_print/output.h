/* The report's output (output.c): standard output, a file, or --save's file replaced once
 * the report is whole; and the cutting of a text report's lines to the terminal's width. */
#ifndef MF_OUTPUT_H
#define MF_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mf_print.h"

struct mf_file_out {
    int fd;
    bool uncached; /* to be tried past MF_CACHED_OUT */
    uint64_t written;
    int err; /* the errno of the first write that failed, whichever thread wrote */
};

/* The report's destination: standard output, FILE, or for --save a temporary file beside
 * FILE that replaces it once the report is whole (a failed snapshot leaves the last one). */
struct mf_output {
    FILE *f;
    const char *path;
    struct mf_replace replace; /* --save: FILE is replaced once the report is whole */
    bool replacing;
    FILE *under;              /* f is our stream over this one's file (mf_file_write) */
    struct mf_file_out file;
    char *buf;                /* f's: an uncached write of 8 KiB (stdio's own size) cost 46 us */
};

/* Opens the output: path, or standard output for NULL; with replace, path is replaced only
 * once the report is whole. Returns true after one line on stderr if it cannot. */
bool mf_output_open(struct mf_output *o, const char *path, bool replace);
/* Returns true if the report could not be written whole (after saying why); failed: the
 * report failed, so --save's file is left as it was. */
bool mf_output_close(struct mf_output *o, bool failed);

/* Writes a text report through a buffer that cuts its lines when width is set: the stream
 * to write it to, between mf_cut_begin and mf_cut_end. */
struct mf_cut {
    FILE *out, *mem;
    char *text;
    size_t len;
};
FILE *mf_cut_begin(struct mf_cut *c, FILE *out, unsigned width);
void mf_cut_end(struct mf_cut *c, unsigned width);

#endif
