-- Schema version 8: a subgroup's member list as rows (group_ranks), no
-- longer a comma-separated text in groups.ranks (issue 14: protobuf on the
-- wire, rows in the database). The rows are written once, when the group
-- is created. A group made without a list (the world, in order) has none:
-- its ranks are 0..size-1, so the world's rendezvous writes no per-rank
-- list. groups.ranks_hash is FNV-1a over the list (server/groups.c,
-- c10ds_ranks_hash): every later arrival compares its list's hash to it,
-- and the rows are read only to word a refusal. The groups migrated here
-- get theirs (NULL until then) from their rows at first read.
CREATE TABLE group_ranks (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    idx        INTEGER NOT NULL,     -- rank within the group
    rank       INTEGER NOT NULL,     -- global rank
    PRIMARY KEY (job, generation, name, idx)
) WITHOUT ROWID;

ALTER TABLE groups ADD COLUMN ranks_hash INTEGER;

-- "0,1,5" read as the JSON array [0,1,5]: key is the index, value the rank.
INSERT INTO group_ranks(job, generation, name, idx, rank)
    SELECT g.job, g.generation, g.name, r.key, r.value
    FROM groups g, json_each('[' || g.ranks || ']') r
    WHERE g.ranks != '';

ALTER TABLE groups DROP COLUMN ranks;
