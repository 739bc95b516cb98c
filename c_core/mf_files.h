/* Start-up's directory descriptor (mf_files.c): mf_files_start() keeps the one it accepted
 * the directory with for the files start-up makes next; this closes it, at start-up's end
 * and in a fork child (a thread may fork while another one starts). errno is kept. */
#ifndef MF_FILES_H
#define MF_FILES_H

void mf_files_start_end(void);

#endif
