#include "store/key_set.h"

#include "c10d_hash.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t *c10ds_key_firsts(char *const *keys, size_t n)
{
    size_t *first = malloc((n ? n : 1) * sizeof *first);
    /* Open addressing over at least twice n slots, each the index of a
     * first occurrence plus one (0: empty): a probe ends within a few
     * slots, whatever the keys. */
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    size_t *slot = calloc(cap, sizeof *slot);
    if (!first || !slot) {
        free(first);
        free(slot);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = (size_t)c10d_fnv1a64(keys[i], C10D_FNV64_BASIS) & (cap - 1);
        while (slot[at] && strcmp(keys[slot[at] - 1], keys[i]) != 0)
            at = (at + 1) & (cap - 1);
        if (!slot[at])
            slot[at] = i + 1;
        first[i] = slot[at] - 1;
    }
    free(slot);
    return first;
}
