/* Starts and stops a real c10d-coord process for the integration tests:
 * on 127.0.0.1 with a port the coordinator picks (or a given one), with a
 * real database file in a fresh temporary directory. */
#ifndef C10D_TEST_COORD_PROC_H
#define C10D_TEST_COORD_PROC_H

#include <sys/types.h>

typedef struct coord_proc {
    pid_t pid;
    char dir[256];  /* temporary directory, removed by coord_cleanup */
    char db[512];   /* database path inside dir */
    char log[512];  /* the coordinator's stderr */
    char url[256];  /* the bound URL once started */
    long nofile;    /* set before coord_start: its file descriptor limit (0: inherited) */
} coord_proc;

/* Makes the temporary directory and database path; no process yet. */
void coord_init(coord_proc *c);
/* Starts c10d-coord on listen (NULL: tcp://127.0.0.1:0) with extra
 * arguments (NULL-terminated list, may be NULL); waits until it serves.
 * Returns 0, or -1 if it exited (its exit status in *exit_status). */
int coord_start(coord_proc *c, const char *listen, const char *const *extra, int *exit_status);
/* Sends sig and reaps the process; returns its wait status. */
int coord_stop(coord_proc *c, int sig);
/* Stops it if running and removes the directory. */
void coord_cleanup(coord_proc *c);
/* Stops the coordinator (SIGSTOP: as a paused VM, a swapping host or a
 * debugger stops it) for ms, then lets it go on (SIGCONT). For tests of
 * the coordinator's own stalls, where the stall's length is the point:
 * not a wait for state. */
void coord_pause(const coord_proc *c, int ms);
/* 1 if the coordinator's log contains s. */
int coord_log_contains(const coord_proc *c, const char *s);
/* The number of lines of the coordinator's log that contain s. */
int coord_log_count(const coord_proc *c, const char *s);
/* Milliseconds, monotonic. */
long long test_now_ms(void);

#endif
