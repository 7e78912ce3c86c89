/* failalloc: make one chosen realloc(), calloc() or posix_memalign()
 * fail, to test out-of-memory paths of the fs core end to end.
 *
 * The test program that links failalloc.c gets its realloc(), calloc() and
 * posix_memalign(): every call goes to the next one (libc's, or a
 * sanitizer's) except the one armed, which fails with ENOMEM (NULL and
 * errno for the first two, the return value for posix_memalign).  A
 * realloc is chosen by its pointer (e.g. an extent map's block, so nothing
 * else in the process fails), a calloc by its exact arguments (e.g. 1 and
 * the size of one struct), a posix_memalign by its exact size (e.g. one
 * read-ahead window); once, by whichever thread makes that call first.
 */
#ifndef ZF_FAILALLOC_H
#define ZF_FAILALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Fail the next realloc(ptr, ...) (ptr != NULL). */
void failalloc_arm(const void *ptr);
/* Fail the next calloc(nmemb, size) with exactly these arguments. */
void failalloc_arm_calloc(size_t nmemb, size_t size);
/* Fail the next posix_memalign(..., ..., size) with exactly this size. */
void failalloc_arm_memalign(size_t size);
/* Stop failing. */
void failalloc_disarm(void);
/* Calls failed since the program started. */
uint64_t failalloc_failed(void);

#endif
