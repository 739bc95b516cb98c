/* The timeline (timeline.h): its reader, and the recorder that writes it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mf_print.h"
#include "process_life.h"
#include "protobuf.h"
#include "timeline.h"

/* FNV-1a, 64 bits: a point's checksum (mf_format.h). */
static uint64_t mf_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t mf_tl_checksum(const struct mf_tl_point *pt, const struct mf_tl_stack *recs)
{
    struct mf_tl_point z = *pt;
    z.checksum = 0;
    return mf_fnv(mf_fnv(0xcbf29ce484222325ull, &z, sizeof z), recs, pt->nstacks * sizeof *recs);
}

static char *mf_tl_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/" MF_TL_FILE;
    char *path = mf_xmalloc(n);
    snprintf(path, n, "%s/%s", dir, MF_TL_FILE);
    return path;
}

/* ---- reading -------------------------------------------------------------------------- */

void mf_timeline_free(struct mf_timeline *t)
{
    free(t->path);
    free(t->points);
    free(t->recs);
    memset(t, 0, sizeof *t);
}

/* Why the point at buf[at..] (of the file's size bytes, a timeline of that version) cannot
 * be taken, or NULL: then its records are in recs (room for MF_TL_POINT_STACKS_MAX) and its
 * bytes in the file in *len. */
static const char *mf_tl_bad_point(const uint8_t *buf, size_t size, size_t at, uint32_t version,
                                   const struct mf_tl_point *prev, struct mf_tl_point *pt,
                                   struct mf_tl_stack *recs, size_t *len)
{
    if (size - at < sizeof *pt)
        return "cut short";
    memcpy(pt, buf + at, sizeof *pt);
    if (pt->magic != MF_TL_POINT_MAGIC)
        return "damaged (no point's mark)";
    if (pt->nstacks > MF_TL_POINT_STACKS_MAX)
        return "damaged (too many records)";
    const uint8_t *p = buf + at + sizeof *pt;
    size_t left = size - at - sizeof *pt;
    if (version == 1 || (pt->flags & MF_TL_POINT_RAW)) {
        if (left / sizeof *recs < pt->nstacks)
            return "cut short";
        if (pt->nstacks)
            memcpy(recs, p, pt->nstacks * sizeof *recs);
        *len = sizeof *pt + pt->nstacks * sizeof *recs;
    } else {
        struct mf_pb_reader r = {p, p + left, NULL};
        for (uint32_t i = 0; i < pt->nstacks && !r.err; i++) {
            recs[i].id = mf_pb_read_fixed64(&r);
            recs[i].calls = mf_pb_read_varint(&r);
            recs[i].bytes = mf_pb_read_varint(&r);
            recs[i].var = mf_pb_read_varint(&r);
        }
        if (r.err)
            return r.p >= r.end ? "cut short" : "damaged (a record does not decode)";
        *len = sizeof *pt + (size_t)(r.p - p);
    }
    if (mf_tl_checksum(pt, recs) != pt->checksum)
        return "damaged (its checksum does not match)";
    if (pt->end_ns < pt->start_ns || (prev && pt->start_ns < prev->end_ns))
        return "damaged (its times are out of order)";
    return NULL;
}

int mf_timeline_read(struct mf_timeline *t, const char *dir)
{
    memset(t, 0, sizeof *t);
    t->path = mf_tl_path(dir);
    struct stat st;
    if (fstatat(AT_FDCWD, t->path, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
        mf_timeline_free(t);
        return 1;
    }
    const char *why;
    int fd = mf_open_regular(t->path, false, MF_TL_FILE_MAX, &why);
    if (fd < 0) {
        mf_error("%s: %s (no timeline)", mf_esc(t->path), why);
        mf_timeline_free(t);
        return 2;
    }
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            cap = cap ? cap * 2 : 65536;
            buf = mf_xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + size, cap - size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            mf_error("%s: %s (no timeline)", mf_esc(t->path), strerror(errno));
            close(fd);
            free(buf);
            mf_timeline_free(t);
            return 2;
        }
        if (n == 0 || size + (size_t)n > MF_TL_FILE_MAX) /* grown past the bound while read */
            break;
        size += (size_t)n;
    }
    close(fd);
    struct mf_tl_header h;
    const char *bad = NULL;
    if (size < sizeof h)
        bad = "too short for its header";
    else {
        memcpy(&h, buf, sizeof h);
        if (memcmp(h.magic, MF_TL_MAGIC, sizeof h.magic) != 0)
            bad = "not a timeline (no MFREQTML mark)";
        else if (h.version < 1 || h.version > MF_TL_VERSION || h.header_size != sizeof h)
            bad = "a timeline of another version";
        else if (!h.interval_ns || h.points_max != MF_TL_POINTS_MAX)
            bad = "damaged (its header's interval or bound)";
    }
    if (bad) {
        mf_error("%s: %s (no timeline)", mf_esc(t->path), bad);
        free(buf);
        mf_timeline_free(t);
        return 2;
    }
    t->start_ns = h.start_ns;
    t->interval_ns = h.interval_ns;
    t->version = h.version;
    uint32_t cap_points = 0, cap_recs = 0;
    size_t at = sizeof h;
    while (at < size) {
        struct mf_tl_point pt;
        const struct mf_tl_point *prev = t->npoints ? &t->points[t->npoints - 1].h : NULL;
        if (t->nrecs + MF_TL_POINT_STACKS_MAX > cap_recs) { /* room for one more point's */
            cap_recs = (t->nrecs + MF_TL_POINT_STACKS_MAX) * 2;
            t->recs = mf_xrealloc(t->recs, (size_t)cap_recs * sizeof *t->recs);
        }
        size_t len;
        if ((bad = mf_tl_bad_point(buf, size, at, h.version, prev, &pt, t->recs + t->nrecs,
                                   &len)) ||
            (t->npoints >= MF_TL_POINTS_MAX * 2 && (bad = "one point too many"))) {
            mf_error("%s: point %u is %s: the timeline shows the %u before it", mf_esc(t->path),
                     t->npoints + 1, bad, t->npoints);
            break;
        }
        MF_GROW(t->points, t->npoints, cap_points);
        t->points[t->npoints++] = (struct mf_tl_pt){pt, t->nrecs};
        t->nrecs += pt.nstacks;
        at += len;
        t->last = pt.flags & MF_TL_POINT_LAST;
    }
    free(buf);
    return 0;
}

/* ---- stacks' identities --------------------------------------------------------------- */

uint64_t mf_stack_id(uint32_t version, uint64_t stamp, uint32_t flags, uint32_t depth,
                     const uint64_t *frames)
{
    if (version == 1) { /* unkeyed, as the recorder's ids and a later reader's must agree */
        uint64_t head[2] = {stamp, (uint64_t)flags << 32 | depth};
        uint64_t id = mf_fnv(mf_fnv(0xcbf29ce484222325ull, head, sizeof head), frames,
                             depth * sizeof *frames);
        return id ? id : 1;
    }
    uint64_t h = MF_TL_ID_SEED;
    for (uint32_t i = depth; i-- > 0;)
        h = mf_tl_id_step(h, frames[i]);
    return mf_tl_id(h, stamp, flags, depth);
}

uint64_t *mf_stack_ids(const struct mf_profile *p, uint32_t version)
{
    uint64_t *ids = mf_xmalloc(((size_t)p->nstacks + 1) * sizeof *ids);
    for (uint32_t i = 0; i < p->nstacks; i++) {
        const struct mf_raw_stack *s = &p->stacks[i];
        ids[i] = p->ids_only ? s->id
                             : mf_stack_id(version, p->procs[s->process].stamp, s->flags,
                                           s->depth, s->frames);
    }
    return ids;
}

/* ---- recording ------------------------------------------------------------------------ */

/* MF_PRINT_TEST_CLOCK=N: the clock runs N times as fast, from the first reading on. */
static uint64_t mf_clock_speed(void)
{
    static uint64_t speed;
    if (!speed) {
        const char *s = getenv("MF_PRINT_TEST_CLOCK");
        char *end;
        unsigned long long v = s ? strtoull(s, &end, 10) : 0;
        speed = s && *s && !*end && v >= 1 && v <= 1000000 ? v : 1;
    }
    return speed;
}

/* A test's gate: the FIFO the environment variable var names, from which a snapshot reads a
 * byte where it calls this (from the writer's end of file on, it no longer waits), so that a
 * test can start and end processes at that moment. *fd: -2 until the variable is looked at. */
static void mf_test_gate(const char *var, int *fd)
{
    if (*fd == -2) {
        const char *s = getenv(var);
        *fd = s && *s ? open(s, O_RDONLY | O_CLOEXEC) : -1;
    }
    char c;
    if (*fd >= 0 && read(*fd, &c, 1) <= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* MF_PRINT_TEST_LIFE_GATE: after listing and reading the run, before its images' lives are
 * checked. */
static void mf_test_life_gate(void)
{
    static int fd = -2;
    mf_test_gate("MF_PRINT_TEST_LIFE_GATE", &fd);
}

static uint64_t mf_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mf_record_now(void)
{
    static uint64_t origin;
    uint64_t now = mf_real_ns();
    if (!origin)
        origin = now;
    return origin + (now - origin) * mf_clock_speed();
}

uint64_t mf_record_due(const struct mf_recorder *r)
{
    return r->started && !r->confirming ? r->last_ns + r->interval_ns : 0;
}

static bool mf_write_all(int fd, const void *buf, size_t n)
{
    const char *c = buf;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static bool mf_record_fail(struct mf_recorder *r, const char *what)
{
    mf_error("cannot write %s: %s (the timeline stops here)", mf_esc(r->path), what);
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    return true;
}

/* A point and its records, packed where that is shorter (mf_format.h), in one write: a
 * reader sees it whole or cut short. */
static bool mf_write_point(int fd, const struct mf_tl_pt *pt, const struct mf_tl_stack *recs)
{
    struct mf_tl_point h = pt->h;
    const struct mf_tl_stack *v = recs + pt->first;
    struct mf_pb b = {0};
    mf_pb_room_for(&b, sizeof h + h.nstacks * sizeof *v);
    b.n = sizeof h;
    for (uint32_t i = 0; i < h.nstacks; i++) {
        mf_pb_fixed64(&b, v[i].id);
        mf_pb_varint(&b, v[i].calls);
        mf_pb_varint(&b, v[i].bytes);
        mf_pb_varint(&b, v[i].var);
    }
    h.flags &= ~MF_TL_POINT_RAW;
    if (b.n > sizeof h + h.nstacks * sizeof *v) { /* never longer than the records as they are */
        h.flags |= MF_TL_POINT_RAW;
        b.n = sizeof h;
        if (h.nstacks) {
            memcpy(b.b + b.n, v, h.nstacks * sizeof *v);
            b.n += h.nstacks * sizeof *v;
        }
    }
    h.checksum = mf_tl_checksum(&h, v);
    memcpy(b.b, &h, sizeof h);
    bool ok = mf_write_all(fd, b.b, b.n);
    mf_pb_free(&b);
    return ok;
}

/* The file made anew from r's points: a new file renamed over the old one. */
static bool mf_record_rewrite(struct mf_recorder *r, uint64_t start_ns)
{
    struct mf_replace rep;
    int fd = mf_replace_open(&rep, r->path, "--record");
    if (fd < 0) {
        r->fd >= 0 ? close(r->fd) : 0;
        r->fd = -1;
        return true;
    }
    struct mf_tl_header h = {.version = MF_TL_VERSION, .header_size = sizeof h,
                             .start_ns = start_ns, .interval_ns = r->interval_ns,
                             .points_max = MF_TL_POINTS_MAX};
    memcpy(h.magic, MF_TL_MAGIC, sizeof h.magic);
    bool ok = mf_write_all(fd, &h, sizeof h);
    for (uint32_t i = 0; ok && i < r->npoints; i++)
        ok = mf_write_point(fd, &r->points[i], r->recs);
    if (!ok) {
        int e = errno;
        close(fd);
        mf_replace_end(&rep, false);
        return mf_record_fail(r, strerror(e));
    }
    if (mf_replace_end(&rep, true)) {
        close(fd);
        r->fd >= 0 ? close(r->fd) : 0;
        r->fd = -1;
        return true;
    }
    if (r->fd >= 0)
        close(r->fd);
    r->fd = fd; /* the new file, at its end: the next points are appended to it */
    return false;
}

bool mf_record_start(struct mf_recorder *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->dir = mf_xstrdup(dir);
    r->path = mf_tl_path(dir);
    r->interval_ns = MF_TL_INTERVAL_NS;
    return mf_record_rewrite(r, 0);
}

static void mf_rec_dirs_free(struct mf_recorder *r);

void mf_record_end(struct mf_recorder *r)
{
    if (r->fd >= 0)
        close(r->fd);
    mf_map_free(&r->prev);
    free(r->prev_counts);
    mf_map_free(&r->dir_map);
    mf_rec_dirs_free(r);
    free(r->points);
    free(r->recs);
    free(r->dir);
    free(r->path);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

/* The map's values index prev_counts; its keys are the ids themselves. dir: the stack's
 * directory (index + 1), 0 for none. */
static struct mf_tl_stack *mf_prev_of(struct mf_recorder *r, uint64_t id, uint32_t dir)
{
    bool added;
    uint32_t k = mf_map_put(&r->prev, id, NULL, NULL, r->nprev, &added);
    if (added) {
        MF_GROW(r->prev_counts, r->nprev, r->prev_cap);
        r->prev_counts[r->nprev++] = (struct mf_rec_prev){{.id = id}, dir};
    }
    return &r->prev_counts[k].c;
}

static int mf_rec_calls_cmp(const void *a, const void *b)
{
    const struct mf_tl_stack *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls < y->calls ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int mf_rec_id_cmp(const void *a, const void *b)
{
    const struct mf_tl_stack *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void mf_record_reserve(struct mf_recorder *r, uint32_t more)
{
    if (r->nrecs + more > r->recs_cap) {
        r->recs_cap = (r->nrecs + more) * 2;
        r->recs = mf_xrealloc(r->recs, (size_t)r->recs_cap * sizeof *r->recs);
    }
}

/* Point pt's records (at r->recs[pt->first ..], n of them, unsorted, ids distinct): the
 * largest MF_TL_POINT_STACKS_MAX kept, the rest added to its other counts. */
static void mf_point_cap(struct mf_recorder *r, struct mf_tl_pt *pt, uint32_t n)
{
    struct mf_tl_stack *v = r->recs + pt->first;
    if (n > MF_TL_POINT_STACKS_MAX) {
        qsort(v, n, sizeof *v, mf_rec_calls_cmp);
        for (uint32_t i = MF_TL_POINT_STACKS_MAX; i < n; i++) {
            pt->h.other_calls += v[i].calls;
            pt->h.other_bytes += v[i].bytes;
        }
        n = MF_TL_POINT_STACKS_MAX;
    }
    pt->h.nstacks = n; /* its checksum is made as it is written (mf_write_point) */
    r->nrecs = pt->first + n;
}

/* Adjacent points merged pairwise, their records summed per stack; the interval doubled. */
static void mf_record_merge(struct mf_recorder *r)
{
    struct mf_tl_stack *old = r->recs;
    const struct mf_tl_pt *pts = r->points;
    uint32_t n = r->npoints;
    r->recs = NULL;
    r->nrecs = r->recs_cap = 0;
    struct mf_tl_pt *merged = mf_xmalloc(((size_t)n / 2 + 1) * sizeof *merged);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i += 2) {
        const struct mf_tl_pt *a = &pts[i], *b = i + 1 < n ? &pts[i + 1] : NULL;
        struct mf_tl_pt pt = {a->h, r->nrecs};
        uint32_t k = a->h.nstacks + (b ? b->h.nstacks : 0);
        mf_record_reserve(r, k);
        struct mf_tl_stack *v = r->recs + r->nrecs;
        memcpy(v, old + a->first, a->h.nstacks * sizeof *v);
        if (b) {
            memcpy(v + a->h.nstacks, old + b->first, b->h.nstacks * sizeof *v);
            pt.h.end_ns = b->h.end_ns;
            pt.h.calls += b->h.calls;
            pt.h.bytes += b->h.bytes;
            pt.h.other_calls += b->h.other_calls;
            pt.h.other_bytes += b->h.other_bytes;
            pt.h.processes = b->h.processes;
            pt.h.flags = b->h.flags;
        }
        qsort(v, k, sizeof *v, mf_rec_id_cmp);
        uint32_t w = 0;
        for (uint32_t j = 0; j < k; j++) {
            if (w && v[w - 1].id == v[j].id) {
                v[w - 1].calls += v[j].calls;
                v[w - 1].bytes += v[j].bytes;
                v[w - 1].var += v[j].var;
            } else {
                v[w++] = v[j];
            }
        }
        mf_point_cap(r, &pt, w);
        merged[m++] = pt;
    }
    free(old);
    free(r->points);
    r->points = merged;
    r->npoints = m;
    r->points_cap = n / 2 + 1;
    r->interval_ns *= 2;
}

static uint64_t mf_growth(uint64_t now, uint64_t before)
{
    return now > before ? now - before : 0;
}

/* ---- process directories that ended --------------------------------------------------- */

/* A process directory's state. Seen with every image ended at one snapshot, it is read once
 * more at the next (an image that died while its files were read is read whole then), and
 * left out after that; read when its process was already gone (reaped: every thread of it
 * had ended) and listing no file made since its listing, the one reading is whole. A file
 * made in it since (a new image of a reused pid) changes its count of files: it is read
 * again. Its time would not do: file times come from a coarse clock, and a file made within
 * its tick leaves the time as it was. */
enum mf_rec_state { MF_REC_READ, MF_REC_ENDED, MF_REC_LEFT_OUT };

struct mf_rec_dir {
    dev_t dev;
    ino_t ino;
    uint32_t nfiles; /* its profile files, as the last walk found them */
    enum mf_rec_state state;
    bool met;     /* found by this snapshot's walk */
    bool read;    /* read by this snapshot */
    bool gone;    /* the pid its name says was no process's when it was read */
    uint32_t pid; /* that pid (malloc_freq.<pid>), 0 if its name says none */
    bool ended;   /* every one of them has ended (mf_life) */
    bool others;  /* some of them are of another pid (written beside their parent) */
    /* Its images' exact totals and [not profiled] as last read (frozen once left out). */
    uint64_t calls, bytes;
    struct mf_tl_stack unprofiled;
    uint64_t read_ns; /* the CPU time its reading took this snapshot */
    /* Its images' stamps as last read (their count: its images); once it is read again
     * after it was left out, those of then (`done`): their stacks' counts are all in the
     * timeline already. */
    uint64_t *stamps, *done;
    uint32_t nstamps, stamps_cap, ndone;
};

struct mf_rec_dir_key {
    const struct mf_recorder *r;
    dev_t dev;
    ino_t ino;
};

static bool mf_rec_dir_eq(const void *ctx, uint32_t idx)
{
    const struct mf_rec_dir_key *k = ctx;
    return k->r->dirs[idx].dev == k->dev && k->r->dirs[idx].ino == k->ino;
}

static struct mf_rec_dir *mf_rec_dir_find(const struct mf_recorder *r, dev_t dev, ino_t ino)
{
    struct mf_rec_dir_key k = {r, dev, ino};
    uint32_t i = mf_map_get(&r->dir_map, mf_dir_id_hash(dev, ino), mf_rec_dir_eq, &k);
    return i == MF_MAP_EMPTY ? NULL : &r->dirs[i];
}

/* Its share taken out of the base, or put in. */
static void mf_rec_base(struct mf_recorder *r, const struct mf_rec_dir *d, bool add)
{
    if (add) {
        r->base_calls += d->calls;
        r->base_bytes += d->bytes;
        r->base_unprofiled.calls += d->unprofiled.calls;
        r->base_unprofiled.bytes += d->unprofiled.bytes;
        r->base_unprofiled.var += d->unprofiled.var;
    } else {
        r->base_calls -= d->calls;
        r->base_bytes -= d->bytes;
        r->base_unprofiled.calls -= d->unprofiled.calls;
        r->base_unprofiled.bytes -= d->unprofiled.bytes;
        r->base_unprofiled.var -= d->unprofiled.var;
    }
}

static void mf_rec_dirs_free(struct mf_recorder *r)
{
    for (uint32_t i = 0; i < r->ndirs; i++) {
        free(r->dirs[i].stamps);
        free(r->dirs[i].done);
    }
    free(r->dirs);
}

/* A directory left out is read again (a new image in it, or found again): its share comes
 * out of the base, and the images it held then are done (their stacks were let go from
 * the previous snapshot's counts, and are all in the timeline). */
static void mf_rec_back(struct mf_recorder *r, struct mf_rec_dir *d)
{
    mf_rec_base(r, d, false);
    free(d->done);
    d->done = d->stamps;
    d->ndone = d->nstamps;
    d->stamps = NULL;
    d->nstamps = d->stamps_cap = 0;
}

static bool mf_rec_done(const struct mf_rec_dir *d, uint64_t stamp)
{
    for (uint32_t i = 0; i < d->ndone; i++)
        if (d->done[i] == stamp)
            return true;
    return false;
}

/* The previous snapshot's counts of the stacks of directories left out let go: a build's
 * run kept every compiler's, 1.25 million of them, and looked each stack up among them. */
static void mf_prev_prune(struct mf_recorder *r)
{
    struct mf_map m = {0};
    uint32_t n = 0;
    for (uint32_t k = 0; k < r->nprev; k++) {
        const struct mf_rec_prev *e = &r->prev_counts[k];
        if (e->dir && r->dirs[e->dir - 1].state == MF_REC_LEFT_OUT)
            continue;
        bool added;
        mf_map_put(&m, e->c.id, NULL, NULL, n, &added);
        r->prev_counts[n++] = *e;
    }
    mf_map_free(&r->prev);
    r->prev = m;
    r->nprev = n;
}

/* The pid of a directory named malloc_freq.<pid>, 0 for any other name. */
static uint32_t mf_rec_dir_pid(const char *dir)
{
    static const char prefix[] = "malloc_freq.";
    const char *name = mf_basename(dir), *digits = name + sizeof prefix - 1;
    if (strncmp(name, prefix, sizeof prefix - 1) != 0 || *digits < '1' || *digits > '9')
        return 0;
    char *end;
    unsigned long pid = strtoul(digits, &end, 10);
    return !*end && pid <= INT32_MAX ? (uint32_t)pid : 0;
}

static uint64_t mf_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The directory whose reading started last: its CPU time so far added to it. */
static void mf_rec_reading_end(struct mf_recorder *r)
{
    if (r->reading)
        r->dirs[r->reading - 1].read_ns += mf_cpu_ns() - r->reading_from;
    r->reading = 0;
}

/* MF_PRINT_TEST_LIST_GATE: after a process directory is listed, before it is looked at. */
static void mf_test_list_gate(void)
{
    static int fd = -2;
    mf_test_gate("MF_PRINT_TEST_LIST_GATE", &fd);
}

/* The reader's left_out: a directory left out before and unchanged since. Each directory
 * read is timed, from here to the next directory's call (or the reading's end). */
static bool mf_rec_left_out(const char *dir, const struct stat *st, uint32_t nfiles, void *ctx)
{
    struct mf_recorder *r = ctx;
    mf_test_list_gate();
    struct mf_rec_dir_key k = {r, st->st_dev, st->st_ino};
    bool added;
    uint32_t i = mf_map_put(&r->dir_map, mf_dir_id_hash(k.dev, k.ino), mf_rec_dir_eq, &k,
                            r->ndirs, &added);
    if (added) {
        MF_GROW(r->dirs, r->ndirs, r->dirs_cap);
        r->dirs[r->ndirs++] = (struct mf_rec_dir){
            .dev = k.dev, .ino = k.ino, .nfiles = nfiles, .pid = mf_rec_dir_pid(dir)};
    }
    struct mf_rec_dir *d = &r->dirs[i];
    d->met = true;
    if (d->nfiles != nfiles) {
        if (d->state == MF_REC_LEFT_OUT)
            mf_rec_back(r, d);
        d->state = MF_REC_READ; /* seen ended again from here on before it is left out */
        d->nfiles = nfiles;
    }
    mf_rec_reading_end(r);
    if (d->state == MF_REC_LEFT_OUT)
        return true;
    /* Its process gone, the reading is whole; but the directory was listed before this
     * look, and the files read are those listed: a file the process made in between (a
     * thread's first) would be missed, its directory left out, and its stacks, found at
     * the next listing, taken for the left-out images' own (`done`). So gone only when the
     * directory lists no more files now than it did (one run of the suite lost a short
     * process's 1,001 calls so, its totals counted and none of its stacks). */
    d->gone = d->pid && kill((pid_t)d->pid, 0) != 0 && errno == ESRCH &&
              mf_profile_files_now(dir, st) == nfiles;
    d->read = true;
    r->reading = i + 1;
    r->reading_from = mf_cpu_ns();
    return false;
}

static bool mf_rec_any_left_out(const struct mf_recorder *r)
{
    for (uint32_t i = 0; i < r->ndirs; i++)
        if (r->dirs[i].state == MF_REC_LEFT_OUT)
            return true;
    return false;
}

/* After a snapshot read with mf_rec_left_out, before its images are counted: a left-out
 * directory the walk no longer found (removed) is taken out of the base, as its counts would
 * be out of a whole reading; each directory read starts its count afresh. */
static void mf_rec_dirs_read(struct mf_recorder *r)
{
    for (uint32_t i = 0; i < r->ndirs; i++) {
        struct mf_rec_dir *d = &r->dirs[i];
        if (!d->met && d->state == MF_REC_LEFT_OUT) {
            mf_rec_back(r, d);
            d->state = MF_REC_READ;
        }
        if (d->read) {
            d->nstamps = 0;
            d->ended = true;
            d->others = false;
            d->calls = d->bytes = 0;
            d->unprofiled = (struct mf_tl_stack){0};
        }
    }
}

/* Image pr of the snapshot, ended or not (mf_life), counted in its directory d. */
static void mf_rec_dir_image(struct mf_rec_dir *d, const struct mf_process *pr, bool ended)
{
    if (!d || !d->read)
        return;
    MF_GROW(d->stamps, d->nstamps, d->stamps_cap);
    d->stamps[d->nstamps++] = pr->stamp;
    d->ended &= ended;
    d->others |= pr->pid != d->pid;
    for (int f = 0; f < MF_FN_COUNT; f++) { /* as mf_profile_total_calls and _bytes */
        d->calls += pr->totals.calls[f];
        d->bytes += pr->totals.bytes[f];
    }
    d->unprofiled.calls += pr->unprofiled_calls;
    d->unprofiled.bytes += pr->unprofiled_bytes;
    d->unprofiled.var += pr->unprofiled_var;
}

/* After the snapshot's point: a directory read with every image ended at two snapshots in a
 * row (and not changed in between), or once after its process was gone, is left out from
 * the next one on. Sums the CPU time of the snapshot's readings (r->read_ns) and of those
 * no later snapshot repeats (r->once_ns). Returns whether it left a directory out. */
static bool mf_rec_dirs_settle(struct mf_recorder *r)
{
    bool left_out = false;
    r->read_ns = r->once_ns = 0;
    for (uint32_t i = 0; i < r->ndirs; i++) {
        struct mf_rec_dir *d = &r->dirs[i];
        if (d->read) {
            if (!d->nstamps || !d->ended)
                d->state = MF_REC_READ;
            else if (d->state == MF_REC_ENDED || (d->gone && !d->others)) {
                d->state = MF_REC_LEFT_OUT;
                mf_rec_base(r, d, true);
                left_out = true;
            } else
                d->state = MF_REC_ENDED;
            r->read_ns += d->read_ns;
            if (d->state == MF_REC_LEFT_OUT)
                r->once_ns += d->read_ns;
        }
        d->met = d->read = false;
        d->read_ns = 0;
    }
    return left_out;
}

bool mf_record_tick(struct mf_recorder *r, bool last)
{
    if (r->fd < 0)
        return true;
    uint64_t now = mf_record_now();
    /* The estimates as recorded: a finished thread's calibrated ones would move every
     * stack at once when it ends, a growth in the last point that no call made. */
    struct mf_profile p = {.uncalibrated = true, .no_sizes = true, .ids_only = true,
                           .left_out = mf_rec_left_out, .left_out_ctx = r};
    /* A run starting, or files being written: what cannot be read now is read next time. */
    mf_errors_muted = true;
    uint64_t c0 = mf_cpu_ns();
    bool none = mf_profile_read_dir(&p, r->dir);
    mf_rec_reading_end(r);
    r->walk_ns = mf_cpu_ns() - c0;
    if (!none)
        mf_profile_finish(&p);
    mf_errors_muted = false;
    mf_rec_dirs_read(r);
    if (none || (!p.nfiles_read && !mf_rec_any_left_out(r))) {
        mf_profile_free(&p);
        mf_rec_dirs_settle(r);
        r->confirming = false;
        return false;
    }
    mf_test_life_gate();
    uint64_t *ids = mf_stack_ids(&p, MF_TL_VERSION);
    uint32_t running = 0;
    bool ended = true; /* the left-out directories' images have all ended */
    uint64_t first_start = now;
    /* Each image's directory (index + 1), or UINT32_MAX for an image done before (left out
     * then, its directory read again since). */
    uint32_t *proc_dir = mf_xcalloc((size_t)p.nprocs + 1, sizeof *proc_dir);
    for (uint32_t i = 0; i < p.nprocs; i++) {
        enum mf_life l = mf_life(&p, i);
        bool runs = mf_runs(&p, i, l);
        bool image_ended = p.procs[i].has_file && l != MF_LIFE_UNKNOWN && !runs;
        running += runs; /* a process, in this image or in one it exec'd, not yet written */
        ended &= image_ended;
        struct mf_rec_dir *d = mf_rec_dir_find(r, p.procs[i].dir_dev, p.procs[i].dir_ino);
        mf_rec_dir_image(d, &p.procs[i], image_ended);
        proc_dir[i] = !d ? 0 : mf_rec_done(d, p.procs[i].stamp) ? UINT32_MAX
                                                                 : (uint32_t)(d - r->dirs) + 1;
        if (p.procs[i].has_file && p.procs[i].start_ns < first_start)
            first_start = p.procs[i].start_ns;
    }
    if (!r->started)
        r->last_ns = first_start < now ? first_start : now;
    bool confirmed = ended && r->confirming;
    r->confirming = ended && !confirmed && !last;
    ended = confirmed;

    struct mf_tl_pt pt = {{.magic = MF_TL_POINT_MAGIC, .start_ns = r->last_ns, .end_ns = now,
                           .processes = running,
                           .flags = last || ended ? MF_TL_POINT_LAST : 0},
                          r->nrecs};
    uint64_t calls = r->base_calls + mf_profile_total_calls(&p);
    uint64_t bytes = r->base_bytes + mf_profile_total_bytes(&p);
    pt.h.calls = mf_growth(calls, r->calls);
    pt.h.bytes = mf_growth(bytes, r->bytes);
    r->calls = calls;
    r->bytes = bytes;
    mf_record_reserve(r, p.nstacks + 1);
    uint32_t n = 0;
    for (uint32_t i = 0; i <= p.nstacks; i++) {
        const struct mf_raw_stack *s = i < p.nstacks ? &p.stacks[i] : NULL;
        struct mf_tl_stack cur = s ? (struct mf_tl_stack){ids[i], s->calls, s->bytes, s->var}
                                   : (struct mf_tl_stack){0,
                                                          r->base_unprofiled.calls + p.unprofiled_calls,
                                                          r->base_unprofiled.bytes + p.unprofiled_bytes,
                                                          r->base_unprofiled.var + p.unprofiled_var};
        uint32_t dir = s && s->process < p.nprocs ? proc_dir[s->process] : 0;
        if (dir == UINT32_MAX)
            continue;
        struct mf_tl_stack *prev = mf_prev_of(r, cur.id, dir);
        struct mf_tl_stack d = {cur.id, mf_growth(cur.calls, prev->calls),
                                mf_growth(cur.bytes, prev->bytes), mf_growth(cur.var, prev->var)};
        *prev = cur;
        if (d.calls || d.bytes)
            r->recs[r->nrecs + n++] = d;
    }
    free(proc_dir);
    free(ids);
    mf_profile_free(&p);
    if (mf_rec_dirs_settle(r))
        mf_prev_prune(r);
    mf_point_cap(r, &pt, n);
    MF_GROW(r->points, r->npoints, r->points_cap);
    r->points[r->npoints++] = pt;
    r->last_ns = now;
    r->running = running;
    bool first = !r->started;
    r->started = true;
    if (first || r->npoints >= MF_TL_POINTS_MAX || r->nrecs > MF_TL_RECORDS_MAX) {
        while (r->npoints >= MF_TL_POINTS_MAX || (r->nrecs > MF_TL_RECORDS_MAX && r->npoints > 1))
            mf_record_merge(r);
        if (mf_record_rewrite(r, r->points[0].h.start_ns))
            return true;
    } else if (!mf_write_point(r->fd, &r->points[r->npoints - 1], r->recs)) {
        return mf_record_fail(r, strerror(errno));
    }
    return ended;
}

static volatile sig_atomic_t mf_stop;
/* The recorder sleeps at least 9 times as long as a snapshot took, by its CPU time (the
 * reader's threads together: at most a tenth of one CPU) or its wall time if longer (on a
 * busy machine, where the snapshot waited for a CPU, the recorder backs off further). The
 * readings of directories left out after it do not count: the one reading of a directory
 * whose processes have ended is made once however long the pause, and put off it made the
 * last snapshot of a build read the last 10 s of compilers, 2 s that the launcher waited
 * for. */
#define MF_RECORD_SHARE 9

static void mf_on_stop(int sig)
{
    (void)sig;
    mf_stop = 1;
}

int mf_record(const char *dir)
{
    struct sigaction sa = {.sa_handler = mf_on_stop}; /* no SA_RESTART: the sleep ends */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigset_t stop; /* the launcher starts it with them blocked */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
    struct mf_recorder r;
    if (mf_record_start(&r, dir)) {
        mf_record_end(&r);
        return 1;
    }
    bool ended = false;
    while (!ended && !mf_stop) {
        uint64_t c0 = mf_cpu_ns(), w0 = mf_real_ns();
        ended = mf_record_tick(&r, false);
        uint64_t cpu = mf_cpu_ns() - c0, wall = mf_real_ns() - w0;
        uint64_t took = cpu > wall ? cpu : wall;
        if (cpu > 0 && r.read_ns > 0) {
            /* What repeats: the walk beside the readings, the readings of the directories
             * still read, and the share of the rest (the point's records) that is theirs. */
            uint64_t walk = r.walk_ns > r.read_ns ? r.walk_ns - r.read_ns : 0;
            uint64_t rest = cpu > r.walk_ns ? cpu - r.walk_ns : 0;
            double again = 1.0 - (double)r.once_ns / (double)r.read_ns;
            double repeat = (double)walk + (double)(r.read_ns - r.once_ns) + (double)rest * again;
            took = (uint64_t)((double)took * (repeat < (double)cpu ? repeat / (double)cpu : 1.0));
        }
        uint64_t due = mf_record_due(&r), now = mf_record_now();
        if (!r.started)
            due = now + MF_TL_INTERVAL_NS / 4; /* nothing to read yet: look again soon */
        /* A large profile is read less often than the interval says (its points are
         * longer). The test clock shortens this pause too, so that a test makes hours of
         * snapshots in seconds. */
        if (due < now + took * MF_RECORD_SHARE)
            due = now + took * MF_RECORD_SHARE;
        if (!ended && !r.confirming && due > now) {
            uint64_t ns = (due - now) / mf_clock_speed();
            struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
            nanosleep(&ts, NULL);
        }
    }
    if (!ended && r.fd >= 0)
        mf_record_tick(&r, true);
    int rc = r.fd < 0;
    mf_record_end(&r);
    return rc;
}
