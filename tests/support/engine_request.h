/* Requests for driving the coordinator's engine without the network (unit
 * tests, bench_engine, bench_runs): built the way the listener builds them. */
#ifndef C10D_TEST_ENGINE_REQUEST_H
#define C10D_TEST_ENGINE_REQUEST_H

#include "engine/request.h"

#include <stdint.h>

/* pb packed and decoded again, with who.client_id = client (none when 0)
 * and request_id = id. */
c10ds_request *engine_request(C10dpb__Request *pb, uint64_t client, uint64_t id);

/* Rank `rank` of job's generation gen leaves (group_leave). */
c10ds_request *engine_request_leave(uint64_t client, uint64_t id, const char *job, uint64_t gen,
                                    int rank);
/* Rank `rank` entered collective #seq of kind `kind` on "world", 4
 * elements (coll_report). */
c10ds_request *engine_request_report(uint64_t client, uint64_t id, const char *job, uint64_t gen,
                                     int rank, uint64_t seq, uint32_t kind);

#endif
