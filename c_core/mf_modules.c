/* The process file: who this process image is and which modules it has loaded (path, load
 * bias, build-id), so that mf_print can symbolize offline. Modules are appended when a new
 * stack shows an address outside every known module (a library loaded later), or the
 * loader has loaded or unloaded anything since the last look (a library may now lie where
 * another one was: then the module epoch grows, mf_format.h). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mf_internal.h"

#define MF_MODULES_MAX 2048

struct mf_range {
    uintptr_t lo, hi;
    uint64_t id; /* path and build-id, hashed */
    /* Loaded before the process image's first look with nothing unloaded yet: the program
     * and the libraries it was started with, which the loader never unloads (dlclose of
     * one is a no-op), so nothing else can come to lie where it is. */
    bool permanent;
};
/* A short process's few modules among the library's small variables, the rest in pages of
 * their own. */
#define MF_KNOWN_FIRST 8u
static struct mf_range mf_known_first[MF_KNOWN_FIRST];
static struct mf_range mf_known_more[MF_MODULES_MAX - MF_KNOWN_FIRST] MF_LARGE_ZEROED;

static inline struct mf_range *mf_known(uint32_t i)
{
    return i < MF_KNOWN_FIRST ? &mf_known_first[i] : &mf_known_more[i - MF_KNOWN_FIRST];
}
static uint32_t mf_nknown;  /* published with release after the range is written */
static int mf_refreshing; /* try-lock: one refresh at a time, others skip */
uint32_t mf_module_epoch;
static unsigned long long mf_seen_adds, mf_seen_subs; /* the loader's counts at the last look */
/* Every module record written, in memory of our own: a fork child writes its parent's list
 * into its process file without asking the loader (mf_modules_inherit). A short process's
 * few records fit in mf_log_first, beside the library's other small variables: a page of
 * its own costs a short process as much as ten system calls (docs/performance.md). */
#define MF_LOG_FIRST_BYTES 1024u
static uint64_t mf_log_first[MF_LOG_FIRST_BYTES / 8];
static char *mf_log = (char *)mf_log_first;
static size_t mf_log_len, mf_log_cap = MF_LOG_FIRST_BYTES;
static bool mf_inherited; /* the next start writes mf_log */
static bool mf_frozen;    /* a fork child of a threaded parent: the loader is not asked */

/* The end of the process file: module records are written there (one refresh at a time). */
static uint64_t mf_process_end;
static int mf_process_warned;
/* The process file's header, mapped: the exit writes its end time and flags there, no
 * system call (a fork child forgets it: mf_modules_inherit). */
static struct mf_process_header *mf_process_map;
/* /proc/self/exe, read once per process image (the main program's module record): a short
 * path among the small variables, a long one in a page of its own. */
static char mf_exe_short[256];
static char mf_exe_long[MF_PATH_MAX] MF_LARGE_ZEROED;
static const char *mf_exe;
static ssize_t mf_exe_len = -1;

static const char *mf_exe_path(size_t *len)
{
    if (mf_exe_len < 0) {
        char *exe = mf_exe_short;
        ssize_t n = readlink("/proc/self/exe", exe, sizeof mf_exe_short - 1);
        if (n == (ssize_t)sizeof mf_exe_short - 1) /* perhaps cut short */
            n = readlink("/proc/self/exe", exe = mf_exe_long, sizeof mf_exe_long - 1);
        mf_exe_len = n > 0 ? n : 0;
        exe[mf_exe_len] = '\0';
        mf_exe = exe;
    }
    *len = (size_t)mf_exe_len;
    return mf_exe;
}

static char *mf_process_name(char *buf, size_t size)
{
    char *end = buf + size, *p = mf_append(buf, end, "process.");
    p = mf_append_hex(p, end, mf_stamp, 16);
    mf_append(p, end, ".mfp");
    return buf;
}

/* Writes [off, off + len) of the process file: space first, so that neither a full disk
 * nor RLIMIT_FSIZE can leave a half-written record or raise SIGXFSZ. */
static bool mf_process_write(int fd, const void *buf, size_t len, uint64_t off)
{
    return mf_file_reserve(fd, off, len) || mf_sys_pwrite(fd, buf, len, off) != (ssize_t)len;
}

static uint32_t mf_process_flags(void)
{
    return (mf_tls_direct ? MF_PROCESS_TLS_DIRECT : 0) |
           (mf_opt.pythonmalloc ? MF_PROCESS_PYTHONMALLOC : 0) | MF_PROCESS_EXACT_BY_CALLS;
}

static void mf_modules_collect(bool first);

/* The header and every module loaded (or, in a fork child, the parent's list): one file,
 * one reservation, one write. */
bool mf_process_file_create(void)
{
    struct mf_process_header h = {
        .version = MF_FORMAT_VERSION,
        .header_size = sizeof h,
        .stamp = mf_stamp,
        .pid = (uint32_t)mf_pid,
        .ppid = (uint32_t)getppid(),
        .start_ns = mf_now_ns(),
        .flags = mf_process_flags(),
        .unwinder = mf_opt.unwinder,
        .sample_interval = mf_opt.sample_interval,
        .exact_calls = mf_opt.exact_calls,
        .cost_share_ppm = mf_opt.sample_interval ? 0 : MF_COST_SHARE_PPM,
        .ramp_samples = mf_ramps() ? MF_RAMP_SAMPLES : 0,
        .ramp_step = mf_ramps() ? MF_RAMP_STEP : 0,
        .large_bytes = mf_opt.large,
        .max_depth = mf_opt.max_depth,
    };
    memcpy(h.magic, MF_PROCESS_MAGIC, 8);
    mf_process_map = NULL;
    if (!mf_inherited || (mf_log_len == 0 && !mf_frozen)) { /* a parent that never started */
        mf_exe_len = -1; /* a new image (exec keeps nothing of ours; a fork child, the same) */
        __atomic_store_n(&mf_nknown, 0, __ATOMIC_RELEASE);
        mf_log_len = 0;
        mf_modules_collect(true);
    }
    mf_inherited = false;
    size_t exe_len;
    const char *exe = mf_exe_path(&exe_len);
    memcpy(h.exe, exe, exe_len < sizeof h.exe - 1 ? exe_len : sizeof h.exe - 1);
    char name[MF_NAME_MAX];
    int fd = mf_file_create(mf_process_name(name, sizeof name));
    if (fd < 0) {
        mf_file_warn(NULL, "cannot create", name, "; not profiling");
        return true;
    }
    struct iovec iov[2] = {{&h, sizeof h}, {mf_log, mf_log_len}};
    bool failed = mf_file_reserve(fd, 0, sizeof h + mf_log_len) ||
                  mf_sys_pwritev(fd, iov, mf_log_len ? 2 : 1, 0) != (ssize_t)(sizeof h + mf_log_len);
    if (failed) {
        mf_file_warn(NULL, "cannot write", name, "; not profiling");
        mf_file_unlink(name);
    } else {
        void *m = mmap(NULL, sizeof h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        mf_process_map = m == MAP_FAILED ? NULL : m;
    }
    mf_sys_close(fd);
    mf_process_end = sizeof h + mf_log_len;
    mf_process_warned = 0;
    return failed;
}

void mf_process_file_finish(uint64_t exact_recorded)
{
    uint64_t end_ns = mf_now_ns();
    uint32_t flags = MF_PROCESS_EXITED | mf_process_flags();
    struct mf_process_header *h = mf_process_map;
    uint64_t learned = __atomic_load_n(&mf_rules_learned, __ATOMIC_RELAXED);
    uint64_t loaded = __atomic_load_n(&mf_rules_loaded, __ATOMIC_RELAXED);
    if (h) {
        h->end_ns = end_ns;
        h->exact_recorded = exact_recorded;
        h->rules_learned = learned;
        h->rules_loaded = loaded;
        __atomic_store_n(&h->flags, flags, __ATOMIC_RELEASE); /* last: says the rest is there */
        return;
    }
    char name[MF_NAME_MAX];
    int fd = mf_file_open(mf_process_name(name, sizeof name));
    if (fd < 0)
        return;
    ssize_t a = mf_sys_pwrite(fd, &end_ns, sizeof end_ns, offsetof(struct mf_process_header, end_ns));
    uint64_t rules[2] = {learned, loaded};
    ssize_t d = mf_sys_pwrite(fd, rules, sizeof rules, offsetof(struct mf_process_header, rules_learned));
    ssize_t b = mf_sys_pwrite(fd, &flags, sizeof flags, offsetof(struct mf_process_header, flags));
    ssize_t c = mf_sys_pwrite(fd, &exact_recorded, sizeof exact_recorded,
                              offsetof(struct mf_process_header, exact_recorded));
    (void)a, (void)b, (void)c, (void)d;
    mf_sys_close(fd);
}

void mf_build_id(struct dl_phdr_info *info, struct mf_module_record *r)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const char *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                nh->n_descsz <= sizeof r->build_id && desc + nh->n_descsz <= end) {
                memcpy(r->build_id, desc, nh->n_descsz);
                r->build_id_len = nh->n_descsz;
                return;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

static uint64_t mf_module_id(const char *path, size_t len, const struct mf_module_record *r)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)path[i]) * 0x100000001b3u;
    for (uint32_t i = 0; i < r->build_id_len; i++)
        h = (h ^ r->build_id[i]) * 0x100000001b3u;
    return h;
}

/* True if this module is known. A known module whose range it overlaps is another one,
 * unloaded since: it is forgotten, and `*moved` set. */
static bool mf_is_known(uintptr_t lo, uintptr_t hi, uint64_t id, bool *moved)
{
    uint32_t n = __atomic_load_n(&mf_nknown, __ATOMIC_ACQUIRE);
    bool known = false;
    for (uint32_t i = 0; i < n; i++) {
        struct mf_range *k = mf_known(i);
        if (k->lo == lo && k->hi == hi && k->id == id)
            known = true;
        else if (k->lo < hi && lo < k->hi) {
            k->lo = k->hi = 0;
            *moved = true;
        }
    }
    return known;
}

static void mf_log_append(const void *rec, size_t len)
{
    if (mf_log_len + len > mf_log_cap) {
        bool first = mf_log == (char *)mf_log_first;
        size_t cap = first ? 64 << 10 : 2 * mf_log_cap;
        while (cap < mf_log_len + len)
            cap *= 2;
        void *m = first ? mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                        : mremap(mf_log, mf_log_cap, cap, MREMAP_MAYMOVE);
        if (m == MAP_FAILED)
            return; /* a fork child would miss this module's name, nothing worse */
        if (first)
            memcpy(m, mf_log, mf_log_len);
        mf_log = m;
        mf_log_cap = cap;
    }
    memcpy(mf_log + mf_log_len, rec, len);
    mf_log_len += len;
}

struct mf_visit {
    bool moved; /* a module lies where another one was: the epoch grows */
    bool first; /* the image's first look */
};

/* Whether the loader's info, of this size, holds its counts of loads and unloads. */
static bool mf_info_has_counts(size_t size)
{
    return size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                       sizeof(((struct dl_phdr_info *)NULL)->dlpi_subs);
}

static int mf_module_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct mf_visit *v = arg;
    bool counts = mf_info_has_counts(size);
    if (counts) {
        /* Read by mf_modules_changed() in any thread, the exit's included: atomics. */
        __atomic_store_n(&mf_seen_adds, info->dlpi_adds, __ATOMIC_RELAXED);
        __atomic_store_n(&mf_seen_subs, info->dlpi_subs, __ATOMIC_RELAXED);
    }
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        lo = a < lo ? a : lo;
        hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
    }
    if (hi == 0 || mf_nknown >= MF_MODULES_MAX)
        return 0;
    struct {
        struct mf_module_record r;
        char path[MF_PATH_MAX + 8];
    } rec;
    memset(&rec.r, 0, sizeof rec.r);
    const char *name = info->dlpi_name;
    size_t len = 0;
    if (!name || !*name) { /* the main program, always visited first */
        const char *exe = mf_exe_path(&len);
        memcpy(rec.path, exe, len);
    } else {
        len = strnlen(name, MF_PATH_MAX - 1);
        memcpy(rec.path, name, len);
    }
    memset(rec.path + len, 0, 8);
    rec.r.magic = MF_MODULE_MAGIC;
    rec.r.record_size = (uint32_t)((sizeof rec.r + len + 1 + 7) & ~(size_t)7);
    rec.r.bias = info->dlpi_addr;
    rec.r.lo = lo;
    rec.r.hi = hi;
    rec.r.path_len = (uint32_t)len;
    mf_build_id(info, &rec.r);
    uint64_t id = mf_module_id(rec.path, len, &rec.r);
    bool moved = false;
    if (mf_is_known(lo, hi, id, &moved))
        return 0;
    if (moved && !v->moved) { /* once per look: stacks from now on are the new epoch's */
        v->moved = true;
        __atomic_store_n(&mf_module_epoch, mf_module_epoch + 1, __ATOMIC_RELEASE);
    }
    rec.r.epoch = mf_module_epoch;
    mf_log_append(&rec, rec.r.record_size);
    bool permanent = v->first && counts && info->dlpi_subs == 0;
    *mf_known(mf_nknown) = (struct mf_range){lo, hi, id, permanent};
    __atomic_store_n(&mf_nknown, mf_nknown + 1, __ATOMIC_RELEASE);
    return 0;
}

/* dl_iterate_phdr holds a recursive lock owned by thread id. A signal handler that forks
 * while it is held leaves a child whose thread has a new id: the interrupted iteration's
 * unlock is refused there, and the child's next iteration would wait for ever. The mark
 * tells the child (mf_after_fork_child) never to ask the loader again, not even to go on
 * with the walk the handler interrupted; a flag, not a blocked
 * signal mask, because this runs at every new stack (two system calls each). */
int mf_dl_iterate(int (*visit)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    struct mf_thread *t = &mf_tls;
    if (mf_unwind_frozen) /* also for a walk the fork interrupted, which goes on here */
        return 0;
    bool outer = t->in_loader;
    t->in_loader = true;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    int rc = dl_iterate_phdr(visit, arg);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->in_loader = outer;
    return rc;
}

/* New module records go to mf_log (one refresh at a time: mf_refreshing). */
static void mf_modules_collect(bool first)
{
    struct mf_visit v = {.moved = false, .first = first};
    mf_dl_iterate(mf_module_visit, &v);
}

/* What the loader added since the last look, appended to the process file in one write. */
void mf_modules_refresh(void)
{
    if (mf_frozen || __atomic_exchange_n(&mf_refreshing, 1, __ATOMIC_ACQUIRE))
        return;
    size_t start = mf_log_len;
    mf_modules_collect(false);
    if (mf_log_len > start && !mf_process_warned) {
        char name[MF_NAME_MAX];
        int fd = mf_file_open(mf_process_name(name, sizeof name));
        if (fd < 0 || mf_process_write(fd, mf_log + start, mf_log_len - start, mf_process_end)) {
            mf_file_warn(&mf_process_warned, "cannot add modules to", name,
                         "; stacks in them will show no function names");
        } else {
            mf_process_end += mf_log_len - start;
        }
        if (fd >= 0)
            mf_sys_close(fd);
    }
    __atomic_store_n(&mf_refreshing, 0, __ATOMIC_RELEASE);
}

static int mf_loader_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
    bool *changed = arg;
    if (mf_info_has_counts(size))
        *changed = info->dlpi_adds != __atomic_load_n(&mf_seen_adds, __ATOMIC_RELAXED) ||
                   info->dlpi_subs != __atomic_load_n(&mf_seen_subs, __ATOMIC_RELAXED);
    return 1; /* the counts are the same in every module's info: one is enough */
}

bool mf_modules_changed(void)
{
    bool changed = false;
    if (!mf_frozen)
        mf_dl_iterate(mf_loader_counts, &changed);
    return changed;
}

/* Every pc lies in a known module, one the image started with if `permanent`. */
static bool mf_modules_hold(const uintptr_t *pcs, uint32_t n, bool permanent)
{
    uint32_t known = __atomic_load_n(&mf_nknown, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = 0;
        while (k < known && !((mf_known(k)->permanent || !permanent) &&
                              mf_known(k)->lo <= pcs[i] && pcs[i] < mf_known(k)->hi))
            k++;
        if (k == known)
            return false;
    }
    return true;
}

bool mf_modules_cover(const uintptr_t *pcs, uint32_t n)
{
    return mf_modules_hold(pcs, n, false);
}

bool mf_modules_permanent(const uintptr_t *pcs, uint32_t n)
{
    return mf_modules_hold(pcs, n, true);
}

/* Runs in the atfork child handler: no system call, no lock. The parent's modules are the
 * child's (same memory); the loader's lock may be held for ever by a thread of the parent
 * that does not exist here (glibc resets dl_load_lock in the child, not the one
 * dl_iterate_phdr takes), so a child of a threaded parent never asks the loader again. */
void mf_modules_inherit(bool frozen)
{
    mf_inherited = true;
    mf_process_map = NULL; /* the parent's file */
    mf_frozen = mf_frozen || frozen;
    mf_refreshing = 0;
}
