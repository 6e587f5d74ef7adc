-- Schema version 5: the applied-request log without its at_ms index.
-- The index was a third B-tree page written at every add's commit (after
-- the key's and the record's): ~18 us of a ~60 us add in the engine
-- (tests/bench/bench_engine). Records are now pruned per client by their
-- primary key (client_id, request_id): a client's records more than 65,536
-- requests behind its newest, and all of a client's once it has been quiet
-- for the dedup window (server/reqlog.c keeps when each was last seen).
DROP INDEX applied_requests_at;
