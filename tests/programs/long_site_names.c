/* Sites whose function names are 40 characters long, for the tree on narrow terminals
 * (test_narrow.py): each of the four sites allocates 300,000 times (beyond the exact
 * stretch: the counts are estimates), called from a caller whose name is 40 long too. */
#include <stdlib.h>

#define SITE(name)                                                                            \
    __attribute__((noinline)) static void name(int n)                                        \
    {                                                                                         \
        for (int i = 0; i < n; i++) {                                                         \
            void *volatile p = malloc(24);                                                    \
            free(p);                                                                          \
        }                                                                                     \
    }

SITE(narrow_terminal_site_with_forty_chars_01)
SITE(narrow_terminal_site_with_forty_chars_02)
SITE(narrow_terminal_site_with_forty_chars_03)
SITE(narrow_terminal_site_with_forty_chars_04)

__attribute__((noinline)) static void caller_of_the_sites_whose_name_has_forty(int n)
{
    narrow_terminal_site_with_forty_chars_01(n);
    narrow_terminal_site_with_forty_chars_02(n);
    narrow_terminal_site_with_forty_chars_03(n);
    narrow_terminal_site_with_forty_chars_04(n);
}

int main(void)
{
    caller_of_the_sites_whose_name_has_forty(300000);
    return 0;
}
