/* A C host that dlopens a C++ plugin which throws and catches exceptions, cancels two
 * threads blocked in read() (one in C, one inside the plugin's C++ frames: glibc's forced
 * unwind through libgcc_s then runs the C++ personality routine), and handles signals.
 * With libunwind linked into the process this broke (DESIGN §4; a host linked with -lunwind
 * prints "destructors 0"): output and exit status must be the same with and without the
 * profiler. Usage: dlopen_host PLUGIN.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t signals_seen;
static int cleanup_ran;

static void on_usr1(int sig)
{
    (void)sig;
    signals_seen++;
}

static void note_cleanup(void *arg)
{
    *(int *)arg = 1;
}

static int (*plugin_block)(int fd, int *destructors_ran);
static int plugin_destructors;

/* Blocked in read() inside the plugin's C++ frames. */
static void *blocked_in_plugin(void *arg)
{
    plugin_block(*(int *)arg, &plugin_destructors);
    return NULL;
}

static void *blocked_reader(void *arg)
{
    int fd = *(int *)arg;
    char c;
    pthread_cleanup_push(note_cleanup, &cleanup_ran);
    for (;;)
        if (read(fd, &c, 1) <= 0) /* a cancellation point; nobody ever writes */
            break;
    pthread_cleanup_pop(0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);

    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*run)(int) = (int (*)(int))dlsym(plugin, "plugin_run");
    if (!run) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 2;
    }
    plugin_block = (int (*)(int, int *))dlsym(plugin, "plugin_block");
    if (!plugin_block) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 2;
    }
    printf("plugin score %d\n", run(20));

    int pipefd[2];
    if (pipe(pipefd) != 0)
        return 2;
    pthread_t reader;
    pthread_create(&reader, NULL, blocked_reader, &pipefd[0]);
    usleep(20000); /* let it block in read() */
    pthread_cancel(reader);
    void *result = NULL;
    pthread_join(reader, &result);
    printf("reader cancelled %s, cleanup ran %d\n", result == PTHREAD_CANCELED ? "yes" : "no",
           cleanup_ran);

    pthread_t cxx_reader;
    pthread_create(&cxx_reader, NULL, blocked_in_plugin, &pipefd[0]);
    usleep(20000);
    pthread_cancel(cxx_reader);
    result = NULL;
    pthread_join(cxx_reader, &result);
    printf("plugin reader cancelled %s, destructors %d\n",
           result == PTHREAD_CANCELED ? "yes" : "no", plugin_destructors);

    for (int i = 0; i < 5; i++)
        raise(SIGUSR1);
    printf("signals seen %d\n", (int)signals_seen);
    printf("plugin score again %d\n", run(5));
    dlclose(plugin);
    fflush(stdout);
    return 7;
}
