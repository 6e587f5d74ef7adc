/* c10d-coord: parse options, open the database, start the engine and the
 * listener, wait for SIGTERM/SIGINT, shut down cleanly. */
#include "config.h"
#include "db/db.h"
#include "engine/engine.h"
#include "failure.h"
#include "net/listener.h"
#include "log.h"
#include "metrics/metrics.h"
#include "notify.h"
#include "replica/replica.h"
#include "url.h"
#include "version.h"

#include <errno.h>
#include <nng/nng.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_ready_file(const char *path, const char *url)
{
    /* Write then rename, so a reader never sees half a URL. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", url);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Whether url is this host's alone: ipc://, or a loopback address. */
static int reaches_this_host_only(const char *url)
{
    if (!c10dc_url_is_tcp(url))
        return 1;
    char host[256] = "";
    c10dc_url_host(url, host, sizeof host);
    return !strncmp(host, "127.", 4) || !strcmp(host, "localhost") || !strcmp(host, "::1");
}

int main(int argc, char **argv)
{
    c10ds_config cfg;
    int rc = c10ds_config_parse(&cfg, argc, argv);
    if (rc != 0) {
        c10ds_config_free(&cfg); /* what was parsed before the refusal */
        return rc > 0 ? 0 : 2;
    }
    c10ds_log_set_level(cfg.log_level);
    if (cfg.export_path) {
        rc = c10ds_replica_export(&cfg);
        c10ds_config_free(&cfg);
        return rc;
    }
    if (cfg.replica_id && !c10ds_replica_is_engine()) {
        /* the replica's dqlite node, which starts this program again as
         * its engine process (replica.h) */
        rc = c10ds_replica_supervise(&cfg, argv);
        c10ds_config_free(&cfg);
        return rc;
    }

    /* Signals are taken synchronously by this thread (sigwait); every
     * thread started from here on inherits the blocked mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    char url[256], ts_url[256] = "", metrics_at[300];
    c10ds_db db;
    c10ds_engine *engine = NULL;
    c10ds_listener *listener = NULL, *ts_listener = NULL;
    c10ds_replica *replica = NULL;
    c10ds_metrics *metrics = NULL;
    int status = 1;
    if (cfg.replica_id ? c10ds_replica_open(&replica, &cfg, &db)
                       : c10ds_db_open(&db, cfg.db_path)) {
        c10ds_error("%s", c10ds_failure());
        c10ds_config_free(&cfg);
        return 1;
    }
    if (replica) { /* what c10d-ctl status shows as the database */
        char what[512];
        snprintf(what, sizeof what, "dqlite (%s; data in %s)", c10ds_replica_describe(replica),
                 cfg.data_dir);
        free(db.path);
        db.path = strdup(what);
    }
    if (!(engine = c10ds_engine_new(&cfg, &db, c10ds_listener_send, NULL))) {
        c10ds_error("%s", c10ds_failure());
        goto out;
    }
    if (replica && !c10ds_replica_leads(replica)) {
        engine->refuse = c10ds_replica_refuse;
        engine->refuse_arg = replica;
    }
    if (!(listener = c10ds_listener_new(&cfg, engine, cfg.listen_url, C10DS_DIALECT_C10D, url,
                                        sizeof url))) {
        c10ds_error("%s", c10ds_failure());
        goto out;
    }
    /* TCPStore's protocol has no way to say "ask the leader": only the
     * leading replica speaks it */
    if (cfg.tcpstore_url && (!replica || c10ds_replica_leads(replica)) &&
        !(ts_listener = c10ds_listener_new(&cfg, engine, cfg.tcpstore_url, C10DS_DIALECT_TCPSTORE,
                                           ts_url, sizeof ts_url))) {
        c10ds_error("--tcpstore-listen: %s", c10ds_failure());
        goto out;
    }
    snprintf(engine->listen_url, sizeof engine->listen_url, "%s", url);
    snprintf(engine->tcpstore_url, sizeof engine->tcpstore_url, "%s", ts_url);
    if (replica && c10ds_replica_publish(replica, url) != 0) {
        c10ds_error("%s", c10ds_failure());
        goto out;
    }
    /* Read before the engine thread starts: it owns the store after. */
    long long num_keys = (long long)engine->store.num_keys;
    if (c10ds_engine_start(engine) != 0) {
        c10ds_error("cannot start the engine thread");
        goto out;
    }
    if (replica && c10ds_replica_watch(replica) != 0) {
        c10ds_error("%s", c10ds_failure());
        goto out;
    }
    c10ds_info("c10d-coord %s serving on %s, database %s (schema %d, %lld keys, sqlite %s, "
               "nng %s)%s",
               C10D_VERSION_STRING, url, db.path, db.schema_version,
               num_keys, sqlite3_libversion(), nng_version(),
               cfg.token ? ", token required" : "");
    if (!cfg.token && !cfg.tls_ca && !reaches_this_host_only(url))
        c10ds_warn("serving on %s with no token: every host that reaches this port can read and "
                   "write the store and end jobs. Set C10D_TOKEN or --token-file (clients set "
                   "C10D_TOKEN alike), require client certificates (--tls-ca), or listen on "
                   "127.0.0.1 (docs/operations.md, Tokens)", url);
    if (ts_listener && !reaches_this_host_only(ts_url))
        c10ds_warn("the TCPStore port %s takes no token or TLS (TCPStore's protocol has none): "
                   "every host that reaches it can read and write keys under tcpstore/",
                   ts_url);
    if (ts_listener)
        c10ds_info("speaking PyTorch TCPStore's protocol on %s (keys under tcpstore/; no token "
                   "or TLS there%s)", ts_url,
                   strstr(ts_url, "//127.") || strstr(ts_url, "//localhost:") ? ", loopback only"
                                                                               : "");
    if (cfg.metrics_url) {
        const char *role = !replica ? "single" : c10ds_replica_leads(replica) ? "leader" : "follower";
        if (!(metrics = c10ds_metrics_start(cfg.metrics_url, engine, role, metrics_at,
                                            sizeof metrics_at))) {
            c10ds_error("--metrics-listen: %s", c10ds_failure());
            goto out;
        }
        c10ds_info("Prometheus metrics on %s", metrics_at);
    }
    if (cfg.ready_file && write_ready_file(cfg.ready_file, url) != 0)
        c10ds_warn("cannot write ready file %s: %s", cfg.ready_file, strerror(errno));
    c10ds_notify("READY=1\nSTATUS=serving on %s", url); /* Type=notify units (deploy/) */

    int sig = 0;
    while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP)
        c10ds_info("SIGHUP ignored (send SIGTERM to stop)");
    c10ds_info("%s received: answering queued requests (for %d ms at most, --drain-timeout), "
               "then stopping", strsignal(sig), cfg.drain_timeout_ms);
    c10ds_notify("STOPPING=1\nSTATUS=%s: answering queued requests, then stopping",
                 strsignal(sig));
    status = 0;
out:
    c10ds_metrics_stop(metrics); /* it reads the engine */
    /* Order matters: the engine answers what is queued and commits; NNG
     * gets a moment to put those replies on the wire; then the socket
     * closes and the database is closed (checkpointing its WAL). */
    c10ds_engine_stop(engine);
    int closed = 1;
    if (ts_listener) {
        c10ds_listener_drain(ts_listener, C10DS_SHUTDOWN_DRAIN_MS);
        closed = c10ds_listener_close(ts_listener, C10DS_LISTENER_CLOSE_MS) == 0;
    }
    if (listener) {
        c10ds_listener_drain(listener, C10DS_SHUTDOWN_DRAIN_MS);
        closed = (c10ds_listener_close(listener, C10DS_LISTENER_CLOSE_MS) == 0) && closed;
        if (!closed)
            c10ds_warn("NNG did not finish closing its socket within %d ms (a known NNG 1.5.2 "
                       "close race); closing the database and exiting around it",
                       C10DS_LISTENER_CLOSE_MS);
    }
    c10ds_engine_report_dropped(engine);
    if (closed) {
        c10ds_engine_free(engine);
    } else {
        /* Listener callbacks may still touch the engine struct: let go
         * of the database (fini) but leave the struct to process exit. */
        c10ds_engine_fini(engine);
    }
    /* its threads read cfg: stopped before cfg goes; its mirror is the
     * database's link to dqlite: freed after the engine's last commit */
    c10ds_replica_free(replica);
    db.mirror = NULL;
    c10ds_db_close(&db);
    if (status == 0)
        c10ds_info("stopped cleanly");
    if (cfg.ready_file)
        unlink(cfg.ready_file);
    if (!closed) {
        /* NNG threads may still read cfg and the engine: leave now,
         * without unwinding them. */
        fflush(stderr);
        _exit(status);
    }
    c10ds_config_free(&cfg);
    return status;
}
