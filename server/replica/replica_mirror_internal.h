/* What the mirror's two files share; others see replica_mirror.h:
 *
 *   replica_mirror.c       the mirror, and each batch's changes sent to
 *                          dqlite as one transaction (the session, the
 *                          changeset written as SQL)
 *   replica_mirror_copy.c  the whole database at once: the working copy
 *                          loaded from dqlite, migrations, the seed
 *
 * Both write SQL into the mirror's script buffer (m->buf, m->len; m->oom
 * once an append failed: the script is then incomplete) and send it with
 * c10ds_mirror_exec_txn. */
#ifndef C10DS_REPLICA_MIRROR_INTERNAL_H
#define C10DS_REPLICA_MIRROR_INTERNAL_H

/* Debian's libsqlite3 has the session extension; the header wants it said */
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#include "replica/replica_mirror.h"

#include "replica/dqlite_wire.h"

#include <sqlite3.h>
#include <stddef.h>

/* A table's column names, read once: a changeset numbers columns. */
typedef struct c10ds_mirror_table {
    char *name;
    int ncol;
    char **cols;
} c10ds_mirror_table;

struct c10ds_mirror {
    c10ds_dq *dq;
    sqlite3 *h;
    sqlite3_session *session;
    c10ds_mirror_table *tables;
    size_t ntables;
    char *buf; /* the script being built */
    size_t len, cap;
    int oom;
};

/* Records "<what>: dqlite <message> (code N)" for the connection's last
 * failure (failure.h); returns -1. */
int c10ds_mirror_dq_failed(c10ds_mirror *m, const char *what);

/* Appending to the script: text as it is, an identifier quoted, a value
 * as an SQL literal that reads back as the same value and type. */
void c10ds_mirror_puts(c10ds_mirror *m, const char *s);
void c10ds_mirror_put_ident(c10ds_mirror *m, const char *s);
void c10ds_mirror_put_value(c10ds_mirror *m, sqlite3_value *v);

/* Runs the script (statements) as one transaction on dqlite. */
int c10ds_mirror_exec_txn(c10ds_mirror *m, const char *what);

#endif
