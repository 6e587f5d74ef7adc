/* TLS diagnosis beyond NNG's API (tls_inspect.c), through mbed TLS. */
#ifndef C10D_COMMON_TLS_INSPECT_H
#define C10D_COMMON_TLS_INSPECT_H

#include <stddef.h>

/* 0 if the PEM key in key_file is the private key of the certificate in
 * cert_file; else -1 with a message naming both files in err. */
int c10dc_tls_check_pair(const char *cert_file, const char *key_file, char *err, size_t errlen);

/* After a failed TLS handshake with the server at url (scheme://host:port):
 * shakes hands once more with verification optional and puts in out why
 * it failed, in words (an expired certificate, a host name it does not
 * name, an unknown CA, a server that does not speak TLS, one that wants a
 * client certificate). cert_file/key_file: this client's, or NULL.
 * Returns 0 with out set, 1 if this handshake succeeded (the failure
 * passed), or -1 if it could not find out. */
int c10dc_tls_diagnose(const char *url, const char *ca_file, const char *cert_file,
                       const char *key_file, char *out, size_t outlen);

/* 1 if the server at url (scheme://host:port) answers a TLS client hello
 * with a server hello (it speaks TLS), 0 if not or if it cannot be told. */
int c10dc_tls_probe(const char *url);

#endif
