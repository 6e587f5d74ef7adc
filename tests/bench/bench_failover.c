/* bench_failover: a store writer's view of a replicated coordinator's
 * failover (docs/replication.md).
 *
 *   bench_failover URLS SECONDS [MARK_FILE]
 *
 * Adds 1 to a counter back to back for SECONDS through URLS (the
 * replicas' client URLs, comma-separated), and prints the longest gap
 * between two acknowledged adds (the failover, when a leader is killed
 * meanwhile: the last acknowledged add before the kill to the first
 * after), the adds per second outside it, and whether the counter equals
 * the adds acknowledged (exactly once, through the failover). MARK_FILE,
 * when given, is created after the first second of adds, so that a
 * script kills the leader while adds run. */
#include <c10d/c10d.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_failover URLS SECONDS [MARK_FILE]\n");
        return 2;
    }
    const char *urls = argv[1], *mark = argc > 3 ? argv[3] : NULL;
    double seconds = atof(argv[2]);
    c10d_store *s;
    if (c10d_store_connect(&s, urls, NULL) != C10D_OK) {
        fprintf(stderr, "bench_failover: connect: %s\n", c10d_errmsg());
        return 1;
    }
    char key[64];
    snprintf(key, sizeof key, "failover/%d", (int)getpid());
    double t0 = now_ms(), last = t0, gap = 0, gap_at = 0;
    long long acked = 0;
    int64_t value = 0;
    int marked = 0;
    while (now_ms() - t0 < seconds * 1e3) {
        if (c10d_store_add(s, key, 1, &value) != C10D_OK) {
            fprintf(stderr, "bench_failover: add %lld: %s\n", acked + 1, c10d_errmsg());
            return 1;
        }
        double t = now_ms();
        acked++;
        if (t - last > gap) {
            gap = t - last;
            gap_at = last - t0;
        }
        last = t;
        if (mark && !marked && t - t0 > 1000) {
            close(open(mark, O_CREAT | O_WRONLY, 0644));
            marked = 1;
        }
    }
    double elapsed = now_ms() - t0;
    printf("adds acknowledged %lld in %.1f s (%.0f/s outside the longest gap)\n", acked,
           elapsed / 1e3, (double)acked / ((elapsed - gap) / 1e3));
    printf("longest gap between two acknowledged adds %.0f ms, from %.2f s\n", gap,
           gap_at / 1e3);
    printf("counter %lld, adds acknowledged %lld: %s\n", (long long)value, acked,
           value == acked ? "exactly once" : "MISMATCH");
    c10d_store_close(s);
    return value == acked ? 0 : 3;
}
