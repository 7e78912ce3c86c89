/* failalloc: see failalloc.h.  realloc(), calloc() and posix_memalign()
 * defined here take precedence over the C library's for the whole program
 * (the fs core is a static library linked into it); the real ones are
 * found with dlsym(RTLD_NEXT). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* RTLD_NEXT */
#endif
#include "failalloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

static const void *_Atomic target;
static _Atomic uint64_t nfailed;

typedef void *(*realloc_fn)(void *, size_t);

void failalloc_arm(const void *ptr)
{
	target = ptr;
}

/* The armed calloc's arguments; nmemb 0 = none armed. */
static _Atomic size_t c_nmemb, c_size;

void failalloc_arm_calloc(size_t nmemb, size_t size)
{
	c_size = size;
	c_nmemb = nmemb;
}

/* The armed posix_memalign's size; 0 = none armed. */
static _Atomic size_t m_size;

void failalloc_arm_memalign(size_t size)
{
	m_size = size;
}

void failalloc_disarm(void)
{
	target = NULL;
	c_nmemb = 0;
	m_size = 0;
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

typedef void *(*calloc_fn)(size_t, size_t);

/* dlsym may itself call calloc before the real one is known: those few
 * early calls get zeroed bytes from here (never freed: free() of them is
 * not expected during lookup). */
static _Alignas(16) unsigned char early[1024];
static size_t early_used;

void *calloc(size_t nmemb, size_t size)
{
	static calloc_fn next;
	static _Atomic bool resolving;

	size_t want = c_nmemb;
	if (want && nmemb == want && size == c_size &&
	    atomic_compare_exchange_strong(&c_nmemb, &want, 0)) {
		nfailed++;
		errno = ENOMEM;
		return NULL;
	}
	if (!next) {
		if (resolving) {
			size_t n = (nmemb * size + 15) & ~(size_t)15;
			if (n > sizeof(early) - early_used)
				return NULL;
			early_used += n;
			return early + early_used - n;
		}
		resolving = true;
		*(void **)&next = dlsym(RTLD_NEXT, "calloc");	/* POSIX idiom */
		resolving = false;
		if (!next)
			abort();
	}
	return next(nmemb, size);
}

typedef int (*memalign_fn)(void **, size_t, size_t);

int posix_memalign(void **p, size_t align, size_t size)
{
	static memalign_fn next;

	size_t want = m_size;
	if (want && size == want && atomic_compare_exchange_strong(&m_size, &want, 0)) {
		nfailed++;
		return ENOMEM;
	}
	if (!next) {
		*(void **)&next = dlsym(RTLD_NEXT, "posix_memalign");	/* POSIX idiom */
		if (!next)
			abort();
	}
	return next(p, align, size);
}
