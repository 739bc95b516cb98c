/* The timeline (mf_format.h, timeline.mftl): its reader, and the recorder that writes it
 * (mf_print --record), a snapshot at a time. */
#ifndef MF_TIMELINE_H
#define MF_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "mf_format.h"
#include "profile_read.h"

/* A timeline as read: its points, each with its records (recs[first .. first + n)). */
struct mf_tl_pt {
    struct mf_tl_point h; /* as written */
    uint32_t first;
};
struct mf_timeline {
    char *path;
    uint64_t start_ns, interval_ns;
    struct mf_tl_pt *points;
    uint32_t npoints;
    struct mf_tl_stack *recs;
    uint32_t nrecs;
    bool last; /* the recorder's last point is there: the run was recorded to its end */
    uint32_t version; /* its header's: how its stack ids were made (mf_stack_id) */
};

/* Reads dir/timeline.mftl. Returns 0 with t filled in, 1 if there is none (nothing said),
 * 2 if it cannot be used at all (one line on stderr). A file whose points go bad part-way
 * (cut short, damaged) gives its points before that and one line saying so. */
int mf_timeline_read(struct mf_timeline *t, const char *dir);
void mf_timeline_free(struct mf_timeline *t);

/* The identity of a raw stack (frames innermost first) as a timeline of that version
 * names it (mf_format.h): its process image's stamp, flags, depth and frames, hashed; never
 * 0. */
uint64_t mf_stack_id(uint32_t version, uint64_t stamp, uint32_t flags, uint32_t depth,
                     const uint64_t *frames);
/* mf_stack_id of each of p's raw stacks for a timeline of that version (an ids_only
 * profile's as read, which are MF_TL_VERSION's). Read before mf_profile_drop_frames.
 * Allocated. */
uint64_t *mf_stack_ids(const struct mf_profile *p, uint32_t version);

struct mf_rec_prev {
    struct mf_tl_stack c; /* id, calls, bytes, var */
    uint32_t dir;
};

/* The recorder: mf_record_start makes dir/timeline.mftl (replacing one there), then each
 * mf_record_tick snapshots the profile in dir and appends a point of its growth, merging
 * points as mf_format.h says; call it when mf_record_due says so, from any loop. The last
 * tick (last true) marks the file finished. */
struct mf_recorder {
    char *dir, *path;
    int fd; /* the file, appended to; -1 after a failure */
    uint64_t interval_ns, last_ns;
    bool started; /* a snapshot found the profile */
    /* The last snapshot found every image ended. The next, due at once, confirms it before the
     * recording ends: a process started after that snapshot listed the run and ended before it
     * checked its images' lives (the shell's last command) is read by the next. */
    bool confirming;
    /* The previous snapshot: per stack id, its counts, and its directory (index + 1 in dirs;
     * 0: none, [not profiled]). The stacks of a directory left out are let go. */
    struct mf_map prev;
    uint64_t *ids;
    struct mf_rec_prev *prev_counts;
    uint32_t nprev, prev_cap;
    uint64_t calls, bytes; /* the exact totals at the previous snapshot */
    /* The points written, kept for merging. */
    struct mf_tl_pt *points;
    uint32_t npoints, points_cap;
    struct mf_tl_stack *recs;
    uint32_t nrecs, recs_cap;
    uint32_t running; /* process images running at the last snapshot */
    /* The process directories met (timeline.c): one whose images have all ended is read once
     * more at the next snapshot, then left out while it stays as it was; the left-out ones'
     * share of the exact totals and of [not profiled] is carried in base_*. */
    struct mf_rec_dir *dirs;
    uint32_t ndirs, dirs_cap;
    struct mf_map dir_map;
    uint64_t base_calls, base_bytes;
    struct mf_tl_stack base_unprofiled;
    uint32_t reading; /* the directory being read (index + 1; 0: none), since reading_from */
    uint64_t reading_from;
    /* The last snapshot's CPU time: its walk of the directories (readings included), its
     * directories' readings, and those of them no later snapshot repeats. */
    uint64_t walk_ns, read_ns, once_ns;
};
/* Returns true after one line on stderr if the file cannot be made. */
bool mf_record_start(struct mf_recorder *r, const char *dir);
/* The recorder's clock: CLOCK_REALTIME in ns (MF_PRINT_TEST_CLOCK=N runs it N times as fast,
 * for the tests of long runs). */
uint64_t mf_record_now(void);
/* When the next snapshot is due, in mf_record_now's ns. */
uint64_t mf_record_due(const struct mf_recorder *r);
/* Returns true if the run has ended: it was seen, and no process image of it ran at two
 * snapshots in a row (the second marks its point the last). A failure
 * to write says so once and stops the recording (the tick returns true). */
bool mf_record_tick(struct mf_recorder *r, bool last);
void mf_record_end(struct mf_recorder *r);

/* mf_print --record DIR: ticks until the run ends or SIGINT, SIGTERM or SIGHUP, then a last
 * tick. Returns the exit status. */
int mf_record(const char *dir);

#endif
