/* Stalls (stalls.h): a short list of intervals, appended in time order. */
#include "engine/stalls.h"

#include <stdlib.h>
#include <string.h>

static void forget(c10ds_stalls *s, int64_t before)
{
    size_t k = 0;
    while (k < s->n && s->v[k].to < before)
        k++;
    if (k) {
        memmove(s->v, s->v + k, (s->n - k) * sizeof *s->v);
        s->n -= k;
    }
}

int64_t c10ds_stalls_note(c10ds_stalls *s, int64_t from, int64_t to, int64_t forget_before)
{
    forget(s, forget_before);
    if (to <= from)
        return 0;
    c10ds_stall *last = s->n ? &s->v[s->n - 1] : NULL;
    if (last && from <= last->to) { /* overlaps or touches the last one */
        int64_t added = to > last->to ? to - last->to : 0;
        last->to += added;
        s->total_ms += added;
        return added;
    }
    s->total_ms += to - from;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        c10ds_stall *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return to - from;
        s->v = v, s->cap = cap;
    }
    s->v[s->n].from = from;
    s->v[s->n].to = to;
    s->n++;
    return to - from;
}

int64_t c10ds_stalls_within(const c10ds_stalls *s, int64_t from, int64_t to)
{
    int64_t total = 0;
    for (size_t i = 0; i < s->n; i++) {
        int64_t a = s->v[i].from > from ? s->v[i].from : from;
        int64_t b = s->v[i].to < to ? s->v[i].to : to;
        if (b > a)
            total += b - a;
    }
    return total;
}

void c10ds_stalls_fini(c10ds_stalls *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}
