/* CPU time of a process, for benchmarks that report where time goes, and
 * how often its threads slept. */
#ifndef C10D_TEST_CPU_TIME_H
#define C10D_TEST_CPU_TIME_H

#include <sys/types.h>

/* CPU seconds (user + system) used so far by process pid. */
double cpu_of(pid_t pid);
/* ... and by this process. */
double self_cpu(void);
/* Peak resident memory of process pid in KiB (VmHWM), 0 if unknown. */
long peak_rss_kib(pid_t pid);
/* Resident memory now (VmRSS), KiB. */
long rss_kib(pid_t pid);
/* Address space reserved now (VmSize), KiB: memory reserved and not yet
 * touched is not resident, but is still the process's to touch. */
long vm_size_kib(pid_t pid);
/* Context switches so far (each a thread put to sleep and woken, or
 * preempted) of process pid's threads named by NNG ("nng:poll:epoll",
 * "nng:task", ...): how often a message went through NNG's own threads. */
long long nng_thread_switches(pid_t pid);

#endif
