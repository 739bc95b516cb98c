/* --live: the live heap files (live.<stamp>.mfl, c_core/mf_format.h) of the processes read,
 * read into the profile beside its counts (the model's live view weighs each stack by them):
 * each stack's sampled allocations still alive (each weighted as its sample was, so the sums estimate the live
 * allocations and bytes, with the same variance terms as the calls: w(w-1), w(w-1)size^2),
 * and each stack gets the lifetimes of those freed. A record names its stack by thread
 * file, segment and entry: that entry's frames find the profile's stack, through the thread
 * files the profile read (not those it skipped). Every offset and count is checked: the file
 * against the writer's geometry (MF_LIVE_FILE_MAX, refused unread), its tables against its
 * size and alignment, each record's weight against the process's sampling, the records and
 * frees of an entry against the samples and calls the entry made; what fails is left out,
 * one line for each kind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mf_print.h"
#include "process_life.h"
#include "profile_read.h"

/* name in the process directory dirfd (paths may be longer than PATH_MAX: profile_read.c).
 * keep: NULL, or where the file's descriptor is kept open, on success, for a second reading
 * of the same file (mf_stats_again). */
static bool mf_read_whole(int dirfd, const char *name, uint64_t max, uint8_t **data,
                          size_t *size, const char **why, int *keep)
{
    int fd = mf_open_regular_at(dirfd, name, false, max, why);
    if (fd < 0)
        return true;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0 || lseek(fd, 0, SEEK_SET) != 0 || (uint64_t)end > max) { /* grew since */
        *why = end < 0 || (uint64_t)end <= max ? strerror(errno) : "too large";
        close(fd);
        return true;
    }
    uint8_t *buf = mf_xmalloc((size_t)end + 1);
    *size = mf_pread_full(fd, buf, (size_t)end, 0);
    if (keep)
        *keep = fd;
    else
        close(fd);
    *data = buf;
    return false;
}

/* The statistics table (stats_bytes at stats_offset) of the live file open at fd read once
 * more, into an allocated copy, or NULL. A running program adds a free to a slot's `freed`
 * before the counts it bounds (freed_samples, temporary, same_thread, the lifetimes), and a
 * copy of the file reads a slot's `freed` before them: a free made while the copy was under way could
 * show in those and not in `freed` (under load, one `--live` read of a busy program in
 * dozens said so). `freed` is taken from this second copy, made after the first: at least
 * what the first copy's other counts were made from. */
static struct mf_live_stats *mf_stats_again(int fd, uint64_t stats_offset, uint64_t stats_bytes)
{
    struct mf_live_stats *again = mf_xmalloc(stats_bytes ? (size_t)stats_bytes : 1);
    size_t got = mf_pread_full(fd, (uint8_t *)again, (size_t)stats_bytes, stats_offset);
    if (got < stats_bytes) {
        free(again);
        return NULL;
    }
    return again;
}

/* A process's thread files, by seq, read when first needed. */
struct mf_tfile {
    uint64_t seq;
    char *name;
    uint8_t *data; /* NULL until read */
    size_t size;
    bool failed;
};

/* What an entry has left to give the records (and, apart, the frees) that name it: its
 * samples and calls as read after the live file, so never fewer than those had made. */
struct mf_budget {
    uint64_t ref, samples, calls;
};

struct mf_live_ctx {
    struct mf_profile *p;
    uint32_t process;
    struct mf_tfile *files;
    uint32_t nfiles, cap;
    struct mf_map stacks; /* (process, depth, flags, frames) -> stack index */
    struct mf_budget *budgets;
    uint32_t nbudgets, budgets_cap;
    struct mf_map budget_map; /* ref -> budgets index, one map per pass */
    uint32_t skipped; /* live files named and skipped */
    int dirfd;        /* the process's directory, while its live file is read */
};

static const struct mf_live_ctx *mf_budget_ctx;

static bool mf_budget_eq(const void *ctx, uint32_t idx)
{
    return mf_budget_ctx->budgets[idx].ref == *(const uint64_t *)ctx;
}

/* The budget of entry ref (made from e at its first use in this pass). */
static struct mf_budget *mf_budget_of(struct mf_live_ctx *c, uint64_t ref,
                                      const struct mf_stack_entry *e)
{
    bool added;
    mf_budget_ctx = c;
    uint32_t i = mf_map_put(&c->budget_map, mf_hash_u64(ref), mf_budget_eq, &ref, c->nbudgets,
                            &added);
    if (added) {
        MF_GROW(c->budgets, c->nbudgets, c->budgets_cap);
        c->budgets[c->nbudgets++] = (struct mf_budget){ref, e->samples, e->calls};
    }
    return &c->budgets[i];
}

static void mf_budgets_reset(struct mf_live_ctx *c)
{
    mf_map_free(&c->budget_map);
    c->nbudgets = 0;
}

static void mf_thread_files(struct mf_live_ctx *c, const struct mf_process *pr)
{
    int fd = dup(c->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    char prefix[40];
    int plen = snprintf(prefix, sizeof prefix, "thread.%016llx.", (unsigned long long)pr->stamp);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, prefix, (size_t)plen) != 0)
            continue;
        char *end;
        errno = 0;
        unsigned long long seq = strtoull(de->d_name + plen, &end, 10);
        if (errno || *end != '.')
            continue;
        MF_GROW(c->files, c->nfiles, c->cap);
        c->files[c->nfiles++] = (struct mf_tfile){.seq = seq, .name = mf_xstrdup(de->d_name)};
    }
    closedir(d);
}

/* The stack index of entry (seg, idx) of thread file seq, or UINT32_MAX; *entry the entry. */
static uint32_t mf_ref_stack(struct mf_live_ctx *c, const struct mf_process *pr, uint64_t ref,
                             struct mf_stack_entry *entry)
{
    uint64_t seq = MF_LIVE_REF_SEQ(ref);
    bool read = false; /* by the profile: a file it skipped names no stack */
    for (uint32_t i = 0; i < pr->ntables && !read; i++)
        read = pr->tables[i] == seq;
    struct mf_tfile *f = NULL;
    for (uint32_t i = 0; i < c->nfiles && !f && read; i++)
        if (c->files[i].seq == seq)
            f = &c->files[i];
    if (!f || f->failed)
        return UINT32_MAX;
    if (!f->data) {
        const char *why;
        if (mf_read_whole(c->dirfd, f->name, MF_THREAD_FILE_MAX, &f->data, &f->size, &why,
                          NULL)) {
            f->failed = true;
            return UINT32_MAX;
        }
    }
    const struct mf_thread_header *h = (const void *)f->data;
    uint32_t k = MF_LIVE_REF_SEG(ref), i = MF_LIVE_REF_IDX(ref);
    if (f->size < sizeof *h || k >= h->nsegments || k >= MF_MAX_SEGMENTS)
        return UINT32_MAX;
    uint64_t off = h->segment_offset[k], len = h->segment_size[k];
    if (off > f->size || len > f->size - off || len < MF_SEGMENT_ENTRIES_OFFSET || off % 8)
        return UINT32_MAX;
    const struct mf_segment_header *seg = (const void *)(f->data + off);
    uint64_t entries_end = MF_SEGMENT_ENTRIES_OFFSET + (uint64_t)seg->capacity * sizeof(struct mf_entry);
    if (i >= seg->capacity || entries_end > len)
        return UINT32_MAX;
    uint64_t frames[MF_DEPTH_MAX];
    if (!mf_entry_decode(seg, i, entry) || !mf_entry_frames(f->data, f->size, entry, frames))
        return UINT32_MAX;
    struct mf_stack_key key = mf_stack_key_of(c->p, c->process, entry, frames);
    return mf_map_get(&c->stacks, mf_stack_hash(&key), mf_stack_eq, &key);
}

/* A record is of a block the allocator returned: its size is below the size histogram's
 * last class, 2^48 and up, "more than any malloc can return" (mf_format.h). */
#define MF_LIVE_SIZE_MAX mf_size_class_lo(MF_SIZE_CLASSES - 1)

/* Whether the process samples with weight w: 1 (exact, the exact stretch, the large calls)
 * or its fixed interval, or in the default mode at most MF_INTERVAL_MAX. */
static bool mf_weight_ok(const struct mf_process *pr, uint32_t mode, uint64_t w)
{
    if (w == 1)
        return true;
    if (mode != MF_LIVE_SAMPLED || !w)
        return false;
    return pr->sample_interval ? w == pr->sample_interval : w <= MF_INTERVAL_MAX;
}

/* to += x, or false (and to unchanged) if a sum would wrap. */
static bool mf_life_sum(struct mf_lifetimes *to, const struct mf_live_stats *x)
{
    struct mf_lifetimes t = *to;
    bool wrap = __builtin_add_overflow(t.freed, x->freed, &t.freed);
    wrap |= __builtin_add_overflow(t.freed_samples, x->freed_samples, &t.freed_samples);
    wrap |= __builtin_add_overflow(t.freed_bytes, x->freed_bytes, &t.freed_bytes);
    wrap |= __builtin_add_overflow(t.temporary, x->temporary, &t.temporary);
    wrap |= __builtin_add_overflow(t.same_thread, x->same_thread, &t.same_thread);
    for (uint32_t b = 0; b < MF_LIVE_CALL_BUCKETS; b++)
        wrap |= __builtin_add_overflow(t.life_calls[b], x->life_calls[b], &t.life_calls[b]);
    for (uint32_t b = 0; b < MF_LIVE_NS_BUCKETS; b++)
        wrap |= __builtin_add_overflow(t.life_ns[b], x->life_ns[b], &t.life_ns[b]);
    if (!wrap)
        *to = t;
    return !wrap;
}

/* sums[si] += one record of weight w and size, or false if a sum would wrap. */
static bool mf_count_sum(struct mf_live_count *s, uint64_t w, uint64_t size)
{
    struct mf_live_count t = *s;
    uint64_t bytes, var = 0;
    bool wrap = __builtin_mul_overflow(w, size, &bytes);
    wrap |= __builtin_mul_overflow(w, w - 1, &var);
    wrap |= __builtin_add_overflow(t.calls, w, &t.calls);
    wrap |= __builtin_add_overflow(t.bytes, bytes, &t.bytes);
    wrap |= __builtin_add_overflow(t.var, var, &t.var);
    t.bytes_var += (double)var * (double)size * (double)size;
    if (wrap || !__builtin_isfinite(t.bytes_var)) /* no inf or nan for a report to print */
        return false;
    t.samples++;
    *s = t;
    return true;
}

/* One process's live file: its records into sums[], its statistics into p->lifetimes. */
static void mf_live_process(struct mf_live_ctx *c, struct mf_live_count *sums)
{
    struct mf_profile *p = c->p;
    struct mf_process *pr = &p->procs[c->process];
    char name[40], path[4200]; /* path: for messages, cut when longer */
    snprintf(name, sizeof name, "live.%016llx.mfl", (unsigned long long)pr->stamp);
    snprintf(path, sizeof path, "%s/%s", pr->dir, name);
    uint8_t *data;
    size_t size;
    const char *why;
    c->dirfd = mf_open_dir(pr->dir);
    if (c->dirfd < 0)
        return; /* gone since the profile was read */
    if (faccessat(c->dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
        close(c->dirfd);
        return; /* this process did not record its live heap */
    }
    int fd = -1;
    if (mf_read_whole(c->dirfd, name, MF_LIVE_FILE_MAX, &data, &size, &why, &fd)) {
        close(c->dirfd);
        c->skipped++;
        mf_error("%s: %s (skipped)", mf_esc(path), why);
        return;
    }
    const struct mf_live_header *h = (const void *)data;
    const char *bad = NULL;
    uint64_t rec_bytes = 0, stats_bytes = 0;
    if (size < sizeof *h || memcmp(h->magic, MF_LIVE_MAGIC, 8) != 0)
        bad = "not a live heap file";
    else if (h->version != MF_FORMAT_VERSION)
        bad = "another format version";
    else if (h->header_size != sizeof *h)
        bad = "another header size";
    else if (h->stamp != pr->stamp || h->pid != pr->pid)
        bad = "another process image's";
    else if (h->mode != MF_LIVE_SAMPLED && h->mode != MF_LIVE_ALL)
        bad = "an unknown mode";
    else if (!h->capacity || (h->capacity & (h->capacity - 1)) ||
             h->capacity > MF_LIVE_CAPACITY_ALL || !h->stats_capacity ||
             (h->stats_capacity & (h->stats_capacity - 1)) ||
             h->stats_capacity > MF_LIVE_STATS_CAPACITY)
        bad = "table sizes the writer never makes";
    else if (h->records_offset % 8 || h->stats_offset % 8)
        bad = "misaligned tables";
    else if (rec_bytes = (uint64_t)h->capacity * sizeof(struct mf_live_record),
             stats_bytes = (uint64_t)h->stats_capacity * sizeof(struct mf_live_stats),
             h->records_offset < sizeof *h || h->stats_offset < sizeof *h ||
                 h->records_offset > size || rec_bytes > size - h->records_offset ||
                 h->stats_offset > size || stats_bytes > size - h->stats_offset)
        bad = "its tables do not fit in it";
    else if (h->records_offset < h->stats_offset ? h->records_offset + rec_bytes > h->stats_offset
                                                  : h->stats_offset + stats_bytes > h->records_offset)
        bad = "its tables overlap";
    if (bad) {
        c->skipped++;
        mf_error("%s: %s (skipped)", mf_esc(path), bad);
        free(data);
        close(fd);
        close(c->dirfd);
        return;
    }
    /* Before any thread file: every count read here is at most what the entries hold then.
     * Only while the image may still run: an ended one's file (3 MiB of frees' table) is
     * whole at the first reading. */
    enum mf_life life = mf_life(p, c->process);
    struct mf_live_stats *again =
        life == MF_LIFE_RUNNING || life == MF_LIFE_UNKNOWN
            ? mf_stats_again(fd, h->stats_offset, stats_bytes)
            : NULL;
    close(fd);
    p->live_files++;
    if (h->interval_max > pr->live_interval && mf_weight_ok(pr, h->mode, h->interval_max))
        pr->live_interval = h->interval_max;
    p->live_dropped += h->dropped;
    p->live_stats_dropped += h->stats_dropped;
    c->nfiles = 0;
    mf_thread_files(c, pr);
    /* Left out, by kind: weights the process never samples with; sizes no block has; more
     * records (or weight) on an entry than its samples (calls); sums that would wrap; the
     * frees likewise. */
    uint64_t bad_weight = 0, bad_size = 0, too_many = 0, wrapped = 0, bad_frees = 0;
    const struct mf_live_record *r = (const void *)(data + h->records_offset);
    for (uint32_t j = 0; j < h->capacity; j++) {
        if (__atomic_load_n(&r[j].state, __ATOMIC_ACQUIRE) != MF_LIVE_RECORD_LIVE)
            continue;
        struct mf_live_record x = r[j];
        if (!mf_weight_ok(pr, h->mode, x.weight)) {
            bad_weight++;
            continue;
        }
        if (x.size >= MF_LIVE_SIZE_MAX) {
            bad_size++;
            continue;
        }
        if (x.weight > pr->live_interval)
            pr->live_interval = x.weight;
        struct mf_stack_entry e;
        uint32_t si = mf_ref_stack(c, pr, x.stack, &e);
        if (si == UINT32_MAX) {
            p->live_records++;
            p->live_unmatched++;
            continue;
        }
        struct mf_budget *b = mf_budget_of(c, x.stack, &e);
        if (!b->samples || b->calls < x.weight) {
            too_many++;
            continue;
        }
        if (!mf_count_sum(&sums[si], x.weight, x.size)) {
            wrapped++;
            continue;
        }
        b->samples--;
        b->calls -= x.weight;
        p->live_records++;
    }
    /* The frees, against their entries afresh: a record read alive may have been freed
     * while the file was read, and then counted in both tables. */
    mf_budgets_reset(c);
    const struct mf_live_stats *st = (const void *)(data + h->stats_offset);
    for (uint32_t j = 0; j < h->stats_capacity; j++) {
        if (!st[j].key)
            continue;
        struct mf_live_stats x = st[j];
        if (again && again[j].key == x.key && again[j].freed > x.freed)
            x.freed = again[j].freed;
        struct mf_stack_entry e;
        uint32_t si = mf_ref_stack(c, pr, x.key - 1, &e);
        if (si == UINT32_MAX)
            continue;
        struct mf_budget *b = mf_budget_of(c, x.key - 1, &e);
        if (x.freed_samples > b->samples || x.freed > b->calls || x.freed_samples > x.freed ||
            x.temporary > x.freed || x.same_thread > x.freed || !mf_life_sum(&p->lifetimes[si], &x)) {
            bad_frees++;
            continue;
        }
        b->samples -= x.freed_samples;
        b->calls -= x.freed;
    }
    free(again);
    mf_budgets_reset(c);
    const struct {
        uint64_t n;
        const char *what;
    } left_out[] = {
        {bad_weight, "records with a weight this process never samples with"},
        {bad_size, "records with a size no allocation can have"},
        {too_many, "records more than their stack's entry made allocations"},
        {wrapped, "records whose sizes would overflow the sums"},
        {bad_frees, "lifetime slots with more frees than their stack's entry made, or counts "
                    "that contradict each other"},
    };
    for (size_t k = 0; k < sizeof left_out / sizeof *left_out; k++)
        if (left_out[k].n)
            mf_error("%s: %llu %s (left out)", mf_esc(path), (unsigned long long)left_out[k].n,
                     left_out[k].what);
    for (uint32_t i = 0; i < c->nfiles; i++) {
        free(c->files[i].name);
        free(c->files[i].data);
    }
    free(data);
    close(c->dirfd);
}

/* While a process image runs, the view is "alive now": an image that ended (its exit, an
 * exec, a kill) took its heap with it, so its records are left out (counted apart). Its
 * lifetimes stay: those frees happened. When none runs the view is what each image left
 * when it ended, all of them. An image whose state cannot be told stays in. */
static void mf_live_leave_out_ended(struct mf_profile *p, struct mf_live_count *sums)
{
    if (mf_all_ended(p))
        return;
    uint8_t *gone = mf_xcalloc((size_t)p->nprocs + 1, sizeof *gone); /* 1: ended, 2: counted */
    for (uint32_t i = 0; i < p->nprocs; i++) {
        enum mf_life l = mf_life(p, i);
        gone[i] = l == MF_LIFE_EXITED || l == MF_LIFE_ENDED || l == MF_LIFE_EXECED;
    }
    for (uint32_t i = 0; i < p->nstacks; i++) {
        uint32_t pi = p->stacks[i].process;
        if (pi >= p->nprocs || !gone[pi] || !sums[i].samples)
            continue;
        if (gone[pi] == 1) { /* counted once per image */
            p->live_gone_images++;
            gone[pi] = 2;
        }
        if (__builtin_add_overflow(p->live_gone, sums[i].calls, &p->live_gone))
            p->live_gone = UINT64_MAX;
        sums[i] = (struct mf_live_count){0};
    }
    free(gone);
}

bool mf_live_attach(struct mf_profile *p, bool required)
{
    struct mf_live_ctx c = {.p = p};
    for (uint32_t i = 0; i < p->nstacks; i++) {
        const struct mf_raw_stack *s = &p->stacks[i];
        struct mf_stack_key key = {p, s->process, s->depth, s->flags, s->frames};
        bool added;
        mf_map_put(&c.stacks, mf_stack_hash(&key), mf_stack_eq, &key, i, &added);
    }
    struct mf_live_count *sums = mf_xcalloc((size_t)p->nstacks + 1, sizeof *sums);
    p->lifetimes = mf_xcalloc((size_t)p->nstacks + 1, sizeof *p->lifetimes);
    for (c.process = 0; c.process < p->nprocs; c.process++)
        if (p->procs[c.process].has_file)
            mf_live_process(&c, sums);
    mf_live_leave_out_ended(p, sums);
    mf_map_free(&c.stacks);
    mf_map_free(&c.budget_map);
    free(c.budgets);
    free(c.files);
    if (!p->live_files) {
        if (required && c.skipped)
            mf_error("no live heap file could be read (%u skipped)", c.skipped);
        else if (required)
            mf_error("no live heap recorded in %s: profile with MALLOC_FREQ_LIVE=sampled (or all)",
                     p->nprocs ? mf_esc(p->procs[0].dir) : "the profile");
        free(sums);
        free(p->lifetimes);
        p->lifetimes = NULL;
        return true;
    }
    p->live = sums;
    return false;
}
