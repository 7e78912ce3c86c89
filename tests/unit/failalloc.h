/* failalloc: make one chosen realloc() fail, to test out-of-memory paths
 * of the fs core end to end.
 *
 * The test program that links failalloc.c gets its realloc(): every call
 * goes to the next realloc (libc's, or a sanitizer's) except the one that
 * failalloc_arm() chose, which returns NULL with errno ENOMEM.  A call is
 * chosen by its pointer (e.g. an extent map's array, so nothing else in
 * the process fails), once, by whichever thread makes that call first.
 */
#ifndef ZF_FAILALLOC_H
#define ZF_FAILALLOC_H

#include <stdint.h>

/* Fail the next realloc(ptr, ...) (ptr != NULL). */
void failalloc_arm(const void *ptr);
/* Stop failing. */
void failalloc_disarm(void);
/* Calls failed since the program started. */
uint64_t failalloc_failed(void);

#endif
