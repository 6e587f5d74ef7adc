/* The client's one connection, shared by a rank's threads: the watch
 * (heartbeat), store calls and the leave of c10d_destroy, each using the
 * connection's aios as NNG requires. The NNG calls the library makes are
 * wrapped (-Wl,--wrap, see tests/CMakeLists.txt) to check two rules of
 * NNG's: an aio is submitted again only once its operation completed, and
 * it is cancelled only once submitted. Breaking the second panics NNG 1.10
 * ("assert err: !nni_aio_list_active(aio)", a rank in c10d_destroy) and
 * goes unseen on NNG 1.5; the wrappers see it on both, and widen the
 * window in which it happens by holding submissions. */
#include "store_coord.h"
#include "world_proc.h"

#include "check_main.h"
#include "cpu_time.h"

#include <nng/nng.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* --- the aio checker --- */

enum { AIO_IDLE, AIO_SUBMITTING, AIO_IN_FLIGHT };

static struct {
    nng_aio *aio;
    int state;
} aios[16];
static pthread_mutex_t aios_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int violations;
static char first_violation[256];

static pthread_t main_thread;
static atomic_int hold_next_ms; /* the next receive another thread submits waits so long */
static atomic_int held;         /* it is being held now */
static atomic_int jitter_us;    /* every submission waits up to so long */
static atomic_uint jitter_seed;
static atomic_long main_recvs, other_recvs; /* receives submitted, by thread */

static void violation(const char *what, const char *op)
{
    if (atomic_fetch_add(&violations, 1) == 0)
        snprintf(first_violation, sizeof first_violation, "%s (%s)", what, op);
}

/* Moves aio from state `from` to `to` (aios_mu taken here); says so when
 * it was elsewhere. */
static void move(nng_aio *aio, int from, int to, const char *op)
{
    pthread_mutex_lock(&aios_mu);
    int i = 0;
    while (i < 16 && aios[i].aio && aios[i].aio != aio)
        i++;
    if (i < 16) {
        if (!aios[i].aio)
            aios[i].aio = aio;
        if (from >= 0 && aios[i].state != from)
            violation(aios[i].state == AIO_SUBMITTING
                          ? "an aio was submitted by two threads at once"
                          : "an aio was submitted while its last operation was in flight",
                      op);
        aios[i].state = to;
    }
    pthread_mutex_unlock(&aios_mu);
}

static int state_of(nng_aio *aio)
{
    int st = AIO_IDLE;
    pthread_mutex_lock(&aios_mu);
    for (int i = 0; i < 16 && aios[i].aio; i++)
        if (aios[i].aio == aio)
            st = aios[i].state;
    pthread_mutex_unlock(&aios_mu);
    return st;
}

static void pause_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Holds a submission that has begun (from the library's side) and not yet
 * reached NNG: the window in which a cancel is a mistake. */
static void hold(int is_recv)
{
    int ms;
    if (is_recv && !pthread_equal(pthread_self(), main_thread) &&
        (ms = atomic_exchange(&hold_next_ms, 0)) > 0) {
        atomic_store(&held, 1);
        pause_us(ms * 1000L);
        atomic_store(&held, 0);
    }
    int j = atomic_load(&jitter_us);
    if (j > 0) {
        unsigned x = atomic_fetch_add(&jitter_seed, 2654435761u) * 2246822519u;
        pause_us((long)((x >> 8) % (unsigned)j));
    }
}

void __real_nng_stream_recv(nng_stream *s, nng_aio *aio);
void __real_nng_stream_send(nng_stream *s, nng_aio *aio);
void __real_nng_stream_dialer_dial(nng_stream_dialer *d, nng_aio *aio);
void __real_nng_aio_wait(nng_aio *aio);
void __real_nng_aio_cancel(nng_aio *aio);
void __wrap_nng_stream_recv(nng_stream *s, nng_aio *aio);
void __wrap_nng_stream_send(nng_stream *s, nng_aio *aio);
void __wrap_nng_stream_dialer_dial(nng_stream_dialer *d, nng_aio *aio);
void __wrap_nng_aio_wait(nng_aio *aio);
void __wrap_nng_aio_cancel(nng_aio *aio);

void __wrap_nng_stream_recv(nng_stream *s, nng_aio *aio)
{
    atomic_fetch_add(pthread_equal(pthread_self(), main_thread) ? &main_recvs : &other_recvs, 1);
    move(aio, AIO_IDLE, AIO_SUBMITTING, "nng_stream_recv");
    hold(1);
    __real_nng_stream_recv(s, aio);
    move(aio, -1, AIO_IN_FLIGHT, "nng_stream_recv");
}

void __wrap_nng_stream_send(nng_stream *s, nng_aio *aio)
{
    move(aio, AIO_IDLE, AIO_SUBMITTING, "nng_stream_send");
    hold(0);
    __real_nng_stream_send(s, aio);
    move(aio, -1, AIO_IN_FLIGHT, "nng_stream_send");
}

void __wrap_nng_stream_dialer_dial(nng_stream_dialer *d, nng_aio *aio)
{
    move(aio, AIO_IDLE, AIO_SUBMITTING, "nng_stream_dialer_dial");
    __real_nng_stream_dialer_dial(d, aio);
    move(aio, -1, AIO_IN_FLIGHT, "nng_stream_dialer_dial");
}

void __wrap_nng_aio_wait(nng_aio *aio)
{
    __real_nng_aio_wait(aio);
    move(aio, -1, AIO_IDLE, "nng_aio_wait");
}

void __wrap_nng_aio_cancel(nng_aio *aio)
{
    if (state_of(aio) == AIO_SUBMITTING)
        violation("an aio was cancelled while being submitted", "nng_aio_cancel");
    __real_nng_aio_cancel(aio);
}

static void reset_checker(void)
{
    main_thread = pthread_self();
    atomic_store(&violations, 0);
    atomic_store(&hold_next_ms, 0);
    atomic_store(&held, 0);
    atomic_store(&jitter_us, 0);
    first_violation[0] = '\0';
}

#define NO_VIOLATIONS()                                                                  \
    ck_assert_msg(atomic_load(&violations) == 0, "%d misuses of NNG aios, the first: %s", \
                  atomic_load(&violations), first_violation)

/* --- the cases --- */

/* The watch reads (a caller only waiting for news); a store call arrives
 * while the watch is submitting its receive: the call must not cancel
 * that receive yet, and still gets the reading at once. */
START_TEST(a_call_takes_the_reading_from_the_watch_submitting_its_receive)
{
    reset_checker();
    c10d_pg *pg = world_init(coord.url, world_job("conn"), 0, 1, 20000);
    ck_assert_ptr_nonnull(pg);
    c10d_store *s = NULL;
    OK(c10d_run_store(&s, pg));
    for (int round = 0; round < 3; round++) {
        atomic_store(&hold_next_ms, 300);
        /* the watch's next receive: after its reply, a second at most */
        long long until = test_now_ms() + 5000;
        while (!atomic_load(&held) && test_now_ms() < until)
            pause_us(200);
        ck_assert_msg(atomic_load(&held), "the watch submitted no receive in 5 s");
        long long t0 = test_now_ms();
        OK(c10d_store_set(s, "k", "v", 1));
        long long took = test_now_ms() - t0;
        /* the held 300 ms, then the handoff: not a second's wait */
        ck_assert_msg(took < 900, "round %d: the set took %lld ms", round, took);
        NO_VIOLATIONS();
    }
    c10d_destroy(pg);
    c10d_store_close(s);
    NO_VIOLATIONS();
}
END_TEST

/* Gets on s: how often NNG's threads in this process switched, a round
 * trip. */
static double switches_a_trip(c10d_store *s, int trips)
{
    void *v;
    size_t n;
    OK(c10d_store_set(s, "k", "v", 1));
    long long before = nng_thread_switches(getpid());
    for (int i = 0; i < trips; i++) {
        OK(c10d_store_get(s, "k", &v, &n, C10D_NO_WAIT));
        c10d_free(v);
    }
    return (double)(nng_thread_switches(getpid()) - before) / trips;
}

/* The caller waiting for its reply sleeps in poll(2) on the
 * connection's socket, the kernel wakes it when the reply arrives, and it
 * reads the reply itself: NNG's threads stay asleep. Waiting through NNG,
 * NNG's poller thread woke for every reply, read it and woke the caller
 * (client switches a trip, bench_rtt: 2.2 then, 1.0 now). Over ipc:// the
 * socket is told apart from a second connection to the same path
 * (common/stream_fd.c), and each connection's caller reads alone. */
START_TEST(a_reply_wakes_only_the_thread_waiting_for_it)
{
    reset_checker();
    enum { TRIPS = 400 };
    c10d_store *s = connect_store();
    double tcp = switches_a_trip(s, TRIPS);
    c10d_store_close(s);
    coord_proc ipc;
    coord_init(&ipc);
    char url[600];
    snprintf(url, sizeof url, "ipc://%s/coord.sock", ipc.dir);
    int status;
    ck_assert_int_eq(coord_start(&ipc, url, NULL, &status), 0);
    c10d_store *a = connect_timeout(ipc.url, 10000), *b = connect_timeout(ipc.url, 10000);
    double ipc_a = switches_a_trip(a, TRIPS), ipc_b = switches_a_trip(b, TRIPS);
    c10d_store_close(a);
    c10d_store_close(b);
    coord_cleanup(&ipc);
    printf("NNG's thread switches a round trip: tcp:// %.2f, ipc:// %.2f and %.2f\n", tcp,
           ipc_a, ipc_b);
    ck_assert_msg(tcp < 0.5 && ipc_a < 0.5 && ipc_b < 0.5,
                  "NNG's threads switched %.2f (tcp://), %.2f and %.2f (ipc://) times a round "
                  "trip (0: the caller reads its own reply; 1: NNG's poller read it and woke "
                  "the caller)", tcp, ipc_a, ipc_b);
    NO_VIOLATIONS();
}
END_TEST

/* What the system call a thread of this process is in says, for a thread
 * looking on while the test's own thread waits. */
typedef struct {
    pid_t tid;
    atomic_int stop, saw_poll;
} onlooker;

static void *look_on(void *arg)
{
    onlooker *o = arg;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)o->tid);
    while (!atomic_load(&o->stop) && !atomic_load(&o->saw_poll)) {
        FILE *f = fopen(path, "r");
        long nr = -1;
        if (f && fscanf(f, "%ld", &nr) != 1)
            nr = -1;
        if (f)
            fclose(f);
        if (nr == SYS_poll || nr == SYS_ppoll)
            atomic_store(&o->saw_poll, 1);
        pause_us(500);
    }
    return NULL;
}

/* The watch, parked, sleeps in poll(2) on the socket; a call that arrives
 * asks for the reading, the watch is woken (an eventfd) and leaves, and
 * the caller sleeps in poll(2) itself until its reply arrives, and reads
 * it. Were the watch not woken, the caller would sleep on a condition
 * variable until the reply woke the watch, which would then wake it: a
 * second thread on every call's path. Seen from outside: the calling
 * thread is in poll(2) while the coordinator holds its request (a get of
 * a key that never comes, 200 ms). */
START_TEST(a_call_reads_its_own_reply_while_the_watch_is_parked)
{
    reset_checker();
    c10d_pg *pg = world_init(coord.url, world_job("conn"), 0, 1, 20000);
    ck_assert_ptr_nonnull(pg);
    c10d_store *s = NULL;
    OK(c10d_run_store(&s, pg));
    enum { CALLS = 5 };
    atomic_store(&main_recvs, 0);
    atomic_store(&other_recvs, 0);
    for (int i = 0; i < CALLS; i++) {
        /* longer than NEWS_GRACE_MS: the watch takes the reading back */
        pause_us(25 * 1000);
        onlooker o = {.tid = (pid_t)syscall(SYS_gettid)};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, look_on, &o), 0);
        char key[32];
        snprintf(key, sizeof key, "never-%d", i);
        void *v = NULL;
        size_t n;
        ck_assert_int_eq(c10d_store_get(s, key, &v, &n, 200), C10D_ETIMEDOUT);
        atomic_store(&o.stop, 1);
        pthread_join(th, NULL);
        ck_assert_msg(atomic_load(&o.saw_poll), "call %d: the calling thread waited 200 ms for "
                      "its reply and was never seen in poll(2) on the socket: it was left "
                      "waiting for the watch to read the reply for it", i);
    }
    long mine = atomic_load(&main_recvs), others = atomic_load(&other_recvs);
    /* others: the watch reading its own heartbeat's answer, at most once a
     * second; before, the watch submitted a receive each time it took the
     * reading back, only to have it cancelled by the next call */
    ck_assert_msg(mine >= CALLS && others <= 3,
                  "of %d calls' replies, the calling thread submitted %ld receives, other "
                  "threads (the watch) %ld", CALLS, mine, others);
    c10d_destroy(pg);
    c10d_store_close(s);
    NO_VIOLATIONS();
}
END_TEST

typedef struct {
    c10d_store *s;
    int id;
    atomic_int *stop, *left;
    long ops, errors;
    char err[256];
} caller;

static void *calls(void *arg)
{
    caller *c = arg;
    char key[32], absent[32];
    snprintf(key, sizeof key, "k%d", c->id);
    while (!atomic_load(c->stop)) {
        void *v = NULL;
        size_t n;
        int64_t r;
        int all;
        const char *keys[] = {key};
        c10d_status st;
        switch (c->ops % 5) {
        case 0: st = c10d_store_set(c->s, key, "v", 1); break;
        case 1: st = c10d_store_get(c->s, key, &v, &n, C10D_NO_WAIT); break;
        case 2: st = c10d_store_add(c->s, "ctr", 1, &r); break;
        case 3: st = c10d_store_check(c->s, keys, 1, &all); break;
        default: /* parked on the coordinator, which answers a timeout */
            snprintf(absent, sizeof absent, "absent%d-%ld", c->id, c->ops);
            st = c10d_store_get(c->s, absent, &v, &n, 2);
            if (st == C10D_ETIMEDOUT)
                st = C10D_OK;
            break;
        }
        c10d_free(v);
        /* the run over, the coordinator deleted its keys */
        if (st == C10D_ENOTFOUND && atomic_load(c->left))
            st = C10D_OK;
        if (st != C10D_OK && c->errors++ == 0)
            snprintf(c->err, sizeof c->err, "%s", c10d_errmsg());
        c->ops++;
        /* now and then long enough for the watch to take the reading */
        unsigned x = (unsigned)(c->ops * 2654435761u + (unsigned)c->id * 40503u);
        pause_us((long)((x >> 7) % 15000));
    }
    return NULL;
}

/* Store calls on threads, the watch's heartbeats, then the leave while
 * the calls go on (the torch backend's store outlives its group): on one
 * connection, with every submission held a little at random. */
START_TEST(store_calls_heartbeats_and_a_leave_share_the_connection)
{
    reset_checker();
    atomic_store(&jitter_us, 1000);
    c10d_pg *pg = world_init(coord.url, world_job("conn"), 0, 1, 20000);
    ck_assert_ptr_nonnull(pg);
    c10d_store *s = NULL;
    OK(c10d_run_store(&s, pg));
    enum { N = 4 };
    atomic_int stop = 0, left = 0;
    caller cs[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        cs[i] = (caller){.s = s, .id = i, .stop = &stop, .left = &left};
        ck_assert_int_eq(pthread_create(&th[i], NULL, calls, &cs[i]), 0);
    }
    /* the watch takes the reading whenever the callers pause */
    for (int i = 0; i < 30; i++) {
        pause_us(50 * 1000);
        void *v = NULL;
        size_t n;
        OK(c10d_store_get(s, "k0", &v, &n, 1000));
        c10d_free(v);
    }
    atomic_store(&left, 1);
    c10d_destroy(pg);
    pause_us(300 * 1000);
    atomic_store(&stop, 1);
    long ops = 0;
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    NO_VIOLATIONS();
    for (int i = 0; i < N; i++) {
        ck_assert_msg(cs[i].errors == 0, "caller %d: %ld errors, the first: %s", i,
                      cs[i].errors, cs[i].err);
        ops += cs[i].ops;
    }
    ck_assert_int_gt(ops, 50);
    c10d_store_close(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conn");
    TCase *tc = store_tcase("shared");
    tcase_add_test(tc, a_call_takes_the_reading_from_the_watch_submitting_its_receive);
    tcase_add_test(tc, store_calls_heartbeats_and_a_leave_share_the_connection);
    tcase_add_test(tc, a_reply_wakes_only_the_thread_waiting_for_it);
    tcase_add_test(tc, a_call_reads_its_own_reply_while_the_watch_is_parked);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
