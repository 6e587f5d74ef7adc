#include "c10d_time.h"

#include <pthread.h>

int64_t c10d_wall_step_ms = 0;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int64_t wall0, mono0;

static void start(void)
{
    wall0 = c10d_wall_ms();
    mono0 = c10d_now_ms();
}

int64_t c10d_steady_wall_ms(void)
{
    pthread_once(&once, start);
    return wall0 + (c10d_now_ms() - mono0);
}
