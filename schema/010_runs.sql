-- Schema version 10: runs, so that a long-lived coordinator reclaims what
-- finished jobs left (issue 23). A run is one generation of a job: it
-- starts when its first rank arrives and is over once none of its members
-- is alive (each left or was declared dead, or, never formed, each gave up
-- or died). Then its store keys (jobs/<job>/<generation>/, common/run_scope.h)
-- are deleted in the same transaction, and its records (members, groups,
-- findings, traces, join regions, this row) after --retention
-- (server/runs.c).
--
-- A table, not columns on jobs: jobs has one row per job, its current
-- generation, but an older generation can outlive the start of the next
-- (a survivor of a restart, still alive) and ends on its own; and a run's
-- row must stay while its records wait for the retention to pass, after
-- the job has moved on. Keyed like every other per-run table.
CREATE TABLE runs (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    started_ms INTEGER NOT NULL,
    ended_ms   INTEGER,              -- NULL while a member is alive
    PRIMARY KEY (job, generation)
) WITHOUT ROWID;

-- The sweep's question: which runs ended longest ago.
CREATE INDEX runs_ended ON runs (ended_ms) WHERE ended_ms IS NOT NULL;

-- Every leave and death asks whether a member of its run is still alive:
-- one probe here (the primary key would read the generation's members,
-- N² rows when N ranks die at once).
CREATE INDEX members_alive ON members (job, generation, rank) WHERE state = 'alive';

-- The generations an older coordinator left get their rows: running while
-- a member is alive, else over since the last member went.
INSERT INTO runs(job, generation, started_ms, ended_ms)
    SELECT job, generation, min(joined_ms),
           CASE WHEN max(state = 'alive') THEN NULL ELSE max(changed_ms) END
    FROM members GROUP BY job, generation;
-- (A job row whose generation has no member: nothing of it runs.)
INSERT OR IGNORE INTO runs(job, generation, started_ms, ended_ms)
    SELECT job, generation, created_ms, created_ms FROM jobs;

-- The store keys of the runs already over, as if they had ended here: the
-- prefix is c10d_run_scope's ('%' and '/' of the name escaped), and the
-- keys under ".../<gen>/" are those from it up to ".../<gen>0" ('0' follows '/').
DELETE FROM kv WHERE key IN (
    SELECT kv.key
    FROM (SELECT 'jobs/' || replace(replace(job, '%', '%25'), '/', '%2F') || '/' || generation
              AS base
          FROM runs WHERE ended_ms IS NOT NULL) r
    JOIN kv ON kv.key >= r.base || '/' AND kv.key < r.base || '0');
