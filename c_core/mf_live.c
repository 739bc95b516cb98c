/* The live heap (MALLOC_FREQ_LIVE): the sampled allocations still alive, in a MAP_SHARED
 * file of the profile directory (live.<stamp>.mfl, struct mf_live_header), and per stack
 * the lifetimes of those freed. The file is the snapshot: mf_print --live reads it while
 * the process runs, or after it ended (what was still allocated at exit).
 *
 * Any thread inserts and removes, lock-free: a record's state word is claimed with a CAS,
 * its fields written, and the state published last. A free must stay nearly free: before
 * it looks at the table it looks at mf_live_filter, one byte per 16-byte address granule
 * modulo MF_LIVE_FILTER_SLOTS, counting the recorded allocations there: zero for almost
 * every address, so an unsampled free costs one load (lib_preload/mf_entry.c). A count
 * that reaches 255 stays there (the filter then only answers "maybe" for its addresses). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "mf_internal.h"

uint8_t *mf_live_filter;
static struct mf_live_header *mf_live_hdr;
static struct mf_live_record *mf_live_records;
static struct mf_live_stats *mf_live_stats;
static uint32_t mf_live_lock;
static int mf_live_failed; /* the file could not be made: not tried again in this image */

/* The capacities are the format's (mf_format.h): the reader bounds a file by them. */
_Static_assert(sizeof(struct mf_live_record) == 64 && sizeof(struct mf_live_stats) == 768,
               "MF_LIVE_FILE_MAX's figure in mf_format.h");

static uint64_t mf_live_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdu;
    x ^= x >> 33;
    return x;
}

static uint64_t mf_live_round(uint64_t n)
{
    return (n + 4095u) & ~(uint64_t)4095u;
}

/* The file's length: the statistics table, at stats_off, is its last part. */
static uint64_t mf_live_bytes(uint64_t stats_off, uint32_t stats_capacity)
{
    return stats_off + mf_live_round((uint64_t)stats_capacity * sizeof(struct mf_live_stats));
}

/* The filter is made at start-up (mf_live_start), before any allocation is recorded. */
void mf_live_start(void)
{
    if (!mf_opt.live || mf_live_filter)
        return;
    void *m = mmap(NULL, MF_LIVE_FILTER_SLOTS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED)
        __atomic_store_n(&mf_live_filter, (uint8_t *)m, __ATOMIC_RELEASE);
}

/* A fork child: the parent's file is not its own; its filter counts the parent's records,
 * which it forgets too. Nothing here blocks. */
void mf_live_after_fork(void)
{
    mf_live_hdr = NULL;
    mf_live_records = NULL;
    mf_live_stats = NULL;
    mf_live_lock = 0;
    mf_live_failed = 0;
    if (mf_live_filter)
        madvise(mf_live_filter, MF_LIVE_FILTER_SLOTS, MADV_DONTNEED); /* private: reads 0 */
}

/* The parent's file, in a fork child that goes on with a sample its parent was taking
 * (mf_after_fork_child): a copy is written instead. */
void mf_live_privatize(void)
{
    struct mf_live_header *h = mf_live_hdr;
    if (h)
        mf_privatize(h, mf_live_bytes(h->stats_offset, h->stats_capacity));
}

/* Makes the file, on the slot's stack (the caller is busy: mf_enter). */
static void mf_live_create(void)
{
    char name[MF_NAME_MAX], *end = name + sizeof name;
    mf_append(mf_append_hex(mf_append(name, end, "live."), end, mf_stamp, 16), end, ".mfl");
    uint32_t cap = mf_opt.live == MF_LIVE_ALL ? MF_LIVE_CAPACITY_ALL : MF_LIVE_CAPACITY_SAMPLED;
    uint64_t rec_off = 4096, stats_off = rec_off + mf_live_round((uint64_t)cap * sizeof(struct mf_live_record));
    uint64_t size = mf_live_bytes(stats_off, MF_LIVE_STATS_CAPACITY);
    static int warned;
    int fd = mf_file_create(name);
    if (fd < 0) {
        mf_file_warn(&warned, "cannot create", name, "; the live heap is not recorded");
        mf_live_failed = 1;
        return;
    }
    void *m = MAP_FAILED;
    if (!mf_file_reserve(fd, 0, size))
        m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        mf_file_warn(&warned, "cannot make room in", name, "; the live heap is not recorded");
        mf_sys_close(fd);
        mf_file_unlink(name);
        mf_live_failed = 1;
        return;
    }
    mf_sys_close(fd);
    struct mf_live_header *h = m;
    memcpy(h->magic, MF_LIVE_MAGIC, 8);
    h->header_size = sizeof *h;
    h->stamp = mf_stamp;
    h->pid = (uint32_t)mf_pid;
    h->mode = mf_opt.live;
    h->capacity = cap;
    h->stats_capacity = MF_LIVE_STATS_CAPACITY;
    h->records_offset = rec_off;
    h->stats_offset = stats_off;
    h->start_mono_ns = mf_mono_ns();
    h->start_real_ns = mf_now_ns();
    mf_live_records = (struct mf_live_record *)((char *)m + rec_off);
    mf_live_stats = (struct mf_live_stats *)((char *)m + stats_off);
    __atomic_store_n(&h->version, MF_FORMAT_VERSION, __ATOMIC_RELEASE); /* a reader's go */
    __atomic_store_n(&mf_live_hdr, h, __ATOMIC_RELEASE);
}

/* Makes the file if it is to be and is not made yet: at the first sample to follow, or
 * before a call that would take away the means to make it (mf_core_before_loss). */
void mf_live_file_now(void)
{
    if (!mf_opt.live || !mf_live_filter || __atomic_load_n(&mf_live_hdr, __ATOMIC_ACQUIRE) ||
        mf_live_failed)
        return;
    mf_spin_lock(&mf_live_lock);
    if (!mf_live_hdr && !mf_live_failed && mf_check_pid())
        mf_live_create();
    mf_spin_unlock(&mf_live_lock);
}

/* The sample just recorded into entry e of table tab is to be followed: noted in the slot
 * until the front end has the address (mf_live_alloc). Runs on the slot's stack. */
void mf_live_note(struct mf_thread *t, struct mf_table *tab, const struct mf_entry *e)
{
    struct mf_slot *s = t->slot;
    if (!mf_opt.live || !mf_live_filter)
        return;
    mf_live_file_now();
    struct mf_live_header *h = __atomic_load_n(&mf_live_hdr, __ATOMIC_ACQUIRE);
    if (!h)
        return;
    uint64_t w = t->weight > s->weight ? t->weight : s->weight; /* a large call: the stream's */
    uint32_t v = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w,
             seen = __atomic_load_n(&h->interval_max, __ATOMIC_RELAXED);
    while (v > 1 && v > seen && !__atomic_compare_exchange_n(&h->interval_max, &seen, v, true,
                                                             __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    uint32_t k;
    uint64_t i;
    if (mf_table_entry_at(tab, e, &k, &i)) {
        s->live_stack = MF_LIVE_REF(tab->hdr->seq, k, i);
        s->live_weight = s->weight;
        s->live_size = s->size;
        s->live_call = mf_live_thread_calls(t);
        s->live_ns = mf_mono_ns();
        s->live_pending = true;
    }
}

uint64_t mf_live_thread_calls(const struct mf_thread *t)
{
    uint64_t n = t->slot->live_calls;
    for (int fn = 0; fn < MF_FN_COUNT; fn++)
        n += t->pending.calls[fn];
    return n;
}

static void mf_filter_add(uint64_t addr, int delta)
{
    uint8_t *c = &mf_live_filter[MF_LIVE_FILTER_INDEX(addr)];
    uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
    do {
        if (v == 255 || (delta < 0 && v == 0))
            return; /* saturated: stays */
    } while (!__atomic_compare_exchange_n(c, &v, (uint8_t)(v + delta), true, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
}

/* The front end's allocation returned p for the call whose sample mf_live_note kept. */
void mf_live_alloc(void *p)
{
    struct mf_slot *s = mf_tls.slot;
    if (!s || !s->live_pending)
        return;
    s->live_pending = false;
    struct mf_live_header *h = __atomic_load_n(&mf_live_hdr, __ATOMIC_ACQUIRE);
    if (!p || !h)
        return;
    uint64_t addr = (uintptr_t)p, mask = h->capacity - 1, j = mf_live_hash(addr) & mask;
    for (uint32_t n = 0; n < MF_LIVE_PROBES; n++, j = (j + 1) & mask) {
        struct mf_live_record *r = &mf_live_records[j];
        uint32_t st = __atomic_load_n(&r->state, __ATOMIC_RELAXED);
        if (st != MF_LIVE_RECORD_EMPTY && st != MF_LIVE_RECORD_FREED)
            continue;
        if (!__atomic_compare_exchange_n(&r->state, &st, MF_LIVE_RECORD_BUSY, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&r->addr, addr, __ATOMIC_RELAXED);
        r->size = s->live_size;
        r->weight = s->live_weight;
        r->stack = s->live_stack;
        r->thread = s->thread_seq;
        r->alloc_ns = s->live_ns;
        r->alloc_call = s->live_call;
        __atomic_store_n(&r->state, MF_LIVE_RECORD_LIVE, __ATOMIC_RELEASE);
        mf_filter_add(addr, 1);
        return;
    }
    __atomic_fetch_add(&h->dropped, s->live_weight, __ATOMIC_RELAXED);
    __atomic_fetch_or(&h->flags, MF_LIVE_FULL, __ATOMIC_RELAXED);
}

static uint32_t mf_live_bucket(uint64_t v, uint32_t nbuckets)
{
    uint32_t b = v ? 64u - (uint32_t)__builtin_clzll(v) : 0; /* 1 + floor(log2 v) */
    return b < nbuckets ? b : nbuckets - 1;
}

/* The lifetime of a freed record r (its fields copied out) into its stack's statistics. */
static void mf_live_freed(struct mf_live_header *h, const struct mf_live_record *r)
{
    uint64_t key = r->stack + 1, mask = h->stats_capacity - 1, j = mf_live_hash(key) & mask;
    struct mf_live_stats *st = NULL;
    for (uint32_t n = 0; n < MF_LIVE_PROBES; n++, j = (j + 1) & mask) {
        uint64_t seen = __atomic_load_n(&mf_live_stats[j].key, __ATOMIC_ACQUIRE);
        if (seen == key ||
            (seen == 0 && (__atomic_compare_exchange_n(&mf_live_stats[j].key, &seen, key, false,
                                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
                           seen == key))) {
            st = &mf_live_stats[j];
            break;
        }
    }
    uint64_t w = r->weight;
    if (!st) {
        __atomic_fetch_add(&h->stats_dropped, w, __ATOMIC_RELAXED);
        __atomic_fetch_or(&h->flags, MF_LIVE_STATS_FULL, __ATOMIC_RELAXED);
        return;
    }
    struct mf_thread *t = &mf_tls;
    uint64_t now = mf_mono_ns();
    __atomic_fetch_add(&st->freed, w, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->freed_samples, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->freed_bytes, w * r->size, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st->life_ns[mf_live_bucket(now > r->alloc_ns ? now - r->alloc_ns : 0,
                                                   MF_LIVE_NS_BUCKETS)],
                       w, __ATOMIC_RELAXED);
    if (t->slot && t->slot->owner == t && t->slot->thread_seq == r->thread &&
        t->state == MF_THREAD_READY) {
        uint64_t calls = mf_live_thread_calls(t);
        uint64_t life = calls > r->alloc_call ? calls - r->alloc_call : 0;
        __atomic_fetch_add(&st->same_thread, w, __ATOMIC_RELAXED);
        __atomic_fetch_add(&st->life_calls[mf_live_bucket(life, MF_LIVE_CALL_BUCKETS)], w,
                           __ATOMIC_RELAXED);
        if (!life)
            __atomic_fetch_add(&st->temporary, w, __ATOMIC_RELAXED);
    }
}

/* A free (or realloc) of p, whose filter count was not zero: if p is a recorded allocation,
 * its record goes and its lifetime is counted. Addresses never recorded (memory from
 * before start-up, from mmap, a double free) find no record and change nothing. */
void mf_live_free(void *p)
{
    struct mf_live_header *h = __atomic_load_n(&mf_live_hdr, __ATOMIC_ACQUIRE);
    /* A child of _Fork() or clone() still maps its parent's file: its frees of the blocks
     * it inherited are its own copy's, never the parent's (its first allocation call makes
     * it forget the file, mf_record_slow). */
    if (!h || !p || mf_forked())
        return;
    uint64_t addr = (uintptr_t)p, mask = h->capacity - 1, j = mf_live_hash(addr) & mask;
    for (uint32_t n = 0; n < MF_LIVE_PROBES; n++, j = (j + 1) & mask) {
        struct mf_live_record *r = &mf_live_records[j];
        uint32_t st = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
        if (st == MF_LIVE_RECORD_EMPTY)
            return;
        if (st != MF_LIVE_RECORD_LIVE || __atomic_load_n(&r->addr, __ATOMIC_RELAXED) != addr)
            continue;
        if (!__atomic_compare_exchange_n(&r->state, &st, MF_LIVE_RECORD_BUSY, false,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        struct mf_live_record copy = *r;
        __atomic_store_n(&r->state, MF_LIVE_RECORD_FREED, __ATOMIC_RELEASE);
        mf_filter_add(addr, -1);
        mf_live_freed(h, &copy);
        return;
    }
}

/* For front ends that check the filter out of line (the Rust crate). */
void mf_live_free_call(void *p)
{
    if (mf_live_filter_hit(p))
        mf_live_free(p);
}

bool mf_live_enabled(void)
{
    return mf_opt.live != 0;
}
