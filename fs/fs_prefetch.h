/* fs_prefetch — the read-ahead state, private to the fs core: owned by
 * fs_prefetch.c (which has the design: windows, generations, spares),
 * held in struct fs_inode (in->pf) and struct fs (fs->pf); its functions
 * are in fs_internal.h.
 *
 * Purpose: per file (struct fs_prefetch, in->pf, created at its first READ
 * that may prefetch) up to FS_PF_NBUF windows of file bytes filled ahead of
 * a sequential reader; per mount (struct fs_pf_pool, fs->pf) the workers
 * that fill them, their queue, the spare window buffers and the counters.
 *
 * Invariants: a window's bytes (struct fs_pf_data) are refcounted: the
 * buffer holds one reference, a fill in flight one, and every READ reply
 * served from it one, so a window dropped while a reply still sends its
 * bytes is freed by the last reply.  A fill started under an older
 * generation than pf->gen is thrown away.  pool.bytes counts the bytes of
 * windows some reference holds; spares are not counted.  At most
 * FS_PF_SPARE buffers wait as spares.
 *
 * Thread safety and lock order: in->rw -> in->pf->lock -> fs->lock.  A
 * reader takes pf->lock under in->rw (shared); scheduling a fill pins the
 * inode under fs->lock with pf->lock held, so pf->lock is never taken with
 * fs->lock held.  pool.qlock is a leaf.  The pool's counters and spares
 * are atomics, read by any thread; window and nthreads are set by start
 * and stop only.  References are dropped (fs_pf_data_put) with no lock.
 */
#ifndef ZONEFUSE_FS_PREFETCH_H
#define ZONEFUSE_FS_PREFETCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fs_pf_data;
struct pf_job;

/* Prefetch state of one file.  Every field of a buffer is [pf->lock]. */
#define FS_PF_NBUF 4
struct fs_pf_buf {
	uint64_t off, len;	/* file bytes covered */
	struct fs_pf_data *data;	/* [pf->lock] one reference, or NULL */
	int state;		/* empty, filling, ready */
};

struct fs_prefetch {
	pthread_mutex_t lock;	/* between in->rw and fs->lock (above) */
	pthread_cond_t cond;	/* [lock] broadcast when a fill ends */
	uint64_t last_end;	/* [lock] end of the previous read (bytes) */
	uint32_t seq;		/* [lock] consecutive sequential reads */
	uint64_t gen;		/* [lock] bumped by writes/truncates: stale
				 * fills die */
	struct fs_pf_buf b[FS_PF_NBUF];	/* [lock] */
};

/* The read-ahead workers: a queue of buffer fills served by a few
 * threads, and the window buffers kept for reuse. */
#define FS_PF_SPARE FS_PF_NBUF
struct fs_pf_pool {
	uint64_t window;		/* bytes per buffer (FS_PF_NBUF per file),
					 * 0 = off; set at start */
	_Atomic uint64_t bytes, hits, fills;	/* counters; bytes: of windows
						 * in use, not of spares */
	/* Buffers of window bytes no window uses, for the next one; NULL =
	 * an empty slot.  Lock-free: taken by exchange, given by
	 * compare-exchange into an empty slot. */
	_Atomic(uint8_t *) spare[FS_PF_SPARE];
	_Atomic bool spare_off;		/* set by stop: a released buffer is
					 * freed, not kept */
	_Atomic uint64_t fill_errors;	/* fills a device error ended */
	pthread_mutex_t qlock;		/* leaf; protects queue and stop */
	pthread_cond_t qcond;
	struct pf_job *queue;		/* [qlock] */
	bool stop;			/* [qlock] */
	pthread_t threads[4];
	int nthreads;			/* set by start/stop only */
};

#endif
