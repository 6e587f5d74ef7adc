/* Throwaway TLS material for the tests and benchmarks, made with the
 * openssl command line: a CA, a server certificate it signed (for
 * localhost and 127.0.0.1), and an unrelated second CA. */
#ifndef C10D_TEST_TLS_CERTS_H
#define C10D_TEST_TLS_CERTS_H

typedef struct tls_certs {
    char ca[512];       /* the CA that signed the server's certificate */
    char cert[512];     /* the server's certificate */
    char key[512];      /* its key */
    char other_ca[512]; /* a CA that signed nothing here */
} tls_certs;

/* Writes the files into dir (which exists). Returns 0, or -1 when openssl
 * is missing or failed (its output is on stderr). */
int tls_make_certs(const char *dir, tls_certs *out);

#endif
