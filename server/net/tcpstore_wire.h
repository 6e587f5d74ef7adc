/* PyTorch TCPStore's wire, apart from any connection: a query's bytes
 * read (c10ds_ts_read), the request our own clients send for it built
 * from them (c10ds_ts_request: a StoreSet for a SET, ...), and the
 * engine's reply written as TCPStore's bytes (c10ds_ts_encode). No
 * socket, connection or engine: tcpstore.c runs these for a connection,
 * and tests/unit/server/test_tcpstore_wire.c feeds them split and
 * malformed bytes alone. docs/tcpstore.md has the protocol.
 *
 * The wire: no frame; a query is one byte of type, then its fields:
 * strings and byte values as a u64 length and the bytes, key lists as a
 * u64 count and the strings, integers in the host's byte order (little
 * endian everywhere torch runs). Two numberings: torch up to 2.1 (SET 0
 * ... DELETE_KEY 8, and from 2.0 up to CANCEL_WAIT 12) and torch 2.2 on,
 * whose connections open with VALIDATE (0) and a magic number; the first
 * five bytes of a connection tell which.
 *
 * Keys live under tcpstore/<run>/ in the store (c10d-ctl keys
 * tcpstore/), apart from our clients' keys: the run is the connection's
 * (tcpstore_runs.h), its prefix handed to c10ds_ts_request. */
#ifndef C10DS_TCPSTORE_WIRE_H
#define C10DS_TCPSTORE_WIRE_H

#include "c10d.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_config c10ds_config;

#define C10DS_TS_KEY_PREFIX "tcpstore/"
#define C10DS_TS_MAGIC 0x3C85F7CEu

/* Operations, whatever their number on the wire. */
typedef enum {
    C10DS_TS_VALIDATE,
    C10DS_TS_SET,
    C10DS_TS_COMPARE_SET,
    C10DS_TS_GET,
    C10DS_TS_ADD,
    C10DS_TS_CHECK,
    C10DS_TS_WAIT,
    C10DS_TS_NUM_KEYS,
    C10DS_TS_DELETE_KEY,
    C10DS_TS_APPEND,
    C10DS_TS_MULTI_GET,
    C10DS_TS_MULTI_SET,
    C10DS_TS_CANCEL_WAIT,
    C10DS_TS_PING,
    C10DS_TS_WATCH_KEY,
    C10DS_TS_UNKNOWN,
} c10ds_ts_op;

/* TCPStore's one-byte answers. */
enum { C10DS_TS_CHECK_READY = 0, C10DS_TS_CHECK_NOT_READY = 1 };
enum { C10DS_TS_WAIT_STOP_WAITING = 0, C10DS_TS_WAIT_CANCELED = 1 };

/* The op's name as TCPStore's QueryType spells it ("?" for UNKNOWN). */
const char *c10ds_ts_op_name(c10ds_ts_op op);

/* Which numbering a connection speaks, from its first bytes: 2 (torch 2.2
 * on: VALIDATE and the magic number), 1 (up to 2.1), or 0: not enough
 * bytes yet to tell. */
int c10ds_ts_detect(const uint8_t *b, size_t n);

/* 1 when b (a connection's first len bytes, on a port that is not a
 * TCPStore one) is a TCPStore client's: VALIDATE with the magic number,
 * or exactly one whole query naming a key in torch 2.1's numbering. A
 * frame of our own protocol is neither (its request id, after the
 * length, would be a key length of gigabytes). */
int c10ds_ts_client_hello(const uint8_t *b, size_t len, const c10ds_config *cfg);

/* One query's fields, pointing into the bytes it was read from. */
typedef struct c10ds_ts_query {
    c10ds_ts_op op;
    uint64_t n; /* keys in a key list, pairs in MULTI_SET */
    const uint8_t *a, *b, *c; /* key, value (or expected), desired */
    size_t alen, blen, clen;
    int64_t delta;
    uint32_t u32;        /* VALIDATE's magic, PING's nonce */
    const uint8_t *list; /* CHECK, WAIT, MULTI_GET, MULTI_SET: the list's bytes */
    size_t list_len;
} c10ds_ts_query;

typedef enum {
    C10DS_TS_WHOLE, /* *q holds a query of *used bytes */
    C10DS_TS_SHORT, /* more bytes needed: *used is how many the query takes at least */
    C10DS_TS_BAD,   /* malformed, or over a limit: c10ds_failure() says which */
} c10ds_ts_read_result;

/* Reads the query at b (len bytes: one query, or its start, or several)
 * in numbering dialect (1 or 2), against cfg's limits (--max-key-bytes,
 * --max-value-bytes, --max-multi-keys, --max-message-bytes). */
c10ds_ts_read_result c10ds_ts_read(const uint8_t *b, size_t len, int dialect,
                                   const c10ds_config *cfg, c10ds_ts_query *q, size_t *used);

/* The request q becomes, with request_id id, allocated as protobuf-c's
 * unpack would (free it with c10dpb__request__free_unpacked); NULL with
 * the reason recorded (a key holding a NUL byte, out of memory, an op the
 * engine does not run: VALIDATE, PING, CANCEL_WAIT and WATCH_KEY are
 * answered by tcpstore.c, not the engine). Its bounds are q's, checked by
 * c10ds_ts_read: no more keys than --max-multi-keys, none longer than the
 * limits, so what it allocates is bounded as --max-decode-bytes bounds
 * our own protocol's requests. */
typedef const char *(*c10ds_ts_prefix_fn)(void *arg, const uint8_t *key, size_t len);
/* Where key goes: the prefix of the run it belongs to, from prefix(arg,
 * key, len) ("tcpstore/<run>/"; NULL with why recorded), or tcpstore/
 * with no prefix fn. GETNUMKEYS counts the keys of the plain run's
 * prefix (key "", len 0). */
C10dpb__Request *c10ds_ts_request(const c10ds_ts_query *q, uint64_t id, c10ds_ts_prefix_fn prefix,
                                  void *arg);

/* The run key (len bytes, as the client sent it) belongs to, as *scope
 * (pointing into key) and *slen: torchrun's rendezvous keys,
 * "/torch.rendezvous.<id>" and its rounds' "/torch.rendezvous.<id>.<n>/...",
 * are "torch.rendezvous.<id>"; every other key is the plain run's (*slen
 * 0). */
void c10ds_ts_scope(const uint8_t *key, size_t len, const uint8_t **scope, size_t *slen);

/* The engine's reply rep to a query of op, as tcpstore.c hands it on
 * (malloc'd into *out, *len bytes): a verdict byte, then either TCPStore's
 * answer (C10DS_TS_ANSWER: perhaps no bytes, as for a SET) or why the
 * query was refused (C10DS_TS_REFUSED: words for the log; TCPStore's
 * protocol cannot carry a reason, so the connection is closed). expected
 * is a COMPARE_SET's expected value: on a missing key TCPStore answers
 * with it, storing nothing, where our store refuses. -1: out of memory. */
enum { C10DS_TS_ANSWER = 0, C10DS_TS_REFUSED = 1 };
int c10ds_ts_encode(c10ds_ts_op op, const uint8_t *expected, size_t expected_len,
                    const C10dpb__Reply *rep, void **out, size_t *len);

#endif
