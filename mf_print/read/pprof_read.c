/* Reading back a pprof file mf_print wrote (pprof_read.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "mf_print.h"
#include "pprof_read.h"
#include "transform.h"
#include "protobuf.h"

/* What a saved profile may cost is bounded by its size, as a thread file's is: each limit
 * below is above anything mf_print writes, and a file past one is refused in one line. */
#define MF_PPROF_MAX (1u << 30) /* bytes, compressed or not */
/* Unpacked, at most this many times the file's size (and 1 MiB for a small one): mf_print's
 * profiles unpack to 7 times theirs, deep recursion's to 35; a gzip of one byte repeated
 * unpacks to 1,000 times. */
#define MF_PPROF_RATIO 64
/* A sample's locations: a stack of the deepest the writer records, and a pseudo-frame. */
#define MF_PPROF_LOCS_MAX (MF_DEPTH_MAX + 1)
/* The frames of every sample's locations, counted out, at most this many per unpacked byte
 * (mf_print's profiles have about 1): what the reports expand a stack into. */
#define MF_PPROF_FRAMES_PER_BYTE 16

/* Copies s into buf (size bytes), cut if it is longer. */
static void mf_copy(char *buf, size_t size, const char *s)
{
    size_t n = strlen(s);
    n = n < size - 1 ? n : size - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
}

/* ---- the file's bytes -------------------------------------------------------------------- */

static bool mf_read_file(const char *path, uint8_t **data, size_t *n, const char **err)
{
    int fd = mf_open_regular(path, true, MF_PPROF_MAX, err);
    if (fd < 0)
        return true;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *err = strerror(errno);
        close(fd);
        return true;
    }
    *data = mf_xmalloc((size_t)st.st_size + 1);
    *n = 0;
    while (*n < (size_t)st.st_size) {
        ssize_t got = read(fd, *data + *n, (size_t)st.st_size - *n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *err = strerror(errno);
            close(fd);
            return true;
        }
        if (got == 0)
            break;
        *n += (size_t)got;
    }
    close(fd);
    return false;
}

/* gzip data is inflated; anything else is taken as the encoded profile itself, as pprof does. */
static bool mf_gunzip(uint8_t **data, size_t *n, const char **err)
{
    if (*n < 2 || (*data)[0] != 0x1f || (*data)[1] != 0x8b)
        return false;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK) {
        *err = "zlib cannot start";
        return true;
    }
    size_t limit = *n > MF_PPROF_MAX / MF_PPROF_RATIO ? MF_PPROF_MAX : *n * MF_PPROF_RATIO;
    limit = limit < ((size_t)1 << 20) ? (size_t)1 << 20 : limit;
    size_t cap = *n * 4 + 4096 < limit ? *n * 4 + 4096 : limit, len = 0;
    uint8_t *out = mf_xmalloc(cap);
    z.next_in = *data;
    z.avail_in = (uInt)*n;
    int rc;
    do {
        if (len == cap) {
            if (cap >= limit) {
                static char msg[200];
                char a[32];
                snprintf(msg, sizeof msg, "it unpacks to more than %s bytes: not a profile "
                         "mf_print wrote (those unpack to at most %d times their size)",
                         mf_fmt_count(a, limit), MF_PPROF_RATIO);
                *err = msg;
                goto fail;
            }
            cap = cap * 2 < limit ? cap * 2 : limit;
            out = mf_xrealloc(out, cap);
        }
        z.next_out = out + len;
        z.avail_out = (uInt)(cap - len);
        rc = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
        if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR || rc == Z_MEM_ERROR) {
            static char msg[160];
            snprintf(msg, sizeof msg, "damaged gzip data (zlib: %.100s)",
                     z.msg ? z.msg : rc == Z_MEM_ERROR ? "out of memory" : "needs a dictionary");
            *err = msg;
            goto fail;
        }
        if (rc == Z_BUF_ERROR && z.avail_in == 0) {
            *err = "truncated gzip data (the file ends inside its compressed stream)";
            goto fail;
        }
    } while (rc != Z_STREAM_END);
    inflateEnd(&z);
    free(*data);
    *data = out;
    *n = len;
    return false;
fail:
    inflateEnd(&z);
    free(out);
    return true;
}

/* ---- the decoded messages --------------------------------------------------------------- */

struct mf_pr_sample {
    uint32_t locs, nlocs;     /* into loc_ids */
    uint32_t vals, nvals;     /* into vals */
    uint64_t program, counts; /* string indexes of the labels, 0 if none */
    uint64_t pid, var;
    bool base;                /* pprof::base: a comparison's negated side */
};

struct mf_pr_location {
    uint64_t id, mapping, address;
    uint32_t lines, nlines; /* into lines */
};

struct mf_pr_line {
    uint64_t function;
    int64_t line;
};

struct mf_pr_function {
    uint64_t id, name, filename;
};

struct mf_pr_mapping {
    uint64_t id, start, limit, offset, filename, build_id;
};

struct mf_pr {
    struct { const uint8_t *p; size_t n; } *strs;
    uint32_t nstrs, strs_cap;
    uint64_t *types; /* (type, unit) string index pairs */
    uint32_t ntypes, types_cap;
    struct mf_pr_sample *samples;
    uint32_t nsamples, samples_cap;
    uint64_t *loc_ids;
    uint32_t nloc_ids, loc_ids_cap;
    uint64_t *vals;
    uint32_t nvals, vals_cap;
    struct mf_pr_location *locations;
    uint32_t nlocations, locations_cap;
    struct mf_pr_line *lines;
    uint32_t nlines, lines_cap;
    struct mf_pr_function *functions;
    uint32_t nfunctions, functions_cap;
    struct mf_pr_mapping *mappings;
    uint32_t nmappings, mappings_cap;
    uint64_t *comments;
    uint32_t ncomments, comments_cap;
    uint64_t period, time_ns, duration_ns;
    struct mf_pb_reader *r; /* the top-level reader, for errors */
    size_t size;            /* of the unpacked message */
    uint32_t sample_locs;   /* location ids of the sample being read */
    char *str;              /* mf_pr_str's copy */
    size_t str_cap;
};

static void mf_add_loc_id(void *ctx, uint64_t v)
{
    struct mf_pr *d = ctx;
    if (++d->sample_locs > MF_PPROF_LOCS_MAX)
        return; /* mf_pr_sample says so */
    MF_GROW(d->loc_ids, d->nloc_ids, d->loc_ids_cap);
    d->loc_ids[d->nloc_ids++] = v;
}

static void mf_add_val(void *ctx, uint64_t v)
{
    struct mf_pr *d = ctx;
    MF_GROW(d->vals, d->nvals, d->vals_cap);
    d->vals[d->nvals++] = v;
}

static void mf_add_comment(void *ctx, uint64_t v)
{
    struct mf_pr *d = ctx;
    MF_GROW(d->comments, d->ncomments, d->comments_cap);
    d->comments[d->ncomments++] = v;
}

/* The string at index i, whole (valid until the next call), or NULL (and an error) if there
 * is none. */
static const char *mf_pr_str(struct mf_pr *d, uint64_t i)
{
    if (i >= d->nstrs) {
        mf_pb_fail(d->r, "a string index is past the end of the string table");
        return NULL;
    }
    if (d->strs[i].n >= d->str_cap) {
        d->str_cap = d->strs[i].n + 1;
        d->str = mf_xrealloc(d->str, d->str_cap);
    }
    memcpy(d->str, d->strs[i].p, d->strs[i].n);
    d->str[d->strs[i].n] = '\0';
    return d->str;
}

static bool mf_pr_str_is(struct mf_pr *d, uint64_t i, const char *s)
{
    return i < d->nstrs && d->strs[i].n == strlen(s) && memcmp(d->strs[i].p, s, d->strs[i].n) == 0;
}

static void mf_pr_value_type(struct mf_pr *d, struct mf_pb_reader m)
{
    uint64_t type = 0, unit = 0;
    uint32_t field, wire;
    while (mf_pb_next(&m, &field, &wire)) {
        if (field == 1 && wire == MF_PB_VARINT)
            type = mf_pb_read_varint(&m);
        else if (field == 2 && wire == MF_PB_VARINT)
            unit = mf_pb_read_varint(&m);
        else
            mf_pb_skip(&m, wire);
    }
    MF_GROW(d->types, d->ntypes, d->types_cap);
    d->types[d->ntypes++] = type;
    MF_GROW(d->types, d->ntypes, d->types_cap);
    d->types[d->ntypes++] = unit;
    if (m.err)
        mf_pb_fail(d->r, m.err);
}

static void mf_pr_sample(struct mf_pr *d, struct mf_pb_reader m)
{
    struct mf_pr_sample s = {.locs = d->nloc_ids, .vals = d->nvals};
    uint32_t field, wire;
    while (mf_pb_next(&m, &field, &wire)) {
        if (field == 1) {
            mf_pb_read_repeated(&m, wire, mf_add_loc_id, d);
        } else if (field == 2) {
            mf_pb_read_repeated(&m, wire, mf_add_val, d);
        } else if (field == 3 && wire == MF_PB_LEN) {
            struct mf_pb_reader l = mf_pb_read_len(&m);
            uint64_t key = 0, str = 0, num = 0;
            uint32_t f2, w2;
            while (mf_pb_next(&l, &f2, &w2)) {
                if (f2 == 1 && w2 == MF_PB_VARINT)
                    key = mf_pb_read_varint(&l);
                else if (f2 == 2 && w2 == MF_PB_VARINT)
                    str = mf_pb_read_varint(&l);
                else if (f2 == 3 && w2 == MF_PB_VARINT)
                    num = mf_pb_read_varint(&l);
                else
                    mf_pb_skip(&l, w2);
            }
            if (l.err)
                mf_pb_fail(&m, l.err);
            if (key >= d->nstrs || str >= d->nstrs)
                mf_pb_fail(&m, "a label's string index is past the end of the string table");
            else if (mf_pr_str_is(d, key, "program"))
                s.program = str;
            else if (mf_pr_str_is(d, key, "pid"))
                s.pid = num;
            else if (mf_pr_str_is(d, key, "counts"))
                s.counts = str;
            else if (mf_pr_str_is(d, key, "calls_variance"))
                s.var = num;
            else if (mf_pr_str_is(d, key, "pprof::base"))
                s.base = true;
        } else {
            mf_pb_skip(&m, wire);
        }
    }
    if (d->sample_locs > MF_PPROF_LOCS_MAX)
        mf_pb_fail(&m, "a sample has more locations than the deepest stack mf_print writes "
                       "(512 frames and a pseudo-frame)");
    d->sample_locs = 0;
    if (m.err)
        mf_pb_fail(d->r, m.err);
    s.nlocs = d->nloc_ids - s.locs;
    s.nvals = d->nvals - s.vals;
    MF_GROW(d->samples, d->nsamples, d->samples_cap);
    d->samples[d->nsamples++] = s;
}

static void mf_pr_location(struct mf_pr *d, struct mf_pb_reader m)
{
    struct mf_pr_location l = {.lines = d->nlines};
    uint32_t field, wire;
    while (mf_pb_next(&m, &field, &wire)) {
        if (field == 1 && wire == MF_PB_VARINT) {
            l.id = mf_pb_read_varint(&m);
        } else if (field == 2 && wire == MF_PB_VARINT) {
            l.mapping = mf_pb_read_varint(&m);
        } else if (field == 3 && wire == MF_PB_VARINT) {
            l.address = mf_pb_read_varint(&m);
        } else if (field == 4 && wire == MF_PB_LEN) {
            struct mf_pb_reader ln = mf_pb_read_len(&m);
            struct mf_pr_line line = {0, 0};
            uint32_t f2, w2;
            while (mf_pb_next(&ln, &f2, &w2)) {
                if (f2 == 1 && w2 == MF_PB_VARINT)
                    line.function = mf_pb_read_varint(&ln);
                else if (f2 == 2 && w2 == MF_PB_VARINT)
                    line.line = (int64_t)mf_pb_read_varint(&ln);
                else
                    mf_pb_skip(&ln, w2);
            }
            if (ln.err)
                mf_pb_fail(&m, ln.err);
            if (d->nlines - l.lines >= MF_MAX_SCOPES) {
                mf_pb_fail(&m, "a location has more lines than mf_print writes (256 inlined "
                               "functions)");
                continue;
            }
            MF_GROW(d->lines, d->nlines, d->lines_cap);
            d->lines[d->nlines++] = line;
        } else {
            mf_pb_skip(&m, wire);
        }
    }
    if (m.err)
        mf_pb_fail(d->r, m.err);
    l.nlines = d->nlines - l.lines;
    MF_GROW(d->locations, d->nlocations, d->locations_cap);
    d->locations[d->nlocations++] = l;
}

static void mf_pr_function(struct mf_pr *d, struct mf_pb_reader m)
{
    struct mf_pr_function f = {0, 0, 0};
    uint32_t field, wire;
    while (mf_pb_next(&m, &field, &wire)) {
        if (field == 1 && wire == MF_PB_VARINT)
            f.id = mf_pb_read_varint(&m);
        else if (field == 2 && wire == MF_PB_VARINT)
            f.name = mf_pb_read_varint(&m);
        else if (field == 4 && wire == MF_PB_VARINT)
            f.filename = mf_pb_read_varint(&m);
        else
            mf_pb_skip(&m, wire);
    }
    if (m.err)
        mf_pb_fail(d->r, m.err);
    MF_GROW(d->functions, d->nfunctions, d->functions_cap);
    d->functions[d->nfunctions++] = f;
}

static void mf_pr_mapping(struct mf_pr *d, struct mf_pb_reader m)
{
    struct mf_pr_mapping mp = {0, 0, 0, 0, 0, 0};
    uint32_t field, wire;
    while (mf_pb_next(&m, &field, &wire)) {
        if (wire != MF_PB_VARINT)
            mf_pb_skip(&m, wire);
        else if (field == 1)
            mp.id = mf_pb_read_varint(&m);
        else if (field == 2)
            mp.start = mf_pb_read_varint(&m);
        else if (field == 3)
            mp.limit = mf_pb_read_varint(&m);
        else if (field == 4)
            mp.offset = mf_pb_read_varint(&m);
        else if (field == 5)
            mp.filename = mf_pb_read_varint(&m);
        else if (field == 6)
            mp.build_id = mf_pb_read_varint(&m);
        else
            mf_pb_skip(&m, wire);
    }
    if (m.err)
        mf_pb_fail(d->r, m.err);
    MF_GROW(d->mappings, d->nmappings, d->mappings_cap);
    d->mappings[d->nmappings++] = mp;
}

/* Two passes over the Profile message: the string table first (labels are matched by name
 * as they are read), then the rest. */
static const char *mf_pr_decode(struct mf_pr *d, const uint8_t *data, size_t n)
{
    struct mf_pb_reader r = {data, data + n, NULL};
    d->r = &r;
    uint32_t field, wire;
    /* The first pass also counts the messages, so that each array is made once, its size. */
    uint32_t count[7] = {0};
    d->size = n;
    while (mf_pb_next(&r, &field, &wire)) {
        if (field == 6 && wire == MF_PB_LEN) {
            struct mf_pb_reader s = mf_pb_read_len(&r);
            size_t len = (size_t)(s.end - s.p);
            /* The writer's strings are C strings, each once: "" only first. */
            if (d->nstrs && !len)
                mf_pb_fail(&r, "its string table holds \"\" twice");
            else if (memchr(s.p, 0, len))
                mf_pb_fail(&r, "a string holds a NUL byte");
            MF_GROW(d->strs, d->nstrs, d->strs_cap);
            d->strs[d->nstrs].p = s.p;
            d->strs[d->nstrs++].n = len;
        } else {
            if (wire == MF_PB_LEN && field >= 1 && field <= 5)
                count[field]++;
            mf_pb_skip(&r, wire);
        }
    }
    if (!r.err && (d->nstrs == 0 || d->strs[0].n != 0))
        mf_pb_fail(&r, d->nstrs ? "its string table does not start with \"\""
                                : "no string table (an empty or foreign file)");
    d->types = mf_xmalloc(((size_t)count[1] * 2 + 1) * sizeof *d->types);
    d->types_cap = count[1] * 2 + 1;
    d->samples = mf_xmalloc(((size_t)count[2] + 1) * sizeof *d->samples);
    d->samples_cap = count[2] + 1;
    d->mappings = mf_xmalloc(((size_t)count[3] + 1) * sizeof *d->mappings);
    d->mappings_cap = count[3] + 1;
    d->locations = mf_xmalloc(((size_t)count[4] + 1) * sizeof *d->locations);
    d->locations_cap = count[4] + 1;
    d->functions = mf_xmalloc(((size_t)count[5] + 1) * sizeof *d->functions);
    d->functions_cap = count[5] + 1;
    const char *err = r.err;
    r = (struct mf_pb_reader){data, data + n, err};
    if (err)
        r.p = r.end;
    while (mf_pb_next(&r, &field, &wire)) {
        if (wire == MF_PB_LEN && field >= 1 && field <= 5) {
            struct mf_pb_reader m = mf_pb_read_len(&r);
            if (field == 1)
                mf_pr_value_type(d, m);
            else if (field == 2)
                mf_pr_sample(d, m);
            else if (field == 3)
                mf_pr_mapping(d, m);
            else if (field == 4)
                mf_pr_location(d, m);
            else
                mf_pr_function(d, m);
        } else if (field == 9 && wire == MF_PB_VARINT) {
            d->time_ns = mf_pb_read_varint(&r);
        } else if (field == 10 && wire == MF_PB_VARINT) {
            d->duration_ns = mf_pb_read_varint(&r);
        } else if (field == 12 && wire == MF_PB_VARINT) {
            d->period = mf_pb_read_varint(&r);
        } else if (field == 13) {
            mf_pb_read_repeated(&r, wire, mf_add_comment, d);
        } else {
            mf_pb_skip(&r, wire);
        }
    }
    d->r = NULL;
    return r.err;
}

/* ---- id -> index ---------------------------------------------------------------------- */

/* Adds id -> i to map; false on an id of 0 or one seen before. */
static bool mf_index_id(struct mf_map *map, uint64_t id, uint32_t i)
{
    bool added;
    if (id == 0)
        return false;
    mf_map_put(map, id, NULL, NULL, i, &added);
    return added;
}

static uint32_t mf_lookup(const struct mf_map *map, uint64_t id)
{
    return id ? mf_map_get(map, id, NULL, NULL) : MF_MAP_EMPTY;
}

/* ---- the model ------------------------------------------------------------------------ */

static const char *const mf_pseudo_names[] = {MF_NAME_NOT_PROFILED, MF_NAME_TRUNCATED,
                                              MF_NAME_NO_STACK};

/* Which pseudo-frame location i is (1 + index in mf_pseudo_names), or 0. */
static int mf_pseudo(struct mf_pr *d, const struct mf_map *funcs, uint32_t i)
{
    const struct mf_pr_location *l = &d->locations[i];
    if (l->mapping || l->address || l->nlines != 1)
        return 0;
    uint32_t f = mf_lookup(funcs, d->lines[l->lines].function);
    for (int k = 0; f != MF_MAP_EMPTY && k < 3; k++)
        if (mf_pr_str_is(d, d->functions[f].name, mf_pseudo_names[k]))
            return k + 1;
    return 0;
}

/* The process of a sample labelled pid and program (a string index), made on first sight. */
static uint32_t mf_pr_process(struct mf_pr *d, struct mf_side *s, struct mf_map *procs,
                              struct mf_module *mods, uint64_t pid, uint64_t prog)
{
    struct mf_profile *p = &s->profile;
    bool added;
    uint32_t k = mf_map_put(procs, (pid & 0xffffffff) << 32 | prog, NULL, NULL, p->nprocs, &added);
    if (!added)
        return k;
    MF_GROW(p->procs, p->nprocs, p->procs_cap);
    struct mf_process *pr = &p->procs[p->nprocs++];
    memset(pr, 0, sizeof *pr);
    pr->pid = (uint32_t)pid;
    pr->dir = s->paths[0];
    pr->has_file = true;
    pr->flags = MF_PROCESS_EXITED;
    pr->start_ns = d->time_ns;
    pr->end_ns = d->time_ns + d->duration_ns;
    pr->sample_interval = d->period ? d->period : 1;
    pr->modules = mods;
    pr->nmodules = d->nmappings;
    /* the executable's path where a mapping has it: its mapping is the main one */
    const char *name = prog ? mf_pr_str(d, prog) : NULL;
    name = name ? name : "";
    mf_copy(pr->exe, sizeof pr->exe, name);
    for (uint32_t j = 0; *name && j < d->nmappings; j++)
        if (strcmp(mf_basename(mods[j].path), name) == 0) {
            mf_copy(pr->exe, sizeof pr->exe, mods[j].path);
            break;
        }
    return k;
}

static const char *mf_pr_check_and_build(struct mf_pr *d, struct mf_side *s, int *calls_i,
                                         int *bytes_i, int *samples_i)
{
    uint32_t ntypes = d->ntypes / 2;
    *calls_i = *bytes_i = *samples_i = -1;
    for (uint32_t t = 0; t < ntypes; t++) {
        uint64_t type = d->types[2 * t], unit = d->types[2 * t + 1];
        /* a --live snapshot: its live allocations and bytes are what is compared */
        if ((mf_pr_str_is(d, type, "calls") || mf_pr_str_is(d, type, "inuse_objects")) &&
            mf_pr_str_is(d, unit, "count"))
            *calls_i = (int)t;
        else if ((mf_pr_str_is(d, type, "bytes") || mf_pr_str_is(d, type, "inuse_space")) &&
                 mf_pr_str_is(d, unit, "bytes"))
            *bytes_i = (int)t;
        else if (mf_pr_str_is(d, type, "samples") && mf_pr_str_is(d, unit, "count"))
            *samples_i = (int)t;
    }
    if (*calls_i < 0 || *bytes_i < 0 || *samples_i < 0)
        return "a pprof profile, but not one mf_print wrote (its sample types are not "
               "calls/count, bytes/bytes, samples/count, or inuse_objects/count, "
               "inuse_space/bytes, samples/count)";
    for (uint32_t i = 0; i < d->nsamples; i++) {
        const struct mf_pr_sample *x = &d->samples[i];
        if (x->base)
            return "a comparison (samples labelled pprof::base), not a profile: compare the "
                   "profiles it was made of";
        if (x->nvals != ntypes)
            return "a damaged pprof profile: a sample has not one value per sample type";
        for (uint32_t v = 0; v < x->nvals; v++)
            if ((int64_t)d->vals[x->vals + v] < 0)
                return "a sample has a negative count: a comparison, not a profile";
    }

    struct mf_map maps = {0}, locs = {0}, funcs = {0};
    const char *err = NULL;
    bool ids_ok = true;
    for (uint32_t i = 0; i < d->nmappings; i++)
        ids_ok &= mf_index_id(&maps, d->mappings[i].id, i);
    for (uint32_t i = 0; i < d->nlocations; i++)
        ids_ok &= mf_index_id(&locs, d->locations[i].id, i);
    for (uint32_t i = 0; i < d->nfunctions; i++)
        ids_ok &= mf_index_id(&funcs, d->functions[i].id, i);
    if (!ids_ok)
        err = "a damaged pprof profile: a mapping, location or function id is 0 or given twice";
    for (uint32_t i = 0; !err && i < d->nlocations; i++) {
        const struct mf_pr_location *l = &d->locations[i];
        if (l->mapping && mf_lookup(&maps, l->mapping) == MF_MAP_EMPTY)
            err = "a damaged pprof profile: a location refers to a mapping the file does not have";
        for (uint32_t k = 0; !err && k < l->nlines; k++) {
            const struct mf_pr_line *ln = &d->lines[l->lines + k];
            uint32_t f = mf_lookup(&funcs, ln->function);
            if (f == MF_MAP_EMPTY)
                err = "a damaged pprof profile: a location's line refers to a function the file "
                      "does not have";
            else if (d->functions[f].name >= d->nstrs || d->functions[f].filename >= d->nstrs)
                err = "a damaged pprof profile: a function's name is past the end of the string "
                      "table";
            else if (ln->line < 0 || ln->line > UINT32_MAX)
                err = "a damaged pprof profile: a line number is out of range";
        }
    }
    for (uint32_t i = 0; !err && i < d->nmappings; i++)
        if (d->mappings[i].filename >= d->nstrs || d->mappings[i].build_id >= d->nstrs)
            err = "a damaged pprof profile: a mapping's file name is past the end of the string "
                  "table";
    for (uint32_t i = 0; !err && i < d->nloc_ids; i++)
        if (mf_lookup(&locs, d->loc_ids[i]) == MF_MAP_EMPTY)
            err = "a damaged pprof profile: a sample refers to a location the file does not have";
    /* The frames the reports will expand the stacks into, and counts whose sums the reports
     * take (the thread reader's rule: no total wraps). */
    uint64_t frames = 0, sum[4] = {0};
    for (uint32_t i = 0; !err && i < d->nloc_ids; i++) {
        uint32_t nl = d->locations[mf_lookup(&locs, d->loc_ids[i])].nlines;
        frames += nl ? nl : 1;
    }
    if (!err && frames > (uint64_t)MF_PPROF_FRAMES_PER_BYTE * d->size + 65536)
        err = "its stacks hold more frames than 16 a byte: not a profile mf_print wrote";
    for (uint32_t i = 0; !err && i < d->nsamples; i++) {
        const struct mf_pr_sample *x = &d->samples[i];
        uint64_t v[4] = {d->vals[x->vals + *calls_i], d->vals[x->vals + *bytes_i],
                         d->vals[x->vals + *samples_i], x->var};
        for (int k = 0; k < 4; k++)
            if (__builtin_add_overflow(sum[k], v[k], &sum[k]))
                err = "a damaged pprof profile: its counts add up past 2^64";
    }
    if (err)
        goto out;

    /* The processes the samples' labels name, each mapping a module of them all: lo and hi its
     * memory start and limit, bias its file offset (a comparison written as pprof writes the
     * mapping as it was read: report_pprof.c). */
    struct mf_profile *p = &s->profile;
    struct mf_model *m = &s->model;
    struct mf_module *mods = mf_xcalloc(d->nmappings, sizeof *mods);
    for (uint32_t i = 0; i < d->nmappings; i++) {
        const struct mf_pr_mapping *mp = &d->mappings[i];
        mods[i].lo = mp->start;
        mods[i].hi = mp->limit;
        mods[i].bias = mp->offset;
        mods[i].path = mf_xstrdup(mf_pr_str(d, mp->filename));
        const char *hex = mf_pr_str(d, mp->build_id);
        for (uint32_t k = 0; hex[2 * k] && hex[2 * k + 1] && k < sizeof mods[i].build_id; k++) {
            unsigned byte;
            if (sscanf(hex + 2 * k, "%2x", &byte) != 1)
                break;
            mods[i].build_id[k] = (uint8_t)byte;
            mods[i].build_id_len = k + 1;
        }
        mods[i].modfile = MF_MAP_EMPTY;
    }
    struct mf_map procs = {0};
    uint32_t *proc_of = mf_xcalloc(d->nsamples, sizeof *proc_of);
    /* Labelled samples make the processes; the unlabelled ([not profiled]) go to the first. */
    for (uint32_t i = 0; i < d->nsamples; i++)
        if (d->samples[i].pid || d->samples[i].program)
            proc_of[i] = mf_pr_process(d, s, &procs, mods, d->samples[i].pid,
                                       d->samples[i].program);
    if (!p->nprocs)
        mf_pr_process(d, s, &procs, mods, 0, 0);
    mf_map_free(&procs);
    p->nfiles_read = 1;

    /* Locations: one per pprof location (pseudo-frames become stack flags again). */
    uint32_t *loc_of = mf_xmalloc((d->nlocations ? d->nlocations : 1) * sizeof *loc_of);
    int *pseudo = mf_xcalloc(d->nlocations, sizeof *pseudo);
    for (uint32_t i = 0; i < d->nlocations; i++) {
        const struct mf_pr_location *l = &d->locations[i];
        pseudo[i] = mf_pseudo(d, &funcs, i);
        loc_of[i] = m->nlocs;
        MF_GROW(m->locs, m->nlocs, m->locs_cap);
        struct mf_location *ml = &m->locs[m->nlocs++];
        ml->process = 0;
        ml->module = l->mapping ? mf_lookup(&maps, l->mapping) : MF_NO_MODULE;
        ml->pc = l->address ? l->address + 1 : 0;
        ml->first = m->nframes;
        ml->n = l->nlines;
        for (uint32_t k = 0; k < l->nlines; k++) {
            const struct mf_pr_line *ln = &d->lines[l->lines + k];
            const struct mf_pr_function *f = &d->functions[mf_lookup(&funcs, ln->function)];
            struct mf_frame fr = {0, 0, (uint32_t)ln->line, false};
            fr.name = mf_intern(mf_pr_str(d, f->name));
            fr.file = mf_intern(mf_pr_str(d, f->filename));
            MF_GROW(m->frames, m->nframes, m->frames_cap);
            m->frames[m->nframes++] = fr;
        }
    }
    /* Stacks: one per sample. */
    for (uint32_t i = 0; i < d->nsamples; i++) {
        const struct mf_pr_sample *x = &d->samples[i];
        MF_GROW(m->stacks, m->nstacks, m->stacks_cap);
        struct mf_stack *st = &m->stacks[m->nstacks++];
        memset(st, 0, sizeof *st);
        st->process = proc_of[i];
        st->images = 1;
        st->first = m->nstack_locs;
        st->calls = d->vals[x->vals + *calls_i];
        st->bytes = d->vals[x->vals + *bytes_i];
        st->samples = d->vals[x->vals + *samples_i];
        st->var = x->var;
        st->estimated = mf_pr_str_is(d, x->counts, "estimated");
        m->estimated |= st->estimated;
        for (uint32_t k = 0; k < x->nlocs; k++) {
            uint32_t li = mf_lookup(&locs, d->loc_ids[x->locs + k]);
            int ps = pseudo[li];
            if (ps == 1 && x->nlocs == 1) {
                st->flags |= MF_STACK_NOT_PROFILED;
                continue;
            }
            if (ps == 2 && k + 1 == x->nlocs && k > 0) {
                st->flags |= MF_ENTRY_TRUNCATED;
                continue;
            }
            if (ps == 3 && x->nlocs == 1)
                continue;
            MF_GROW(m->stack_locs, m->nstack_locs, m->stack_locs_cap);
            m->stack_locs[m->nstack_locs++] = loc_of[li];
            st->depth++;
        }
    }
    m->p = p;
    m->sample_interval = d->period ? d->period : 1;
    free(loc_of);
    free(pseudo);
    free(proc_of);
out:
    mf_map_free(&maps);
    mf_map_free(&locs);
    mf_map_free(&funcs);
    return err;
}

/* "calls=N bytes=N ...": digits only (strtoull would take "-1" for 2^64 - 1), no overflow. */
static bool mf_totals(const char *c, uint64_t *calls, uint64_t *bytes)
{
    const char *keys[2] = {"calls=", " bytes="};
    uint64_t *v[2] = {calls, bytes};
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(keys[k]);
        if (strncmp(c, keys[k], n) != 0 || c[n] < '0' || c[n] > '9')
            return false;
        c += n;
        *v[k] = 0;
        for (; *c >= '0' && *c <= '9'; c++)
            if (__builtin_mul_overflow(*v[k], 10, v[k]) ||
                __builtin_add_overflow(*v[k], (uint64_t)(*c - '0'), v[k]))
                return false;
    }
    return true;
}

int mf_pprof_read(struct mf_side *s, const char *path, const struct mf_model_config *c)
{
    bool trim = c->trim;
    uint8_t *data = NULL;
    size_t n = 0;
    const char *err = NULL;
    if (mf_read_file(path, &data, &n, &err)) {
        mf_error("cannot read %s: %s", mf_esc(path), err);
        free(data);
        return 1;
    }
    if (n == 0) {
        mf_error("%s is empty: not a pprof profile", mf_esc(path));
        free(data);
        return 1;
    }
    if (mf_gunzip(&data, &n, &err)) {
        mf_error("%s: %s", mf_esc(path), err);
        free(data);
        return 1;
    }
    struct mf_pr d;
    memset(&d, 0, sizeof d);
    const char *derr = mf_pr_decode(&d, data, n);
    int rc = 0;
    if (derr) {
        mf_error("%s: not a pprof profile, or a damaged one (%s)", mf_esc(path), derr);
        rc = 1;
        goto out;
    }
    /* What the comments say: totals, sampling, trimming. */
    bool got_totals = false;
    int trimmed = -1;
    for (uint32_t i = 0; i < d.ncomments; i++) {
        struct mf_pb_reader r = {NULL, NULL, NULL};
        d.r = &r;
        const char *c = mf_pr_str(&d, d.comments[i]);
        if (!c)
            continue;
        if (strncmp(c, "totals: ", 8) == 0) {
            got_totals = mf_totals(c + 8, &s->calls, &s->bytes);
            if (!got_totals) {
                mf_error("%s: a damaged pprof profile: its totals are not two numbers below "
                         "2^64 (\"%s\")", mf_esc(path), mf_esc(c));
                rc = 1;
                goto out;
            }
        } else if (strncmp(c, "sampling: ", 10) == 0) {
            mf_copy(s->sampling, sizeof s->sampling, c + 10);
            char *end = strstr(s->sampling, "; counts are");
            if (!end)
                end = strstr(s->sampling, "; every count");
            if (end)
                *end = '\0';
        } else if (strncmp(c, "frames: ", 8) == 0) {
            trimmed = strncmp(c + 8, "all kept", 8) != 0;
        }
    }
    struct mf_pb_reader r = {NULL, NULL, NULL};
    d.r = &r;
    if (trimmed == 1 && !trim) {
        mf_error("%s was written with allocator frames trimmed: compare it without --no-trim",
                 mf_esc(path));
        rc = 2;
        goto out;
    }
    if (trimmed == 0 && trim) {
        mf_error("%s was written with --no-trim: compare it with --no-trim", mf_esc(path));
        rc = 2;
        goto out;
    }
    int ci, bi, si;
    const char *bad = mf_pr_check_and_build(&d, s, &ci, &bi, &si);
    if (bad || r.err) {
        mf_error("%s: %s", mf_esc(path), bad ? bad : r.err);
        rc = 1;
        goto out;
    }
    s->model.trim = trim;
    s->model.xf = c->xf ? *c->xf : (struct mf_transform){.fold = true, .cut = true};
    mf_model_transform(&s->model); /* as a profile directory's: no change to frames written so */
    /* A --live snapshot's counts are the live heap's; its totals comment the run's calls (an
     * older mf_print's, the live heap's): what is compared is the samples' sum. */
    if (mf_pr_str_is(&d, d.types[2 * ci], "inuse_objects")) {
        s->model.view = MF_VIEW_LIVE;
        got_totals = false;
        s->calls = s->bytes = 0;
    }
    if (!got_totals) {
        for (uint32_t i = 0; i < s->model.nstacks; i++) {
            s->calls += s->model.stacks[i].calls;
            s->bytes += s->model.stacks[i].bytes;
        }
    }
    s->model.view_calls = s->calls;
    s->model.view_bytes = s->bytes;
    if (!s->sampling[0])
        snprintf(s->sampling, sizeof s->sampling, "not said in the file");
out:
    free(d.strs);
    free(d.types);
    free(d.samples);
    free(d.loc_ids);
    free(d.vals);
    free(d.locations);
    free(d.lines);
    free(d.functions);
    free(d.mappings);
    free(d.comments);
    free(d.str);
    /* The strings the model needs are interned or copied: the bytes can go. */
    free(data);
    return rc;
}
