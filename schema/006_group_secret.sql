-- Schema version 6: a random secret per group, made when the group is
-- created and handed to its members in the rendezvous reply. The host
-- data plane's TCP hello carries it, so only the group's members (who got
-- it from an authenticated rendezvous) are admitted to its links; before,
-- admission was a hash of job, generation and group name, which anyone
-- could compute. Groups created before this version have 0: their
-- members fall back to the old hash.
ALTER TABLE groups ADD COLUMN secret INTEGER NOT NULL DEFAULT 0;
