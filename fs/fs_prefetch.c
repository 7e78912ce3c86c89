/* fs_prefetch — read-ahead for sequential readers, several windows deep.
 *
 * Compaction reads whole tables front to back.  Per file we watch whether
 * reads continue where the previous one ended; after two such reads the file
 * gets FS_PF_NBUF buffers of opts.prefetch_bytes each, filled in the
 * background in file order from every zone a window touches at once (one
 * zdev_io_batch, so striped files are read from all their zones in
 * parallel).  When the reader enters a buffer, the buffers behind it are
 * refilled with the windows after the furthest one, so up to FS_PF_NBUF - 1
 * fills are in flight ahead of the reader: a zone never idles while the
 * reader still consumes an earlier window.  Random readers get no prefetch
 * and no extra I/O.
 *
 * Consistency: each file has a generation, bumped (under the inode's rw lock
 * held exclusively) by every write, truncate and hole punch; a fill started
 * under an older generation is thrown away.  A fill reads device ranges
 * computed from the extent map while the reader held the rw lock; if those
 * extents die meanwhile, the generation has changed and the bytes are
 * discarded, so reading a zone that is being reset is harmless.  Only the
 * parts of a window no extent covers (holes) are zeroed; the device read
 * fills the rest.  Buffered (dirty) pages are overlaid by fs_read_buf
 * afterwards, as for device reads (on a copy: a window may be shared).
 *
 * Memory: a window's bytes are refcounted (struct fs_pf_data): the buffer,
 * a fill in flight and each READ reply that sends them hold a reference, so
 * a reply can send straight from the window while the window is dropped.
 * fs->pf.bytes counts window bytes daemon-wide until the last reference
 * goes; no new window is allocated past opts.prefetch_limit.  The buffer
 * then waits among the FS_PF_SPARE spares for the next window: the
 * allocator would hand a buffer this large back to the kernel, and a new
 * one costs a page fault per page at its first fill, as much CPU as the
 * fill's own copy.  So at most prefetch_limit + FS_PF_SPARE windows are
 * held, the spares only after windows of that size were in use.
 * Threads: a small pool of workers does the fills.
 * Locking: in->pf->lock is a leaf lock (taken under in->rw, never the other
 * way round); the pool's queue lock is a leaf lock too; references are
 * dropped with no lock needed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"
#include "fs/fs_prefetch.h"

#define PF_WORKERS 4
#define PF_MAX_REQS 256

enum { PF_EMPTY = 0, PF_FILLING = 1, PF_READY = 2 };

/* The bytes of one window. */
struct fs_pf_data {
	_Atomic uint32_t refs;
	struct fs *fs;		/* whose pf.bytes counts it */
	uint8_t *buf;		/* fs->pf.window bytes */
};

struct pf_job {
	struct pf_job *next;
	struct fs_inode *in;	/* pinned */
	int slot;
	uint64_t gen;
	struct fs_pf_data *data;	/* the job's own reference */
	uint32_t nreq;
	struct zdev_req reqs[];
};

static uint64_t window(struct fs *fs)
{
	return fs->pf.window;
}

/* A buffer for a window: a spare, or a new one (NULL: no memory). */
static uint8_t *spare_take(struct fs *fs)
{
	for (int i = 0; i < FS_PF_SPARE; i++) {
		uint8_t *b = atomic_exchange_explicit(&fs->pf.spare[i], NULL, memory_order_acquire);
		if (b)
			return b;
	}
	return zdev_buf_alloc(window(fs));
}

/* Keep a window's buffer for the next window, or free it when every
 * spare slot is taken or the pool has stopped. */
static void spare_give(struct fs *fs, uint8_t *b)
{
	if (!atomic_load_explicit(&fs->pf.spare_off, memory_order_acquire)) {
		for (int i = 0; i < FS_PF_SPARE; i++) {
			uint8_t *empty = NULL;
			if (atomic_compare_exchange_strong_explicit(&fs->pf.spare[i], &empty, b,
								    memory_order_release,
								    memory_order_relaxed))
				return;
		}
	}
	zdev_buf_free(b);
}

uint64_t fs_pf_spare_bytes(struct fs *fs)
{
	uint64_t n = 0;
	for (int i = 0; i < FS_PF_SPARE; i++)
		n += atomic_load_explicit(&fs->pf.spare[i], memory_order_relaxed) != NULL;
	return n * window(fs);
}

static struct fs_pf_data *data_new(struct fs *fs)
{
	struct fs_pf_data *d = malloc(sizeof(*d));
	uint8_t *buf = d ? spare_take(fs) : NULL;
	if (!buf) {
		free(d);
		return NULL;
	}
	atomic_init(&d->refs, 1);
	d->fs = fs;
	d->buf = buf;
	fs->pf.bytes += window(fs);
	return d;
}

static struct fs_pf_data *data_get(struct fs_pf_data *d)
{
	atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
	return d;
}

void fs_pf_data_put(struct fs_pf_data *d)
{
	if (!d || atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1)
		return;
	d->fs->pf.bytes -= window(d->fs);
	spare_give(d->fs, d->buf);
	free(d);
}

/* Forget a buffer's window (a fill in flight keeps its own reference and
 * finds the buffer no longer its own). [pf->lock] */
static void buf_drop(struct fs_pf_buf *b)
{
	fs_pf_data_put(b->data);
	b->data = NULL;
	b->state = PF_EMPTY;
	b->off = b->len = 0;
}

void fs_pf_invalidate(struct fs *fs, struct fs_inode *in)
{
	struct fs_prefetch *pf = in->pf;
	(void)fs;
	if (!pf)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->gen++;
	pf->seq = 0;
	for (int i = 0; i < FS_PF_NBUF; i++)
		buf_drop(&pf->b[i]);
	pthread_mutex_unlock(&pf->lock);
}

void fs_pf_free(struct fs *fs, struct fs_inode *in)
{
	struct fs_prefetch *pf = in->pf;
	(void)fs;
	if (!pf)
		return;
	/* Called when nothing references the inode: no fill is in flight
	 * (fills pin the inode). */
	for (int i = 0; i < FS_PF_NBUF; i++)
		buf_drop(&pf->b[i]);
	pthread_mutex_destroy(&pf->lock);
	pthread_cond_destroy(&pf->cond);
	free(pf);
	in->pf = NULL;
}

static void *worker_main(void *arg)
{
	struct fs *fs = arg;

	pthread_mutex_lock(&fs->pf.qlock);
	for (;;) {
		while (!fs->pf.queue && !fs->pf.stop)
			pthread_cond_wait(&fs->pf.qcond, &fs->pf.qlock);
		if (!fs->pf.queue && fs->pf.stop)
			break;
		struct pf_job *j = fs->pf.queue;
		fs->pf.queue = j->next;
		pthread_mutex_unlock(&fs->pf.qlock);

		int err = 0;
		for (uint32_t k = 0; k < j->nreq && !err; k += 64) {
			unsigned n = (unsigned)ZF_MIN(64u, j->nreq - k);
			int r = zdev_io_batch(fs->dev, &j->reqs[k], n);
			if (r < 0)
				err = r;
			for (unsigned q = 0; q < n && !err; q++)
				if (j->reqs[k + q].result < 0)
					err = (int)j->reqs[k + q].result;
		}
		struct fs_prefetch *pf = j->in->pf;
		struct fs_pf_buf *b = &pf->b[j->slot];
		if (err)
			atomic_fetch_add_explicit(&fs->pf.fill_errors, 1, memory_order_relaxed);
		pthread_mutex_lock(&pf->lock);
		if (b->data == j->data) {
			if (!err && pf->gen == j->gen)
				b->state = PF_READY;
			else
				buf_drop(b);
		}
		pthread_cond_broadcast(&pf->cond);
		pthread_mutex_unlock(&pf->lock);
		fs_pf_data_put(j->data);

		pthread_mutex_lock(&fs->lock);
		j->in->pins--;
		fs_inode_maybe_free(fs, j->in);
		pthread_mutex_unlock(&fs->lock);
		free(j);
		pthread_mutex_lock(&fs->pf.qlock);
	}
	pthread_mutex_unlock(&fs->pf.qlock);
	return NULL;
}

int fs_pf_start(struct fs *fs)
{
	uint64_t w = fs->opts.prefetch_bytes;
	if (w == UINT64_MAX)
		w = (uint64_t)ZF_MAX(1u, fs->opts.stripe_width) * fs->opts.stripe_unit;
	fs->pf.window = ZF_ALIGN_UP(w, fs->bs);
	if (fs->pf.window == 0 || fs->read_only)
		return 0;
	pthread_mutex_init(&fs->pf.qlock, NULL);
	pthread_cond_init(&fs->pf.qcond, NULL);
	for (int i = 0; i < PF_WORKERS; i++) {
		int r = -pthread_create(&fs->pf.threads[i], NULL, worker_main, fs);
		if (r) {
			fs_pf_stop(fs);
			return r;
		}
		fs->pf.nthreads++;
	}
	return 0;
}

/* Called when no reply holds a window (the session has ended): the
 * workers finish their fills, the spares are freed, and so is every
 * buffer released from here on. */
void fs_pf_stop(struct fs *fs)
{
	atomic_store_explicit(&fs->pf.spare_off, true, memory_order_release);
	if (fs->pf.nthreads) {
		pthread_mutex_lock(&fs->pf.qlock);
		fs->pf.stop = true;
		pthread_cond_broadcast(&fs->pf.qcond);
		pthread_mutex_unlock(&fs->pf.qlock);
		for (int i = 0; i < fs->pf.nthreads; i++)
			pthread_join(fs->pf.threads[i], NULL);
		fs->pf.nthreads = 0;
		pthread_mutex_destroy(&fs->pf.qlock);
		pthread_cond_destroy(&fs->pf.qcond);
	}
	for (int i = 0; i < FS_PF_SPARE; i++)
		zdev_buf_free(atomic_exchange_explicit(&fs->pf.spare[i], NULL, memory_order_acquire));
}

/* Start filling empty slot `slot` with [off, off+len); false if not
 * started (memory limit, nothing on the device, too fragmented).
 * [in->rw shared, pf->lock] */
static bool schedule(struct fs *fs, struct fs_inode *in, int slot, uint64_t off, uint64_t len)
{
	struct fs_prefetch *pf = in->pf;
	struct fs_pf_buf *b = &pf->b[slot];
	uint64_t end = off + len;

	if (b->state != PF_EMPTY || fs->pf.bytes + window(fs) > fs->opts.prefetch_limit)
		return false;
	/* Device ranges of the window. */
	struct extmap_cur c0, c;
	const struct extmap_ext *first = extmap_seek(&in->map, off, &c0);
	uint32_t n = 0;
	c = c0;
	for (const struct extmap_ext *e = first; e && e->off < end && n < PF_MAX_REQS;
	     e = extmap_next(&in->map, &c))
		n++;
	if (n == 0 || n >= PF_MAX_REQS)
		return false;	/* nothing on the device, or too fragmented to bother */
	struct pf_job *j = calloc(1, sizeof(*j) + n * sizeof(struct zdev_req));
	struct fs_pf_data *d = j ? data_new(fs) : NULL;
	if (!d) {
		free(j);
		return false;
	}
	/* Zero only what no extent covers (holes, the tail after the last
	 * extent); the device reads write the rest. */
	uint64_t pos = off;
	c = c0;
	const struct extmap_ext *e = first;
	for (uint32_t q = 0; q < n; q++, e = extmap_next(&in->map, &c)) {
		uint64_t a = ZF_MAX(off, e->off), z = ZF_MIN(end, e->off + e->len);
		if (a > pos)
			memset(d->buf + (pos - off), 0, a - pos);
		j->reqs[q] = (struct zdev_req){ .op = ZDEV_OP_READ, .offset = e->dev + (a - e->off),
						.buf = d->buf + (a - off), .len = z - a };
		pos = z;
	}
	if (pos < end)
		memset(d->buf + (pos - off), 0, end - pos);
	j->nreq = n;
	j->in = in;
	j->slot = slot;
	j->gen = pf->gen;
	j->data = data_get(d);
	b->off = off;
	b->len = len;
	b->data = d;
	b->state = PF_FILLING;
	fs->pf.fills++;

	pthread_mutex_lock(&fs->lock);
	in->pins++;
	pthread_mutex_unlock(&fs->lock);
	pthread_mutex_lock(&fs->pf.qlock);
	j->next = NULL;
	struct pf_job **pp = &fs->pf.queue;
	while (*pp)
		pp = &(*pp)->next;
	*pp = j;
	pthread_cond_signal(&fs->pf.qcond);
	pthread_mutex_unlock(&fs->pf.qlock);
	return true;
}

/* The reader is at a0 and wants read-ahead from `from` on: windows wholly
 * behind a0 are done and windows not joined to the chain of windows held
 * from `from` on are stale (the reader moved); both are dropped, and the
 * free slots get the windows after that chain, in file order, up to the
 * end of the file.  [in->rw shared, pf->lock] */
static void refill(struct fs *fs, struct fs_inode *in, uint64_t a0, uint64_t from, uint64_t fend)
{
	struct fs_prefetch *pf = in->pf;
	uint64_t next = from, w = window(fs);

	for (bool more = true; more;) {
		more = false;
		for (int i = 0; i < FS_PF_NBUF; i++) {
			const struct fs_pf_buf *b = &pf->b[i];
			if (b->state != PF_EMPTY && b->off <= next && next < b->off + b->len) {
				next = b->off + b->len;
				more = true;
			}
		}
	}
	for (int i = 0; i < FS_PF_NBUF; i++) {
		struct fs_pf_buf *b = &pf->b[i];
		if (b->state != PF_EMPTY && (b->off + b->len <= a0 || b->off >= next))
			buf_drop(b);
	}
	for (int i = 0; i < FS_PF_NBUF && next < fend; i++) {
		if (pf->b[i].state != PF_EMPTY)
			continue;
		if (!schedule(fs, in, i, next, ZF_MIN(w, fend - next)))
			return;
		next += pf->b[i].len;
	}
}

bool fs_pf_read(struct fs *fs, struct fs_inode *in, uint64_t a0, uint64_t len, uint8_t *out,
		struct fs_rbuf *rb)
{
	if (!fs->pf.nthreads)
		return false;
	if (!in->pf) {
		/* Lazily created; in->rw is held shared, so two readers may race:
		 * the pf pointer is set under fs->lock. */
		struct fs_prefetch *pf = calloc(1, sizeof(*pf));
		if (!pf)
			return false;
		pthread_mutex_init(&pf->lock, NULL);
		pthread_cond_init(&pf->cond, NULL);
		pthread_mutex_lock(&fs->lock);
		if (!in->pf) {
			in->pf = pf;
			pf = NULL;
		}
		pthread_mutex_unlock(&fs->lock);
		if (pf) {
			pthread_mutex_destroy(&pf->lock);
			pthread_cond_destroy(&pf->cond);
			free(pf);
		}
	}
	struct fs_prefetch *pf = in->pf;
	uint64_t end = a0 + len;
	uint64_t fend = ZF_ALIGN_UP(in->size, fs->bs);
	bool hit = false;

	pthread_mutex_lock(&pf->lock);
	bool sequential = a0 <= pf->last_end && end > pf->last_end &&
			  pf->last_end - a0 <= len;
	pf->seq = sequential ? pf->seq + 1 : (a0 == 0 ? 1 : 0);
	pf->last_end = end;
	/* Serve from a buffer covering the whole request (wait if filling). */
	for (int i = 0; i < FS_PF_NBUF; i++) {
		struct fs_pf_buf *b = &pf->b[i];
		while (b->state == PF_FILLING && a0 >= b->off && end <= b->off + b->len) {
			zf_will_block();
			pthread_cond_wait(&pf->cond, &pf->lock);
		}
		if (b->state == PF_READY && a0 >= b->off && end <= b->off + b->len) {
			const uint8_t *src = b->data->buf + (a0 - b->off);
			if (out) {
				memcpy(out, src, len);
			} else {
				rb->p = src;
				rb->own = NULL;
				rb->ref = data_get(b->data);
			}
			hit = true;
			fs->pf.hits++;
			/* Keep FS_PF_NBUF windows going from here on. */
			refill(fs, in, a0, a0, fend);
			break;
		}
	}
	if (!hit && pf->seq >= 2 && end < fend) {
		/* Sequential and not covered: read ahead from its end. */
		refill(fs, in, a0, end, fend);
	}
	pthread_mutex_unlock(&pf->lock);
	return hit;
}
