/* Writes the fuzzer's seed corpus (tests/fuzz/corpus): one file per
 * scenario, each a batch in fuzz_engine.c's format (a 2-byte length, a
 * byte naming the connection, a packed Request; repeated). Every operation
 * appears, with the fields that lead into the handlers' deeper paths: a
 * world of two that forms, watches, reports collectives and joins; and
 * keys naming large values thousands of times in one request.
 *   make_seeds DIR */
#include "c10d.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static uint64_t next_id = 1;

static void put(C10dpb__Request *r, int pipe, uint64_t client)
{
    C10dpb__Identity who = C10DPB__IDENTITY__INIT;
    who.has_client_id = 1;
    who.client_id = client;
    r->who = &who;
    r->request_id = next_id++;
    size_t n = c10dpb__request__get_packed_size(r);
    uint8_t *buf = malloc(n ? n : 1);
    c10dpb__request__pack(r, buf);
    uint8_t hdr[3] = {(uint8_t)(n & 0xff), (uint8_t)(n >> 8), (uint8_t)pipe};
    fwrite(hdr, 1, 3, out);
    fwrite(buf, 1, n, out);
    free(buf);
    r->who = NULL;
}

static void start(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(out = fopen(path, "wb"))) {
        perror(path);
        exit(1);
    }
}

#define REQ(field, kase, msg)                                                                    \
    C10dpb__Request r = C10DPB__REQUEST__INIT;                                                   \
    r.op_case = C10DPB__REQUEST__OP_##kase;                                                      \
    r.field = &(msg)

/* A check (timeout_ms < 0), wait or multi_get of keys. */
static void put_keys(C10dpb__Request__OpCase op, char **keys, size_t n, int timeout_ms, int pipe,
                     uint64_t client)
{
    C10dpb__StoreCheck c = C10DPB__STORE_CHECK__INIT;
    C10dpb__StoreWait w = C10DPB__STORE_WAIT__INIT;
    C10dpb__StoreMultiGet g = C10DPB__STORE_MULTI_GET__INIT;
    c.keys = w.keys = g.keys = keys;
    c.n_keys = w.n_keys = g.n_keys = n;
    w.has_timeout_ms = g.has_timeout_ms = timeout_ms >= 0;
    w.timeout_ms = g.timeout_ms = timeout_ms >= 0 ? timeout_ms : 0;
    C10dpb__Request r = C10DPB__REQUEST__INIT;
    r.op_case = op;
    if (op == C10DPB__REQUEST__OP_CHECK)
        r.check = &c;
    else if (op == C10DPB__REQUEST__OP_WAIT)
        r.wait = &w;
    else
        r.multi_get = &g;
    put(&r, pipe, client);
}

static void store_ops(void)
{
    {
        C10dpb__Hello m = C10DPB__HELLO__INIT;
        REQ(hello, HELLO, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreSet m = C10DPB__STORE_SET__INIT;
        m.key = "k";
        m.value.data = (uint8_t *)"12";
        m.value.len = 2;
        REQ(set, SET, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreAdd m = C10DPB__STORE_ADD__INIT;
        m.key = "k";
        m.delta = 5;
        REQ(add, ADD, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreGet m = C10DPB__STORE_GET__INIT;
        m.key = "late";
        m.has_timeout_ms = 1;
        m.timeout_ms = 10000; /* parks; its connection closes */
        REQ(get, GET, m);
        put(&r, 1, 8);
    }
    {
        C10dpb__StoreAppend m = C10DPB__STORE_APPEND__INIT;
        m.key = "late";
        m.value.data = (uint8_t *)"x";
        m.value.len = 1;
        REQ(append, APPEND, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreCompareSet m = C10DPB__STORE_COMPARE_SET__INIT;
        m.key = "k";
        m.expected.data = (uint8_t *)"17";
        m.expected.len = 2;
        m.desired.data = (uint8_t *)"v";
        m.desired.len = 1;
        REQ(compare_set, COMPARE_SET, m);
        put(&r, 0, 7);
    }
    char *keys[] = {"k", "late", "k"};
    put_keys(C10DPB__REQUEST__OP_WAIT, keys, 2, 100, 2, 9);
    put_keys(C10DPB__REQUEST__OP_CHECK, keys, 3, -1, 0, 7);
    put_keys(C10DPB__REQUEST__OP_MULTI_GET, keys, 3, -1, 0, 7);
    {
        C10dpb__KeyValue a = C10DPB__KEY_VALUE__INIT, b = C10DPB__KEY_VALUE__INIT;
        a.key = "m/1";
        a.value.data = (uint8_t *)"a";
        a.value.len = 1;
        b.key = "m/2";
        C10dpb__KeyValue *kvs[] = {&a, &b};
        C10dpb__StoreMultiSet m = C10DPB__STORE_MULTI_SET__INIT;
        m.kvs = kvs;
        m.n_kvs = 2;
        REQ(multi_set, MULTI_SET, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreNumKeys m = C10DPB__STORE_NUM_KEYS__INIT;
        m.prefix = "m/";
        REQ(num_keys, NUM_KEYS, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreList m = C10DPB__STORE_LIST__INIT;
        m.prefix = "m";
        m.has_limit = 1;
        m.limit = 1;
        REQ(list, LIST, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreDelete m = C10DPB__STORE_DELETE__INIT;
        m.key = "m/1";
        REQ(delete_key, DELETE_KEY, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__CoordStatus m = C10DPB__COORD_STATUS__INIT;
        REQ(status, STATUS, m);
        put(&r, 0, 7);
    }
}

static void join(const char *job, const char *name, int rank, int world, int32_t *members,
                 size_t n)
{
    C10dpb__GroupJoin m = C10DPB__GROUP_JOIN__INIT;
    m.job = (char *)job;
    m.name = (char *)name;
    m.rank = rank;
    m.world_size = world;
    m.members = members;
    m.n_members = n;
    m.endpoint.data = (uint8_t *)"host=h\nport=1\n";
    m.endpoint.len = 14;
    m.host = "h";
    m.has_pid = 1;
    m.pid = 100 + rank;
    m.has_timeout_ms = 1;
    m.timeout_ms = 200;
    m.has_generation = 1;
    m.generation = 1;
    REQ(group_join, GROUP_JOIN, m);
    put(&r, rank, 100 + (uint64_t)rank);
}

static void report(const char *job, int rank, uint64_t seq, int sync, uint32_t kind)
{
    C10dpb__CollEntry e = C10DPB__COLL_ENTRY__INIT;
    e.group = "world";
    e.seq = seq;
    e.kind = kind;
    e.has_dtype = e.has_count = e.has_timeout_ms = 1;
    e.dtype = 1;
    e.count = 4;
    e.timeout_ms = 100;
    C10dpb__CollEntry *es[] = {&e};
    C10dpb__CollReport m = C10DPB__COLL_REPORT__INIT;
    m.job = (char *)job;
    m.generation = 1;
    m.rank = rank;
    m.entries = es;
    m.n_entries = 1;
    m.has_sync = 1;
    m.sync = sync;
    REQ(coll_report, COLL_REPORT, m);
    put(&r, rank, 100 + (uint64_t)rank);
}

static void world_of_two(const char *job, int desync)
{
    join(job, "world", 0, 2, NULL, 0);
    join(job, "world", 1, 2, NULL, 0);
    for (int rank = 0; rank < 2; rank++) {
        C10dpb__Watch m = C10DPB__WATCH__INIT;
        m.job = (char *)job;
        m.generation = 1;
        m.rank = rank;
        m.activity = "step";
        C10dpb__GroupSeq done = C10DPB__GROUP_SEQ__INIT, *dp = &done;
        done.group = "world";
        done.seq = 0;
        m.n_completed = 1;
        m.completed = &dp;
        REQ(watch, WATCH, m);
        put(&r, rank, 100 + (uint64_t)rank);
    }
    report(job, 0, 1, 1, 1);
    report(job, 1, 1, 1, desync ? 2 : 1);
    report(job, 0, 2, 0, 1);
    int32_t members[] = {1, 0};
    join(job, "world.1", 0, 2, members, 2);
    join(job, "world.1", 1, 2, members, 2);
    {
        C10dpb__CollStatus m = C10DPB__COLL_STATUS__INIT;
        m.job = (char *)job;
        REQ(coll_status, COLL_STATUS, m);
        put(&r, 3, 9);
    }
    {
        C10dpb__CollTrace m = C10DPB__COLL_TRACE__INIT;
        m.job = (char *)job;
        m.rank = 1;
        REQ(coll_trace, COLL_TRACE, m);
        put(&r, 3, 9);
    }
    {
        C10dpb__JobsQuery m = C10DPB__JOBS_QUERY__INIT;
        REQ(jobs, JOBS, m);
        put(&r, 3, 9);
    }
}

static void join_region(const char *job)
{
    join(job, "world", 0, 2, NULL, 0);
    join(job, "world", 1, 2, NULL, 0);
    for (int rank = 0; rank < 2; rank++) {
        C10dpb__JoinBegin m = C10DPB__JOIN_BEGIN__INIT;
        m.job = (char *)job;
        m.generation = 1;
        m.group = "world";
        m.rank = rank;
        m.region = 1;
        m.has_inband = 1;
        m.inband = 0;
        REQ(join_begin, JOIN_BEGIN, m);
        put(&r, rank, 100 + (uint64_t)rank);
    }
    report(job, 1, 1, 0, 1);
    {
        C10dpb__JoinShadow m = C10DPB__JOIN_SHADOW__INIT;
        m.job = (char *)job;
        m.generation = 1;
        m.group = "world";
        m.rank = 0;
        m.region = 1;
        m.next_seq = 1;
        m.has_first = 1;
        m.first = 1;
        m.has_timeout_ms = 1;
        m.timeout_ms = 100;
        REQ(join_shadow, JOIN_SHADOW, m);
        put(&r, 0, 100);
    }
    C10dpb__GroupLeave m = C10DPB__GROUP_LEAVE__INIT;
    m.job = (char *)job;
    m.generation = 1;
    m.rank = 1;
    C10dpb__GroupSeq fin = C10DPB__GROUP_SEQ__INIT, *fp = &fin;
    fin.group = "world";
    fin.seq = 1;
    m.n_finals = 1;
    m.finals = &fp;
    REQ(group_leave, GROUP_LEAVE, m);
    put(&r, 1, 101);
}

/* Requests naming large values (big/0 .. big/3, 16 MiB each
 * under C10D_FUZZ_VALUES=big), one key many times over. */
#define NAMED 4096

static void repeated_keys(void)
{
    static char *keys[NAMED];
    for (int i = 0; i < NAMED; i++)
        keys[i] = i % 3 ? "big/0" : "big/1";
    put_keys(C10DPB__REQUEST__OP_CHECK, keys, NAMED, -1, 0, 7);
    put_keys(C10DPB__REQUEST__OP_WAIT, keys, NAMED, 100, 1, 8);
    put_keys(C10DPB__REQUEST__OP_MULTI_GET, keys, NAMED, -1, 0, 7); /* over the reply's limit */
    char *one[] = {"big/2"};
    put_keys(C10DPB__REQUEST__OP_MULTI_GET, one, 1, -1, 2, 9); /* within it: read once */
    {
        C10dpb__StoreGet m = C10DPB__STORE_GET__INIT;
        m.key = "big/3";
        REQ(get, GET, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreAdd m = C10DPB__STORE_ADD__INIT;
        m.key = "big/3";
        m.delta = 1;
        REQ(add, ADD, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreAppend m = C10DPB__STORE_APPEND__INIT;
        m.key = "big/1";
        m.value.data = (uint8_t *)"x";
        m.value.len = 1;
        REQ(append, APPEND, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreCompareSet m = C10DPB__STORE_COMPARE_SET__INIT;
        m.key = "big/2";
        m.expected.data = (uint8_t *)"x";
        m.expected.len = 1;
        REQ(compare_set, COMPARE_SET, m);
        put(&r, 0, 7);
    }
    {
        C10dpb__StoreList m = C10DPB__STORE_LIST__INIT;
        m.prefix = "big/";
        REQ(list, LIST, m);
        put(&r, 0, 7);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    start(argv[1], "store_ops");
    store_ops();
    fclose(out);
    start(argv[1], "world_of_two");
    world_of_two("seed-a", 0);
    fclose(out);
    start(argv[1], "world_desync");
    world_of_two("seed-b", 1);
    fclose(out);
    start(argv[1], "join_region");
    join_region("seed-c");
    fclose(out);
    start(argv[1], "repeated_keys");
    repeated_keys();
    fclose(out);
    return 0;
}
