/* The least a profiled process's files cost, for `make bench`'s startup workload: what the
 * preload library does with files for one short process, with nothing else around it (no
 * walks, no table, no library loaded). Usage: files_floor DIR N; prints the CPU time per
 * process in microseconds.
 *
 * Each of the N rounds makes DIR/malloc_freq.<i> (0700), then the two files a short process
 * has: the process file (its header and module records written with one pwrite, as
 * mf_process_file_create does) and the thread file (the header's two pages and the first
 * segment reserved with fallocate and mapped shared, as mf_table_create does), each created
 * O_EXCL | O_NOFOLLOW, 0600, and the pages `ls /usr/lib` writes in them touched. The
 * walks, the table's work and a second segment, which `ls` has too, are left out. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROCESS_FILE_BYTES 1128 /* ls's: the header and its modules' records */
#define THREAD_FILE_BYTES (8192 + 16384) /* the header's two pages, the first segment */
/* The pages ls writes there: the header's first, the first segment's two (its entries and
 * frames; ls's 28 stacks then fill a second segment, left out here) */
static const int thread_pages[] = {0, 2, 3};

/* As the library makes a file: by name in the directory it opened (O_PATH), never
 * following a symbolic link. */
static int create(const char *dir, const char *name)
{
    int d = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = d < 0 ? -1 : openat(d, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(name);
        exit(1);
    }
    close(d);
    return fd;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long n = argc == 3 ? strtol(argv[2], &end, 10) : 0;
    if (argc != 3 || *end || n < 1) {
        fprintf(stderr, "usage: files_floor DIR N (N > 0)\n");
        return 2;
    }
    static char record[PROCESS_FILE_BYTES];
    memset(record, 1, sizeof record);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (long i = 0; i < n; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/malloc_freq.%ld", argv[1], i);
        if (mkdir(dir, 0700) != 0) {
            perror(dir);
            return 1;
        }
        int fd = create(dir, "process.mfp");
        if (fallocate(fd, 0, 0, sizeof record) != 0 ||
            pwrite(fd, record, sizeof record, 0) != (ssize_t)sizeof record) {
            perror("process file");
            return 1;
        }
        close(fd);
        fd = create(dir, "thread.mft");
        char *m = MAP_FAILED;
        if (fallocate(fd, 0, 0, THREAD_FILE_BYTES) == 0)
            m = mmap(NULL, THREAD_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            perror("thread file");
            return 1;
        }
        close(fd);
        for (size_t p = 0; p < sizeof thread_pages / sizeof *thread_pages; p++)
            m[thread_pages[p] * 4096] = 1;
        munmap(m, THREAD_FILE_BYTES);
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double us = ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / 1e3;
    printf("%.1f\n", us / (double)n);
    return 0;
}
