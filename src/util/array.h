/* array.h — the growable-array step the tree shares: make room for a number of items in a heap array,
 * doubling its capacity, with the size arithmetic checked. */
#ifndef LOOM_UTIL_ARRAY_H
#define LOOM_UTIL_ARRAY_H

#include <stdint.h>
#include <stdlib.h>

/* arr (of *cap items of elem bytes) resized so that it holds need items: returned as is when it does,
 * else reallocated to the first doubling of *cap (16 when 0) that reaches need, and *cap updated. NULL
 * when the size overflows or realloc fails; arr and *cap are then unchanged (the caller still owns arr).
 * need must be > 0. */
static inline void *loom_grow(void *arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return arr;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return NULL;
        nc *= 2;
    }
    if (nc > SIZE_MAX / elem)
        return NULL;
    void *p = realloc(arr, nc * elem);
    if (p)
        *cap = nc;
    return p;
}

#endif
