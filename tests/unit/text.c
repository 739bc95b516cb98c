/* Unit tests of mf_print/base/text.c: the UTF-8 decoder, display widths and every escaper, each
 * input against the exact text expected. Built and run by tests/test_text.py; prints one line
 * per failed check and "N checks, M failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

static int checks, failed;

static void check(int ok, const char *what, const char *got, const char *want)
{
    checks++;
    if (!ok) {
        failed++;
        printf("FAIL %s: got \"%s\", want \"%s\"\n", what, got, want);
    }
}

static void check_int(const char *what, long got, long want)
{
    char g[32], w[32];
    snprintf(g, sizeof g, "%ld", got);
    snprintf(w, sizeof w, "%ld", want);
    check(got == want, what, g, w);
}

static void check_str(const char *what, const char *got, const char *want)
{
    check(strcmp(got, want) == 0, what, mf_esc(got), mf_esc(want));
}

/* The decoder: length and code point, or 0 for what is not a character. */
static void decode(const char *s, size_t want_len, uint32_t want_cp)
{
    uint32_t cp = 0xdeadbeef;
    size_t n = mf_utf8_decode(s, &cp);
    char what[96];
    snprintf(what, sizeof what, "mf_utf8_decode(\"%s\") length", mf_esc(s));
    check_int(what, (long)n, (long)want_len);
    if (want_len && n == want_len) {
        snprintf(what, sizeof what, "mf_utf8_decode(\"%s\") code point", mf_esc(s));
        check_int(what, cp, want_cp);
    }
}

static void test_decode(void)
{
    decode("A", 1, 'A');
    decode("", 1, 0);                    /* the terminating NUL */
    decode("\x7f", 1, 0x7f);
    decode("\xc2\x80", 2, 0x80);         /* the smallest 2-byte character */
    decode("\xc3\xa9t\xc3\xa9", 2, 0xe9); /* é, and only it */
    decode("\xdf\xbf", 2, 0x7ff);
    decode("\xe0\xa0\x80", 3, 0x800);
    decode("\xe4\xb8\xad", 3, 0x4e2d);   /* 中 */
    decode("\xe2\x80\xa8", 3, 0x2028);
    decode("\xed\x9f\xbf", 3, 0xd7ff);   /* just below the surrogates */
    decode("\xee\x80\x80", 3, 0xe000);   /* just above them */
    decode("\xef\xbf\xbd", 3, 0xfffd);
    decode("\xf0\x90\x80\x80", 4, 0x10000);
    decode("\xf0\x9f\x98\x80", 4, 0x1f600); /* 😀 */
    decode("\xf4\x8f\xbf\xbf", 4, 0x10ffff);
    /* invalid */
    decode("\x80", 0, 0);                /* a stray continuation byte */
    decode("\xbf", 0, 0);
    decode("\xc0\xaf", 0, 0);            /* '/' overlong in 2 bytes */
    decode("\xc1\xbf", 0, 0);
    decode("\xe0\x80\xaf", 0, 0);        /* overlong in 3 */
    decode("\xe0\x9f\xbf", 0, 0);
    decode("\xf0\x80\x80\xaf", 0, 0);    /* overlong in 4 */
    decode("\xf0\x8f\xbf\xbf", 0, 0);
    decode("\xed\xa0\x80", 0, 0);        /* U+D800, a surrogate */
    decode("\xed\xbf\xbf", 0, 0);        /* U+DFFF */
    decode("\xf4\x90\x80\x80", 0, 0);    /* U+110000 */
    decode("\xf5\x80\x80\x80", 0, 0);
    decode("\xff", 0, 0);
    decode("\xfe", 0, 0);
    decode("\xc3", 0, 0);                /* cut short by the NUL */
    decode("\xe4\xb8", 0, 0);
    decode("\xf0\x9f\x98", 0, 0);
    decode("\xc3(", 0, 0);               /* cut short by another character */
    decode("\xe4\xb8(", 0, 0);
}

static void width(const char *s, int want)
{
    char what[96];
    snprintf(what, sizeof what, "mf_text_width(\"%s\")", mf_esc(s));
    check_int(what, mf_text_width(s), want);
}

static void test_width(void)
{
    width("", 0);
    width("malloc", 6);
    width("\xc2\xb1" "4.1%", 5);                       /* ±4.1% */
    width("\xe2\x94\x9c\xe2\x94\x80 ", 3);             /* the tree's "├─ " */
    width("\xe4\xb8\xad\xe6\x96\x87", 4);              /* 中文: two wide characters */
    width("a\xe3\x80\x80" "b", 4);                     /* U+3000 ideographic space */
    width("\xef\xbc\xa1", 2);                          /* Ａ, fullwidth */
    width("\xf0\x9f\x98\x80", 2);                      /* 😀 */
    width("e\xcc\x81", 1);                             /* e + U+0301 combining acute */
    width("a\xe2\x80\x8b" "b", 2);                     /* U+200B zero width space */
    width("a\x1b[2Jb", 5);                             /* ESC prints nothing; "[2J" does */
    width("\t\r\n\x7f", 0);
    width("\xc2\x85", 0);                              /* NEL, C1 */
    width("\xe2\x80\xa8", 0);                          /* U+2028 */
    width("a\xff" "b", 3);                             /* a byte that is not UTF-8: U+FFFD */
    width("\xed\xa0\x80", 3);                          /* a surrogate: three such bytes */
    check_int("mf_char_width(U+10FFFF), unassigned", mf_char_width(0x10ffff), 1);
}

/* What f(out, arg) writes. */
static char *written(void (*f)(FILE *, const char *), const char *arg)
{
    static char *text;
    size_t len;
    free(text);
    FILE *out = open_memstream(&text, &len);
    f(out, arg);
    fclose(out);
    return text;
}

static unsigned cut_width;
static void cut(FILE *out, const char *s)
{
    mf_cut_lines(out, s, strlen(s), cut_width);
}

static void cut_to(unsigned w, const char *s, const char *want)
{
    char what[96];
    cut_width = w;
    snprintf(what, sizeof what, "mf_cut_lines(\"%.40s\", %u)", mf_esc(s), w);
    check_str(what, written(cut, s), want);
}

static void test_cut(void)
{
    cut_to(0, "0123456789\nab", "0123456789\nab");
    cut_to(5, "01234\n012345\n", "01234\n0123\xe2\x80\xa6\n");
    cut_to(5, "abc", "abc");
    cut_to(5, "\xe2\x94\x9c\xe2\x94\x80 abcdef", "\xe2\x94\x9c\xe2\x94\x80 a\xe2\x80\xa6");
    /* wide characters: 2 columns each, never split */
    cut_to(5, "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", "\xe4\xb8\xad\xe6\x96\x87\xe2\x80\xa6");
    cut_to(6, "a\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", "a\xe4\xb8\xad\xe6\x96\x87\xe2\x80\xa6");
    cut_to(6, "a\xe4\xb8\xad\xe6\x96\x87", "a\xe4\xb8\xad\xe6\x96\x87"); /* 5 columns: fits */
    /* a combining mark stays with its letter */
    cut_to(5, "abce\xcc\x81xyz", "abce\xcc\x81\xe2\x80\xa6");
}

static void esc(const char *s, const char *want)
{
    char what[96];
    snprintf(what, sizeof what, "mf_esc(\"%.40s\")", mf_esc(s));
    check_str(what, mf_esc(s), want);
}

static void test_esc(void)
{
    esc("plain", "plain");
    esc("esc\x1b[2Jclear", "esc\\x1b[2Jclear");
    esc("bel\x07" "cr\rlf\nend\x7f", "bel\\x07cr\\x0dlf\\x0aend\\x7f");
    esc("c1\xc2\x9b" "31m", "c1\\u009b31m");
    esc("ls\xe2\x80\xa8ps\xe2\x80\xa9", "ls\\u2028ps\\u2029");
    esc("bad\xff\xfe\xc0\xaf" "utf8", "bad\\xff\\xfe\\xc0\\xafutf8");
    esc("back\\slash", "back\\\\slash");
    esc("\xe4\xb8\xad\xc3\xa9", "\xe4\xb8\xad\xc3\xa9");
}

static void json(void (*f)(FILE *, const char *), const char *s, const char *want)
{
    char what[96];
    snprintf(what, sizeof what, "%s(\"%.40s\")",
             f == mf_json_str ? "mf_json_str" : "mf_json_str_in_script", s ? mf_esc(s) : "NULL");
    check_str(what, written(f, s), want);
}

static void test_json(void)
{
    json(mf_json_str, NULL, "null");
    json(mf_json_str, "", "\"\"");
    json(mf_json_str, "operator new[]", "\"operator new[]\"");
    json(mf_json_str, "q\"uo\\te", "\"q\\\"uo\\\\te\"");
    json(mf_json_str, "bel\x07" "cr\rlf\nend\ttab\x7f", "\"bel\\u0007cr\\u000dlf\\nend\\ttab\\u007f\"");
    json(mf_json_str, "c1\xc2\x9b", "\"c1\\u009b\"");
    json(mf_json_str, "ls\xe2\x80\xa8ps\xe2\x80\xa9", "\"ls\\u2028ps\\u2029\"");
    json(mf_json_str, "bad\xff\xc0\xaf" "x", "\"bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx\"");
    json(mf_json_str, "\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    json(mf_json_str, "</script>&\xe4\xb8\xad", "\"</script>&\xe4\xb8\xad\"");
    json(mf_json_str_in_script, NULL, "null");
    json(mf_json_str_in_script, "</script><!--&",
         "\"\\u003c/script\\u003e\\u003c!--\\u0026\"");
    json(mf_json_str_in_script, "q\"uo\\te", "\"q\\\"uo\\\\te\"");
    json(mf_json_str_in_script, "lf\ntab\t", "\"lf\\u000atab\\u0009\"");
    json(mf_json_str_in_script, "c1\xc2\x9b ls\xe2\x80\xa8", "\"c1\\u009b ls\\u2028\"");
    json(mf_json_str_in_script, "bad\xff" "x\xe4\xb8\xad", "\"bad\\ufffdx\xe4\xb8\xad\"");
}

static void html(const char *s, const char *want)
{
    char what[96];
    snprintf(what, sizeof what, "mf_html_text(\"%.40s\")", mf_esc(s));
    check_str(what, written(mf_html_text, s), want);
}

static void test_html(void)
{
    html("plain", "plain");
    html("</script><script>alert(1)</script>",
         "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;");
    html("a&b \"q\" 'a'", "a&amp;b &quot;q&quot; &#39;a&#39;");
    html("esc\x1b[2J\tx\n", "esc [2J x ");
    html("c1\xc2\x9b ls\xe2\x80\xa8", "c1  ls ");
    html("bad\xff\xc0\xaf", "bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    html("\xe4\xb8\xad\xc3\xa9", "\xe4\xb8\xad\xc3\xa9");
}

/* A CSV field as report_csv.c writes one name: encoded, then quoted if it must be. */
static void csv(const char *s, const char *want)
{
    struct mf_text enc = {0}, field = {0};
    mf_csv_encode(&enc, s);
    if (mf_csv_needs_quotes(enc.s)) {
        mf_text_add(&field, "\"", 1);
        mf_csv_quote(&field, enc.s);
        mf_text_add(&field, "\"", 1);
    } else {
        mf_text_add(&field, enc.s, enc.n);
    }
    char what[96];
    snprintf(what, sizeof what, "CSV field of \"%.40s\"", mf_esc(s));
    check_str(what, field.s, want);
    free(enc.s);
    free(field.s);
}

static void test_csv(void)
{
    csv("", "");
    csv("main", "main");
    csv("=HYPERLINK(\"http://evil.example\",\"x\")",
        "\"%3DHYPERLINK(\"\"http://evil.example\"\",\"\"x\"\")\"");
    csv("+1+2", "%2B1+2");
    csv("-2+3", "%2D2+3");
    csv("@SUM(A1)", "%40SUM(A1)");
    csv("a=b-c", "a=b-c"); /* only the first byte can start a formula */
    csv("\tlead tab", "%09lead tab");
    csv("\rlead cr", "%0Dlead cr");
    csv("q\"uo,te;semi", "\"q\"\"uo,te%3Bsemi\"");
    csv("100%", "100%25");
    csv("bel\x07lf\n", "bel%07lf%0A");
    csv("c1\xc2\x85", "c1%C2%85");
    csv("ls\xe2\x80\xa8", "ls%E2%80%A8");
    csv("bad\xff\xc0\xaf", "bad%FF%C0%AF");
    csv("<[u8; 4] as T>::f", "<[u8%3B 4] as T>::f");
    csv("operator,", "\"operator,\"");
    csv("\xe4\xb8\xad\xc3\xa9", "\xe4\xb8\xad\xc3\xa9");
}

int main(void)
{
    test_decode();
    test_width();
    test_cut();
    test_esc();
    test_json();
    test_html();
    test_csv();
    printf("%d checks, %d failed\n", checks, failed);
    /* Every check of this file ran: one lost by an edit fails the test too. */
    enum { TEXT_CHECKS = 123 };
    if (checks != TEXT_CHECKS)
        printf("%d checks ran, not %d\n", checks, TEXT_CHECKS);
    bool ok = failed == 0 && checks == TEXT_CHECKS;
    printf("%s unit_text\n", ok ? "PASS" : "FAIL");
    return !ok;
}
