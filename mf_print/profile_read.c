/* Reads malloc_freq.<pid> directories. Every file is read whole with read() (not mmap), so a
 * file that is truncated or rewritten under us can never fault, and is validated completely
 * before anything in it is used: a bad file is named on stderr and skipped, the rest of the
 * profile is still printed. Live files (the process still runs) are fine: entries are
 * published hash-last, so a slot with hash == 0 is simply not there yet. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mf_print.h"
#include "profile_read.h"

/* Deeper than this is not a setting (the core allows 512): the header is garbage. */
#define MF_MAX_DEPTH_SANE 65536u

_Static_assert(sizeof(struct mf_segment_header) <= MF_SEGMENT_ENTRIES_OFFSET, "segment header");

/* Reads the whole file. Reading to EOF (not to the size fstat saw) matters for live files:
 * a segment is allocated in the file before the header that announces it is published, so
 * whatever header we copied, the bytes it refers to are there by our next read(). */
static bool mf_read_file(const char *path, uint8_t **data, size_t *size, const char **why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return true;
    }
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
    uint8_t *buf = mf_xmalloc(cap);
    size_t have = 0;
    for (;;) {
        if (have == cap) {
            cap *= 2;
            buf = mf_xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + have, cap - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *why = strerror(errno);
            free(buf);
            close(fd);
            return true;
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    close(fd);
    *data = buf;
    *size = have;
    return false;
}

static char mf_why_buf[160];

static const char *mf_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *mf_why(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mf_why_buf, sizeof mf_why_buf, fmt, ap);
    va_end(ap);
    return mf_why_buf;
}

/* The path as the user will recognise it: "malloc_freq.123/thread....mft". */
static void mf_skip(struct mf_profile *p, const char *dir, const char *name, const char *why)
{
    mf_error("skipping %s/%s: %s", mf_basename(dir), name, why);
    p->nfiles_skipped++;
}

static struct mf_process *mf_process_get(struct mf_profile *p, uint64_t stamp, uint32_t pid,
                                         const char *dir)
{
    for (uint32_t i = 0; i < p->nprocs; i++)
        if (p->procs[i].stamp == stamp && p->procs[i].pid == pid)
            return &p->procs[i];
    MF_GROW(p->procs, p->nprocs, p->procs_cap);
    struct mf_process *pr = &p->procs[p->nprocs++];
    memset(pr, 0, sizeof *pr);
    pr->stamp = stamp;
    pr->pid = pid;
    pr->dir = dir;
    pr->threads_start_ns = UINT64_MAX;
    return pr;
}

/* ---- process files ------------------------------------------------------------------ */

static int mf_module_cmp(const void *a, const void *b)
{
    const struct mf_module *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Reads dir/name whole; a file that cannot be read is named and skipped (returns true). */
static bool mf_load(struct mf_profile *p, const char *dir, const char *name, uint8_t **buf,
                    size_t *size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *why;
    if (mf_read_file(path, buf, size, &why)) {
        mf_skip(p, dir, name, why);
        return true;
    }
    return false;
}

static void mf_read_process(struct mf_profile *p, const char *dir, const char *name)
{
    uint8_t *buf;
    size_t size;
    if (mf_load(p, dir, name, &buf, &size))
        return;
    struct mf_process_header h;
    if (size < sizeof h) {
        mf_skip(p, dir, name, "truncated header");
        goto out;
    }
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, MF_PROCESS_MAGIC, 8) != 0) {
        mf_skip(p, dir, name, "not a process file (bad magic)");
        goto out;
    }
    if (h.version != MF_FORMAT_VERSION) {
        mf_skip(p, dir, name, mf_why("format version %u, this mf_print reads %u", h.version,
                                     MF_FORMAT_VERSION));
        goto out;
    }
    if (h.header_size < sizeof h || h.header_size > size || h.header_size % 8) {
        mf_skip(p, dir, name, mf_why("bad header size %u", h.header_size));
        goto out;
    }
    struct mf_process *pr = mf_process_get(p, h.stamp, h.pid, dir);
    if (pr->has_file) {
        mf_skip(p, dir, name, "a second file for the same process image (directory given twice?)");
        goto out;
    }
    pr->has_file = true;
    pr->flags = h.flags;
    pr->start_ns = h.start_ns;
    pr->end_ns = h.end_ns;
    pr->sample_interval = h.sample_interval;
    pr->exact_calls = h.exact_calls;
    pr->cost_share_ppm = h.cost_share_ppm;
    pr->large_bytes = h.large_bytes;
    memcpy(pr->exe, h.exe, sizeof pr->exe);
    pr->exe[sizeof pr->exe - 1] = '\0';
    p->nfiles_read++;

    /* Module records are appended while the process runs: a short last record of a live
     * process is one being written, not damage. */
    bool exited = h.flags & MF_PROCESS_EXITED;
    uint32_t cap = 0;
    for (size_t off = h.header_size; off < size;) {
        struct mf_module_record r;
        size_t left = size - off;
        if (left < sizeof r) {
            if (exited)
                mf_error("%s/%s: truncated module record at offset %zu (ignored)",
                         mf_basename(dir), name, off);
            break;
        }
        memcpy(&r, buf + off, sizeof r);
        if (r.magic != MF_MODULE_MAGIC || r.record_size % 8 || r.build_id_len > sizeof r.build_id ||
            r.path_len >= r.record_size || r.record_size < sizeof r + r.path_len + 1) {
            mf_error("%s/%s: bad module record at offset %zu (it and later ones ignored)",
                     mf_basename(dir), name, off);
            break;
        }
        if (r.record_size > left) {
            if (exited)
                mf_error("%s/%s: truncated module record at offset %zu (ignored)",
                         mf_basename(dir), name, off);
            break;
        }
        MF_GROW(pr->modules, pr->nmodules, cap);
        struct mf_module *m = &pr->modules[pr->nmodules];
        m->bias = r.bias;
        m->lo = r.lo;
        m->hi = r.hi;
        m->build_id_len = r.build_id_len;
        memcpy(m->build_id, r.build_id, sizeof m->build_id);
        m->path = mf_xmalloc(r.path_len + 1);
        memcpy(m->path, buf + off + sizeof r, r.path_len);
        m->path[r.path_len] = '\0';
        m->order = pr->nmodules++;
        m->epoch = r.epoch;
        m->modfile = MF_MAP_EMPTY;
        off += r.record_size;
    }
    if (pr->nmodules > 1)
        qsort(pr->modules, pr->nmodules, sizeof *pr->modules, mf_module_cmp);
out:
    free(buf);
}

/* ---- thread files ------------------------------------------------------------------- */

static const struct mf_segment_header *mf_segment(const uint8_t *buf,
                                                  const struct mf_thread_header *h, uint32_t k)
{
    return (const struct mf_segment_header *)(buf + h->segment_offset[k]);
}

static const struct mf_entry *mf_entries(const struct mf_segment_header *seg)
{
    return (const struct mf_entry *)((const uint8_t *)seg + MF_SEGMENT_ENTRIES_OFFSET);
}

static const uint64_t *mf_frames(const struct mf_segment_header *seg)
{
    return (const uint64_t *)(mf_entries(seg) + seg->capacity);
}

/* NULL if everything the reader will touch lies inside the file and makes sense. */
static const char *mf_check_thread(const uint8_t *buf, size_t size)
{
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    if (size < sizeof *h)
        return "truncated header";
    if (memcmp(h->magic, MF_THREAD_MAGIC, 8) != 0)
        return "not a thread file (bad magic)";
    if (h->version != MF_FORMAT_VERSION)
        return mf_why("format version %u, this mf_print reads %u", h->version, MF_FORMAT_VERSION);
    if (h->header_size < sizeof *h || h->header_size > size)
        return mf_why("bad header size %u", h->header_size);
    if (h->nsegments > MF_MAX_SEGMENTS)
        return mf_why("bad segment count %llu", (unsigned long long)h->nsegments);
    if (h->max_depth == 0 || h->max_depth > MF_MAX_DEPTH_SANE)
        return mf_why("bad max_depth %u", h->max_depth);
    for (uint32_t k = 0; k < h->nsegments; k++) {
        uint64_t off = h->segment_offset[k], len = h->segment_size[k];
        if (off < h->header_size || off % 8 || off > size || len > size - off)
            return off <= size && off >= h->header_size && off % 8 == 0
                       ? mf_why("truncated: segment %u ends past the end of the file", k)
                       : mf_why("segment %u lies outside the file", k);
        if (len < MF_SEGMENT_ENTRIES_OFFSET)
            return mf_why("segment %u is too small", k);
        const struct mf_segment_header *seg = mf_segment(buf, h, k);
        uint64_t cap = seg->capacity, fcap = seg->frame_capacity;
        if (cap == 0 || (cap & (cap - 1)))
            return mf_why("segment %u: capacity %llu is not a power of two", k,
                          (unsigned long long)cap);
        /* cap and fcap are 32-bit: no overflow in 64 bits */
        if (MF_SEGMENT_ENTRIES_OFFSET + cap * sizeof(struct mf_entry) + fcap * sizeof(uint64_t) >
            len)
            return mf_why("segment %u: its entries do not fit in it", k);
        const struct mf_entry *e = mf_entries(seg);
        for (uint64_t i = 0; i < cap; i++) {
            if (e[i].hash == 0)
                continue;
            if (e[i].depth > h->max_depth)
                return mf_why("segment %u entry %llu: depth %u > max_depth %u", k,
                              (unsigned long long)i, e[i].depth, h->max_depth);
            if (e[i].frames > fcap || e[i].depth > fcap - e[i].frames)
                return mf_why("segment %u entry %llu: frames outside the frame area", k,
                              (unsigned long long)i);
        }
    }
    return NULL;
}

struct mf_stack_key {
    const struct mf_profile *p;
    uint32_t process, depth, flags;
    const uint64_t *frames;
};

static bool mf_stack_eq(const void *ctx, uint32_t idx)
{
    const struct mf_stack_key *k = ctx;
    const struct mf_raw_stack *s = &k->p->stacks[idx];
    return s->process == k->process && s->depth == k->depth && s->flags == k->flags &&
           memcmp(s->frames, k->frames, k->depth * sizeof *k->frames) == 0;
}

/* Identical stacks of the threads of one process image are merged here, before the
 * expensive symbolization. */
static struct mf_map mf_stack_ids;

static void mf_add_stack(struct mf_profile *p, uint32_t process, const struct mf_entry *e,
                         const uint64_t *frames)
{
    struct mf_stack_key key = {p, process, e->depth, e->flags, frames};
    uint64_t h = mf_hash_bytes(frames, e->depth * sizeof *frames,
                               ((uint64_t)process << 32) ^ ((uint64_t)e->flags << 20) ^ e->depth);
    bool added;
    uint32_t idx = mf_map_put(&mf_stack_ids, h, mf_stack_eq, &key, p->nstacks, &added);
    if (added) {
        MF_GROW(p->stacks, p->nstacks, p->stacks_cap);
        struct mf_raw_stack *s = &p->stacks[p->nstacks++];
        memset(s, 0, sizeof *s);
        s->process = process;
        s->depth = e->depth;
        s->flags = e->flags;
        s->frames = mf_xmalloc(e->depth * sizeof *frames + 1);
        memcpy(s->frames, frames, e->depth * sizeof *frames);
    }
    struct mf_raw_stack *s = &p->stacks[idx];
    s->samples += e->samples;
    s->calls += e->calls;
    s->bytes += e->bytes;
    s->var += e->calls_sq > e->calls ? e->calls_sq - e->calls : 0;
    s->large += e->large;
    s->bytes_var += e->bytes_var;
    for (int c = 0; c < MF_SITE_CLASSES; c++)
        s->site_sizes[c] += e->site_sizes[c];
    p->procs[process].attributed += e->calls;
    if (e->calls != e->samples)
        p->procs[process].weighted = true;
    if (e->calls && e->calls_sq / e->calls > p->procs[process].max_weight)
        p->procs[process].max_weight = e->calls_sq / e->calls;
}

static void mf_read_thread(struct mf_profile *p, const char *dir, const char *name)
{
    uint8_t *buf;
    size_t size;
    const char *why;
    if (mf_load(p, dir, name, &buf, &size))
        return;
    if ((why = mf_check_thread(buf, size))) {
        mf_skip(p, dir, name, why);
        free(buf);
        return;
    }
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    struct mf_process *pr = mf_process_get(p, h->stamp, h->pid, dir);
    uint32_t process = (uint32_t)(pr - p->procs);
    uint32_t threads = h->threads ? (uint32_t)h->threads : 1; /* a table serves many in turn */
    pr->nthreads += threads;
    if (h->start_ns < pr->threads_start_ns)
        pr->threads_start_ns = h->start_ns;
    if (h->last_ns > pr->threads_last_ns)
        pr->threads_last_ns = h->last_ns;
    for (int f = 0; f < MF_FN_COUNT; f++) {
        pr->calls += h->totals.calls[f];
        p->totals.calls[f] += h->totals.calls[f];
        p->totals.bytes[f] += h->totals.bytes[f];
    }
    p->unprofiled_samples += h->unprofiled_samples;
    p->unprofiled_calls += h->unprofiled_calls;
    pr->attributed += h->unprofiled_calls;
    p->unprofiled_bytes += h->unprofiled_bytes;
    if (h->unprofiled_calls_sq > h->unprofiled_calls)
        p->unprofiled_var += h->unprofiled_calls_sq - h->unprofiled_calls;
    p->unprofiled_bytes_var += h->unprofiled_bytes_var;
    for (int c = 0; c < MF_SIZE_CLASSES; c++) {
        p->sizes.calls[c] += h->sizes.calls[c];
        p->sizes.bytes[c] += h->sizes.bytes[c];
    }
    if (h->unprofiled_calls != h->unprofiled_samples)
        pr->weighted = true;
    for (uint32_t k = 0; k < h->nsegments; k++) {
        const struct mf_segment_header *seg = mf_segment(buf, h, k);
        const struct mf_entry *e = mf_entries(seg);
        const uint64_t *frames = mf_frames(seg);
        for (uint32_t i = 0; i < seg->capacity; i++)
            if (e[i].hash != 0 && e[i].calls != 0)
                mf_add_stack(p, process, &e[i], &frames[e[i].frames]);
    }
    p->nthreads += threads;
    p->nfiles_read++;
    free(buf);
}

/* ---- directories -------------------------------------------------------------------- */

static bool mf_has_suffix(const char *s, const char *prefix, const char *suffix)
{
    size_t n = strlen(s), a = strlen(prefix), b = strlen(suffix);
    return n > a + b && strncmp(s, prefix, a) == 0 && strcmp(s + n - b, suffix) == 0;
}

static int mf_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool mf_seen_dir(const struct stat *st)
{
    static dev_t devs[256];
    static ino_t inos[256];
    static unsigned n;
    for (unsigned i = 0; i < n; i++)
        if (devs[i] == st->st_dev && inos[i] == st->st_ino)
            return true;
    if (n < 256) {
        devs[n] = st->st_dev;
        inos[n++] = st->st_ino;
    }
    return false;
}

bool mf_profile_read_dir(struct mf_profile *p, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        mf_error("cannot open directory %s: %s", dir, strerror(errno));
        return true;
    }
    if (!S_ISDIR(st.st_mode)) {
        mf_error("%s is not a directory (--dir wants a malloc_freq.<pid> directory)", dir);
        return true;
    }
    if (mf_seen_dir(&st)) {
        mf_error("%s was given twice; reading it once", dir);
        return false;
    }
    DIR *d = opendir(dir);
    if (!d) {
        mf_error("cannot open directory %s: %s", dir, strerror(errno));
        return true;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool has_subdirs = false;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (mf_has_suffix(de->d_name, "process.", ".mfp") ||
            mf_has_suffix(de->d_name, "thread.", ".mft")) {
            MF_GROW(names, n, cap);
            names[n++] = mf_xstrdup(de->d_name);
        } else if (strncmp(de->d_name, "malloc_freq.", 12) == 0) {
            has_subdirs = true;
        }
    }
    closedir(d);
    if (n == 0) {
        if (has_subdirs)
            mf_error("no profile files in %s; it holds malloc_freq.<pid> directories: pass those "
                     "(e.g. --dir %s/malloc_freq.<pid>)", dir, dir);
        else
            mf_error("no profile files in %s (expected process.*.mfp and thread.*.mft)", dir);
        free(names);
        return true;
    }
    qsort(names, n, sizeof *names, mf_name_cmp);
    char *dir_copy = mf_xstrdup(dir); /* processes keep pointing at it */
    for (size_t len = strlen(dir_copy); len > 1 && dir_copy[len - 1] == '/';)
        dir_copy[--len] = '\0'; /* "malloc_freq.1/" names its files as "malloc_freq.1/x" */
    /* Process files first, so that thread files find their process. */
    for (size_t i = 0; i < n; i++)
        if (names[i][0] == 'p')
            mf_read_process(p, dir_copy, names[i]);
    for (size_t i = 0; i < n; i++)
        if (names[i][0] == 't')
            mf_read_thread(p, dir_copy, names[i]);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return false;
}

void mf_profile_finish(struct mf_profile *p)
{
    for (uint32_t i = 0; i < p->nprocs; i++) {
        struct mf_process *pr = &p->procs[i];
        /* Default mode (interval 0) samples only where calls come fast: the weights say, or
         * the calls no stack accounts for (a sampled stretch that drew no sample). */
        pr->sampled = pr->has_file && (pr->sample_interval > 1 ? pr->calls > pr->exact_calls
                                       : pr->sample_interval == 0 &&
                                             (pr->weighted || pr->attributed != pr->calls));
        if (!pr->has_file)
            mf_error("%s: no process file for process image %016llx: its frames stay unsymbolized",
                     mf_basename(pr->dir), (unsigned long long)pr->stamp);
    }
}

uint64_t mf_profile_total_calls(const struct mf_profile *p)
{
    uint64_t n = 0;
    for (int f = 0; f < MF_FN_COUNT; f++)
        n += p->totals.calls[f];
    return n;
}

uint64_t mf_profile_total_bytes(const struct mf_profile *p)
{
    uint64_t n = 0;
    for (int f = 0; f < MF_FN_COUNT; f++)
        n += p->totals.bytes[f];
    return n;
}

uint64_t mf_profile_wall_ns(const struct mf_profile *p)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        uint64_t start = pr->has_file ? pr->start_ns : pr->threads_start_ns;
        bool ended = pr->has_file && (pr->flags & MF_PROCESS_EXITED);
        uint64_t end = ended ? pr->end_ns : pr->threads_last_ns;
        if (start == UINT64_MAX)
            continue; /* a process file without threads and without an end */
        if (end < start)
            end = start;
        lo = start < lo ? start : lo;
        hi = end > hi ? end : hi;
    }
    return hi > lo ? hi - lo : 0;
}
