#include "internal.h"

#include "tls.h"
#include "url.h"

#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long c10di_env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? def : x;
}

c10d_status c10di_env_int(const char *name, long def, long min, long max, long *out)
{
    const char *v = getenv(name);
    *out = def;
    if (!v || !*v)
        return C10D_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < min || x > max)
        return c10di_error(C10D_EINVAL, "%s=%s: want a whole number from %ld to %ld", name, v,
                           min, max);
    *out = x;
    return C10D_OK;
}

/* Under torchrun (which sets TORCHELASTIC_RUN_ID in every worker),
 * MASTER_ADDR:MASTER_PORT is torchrun's own store, a TCPStore: it accepts
 * our connection and drops it, and a rank would retry it until its
 * timeout. */
static int under_torchrun(void)
{
    const char *id = getenv("TORCHELASTIC_RUN_ID");
    return id && *id;
}

/* A tcp:// or tls+tcp:// URL must end in a port from 1 to 65535 (NNG
 * takes 70000, and the dial then fails for ever, read as "no
 * coordinator"). */
static c10d_status check_url(const char *url)
{
    if (c10dc_url_is_tcp(url) && c10dc_url_port(url) < 0)
        return c10di_error(C10D_EINVAL, "bad coordinator URL '%s': the port must be a number "
                           "from 1 to 65535 (tcp://host:port)", url);
    return C10D_OK;
}

c10d_status c10di_url_element(const char *url, size_t len, char *out, size_t outlen)
{
    while (len && *url == ' ') /* "tcp://a:1, tcp://b:2" */
        url++, len--;
    while (len && url[len - 1] == ' ')
        len--;
    if (!len)
        return c10di_error(C10D_EINVAL, "bad coordinator URL list: an empty URL between commas");
    int has_scheme = 0;
    for (size_t i = 0; i + 3 <= len && !has_scheme; i++)
        has_scheme = !memcmp(url + i, "://", 3);
    int n = snprintf(out, outlen, "%s%.*s", has_scheme ? "" : "tcp://", (int)len, url);
    if (n < 0 || (size_t)n >= outlen)
        return c10di_error(C10D_EINVAL, "coordinator URL '%.*s' is too long", (int)len, url);
    return check_url(out);
}

/* Normalizes each URL of the list `url` (comma-separated) into out, joined
 * by commas; all of them TLS, or none (one connection reads its replies one
 * way, conn_reader.c). */
static c10d_status resolve_list(const char *url, char *out, size_t outlen)
{
    char one[C10DI_URL_MAX];
    size_t used = 0;
    int n = 0, tls = 0;
    *out = '\0';
    const char *p = url, *elem;
    size_t len;
    for (; c10dc_url_list_next(&p, &elem, &len); n++) {
        c10d_status st = c10di_url_element(elem, len, one, sizeof one);
        if (st != C10D_OK)
            return st;
        if (n == C10DI_URL_LIST_MAX)
            return c10di_error(C10D_EINVAL, "coordinator URL list '%s' has more than %d URLs",
                               url, C10DI_URL_LIST_MAX);
        if (n == 0)
            tls = c10dc_url_is_tls(one);
        else if (c10dc_url_is_tls(one) != tls)
            return c10di_error(C10D_EINVAL, "coordinator URL list '%s' mixes tls+tcp:// with "
                               "other schemes: the replicas are all TLS or none", url);
        size_t k = strlen(one);
        if (used + (n ? 1 : 0) + k >= outlen)
            return c10di_error(C10D_EINVAL, "coordinator URL list '%s' is too long (%zu bytes "
                               "at most)", url, outlen - 1);
        if (n)
            out[used++] = ',';
        memcpy(out + used, one, k + 1);
        used += k;
    }
    return C10D_OK;
}

c10d_status c10di_resolve_url(const char *url, char *out, size_t outlen)
{
    const char *env = getenv("C10D_COORD");
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (!url || !*url) {
        if (env && *env) {
            url = env;
        } else if (addr && *addr && under_torchrun()) {
            snprintf(out, outlen, "(none)");
            return c10di_error(C10D_EINVAL, "no coordinator named: under torchrun, MASTER_ADDR:"
                               "MASTER_PORT (%s:%s) is torchrun's own store, not a c10d-coord; "
                               "set C10D_COORD=tcp://HOST:PORT to the coordinator "
                               "(docs/launcher.md)", addr, port && *port ? port : "?");
        } else if (addr && *addr) {
            /* torchrun's convention; an IPv6 literal needs brackets. */
            int v6 = strchr(addr, ':') && addr[0] != '[';
            snprintf(out, outlen, "tcp://%s%s%s:%s", v6 ? "[" : "", addr, v6 ? "]" : "",
                     port && *port ? port : C10DC_DEFAULT_PORT);
            return check_url(out);
        } else {
            url = "tcp://127.0.0.1:" C10DC_DEFAULT_PORT;
        }
    }
    return resolve_list(url, out, outlen);
}

/* Whether addr names this host only (a single-node torchrun's default). */
static int loopback(const char *addr)
{
    return !strcmp(addr, "localhost") || !strncmp(addr, "127.", 4) || !strcmp(addr, "::1") ||
           !strcmp(addr, "[::1]");
}

size_t c10di_default_job(char *out, size_t outlen)
{
    const char *job = getenv("C10D_JOB");
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    const char *ns = getenv("PMIX_NAMESPACE");
    int n;
    if (job && *job) {
        n = snprintf(out, outlen, "%s", job);
    } else if (run && *run && strcmp(run, "none") != 0) {
        n = snprintf(out, outlen, "%s", run); /* torchrun --rdzv_id, or --standalone's uuid */
    } else if (run && *run && addr && *addr) {
        /* torchrun's static rendezvous names no run ("none"); its store's
         * address is the job's own while it runs: jobs side by side have
         * one each. A loopback address is every single-node job's
         * (127.0.0.1:29500 by default): the host's name tells them apart. */
        char host[256] = "localhost";
        if (loopback(addr) && gethostname(host, sizeof host) == 0)
            host[sizeof host - 1] = '\0';
        n = snprintf(out, outlen, "torchrun-%s:%s", loopback(addr) ? host : addr,
                     port && *port ? port : "29500");
    } else if (getenv("OMPI_COMM_WORLD_SIZE") && ns && *ns) {
        /* Open MPI's mpirun: its PMIx namespace is this launch's alone */
        n = snprintf(out, outlen, "mpirun-%s", ns);
    } else {
        n = snprintf(out, outlen, "default");
    }
    return n < 0 ? 0 : (size_t)n;
}
