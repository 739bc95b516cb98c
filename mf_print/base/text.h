/* Text: display widths, and the escaping each kind of output needs (a
 * terminal, JSON, CSV, HTML). Names come from files and may hold any byte: each output keeps
 * them readable, and none lets one act (move a terminal's cursor, start a spreadsheet
 * formula, end a <script>). */
#ifndef MF_TEXT_H
#define MF_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mf_utf8.h" /* mf_utf8_decode, mf_is_control, mf_esc_char: shared with the recorder */

/* The columns a terminal gives cp: 2 for a wide character (CJK, emoji), 0 for a combining
 * mark or another zero-width one and for a control character (it prints nothing), 1 for the
 * rest; glibc's wcwidth in C.UTF-8 decides (1 for every non-ASCII character where that
 * locale is missing). */
int mf_char_width(uint32_t cp);
/* The columns of s; a byte that is not UTF-8 counts 1 (a terminal shows U+FFFD). */
int mf_text_width(const char *s);
/* n spaces; none if n <= 0. */
void mf_pad(FILE *out, int n);
/* Copies text (len bytes, NUL after them) to out with every line cut to width columns, the
 * last shown as "…" where something was cut. width 0: unchanged. */
void mf_cut_lines(FILE *out, const char *text, size_t len, unsigned width);

/* Whether the user's locale (LC_ALL, LC_CTYPE, LANG) is UTF-8: a terminal that shows
 * block characters, or one that needs ASCII. */
bool mf_locale_is_utf8(void);

/* s for a human reader (the tree, stderr): control characters as \xNN (C0, DEL) or \uNNNN
 * (C1, U+2028/9), bytes that are not UTF-8 as \xNN, a backslash as \\, so that a name from a
 * file cannot move the cursor or recolour the terminal. The result lives until the 8th call
 * after this one. */
const char *mf_esc(const char *s);
/* s for a terminal where the names in it are escaped already (a message made with mf_esc) or
 * are what the user typed (an option's value): a control character or a byte that is not
 * UTF-8 escaped as mf_esc escapes it, a backslash left as it is. */
void mf_put_text(FILE *out, const char *s);

/* s as a JSON string, quotes included, or null for NULL; valid UTF-8 whatever s holds: '"'
 * and '\' escaped, control characters as \n, \t or \uXXXX, a byte that is not UTF-8 as
 * U+FFFD. */
void mf_json_str(FILE *out, const char *s);
/* The same for JSON inside an HTML <script> element: '<', '>' and '&' escaped too (no
 * "</script>", no "<!--"), and every escape written \uXXXX, U+FFFD's too. */
void mf_json_str_in_script(FILE *out, const char *s);

/* s as HTML text (element content or a quoted attribute value): '&' '<' '>' '"' and '\'' as
 * entities, control characters as spaces, bytes that are not UTF-8 as U+FFFD. */
void mf_html_text(FILE *out, const char *s);

/* A growing string, always NUL-terminated once something (even "") was added. */
struct mf_text {
    char *s;
    size_t n, cap;
};
void mf_text_add(struct mf_text *t, const char *s, size_t len);

/* Appends s as the text of a CSV cell: '%', ';', control characters and bytes that are not
 * UTF-8 percent-encoded byte by byte (%25, %3B, %0A, %C2%85, %FF: RFC 3986's %XX), so that a
 * field's ';'-joined frames split and decode back to every name byte for byte and the file
 * is valid UTF-8; and s's first byte too when it is '=', '+', '-' or '@' (TAB and CR are
 * control characters), which a spreadsheet takes for the start of a formula. ',' '"' and
 * spaces are left to the quoting (mf_csv_needs_quotes, mf_csv_quote). */
void mf_csv_encode(struct mf_text *t, const char *s);
/* Whether a CSV field holding s must be quoted (RFC 4180): it holds ',', '"', CR or LF. */
bool mf_csv_needs_quotes(const char *s);
/* Appends s with every '"' doubled: the inside of a quoted field. */
void mf_csv_quote(struct mf_text *t, const char *s);

#endif
