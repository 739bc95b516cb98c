/* Part of html_names (html_names.cpp), built without -g: with no debug information mf_print
 * names this function by its symbol, which the asm label makes "</script><script>...". */
#include <stdlib.h>

void release(void *p);

#define BREAKER "\"</script><script>window.mfPwned=1</script><!--&'x\""
__attribute__((noinline)) void script_breaker(int n) __asm__(BREAKER);

__attribute__((noinline)) void script_breaker(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(8));
}
