/* --format pprof: the model as a gzip-compressed profile.proto (github.com/google/pprof,
 * proto/profile.proto), for go tool pprof, Pyroscope, Parca, speedscope.
 *
 *   sample_type   calls/count, bytes/bytes, samples/count; default_sample_type calls
 *   sample        one per stack of the model: its locations innermost first, the frames the
 *                 other reports show (plumbing trimmed, wrappers folded, start-up frames
 *                 cut and --hide's frames hidden as they do it, so sites and numbers agree
 *                 across formats); labels program (the executable's basename) and pid; via,
 *                 the wrapper folded into the site (xmalloc), when there is one; on an
 *                 estimate counts=estimated and calls_variance, the variance of its calls
 *                 (--base reads both back for its error bars)
 *   location      one per return address of a process image (and per stretch of its frames
 *                 shown, where one stack trims or cuts part of an inlined chain another keeps):
 *                 address = return address - 1, inside the call instruction, so that a tool
 *                 symbolizing the address itself finds the call's line as mf_print does; one
 *                 Line per frame, inlined functions first, the function they were inlined
 *                 into last. Pseudo-frames ([not profiled], ...) are locations without a
 *                 mapping or an address.
 *   function      one per (demangled name, source file)
 *   mapping       one per module of a process image used: path, build id in hex, and the
 *                 address range and file offset of its executable segment, read from the
 *                 file's program headers (what /proc/pid/maps would show, and what pprof's
 *                 own symbolizer needs to find the segment: given the whole image from
 *                 offset 0 it takes the first, read-only, segment for the code and finds no
 *                 line); if the file is gone or has another build id, the module's whole
 *                 range at offset 0. has_functions/filenames/line_numbers/inline_frames are
 *                 set: mf_print has symbolized everything it could, pprof need not try
 *                 again (-symbolize=force makes it, and it finds the same lines). The main
 *                 executable's mapping comes first, as pprof wants.
 *   period        the sample interval (1: exact; default mode: the largest weight), with
 *                 period_type calls/count; comments say the sampling mode, the exact totals
 *                 and whether plumbing frames were trimmed (pprof_read.c reads them back)
 *
 * A comparison (--base) is written the way go tool pprof -diff_base sees two profiles: NEW's
 * samples as they are, OLD's negated and labelled pprof::base=true (so percentages are of
 * OLD's total), each labelled change=significant|within error|none by the diff's rule.
 *
 * The encoding is written by hand (protobuf.h) and compressed with zlib's gzip. */
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "diff.h"
#include "mf_print.h"
#include "protobuf.h"
#include "report.h"
#include "transform.h"

/* profile.proto's field numbers. */
enum {
    PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10, PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
    LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
    MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3, MAPPING_FILE_OFFSET = 4,
    MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6, MAPPING_HAS_FUNCTIONS = 7,
    MAPPING_HAS_FILENAMES = 8, MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
    LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1, LINE_LINE = 2,
    FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
};

struct mf_pp_mapping {
    uint64_t start, limit, offset;
    uint32_t file, build_id; /* interned */
    bool main;               /* the process's executable */
};

/* The profile being built. Samples, locations and functions are encoded as they come; the
 * string table and mappings at the end. */
struct mf_pp {
    bool live; /* --live: inuse_* and alloc_* sample types */
    bool live_diff; /* a comparison of live heaps: inuse_* sample types */
    struct mf_pb samples, locations, functions, tmp, line, lines, ids, values;
    struct mf_map strings; /* interned id -> string table index */
    uint32_t *strtab;      /* string table index -> interned id */
    uint32_t nstr, strcap;
    struct mf_map funcs; /* name << 32 | file -> function id */
    uint32_t nfuncs;
    struct mf_map locs; /* see mf_pp_location -> location id */
    uint32_t nlocs;
    /* The same for a whole location (nothing trimmed), by side and model location: an
     * array, not a hash, for the tens of millions of frames of a big profile. 0: none. */
    uint32_t *whole[2];
    uint32_t nwhole[2];
    struct mf_map maps; /* side << 63 | process << 32 | module -> mapping id - 1 */
    struct mf_pp_mapping *mappings;
    uint32_t nmappings, mappings_cap;
};

static uint64_t mf_pp_str(struct mf_pp *pp, uint32_t interned)
{
    if (!pp->nstr) { /* string_table[0] is "" (interned id 0) */
        MF_GROW(pp->strtab, pp->nstr, pp->strcap);
        pp->strtab[pp->nstr++] = 0;
        bool added;
        mf_map_put(&pp->strings, 0, NULL, NULL, 0, &added);
    }
    bool added;
    uint32_t idx = mf_map_put(&pp->strings, interned, NULL, NULL, pp->nstr, &added);
    if (added) {
        MF_GROW(pp->strtab, pp->nstr, pp->strcap);
        pp->strtab[pp->nstr++] = interned;
    }
    return idx;
}

static uint64_t mf_pp_cstr(struct mf_pp *pp, const char *s)
{
    return mf_pp_str(pp, mf_intern(s));
}

static uint64_t mf_pp_function(struct mf_pp *pp, uint32_t name, uint32_t file)
{
    bool added;
    uint32_t id = mf_map_put(&pp->funcs, (uint64_t)name << 32 | file, NULL, NULL, pp->nfuncs + 1,
                             &added);
    if (added) {
        pp->nfuncs++;
        uint64_t n = mf_pp_str(pp, name);
        mf_pb_uint(&pp->tmp, FUNCTION_ID, id);
        mf_pb_uint(&pp->tmp, FUNCTION_NAME, n);
        mf_pb_uint(&pp->tmp, FUNCTION_SYSTEM_NAME, n); /* the mangled name is not kept */
        mf_pb_uint(&pp->tmp, FUNCTION_FILENAME, mf_pp_str(pp, file));
        mf_pb_message(&pp->functions, PROFILE_FUNCTION, &pp->tmp);
    }
    return id;
}

/* The span of the executable PT_LOAD segments of the module's file, page-aligned: start and
 * limit as file virtual addresses, and the file offset of start. False if the file cannot be
 * read or is not the one recorded (another build id). */
static bool mf_exec_segment(const struct mf_module *mod, uint64_t *start, uint64_t *limit,
                            uint64_t *offset)
{
    const uint64_t page = 4096;
    if (!mod->path || !mod->path[0])
        return false;
    const char *why;
    int fd = mf_open_regular(mod->path, true, UINT64_MAX, &why); /* a FIFO would block */
    if (fd < 0)
        return false;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    bool found = false;
    size_t n = 0;
    if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &n) == 0) {
        const void *id = NULL;
        ssize_t len = dwelf_elf_gnu_build_id(e, &id);
        bool same = mod->build_id_len == 0 || (len == (ssize_t)mod->build_id_len &&
                                               memcmp(id, mod->build_id, (size_t)len) == 0);
        for (size_t i = 0; same && i < n; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
                (ph.p_vaddr - ph.p_offset) % page)
                continue;
            if (!found) {
                *start = ph.p_vaddr & ~(page - 1);
                *offset = ph.p_offset & ~(page - 1);
            }
            *limit = (ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
            found = true;
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return found;
}

/* The mapping of location l's module. A side read from a pprof file keeps the mapping it
 * read (pprof_read.c: lo, hi and the file offset in bias). */
static uint64_t mf_pp_mapping(struct mf_pp *pp, int side, const struct mf_model *m,
                              const struct mf_location *l, bool as_read)
{
    if (l->module == MF_NO_MODULE)
        return 0;
    const struct mf_process *pr = &m->p->procs[l->process];
    const struct mf_module *mod = &pr->modules[l->module];
    uint64_t key = (uint64_t)side << 63 | (uint64_t)l->process << 32 | l->module;
    bool added;
    uint32_t i = mf_map_put(&pp->maps, key, NULL, NULL, pp->nmappings, &added);
    if (added) {
        char hex[2 * sizeof mod->build_id + 1] = "";
        uint32_t idlen = mod->build_id_len < sizeof mod->build_id ? mod->build_id_len
                                                                  : sizeof mod->build_id;
        for (uint32_t k = 0; k < idlen; k++)
            snprintf(hex + 2 * k, 3, "%02x", mod->build_id[k]);
        struct mf_pp_mapping mp = {mod->lo, mod->hi, 0, mf_intern(mod->path ? mod->path : ""),
                                   mf_intern(hex),
                                   pr->has_file && mod->path && strcmp(mod->path, pr->exe) == 0};
        uint64_t start, limit, offset;
        if (as_read) {
            mp.offset = mod->bias;
        } else if (mf_exec_segment(mod, &start, &limit, &offset)) {
            mp.start = start + mod->bias;
            mp.limit = limit + mod->bias;
            mp.offset = offset;
        }
        MF_GROW(pp->mappings, pp->nmappings, pp->mappings_cap);
        pp->mappings[pp->nmappings++] = mp;
    }
    return i + 1;
}

/* A pseudo-frame: a location with one line and nothing else. */
static uint64_t mf_pp_pseudo(struct mf_pp *pp, const char *name)
{
    uint32_t n = mf_intern(name);
    bool added;
    uint32_t id = mf_map_put(&pp->locs, 1ull << 62 | n, NULL, NULL, pp->nlocs + 1, &added);
    if (added) {
        pp->nlocs++;
        uint64_t fid = mf_pp_function(pp, n, 0); /* before pp->tmp is used */
        mf_pb_uint(&pp->tmp, LOCATION_ID, id);
        mf_pb_uint(&pp->line, LINE_FUNCTION_ID, fid);
        mf_pb_message(&pp->tmp, LOCATION_LINE, &pp->line);
        mf_pb_message(&pp->locations, PROFILE_LOCATION, &pp->tmp);
    }
    return id;
}

/* Location loc of stack s of the model of this side: its frames from the skip-th on, keep
 * of them, less the hidden ones (transform.h); one pprof location per such selection. */
static uint64_t mf_pp_location(struct mf_pp *pp, int side, const struct mf_model *m, uint32_t loc,
                               uint32_t skip, uint32_t keep, struct mf_pb *lines, bool as_read)
{
    uint64_t key = (uint64_t)side << 63 | (uint64_t)(skip & 0x7fff) << 47 |
                   (uint64_t)(keep & 0x7fff) << 32 | loc;
    bool added;
    uint32_t id;
    if (skip == 0 && side < 2) {
        if (pp->nwhole[side] < m->nlocs) {
            pp->whole[side] = mf_xrealloc(pp->whole[side], m->nlocs * sizeof **pp->whole);
            memset(pp->whole[side] + pp->nwhole[side], 0,
                   (m->nlocs - pp->nwhole[side]) * sizeof **pp->whole);
            pp->nwhole[side] = m->nlocs;
        }
        id = pp->whole[side][loc];
        if (id)
            return id;
        id = pp->whole[side][loc] = pp->nlocs + 1;
    } else {
        id = mf_map_put(&pp->locs, key, NULL, NULL, pp->nlocs + 1, &added);
        if (!added)
            return id;
    }
    pp->nlocs++;
    const struct mf_location *l = &m->locs[loc];
    lines->n = 0;
    for (uint32_t j = skip; j < skip + keep; j++) {
        const struct mf_frame *f = &m->frames[l->first + j];
        if (mf_name_hidden(m, f->name))
            continue;
        uint64_t fid = mf_pp_function(pp, f->name, f->file); /* before pp->tmp is used */
        mf_pb_uint(&pp->line, LINE_FUNCTION_ID, fid);
        mf_pb_int(&pp->line, LINE_LINE, f->line);
        mf_pb_message(lines, LOCATION_LINE, &pp->line);
    }
    mf_pb_uint(&pp->tmp, LOCATION_ID, id);
    mf_pb_uint(&pp->tmp, LOCATION_MAPPING_ID, mf_pp_mapping(pp, side, m, l, as_read));
    mf_pb_uint(&pp->tmp, LOCATION_ADDRESS, l->pc ? l->pc - 1 : 0);
    mf_pb_append(&pp->tmp, lines);
    mf_pb_message(&pp->locations, PROFILE_LOCATION, &pp->tmp);
    return id;
}

static void mf_pp_label_str(struct mf_pp *pp, const char *key, const char *value)
{
    mf_pb_uint(&pp->line, LABEL_KEY, mf_pp_cstr(pp, key));
    mf_pb_uint(&pp->line, LABEL_STR, mf_pp_cstr(pp, value));
    mf_pb_message(&pp->tmp, SAMPLE_LABEL, &pp->line);
}

static void mf_pp_label_num(struct mf_pp *pp, const char *key, uint64_t value)
{
    mf_pb_uint(&pp->line, LABEL_KEY, mf_pp_cstr(pp, key));
    mf_pb_uint(&pp->line, LABEL_NUM, value);
    mf_pb_message(&pp->tmp, SAMPLE_LABEL, &pp->line);
}

static const char *mf_pp_program(const struct mf_process *pr)
{
    return pr->has_file && pr->exe[0] ? mf_basename(pr->exe) : "?";
}

static void mf_pp_int_value(struct mf_pb *b, int64_t v)
{
    mf_pb_varint(b, (uint64_t)v);
}

static int64_t mf_pp_clamp(uint64_t v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* One sample per stack of model m. side 1 (a comparison's OLD) is negated and labelled
 * pprof::base=true; d, if given, labels each sample with its row's change. */
static void mf_pp_add_model(struct mf_pp *pp, int side, const struct mf_model *m, int sign,
                            const struct mf_diff *d, int dside, bool as_read)
{
    bool hiding = m->xf.nhide != 0; /* else no frame's name need be looked at */
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        if (s->flags & MF_STACK_NOT_PROFILED) {
            mf_pb_varint(&pp->ids, mf_pp_pseudo(pp, MF_NAME_NOT_PROFILED));
        } else {
            uint32_t total = mf_model_nframes(m, s), k = 0, shown = 0;
            for (uint32_t i = 0; i < s->depth; i++) {
                uint32_t loc = m->stack_locs[s->first + i];
                const struct mf_location *l = &m->locs[loc];
                uint32_t skip = l->n, keep = 0, visible = 0;
                if (!hiding) { /* the frames shown are [trimmed, total - cut), in a row */
                    uint32_t lo = s->trimmed > k ? s->trimmed : k;
                    uint32_t end = s->cut < total ? total - s->cut : 0;
                    uint32_t hi = end < k + l->n ? end : k + l->n;
                    if (lo < hi) {
                        skip = lo - k;
                        keep = visible = hi - lo;
                    }
                    k += l->n;
                }
                for (uint32_t j = 0; hiding && j < l->n; j++, k++) {
                    if (k < s->trimmed || k + s->cut >= total)
                        continue;
                    if (skip == l->n)
                        skip = j;
                    keep = j + 1 - skip;
                    visible += !mf_name_hidden(m, m->frames[l->first + j].name);
                }
                if (!visible)
                    continue;
                mf_pb_varint(&pp->ids, mf_pp_location(pp, side, m, loc, skip, keep, &pp->lines,
                                                      as_read));
                shown += visible;
            }
            /* As mf_model_frames: every stack shows a frame, a cut one says so. */
            uint32_t pseudo = mf_model_pseudo(s, shown);
            if (pseudo)
                mf_pb_varint(&pp->ids, mf_pp_pseudo(pp, mf_str(pseudo)));
        }
        mf_pp_int_value(&pp->values, sign * mf_pp_clamp(s->calls));
        mf_pp_int_value(&pp->values, sign * mf_pp_clamp(s->bytes));
        if (pp->live) { /* alloc_objects, alloc_space: the stack's calls and bytes */
            const struct mf_raw_stack *raw = s->raw != UINT32_MAX ? &m->p->stacks[s->raw] : NULL;
            mf_pp_int_value(&pp->values, sign * mf_pp_clamp(raw ? raw->calls : 0));
            mf_pp_int_value(&pp->values, sign * mf_pp_clamp(raw ? raw->bytes : 0));
        }
        mf_pp_int_value(&pp->values, sign * mf_pp_clamp(s->samples));
        mf_pb_message(&pp->tmp, SAMPLE_LOCATION_ID, &pp->ids);
        mf_pb_message(&pp->tmp, SAMPLE_VALUE, &pp->values);
        if (!(s->flags & MF_STACK_NOT_PROFILED)) {
            const struct mf_process *pr = &m->p->procs[s->process];
            mf_pp_label_str(pp, "program", mf_pp_program(pr));
            mf_pp_label_num(pp, "pid", pr->pid);
        }
        if (s->via) /* the wrapper folded into the site (transform.h) */
            mf_pp_label_str(pp, "via", mf_str(s->via));
        if (s->estimated) { /* pprof drops a numeric label of 0: the flag is a string */
            mf_pp_label_str(pp, "counts", "estimated");
            if (s->var)
                mf_pp_label_num(pp, "calls_variance", s->var);
        }
        if (sign < 0)
            mf_pp_label_str(pp, "pprof::base", "true");
        if (d) {
            const struct mf_diff_row *r = &d->stacks[d->row_of[dside][i]];
            mf_pp_label_str(pp, "change", r->significant ? "significant"
                                          : r->dcalls    ? "within error"
                                                         : "none");
        }
        mf_pb_message(&pp->samples, PROFILE_SAMPLE, &pp->tmp);
    }
}

/* Compresses data into out as one gzip member. Returns true if zlib failed (after saying so);
 * a failed write is left for the caller's check of the stream. */
static bool mf_gzip_write(FILE *out, const uint8_t *data, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    /* Level 1: a profile of 10^6 stacks is ~100 MB before compression, and the default
     * level took 2.3 s of it; the file comes out half again as large (10.5 -> 16.0 MB). */
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK) {
        mf_error("cannot compress the profile: zlib: %s", z.msg ? z.msg : "deflateInit2 failed");
        return true;
    }
    static uint8_t buf[1 << 16];
    size_t left = n;
    int flush, rc;
    do {
        if (z.avail_in == 0 && left) {
            uInt chunk = left > (1u << 30) ? 1u << 30 : (uInt)left;
            z.next_in = (Bytef *)(data + (n - left));
            z.avail_in = chunk;
            left -= chunk;
        }
        flush = left ? Z_NO_FLUSH : Z_FINISH;
        z.next_out = buf;
        z.avail_out = sizeof buf;
        rc = deflate(&z, flush);
        if (rc == Z_STREAM_ERROR) {
            mf_error("cannot compress the profile: zlib: %s", z.msg ? z.msg : "stream error");
            deflateEnd(&z);
            return true;
        }
        size_t have = sizeof buf - z.avail_out;
        if (have && fwrite(buf, 1, have, out) != have)
            break; /* the caller sees the stream's error */
    } while (rc != Z_STREAM_END);
    deflateEnd(&z);
    return false;
}

/* Writes the profile: the parts built so far, then the header fields, the mappings (the main
 * executable's first) and the string table. */
static bool mf_pp_finish(struct mf_pp *pp, FILE *out, const char *const *comments, int ncomments,
                         uint64_t period, uint64_t time_ns, uint64_t duration_ns)
{
    struct mf_pb p = {0}, sub = {0};
    static const char *const types[3][2] = {{"calls", "count"}, {"bytes", "bytes"},
                                            {"samples", "count"}};
    /* --live: as a Go heap profile's (go tool pprof -sample_index=inuse_space) */
    static const char *const live_types[5][2] = {{"inuse_objects", "count"},
                                                 {"inuse_space", "bytes"},
                                                 {"alloc_objects", "count"},
                                                 {"alloc_space", "bytes"},
                                                 {"samples", "count"}};
    for (int i = 0; i < (pp->live ? 5 : 3); i++) {
        const char *const *ty = pp->live ? live_types[i] : pp->live_diff && i < 2 ? live_types[i] : types[i];
        mf_pb_uint(&sub, VALUE_TYPE_TYPE, mf_pp_cstr(pp, ty[0]));
        mf_pb_uint(&sub, VALUE_TYPE_UNIT, mf_pp_cstr(pp, ty[1]));
        mf_pb_message(&p, PROFILE_SAMPLE_TYPE, &sub);
    }
    uint32_t main = UINT32_MAX;
    for (uint32_t i = 0; i < pp->nmappings && main == UINT32_MAX; i++)
        if (pp->mappings[i].main)
            main = i;
    struct mf_pb maps = {0};
    for (uint32_t k = 0; k < pp->nmappings; k++) {
        /* main first, then the others in id order */
        uint32_t i = main == UINT32_MAX ? k : k == 0 ? main : k <= main ? k - 1 : k;
        const struct mf_pp_mapping *mp = &pp->mappings[i];
        mf_pb_uint(&sub, MAPPING_ID, i + 1);
        mf_pb_uint(&sub, MAPPING_MEMORY_START, mp->start);
        mf_pb_uint(&sub, MAPPING_MEMORY_LIMIT, mp->limit);
        mf_pb_uint(&sub, MAPPING_FILE_OFFSET, mp->offset);
        mf_pb_uint(&sub, MAPPING_FILENAME, mf_pp_str(pp, mp->file));
        mf_pb_uint(&sub, MAPPING_BUILD_ID, mf_pp_str(pp, mp->build_id));
        mf_pb_bool(&sub, MAPPING_HAS_FUNCTIONS, true);
        mf_pb_bool(&sub, MAPPING_HAS_FILENAMES, true);
        mf_pb_bool(&sub, MAPPING_HAS_LINE_NUMBERS, true);
        mf_pb_bool(&sub, MAPPING_HAS_INLINE_FRAMES, true);
        mf_pb_message(&maps, PROFILE_MAPPING, &sub);
    }
    struct mf_pb tail = {0};
    mf_pb_uint(&tail, PROFILE_TIME_NANOS, time_ns > INT64_MAX ? 0 : time_ns);
    mf_pb_uint(&tail, PROFILE_DURATION_NANOS, duration_ns > INT64_MAX ? 0 : duration_ns);
    mf_pb_uint(&sub, VALUE_TYPE_TYPE, mf_pp_cstr(pp, "calls"));
    mf_pb_uint(&sub, VALUE_TYPE_UNIT, mf_pp_cstr(pp, "count"));
    mf_pb_message(&tail, PROFILE_PERIOD_TYPE, &sub);
    mf_pb_uint(&tail, PROFILE_PERIOD, period > INT64_MAX ? INT64_MAX : period);
    for (int i = 0; i < ncomments; i++)
        mf_pb_varint(&sub, mf_pp_cstr(pp, comments[i]));
    if (sub.n)
        mf_pb_message(&tail, PROFILE_COMMENT, &sub);
    mf_pb_uint(&tail, PROFILE_DEFAULT_SAMPLE_TYPE, mf_pp_cstr(pp, pp->live || pp->live_diff ? "inuse_space" : "calls"));

    /* Every string is in the table now. */
    struct mf_pb strs = {0};
    for (uint32_t i = 0; i < pp->nstr; i++)
        mf_pb_string(&strs, PROFILE_STRING_TABLE, mf_str(pp->strtab[i]));

    const struct mf_pb *parts[] = {&p, &pp->samples, &maps, &pp->locations, &pp->functions,
                                   &strs, &tail};
    size_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        total += parts[i]->n;
    uint8_t *all = mf_xmalloc(total);
    size_t at = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        if (parts[i]->n)
            memcpy(all + at, parts[i]->b, parts[i]->n);
        at += parts[i]->n;
    }
    bool failed = mf_gzip_write(out, all, total);
    free(all);
    struct mf_pb *owned[] = {&p,         &sub,           &maps,          &tail,
                             &strs,      &pp->samples,   &pp->locations, &pp->functions,
                             &pp->tmp,   &pp->line,      &pp->lines,     &pp->ids,
                             &pp->values};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++)
        mf_pb_free(owned[i]);
    mf_map_free(&pp->strings);
    mf_map_free(&pp->funcs);
    mf_map_free(&pp->locs);
    free(pp->whole[0]);
    free(pp->whole[1]);
    mf_map_free(&pp->maps);
    free(pp->strtab);
    free(pp->mappings);
    return failed;
}

static uint64_t mf_start_ns(const struct mf_profile *p)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < p->nprocs; i++)
        if (p->procs[i].has_file && p->procs[i].start_ns && (!t || p->procs[i].start_ns < t))
            t = p->procs[i].start_ns;
    return t;
}

bool mf_report_pprof(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    if (isatty(fileno(out))) {
        mf_error("--format pprof writes gzip data, not text: give -o FILE (or --save FILE)");
        return true;
    }
    struct mf_pp pp;
    memset(&pp, 0, sizeof pp);
    pp.live = m->view == MF_VIEW_LIVE;
    mf_pp_add_model(&pp, 0, m, 1, NULL, 0, false);
    char programs[512], sampling[512], what[1100], mode[800], totals[160];
    mf_side_programs(m->p, programs, sizeof programs);
    mf_sampling_text(m->p, sampling, sizeof sampling);
    snprintf(what, sizeof what, "malloc_freq: %s of %s, from %s%s (mf_print)",
             pp.live ? "the live heap (--live)" : "allocator calls", programs, o->ndirs ? o->dirs[0] : "?", o->ndirs > 1 ? " and more" : "");
    if (m->estimated)
        snprintf(mode, sizeof mode, "sampling: %s; counts are estimates (a sample's "
                 "calls_variance label: the variance of its calls; period: the largest sample "
                 "interval, %llu)", sampling, (unsigned long long)m->sample_interval);
    else
        snprintf(mode, sizeof mode, "sampling: %s; every count is exact", sampling);
    snprintf(totals, sizeof totals, "totals: calls=%llu bytes=%llu (exact, over every thread)",
             (unsigned long long)mf_profile_total_calls(m->p),
             (unsigned long long)mf_profile_total_bytes(m->p));
    const char *comments[] = {what, mode, totals,
                              o->trim ? "frames: allocator and profiler frames trimmed"
                                      : "frames: all kept (--no-trim)"};
    return mf_pp_finish(&pp, out, comments, 4, m->sample_interval, mf_start_ns(m->p),
                        mf_profile_wall_ns(m->p));
}

bool mf_report_diff_pprof(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_diff *d = v->diff;
    if (isatty(fileno(out))) {
        mf_error("--format pprof writes gzip data, not text: give -o FILE (or --save FILE)");
        return true;
    }
    struct mf_pp pp;
    memset(&pp, 0, sizeof pp);
    pp.live_diff = mf_diff_live(d);
    const struct mf_side *old = d->side[0], *new_ = d->side[1];
    mf_pp_add_model(&pp, 0, &new_->model, 1, d, 1, new_->pprof);
    mf_pp_add_model(&pp, 1, &old->model, -1, d, 0, old->pprof);
    char what[1200], sides[2][2000], rule[300], pa[600], pb[600];
    mf_side_programs(&old->profile, pa, sizeof pa);
    mf_side_programs(&new_->profile, pb, sizeof pb);
    snprintf(what, sizeof what, "malloc_freq comparison (mf_print --base): %s against the base "
             "%s; OLD's samples are negated and labelled pprof::base=true, as go tool pprof "
             "-diff_base does, so totals and percentages are OLD's", new_->paths[0], old->paths[0]);
    char counts[2][100];
    for (int k = 0; k < 2; k++) {
        const struct mf_side *s = d->side[k];
        snprintf(counts[k], sizeof counts[k], pp.live_diff ? "alive=%llu live_bytes=%llu"
                                                           : "calls=%llu bytes=%llu (exact)",
                 (unsigned long long)s->calls, (unsigned long long)s->bytes);
        snprintf(sides[k], sizeof sides[k], "%s: %.300s, %s; %s; sampling: %s", k ? "new" : "old",
                 s->paths[0], k ? pb : pa, counts[k], s->sampling);
    }
    snprintf(rule, sizeof rule, "change label: significant (exact counts that differ, or an "
             "estimate that moved by more than %d standard errors of the change), within error, "
             "or none", MF_DIFF_SIGMAS);
    const char *comments[] = {what, sides[0], sides[1], rule,
                              o->trim ? "frames: allocator and profiler frames trimmed"
                                      : "frames: all kept (--no-trim)"};
    uint64_t period = d->interval[0] > d->interval[1] ? d->interval[0] : d->interval[1];
    return mf_pp_finish(&pp, out, comments, 5, period, mf_start_ns(&new_->profile),
                        mf_profile_wall_ns(&new_->profile));
}
