/* Operations about the coordinator itself: the client's handshake and the
 * status that c10d-ctl shows. */
#include "engine.h"

#include "c10d_time.h"
#include "version.h"

static c10ds_outcome op_hello(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__Hello *m = r->pb->hello;
    if (m->has_protocol && m->protocol != C10D_PROTOCOL_VERSION)
        return c10ds_fail(r, C10D_EPROTO, "client speaks protocol %u, this coordinator (%s) "
                          "speaks %d; use matching versions", m->protocol, C10D_VERSION_STRING,
                          C10D_PROTOCOL_VERSION);
    C10dpb__HelloReply h = C10DPB__HELLO_REPLY__INIT;
    h.has_protocol = h.has_max_key_bytes = h.has_max_value_bytes = 1;
    h.has_max_multi_keys = h.has_max_message_bytes = 1;
    h.protocol = C10D_PROTOCOL_VERSION;
    h.version = (char *)C10D_VERSION_STRING;
    h.max_key_bytes = e->cfg->max_key_bytes;
    h.max_value_bytes = e->cfg->max_value_bytes;
    h.max_multi_keys = e->cfg->max_multi_keys;
    h.max_message_bytes = e->cfg->max_message_bytes;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_HELLO;
    rep.hello = &h;
    return c10ds_reply(r, &rep);
}

static c10ds_outcome op_status(c10ds_engine *e, c10ds_request *r, c10ds_phase ph)
{
    C10dpb__StatusReply s = C10DPB__STATUS_REPLY__INIT;
    s.version = (char *)C10D_VERSION_STRING;
    s.db_path = e->db->path;
    s.listen_url = e->listen_url;
    s.has_uptime_ms = s.has_num_keys = s.has_clients = s.has_requests = 1;
    s.has_parked = s.has_schema_version = 1;
    s.uptime_ms = c10d_now_ms() - e->start_ms;
    s.num_keys = c10ds_store_count(&e->store, NULL);
    s.clients = atomic_load(&e->clients);
    s.requests = atomic_load(&e->requests);
    s.parked = (int64_t)c10ds_waiters_count(e->waiters);
    s.schema_version = e->db->schema_version;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.result_case = C10DPB__REPLY__RESULT_STATUS_INFO;
    rep.status_info = &s;
    return c10ds_reply(r, &rep);
}

const c10ds_op c10ds_admin_ops[] = {
    {C10DPB__REQUEST__OP_HELLO, "hello", op_hello, 0},
    {C10DPB__REQUEST__OP_STATUS, "status", op_status, 0},
    {0, NULL, NULL, 0},
};
