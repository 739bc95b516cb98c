/* The protocol buffer wire format: varints and length-delimited fields (protobuf.h). */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "protobuf.h"

void mf_pb_room_for(struct mf_pb *b, size_t n)
{
    if (b->n + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n)
        cap *= 2;
    b->b = mf_xrealloc(b->b, cap);
    b->cap = cap;
}

void mf_pb_varint(struct mf_pb *b, uint64_t v)
{
    mf_pb_room_for(b, 10);
    while (v >= 0x80) {
        b->b[b->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->b[b->n++] = (uint8_t)v;
}

void mf_pb_fixed64(struct mf_pb *b, uint64_t v)
{
    mf_pb_room_for(b, 8);
    for (int i = 0; i < 8; i++)
        b->b[b->n++] = (uint8_t)(v >> (8 * i));
}

static void mf_pb_tag(struct mf_pb *b, uint32_t field, uint32_t wire)
{
    mf_pb_varint(b, (uint64_t)field << 3 | wire);
}

void mf_pb_uint(struct mf_pb *b, uint32_t field, uint64_t v)
{
    if (!v)
        return;
    mf_pb_tag(b, field, MF_PB_VARINT);
    mf_pb_varint(b, v);
}

void mf_pb_int(struct mf_pb *b, uint32_t field, int64_t v)
{
    mf_pb_uint(b, field, (uint64_t)v);
}

void mf_pb_bool(struct mf_pb *b, uint32_t field, bool v)
{
    mf_pb_uint(b, field, v);
}

void mf_pb_bytes(struct mf_pb *b, uint32_t field, const void *p, size_t n)
{
    mf_pb_tag(b, field, MF_PB_LEN);
    mf_pb_varint(b, n);
    mf_pb_room_for(b, n);
    if (n)
        memcpy(b->b + b->n, p, n);
    b->n += n;
}

void mf_pb_string(struct mf_pb *b, uint32_t field, const char *s)
{
    mf_pb_bytes(b, field, s, strlen(s));
}

void mf_pb_append(struct mf_pb *b, const struct mf_pb *raw)
{
    mf_pb_room_for(b, raw->n);
    if (raw->n)
        memcpy(b->b + b->n, raw->b, raw->n);
    b->n += raw->n;
}

void mf_pb_message(struct mf_pb *b, uint32_t field, struct mf_pb *sub)
{
    mf_pb_bytes(b, field, sub->b, sub->n);
    sub->n = 0;
}

void mf_pb_free(struct mf_pb *b)
{
    free(b->b);
    memset(b, 0, sizeof *b);
}

/* ---- reading ---------------------------------------------------------------------------- */

void mf_pb_fail(struct mf_pb_reader *r, const char *err)
{
    if (!r->err)
        r->err = err;
    r->p = r->end;
}

static uint64_t mf_pb_raw_varint(struct mf_pb_reader *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            mf_pb_fail(r, "a number runs past the end of its message");
            return 0;
        }
        uint8_t c = *r->p++;
        if (shift == 63 && c > 1) {
            mf_pb_fail(r, "a number has more than 64 bits");
            return 0;
        }
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    mf_pb_fail(r, "a number has more than 64 bits");
    return 0;
}

bool mf_pb_next(struct mf_pb_reader *r, uint32_t *field, uint32_t *wire)
{
    if (r->err || r->p >= r->end)
        return false;
    uint64_t tag = mf_pb_raw_varint(r);
    if (r->err)
        return false;
    *wire = (uint32_t)(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff) {
        mf_pb_fail(r, "a field number is out of range");
        return false;
    }
    *field = (uint32_t)(tag >> 3);
    if (*wire != MF_PB_VARINT && *wire != MF_PB_I64 && *wire != MF_PB_LEN && *wire != MF_PB_I32) {
        mf_pb_fail(r, "a field has a wire type profile.proto does not use");
        return false;
    }
    return true;
}

uint64_t mf_pb_read_varint(struct mf_pb_reader *r)
{
    return mf_pb_raw_varint(r);
}

uint64_t mf_pb_read_fixed64(struct mf_pb_reader *r)
{
    if (r->err || r->end - r->p < 8) {
        mf_pb_fail(r, "a fixed-size field runs past the end of its message");
        r->p = r->end; /* as a varint cut short leaves it */
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += 8;
    return v;
}

struct mf_pb_reader mf_pb_read_len(struct mf_pb_reader *r)
{
    uint64_t n = mf_pb_raw_varint(r);
    struct mf_pb_reader sub = {r->p, r->p, NULL};
    if (r->err)
        return sub;
    if (n > (uint64_t)(r->end - r->p)) {
        mf_pb_fail(r, "a field's length runs past the end of its message");
        return sub;
    }
    sub.end = r->p + n;
    r->p += n;
    return sub;
}

void mf_pb_skip(struct mf_pb_reader *r, uint32_t wire)
{
    size_t n = wire == MF_PB_I64 ? 8 : 4;
    switch (wire) {
    case MF_PB_VARINT:
        mf_pb_raw_varint(r);
        return;
    case MF_PB_LEN:
        mf_pb_read_len(r);
        return;
    default:
        if ((size_t)(r->end - r->p) < n)
            mf_pb_fail(r, "a fixed-size field runs past the end of its message");
        else
            r->p += n;
    }
}

void mf_pb_read_repeated(struct mf_pb_reader *r, uint32_t wire, void (*add)(void *ctx, uint64_t v),
                         void *ctx)
{
    if (wire == MF_PB_VARINT) {
        uint64_t v = mf_pb_raw_varint(r);
        if (!r->err)
            add(ctx, v);
        return;
    }
    if (wire != MF_PB_LEN) {
        mf_pb_fail(r, "a list of numbers has the wrong wire type");
        return;
    }
    struct mf_pb_reader packed = mf_pb_read_len(r);
    while (!r->err && packed.p < packed.end) {
        uint64_t v = mf_pb_raw_varint(&packed);
        if (packed.err)
            mf_pb_fail(r, packed.err);
        else
            add(ctx, v);
    }
}
