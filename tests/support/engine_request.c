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
