-- Schema version 12: where each member of a verified group stood when its
-- run ended: what c10d-ctl desync shows of a finished run, from here, for
-- --retention (issue 23's review). The coordinator no longer keeps a
-- finished run's verification state in memory until its records are
-- reclaimed (a day of jobs, each up to 2,000 collectives of trace per
-- rank and group): it writes this, flushes the traces (coll_trace) and
-- lets go when the run ends (server/verify_history.c). One row per group
-- member, keyed like every table of per-run records (server/runs.h).
CREATE TABLE group_progress (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    name       TEXT    NOT NULL,     -- the group
    idx        INTEGER NOT NULL,     -- group rank
    rank       INTEGER NOT NULL,     -- global rank
    entered    INTEGER NOT NULL,     -- the last collective it entered (0: none)
    completed  INTEGER NOT NULL,     -- the last it completed
    entered_ms INTEGER NOT NULL,     -- wall clock, when it entered that one
    last       TEXT,                 -- that one, described ("ALL_REDUCE float32[2] SUM")
    PRIMARY KEY (job, generation, name, idx)
) WITHOUT ROWID;
