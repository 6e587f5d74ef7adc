-- Schema version 3: jobs, their members and process groups.
-- A job's ranks rendezvous in a generation; a rank number whose holder is
-- dead or left, arriving after the generation formed, starts the next
-- generation (a restarted job), so old and new ranks never mix. Membership
-- state is what `c10d-ctl status` shows and what liveness reports name.
CREATE TABLE jobs (
    job         TEXT    PRIMARY KEY,
    generation  INTEGER NOT NULL,
    world_size  INTEGER NOT NULL,
    formed      INTEGER NOT NULL DEFAULT 0,
    version     INTEGER NOT NULL DEFAULT 0, -- bumped on every member state change
    created_ms  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE members (
    job          TEXT    NOT NULL,
    generation   INTEGER NOT NULL,
    rank         INTEGER NOT NULL,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    client_id    INTEGER NOT NULL,
    pipe         INTEGER NOT NULL,   -- the NNG connection; its loss is a death
    state        TEXT    NOT NULL CHECK (state IN ('alive', 'left', 'dead')),
    reason       TEXT,
    activity     TEXT,               -- last reported: "in #57 ALL_REDUCE ..."
    final_seqs   TEXT,               -- on leaving: ",world=349,world.1=20,"
    joined_ms    INTEGER NOT NULL,
    changed_ms   INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL,
    PRIMARY KEY (job, generation, rank)
) WITHOUT ROWID;
CREATE INDEX members_alive_pipe ON members (pipe) WHERE state = 'alive';

CREATE TABLE groups (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    ranks      TEXT    NOT NULL,     -- global ranks, comma-separated, group order
    size       INTEGER NOT NULL,
    joined     INTEGER NOT NULL DEFAULT 0,
    formed     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job, generation, name)
) WITHOUT ROWID;

-- Collective-sequence verification: what was found wrong, per group. The
-- coordinator verifies in memory; a finding is written once, when made.
CREATE TABLE findings (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    status     INTEGER NOT NULL,     -- C10D_EDESYNC, C10D_ETIMEDOUT, C10D_EPEERLOST
    report     TEXT    NOT NULL,
    at_ms      INTEGER NOT NULL,
    PRIMARY KEY (job, generation, name)
) WITHOUT ROWID;

-- Each rank's recent collectives per group (its last 2,000, as runs of the
-- same call), written in batches by the coordinator's sweep: what
-- `c10d-ctl trace` shows, kept for a post-mortem after the job is gone.
CREATE TABLE coll_trace (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    rank       INTEGER NOT NULL,     -- global rank
    first_seq  INTEGER NOT NULL,
    last_seq   INTEGER NOT NULL,
    what       TEXT    NOT NULL,     -- "ALL_REDUCE float32[2] SUM"
    state      TEXT    NOT NULL,     -- entered, verified, completed, failed (when written)
    entered_ms INTEGER NOT NULL,
    PRIMARY KEY (job, generation, name, rank, first_seq)
) WITHOUT ROWID;

CREATE TABLE group_members (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    idx        INTEGER NOT NULL,     -- rank within the group
    rank       INTEGER NOT NULL,     -- global rank
    endpoint   BLOB    NOT NULL,
    PRIMARY KEY (job, generation, name, idx)
) WITHOUT ROWID;
