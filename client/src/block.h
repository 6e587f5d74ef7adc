/* One allocation per result (c10d/common.h: every result is freed with one
 * c10d_free). A result with arrays and strings inside is built twice by
 * the same code: first with base NULL, which only measures (take returns
 * NULL and writes nothing), then into one block of the measured size. */
#ifndef C10DI_BLOCK_H
#define C10DI_BLOCK_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct c10di_block {
    char *base; /* NULL: measuring */
    size_t used;
} c10di_block;

/* n bytes, aligned for any member type; NULL while measuring. */
static inline void *c10di_block_take(c10di_block *b, size_t n)
{
    size_t at = (b->used + 15) & ~(size_t)15;
    b->used = at + n;
    return b->base ? b->base + at : NULL;
}

/* A copy of s (NULL: "") in the block; NULL while measuring. */
static inline const char *c10di_block_str(c10di_block *b, const char *s)
{
    s = s ? s : "";
    size_t n = strlen(s) + 1;
    char *p = (char *)c10di_block_take(b, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* Builds a result in one block: fill runs once to measure, once into the
 * block. Its first take must be the result itself (so the block's start
 * is what the caller frees with c10d_free). NULL when out of memory. */
typedef void (*c10di_block_fill)(c10di_block *b, const void *arg);
static inline void *c10di_block_build(c10di_block_fill fill, const void *arg)
{
    c10di_block b = {NULL, 0};
    fill(&b, arg);
    if (!(b.base = (char *)malloc(b.used ? b.used : 1)))
        return NULL;
    b.used = 0;
    fill(&b, arg);
    return b.base;
}

#endif
