/* TLS for the control plane (tls+tcp://), through NNG's mbed TLS engine:
 * one place that turns file names into an nng_tls_config, for the
 * coordinator's listener and the client's dialer. */
#ifndef C10D_COMMON_TLS_H
#define C10D_COMMON_TLS_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <stddef.h>

/* 1 when url asks for TLS (tls+tcp://...). */
int c10dc_url_is_tls(const char *url);

/* A client configuration that verifies the server against ca_file and the
 * host name in url, presenting cert_file with key_file when both are given
 * (a coordinator started with --tls-ca requires one). Returns 0, or -1
 * with a message in err. */
int c10dc_tls_client(nng_tls_config **out, const char *url, const char *ca_file,
                     const char *cert_file, const char *key_file, char *err, size_t errlen);

/* A server configuration with cert_file and key_file (PEM); with ca_file,
 * clients must present a certificate signed by it. Returns 0, or -1 with a
 * message in err. */
int c10dc_tls_server(nng_tls_config **out, const char *cert_file, const char *key_file,
                     const char *ca_file, char *err, size_t errlen);

#endif
