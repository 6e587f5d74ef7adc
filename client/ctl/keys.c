/* c10d-ctl's key-value commands: keys, get, set, del, add. */
#include "keys.h"
#include "json.h"
#include "output.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `--job J [PREFIX]`: the keys of J's current run (its run's store,
 * c10d_run_store), under PREFIX there; into buf, "" when J is unknown
 * (after saying so: its exit code in *rc). */
static int run_keys_prefix(c10d_store *s, const char *job, const char *prefix, char *buf,
                           size_t cap, int *rc)
{
    c10d_job_info *jobs = NULL;
    size_t n = 0;
    c10d_status st = c10d_store_jobs(s, job, &jobs, &n);
    if (st != C10D_OK)
        return *rc = ctl_fail_last(st), -1;
    uint64_t gen = n ? jobs[0].generation : 0;
    c10d_free(jobs);
    if (!n)
        return *rc = ctl_fail_no_job(job), -1;
    if ((st = c10d_run_prefix(buf, cap, job, gen)) != C10D_OK)
        return *rc = ctl_fail_last(st), -1;
    size_t used = strlen(buf);
    if (prefix && snprintf(buf + used, cap - used, "%s", prefix) >= (int)(cap - used))
        return *rc = ctl_fail(C10D_ETOOBIG, "the prefix is too long"), -1;
    return 0;
}

int cmd_keys(c10d_store *s, const ctl_args *a, long long limit)
{
    const char *prefix = a->npos ? a->pos[0] : NULL, *job = a->job;
    char scoped[8192];
    int rc;
    if (job && run_keys_prefix(s, job, prefix, scoped, sizeof scoped, &rc) != 0)
        return rc;
    if (job)
        prefix = scoped;
    c10d_key_info *keys = NULL;
    size_t n = 0;
    int truncated = 0;
    c10d_status st = c10d_store_list(s, prefix, (size_t)limit, &keys, &n, &truncated);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    if (ctl_json) {
        printf("{\"ok\":true,\"truncated\":%s,\"keys\":[", truncated ? "true" : "false");
        for (size_t i = 0; i < n; i++) {
            printf("%s{\"key\":", i ? "," : "");
            json_string(stdout, keys[i].key, strlen(keys[i].key));
            if (!json_is_text(keys[i].key, strlen(keys[i].key))) { /* its bytes, exactly */
                printf(",\"key_base64\":");
                json_base64(stdout, keys[i].key, strlen(keys[i].key));
            }
            printf(",\"size\":%" PRIu64 ",\"updated_ms\":%" PRId64 "}", keys[i].size,
                   keys[i].updated_ms);
        }
        printf("]}\n");
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%-40s %10" PRIu64 " bytes\n", keys[i].key, keys[i].size);
        if (truncated)
            fprintf(stderr, "c10d-ctl: more keys match; showing the first %zu (use --limit)\n",
                    n);
    }
    c10d_free(keys);
    return EXIT_OK;
}

int cmd_get(c10d_store *s, const char *key, int wait)
{
    void *v = NULL;
    size_t n = 0;
    c10d_status st = c10d_store_get(s, key, &v, &n, wait);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    if (ctl_json) {
        printf("{\"ok\":true,\"key\":");
        json_string(stdout, key, strlen(key));
        printf(",\"size\":%zu,", n);
        json_value_field(stdout, "value", v, n);
        printf("}\n");
    } else {
        fwrite(v, 1, n, stdout);
        /* A newline for people at a terminal, never inside piped bytes. */
        if (n && ((char *)v)[n - 1] != '\n' && isatty(1))
            putchar('\n');
    }
    c10d_free(v);
    return EXIT_OK;
}

static char *read_stdin(size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                return NULL;
            }
            buf = b;
        }
    }
    *len = n;
    return buf;
}

int cmd_set(c10d_store *s, const char *key, const char *value)
{
    size_t len = strlen(value);
    char *owned = NULL;
    if (strcmp(value, "-") == 0 && !(value = owned = read_stdin(&len)))
        return ctl_fail(C10D_ENOMEM, "out of memory reading the value from stdin");
    c10d_status st = c10d_store_set(s, key, value, len);
    free(owned);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    if (ctl_json) {
        printf("{\"ok\":true,\"key\":");
        json_string(stdout, key, strlen(key));
        printf(",\"size\":%zu}\n", len);
    }
    return EXIT_OK;
}

int cmd_del(c10d_store *s, const char *key)
{
    int deleted = 0;
    c10d_status st = c10d_store_delete_key(s, key, &deleted);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    if (!deleted) {
        char msg[512];
        snprintf(msg, sizeof msg, "no such key: %s", key);
        return ctl_fail(C10D_ENOTFOUND, msg);
    }
    if (ctl_json) {
        printf("{\"ok\":true,\"deleted\":");
        json_string(stdout, key, strlen(key));
        printf("}\n");
    }
    return EXIT_OK;
}

int cmd_add(c10d_store *s, const char *key, long long delta)
{
    int64_t result = 0;
    c10d_status st = c10d_store_add(s, key, delta, &result);
    if (st != C10D_OK)
        return ctl_fail_last(st);
    if (ctl_json) {
        printf("{\"ok\":true,\"key\":");
        json_string(stdout, key, strlen(key));
        printf(",\"value\":%" PRId64 "}\n", result);
    } else {
        printf("%" PRId64 "\n", result);
    }
    return EXIT_OK;
}
