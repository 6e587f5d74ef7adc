/* What the two halves of the dqlite wire client share; others see
 * dqlite_wire.h:
 *
 *   dqlite_wire_conn.c  the connection: dialing, the socket's bounded
 *                       reads and writes, one request's exchange (its
 *                       header, the response read whole, FAILURE)
 *   dqlite_wire.c       the messages: each request's body built, each
 *                       response's decoded, a query's ROWS
 *
 * A request is built in d->out after the 8 bytes of header that
 * c10ds_dq_roundtrip fills in; a response's body is in d->in. */
#ifndef C10DS_DQLITE_WIRE_INTERNAL_H
#define C10DS_DQLITE_WIRE_INTERNAL_H

#include "replica/dqlite_wire.h"

#include <stddef.h>
#include <stdint.h>

/* Response types (the protocol's numbers). */
enum { C10DS_DQ_RES_FAILURE = 0, C10DS_DQ_RES_SERVER = 1, C10DS_DQ_RES_SERVERS = 3,
       C10DS_DQ_RES_DB = 4, C10DS_DQ_RES_STMT = 5, C10DS_DQ_RES_RESULT = 6,
       C10DS_DQ_RES_ROWS = 7, C10DS_DQ_RES_EMPTY = 8 };

struct c10ds_dq {
    int fd;
    uint64_t code;   /* the last FAILURE's, or 0 (its message: c10ds_failure()) */
    uint8_t *out;    /* the request being built */
    size_t out_len, out_cap;
    uint8_t *in;     /* the last response's body */
    size_t in_len;
    uint8_t in_type;
    uint32_t db;     /* the open database's id */
};

/* dqlite_wire_conn.c */
/* Records what went wrong on the wire (failure.h), code 0 in d; returns -1. */
int c10ds_dq_wire_error(c10ds_dq *d, const char *fmt, ...);
/* Reads one response into d->in. */
int c10ds_dq_recv_response(c10ds_dq *d);
/* Sends the request built (of type `type`) and reads its response, which
 * must be `want`: a FAILURE is C10DS_DQ_FAILED with its code and message. */
int c10ds_dq_roundtrip(c10ds_dq *d, uint8_t type, uint8_t want);

/* dqlite_wire.c: a request's fields and a response's */
void c10ds_dq_put_u64(c10ds_dq *d, uint64_t v);
void c10ds_dq_pad(c10ds_dq *d);
uint64_t c10ds_dq_get_u64(const uint8_t *p);
uint32_t c10ds_dq_get_u32(const uint8_t *p);
/* A text field at *off of the response: its start, or NULL if it does not
 * end within the body; *off moves past its padding. */
const char *c10ds_dq_get_text(const uint8_t *body, size_t len, size_t *off);

#endif
