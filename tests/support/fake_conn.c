/* The connection to the coordinator (client/src/conn/conn.h), played in
 * process: see fake_conn.h. Requests are answered on the caller's thread;
 * a parked one (a rendezvous, a watch) waits on the coordinator's
 * condition variable as the real one waits in its engine. */
#include "fake_conn.h"

#include "conn/conn.h"
#include "internal.h"

#include "c10d_time.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 64
#define MAX_LOST 16
#define MAX_JOINED 16
#define MAX_GROUPS 8

struct c10di_conn {
    atomic_int refs;
};

typedef struct recorded {
    C10dpb__Request__OpCase op;
    uint64_t tick;
    C10dpb__Request *req;
} recorded;

typedef struct rendezvous {
    char name[64];
    int arrived; /* every arrival so far: a later round of the same name counts on */
} rendezvous;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any change: an arrival, a leave, the job's state */
    int solo;
    int hold_reports; /* queued (not SYNC) reports park until it is 0 */
    /* the requests, in order */
    recorded *log;
    size_t n_log, cap_log;
    uint64_t next_id;
    /* the next SYNC report's answer */
    int has_answer;
    c10d_status answer;
    char answer_detail[1024];
    /* the rendezvous by group name */
    rendezvous rv[MAX_GROUPS];
    /* the job's state, as watches hear it */
    uint64_t version;
    struct {
        int rank;
        C10dpb__MemberState state;
        char reason[256];
    } lost[MAX_LOST];
    int n_lost;
    char join_group[32];
    uint32_t join_region;
    struct {
        int rank;
        uint64_t after;
    } joined[MAX_JOINED];
    int n_joined;
    /* per global rank: left (its watch returns at once), the version its
     * latest watch said it knew */
    int left[MAX_RANKS];
    uint64_t heard[MAX_RANKS];
} fc = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* fc.cv waits on the monotonic clock, as the library's own waits do. */
__attribute__((constructor)) static void init_cv(void)
{
    c10d_cond_init_monotonic(&fc.cv);
}

static atomic_uint_least64_t ticks;

uint64_t fake_tick(void)
{
    return atomic_fetch_add(&ticks, 1) + 1;
}

/* What was recorded is freed when the process ends, so that the sanitizer
 * build's leak check sees only the library's leaks. */
__attribute__((destructor)) static void free_log(void)
{
    for (size_t i = 0; i < fc.n_log; i++)
        c10dpb__request__free_unpacked(fc.log[i].req, NULL);
    free(fc.log);
}

void fake_coord_solo(int on)
{
    pthread_mutex_lock(&fc.mu);
    fc.solo = on;
    pthread_mutex_unlock(&fc.mu);
}

void fake_coord_hold_reports(int on)
{
    pthread_mutex_lock(&fc.mu);
    fc.hold_reports = on;
    pthread_cond_broadcast(&fc.cv);
    pthread_mutex_unlock(&fc.mu);
}

void fake_coord_answer_report(c10d_status st, const char *detail)
{
    pthread_mutex_lock(&fc.mu);
    fc.has_answer = 1;
    fc.answer = st;
    snprintf(fc.answer_detail, sizeof fc.answer_detail, "%s", detail);
    pthread_mutex_unlock(&fc.mu);
}

void fake_coord_lose(int rank, C10dpb__MemberState state, const char *reason)
{
    pthread_mutex_lock(&fc.mu);
    if (fc.n_lost < MAX_LOST) {
        fc.lost[fc.n_lost].rank = rank;
        fc.lost[fc.n_lost].state = state;
        snprintf(fc.lost[fc.n_lost].reason, sizeof fc.lost[0].reason, "%s", reason);
        fc.n_lost++;
        fc.version++;
    }
    pthread_cond_broadcast(&fc.cv);
    pthread_mutex_unlock(&fc.mu);
}

void fake_coord_join(const char *group, uint32_t region, int rank, uint64_t after_seq)
{
    pthread_mutex_lock(&fc.mu);
    if (strcmp(fc.join_group, group) != 0 || fc.join_region != region) {
        snprintf(fc.join_group, sizeof fc.join_group, "%s", group);
        fc.join_region = region;
        fc.n_joined = 0;
    }
    if (fc.n_joined < MAX_JOINED) {
        fc.joined[fc.n_joined].rank = rank;
        fc.joined[fc.n_joined].after = after_seq;
        fc.n_joined++;
        fc.version++;
    }
    pthread_cond_broadcast(&fc.cv);
    pthread_mutex_unlock(&fc.mu);
}

/* Waits on the coordinator's condition until pred(arg) or until_ms
 * (monotonic) passed; fc.mu held. Returns pred's last answer. */
static int wait_until(int (*pred)(const void *), const void *arg, int64_t until_ms)
{
    while (!pred(arg)) {
        int64_t left = until_ms - c10d_now_ms();
        if (left <= 0)
            return 0;
        struct timespec ts = c10d_deadline_ts(left < 20 ? (int)left : 20);
        pthread_cond_timedwait(&fc.cv, &fc.mu, &ts);
    }
    return 1;
}

static int heard_pred(const void *arg)
{
    int rank = *(const int *)arg;
    return fc.heard[rank] >= fc.version;
}

int fake_coord_heard(int rank, int timeout_ms)
{
    if (rank < 0 || rank >= MAX_RANKS)
        return 0;
    pthread_mutex_lock(&fc.mu);
    int ok = wait_until(heard_pred, &rank, c10d_now_ms() + timeout_ms);
    pthread_mutex_unlock(&fc.mu);
    return ok;
}

int fake_coord_count(C10dpb__Request__OpCase op)
{
    int n = 0;
    pthread_mutex_lock(&fc.mu);
    for (size_t i = 0; i < fc.n_log; i++)
        n += fc.log[i].op == op;
    pthread_mutex_unlock(&fc.mu);
    return n;
}

const C10dpb__Request *fake_coord_request(C10dpb__Request__OpCase op, int i, uint64_t *tick)
{
    const C10dpb__Request *found = NULL;
    pthread_mutex_lock(&fc.mu);
    for (size_t k = 0; k < fc.n_log && !found; k++)
        if (fc.log[k].op == op && i-- == 0) {
            found = fc.log[k].req;
            if (tick)
                *tick = fc.log[k].tick;
        }
    pthread_mutex_unlock(&fc.mu);
    return found;
}

int fake_coord_wait_count(C10dpb__Request__OpCase op, int n, int timeout_ms)
{
    int64_t until = c10d_now_ms() + timeout_ms;
    for (;;) {
        if (fake_coord_count(op) >= n)
            return 1;
        if (c10d_now_ms() > until)
            return 0;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* --- answering --- */

/* m packed and decoded again: what the other end of the wire gets, which
 * the caller frees with protobuf_c_message_free_unpacked (or the type's
 * own free_unpacked). Aborts where that fails: the client sent, or the
 * fake coordinator answered, what could not be decoded. */
static void *over_the_wire(const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        abort();
    protobuf_c_message_pack(m, buf);
    ProtobufCMessage *copy = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
    free(buf);
    if (!copy)
        abort();
    return copy;
}

/* The request as the coordinator decodes it, kept (fc.mu held). */
static void record(C10dpb__Request *req)
{
    req->request_id = ++fc.next_id;
    C10dpb__Request *copy = over_the_wire(&req->base);
    if (fc.n_log == fc.cap_log) {
        fc.cap_log = fc.cap_log ? fc.cap_log * 2 : 64;
        fc.log = realloc(fc.log, fc.cap_log * sizeof *fc.log);
        if (!fc.log)
            abort();
    }
    fc.log[fc.n_log++] = (recorded){req->op_case, fake_tick(), copy};
}

/* The reply as the client receives it: packed and decoded, so that the
 * caller frees it with c10dpb__reply__free_unpacked. */
static C10dpb__Reply *wire(C10dpb__Reply *r)
{
    return over_the_wire(&r->base);
}

static C10dpb__Reply *plain(uint64_t id, c10d_status st, const char *detail)
{
    C10dpb__Reply r = C10DPB__REPLY__INIT;
    r.request_id = id;
    r.status = st;
    r.detail = (char *)detail;
    return wire(&r);
}

typedef struct {
    const char *name;
    int expected;
    int round;
} rv_wait;

static int rv_pred(const void *arg)
{
    const rv_wait *x = arg;
    for (int i = 0; i < MAX_GROUPS; i++)
        if (!strcmp(fc.rv[i].name, x->name))
            return fc.rv[i].arrived >= (x->round + 1) * x->expected;
    return 0;
}

static C10dpb__Reply *group_join(const C10dpb__GroupJoin *m, uint64_t id, int64_t until_ms)
{
    if (m->rank >= 0 && m->rank < MAX_RANKS && !strcmp(m->name, "world")) {
        fc.left[m->rank] = 0; /* a new world of this rank */
        fc.heard[m->rank] = 0;
    }
    int expected = m->n_members ? (int)m->n_members : m->world_size;
    rendezvous *r = NULL;
    for (int i = 0; i < MAX_GROUPS && !r; i++)
        if (!strcmp(fc.rv[i].name, m->name) || !fc.rv[i].name[0])
            r = &fc.rv[i];
    if (!r)
        return plain(id, C10D_EINVAL, "fake coordinator: too many groups");
    snprintf(r->name, sizeof r->name, "%s", m->name);
    rv_wait x = {m->name, expected, r->arrived / expected};
    r->arrived++;
    pthread_cond_broadcast(&fc.cv);
    if (!fc.solo && !wait_until(rv_pred, &x, until_ms))
        return plain(id, C10D_ETIMEDOUT, "fake coordinator: the rendezvous timed out");
    C10dpb__GroupJoinReply gj = C10DPB__GROUP_JOIN_REPLY__INIT;
    gj.has_generation = gj.has_secret = 1;
    gj.generation = 1;
    gj.secret = 0x5ec2e7;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = id;
    rep.result_case = C10DPB__REPLY__RESULT_GROUP_JOIN;
    rep.group_join = &gj;
    return wire(&rep);
}

typedef struct {
    int rank;
    uint64_t known;
} watch_wait;

static int watch_pred(const void *arg)
{
    const watch_wait *x = arg;
    return fc.version > x->known || fc.left[x->rank];
}

/* The job's state, whole (fc.mu held), as the coordinator answers a watch. */
static C10dpb__Reply *watch(const C10dpb__Watch *m, uint64_t id)
{
    if (m->rank < 0 || m->rank >= MAX_RANKS)
        return plain(id, C10D_EINVAL, "fake coordinator: rank out of range");
    if (m->known_version > fc.heard[m->rank])
        fc.heard[m->rank] = m->known_version;
    pthread_cond_broadcast(&fc.cv);
    watch_wait x = {m->rank, m->known_version};
    (void)wait_until(watch_pred, &x, c10d_now_ms() + m->wait_ms);
    C10dpb__MemberInfo mi[MAX_LOST], *mip[MAX_LOST];
    for (int i = 0; i < fc.n_lost; i++) {
        c10dpb__member_info__init(&mi[i]);
        mi[i].rank = fc.lost[i].rank;
        mi[i].has_state = mi[i].has_pid = mi[i].has_changed_ms = mi[i].has_last_seen_ms = 1;
        mi[i].state = fc.lost[i].state;
        mi[i].host = "fakehost";
        mi[i].pid = 4242;
        mi[i].reason = fc.lost[i].reason;
        mi[i].activity = "in collective #1";
        mi[i].changed_ms = 1000 + i;
        mi[i].last_seen_ms = 900;
        mip[i] = &mi[i];
    }
    C10dpb__JoinedRank jr[MAX_JOINED], *jrp[MAX_JOINED];
    for (int i = 0; i < fc.n_joined; i++) {
        c10dpb__joined_rank__init(&jr[i]);
        jr[i].rank = fc.joined[i].rank;
        jr[i].after_seq = fc.joined[i].after;
        jrp[i] = &jr[i];
    }
    C10dpb__JoinState js = C10DPB__JOIN_STATE__INIT, *jsp = &js;
    js.group = fc.join_group;
    js.region = fc.join_region;
    js.has_version = 1;
    js.version = (uint32_t)fc.n_joined;
    js.n_joined = (size_t)fc.n_joined;
    js.joined = jrp;
    C10dpb__WatchReply wr = C10DPB__WATCH_REPLY__INIT;
    wr.has_version = 1;
    wr.version = fc.version;
    wr.n_lost = (size_t)fc.n_lost;
    wr.lost = mip;
    wr.n_joins = fc.n_joined ? 1 : 0;
    wr.joins = &jsp;
    C10dpb__Reply rep = C10DPB__REPLY__INIT;
    rep.request_id = id;
    rep.result_case = C10DPB__REPLY__RESULT_WATCH;
    rep.watch = &wr;
    return wire(&rep);
}

static int reports_free(const void *arg)
{
    (void)arg;
    return !fc.hold_reports;
}

static C10dpb__Reply *answer(C10dpb__Request *req, int64_t until_ms)
{
    uint64_t id = req->request_id;
    switch (req->op_case) {
    case C10DPB__REQUEST__OP_GROUP_JOIN:
        return group_join(req->group_join, id, until_ms);
    case C10DPB__REQUEST__OP_WATCH:
        return watch(req->watch, id);
    case C10DPB__REQUEST__OP_COLL_REPORT:
        if (req->coll_report->sync && fc.has_answer) {
            fc.has_answer = 0;
            return plain(id, fc.answer, fc.answer_detail);
        }
        if (!req->coll_report->sync && !wait_until(reports_free, NULL, until_ms))
            return plain(id, C10D_ETIMEDOUT, "fake coordinator: reports held too long");
        return plain(id, C10D_OK, NULL);
    case C10DPB__REQUEST__OP_GROUP_LEAVE: {
        int r = req->group_leave->rank;
        if (r >= 0 && r < MAX_RANKS)
            fc.left[r] = 1;
        pthread_cond_broadcast(&fc.cv);
        return plain(id, C10D_OK, NULL);
    }
    case C10DPB__REQUEST__OP_JOIN_BEGIN:
        return plain(id, C10D_OK, NULL);
    default:
        return plain(id, C10D_EUNAVAIL, "the fake coordinator does not answer this request");
    }
}

static c10d_status call(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                        C10dpb__Reply **rep)
{
    (void)c;
    int64_t until = c10d_now_ms() + (int64_t)server_wait_ms + timeout_ms;
    pthread_mutex_lock(&fc.mu);
    record(req);
    C10dpb__Reply *r = answer(req, until);
    pthread_mutex_unlock(&fc.mu);
    if (r->status != C10D_OK) {
        c10d_status st =
            c10di_error((c10d_status)r->status, "%s",
                        r->detail && *r->detail ? r->detail : c10d_strerror(r->status));
        c10dpb__reply__free_unpacked(r, NULL);
        return st;
    }
    if (rep)
        *rep = r;
    else
        c10dpb__reply__free_unpacked(r, NULL);
    return C10D_OK;
}

/* --- conn.h --- */

c10d_status c10di_conn_open(c10di_conn **out, const char *url, const char *token,
                            const c10di_tls_files *tls, c10d_ms connect_timeout_ms,
                            const char *timeout_from)
{
    (void)url, (void)token, (void)tls, (void)connect_timeout_ms, (void)timeout_from;
    c10di_conn *c = calloc(1, sizeof *c);
    if (!c)
        return c10di_error(C10D_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    *out = c;
    return C10D_OK;
}

void c10di_conn_ref(c10di_conn *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void c10di_conn_unref(c10di_conn *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1)
        free(c);
}

const char *c10di_conn_url(const c10di_conn *c)
{
    (void)c;
    return "tcp://fake-coordinator:29400";
}

c10di_limits c10di_conn_limits(const c10di_conn *c)
{
    (void)c;
    return (c10di_limits){0};
}

uint64_t c10di_conn_epoch(c10di_conn *c)
{
    (void)c;
    return 1;
}

c10d_status c10di_call(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                       C10dpb__Reply **rep)
{
    return call(c, req, server_wait_ms, timeout_ms, rep);
}

c10d_status c10di_call_drop(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms)
{
    return call(c, req, server_wait_ms, timeout_ms, NULL);
}

c10d_status c10di_call_once(c10di_conn *c, C10dpb__Request *req, int server_wait_ms, int timeout_ms,
                            C10dpb__Reply **rep)
{
    return call(c, req, server_wait_ms, timeout_ms, rep);
}
