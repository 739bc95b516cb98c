/* mf_print's protocol buffer writer and reader (mf_print/protobuf.c) on known bytes: the
 * encoding's own examples (150 as field 1 is 08 96 01, "testing" as field 2 is 12 07 ...),
 * a negative int64 in ten bytes, proto3's defaults left out; read back field by field, and
 * every malformed input stopped with its error and nothing read past the end. */
#include <string.h>

#include "protobuf.h"
#include "unit.h"

static int same(const struct mf_pb *b, const char *want, size_t n)
{
    return b->n == n && memcmp(b->b, want, n) == 0;
}

#define SAME(b, lit) CHECK(same(b, lit, sizeof(lit) - 1))

static void add(void *ctx, uint64_t v)
{
    uint64_t *sum = ctx;
    sum[0] += v;
    sum[1]++;
}

static const char *read_error(const char *bytes, size_t n)
{
    struct mf_pb_reader r = {(const uint8_t *)bytes, (const uint8_t *)bytes + n, NULL};
    uint32_t field, wire;
    while (mf_pb_next(&r, &field, &wire))
        mf_pb_skip(&r, wire);
    return r.err;
}

int main(void)
{
    struct mf_pb b = {0}, sub = {0};
    mf_pb_varint(&b, 300);
    SAME(&b, "\xac\x02");
    b.n = 0;
    mf_pb_varint(&b, UINT64_MAX);
    SAME(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");
    b.n = 0;
    mf_pb_uint(&b, 1, 150);
    mf_pb_uint(&b, 2, 0);      /* the default: left out */
    mf_pb_bool(&b, 4, false);  /* likewise */
    mf_pb_bool(&b, 4, true);
    SAME(&b, "\x08\x96\x01\x20\x01");
    b.n = 0;
    mf_pb_int(&b, 3, -1);
    SAME(&b, "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");
    b.n = 0;
    mf_pb_string(&b, 2, "testing");
    mf_pb_string(&b, 6, ""); /* always written: string_table[0] */
    SAME(&b, "\x12\x07testing\x32\x00");
    b.n = 0;
    mf_pb_uint(&sub, 1, 150);
    mf_pb_message(&b, 3, &sub);
    CHECK_EQ(sub.n, 0);
    mf_pb_uint(&sub, 2, 1);
    mf_pb_message(&b, 3, &sub);
    static const uint8_t packed[] = {0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05}; /* 3, 270, 86942 */
    mf_pb_bytes(&b, 5, packed, sizeof packed);
    SAME(&b, "\x1a\x03\x08\x96\x01\x1a\x02\x10\x01\x2a\x06\x03\x8e\x02\x9e\xa7\x05");

    /* Read back. */
    struct mf_pb_reader r = {b.b, b.b + b.n, NULL};
    uint32_t field = 0, wire = 0;
    CHECK(mf_pb_next(&r, &field, &wire));
    CHECK_EQ(field, 3);
    CHECK_EQ(wire, MF_PB_LEN);
    struct mf_pb_reader m = mf_pb_read_len(&r);
    CHECK(mf_pb_next(&m, &field, &wire));
    CHECK_EQ(field, 1);
    CHECK_EQ(wire, MF_PB_VARINT);
    CHECK_EQ(mf_pb_read_varint(&m), 150);
    CHECK(!mf_pb_next(&m, &field, &wire) && !m.err);
    CHECK(mf_pb_next(&r, &field, &wire));
    mf_pb_skip(&r, wire);
    CHECK(mf_pb_next(&r, &field, &wire));
    CHECK_EQ(field, 5);
    uint64_t sum[2] = {0, 0};
    mf_pb_read_repeated(&r, wire, add, sum);
    CHECK_EQ(sum[0], 3 + 270 + 86942);
    CHECK_EQ(sum[1], 3);
    CHECK(!mf_pb_next(&r, &field, &wire) && !r.err);

    /* Malformed: each stops with its reason. */
    CHECK(read_error("\x08\x96", 2) && !strcmp(read_error("\x08\x96", 2),
                                                 "a number runs past the end of its message"));
    CHECK(!strcmp(read_error("\x12\x05" "ab", 4), "a field's length runs past the end of its message"));
    CHECK(!strcmp(read_error("\x00\x01", 2), "a field number is out of range"));
    CHECK(!strcmp(read_error("\x0b\x01", 2), "a field has a wire type profile.proto does not use"));
    CHECK(!strcmp(read_error("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11),
                  "a number has more than 64 bits"));
    CHECK(!strcmp(read_error("\x0d\x01\x02", 3),
                  "a fixed-size field runs past the end of its message"));
    CHECK(read_error("\x08\x96\x01\x12\x00", 5) == NULL);
    mf_pb_free(&b);
    mf_pb_free(&sub);
    return mf_unit_done("unit_protobuf");
}
