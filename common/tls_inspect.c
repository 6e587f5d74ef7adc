/* What NNG's TLS API cannot say, asked of mbed TLS, the engine NNG itself
 * uses: whether a key belongs to its certificate (NNG takes any pair, and
 * the coordinator then "serves" while every handshake fails), and why a
 * server's certificate was refused (NNG reports an expired certificate,
 * an unknown CA and a wrong host name all as "Peer could not be
 * authenticated"). */
#include "tls_inspect.h"
#include "url.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>
#if MBEDTLS_VERSION_MAJOR >= 3 && defined(MBEDTLS_PSA_CRYPTO_C)
#include <psa/crypto.h>
#endif

#include <stdio.h>
#include <string.h>

/* How long a probe waits for the server's side of a handshake: the probe
 * runs once a connection already failed, to say why, so a server that
 * says nothing is answer enough soon. */
#define PROBE_READ_MS 2000
/* How long a completed TLS 1.3 handshake waits for the server to refuse
 * the client's certificate: it does so in its first record, at once; a
 * coordinator that took the client says nothing until asked. */
#define REFUSAL_READ_MS 1000

static void mbed_reason(int rc, char *out, size_t outlen)
{
    mbedtls_strerror(rc, out, outlen);
}

/* mbed TLS 2 (Debian 12) and 3 (Debian 13). 3 wants a random generator
 * for key operations (blinding), keeps the handshake's state private
 * (readable through MBEDTLS_PRIVATE) and whether the server asked for a
 * client certificate out of reach, and speaks TLS 1.3, whose client ends
 * its handshake before the server has looked at the client's certificate:
 * there a refused client certificate is the server's first record (see
 * refused_after_handshake). TLS 1.3 needs PSA crypto started, which NNG
 * does only once it has made a TLS configuration of its own. */
#if MBEDTLS_VERSION_MAJOR >= 3
#define SSL_STATE(ssl) ((ssl).MBEDTLS_PRIVATE(state))
#define SSL_ASKED_FOR_CERT(ssl) 0
static int engine_init(void)
{
#if defined(MBEDTLS_PSA_CRYPTO_C)
    return psa_crypto_init() == PSA_SUCCESS ? 0 : -1; /* idempotent */
#else
    return 0;
#endif
}
static int parse_key(mbedtls_pk_context *key, const char *path, mbedtls_ctr_drbg_context *drbg)
{
    return mbedtls_pk_parse_keyfile(key, path, NULL, mbedtls_ctr_drbg_random, drbg);
}
static int check_pair(mbedtls_pk_context *pub, mbedtls_pk_context *prv,
                      mbedtls_ctr_drbg_context *drbg)
{
    return mbedtls_pk_check_pair(pub, prv, mbedtls_ctr_drbg_random, drbg);
}
#else
#define SSL_STATE(ssl) ((ssl).state)
#define SSL_ASKED_FOR_CERT(ssl) ((ssl).client_auth)
static int engine_init(void)
{
    return 0;
}
static int parse_key(mbedtls_pk_context *key, const char *path, mbedtls_ctr_drbg_context *drbg)
{
    (void)drbg;
    return mbedtls_pk_parse_keyfile(key, path, NULL);
}
static int check_pair(mbedtls_pk_context *pub, mbedtls_pk_context *prv,
                      mbedtls_ctr_drbg_context *drbg)
{
    (void)drbg;
    return mbedtls_pk_check_pair(pub, prv);
}
#endif

int c10dc_tls_check_pair(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt_init(&crt);
    mbedtls_pk_init(&key);
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    char why[160];
    int rc, ret = -1;
    if ((rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0)) != 0) {
        mbed_reason(rc, why, sizeof why);
        snprintf(err, errlen, "no random numbers to check the TLS key with: %s", why);
    } else if ((rc = mbedtls_x509_crt_parse_file(&crt, cert_file)) != 0) {
        mbed_reason(rc, why, sizeof why);
        snprintf(err, errlen, "the TLS certificate %s cannot be read as PEM: %s", cert_file, why);
    } else if ((rc = parse_key(&key, key_file, &drbg)) != 0) {
        mbed_reason(rc, why, sizeof why);
        snprintf(err, errlen, "the TLS key %s cannot be read as an unencrypted PEM key: %s",
                 key_file, why);
    } else if ((rc = check_pair(&crt.pk, &key, &drbg)) != 0) {
        snprintf(err, errlen, "the TLS key %s is not the key of the certificate %s (every "
                 "handshake would fail): give the key the certificate was made for", key_file,
                 cert_file);
    } else {
        ret = 0;
    }
    mbedtls_pk_free(&key);
    mbedtls_x509_crt_free(&crt);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return ret;
}

/* The verifier's findings, on one line ("the certificate validity has
 * expired; the certificate Common Name (CN) does not match ..."). */
static void verify_reasons(uint32_t flags, char *out, size_t outlen)
{
    char buf[512];
    int n = mbedtls_x509_crt_verify_info(buf, sizeof buf, "", flags);
    if (n <= 0) {
        snprintf(out, outlen, "its certificate was refused (flags 0x%x)", (unsigned)flags);
        return;
    }
    size_t o = 0;
    for (char *line = strtok(buf, "\n"); line && o + 1 < outlen; line = strtok(NULL, "\n")) {
        while (*line == ' ')
            line++;
        int k = snprintf(out + o, outlen - o, "%s%s", o ? "; " : "", line);
        if (k < 0)
            break;
        o += (size_t)k;
    }
}

int c10dc_tls_probe(const char *url)
{
    char host[256], port[16];
    if (c10dc_url_split(url, host, sizeof host, port, sizeof port) != 0)
        return 0;
    mbedtls_net_context net;
    mbedtls_ssl_context ssl;
    mbedtls_ssl_config conf;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_net_init(&net);
    mbedtls_ssl_init(&ssl);
    mbedtls_ssl_config_init(&conf);
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    int tls = 0, rc;
    if (engine_init() == 0 &&
        mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0) == 0 &&
        mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT) == 0) {
        mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
        mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_NONE); /* only: does it speak TLS? */
        mbedtls_ssl_conf_read_timeout(&conf, PROBE_READ_MS);
        if (mbedtls_ssl_setup(&ssl, &conf) == 0 &&
            mbedtls_net_connect(&net, host, port, MBEDTLS_NET_PROTO_TCP) == 0) {
            mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, NULL, mbedtls_net_recv_timeout);
            while ((rc = mbedtls_ssl_handshake(&ssl)) == MBEDTLS_ERR_SSL_WANT_READ ||
                   rc == MBEDTLS_ERR_SSL_WANT_WRITE)
                ;
            tls = rc == 0 || SSL_STATE(ssl) > MBEDTLS_SSL_SERVER_HELLO;
            if (rc == 0)
                mbedtls_ssl_close_notify(&ssl);
        }
    }
    mbedtls_net_free(&net);
    mbedtls_ssl_free(&ssl);
    mbedtls_ssl_config_free(&conf);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return tls;
}

/* After a handshake that completed: 0 if the server keeps the connection
 * (says nothing for REFUSAL_READ_MS, or sends data), or the error its
 * first record is. Under TLS 1.2 the server has refused a client
 * certificate before the handshake ends, so this finds nothing more. */
static int refused_after_handshake(mbedtls_ssl_context *ssl, mbedtls_ssl_config *conf)
{
#if MBEDTLS_VERSION_MAJOR < 3
    (void)ssl;
    (void)conf;
    return 0;
#else
    if (mbedtls_ssl_get_version_number(ssl) != MBEDTLS_SSL_VERSION_TLS1_3)
        return 0;
    unsigned char b[1];
    int rc;
    mbedtls_ssl_conf_read_timeout(conf, REFUSAL_READ_MS);
    do
        rc = mbedtls_ssl_read(ssl, b, sizeof b);
    while (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE ||
           rc == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET);
    if (rc > 0 || rc == MBEDTLS_ERR_SSL_TIMEOUT)
        return 0;
    return rc == 0 ? MBEDTLS_ERR_SSL_CONN_EOF : rc;
#endif
}

int c10dc_tls_diagnose(const char *url, const char *ca_file, const char *cert_file,
                       const char *key_file, char *out, size_t outlen)
{
    char host[256], port[16], why[160];
    if (c10dc_url_split(url, host, sizeof host, port, sizeof port) != 0)
        return -1;
    mbedtls_net_context net;
    mbedtls_ssl_context ssl;
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca, crt;
    mbedtls_pk_context key;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_net_init(&net);
    mbedtls_ssl_init(&ssl);
    mbedtls_ssl_config_init(&conf);
    mbedtls_x509_crt_init(&ca);
    mbedtls_x509_crt_init(&crt);
    mbedtls_pk_init(&key);
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    int rc, ret = -1;
    if (engine_init() != 0 ||
        mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0) != 0 ||
        !ca_file || mbedtls_x509_crt_parse_file(&ca, ca_file) != 0 ||
        mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT) != 0)
        goto out;
    mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
    /* Optional: the handshake goes on, and the verifier says what it found. */
    mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
    mbedtls_ssl_conf_ca_chain(&conf, &ca, NULL);
    mbedtls_ssl_conf_read_timeout(&conf, 3000);
    if (cert_file && key_file && mbedtls_x509_crt_parse_file(&crt, cert_file) == 0 &&
        parse_key(&key, key_file, &drbg) == 0)
        mbedtls_ssl_conf_own_cert(&conf, &crt, &key);
    if (mbedtls_ssl_setup(&ssl, &conf) != 0 || mbedtls_ssl_set_hostname(&ssl, host) != 0)
        goto out;
    if ((rc = mbedtls_net_connect(&net, host, port, MBEDTLS_NET_PROTO_TCP)) != 0) {
        mbed_reason(rc, why, sizeof why);
        snprintf(out, outlen, "it could not be reached again to see why (%s)", why);
        ret = 0;
        goto out;
    }
    mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, NULL, mbedtls_net_recv_timeout);
    while ((rc = mbedtls_ssl_handshake(&ssl)) == MBEDTLS_ERR_SSL_WANT_READ ||
           rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        ;
    uint32_t flags = mbedtls_ssl_get_verify_result(&ssl);
    int bad_cert = flags && flags != (uint32_t)-1;
    /* How far the handshake got says who stopped it. */
    int server_spoke_tls = SSL_STATE(ssl) > MBEDTLS_SSL_SERVER_HELLO;
    int has_cert = cert_file && key_file;
    int asked = SSL_ASKED_FOR_CERT(ssl);
    if (rc == 0 && !bad_cert && (rc = refused_after_handshake(&ssl, &conf)) != 0)
        asked = 1; /* TLS 1.3: only the client's certificate is left to refuse */
    if (bad_cert) {
        verify_reasons(flags, out, outlen);
    } else if (rc != 0 && !server_spoke_tls) {
        snprintf(out, outlen, "the server does not answer in TLS (it closed the connection or "
                 "sent something else during the handshake): is it a plain tcp:// coordinator, "
                 "or not a coordinator?");
    } else if (rc != 0 && asked && !has_cert) {
        snprintf(out, outlen, "the coordinator requires a client certificate (it was started "
                 "with --tls-ca): set C10D_TLS_CERT and C10D_TLS_KEY (or the tls_cert and "
                 "tls_key options, c10d-ctl's --tls-cert and --tls-key) to a certificate its CA "
                 "signed and its key");
    } else if (rc != 0 && asked) {
        snprintf(out, outlen, "the coordinator refused this client's certificate %s: is it "
                 "signed by the CA the coordinator's --tls-ca names, and still valid?",
                 cert_file);
    } else if (rc != 0) {
        mbed_reason(rc, why, sizeof why);
        snprintf(out, outlen, "%s", why);
    } else {
        snprintf(out, outlen, "a second handshake succeeded (a passing failure?)");
    }
    ret = rc == 0 && !bad_cert ? 1 : 0;
    mbedtls_ssl_close_notify(&ssl);
out:
    mbedtls_net_free(&net);
    mbedtls_ssl_free(&ssl);
    mbedtls_ssl_config_free(&conf);
    mbedtls_x509_crt_free(&ca);
    mbedtls_x509_crt_free(&crt);
    mbedtls_pk_free(&key);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    return ret;
}
