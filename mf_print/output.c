/* The report's output (output.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "names.h"
#include "output.h"


FILE *mf_cut_begin(struct mf_cut *c, FILE *out, unsigned width)
{
    memset(c, 0, sizeof c[0]);
    c->out = out;
    if (width && (c->mem = open_memstream(&c->text, &c->len)))
        return c->mem;
    return out;
}

void mf_cut_end(struct mf_cut *c, unsigned width)
{
    if (!c->mem)
        return;
    fclose(c->mem);
    mf_cut_lines(c->out, c->text, c->len, width);
    free(c->text);
}

/* A regular file is written through a stream of ours: past its first 64 MiB, with
 * RWF_DONTCACHE (Linux 6.14), so that each page leaves the page cache once it is on disk.
 * The first bytes stay cached for the script that reads the report next; a report of
 * gigabytes (4 GB of CSV at 10^6 stacks) then does not push the page cache out, and on this
 * virtual machine writes in a fifth of the time: 3.9 GB took 11-14 s of kernel time into
 * the page cache, 2.8-3.5 s uncached (memory that writeback frees is reused at once, not
 * taken anew from a host that reclaims what the guest freed). A kernel or file system
 * without it answers EOPNOTSUPP and the rest is written as usual; a pipe or a terminal is
 * written by stdio as it always was. */
#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#define MF_CACHED_OUT ((uint64_t)64 << 20)


static ssize_t mf_file_write(void *cookie, const char *buf, size_t size)
{
    struct mf_file_out *c = cookie;
    size_t done = 0;
    while (done < size) {
        ssize_t n;
        if (c->uncached && c->written >= MF_CACHED_OUT) {
            struct iovec v = {(void *)(buf + done), size - done};
            n = pwritev2(c->fd, &v, 1, -1, RWF_DONTCACHE);
            if (n < 0 && errno == EOPNOTSUPP) {
                c->uncached = false;
                continue;
            }
        } else {
            n = write(c->fd, buf + done, size - done);
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { /* a short count is stdio's error */
            if (!c->err)
                c->err = n < 0 ? errno : EIO;
            break;
        }
        done += (size_t)n;
        c->written += (uint64_t)n;
    }
    return (ssize_t)done;
}


/* f writes a regular file: through mf_file_write from now on. */
static void mf_output_uncached(struct mf_output *o)
{
    struct stat st;
    int fd = fileno(o->f);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fflush(o->f) != 0)
        return;
    o->file = (struct mf_file_out){fd, true, 0, 0};
    FILE *f = fopencookie(&o->file, "w", (cookie_io_functions_t){.write = mf_file_write});
    if (!f)
        return;
    o->buf = mf_xmalloc((size_t)1 << 20);
    setvbuf(f, o->buf, _IOFBF, (size_t)1 << 20); /* glibc takes a size only with a buffer */
    o->under = o->f;
    o->f = f;
}

bool mf_output_open(struct mf_output *o, const char *path, bool replace)
{
    memset(o, 0, sizeof *o);
    o->f = stdout;
    o->path = path;
    if (!path) {
        mf_output_uncached(o);
        return false;
    }
    if (replace) {
        int fd = mf_replace_open(&o->replace, path, "--save");
        if (fd < 0)
            return true;
        if (!(o->f = fdopen(fd, "w"))) {
            mf_error("cannot write %s: %s", mf_esc(path), strerror(errno));
            close(fd);
            mf_replace_end(&o->replace, false);
            return true;
        }
        o->replacing = true;
        mf_output_uncached(o);
        return false;
    }
    if (!(o->f = fopen(path, "w"))) {
        mf_error("cannot write %s: %s", mf_esc(path), strerror(errno));
        return true;
    }
    mf_output_uncached(o);
    return false;
}

/* Returns true if the report could not be written whole (after saying why). */
bool mf_output_close(struct mf_output *o, bool failed)
{
    bool bad = fflush(o->f) != 0 || ferror(o->f);
    int err = o->under && o->file.err ? o->file.err : errno;
    if (o->under) {
        fclose(o->f); /* flushed: what failed is known */
        free(o->buf);
        o->f = o->under;
    }
    if (o->f != stdout && fclose(o->f) != 0 && !bad) {
        bad = true;
        err = errno;
    }
    if (bad)
        mf_error("cannot write the report%s%s: %s", o->path ? " to " : "", o->path ? mf_esc(o->path) : "",
                 strerror(err));
    if (o->replacing && mf_replace_end(&o->replace, !bad && !failed))
        bad = true;
    return bad;
}

