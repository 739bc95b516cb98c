/* The dynamic-section reader declared in mf_elf.h. */
#include <elf.h>
#include <string.h>

#include "mf_elf.h"

const ElfW(Dyn) *mf_elf_dynamic_of(const struct dl_phdr_info *info)
{
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            return (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return NULL;
}

/* A dynamic-section address: glibc adds the load bias to them in place, except in a read-only
 * dynamic section (the vDSO's); other loaders and some architectures leave them as in the
 * file. */
static uintptr_t mf_dyn_addr(uintptr_t base, ElfW(Addr) p)
{
    return p < base ? base + p : p;
}

void mf_elf_dynamic_read(const ElfW(Dyn) *dyn, uintptr_t base, struct mf_elf_dynamic *o)
{
    memset(o, 0, sizeof *o);
    o->base = base;
    o->pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t p = mf_dyn_addr(base, dyn->d_un.d_ptr);
        switch (dyn->d_tag) {
        case DT_SYMTAB: o->symtab = (const ElfW(Sym) *)p; break;
        case DT_STRTAB: o->strtab = (const char *)p; break;
        case DT_STRSZ: o->strsz = dyn->d_un.d_val; break;
        case DT_VERSYM: o->versym = (const ElfW(Half) *)p; break;
        case DT_GNU_HASH: o->gnu_hash = (const uint32_t *)p; break;
        case DT_HASH: o->sysv_hash = (const ElfW(Word) *)p; break;
        case DT_RELA: o->rela = (const ElfW(Rela) *)p; break;
        case DT_RELASZ: o->relasz = dyn->d_un.d_val; break;
        case DT_JMPREL: o->jmprel = (const ElfW(Rela) *)p; break;
        case DT_PLTRELSZ: o->pltrelsz = dyn->d_un.d_val; break;
        case DT_PLTREL: o->pltrel = (long)dyn->d_un.d_val; break;
        case DT_REL: o->rel = true; break;
        default: break;
        }
    }
}
