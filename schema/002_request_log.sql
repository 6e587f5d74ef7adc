-- Schema version 2: the applied-request log.
-- A non-idempotent request (add, append, compare_set, delete) that a client
-- resends after a lost reply or a coordinator restart must be applied once.
-- Its reply is written in the same transaction as its effect, so after a
-- kill -9 either both are there or neither is. Rows older than the dedup
-- window are pruned.
CREATE TABLE applied_requests (
    client_id  INTEGER NOT NULL,
    request_id INTEGER NOT NULL,
    reply      BLOB    NOT NULL,
    at_ms      INTEGER NOT NULL,
    PRIMARY KEY (client_id, request_id)
) WITHOUT ROWID;
CREATE INDEX applied_requests_at ON applied_requests (at_ms);
