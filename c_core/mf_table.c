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
                   sizeof(struct mf_entry) == 16 &&
                   sizeof(struct mf_entry_var) == MF_ENTRY_VAR_SLOTS * sizeof(struct mf_entry) &&
                   sizeof(struct mf_frame_node) == 8 && MF_THREAD_FILE_MAX == 402792448u &&
                   MF_NODE_REF(MF_MAX_SEGMENTS - 1,
                               MF_SEG_ENTRIES_MAX * MF_NODES_PER_ENTRY - 1) < 1u << MF_NODE_HI_SHIFT,
               "MF_THREAD_FILE_MAX in mf_format.h says what these make");

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
    *cap = MF_SEG_ENTRIES_FIRST << (2 * k < MF_SEG_GROWTH_STEPS ? 2 * k : MF_SEG_GROWTH_STEPS);
    return MF_SEG_BYTES(*cap);
}

/* Publishes segment number tab->nseg, mapped at m, at file offset off. */
static void mf_segment_publish(struct mf_table *tab, void *m, uint64_t off, uint64_t size,
                               uint32_t cap)
{
    struct mf_thread_header *h = tab->hdr;
    uint32_t k = tab->nseg;
    struct mf_segment_header *seg = m;
    seg->capacity = cap;
    seg->node_capacity = cap * MF_NODES_PER_ENTRY;
    tab->seg[k] = seg;
    tab->nseg = k + 1;
    h->segment_offset[k] = off;
    h->segment_size[k] = size;
    __atomic_store_n(&h->nsegments, (uint64_t)k + 1, __ATOMIC_RELEASE);
}

/* The last segment's reserved entry slots and nodes that none has taken yet. */
static void mf_segment_spare(const struct mf_table *tab, uint64_t *entries, uint64_t *nodes)
{
    const struct mf_segment_header *seg = tab->seg[tab->nseg - 1];
    *entries = tab->reserved_entries > seg->entries_used ? tab->reserved_entries - seg->entries_used
                                                         : 0;
    *nodes = tab->reserved_nodes > seg->nodes_used ? tab->reserved_nodes - seg->nodes_used : 0;
}

/* The last segment's disk blocks reserved past what its entries and nodes use given back
 * (fd: its file); what it takes from here on is reserved anew (mf_segment_reserve). A
 * compile's file held 232 KiB of such room, up to 64 KiB in each area of each of its
 * segments (docs/design.md §7). */
static void mf_segment_release(struct mf_table *tab, int fd)
{
    const struct mf_segment_header *seg = tab->seg[tab->nseg - 1];
    uint64_t entries_at = tab->hdr->segment_offset[tab->nseg - 1] + MF_SEGMENT_ENTRIES_OFFSET;
    uint64_t nodes_at = entries_at + (uint64_t)seg->capacity * sizeof(struct mf_entry);
    uint64_t e, n;
    mf_segment_spare(tab, &e, &n);
    if (e) {
        mf_file_release(fd, entries_at + seg->entries_used * sizeof(struct mf_entry),
                        e * sizeof(struct mf_entry));
        tab->reserved_entries = seg->entries_used;
    }
    if (n) {
        mf_file_release(fd, nodes_at + seg->nodes_used * sizeof(struct mf_frame_node),
                        n * sizeof(struct mf_frame_node));
        tab->reserved_nodes = seg->nodes_used;
    }
}

void mf_table_trim(struct mf_table *tab)
{
    if (!tab->hdr || !tab->nseg)
        return;
    uint64_t e, n;
    mf_segment_spare(tab, &e, &n);
    if (e * sizeof(struct mf_entry) + n * sizeof(struct mf_frame_node) < MF_TRIM_FROM)
        return;
    int err = errno;
    char name[MF_NAME_MAX];
    int fd = mf_file_open(mf_thread_name(name, sizeof name, tab->hdr));
    if (fd >= 0) {
        mf_segment_release(tab, fd);
        mf_sys_close(fd);
    }
    errno = err;
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
    if (k) /* the last segment's room left: never written from here on (only the last is) */
        mf_segment_release(tab, fd);
    /* The segment is in the file at once, but disk blocks only for its header now and for
     * its entries and nodes as they are handed out (mf_segment_reserve): a segment is
     * twice the last, most of it unused for long or for ever. */
    if (mf_file_extend(fd, off + size) || mf_file_reserve(fd, off, MF_SEGMENT_ENTRIES_OFFSET))
        return mf_grow_failed(h);
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
    if (m == MAP_FAILED)
        return true;
    mf_segment_publish(tab, m, off, size, cap);
    tab->reserved_entries = tab->reserved_nodes = 0;
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
        tab->reserved_entries = cap;
        tab->reserved_nodes = cap * MF_NODES_PER_ENTRY;
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

/* A key of two words, mixed so that every bit reaches the low bits that pick the slot and
 * the upper ones that tell keys apart in it; never 0. */
static uint64_t mf_key_hash(uint64_t a, uint64_t b)
{
    uint64_t h = (a * 0x9e3779b97f4a7c15u) ^ ((b << 29) | (b >> 35)) ^ b;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
    h ^= h >> 31;
    return h ? h : 1;
}

static struct mf_frame_node *mf_node_at(const struct mf_table *tab, uint32_t ref)
{
    return &mf_segment_nodes(tab->seg[MF_NODE_REF_SEG(ref)])[MF_NODE_REF_IDX(ref)];
}

/* An entry's reference in the entry index: segment << 18 | slot, + 1. */
#define MF_REF_ENTRY_BITS 18 /* MF_SEG_ENTRIES_MAX slots per segment */

static struct mf_entry *mf_entry_at(const struct mf_table *tab, uint32_t ref)
{
    ref--;
    struct mf_entry *entries = mf_segment_entries(tab->seg[ref >> MF_REF_ENTRY_BITS]);
    return &entries[ref & ((1u << MF_REF_ENTRY_BITS) - 1)];
}

/* A path hash: the frames of a stack from the outermost in, one step a return address. A
 * stack is told apart from others by its path hash (64 bits), flags and size class,
 * and a node by its path hash, return address and caller, as async-profiler's call trace
 * storage tells traces apart by a 64-bit hash: a stack met before is then found by one
 * probe however many of its frames differ from the last stack's, where following its nodes
 * from the outermost costs a probe a frame, each a cache miss in a large program
 * (docs/design.md §16). */
#define MF_PATH_SEED 0x243f6a8885a308d3u
static uint64_t mf_path_step(uint64_t h, uint64_t pc)
{
    h = (h ^ pc) * 0x9e3779b97f4a7c15u;
    return h ^ (h >> 29);
}

/* An entry's key flags: flags with the size class an entry is keyed by (cls if sized). */
static uint32_t mf_key_flags(uint32_t flags, uint32_t cls)
{
    return flags & MF_ENTRY_SIZED ? flags | cls << MF_ENTRY_CLASS_SHIFT : flags;
}

/* An entry's key: its stack's path hash and key flags; its low MF_ENTRY_KEY_BITS, which the
 * entry keeps (mf_entry.key), are never all 0. */
static uint64_t mf_entry_hash(uint64_t path, uint32_t key_flags)
{
    uint64_t h = mf_key_hash(path, key_flags);
    return h & ((1u << MF_ENTRY_KEY_BITS) - 1) ? h : h | 1;
}

/* The key word of an entry of hash h and key flags (mf_entry.key): the hash's low bits and
 * the size class. */
static uint32_t mf_entry_key_word(uint64_t h, uint32_t key_flags)
{
    return (uint32_t)(h & ((1u << MF_ENTRY_KEY_BITS) - 1)) |
           MF_ENTRY_CLASS(key_flags) << MF_ENTRY_KEY_BITS;
}

/* ---- the private indexes -------------------------------------------------------------
 * Segments are chained, never rehashed (a reader may be reading them), and the file keeps
 * nodes and entries in the order they were made. Finding one by its key is the writer's
 * business alone: two indexes in anonymous memory, rebuilt larger as they fill.
 *
 * A slot is 8 bytes, not 16 (the whole key and the reference): every page of an index is a
 * page fault when it is built, 14-20 us in this VM, and a compile's exact stretch built 6 MiB
 * of them. A key is told apart by its top 38 bits where it is looked up (its home slot is
 * its top bits, so a key met there agrees with it in those too), and then by the node's
 * return address and caller, or by the low 24 bits of the entry's hash, which it keeps: 62
 * of the 64 (a false match once in 2^62 comparisons), where the entry's 4 bytes more made a
 * build's run directory 5 MB larger. */
static uint64_t mf_index_tag(uint64_t key)
{
    return key >> MF_INDEX_REF_BITS;
}

static uint64_t mf_index_home(const struct mf_index *ix, uint64_t tag)
{
    return tag >> (MF_INDEX_TAG_BITS - ix->bits);
}

/* A slot's reference (+ 1; 0 for an empty slot). */
static uint32_t mf_index_slot_ref(uint64_t slot)
{
    return (uint32_t)(slot & ((1u << MF_INDEX_REF_BITS) - 1));
}

static void mf_index_put_tag(struct mf_index *ix, uint64_t tag, uint32_t ref)
{
    uint64_t mask = ix->slots - 1, j = mf_index_home(ix, tag);
    while (ix->slot[j])
        j = (j + 1) & mask;
    ix->slot[j] = tag << MF_INDEX_REF_BITS | ref;
    ix->used++;
}

static void mf_index_put(struct mf_index *ix, uint64_t key, uint32_t ref)
{
    mf_index_put_tag(ix, mf_index_tag(key), ref);
}

/* The slot of key that holds ref holds to from now on. */
static void mf_index_move(struct mf_index *ix, uint64_t key, uint32_t ref, uint32_t to)
{
    uint64_t mask = ix->slots - 1, tag = mf_index_tag(key);
    for (uint64_t j = mf_index_home(ix, tag); ix->slot[j]; j = (j + 1) & mask)
        if (ix->slot[j] == (tag << MF_INDEX_REF_BITS | ref)) {
            ix->slot[j] = tag << MF_INDEX_REF_BITS | to;
            return;
        }
}

/* Where an index's first tables go. A rebuild's new table is twice the old one, which is
 * then left: unmapping it cost more than the table (munmap's TLB flush, 0.1 ms and more in
 * this VM; a compile rebuilt its two indexes 14 times), and each table from MF_HUGE_FROM up
 * in a 2 MiB block of its own zeroed a huge page of its own. So tables of 4 KiB to 128 KiB
 * lie one after another in one reservation of small pages (252 KiB, touched a table at a
 * time), those of 256 KiB to 1 MiB in one 2 MiB block (256 + 512 + 1024 KiB: one huge
 * page's fault for the three). Larger ones are mapped one by one and unmapped when left. */
#define MF_INDEX_FIRST_BITS 9u /* 4 KiB: a short process (ls: 24 entries, 64 nodes) fills neither */
#define MF_INDEX_HUGE_BITS 15u /* MF_HUGE_FROM: 2^15 slots of 8 bytes */
#define MF_INDEX_OWN_BITS 18u  /* past the 2 MiB block */
#define MF_INDEX_SMALL_BYTES \
    ((((size_t)1 << MF_INDEX_HUGE_BITS) - ((size_t)1 << MF_INDEX_FIRST_BITS)) * sizeof(uint64_t))
_Static_assert(((size_t)1 << MF_INDEX_HUGE_BITS) * sizeof(uint64_t) == MF_HUGE_FROM &&
                   (((size_t)1 << MF_INDEX_OWN_BITS) - ((size_t)1 << MF_INDEX_HUGE_BITS)) *
                           sizeof(uint64_t) <= (size_t)2 << 20,
               "an index's tables from MF_HUGE_FROM up to the last before MF_INDEX_OWN_BITS "
               "fit one 2 MiB block");

/* A table of 2^bits slots, zeroed and its pages mapped, where the layout above puts it;
 * MAP_FAILED without memory. */
static uint64_t *mf_index_table(struct mf_index *ix, uint32_t bits)
{
    size_t bytes = ((size_t)1 << bits) * sizeof(uint64_t);
    if (bits >= MF_INDEX_OWN_BITS)
        return mf_anon_table(bytes);
    /* Each table's offset is the sum of the sizes before it in its area. */
    size_t off = bytes - ((size_t)1 << (bits < MF_INDEX_HUGE_BITS ? MF_INDEX_FIRST_BITS
                                                                   : MF_INDEX_HUGE_BITS)) *
                             sizeof(uint64_t);
    bool huge = bits >= MF_INDEX_HUGE_BITS;
    char **area = huge ? &ix->huge : &ix->small;
    if (!*area) {
        void *m = huge ? mf_anon_table(MF_HUGE_FROM) : mf_anon_reserve(MF_INDEX_SMALL_BYTES);
        if (m == MAP_FAILED)
            return MAP_FAILED;
        *area = m;
        if (huge) /* its first table, at offset 0: mapped by mf_anon_table */
            return (uint64_t *)m;
    }
    mf_prefault(*area + off, bytes);
    return (uint64_t *)(void *)(*area + off);
}

/* Room for one more key, at most three quarters full (a miss probes ~8 slots: one or two
 * lines; every rebuild writes fresh pages, which cost more in this VM than the probes);
 * false without memory (the key is then not kept: its stack is counted as not profiled). */
static bool mf_index_room(struct mf_index *ix)
{
    if (ix->slot && (ix->used + 1) * 4 <= ix->slots * 3)
        return true;
    uint32_t bits = ix->slots ? ix->bits + 1 : MF_INDEX_FIRST_BITS;
    if (bits > MF_INDEX_TAG_BITS)
        return false;
    uint64_t *old = ix->slot, *m;
    uint64_t old_slots = ix->slots;
    uint32_t old_bits = ix->bits;
    m = mf_index_table(ix, bits); /* its pages mapped: the keys land all over it at once */
    if (m == MAP_FAILED)
        return false;
    ix->slot = m;
    ix->slots = (uint64_t)1 << bits;
    ix->bits = bits;
    ix->used = 0;
    for (uint64_t j = 0; j < old_slots; j++)
        if (old[j])
            mf_index_put_tag(ix, old[j] >> MF_INDEX_REF_BITS, mf_index_slot_ref(old[j]));
    if (old && old_bits >= MF_INDEX_OWN_BITS)
        munmap(old, mf_anon_size(old_slots * sizeof *old));
    return true;
}

/* An index's memory given back (a fork child's copy). */
static void mf_index_forget(struct mf_index *ix)
{
    if (ix->slot && ix->bits >= MF_INDEX_OWN_BITS)
        munmap(ix->slot, mf_anon_size(ix->slots * sizeof *ix->slot));
    if (ix->small)
        munmap(ix->small, MF_INDEX_SMALL_BYTES);
    if (ix->huge)
        munmap(ix->huge, mf_anon_size(MF_HUGE_FROM));
}

/* The reference in a slot whose tag is tag, else 0. */
static uint32_t mf_index_ref(uint64_t slot, uint64_t tag)
{
    return slot >> MF_INDEX_REF_BITS == tag ? mf_index_slot_ref(slot) : 0;
}

/* A node's reference in the node index is its MF_NODE_REF. */
_Static_assert(MF_NODE_HI_SHIFT <= MF_INDEX_REF_BITS, "a node's reference fits an index slot");

/* The node whose path hash is path and return address pc, or 0; with a caller other than
 * MF_ANY_PARENT, the one whose caller is that node. */
#define MF_ANY_PARENT UINT32_MAX
static uint32_t mf_node_find(const struct mf_table *tab, uint64_t path, uint64_t pc,
                             uint32_t parent)
{
    const struct mf_index *ix = &tab->nodes;
    if (!ix->slot)
        return 0;
    uint64_t mask = ix->slots - 1, tag = mf_index_tag(path);
    for (uint64_t j = mf_index_home(ix, tag); ix->slot[j]; j = (j + 1) & mask) {
        uint32_t ref = mf_index_ref(ix->slot[j], tag);
        if (!ref)
            continue;
        const struct mf_frame_node *n = mf_node_at(tab, ref);
        if (mf_node_pc(tab->hdr, n) == pc && (parent == MF_ANY_PARENT || MF_NODE_PARENT(n) == parent))
            return ref;
    }
    return 0;
}

static struct mf_entry *mf_entry_find(const struct mf_table *tab, uint64_t h, uint32_t key_flags)
{
    const struct mf_index *ix = &tab->entries;
    if (!ix->slot)
        return NULL;
    uint64_t mask = ix->slots - 1, tag = mf_index_tag(h);
    for (uint64_t j = mf_index_home(ix, tag); ix->slot[j]; j = (j + 1) & mask) {
        uint32_t ref = mf_index_ref(ix->slot[j], tag);
        if (!ref)
            continue;
        struct mf_entry *e = mf_entry_at(tab, ref);
        if (e->key == mf_entry_key_word(h, key_flags) &&
            (mf_entry_flags(e) & ~MF_ENTRY_WIDE) == key_flags)
            return e;
    }
    return NULL;
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

/* Where an entry of the last stack is kept in last_by_class. */
static uint32_t mf_last_class(uint32_t cls, uint32_t flags)
{
    return flags & MF_ENTRY_SIZED && cls < MF_SIZE_CLASSES ? cls : MF_SIZE_CLASSES;
}

/* The last stack's entry of class slot cls (mf_last_class), if path, depth and flags are the
 * last stack's: with a last entry the generation is at least 1, and a class of it holds one. */
static struct mf_entry *mf_last_entry(const struct mf_table *tab, uint64_t path, uint32_t depth,
                                      uint32_t flags, uint32_t cls)
{
    return tab->last_gen && path == tab->last_path && depth == tab->last_depth &&
                   flags == tab->last_flags && tab->last_by_class[cls].gen == tab->last_gen
               ? tab->last_by_class[cls].e
               : NULL;
}

/* e, of path, depth and flags, is now the last entry. */
static void mf_remember(struct mf_table *tab, struct mf_entry *e, uint64_t path, uint32_t depth,
                        uint32_t flags, uint32_t cls)
{
    if (!tab->last_gen || tab->last_path != path || tab->last_depth != depth ||
        tab->last_flags != flags) {
        tab->last_path = path;
        tab->last_depth = depth;
        tab->last_flags = flags;
        tab->last_gen++;
    }
    tab->last_by_class[cls].e = e;
    tab->last_by_class[cls].gen = tab->last_gen;
}

/* The path cache brought to pcs (innermost first, depth of them): the frames it shares with
 * the last path keep their hashes (the outermost `same` are known to be shared), the others
 * are hashed. Returns the stack's path hash. */
static uint64_t mf_path_hash(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                             uint32_t same)
{
    uint32_t lim = depth < tab->path_len ? depth : tab->path_len;
    uint32_t j = same < lim ? same : lim;
    while (j < lim && tab->path_pc[j] == pcs[depth - 1 - j])
        j++;
    uint64_t h = j ? tab->path_hash[j - 1] : MF_PATH_SEED;
    for (uint32_t k = j; k < depth; k++) {
        uint64_t pc = pcs[depth - 1 - k];
        h = mf_path_step(h, pc);
        tab->path_pc[k] = pc;
        tab->path_hash[k] = h;
    }
    tab->path_len = depth;
    return h;
}

/* How many of the path cache's first depth frames have nodes (a prefix: a node's caller
 * has one), looked up from the innermost out: a new stack's new frames are its innermost
 * few, none when only its size class is new. *leaf: the innermost node (0 for none).
 * The index tells a node by 38 bits of its path hash and its return address, so two paths
 * through the same addresses (a recursion's turns) can agree in both: html_100k_stacks'
 * 100,000 paths, 17 turns deep, recorded one call on another's stack in about one run in 13
 * (when the depth was compared too), its exact counts wrong. So a node counts only if
 * its caller is the node the index gives for the path one frame shorter: both agreeing by
 * chance is as likely as a 76-bit match. One probe more for a stack with new frames. */
static uint32_t mf_path_nodes(const struct mf_table *tab, uint32_t depth, uint32_t *leaf)
{
    /* node: what the index gives for frame j (any caller); caller: for frame j - 1. */
    uint32_t node = depth ? mf_node_find(tab, tab->path_hash[depth - 1], tab->path_pc[depth - 1],
                                         MF_ANY_PARENT) : 0;
    for (uint32_t j = depth; j > 0; j--) {
        uint32_t caller = j > 1 ? mf_node_find(tab, tab->path_hash[j - 2], tab->path_pc[j - 2],
                                               MF_ANY_PARENT) : 0;
        if (node && (j == 1 || caller)) { /* without its caller's node, a frame has none */
            if (MF_NODE_PARENT(mf_node_at(tab, node)) != caller) /* another path's: this path's own */
                node = mf_node_find(tab, tab->path_hash[j - 1], tab->path_pc[j - 1], caller);
            if (node) {
                *leaf = node;
                return j;
            }
        }
        node = caller;
    }
    *leaf = 0;
    return 0;
}

/* The stack's entry, or NULL; *path its path hash. */
static struct mf_entry *mf_table_lookup(struct mf_table *tab, const uintptr_t *pcs,
                                        uint32_t depth, uint32_t flags, uint32_t sample_cls,
                                        uint32_t same, uint64_t *path)
{
    if (depth > MF_STACK_PATH_MAX) /* never: max_depth <= MF_DEPTH_MAX */
        return NULL;
    *path = mf_path_hash(tab, pcs, depth, same);
    uint32_t cls = mf_last_class(sample_cls, flags);
    struct mf_entry *e = mf_last_entry(tab, *path, depth, flags, cls);
    if (e)
        return e;
    uint32_t key_flags = mf_key_flags(flags, sample_cls);
    e = mf_entry_find(tab, mf_entry_hash(*path, key_flags), key_flags);
    if (e)
        mf_remember(tab, e, *path, depth, flags, cls);
    return e;
}

struct mf_entry *mf_table_again(const struct mf_table *tab, uint32_t depth, uint32_t flags,
                                uint32_t cls)
{
    return tab->path_len == depth && depth ? mf_last_entry(tab, tab->path_hash[depth - 1], depth,
                                                           flags, mf_last_class(cls, flags))
                                           : NULL;
}

struct mf_entry *mf_table_find(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                               uint32_t flags, uint32_t cls, uint32_t same,
                               struct mf_table_miss *miss)
{
    miss->valid = false;
    miss->found = depth;
    struct mf_entry *e = NULL;
    if (same == depth && (e = mf_table_again(tab, depth, flags, cls)))
        return e;
    e = mf_table_lookup(tab, pcs, depth, flags, cls, same, &miss->path);
    if (!e && depth <= MF_STACK_PATH_MAX) { /* a new stack: which of its frames are new? */
        miss->found = mf_path_nodes(tab, depth, &miss->leaf);
        miss->valid = true;
    }
    return e;
}

/* Disk blocks for the last segment's entries and nodes up to entries and nodes (a full disk
 * is then an error here, never a SIGBUS when they are written): 64 KiB more of each at a
 * time. Returns true on error. */
#define MF_RESERVE_STEP (64u << 10)
/* Blocks for items [*have, want) of size bytes each of an array at file offset at, rounded
 * up to MF_RESERVE_STEP and to at most cap items. Returns true on error. */
static bool mf_reserve_more(int fd, uint64_t at, void *mapped, uint64_t size, uint64_t *have,
                            uint64_t want, uint64_t cap)
{
    if (want <= *have)
        return false;
    uint64_t step = MF_RESERVE_STEP / size;
    want = (want + step - 1) / step * step;
    if (want > cap)
        want = cap;
    if (mf_file_reserve(fd, at + *have * size, (want - *have) * size))
        return true;
    /* Their pages too, in one call: sixteen write faults on a shared file mapping took
     * longer than the samples that filled them (a compile at N=1: 3,000 faults, 10 % of
     * its time in the kernel). */
    mf_prefault((char *)mapped + *have * size, (want - *have) * size);
    *have = want;
    return false;
}

static bool mf_segment_reserve(struct mf_table *tab, uint64_t entries, uint64_t nodes)
{
    if (entries <= tab->reserved_entries && nodes <= tab->reserved_nodes)
        return false;
    uint32_t k = tab->nseg - 1;
    struct mf_segment_header *seg = tab->seg[k];
    char name[MF_NAME_MAX];
    int fd = mf_file_open(mf_thread_name(name, sizeof name, tab->hdr));
    if (fd < 0)
        return mf_grow_failed(tab->hdr);
    uint64_t entries_at = tab->hdr->segment_offset[k] + MF_SEGMENT_ENTRIES_OFFSET;
    uint64_t nodes_at = entries_at + (uint64_t)seg->capacity * sizeof(struct mf_entry);
    bool failed = mf_reserve_more(fd, entries_at, mf_segment_entries(seg), sizeof(struct mf_entry),
                                  &tab->reserved_entries, entries, seg->capacity) ||
                  mf_reserve_more(fd, nodes_at, mf_segment_nodes(seg), sizeof(struct mf_frame_node),
                                  &tab->reserved_nodes, nodes, seg->node_capacity);
    mf_sys_close(fd);
    return failed && mf_grow_failed(tab->hdr);
}

/* The last segment, with room for an entry of `slots` slots and `nodes` nodes: a stack's
 * entry and its new nodes go into one segment (mf_format.h). NULL if the table cannot grow. */
static struct mf_segment_header *mf_segment_room(struct mf_table *tab, uint32_t slots,
                                                 uint32_t nodes)
{
    for (;;) {
        if (tab->nseg) {
            struct mf_segment_header *seg = tab->seg[tab->nseg - 1];
            if (seg->entries_used + slots <= seg->capacity &&
                seg->nodes_used + nodes <= seg->node_capacity) {
                if (mf_segment_reserve(tab, seg->entries_used + slots, seg->nodes_used + nodes)) {
                    tab->hdr->flags |= MF_THREAD_TABLE_FULL;
                    return NULL;
                }
                return seg;
            }
        }
        if ((tab->hdr->flags & MF_THREAD_TABLE_FULL) || mf_table_grow(tab)) {
            tab->hdr->flags |= MF_THREAD_TABLE_FULL;
            return NULL;
        }
    }
}

/* A new entry of hash h, key key_flags (MF_ENTRY_WIDE added if wide, as it must be for an
 * epoch above 0) and node, published in seg's next slots (seg has room for them); the
 * caller puts it in the index. */
static struct mf_entry *mf_entry_add(struct mf_segment_header *seg, uint64_t h, uint32_t node,
                                     uint32_t key_flags, bool wide)
{
    uint64_t i = seg->entries_used;
    struct mf_entry *e = &mf_segment_entries(seg)[i];
    e->node = node | ((key_flags & 0xfu) | (wide ? MF_ENTRY_WIDE : 0)) << MF_ENTRY_NODE_BITS;
    if (wide) {
        uint32_t epoch = key_flags >> MF_ENTRY_EPOCH_SHIFT;
        memcpy((char *)(e + 1) + offsetof(struct mf_entry_var, epoch), &epoch, sizeof epoch);
    }
    __atomic_store_n(&e->key, mf_entry_key_word(h, key_flags), __ATOMIC_RELEASE);
    __atomic_store_n(&seg->entries_used, i + mf_entry_slots(wide), __ATOMIC_RELEASE);
    return e;
}

/* Where a node keeps the high half `high` of its return address: which of the thread
 * header's pc_hi it is, added if new, or MF_NODE_WIDE (the node's second slot) once the
 * header holds MF_PC_HI_MAX others. A process's code lies in a handful of 4 GiB regions (the
 * executable's, the libraries'), so the search is short and nodes are wide only where code
 * spans more (JIT code). */
static uint32_t mf_pc_hi(struct mf_thread_header *h, uint64_t high)
{
    uint32_t n = h->npc_hi;
    for (uint32_t i = 0; i < n; i++)
        if (h->pc_hi[i] == high)
            return i;
    if (n == MF_PC_HI_MAX)
        return MF_NODE_WIDE;
    h->pc_hi[n] = (uint32_t)high;
    __atomic_store_n(&h->npc_hi, n + 1, __ATOMIC_RELEASE);
    return n;
}

static uint32_t mf_entry_ref(uint32_t k, uint64_t i)
{
    return (uint32_t)((k << MF_REF_ENTRY_BITS | i) + 1);
}

/* The stack in the path cache (depth frames, path hash path), whose outer `found` frames
 * have nodes, the innermost of them parent, made with its entry. */
static struct mf_entry *mf_table_add(struct mf_table *tab, uint32_t depth, uint32_t flags,
                                     uint32_t cls, bool wide, uint64_t path, uint32_t found,
                                     uint32_t parent)
{
    uint32_t slots = 0;
    wide = wide || flags >> MF_ENTRY_EPOCH_SHIFT; /* a narrow entry has no epoch */
    uint8_t hi[MF_STACK_PATH_MAX]; /* where each new node's high half goes */
    for (uint32_t j = found; j < depth; j++) {
        hi[j] = (uint8_t)mf_pc_hi(tab->hdr, tab->path_pc[j] >> 32);
        slots += hi[j] == MF_NODE_WIDE ? 2 : 1;
    }
    struct mf_segment_header *seg = mf_segment_room(tab, mf_entry_slots(wide), slots);
    if (!seg)
        return NULL;
    uint32_t k = tab->nseg - 1;
    /* The nodes, each before any node or entry that refers to it. */
    for (uint32_t j = found; j < depth; j++) {
        if (!mf_index_room(&tab->nodes))
            return NULL;
        uint64_t i = seg->nodes_used;
        struct mf_frame_node *n = &mf_segment_nodes(seg)[i];
        n[0] = (struct mf_frame_node){(uint32_t)tab->path_pc[j],
                                      (uint32_t)hi[j] << MF_NODE_HI_SHIFT | parent};
        if (hi[j] == MF_NODE_WIDE)
            n[1] = (struct mf_frame_node){(uint32_t)(tab->path_pc[j] >> 32), 0};
        __atomic_store_n(&seg->nodes_used, i + mf_node_slots(n), __ATOMIC_RELEASE);
        parent = MF_NODE_REF(k, i);
        mf_index_put(&tab->nodes, tab->path_hash[j], parent);
    }
    if (!mf_index_room(&tab->entries))
        return NULL;
    uint32_t key_flags = mf_key_flags(flags, cls);
    uint64_t h = mf_entry_hash(path, key_flags), i = seg->entries_used;
    struct mf_entry *e = mf_entry_add(seg, h, parent, key_flags, wide);
    mf_index_put(&tab->entries, h, mf_entry_ref(k, i));
    mf_remember(tab, e, path, depth, flags, mf_last_class(cls, flags));
    return e;
}

struct mf_entry *mf_table_insert(struct mf_table *tab, uint32_t depth, uint32_t flags,
                                 uint32_t cls, bool wide, const struct mf_table_miss *miss)
{
    return miss->valid ? mf_table_add(tab, depth, flags, cls, wide, miss->path, miss->found,
                                      miss->leaf)
                       : NULL;
}

struct mf_entry *mf_table_upsert(struct mf_table *tab, const uintptr_t *pcs, uint32_t depth,
                                 uint32_t flags, uint32_t cls, bool wide)
{
    struct mf_table_miss miss;
    struct mf_entry *e = mf_table_find(tab, pcs, depth, flags, cls, 0, &miss);
    return e ? e : mf_table_insert(tab, depth, flags, cls, wide, &miss);
}

bool mf_table_entry_at(const struct mf_table *tab, const struct mf_entry *e, uint32_t *k,
                       uint64_t *i)
{
    for (*k = 0; *k < tab->nseg; ++*k) {
        const struct mf_entry *first = mf_segment_entries(tab->seg[*k]);
        if (e >= first && e < first + tab->seg[*k]->capacity) {
            *i = (uint64_t)(e - first);
            return true;
        }
    }
    return false;
}

struct mf_entry *mf_table_widen(struct mf_table *tab, struct mf_entry *narrow, uint32_t cls)
{
    /* Its whole key: the entry keeps its low half, the path cache its stack's path (the
     * one just looked up). */
    uint64_t path = tab->path_len ? tab->path_hash[tab->path_len - 1] : MF_PATH_SEED;
    uint32_t flags = mf_entry_flags(narrow) & ~MF_ENTRY_WIDE;
    uint64_t h = mf_entry_hash(path, flags);
    uint32_t k;
    uint64_t at;
    struct mf_segment_header *seg =
        mf_entry_key_word(h, flags) == narrow->key && mf_table_entry_at(tab, narrow, &k, &at)
            ? mf_segment_room(tab, mf_entry_slots(true), 0)
            : NULL;
    if (!seg)
        return NULL;
    uint64_t i = seg->entries_used;
    struct mf_entry *e = mf_entry_add(seg, h, mf_entry_node(narrow), flags, true);
    mf_index_move(&tab->entries, h, mf_entry_ref(k, at), mf_entry_ref(tab->nseg - 1, i));
    uint32_t last = mf_last_class(cls, flags);
    if (tab->last_by_class[last].e == narrow)
        tab->last_by_class[last].e = e;
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
    mf_index_forget(&tab->nodes);
    mf_index_forget(&tab->entries);
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
