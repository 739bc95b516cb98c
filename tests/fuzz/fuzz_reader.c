/* libFuzzer target for mf_print's readers: the input starts with a u32 (little-endian)
 * whose top two bits choose the reader and whose other 30 bits are a length n:
 *   0: a profile directory: n bytes of a thread file, then the rest: a process file (n larger
 *      than what follows: all of it is the thread file; an empty part: no such file). These
 *      are the inputs of before the choice (n < 2^30). With bit 29 set (n is the bits
 *      below it) both files are there twice, the second image's stamp one more: two images
 *      of one program, read merged (merge_images).
 *   1: a saved profile (pprof, gzipped or not), the rest of the input, read as --base reads
 *      it (n's lowest bit: --no-trim).
 *   2: a profile directory with a live heap file (--live): n bytes of a thread file, a u32 m
 *      and m bytes of a process file, then the rest: the live file. The thread and live files
 *      are named as the writer names them, by their headers' stamp, seq and tid.
 *   3: a profile directory with a timeline (timeline.mftl, mf_format.h): laid out as 2, the
 *      rest the timeline file, read by --timeline and the HTML page.
 * The files are written to a directory of their own and go through the real reader (the
 * live reader with the model's live view), the model (symbolization included) and the
 * reports of that reader's modes (to /dev/null), as mf_print runs them (the timeline's:
 * --timeline's three and the HTML page). tests/fuzz/
 * run_fuzz.sh builds it with clang -fsanitize=fuzzer,address,undefined, seeds it with real
 * profiles, saved profiles and live files and runs each reader for a share of the time
 * (make test-fuzz). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call_tree.h"
#include "diff.h"
#include "mf_print.h"
#include "model.h"
#include "profile_read.h"
#include "report.h"
#include "symbolize.h"
#include "timeline.h"

static char mf_fuzz_dir[256];
static char mf_thread_path[300], mf_process_path[300], mf_pprof_path[300];
/* A second image of the same program: the same files, another stamp (merge_images). */
static char mf_image_thread_path[300], mf_image_process_path[300];
static char mf_named_thread[300], mf_live_path[300]; /* the last named (sel 2), to remove */
static char mf_timeline_path[300];
static FILE *mf_devnull;

static void mf_put(const char *path, const uint8_t *data, size_t n)
{
    unlink(path);
    if (!n)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    while (n) {
        ssize_t w = write(fd, data, n);
        if (w <= 0)
            abort();
        data += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* data (n bytes, NULL: none) with the stamp at offset 16 one more, at path. */
static void mf_put_image(const char *path, const uint8_t *data, size_t n)
{
    if (!data || n < 24) {
        unlink(path);
        return;
    }
    uint8_t *copy = malloc(n);
    if (!copy)
        abort();
    memcpy(copy, data, n);
    uint64_t stamp;
    memcpy(&stamp, copy + 16, 8);
    stamp++;
    memcpy(copy + 16, &stamp, 8);
    mf_put(path, copy, n);
    free(copy);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(mf_fuzz_dir, sizeof mf_fuzz_dir, "%s/mf_fuzz.XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(mf_fuzz_dir))
        abort();
    /* The names the writer gives (the reader only reads such names). */
    snprintf(mf_thread_path, sizeof mf_thread_path, "%s/thread.0123456789abcdef.0.1.mft",
             mf_fuzz_dir);
    snprintf(mf_process_path, sizeof mf_process_path, "%s/process.0123456789abcdef.mfp",
             mf_fuzz_dir);
    snprintf(mf_image_thread_path, sizeof mf_image_thread_path,
             "%s/thread.1123456789abcdef.0.2.mft", mf_fuzz_dir);
    snprintf(mf_image_process_path, sizeof mf_image_process_path,
             "%s/process.1123456789abcdef.mfp", mf_fuzz_dir);
    snprintf(mf_pprof_path, sizeof mf_pprof_path, "%s/saved.pb.gz", mf_fuzz_dir);
    snprintf(mf_timeline_path, sizeof mf_timeline_path, "%s/" MF_TL_FILE, mf_fuzz_dir);
    mf_devnull = fopen("/dev/null", "w");
    if (!mf_devnull)
        abort();
    return 0;
}

static uint64_t mf_u64_at(const uint8_t *data, size_t size, size_t at)
{
    uint64_t v = 0;
    if (size >= at + 8)
        memcpy(&v, data + at, 8);
    return v;
}

/* The reports of a profile directory read (with live, of its live view), through the
 * registry's lines for those kinds, as mf_print runs them. */
static void mf_fuzz_reports(struct mf_profile *p, bool live, bool timeline)
{
    const char *dirs[] = {mf_fuzz_dir};
    struct mf_report_options o = {.threshold = 1.0, .trim = true, .dirs = dirs, .ndirs = 1,
                                  .sort_temporary = true, .site_depth = 4};
    struct mf_model_config c = {true, live ? MF_VIEW_LIVE : MF_VIEW_CALLS, NULL};
    struct mf_model m;
    mf_model_build(&m, p, &c);
    const struct mf_model *one = &m;
    struct mf_report_input in = {.p = p, .model = &m, .parts = &one, .nparts = 1};
    struct mf_timeline t;
    if (timeline) { /* its reports, then the page with its chart */
        uint64_t *ids = NULL;
        if (mf_timeline_read(&t, mf_fuzz_dir) == 0) {
            ids = mf_stack_ids(p, t.version);
            in.timeline = &t;
            in.stack_ids = ids;
            static const char *const tformats[] = {"tree", "csv", "json"};
            for (size_t i = 0; i < sizeof tformats / sizeof *tformats; i++)
                mf_report_find(tformats[i], MF_KIND_TIMELINE)->fn(mf_devnull, &in, &o);
            mf_report_find("html", MF_KIND_PLAIN)->fn(mf_devnull, &in, &o);
            mf_timeline_free(&t);
        }
        free(ids);
        mf_model_free(&m);
        return;
    }
    static const char *const formats[] = {"tree", "csv", "json"};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        mf_report_find(formats[i], live ? MF_KIND_LIVE : MF_KIND_PLAIN)->fn(mf_devnull, &in, &o);
    if (!live) { /* the stacks' size classes: --by site,size and --sizes --tune */
        o.by_site = o.by_size = true;
        mf_report_find("csv", MF_KIND_SITES)->fn(mf_devnull, &in, &o);
        mf_report_find("tree", MF_KIND_TUNE)->fn(mf_devnull, &in, &o);
    }
    mf_model_free(&m);
}

static void mf_side_free(struct mf_side *s)
{
    struct mf_profile *p = &s->profile;
    if (s->pprof && p->nprocs) { /* the saved profile's processes share one module array */
        for (uint32_t k = 0; k < p->procs[0].nmodules; k++)
            free(p->procs[0].modules[k].path);
        free(p->procs[0].modules);
        for (uint32_t i = 0; i < p->nprocs; i++)
            p->procs[i].nmodules = 0, p->procs[i].modules = NULL;
    }
    mf_profile_free(p);
    mf_model_free(&s->model);
}

static void mf_diff_free(struct mf_diff *d)
{
    for (uint32_t i = 0; i < d->nsites; i++)
        free(d->sites[i].frames);
    for (uint32_t i = 0; i < d->nstacks; i++)
        free(d->stacks[i].frames);
    free(d->sites);
    free(d->stacks);
    free(d->row_of[0]);
    free(d->row_of[1]);
}

/* A saved profile, read as --base reads OLD, compared with itself in each format. */
static void mf_fuzz_pprof(const uint8_t *data, size_t size, bool trim)
{
    mf_put(mf_pprof_path, data, size);
    if (!size)
        return;
    static struct mf_side s;
    const char *paths[] = {mf_pprof_path};
    struct mf_model_config c = {trim, MF_VIEW_CALLS, NULL};
    if (mf_side_read(&s, paths, 1, &c) == 0) {
        const char *dirs[] = {mf_pprof_path};
        struct mf_report_options o = {.threshold = 1.0, .trim = trim, .dirs = dirs, .ndirs = 1};
        struct mf_diff d;
        mf_diff_build(&d, &s, &s);
        struct mf_report_input in = {.diff = &d};
        static const char *const formats[] = {"tree", "csv", "pprof"};
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            mf_report_find(formats[i], MF_KIND_BASE)->fn(mf_devnull, &in, &o);
        mf_diff_free(&d);
    }
    mf_symbolize_end();
    mf_side_free(&s);
    unlink(mf_pprof_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t n = 0;
    if (size >= 4) {
        memcpy(&n, data, 4);
        data += 4;
        size -= 4;
    }
    unsigned sel = n >> 30;
    if (sel == 1) {
        mf_fuzz_pprof(data, size, !(n & 1));
        return 0;
    }
    if (sel == 0) {
        bool image = n >> 29 & 1;
        n &= (1u << 29) - 1;
        size_t thread_len = n < size ? n : size;
        mf_put(mf_thread_path, data, thread_len);
        mf_put(mf_process_path, data + thread_len, size - thread_len);
        /* With bit 29 set: the same files again as another image of the program, whose
         * stacks the reader moves to the first's (mf_rebase), its stamp (offset 16 in both
         * headers) one more. */
        mf_put_image(mf_image_thread_path, image ? data : NULL, thread_len);
        mf_put_image(mf_image_process_path, image ? data + thread_len : NULL, size - thread_len);
    } else {
        unlink(mf_thread_path); /* a directory input's, named otherwise */
        unlink(mf_image_thread_path);
        unlink(mf_image_process_path);
        n &= ~(3u << 30);
        size_t thread_len = n < size ? n : size;
        const uint8_t *thread = data, *process = data + thread_len;
        size -= thread_len;
        uint32_t m = 0;
        if (size >= 4) {
            memcpy(&m, process, 4);
            process += 4;
            size -= 4;
        }
        size_t process_len = m < size ? m : size;
        /* the thread file's stamp, seq and tid; the live file's name has the process's */
        uint32_t tid = 0;
        if (thread_len >= 32)
            memcpy(&tid, thread + 28, 4);
        snprintf(mf_named_thread, sizeof mf_named_thread, "%s/thread.%016llx.%llu.%u.mft",
                 mf_fuzz_dir, (unsigned long long)mf_u64_at(thread, thread_len, 16),
                 (unsigned long long)mf_u64_at(thread, thread_len, 32), tid);
        snprintf(mf_live_path, sizeof mf_live_path, "%s/live.%016llx.mfl", mf_fuzz_dir,
                 (unsigned long long)mf_u64_at(process, process_len, 16));
        mf_put(mf_named_thread, thread, thread_len);
        mf_put(mf_process_path, process, process_len);
        mf_put(sel == 2 ? mf_live_path : mf_timeline_path, process + process_len,
               size - process_len);
    }

    struct mf_profile p = {.merge_images = sel == 0};
    bool bad = mf_profile_read_dir(&p, mf_fuzz_dir);
    mf_profile_finish(&p);
    if (!bad && p.nfiles_read && (sel != 2 || !mf_live_attach(&p, true)))
        mf_fuzz_reports(&p, sel == 2, sel == 3);
    mf_symbolize_end();
    mf_profile_free(&p);
    if (sel >= 2) {
        unlink(mf_named_thread);
        unlink(mf_live_path);
        unlink(mf_timeline_path);
    }
    return 0;
}
