#include "layout.h"

#include <stdint.h>

int c10di_blocks_flat(const void *const *blocks, int n, size_t bytes)
{
    if (!blocks || n <= 0 || !blocks[0])
        return 0;
    uintptr_t base = (uintptr_t)blocks[0];
    for (int i = 1; i < n; i++)
        if ((uintptr_t)blocks[i] != base + (uintptr_t)i * bytes)
            return 0;
    return 1;
}

int c10di_block_in_place(const void *mine, const void *flat, int rank, size_t bytes)
{
    return mine && flat && (uintptr_t)mine == (uintptr_t)flat + (uintptr_t)rank * bytes;
}
