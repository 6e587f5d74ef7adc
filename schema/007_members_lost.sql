-- Schema version 7: an index of the members that are not alive. Every
-- rank's arrival in a rendezvous asks whether a member of its group was
-- lost; without the index that read every member of the generation, so a
-- rendezvous of N ranks read N² rows (16,384 ranks: 268M).
CREATE INDEX members_lost ON members (job, generation, rank) WHERE state != 'alive';
