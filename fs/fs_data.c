/* fs_data — file data: write buffers, writing chunks to zones (striped over
 * several zones of the file's class), reads, truncate, fallocate, fsync.
 *
 * Write buffer: per inode, a sorted array of chunks (stripe_unit bytes of
 * file each) holding block-sized pages.  A chunk's buffer holds its pages
 * in slots in the order they arrived (c->slot maps a page to its slot), so
 * a chunk costs memory for the pages it holds, not for the highest page
 * index, and growing it copies only those.  Every page in the buffer is dirty;
 * a page created by a partial write is first filled from the device (and
 * every byte at or beyond the file size is zeroed, so growing a file never
 * shows old bytes).  A chunk is written when all its pages are dirty and no
 * unwritten gap precedes it (the kernel's writeback arrives out of order; a
 * chunk waits for its predecessors up to opts.reorder_chunks chunks), or
 * when the file is fsync'ed, closed, aged out, or memory runs short.
 *
 * Write-out (write_chunks): the chunks to write are staged and marked busy
 * under inode->rw, then the device I/O runs with inode->rw RELEASED, so the
 * other FUSE threads writing the same file fill the next stripe meanwhile
 * (filling and writing pipeline instead of taking turns).  After each round
 * of I/O the writer re-takes inode->rw to record what was written (log
 * record, extent map, valid bytes, under fs->lock), then frees the chunks.
 *
 * Invariants:
 *  - extents are block-aligned in the file and on the device;
 *  - an extent is logged only after its data write completed;
 *  - at most one write-out per inode is in flight (in->wb_busy), so a file
 *    writes at most stripe_width zones at once; a writer that
 *    finds a stripe ready while one is in flight waits for it to end;
 *  - busy chunks stay in the inode's chunk array, so reads still overlay
 *    their bytes; nothing changes or frees them until the write-out ends:
 *    fs_write waits when its range (or the zeroed tail) touches one;
 *    truncate and punch wait for the write-out first (its extents would be
 *    recorded after them); the in-order rule of fs_data_writeout counts busy
 *    chunks as covering their range;
 *  - fs_data_writeout(all) (fsync, flush, release, memory pressure) writes
 *    every chunk that existed when it was called and waits for the
 *    write-out in flight, so fsync returns after all of the file's data is
 *    written and logged;
 *  - a failed write-out leaves its chunks buffered (no longer busy): the
 *    next flush writes them again and an fsync reports the error if that
 *    fails too;
 *  - memory: busy chunks count in fs->buffered and in->buffered until freed;
 *    a writer over the per-file share (buffer_bytes / 8) first waits for
 *    the write-out in flight, then writes everything.
 *  - the collector may re-point extents while a write-out is in flight: it
 *    only claims ranges still mapped to the bytes it copied, and the
 *    write-out's records come later in the log and win.
 *
 * Locking: functions marked [RW excl] need inode->rw held exclusively; they
 * take fs->lock themselves for attribute/extent/log changes.  [RW excl,
 * drops]: may release and re-take inode->rw (see fs_internal.h).  Waiting
 * for the write-out: inode->rw -> inode->wb_lock (leaf); the waiter
 * releases inode->rw after taking wb_lock.  The writer holds zone leases
 * while it re-takes inode->rw, so nobody may wait for a lease (or for the
 * write-out) while holding inode->rw.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_data.h"
#include "fs/fs_internal.h"


#define MAX_BATCH 64

/* ---- buffer pages [RW] ---- */

/* Position of the first chunk whose idx is >= idx (nchunks if none). */
static uint32_t chunk_pos(const struct fs_inode *in, uint64_t idx)
{
	uint32_t lo = 0, hi = in->nchunks;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (in->chunks[mid]->idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct fs_chunk *chunk_find(struct fs_inode *in, uint64_t idx)
{
	uint32_t i = chunk_pos(in, idx);
	return i < in->nchunks && in->chunks[i]->idx == idx ? in->chunks[i] : NULL;
}

static bool page_present(const struct fs_chunk *c, uint32_t i)
{
	return (c->present[i / 64] >> (i % 64)) & 1;
}

uint32_t fs_data_chunk_pos(const struct fs_inode *in, uint64_t idx)
{
	return chunk_pos(in, idx);
}

bool fs_data_page_present(const struct fs_chunk *c, uint32_t i)
{
	return page_present(c, i);
}

static uint8_t *slot_buf(struct fs *fs, const struct fs_chunk *c, uint32_t i)
{
	return c->buf + (size_t)c->slot[i] * fs->bs;
}

static uint8_t *chunk_page(struct fs *fs, const struct fs_chunk *c, uint32_t i)
{
	return page_present(c, i) ? slot_buf(fs, c, i) : NULL;
}

/* Donors whose last reference went, kept for the next WRITE: a buffer the
 * kernel copies a payload into must otherwise be faulted in page by page
 * (a fresh allocation each time: the last one is a write-buffer chunk
 * now).  Bounded; only buffers of one size (the receivers use one). */
#define DONOR_POOL 8
static struct {
	pthread_mutex_t lock;
	struct fs_donor *v[DONOR_POOL];
	unsigned int n;
	size_t len;
} donor_pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct fs_donor *fs_donor_new(size_t len)
{
	struct fs_donor *d = NULL;
	pthread_mutex_lock(&donor_pool.lock);
	if (donor_pool.n && donor_pool.len == len)
		d = donor_pool.v[--donor_pool.n];
	pthread_mutex_unlock(&donor_pool.lock);
	if (!d) {
		d = malloc(sizeof(*d));
		if (!d)
			return NULL;
		d->base = zdev_buf_alloc(len);
		if (!d->base) {
			free(d);
			return NULL;
		}
		d->len = len;
	}
	atomic_init(&d->refs, 1);
	return d;
}

void fs_donor_put(struct fs_donor *d)
{
	if (!d || atomic_fetch_sub(&d->refs, 1) != 1)
		return;
	pthread_mutex_lock(&donor_pool.lock);
	if (donor_pool.n < DONOR_POOL && (donor_pool.n == 0 || donor_pool.len == d->len)) {
		donor_pool.len = d->len;
		donor_pool.v[donor_pool.n++] = d;
		d = NULL;
	}
	pthread_mutex_unlock(&donor_pool.lock);
	if (d) {
		zdev_buf_free(d->base);
		free(d);
	}
}

/* The chunk's buffer goes: its own, or its reference to a donor. */
static void chunk_buf_release(struct fs_chunk *c)
{
	if (c->donor)
		fs_donor_put(c->donor);
	else
		zdev_buf_free(c->buf);
	c->donor = NULL;
	c->buf = NULL;
}

static struct fs_chunk *chunk_get(struct fs *fs, struct fs_inode *in, uint64_t idx)
{
	uint32_t pos = chunk_pos(in, idx);
	if (pos < in->nchunks && in->chunks[pos]->idx == idx)
		return in->chunks[pos];
	if (in->nchunks == in->chunks_cap) {
		size_t cap = in->chunks_cap;
		struct fs_chunk **v = zf_grow(in->chunks, &cap, (size_t)in->nchunks + 1,
					      sizeof(*v), 8);
		if (!v)
			return NULL;
		in->chunks = v;
		in->chunks_cap = (uint32_t)ZF_MIN(cap, (size_t)UINT32_MAX);
	}
	struct fs_chunk *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->present = calloc((fs->pages_per_chunk + 63) / 64, sizeof(uint64_t));
	c->slot = malloc(fs->pages_per_chunk * sizeof(*c->slot));
	if (!c->present || !c->slot) {
		free(c->present);
		free(c->slot);
		free(c);
		return NULL;
	}
	c->idx = idx;
	c->seq = in->chunk_seq++;
	memmove(&in->chunks[pos + 1], &in->chunks[pos],
		(size_t)(in->nchunks - pos) * sizeof(*in->chunks));
	in->chunks[pos] = c;
	in->nchunks++;
	return c;
}

/* Make room for one more slot (the buffer doubles, or grows at once to
 * `want` more slots when the write adding pages brings that many: growing
 * copies the pages held, so a 1 MiB write into an empty chunk would
 * otherwise copy its pages about once more; a chunk whose pages were
 * dropped and added again may need more slots than pages: then it is
 * compacted first, in page order).  Returns the free slot or -ENOMEM. */
static int chunk_slot_new(struct fs *fs, struct fs_inode *in, struct fs_chunk *c,
			  uint32_t want)
{
	if (c->nslots < c->cap)
		return (int)c->nslots++;
	uint32_t cap = c->cap ? ZF_MIN(2 * c->cap, fs->pages_per_chunk) : 1;
	cap = ZF_MAX(cap, (uint32_t)ZF_MIN((uint64_t)c->nslots + want, fs->pages_per_chunk));
	if (cap == c->cap && c->npresent < c->cap)
		cap = c->cap;	/* full size already: compact into a new one */
	else if (cap == c->cap)
		return -ENOMEM;	/* cannot happen: a free page has no slot */
	uint8_t *nb = zdev_buf_alloc((size_t)cap * fs->bs);
	if (!nb)
		return -ENOMEM;
	uint32_t n = 0;
	for (uint32_t i = 0; i < fs->pages_per_chunk && n < c->npresent; i++) {
		if (!page_present(c, i))
			continue;
		memcpy(nb + (size_t)n * fs->bs, slot_buf(fs, c, i), fs->bs);
		c->slot[i] = n++;
	}
	chunk_buf_release(c);
	c->nslots = n;
	uint64_t added = (uint64_t)(cap - c->cap) * fs->bs;
	in->buffered += added;
	fs->buffered += added;
	c->buf = nb;
	c->cap = cap;
	return (int)c->nslots++;
}

/* A new chunk idx whose pages are all at p, inside donor d (a reference is
 * taken): a whole chunk written at once is buffered without a copy.
 * [RW excl] */
static int chunk_adopt(struct fs *fs, struct fs_inode *in, uint64_t idx,
		       struct fs_donor *d, uint8_t *p)
{
	struct fs_chunk *c = chunk_get(fs, in, idx);
	if (!c)
		return -ENOMEM;
	uint32_t n = fs->pages_per_chunk;
	atomic_fetch_add(&d->refs, 1);
	c->donor = d;
	c->buf = p;
	c->cap = c->nslots = c->npresent = n;
	in->ncomplete++;
	for (uint32_t i = 0; i < n; i++) {
		c->slot[i] = i;
		c->present[i / 64] |= 1ull << (i % 64);
	}
	in->buffered += fs->opts.stripe_unit;
	fs->buffered += fs->opts.stripe_unit;
	return 0;
}

/* Free c's memory; its place in in->chunks is the caller's. */
static void chunk_release(struct fs *fs, struct fs_inode *in, struct fs_chunk *c)
{
	uint64_t bytes = (uint64_t)c->cap * fs->bs;
	in->buffered -= bytes;
	fs->buffered -= bytes;
	in->ncomplete -= c->npresent == fs->pages_per_chunk;
	chunk_buf_release(c);
	free(c->present);
	free(c->slot);
	free(c);
}

static void chunk_free(struct fs *fs, struct fs_inode *in, struct fs_chunk *c)
{
	uint32_t pos = chunk_pos(in, c->idx);
	memmove(&in->chunks[pos], &in->chunks[pos + 1],
		(size_t)(in->nchunks - pos - 1) * sizeof(*in->chunks));
	in->nchunks--;
	chunk_release(fs, in, c);
}

/* Forget page i of c (its bytes are no longer buffered); c stays, even
 * when it holds no page now. */
static void page_forget(struct fs *fs, struct fs_inode *in, struct fs_chunk *c, uint32_t i)
{
	if (!page_present(c, i))
		return;
	in->ncomplete -= c->npresent == fs->pages_per_chunk;
	c->present[i / 64] &= ~(1ull << (i % 64));
	c->npresent--;
}

/* Remove the entries of in->chunks[from, to) set to NULL (their chunks
 * released): one move of the array's tail for all of them. */
static void chunks_compact(struct fs_inode *in, uint32_t from, uint32_t to)
{
	uint32_t w = from;
	for (uint32_t i = from; i < to; i++)
		if (in->chunks[i])
			in->chunks[w++] = in->chunks[i];
	memmove(&in->chunks[w], &in->chunks[to], (size_t)(in->nchunks - to) * sizeof(*in->chunks));
	in->nchunks -= to - w;
}

/* Drop buffered pages of blocks starting at or after `from` (bytes). */
void fs_data_drop_buffers(struct fs *fs, struct fs_inode *in, uint64_t from)
{
	uint32_t first = chunk_pos(in, from / fs->opts.stripe_unit), n = in->nchunks;

	for (uint32_t k = first; k < n; k++) {
		struct fs_chunk *c = in->chunks[k];
		uint64_t cstart = c->idx * fs->opts.stripe_unit;
		if (cstart < from) {	/* the chunk `from` is inside */
			uint32_t p0 = (uint32_t)((from - cstart + fs->bs - 1) / fs->bs);
			for (uint32_t i = p0; i < fs->pages_per_chunk; i++)
				page_forget(fs, in, c, i);
			if (c->npresent)
				continue;
		}
		chunk_release(fs, in, c);
		in->chunks[k] = NULL;
	}
	if (first < n)
		chunks_compact(in, first, n);
	if (in->nchunks == 0) {	/* an empty buffer keeps no array */
		free(in->chunks);
		in->chunks = NULL;
		in->chunks_cap = 0;
	}
}

void fs_data_drop_range(struct fs *fs, struct fs_inode *in, uint64_t from, uint64_t to)
{
	for (uint64_t blk = from / fs->bs; blk < to / fs->bs && in->nchunks; blk++) {
		struct fs_chunk *c = chunk_find(in, blk / fs->pages_per_chunk);
		if (c) {
			page_forget(fs, in, c, (uint32_t)(blk % fs->pages_per_chunk));
			if (c->npresent == 0)
				chunk_free(fs, in, c);
		}
	}
}

/* ---- device reads ---- */

/* Fill buf (aligned) with file bytes [off, off+len) (block-aligned) from the
 * extents; holes read as zeros.  Buffered pages are NOT applied.  Runs with
 * inode->rw held (shared or exclusive). */
static int read_extents(struct fs *fs, struct fs_inode *in, uint64_t off,
			uint64_t len, uint8_t *buf)
{
	struct zdev_req reqs[MAX_BATCH];
	unsigned n = 0;
	uint64_t pos = off, end = off + len;
	struct extmap_cur c;
	const struct extmap_ext *e = extmap_seek(&in->map, off, &c);
	int ret = 0;

	while (pos < end) {
		if (!e || e->off >= end) {
			memset(buf + (pos - off), 0, end - pos);
			break;
		}
		if (e->off > pos) {
			memset(buf + (pos - off), 0, e->off - pos);
			pos = e->off;
		}
		uint64_t seg_end = ZF_MIN(end, e->off + e->len);
		reqs[n++] = (struct zdev_req){
			.op = ZDEV_OP_READ, .offset = e->dev + (pos - e->off),
			.buf = buf + (pos - off), .len = seg_end - pos };
		pos = seg_end;
		e = extmap_next(&in->map, &c);
		if (n == MAX_BATCH || pos >= end) {
			int r = zdev_io_batch(fs->dev, reqs, n);
			if (r < 0)
				return r;
			for (unsigned k = 0; k < n; k++)
				if (reqs[k].result < 0)
					ret = (int)reqs[k].result;
			if (ret)
				return ret;
			n = 0;
		}
	}
	if (n) {
		int r = zdev_io_batch(fs->dev, reqs, n);
		if (r < 0)
			return r;
		for (unsigned k = 0; k < n; k++)
			if (reqs[k].result < 0)
				ret = (int)reqs[k].result;
	}
	if (ret)
		zf_err("inode %llu: device read failed: %s",
		       (unsigned long long)in->ino, strerror(-ret));
	return ret;
}

/* Get the page of block `blk`, creating it if needed; `want`: pages the
 * caller is about to add to this chunk (room for them is made at once).
 * fill: the caller writes part of the page, so a new page holds the
 * device's bytes (zeros beyond the file size); without it the caller
 * overwrites the whole page and a new page's bytes are left as they are.
 * The page is stored in *page (page may be NULL).  -ENOMEM, or the
 * device's error when its bytes cannot be read. [RW excl] */
static int page_get(struct fs *fs, struct fs_inode *in, uint64_t blk, bool fill,
		    uint32_t want, uint8_t **page)
{
	uint64_t idx = blk / fs->pages_per_chunk;
	uint32_t pi = (uint32_t)(blk % fs->pages_per_chunk);
	struct fs_chunk *c = chunk_get(fs, in, idx);
	if (!c)
		return -ENOMEM;
	if (page_present(c, pi)) {
		if (page)
			*page = slot_buf(fs, c, pi);
		return 0;
	}
	int sl = chunk_slot_new(fs, in, c, want);
	if (sl < 0) {
		if (c->npresent == 0)
			chunk_free(fs, in, c);
		return -ENOMEM;
	}
	uint8_t *p = c->buf + (size_t)sl * fs->bs;
	uint64_t start = blk * fs->bs;
	if (fill && start < in->size) {
		int err = read_extents(fs, in, start, fs->bs, p);
		if (err) {
			if (c->npresent == 0)
				chunk_free(fs, in, c);
			return err;
		}
		if (in->size - start < fs->bs)
			memset(p + (in->size - start), 0, fs->bs - (in->size - start));
	} else if (fill) {
		memset(p, 0, fs->bs);
	}
	c->slot[pi] = (uint32_t)sl;
	c->present[pi / 64] |= 1ull << (pi % 64);
	c->npresent++;
	in->ncomplete += c->npresent == fs->pages_per_chunk;
	if (page)
		*page = p;
	return 0;
}

/* Make the bytes of the last block beyond the current size zero in the
 * buffer, before the size grows past them. [RW excl] */
int fs_data_zero_tail(struct fs *fs, struct fs_inode *in)
{
	if (in->size % fs->bs == 0)
		return 0;
	return page_get(fs, in, in->size / fs->bs, true, 1, NULL);
}

/* ---- writing chunks to zones ---- */

struct run { uint64_t file_off, stage_off, len; };
struct part { uint32_t chunk; uint64_t stage_off, len; };

struct stage {
	uint8_t *buf;		/* the bytes to write */
	bool owned;		/* buf was allocated for staging */
	uint64_t len;
	struct run *runs;
	uint32_t nruns;
};

/* The chunk's dirty pages as runs, in file order.  When their slots are
 * in that order too (the pages came in order: sequential writes), they
 * are written straight from the chunk buffer; else they are gathered into
 * a staging buffer. */
static int stage_chunk(struct fs *fs, struct fs_chunk *c, struct stage *s)
{
	s->len = (uint64_t)c->npresent * fs->bs;
	s->runs = calloc(c->npresent, sizeof(*s->runs));
	s->nruns = 0;
	s->owned = false;
	if (!s->runs)
		return -ENOMEM;
	uint64_t so = 0;
	uint32_t first = UINT32_MAX;
	bool in_place = true;
	for (uint32_t i = 0; i < fs->pages_per_chunk && so < s->len; i++) {
		if (!page_present(c, i))
			continue;
		uint64_t fo = c->idx * fs->opts.stripe_unit + (uint64_t)i * fs->bs;
		struct run *r = s->nruns ? &s->runs[s->nruns - 1] : NULL;
		if (r && r->file_off + r->len == fo)
			r->len += fs->bs;
		else
			s->runs[s->nruns++] = (struct run){ fo, so, fs->bs };
		if (first == UINT32_MAX)
			first = c->slot[i];
		in_place = in_place && c->slot[i] == first + so / fs->bs;
		so += fs->bs;
	}
	if (in_place) {
		s->buf = c->buf + (size_t)first * fs->bs;
		return 0;
	}
	s->buf = zdev_buf_alloc(s->len);
	if (!s->buf)
		return -ENOMEM;
	s->owned = true;
	so = 0;
	for (uint32_t i = 0; i < fs->pages_per_chunk && so < s->len; i++) {
		if (!page_present(c, i))
			continue;
		memcpy(s->buf + so, slot_buf(fs, c, i), fs->bs);
		so += fs->bs;
	}
	return 0;
}

/* Record the extents for stage bytes [so, so+len) written at device `dev`.
 * Log first, and nothing that can fail after the append: the extent map's
 * room is reserved before the EXTENT record is appended, so a record in
 * the log is always applied and its bytes counted valid (an extent logged
 * but not counted would let zalloc reset its zone while the log still
 * maps it).  On an error nothing more is recorded and the bytes not
 * recorded are discarded (zalloc_discard); the chunks stay buffered and
 * are written again. */
static int record_extents(struct fs *fs, struct fs_inode *in, const struct stage *s,
			  uint64_t so, uint64_t len, uint64_t dev)
{
	int ret = 0;
	pthread_mutex_lock(&fs->lock);
	for (uint32_t k = 0; k < s->nruns && !ret; k++) {
		const struct run *r = &s->runs[k];
		uint64_t a = ZF_MAX(so, r->stage_off);
		uint64_t b = ZF_MIN(so + len, r->stage_off + r->len);
		if (a >= b)
			continue;
		uint64_t fo = r->file_off + (a - r->stage_off);
		uint64_t d = dev + (a - so);
		uint64_t size_min = ZF_MIN(in->size, fo + (b - a));
		ret = extmap_reserve(&in->map, 2);	/* a set splits one extent in 3 */
		if (!ret)
			ret = fs_log_extent(fs, in->ino, fo, b - a, d, size_min);
		if (ret) {
			/* What no record references is given up, so that it
			 * does not keep its zone from being reset. */
			zalloc_discard(fs->za, d, dev + len - d);
			break;
		}
		zalloc_valid_add(fs->za, d, b - a);
		ret = fs_apply_extent(fs, in, fo, b - a, d, size_min);	/* room reserved */
	}
	pthread_mutex_unlock(&fs->lock);
	if (ret)
		zf_warn("inode %llu: %llu bytes written at %llu not recorded (%s); "
			"they stay buffered and are written again",
			(unsigned long long)in->ino, (unsigned long long)len,
			(unsigned long long)dev, strerror(-ret));
	return ret;
}

/* Zones a write-out of this file may write in parallel: the mount's
 * stripe_width, bounded by what the allocator can give the class now.
 * - MEDIUM files are striped (flush and L0/L1 compaction outputs, big
 *   files of unknown kind).
 * - SHORT files (the WAL) stay in one zone while that zone keeps up: their
 *   appends are small, fsync'ed or paced by the writer, and a WAL spread
 *   over N zones leaves N zones holding the start of the live WAL at every
 *   WAL switch instead of one (the collector's victims at 80% full).  When
 *   a writer finds a complete chunk while the file's write-out is still
 *   busy -- it streams faster than one zone absorbs -- the next 2 x
 *   stripe_width chunks are striped (in->wb_press): with the kernel's
 *   writeback cache, one stream held to one zone's speed stalls every
 *   writer of the mount (the FUSE bdi's dirty limit is shared; figures in
 *   docs/bench.md, "What is striped").
 * - NONE (small bookkeeping files) and LONG, EXTREME (deep LSM levels) are
 *   not striped: the latter die one by one, and striping over N zones
 *   puts N times as many files into every zone, so fewer zones die whole
 *   (docs/placement.md). */
static unsigned stripe_width(struct fs *fs, struct fs_inode *in)
{
	bool striped = in->cls == LIFETIME_MEDIUM ||
		       (in->cls == LIFETIME_SHORT && in->wb_press);

	if (fs->opts.stripe_width <= 1 || !striped)
		return 1;
	unsigned w = zalloc_stripe_width(fs->za, (enum lifetime_class)in->cls);
	return ZF_MAX(1u, ZF_MIN(w, fs->opts.stripe_width));
}

/* ---- the write-out in flight ---- */

/* Wait for the end of the write-out in flight, if any: in->rw is released
 * while waiting and re-taken (exclusive), and another writer may have
 * started the next write-out before we got it back.  [RW excl, drops] */
static void wait_one(struct fs_inode *in)
{
	if (!in->wb_busy)
		return;
	uint64_t gen = in->wb_done;
	zf_will_block();
	pthread_mutex_lock(&in->wb_lock);
	pthread_rwlock_unlock(&in->rw);
	while (in->wb_done == gen)
		pthread_cond_wait(&in->wb_cond, &in->wb_lock);
	pthread_mutex_unlock(&in->wb_lock);
	pthread_rwlock_wrlock(&in->rw);
}

/* Return with no write-out in flight (hence the loop).  The caller must
 * re-read what it looked at.  [RW excl, drops] */
void fs_data_wait_writeout(struct fs_inode *in)
{
	while (in->wb_busy)
		wait_one(in);
}

static void wb_set(struct fs_inode *in, bool busy)
{
	pthread_mutex_lock(&in->wb_lock);
	in->wb_busy = busy;
	if (!busy) {
		in->wb_done++;
		pthread_cond_broadcast(&in->wb_cond);
	}
	pthread_mutex_unlock(&in->wb_lock);
}

/* Is a chunk holding file bytes [from, to) part of the write-out? [RW] */
static bool range_busy(struct fs *fs, struct fs_inode *in, uint64_t from, uint64_t to)
{
	if (!in->wb_busy || from >= to)
		return false;
	uint64_t i1 = (to - 1) / fs->opts.stripe_unit;
	for (uint32_t k = chunk_pos(in, from / fs->opts.stripe_unit);
	     k < in->nchunks && in->chunks[k]->idx <= i1; k++)
		if (in->chunks[k]->busy)
			return true;
	return false;
}

/* Leases for up to `width` parts of class cls.  On -ENOSPC, zones freed by
 * earlier deletes may only be waiting for a commit to reset: commit and
 * try once more. */
static int acquire_stripe(struct fs *fs, enum lifetime_class cls, unsigned width,
			  struct zalloc_lease *leases)
{
	int nl = zalloc_acquire_many(fs->za, cls, fs->opts.stripe_unit, width, leases);
	if (nl == -ENOSPC) {
		struct zalloc_stats zs;
		zalloc_get_stats(fs->za, &zs);
		if (zs.pending_resets && fs_commit(fs) == 0)
			nl = zalloc_acquire_many(fs->za, cls, fs->opts.stripe_unit, width, leases);
	}
	if (nl < 0 && nl != -ENOSPC)
		zf_err("zone allocation failed: %s", strerror(-nl));
	return nl;
}

/* The batch's writes are done (r: zdev_io_batch's result): record the
 * extents of what was written, give the leases back, and advance the
 * parts.  [RW excl]  Returns the first error. */
static int finish_stripe(struct fs *fs, struct fs_inode *in, struct stage *st,
			 struct part *parts, struct zalloc_lease *leases,
			 struct zdev_req *reqs, int nl, int r)
{
	int ret = 0;

	for (int j = 0; j < nl; j++) {
		struct part *p = &parts[j];
		ssize_t res = r < 0 ? r : reqs[j].result;
		if (res < 0) {
			zalloc_release(fs->za, &leases[j], 0, (int)res);
			zf_err("inode %llu: data write at %llu failed: %s",
			       (unsigned long long)in->ino,
			       (unsigned long long)leases[j].offset, strerror((int)-res));
			if (!ret)
				ret = (int)res;
			continue;
		}
		/* Account the bytes before the lease goes back: a zone
		 * released full with no valid byte could be reset. */
		int e = record_extents(fs, in, &st[p->chunk], p->stage_off,
				       reqs[j].len, reqs[j].offset);
		zalloc_release(fs->za, &leases[j], reqs[j].len, 0);
		fs->data_bytes += reqs[j].len;
		if (e && !ret)
			ret = e;
		p->stage_off += reqs[j].len;
		p->len -= reqs[j].len;
	}
	return ret;
}

/* Write the given chunks (all their pages) to zones of the file's class,
 * striping over up to max_width zones at once (stripe_width()): the write-out.
 *
 * Called with in->rw exclusive and no write-out in flight.  The chunks are
 * staged and marked busy (they stay in the buffer, so reads still find
 * their bytes; writers wait instead of changing them), then in->rw is
 * released for the device I/O and re-taken after each round of it to
 * record the extents of what was written (log record, extent map, valid
 * bytes: only after the data write completed).  On success the
 * chunks are freed; on an error they stay buffered (not busy) and the
 * next flush writes them again.  Returns with in->rw exclusive.
 * [RW excl, drops] */
static int write_chunks(struct fs *fs, struct fs_inode *in, struct fs_chunk **cs, uint32_t n,
			unsigned max_width)
{
	struct stage *st = calloc(n, sizeof(*st));
	struct part *parts = calloc(n, sizeof(*parts));
	uint32_t head = 0, nparts = n;
	int ret = 0;

	if (!st || !parts) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n && !ret; i++) {
		ret = stage_chunk(fs, cs[i], &st[i]);
		parts[i] = (struct part){ i, 0, st[i].len };
	}
	if (ret)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		cs[i]->busy = true;
	wb_set(in, true);
	enum lifetime_class cls = (enum lifetime_class)in->cls;
	pthread_rwlock_unlock(&in->rw);

	while (!ret && head < nparts) {
		struct zalloc_lease leases[MAX_BATCH];
		struct zdev_req reqs[MAX_BATCH];
		unsigned width = ZF_MIN(max_width, ZF_MIN(nparts - head, (uint32_t)MAX_BATCH));
		if (width == 0)
			width = 1;
		int nl = acquire_stripe(fs, cls, width, leases);
		if (nl < 0) {
			ret = nl;
			break;
		}
		for (int j = 0; j < nl; j++) {
			struct part *p = &parts[head + (uint32_t)j];
			uint64_t len = ZF_MIN(p->len, leases[j].len);
			reqs[j] = (struct zdev_req){
				.op = ZDEV_OP_WRITE, .offset = leases[j].offset,
				.buf = st[p->chunk].buf + p->stage_off, .len = len };
		}
		/* The device I/O, with in->rw released: other writers fill the
		 * next stripe meanwhile. */
		int r = zdev_io_batch(fs->dev, reqs, (unsigned)nl);
		pthread_rwlock_wrlock(&in->rw);
		ret = finish_stripe(fs, in, st, parts + head, leases, reqs, nl, r);
		pthread_rwlock_unlock(&in->rw);
		/* Parts fully written leave the queue; partial ones go again. */
		uint32_t w = head;
		for (uint32_t k = head; k < nparts; k++)
			if (parts[k].len)
				parts[w++] = parts[k];
		nparts = w;
	}
	pthread_rwlock_wrlock(&in->rw);
	if (ret) {
		for (uint32_t i = 0; i < n; i++)
			cs[i]->busy = false;
	} else {
		/* The busy chunks are exactly cs[0, n) (one write-out at a
		 * time): free them in one pass over their span of the array. */
		uint64_t i0 = UINT64_MAX, i1 = 0;
		for (uint32_t i = 0; i < n; i++) {
			i0 = ZF_MIN(i0, cs[i]->idx);
			i1 = ZF_MAX(i1, cs[i]->idx);
		}
		uint32_t lo = chunk_pos(in, i0), hi = n ? chunk_pos(in, i1) + 1 : lo;
		for (uint32_t k = lo; k < hi; k++) {
			if (in->chunks[k]->busy) {
				chunk_release(fs, in, in->chunks[k]);
				in->chunks[k] = NULL;
			}
		}
		chunks_compact(in, lo, hi);
	}
	/* A read-ahead window filled while these pages were buffered holds the
	 * old device bytes for them; the overlay is gone now, so drop it. */
	fs_pf_invalidate(fs, in);
	wb_set(in, false);
out:
	if (st) {
		for (uint32_t i = 0; i < n; i++) {
			if (st[i].owned)
				zdev_buf_free(st[i].buf);
			free(st[i].runs);
		}
	}
	free(st);
	free(parts);
	return ret;
}

int fs_data_writeout(struct fs *fs, struct fs_inode *in, bool all)
{
	struct fs_chunk *list[MAX_BATCH];
	uint32_t n, held;

	while (!all) {
		/* Complete chunks with no unwritten gap before them, in order;
		 * everything complete once too many wait.  Chunks of the
		 * write-out in flight cover their range. */
		if (in->ncomplete == 0)
			return 0;	/* what follows would find no chunk to write */
		uint64_t expect = extmap_end(&in->map);
		n = held = 0;
		for (uint32_t k = 0; k < in->nchunks; k++) {
			struct fs_chunk *c = in->chunks[k];
			uint64_t start = c->idx * fs->opts.stripe_unit;
			if (c->busy) {
				if (start <= expect)
					expect = ZF_MAX(expect, start + fs->opts.stripe_unit);
				continue;
			}
			if (c->npresent != fs->pages_per_chunk)
				continue;
			if (start <= expect) {
				expect = ZF_MAX(expect, start + fs->opts.stripe_unit);
				if (n < MAX_BATCH)
					list[n++] = c;
			} else {
				held++;
			}
		}
		if (held > fs->opts.reorder_chunks) {
			n = 0;
			for (uint32_t k = 0; k < in->nchunks && n < MAX_BATCH; k++)
				if (!in->chunks[k]->busy &&
				    in->chunks[k]->npresent == fs->pages_per_chunk)
					list[n++] = in->chunks[k];
		}
		/* Striping: wait until a full stripe of chunks is ready, then
		 * write them to that many zones at once. */
		unsigned w = stripe_width(fs, in);
		if (held <= fs->opts.reorder_chunks) {
			if (n < w)
				return 0;
			n -= n % w;	/* whole stripes; the rest joins the next */
		}
		if (n == 0)
			return 0;
		/* One write-out at a time per file (the file writes at most
		 * stripe_width zones at once): wait for the one in flight, then
		 * look again (another writer may have taken these chunks). */
		if (in->wb_busy) {
			in->wb_press = 2 * fs->opts.stripe_width;
			wait_one(in);
			continue;
		}
		in->wb_press -= ZF_MIN(in->wb_press, n);
		return write_chunks(fs, in, list, n, w);
	}
	/* Everything buffered now (chunks created before this call, including
	 * the write-out in flight), not what concurrent writers add meanwhile:
	 * an fsync does not chase a busy writer. */
	uint64_t lim = in->chunk_seq;
	for (;;) {
		bool any = false;
		for (uint32_t k = 0; k < in->nchunks && !any; k++)
			any = in->chunks[k]->seq < lim;
		if (!any)
			return 0;
		if (in->wb_busy) {
			wait_one(in);
			continue;
		}
		n = 0;
		for (uint32_t k = 0; k < in->nchunks && n < MAX_BATCH; k++)
			if (in->chunks[k]->seq < lim)
				list[n++] = in->chunks[k];
		int ret = write_chunks(fs, in, list, n, stripe_width(fs, in));
		if (ret)
			return ret;
	}
}

/* ---- the public data operations ---- */

/* A regular file pinned (fs_inode_pin), or NULL with *err. */
static struct fs_inode *pin_reg(struct fs *fs, uint64_t ino, int *err)
{
	struct fs_inode *in = fs_inode_pin(fs, ino);
	*err = !in ? -ENOENT : S_ISDIR(in->mode) ? -EISDIR : !S_ISREG(in->mode) ? -EINVAL : 0;
	if (in && *err)
		fs_inode_unpin(fs, in);
	return *err ? NULL : in;
}


int fs_data_check(const struct fs *fs, const struct fs_inode *in)
{
	uint32_t complete = 0;
	uint64_t bytes = 0;

	if (in->nchunks > in->chunks_cap)
		return -EUCLEAN;
	for (uint32_t k = 0; k < in->nchunks; k++) {
		const struct fs_chunk *c = in->chunks[k];
		uint32_t n = 0;
		if (k && in->chunks[k - 1]->idx >= c->idx)
			return -EUCLEAN;
		for (uint32_t i = 0; i < fs->pages_per_chunk; i++)
			n += page_present(c, i);
		if (n != c->npresent || n == 0)
			return -EUCLEAN;
		complete += n == fs->pages_per_chunk;
		bytes += (uint64_t)c->cap * fs->bs;
	}
	return complete == in->ncomplete && bytes == in->buffered ? 0 : -EUCLEAN;
}

bool fs_data_buffered(const struct fs *fs, const struct fs_inode *in, uint64_t from, uint64_t to)
{
	if (from >= to)
		return false;
	uint32_t k = chunk_pos(in, from / fs->opts.stripe_unit);
	return k < in->nchunks && in->chunks[k]->idx <= (to - 1) / fs->opts.stripe_unit;
}

void fs_rbuf_put(struct fs_rbuf *rb)
{
	zdev_buf_free(rb->own);
	fs_pf_data_put(rb->ref);
	if (rb->held) {
		pthread_rwlock_unlock(&rb->held->rw);
		fs_inode_unpin(rb->fs, rb->held);
	}
	*rb = (struct fs_rbuf){ 0 };
}

/* The read [off, off+size) as a range of the device's file, when one
 * extent holds all of it.  [RW shared] */
static bool read_at_fd(struct fs *fs, struct fs_inode *in, uint64_t off, size_t size,
		       struct fs_rbuf *rb)
{
	struct extmap_cur c;
	const struct extmap_ext *e = extmap_seek(&in->map, off, &c);
	if (!e || e->off > off || off + size > e->off + e->len)
		return false;
	int fd = zdev_read_fd(fs->dev, e->dev + (off - e->off), size, &rb->fd_off);
	if (fd < 0)
		return false;
	rb->at_fd = true;
	rb->fd = fd;
	return true;
}

ssize_t fs_read_buf(struct fs *fs, uint64_t ino, uint64_t off, size_t size,
		    unsigned flags, struct fs_rbuf *rb)
{
	int err;
	struct fs_inode *in = pin_reg(fs, ino, &err);
	ssize_t ret;

	*rb = (struct fs_rbuf){ 0 };
	if (!in)
		return err;
	pthread_rwlock_rdlock(&in->rw);
	uint64_t fsize = in->size;
	if (off >= fsize || size == 0) {
		ret = 0;
		goto out;
	}
	size = (size_t)ZF_MIN((uint64_t)size, fsize - off);
	uint64_t a0 = ZF_ALIGN_DOWN(off, fs->bs);
	uint64_t a1 = ZF_ALIGN_UP(off + size, fs->bs);
	/* Without buffered pages to lay over them, the bytes of a read-ahead
	 * window are sent as they are (no copy). */
	bool overlay = fs_data_buffered(fs, in, a0, a1);
	if ((flags & FS_READ_FD) && !overlay && read_at_fd(fs, in, off, size, rb)) {
		rb->fs = fs;
		rb->held = in;	/* read-locked and pinned until fs_rbuf_put */
		fs->zc_read_bytes += size;
		return (ssize_t)size;
	}
	bool hit = !overlay && fs_pf_read(fs, in, a0, a1 - a0, NULL, rb);
	if (hit) {
		rb->p += off - a0;
		ret = (ssize_t)size;
		goto out;
	}
	uint8_t *bounce = zdev_buf_alloc(a1 - a0);
	if (!bounce) {
		ret = -ENOMEM;
		goto out;
	}
	/* One fs_pf_read per READ: it counts sequential reads. */
	if (overlay)
		hit = fs_pf_read(fs, in, a0, a1 - a0, bounce, NULL);
	ret = hit ? 0 : read_extents(fs, in, a0, a1 - a0, bounce);
	if (!ret && overlay) {
		/* Buffered pages are newer than the device. */
		for (uint64_t blk = a0 / fs->bs; blk < a1 / fs->bs; blk++) {
			struct fs_chunk *c = chunk_find(in, blk / fs->pages_per_chunk);
			uint8_t *p = c ? chunk_page(fs, c, (uint32_t)(blk % fs->pages_per_chunk)) : NULL;
			if (p)
				memcpy(bounce + (blk * fs->bs - a0), p, fs->bs);
		}
	}
	if (ret) {
		zdev_buf_free(bounce);
	} else {
		rb->own = bounce;
		rb->p = bounce + (off - a0);
		ret = (ssize_t)size;
	}
out:
	pthread_rwlock_unlock(&in->rw);
	fs_inode_unpin(fs, in);
	return ret;
}

ssize_t fs_read(struct fs *fs, uint64_t ino, uint64_t off, size_t size, void *buf)
{
	struct fs_rbuf rb;
	ssize_t ret = fs_read_buf(fs, ino, off, size, 0, &rb);
	if (ret > 0)
		memcpy(buf, rb.p, (size_t)ret);
	fs_rbuf_put(&rb);
	return ret;
}

/* A data change by someone else (a write, fallocate, the destination of
 * copy_file_range) drops the file's privileges before the data changes:
 * its capability (security.capability) and the set-user-ID bit (and
 * set-group-ID when group execution is on), as the kernel does for a local
 * file system.  Log first: the records must be in the log before the data
 * changes (else a crash could bring them back over new data); fs_log_attr()
 * logs the inode as it is, so the new mode is set for the append under
 * fs->lock (no one sees it meanwhile) and put back when the append fails.
 * 1 if something was dropped, 0 if there was nothing to drop, or -errno
 * (the mode unchanged; the capability may be gone: a crash could leave
 * that too, and it only takes a privilege away). */
static int drop_priv(struct fs *fs, struct fs_inode *in)
{
	static const char cap[] = "security.capability";
	int ret = 0, changed = 0;

	pthread_mutex_lock(&fs->lock);
	if (fs_xattr_find(in, cap)) {
		ret = fs_log_xattr_del(fs, in->ino, cap);
		if (!ret) {
			fs_apply_xattr_del(fs, in, cap);
			changed = 1;
		}
	}
	uint32_t mode = in->mode, nmode = fs_mode_kill_suidgid(mode);
	if (!ret && nmode != mode) {
		bool dirty = in->attr_dirty;
		in->mode = nmode;
		ret = fs_log_attr(fs, in);
		if (ret) {
			in->mode = mode;
			in->attr_dirty = dirty;
		} else {
			changed = 1;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return ret ? ret : changed;
}

int fs_kill_priv(struct fs *fs, uint64_t ino)
{
	int err;

	if (fs->read_only)
		return -EROFS;
	struct fs_inode *in = pin_reg(fs, ino, &err);
	if (!in)
		return err;
	err = drop_priv(fs, in);
	fs_inode_unpin(fs, in);
	return err;
}

/* Does a small file keep even its complete stripes buffered?  With the
 * write-behind on, a log that is closed and unlinked soon after (LevelDB's
 * 4 MiB, RocksDB's WAL of an 8 MiB memtable) then never reaches the zones
 * at all, as on a local file system, where it dies in the page cache.
 * Only while the file is at most HOLD_BYTES long (and its share of the
 * buffer: the write-behind's bound) and the buffer under a quarter full;
 * the size, not what is buffered, so that a large file does not write in
 * bursts of HOLD_BYTES.  The commit writes a held file out at age like any
 * dirty one.  [RW] */
#define HOLD_BYTES (16ull << 20)
static bool hold_stripes(const struct fs *fs, const struct fs_inode *in)
{
	return fs_write_behind_on(fs) && in->size <= ZF_MIN(HOLD_BYTES, fs_file_share(fs)) &&
	       fs->buffered <= fs->opts.buffer_bytes / 4;
}

/* The write-out a write leaves due: the full stripes it completed (unless
 * hold_stripes), and all of the file's buffers once it holds more than an
 * eighth of the buffer (one file may not hog it: first the write-out in
 * flight ends, back-pressure while the next stripe fills, then everything
 * goes).  Its errors are not the write's: the bytes stay buffered, and the
 * next release or write-behind, fsync or commit writes them again and
 * reports.  [RW excl, drops] */
static void settle(struct fs *fs, struct fs_inode *in)
{
	if (hold_stripes(fs, in))
		return;
	int fr = fs_data_writeout(fs, in, false);
	while (!fr && in->wb_busy && in->buffered > fs_file_share(fs))
		wait_one(in);
	if (!fr && in->buffered > fs_file_share(fs))
		fr = fs_data_writeout(fs, in, true);
	if (fr && fr != -ENOSPC)
		zf_warn("inode %llu: background write-out failed: %s",
			(unsigned long long)in->ino, strerror(-fr));
}

/* Room for `bytes` more of buffered data, `keep` more left free beyond
 * them: the allocator's one wait for space (zalloc_wait_room,
 * zonealloc/zalloc_space.c), which counts what this fs has buffered and
 * commits to reset zones that only wait for one.  0, or -ENOSPC.  No lock
 * held.  On 0 the bytes stay held against other writers' admissions until
 * zalloc_room_done(bytes), once fs->buffered counts them or the write gave
 * up (any lock may be held then). */
static uint64_t room_buffered(void *arg)
{
	return ((struct fs *)arg)->buffered;
}

static int room_commit(void *arg)
{
	return fs_commit(arg);
}

static int wait_room(struct fs *fs, uint64_t bytes, uint64_t keep)
{
	struct zalloc_room r = {
		.bytes = bytes, .keep = keep, .buffered = room_buffered,
		.commit = room_commit, .arg = fs,
	};

	return zalloc_wait_room(fs->za, &r);
}

static ssize_t write_common(struct fs *fs, uint64_t ino, uint64_t off, const void *buf,
			    struct fs_donor *donor, size_t size, unsigned int flags)
{
	int err;
	struct fs_inode *in;
	ssize_t ret = 0;

	if (fs->read_only)
		return -EROFS;
	if (off + size < off || off + size > (1ull << 50))
		return -EFBIG;
	in = pin_reg(fs, ino, &err);
	if (!in)
		return err;
	if (size == 0)
		goto unpin_out;
	/* Room for it once written, or wait while the collector can make
	 * some (no lock held). */
	uint64_t own = 0, admitted;
	if (fs->pa_bytes) {	/* its own fallocated ranges are room it has */
		pthread_mutex_lock(&fs->lock);
		own = fs_pa_overlap(in, off, size);
		pthread_mutex_unlock(&fs->lock);
	}
	admitted = size - own;
	ret = wait_room(fs, admitted,
			(flags & FS_WRITE_PAGECACHE ? 0 : fs_dirty_keep(fs)) +
			(fs->pa_bytes - ZF_MIN(own, fs->pa_bytes)));
	if (ret)
		goto unpin_out;
	fs_rw_wrlock(in);
	/* Pages of the write-out in flight are read-only until it ends. */
	while (range_busy(fs, in, off, off + size) ||
	       (off > in->size && range_busy(fs, in, in->size, in->size + 1)))
		wait_one(in);
	fs_pf_invalidate(fs, in);
	if (((flags & FS_WRITE_PAGECACHE) && off + size > in->wb_cut && (ret = in->wb_cut_err)) ||
	    ((flags & FS_WRITE_KILL_PRIV) && (ret = ZF_MIN(drop_priv(fs, in), 0))) ||
	    (off > in->size && (ret = fs_data_zero_tail(fs, in)))) {
		zalloc_room_done(fs->za, admitted);
		goto unlock;
	}
	if ((flags & FS_WRITE_PAGECACHE) && off + size > in->size &&
	    in->wb_grow_from == UINT64_MAX)
		in->wb_grow_from = in->size;
	const uint8_t *src = buf;
	uint64_t pos = off, end = off + size, su = fs->opts.stripe_unit;
	while (pos < end) {
		if (donor && pos % su == 0 && end - pos >= su && !chunk_find(in, pos / su)) {
			if (chunk_adopt(fs, in, pos / su, donor, donor->base + (pos - off))) {
				ret = pos > off ? (ssize_t)(pos - off) : -ENOMEM;
				break;
			}
			pos += su;
			fs->zc_write_bytes += su;
			continue;
		}
		uint64_t blk = pos / fs->bs, bo = pos % fs->bs;
		uint64_t n = ZF_MIN(end - pos, fs->bs - bo);
		bool partial = bo != 0 || n != fs->bs;
		/* pages of this write from blk to the end of its chunk */
		uint64_t cend = ZF_MIN(end, (blk / fs->pages_per_chunk + 1) * fs->opts.stripe_unit);
		uint32_t want = (uint32_t)((cend - blk * fs->bs + fs->bs - 1) / fs->bs);
		uint8_t *p;
		int err = page_get(fs, in, blk, partial, want, &p);
		if (err) {
			ret = pos > off ? (ssize_t)(pos - off) : err;
			break;
		}
		memcpy(p + bo, src + (pos - off), n);
		pos += n;
	}
	if (pos > off) {
		pthread_mutex_lock(&fs->lock);
		if (pos > in->size)
			in->size = pos;
		/* Buffered blocks no longer need their fallocated room: the
		 * buffer counts them (replay, which has no buffer, releases
		 * them with their EXTENT record). */
		if (in->npa)
			fs_pa_sub(fs, in, ZF_ALIGN_DOWN(off, fs->bs),
				  ZF_ALIGN_UP(pos, fs->bs) - ZF_ALIGN_DOWN(off, fs->bs));
		in->mtime = in->ctime = fs_now();
		in->attr_dirty = true;
		fs_mark_dirty(fs, in);
		pthread_mutex_unlock(&fs->lock);
		fs->user_bytes += pos - off;
		fs->class_user_bytes[in->cls < LIFETIME_NR ? in->cls : 0] += pos - off;
		if (ret == 0)
			ret = (ssize_t)(pos - off);
	}
	zalloc_room_done(fs->za, admitted);	/* fs->buffered counts what was buffered */
	settle(fs, in);
unlock:
	pthread_rwlock_unlock(&in->rw);
	if (fs->buffered > fs->opts.buffer_bytes)
		fs_kick_committer(fs);
unpin_out:
	fs_inode_unpin(fs, in);
	return ret;
}

ssize_t fs_write(struct fs *fs, uint64_t ino, uint64_t off, const void *buf,
		 size_t size, unsigned int flags)
{
	return write_common(fs, ino, off, buf, NULL, size, flags);
}

ssize_t fs_write_donated(struct fs *fs, uint64_t ino, uint64_t off, struct fs_donor *d,
			 size_t size, unsigned int flags)
{
	return write_common(fs, ino, off, d->base, d, size, flags);
}

/* Whether the block holding byte off has bytes of its own: mapped,
 * buffered or fallocated (a hole reads zeros).  [RW] */
static bool block_stored(struct fs *fs, struct fs_inode *in, uint64_t off)
{
	struct extmap_cur c;
	const struct extmap_ext *e = extmap_seek(&in->map, off, &c);
	uint64_t blk = off / fs->bs;
	struct fs_chunk *ch = chunk_find(in, blk / fs->pages_per_chunk);
	bool pa = false;

	if (e && e->off <= off)
		return true;
	if (ch && chunk_page(fs, ch, (uint32_t)(blk % fs->pages_per_chunk)))
		return true;
	if (in->npa) {
		pthread_mutex_lock(&fs->lock);
		pa = fs_pa_overlap(in, blk * fs->bs, fs->bs) > 0;
		pthread_mutex_unlock(&fs->lock);
	}
	return pa;
}

int fs_writeback_refused(struct fs *fs, uint64_t ino, uint64_t off, int err)
{
	int ret;
	struct fs_inode *in = pin_reg(fs, ino, &ret);

	if (!in)
		return ret;
	fs_rw_wrlock(in);
	fs_data_wait_writeout(in);
	/* Write-back taken past the refusal meanwhile (WRITEs served out of
	 * order, buffered or already written out) would leave a hole where
	 * the refused bytes are: drop it.  Only bytes that grew the file
	 * since it was last fsync'ed, closed or truncated go, and only when
	 * the first of them is a hole (a refused rewrite leaves the old
	 * bytes, and appends past them stay). */
	uint64_t cut = ZF_MAX(off, in->wb_grow_from);
	if (in->size > cut && !fs->read_only && !block_stored(fs, in, cut))
		ret = fs_data_truncate(fs, in, cut);
	if (off < in->wb_cut) {
		in->wb_cut = off;
		in->wb_cut_err = err < 0 ? err : -EIO;
	}
	pthread_rwlock_unlock(&in->rw);
	fs_inode_unpin(fs, in);
	return ret;
}

/* The room kept for the kernel's dirty pages: the mount's dirty_reserve,
 * at most a sixteenth of the data zones' capacity (a reserve larger than
 * that would leave a small device nothing to write to directly). */
uint64_t fs_dirty_reserve(struct fs *fs)
{
	if (fs->dirty_reserve == UINT64_MAX) {	/* first call: the capacity is fixed */
		struct zalloc_stats zs;
		zalloc_get_stats(fs->za, &zs);
		fs->dirty_reserve = ZF_MIN(fs->opts.dirty_reserve, zs.capacity_bytes / 16);
	}
	return fs->dirty_reserve;
}

uint64_t fs_dirty_keep(struct fs *fs)
{
	return ZF_MIN(atomic_load(&fs->dirty_keep), fs_dirty_reserve(fs));
}

void fs_set_dirty_keep(struct fs *fs, uint64_t bytes)
{
	atomic_store(&fs->dirty_keep, bytes);
}

bool fs_space_low(struct fs *fs, unsigned int factor)
{
	struct zalloc_stats zs;
	uint64_t reserve = fs_dirty_reserve(fs);

	if (!reserve || fs->read_only)
		return false;
	zalloc_get_stats(fs->za, &zs);
	uint64_t promised = fs->buffered + zs.room_held_bytes + fs->pa_bytes;
	/* Dead bytes in zones the collector could pick now are room too: a
	 * writer short of free zones waits for it (zalloc_wait_room), it is
	 * not refused.  Else a device kept nearly full of garbage, as a busy
	 * database keeps it, would count as full, and every file opened for
	 * writing would bypass the page cache. */
	uint64_t room = zs.free_bytes + (fs->collector ? zs.gc_reclaimable_bytes : 0);
	return room < promised + factor * reserve;
}

/* Zero bytes [from, to) of block blk's buffered page, if it is buffered.
 * [RW excl] */
static void zero_in_page(struct fs *fs, struct fs_inode *in, uint64_t blk,
			 uint32_t from, uint32_t to)
{
	struct fs_chunk *c = chunk_find(in, blk / fs->pages_per_chunk);
	uint8_t *p = c ? chunk_page(fs, c, (uint32_t)(blk % fs->pages_per_chunk)) : NULL;
	if (p)
		memset(p + from, 0, to - from);
}

/* Log first: the TRUNCATE record is appended before any buffered byte is
 * dropped or zeroed, so a failed append (log full or broken) leaves the
 * file as it was.  What can fail before the append only adds: the page of
 * the new last block is made present (a copy of its bytes), and zeroed
 * after the append. */
int fs_data_truncate(struct fs *fs, struct fs_inode *in, uint64_t size)
{
	int ret = 0;

	if (size > (1ull << 50))
		return -EFBIG;
	/* Its extents would be recorded after the truncate: let it end. */
	fs_data_wait_writeout(in);
	/* The writer starts over below a refused write-back: take it. */
	if (size <= in->wb_cut)
		in->wb_cut = UINT64_MAX;
	in->wb_grow_from = UINT64_MAX;	/* the size is the caller's now */
	if (size == in->size) {
		/* Nothing changes but a fallocated range past the end, which a
		 * truncate gives back as on ext4 (RocksDB trims its tables'
		 * preallocated tails so); the times stay, the size did not
		 * change (POSIX). */
		uint64_t tail = ZF_ALIGN_UP(size, fs->bs);
		if (!in->npa || !fs_pa_overlap(in, tail, UINT64_MAX - tail))
			return 0;
		pthread_mutex_lock(&fs->lock);
		ret = fs_log_truncate(fs, in->ino, size);
		if (!ret)
			fs_apply_truncate(fs, in, size);
		pthread_mutex_unlock(&fs->lock);
		return ret;
	}
	fs_pf_invalidate(fs, in);
	bool shrink = size < in->size;
	if (!shrink)
		ret = fs_data_zero_tail(fs, in);	/* bytes beyond the size only */
	else if (size % fs->bs)
		ret = page_get(fs, in, size / fs->bs, true, 1, NULL);
	if (ret)
		return ret;
	pthread_mutex_lock(&fs->lock);
	ret = fs_log_truncate(fs, in->ino, size);
	if (!ret) {
		fs_apply_truncate(fs, in, size);
		in->mtime = in->ctime = fs_now();
	}
	pthread_mutex_unlock(&fs->lock);
	if (ret)
		return ret;
	if (shrink) {
		fs_data_drop_buffers(fs, in, ZF_ALIGN_UP(size, fs->bs));
		/* The new last block reads as zeros beyond the new size. */
		if (size % fs->bs)
			zero_in_page(fs, in, size / fs->bs, (uint32_t)(size % fs->bs), fs->bs);
	}
	if (in->buffered) {
		pthread_mutex_lock(&fs->lock);
		fs_mark_dirty(fs, in);
		pthread_mutex_unlock(&fs->lock);
	}
	return 0;
}

int fs_flush(struct fs *fs, uint64_t ino)
{
	int err;
	struct fs_inode *in = pin_reg(fs, ino, &err);
	if (!in)
		return err == -EISDIR || err == -EINVAL ? 0 : err;
	fs_rw_wrlock(in);
	err = fs_data_writeout(fs, in, true);
	pthread_rwlock_unlock(&in->rw);
	fs_inode_unpin(fs, in);
	return err;
}

int fs_fsync(struct fs *fs, uint64_t ino, bool datasync)
{
	int ret = 0;

	struct fs_inode *in = fs_inode_pin(fs, ino);
	if (!in)
		return -ENOENT;
	if (S_ISREG(in->mode)) {
		pthread_rwlock_wrlock(&in->rw);
		ret = fs_data_writeout(fs, in, true);
		if (!ret)	/* its bytes are promised now: see wb_grow_from */
			in->wb_grow_from = UINT64_MAX;
		pthread_rwlock_unlock(&in->rw);
	}
	/* fdatasync of a regular file needs its data and size, not its times
	 * or class: after the write-out every byte is in an EXTENT record
	 * that carries the size it reaches (size_min), and a truncate logs
	 * its own record, so the size is in the log already and the INODE
	 * record is left to the next fsync or syncfs.  The commit below
	 * still makes the whole log durable (docs/guarantees.md). */
	bool need_attr = !(datasync && S_ISREG(in->mode));
	pthread_mutex_lock(&fs->lock);
	if (!ret && in->attr_dirty && need_attr) {
		ret = fs_log_attr(fs, in);
		/* Not in the log: still dirty, so that the next fsync logs the
		 * attributes again instead of reporting success without them. */
		if (ret)
			in->attr_dirty = true;
	}
	in->pins--;
	fs_inode_maybe_free(fs, in);
	pthread_mutex_unlock(&fs->lock);
	if (!ret)
		ret = fs_commit(fs);
	return ret;
}

/* Punch [off, off+len) (clipped to the size): whole blocks are unmapped by
 * a PUNCH record, partial blocks at the edges become zeros in the buffer.
 * Log first: the record is appended before any buffered byte is dropped or
 * zeroed, so a failed append changes nothing.  Before it, only what may
 * fail and adds nothing visible: the edge pages are made present (copies
 * of their bytes) and the extent map gets room for the split a punch may
 * need (its apply after the append cannot fail).  [RW excl, drops] */
static int punch(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	int err = 0;

	fs_data_wait_writeout(in);	/* as for truncate */
	fs_pf_invalidate(fs, in);
	uint64_t end = ZF_MIN(off + len, in->size);
	uint64_t a = ZF_ALIGN_UP(off, fs->bs), b = ZF_ALIGN_DOWN(end, fs->bs);
	/* The partial blocks at the edges (at most two): [off, a) and [b, end)
	 * when a block is not covered whole. */
	uint64_t edge[2][2];
	unsigned nedge = 0;
	for (uint64_t pos = off; pos < end;) {
		uint64_t bo = pos % fs->bs;
		uint64_t n = ZF_MIN(end - pos, fs->bs - bo);
		if (pos >= a && pos + n <= b && n == fs->bs) {
			pos = b;	/* whole blocks: punched below */
			continue;
		}
		edge[nedge][0] = pos;
		edge[nedge][1] = n;
		nedge++;
		pos += n;
	}
	for (unsigned k = 0; k < nedge && !err; k++)
		err = page_get(fs, in, edge[k][0] / fs->bs, true, 1, NULL);
	if (!err && b > a) {
		pthread_mutex_lock(&fs->lock);
		/* A punch inside one extent splits it: one more entry. */
		err = extmap_reserve(&in->map, 1);
		if (!err)
			err = fs_log_punch(fs, in->ino, a, b - a);
		if (!err)
			fs_apply_punch(fs, in, a, b - a);
		pthread_mutex_unlock(&fs->lock);
		/* Buffered whole blocks in [a, b) are gone with the record. */
		if (!err)
			fs_data_drop_range(fs, in, a, b);
	}
	if (err)
		return err;
	for (unsigned k = 0; k < nedge; k++) {
		uint32_t bo = (uint32_t)(edge[k][0] % fs->bs);
		zero_in_page(fs, in, edge[k][0] / fs->bs, bo, bo + (uint32_t)edge[k][1]);
	}
	pthread_mutex_lock(&fs->lock);
	in->mtime = in->ctime = fs_now();
	if (in->buffered)
		fs_mark_dirty(fs, in);
	pthread_mutex_unlock(&fs->lock);
	return 0;
}

/* Bytes of [a, b) the file's extents map. [L or RW] */
static uint64_t mapped_in(const struct fs_inode *in, uint64_t a, uint64_t b)
{
	struct extmap_cur c;
	uint64_t n = 0;

	for (const struct extmap_ext *e = extmap_seek(&in->map, a, &c); e && e->off < b;
	     e = extmap_next(&in->map, &c))
		n += ZF_MIN(b, e->off + e->len) - ZF_MAX(a, e->off);
	return n;
}

/* fallocate's promise: the holes of [off, off+len) (whole blocks) are held
 * (fs_prealloc.c), so that writing them later cannot fail for space: room
 * for them now or -ENOSPC, the PREALLOC record, then the ranges.  The
 * room is admitted as a write's is (the page cache's reserve and the other
 * files' ranges left free).  No lock held. */
static int prealloc(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	uint64_t a = ZF_ALIGN_DOWN(off, fs->bs), b = ZF_ALIGN_UP(off + len, fs->bs);

	pthread_mutex_lock(&fs->lock);
	uint64_t held = mapped_in(in, a, b) + fs_pa_overlap(in, a, b - a);
	pthread_mutex_unlock(&fs->lock);
	uint64_t need = b - a - ZF_MIN(held, b - a);
	if (!need)
		return 0;
	int ret = wait_room(fs, need, fs_dirty_keep(fs) + fs->pa_bytes);
	if (ret)
		return ret;
	fs_rw_wrlock(in);
	pthread_mutex_lock(&fs->lock);
	ret = fs_pa_room(in, fs_pa_holes(in, a, b - a));
	if (!ret)
		ret = fs_log_prealloc(fs, in->ino, a, b - a);
	if (!ret)
		fs_apply_prealloc(fs, in, a, b - a);
	pthread_mutex_unlock(&fs->lock);
	pthread_rwlock_unlock(&in->rw);
	zalloc_room_done(fs->za, need);	/* fs->pa_bytes counts them now */
	return ret;
}

int fs_fallocate(struct fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	int err;
	struct fs_inode *in;

	if (len == 0 || off + len < off)
		return -EINVAL;
	if (off + len > (1ull << 50))
		return -EFBIG;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	in = pin_reg(fs, ino, &err);
	if (!in)
		return err == -EISDIR ? -ENODEV : err;
	if (!(mode & FALLOC_FL_PUNCH_HOLE))
		err = prealloc(fs, in, off, len);
	pthread_rwlock_wrlock(&in->rw);
	if (err) {
		/* nothing held, nothing grown */
	} else if (mode == 0) {
		if (off + len > in->size)
			err = fs_data_truncate(fs, in, off + len);
	} else if (mode & FALLOC_FL_PUNCH_HOLE) {
		err = punch(fs, in, off, len);
	}
	pthread_rwlock_unlock(&in->rw);
	fs_inode_unpin(fs, in);
	return err;
}
