/* libunwind's system calls, redirected at start-up (DESIGN §12, docs/design.md).
 *
 * libunwind (1.6.2, Debian 12's libunwind8) checks whether an address is readable before
 * it reads a frame it has no unwind information for: it write()s one byte from the address
 * into a pipe it opened at initialisation and kept, and read()s it back at the next check.
 * The pipe's two descriptors are numbers the program can see: a daemon that closes 3 and
 * up and opens files gets those numbers back, and libunwind then reads a byte of the
 * program's input and writes a byte of memory into its output at each check, or, at end
 * of file, closes both files and opens a new pipe in their place. libunwind has no setting
 * that avoids the pipe (UNW_X86_64_FORCE_MEM_VALIDATE only picks mincore or msync to go
 * first). And read, write, open, close and msync are cancellation points: a pending
 * pthread_cancel acted inside malloc, during a sample.
 *
 * So, once, right after dlopen and before libunwind's first call, the slots of libunwind's
 * own relocation table that hold those functions are pointed at the functions below (the
 * program's and every other library's slots are untouched):
 *   - pipe/pipe2 hand out a pair of numbers the kernel never uses for a descriptor (above
 *     the largest possible one); read of the first always finds the pipe empty, and write
 *     of one byte to the second is the readability check itself, made with
 *     rt_sigprocmask(an invalid `how`, the address, NULL): the kernel copies the set from
 *     the address first, EFAULT if it is unreadable, then refuses the `how` with EINVAL and
 *     changes nothing. The answer is the pipe write's (both are the kernel reading user
 *     memory at that address), with one system call instead of two and no descriptor;
 *   - every other read and write, and open/openat/close/msync, is the same system call
 *     made directly, which glibc's syscall() does without a cancellation point; opens also
 *     get O_CLOEXEC, so a descriptor libunwind holds for a moment (/proc/self/maps, an ELF
 *     file) never leaks into a child that another thread execs meanwhile. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mf_elf.h"
#include "mf_internal.h"
#include "mf_unwind_imports.h"

/* The largest descriptor Linux can hand out is below 2^31 - 64 (fs.nr_open's ceiling). */
#define MF_FAKE_PIPE_READ 0x7ffffffe
#define MF_FAKE_PIPE_WRITE 0x7fffffff

static bool mf_fake_fd(long fd)
{
    return fd == MF_FAKE_PIPE_READ || fd == MF_FAKE_PIPE_WRITE;
}

/* Whether the 8 bytes at p rounded down to 8 (so within p's page) are readable. */
static bool mf_readable(const void *p)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)7;
    long rc = syscall(SYS_rt_sigprocmask, -1L, a, 0L, 8L);
    return !(rc == -1 && errno == EFAULT);
}

static int mf_u_pipe2(int fds[2], int flags)
{
    (void)flags;
    fds[0] = MF_FAKE_PIPE_READ;
    fds[1] = MF_FAKE_PIPE_WRITE;
    return 0;
}

static int mf_u_pipe(int fds[2])
{
    return mf_u_pipe2(fds, 0);
}

static ssize_t mf_u_read(int fd, void *buf, size_t len)
{
    if (mf_fake_fd(fd)) { /* what was "written" was only checked, never queued */
        errno = fd == MF_FAKE_PIPE_READ ? EAGAIN : EBADF;
        return -1;
    }
    return syscall(SYS_read, (long)fd, buf, len);
}

static ssize_t mf_u_read_chk(int fd, void *buf, size_t len, size_t buflen)
{
    (void)buflen; /* libunwind's own buffers */
    return mf_u_read(fd, buf, len);
}

static ssize_t mf_u_pread(int fd, void *buf, size_t len, off_t off)
{
    if (mf_fake_fd(fd)) {
        errno = ESPIPE;
        return -1;
    }
    return syscall(SYS_pread64, (long)fd, buf, len, (long)off);
}

/* The check: the first and the last byte's pages (libunwind writes one byte). errno is left
 * as it was on success, as a pipe write leaves it: libunwind retries while it says EINTR. */
static ssize_t mf_u_write(int fd, const void *buf, size_t len)
{
    if (fd == MF_FAKE_PIPE_WRITE) {
        int saved = errno;
        uintptr_t first = (uintptr_t)buf, last = first + len - 1;
        bool ok = len == 0 || (mf_readable(buf) &&
                               ((first >> 12) == (last >> 12) || mf_readable((void *)last)));
        errno = ok ? saved : EFAULT;
        return ok ? (ssize_t)len : -1;
    }
    if (fd == MF_FAKE_PIPE_READ) {
        errno = EBADF;
        return -1;
    }
    return syscall(SYS_write, (long)fd, buf, len);
}

static int mf_u_close(int fd)
{
    if (mf_fake_fd(fd))
        return 0;
    return (int)syscall(SYS_close, (long)fd);
}

static int mf_u_openat(int dirfd, const char *path, int flags, ...)
{
    unsigned mode = 0;
    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, unsigned);
        va_end(ap);
    }
    return (int)syscall(SYS_openat, (long)dirfd, path, (long)(flags | O_CLOEXEC), (long)mode);
}

static int mf_u_open(const char *path, int flags, ...)
{
    unsigned mode = 0;
    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, unsigned);
        va_end(ap);
    }
    return mf_u_openat(AT_FDCWD, path, flags, mode);
}

static int mf_u_open_2(const char *path, int flags) /* _FORTIFY_SOURCE's open without mode */
{
    return mf_u_openat(AT_FDCWD, path, flags, 0u);
}

static int mf_u_msync(void *addr, size_t len, int flags)
{
    return (int)syscall(SYS_msync, addr, len, (long)flags);
}

/* libunwind 1.6.2 writes to its pipe with syscall(SYS_write, ...) (so that ASan does not
 * see the read of a possibly bad address). Other numbers pass through with six arguments,
 * as glibc's syscall() passes them whatever the caller gave. */
static long mf_u_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    switch (nr) {
    case SYS_write:
        return mf_u_write((int)a[0], (const void *)a[1], (size_t)a[2]);
    case SYS_read:
        return mf_u_read((int)a[0], (void *)a[1], (size_t)a[2]);
    case SYS_close:
        return mf_u_close((int)a[0]);
    case SYS_pipe2:
        return mf_u_pipe2((int *)a[0], (int)a[1]);
    default:
        return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
}

static const struct {
    const char *name;
    void *fn;
} mf_redirects[] = {
    {"pipe", (void *)mf_u_pipe},       {"pipe2", (void *)mf_u_pipe2},
    {"read", (void *)mf_u_read},       {"__read_chk", (void *)mf_u_read_chk},
    {"pread", (void *)mf_u_pread},     {"pread64", (void *)mf_u_pread},
    {"write", (void *)mf_u_write},     {"close", (void *)mf_u_close},
    {"open", (void *)mf_u_open},       {"open64", (void *)mf_u_open},
    {"__open_2", (void *)mf_u_open_2}, {"__open64_2", (void *)mf_u_open_2},
    {"openat", (void *)mf_u_openat},   {"openat64", (void *)mf_u_openat},
    {"msync", (void *)mf_u_msync},     {"syscall", (void *)mf_u_syscall},
};

/* ---- the object's relocations -------------------------------------------------------- */

/* 64-bit objects only: ElfW(Rela) is Elf64_Rela on both. */
#if defined(__x86_64__)
#define MF_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define MF_R_GLOB_DAT R_X86_64_GLOB_DAT
#define MF_R_ABS64 R_X86_64_64
#elif defined(__aarch64__)
#define MF_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define MF_R_GLOB_DAT R_AARCH64_GLOB_DAT
#define MF_R_ABS64 R_AARCH64_ABS64
#endif

struct mf_object {
    uintptr_t base;            /* load bias */
    const ElfW(Dyn) *dynamic;
    const ElfW(Phdr) *phdr;
    size_t phnum;
    uintptr_t relro_lo, relro_hi; /* the pages the loader made read-only after relocating */
};

static int mf_find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct mf_object *o = arg;
    if (info->dlpi_addr != o->base)
        return 0;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_DYNAMIC && info->dlpi_addr + p->p_vaddr == (uintptr_t)o->dynamic) {
            o->phdr = info->dlpi_phdr;
            o->phnum = info->dlpi_phnum;
            return 1;
        }
    }
    return 0;
}

/* Whether [slot, slot + 8) lies in a writable PT_LOAD segment (RELRO pages are part of one). */
static bool mf_slot_writable(const struct mf_object *o, uintptr_t slot)
{
    for (size_t i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *p = &o->phdr[i];
        uintptr_t lo = o->base + p->p_vaddr;
        if (p->p_type == PT_LOAD && (p->p_flags & PF_W) && slot >= lo &&
            slot + sizeof(uintptr_t) <= lo + p->p_memsz)
            return true;
    }
    return false;
}

static bool mf_slot_set(const struct mf_object *o, uintptr_t slot, uintptr_t value)
{
    if (!mf_slot_writable(o, slot))
        return true;
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t page = slot & ~(page_size - 1);
    bool relro = page >= o->relro_lo && page < o->relro_hi;
    if (relro && mprotect((void *)page, page_size, PROT_READ | PROT_WRITE) != 0)
        return true;
    __atomic_store_n((uintptr_t *)slot, value, __ATOMIC_RELAXED);
    if (relro)
        mprotect((void *)page, page_size, PROT_READ);
    return false;
}

static int mf_redirect_index(const char *name)
{
    for (size_t i = 0; i < sizeof mf_redirects / sizeof *mf_redirects; i++)
        if (strcmp(name, mf_redirects[i].name) == 0)
            return (int)i;
    return -1;
}

/* Points the slots of one relocation table that import a redirected function at ours. */
static bool mf_redirect_table(const struct mf_object *o, const ElfW(Rela) *rel, size_t bytes,
                              const ElfW(Sym) *symtab, const char *strtab, size_t strsz)
{
    for (size_t i = 0; i < bytes / sizeof *rel; i++) {
        unsigned type = (unsigned)ELF64_R_TYPE(rel[i].r_info);
        size_t sym = ELF64_R_SYM(rel[i].r_info);
        if (!sym || (type != MF_R_JUMP_SLOT && type != MF_R_GLOB_DAT && type != MF_R_ABS64))
            continue;
        const ElfW(Sym) *s = &symtab[sym];
        if (s->st_shndx != SHN_UNDEF || s->st_name >= strsz)
            continue;
        int k = mf_redirect_index(strtab + s->st_name);
        if (k < 0)
            continue;
        uintptr_t value = (uintptr_t)mf_redirects[k].fn;
        if (type == MF_R_ABS64)
            value += (uintptr_t)rel[i].r_addend;
        if (mf_slot_set(o, o->base + rel[i].r_offset, value))
            return true;
    }
    return false;
}

bool mf_unwind_redirect_imports(void *lib)
{
#ifndef MF_R_JUMP_SLOT
    (void)lib;
    return true; /* an architecture this file does not know the relocations of */
#else
    struct link_map *lm = NULL;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld)
        return true;
    struct mf_object o = {.base = lm->l_addr, .dynamic = lm->l_ld};
    if (!dl_iterate_phdr(mf_find_object, &o) || !o.phdr)
        return true;
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < o.phnum; i++)
        if (o.phdr[i].p_type == PT_GNU_RELRO) { /* as the loader rounds it (_dl_protect_relro) */
            o.relro_lo = (o.base + o.phdr[i].p_vaddr) & ~(page_size - 1);
            o.relro_hi = (o.base + o.phdr[i].p_vaddr + o.phdr[i].p_memsz) & ~(page_size - 1);
        }

    struct mf_elf_dynamic d;
    mf_elf_dynamic_read(o.dynamic, o.base, &d);
    if (!d.symtab || !d.strtab || d.rel || (d.jmprel && d.pltrel != DT_RELA))
        return true;
    return (d.rela && mf_redirect_table(&o, d.rela, d.relasz, d.symtab, d.strtab, d.strsz)) ||
           (d.jmprel && mf_redirect_table(&o, d.jmprel, d.pltrelsz, d.symtab, d.strtab, d.strsz));
#endif
}
