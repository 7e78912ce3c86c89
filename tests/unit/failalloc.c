/* failalloc: see failalloc.h.  realloc() defined here takes precedence over
 * the C library's for the whole program (the fs core is a static library
 * linked into it); the real one is found with dlsym(RTLD_NEXT). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* RTLD_NEXT */
#endif
#include "failalloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

static const void *_Atomic target;
static _Atomic uint64_t nfailed;

typedef void *(*realloc_fn)(void *, size_t);

void failalloc_arm(const void *ptr)
{
	target = ptr;
}

void failalloc_disarm(void)
{
	target = NULL;
}

uint64_t failalloc_failed(void)
{
	return nfailed;
}

void *realloc(void *p, size_t n)
{
	static realloc_fn next;

	const void *t = target;
	if (p && p == t && atomic_compare_exchange_strong(&target, &t, NULL)) {
		nfailed++;
		errno = ENOMEM;
		return NULL;
	}
	if (!next) {
		*(void **)&next = dlsym(RTLD_NEXT, "realloc");	/* POSIX idiom */
		if (!next)
			abort();
	}
	return next(p, n);
}
