#include "tls_certs.h"

#include <stdio.h>
#include <stdlib.h>

int tls_make_certs(const char *dir, tls_certs *out)
{
    snprintf(out->ca, sizeof out->ca, "%s/ca.pem", dir);
    snprintf(out->cert, sizeof out->cert, "%s/server.pem", dir);
    snprintf(out->key, sizeof out->key, "%s/server.key", dir);
    snprintf(out->other_ca, sizeof out->other_ca, "%s/other-ca.pem", dir);
    snprintf(out->other_key, sizeof out->other_key, "%s/other.key", dir);
    snprintf(out->expired, sizeof out->expired, "%s/expired.pem", dir);
    snprintf(out->client_cert, sizeof out->client_cert, "%s/client.pem", dir);
    snprintf(out->client_key, sizeof out->client_key, "%s/client.key", dir);
    /* P-256 keys: quick to make, and mbed TLS 2.28 speaks them. mbed TLS
     * matches the server name against DNS names only, hence 127.0.0.1 as a
     * DNS name too. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "set -e; cd '%s'; k='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'; "
             "openssl req -x509 $k -keyout ca.key -out ca.pem -days 2 -subj /CN=c10d-test-ca; "
             "openssl req $k -keyout server.key -out server.csr -subj /CN=localhost; "
             "printf 'subjectAltName=DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1\\n"
             "basicConstraints=CA:FALSE\\n' > ext.cnf; "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out server.pem -days 2 -extfile ext.cnf; "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out expired.pem -days 0 -extfile ext.cnf; "
             "openssl req $k -keyout client.key -out client.csr -subj /CN=c10d-test-client; "
             "printf 'extendedKeyUsage=clientAuth\\nbasicConstraints=CA:FALSE\\n' > cext.cnf; "
             "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "-out client.pem -days 2 -extfile cext.cnf; "
             "openssl req -x509 $k -keyout other.key -out other-ca.pem -days 2 "
             "-subj /CN=c10d-other-ca",
             dir);
    /* Quiet unless it fails; then once more, to show why. */
    char *quiet = malloc(2 * sizeof cmd + 64);
    if (!quiet)
        return -1;
    sprintf(quiet, "(%s) >/dev/null 2>&1 || (%s)", cmd, cmd);
    int rc = system(quiet);
    free(quiet);
    return rc == 0 ? 0 : -1;
}
