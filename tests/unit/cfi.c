/* The CFI interpreter (c_core/mf_cfi.c) on a hand-made .eh_frame_hdr, CIE and FDEs: the rule
 * it gives each address of a function whose prologue pushes rbp, makes it the frame
 * pointer and whose epilogue pops it, and of an outermost frame; what it leaves to libunwind
 * (an expression, a signal frame's CIE, an address outside every FDE). The file is included
 * to reach its static functions. */
#include "../../c_core/mf_cfi.c"

#include "unit.h"

/* The core's loader walk, which only mf_cfi_rule_at (not tested here) calls. */
int mf_dl_iterate(int (*visit)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    (void)visit, (void)arg;
    return 0;
}

static _Alignas(8) uint8_t mem[512];
static size_t at;

static void put(uint64_t v, unsigned n)
{
    memcpy(mem + at, &v, n);
    at += n;
}

static void bytes(const char *s, size_t n)
{
    memcpy(mem + at, s, n);
    at += n;
}
#define BYTES(lit) bytes(lit, sizeof(lit) - 1)

/* Closes an entry opened at `start` (its 4-byte length there), padded to 8 with nops. */
static void end_entry(size_t start)
{
    while ((at - start) % 8 != 4)
        put(0, 1); /* DW_CFA_nop */
    uint32_t len = (uint32_t)(at - start - 4);
    memcpy(mem + start, &len, 4);
}

/* A CIE: version 1, augmentation zR (or zRS: a signal frame), code alignment 1, data
 * alignment -8, return address in register 16, FDE pointers absolute (DW_EH_PE_absptr);
 * CFA = rsp + 8 and the return address at CFA - 8, as on entry to any function. */
static size_t cie(int signal_frame)
{
    size_t start = at;
    put(0, 4); /* length */
    put(0, 4); /* CIE id */
    put(1, 1);
    if (signal_frame)
        bytes("zRS", 4);
    else
        bytes("zR", 3);
    BYTES("\x01\x78\x10"); /* code align 1, data align -8 (sleb), ra register 16 */
    BYTES("\x01\x00");     /* augmentation data: 1 byte, R = absptr */
    BYTES("\x0c\x07\x08"); /* def_cfa rsp, 8 */
    BYTES("\x90\x01");     /* offset ra, 1 * -8 */
    end_entry(start);
    return start;
}

/* An FDE of the CIE at cie_at for [begin, begin + range), with instructions ins. */
static size_t fde(size_t cie_at, uintptr_t begin, uint64_t range, const char *ins, size_t n)
{
    size_t start = at;
    put(0, 4);
    put(at - cie_at, 4); /* the CIE pointer: back from this field to the CIE */
    put(begin, 8);
    put(range, 8);
    put(0, 1); /* no augmentation data */
    bytes(ins, n);
    end_entry(start);
    return start;
}

static int rule(uintptr_t hdr, uintptr_t target, uint32_t *k, uint32_t *off)
{
    struct mf_cfi_rule r = {-1, 0, 0};
    mf_cfi_from_hdr(hdr, (uintptr_t)mem, (uintptr_t)mem + sizeof mem, target, &r);
    *k = r.k;
    *off = r.off;
    return r.kind;
}

int main(void)
{
    /* .eh_frame_hdr: version 1, eh_frame_ptr pcrel sdata4, count udata4, table datarel
     * sdata4; four FDEs, sorted by the address they start at. */
    uintptr_t hdr = (uintptr_t)mem, code = hdr + 0x10000;
    const size_t nfde = 4, table = 12;
    at = table + 8 * nfde;
    size_t c = cie(0), s = cie(1);
    size_t f[4];
    /* f0 at code: push rbp (+1: CFA rsp+16, rbp at CFA-16); mov rsp, rbp (+4: CFA rbp+16);
     * the body; pop rbp (+12: CFA rsp+8, rbp restored); ret; 16 bytes. */
    static const char f0[] = "\x41\x0e\x10\x86\x02" /* advance 1; def_cfa_offset 16; offset rbp, 2 */
                             "\x43\x0d\x06"         /* advance 3; def_cfa_register rbp */
                             "\x48\x0c\x07\x08\xc6"; /* advance 8; def_cfa rsp, 8; restore rbp */
    f[0] = fde(c, code, 16, f0, sizeof f0 - 1);
    /* f1 at code + 32: the outermost frame (the return address undefined), 8 bytes. */
    f[1] = fde(c, code + 32, 8, "\x07\x10", 2);
    /* f2 at code + 48: the CFA from an expression after 2 bytes; remember/restore state. */
    static const char f2[] = "\x0a\x42\x0f\x02\x77\x00" /* remember; advance 2; def_cfa_expression */
                             "\x42\x0b";                /* advance 2; restore_state */
    f[2] = fde(c, code + 48, 8, f2, sizeof f2 - 1);
    /* f3 at code + 64: a signal frame's CIE. */
    f[3] = fde(s, code + 64, 8, "", 0);
    CHECK(at <= sizeof mem);

    size_t end = at;
    at = 0;
    BYTES("\x01\x1b\x03\x3b");
    put((uint64_t)(uint32_t)(int32_t)(c - 4), 4); /* eh_frame_ptr, pc-relative: unused */
    put(nfde, 4);
    const uintptr_t starts[] = {code, code + 32, code + 48, code + 64};
    for (size_t i = 0; i < nfde; i++) {
        put((uint32_t)(int32_t)(starts[i] - hdr), 4);
        put((uint32_t)(int32_t)f[i], 4);
    }
    CHECK_EQ(at, table + 8 * nfde);
    at = end;

    uint32_t k = 0, off = 0;
    CHECK_EQ(rule(hdr, code, &k, &off), MF_CFI_SP);
    CHECK_EQ(k, 8);
    CHECK_EQ(rule(hdr, code + 1, &k, &off), MF_CFI_SP_SAVED);
    CHECK_EQ(k, 16);
    CHECK_EQ(off, 2);
    CHECK_EQ(rule(hdr, code + 3, &k, &off), MF_CFI_SP_SAVED);
    CHECK_EQ(rule(hdr, code + 4, &k, &off), MF_CFI_FP);
    CHECK_EQ(rule(hdr, code + 11, &k, &off), MF_CFI_FP);
    CHECK_EQ(rule(hdr, code + 12, &k, &off), MF_CFI_SP);
    CHECK_EQ(k, 8);
    CHECK_EQ(rule(hdr, code + 15, &k, &off), MF_CFI_SP);
    CHECK_EQ(rule(hdr, code + 16, &k, &off), MF_CFI_OTHER); /* past f0, before f1 */
    CHECK_EQ(rule(hdr, code - 1, &k, &off), MF_CFI_OTHER);  /* before every FDE */
    CHECK_EQ(rule(hdr, code + 32, &k, &off), MF_CFI_END);
    CHECK_EQ(rule(hdr, code + 49, &k, &off), MF_CFI_SP);    /* before the expression */
    CHECK_EQ(rule(hdr, code + 50, &k, &off), MF_CFI_OTHER); /* CFA from an expression */
    CHECK_EQ(rule(hdr, code + 52, &k, &off), MF_CFI_SP);    /* the state restored */
    CHECK_EQ(rule(hdr, code + 64, &k, &off), MF_CFI_OTHER); /* signal frame: libunwind's */

    /* A table that claims more FDEs than the segment holds is not read. */
    uint32_t many = 1u << 30;
    memcpy(mem + 8, &many, 4);
    CHECK_EQ(rule(hdr, code, &k, &off), MF_CFI_OTHER);
    return mf_unit_done("unit_cfi_interpreter");
}
