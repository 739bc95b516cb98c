/* Symbolization. Each distinct module file (path + recorded build-id) gets its own Dwfl,
 * reported at load bias 0, so lookups use file addresses (runtime address - the process's
 * bias for that module) and one file's results serve every process that mapped it.
 *
 * Speed (DESIGN §9): libdw's symbol lookup scans the symbol table linearly, so each module
 * gets a sorted index of its function symbols searched by bisection, and every address is
 * resolved once (cache per module file and address). Likewise dwarf_getscopes walks the
 * whole compilation unit for each address (6 minutes for 18k addresses in one big C++ CU),
 * so each CU, when first needed, gets a sorted index of its functions' address ranges, and
 * the inline chain is found by descending inside that one function. */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libiberty/demangle.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debuginfod.h"
#include "mf_print.h"
#include "symbolize.h"
#include "trim.h"


struct mf_sym {
    uint64_t addr, size;
    const char *name; /* in libelf's string table, alive as long as the Dwfl */
    uint32_t rank;    /* lower is the better name for a shared address */
};

struct mf_modfile {
    char *path;
    const char *label; /* basename, for "[label+0xOFF]" */
    uint32_t build_id_len;
    uint8_t build_id[32];
    bool opened, usable, plumbing;
    enum mf_debug_state state; /* what symbolization had to work with (mf_module_debug) */
    char *opened_path; /* the file read: path, or the --sysroot copy of it */
    Dwfl *dwfl;
    Dwfl_Module *mod;
    struct mf_sym *syms;
    size_t nsyms;
    struct mf_map cache; /* file address -> index into mf_runs */
    Dwarf *dwarf;        /* NULL: no DWARF (symbol names only) */
    struct mf_map cu_ids; /* CU DIE offset -> index into cus */
    struct mf_cu_index *cus;
    uint32_t ncus, cus_cap;
    uint64_t *entries; /* its functions' entries from .eh_frame_hdr, sorted (mf_function_entry) */
    uint32_t nentries;
    bool entries_read;
};

/* One address range of a concrete function (subprogram DIE) of a CU. */
struct mf_fn_range {
    uint64_t lo, hi; /* DWARF addresses */
    Dwarf_Off die;
};

struct mf_cu_index {
    struct mf_fn_range *r; /* sorted by lo */
    size_t n;
};

/* A cached result: frames [first, first + count) of mf_arena. */
struct mf_run {
    uint32_t first, count;
};

static struct mf_modfile *mf_modfiles;
static uint32_t mf_nmodfiles, mf_modfiles_cap;
static struct mf_map mf_modfile_ids;
static struct mf_run *mf_runs;
static uint32_t mf_nruns, mf_runs_cap;
static struct mf_frame *mf_arena;
static uint32_t mf_narena, mf_arena_cap;

/* NULL: libdw's default path (":.debug:/usr/lib/debug"); else the --debug-dir and
 * --sysroot directories ahead of it. */
static char *mf_debuginfo_path;
static const char *mf_sysroot;

static Dwfl_Callbacks mf_offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = mf_debuginfod_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

void mf_symbolize_config(const char *const *debug_dirs, int ndebug_dirs, const char *sysroot)
{
    mf_sysroot = sysroot && *sysroot ? sysroot : NULL;
    if (!ndebug_dirs && !mf_sysroot)
        return;
    /* Entries that start with '/' are where libdw looks for .build-id/xx/yyyy.debug and for
     * DIR/<the file's directory>/<its .gnu_debuglink name>; "" and ".debug" are beside the
     * file itself. */
    size_t len = 64 + (mf_sysroot ? strlen(mf_sysroot) : 0);
    for (int i = 0; i < ndebug_dirs; i++)
        len += strlen(debug_dirs[i]) + 1;
    char *path = mf_xmalloc(len);
    size_t at = (size_t)snprintf(path, len, ":.debug");
    for (int i = 0; i < ndebug_dirs; i++)
        at += (size_t)snprintf(path + at, len - at, ":%s", debug_dirs[i]);
    if (mf_sysroot)
        at += (size_t)snprintf(path + at, len - at, ":%s/usr/lib/debug", mf_sysroot);
    snprintf(path + at, len - at, ":/usr/lib/debug");
    free(mf_debuginfo_path);
    mf_debuginfo_path = path;
    mf_offline_callbacks.debuginfo_path = &mf_debuginfo_path;
}

static bool mf_is_mangled(const char *name)
{
    return name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
}

static uint32_t mf_intern_demangled(const char *name)
{
    char *d = NULL;
    /* C++ and Rust legacy are _Z..., Rust v0 is _R...; libiberty drops Rust hashes unless
     * DMGL_VERBOSE (DESIGN §9: __cxa_demangle fails on Rust v0). */
    if (mf_is_mangled(name))
        d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
    uint32_t id = mf_intern(d ? d : name);
    free(d);
    return id;
}

/* ---- the symbol index ---------------------------------------------------------------- */

static uint32_t mf_sym_rank(const char *name, int bind)
{
    /* Prefer global names, then the fewest leading underscores (malloc over __libc_malloc),
     * then the shortest. */
    uint32_t underscores = 0;
    while (name[underscores] == '_')
        underscores++;
    uint32_t b = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
    size_t len = strlen(name);
    return b << 24 | (underscores > 15 ? 15 : underscores) << 16 |
           (len > 0xffff ? 0xffff : (uint32_t)len);
}

static int mf_sym_cmp(const void *a, const void *b)
{
    const struct mf_sym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void mf_sym_index(struct mf_modfile *mf)
{
    int n = dwfl_module_getsymtab(mf->mod);
    size_t cap = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        Elf *elf;
        Dwarf_Addr bias;
        const char *name = dwfl_module_getsym_info(mf->mod, i, &sym, &addr, &shndx, &elf, &bias);
        int type = GELF_ST_TYPE(sym.st_info);
        if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC) || shndx == SHN_UNDEF)
            continue;
        MF_GROW(mf->syms, mf->nsyms, cap);
        mf->syms[mf->nsyms++] = (struct mf_sym){addr, sym.st_size, name,
                                                mf_sym_rank(name, GELF_ST_BIND(sym.st_info))};
    }
    if (mf->nsyms > 1)
        qsort(mf->syms, mf->nsyms, sizeof *mf->syms, mf_sym_cmp);
    /* One symbol per address: the best name, the largest size. */
    size_t k = 0;
    for (size_t i = 0; i < mf->nsyms; i++) {
        if (k && mf->syms[k - 1].addr == mf->syms[i].addr) {
            if (mf->syms[i].size > mf->syms[k - 1].size)
                mf->syms[k - 1].size = mf->syms[i].size;
            continue;
        }
        mf->syms[k++] = mf->syms[i];
    }
    mf->nsyms = k;
}

static const struct mf_sym *mf_sym_find(const struct mf_modfile *mf, uint64_t a)
{
    size_t lo = 0, hi = mf->nsyms; /* find the last symbol starting at or before a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mf->syms[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const struct mf_sym *s = &mf->syms[lo - 1];
    return s->size && a - s->addr >= s->size ? NULL : s;
}

/* ---- module files --------------------------------------------------------------------- */

/* Whether the module's ELF file (not its separate debug file) has a .symtab: without one
 * only its exported functions have names. */
static bool mf_has_symtab(Dwfl_Module *mod)
{
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    Elf_Scn *scn = NULL;
    while (elf && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_SYMTAB)
            return true;
    }
    return false;
}

static void mf_modfile_open(struct mf_modfile *mf)
{
    mf->opened = true;
    mf->state = MF_DEBUG_NO_FILE;
    if (!strchr(mf->path, '/'))
        return; /* linux-vdso.so.1 and the like: no file to read */
    mf->state = MF_DEBUG_UNREADABLE;
    const char *path = mf->path;
    char *rooted = NULL;
    if (mf_sysroot && mf->path[0] == '/') { /* --sysroot: its copy first */
        size_t n = strlen(mf_sysroot) + strlen(mf->path) + 1;
        rooted = mf_xmalloc(n);
        snprintf(rooted, n, "%s%s", mf_sysroot, mf->path);
        if (access(rooted, F_OK) == 0)
            path = rooted;
    }
    mf->opened_path = mf_xstrdup(path);
    free(rooted);
    /* Opened here, not by libdw: a path that is now a FIFO or a device must not block or
     * be read forever. */
    const char *why;
    int fd = mf_open_regular(mf->opened_path, true, UINT64_MAX, &why);
    if (fd < 0) {
        mf_error("cannot read %s: %s; its frames stay unsymbolized", mf_esc(mf->opened_path), why);
        return;
    }
    mf->dwfl = dwfl_begin(&mf_offline_callbacks);
    if (!mf->dwfl) {
        close(fd);
        return;
    }
    mf_debuginfod_attach(mf->dwfl, mf->label);
    dwfl_report_begin(mf->dwfl);
    mf->mod = dwfl_report_elf(mf->dwfl, mf->label, mf->opened_path, fd, 0, false);
    dwfl_report_end(mf->dwfl, NULL, NULL);
    if (!mf->mod) { /* on success libdw owns fd */
        close(fd);
        mf_error("cannot read %s: %s; its frames stay unsymbolized", mf_esc(mf->opened_path),
                 dwfl_errmsg(-1));
        return;
    }
    if (mf->build_id_len) {
        const unsigned char *bits;
        GElf_Addr vaddr;
        int n = dwfl_module_build_id(mf->mod, &bits, &vaddr);
        if (n != (int)mf->build_id_len || memcmp(bits, mf->build_id, mf->build_id_len) != 0) {
            mf->state = MF_DEBUG_OTHER_FILE;
            if (!mf->plumbing) /* the profiler's own frames are trimmed: a rebuild is no news */
                mf_error("%s is not the file the profiled program ran (build-id differs); its "
                         "frames stay unsymbolized", mf_esc(mf->opened_path));
            return;
        }
    }
    mf->usable = true;
    mf_sym_index(mf);
    Dwarf_Addr bias;
    mf->dwarf = dwfl_module_getdwarf(mf->mod, &bias);
    mf->state = mf->dwarf ? MF_DEBUG_OK : mf_has_symtab(mf->mod) ? MF_DEBUG_NONE
                                                                  : MF_DEBUG_STRIPPED;
}

bool mf_module_debug(const struct mf_module *m, struct mf_module_debug *out)
{
    if (m->modfile == MF_MAP_EMPTY || m->modfile >= mf_nmodfiles)
        return false;
    const struct mf_modfile *mf = &mf_modfiles[m->modfile];
    if (!mf->opened)
        return false;
    out->id = m->modfile;
    out->state = mf->state;
    out->plumbing = mf->plumbing;
    out->path = mf->path;
    out->opened = mf->opened_path ? mf->opened_path : mf->path;
    return true;
}

static bool mf_modfile_eq(const void *ctx, uint32_t idx)
{
    const struct mf_module *m = ctx;
    const struct mf_modfile *mf = &mf_modfiles[idx];
    return strcmp(mf->path, m->path) == 0 && mf->build_id_len == m->build_id_len &&
           memcmp(mf->build_id, m->build_id, m->build_id_len) == 0;
}

static struct mf_modfile *mf_modfile_of(struct mf_module *m)
{
    if (m->modfile == MF_MAP_EMPTY) {
        uint64_t key = mf_hash_bytes(m->path, strlen(m->path), 0) ^
                       mf_hash_bytes(m->build_id, m->build_id_len, 1);
        bool added;
        m->modfile = mf_map_put(&mf_modfile_ids, key, mf_modfile_eq, m, mf_nmodfiles, &added);
        if (added) {
            MF_GROW(mf_modfiles, mf_nmodfiles, mf_modfiles_cap);
            struct mf_modfile *mf = &mf_modfiles[mf_nmodfiles++];
            memset(mf, 0, sizeof *mf);
            mf->path = mf_xstrdup(m->path);
            mf->label = *m->path ? mf_basename(mf->path) : "?";
            mf->build_id_len = m->build_id_len;
            memcpy(mf->build_id, m->build_id, sizeof mf->build_id);
            mf->plumbing = mf_trim_module(mf->label);
        }
    }
    return &mf_modfiles[m->modfile];
}

/* ---- one address ------------------------------------------------------------------------ */

/* A mangled linkage name carries the scope and parameters (C++, Rust); a plain one is an
 * asm alias (glibc's __GI_setlocale for setlocale), so the source name is better. */
static const char *mf_die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!n)
        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (n && mf_is_mangled(n))
        return n;
    const char *plain = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
    return plain ? plain : n;
}

static void mf_push(uint32_t name, uint32_t file, uint32_t line, bool plumbing)
{
    MF_GROW(mf_arena, mf_narena, mf_arena_cap);
    mf_arena[mf_narena++] = (struct mf_frame){name, file, line, plumbing};
}

static uint32_t mf_label(const struct mf_modfile *mf, uint64_t vaddr)
{
    char buf[4200];
    snprintf(buf, sizeof buf, "[%s+0x%llx]", mf->label, (unsigned long long)vaddr);
    return mf_intern(buf);
}

/* ---- the function index of a CU --------------------------------------------------------- */

static int mf_fn_range_cmp(const void *a, const void *b)
{
    const struct mf_fn_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Collects the ranges of every concrete function below die: into namespaces, classes and
 * modules (C++ and Rust nest functions there), not into function bodies. */
static void mf_index_walk(Dwarf_Die *die, struct mf_cu_index *ix, size_t *cap, unsigned depth)
{
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(die, &child) != 0)
        return;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (lo >= hi)
                    continue;
                MF_GROW(ix->r, ix->n, *cap);
                ix->r[ix->n++] = (struct mf_fn_range){lo, hi, dwarf_dieoffset(&child)};
            }
        } else if (dwarf_haschildren(&child) > 0) {
            mf_index_walk(&child, ix, cap, depth + 1);
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

static const struct mf_cu_index *mf_cu_index_of(struct mf_modfile *mf, Dwarf_Die *cu)
{
    bool added;
    uint32_t i = mf_map_put(&mf->cu_ids, dwarf_dieoffset(cu), NULL, NULL, mf->ncus, &added);
    if (added) {
        MF_GROW(mf->cus, mf->ncus, mf->cus_cap);
        struct mf_cu_index *ix = &mf->cus[mf->ncus++];
        memset(ix, 0, sizeof *ix);
        size_t cap = 0;
        mf_index_walk(cu, ix, &cap, 0);
        if (ix->n > 1)
            qsort(ix->r, ix->n, sizeof *ix->r, mf_fn_range_cmp);
    }
    return &mf->cus[i];
}

static bool mf_has_pc_scope(int tag)
{
    return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
           tag == DW_TAG_try_block || tag == DW_TAG_catch_block;
}

/* Fills scopes with the DIEs containing DWARF address a, innermost first, ending with the
 * function (like dwarf_getscopes, without walking the CU). Returns the count, 0 if no
 * function of the CU contains a. */
static int mf_scopes(struct mf_modfile *mf, Dwarf_Die *cu, uint64_t a, Dwarf_Die *scopes)
{
    if (!mf->dwarf)
        return 0;
    const struct mf_cu_index *ix = mf_cu_index_of(mf, cu);
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->r[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct mf_fn_range *best = NULL; /* the tightest range: nested functions exist */
    for (size_t i = lo, steps = 0; i > 0 && steps < 16; i--, steps++) {
        const struct mf_fn_range *r = &ix->r[i - 1];
        if (a < r->hi && (!best || r->hi - r->lo < best->hi - best->lo))
            best = r;
    }
    Dwarf_Die chain[MF_MAX_SCOPES];
    int n = 0;
    if (!best || !dwarf_offdie(mf->dwarf, best->die, &chain[0]))
        return 0;
    for (n = 1; n < MF_MAX_SCOPES;) {
        Dwarf_Die child;
        bool found = false;
        if (dwarf_child(&chain[n - 1], &child) == 0) {
            do {
                if (mf_has_pc_scope(dwarf_tag(&child)) && dwarf_haspc(&child, a) == 1) {
                    found = true;
                    break;
                }
            } while (dwarf_siblingof(&child, &child) == 0);
        }
        if (!found)
            break;
        chain[n++] = child;
    }
    for (int i = 0; i < n; i++)
        scopes[i] = chain[n - 1 - i];
    return n;
}

/* Resolves file address vaddr (a return address) into the arena, like eu-addr2line -i:
 * one frame per inlined call, innermost first, each at the line its callee was called from. */
static void mf_resolve(struct mf_modfile *mf, uint64_t vaddr)
{
    if (!mf->usable) {
        mf_push(mf_label(mf, vaddr), 0, 0, mf->plumbing);
        return;
    }
    uint64_t a = vaddr ? vaddr - 1 : 0; /* inside the call instruction, not after it */
    uint32_t file = 0, line = 0;
    Dwfl_Line *l = dwfl_module_getsrc(mf->mod, a);
    if (l) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL);
        if (src) {
            file = mf_intern(src);
            line = lineno > 0 ? (uint32_t)lineno : 0;
        }
    }
    const struct mf_sym *sym = mf_sym_find(mf, a);
    uint32_t start = mf_narena;
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mf->mod, a, &bias);
    Dwarf_Die scopes[MF_MAX_SCOPES];
    int n = cu ? mf_scopes(mf, cu, a - bias, scopes) : 0;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    for (int i = 0; i < n; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
            continue;
        const char *name = mf_die_name(&scopes[i]);
        if (!name && tag == DW_TAG_subprogram && sym)
            name = sym->name;
        mf_push(name ? mf_intern_demangled(name) : mf_label(mf, vaddr), file, line, mf->plumbing);
        if (tag == DW_TAG_subprogram)
            break;
        /* The next frame out is where this inlined call was made. */
        Dwarf_Attribute attr;
        Dwarf_Word call_file = 0, call_line = 0;
        file = 0;
        line = 0;
        if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &call_file) == 0 &&
            (files || dwarf_getsrcfiles(cu, &files, &nfiles) == 0) && call_file < nfiles) {
            const char *src = dwarf_filesrc(files, call_file, NULL, NULL);
            file = src ? mf_intern(src) : 0;
        }
        if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &call_line) == 0)
            line = call_line <= UINT32_MAX ? (uint32_t)call_line : 0;
    }
    if (mf_narena == start) /* no DWARF for it: the symbol table's name, or the address */
        mf_push(sym ? mf_intern_demangled(sym->name) : mf_label(mf, vaddr), file, line,
                mf->plumbing);
}

static struct mf_module *mf_module_of(struct mf_process *pr, uint64_t pc, uint32_t epoch)
{
    uint32_t lo = mf_modules_from(pr, pc); /* the last module starting at or before pc */
    /* Ranges overlap only when a library was unloaded and another mapped there: of the
     * records the stack's epoch may see, the later wins. Look back a little for a long
     * module that encloses a short one. */
    struct mf_module *best = NULL;
    for (uint32_t i = lo, steps = 0; i > 0 && steps < 8; i--, steps++) {
        struct mf_module *m = &pr->modules[i - 1];
        if (pc < m->hi && m->epoch <= epoch && (!best || m->order > best->order))
            best = m;
    }
    return best;
}

uint32_t mf_module_index(const struct mf_process *pr, uint64_t pc, uint32_t epoch)
{
    const struct mf_module *m = mf_module_of((struct mf_process *)pr, pc, epoch);
    return m ? (uint32_t)(m - pr->modules) : UINT32_MAX;
}

void mf_symbolize(struct mf_process *pr, uint64_t pc, uint32_t epoch, struct mf_frames *out)
{
    struct mf_module *m = mf_module_of(pr, pc, epoch);
    struct mf_run run;
    if (!m) {
        char buf[40];
        snprintf(buf, sizeof buf, "[0x%llx]", (unsigned long long)pc);
        run = (struct mf_run){mf_narena, 1};
        mf_push(mf_intern(buf), 0, 0, false);
    } else {
        struct mf_modfile *mf = mf_modfile_of(m);
        if (!mf->opened)
            mf_modfile_open(mf);
        uint64_t vaddr = pc - m->bias;
        bool added;
        uint32_t r = mf_map_put(&mf->cache, vaddr, NULL, NULL, mf_nruns, &added);
        if (added) {
            uint32_t first = mf_narena;
            mf_resolve(mf, vaddr);
            MF_GROW(mf_runs, mf_nruns, mf_runs_cap);
            mf_runs[mf_nruns++] = (struct mf_run){first, mf_narena - first};
        }
        run = mf_runs[r];
    }
    for (uint32_t i = 0; i < run.count; i++) {
        MF_GROW(out->v, out->n, out->cap);
        out->v[out->n++] = mf_arena[run.first + i];
    }
}

/* ---- function entries ------------------------------------------------------------------ */

static int mf_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The entries of a module file's functions, from the search table of its .eh_frame_hdr,
 * which a stripped file keeps (unwinders need it). Only the layout every linker writes is
 * read: version 1, a 4-byte frame pointer, a udata4 count, datarel sdata4 pairs. */
static void mf_entries_read(struct mf_modfile *mf)
{
    mf->entries_read = true;
    GElf_Addr bias;
    Elf *elf = mf->usable ? dwfl_module_getelf(mf->mod, &bias) : NULL;
    size_t nph;
    const char *ident = elf ? elf_getident(elf, NULL) : NULL;
    if (!ident || ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB) ||
        elf_getphdrnum(elf, &nph) != 0)
        return;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME || ph.p_filesz < 12)
            continue;
        Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
        const uint8_t *h = d ? d->d_buf : NULL;
        if (!h || h[0] != 1 || (h[1] & 0x0f) != DW_EH_PE_sdata4 || h[2] != DW_EH_PE_udata4 ||
            h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
            return;
        uint32_t n;
        memcpy(&n, h + 8, 4);
        if (n > (ph.p_filesz - 12) / 8)
            return;
        mf->entries = mf_xmalloc(((size_t)n + 1) * sizeof *mf->entries);
        for (uint32_t k = 0; k < n; k++) {
            int32_t off;
            memcpy(&off, h + 12 + 8 * (size_t)k, 4);
            mf->entries[k] = ph.p_vaddr + (uint64_t)(int64_t)off;
        }
        qsort(mf->entries, n, sizeof *mf->entries, mf_u64_cmp); /* sorted already, by the format */
        mf->nentries = n;
        return;
    }
}

bool mf_function_entry(struct mf_module *m, uint64_t pc, uint32_t *modfile, uint64_t *entry)
{
    struct mf_modfile *mf = mf_modfile_of(m);
    if (!mf->opened)
        mf_modfile_open(mf);
    if (!mf->entries_read)
        mf_entries_read(mf);
    uint64_t a = pc - m->bias - 1; /* inside the call: a call may end its function */
    uint32_t lo = 0, hi = mf->nentries;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (mf->entries[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return false;
    *modfile = m->modfile;
    *entry = mf->entries[lo - 1];
    return true;
}

void mf_symbolize_end(void)
{
    mf_debuginfod_end(); /* before dwfl_end: it names modules */
    for (uint32_t i = 0; i < mf_nmodfiles; i++) {
        struct mf_modfile *mf = &mf_modfiles[i];
        if (mf->dwfl)
            dwfl_end(mf->dwfl);
        free(mf->syms);
        free(mf->path);
        free(mf->opened_path);
        mf_map_free(&mf->cache);
        for (uint32_t k = 0; k < mf->ncus; k++)
            free(mf->cus[k].r);
        free(mf->cus);
        mf_map_free(&mf->cu_ids);
        free(mf->entries);
    }
    free(mf_modfiles);
    free(mf_runs);
    free(mf_arena);
    mf_map_free(&mf_modfile_ids);
    mf_modfiles = NULL;
    mf_runs = NULL;
    mf_arena = NULL;
    mf_nmodfiles = mf_nruns = mf_narena = 0;
    mf_modfiles_cap = mf_runs_cap = mf_arena_cap = 0; /* the next profile starts afresh */
}
