/* CPU time of a process, for benchmarks that report where time goes. */
#ifndef C10D_TEST_CPU_TIME_H
#define C10D_TEST_CPU_TIME_H

#include <sys/types.h>

/* CPU seconds (user + system) used so far by process pid. */
double cpu_of(pid_t pid);
/* ... and by this process. */
double self_cpu(void);

#endif
