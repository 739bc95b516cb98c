/* Prints through stdio (stdout and stderr), reads its environment, allocates, and exits
 * with status 3: the profiler must change none of it (test_program_output_unchanged,
 * test_bad_environment_values). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    char *words[100];
    size_t total = 0;
    for (int i = 0; i < 100; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "word%d", i * i);
        words[i] = strdup(buf);
        total += strlen(words[i]);
    }
    printf("argc %d invoked by %s\n", argc, strchr(argv[0], '/') ? "path" : "name");
    printf("first %s last %s\n", words[0], words[99]);
    printf("total length %zu\n", total);
    fprintf(stderr, "a line on stderr\n");
    for (int i = 0; i < 100; i++)
        free(words[i]);
    fflush(stdout);
    return 3;
}
