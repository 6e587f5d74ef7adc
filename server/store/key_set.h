/* The distinct keys of a request that names keys (check, wait,
 * multi_get): a key named many times is looked up and read once, so a
 * 45 KB request naming one key 4,096 times costs one lookup, not 4,096. */
#ifndef C10DS_KEY_SET_H
#define C10DS_KEY_SET_H

#include <stddef.h>

/* first[i] = the index of the first of keys[0..n) equal to keys[i], so
 * first[i] == i for the first of each distinct key. Linear in the keys'
 * bytes. Returns first (malloc'd, n entries; free it), or NULL when out
 * of memory. */
size_t *c10ds_key_firsts(char *const *keys, size_t n);

#endif
