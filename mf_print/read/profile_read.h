/* Reading a profile: the files of one or more malloc_freq.<pid> directories, validated and
 * merged into processes (with their module lists) and distinct raw stacks. */
#ifndef MF_PROFILE_READ_H
#define MF_PROFILE_READ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mf_format.h"
#include "mf_print.h"

struct mf_module {
    uint64_t bias, lo, hi;
    uint32_t build_id_len;
    uint8_t build_id[32];
    char *path;
    uint32_t order;   /* record index in the process file: later records win overlaps */
    uint32_t epoch;   /* stacks of an earlier module epoch never lie in it */
    uint32_t modfile; /* the symbolizer's id for this file, MF_MAP_EMPTY until looked up */
};

struct mf_process {
    uint64_t stamp;
    uint32_t pid;
    const char *dir;
    bool dir_owned; /* dir is the reader's copy (mf_profile_free frees it), not a saved profile's path */
    dev_t dir_dev; /* the process directory its files were read from */
    ino_t dir_ino;
    bool has_file; /* its process file was read: the fields below it are valid */
    uint32_t flags;
    uint64_t start_ns, end_ns, sample_interval, exact_calls;
    /* At exit: the calls the exact stretch really recorded (fewer than exact_calls when its
     * time cap ended it first, or the process made fewer calls); 0 while it runs. */
    uint64_t exact_recorded;
    uint32_t cost_share_ppm; /* default mode (sample_interval 0): the cost budget */
    uint32_t ramp_samples, ramp_step; /* the interval's ramp past the exact stretch; 0: none */
    uint64_t large_bytes;    /* MALLOC_FREQ_LARGE: calls this large were all recorded; 0 off */
    char exe[256];
    struct mf_module *modules; /* sorted by lo */
    uint32_t nmodules;
    uint32_t nthreads;
    uint64_t threads_start_ns, threads_last_ns; /* min start, max last of its threads */
    uint64_t calls; /* exact, over its threads */
    /* It ran past its exact stretch: any count of it may be an estimate, even one whose
     * samples all had weight 1 (calls after the stretch may have gone unsampled). */
    bool sampled;
    bool weighted; /* some sample of it had a weight > 1 */
    /* calls its stacks (and [not profiled]) account for: short of `calls` when the calls
     * after its exact stretch drew no sample before it ended */
    uint64_t attributed;
    /* Over its recorded samples: sum w(w - 1) and sum (w - 1). Their ratio is the typical
     * weight of its weighted samples (weight-1 samples add nothing to either). */
    uint64_t weight_var, weight_excess;
    /* Its share of the profile's totals, for a report of some processes (--program). */
    struct mf_totals totals;
    uint64_t unprofiled_samples, unprofiled_calls, unprofiled_bytes, unprofiled_var;
    /* Its threads' size histograms summed, for a report of some processes (--program
     * --sizes); NULL until a thread file of it is read. */
    struct mf_size_class *sizes;
    /* The seq of each of its thread files that was read (not skipped): the live heap's
     * records name their stacks through these only (live_read.c). */
    uint64_t *tables;
    uint32_t ntables, tables_cap;
    /* Its live heap's largest sampling interval (the header's interval_max, or a record's
     * weight if larger; live_read.c): the live view's error bars are at least one sample
     * of it. */
    uint64_t live_interval;
    /* With merge_images (set while its thread files are read): the process whose addresses
     * its stacks are kept in, its own index if it is the first image of its program and
     * modules, MF_IMAGE_APART if they stay its own (no process file, modules that overlap);
     * rebase[j]: what moves an address of modules[j] to that process's copy of the module. */
    bool image_known;
    uint32_t image;
    int64_t *rebase;
};
#define MF_IMAGE_APART UINT32_MAX

/* One distinct stack of one process image (identical stacks of its threads merged), or with
 * merge_images of the images of one program whose modules lie at other addresses. */
struct mf_raw_stack {
    uint32_t process;
    uint32_t depth;
    uint32_t flags; /* MF_ENTRY_* */
    uint64_t *frames; /* return addresses, innermost first; NULL if ids_only */
    uint64_t id;      /* with ids_only: its timeline id (mf_tl_id, mf_format.h) */
    uint64_t samples, calls, bytes;
    uint64_t var; /* the estimated variance of calls: the sum of w(w-1) over the samples */
    double bytes_var; /* the estimated variance of bytes: the sum of w(w-1) size^2 */
    /* Its counts by size class: profile->stack_sizes[sizes_first .. + nsizes), by class
     * (set by mf_profile_finish). Calls of entries without a class (MF_ENTRY_SIZED) are in
     * none: the classes' calls may sum to less than the stack's. */
    uint32_t sizes_first, nsizes;
    /* The process images whose counts it holds: 1, more when merge_images merged it.
     * Counts of stacks (the reports' "distinct") weigh each by it, so that they are those of
     * the stacks as the processes recorded them. */
    uint32_t images;
    /* One of those images ran past its exact stretch (mf_profile_finish): even its counts
     * of weight-1 samples are estimates. */
    bool sampled;
    uint32_t source, last; /* while reading: the image it was made for, the latest other one */
};

/* One raw stack's samples of one size class (format 5 keys entries by class, mf_format.h). */
struct mf_stack_size {
    uint32_t stack;      /* profile->stacks index */
    uint32_t size_class; /* < MF_SIZE_CLASSES */
    uint64_t samples, calls, bytes;
    uint64_t var;     /* as mf_raw_stack's */
    double bytes_var;
};

/* What reading needs until mf_profile_finish (profile_read.c): the stacks, thread tables and
 * directories met so far, so that each is merged or read once. */
/* With merge_images: a raw stack and one more process image whose counts it holds. */
struct mf_stack_image {
    uint32_t stack, process;
};

struct mf_read_state {
    struct mf_map stack_ids; /* a raw stack's identity -> its index */
    struct mf_map images;    /* a program and its modules -> the first process image of them */
    struct mf_stack_image *more; /* the raw stacks' other images, for mf_profile_finish */
    uint32_t nmore, more_cap;
    /* An image's thread files were read apart (the directory given twice in part): its
     * pairs in `more` may repeat, and are counted once (mf_profile_finish). */
    uint32_t last_file_process; /* its index + 1, 0 before the first file */
    bool apart;
    uint32_t *size_next;     /* the chains of the stacks' counts by size class */
    struct mf_table_id *tables;
    uint32_t ntables, tables_cap;
    struct mf_map table_map;
    struct mf_dir_id *dirs;
    uint32_t ndirs, dirs_cap;
    struct mf_map dir_map;
};

struct stat;
struct mf_profile {
    /* Set before reading: estimates as recorded, not calibrated to the exact totals. */
    bool uncalibrated;
    /* Set before reading: the stacks' counts by size class are not kept (the timeline's
     * recorder, which reads every directory once more after its processes end, needs only
     * each stack's counts; keeping them was a tenth of its time). */
    bool no_sizes;
    /* Set before reading: stacks are told apart by their timeline id (mf_tl_id, computed a
     * node at a time), and their frames are not kept (the recorder: copying a build's 10^6
     * stacks' frames was a fifth of its time, and their memory a fault a page). */
    bool ids_only;
    /* Set before reading: the processes of one program whose modules are the same files
     * laid out alike, at other addresses (ASLR), keep their stacks as one: each stack of a
     * later image is moved to the first image's addresses, where it is symbolized alike
     * (mf_rebase). A build's 66 compiles then give a stack once, not 66 times: its
     * 685,918 raw stacks took its summary 2.1-3.0 s and 394 MB (0.8-1.1 s and 82 MB
     * merged, docs/design.md §14). Only for reports that never tell a stack's processes
     * apart (not json, pprof, html, the live heap's, the timeline's ids, --save): the
     * counts of stacks they show weigh each by its images. */
    bool merge_images;
    /* Set before reading, or NULL: a process directory for which left_out(its path, its
     * stat, how many profile files it lists, ctx) is true is not read, though it counts as
     * found (the directories under it are walked). A reader that reads a directory again
     * and again leaves out what cannot have changed. */
    bool (*left_out)(const char *dir, const struct stat *st, uint32_t nfiles, void *ctx);
    void *left_out_ctx;
    struct mf_process *procs;
    uint32_t nprocs, procs_cap;
    struct mf_raw_stack *stacks;
    uint32_t nstacks, stacks_cap;
    /* the stacks' counts by size class, sorted by stack then class (mf_profile_finish); a
     * subset shares its source's */
    struct mf_stack_size *stack_sizes;
    uint32_t nstack_sizes, stack_sizes_cap;
    struct mf_totals totals; /* exact, summed over all threads */
    uint64_t unprofiled_samples, unprofiled_calls, unprofiled_bytes, unprofiled_var;
    /* calls of every stack and [not profiled]: no sum of calls a report makes exceeds it,
     * and it never wraps (a file that would make it, or the totals, wrap is skipped) */
    uint64_t stacks_calls;
    double unprofiled_bytes_var;
    /* the size histogram, summed over all threads (struct mf_size_class: calls and bytes
     * estimated from the samples, and their variances) */
    struct mf_size_class sizes[MF_SIZE_CLASSES];
    uint32_t nthreads;
    uint32_t nfiles_read; /* valid thread and process files */
    uint32_t nfiles_skipped;
    uint32_t ndirs_read; /* process directories read (a run directory holds many) */
    /* The live heap (live_read.c), beside the counts, which stay as read: */
    uint32_t live_files;      /* live.<stamp>.mfl files read */
    uint64_t live_dropped;    /* allocations the writer found no slot for (weighted) */
    uint64_t live_stats_dropped; /* frees whose stack found no statistics slot (weighted) */
    uint64_t live_records;    /* live records read */
    uint64_t live_unmatched;  /* live records whose stack entry was not in the profile read */
    /* While some image runs, the records of images that ended (exited, exec'd, killed) are
     * not alive now: left out of the view, their allocations (weighted) and images here. */
    uint64_t live_gone;
    uint32_t live_gone_images;
    struct mf_lifetimes *lifetimes; /* per stack: its freed sampled allocations */
    struct mf_live_count *live; /* per stack: its live allocations (mf_live_attach), or NULL */
    /* What holds the raw stacks' frames until mf_profile_drop_frames: chunks of the frames
     * decoded from the files' node chains. A subset owns none. */
    struct mf_frame_chunk *frame_chunks;
    struct mf_read_state reading;
};

/* A stack's sampled allocations alive, weighted (the live view's samples, calls, bytes, var
 * and bytes_var). */
struct mf_live_count {
    uint64_t samples, calls, bytes, var;
    double bytes_var;
};

/* The freed sampled allocations of a stack (struct mf_live_stats, summed), weighted. */
struct mf_lifetimes {
    uint64_t freed, freed_samples, freed_bytes, temporary, same_thread;
    uint64_t life_calls[MF_LIVE_CALL_BUCKETS];
    uint64_t life_ns[MF_LIVE_NS_BUCKETS];
};

/* Reads the live heap files of p's processes (after mf_profile_finish, before
 * mf_profile_drop_frames) into p->live and p->lifetimes; the counts stay as read (a model
 * built with MF_VIEW_LIVE weighs its stacks by p->live). Returns true if no process of p
 * recorded its live heap, after saying so if required. */
bool mf_live_attach(struct mf_profile *p, bool required);

/* How many profile files the directory dir (whose stat was st) lists now; UINT32_MAX if it
 * cannot be listed or is another directory by now. */
uint32_t mf_profile_files_now(const char *dir, const struct stat *st);

/* Adds the files of one malloc_freq.<pid> directory to p (call mf_profile_finish after the
 * last one), or of every process directory under dir (a run directory, or the directories
 * a build ran in: subdirectories are walked, symbolic links not followed, MF_WALK_DEPTH
 * levels at most). A bad file is named on stderr and skipped. Returns true on error (no
 * such directory, no profile files in it or under it), after saying so. */
#define MF_WALK_DEPTH 32
bool mf_profile_read_dir(struct mf_profile *p, const char *dir);
/* A directory's (device, inode), hashed: the key of a map of directories (the reader's, the
 * timeline recorder's). */
uint64_t mf_dir_id_hash(dev_t dev, ino_t ino);

/* The processes of src for which keep(process, ctx) is true, as a profile of their own:
 * their stacks and their totals (stacks share src's frame arrays: free src last). */
void mf_profile_subset(struct mf_profile *dst, const struct mf_profile *src,
                       bool (*keep)(const struct mf_process *pr, void *ctx), void *ctx);

/* The program of a process image: the basename of its executable, "?" if unknown. */
const char *mf_process_program(const struct mf_process *pr);

/* Derives what needs every file: which processes were sampled. */
void mf_profile_finish(struct mf_profile *p);

/* Frees p's raw stacks' return addresses (their frames become NULL) once the model has
 * turned them into locations: the largest part of a big profile's memory. Only p's: a
 * profile read after it keeps its own. */
void mf_profile_drop_frames(struct mf_profile *p);

/* A stack entry of a thread file, decoded (mf_format.h; a narrow entry's samples are its
 * calls): its flags without MF_ENTRY_WIDE and the class bits, its class apart, its depth
 * its node's (set by whoever reads the node). */
struct mf_stack_entry {
    uint32_t node, depth, flags, size_class;
    uint64_t samples, calls, bytes, calls_sq;
    double bytes_var;
};
/* Slot i of seg's entries (a copy of the file's) decoded into *e, depth 0; returns the slots
 * the entry takes (1, or 4 for a wide one), 0 where the segment's entries end: a slot not
 * written yet, or a wide entry whose last slot would be past the segment's capacity. */
uint32_t mf_entry_decode(const struct mf_segment_header *seg, uint64_t i, struct mf_stack_entry *e);

/* A raw stack's identity in p: its process image, depth, flags and frames. A stack entry of
 * a thread file is keyed without MF_ENTRY_SIZED: the reader keeps one stack for all its size
 * classes' entries (mf_stack_key_of). mf_stack_eq compares p->stacks[idx] with a key, for
 * an mf_map keyed by mf_stack_hash. */
struct mf_stack_key {
    const struct mf_profile *p;
    uint32_t process, depth, flags;
    const uint64_t *frames;
};
struct mf_stack_key mf_stack_key_of(const struct mf_profile *p, uint32_t process,
                                    const struct mf_stack_entry *e, const uint64_t *frames);
uint64_t mf_stack_hash(const struct mf_stack_key *k);
/* An entry's frames, innermost first, decoded from its nodes in the thread file buf (size
 * bytes, segments as its header says) into out, and e->depth set to their number (its
 * node's depth); false if its chain is not whole: a node outside the file, of the wrong
 * depth, or not made before its callee. */
bool mf_entry_frames(const uint8_t *buf, size_t size, struct mf_stack_entry *e, uint64_t *out);
bool mf_stack_eq(const void *ctx, uint32_t idx);

/* Frees everything p holds, after mf_profile_finish (not a subset's: it shares its
 * source's), for a reader that reads a directory again and again (--watch). */
void mf_profile_free(struct mf_profile *p);

/* How many of pr's modules (sorted by lo) start at or below pc: the last of them is the
 * one pc may lie in. */
uint32_t mf_modules_from(const struct mf_process *pr, uint64_t pc);

/* The distinct stacks of its process images: its raw stacks, each as many times as images
 * it holds (merge_images). */
uint64_t mf_profile_image_stacks(const struct mf_profile *p);

/* All calls counted in the thread headers (exact). */
uint64_t mf_profile_total_calls(const struct mf_profile *p);
uint64_t mf_profile_total_bytes(const struct mf_profile *p);
/* Wall time of the run in ns: max end - min start over processes. */
uint64_t mf_profile_wall_ns(const struct mf_profile *p);

#endif
