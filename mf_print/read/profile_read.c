/* Reads malloc_freq.<pid> directories. Every file is read whole with pread() (not mmap), so a
 * file that is truncated or rewritten under us can never fault, and is validated completely
 * before anything in it is used: a bad file is named on stderr and skipped, the rest of the
 * profile is still printed. Live files (the process still runs) are fine: entries are
 * published key-last, so a slot with key == 0 is simply not there yet. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mf_print.h"
#include "profile_read.h"

/* A process file is its header and module records, appended as libraries are loaded: 65,536
 * records with the longest path (4,096 bytes) take 272 MiB. No program loads that many; a
 * bigger file is refused unread (a symlink to /dev/zero, a sparse file). */
#define MF_PROCESS_FILE_MAX ((uint64_t)sizeof(struct mf_process_header) + \
                             65536u * ((uint64_t)sizeof(struct mf_module_record) + 4096u + 8u))

_Static_assert(sizeof(struct mf_segment_header) <= MF_SEGMENT_ENTRIES_OFFSET, "segment header");

/* Reads buf[from, to) of fd with pread, to its end or the first short read (EOF, an error);
 * returns the bytes read. */
static size_t mf_pread_range(int fd, uint8_t *buf, size_t from, size_t to)
{
    return mf_pread_full(fd, buf + from, to - from, from);
}

/* A file this large has its bulk read by two threads, each half with pread: the kernel's
 * copy and the first touch of the buffer's pages (most of a read's time: `perf` of a 604 MB
 * thread file) then run on two CPUs. */
#define MF_READ_SPLIT_MIN ((size_t)16 << 20)
/* Read first, alone: the header (a thread file's is 7 KB) is copied before any byte it
 * announces, as a sequential read would have it (see mf_read_file). */
#define MF_READ_LEAD ((size_t)64 << 10)

struct mf_read_half {
    int fd;
    uint8_t *buf;
    size_t from, to, got;
};

static void *mf_read_half(void *arg)
{
    struct mf_read_half *h = arg;
    h->got = mf_pread_range(h->fd, h->buf, h->from, h->to);
    return NULL;
}

/* Reads buf[from, mid) and buf[mid, to) at once; returns where the bytes read without a gap
 * end (to, unless the file was shorter than fstat said). */
static size_t mf_read_split(int fd, uint8_t *buf, size_t from, size_t mid, size_t to)
{
    struct mf_read_half second = {fd, buf, mid, to, 0};
    pthread_t thread;
    bool threaded = pthread_create(&thread, NULL, mf_read_half, &second) == 0;
    size_t got = mf_pread_range(fd, buf, from, mid);
    if (threaded)
        pthread_join(thread, NULL);
    else
        mf_read_half(&second);
    if (from + got < mid)
        return from + got;
    return mid + second.got;
}

/* Where a thread file's bulk [from, to) is split between the two readers: at the boundary of
 * segments (as the header buf[0, have) places them) nearest its middle, so that each segment
 * is read by one of them, its entries before their frames: the writer publishes an entry
 * after its frames, and a segment read back to front could give a new entry frames not yet
 * written. 0 if no boundary lies inside. */
static size_t mf_segments_split(const uint8_t *buf, size_t have, size_t from, size_t to)
{
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    if (have < sizeof *h)
        return 0;
    size_t mid = from + (to - from) / 2, best = 0;
    for (uint32_t k = 1; k < h->nsegments && k < MF_MAX_SEGMENTS; k++) {
        uint64_t at = h->segment_offset[k];
        if (at > from && at < to &&
            (!best || (at > mid ? at - mid : mid - at) < (best > mid ? best - mid : mid - best)))
            best = (size_t)at;
    }
    return best;
}

/* Reads the whole file name in the directory dirfd, if it is a regular file of at most max
 * bytes (never a FIFO, a device or a symbolic link: nothing the writer makes). Reading to
 * EOF (not to the size fstat saw) matters for live files: a segment is allocated in the file
 * before the header that announces it is published, so whatever header we copied, the bytes
 * it refers to are there by our next read, as long as every byte past the header is read
 * after it. The buffer is sized from fstat (plus a page for a file that grows while we
 * read), so a file of hundreds of megabytes is read into memory touched once, not a buffer
 * doubled and copied. With `again` (a thread file), the file's first again_len bytes are
 * read once more into it after all the rest (if the file has that many): a thread header's
 * counters, taken after the entries they count (mf_thread_counters). */
static bool mf_read_file(int dirfd, const char *name, uint64_t max, void *again,
                         size_t again_len, uint8_t **data, size_t *size, const char **why)
{
    int fd = mf_open_regular_at(dirfd, name, false, max, why);
    if (fd < 0)
        return true;
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size + 4096 : 4096;
    uint8_t *buf = mf_xmalloc(cap);
    size_t have = 0;
    if (cap - 4096 >= MF_READ_SPLIT_MIN) {
        have = mf_pread_range(fd, buf, 0, MF_READ_LEAD);
        size_t to = cap - 4096, mid = again ? mf_segments_split(buf, have, have, to)
                                            : have + (((to - have) / 2) & ~(size_t)4095);
        if (have == MF_READ_LEAD && mid > have && mid < to)
            have = mf_read_split(fd, buf, have, mid, to);
    }
    for (;;) {
        if (have == cap) {
            if (have > max) { /* it grew past what the writer makes while we read it */
                static char too_large[64];
                char a[32];
                snprintf(too_large, sizeof too_large, "too large (more than %s bytes)",
                         mf_fmt_count(a, max));
                *why = too_large;
                free(buf);
                close(fd);
                return true;
            }
            cap *= 2;
            buf = mf_xrealloc(buf, cap);
        }
        ssize_t n = pread(fd, buf + have, cap - have, (off_t)have);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
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
    if (again && have >= again_len) {
        /* The second copy is a system call made after the first returned: the kernel reads
         * every word of it after every word of the first (no fence of ours needed, nor one
         * TSan could follow). */
        if (mf_pread_range(fd, again, 0, again_len) != again_len) {
            *why = "truncated while it was read";
            free(buf);
            close(fd);
            return true;
        }
    }
    close(fd);
    if (have > max) {
        *why = "too large";
        free(buf);
        return true;
    }
    *data = buf;
    *size = have;
    return false;
}

/* Gives the pages of buf[off, off + len) back to the system once their stacks are copied:
 * a thread file of 500 MB then never sits in memory whole next to the stacks read from it.
 * Only whole pages inside the range, and only of a buffer of 32 MiB or more (malloc serves
 * those with mmap); the bytes are never read again. A smaller buffer's pages are malloc's to
 * serve the next file: given back, each would be a fault again there, and a build's run
 * directory of 300 files of 1-12 MB paid a tenth of its reading time in them. */
static void mf_release_pages(uint8_t *buf, size_t size, uint64_t off, uint64_t len)
{
    const uintptr_t page = 4096;
    if (size < ((size_t)32 << 20) || off > size || len > size - off)
        return;
    uintptr_t lo = ((uintptr_t)buf + off + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)buf + off + len) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
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
    mf_error("skipping %s/%s: %s", mf_esc(mf_basename(dir)), mf_esc(name), why);
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
    pr->dir_owned = true;
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

/* Reads name whole from dirfd (the directory dir); a file that cannot be read is named and
 * skipped (returns true). again: as mf_read_file's. */
static bool mf_load(struct mf_profile *p, int dirfd, const char *dir, const char *name,
                    uint64_t max, void *again, size_t again_len, uint8_t **buf, size_t *size)
{
    const char *why;
    if (mf_read_file(dirfd, name, max, again, again_len, buf, size, &why)) {
        mf_skip(p, dir, name, why);
        return true;
    }
    return false;
}

static void mf_read_process(struct mf_profile *p, int dirfd, const char *dir, const char *name)
{
    uint8_t *buf;
    size_t size;
    if (mf_load(p, dirfd, dir, name, MF_PROCESS_FILE_MAX, NULL, 0, &buf, &size))
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
    pr->exact_recorded = h.flags & MF_PROCESS_EXITED ? h.exact_recorded : 0;
    pr->cost_share_ppm = h.cost_share_ppm;
    pr->ramp_samples = h.ramp_samples;
    pr->ramp_step = h.ramp_step;
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
                         mf_esc(mf_basename(dir)), mf_esc(name), off);
            break;
        }
        memcpy(&r, buf + off, sizeof r);
        if (r.magic != MF_MODULE_MAGIC || r.record_size % 8 || r.build_id_len > sizeof r.build_id ||
            r.path_len >= r.record_size || r.record_size < sizeof r + r.path_len + 1) {
            mf_error("%s/%s: bad module record at offset %zu (it and later ones ignored)",
                     mf_esc(mf_basename(dir)), mf_esc(name), off);
            break;
        }
        if (r.record_size > left) {
            if (exited)
                mf_error("%s/%s: truncated module record at offset %zu (ignored)",
                         mf_esc(mf_basename(dir)), mf_esc(name), off);
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

/* Node ref of a thread file's segments, or NULL if it lies outside them. */
static const struct mf_frame_node *mf_node_of(const uint8_t *buf, size_t size, uint32_t ref)
{
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    uint32_t k = MF_NODE_REF_SEG(ref), i = MF_NODE_REF_IDX(ref);
    if (ref == 0 || k >= h->nsegments || k >= MF_MAX_SEGMENTS)
        return NULL;
    uint64_t off = h->segment_offset[k], len = h->segment_size[k];
    if (off > size || len > size - off || len < MF_SEGMENT_ENTRIES_OFFSET || off % 8)
        return NULL;
    const struct mf_segment_header *seg = mf_segment(buf, h, k);
    uint64_t end = MF_SEGMENT_ENTRIES_OFFSET + (uint64_t)seg->capacity * sizeof(struct mf_entry) +
                   ((uint64_t)i + 1) * sizeof(struct mf_frame_node);
    if (i >= seg->node_capacity || end > len)
        return NULL;
    const struct mf_frame_node *n = &mf_segment_nodes(seg)[i];
    /* its return address's high half is there: in the header (read after the nodes, so it
     * holds every high half a node copied uses), or in a wide node's second slot */
    if (MF_NODE_HI(n) == MF_NODE_WIDE)
        return (uint64_t)i + 1 < seg->node_capacity && end + sizeof *n <= len ? n : NULL;
    return MF_NODE_HI(n) < h->npc_hi ? n : NULL;
}

uint32_t mf_entry_decode(const struct mf_segment_header *seg, uint64_t i, struct mf_stack_entry *e)
{
    const struct mf_entry *slot = mf_segment_entries(seg) + i;
    bool wide = mf_entry_wide(slot);
    if (!slot->key || (wide && i + MF_ENTRY_VAR_SLOTS >= seg->capacity))
        return 0;
    uint32_t flags = mf_entry_flags(slot); /* a wide one's epoch: its slots are there */
    *e = (struct mf_stack_entry){
        .node = mf_entry_node(slot),
        .flags = MF_ENTRY_STACK_FLAGS(flags) | (flags & MF_ENTRY_SIZED),
        .size_class = flags & MF_ENTRY_SIZED ? MF_ENTRY_CLASS(flags) : 0,
        .samples = slot->calls, .calls = slot->calls, .bytes = slot->bytes,
        .calls_sq = slot->calls};
    if (wide) {
        struct mf_entry_var v;
        memcpy(&v, slot + 1, sizeof v);
        e->calls = v.calls;
        e->bytes = v.bytes;
        e->samples = v.samples;
        e->calls_sq = v.calls_sq;
        e->bytes_var = v.bytes_var;
    }
    return mf_entry_slots(wide);
}

bool mf_entry_frames(const uint8_t *buf, size_t size, struct mf_stack_entry *e, uint64_t *out)
{
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    uint32_t ref = e->node, d = 0;
    for (; ref && d < MF_DEPTH_MAX; d++) {
        const struct mf_frame_node *n = mf_node_of(buf, size, ref);
        if (!n || (MF_NODE_PARENT(n) && MF_NODE_PARENT(n) >= ref))
            return false;
        out[d] = mf_node_pc(h, n);
        ref = MF_NODE_PARENT(n);
    }
    e->depth = d;
    return ref == 0;
}

/* An entry's frames, as mf_entry_frames, from a file mf_check_thread passed (every entry's
 * chain is whole): a node a frame, without the checks, which were a fifth of reading a
 * build's run directory. nodes: each segment's. */
static void mf_checked_frames(const struct mf_thread_header *h,
                              const struct mf_frame_node *const *nodes,
                              const struct mf_stack_entry *e, uint64_t *out)
{
    uint32_t ref = e->node;
    for (uint32_t i = 0; i < e->depth; i++) {
        const struct mf_frame_node *n = &nodes[MF_NODE_REF_SEG(ref)][MF_NODE_REF_IDX(ref)];
        out[i] = mf_node_pc(h, n);
        ref = MF_NODE_PARENT(n);
    }
}

/* A running program's thread file is copied while its threads write it. The writer counts a
 * call in the header's totals before it adds the call's sample to a stack entry, and adds a
 * sample to its entry before it adds it to the header's size histogram (or, unattributed,
 * adds it to the header's unprofiled counts alone). So the header is used as two copies: its
 * geometry (nsegments and the segments' places) as first read, before the segments, which
 * are then there whole; its counters (totals, size histogram, unprofiled counts, threads,
 * flags) as read again after every entry was copied (later). Then each counter is at least
 * what the copied entries hold, but for the one sample per thread that is between its
 * entry and the histogram as the header is read again (mf_check_counts allows for it),
 * however long the copy took and however fast the threads ran meanwhile. Returns the
 * weight the histogram gained between the two copies: what the samples taken meanwhile
 * weigh, but for those in flight. */
static uint64_t mf_thread_counters(uint8_t *buf, const struct mf_thread_header *later)
{
    struct mf_thread_header *h = (struct mf_thread_header *)buf, m = *later;
    uint64_t before = 0, after = 0;
    for (int c = 0; c < MF_SIZE_CLASSES; c++) { /* wraps only in a damaged file */
        before += h->sizes[c].calls;
        after += m.sizes[c].calls;
    }
    m.nsegments = h->nsegments;
    memcpy(m.segment_offset, h->segment_offset, sizeof m.segment_offset);
    memcpy(m.segment_size, h->segment_size, sizeof m.segment_size);
    *h = m;
    return after > before ? after - before : 0;
}

/* NULL if everything the reader will touch lies inside the file and makes sense: segments
 * never overlap, and every entry's node chain is whole and at most max_depth long, each node
 * checked once. So the work and memory a file costs are bounded by its size: an entry's 16
 * bytes decode to at most max_depth <= 512 frames (4 KiB), 256 bytes of frames a byte of the
 * file; a legitimate file comes near that only where deep stacks share a long trunk.
 * depth[k][i]: the depth of segment k's node i where an entry's chain passes it, else 0
 * (arrays the caller frees, whatever the answer). */
static const char *mf_check_thread(const uint8_t *buf, size_t size, uint16_t **depth)
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
    if (h->max_depth == 0 || h->max_depth > MF_DEPTH_MAX)
        return mf_why("bad max_depth %u (malloc_freq records at most %u frames)", h->max_depth,
                      MF_DEPTH_MAX);
    if (h->threads > UINT32_MAX)
        return mf_why("bad thread count %llu", (unsigned long long)h->threads);
    /* The nodes checked so far (depth not 0), by segment: each chain is followed until a node
     * checked before, so a file's check costs its entries and nodes once each. */
    const char *why = NULL;
    for (uint32_t k = 0; k < h->nsegments && !why; k++) {
        uint64_t off = h->segment_offset[k], len = h->segment_size[k];
        if (off < h->header_size || off % 8 || off > size || len > size - off) {
            why = off <= size && off >= h->header_size && off % 8 == 0
                      ? mf_why("truncated: segment %u ends past the end of the file", k)
                      : mf_why("segment %u lies outside the file", k);
            break;
        }
        if (k && off < h->segment_offset[k - 1] + h->segment_size[k - 1]) {
            why = mf_why("segment %u overlaps segment %u", k, k - 1);
            break;
        }
        if (len < MF_SEGMENT_ENTRIES_OFFSET) {
            why = mf_why("segment %u is too small", k);
            break;
        }
        const struct mf_segment_header *seg = mf_segment(buf, h, k);
        uint64_t cap = seg->capacity, ncap = seg->node_capacity;
        if (cap == 0 || (cap & (cap - 1)) || cap > MF_SEG_ENTRIES_MAX) {
            why = mf_why("segment %u: bad capacity %llu", k, (unsigned long long)cap);
            break;
        }
        if (ncap > cap * MF_NODES_PER_ENTRY) {
            why = mf_why("segment %u: bad node capacity %llu", k, (unsigned long long)ncap);
            break;
        }
        /* cap and ncap are 32-bit: no overflow in 64 bits */
        if (MF_SEGMENT_ENTRIES_OFFSET + cap * sizeof(struct mf_entry) +
                ncap * sizeof(struct mf_frame_node) > len) {
            why = mf_why("segment %u: its entries do not fit in it", k);
            break;
        }
        depth[k] = mf_xcalloc(ncap + 1, sizeof *depth[k]);
    }
    for (uint32_t k = 0; k < h->nsegments && !why; k++) {
        const struct mf_segment_header *seg = mf_segment(buf, h, k);
        struct mf_stack_entry e;
        for (uint64_t i = 0, used; i < seg->capacity && !why; i += used) {
            const struct mf_entry *slot = mf_segment_entries(seg) + i;
            if (!(used = mf_entry_decode(seg, i, &e))) {
                if (slot->key)
                    why = mf_why("segment %u entry %llu: a wide entry past the last slots", k,
                                 (unsigned long long)i);
                break;
            }
            if ((e.flags & MF_ENTRY_SIZED) && e.size_class >= MF_SIZE_CLASSES) {
                why = mf_why("segment %u entry %llu: bad size class %u", k,
                             (unsigned long long)i, e.size_class);
                break;
            }
            /* Its chain, up to a node checked before: each node inside the file, its caller
             * made before it, at most max_depth of them. */
            uint32_t path[MF_DEPTH_MAX], n = 0, ref = e.node, base = 0;
            while (ref && !why) {
                const struct mf_frame_node *node = mf_node_of(buf, size, ref);
                uint16_t *d = node ? &depth[MF_NODE_REF_SEG(ref)][MF_NODE_REF_IDX(ref)] : NULL;
                if (!node || (MF_NODE_PARENT(node) && MF_NODE_PARENT(node) >= ref))
                    why = mf_why("segment %u entry %llu: bad node %u of its stack", k,
                                 (unsigned long long)i, ref);
                else if (*d)
                    base = *d;
                else if (n == h->max_depth)
                    why = mf_why("segment %u entry %llu: its stack is deeper than max_depth %u",
                                 k, (unsigned long long)i, h->max_depth);
                else
                    path[n++] = ref;
                ref = !why && !base ? MF_NODE_PARENT(node) : 0;
            }
            if (!why && base + n > h->max_depth)
                why = mf_why("segment %u entry %llu: its stack is deeper than max_depth %u", k,
                             (unsigned long long)i, h->max_depth);
            for (uint32_t x = 0; x < n && !why; x++) /* path[x] is n - x frames above base */
                depth[MF_NODE_REF_SEG(path[x])][MF_NODE_REF_IDX(path[x])] = (uint16_t)(base + n - x);
        }
    }
    return why;
}

/* The calls one thread file adds to the profile's sums, each checked against wrapping. */
struct mf_file_sums {
    uint64_t calls;             /* exact, from the header */
    uint64_t samples, st_calls; /* its stacks and [not profiled] */
};

#define MF_CALLS_MAX (1ull << 60)

/* Bytes and variances are not checked: a program may ask for SIZE_MAX bytes (and fail), and
 * a weight of 10^9 squared wraps in the writer's own sum; the exact numbers are the calls. */
static bool mf_add(uint64_t *sum, uint64_t x)
{
    return __builtin_add_overflow(*sum, x, sum);
}

/* NULL if the counts of a checked thread file add up: no sum wraps, within the file or
 * added to what was read before, and its stacks hold no more calls than it counted. */
static const char *mf_check_counts(const struct mf_profile *p, const struct mf_process *pr,
                                   const uint8_t *buf, uint64_t moved, struct mf_file_sums *fs)
{
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    bool wrap = false;
    memset(fs, 0, sizeof *fs);
    for (int f = 0; f < MF_FN_COUNT; f++)
        wrap |= mf_add(&fs->calls, h->totals.calls[f]);
    fs->samples = h->unprofiled_samples;
    fs->st_calls = h->unprofiled_calls;
    uint64_t by_class[MF_SIZE_CLASSES] = {0}; /* the sized entries' calls, by class */
    for (uint32_t k = 0; k < h->nsegments && !wrap; k++) {
        const struct mf_segment_header *seg = mf_segment(buf, h, k);
        struct mf_stack_entry e;
        for (uint64_t i = 0, used; i < seg->capacity && (used = mf_entry_decode(seg, i, &e)); i += used) {
            if (e.calls == 0)
                continue;
            wrap |= mf_add(&fs->samples, e.samples);
            wrap |= mf_add(&fs->st_calls, e.calls);
            if (e.flags & MF_ENTRY_SIZED) /* its class was checked (mf_check_thread) */
                wrap |= mf_add(&by_class[e.size_class], e.calls);
        }
    }
    /* 2^60 calls take a thread 36 years at one a nanosecond: a count beyond is damage, and
     * it is this file's, not that of the file whose sum would wrap after it. */
    char a1[32], a2[32], a3[32];
    if (!wrap && fs->calls > MF_CALLS_MAX)
        return mf_why("it counts %s calls, more than a thread can make (2^60; damaged?)",
                      mf_fmt_count(a1, fs->calls));
    if (!wrap && fs->st_calls > MF_CALLS_MAX)
        return mf_why("its stacks hold %s calls, more than a thread can make (2^60; damaged?)",
                      mf_fmt_count(a1, fs->st_calls));
    /* With what was read before: the grand totals and every sum of stacks stay in 64 bits. */
    uint64_t t = mf_profile_total_calls(p), a = p->stacks_calls;
    uint32_t threads = p->nthreads;
    wrap = wrap || mf_add(&t, fs->calls) || mf_add(&a, fs->st_calls > fs->calls ? fs->st_calls : fs->calls) ||
           __builtin_add_overflow(threads, h->threads ? (uint32_t)h->threads : 1u, &threads);
    if (wrap)
        return "its counts overflow 64 bits (damaged?)";
    /* A sample is a call, counted in the totals before its sample is taken (and the totals
     * are read after the stacks: mf_thread_counters): the stacks may run ahead of the header's
     * count only by the calls a thread killed mid-flush had not yet added there
     * (MF_FLUSH_CALLS a thread); a sample weighs at most the interval. */
    uint64_t threads_here = h->threads ? h->threads : 1;
    uint64_t slack = (uint64_t)MF_FLUSH_CALLS * threads_here;
    if (fs->samples > fs->calls && fs->samples - fs->calls > slack)
        return mf_why("its stacks hold %s samples, more than the %s calls it counted",
                      mf_fmt_count(a1, fs->samples), mf_fmt_count(a2, fs->calls));
    /* The slow path adds a sample to its entry, then to the header's histogram, under the
     * table's lock, and the histogram is read after the entries (mf_thread_counters): a
     * class's entries hold no more calls than the histogram counts, but for the sample a
     * thread is between the two as the header is read, of weight at most the interval. */
    uint64_t w_max = pr->has_file && pr->sample_interval ? pr->sample_interval : MF_INTERVAL_MAX;
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) {
        uint64_t most;
        if (__builtin_mul_overflow(w_max, threads_here, &most) ||
            __builtin_add_overflow(most, h->sizes[c].calls, &most))
            most = UINT64_MAX;
        if (by_class[c] > most)
            return mf_why("its stacks hold %s calls of sizes %s and up, more than the %s its "
                          "size histogram counts", mf_fmt_count(a1, by_class[c]),
                          mf_fmt_count(a2, mf_size_class_lo(c)),
                          mf_fmt_count(a3, h->sizes[c].calls));
    }
    /* The writer adds a sample to an entry's samples, then its weight to calls, and an
     * entry's words are copied in no order we choose, maybe apart (a reader preempted
     * mid-copy): its calls may hold samples its samples do not yet, each taken while the
     * file was copied. Those the histogram gained between the header's two copies (moved),
     * and one in flight a thread (the unprofiled counts likewise). A file at rest has
     * none: its calls are within what its samples can weigh. */
    if (pr->has_file) {
        uint64_t w = pr->sample_interval == 0 ? MF_INTERVAL_MAX : pr->sample_interval, most;
        if (__builtin_add_overflow(fs->samples, threads_here, &most) ||
            __builtin_mul_overflow(most, w, &most) || __builtin_add_overflow(most, moved, &most))
            most = UINT64_MAX;
        if (fs->st_calls > most)
            return mf_why("its stacks hold %s calls, more than its %s samples can weigh",
                          mf_fmt_count(a1, fs->st_calls), mf_fmt_count(a2, fs->samples));
    }
    return NULL;
}

struct mf_stack_key mf_stack_key_of(const struct mf_profile *p, uint32_t process,
                                    const struct mf_stack_entry *e, const uint64_t *frames)
{
    return (struct mf_stack_key){p, process, e->depth, e->flags & ~MF_ENTRY_SIZED, frames};
}

uint64_t mf_stack_hash(const struct mf_stack_key *k)
{
    return mf_hash_u64s(k->frames, k->depth,
                        ((uint64_t)k->process << 32) ^ ((uint64_t)k->flags << 20) ^ k->depth);
}

bool mf_stack_eq(const void *ctx, uint32_t idx)
{
    const struct mf_stack_key *k = ctx;
    const struct mf_raw_stack *s = &k->p->stacks[idx];
    return s->process == k->process && s->depth == k->depth && s->flags == k->flags &&
           memcmp(s->frames, k->frames, k->depth * sizeof *k->frames) == 0;
}

/* Identical stacks of the threads of one process image are merged (p->reading.stack_ids),
 * before the expensive symbolization. */

/* The raw stacks' return addresses, in chunks that never move (no malloc per stack; a
 * profile of 10^6 stacks of depth 46 holds 370 MB of them). mf_profile_drop_frames gives
 * them back once the model has its locations. */
#define MF_FRAME_CHUNK ((size_t)4 << 20) /* frames: 32 MiB */
struct mf_frame_chunk {
    struct mf_frame_chunk *next;
    size_t used, cap;
    uint64_t v[];
};

static uint64_t *mf_frames_alloc(struct mf_profile *p, size_t n)
{
    struct mf_frame_chunk *c = p->frame_chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > MF_FRAME_CHUNK ? n : MF_FRAME_CHUNK;
        c = mf_xmalloc(sizeof *c + cap * sizeof *c->v);
        c->next = p->frame_chunks;
        c->used = 0;
        c->cap = cap;
        p->frame_chunks = c;
    }
    uint64_t *v = c->v + c->used;
    c->used += n;
    return v;
}

void mf_profile_drop_frames(struct mf_profile *p)
{
    while (p->frame_chunks) {
        struct mf_frame_chunk *c = p->frame_chunks;
        p->frame_chunks = c->next;
        free(c);
    }
    for (uint32_t i = 0; i < p->nstacks; i++)
        p->stacks[i].frames = NULL;
    mf_map_free(&p->reading.stack_ids);
}

/* A raw stack's counts by size class, merged over its entries (one per class and thread):
 * while files are read, each stack's records are a chain from sizes_first (nsizes long)
 * through p->reading.size_next, at most MF_SIZE_CLASSES links; mf_profile_finish lays them out in
 * a row. No map: 10^6 stacks' classes cost a hashed slot (a cache miss) each. */

/* The variance of an estimate of calls from its sum of squared weights: each sample of
 * weight w adds w(w - 1); 0 for exact counts. */
static uint64_t mf_calls_var(uint64_t calls, uint64_t calls_sq)
{
    return calls_sq > calls ? calls_sq - calls : 0;
}

static void mf_add_stack_size(struct mf_profile *p, uint32_t stack, const struct mf_stack_entry *e,
                              uint32_t size_class)
{
    struct mf_raw_stack *s = &p->stacks[stack];
    uint32_t idx = s->sizes_first, n = 0;
    while (n < s->nsizes && p->stack_sizes[idx].size_class != size_class) {
        idx = p->reading.size_next[idx];
        n++;
    }
    if (n == s->nsizes) {
        uint32_t cap = p->stack_sizes_cap;
        MF_GROW(p->stack_sizes, p->nstack_sizes, p->stack_sizes_cap);
        if (p->stack_sizes_cap != cap)
            p->reading.size_next = mf_xrealloc(p->reading.size_next,
                                               p->stack_sizes_cap * sizeof *p->reading.size_next);
        idx = p->nstack_sizes++;
        p->stack_sizes[idx] = (struct mf_stack_size){stack, size_class, 0, 0, 0, 0, 0};
        p->reading.size_next[idx] = s->sizes_first;
        s->sizes_first = idx;
        s->nsizes++;
    }
    struct mf_stack_size *z = &p->stack_sizes[idx];
    z->samples += e->samples;
    z->calls += e->calls;
    z->bytes += e->bytes;
    z->var += mf_calls_var(e->calls, e->calls_sq);
    z->bytes_var += e->bytes_var;
}

/* An ids_only profile's stacks, by id. */
struct mf_stack_id_key {
    const struct mf_profile *p;
    uint64_t id;
};

static bool mf_stack_id_eq(const void *ctx, uint32_t idx)
{
    const struct mf_stack_id_key *k = ctx;
    return k->p->stacks[idx].id == k->id;
}

/* The timeline id's chain value (mf_tl_id) of node ref of a file mf_check_thread passed,
 * from its callers', each node's computed once a file: chain[k][i], 0 until then (a value
 * that is 0 is merely computed again). A stack's callers are its neighbours' too, so this
 * is a step a node, where hashing each stack's frames was a step a frame of every stack. */
static uint64_t mf_node_chain(const struct mf_thread_header *th,
                              const struct mf_frame_node *const *nodes, uint64_t *const *chain,
                              uint32_t ref)
{
    uint32_t path[MF_DEPTH_MAX], n = 0; /* a chain has at most max_depth nodes (checked) */
    uint64_t h = MF_TL_ID_SEED;
    for (; ref; ref = MF_NODE_PARENT(&nodes[MF_NODE_REF_SEG(ref)][MF_NODE_REF_IDX(ref)])) {
        uint64_t known = chain[MF_NODE_REF_SEG(ref)][MF_NODE_REF_IDX(ref)];
        if (known) {
            h = known;
            break;
        }
        path[n++] = ref;
    }
    while (n--) {
        ref = path[n];
        h = mf_tl_id_step(h, mf_node_pc(th, &nodes[MF_NODE_REF_SEG(ref)][MF_NODE_REF_IDX(ref)]));
        chain[MF_NODE_REF_SEG(ref)][MF_NODE_REF_IDX(ref)] = h;
    }
    return h;
}

/* ---- merging the images of one program (merge_images) ---------------------------------
 * Two images are alike when they run the same executable with the same modules, in the same
 * order, each the same file (path, build id) mapped alike (its size and its offset from its
 * bias), none overlapping another: ASLR moves each module as a whole. A return address in
 * one then stands for the same place as that address moved by its module's offset in the
 * other, and the symbolizer, which looks it up by the module it lies in and its address
 * less the module's bias (symbolize.c), names it alike. */
struct mf_image_key {
    const struct mf_profile *p;
    uint32_t process;
};

/* pr's modules in their records' order (m->order is the record index, 0 .. n - 1). */
static uint32_t *mf_modules_by_order(const struct mf_process *pr)
{
    uint32_t *ord = mf_xmalloc((pr->nmodules + 1) * sizeof *ord);
    for (uint32_t j = 0; j < pr->nmodules; j++)
        ord[pr->modules[j].order < pr->nmodules ? pr->modules[j].order : 0] = j;
    return ord;
}

static bool mf_module_alike(const struct mf_module *a, const struct mf_module *b)
{
    return a->hi - a->lo == b->hi - b->lo && a->lo - a->bias == b->lo - b->bias &&
           a->epoch == b->epoch && a->build_id_len == b->build_id_len &&
           memcmp(a->build_id, b->build_id, a->build_id_len) == 0 && strcmp(a->path, b->path) == 0;
}

static bool mf_image_eq(const void *ctx, uint32_t idx)
{
    const struct mf_image_key *k = ctx;
    const struct mf_process *a = &k->p->procs[idx], *b = &k->p->procs[k->process];
    if (a->nmodules != b->nmodules || strcmp(a->exe, b->exe) != 0)
        return false;
    uint32_t *oa = mf_modules_by_order(a), *ob = mf_modules_by_order(b);
    bool eq = true;
    for (uint32_t i = 0; i < a->nmodules && eq; i++)
        eq = mf_module_alike(&a->modules[oa[i]], &b->modules[ob[i]]);
    free(oa);
    free(ob);
    return eq;
}

uint32_t mf_modules_from(const struct mf_process *pr, uint64_t pc)
{
    uint32_t lo = 0, hi = pr->nmodules;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pr->modules[mid].lo <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Which image process's stacks are kept in, and how its modules move there. */
static void mf_image_of(struct mf_profile *p, uint32_t process)
{
    struct mf_process *pr = &p->procs[process];
    pr->image_known = true;
    pr->image = MF_IMAGE_APART;
    if (!pr->has_file || pr->nmodules == 0)
        return;
    for (uint32_t j = 0; j < pr->nmodules; j++) /* sorted by lo: none may overlap the next */
        if (pr->modules[j].hi <= pr->modules[j].lo ||
            (j + 1 < pr->nmodules && pr->modules[j].hi > pr->modules[j + 1].lo))
            return;
    uint32_t *ord = mf_modules_by_order(pr);
    uint64_t h = mf_hash_bytes(pr->exe, strlen(pr->exe), pr->nmodules);
    for (uint32_t i = 0; i < pr->nmodules; i++) {
        const struct mf_module *m = &pr->modules[ord[i]];
        uint64_t v[3] = {m->hi - m->lo, m->lo - m->bias, m->epoch};
        h = mf_hash_bytes(v, sizeof v, h);
        h = mf_hash_bytes(m->path, strlen(m->path), h);
        h = mf_hash_bytes(m->build_id, m->build_id_len, h);
    }
    struct mf_image_key k = {p, process};
    bool added;
    uint32_t first = mf_map_put(&p->reading.images, h, mf_image_eq, &k, process, &added);
    pr->image = first;
    if (!added) {
        const struct mf_process *to = &p->procs[first];
        uint32_t *to_ord = mf_modules_by_order(to);
        pr->rebase = mf_xmalloc(pr->nmodules * sizeof *pr->rebase);
        for (uint32_t i = 0; i < pr->nmodules; i++)
            pr->rebase[ord[i]] = (int64_t)(to->modules[to_ord[i]].lo - pr->modules[ord[i]].lo);
        free(to_ord);
    }
    free(ord);
}

/* The frames of a stack of process (flags: its entry's) moved to its image's addresses, in
 * out: false if they stay where they are (the first image of its kind, one kept apart, or a
 * frame in no module its stack's epoch sees, whose name is its address). */
static bool mf_rebase(struct mf_profile *p, uint32_t process, uint32_t flags, uint32_t depth,
                      const uint64_t *frames, uint64_t *out)
{
    struct mf_process *pr = &p->procs[process];
    if (!pr->image_known)
        mf_image_of(p, process);
    if (pr->image == MF_IMAGE_APART || pr->image == process)
        return false;
    uint32_t epoch = flags >> MF_ENTRY_EPOCH_SHIFT, j = 0;
    for (uint32_t i = 0; i < depth; i++) {
        uint64_t pc = frames[i];
        if (!(pc >= pr->modules[j].lo && pc < pr->modules[j].hi)) { /* else the last one's */
            uint32_t lo = mf_modules_from(pr, pc);
            if (lo == 0 || pc >= pr->modules[lo - 1].hi)
                return false;
            j = lo - 1;
        }
        if (pr->modules[j].epoch > epoch)
            return false;
        out[i] = pc + (uint64_t)pr->rebase[j];
    }
    return true;
}

/* The raw stack of an entry of process: frames its frames, decoded (copied if the stack is
 * new); with ids_only, NULL and id its timeline id instead. The stack is all its classes'
 * entries (its flags without MF_ENTRY_SIZED). */
static uint32_t mf_stack_of(struct mf_profile *p, uint32_t process, const struct mf_stack_entry *e,
                            const uint64_t *frames, uint64_t id)
{
    uint64_t moved[MF_DEPTH_MAX];
    uint32_t image = process;
    if (p->merge_images && !p->ids_only &&
        mf_rebase(p, process, e->flags, e->depth, frames, moved)) {
        image = p->procs[process].image;
        frames = moved;
    }
    struct mf_stack_key key = mf_stack_key_of(p, image, e, frames);
    struct mf_stack_id_key id_key = {p, 0};
    bool added;
    uint32_t idx;
    if (p->ids_only) { /* the id names the process image: no two processes share one */
        id_key.id = id;
        idx = mf_map_put(&p->reading.stack_ids, id_key.id, mf_stack_id_eq, &id_key, p->nstacks,
                         &added);
    } else {
        idx = mf_map_put(&p->reading.stack_ids, mf_stack_hash(&key), mf_stack_eq, &key,
                         p->nstacks, &added);
    }
    if (added) {
        MF_GROW(p->stacks, p->nstacks, p->stacks_cap);
        struct mf_raw_stack *s = &p->stacks[p->nstacks++];
        memset(s, 0, sizeof *s);
        s->process = image;
        s->depth = e->depth;
        s->flags = key.flags;
        s->id = id_key.id;
        s->images = 1;
        s->source = s->last = process;
        if (!p->ids_only) {
            s->frames = mf_frames_alloc(p, e->depth);
            memcpy(s->frames, frames, e->depth * sizeof *frames);
        }
    }
    return idx;
}

/* An entry of process added to its raw stack idx (mf_stack_of). A sized entry's class goes
 * to the stack's counts by class. */
static void mf_add_counts(struct mf_profile *p, uint32_t process, uint32_t idx,
                          const struct mf_stack_entry *e)
{
    struct mf_raw_stack *s = &p->stacks[idx];
    if (process != s->source && process != s->last) { /* another image's counts too */
        struct mf_read_state *r = &p->reading;
        MF_GROW(r->more, r->nmore, r->more_cap);
        r->more[r->nmore++] = (struct mf_stack_image){idx, process};
        s->last = process;
        s->images++;
    }
    s->samples += e->samples;
    s->calls += e->calls;
    s->bytes += e->bytes;
    s->var += mf_calls_var(e->calls, e->calls_sq);
    s->bytes_var += e->bytes_var;
    if ((e->flags & MF_ENTRY_SIZED) && !p->no_sizes) /* the class was checked (mf_check_thread) */
        mf_add_stack_size(p, idx, e, e->size_class);
    p->procs[process].attributed += e->calls;
}

/* The thread tables read so far, by identity: a copy of a directory (or a file copied into
 * another) holds the same table, whose counts must not be added twice. */
struct mf_table_id {
    uint64_t stamp, seq;
    uint32_t pid, tid;
    char *path; /* dir/name, as the message shows it */
};
struct mf_table_key {
    const struct mf_profile *p;
    const struct mf_thread_header *h;
};

static bool mf_table_id_eq(const void *ctx, uint32_t idx)
{
    const struct mf_table_key *k = ctx;
    const struct mf_thread_header *h = k->h;
    const struct mf_table_id *t = &k->p->reading.tables[idx];
    return t->stamp == h->stamp && t->seq == h->seq && t->pid == h->pid && t->tid == h->tid;
}

/* The file that already gave this table, or NULL (then it is recorded as read from here). */
static const char *mf_table_seen(struct mf_profile *p, const struct mf_thread_header *h,
                                 const char *dir, const char *name)
{
    struct mf_read_state *r = &p->reading;
    struct mf_table_key k = {p, h};
    uint64_t key[3] = {h->stamp, h->seq, (uint64_t)h->pid << 32 | h->tid};
    bool added;
    uint32_t idx = mf_map_put(&r->table_map, mf_hash_bytes(key, sizeof key, 7), mf_table_id_eq,
                              &k, r->ntables, &added);
    if (!added)
        return r->tables[idx].path;
    MF_GROW(r->tables, r->ntables, r->tables_cap);
    size_t n = strlen(mf_basename(dir)) + strlen(name) + 2;
    char *path = mf_xmalloc(n);
    snprintf(path, n, "%s/%s", mf_basename(dir), name);
    r->tables[r->ntables++] = (struct mf_table_id){h->stamp, h->seq, h->pid, h->tid, path};
    return NULL;
}

/* Calibration: a finished table's stacks are made to add up to its exact call count.
 * The thread counts every call exactly (its header's totals) and its stacks' estimates are
 * unbiased, so their sum misses those totals by the sampling error alone. The difference is
 * given to the estimates in proportion to their sampled part, sum (w - 1) over their samples
 * (a ratio estimator: exact counts, whose samples weigh 1, stay as they are). In proportion
 * to their variance instead, sum w(w - 1), would be least-variance if the variances were
 * known; estimated from a few samples of unequal weights, one heavy sample drew most of the
 * difference to its stack, and a compile's largest sites scattered more than uncalibrated.
 * An estimate's variance falls with its share s of the sampled part to v (1 - s). An
 * entry's bytes follow its calls, so its mean size, which its samples measured exactly,
 * stays. Only a table whose totals are complete is calibrated: one its thread finished, or
 * whose process exited; a running thread adds its counts to the header every few thousand
 * calls, after its samples. Rounded by the running sum, so that the integers add up. */
struct mf_calibration {
    bool on;
    double diff, excess; /* T - sum x, and sum (w - 1) of every sample */
    double done;         /* the adjustments so far, unrounded */
    double given;        /* and as given, rounded (whole numbers) */
};

/* x to the nearest whole number (halves away from zero). A damaged file's counts can make x
 * anything, so no double is converted to an integer type outside its range (the fuzzer's
 * 4.3e19, undefined behaviour): beyond 2^62 a double is whole already, NaN is 0. */
static double mf_round(double x)
{
    if (!(x > -0x1p62 && x < 0x1p62))
        return x != x ? 0 : x;
    return (double)(int64_t)(x < 0 ? x - 0.5 : x + 0.5);
}

/* A count from x: 0 below 1, UINT64_MAX past it. */
static uint64_t mf_count_of(double x)
{
    return !(x > 0) ? 0 : x >= 0x1p64 ? UINT64_MAX : (uint64_t)x;
}

static void mf_calibration_start(struct mf_calibration *k, const struct mf_thread_header *h,
                                 const uint8_t *buf, const struct mf_process *pr,
                                 const struct mf_file_sums *fs, bool off)
{
    memset(k, 0, sizeof *k);
    if (off || !((h->flags & MF_THREAD_FINISHED) || (pr->has_file && (pr->flags & MF_PROCESS_EXITED))))
        return;
    k->excess = h->unprofiled_calls > h->unprofiled_samples
                    ? (double)(h->unprofiled_calls - h->unprofiled_samples) : 0;
    for (uint32_t s = 0; s < h->nsegments; s++) {
        const struct mf_segment_header *seg = mf_segment(buf, h, s);
        struct mf_stack_entry e;
        for (uint64_t i = 0, used; i < seg->capacity && (used = mf_entry_decode(seg, i, &e)); i += used)
            if (e.calls > e.samples)
                k->excess += (double)(e.calls - e.samples);
    }
    k->diff = (double)fs->calls - (double)fs->st_calls;
    k->on = k->excess > 0 && k->diff != 0;
}

/* An estimate calibrated: its calls and bytes, and their variances (calls_sq = calls + var). */
static void mf_calibrate(struct mf_calibration *k, uint64_t samples, uint64_t *calls,
                         uint64_t *calls_sq, uint64_t *bytes, double *bytes_var)
{
    if (!k->on || *calls <= samples)
        return;
    double share = (double)(*calls - samples) / k->excess;
    k->done += k->diff * share;
    double add = mf_round(k->done) - k->given;
    k->given += add;
    double c = (double)*calls + add, v = (double)mf_calls_var(*calls, *calls_sq);
    uint64_t was = *calls;
    *calls = c < (double)samples ? samples : mf_count_of(c); /* each sample was a call */
    *calls_sq = *calls + mf_count_of(mf_round(v * (1 - share)));
    *bytes = mf_count_of(mf_round((double)*bytes * (double)*calls / (double)was));
    if (__builtin_isfinite(*bytes_var)) /* a damaged file's stays what it is */
        *bytes_var *= 1 - share;
}

static void mf_free_depths(uint16_t **depth)
{
    for (uint32_t k = 0; k < MF_MAX_SEGMENTS; k++)
        free(depth[k]);
}

static void mf_read_thread(struct mf_profile *p, int dirfd, const char *dir, const char *name)
{
    uint8_t *buf;
    size_t size;
    const char *why;
    struct mf_thread_header later;
    if (mf_load(p, dirfd, dir, name, MF_THREAD_FILE_MAX, &later, sizeof later, &buf, &size))
        return;
    uint64_t moved = size >= sizeof later ? mf_thread_counters(buf, &later) : 0;
    uint16_t *depth[MF_MAX_SEGMENTS] = {NULL}; /* each node's, from the check */
    if ((why = mf_check_thread(buf, size, depth))) {
        mf_skip(p, dir, name, why);
        mf_free_depths(depth);
        free(buf);
        return;
    }
    const struct mf_thread_header *h = (const struct mf_thread_header *)buf;
    /* Only a process file read before names a process here; the lookup must not add one
     * for a file that is then skipped. */
    struct mf_process *known = NULL;
    for (uint32_t i = 0; i < p->nprocs && !known; i++)
        if (p->procs[i].stamp == h->stamp && p->procs[i].pid == h->pid)
            known = &p->procs[i];
    struct mf_process none = {0};
    struct mf_file_sums fs;
    if ((why = mf_check_counts(p, known ? known : &none, buf, moved, &fs))) {
        mf_skip(p, dir, name, why);
        mf_free_depths(depth);
        free(buf);
        return;
    }
    const char *first = mf_table_seen(p, h, dir, name);
    if (first) {
        char msg[400];
        snprintf(msg, sizeof msg, "the same thread table as %s (its counts are read once)",
                 mf_esc(first));
        mf_skip(p, dir, name, msg);
        mf_free_depths(depth);
        free(buf);
        return;
    }
    struct mf_process *pr = mf_process_get(p, h->stamp, h->pid, dir);
    uint32_t process = (uint32_t)(pr - p->procs);
    uint32_t threads = h->threads ? (uint32_t)h->threads : 1; /* a table serves many in turn */
    pr->nthreads += threads;
    if (pr->ntables && p->reading.last_file_process != process + 1)
        p->reading.apart = true; /* its files were not read one after another */
    p->reading.last_file_process = process + 1;
    MF_GROW(pr->tables, pr->ntables, pr->tables_cap);
    pr->tables[pr->ntables++] = h->seq;
    if (h->start_ns < pr->threads_start_ns)
        pr->threads_start_ns = h->start_ns;
    if (h->last_ns > pr->threads_last_ns)
        pr->threads_last_ns = h->last_ns;
    for (int f = 0; f < MF_FN_COUNT; f++) { /* calls never wrap: mf_check_counts */
        pr->totals.calls[f] += h->totals.calls[f];
        pr->totals.bytes[f] += h->totals.bytes[f];
        p->totals.calls[f] += h->totals.calls[f];
        p->totals.bytes[f] += h->totals.bytes[f];
    }
    pr->calls += fs.calls;
    struct mf_calibration cal;
    mf_calibration_start(&cal, h, buf, pr, &fs, p->uncalibrated);
    uint64_t un_calls = h->unprofiled_calls, un_sq = h->unprofiled_calls_sq;
    uint64_t un_bytes = h->unprofiled_bytes;
    double un_bytes_var = h->unprofiled_bytes_var;
    if (h->unprofiled_samples)
        mf_calibrate(&cal, h->unprofiled_samples, &un_calls, &un_sq, &un_bytes, &un_bytes_var);
    uint64_t unprofiled_var = mf_calls_var(un_calls, un_sq);
    p->unprofiled_samples += h->unprofiled_samples;
    p->unprofiled_calls += un_calls;
    p->stacks_calls += un_calls; /* calibrated: at most max(totals, the stacks' sum) */
    pr->attributed += un_calls;
    p->unprofiled_bytes += un_bytes;
    p->unprofiled_var += unprofiled_var;
    pr->unprofiled_samples += h->unprofiled_samples;
    pr->unprofiled_calls += un_calls;
    pr->unprofiled_bytes += un_bytes;
    pr->unprofiled_var += unprofiled_var;
    p->unprofiled_bytes_var += un_bytes_var;
    if (!pr->sizes)
        pr->sizes = mf_xcalloc(MF_SIZE_CLASSES, sizeof *pr->sizes);
    for (int c = 0; c < MF_SIZE_CLASSES; c++) {
        pr->sizes[c].calls += h->sizes[c].calls;
        pr->sizes[c].bytes += h->sizes[c].bytes;
        pr->sizes[c].calls_var += h->sizes[c].calls_var;
        pr->sizes[c].bytes_var += h->sizes[c].bytes_var;
        p->sizes[c].calls += h->sizes[c].calls;
        p->sizes[c].bytes += h->sizes[c].bytes;
        p->sizes[c].calls_var += h->sizes[c].calls_var;
        p->sizes[c].bytes_var += h->sizes[c].bytes_var;
    }
    if (un_calls != h->unprofiled_samples)
        pr->weighted = true;
    uint64_t frames[MF_DEPTH_MAX];
    const struct mf_frame_node *nodes[MF_MAX_SEGMENTS];
    uint64_t *chain[MF_MAX_SEGMENTS] = {NULL};
    /* Per node: the raw stack (+ 1) of the last entry that ended there. The next entry of
     * the same node and flags (another size class of the stack: 45 % of a build's entries)
     * is that stack, its frames neither decoded nor hashed again. */
    uint32_t *stack_at[MF_MAX_SEGMENTS] = {NULL};
    for (uint32_t k = 0; k < h->nsegments; k++) {
        nodes[k] = mf_segment_nodes(mf_segment(buf, h, k));
        if (p->ids_only)
            chain[k] = mf_xcalloc(mf_segment(buf, h, k)->node_capacity + 1u, sizeof *chain[k]);
        stack_at[k] = mf_xcalloc(mf_segment(buf, h, k)->node_capacity + 1u, sizeof *stack_at[k]);
    }
    for (uint32_t k = 0; k < h->nsegments; k++) {
        const struct mf_segment_header *seg = mf_segment(buf, h, k);
        struct mf_stack_entry c;
        for (uint64_t i = 0, used; i < seg->capacity && (used = mf_entry_decode(seg, i, &c)); i += used) {
            if (c.calls == 0)
                continue;
            /* Its depth: its chain's (mf_check_thread followed it). */
            c.depth = c.node ? depth[MF_NODE_REF_SEG(c.node)][MF_NODE_REF_IDX(c.node)] : 0;
            uint32_t *at = c.node ? &stack_at[MF_NODE_REF_SEG(c.node)][MF_NODE_REF_IDX(c.node)]
                                  : NULL;
            uint32_t stack = UINT32_MAX;
            if (at && *at && p->stacks[*at - 1].flags == (c.flags & ~MF_ENTRY_SIZED))
                stack = *at - 1;
            uint64_t id = 0;
            if (stack == UINT32_MAX && p->ids_only)
                id = mf_tl_id(c.node ? mf_node_chain(h, nodes, chain, c.node) : MF_TL_ID_SEED,
                              h->stamp, c.flags & ~MF_ENTRY_SIZED, c.depth);
            else if (stack == UINT32_MAX)
                mf_checked_frames(h, nodes, &c, frames);
            pr->weight_var += mf_calls_var(c.calls, c.calls_sq); /* as recorded */
            pr->weight_excess += c.calls - c.samples;
            pr->weighted |= c.calls != c.samples;
            mf_calibrate(&cal, c.samples, &c.calls, &c.calls_sq, &c.bytes, &c.bytes_var);
            p->stacks_calls += c.calls;
            if (stack == UINT32_MAX) {
                stack = mf_stack_of(p, process, &c, p->ids_only ? NULL : frames, id);
                if (at)
                    *at = stack + 1;
            }
            mf_add_counts(p, process, stack, &c);
        }
        /* Its entries are read (its nodes may be later entries' too); segments never
         * overlap (mf_check_thread) */
        mf_release_pages(buf, size, h->segment_offset[k] + MF_SEGMENT_ENTRIES_OFFSET,
                         (uint64_t)seg->capacity * sizeof(struct mf_entry));
    }
    for (uint32_t k = 0; k < h->nsegments; k++) {
        free(chain[k]);
        free(stack_at[k]);
    }
    mf_free_depths(depth);
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

static bool mf_profile_file_name(const char *name)
{
    return mf_has_suffix(name, "process.", ".mfp") || mf_has_suffix(name, "thread.", ".mft");
}

uint32_t mf_profile_files_now(const char *dir, const struct stat *st)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat now;
    if (fd >= 0 && (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)) {
        close(fd);
        fd = -1;
    }
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return UINT32_MAX;
    }
    uint32_t n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += mf_profile_file_name(de->d_name);
    closedir(d);
    return n;
}

static int mf_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir/name, without doubling a '/' that dir ends in: the name a message shows, and a
 * process's directory as reported. Files are opened relative to directory descriptors
 * (openat), so a path of any length is read. */
static char *mf_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    bool slash = a && dir[a - 1] == '/';
    char *s = mf_xmalloc(a + b + 2);
    memcpy(s, dir, a);
    if (!slash)
        s[a++] = '/';
    memcpy(s + a, name, b + 1);
    return s;
}

/* Directories read so far (device, inode): one given twice, or found again by a walk,
 * is read once. Hashed: a run tree may hold 10^5 directories. */
struct mf_dir_id {
    dev_t dev;
    ino_t ino;
};
struct mf_dir_key {
    const struct mf_read_state *r;
    struct mf_dir_id id;
};

static bool mf_dir_id_eq(const void *ctx, uint32_t idx)
{
    const struct mf_dir_key *k = ctx;
    return k->r->dirs[idx].dev == k->id.dev && k->r->dirs[idx].ino == k->id.ino;
}

uint64_t mf_dir_id_hash(dev_t dev, ino_t ino)
{
    return mf_hash_u64(mf_hash_u64((uint64_t)dev) ^ (uint64_t)ino);
}

static bool mf_seen_dir(struct mf_profile *p, const struct stat *st)
{
    struct mf_read_state *r = &p->reading;
    struct mf_dir_key k = {r, {st->st_dev, st->st_ino}};
    bool added;
    mf_map_put(&r->dir_map, mf_dir_id_hash(k.id.dev, k.id.ino), mf_dir_id_eq, &k, r->ndirs,
               &added);
    if (added) {
        MF_GROW(r->dirs, r->ndirs, r->dirs_cap);
        r->dirs[r->ndirs++] = k.id;
    }
    return !added;
}

/* Reads the profile files of one process directory (dirfd, named dir, of stat st). */
static void mf_read_process_dir(struct mf_profile *p, int dirfd, const char *dir,
                                const struct stat *st, char **names, size_t n)
{
    qsort(names, n, sizeof *names, mf_name_cmp);
    char *dir_copy = mf_xstrdup(dir); /* the processes it makes keep pointing at it */
    uint32_t nprocs = p->nprocs;
    for (size_t len = strlen(dir_copy); len > 1 && dir_copy[len - 1] == '/';)
        dir_copy[--len] = '\0'; /* "malloc_freq.1/" names its files as "malloc_freq.1/x" */
    /* Process files first, so that thread files find their process. */
    for (size_t i = 0; i < n; i++)
        if (names[i][0] == 'p')
            mf_read_process(p, dirfd, dir_copy, names[i]);
    for (size_t i = 0; i < n; i++)
        if (names[i][0] == 't')
            mf_read_thread(p, dirfd, dir_copy, names[i]);
    for (uint32_t i = nprocs; i < p->nprocs; i++) {
        p->procs[i].dir_dev = st->st_dev;
        p->procs[i].dir_ino = st->st_ino;
    }
    if (p->nprocs == nprocs) /* no process of its own points at it */
        free(dir_copy);
    p->ndirs_read++;
}

struct mf_walk {
    bool too_deep; /* said once: directories below MF_WALK_DEPTH were not looked at */
};

/* Reads the directory dirfd (named dir, of stat st; the walk takes it over and closes it) if
 * it holds profile files and is not left out, then the directories under it, in name order,
 * without following symbolic links. Returns the process directories found. */
static uint32_t mf_walk(struct mf_profile *p, struct mf_walk *w, int dirfd, const char *dir,
                        const struct stat *st, unsigned depth)
{
    DIR *d = fdopendir(dirfd); /* it owns dirfd from here: closedir closes it */
    if (!d) {
        mf_error("cannot open directory %s: %s (skipped)", mf_esc(dir), strerror(errno));
        close(dirfd);
        return 0;
    }
    char **names = NULL, **subdirs = NULL;
    size_t n = 0, cap = 0, nsub = 0, subcap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (mf_profile_file_name(de->d_name)) {
            MF_GROW(names, n, cap);
            names[n++] = mf_xstrdup(de->d_name);
            continue;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        bool is_dir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN) { /* some file systems do not say: lstat, no links */
            struct stat st;
            is_dir = fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                     S_ISDIR(st.st_mode);
        }
        if (is_dir) {
            MF_GROW(subdirs, nsub, subcap);
            subdirs[nsub++] = mf_xstrdup(de->d_name);
        }
    }
    uint32_t found = 0;
    if (n) {
        if (!p->left_out || !p->left_out(dir, st, (uint32_t)n, p->left_out_ctx))
            mf_read_process_dir(p, dirfd, dir, st, names, n);
        found++;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (nsub > 1)
        qsort(subdirs, nsub, sizeof *subdirs, mf_name_cmp);
    for (size_t i = 0; i < nsub; i++) {
        char *path = mf_path_join(dir, subdirs[i]);
        if (depth >= MF_WALK_DEPTH) {
            if (!w->too_deep)
                mf_error("not looking into %s and other directories more than %d levels down",
                         mf_esc(path), MF_WALK_DEPTH);
            w->too_deep = true;
        } else {
            /* O_NOFOLLOW: a directory replaced by a link since it was listed is not entered */
            int sub = openat(dirfd, subdirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            struct stat sub_st;
            if (sub >= 0 && fstat(sub, &sub_st) == 0 && !mf_seen_dir(p, &sub_st)) {
                found += mf_walk(p, w, sub, path, &sub_st, depth + 1);
                sub = -1;
            }
            if (sub >= 0)
                close(sub);
        }
        free(path);
        free(subdirs[i]);
    }
    free(subdirs);
    closedir(d);
    return found;
}

bool mf_profile_read_dir(struct mf_profile *p, const char *dir)
{
    struct stat st;
    int fd = mf_open_dir(dir);
    if (fd < 0 && errno == ENOTDIR && stat(dir, &st) == 0) {
        mf_error("%s is not a directory (mf_print wants a malloc_freq.<pid> directory, or one "
                 "that holds them)", mf_esc(dir));
        return true;
    }
    if (fd < 0 || fstat(fd, &st) != 0) {
        mf_error("cannot open directory %s: %s", mf_esc(dir), strerror(errno));
        if (fd >= 0)
            close(fd);
        return true;
    }
    if (mf_seen_dir(p, &st)) {
        mf_error("%s was given twice; reading it once", mf_esc(dir));
        close(fd);
        return false;
    }
    struct mf_walk w = {0};
    if (mf_walk(p, &w, fd, dir, &st, 0) == 0) {
        mf_error("no profile files in %s or under it (expected process.*.mfp and thread.*.mft, "
                 "or malloc_freq.<pid> directories holding them)", mf_esc(dir));
        return true;
    }
    return false;
}

static int mf_stack_image_cmp(const void *a, const void *b)
{
    const struct mf_stack_image *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return x->process < y->process ? -1 : x->process > y->process;
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
                     mf_esc(mf_basename(pr->dir)), (unsigned long long)pr->stamp);
    }
    /* Each stack's counts by class, in a row, by stack then class; whether it is sampled:
     * an image of its counts is. */
    struct mf_read_state *r = &p->reading;
    struct mf_stack_size *row = mf_xmalloc(((size_t)p->nstack_sizes + 1) * sizeof *row);
    uint32_t at = 0;
    for (uint32_t i = 0; i < p->nstacks; i++) {
        struct mf_raw_stack *s = &p->stacks[i];
        uint32_t first = at, idx = s->sizes_first;
        for (uint32_t n = 0; n < s->nsizes; n++, idx = r->size_next[idx]) {
            struct mf_stack_size z = p->stack_sizes[idx];
            uint32_t k = at++;
            for (; k > first && row[k - 1].size_class > z.size_class; k--)
                row[k] = row[k - 1];
            row[k] = z;
        }
        s->sizes_first = s->nsizes ? first : 0;
        s->sampled = p->procs[s->source].sampled;
    }
    free(p->stack_sizes);
    p->stack_sizes = row;
    p->stack_sizes_cap = p->nstack_sizes + 1;
    if (r->apart && r->nmore) { /* an image's pairs may repeat: each counted once */
        qsort(r->more, r->nmore, sizeof *r->more, mf_stack_image_cmp);
        uint32_t n = 0;
        for (uint32_t i = 0; i < r->nmore; i++)
            if (!n || mf_stack_image_cmp(&r->more[n - 1], &r->more[i]) != 0)
                r->more[n++] = r->more[i];
        r->nmore = n;
        for (uint32_t i = 0; i < p->nstacks; i++)
            p->stacks[i].images = 1;
        for (uint32_t i = 0; i < n; i++) /* never the image it was made for */
            p->stacks[r->more[i].stack].images++;
    }
    for (uint32_t i = 0; i < r->nmore; i++)
        p->stacks[r->more[i].stack].sampled |= p->procs[r->more[i].process].sampled;

    /* What tells files apart while they are read: the next profile (--base's other side)
     * starts afresh. */
    free(r->more);
    mf_map_free(&r->images);
    free(r->size_next);
    mf_map_free(&r->stack_ids);
    mf_map_free(&r->table_map);
    for (uint32_t i = 0; i < r->ntables; i++)
        free(r->tables[i].path);
    free(r->tables);
    free(r->dirs);
    mf_map_free(&r->dir_map);
    memset(r, 0, sizeof *r);
}

uint64_t mf_profile_image_stacks(const struct mf_profile *p)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < p->nstacks; i++)
        n += p->stacks[i].images;
    return n;
}

void mf_profile_free(struct mf_profile *p)
{
    mf_profile_drop_frames(p);
    for (uint32_t i = 0; i < p->nprocs; i++) {
        struct mf_process *pr = &p->procs[i];
        for (uint32_t j = 0; j < pr->nmodules; j++)
            free(pr->modules[j].path);
        free(pr->modules);
        free(pr->rebase);
        free(pr->sizes);
        free(pr->tables);
        /* One copy per directory read, made for its first process (mf_read_process_dir):
         * the processes of a directory lie together. A saved profile's are its path's. */
        if (pr->dir_owned && (i == 0 || p->procs[i - 1].dir != pr->dir))
            free((char *)pr->dir);
    }
    free(p->procs);
    free(p->stacks);
    free(p->stack_sizes);
    free(p->live);
    free(p->lifetimes);
    memset(p, 0, sizeof *p);
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

const char *mf_process_program(const struct mf_process *pr)
{
    return pr->has_file && pr->exe[0] ? mf_basename(pr->exe) : "?";
}

void mf_profile_subset(struct mf_profile *dst, const struct mf_profile *src,
                       bool (*keep)(const struct mf_process *pr, void *ctx), void *ctx)
{
    memset(dst, 0, sizeof *dst);
    uint32_t *index = mf_xmalloc((src->nprocs + 1) * sizeof *index);
    for (uint32_t i = 0; i < src->nprocs; i++) {
        const struct mf_process *pr = &src->procs[i];
        index[i] = UINT32_MAX;
        if (!keep(pr, ctx))
            continue;
        index[i] = dst->nprocs;
        MF_GROW(dst->procs, dst->nprocs, dst->procs_cap);
        dst->procs[dst->nprocs++] = *pr;
        for (int f = 0; f < MF_FN_COUNT; f++) {
            dst->totals.calls[f] += pr->totals.calls[f];
            dst->totals.bytes[f] += pr->totals.bytes[f];
        }
        dst->unprofiled_samples += pr->unprofiled_samples;
        dst->unprofiled_calls += pr->unprofiled_calls;
        dst->unprofiled_bytes += pr->unprofiled_bytes;
        dst->unprofiled_var += pr->unprofiled_var;
        dst->nthreads += pr->nthreads;
        for (int c = 0; c < MF_SIZE_CLASSES && pr->sizes; c++) {
            dst->sizes[c].calls += pr->sizes[c].calls;
            dst->sizes[c].bytes += pr->sizes[c].bytes;
            dst->sizes[c].calls_var += pr->sizes[c].calls_var;
            dst->sizes[c].bytes_var += pr->sizes[c].bytes_var;
        }
    }
    for (uint32_t i = 0; i < src->nstacks; i++) {
        const struct mf_raw_stack *s = &src->stacks[i];
        if (index[s->process] == UINT32_MAX)
            continue;
        MF_GROW(dst->stacks, dst->nstacks, dst->stacks_cap);
        dst->stacks[dst->nstacks] = *s;
        dst->stacks[dst->nstacks++].process = index[s->process];
    }
    dst->stack_sizes = src->stack_sizes; /* the stacks keep their ranges in it */
    dst->nstack_sizes = src->nstack_sizes;
    dst->nfiles_read = src->nfiles_read;
    dst->nfiles_skipped = src->nfiles_skipped;
    dst->ndirs_read = src->ndirs_read;
    free(index);
}
