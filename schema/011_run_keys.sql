-- Schema version 11: a run's store keys go in bounded batches after it is
-- over, not all in the transaction that ends it (issue 23's review: a run
-- that left 100,000 keys held the engine for 0.12 s in that transaction).
-- The end deletes up to a thousand of them at once; the sweep deletes the
-- rest, a bounded number a sweep, and records here when the last went
-- (server/runs.c). NULL while some may be left (the run is running, or
-- over with keys still to delete: a coordinator restarted meanwhile goes
-- on with them).
ALTER TABLE runs ADD COLUMN keys_ms INTEGER;

-- A coordinator of schema 10 deleted the keys of a run in the transaction
-- that ended it (and migration 10 those of the runs already over then).
UPDATE runs SET keys_ms = ended_ms WHERE ended_ms IS NOT NULL;

-- The sweep's question: which runs are over with keys still to delete.
CREATE INDEX runs_keys_left ON runs (ended_ms) WHERE ended_ms IS NOT NULL AND keys_ms IS NULL;

-- The library before schema 10 kept its own per-run keys outside the
-- run's store, with the job's name as given (not escaped):
--     c10d/nccl/<job>/<gen>/<group>/...                 NCCL communicator ids
--     c10d/monitored_barrier/<job>/<gen>/<group>/<n>/... monitored barriers
-- (the host backend wrote none). Migration 10 deleted only jobs/... keys,
-- which such clients never wrote; these of the runs already over go now.
-- A name with '/' makes the layout ambiguous (job "a" generation 1 and
-- job "a/1" share "c10d/nccl/a/1/"), so a key that is also under the
-- prefix of a run still running stays. Keys of the runs still running,
-- and those written by old clients later, are not deleted by the
-- coordinator (docs/operations.md, "Growth and retention").
WITH layouts(root) AS (VALUES ('c10d/nccl/'), ('c10d/monitored_barrier/')),
     over(pre) AS (SELECT root || job || '/' || generation || '/'
                   FROM runs, layouts WHERE ended_ms IS NOT NULL),
     running(pre) AS (SELECT root || job || '/' || generation || '/'
                      FROM runs, layouts WHERE ended_ms IS NULL)
DELETE FROM kv WHERE key IN (
    SELECT kv.key FROM over JOIN kv
        ON kv.key >= over.pre AND kv.key < substr(over.pre, 1, length(over.pre) - 1) || '0'
    WHERE NOT EXISTS (SELECT 1 FROM running
                      WHERE kv.key >= running.pre
                        AND kv.key < substr(running.pre, 1, length(running.pre) - 1) || '0'));
