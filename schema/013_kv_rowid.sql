-- Schema version 13: the store's values leave its key index (issue 24).
-- kv was WITHOUT ROWID, so each row, value and all, sat in the b-tree of
-- its key. A value larger than a page spills onto overflow pages, and
-- SQLite, to compare a key it is searching for with such a row, reads the
-- whole row (btree.c, sqlite3BtreeIndexMoveto): one stored 16 MiB value
-- made every lookup that passed it read 16 MiB, the keys beside it and
-- an existence check of the key itself included (20-30 ms instead of
-- microseconds). Now kv is a rowid table: the key's index holds only the
-- key and the rowid, so an existence check is answered from the index
-- alone and no search reads a value. updated_ms comes before value: a
-- column after a large value is found by walking the value's overflow
-- pages, and listing keys reads updated_ms and the value's length only.
CREATE TABLE kv_13 (
    key        TEXT    PRIMARY KEY NOT NULL,  -- BINARY collation: a prefix is a key range
    updated_ms INTEGER NOT NULL,
    value      BLOB    NOT NULL
);
-- Every key and value, byte for byte, in key order.
INSERT INTO kv_13(key, updated_ms, value) SELECT key, updated_ms, value FROM kv ORDER BY key;
DROP TABLE kv;
ALTER TABLE kv_13 RENAME TO kv;
