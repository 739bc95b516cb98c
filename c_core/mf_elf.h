/* A loaded ELF object's dynamic section (mf_elf.c): what the preload library's search for the
 * next operator new (lib_preload/mf_next.c) and the redirection of libunwind's imports
 * (mf_unwind_imports.c) read of it. Nothing here allocates or takes a lock: the search runs
 * inside a program's first allocation call. */
#ifndef MF_ELF_H
#define MF_ELF_H

#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mf_elf_dynamic {
    uintptr_t base; /* load bias */
    const ElfW(Sym) *symtab;
    const char *strtab;
    size_t strsz;
    const ElfW(Half) *versym;
    const uint32_t *gnu_hash;
    const ElfW(Word) *sysv_hash;
    const ElfW(Rela) *rela, *jmprel; /* relocations, and the PLT's */
    size_t relasz, pltrelsz;
    long pltrel; /* the PLT's relocation type, DT_RELA or DT_REL */
    bool rel;    /* a DT_REL table (not used on x86-64 or AArch64) */
};

/* The object's dynamic section (its PT_DYNAMIC segment), or NULL if it has none. */
const ElfW(Dyn) *mf_elf_dynamic_of(const struct dl_phdr_info *info);
/* Reads the dynamic section dyn of the object loaded at base into *o: its addresses made
 * absolute, tables it lacks NULL. */
void mf_elf_dynamic_read(const ElfW(Dyn) *dyn, uintptr_t base, struct mf_elf_dynamic *o);

#endif
