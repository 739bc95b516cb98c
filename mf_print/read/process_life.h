/* How a process image ended, or that it still runs: the profile knows only whether it ran
 * its exit; /proc tells the rest (report_html.c's header, report_tree.c's). */
#ifndef MF_PROCESS_LIFE_H
#define MF_PROCESS_LIFE_H

#include "profile_read.h"

/* How a process image ended. The profile knows only whether it ran its exit (a process
 * that is still running and one that ended without exiting, by _exit, a signal or a crash,
 * both have no end time); /proc tells them apart, where mf_print runs on the same machine:
 * a live process with that pid, started no later than the image's start-up, running the
 * same program. */
enum mf_life { MF_LIFE_EXITED, MF_LIFE_RUNNING, MF_LIFE_ENDED, MF_LIFE_EXECED, MF_LIFE_UNKNOWN };

/* How process image i of p ended, from its process file and, for one that recorded no exit,
 * from this machine's /proc. */
enum mf_life mf_life(const struct mf_profile *p, uint32_t i);
/* Image i of p (its life l) runs, or was exec'd and its process runs on in a later image
 * that has written nothing yet (one that allocates only after a while): the program is still
 * running (an image exec'd is not the end of its process). */
bool mf_runs(const struct mf_profile *p, uint32_t i, enum mf_life l);
/* mf_runs of image i's mf_life. */
bool mf_process_running(const struct mf_profile *p, uint32_t i);
/* No process of p runs (mf_process_running): a live view of p is what was left when its
 * images ended. */
bool mf_all_ended(const struct mf_profile *p);
/* "running", "exec'd" or "ended" (exited, killed, or not known). */
const char *mf_life_word(enum mf_life l);

#endif
