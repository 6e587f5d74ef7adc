#include "engine/waiters.h"

#include "engine/request.h"

#include <stdlib.h>
#include <string.h>

typedef struct bucket {
    struct bucket *next; /* hash chain */
    char *key;
    c10ds_request *head; /* requests waiting on key */
} bucket;

struct c10ds_waiters {
    bucket **table;
    size_t nbuckets, nkeys;
    c10ds_request **heap; /* min-heap on deadline_ms */
    size_t heap_len, heap_cap;
    c10ds_request *ready, *ready_tail; /* FIFO, in park order */
};

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

c10ds_waiters *c10ds_waiters_new(void)
{
    c10ds_waiters *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->nbuckets = 256;
    if (!(w->table = calloc(w->nbuckets, sizeof *w->table))) {
        free(w);
        return NULL;
    }
    return w;
}

/* --- deadline heap --- */
static void heap_swap(c10ds_waiters *w, size_t a, size_t b)
{
    c10ds_request *t = w->heap[a];
    w->heap[a] = w->heap[b];
    w->heap[b] = t;
    w->heap[a]->heap_idx = a;
    w->heap[b]->heap_idx = b;
}

static void heap_up(c10ds_waiters *w, size_t i)
{
    while (i > 0 && w->heap[(i - 1) / 2]->deadline_ms > w->heap[i]->deadline_ms) {
        heap_swap(w, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(c10ds_waiters *w, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->heap_len && w->heap[l]->deadline_ms < w->heap[m]->deadline_ms)
            m = l;
        if (r < w->heap_len && w->heap[r]->deadline_ms < w->heap[m]->deadline_ms)
            m = r;
        if (m == i)
            return;
        heap_swap(w, i, m);
        i = m;
    }
}

static void heap_remove(c10ds_waiters *w, c10ds_request *r)
{
    size_t i = r->heap_idx, last = --w->heap_len;
    if (i != last) {
        heap_swap(w, i, last);
        heap_down(w, i);
        heap_up(w, i);
    }
}

/* --- key index --- */
static bucket **find_slot(c10ds_waiters *w, const char *key)
{
    bucket **p = &w->table[hash(key) & (w->nbuckets - 1)];
    while (*p && strcmp((*p)->key, key) != 0)
        p = &(*p)->next;
    return p;
}

static void grow(c10ds_waiters *w)
{
    size_t n = w->nbuckets * 2;
    bucket **t = calloc(n, sizeof *t);
    if (!t)
        return; /* keep the old table: slower chains, still correct */
    for (size_t i = 0; i < w->nbuckets; i++) {
        for (bucket *b = w->table[i], *next; b; b = next) {
            next = b->next;
            size_t j = hash(b->key) & (n - 1);
            b->next = t[j];
            t[j] = b;
        }
    }
    free(w->table);
    w->table = t;
    w->nbuckets = n;
}

int c10ds_waiters_park(c10ds_waiters *w, c10ds_request *r, const char *key)
{
    if (w->heap_len == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
        c10ds_request **h = realloc(w->heap, cap * sizeof *h);
        if (!h)
            return -1;
        w->heap = h;
        w->heap_cap = cap;
    }
    bucket **slot = find_slot(w, key);
    if (!*slot) {
        bucket *b = calloc(1, sizeof *b);
        if (!b || !(b->key = strdup(key))) {
            free(b);
            return -1;
        }
        *slot = b;
        if (++w->nkeys > w->nbuckets)
            grow(w);
        slot = find_slot(w, key);
    }
    bucket *b = *slot;
    r->wait_key = b->key;
    r->wprev = NULL;
    r->wnext = b->head;
    if (b->head)
        b->head->wprev = r;
    b->head = r;
    r->heap_idx = w->heap_len;
    w->heap[w->heap_len++] = r;
    heap_up(w, r->heap_idx);
    return 0;
}

/* Takes r out of its key list (freeing the key's bucket when it empties)
 * and out of the heap. */
static void unpark(c10ds_waiters *w, c10ds_request *r)
{
    bucket **slot = find_slot(w, r->wait_key);
    bucket *b = *slot;
    if (r->wprev)
        r->wprev->wnext = r->wnext;
    else
        b->head = r->wnext;
    if (r->wnext)
        r->wnext->wprev = r->wprev;
    if (!b->head) {
        *slot = b->next;
        free(b->key);
        free(b);
        w->nkeys--;
    }
    r->wait_key = NULL;
    r->wprev = r->wnext = NULL;
    heap_remove(w, r);
}

void c10ds_waiters_touch(c10ds_waiters *w, const char *key)
{
    bucket **slot = find_slot(w, key);
    bucket *b = *slot;
    if (!b)
        return;
    /* Detach the whole bucket first: every request on it becomes ready.
     * The bucket lists newest first; reversing gives park order. */
    *slot = b->next;
    w->nkeys--;
    c10ds_request *in_order = NULL, *last = NULL;
    for (c10ds_request *r = b->head, *n; r; r = n) {
        n = r->wnext;
        r->wait_key = NULL;
        r->wprev = r->wnext = NULL;
        heap_remove(w, r);
        if (!in_order)
            last = r;
        r->next = in_order;
        in_order = r;
    }
    if (in_order) {
        if (w->ready_tail)
            w->ready_tail->next = in_order;
        else
            w->ready = in_order;
        w->ready_tail = last;
    }
    free(b->key);
    free(b);
}

c10ds_request *c10ds_waiters_take_ready(c10ds_waiters *w)
{
    c10ds_request *r = w->ready;
    w->ready = w->ready_tail = NULL;
    return r;
}

c10ds_request *c10ds_waiters_pop_expired(c10ds_waiters *w, int64_t now_ms)
{
    if (w->heap_len == 0 || w->heap[0]->deadline_ms > now_ms)
        return NULL;
    c10ds_request *r = w->heap[0];
    unpark(w, r);
    return r;
}

void c10ds_waiters_drop_pipe(c10ds_waiters *w, uint32_t pipe, void (*drop)(c10ds_request *))
{
    /* A scan: connections close rarely, and parked requests are few. The
     * matches are chained first (through ->next, unused while parked):
     * unparking reorders the heap under a scan. */
    c10ds_request *found = NULL;
    for (size_t i = 0; i < w->heap_len; i++)
        if (w->heap[i]->pipe == pipe && w->heap[i]->pb) {
            w->heap[i]->next = found;
            found = w->heap[i];
        }
    for (c10ds_request *r = found, *n; r; r = n) {
        n = r->next;
        unpark(w, r);
        drop(r);
    }
}

c10ds_request *c10ds_waiters_take_if(c10ds_waiters *w, int (*pick)(const c10ds_request *, void *),
                                     void *arg)
{
    c10ds_request *found = NULL; /* chained first: unparking reorders the heap */
    for (size_t i = 0; i < w->heap_len; i++)
        if (pick(w->heap[i], arg)) {
            w->heap[i]->next = found;
            found = w->heap[i];
        }
    for (c10ds_request *r = found; r; r = r->next)
        unpark(w, r);
    return found;
}

void c10ds_waiters_postpone(c10ds_waiters *w, int64_t ms,
                            int (*keep)(const c10ds_request *, void *), void *arg)
{
    if (ms <= 0)
        return;
    for (size_t i = 0; i < w->heap_len; i++)
        if (!keep(w->heap[i], arg))
            w->heap[i]->deadline_ms += ms;
    /* not all moved alike: rebuild the heap (stalls are rare) */
    for (size_t i = w->heap_len / 2; i-- > 0;)
        heap_down(w, i);
}

int64_t c10ds_waiters_next_deadline(const c10ds_waiters *w)
{
    return w->heap_len ? w->heap[0]->deadline_ms : INT64_MAX;
}

size_t c10ds_waiters_count(const c10ds_waiters *w)
{
    return w->heap_len;
}

void c10ds_waiters_free(c10ds_waiters *w, void (*drop)(c10ds_request *))
{
    if (!w)
        return;
    while (w->heap_len) {
        c10ds_request *r = w->heap[0];
        unpark(w, r);
        if (drop)
            drop(r);
    }
    for (c10ds_request *r = c10ds_waiters_take_ready(w), *n; r; r = n) {
        n = r->next;
        if (drop)
            drop(r);
    }
    free(w->table);
    free(w->heap);
    free(w);
}
