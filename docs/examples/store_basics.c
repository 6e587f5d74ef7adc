/* The store, as the README shows it: connect, set, get with a wait, and
 * the failure paths (no coordinator, a key that never comes) handled.
 * Run through c10d-run, which starts a coordinator and sets C10D_COORD:
 *   c10d-run -n 1 -- ./build/docs/examples/store_basics
 * tests/integration/test_launcher.sh runs it (and the ASan build with it). */
#include <c10d/c10d.h>

#include <stdio.h>

int main(void)
{
    /* --- the README's snippet, from here --- */
    c10d_store *s;
    if (c10d_store_connect(&s, NULL /* C10D_COORD or MASTER_ADDR:MASTER_PORT */, NULL) !=
        C10D_OK) {
        fprintf(stderr, "%s\n", c10d_errmsg());
        return 1;
    }
    c10d_store_set(s, "addr/0", "10.0.0.1:4000", 13);
    void *v;
    size_t n;
    if (c10d_store_get(s, "addr/1", &v, &n, 300) != C10D_OK) /* waits up to 300 ms for rank 1 */
        fprintf(stderr, "%s\n", c10d_errmsg());               /* v is NULL then */
    c10d_free(v);
    c10d_store_close(s);
    /* --- to here --- */
    if (c10d_store_connect(&s, NULL, NULL) != C10D_OK)
        return 1;
    if (c10d_store_get(s, "addr/0", &v, &n, C10D_NO_WAIT) != C10D_OK || n != 13)
        return 2;
    printf("store_basics: got %.*s back\n", (int)n, (const char *)v);
    c10d_free(v);
    c10d_store_close(s);
    return 0;
}
