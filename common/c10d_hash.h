/* FNV-1a, the one hash both sides use for names: cheap, and the same on
 * every rank (what a rank puts in a transfer header, its peer recomputes). */
#ifndef C10D_HASH_H
#define C10D_HASH_H

#include <stdint.h>

#define C10D_FNV64_BASIS 0xcbf29ce484222325ull
#define C10D_FNV32_BASIS 2166136261u

/* Continues hash h over the bytes of s (start with C10D_FNV64_BASIS). */
static inline uint64_t c10d_fnv1a64(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static inline uint32_t c10d_fnv1a32(const char *s)
{
    uint32_t h = C10D_FNV32_BASIS;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

#endif
