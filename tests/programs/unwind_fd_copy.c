/* A daemon's way with descriptors, for tests/core/test_trust_unwind.py: allocate through frames
 * libunwind must check memory for, list /proc/self/fd, close every descriptor from 3 up
 * (close_range), then copy argv[1] to argv[2] through the descriptors that come back (3 and
 * 4), allocating the same way between reads and writes. The output file must be a
 * byte-identical copy and the listing the same as without the profiler: nothing the
 * profiler loaded may hold a descriptor, or read and write the program's files through a
 * number the program reused. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "unwind_frames.h"

static void list_descriptors(const char *when)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        printf("%s: cannot list descriptors\n", when);
        return;
    }
    int own = dirfd(d), fds[256], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (e->d_name[0] != '.' && atoi(e->d_name) != own)
            fds[n++] = atoi(e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort: readdir's order is the kernel's */
        for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
            int t = fds[j];
            fds[j] = fds[j - 1];
            fds[j - 1] = t;
        }
    printf("%s: descriptors", when);
    for (int i = 0; i < n; i++)
        printf(" %d", fds[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 3 || unwind_frames_setup() != 0)
        return 2;
    unwind_frames_prime();
    long calls = unwind_frames_churn(200);
    list_descriptors("after start-up");
    fflush(stdout);

    if (close_range(3, ~0u, 0) != 0)
        return 3;
    int in = open(argv[1], O_RDONLY), out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    printf("input on %d, output on %d\n", in, out);
    if (in < 0 || out < 0)
        return 4;
    char buf[1000];
    long copied = 0;
    for (;;) {
        calls += unwind_frames_churn(8);
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0)
            return 5;
        if (n == 0)
            break;
        calls += unwind_frames_churn(8);
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w <= 0)
                return 6;
            off += w;
        }
        copied += n;
    }
    if (close(in) != 0 || close(out) != 0)
        return 7;
    printf("copied %ld bytes, %ld allocation calls through unchecked frames\n", copied, calls);
    return 0;
}
