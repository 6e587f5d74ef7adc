/* store_demo: N processes meet through the coordinator's store, the way
 * ranks of a job do before they can talk to each other.
 *
 *   store_demo URL RANK WORLD_SIZE
 *
 * Every rank publishes an "address", counts itself in with add, waits for
 * everyone's address, and rank 0 records the job as ready. */
#include <c10d/c10d.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check(c10d_status st, const char *what)
{
    if (st != C10D_OK) {
        fprintf(stderr, "store_demo: %s: %s (%s)\n", what, c10d_errmsg(), c10d_strerror(st));
        exit(1);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: store_demo URL RANK WORLD_SIZE\n");
        return 2;
    }
    int rank = atoi(argv[2]), world = atoi(argv[3]);
    c10d_store *root, *s;
    c10d_store_opts o = C10D_STORE_OPTS_INIT;
    o.timeout_ms = 30000;
    check(c10d_store_connect(&root, argv[1], &o), "connect");
    check(c10d_store_prefix(&s, root, "demo"), "prefix");

    char key[64], addr[64];
    snprintf(key, sizeof key, "addr/%d", rank);
    snprintf(addr, sizeof addr, "pid %d", (int)getpid());
    check(c10d_store_set(s, key, addr, strlen(addr)), "set");
    int64_t arrived;
    check(c10d_store_add(s, "arrived", 1, &arrived), "add");
    printf("rank %d: published '%s', %lld of %d arrived\n", rank, addr, (long long)arrived, world);
    fflush(stdout);

    const char **keys = calloc((size_t)world, sizeof *keys);
    char (*names)[64] = calloc((size_t)world, sizeof *names);
    void **vals = calloc((size_t)world, sizeof *vals);
    size_t *lens = calloc((size_t)world, sizeof *lens);
    for (int r = 0; r < world; r++) {
        snprintf(names[r], sizeof names[r], "addr/%d", r);
        keys[r] = names[r];
    }
    /* One round trip: the coordinator holds the request until every
     * address is there. */
    check(c10d_store_multi_get(s, keys, (size_t)world, vals, lens, C10D_TIMEOUT_DEFAULT),
          "multi_get");
    if (rank == 0) {
        for (int r = 0; r < world; r++)
            printf("rank 0: rank %d is at %.*s\n", r, (int)lens[r], (char *)vals[r]);
        check(c10d_store_set(s, "ready", "yes", 3), "set ready");
    }
    for (int r = 0; r < world; r++)
        c10d_free(vals[r]);
    free(keys);
    free(names);
    free(vals);
    free(lens);
    c10d_store_close(s);
    c10d_store_close(root);
    return 0;
}
