/* The unwind rule of one return address, read from its module's .eh_frame (DWARF CFI, the
 * tables the compiler emits for exceptions), for the rule walk (mf_unwind.c).
 *
 * libunwind learns the same rules, but a short process pays for it: loading libunwind and
 * liblzma took 0.8 ms per process on the `ls` loop of `make bench`, and its cursor blocks
 * and unblocks every signal (two system calls) at each lookup, about 900 of them in one
 * `ls /usr/lib`, 1.9 ms more. What the walk needs from the CFI is small: where the canonical
 * frame address (CFA) is, rsp + k or rbp + 16, and where the caller's rbp and the return
 * address were saved. So each new return address is looked up here instead: the module is
 * found with dl_iterate_phdr (under the loader's lock, as libunwind does, so it cannot be
 * unloaded meanwhile), its .eh_frame_hdr table is searched for the FDE, and the CIE's and
 * the FDE's instructions are run up to the call. Anything this does not know (an
 * expression, a signal frame, a register other than rsp or rbp holding the CFA, a corrupt
 * table) is MF_CFI_OTHER: libunwind walks such stacks, loaded only then. Every read stays
 * inside the loaded segment that holds the table. */
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "mf_internal.h"

#if defined(__x86_64__)

/* DWARF register numbers (x86-64 psABI) */
#define MF_REG_RBP 6
#define MF_REG_RSP 7
#define MF_REG_RA 16

/* DW_EH_PE_* pointer encodings */
#define MF_PE_OMIT 0xff
#define MF_PE_FORMAT 0x0f
#define MF_PE_APPLY 0x70
#define MF_PE_PCREL 0x10
#define MF_PE_DATAREL 0x30
#define MF_PE_INDIRECT 0x80

/* How a register is recovered in the row being built. */
enum { MF_SAVED_SAME, MF_SAVED_AT, MF_SAVED_UNDEF, MF_SAVED_OTHER };

struct mf_cfa_row {
    int64_t cfa_off, rbp_off, ra_off; /* CFA = cfa_reg + cfa_off; saved at CFA + *_off */
    uint32_t cfa_reg;
    uint8_t cfa_expr, rbp, ra;        /* rbp, ra: MF_SAVED_* */
};

/* A cursor over [p, end) of readable memory: every read checks, a failed one sets bad. */
struct mf_cur {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t mf_get(struct mf_cur *c, unsigned n)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* little-endian */
    c->p += n;
    return v;
}

static uint64_t mf_uleb_long(struct mf_cur *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b = (uint8_t)mf_get(c, 1);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = true;
    return 0;
}

/* Most operands are one byte (a register, an offset under 128): read in line. */
static inline uint64_t mf_uleb(struct mf_cur *c)
{
    if (!c->bad && c->p < c->end && !(*c->p & 0x80))
        return *c->p++;
    return mf_uleb_long(c);
}

static int64_t mf_sleb(struct mf_cur *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b = (uint8_t)mf_get(c, 1);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (shift + 7 < 64 && (b & 0x40))
                v |= ~(uint64_t)0 << (shift + 7);
            return (int64_t)v;
        }
    }
    c->bad = true;
    return 0;
}

/* A block that starts with its uleb128 length (an expression, augmentation data): a cursor
 * over it, with c moved past it; c->bad if it overruns c. */
static struct mf_cur mf_block(struct mf_cur *c)
{
    uint64_t len = mf_uleb(c);
    struct mf_cur b = {c->p, c->p, true};
    if (c->bad || len > (uint64_t)(c->end - c->p)) {
        c->bad = true;
        return b;
    }
    b.end = c->p + len;
    b.bad = false;
    c->p += len;
    return b;
}

/* A CIE or FDE: its 4-byte length narrows c to the entry (the 64-bit form, and the zero
 * terminator, are left to libunwind). */
static bool mf_entry(struct mf_cur *c)
{
    uint64_t len = mf_get(c, 4);
    if (c->bad || len == 0 || len >= 0xfffffff0u || len > (uint64_t)(c->end - c->p))
        return false;
    c->end = c->p + len;
    return true;
}

/* A pointer in encoding enc; pc-relative to where it lies, data-relative to data. */
static uintptr_t mf_pointer(struct mf_cur *c, uint8_t enc, uintptr_t data)
{
    uintptr_t at = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & MF_PE_FORMAT) {
    case 0x00: v = mf_get(c, 8); break;                    /* absptr */
    case 0x01: v = mf_uleb(c); break;                      /* uleb128 */
    case 0x02: v = mf_get(c, 2); break;                    /* udata2 */
    case 0x03: v = mf_get(c, 4); break;                    /* udata4 */
    case 0x04: v = mf_get(c, 8); break;                    /* udata8 */
    case 0x09: v = (uint64_t)mf_sleb(c); break;            /* sleb128 */
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)mf_get(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)mf_get(c, 4); break;
    case 0x0c: v = mf_get(c, 8); break;
    default: c->bad = true; return 0;
    }
    switch (enc & MF_PE_APPLY) {
    case 0: break;
    case MF_PE_PCREL: v += at; break;
    case MF_PE_DATAREL: v += data; break;
    default: c->bad = true; return 0;
    }
    if (enc & MF_PE_INDIRECT)
        c->bad = true; /* never in .eh_frame's addresses; not followed */
    return (uintptr_t)v;
}

/* Runs CFA instructions [c->p, c->end) from loc while loc <= target. init: the row after
 * the CIE's instructions (DW_CFA_restore), NULL while running them. Returns false on an
 * instruction the walk cannot follow. */
static bool mf_cfa_run(struct mf_cur *c, struct mf_cfa_row *row, const struct mf_cfa_row *init,
                       uintptr_t loc, uintptr_t target, uint64_t code_align, int64_t data_align,
                       uint8_t fde_enc)
{
    struct mf_cfa_row saved[8];
    unsigned nsaved = 0;
    while (c->p < c->end && !c->bad) {
        uint8_t op = (uint8_t)mf_get(c, 1), low = op & 0x3f;
        uint64_t reg = 0, delta = 0;
        int64_t off = 0;
        bool set_reg = false; /* reg gets MF_SAVED_AT off */
        uint8_t how = MF_SAVED_AT;
        switch (op >> 6) {
        case 1: /* DW_CFA_advance_loc */
            delta = low * code_align;
            goto advance;
        case 2: /* DW_CFA_offset */
            reg = low;
            off = (int64_t)mf_uleb(c) * data_align;
            set_reg = true;
            break;
        case 3: /* DW_CFA_restore */
            reg = low;
            goto restore;
        default:
            break;
        }
        if (op >> 6)
            goto apply;
        switch (op) {
        case 0x00: /* nop */
            continue;
        case 0x01: /* set_loc */
            loc = mf_pointer(c, fde_enc, 0);
            if (loc > target)
                return !c->bad;
            continue;
        case 0x02: delta = mf_get(c, 1) * code_align; goto advance;
        case 0x03: delta = mf_get(c, 2) * code_align; goto advance;
        case 0x04: delta = mf_get(c, 4) * code_align; goto advance;
        case 0x05: /* offset_extended */
            reg = mf_uleb(c);
            off = (int64_t)mf_uleb(c) * data_align;
            set_reg = true;
            break;
        case 0x06: /* restore_extended */
            reg = mf_uleb(c);
            goto restore;
        case 0x07: /* undefined */
            reg = mf_uleb(c);
            how = MF_SAVED_UNDEF;
            set_reg = true;
            break;
        case 0x08: /* same_value */
            reg = mf_uleb(c);
            how = MF_SAVED_SAME;
            set_reg = true;
            break;
        case 0x09: /* register: reg kept in another register */
            reg = mf_uleb(c);
            mf_uleb(c);
            how = MF_SAVED_OTHER;
            set_reg = true;
            break;
        case 0x0a: /* remember_state */
            if (nsaved == sizeof saved / sizeof *saved)
                return false;
            saved[nsaved++] = *row;
            continue;
        case 0x0b: /* restore_state: the CFA too, as GCC's epilogues expect (and libgcc) */
            if (!nsaved)
                return false;
            *row = saved[--nsaved];
            continue;
        case 0x0c: /* def_cfa */
            row->cfa_reg = (uint32_t)mf_uleb(c);
            row->cfa_off = (int64_t)mf_uleb(c);
            row->cfa_expr = false;
            continue;
        case 0x0d: /* def_cfa_register */
            row->cfa_reg = (uint32_t)mf_uleb(c);
            row->cfa_expr = false;
            continue;
        case 0x0e: /* def_cfa_offset */
            row->cfa_off = (int64_t)mf_uleb(c);
            continue;
        case 0x0f: /* def_cfa_expression */
            mf_block(c);
            if (c->bad)
                return false;
            row->cfa_expr = true;
            continue;
        case 0x10: /* expression */
        case 0x16: /* val_expression */
            reg = mf_uleb(c);
            mf_block(c);
            if (c->bad)
                return false;
            how = MF_SAVED_OTHER;
            set_reg = true;
            break;
        case 0x11: /* offset_extended_sf */
            reg = mf_uleb(c);
            off = mf_sleb(c) * data_align;
            set_reg = true;
            break;
        case 0x12: /* def_cfa_sf */
            row->cfa_reg = (uint32_t)mf_uleb(c);
            row->cfa_off = mf_sleb(c) * data_align;
            row->cfa_expr = false;
            continue;
        case 0x13: /* def_cfa_offset_sf */
            row->cfa_off = mf_sleb(c) * data_align;
            continue;
        case 0x14: /* val_offset */
        case 0x15: /* val_offset_sf */
            reg = mf_uleb(c);
            (void)(op == 0x14 ? (int64_t)mf_uleb(c) : mf_sleb(c));
            how = MF_SAVED_OTHER;
            set_reg = true;
            break;
        case 0x2e: /* GNU_args_size: what a landing pad pops, not where the CFA is */
            mf_uleb(c);
            continue;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = mf_uleb(c);
            off = -(int64_t)mf_uleb(c) * data_align;
            set_reg = true;
            break;
        default:
            return false;
        }
    apply:
        if (!set_reg)
            continue;
        if (reg == MF_REG_RBP)
            row->rbp = how, row->rbp_off = off;
        else if (reg == MF_REG_RA)
            row->ra = how, row->ra_off = off;
        continue;
    restore:
        if (!init)
            return false; /* DW_CFA_restore inside the CIE means nothing */
        if (reg == MF_REG_RBP)
            row->rbp = init->rbp, row->rbp_off = init->rbp_off;
        else if (reg == MF_REG_RA)
            row->ra = init->ra, row->ra_off = init->ra_off;
        continue;
    advance:
        if (delta > target - loc)
            return !c->bad; /* the next row starts past the call */
        loc += delta;
    }
    return !c->bad;
}

/* The rule of the row: what mf_unwind.c's walk can follow, or MF_CFI_OTHER. */
static void mf_cfa_rule(const struct mf_cfa_row *r, struct mf_cfi_rule *out)
{
    out->kind = MF_CFI_OTHER;
    if (r->ra == MF_SAVED_UNDEF) { /* the outermost frame: _start, a thread's start */
        out->kind = MF_CFI_END;
        return;
    }
    if (r->cfa_expr || r->ra != MF_SAVED_AT || r->ra_off != -8)
        return;
    if (r->cfa_reg == MF_REG_RBP) {
        if (r->cfa_off == 16 && r->rbp == MF_SAVED_AT && r->rbp_off == -16)
            out->kind = MF_CFI_FP;
        return;
    }
    if (r->cfa_reg != MF_REG_RSP || r->cfa_off < 8 || (r->cfa_off & 7) ||
        r->cfa_off > MF_CFI_FRAME_MAX)
        return;
    out->k = (uint32_t)r->cfa_off;
    if (r->rbp == MF_SAVED_SAME) {
        out->kind = MF_CFI_SP;
    } else if (r->rbp == MF_SAVED_AT && r->rbp_off <= -16 && !(r->rbp_off & 7) &&
               -r->rbp_off <= r->cfa_off) { /* inside this frame, below the return address */
        out->kind = MF_CFI_SP_SAVED;
        out->off = (uint32_t)(-r->rbp_off / 8);
    }
}

/* The FDE for target in the .eh_frame_hdr at hdr, inside [lo, hi), and its rule. */
static void mf_cfi_from_hdr(uintptr_t hdr, uintptr_t lo, uintptr_t hi, uintptr_t target,
                            struct mf_cfi_rule *out)
{
    out->kind = MF_CFI_OTHER;
    struct mf_cur c = {(const uint8_t *)hdr, (const uint8_t *)hi, false};
    uint8_t version = (uint8_t)mf_get(&c, 1), ptr_enc = (uint8_t)mf_get(&c, 1);
    uint8_t count_enc = (uint8_t)mf_get(&c, 1), table_enc = (uint8_t)mf_get(&c, 1);
    /* The sorted table, in the one encoding linkers write: datarel sdata4 pairs. */
    if (c.bad || version != 1 || table_enc != (MF_PE_DATAREL | 0x0b) || count_enc == MF_PE_OMIT)
        return;
    mf_pointer(&c, ptr_enc, hdr);
    uint64_t count = mf_pointer(&c, count_enc, hdr);
    const int32_t *table = (const int32_t *)c.p;
    if (c.bad || ((uintptr_t)table & 3) || count == 0 ||
        count > (uint64_t)(hi - (uintptr_t)table) / 8)
        return;
    /* The last entry that starts at or before target. */
    int64_t want = (int64_t)(target - hdr);
    uint64_t a = 0, b = count;
    while (b - a > 1) {
        uint64_t m = a + (b - a) / 2;
        if (table[2 * m] <= want)
            a = m;
        else
            b = m;
    }
    if (table[2 * a] > want)
        return;
    uintptr_t fde = hdr + (intptr_t)table[2 * a + 1];
    if (fde < lo || fde >= hi)
        return;
    /* The FDE: length, CIE pointer, pc_begin, pc_range, augmentation data, instructions. */
    struct mf_cur f = {(const uint8_t *)fde, (const uint8_t *)hi, false};
    if (!mf_entry(&f))
        return;
    uintptr_t cie_at = (uintptr_t)f.p;
    uint64_t cie_ptr = mf_get(&f, 4);
    if (f.bad || cie_ptr == 0 || cie_ptr > cie_at - lo)
        return;
    /* The CIE: version, augmentation, alignments, return-address register. */
    struct mf_cur e = {(const uint8_t *)(cie_at - cie_ptr), (const uint8_t *)hi, false};
    if (!mf_entry(&e))
        return;
    if (mf_get(&e, 4) != 0) /* a CIE's id */
        return;
    uint8_t cver = (uint8_t)mf_get(&e, 1);
    const char *aug = (const char *)e.p;
    size_t alen = strnlen(aug, (size_t)(e.end - e.p));
    if (e.bad || (cver != 1 && cver != 3) || alen == (size_t)(e.end - e.p) ||
        (alen && aug[0] != 'z'))
        return;
    e.p += alen + 1;
    uint64_t code_align = mf_uleb(&e);
    int64_t data_align = mf_sleb(&e);
    uint64_t ra_reg = cver == 1 ? mf_get(&e, 1) : mf_uleb(&e);
    uint8_t fde_enc = 0; /* absptr */
    if (alen) {
        struct mf_cur d = mf_block(&e);
        if (e.bad)
            return;
        for (size_t i = 1; i < alen && !d.bad; i++) {
            if (aug[i] == 'R') {
                fde_enc = (uint8_t)mf_get(&d, 1);
            } else if (aug[i] == 'P') {
                uint8_t penc = (uint8_t)mf_get(&d, 1);
                mf_pointer(&d, penc & 0x7f, 0); /* skipped, never followed */
            } else if (aug[i] == 'L') {
                mf_get(&d, 1);
            } else {
                return; /* 'S' (a signal frame) and anything newer: libunwind's */
            }
        }
        if (d.bad)
            return;
    }
    if (e.bad || ra_reg != MF_REG_RA || code_align == 0)
        return;
    uintptr_t begin = mf_pointer(&f, fde_enc, 0);
    uintptr_t range = mf_pointer(&f, fde_enc & MF_PE_FORMAT, 0);
    if (f.bad || target < begin || target - begin >= range)
        return;
    if (alen)
        mf_block(&f);
    if (f.bad)
        return;
    struct mf_cfa_row row = {0, 0, 0, UINT32_MAX, 0, MF_SAVED_SAME, MF_SAVED_SAME}, init;
    if (!mf_cfa_run(&e, &row, NULL, begin, UINTPTR_MAX, code_align, data_align, fde_enc))
        return;
    init = row;
    if (!mf_cfa_run(&f, &row, &init, begin, target, code_align, data_align, fde_enc))
        return;
    mf_cfa_rule(&row, out);
}

/* The objects the last lookups found, good while the loader has loaded and unloaded nothing
 * since (its counts, dlpi_adds and dlpi_subs, as they were): a lookup then finds its object
 * here from dl_iterate_phdr's first callback and stops, instead of visiting every object's
 * program headers (93 K of the 185 K instructions one `ls /usr/lib` spent reading rules; a
 * program of a hundred libraries pays a hundred visits a new address). The table is read
 * and parsed inside the callback as before, under the loader's lock, which dlclose takes
 * before it unmaps; `busy` keeps two threads apart where a loader does not lock callbacks. */
#define MF_CFI_OBJECTS 16
struct mf_cfi_object {
    uintptr_t lo, hi;               /* the loaded segment that held the address */
    uintptr_t hdr, seg_lo, seg_hi;  /* its .eh_frame_hdr and the segment holding it; hdr 0: none */
};
static struct {
    int busy;
    bool valid;
    unsigned long long adds, subs;
    uint32_t n, next;
    struct mf_cfi_object o[MF_CFI_OBJECTS];
} mf_cfi_objects MF_LARGE_ZEROED;

struct mf_cfi_find {
    uintptr_t target;
    bool found;
    bool first;  /* the next callback is the first */
    bool cached; /* this lookup holds mf_cfi_objects */
    struct mf_cfi_rule rule;
};

static void mf_cfi_read(const struct mf_cfi_object *o, struct mf_cfi_find *q)
{
    q->found = true;
    q->rule.kind = MF_CFI_OTHER;
    if (o->hdr)
        mf_cfi_from_hdr(o->hdr, o->seg_lo, o->seg_hi, q->target, &q->rule);
}

/* At the first callback: the object that holds the target if the cache knows it; else the
 * cache is emptied if the loader's counts moved (or are not given). */
static bool mf_cfi_cached(struct dl_phdr_info *info, size_t size, struct mf_cfi_find *q)
{
    bool counts = size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs;
    if (counts && mf_cfi_objects.valid && info->dlpi_adds == mf_cfi_objects.adds &&
        info->dlpi_subs == mf_cfi_objects.subs) {
        for (uint32_t i = 0; i < mf_cfi_objects.n; i++) {
            const struct mf_cfi_object *o = &mf_cfi_objects.o[i];
            if (o->lo <= q->target && q->target - o->lo < o->hi - o->lo) {
                mf_cfi_read(o, q);
                return true;
            }
        }
        return false;
    }
    mf_cfi_objects.valid = counts;
    mf_cfi_objects.n = mf_cfi_objects.next = 0;
    if (counts) {
        mf_cfi_objects.adds = info->dlpi_adds;
        mf_cfi_objects.subs = info->dlpi_subs;
    }
    return false;
}

static int mf_cfi_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct mf_cfi_find *q = arg;
    if (q->first) {
        q->first = false;
        if (q->cached && mf_cfi_cached(info, size, q))
            return 1;
    }
    const ElfW(Phdr) *eh = NULL, *load = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && a <= q->target && q->target - a < ph->p_memsz)
            load = ph;
        else if (ph->p_type == PT_GNU_EH_FRAME)
            eh = ph;
    }
    if (!load)
        return 0;
    struct mf_cfi_object o = {info->dlpi_addr + load->p_vaddr,
                              info->dlpi_addr + load->p_vaddr + load->p_memsz, 0, 0, 0};
    uintptr_t hdr = eh ? info->dlpi_addr + eh->p_vaddr : 0;
    for (int i = 0; hdr && i < info->dlpi_phnum; i++) { /* the readable segment that holds it */
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && a <= hdr && hdr - a < ph->p_filesz) {
            o.hdr = hdr;
            o.seg_lo = a;
            o.seg_hi = a + ph->p_filesz;
            break;
        }
    }
    if (q->cached && mf_cfi_objects.valid) {
        mf_cfi_objects.o[mf_cfi_objects.next] = o;
        mf_cfi_objects.next = (mf_cfi_objects.next + 1) % MF_CFI_OBJECTS;
        if (mf_cfi_objects.n < MF_CFI_OBJECTS)
            mf_cfi_objects.n++;
    }
    mf_cfi_read(&o, q);
    return 1;
}

bool mf_cfi_rule_at(uintptr_t pc, struct mf_cfi_rule *rule)
{
    struct mf_cfi_find q = {.target = pc - 1, /* the call, not what follows */
                            .first = true, .rule = {.kind = MF_CFI_OTHER}};
    q.cached = !__atomic_exchange_n(&mf_cfi_objects.busy, 1, __ATOMIC_ACQUIRE);
    mf_dl_iterate(mf_cfi_visit, &q);
    if (q.cached)
        __atomic_store_n(&mf_cfi_objects.busy, 0, __ATOMIC_RELEASE);
    *rule = q.rule;
    return q.found;
}

#else

bool mf_cfi_rule_at(uintptr_t pc, struct mf_cfi_rule *rule)
{
    (void)pc;
    rule->kind = MF_CFI_OTHER;
    return false;
}

#endif
