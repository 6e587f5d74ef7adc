#include "engine_request.h"

#include <stdlib.h>

c10ds_request *engine_request(C10dpb__Request *pb, uint64_t client, uint64_t id)
{
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = client != 0;
    who.client_id = client;
    pb->who = &who;
    pb->request_id = id;
    size_t n = c10dpb__request__get_packed_size(pb);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return NULL;
    c10dpb__request__pack(pb, buf);
    c10ds_request *r = c10ds_request_new(c10dpb__request__unpack(NULL, n, buf), NULL);
    free(buf);
    pb->who = NULL;
    return r;
}

c10ds_request *engine_request_leave(uint64_t client, uint64_t id, const char *job, uint64_t gen,
                                    int rank)
{
    C10dpb__GroupLeave m = C10DPB__GROUP_LEAVE__INIT;
    m.job = (char *)job;
    m.generation = gen;
    m.rank = rank;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_GROUP_LEAVE;
    pb.group_leave = &m;
    return engine_request(&pb, client, id);
}

c10ds_request *engine_request_report(uint64_t client, uint64_t id, const char *job, uint64_t gen,
                                     int rank, uint64_t seq, uint32_t kind)
{
    C10dpb__CollEntry e = C10DPB__COLL_ENTRY__INIT, *ep = &e;
    e.group = "world";
    e.seq = seq;
    e.kind = kind;
    e.has_count = e.has_op = 1;
    e.count = 4;
    C10dpb__CollReport m = C10DPB__COLL_REPORT__INIT;
    m.job = (char *)job;
    m.generation = gen;
    m.rank = rank;
    m.n_entries = 1;
    m.entries = &ep;
    C10dpb__Request pb = C10DPB__REQUEST__INIT;
    pb.op_case = C10DPB__REQUEST__OP_COLL_REPORT;
    pb.coll_report = &m;
    return engine_request(&pb, client, id);
}
