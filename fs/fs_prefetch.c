/* fs_prefetch — double-buffered read-ahead for sequential readers.
 *
 * Compaction reads whole tables front to back.  Per file we watch whether
 * reads continue where the previous one ended; after two such reads the file
 * gets two buffers of opts.prefetch_bytes each: while the reader consumes
 * one, the other is filled in the background from every zone the window
 * touches at once (one zdev_io_batch, so striped files are read from all
 * their zones in parallel).  Random readers get no prefetch and no extra I/O.
 *
 * Consistency: each file has a generation, bumped (under the inode's rw lock
 * held exclusively) by every write, truncate and hole punch; a fill started
 * under an older generation is thrown away.  A fill reads device ranges
 * computed from the extent map while the reader held the rw lock; if those
 * extents die meanwhile, the generation has changed and the bytes are
 * discarded, so reading a zone that is being reset is harmless.
 * Buffered (dirty) pages are overlaid by fs_read_buf afterwards, as for
 * device reads.
 *
 * Memory: fs->pf.bytes counts buffer bytes daemon-wide; no new buffer is
 * allocated past opts.prefetch_limit.
 * Threads: a small pool of workers does the fills.
 * Locking: in->pf->lock is a leaf lock (taken under in->rw, never the other
 * way round); the pool's queue lock is a leaf lock too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

#define PF_WORKERS 4
#define PF_MAX_REQS 256

enum { PF_EMPTY = 0, PF_FILLING = 1, PF_READY = 2 };

struct pf_job {
	struct pf_job *next;
	struct fs_inode *in;	/* pinned */
	int slot;
	uint64_t gen;
	uint8_t *data;
	uint32_t nreq;
	struct zdev_req reqs[];
};

static uint64_t window(struct fs *fs)
{
	return fs->pf.window;
}

/* Free one buffer's memory. [pf->lock] */
static void buf_drop(struct fs *fs, struct fs_pf_buf *b)
{
	if (b->state == PF_READY && b->data) {
		zdev_buf_free(b->data);
		fs->pf.bytes -= window(fs);
	}
	if (b->state != PF_FILLING) {
		b->data = NULL;
		b->state = PF_EMPTY;
	} else {
		b->orphaned = true;	/* the worker frees it */
	}
	b->off = b->len = 0;
}

void fs_pf_invalidate(struct fs *fs, struct fs_inode *in)
{
	struct fs_prefetch *pf = in->pf;
	if (!pf)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->gen++;
	pf->seq = 0;
	for (int i = 0; i < 2; i++)
		buf_drop(fs, &pf->b[i]);
	pthread_mutex_unlock(&pf->lock);
}

void fs_pf_free(struct fs *fs, struct fs_inode *in)
{
	struct fs_prefetch *pf = in->pf;
	if (!pf)
		return;
	/* Called when nothing references the inode: no fill is in flight
	 * (fills pin the inode). */
	for (int i = 0; i < 2; i++)
		buf_drop(fs, &pf->b[i]);
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
		pthread_mutex_lock(&pf->lock);
		if (!err && !b->orphaned && pf->gen == j->gen && b->data == j->data) {
			b->state = PF_READY;
		} else {
			if (b->data == j->data) {
				b->data = NULL;
				b->state = PF_EMPTY;
				b->off = b->len = 0;
			}
			b->orphaned = false;
			zdev_buf_free(j->data);
			fs->pf.bytes -= window(fs);
		}
		pthread_cond_broadcast(&pf->cond);
		pthread_mutex_unlock(&pf->lock);

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
		w = 2ull * ZF_MAX(1u, fs->opts.stripe_width) * fs->opts.stripe_unit;
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

void fs_pf_stop(struct fs *fs)
{
	if (!fs->pf.nthreads)
		return;
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

/* Start filling slot `slot` with [off, off+len). [in->rw shared, pf->lock] */
static void schedule(struct fs *fs, struct fs_inode *in, int slot, uint64_t off, uint64_t len)
{
	struct fs_prefetch *pf = in->pf;
	struct fs_pf_buf *b = &pf->b[slot];
	uint64_t end = off + len;

	if (b->state == PF_FILLING || fs->pf.bytes + window(fs) > fs->opts.prefetch_limit)
		return;
	/* Device ranges of the window (holes stay zero). */
	size_t i = extmap_find(&in->map, off);
	uint32_t n = 0;
	for (size_t k = i; k < in->map.n && in->map.v[k].off < end && n < PF_MAX_REQS; k++)
		n++;
	if (n == 0 || n >= PF_MAX_REQS)
		return;	/* nothing on the device, or too fragmented to bother */
	struct pf_job *j = calloc(1, sizeof(*j) + n * sizeof(struct zdev_req));
	uint8_t *data = zdev_buf_alloc(window(fs));
	if (!j || !data) {
		free(j);
		zdev_buf_free(data);
		return;
	}
	memset(data, 0, len);
	for (uint32_t q = 0; q < n; q++) {
		const struct extmap_ext *e = &in->map.v[i + q];
		uint64_t a = ZF_MAX(off, e->off), z = ZF_MIN(end, e->off + e->len);
		j->reqs[q] = (struct zdev_req){ .op = ZDEV_OP_READ, .offset = e->dev + (a - e->off),
						.buf = data + (a - off), .len = z - a };
	}
	j->nreq = n;
	j->in = in;
	j->slot = slot;
	j->gen = pf->gen;
	j->data = data;
	if (b->state == PF_READY)
		buf_drop(fs, b);
	b->off = off;
	b->len = len;
	b->data = data;
	b->state = PF_FILLING;
	b->orphaned = false;
	fs->pf.bytes += window(fs);
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
}

bool fs_pf_read(struct fs *fs, struct fs_inode *in, uint64_t a0, uint64_t len, uint8_t *out)
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
	uint64_t end = a0 + len, w = window(fs);
	uint64_t fend = ZF_ALIGN_UP(in->size, fs->bs);
	bool hit = false;

	pthread_mutex_lock(&pf->lock);
	bool sequential = a0 <= pf->last_end && end > pf->last_end &&
			  pf->last_end - a0 <= len;
	pf->seq = sequential ? pf->seq + 1 : (a0 == 0 ? 1 : 0);
	pf->last_end = end;
	/* Serve from a buffer covering the whole request (wait if filling). */
	for (int i = 0; i < 2; i++) {
		struct fs_pf_buf *b = &pf->b[i];
		while (b->state == PF_FILLING && a0 >= b->off && end <= b->off + b->len)
			pthread_cond_wait(&pf->cond, &pf->lock);
		if (b->state == PF_READY && a0 >= b->off && end <= b->off + b->len) {
			memcpy(out, b->data + (a0 - b->off), len);
			hit = true;
			fs->pf.hits++;
			/* Reader entered this buffer: fill the other one next. */
			uint64_t next = b->off + b->len;
			struct fs_pf_buf *o = &pf->b[1 - i];
			if (next < fend && !(o->state != PF_EMPTY && o->off == next))
				schedule(fs, in, 1 - i, next, ZF_MIN(w, fend - next));
			break;
		}
	}
	if (!hit && pf->seq >= 2 && end < fend) {
		/* Sequential and not covered: start both windows after this read. */
		int slot = pf->b[0].state == PF_FILLING ? 1 : 0;
		schedule(fs, in, slot, end, ZF_MIN(w, fend - end));
	}
	pthread_mutex_unlock(&pf->lock);
	return hit;
}
