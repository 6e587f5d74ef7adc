/* Where a collective's per-rank blocks lie, for backends that can skip
 * copies: NCCL's all_gather and reduce_scatter take one flat buffer, so a
 * list of outputs that are already consecutive views of one buffer needs
 * no flatten/unflatten copies, and an input that is the rank's own slot of
 * that buffer runs in place. Pure pointer arithmetic, unit-tested without
 * a GPU. */
#ifndef C10DI_LAYOUT_H
#define C10DI_LAYOUT_H

#include <stddef.h>

/* 1 if blocks[i] == blocks[0] + i * bytes for all n blocks (one flat
 * buffer of n * bytes starting at blocks[0]), else 0. */
int c10di_blocks_flat(const void *const *blocks, int n, size_t bytes);

/* NCCL's in-place rule for a flat all_gather / reduce_scatter of n blocks
 * of `bytes` at flat: the rank's block is its own slot,
 * mine == flat + rank * bytes. */
int c10di_block_in_place(const void *mine, const void *flat, int rank, size_t bytes);

#endif
