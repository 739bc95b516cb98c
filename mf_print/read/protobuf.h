/* The protocol buffer wire format, by hand: the little of it profile.proto needs. A writer
 * appends fields to a growable byte buffer (a nested message is built in a buffer of its own,
 * then appended with its length); a reader walks a byte range and never reads past it: the
 * first malformed byte sets `err` (one sentence for a message to the user) and every later
 * call returns nothing. */
#ifndef MF_PROTOBUF_H
#define MF_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { MF_PB_VARINT = 0, MF_PB_I64 = 1, MF_PB_LEN = 2, MF_PB_I32 = 5 };

struct mf_pb {
    uint8_t *b;
    size_t n, cap;
};

/* Room for n more bytes at b->b + b->n. */
void mf_pb_room_for(struct mf_pb *b, size_t n);
void mf_pb_varint(struct mf_pb *b, uint64_t v);
void mf_pb_fixed64(struct mf_pb *b, uint64_t v); /* 8 bytes, little-endian (wire type I64) */
/* Field `field` as a varint; 0 is proto3's default and is left out. An int64 is written as
 * its two's complement (a negative one takes ten bytes), as protobuf does. */
void mf_pb_uint(struct mf_pb *b, uint32_t field, uint64_t v);
void mf_pb_int(struct mf_pb *b, uint32_t field, int64_t v);
void mf_pb_bool(struct mf_pb *b, uint32_t field, bool v);
/* A length-delimited field: bytes, a string, a packed array or a message. Always written
 * (an empty string is string_table[0]). */
void mf_pb_bytes(struct mf_pb *b, uint32_t field, const void *p, size_t n);
void mf_pb_string(struct mf_pb *b, uint32_t field, const char *s);
/* Appends raw's bytes as they are (fields already encoded). */
void mf_pb_append(struct mf_pb *b, const struct mf_pb *raw);
/* Appends sub as field `field` and empties sub (its memory is kept for the next one). */
void mf_pb_message(struct mf_pb *b, uint32_t field, struct mf_pb *sub);
void mf_pb_free(struct mf_pb *b);

struct mf_pb_reader {
    const uint8_t *p, *end;
    const char *err; /* the first error, or NULL */
};

/* The next field's number and wire type; false at the end or on an error. */
bool mf_pb_next(struct mf_pb_reader *r, uint32_t *field, uint32_t *wire);
/* The value of a field of wire type MF_PB_VARINT (0 on an error). */
uint64_t mf_pb_read_varint(struct mf_pb_reader *r);
/* 8 bytes, little-endian (0 on an error). */
uint64_t mf_pb_read_fixed64(struct mf_pb_reader *r);
/* A length-delimited field as a reader of its own bytes (empty on an error). */
struct mf_pb_reader mf_pb_read_len(struct mf_pb_reader *r);
/* Skips a field of the given wire type. */
void mf_pb_skip(struct mf_pb_reader *r, uint32_t wire);
/* A repeated varint field, packed (wire type 2) or not (0): calls add(ctx, v) per element. */
void mf_pb_read_repeated(struct mf_pb_reader *r, uint32_t wire, void (*add)(void *ctx, uint64_t v),
                         void *ctx);
/* Sets r->err unless an error is already there. */
void mf_pb_fail(struct mf_pb_reader *r, const char *err);

#endif
