/* mf_print: reads the profile a malloc_freq run wrote and reports where the program calls
 * the allocator: the command line becomes a request (request.c), checked against the option
 * rules and the registry of reports (registry.c); then read+validate, merge (read/),
 * symbolize, transform (model/), and the one report the registry names (report/). Exit
 * status: 0 reported, 1 nothing readable or the output failed, 2 bad usage or directory,
 * 3 out of memory, 4 a --check rule broken (MF_EXIT_BROKEN). */
#include "request.h"
#include "watch.h"

int main(int argc, char **argv)
{
    struct mf_request r;
    int rc = mf_request_parse(&r, argc, argv);
    if (rc >= 0)
        return rc;
    mf_request_check(&r);
    return r.watch ? mf_watch(&r) : mf_run(&r);
}
