/* Shared by early_alloc.c and early_alloc_lib.c. */
#define EARLY_THREADS 4
#define EARLY_KEPT 64
#define EARLY_ROUNDS 20
#define EARLY_SIZE(i) (16 + 24 * (size_t)(i)) /* bytes first asked for block i */

extern char *early_blocks[EARLY_THREADS][EARLY_KEPT];
extern int early_constructor_done;
