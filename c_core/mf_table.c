/* Per-thread tables: an open-addressing hash of stacks in a file-backed MAP_SHARED mapping,
 * so whatever was counted is in the file at any end of the process (DESIGN §7). Only the
 * owning thread writes; mf_print may read at any time, so entries are published hash-last
 * and segments are chained, never moved. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mf_internal.h"

#define MF_PAGE 4096u
#define MF_HEADER_BYTES MF_THREAD_HEADER_BYTES /* the table geometry is the format's */
_Static_assert(MF_THREAD_HEADER_BYTES == 2 * MF_PAGE &&
                   sizeof(struct mf_thread_header) <= MF_THREAD_HEADER_BYTES &&
                   sizeof(struct mf_entry) == 64 && MF_THREAD_FILE_MAX == 1610752000u,
               "MF_THREAD_FILE_MAX in mf_format.h says what these make");

static uint64_t mf_round_page(uint64_t n)
{
    return (n + MF_PAGE - 1) & ~(uint64_t)(MF_PAGE - 1);
}

static char *mf_thread_name(char *buf, size_t size, const struct mf_thread_header *h)
{
    char *end = buf + size, *p = mf_append(buf, end, "thread.");
    p = mf_append_hex(p, end, h->stamp, 16);
    p = mf_append(p, end, ".");
    p = mf_append_u64(p, end, h->seq);
    p = mf_append(p, end, ".");
    p = mf_append_u64(p, end, h->tid);
    mf_append(p, end, ".mft");
    return buf;
}

/* A full disk or RLIMIT_FSIZE stops the table, never the program: new stacks are then
 * counted as not profiled. One line per process. */
static int mf_grow_warned;
static bool mf_grow_failed(const struct mf_thread_header *h)
{
    char name[MF_NAME_MAX];
    mf_file_warn(&mf_grow_warned, "cannot grow", mf_thread_name(name, sizeof name, h),
                 "; new stacks are counted as not profiled");
    return true;
}

static uint64_t mf_segment_bytes(uint32_t k, uint32_t *cap)
{
    *cap = MF_SEG_ENTRIES_FIRST << (k < MF_SEG_GROWTH_STEPS ? k : MF_SEG_GROWTH_STEPS);
    return mf_round_page(MF_SEGMENT_ENTRIES_OFFSET + (uint64_t)*cap * sizeof(struct mf_entry) +
                         (uint64_t)*cap * MF_FRAMES_PER_ENTRY * sizeof(uint64_t));
}

/* Publishes segment number tab->nseg, mapped at m, at file offset off. */
static void mf_segment_publish(struct mf_table *tab, void *m, uint64_t off, uint64_t size,
                               uint32_t cap)
{
    struct mf_thread_header *h = tab->hdr;
    uint32_t k = tab->nseg;
    struct mf_segment_header *seg = m;
    seg->capacity = cap;
    seg->frame_capacity = cap * MF_FRAMES_PER_ENTRY;
    tab->seg[k] = seg;
    tab->nseg = k + 1;
    h->segment_offset[k] = off;
    h->segment_size[k] = size;
    __atomic_store_n(&h->nsegments, (uint64_t)k + 1, __ATOMIC_RELEASE);
}

/* Appends segment number tab->nseg to the file behind fd. Returns true on error. */
static bool mf_segment_add(struct mf_table *tab, int fd)
{
    struct mf_thread_header *h = tab->hdr;
    uint32_t k = tab->nseg, cap;
    if (k >= MF_MAX_SEGMENTS)
        return true;
    uint64_t size = mf_segment_bytes(k, &cap);
    uint64_t off = k ? h->segment_offset[k - 1] + h->segment_size[k - 1] : MF_HEADER_BYTES;
    if (mf_file_reserve(fd, off, size))
        return mf_grow_failed(h);
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    if (m == MAP_FAILED)
        return true;
    mf_segment_publish(tab, m, off, size, cap);
    return false;
}

static int mf_create_warned;

bool mf_table_create(struct mf_table *tab, uint64_t seq)
{
    struct mf_thread_header proto = {
        .version = MF_FORMAT_VERSION,
        .header_size = sizeof(struct mf_thread_header),
        .stamp = mf_stamp,
        .pid = (uint32_t)mf_pid,
        .tid = (uint32_t)mf_gettid(),
        .seq = seq,
        .max_depth = mf_opt.max_depth,
    };
    memcpy(proto.magic, MF_THREAD_MAGIC, 8);
    char name[MF_NAME_MAX];
    mf_thread_name(name, sizeof name, &proto);
    int fd = mf_file_create(name);
    if (fd < 0) {
        mf_file_warn(&mf_create_warned, "cannot create", name, "");
        return true;
    }
    /* The header and the first segment: one reservation, one mapping (the two are
     * unmapped apart in mf_table_forget, which munmap allows). */
    uint32_t cap;
    uint64_t seg_bytes = mf_segment_bytes(0, &cap);
    void *m = MAP_FAILED;
    if (!mf_file_reserve(fd, 0, MF_HEADER_BYTES + seg_bytes))
        m = mmap(NULL, MF_HEADER_BYTES + seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
        tab->hdr = m;
        tab->nseg = 0;
        proto.start_ns = proto.last_ns = mf_now_ns();
        memcpy(tab->hdr, &proto, sizeof proto);
        mf_segment_publish(tab, (char *)m + MF_HEADER_BYTES, MF_HEADER_BYTES, seg_bytes, cap);
        mf_sys_close(fd); /* the program may close or reuse descriptors: never keep one */
        return false;
    }
    /* A full disk: no empty file is left behind; the thread records into the process's
     * first table instead (mf_thread_setup). */
    mf_file_warn(&mf_create_warned, "cannot make room in", name, "");
    mf_sys_close(fd);
    mf_file_unlink(name);
    return true;
}

/* Four lanes, so that the multiplications overlap instead of forming one chain as long as
 * the stack; a final mix spreads every frame into the low bits that pick the slot. */
static uint64_t mf_stack_hash(const uintptr_t *pcs, uint32_t depth)
{
    const uint64_t k = 0x9e3779b97f4a7c15u;
    uint64_t a = depth, b = 1, c = 2, d = 3;
    uint32_t i = 0;
    for (; i + 4 <= depth; i += 4) {
        a = (a ^ pcs[i]) * k;
        b = (b ^ pcs[i + 1]) * k;
        c = (c ^ pcs[i + 2]) * k;
        d = (d ^ pcs[i + 3]) * k;
    }
    for (; i < depth; i++)
        a = (a ^ pcs[i]) * k;
    uint64_t h = a ^ ((b << 16) | (b >> 48)) ^ ((c << 32) | (c >> 32)) ^ ((d << 48) | (d >> 16));
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
    h ^= h >> 31;
    return h ? h : 1;
}

static struct mf_entry *mf_entries(struct mf_segment_header *seg)
{
    return (struct mf_entry *)((char *)seg + MF_SEGMENT_ENTRIES_OFFSET);
}

static uint64_t *mf_frames(struct mf_segment_header *seg)
{
    return (uint64_t *)(mf_entries(seg) + seg->capacity);
}

/* ---- the index ----------------------------------------------------------------------
 * Segments are chained, never rehashed (a reader may be reading them), so without an index
 * a stack in the k-th segment costs a miss in each of the k before it: with Python's ~13,000
 * stacks per thread in nine segments, that probing was 11 % of an exact run. The index maps
 * a stack's hash to its entry across all segments: slot = upper 32 bits of the hash (misses
 * are told apart without touching the entry) | (segment << 18 | entry) + 1; 0 is empty.
 * It is built with the second segment (one segment is one probe sequence already, and most
 * threads never need a second) and rebuilt, larger, with each new one; it is at most half
 * full, as the segments are. */
#define MF_REF_ENTRY_BITS 18 /* MF_SEG_ENTRIES_MAX entries per segment */

/* The segment and entry an index slot refers to. */
static struct mf_entry *mf_ref_entry(struct mf_table *tab, uint64_t slot,
                                     struct mf_segment_header **seg)
{
    uint32_t ref = (uint32_t)slot - 1;
    *seg = tab->seg[ref >> MF_REF_ENTRY_BITS];
    return &mf_entries(*seg)[ref & ((1u << MF_REF_ENTRY_BITS) - 1)];
}

static void mf_index_put(struct mf_table *tab, uint64_t h, uint32_t k, uint32_t i)
{
    uint64_t mask = tab->index_slots - 1, j = h & mask;
    while (tab->index[j])
        j = (j + 1) & mask;
    tab->index[j] = (h & ~(uint64_t)UINT32_MAX) | ((k << MF_REF_ENTRY_BITS | i) + 1);
}

/* Sizes the index for every segment's capacity and fills it. Without memory for it the
 * table still works, probing segment by segment. */
static void mf_index_rebuild(struct mf_table *tab)
{
    uint64_t capacity = 0, slots = 1;
    for (uint32_t k = 0; k < tab->nseg; k++)
        capacity += tab->seg[k]->capacity;
    while (slots < capacity)
        slots <<= 1;
    if (tab->index)
        munmap(tab->index, tab->index_slots * sizeof *tab->index);
    tab->index = mmap(NULL, slots * sizeof *tab->index, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tab->index == MAP_FAILED) {
        tab->index = NULL;
        return;
    }
    if (slots * sizeof *tab->index <= MF_PREFAULT_MAX) /* read before written: two faults */
        mf_prefault(tab->index, slots * sizeof *tab->index);
    tab->index_slots = slots;
    for (uint32_t k = 0; k < tab->nseg; k++) {
        struct mf_entry *e = mf_entries(tab->seg[k]);
        for (uint32_t i = 0; i < tab->seg[k]->capacity; i++)
            if (e[i].hash)
                mf_index_put(tab, e[i].hash, k, i);
    }
}

/* The words an entry keeps in the frame area: its frames, then its size class if sized. */
static uint32_t mf_words(uint32_t depth, uint32_t flags)
{
    return depth + (flags & MF_ENTRY_SIZED ? 1u : 0u);
}

static bool mf_entry_is(struct mf_segment_header *seg, const struct mf_entry *e, uint64_t h,
                        const uintptr_t *pcs, uint32_t depth, uint32_t flags)
{
    return e->hash == h && e->depth == depth && e->flags == flags &&
           memcmp(&mf_frames(seg)[e->frames], pcs, mf_words(depth, flags) * sizeof *pcs) == 0;
}

/* The stack's entry in seg, or the empty slot where it would go (hash == 0). */
static struct mf_entry *mf_probe(struct mf_segment_header *seg, uint64_t h, const uintptr_t *pcs,
                                 uint32_t depth, uint32_t flags)
{
    struct mf_entry *e = mf_entries(seg);
    uint32_t mask = seg->capacity - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask)
        if (e[i].hash == 0 || mf_entry_is(seg, &e[i], h, pcs, depth, flags))
            return &e[i];
}

static bool mf_segment_has_room(struct mf_segment_header *seg, uint32_t depth)
{
    return (seg->entries_used + 1) * 2 <= seg->capacity &&
           seg->frames_used + depth <= seg->frame_capacity;
}

static bool mf_table_grow(struct mf_table *tab)
{
    char name[MF_NAME_MAX];
    int fd = mf_file_open(mf_thread_name(name, sizeof name, tab->hdr));
    if (fd < 0)
        return mf_grow_failed(tab->hdr);
    bool failed = mf_segment_add(tab, fd);
    mf_sys_close(fd);
    return failed;
}

/* The last entry's frames against pcs, the size class left out; known: they are its frames
 * if it has this depth and these flags. */
static bool mf_is_last(const struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                       uint32_t flags, bool known)
{
    const struct mf_entry *e = tab->last;
    if (!e || e->depth != depth || e->flags != flags)
        return false;
    return known || memcmp(&mf_frames(tab->last_seg)[e->frames], pcs, depth * sizeof *pcs) == 0;
}

/* Where an entry of the last stack's frames is kept in last_by_class. */
static uint32_t mf_last_class(const uintptr_t *pcs, uint32_t depth, uint32_t flags)
{
    return flags & MF_ENTRY_SIZED && pcs[depth] < MF_SIZE_CLASSES ? (uint32_t)pcs[depth]
                                                                  : MF_SIZE_CLASSES;
}

/* e (in seg) is now the last entry; same: its frames are the last one's. */
static void mf_remember(struct mf_table *tab, struct mf_entry *e, struct mf_segment_header *seg,
                        bool same, uint32_t cls)
{
    if (!same) {
        tab->last = e;
        tab->last_seg = seg;
        tab->last_gen++;
    }
    tab->last_by_class[cls].e = e;
    tab->last_by_class[cls].gen = tab->last_gen;
}

/* The stack's entry, or NULL; *same: its frames are the last entry's. */
static struct mf_entry *mf_table_lookup(struct mf_table *tab, const uintptr_t *pcs,
                                        uint32_t depth, uint32_t flags, bool known, bool *same)
{
    uint32_t cls = mf_last_class(pcs, depth, flags);
    *same = mf_is_last(tab, pcs, depth, flags, known);
    /* With a last entry the generation is at least 1, and a class of it holds an entry */
    if (*same && tab->last_by_class[cls].gen == tab->last_gen)
        return tab->last_by_class[cls].e;
    uint64_t h = mf_stack_hash(pcs, mf_words(depth, flags));
    struct mf_segment_header *seg = NULL;
    struct mf_entry *e = NULL;
    if (!tab->index) {
        for (uint32_t k = 0; k < tab->nseg; k++) {
            e = mf_probe(tab->seg[k], h, pcs, depth, flags);
            if (e->hash) {
                seg = tab->seg[k];
                break;
            }
        }
    } else {
        uint64_t mask = tab->index_slots - 1;
        for (uint64_t j = h & mask; tab->index[j]; j = (j + 1) & mask) {
            if ((tab->index[j] ^ h) >> 32)
                continue;
            e = mf_ref_entry(tab, tab->index[j], &seg);
            if (mf_entry_is(seg, e, h, pcs, depth, flags))
                break;
            seg = NULL;
        }
    }
    if (!seg)
        return NULL;
    mf_remember(tab, e, seg, *same, cls);
    return e;
}

struct mf_entry *mf_table_find(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                               uint32_t flags, bool known)
{
    bool same;
    return mf_table_lookup(tab, pcs, depth, flags, known, &same);
}

struct mf_entry *mf_table_upsert(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                                 uint32_t flags)
{
    bool same;
    struct mf_entry *e = mf_table_lookup(tab, pcs, depth, flags, false, &same);
    if (e)
        return e;
    uint32_t words = mf_words(depth, flags);
    uint64_t h = mf_stack_hash(pcs, words);
    if (tab->nseg == 0 || !mf_segment_has_room(tab->seg[tab->nseg - 1], words)) {
        if ((tab->hdr->flags & MF_THREAD_TABLE_FULL) || mf_table_grow(tab)) {
            tab->hdr->flags |= MF_THREAD_TABLE_FULL;
            return NULL;
        }
        mf_index_rebuild(tab);
    }
    uint32_t k = tab->nseg - 1;
    struct mf_segment_header *seg = tab->seg[k];
    e = mf_probe(seg, h, pcs, depth, flags);
    if (tab->index)
        mf_index_put(tab, h, k, (uint32_t)(e - mf_entries(seg)));
    memcpy(&mf_frames(seg)[seg->frames_used], pcs, words * sizeof *pcs);
    e->frames = seg->frames_used;
    e->depth = depth;
    e->flags = flags;
    seg->frames_used += words;
    seg->entries_used++;
    __atomic_store_n(&e->hash, h, __ATOMIC_RELEASE);
    mf_remember(tab, e, seg, same, mf_last_class(pcs, depth, flags));
    return e;
}

/* A fork child's copy of its parent's table: the mappings are the parent's file, which the
 * child must never write; it lets them go and starts over. */
void mf_table_forget(struct mf_table *tab)
{
    if (tab->hdr) {
        for (uint32_t s = 0; s < tab->nseg; s++)
            munmap(tab->seg[s], tab->hdr->segment_size[s]);
        munmap(tab->hdr, MF_HEADER_BYTES);
    }
    if (tab->index)
        munmap(tab->index, tab->index_slots * sizeof *tab->index);
    memset(tab, 0, sizeof *tab);
}

/* A fork child that goes on with a sample its parent was taking (mf_after_fork_child)
 * writes to copies of the table's header and segments, not to its parent's file. */
void mf_table_privatize(struct mf_table *tab)
{
    if (!tab->hdr)
        return;
    mf_privatize(tab->hdr, MF_HEADER_BYTES);
    for (uint32_t s = 0; s < tab->nseg; s++)
        mf_privatize(tab->seg[s], tab->hdr->segment_size[s]);
}
