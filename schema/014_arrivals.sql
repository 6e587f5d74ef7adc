-- Schema version 14: a rank's arrival in a rendezvous is called so (issue
-- 25): "join" is only the uneven-input join of schema 4 (join_regions,
-- join_members). members.joined_ms (when the rank arrived in its world's
-- rendezvous) becomes arrived_ms, groups.joined (members that arrived in
-- the group's rendezvous) becomes arrived. A rename keeps every row as it
-- is; SQLite rewrites the statements that name the columns.
--
-- members.state stays text under schema 3's CHECK ('alive', 'left',
-- 'dead'): the coordinator converts it to the wire's MemberState in one
-- place (server/groups.c), and `sqlite3` shows the words c10d-ctl prints
-- (docs/liveness.md, "Member states").
ALTER TABLE members RENAME COLUMN joined_ms TO arrived_ms;
ALTER TABLE groups RENAME COLUMN joined TO arrived;
