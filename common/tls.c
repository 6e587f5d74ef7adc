#include "tls.h"

#include "tls_inspect.h"
#include "url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int c10dc_url_is_tls(const char *url)
{
    return url && strncmp(url, "tls+", 4) == 0;
}

/* The whole of a PEM file, NUL-terminated (NNG wants strings). */
static char *slurp(const char *path, const char *what, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read the TLS %s %s: %m", what, path);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += k;
        if (len + 1 == cap) {
            char *nb = cap < (1u << 24) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "the TLS %s %s is too large or memory ran out", what, path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* Loads cert_file and key_file into cfg (the key's copy in memory is wiped). */
static int own_cert(nng_tls_config *cfg, const char *cert_file, const char *key_file, char *err,
                    size_t errlen)
{
    char *cert = NULL, *key = NULL;
    int rv, ret = -1;
    /* NNG takes a key that is not the certificate's, and every handshake
     * then fails with "Cryptographic error": refuse it here, naming both
     * files. */
    if (!(cert = slurp(cert_file, "certificate", err, errlen)) ||
        !(key = slurp(key_file, "key", err, errlen)) ||
        c10dc_tls_check_pair(cert_file, key_file, err, errlen) != 0)
        goto out;
    if ((rv = nng_tls_config_own_cert(cfg, cert, key, NULL)) != 0) {
        snprintf(err, errlen, "cannot use the TLS certificate %s with the key %s: %s (are both "
                 "PEM, and is the key the certificate's?)", cert_file, key_file,
                 nng_strerror(rv));
        goto out;
    }
    ret = 0;
out:
    free(cert);
    if (key) {
        memset(key, 0, strlen(key)); /* a private key does not linger in freed memory */
        free(key);
    }
    return ret;
}

int c10dc_tls_client(nng_tls_config **out, const char *url, const char *ca_file,
                     const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    nng_tls_config *cfg;
    int rv;
    *out = NULL;
    if (!ca_file || !*ca_file) {
        snprintf(err, errlen, "%s is a TLS address, but no CA file was given to verify the "
                 "coordinator's certificate with (set C10D_TLS_CA, or the tls_ca option)", url);
        return -1;
    }
    int has_cert = cert_file && *cert_file, has_key = key_file && *key_file;
    if (has_cert != has_key) {
        snprintf(err, errlen, "a client certificate needs its key, and a key its certificate: "
                 "give both (C10D_TLS_CERT and C10D_TLS_KEY, or the tls_cert and tls_key "
                 "options) or neither (%s is missing)", has_cert ? "the key" : "the certificate");
        return -1;
    }
    if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT)) != 0) {
        snprintf(err, errlen, "TLS is not available in this NNG: %s", nng_strerror(rv));
        return -1;
    }
    char host[256];
    c10dc_url_host(url, host, sizeof host);
    if ((rv = nng_tls_config_ca_file(cfg, ca_file)) != 0) {
        snprintf(err, errlen, "cannot load the TLS CA file %s: %s", ca_file, nng_strerror(rv));
        goto fail;
    }
    if (has_cert && own_cert(cfg, cert_file, key_file, err, errlen) != 0)
        goto fail;
    if ((rv = nng_tls_config_server_name(cfg, host)) != 0 ||
        (rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) != 0) {
        snprintf(err, errlen, "cannot configure TLS for %s: %s", url, nng_strerror(rv));
        goto fail;
    }
    *out = cfg;
    return 0;
fail:
    nng_tls_config_free(cfg);
    return -1;
}

int c10dc_tls_server(nng_tls_config **out, const char *cert_file, const char *key_file,
                     const char *ca_file, char *err, size_t errlen)
{
    nng_tls_config *cfg = NULL;
    int rv;
    *out = NULL;
    if (!cert_file || !key_file) {
        snprintf(err, errlen, "a tls+tcp:// listener needs --tls-cert and --tls-key");
        return -1;
    }
    if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_SERVER)) != 0) {
        snprintf(err, errlen, "TLS is not available in this NNG: %s", nng_strerror(rv));
        return -1;
    }
    if (own_cert(cfg, cert_file, key_file, err, errlen) != 0)
        goto fail;
    if (ca_file && *ca_file) {
        if ((rv = nng_tls_config_ca_file(cfg, ca_file)) != 0) {
            snprintf(err, errlen, "cannot load the TLS CA file %s: %s", ca_file,
                     nng_strerror(rv));
            goto fail;
        }
        rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED);
    } else {
        rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE);
    }
    if (rv != 0) {
        snprintf(err, errlen, "cannot configure TLS: %s", nng_strerror(rv));
        goto fail;
    }
    *out = cfg;
    return 0;
fail:
    nng_tls_config_free(cfg);
    return -1;
}
