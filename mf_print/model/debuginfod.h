/* Debug files fetched from debuginfod servers (DEBUGINFOD_URLS) while symbolizing: libdw
 * asks its own libdebuginfod client when a module's debug file is not on this machine; this
 * watches those downloads (a progress line on stderr, one time limit for them all), checks
 * the build id of every debug file that comes back, and says once what was not fetched. */
#ifndef MF_DEBUGINFOD_H
#define MF_DEBUGINFOD_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>

#define MF_DEBUGINFOD_TIMEOUT_DEFAULT 60

/* Whether debuginfod is asked: not with --offline (which also clears DEBUGINFOD_URLS for
 * libdw), nor without DEBUGINFOD_URLS. timeout_s: the seconds all downloads together may
 * run. Call before symbolizing, before any thread starts. */
void mf_debuginfod_config(bool offline, unsigned timeout_s);

/* What the footer may suggest about debuginfod. */
enum mf_debuginfod_use {
    MF_DEBUGINFOD_UNSET,   /* DEBUGINFOD_URLS is not set */
    MF_DEBUGINFOD_ON,      /* set: missing debug files were asked for */
    MF_DEBUGINFOD_OFFLINE, /* --offline */
};
enum mf_debuginfod_use mf_debuginfod_use(void);

/* Watches the downloads of dwfl's client for the module labelled label (which must outlive
 * dwfl). */
void mf_debuginfod_attach(Dwfl *dwfl, const char *label);

/* A Dwfl find_debuginfo callback: dwfl_standard_find_debuginfo, but a debug file whose build
 * id is not the module's is refused (debuginfod's answers are not checked by libdw). */
int mf_debuginfod_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                                 Dwarf_Addr base, const char *file_name,
                                 const char *debuglink_file, GElf_Word debuglink_crc,
                                 char **debuginfo_file_name);

/* One line on stderr for what was not fetched (a server that failed, the time limit), if
 * anything; then starts afresh. */
void mf_debuginfod_end(void);

#endif
