/* The job key c10d-run hands its ranks (C10D_JOB_KEY): the credential
 * that makes them the run's ranks, so that anyone else who holds the
 * coordinator's token and knows the job's name can neither take a rank
 * slot of it unnoticed nor write its store (docs/operations.md, "Who may
 * do what"). */
#ifndef C10D_RUN_JOB_KEY_H
#define C10D_RUN_JOB_KEY_H

/* Sets C10D_JOB_KEY in this process's environment (the ranks inherit it)
 * to a fresh random key, unless it is set already (kept: every host of a
 * --nnodes job must carry the same one, which one launcher cannot make
 * for the others). With nnodes > 1 and no key set, none is made and a
 * warning says how to give one. 0, or -1 when no randomness could be had
 * (said on stderr). */
int run_job_key(int nnodes, int quiet);

#endif
