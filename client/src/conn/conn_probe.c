/* Asking the other replicas who leads, when the one served goes silent
 * (conn_stream_internal.h).
 *
 * A leader that is killed drops its connections, and the client dials
 * the next replica at once. A leader that is frozen (SIGSTOP, a hung
 * host, a partition) keeps them open: its kernel, or nothing at all,
 * says nothing, and a call would wait out its whole timeout although the
 * other replicas elect a new leader in seconds. So a call to a list of
 * replicas that has heard nothing on its stream for
 * C10DI_CONN_LEADER_SILENCE_MS asks the others, each on a connection of
 * its own with a hello: a replica that leads answers it, one that does
 * not names the leader it knows. While they still name the silent one
 * (a leader that is only slow, or a get the coordinator holds), nothing
 * changes; once one leads or names another, the stream is dropped and
 * every call in flight is sent again there, as after a leader's kill. */
#include "conn/conn_stream_internal.h"

#include "budgets.h"
#include "c10d_time.h"
#include "frame.h"
#include "version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sends or receives all of buf on s within ms (aio: no callback). */
static int transfer(nng_stream *s, nng_aio *aio, uint8_t *buf, size_t len, int recv,
                    int64_t until)
{
    for (size_t off = 0; off < len;) {
        int64_t left = until - c10d_now_ms();
        if (left <= 0)
            return NNG_ETIMEDOUT;
        nng_iov iov = {buf + off, len - off};
        nng_aio_set_iov(aio, 1, &iov);
        nng_aio_set_timeout(aio, c10d_nng_ms(left));
        if (recv)
            nng_stream_recv(s, aio);
        else
            nng_stream_send(s, aio);
        nng_aio_wait(aio);
        int rv = nng_aio_result(aio);
        if (rv != 0)
            return rv;
        off += nng_aio_count(aio);
    }
    return 0;
}

/* One hello to the replica dialled by d: its reply, decoded (the
 * caller's to free), or NULL when none came by until. */
static C10dpb__Reply *ask(c10di_conn *c, nng_stream_dialer *d, int64_t until)
{
    nng_aio *aio = NULL;
    nng_stream *s = NULL;
    C10dpb__Reply *rep = NULL;
    uint8_t *frame = NULL, *body = NULL;
    if (nng_aio_alloc(&aio, NULL, NULL) != 0)
        return NULL;
    nng_aio_set_timeout(aio, c10d_nng_ms(until - c10d_now_ms()));
    nng_stream_dialer_dial(d, aio);
    nng_aio_wait(aio);
    if (nng_aio_result(aio) != 0)
        goto done;
    s = nng_aio_get_output(aio, 0);
    C10dpb__Hello hello = C10DPB__HELLO__INIT;
    hello.has_protocol = 1;
    hello.protocol = C10D_PROTOCOL_VERSION;
    C10dpb__Request req = C10DPB__REQUEST__INIT;
    req.op_case = C10DPB__REQUEST__OP_HELLO;
    req.hello = &hello;
    req.request_id = 1;
    /* no identity: the probe is no session of this client's */
    req.token = c->token;
    size_t len = c10dpb__request__get_packed_size(&req);
    uint8_t hdr[C10DC_FRAME_HDR];
    if (!(frame = malloc(C10DC_FRAME_HDR + len)))
        goto done;
    c10dc_frame_header(frame, 1, len);
    c10dpb__request__pack(&req, frame + C10DC_FRAME_HDR);
    if (transfer(s, aio, frame, C10DC_FRAME_HDR + len, 0, until) != 0 ||
        transfer(s, aio, hdr, sizeof hdr, 1, until) != 0)
        goto done;
    uint32_t n = c10dc_get_u32(hdr);
    if (n < 8 || n > 65536 || !(body = malloc(n - 8)) ||
        transfer(s, aio, body, n - 8, 1, until) != 0)
        goto done;
    rep = c10dpb__reply__unpack(NULL, n - 8, body);
done:
    if (s) {
        nng_stream_close(s);
        nng_stream_free(s);
    }
    nng_aio_free(aio);
    free(frame);
    free(body);
    return rep;
}

int c10di_conn_probe_leader(c10di_conn *c, char *leader, size_t cap)
{
    /* read under mu: written once before n_urls counts them */
    int n = c->n_urls, cur = c->cur;
    const char *silent = c->urls[cur];
    nng_stream_dialer *dialers[C10DI_CONN_URLS];
    const char *urls[C10DI_CONN_URLS];
    for (int k = 0; k < n; k++) {
        dialers[k] = c->dialers[k];
        urls[k] = c->urls[k];
    }
    pthread_mutex_unlock(&c->mu);
    int found = 0;
    int64_t until = c10d_now_ms() + C10DI_CONN_LEADER_PROBE_MS;
    for (int k = 0; k < n && !found; k++) {
        if (k == cur)
            continue;
        C10dpb__Reply *r = ask(c, dialers[k], until);
        if (r && r->status == C10D_OK) {
            snprintf(leader, cap, "%s", urls[k]);
            found = 1;
        } else if (r && r->status == C10D_ENOTLEADER && r->leader_url && *r->leader_url &&
                   strcmp(r->leader_url, silent) != 0) {
            snprintf(leader, cap, "%s", r->leader_url);
            found = 1;
        }
        if (r)
            c10dpb__reply__free_unpacked(r, NULL);
    }
    pthread_mutex_lock(&c->mu);
    return found;
}
