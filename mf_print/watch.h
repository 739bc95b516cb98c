/* --watch (watch.c): a run directory's (or one process directory's) allocation sites while
 * its programs run, refreshed every --interval. Each tick reads the files afresh (the
 * reader takes tables that grow as they are read), builds the model, and keeps per site
 * (the --by site notion at depth 1: the innermost frame a report shows, and the wrapper
 * folded into it) the totals since the start and what changed since the last tick. The
 * view is ncurses on a terminal, plain text blocks elsewhere. */
#ifndef MF_WATCH_H
#define MF_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "model.h"
#include "request.h"

struct mf_watch_site {
    uint32_t name, via;           /* interned: the site's frame and the wrapper it called */
    uint64_t calls, bytes, var;   /* since the start (never less than the tick before's) */
    double bytes_var;
    bool estimated;
    uint64_t live_calls, live_bytes; /* alive now (the live heap), estimates */
    /* Over the last tick: the rates, the calls' standard error per second, and growth
     * (live bytes per second with the live heap, else the change of calls/s since the tick
     * before). */
    double calls_rate, calls_rate_se, bytes_rate, growth;
};

enum mf_watch_sort { MF_SORT_CALLS, MF_SORT_BYTES, MF_SORT_GROWTH };

struct mf_watch {
    const char *const *dirs;
    int ndirs;
    struct mf_model_config config;
    struct mf_watch_site *sites;
    uint32_t nsites, cap;
    struct mf_map map;           /* (name, via) -> sites index */
    uint64_t sample_interval;    /* the model's, for the error bars */
    uint64_t calls, bytes;       /* exact, from the thread headers */
    double calls_rate, bytes_rate;
    bool live;                   /* some process records its live heap */
    uint64_t live_bytes;
    uint32_t running, ended;     /* process images */
    char programs[512];          /* the programs running: "cc1 ×2, as" */
    bool read_any;               /* some profile file was read (ever) */
    bool rates;                  /* two ticks made: the rates are set */
    struct timespec at;          /* the last tick (CLOCK_MONOTONIC) */
    time_t wall;                 /* and its wall-clock time */
    /* Messages the reader wrote (skipped files ...), each kept once: shown, not repeated
     * every tick. */
    uint32_t *said;              /* interned message lines */
    uint32_t nsaid, said_cap;
    uint32_t said_shown;         /* those already passed on */
    int msg_fd;                  /* where stderr goes while a tick reads */
    struct mf_recorder *rec;     /* --record: the timeline's, ticked when due; or NULL */
};

/* One tick: reads the directories, builds the model, and sets the sites' totals and their
 * rates since the last tick. A recorder may be called after it from the same loop. */
void mf_watch_step(struct mf_watch *w);
/* The sites in order of key, the largest first (an index array of w->nsites). */
uint32_t *mf_watch_order(const struct mf_watch *w, enum mf_watch_sort key);
/* Runs the view the request asks for; returns the exit status. */
int mf_watch(const struct mf_request *r);

#endif
