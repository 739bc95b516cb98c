/* Small helpers shared by mf_print's files: messages, allocation that cannot fail, growable
 * arrays, a hash map, and interned strings (function and file names are compared by id);
 * text.h's escaping and widths come with them. */
#ifndef MF_PRINT_H
#define MF_PRINT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "mf_format.h"
#include "text.h"

/* An allocation function's name as reports show it: its MF_FN_NAMES name, or "function #N"
 * for one a newer writer added. */
static inline const char *mf_fn_label(char *buf, size_t size, int fn)
{
    if (fn < MF_FN_NAMED)
        snprintf(buf, size, "%s", mf_fn_names[fn]);
    else
        snprintf(buf, size, "function #%d", fn);
    return buf;
}
/* One line on stderr, prefixed "mf_print: ". */
void mf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* While true, mf_error says nothing: the timeline's recorder reads a run as it starts and
 * its files are made, and reads again at its next snapshot what it could not read now. */
extern bool mf_errors_muted;
/* Out of memory is the only error mf_print does not survive: mf_out_of_memory says so and
 * exits with status 3, as every allocation here does when it fails. */
void mf_out_of_memory(void) __attribute__((noreturn));
void *mf_xmalloc(size_t size);
void *mf_xrealloc(void *p, size_t size);
void *mf_xcalloc(size_t n, size_t size);
char *mf_xstrdup(const char *s);

/* Makes room for one more element in a growable array (ptr, count, cap). */
#define MF_GROW(ptr, count, cap)                                                  \
    do {                                                                          \
        if ((count) >= (cap)) {                                                   \
            (cap) = (cap) ? (cap) * 2 : 16;                                       \
            (ptr) = mf_xrealloc((ptr), (size_t)(cap) * sizeof *(ptr));            \
        }                                                                         \
    } while (0)

/* v, an array of *n elements of size bytes, grown (doubling) to hold element id, the new
 * elements zeroed: a table by interned id made as ids turn up. */
void *mf_grow_zeroed(void *v, uint32_t *n, uint32_t id, size_t size);
uint64_t mf_hash_u64(uint64_t x);
uint64_t mf_hash_bytes(const void *p, size_t n, uint64_t seed);
/* The same for an array of 64-bit words (a stack), a word at a time. */
uint64_t mf_hash_u64s(const uint64_t *v, size_t n, uint64_t seed);

/* Open addressing from a 64-bit key to a uint32_t value (usually an index into an array
 * the caller owns). Keys may collide on purpose (a hash of a longer key): then eq(ctx, v)
 * tells whether the stored value v is the one looked for; eq == NULL means the key is exact. */
#define MF_MAP_EMPTY UINT32_MAX
struct mf_map {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;
};
typedef bool (*mf_map_eq)(const void *ctx, uint32_t val);
/* The stored value, or MF_MAP_EMPTY. */
uint32_t mf_map_get(const struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx);
/* The stored value; if there is none, stores new_val, sets *added and returns new_val. */
uint32_t mf_map_put(struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx,
                    uint32_t new_val, bool *added);
/* Starts loading the cache lines of bytes at p: a stack's frames read a few stacks from now,
 * which lie apart from the ones read before. */
static inline void mf_prefetch_range(const void *p, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 64)
        __builtin_prefetch((const char *)p + i);
}
/* A second thread that runs one task at a time for the thread that owns it. Only the owner
 * hands tasks over, so a worker seen idle stays idle until the owner fills in the next task
 * (the data run reads) and gives it; what run wrote is the owner's once it sees the worker
 * idle again. With no thread to be had, a task runs in the owner when given. */
struct mf_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool threaded, busy, stop;
    void (*run)(void *ctx);
    void *ctx;
};
void mf_worker_start(struct mf_worker *w, void (*run)(void *ctx), void *ctx);
bool mf_worker_idle(struct mf_worker *w);
void mf_worker_wait(struct mf_worker *w); /* until it is idle */
void mf_worker_give(struct mf_worker *w); /* the task filled in: run it */
void mf_worker_stop(struct mf_worker *w); /* after the task it runs, if any */

/* Runs fn(ctx, 0, 0, n / 2) and fn(ctx, 1, n / 2, n) for a pass over n stacks: on two
 * threads from MF_HALVES_MIN stacks on (below, a thread costs more than it saves), else one
 * after the other. fn's halves must share nothing they write. */
#define MF_HALVES_MIN 65536
void mf_in_halves(uint32_t n, void (*fn)(void *ctx, int half, uint32_t lo, uint32_t hi), void *ctx);
/* Starts loading key's first slot: a put or get of it a few keys later finds it cached. */
void mf_map_prefetch(const struct mf_map *m, uint64_t key);
void mf_map_free(struct mf_map *m);

/* Interned strings: equal strings get equal ids, id 0 is "". Never freed. */
uint32_t mf_intern(const char *s);
const char *mf_str(uint32_t id);
/* Each interned id's place in the strings' strcmp order, while no string is added: ranks
 * compare as their strings do (equal strings are one id), without reading them. */
uint32_t *mf_str_ranks(void);

const char *mf_basename(const char *path);
/* Opens path for reading if it is a regular file of at most max_size bytes (never blocks:
 * a FIFO is refused, not waited for; with follow false a symbolic link is refused too).
 * Returns the descriptor, or -1 with *why saying why (a static string). */
int mf_open_regular(const char *path, bool follow, uint64_t max_size, const char **why);
/* The same for path relative to the directory dirfd (or AT_FDCWD). */
int mf_open_regular_at(int dirfd, const char *path, bool follow, uint64_t max_size,
                       const char **why);
/* len bytes of fd at offset off into buf with pread, to the end or the first short read
 * (EOF, an error): returns the bytes read. */
size_t mf_pread_full(int fd, uint8_t *buf, size_t len, uint64_t off);
/* Opens the directory path (O_DIRECTORY, following symbolic links as open does), however
 * long: one longer than PATH_MAX is opened a piece at a time. -1 with errno on failure. */
int mf_open_dir(const char *path);
/* What a file of this mode is, for a message: "not a regular file (a FIFO)", ... */
const char *mf_file_kind(mode_t mode);
/* Writing a file whole, in place of the one at path (--save, --tune-header): the text goes to
 * a new file beside it (0600, O_EXCL), which takes path's name at the end, so a reader sees
 * the old file or the new one, never a part. Only a regular file is replaced (never a device
 * node, a FIFO, a directory or a symbolic link: as root, a rename would replace /dev/null)
 * and only the one checked at the start: the new file and the old are exchanged
 * (RENAME_EXCHANGE) and the old one is removed only if it is the file checked, held open
 * (O_PATH) meanwhile so that its inode is not another's; a new name is taken only if still
 * free (RENAME_NOREPLACE). Where the file system cannot exchange, the check is made again
 * just before a plain rename: something put at path between the two is replaced. */
struct mf_replace {
    const char *path, *option; /* option: "--save", for messages */
    int dir;                   /* path's directory (O_PATH) */
    char *name, *tmp;          /* the file's name in dir, and the new file's */
    int old;                   /* the file replaced (O_PATH, not followed), or -1 */
    dev_t dev;                 /* the new file's identity */
    ino_t ino;
};
/* Returns the new file's descriptor (for writing), or -1 after one line on stderr. */
int mf_replace_open(struct mf_replace *r, const char *path, const char *option);
/* After the descriptor is closed: with keep, the new file takes path's name, else it is
 * removed. Returns true, after one line on stderr, if path was left as it was. */
bool mf_replace_end(struct mf_replace *r, bool keep);
/* 1234567 -> "1,234,567" in buf (at least 32 bytes). */
const char *mf_fmt_count(char *buf, uint64_t n);
/* A count in at most 4 characters, for narrow terminals: "9999", "12k", "1.2M", "340G". */
const char *mf_fmt_compact(char *buf, uint64_t n);
/* Bytes for people: "512 B", "12.3 KiB", "4.0 MiB", in buf (at least 32 bytes). */
const char *mf_fmt_bytes(char *buf, double bytes);

#endif
