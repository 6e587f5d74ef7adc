/* How the data plane and a joined rank wait for a peer (internal.h). */
#include "internal.h"

#include <sched.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

int c10di_idle_wait(unsigned idle)
{
    if (idle < 256) {
        cpu_relax();
        return 0;
    }
    if (idle < 4096) {
        sched_yield();
        return idle % 64 == 0;
    }
    struct timespec ts = {0, idle < 8192 ? 20000 : 200000};
    nanosleep(&ts, NULL);
    return 1;
}
