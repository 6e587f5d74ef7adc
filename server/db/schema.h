/* The schema migrations embedded from schema/NNN_*.sql at build time. */
#ifndef C10DS_SCHEMA_H
#define C10DS_SCHEMA_H

typedef struct c10ds_migration {
    int version;      /* user_version after applying it */
    const char *name; /* file name, for messages */
    const char *sql;
} c10ds_migration;

extern const c10ds_migration c10ds_migrations[];
extern const int c10ds_migration_count; /* == the newest schema version */

#endif
