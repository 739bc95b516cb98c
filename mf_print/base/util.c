/* The helpers declared in mf_print.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mf_print.h"
#include "report.h"

bool mf_errors_muted;

/* The names in a message are escaped where it is made (mf_esc); a control character or a
 * byte that is not UTF-8 that one left raw is escaped here all the same (mf_put_text). */
void mf_error(const char *fmt, ...)
{
    if (mf_errors_muted)
        return;
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&line, fmt, ap) < 0)
        line = NULL;
    va_end(ap);
    fputs("mf_print: ", stderr);
    mf_put_text(stderr, line ? line : "(a message too large to make)");
    fputc('\n', stderr);
    free(line);
}

void mf_out_of_memory(void)
{
    fputs("mf_print: out of memory\n", stderr);
    exit(3);
}

static void *mf_oom(void *p)
{
    if (!p)
        mf_out_of_memory();
    return p;
}

void *mf_xmalloc(size_t size)
{
    return mf_oom(malloc(size ? size : 1));
}

void *mf_xrealloc(void *p, size_t size)
{
    return mf_oom(realloc(p, size ? size : 1));
}

void *mf_grow_zeroed(void *v, uint32_t *n, uint32_t id, size_t size)
{
    if (id < *n)
        return v;
    uint32_t want = id + 1 > 2 * *n ? id + 1 : 2 * *n;
    v = mf_xrealloc(v, (size_t)want * size);
    memset((char *)v + (size_t)*n * size, 0, (size_t)(want - *n) * size);
    *n = want;
    return v;
}

void *mf_xcalloc(size_t n, size_t size)
{
    return mf_oom(calloc(n ? n : 1, size ? size : 1));
}

char *mf_xstrdup(const char *s)
{
    return mf_oom(strdup(s));
}

uint64_t mf_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* The key of this run's hashes: a file's contents cannot be chosen to make keys collide
 * (one probe chain for every address, or every stack in one bucket) without knowing it. */
static uint64_t mf_key[2];

/* Drawn once, before main, and never again: a map's slots (mf_slot) depend on it, and the
 * hashes (mf_hash_bytes, mf_hash_u64s) run on two threads at once (mf_in_halves). */
__attribute__((constructor)) static void mf_key_init(void)
{
    if (getrandom(mf_key, sizeof mf_key, GRND_NONBLOCK) != (ssize_t)sizeof mf_key) {
        struct timespec ts; /* no entropy yet (early boot): the clock and the pid */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        mf_key[0] = mf_hash_u64((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30);
        mf_key[1] = mf_hash_u64(mf_key[0] ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&ts);
    }
}

uint64_t mf_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    /* Eight bytes at a time through a bijective mixer, keyed at the start and at each step. */
    uint64_t h = mf_hash_u64(mf_key[0] ^ seed ^ (uint64_t)n << 3);
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = mf_hash_u64((h ^ w) + mf_key[1]);
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    return mf_hash_u64((h ^ w) + mf_key[1]);
}

/* A key's first slot: keyed, so that chosen keys do not share one probe chain. */
static size_t mf_slot(uint64_t key, size_t mask)
{
    return mf_hash_u64(key ^ mf_key[0]) & mask;
}

uint64_t mf_hash_u64s(const uint64_t *v, size_t n, uint64_t seed)
{
    /* Four lanes: one chain of multiplies waits on each multiply in turn (a 40-frame stack
     * took 200 ns of the 10^6-stack profile's reading); keyed like the rest, so that a file
     * cannot choose stacks of one hash. */
    const uint64_t k = 0x9e3779b97f4a7c15u;
    uint64_t a = mf_key[0] ^ seed, b = mf_key[1], c = ~mf_key[0], d = mf_key[1] ^ n;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a = (a ^ v[i]) * k + (a >> 29);
        b = (b ^ v[i + 1]) * k + (b >> 29);
        c = (c ^ v[i + 2]) * k + (c >> 29);
        d = (d ^ v[i + 3]) * k + (d >> 29);
    }
    for (; i < n; i++)
        a = (a ^ v[i]) * k + (a >> 29);
    return mf_hash_u64(mf_hash_u64(a ^ mf_hash_u64(b)) ^ mf_hash_u64(c ^ mf_hash_u64(d ^ n)));
}

static void mf_map_grow(struct mf_map *m)
{
    struct mf_map old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->keys = mf_xmalloc(m->cap * sizeof *m->keys);
    m->vals = mf_xmalloc(m->cap * sizeof *m->vals);
    memset(m->vals, 0xff, m->cap * sizeof *m->vals);
    size_t mask = m->cap - 1;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.vals[i] == MF_MAP_EMPTY)
            continue;
        size_t j = mf_slot(old.keys[i], mask);
        while (m->vals[j] != MF_MAP_EMPTY)
            j = (j + 1) & mask;
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
    }
    free(old.keys);
    free(old.vals);
}

static size_t mf_map_find(const struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx)
{
    size_t mask = m->cap - 1, i = mf_slot(key, mask);
    while (m->vals[i] != MF_MAP_EMPTY && !(m->keys[i] == key && (!eq || eq(ctx, m->vals[i]))))
        i = (i + 1) & mask;
    return i;
}

uint32_t mf_map_get(const struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx)
{
    return m->cap ? m->vals[mf_map_find(m, key, eq, ctx)] : MF_MAP_EMPTY;
}

uint32_t mf_map_put(struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx,
                    uint32_t new_val, bool *added)
{
    if ((m->n + 1) * 2 > m->cap)
        mf_map_grow(m);
    size_t i = mf_map_find(m, key, eq, ctx);
    *added = m->vals[i] == MF_MAP_EMPTY;
    if (*added) {
        m->keys[i] = key;
        m->vals[i] = new_val;
        m->n++;
    }
    return m->vals[i];
}

void mf_map_prefetch(const struct mf_map *m, uint64_t key)
{
    if (!m->cap)
        return;
    size_t i = mf_slot(key, m->cap - 1);
    __builtin_prefetch(&m->keys[i]);
    __builtin_prefetch(&m->vals[i]);
}

void mf_map_free(struct mf_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static char **mf_strings;
static uint32_t mf_nstrings, mf_strings_cap;
static struct mf_map mf_string_ids;

static bool mf_string_eq(const void *ctx, uint32_t id)
{
    return strcmp(mf_strings[id], ctx) == 0;
}

uint32_t mf_intern(const char *s)
{
    if (!mf_nstrings) { /* id 0 is "" */
        MF_GROW(mf_strings, mf_nstrings, mf_strings_cap);
        mf_strings[mf_nstrings++] = mf_xstrdup("");
    }
    if (!*s)
        return 0;
    bool added;
    uint32_t id = mf_map_put(&mf_string_ids, mf_hash_bytes(s, strlen(s), 0), mf_string_eq, s,
                             mf_nstrings, &added);
    if (added) {
        MF_GROW(mf_strings, mf_nstrings, mf_strings_cap);
        mf_strings[mf_nstrings++] = mf_xstrdup(s);
    }
    return id;
}

const char *mf_str(uint32_t id)
{
    return id < mf_nstrings ? mf_strings[id] : "";
}

static int mf_id_str_cmp(const void *a, const void *b)
{
    return strcmp(mf_strings[*(const uint32_t *)a], mf_strings[*(const uint32_t *)b]);
}

uint32_t *mf_str_ranks(void)
{
    uint32_t n = mf_nstrings ? mf_nstrings : 1;
    uint32_t *ids = mf_xmalloc(n * sizeof *ids), *rank = mf_xmalloc(n * sizeof *rank);
    for (uint32_t i = 0; i < mf_nstrings; i++)
        ids[i] = i;
    if (mf_nstrings > 1)
        qsort(ids, mf_nstrings, sizeof *ids, mf_id_str_cmp);
    rank[0] = 0;
    for (uint32_t i = 0; i < mf_nstrings; i++)
        rank[ids[i]] = i;
    free(ids);
    return rank;
}

const char *mf_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

const char *mf_fmt_count(char *buf, uint64_t n)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    char *p = buf;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            *p++ = ',';
        *p++ = digits[i];
    }
    *p = '\0';
    return buf;
}

const char *mf_fmt_compact(char *buf, uint64_t n)
{
    static const char units[] = "kMGTPE";
    if (n < 10000) {
        snprintf(buf, 32, "%llu", (unsigned long long)n);
        return buf;
    }
    double v = (double)n / 1000.0;
    unsigned u = 0;
    while (v >= 999.5 && u + 1 < sizeof units - 1) {
        v /= 1000.0;
        u++;
    }
    snprintf(buf, 32, v < 9.95 ? "%.1f%c" : "%.0f%c", v, units[u]);
    return buf;
}

const char *mf_fmt_bytes(char *buf, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    while (bytes >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%.0f B", bytes);
    else
        snprintf(buf, 32, "%.1f %s", bytes, units[u]);
    return buf;
}

/* ---- hostile text and files -------------------------------------------------------------- */

const char *mf_file_kind(mode_t mode)
{
    return S_ISREG(mode)    ? "a regular file"
           : S_ISFIFO(mode) ? "not a regular file (a FIFO)"
           : S_ISCHR(mode)  ? "not a regular file (a character device)"
           : S_ISBLK(mode)  ? "not a regular file (a block device)"
           : S_ISDIR(mode)  ? "not a regular file (a directory)"
           : S_ISLNK(mode)  ? "a symbolic link (not followed)"
                            : "not a regular file";
}

int mf_open_regular(const char *path, bool follow, uint64_t max_size, const char **why)
{
    return mf_open_regular_at(AT_FDCWD, path, follow, max_size, why);
}

int mf_open_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 || errno != ENAMETOOLONG)
        return fd;
    /* Longer than PATH_MAX: opened a piece at a time, each piece (whole components, less
     * than PATH_MAX) relative to the directory the last one reached. */
    int at = AT_FDCWD;
    char piece[PATH_MAX];
    for (const char *s = path; *s;) {
        size_t n = strlen(s);
        if (n >= sizeof piece) {
            n = sizeof piece - 1;
            while (n > 0 && s[n] != '/')
                n--;
            if (n == 0) { /* one name longer than PATH_MAX */
                if (at != AT_FDCWD)
                    close(at);
                errno = ENAMETOOLONG;
                return -1;
            }
        }
        memcpy(piece, s, n);
        piece[n] = '\0';
        fd = openat(at, piece, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int err = errno;
        if (at != AT_FDCWD)
            close(at);
        if (fd < 0) {
            errno = err;
            return -1;
        }
        at = fd;
        for (s += n; *s == '/';)
            s++;
    }
    return at;
}

int mf_open_regular_at(int dirfd, const char *path, bool follow, uint64_t max_size,
                       const char **why)
{
    static char buf[96];
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0) {
        *why = errno == ELOOP && !follow ? "a symbolic link (not followed)" : strerror(errno);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *why = strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        *why = mf_file_kind(st.st_mode);
    } else if ((uint64_t)st.st_size > max_size) {
        char a[32], b[32];
        snprintf(buf, sizeof buf, "too large (%s bytes; at most %s)",
                 mf_fmt_count(a, (uint64_t)st.st_size), mf_fmt_count(b, max_size));
        *why = buf;
    } else {
        return fd;
    }
    close(fd);
    return -1;
}

size_t mf_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return got;
}

static void mf_replace_free(struct mf_replace *r)
{
    if (r->old >= 0)
        close(r->old);
    if (r->dir >= 0)
        close(r->dir);
    free(r->name);
    free(r->tmp);
    r->old = r->dir = -1;
    r->name = r->tmp = NULL;
}

int mf_replace_open(struct mf_replace *r, const char *path, const char *option)
{
    *r = (struct mf_replace){.path = path, .option = option, .dir = -1, .old = -1};
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        mf_error("cannot write %s: not a file name", mf_esc(path));
        return -1;
    }
    /* The directory as the path names it (its own links followed: the user's choice); the
     * file's name and the new file's are then taken in that directory only. */
    char *dir = slash ? mf_xstrdup(path) : mf_xstrdup(".");
    if (slash)
        dir[slash == path ? 1 : slash - path] = '\0';
    r->dir = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    int fd = -1;
    struct stat st;
    if (r->dir < 0)
        goto fail;
    r->name = mf_xstrdup(base);
    r->old = openat(r->dir, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (r->old < 0 && errno != ENOENT)
        goto fail;
    if (r->old >= 0) {
        if (fstat(r->old, &st) != 0)
            goto fail;
        if (!S_ISREG(st.st_mode)) {
            mf_error("cannot write %s: %s; %s replaces only a regular file", mf_esc(path),
                     mf_file_kind(st.st_mode), option);
            mf_replace_free(r);
            return -1;
        }
    }
    size_t n = strlen(base) + 8;
    r->tmp = mf_xmalloc(n);
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        uint32_t x;
        if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x)
            x = (uint32_t)mf_hash_u64((uint64_t)getpid() << 32 ^ (uint64_t)tries ^ (uint64_t)time(NULL));
        snprintf(r->tmp, n, "%s.%06x", base, x & 0xffffff);
        fd = openat(r->dir, r->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            goto fail;
    }
    struct stat mine;
    if (fd < 0 || fstat(fd, &mine) != 0)
        goto fail;
    r->dev = mine.st_dev;
    r->ino = mine.st_ino;
    /* An old file keeps its permissions (not set-user-ID and the like); a new one is 0600. */
    if (r->old >= 0 && fchmod(fd, st.st_mode & 0777) != 0)
        goto fail;
    return fd;
fail:
    mf_error("cannot write %s: %s", mf_esc(path), strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlinkat(r->dir, r->tmp, 0);
    }
    mf_replace_free(r);
    return -1;
}

/* Whether name in r's directory is the file of descriptor fd (or, fd < 0, the new file). */
static bool mf_replace_is(const struct mf_replace *r, const char *name, int fd)
{
    struct stat a, b;
    if (fstatat(r->dir, name, &a, AT_SYMLINK_NOFOLLOW) != 0)
        return false;
    if (fd < 0)
        return a.st_dev == r->dev && a.st_ino == r->ino;
    return fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool mf_replace_end(struct mf_replace *r, bool keep)
{
    const char *what = NULL;
    int err = 0;
    if (!keep) {
        unlinkat(r->dir, r->tmp, 0);
        mf_replace_free(r);
        return false;
    }
    if (r->old < 0) {
        /* A new name: taken only if nothing took it meanwhile. */
        if (renameat2(r->dir, r->tmp, r->dir, r->name, RENAME_NOREPLACE) == 0)
            goto done;
        err = errno;
        if (err == EINVAL || err == ENOSYS) { /* no RENAME_NOREPLACE here: link is as strict */
            if (linkat(r->dir, r->tmp, r->dir, r->name, 0) == 0) {
                unlinkat(r->dir, r->tmp, 0);
                goto done;
            }
            err = errno;
        }
        if (err == EEXIST)
            what = "something was made at that name while the report was written";
    } else if (renameat2(r->dir, r->tmp, r->dir, r->name, RENAME_EXCHANGE) == 0) {
        /* The old file is now at tmp's name: removed if it is the file checked, else put
         * back as it was (it changed meanwhile). */
        if (mf_replace_is(r, r->tmp, r->old)) {
            unlinkat(r->dir, r->tmp, 0);
            goto done;
        }
        if (renameat2(r->dir, r->tmp, r->dir, r->name, RENAME_EXCHANGE) != 0)
            err = errno;
        what = "it was replaced while the report was written";
    } else if (errno == EINVAL || errno == ENOSYS) {
        /* No exchange on this file system: the same check, just before a plain rename. */
        if (!mf_replace_is(r, r->name, r->old))
            what = "it was replaced or removed while the report was written";
        else if (renameat(r->dir, r->tmp, r->dir, r->name) == 0)
            goto done;
        else
            err = errno;
    } else if (errno == ENOENT) {
        what = "it was removed while the report was written";
    } else {
        err = errno;
    }
    if (what && !err)
        mf_error("cannot replace %s: %s (left as it is)", mf_esc(r->path), what);
    else if (what)
        mf_error("cannot replace %s: %s (and putting it back failed: %s)", mf_esc(r->path),
                 what, strerror(err));
    else
        mf_error("cannot replace %s: %s", mf_esc(r->path), strerror(err));
    if (mf_replace_is(r, r->tmp, -1))
        unlinkat(r->dir, r->tmp, 0);
    mf_replace_free(r);
    return true;
done:
    mf_replace_free(r);
    return false;
}

struct mf_half {
    void (*fn)(void *ctx, int half, uint32_t lo, uint32_t hi);
    void *ctx;
    uint32_t lo, hi;
};

static void *mf_second_half(void *arg)
{
    const struct mf_half *h = arg;
    h->fn(h->ctx, 1, h->lo, h->hi);
    return NULL;
}

void mf_in_halves(uint32_t n, void (*fn)(void *ctx, int half, uint32_t lo, uint32_t hi), void *ctx)
{
    struct mf_half second = {fn, ctx, n / 2, n};
    pthread_t t;
    bool threaded = n >= MF_HALVES_MIN && pthread_create(&t, NULL, mf_second_half, &second) == 0;
    fn(ctx, 0, 0, n / 2);
    if (threaded)
        pthread_join(t, NULL);
    else
        fn(ctx, 1, n / 2, n);
}

static void *mf_worker_main(void *arg)
{
    struct mf_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->busy && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->busy)
            break;
        pthread_mutex_unlock(&w->mu);
        w->run(w->ctx);
        pthread_mutex_lock(&w->mu);
        w->busy = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void mf_worker_start(struct mf_worker *w, void (*run)(void *ctx), void *ctx)
{
    memset(w, 0, sizeof *w);
    w->run = run;
    w->ctx = ctx;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->threaded = pthread_create(&w->thread, NULL, mf_worker_main, w) == 0;
}

bool mf_worker_idle(struct mf_worker *w)
{
    pthread_mutex_lock(&w->mu);
    bool idle = !w->busy;
    pthread_mutex_unlock(&w->mu);
    return idle;
}

void mf_worker_wait(struct mf_worker *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void mf_worker_give(struct mf_worker *w)
{
    if (!w->threaded) {
        w->run(w->ctx);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->busy = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void mf_worker_stop(struct mf_worker *w)
{
    if (w->threaded) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}
