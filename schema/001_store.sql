-- Schema version 1: the key-value store.
-- Keys are TEXT compared bytewise (BINARY collation), so a prefix is a
-- primary-key range scan. updated_ms is wall-clock milliseconds, for operators.
CREATE TABLE kv (
    key        TEXT    PRIMARY KEY NOT NULL,
    value      BLOB    NOT NULL,
    updated_ms INTEGER NOT NULL
) WITHOUT ROWID;

-- Facts about this database for operators and a restarted coordinator.
CREATE TABLE meta (
    name  TEXT PRIMARY KEY NOT NULL,
    value TEXT
) WITHOUT ROWID;
