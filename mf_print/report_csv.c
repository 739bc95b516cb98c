/* CSV: one row per distinct stack after the transforms and merging by function names (a node
 * of the caller tree where stacks end), sorted by calls descending. The via column names the
 * wrapper folded into the site (empty if none): the stack itself starts at the site. The threshold does not
 * apply: a spreadsheet can filter for itself. RFC 4180 quoting; lines end in \n.
 *
 * The stack and locations columns join their frames with ';'. Inside a frame, '%', ';',
 * control characters (C0, DEL, C1), U+2028 and U+2029 (line breaks to some readers) and
 * bytes that are not UTF-8 are percent-encoded byte by byte (%25, %3B, %0A, %C2%85, %FF:
 * RFC 3986's %XX), so that splitting at ';' and percent-decoding each part gives back every
 * name byte for byte (Rust's `<[u8; 4] as T>::f`, a C++ `operator,`), and the file is valid
 * UTF-8. ',' '"' and spaces are left to the CSV quoting. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

struct mf_row {
    uint64_t calls, bytes, samples;
    char *stack, *locations, *via;
    const char *program; /* --by program, else NULL */
};

/* A growable string. */
struct mf_buf {
    char *s;
    size_t n, cap;
};

static void mf_buf_addn(struct mf_buf *b, const char *s, size_t len)
{
    if (b->n + len + 1 > b->cap) {
        b->cap = (b->n + len + 1) * 2;
        b->s = mf_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = '\0';
}

static void mf_buf_add(struct mf_buf *b, const char *s)
{
    mf_buf_addn(b, s, strlen(s));
}

size_t mf_utf8_char(const char *str, bool *control)
{
    const unsigned char *s = (const unsigned char *)str;
    *control = false;
    if (s[0] < 0x80) {
        *control = (s[0] < 0x20 && s[0]) || s[0] == 0x7f;
        return 1;
    }
    if (s[0] < 0xc2) /* a continuation byte, or the start of an overlong form */
        return 0;
    if (s[0] < 0xe0) {
        if ((s[1] & 0xc0) != 0x80)
            return 0;
        *control = s[0] == 0xc2 && s[1] < 0xa0; /* C1: U+0080..U+009F, NEL among them */
        return 2;
    }
    if (s[0] < 0xf0) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))
            return 0; /* overlong, or a surrogate */
        *control = s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9);
        return 3;
    }
    if (s[0] < 0xf5) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
            return 0; /* overlong, or past U+10FFFF */
        return 4;
    }
    return 0;
}

/* Appends one frame's text, percent-encoded where it could be taken for a separator. */
static void mf_buf_add_frame(struct mf_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    while (*s) {
        bool control;
        size_t len = mf_utf8_char(s, &control);
        if (len == 0 || control || *s == '%' || *s == ';') {
            for (size_t i = 0; i < (len ? len : 1); i++, s++) {
                unsigned char c = (unsigned char)*s;
                char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
                mf_buf_addn(b, esc, 3);
            }
        } else {
            mf_buf_addn(b, s, len);
            s += len;
        }
    }
}

static int mf_row_cmp(const void *a, const void *b)
{
    const struct mf_row *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    int c = strcmp(x->stack, y->stack);
    if (c)
        return c;
    c = strcmp(x->via, y->via);
    return c || !x->program ? c : strcmp(x->program, y->program);
}

static void mf_csv_field(FILE *out, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

struct mf_rows {
    struct mf_row *v;
    uint32_t n, cap;
};

/* A row per node of t where stacks end. */
static void mf_csv_rows(struct mf_rows *out, const struct mf_tree *t, const char *program)
{
    uint32_t *path = NULL, path_cap = 0;
    for (uint32_t i = 1; i < t->n; i++) {
        const struct mf_node *n = &t->nodes[i];
        if (n->end_calls == 0 && n->end_samples == 0)
            continue;
        uint32_t depth = 0;
        for (uint32_t k = i; k != 0; k = t->nodes[k].parent) {
            MF_GROW(path, depth, path_cap);
            path[depth++] = k;
        }
        struct mf_buf stack = {0}, locs = {0};
        for (uint32_t d = depth; d-- > 0;) { /* the site (under the root) first */
            const struct mf_node *x = &t->nodes[path[d]];
            const struct mf_loc *loc = mf_node_loc(x);
            char line[32];
            mf_buf_add(&stack, d + 1 < depth ? ";" : "");
            mf_buf_add_frame(&stack, mf_str(x->name));
            mf_buf_add(&locs, d + 1 < depth ? ";" : "");
            if (loc) {
                snprintf(line, sizeof line, ":%u", loc->line);
                mf_buf_add_frame(&locs, mf_str(loc->file));
                mf_buf_add(&locs, line);
            } else {
                mf_buf_add(&locs, "??");
            }
        }
        struct mf_buf via = {0};
        mf_buf_add(&via, "");
        mf_buf_add_frame(&via, mf_str(t->nodes[path[depth - 1]].via));
        MF_GROW(out->v, out->n, out->cap);
        out->v[out->n++] = (struct mf_row){n->end_calls, n->end_bytes, n->end_samples, stack.s,
                                           locs.s, via.s, program};
    }
    free(path);
}

static void mf_csv_print(FILE *out, struct mf_rows *r, bool with_program)
{
    struct mf_row *rows = r->v;
    uint32_t nrows = r->n;
    if (nrows > 1)
        qsort(rows, nrows, sizeof *rows, mf_row_cmp);
    fputs(with_program ? "calls,bytes,samples,stack,locations,via,program\n"
                       : "calls,bytes,samples,stack,locations,via\n", out);
    for (uint32_t i = 0; i < nrows; i++) {
        fprintf(out, "%llu,%llu,%llu,", (unsigned long long)rows[i].calls,
                (unsigned long long)rows[i].bytes, (unsigned long long)rows[i].samples);
        mf_csv_field(out, rows[i].stack);
        fputc(',', out);
        mf_csv_field(out, rows[i].locations);
        fputc(',', out);
        mf_csv_field(out, rows[i].via);
        if (with_program) { /* encoded as a frame is: a name is any bytes */
            struct mf_buf program = {0};
            mf_buf_add(&program, "");
            mf_buf_add_frame(&program, rows[i].program);
            fputc(',', out);
            mf_csv_field(out, program.s);
            free(program.s);
        }
        fputs("\n", out);
        free(rows[i].stack);
        free(rows[i].locations);
        free(rows[i].via);
    }
    free(rows);
}

void mf_report_csv(FILE *out, const struct mf_tree *t)
{
    struct mf_rows rows = {0};
    mf_csv_rows(&rows, t, NULL);
    mf_csv_print(out, &rows, false);
}

void mf_report_csv_by_program(FILE *out, const struct mf_tree *trees, const char *const *programs,
                              uint32_t n)
{
    struct mf_rows rows = {0};
    for (uint32_t i = 0; i < n; i++)
        mf_csv_rows(&rows, &trees[i], programs[i]);
    mf_csv_print(out, &rows, true);
}
