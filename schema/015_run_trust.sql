-- Schema version 15: a run's credentials. runs.job_key is the job key
-- (C10D_JOB_KEY) of the arrival that started the generation, runs.key_by
-- who that was ("host H pid P"): a later arrival with another key is
-- refused, naming both (docs/operations.md, "Who may do what"). NULL: the
-- run started without a key, and only arrivals without one are admitted.
--
-- members_client answers, for every store write under a run's prefix
-- (jobs/<job>/<generation>/), whether the writing client joined a rank of
-- that run: one probe, not a scan of the run's members.
ALTER TABLE runs ADD COLUMN job_key TEXT;
ALTER TABLE runs ADD COLUMN key_by TEXT;
CREATE INDEX members_client ON members (job, generation, client_id);
