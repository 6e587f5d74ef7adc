#include "job_key.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

int run_job_key(int nnodes, int quiet)
{
    const char *have = getenv("C10D_JOB_KEY");
    if (have && *have)
        return 0;
    if (nnodes > 1) {
        if (!quiet)
            fprintf(stderr, "c10d-run: no C10D_JOB_KEY: with --nnodes %d, set the same secret "
                    "(e.g. `openssl rand -hex 16`) in every host's environment, or anyone "
                    "with the coordinator's token can take a rank of this job\n", nnodes);
        return 0;
    }
    /* 128 bits: guessing it is out of reach, and it travels as 32 hex
     * characters in the environment and the rendezvous request. */
    uint8_t raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        perror("c10d-run: cannot make a job key (getrandom)");
        return -1;
    }
    char hex[2 * sizeof raw + 1];
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return setenv("C10D_JOB_KEY", hex, 1) == 0 ? 0 : -1;
}
