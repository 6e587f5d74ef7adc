-- Schema version 4: join regions (uneven inputs, docs/join.md).
-- The coordinator, not extra collectives, knows who ran out of inputs: a
-- rank that joined after collective N shadows the group's later
-- collectives until every member has joined. What `c10d-ctl status` shows,
-- and what a restarted coordinator reloads.
CREATE TABLE join_regions (
    job         TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    name        TEXT    NOT NULL,    -- the group
    region      INTEGER NOT NULL,    -- 1, 2, ... per group
    throw_early INTEGER NOT NULL,    -- throw_on_early_termination
    divide_initial INTEGER NOT NULL, -- divide_by_initial_world_size
    begun_ms    INTEGER NOT NULL,
    done_ms     INTEGER,             -- every member joined
    last_joiner INTEGER,             -- group rank, once done
    final_seq   INTEGER,             -- the group's last collective of the region
    PRIMARY KEY (job, generation, name, region)
) WITHOUT ROWID;

CREATE TABLE join_members (
    job         TEXT    NOT NULL,
    generation  INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    region      INTEGER NOT NULL,
    rank        INTEGER NOT NULL,    -- group rank
    global_rank INTEGER NOT NULL,
    join_order  INTEGER NOT NULL,    -- 1 for the first to join
    after_seq   INTEGER NOT NULL,    -- out of inputs after this collective
    joined_ms   INTEGER NOT NULL,
    PRIMARY KEY (job, generation, name, region, rank)
) WITHOUT ROWID;
