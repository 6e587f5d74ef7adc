/* A user's program, built against the installed library. */
#include <c10d/c10d.h>
#include <stdio.h>

int main(void)
{
    printf("c10d %s: %s\n", c10d_version(), c10d_strerror(C10D_ETIMEDOUT));
    return 0;
}
