/* Throwaway TLS material for the tests and benchmarks, made with the
 * openssl command line: a CA, a server certificate it signed (for
 * localhost and 127.0.0.1), the same server's certificate already expired,
 * a client certificate it signed (mutual TLS), and an unrelated second CA
 * with its key. docs/operations.md, "TLS", gives the same recipe. */
#ifndef C10D_TEST_TLS_CERTS_H
#define C10D_TEST_TLS_CERTS_H

typedef struct tls_certs {
    char ca[512];       /* the CA that signed the server's certificate */
    char cert[512];     /* the server's certificate */
    char key[512];      /* its key */
    char other_ca[512]; /* a CA that signed nothing here */
    char other_key[512]; /* its key: a valid key that is not the server's */
    char expired[512];  /* the server's certificate (same key), valid for 0 days */
    char client_cert[512], client_key[512]; /* a client's, signed by ca */
} tls_certs;

/* Writes the files into dir (which exists). Returns 0, or -1 when openssl
 * is missing or failed (its output is on stderr). */
int tls_make_certs(const char *dir, tls_certs *out);

#endif
