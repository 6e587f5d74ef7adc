/* c10d-ctl's failures and exit codes, in text or --json (output.h). */
#include "output.h"
#include "json.h"

#include <stdio.h>
#include <string.h>

int ctl_json;

static int exit_code(c10d_status st)
{
    switch (st) {
    case C10D_OK:
        return EXIT_OK;
    case C10D_ENOTFOUND:
        return EXIT_NOTFOUND;
    case C10D_EUNAVAIL:
        return EXIT_UNAVAIL;
    case C10D_ETIMEDOUT:
        return EXIT_TIMEOUT;
    case C10D_EAUTH:
        return EXIT_AUTH;
    default: /* C10D_EINVAL from the coordinator too: bad usage is found here */
        return EXIT_ERROR;
    }
}

int ctl_fail(c10d_status st, const char *msg)
{
    if (ctl_json) {
        printf("{\"ok\":false,\"status\":\"%s\",\"error\":", c10d_status_name(st));
        json_string(stdout, msg, strlen(msg));
        printf("}\n");
    } else {
        fprintf(stderr, "c10d-ctl: %s\n", msg);
    }
    return exit_code(st);
}

int ctl_fail_last(c10d_status st)
{
    const char *m = c10d_errmsg();
    return ctl_fail(st, *m ? m : c10d_strerror(st));
}

int ctl_fail_no_job(const char *job)
{
    char msg[512];
    snprintf(msg, sizeof msg, "no job %s on this coordinator (c10d-ctl status lists them)", job);
    return ctl_fail(C10D_ENOTFOUND, msg);
}

int ctl_usage_error(const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    if (ctl_json) {
        printf("{\"ok\":false,\"status\":\"usage\",\"error\":");
        json_string(stdout, msg, strlen(msg));
        printf("}\n");
    } else {
        fprintf(stderr, "c10d-ctl: %s\nTry 'c10d-ctl --help'.\n", msg);
    }
    return EXIT_USAGE;
}
