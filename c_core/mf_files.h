/* Start-up's directory descriptor (mf_files.c): mf_files_start() keeps the one it accepted
 * the directory with for the files its thread makes next; this closes it at that thread's
 * start-up's end, or in a fork child (forked: another thread of the parent's may have been
 * starting). errno is kept. */
#ifndef MF_FILES_H
#define MF_FILES_H

#include <stdbool.h>

void mf_files_start_end(bool forked);

#endif
