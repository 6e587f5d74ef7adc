-- Schema version 9: where a rank that left stopped in each of its groups,
-- as rows (member_finals), no longer a ",world=349,world.1=20," text in
-- members.final_seqs (issue 14: protobuf on the wire, GroupSeq messages
-- in GroupLeave and MemberInfo; rows in the database). Written when the
-- rank leaves, read with the lost members (server/groups.c).
CREATE TABLE member_finals (
    job        TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    rank       INTEGER NOT NULL,
    grp        TEXT    NOT NULL,     -- the group's name
    seq        INTEGER NOT NULL,     -- the last collective the rank issued in it
    PRIMARY KEY (job, generation, rank, grp)
) WITHOUT ROWID;

-- ",a=1,b=2," cut at its commas (with or without the commas at its ends):
-- each "name=seq" item becomes a row, split at its last '=' (the number
-- is digits; a name may hold '=').
WITH RECURSIVE items(job, generation, rank, rest, item) AS (
    SELECT job, generation, rank, ltrim(rtrim(final_seqs, ','), ',') || ',', NULL
    FROM members WHERE final_seqs IS NOT NULL AND final_seqs != ''
    UNION ALL
    SELECT job, generation, rank, substr(rest, instr(rest, ',') + 1),
           substr(rest, 1, instr(rest, ',') - 1)
    FROM items WHERE instr(rest, ',') > 0
), parts(job, generation, rank, item, head) AS (
    SELECT job, generation, rank, item, rtrim(item, '0123456789')
    FROM items WHERE item IS NOT NULL
)
INSERT OR REPLACE INTO member_finals(job, generation, rank, grp, seq)
    SELECT job, generation, rank, substr(head, 1, length(head) - 1),
           CAST(substr(item, length(head) + 1) AS INTEGER)
    FROM parts
    WHERE length(head) > 1 AND substr(head, -1) = '=' AND length(head) < length(item);

ALTER TABLE members DROP COLUMN final_seqs;
