/* Unwind rules learned once per build of a module, not once per process.
 *
 * A process learns the rule of each return address its walks meet from the module's CFI
 * (mf_unwind.c, mf_cfi.c), ~5,500 instructions each: one cc1 learns 7,100, and each of the
 * 40 cc1 of a build learns the same ones again. So at its exit a process keeps the rules it
 * learned on disk, one file per build of a module, named by its build id, and a later
 * process of the same build reads the file at its first miss in that module (one open and
 * one read a file) and learns none of them. A small file's rules go into the rule table at
 * once; a large one's stay in memory, sorted, and each goes into the table when a walk first
 * meets its address (mf_rule_cache_find): the rule table is hashed, so storing cc1's 7,441
 * cached rules wrote every page of a 1 MiB table, 8 ms a process in this VM, where a compile
 * sampled without its exact stretch meets about 900 of those addresses, one with it 6,400.
 *
 * Where: <base>/.malloc_freq-rules.<euid>/, beside the profile directories (MALLOC_FREQ_DIR
 * or the working directory): the processes that share a profile (a build under the
 * launcher, a loop of ls) share their rules, nothing outside the place the user chose for
 * profiles is written, and removing the profiles removes the cache. The directory is the
 * effective user's and writable by nobody else (mf_base_subdir_open), its files 0600.
 *
 * Never trusted blindly: a file is used only if it is a regular file of the directory's
 * owner, 0600, reached without a link, exactly as long as its header says, of the same
 * build id and the same module layout (load segments and CFI table, relative to the load
 * bias), with its checksum right and every rule sane and inside the module. Anything else
 * is ignored, and replaced when this process saves what it learned. A file is written whole
 * under a temporary name (O_EXCL) and renamed over the old one: a reader never sees half of
 * one. Two processes that save at once keep the last one's merge; the next process that
 * learns what the other had adds it again.
 *
 * Nothing here is on the hot path: the first miss in a module and the exit. Not in a vfork
 * child, under AT_SECURE, behind a seccomp seal or with MALLOC_FREQ_RULE_CACHE=0; errno is
 * the program's. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h> /* renameat */
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mf_internal.h"

#define MF_RC_DIR ".malloc_freq-rules."
#define MF_RC_MODULES 256u
/* A file's rules at most (512 KiB); a merge beyond keeps the lowest addresses. */
#define MF_RC_RULES_MAX 32768u
#define MF_RC_NAME_MAX 96 /* 64 hex digits of a build id, '.', 16 of a stamp, ".tmp" */

#define MF_RC_SUM_AT (offsetof(struct mf_rc_header, checksum) / 8)
_Static_assert(sizeof(struct mf_rc_header) % 8 == 0, "words");

/* The modules this process image has met (mf_rule_cache_module), by module epoch (the
 * rules' epoch bits): a module replaced by another at its address is met again in the new
 * epoch. Appended under `busy` (a try-lock: a thread that finds it taken reads the CFI
 * meanwhile), read lock-free up to `n`. */
struct mf_rc_module {
    uintptr_t lo, hi, bias;
    uint64_t epoch;
    uint64_t layout;
    uint64_t learned; /* rules read from its CFI */
    /* A large file's rules, kept (pairs of return address less the bias, and rule, sorted
     * and checked): `cached` published after `pair`, never taken back. */
    const uint64_t *pair;
    uint64_t cached;
    uint32_t build_id_len; /* 0: not cached */
    uint8_t build_id[32];
};
static struct {
    int busy;
    uint32_t n;
    struct mf_rc_module m[MF_RC_MODULES];
} mf_rc MF_LARGE_ZEROED;
uint64_t mf_rules_loaded;

/* A word-wise hash against torn or damaged files, not against forgery (the files are the
 * user's own): zlib's crc32 would make the preload library load one more library into
 * every profiled process. */
static uint64_t mf_rc_sum(const uint64_t *w, size_t words)
{
    uint64_t h = 0x6a09e667f3bcc909u;
    for (size_t i = 0; i < words; i++) {
        h = (h ^ (i == MF_RC_SUM_AT ? 0 : w[i])) * 0x9e3779b97f4a7c15u;
        h ^= h >> 29;
    }
    return h;
}

/* "<build id in hex><tail>" */
static void mf_rc_name(const struct mf_rc_module *m, const char *tail, char *buf)
{
    char *p = buf, *end = buf + MF_RC_NAME_MAX;
    for (uint32_t i = 0; i < m->build_id_len; i++)
        p = mf_append_hex(p, end, m->build_id[i], 2);
    mf_append(p, end, tail);
}

/* ---- the modules ------------------------------------------------------------------- */

static uint64_t mf_rc_mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x100000001b3u;
    return h ^ (h >> 32);
}

/* Appends each loaded module not met yet in this epoch (mf_rc.busy held: the only writer). */
static int mf_rc_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uint64_t epoch = *(const uint64_t *)arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    uint64_t layout = 0xcbf29ce484222325u;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD && ph->p_type != PT_GNU_EH_FRAME)
            continue;
        layout = mf_rc_mix(layout, ph->p_type);
        layout = mf_rc_mix(layout, ph->p_flags);
        layout = mf_rc_mix(layout, ph->p_offset);
        layout = mf_rc_mix(layout, ph->p_vaddr);
        layout = mf_rc_mix(layout, ph->p_filesz);
        layout = mf_rc_mix(layout, ph->p_memsz);
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        lo = a < lo ? a : lo;
        hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
    }
    uint32_t n = mf_rc.n;
    if (hi == 0)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct mf_rc_module *m = &mf_rc.m[i];
        if (m->epoch == epoch && m->lo == lo && m->hi == hi && m->bias == info->dlpi_addr)
            return 0;
    }
    if (n == MF_RC_MODULES)
        return 1;
    struct mf_module_record r;
    r.build_id_len = 0;
    mf_build_id(info, &r);
    struct mf_rc_module *m = &mf_rc.m[n];
    *m = (struct mf_rc_module){.lo = lo, .hi = hi, .bias = info->dlpi_addr, .epoch = epoch,
                               .layout = layout, .build_id_len = r.build_id_len};
    memcpy(m->build_id, r.build_id, r.build_id_len);
    __atomic_store_n(&mf_rc.n, n + 1, __ATOMIC_RELEASE);
    return 0;
}

/* ---- reading a file ------------------------------------------------------------------ */

/* A file is read into the caller's buffer if it fits (a short process's: on the slot's
 * stack, whose top pages its start-up has touched already), else here (under mf_rc.busy),
 * else into memory mapped for it. */
#define MF_RC_BUF_BYTES (16u << 10)
static uint64_t mf_rc_buf[MF_RC_BUF_BYTES / 8] MF_LARGE_ZEROED;
#define MF_RC_STACK_BYTES (4u << 10) /* within the three pages mf_slot_acquire maps ahead */

struct mf_rc_data {
    void *map;
    size_t size;
    const uint64_t *pair; /* count pairs */
    uint64_t count;
    uint64_t *buf; /* the caller's, of MF_RC_STACK_BYTES, or NULL */
};

/* Whether the file in d is a cache of module m that may be used. */
static bool mf_rc_valid(const struct mf_rc_module *m, const struct mf_rc_data *d)
{
    const struct mf_rc_header *h = d->map;
    uint64_t lo = m->lo - m->bias, hi = m->hi - m->bias;
    if (memcmp(h->magic, MF_RC_MAGIC, 8) != 0 || h->version != MF_RC_VERSION ||
        h->header_size != sizeof *h || h->count > MF_RC_RULES_MAX ||
        d->size != sizeof *h + h->count * 16)
        return false;
    if (h->build_id_len != m->build_id_len || memcmp(h->build_id, m->build_id, m->build_id_len) ||
        h->lo != lo || h->hi != hi || h->layout != m->layout) /* another build */
        return false;
    if (mf_rc_sum(d->map, d->size / 8) != h->checksum)
        return false;
    const uint64_t *p = (const uint64_t *)(h + 1);
    for (uint64_t i = 0, last = 0; i < h->count; i++) {
        uint64_t pc = p[2 * i];
        if (pc <= last || pc <= lo || pc > hi || !mf_rule_sane(p[2 * i + 1]))
            return false;
        last = pc;
    }
    return true;
}

/* Whether d's file was read into memory mapped for it, not into a read buffer. */
static bool mf_rc_mapped(const struct mf_rc_data *d)
{
    return d->map && d->map != mf_rc_buf && d->map != d->buf;
}

static void mf_rc_free(struct mf_rc_data *d)
{
    if (mf_rc_mapped(d))
        munmap(d->map, d->size);
    d->map = NULL;
}

/* Module m's file in the directory dfd (owned by uid), read whole and checked (mf_rc.busy
 * held): false if it is missing or may not be used. buf: see struct mf_rc_data. */
static bool mf_rc_read(int dfd, uid_t uid, const struct mf_rc_module *m, struct mf_rc_data *d,
                       uint64_t *buf)
{
    char name[MF_RC_NAME_MAX];
    mf_rc_name(m, ".rules", name);
    *d = (struct mf_rc_data){NULL, 0, NULL, 0, buf};
    /* Not a link; a FIFO in its place does not block the open. */
    int fd = mf_sys_openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid &&
              (st.st_mode & 07777) == 0600 && (uint64_t)st.st_size >= sizeof(struct mf_rc_header) &&
              (uint64_t)st.st_size <= sizeof(struct mf_rc_header) + MF_RC_RULES_MAX * 16;
    if (ok) {
        d->size = (size_t)st.st_size;
        void *map = buf && d->size <= MF_RC_STACK_BYTES ? buf
                    : d->size <= sizeof mf_rc_buf ? mf_rc_buf
                    : mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        d->map = map == MAP_FAILED ? NULL : map;
        size_t have = 0;
        ssize_t n = 1;
        while (d->map && have < d->size && n > 0)
            if ((n = mf_sys_read(fd, (char *)d->map + have, d->size - have)) > 0)
                have += (size_t)n;
        ok = d->map && have == d->size && mf_rc_valid(m, d);
    }
    mf_sys_close(fd);
    if (!ok) {
        mf_rc_free(d);
        return false;
    }
    d->count = ((const struct mf_rc_header *)d->map)->count;
    d->pair = (const uint64_t *)((const struct mf_rc_header *)d->map + 1);
    return true;
}

static int mf_rc_dir_open(bool create, struct stat *st)
{
    char name[40];
    mf_append_u64(mf_append(name, name + sizeof name, MF_RC_DIR), name + sizeof name,
                  (uint64_t)geteuid());
    return mf_base_subdir_open(name, create, st);
}

/* The cached rules of the modules from .. to - 1 read, with the walk's epoch: one opening
 * of the directory for all. A file that fits the read buffers goes into the rule table now
 * (a short process's few hundred rules, in the table's first pages); a larger one is kept
 * for mf_rule_cache_find. Called by the rule walk, on the slot's stack (256 KiB). */
static void mf_rc_load(uint32_t from, uint32_t to, uint64_t epoch)
{
    uint64_t buf[MF_RC_STACK_BYTES / 8];
    bool any = false;
    for (uint32_t i = from; i < to; i++)
        any = any || mf_rc.m[i].build_id_len;
    struct stat st;
    int dfd = any ? mf_rc_dir_open(false, &st) : -1;
    if (dfd < 0)
        return;
    for (uint32_t i = from; i < to; i++) {
        const struct mf_rc_module *m = &mf_rc.m[i];
        struct mf_rc_data d;
        if (!m->build_id_len || !mf_rc_read(dfd, st.st_uid, m, &d, buf))
            continue;
        if (mf_rc_mapped(&d)) { /* kept */
            mf_rc.m[i].pair = d.pair;
            __atomic_store_n(&mf_rc.m[i].cached, d.count, __ATOMIC_RELEASE);
            continue;
        }
        uint64_t k = 0;
        mf_rules_reserve(d.count);
        while (k < d.count && mf_rule_load(m->bias + d.pair[2 * k], d.pair[2 * k + 1], epoch))
            k++;
        __atomic_fetch_add(&mf_rules_loaded, k, __ATOMIC_RELAXED);
        mf_rc_free(&d);
    }
    mf_sys_close(dfd);
}

/* The first of the n pairs p (sorted) whose key is above key. */
static uint64_t mf_rc_above(const uint64_t *p, uint64_t n, uint64_t key)
{
    uint64_t a = 0, b = n;
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (p[2 * m] <= key)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

uint64_t mf_rule_cache_find(uint32_t module, uintptr_t pc)
{
    if (!module)
        return 0;
    const struct mf_rc_module *m = &mf_rc.m[module - 1];
    uint64_t n = __atomic_load_n(&m->cached, __ATOMIC_ACQUIRE);
    uint64_t at = n ? mf_rc_above(m->pair, n, pc - m->bias) : 0;
    if (!at || m->pair[2 * (at - 1)] != pc - m->bias)
        return 0;
    __atomic_fetch_add(&mf_rules_loaded, 1, __ATOMIC_RELAXED);
    return m->pair[2 * at - 1];
}

static uint32_t mf_rc_find_known(uintptr_t pc, uint64_t epoch, uint32_t from, uint32_t n)
{
    for (uint32_t i = from; i < n; i++) {
        const struct mf_rc_module *m = &mf_rc.m[i];
        if (m->epoch == epoch && m->lo < pc && pc <= m->hi)
            return i + 1;
    }
    return 0;
}

/* At a miss in a module not met yet: every module loaded and not met yet is met now, its
 * cached rules stored (a short process meets most of its modules in its first walks: one
 * look at the loader's list and one opening of the directory, not one a module). */
uint32_t mf_rule_cache_module(uintptr_t pc, uint64_t epoch)
{
    if (!mf_opt.rule_cache || mf_opt.secure)
        return 0;
    uint32_t n = __atomic_load_n(&mf_rc.n, __ATOMIC_ACQUIRE);
    uint32_t k = mf_rc_find_known(pc, epoch, 0, n);
    if (k || n == MF_RC_MODULES || __atomic_exchange_n(&mf_rc.busy, 1, __ATOMIC_ACQUIRE))
        return k;
    uint32_t first = __atomic_load_n(&mf_rc.n, __ATOMIC_ACQUIRE); /* added meanwhile? */
    k = mf_rc_find_known(pc, epoch, n, first);
    if (!k && mf_check_pid()) {
        int err = errno;
        mf_dl_iterate(mf_rc_visit, &epoch);
        uint32_t now = mf_rc.n;
        k = mf_rc_find_known(pc, epoch, first, now);
        mf_rc_load(first, now, epoch);
        errno = err;
    }
    __atomic_store_n(&mf_rc.busy, 0, __ATOMIC_RELEASE);
    return k;
}

void mf_rule_cache_learned(uint32_t module)
{
    if (module)
        __atomic_fetch_add(&mf_rc.m[module - 1].learned, 1, __ATOMIC_RELAXED);
}

/* ---- writing a file ------------------------------------------------------------------ */

/* Pairs (key, value) sorted by key, in place: heapsort (qsort may allocate). */
static void mf_rc_sort(uint64_t *p, uint64_t n)
{
    for (uint64_t end = n, start = n / 2;;) {
        if (start > 0) {
            start--;
        } else {
            if (end <= 1)
                return;
            end--;
            uint64_t k = p[0], v = p[1];
            p[0] = p[2 * end], p[1] = p[2 * end + 1];
            p[2 * end] = k, p[2 * end + 1] = v;
        }
        for (uint64_t i = start, c; (c = 2 * i + 1) < end; i = c) { /* sift down */
            if (c + 1 < end && p[2 * c + 2] > p[2 * c])
                c++;
            if (p[2 * c] <= p[2 * i])
                break;
            uint64_t k = p[2 * i], v = p[2 * i + 1];
            p[2 * i] = p[2 * c], p[2 * i + 1] = p[2 * c + 1];
            p[2 * c] = k, p[2 * c + 1] = v;
        }
    }
}

/* buf (the header, then room for MF_RC_RULES_MAX pairs) gets module m's rules, the n pairs
 * mine (the table's, sorted by return address), merged with those of its file (a rule just
 * learned wins); returns the file's size, or 0 if the file has every one already. */
static size_t mf_rc_merge(int dfd, uid_t uid, const struct mf_rc_module *m, const uint64_t *mine,
                          uint64_t n, uint64_t *buf)
{
    struct mf_rc_header *h = (struct mf_rc_header *)buf;
    uint64_t *out = (uint64_t *)(h + 1);
    struct mf_rc_data d;
    bool had = mf_rc_read(dfd, uid, m, &d, NULL);
    uint64_t i = 0, j = 0, c = 0, added = 0;
    while ((i < n || j < d.count) && c < MF_RC_RULES_MAX) {
        uint64_t pc = i < n ? mine[2 * i] - m->bias : 0;
        if (i < n && (j == d.count || pc <= d.pair[2 * j])) {
            bool same = j < d.count && d.pair[2 * j] == pc;
            added += !same || d.pair[2 * j + 1] != mine[2 * i + 1];
            j += same;
            out[2 * c] = pc;
            out[2 * c + 1] = mine[2 * i++ + 1];
        } else {
            out[2 * c] = d.pair[2 * j];
            out[2 * c + 1] = d.pair[2 * j++ + 1];
        }
        c++;
    }
    mf_rc_free(&d);
    if (had && !added)
        return 0;
    *h = (struct mf_rc_header){.version = MF_RC_VERSION, .header_size = sizeof *h, .count = c,
                               .lo = m->lo - m->bias, .hi = m->hi - m->bias, .layout = m->layout,
                               .build_id_len = m->build_id_len};
    memcpy(h->magic, MF_RC_MAGIC, 8);
    memcpy(h->build_id, m->build_id, m->build_id_len);
    size_t size = sizeof *h + c * 16;
    h->checksum = mf_rc_sum(buf, size / 8);
    return size;
}

/* buf's size bytes as module m's file: written under a name of this process image's own
 * and renamed over whatever had the name (an empty directory too). */
static void mf_rc_write(int dfd, const struct mf_rc_module *m, const void *buf, size_t size)
{
    char name[MF_RC_NAME_MAX], tmp[MF_RC_NAME_MAX], tail[32];
    mf_rc_name(m, ".rules", name);
    mf_append(mf_append_hex(mf_append(tail, tail + sizeof tail, "."), tail + sizeof tail,
                            mf_stamp, 16),
              tail + sizeof tail, ".tmp");
    mf_rc_name(m, tail, tmp);
    int fd = mf_sys_openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    /* The umask may have taken the owner's bits; space first: past RLIMIT_FSIZE a write
     * would raise SIGXFSZ. */
    bool ok = fchmod(fd, 0600) == 0 && !mf_file_reserve(fd, 0, size);
    for (size_t done = 0; ok && done < size;) {
        ssize_t w = mf_sys_write(fd, (const char *)buf + done, size - done);
        ok = w > 0;
        done += ok ? (size_t)w : 0;
    }
    mf_sys_close(fd);
    if (ok && renameat(dfd, tmp, dfd, name) != 0)
        ok = (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) &&
             unlinkat(dfd, name, AT_REMOVEDIR) == 0 && renameat(dfd, tmp, dfd, name) == 0;
    if (!ok)
        unlinkat(dfd, tmp, 0);
}

/* Rules the table may hold: the largest one's slots. */
#define MF_RC_TABLE_MAX (1u << 16)

void mf_rule_cache_save(void)
{
    if (!mf_opt.rule_cache || mf_opt.secure || !mf_rules)
        return;
    uint64_t epoch = mf_rule_epoch_now();
    uint32_t n = __atomic_load_n(&mf_rc.n, __ATOMIC_ACQUIRE), todo = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct mf_rc_module *m = &mf_rc.m[i];
        todo += m->epoch == epoch && m->build_id_len && __atomic_load_n(&m->learned, __ATOMIC_RELAXED);
    }
    /* A thread loading rules right now holds the read buffer: no save then. */
    if (!todo || __atomic_exchange_n(&mf_rc.busy, 1, __ATOMIC_ACQUIRE))
        return;
    if (!mf_check_pid()) {
        __atomic_store_n(&mf_rc.busy, 0, __ATOMIC_RELEASE);
        return;
    }
    int err = errno;
    /* A file's header and rules, then every rule of the table, sorted once: each module's
     * are a stretch of them. */
    size_t size = sizeof(struct mf_rc_header) + ((size_t)MF_RC_RULES_MAX + MF_RC_TABLE_MAX) * 16;
    void *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    struct stat st;
    int dfd = buf == MAP_FAILED ? -1 : mf_rc_dir_open(true, &st);
    uint64_t *all = dfd < 0 ? NULL : (uint64_t *)((char *)buf + size) - 2 * MF_RC_TABLE_MAX;
    uint64_t total = all ? mf_rules_in(epoch, all, MF_RC_TABLE_MAX) : 0;
    mf_rc_sort(all, total);
    for (uint32_t i = 0; dfd >= 0 && i < n; i++) {
        const struct mf_rc_module *m = &mf_rc.m[i];
        if (m->epoch != epoch || !m->build_id_len || !__atomic_load_n(&m->learned, __ATOMIC_RELAXED))
            continue;
        uint64_t from = mf_rc_above(all, total, m->lo), to = mf_rc_above(all, total, m->hi);
        size_t len = mf_rc_merge(dfd, st.st_uid, m, all + 2 * from, to - from, buf);
        if (len)
            mf_rc_write(dfd, m, buf, len);
    }
    if (dfd >= 0)
        mf_sys_close(dfd);
    if (buf != MAP_FAILED)
        munmap(buf, size);
    __atomic_store_n(&mf_rc.busy, 0, __ATOMIC_RELEASE);
    errno = err;
}
