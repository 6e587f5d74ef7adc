/* libFuzzer target: the coordinator's request decoder and every handler,
 * in-process against the engine and a real SQLite database.
 *
 * An input is a batch of requests, each a 2-byte little-endian length and
 * that many bytes of a protobuf Request (what a frame carries), plus, per
 * request, one byte choosing the connection it came on (so parked requests
 * and liveness follow connections). The batch runs as the listener would
 * hand it to the engine; then every connection closes, which drops what
 * was parked on it, so memory stays bounded across runs. Each reply must
 * decode. The coordinator must neither crash, leak, nor hang.
 *
 * With C10D_FUZZ_VALUES=big (scripts/fuzz.sh's second run) the
 * limits are the coordinator's defaults, and big/0 .. big/3 hold 16 MiB
 * each before every input (an input may delete them): requests naming
 * large values, many times over, must not hold the engine (libFuzzer's
 * -timeout), nor make it read more than a reply may hold (-rss_limit_mb).
 *
 * Built with clang by scripts/fuzz.sh (-DC10D_FUZZ=ON); the corpus is
 * tests/fuzz/corpus, seeded by make_seeds.c. */
#include "engine/engine.h"
#include "engine_fixture.h"
#include "failure.h"
#include "engine/request.h"
#include "store/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static engine_fixture fx;

static void check_reply(void *arg, void *slot, uint64_t request_id, const void *reply,
                        size_t len)
{
    (void)arg, (void)slot, (void)request_id;
    C10dpb__Reply *r = c10dpb__reply__unpack(NULL, len, reply);
    if (!r)
        abort(); /* the coordinator sent something its clients cannot read */
    c10dpb__reply__free_unpacked(r, NULL);
}

#define BIG_VALUES 4
#define BIG_VALUE_BYTES (16u << 20)
static int big_values; /* C10D_FUZZ_VALUES=big */

/* Puts back whichever of big/0 .. big/3 the last input deleted or
 * changed (the size tells, without reading the value). */
static void store_big_values(void)
{
    static char *v;
    if (!v && !(v = malloc(BIG_VALUE_BYTES)))
        abort();
    for (int i = 0; i < BIG_VALUES; i++) {
        char key[16];
        size_t n = 0;
        snprintf(key, sizeof key, "big/%d", i);
        if (c10ds_store_size(&fx.eng->store, key, &n) == 1 && n == BIG_VALUE_BYTES)
            continue;
        memset(v, 'a' + i, BIG_VALUE_BYTES);
        if (c10ds_store_set(&fx.eng->store, key, v, BIG_VALUE_BYTES) != C10D_OK) {
            fprintf(stderr, "fuzz_engine: storing %s: %s\n", key, c10ds_failure());
            abort();
        }
    }
}

static void start(void)
{
    const char *values = getenv("C10D_FUZZ_VALUES");
    big_values = values && strcmp(values, "big") == 0;
    engine_fixture_init(&fx, "fuzz");
    if (big_values) {
        /* The defaults: 16 MiB values, 4,096 keys a request. */
        fx.cfg.max_value_bytes = BIG_VALUE_BYTES;
        fx.cfg.max_message_bytes = BIG_VALUE_BYTES + (1u << 20);
    } else {
        /* Small limits: the fuzzer reaches them, and a run stays quick. */
        fx.cfg.max_value_bytes = 4096;
        fx.cfg.max_message_bytes = 65536;
        fx.cfg.max_multi_keys = 16;
    }
    fx.cfg.max_world_size = 64;
    fx.cfg.listen_url = "fuzz://";
    if (engine_fixture_start(&fx, check_reply, NULL) != 0) {
        fprintf(stderr, "fuzz_engine: %s\n", fx.err);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fx.eng)
        start();
    if (big_values)
        store_big_values();
    c10ds_request *head = NULL, **tail = &head;
    size_t at = 0;
    while (at + 3 <= size) {
        size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
        uint32_t pipe = 1 + data[at + 2] % 4;
        at += 3;
        if (len > size - at)
            len = size - at;
        C10dpb__Request *pb = c10dpb__request__unpack(NULL, len, data + at);
        at += len;
        if (!pb)
            continue; /* the listener answers these with EPROTO */
        c10ds_request *r = c10ds_request_new(pb, NULL);
        if (!r) {
            c10dpb__request__free_unpacked(pb, NULL);
            continue;
        }
        r->pipe = pipe;
        *tail = r;
        tail = &r->next;
    }
    for (uint32_t p = 1; p <= 4; p++) { /* every connection closes after */
        c10ds_request *r = c10ds_request_new(NULL, NULL);
        if (!r)
            break;
        r->event = C10DS_EV_PIPE_CLOSED;
        r->pipe = p;
        *tail = r;
        tail = &r->next;
    }
    c10ds_engine_run_batch(fx.eng, head);
    return 0;
}
