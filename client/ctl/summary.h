/* c10d-ctl's text output for big jobs: ranks that share a state printed
 * as one line with their ranks as ranges ("0-1023,1032-16383"), and the
 * odd ones out by name, instead of a line per rank. --json stays whole. */
#ifndef C10D_CTL_SUMMARY_H
#define C10D_CTL_SUMMARY_H

#include <stdio.h>

/* Up to this many ranks a listing names each rank on its own line. */
#define CTL_LIST_EACH 32
/* Odd ones out named one by one in a summary, at most. */
#define CTL_LIST_ODD 16

/* --all: a line per rank however many there are. */
extern int ctl_list_all;

/* "0-3,7,9-12" for ranks in ascending order. */
void ctl_print_ranges(FILE *f, const int *ranks, int n);

/* Ranks grouped by a text key, in the order keys were first seen. */
typedef struct ctl_bucket {
    char *key;
    int *ranks;
    int n, cap;
} ctl_bucket;

typedef struct ctl_buckets {
    ctl_bucket *b;
    int n, cap;
} ctl_buckets;

/* Adds rank under key (copied); 0, or -1 out of memory. */
int ctl_bucket_add(ctl_buckets *bs, const char *key, int rank);
/* Biggest bucket first (ties: first seen first). */
void ctl_buckets_sort(ctl_buckets *bs);
void ctl_buckets_free(ctl_buckets *bs);

#endif
