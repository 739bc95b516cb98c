/* Calls malloc from code in 70 regions of 4 GiB each, as a JIT's code may lie: each region
 * gets a copy of a small function that calls malloc, and region r's copy makes r + 1 calls
 * of r + 1 bytes. Its allocation sites' return addresses then have 70 high halves, more than
 * a thread file's header holds (MF_PC_HI_MAX), so the later ones are kept in wide nodes.
 * Prints each copy's return address from malloc (its "site"), one per line, to argv[1]. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define REGIONS 70

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: code_regions OUT\n");
        return 2;
    }
    /* sub $8,%rsp; movabs $malloc,%rax; call *%rax; add $8,%rsp; ret: the return address
     * from malloc is 16 bytes in, and the stack is aligned for the call. */
    unsigned char code[] = {0x48, 0x83, 0xec, 0x08, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,
                            0xff, 0xd0, 0x48, 0x83, 0xc4, 0x08, 0xc3};
    void *(*target)(size_t) = malloc;
    memcpy(code + 6, &target, sizeof target);
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    void *(*fn[REGIONS])(size_t);
    for (int r = 0; r < REGIONS; r++) {
        /* a free spot in each of 70 regions of 4 GiB, from 64 TiB up */
        uint64_t hint = (uint64_t)(16384 + 3 * r) << 32;
        void *m = mmap((void *)hint, 4096, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (m == MAP_FAILED || (uint64_t)m != hint) {
            perror("mmap");
            return 1;
        }
        memcpy(m, code, sizeof code);
        if (mprotect(m, 4096, PROT_READ | PROT_EXEC) != 0) {
            perror("mprotect");
            return 1;
        }
        fn[r] = (void *(*)(size_t))m;
        fprintf(out, "0x%llx\n", (unsigned long long)hint + 16);
    }
    fclose(out);
    for (int r = 0; r < REGIONS; r++)
        for (int i = 0; i <= r; i++)
            free(fn[r]((size_t)r + 1));
    return 0;
}
