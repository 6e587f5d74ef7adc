#include "summary.h"

#include <stdlib.h>
#include <string.h>

int ctl_list_all;

void ctl_print_ranges(FILE *f, const int *r, int n)
{
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        fprintf(f, "%s%d", i ? "," : "", r[i]);
        if (j > i)
            fprintf(f, "-%d", r[j]);
        i = j + 1;
    }
}

int ctl_bucket_add(ctl_buckets *bs, const char *key, int rank)
{
    ctl_bucket *b = NULL;
    /* The last bucket used first: ranks in order mostly share it. */
    for (int i = bs->n - 1; i >= 0 && !b; i--)
        if (strcmp(bs->b[i].key, key) == 0)
            b = &bs->b[i];
    if (!b) {
        if (bs->n == bs->cap) {
            int cap = bs->cap ? bs->cap * 2 : 8;
            ctl_bucket *nb = realloc(bs->b, (size_t)cap * sizeof *nb);
            if (!nb)
                return -1;
            bs->b = nb;
            bs->cap = cap;
        }
        b = &bs->b[bs->n];
        memset(b, 0, sizeof *b);
        if (!(b->key = strdup(key)))
            return -1;
        bs->n++;
    }
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 16;
        int *nr = realloc(b->ranks, (size_t)cap * sizeof *nr);
        if (!nr)
            return -1;
        b->ranks = nr;
        b->cap = cap;
    }
    b->ranks[b->n++] = rank;
    return 0;
}

void ctl_buckets_sort(ctl_buckets *bs)
{
    for (int i = 1; i < bs->n; i++) /* stable insertion sort by size, descending */
        for (int j = i; j > 0 && bs->b[j - 1].n < bs->b[j].n; j--) {
            ctl_bucket t = bs->b[j];
            bs->b[j] = bs->b[j - 1];
            bs->b[j - 1] = t;
        }
}

void ctl_buckets_free(ctl_buckets *bs)
{
    for (int i = 0; i < bs->n; i++) {
        free(bs->b[i].key);
        free(bs->b[i].ranks);
    }
    free(bs->b);
    memset(bs, 0, sizeof *bs);
}
