/* libFuzzer target for mf_print's read+validate stage: the input is one profile directory,
 *   u32 n (little-endian), n bytes of a thread file, then the rest: a process file
 * (n larger than what follows: all of it is the thread file; an empty part: no such file).
 * Both are written to a directory of their own and go through the real reader, the model
 * (symbolization included), the caller tree and the tree and CSV reports (to /dev/null), as
 * mf_print runs them. tests/fuzz/run_fuzz.sh builds it with clang -fsanitize=fuzzer,address,
 * undefined, seeds it with real profiles written by the preload library and runs it for a
 * bounded time (make test-fuzz). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call_tree.h"
#include "mf_print.h"
#include "model.h"
#include "profile_read.h"
#include "report.h"
#include "symbolize.h"

static char mf_fuzz_dir[256];
static char mf_thread_path[300], mf_process_path[300];
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

static void mf_profile_free(struct mf_profile *p)
{
    for (uint32_t i = 0; i < p->nprocs; i++) {
        for (uint32_t k = 0; k < p->procs[i].nmodules; k++)
            free(p->procs[i].modules[k].path);
        free(p->procs[i].modules);
        free(p->procs[i].sizes);
    }
    free(p->procs);
    mf_profile_drop_frames(p); /* the raw stacks' frames, in chunks */
    free(p->stacks);
    free(p->stack_sizes);
}

static void mf_model_free(struct mf_model *m)
{
    free(m->locs);
    free(m->frames);
    free(m->stack_locs);
    free(m->stacks);
}

static void mf_tree_free(struct mf_tree *t)
{
    free(t->nodes);
    free(t->child_ids); /* every node's children, one array */
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
    mf_devnull = fopen("/dev/null", "w");
    if (!mf_devnull)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t n = 0;
    if (size >= 4) {
        memcpy(&n, data, 4);
        data += 4;
        size -= 4;
    }
    size_t thread_len = n < size ? n : size;
    mf_put(mf_thread_path, data, thread_len);
    mf_put(mf_process_path, data + thread_len, size - thread_len);

    struct mf_profile p = {0};
    bool bad = mf_profile_read_dir(&p, mf_fuzz_dir);
    mf_profile_finish(&p);
    if (!bad && p.nfiles_read) {
        const char *dirs[] = {mf_fuzz_dir};
        struct mf_report_options o = {.threshold = 1.0, .trim = true, .dirs = dirs, .ndirs = 1};
        struct mf_model m;
        mf_model_build(&m, &p, true);
        struct mf_tree t;
        mf_tree_build(&t, &m, o.threshold, mf_profile_total_calls(&p));
        mf_report_tree(mf_devnull, &p, &t, &o);
        mf_report_csv(mf_devnull, &m);
        /* the stacks' size classes: --by site,size and --sizes --tune */
        o.by_site = o.by_size = true;
        o.site_depth = 4;
        const struct mf_model *one = &m;
        mf_report_sites(mf_devnull, &one, NULL, 1, &o);
        mf_report_tune(mf_devnull, &m, &o);
        mf_tree_free(&t);
        mf_model_free(&m);
    }
    mf_symbolize_end();
    mf_profile_free(&p);
    return 0;
}
