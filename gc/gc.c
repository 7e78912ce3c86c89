/* gc — the garbage collector: the collector thread and the data mover.
 *
 * Purpose: frees zones whose data is partly dead by moving their live
 * extents to zones of the same class.  zalloc keeps space for the
 * collector and pins victims (zonealloc/zalloc.h, "garbage collection");
 * gc/gc_policy.h says which zone to take; writers wait for space in
 * zonealloc/zalloc_space.c.  This file knows which file each live byte
 * belongs to and moves it.
 *
 * When it runs (one thread, fs_gc_start/fs_gc_stop; it wakes every
 * GC_TICK_MS and when kicked):
 *   urgent      a writer waits for space (an acquire, or zalloc_wait_room),
 *               or FREE zones <= reserve: no rate limit, greedy victims;
 *   background  FREE zones < low, then until FREE zones >= high, or the
 *               free bytes do not cover the write buffers: at most
 *               opts.gc_mbps MB/s of copying (token bucket).
 *   Zones: reserve = GC_RESERVE; low = reserve + max(2, nr/32);
 *   high = low + max(2, nr/64) (nr = data zones).  Zones whose data all
 *   dies are reset without GC (zalloc), so with good placement the
 *   collector rarely has anything to do.
 * Each tick it also runs manifest_tick() (the LSM MANIFEST tailing, which
 * is not GC and is to move to the commit thread).
 *
 * One victim (collect_one):
 *   1. zalloc_gc_pick(): the policy's victim, pinned (its bytes stay
 *      readable until zalloc_gc_done());
 *   2. under fs->lock, every extent piece that lies in it: (ino, off, len,
 *      dev), sorted by (ino, off) so each file's data lands in order;
 *   3. per file, in batches of <= GC_BATCH bytes: read the pieces from the
 *      victim (no file lock: the zone is pinned), write them sequentially
 *      through zalloc_acquire_gc() leases of the file's class (its class
 *      now: inference corrections apply), release the leases; then, with
 *      the file's rw lock exclusive (timed: the file's own writer may hold
 *      it while it waits for space) and fs->lock, re-point every sub-range
 *      that still maps to the bytes read: extmap_reserve() (so that the
 *      apply cannot fail) + fs_log_extent() + valid_add of the new bytes +
 *      extmap_set() (whose drop callback subtracts the old ones) -- the
 *      same order as an ordinary write, so the reset-after-commit contract
 *      holds; new bytes not used (the file changed meanwhile, or no room
 *      in the map) are zalloc_discard()ed;
 *   Shared bytes (several extents reference them: copies) are moved once:
 *   pieces whose device ranges overlap form a cluster, whose bytes are
 *   read and written once; then, with every sharer's rw lock (ascending
 *   inode order, timed), one REMAP record re-points all the sub-ranges that
 *   still map to the bytes read, the new bytes are counted once
 *   (fs_share_add_new) and the old ones dropped per reference;
 *   4. zalloc_gc_done(), then a commit: the victim is reset after it.
 * A file whose lock cannot be had keeps its extents there; the victim is
 * then left alone for GC_BACKOFF_NS (zalloc_gc_done_backoff()).
 *
 * Invariants: the collector never writes data a file does not reference
 * afterwards without discarding it; a victim is unpinned exactly once.
 * Thread safety and lock order: struct fs_gc is the collector thread's,
 * except mu/cv/kick/stop (gc->mu, a leaf: held only to sleep and to kick)
 * and the _Atomic counters fs_gc_fill_stats() reads.
 * The collector holds at most one file's rw lock, then fs->lock, then
 * zalloc's (the documented order); device I/O is done without fs->lock.
 * fs_gc_kick() and fs_gc_wait_space() are called with no lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

#define GC_TICK_MS 20		/* also manifest_tick()'s period */
#define GC_RESERVE 2			/* zones only the collector may take */
#define GC_BATCH (4u << 20)		/* bytes read+written per step */
#define GC_LOCK_WAIT_MS 50		/* one try for a file's rw lock */
#define GC_LOCK_TRIES 4
#define GC_BACKOFF_NS (2ull * 1000000000ull)
#define GC_NOROOM_BACKOFF_NS (1000000000ull)
#define GC_IDLE_NS (20000000ull)	/* after a round that achieved nothing */

struct fs_gc {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* the collector sleeps here */
	_Atomic bool stop;
	bool kick;
	uint32_t reserve, low, high;
	uint64_t rate;			/* bytes/s, 0 = unbounded */
	uint64_t tb_next_ns;		/* token bucket: next copy allowed */
	uint8_t *buf;			/* GC_BATCH bytes, aligned */
	uint64_t *skip;			/* bitmap over data zones (skip_zones) */
	size_t skip_words;
	_Atomic uint64_t runs, freed, moved, skipped, discarded, noroom;
	uint64_t noroom_warned_ns;
	uint64_t report_ns;		/* last periodic debug report */
};

struct gc_piece {
	uint64_t ino, off, len, dev;
};

#define GC_MAX_SHARERS 64		/* files re-pointed by one REMAP */

/* A part of a batch: file [off, off+len) read from old, written at new
 * (new = 0 while not written). */
struct gc_part {
	uint64_t off, len, old, new;
	uint64_t buf_off;
};

static int piece_cmp(const void *a, const void *b)
{
	const struct gc_piece *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Every extent piece in [start, start + zone_size). [L] taken here */
static int collect_pieces(struct fs *fs, uint64_t start, uint64_t zsize,
			  struct gc_piece **out, size_t *nout)
{
	struct gc_piece *v = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	pthread_mutex_lock(&fs->lock);
	for (struct fs_inode *in = fs_inode_first(fs); in && !ret; in = fs_inode_next(fs, in)) {
		if (!S_ISREG(in->mode))
			continue;
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c)) {
			uint64_t a = ZF_MAX(e->dev, start);
			uint64_t z = ZF_MIN(e->dev + e->len, start + zsize);

			if (a >= z)
				continue;
			struct gc_piece *nv = zf_grow(v, &cap, n + 1, sizeof(*nv), 64);
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
			v[n++] = (struct gc_piece){ in->ino, e->off + (a - e->dev),
						    z - a, a };
		}
	}
	pthread_mutex_unlock(&fs->lock);
	if (ret) {
		free(v);
		return ret;
	}
	qsort(v, n, sizeof(*v), piece_cmp);
	*out = v;
	*nout = n;
	return 0;
}

static bool gc_urgent(struct fs *fs)
{
	return zalloc_space_waiters(fs->za) > 0 || zalloc_waiters(fs->za) > 0;
}

/* Background rate limit: wait until n more bytes may be copied. */
static void throttle(struct fs *fs, uint64_t n)
{
	struct fs_gc *gc = fs->gc;
	uint64_t now = zf_now_ns(), at;

	if (!gc->rate)
		return;
	at = ZF_MAX(gc->tb_next_ns, now);
	gc->tb_next_ns = at + n * 1000000000ull / gc->rate;
	/* sleep in small steps so urgency (a waiting writer) cuts it short */
	while (now < at && !gc_urgent(fs) && !gc->stop) {
		zf_sleep_until_ns(ZF_MIN(at, now + 10000000ull));
		now = zf_now_ns();
	}
}

static int timed_wrlock(pthread_rwlock_t *rw)
{
	for (int t = 0; t < GC_LOCK_TRIES; t++) {
		struct timespec ts = zf_realtime_after(GC_LOCK_WAIT_MS * 1000000ull);
		int r = pthread_rwlock_timedwrlock(rw, &ts);
		if (r == 0)
			return 0;
		if (r != ETIMEDOUT)
			return -r;
	}
	return -ETIMEDOUT;
}

/* Re-point the parts of one file that were written; discard the bytes
 * that cannot be used.  Returns bytes re-pointed, or -errno (lock). */
static int64_t repoint(struct fs *fs, uint64_t ino, struct gc_part *parts,
		       size_t np)
{
	struct fs_inode *in;
	int64_t moved = 0;
	int r;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, ino);
	if (in)
		in->pins++;
	pthread_mutex_unlock(&fs->lock);
	if (!in) {
		for (size_t k = 0; k < np; k++)
			if (parts[k].new)
				zalloc_discard(fs->za, parts[k].new, parts[k].len);
		return 0;
	}
	r = timed_wrlock(&in->rw);
	if (r) {
		for (size_t k = 0; k < np; k++)
			if (parts[k].new)
				zalloc_discard(fs->za, parts[k].new, parts[k].len);
		pthread_mutex_lock(&fs->lock);
		in->pins--;
		fs_inode_maybe_free(fs, in);
		pthread_mutex_unlock(&fs->lock);
		return r;
	}
	fs_pf_invalidate(fs, in);	/* fills in flight may read the old bytes */
	pthread_mutex_lock(&fs->lock);
	for (size_t k = 0; k < np; k++) {
		struct gc_part *p = &parts[k];
		uint64_t end = p->off + p->len, pos = p->off;
		struct { uint64_t a, b; } claim[16];
		size_t nc = 0;

		if (!p->new)
			continue;
		/* sub-ranges still mapped to the bytes we read (few: at most
		 * the extents the part overlaps; more than 16 is handled by
		 * discarding the rest, the next pass moves them) */
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, p->off, &c);
		     e && e->off < end && nc < 16; e = extmap_next(&in->map, &c)) {
			uint64_t a = ZF_MAX(p->off, e->off);
			uint64_t b = ZF_MIN(end, e->off + e->len);

			if (a < b && e->dev + (a - e->off) == p->old + (a - p->off)) {
				claim[nc].a = a;
				claim[nc].b = b;
				nc++;
			}
		}
		for (size_t c = 0; c < nc; c++) {
			uint64_t a = claim[c].a, b = claim[c].b;
			uint64_t nd = p->new + (a - p->off);
			int e;

			if (a > pos)
				zalloc_discard(fs->za, p->new + (pos - p->off), a - pos);
			pos = b;
			/* Log first, and nothing that can fail after the append
			 * (a logged extent not applied would not count as valid:
			 * its zone could be reset under the record): room in the
			 * map (a set splits one extent in 3), then the record. */
			e = extmap_reserve(&in->map, 2);
			if (!e)
				e = fs_log_extent(fs, ino, a, b - a, nd, ZF_MIN(in->size, b));
			if (e) {
				zalloc_discard(fs->za, nd, b - a);
				continue;
			}
			zalloc_valid_add(fs->za, nd, b - a);
			fs_apply_extent(fs, in, a, b - a, nd, ZF_MIN(in->size, b));	/* room reserved */
			moved += (int64_t)(b - a);
		}
		if (end > pos)
			zalloc_discard(fs->za, p->new + (pos - p->off), end - pos);
	}
	pthread_mutex_unlock(&fs->lock);
	pthread_rwlock_unlock(&in->rw);
	pthread_mutex_lock(&fs->lock);
	in->pins--;
	fs_inode_maybe_free(fs, in);
	pthread_mutex_unlock(&fs->lock);
	return moved;
}

/* Move one batch of one file: read parts (from the victim), write them to
 * leases of cls, re-point.  Returns bytes moved or -errno. */
static int64_t move_batch(struct fs *fs, uint64_t ino, enum lifetime_class cls,
			  struct gc_part *parts, size_t np, uint64_t total,
			  bool urgent)
{
	struct fs_gc *gc = fs->gc;
	struct zdev_req rq[64];
	uint64_t pos = 0;
	int ret = 0;
	int64_t moved;

	/* read */
	for (size_t k = 0; k < np;) {
		unsigned n = 0;

		while (k < np && n < 64) {
			rq[n++] = (struct zdev_req){ .op = ZDEV_OP_READ,
				.offset = parts[k].old, .buf = gc->buf + parts[k].buf_off,
				.len = parts[k].len };
			k++;
		}
		int r = zdev_io_batch(fs->dev, rq, n);

		for (unsigned j = 0; j < n && r >= 0; j++)
			if (rq[j].result < 0)
				r = (int)rq[j].result;
		if (r < 0) {
			zf_err("gc: reading inode %llu's data from the victim: %s",
			       (unsigned long long)ino, strerror(-r));
			return r;
		}
	}
	if (!urgent)
		throttle(fs, total);
	/* write, sequentially, lease by lease */
	while (pos < total) {
		struct zalloc_lease l;
		uint64_t n;

		ret = zalloc_acquire_gc(fs->za, cls, total - pos, &l);
		if (ret)
			break;
		n = ZF_MIN(l.len, total - pos);
		ssize_t w = zdev_write(fs->dev, l.offset, gc->buf + pos, n);

		if (w != (ssize_t)n) {
			ret = w < 0 ? (int)w : -EIO;
			zalloc_release(fs->za, &l, 0, ret);
			zf_err("gc: writing %llu bytes at %llu: %s", (unsigned long long)n,
			       (unsigned long long)l.offset, strerror(-ret));
			break;
		}
		zalloc_release(fs->za, &l, n, 0);	/* unclaimed until re-pointed */
		/* parts lying in [pos, pos + n) got their new place; a part cut
		 * by the lease end is split into two parts */
		for (size_t k = 0; k < np; k++) {
			struct gc_part *p = &parts[k];

			if (p->new || p->buf_off < pos || p->buf_off >= pos + n)
				continue;
			if (p->buf_off + p->len > pos + n) {
				/* caller sized parts[] with room for splits */
				uint64_t head = pos + n - p->buf_off;

				parts[np] = (struct gc_part){ p->off + head, p->len - head,
							      p->old + head, 0,
							      p->buf_off + head };
				np++;
				p->len = head;
			}
			p->new = l.offset + (p->buf_off - pos);
		}
		pos += n;
	}
	moved = repoint(fs, ino, parts, np);
	if (moved < 0)
		return moved;
	return ret ? ret : moved;
}

/* Where moved data goes: into zones of its file's class as it is now (not
 * the victim's class, and not one class up: survivors of a zone do not
 * live much longer than their zone-mates, docs/placement.md).  Called
 * with fs->lock held; a file gone since: the default class. */
static enum lifetime_class file_class(const struct fs_inode *in)
{
	return in ? (enum lifetime_class)in->cls : LIFETIME_MEDIUM;
}

static int piece_dev_cmp(const void *a, const void *b)
{
	const struct gc_piece *x = a, *y = b;

	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

static int cext_dev_cmp(const void *a, const void *b)
{
	const struct fs_cext *x = a, *y = b;

	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Move the pieces out of pcs[0..*n) whose device ranges overlap another's
 * (shared bytes) into *shared, sorted by device offset; pcs keeps its
 * order.  0 or -ENOMEM. */
static int split_shared(struct gc_piece *pcs, size_t *n, struct gc_piece **shared,
			size_t *nshared)
{
	struct gc_piece *byd = malloc((*n ? *n : 1) * sizeof(*byd));
	size_t ns = 0, keep = 0;

	*shared = NULL;
	*nshared = 0;
	if (!byd)
		return -ENOMEM;
	memcpy(byd, pcs, *n * sizeof(*byd));
	qsort(byd, *n, sizeof(*byd), piece_dev_cmp);
	/* clusters: maximal runs of overlapping ranges; keep those of >= 2 */
	for (size_t i = 0; i < *n;) {
		size_t j = i + 1;
		uint64_t hi = byd[i].dev + byd[i].len;
		while (j < *n && byd[j].dev < hi) {
			hi = ZF_MAX(hi, byd[j].dev + byd[j].len);
			j++;
		}
		if (j - i > 1) {
			memmove(&byd[ns], &byd[i], (j - i) * sizeof(*byd));
			ns += j - i;
		}
		i = j;
	}
	if (!ns) {
		free(byd);
		return 0;
	}
	/* the shared ones leave pcs (a piece is one extent's part: (ino, off)
	 * names it) */
	for (size_t i = 0; i < *n; i++) {
		bool sh = false;
		for (size_t k = 0; k < ns && !sh; k++)
			sh = byd[k].ino == pcs[i].ino && byd[k].off == pcs[i].off;
		if (!sh)
			pcs[keep++] = pcs[i];
	}
	*n = keep;
	*shared = byd;
	*nshared = ns;
	return 0;
}

static void unlock_files(struct fs *fs, struct fs_inode **in, size_t n, size_t locked)
{
	for (size_t k = 0; k < locked; k++)
		pthread_rwlock_unlock(&in[k]->rw);
	pthread_mutex_lock(&fs->lock);
	for (size_t k = 0; k < n; k++) {
		in[k]->pins--;
		fs_inode_maybe_free(fs, in[k]);
	}
	pthread_mutex_unlock(&fs->lock);
}

/* The sub-ranges of the pieces (clipped to device [pos, pos+w)) still
 * mapped to the bytes read, as runs to the new place nd; at most max.
 * Only the files in locked[0..nl) (their rw locks are held). [L] */
static uint32_t claim_shared(const struct gc_piece *sp, size_t np, struct fs_inode **locked,
			     size_t nl, uint64_t pos, uint64_t w, uint64_t nd,
			     struct fs_cext *v, uint32_t max)
{
	uint32_t n = 0;

	for (size_t k = 0; k < np && n < max; k++) {
		uint64_t a0 = ZF_MAX(sp[k].dev, pos);
		uint64_t z0 = ZF_MIN(sp[k].dev + sp[k].len, pos + w);
		struct fs_inode *in = NULL;

		for (size_t j = 0; j < nl && !in; j++)
			if (locked[j]->ino == sp[k].ino)
				in = locked[j];
		if (a0 >= z0 || !in)
			continue;
		uint64_t off = sp[k].off + (a0 - sp[k].dev), end = off + (z0 - a0);
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, off, &c);
		     e && e->off < end && n < max; e = extmap_next(&in->map, &c)) {
			uint64_t a = ZF_MAX(off, e->off), b = ZF_MIN(end, e->off + e->len);
			uint64_t old = a0 + (a - off);

			if (a < b && e->dev + (a - e->off) == old)
				v[n++] = (struct fs_cext){ in->ino, a, b - a, nd + (old - pos) };
		}
	}
	return n;
}

/* Re-point every sharer of device [pos, pos+w) (pieces sp, sorted by
 * dev), written again at nd, in one REMAP record; discard the new bytes
 * nobody took.  Bytes re-pointed (counted once), or -errno. */
static int64_t repoint_shared(struct fs *fs, const struct gc_piece *sp, size_t np,
			      uint64_t pos, uint64_t w, uint64_t nd)
{
	uint64_t inos[GC_MAX_SHARERS];
	struct fs_inode *in[GC_MAX_SHARERS];
	size_t ni = 0, locked = 0;
	struct fs_cext *v = malloc(FS_REMAP_MAX_RUNS * sizeof(*v));
	uint32_t n = 0;
	int64_t moved = 0;
	int r = 0;

	if (!v) {
		zalloc_discard(fs->za, nd, w);
		return -ENOMEM;
	}
	for (size_t k = 0; k < np && ni < GC_MAX_SHARERS; k++) {
		bool seen = false;
		for (size_t j = 0; j < ni && !seen; j++)
			seen = inos[j] == sp[k].ino;
		if (!seen && sp[k].dev < pos + w && sp[k].dev + sp[k].len > pos)
			inos[ni++] = sp[k].ino;
	}
	qsort(inos, ni, sizeof(*inos), u64_cmp);	/* lock order: ascending */
	pthread_mutex_lock(&fs->lock);
	size_t got = 0;
	for (size_t j = 0; j < ni; j++)
		if ((in[got] = fs_inode_get(fs, inos[j])))
			in[got++]->pins++;
	pthread_mutex_unlock(&fs->lock);
	ni = got;
	for (; locked < ni && !r; locked++) {
		r = timed_wrlock(&in[locked]->rw);
		if (r)
			break;
	}
	if (r) {
		unlock_files(fs, in, ni, locked);
		zalloc_discard(fs->za, nd, w);
		free(v);
		return r;
	}
	for (size_t k = 0; k < ni; k++)
		fs_pf_invalidate(fs, in[k]);
	pthread_mutex_lock(&fs->lock);
	n = claim_shared(sp, np, in, ni, pos, w, nd, v, FS_REMAP_MAX_RUNS);
	qsort(v, n, sizeof(*v), cext_dev_cmp);
	/* Log first, and nothing that can fail after the append: room in the
	 * maps (each run may split one extent in 3) and in the share table. */
	for (size_t k = 0; k < ni && !r; k++) {
		uint32_t runs = 0;
		for (uint32_t i = 0; i < n; i++)
			runs += v[i].ino == in[k]->ino;
		r = extmap_reserve(&in[k]->map, 2 * (size_t)runs);
	}
	if (!r && n)
		r = fs_share_prepare(fs, v, n);
	if (!r && n) {
		r = fs_log_remap(fs, v, n);
		if (r)
			fs_share_unprepare(fs, v, n);
	}
	if (r)
		n = 0;	/* nothing taken: all discarded below */
	if (n) {
		fs_share_add_new(fs, v, n);	/* prepared */
		fs_apply_remap(fs, v, n);	/* room reserved */
		fs_share_unprepare(fs, v, n);	/* a table nothing shares */
	}
	/* the new bytes no run took */
	uint64_t hi = nd;
	for (uint32_t i = 0; i < n; i++) {
		if (v[i].dev > hi)
			zalloc_discard(fs->za, hi, v[i].dev - hi);
		if (v[i].dev + v[i].len > hi) {
			moved += (int64_t)(v[i].dev + v[i].len - ZF_MAX(hi, v[i].dev));
			hi = v[i].dev + v[i].len;
		}
	}
	if (nd + w > hi)
		zalloc_discard(fs->za, hi, nd + w - hi);
	pthread_mutex_unlock(&fs->lock);
	unlock_files(fs, in, ni, locked);
	if (n)
		fs->share.gc_shared_moves++;
	free(v);
	return moved;
}

/* Move the shared pieces sp[0..n) (sorted by dev): each cluster's bytes
 * once, batch by batch.  Bytes moved or -errno; *skipped: bytes left
 * because a sharer stayed locked. */
static int64_t move_shared(struct fs *fs, struct gc_piece *sp, size_t n, bool urgent,
			   uint64_t *skipped)
{
	struct fs_gc *gc = fs->gc;
	int64_t moved = 0;

	for (size_t i = 0; i < n && !gc->stop;) {
		size_t j = i + 1;
		uint64_t lo = sp[i].dev, hi = sp[i].dev + sp[i].len;
		while (j < n && sp[j].dev < hi) {
			hi = ZF_MAX(hi, sp[j].dev + sp[j].len);
			j++;
		}
		pthread_mutex_lock(&fs->lock);
		enum lifetime_class cls = file_class(fs_inode_get(fs, sp[i].ino));
		pthread_mutex_unlock(&fs->lock);
		for (uint64_t pos = lo; pos < hi && !gc->stop;) {
			uint64_t len = ZF_MIN(hi - pos, (uint64_t)GC_BATCH);
			struct zalloc_lease l;
			ssize_t rd = zdev_read(fs->dev, pos, gc->buf, len);

			if (rd != (ssize_t)len) {
				int e = rd < 0 ? (int)rd : -EIO;
				zf_err("gc: reading shared bytes at %llu from the victim: %s",
				       (unsigned long long)pos, strerror(-e));
				return e;
			}
			if (!urgent)
				throttle(fs, len);
			int r = zalloc_acquire_gc(fs->za, cls, len, &l);
			if (r)
				return moved ? moved : r;
			uint64_t w = ZF_MIN(l.len, len);
			ssize_t wr = zdev_write(fs->dev, l.offset, gc->buf, w);
			if (wr != (ssize_t)w) {
				r = wr < 0 ? (int)wr : -EIO;
				zalloc_release(fs->za, &l, 0, r);
				zf_err("gc: writing %llu shared bytes at %llu: %s",
				       (unsigned long long)w, (unsigned long long)l.offset,
				       strerror(-r));
				return r;
			}
			zalloc_release(fs->za, &l, w, 0);	/* unclaimed until re-pointed */
			int64_t m = repoint_shared(fs, sp + i, j - i, pos, w, l.offset);
			if (m == -ETIMEDOUT || m == -EDEADLK) {
				*skipped += hi - pos;
				break;
			}
			if (m < 0)
				return m;
			moved += m;
			pos += w;
		}
		i = j;
	}
	return moved;
}

/* Zones holding data of files being written whose rw lock is held right
 * now (their writer may hold it while it waits for space: the collector
 * could not move their data) are no victims now.  The try-lock under
 * fs->lock never blocks, so the lock order is kept. */
static void skip_zones(struct fs *fs, uint64_t *skip, size_t words)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	uint64_t first = fs->sb.data_first, nr = fs->sb.data_count;

	memset(skip, 0, words * sizeof(*skip));
	pthread_mutex_lock(&fs->lock);
	for (struct fs_inode *in = fs->dirty_head; in; in = in->dnext) {
		if (pthread_rwlock_trywrlock(&in->rw) == 0) {
			pthread_rwlock_unlock(&in->rw);
			continue;
		}
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c)) {
			uint64_t z = e->dev / g->zone_size;

			if (z >= first && z - first < nr && (z - first) / 64 < words)
				skip[(z - first) / 64] |= 1ull << ((z - first) % 64);
		}
	}
	pthread_mutex_unlock(&fs->lock);
}

/* Collect one victim.  1: one collected (moved or not), 0: no victim,
 * -errno. */
static int collect_one(struct fs *fs, bool urgent)
{
	struct fs_gc *gc = fs->gc;
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	struct zalloc_gc_victim v;
	struct gc_piece *pcs = NULL, *spcs = NULL;
	struct gc_part *parts = NULL;
	size_t npcs = 0, nspcs = 0, maxparts;
	uint64_t moved = 0, skipped = 0;
	int ret;

	if (gc->skip)
		skip_zones(fs, gc->skip, gc->skip_words);
	ret = zalloc_gc_pick(fs->za, urgent, gc->skip, &v);
	if (ret == -ENOENT && gc->skip)	/* only busy files' zones: try them */
		ret = zalloc_gc_pick(fs->za, urgent, NULL, &v);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	gc->runs++;
	ret = collect_pieces(fs, v.start, g->zone_size, &pcs, &npcs);
	if (!ret)
		ret = split_shared(pcs, &npcs, &spcs, &nspcs);
	if (!ret && nspcs) {
		int64_t m = move_shared(fs, spcs, nspcs, urgent, &skipped);
		if (m < 0)
			ret = (int)m;
		else
			moved += (uint64_t)m;
	}
	/* parts of one batch: pieces cut to GC_BATCH, plus one split per lease */
	maxparts = 2 * (GC_BATCH / fs->bs) + 2;
	if (!ret && npcs && !(parts = calloc(maxparts, sizeof(*parts))))
		ret = -ENOMEM;
	for (size_t i = 0; !ret && i < npcs && !gc->stop;) {
		uint64_t ino = pcs[i].ino, total = 0;
		size_t np = 0;
		enum lifetime_class cls;
		struct fs_inode *in;

		pthread_mutex_lock(&fs->lock);
		in = fs_inode_get(fs, ino);
		cls = file_class(in);
		pthread_mutex_unlock(&fs->lock);
		/* one batch: this file's pieces up to GC_BATCH bytes, a piece
		 * larger than what is left of the batch is cut */
		while (i < npcs && pcs[i].ino == ino && total < GC_BATCH &&
		       np < maxparts / 2) {
			struct gc_piece *p = &pcs[i];
			uint64_t n = ZF_MIN(p->len, GC_BATCH - total);

			parts[np++] = (struct gc_part){ p->off, n, p->dev, 0, total };
			total += n;
			p->off += n;
			p->dev += n;
			p->len -= n;
			if (!p->len)
				i++;
		}
		if (!in) {
			continue;	/* file gone: its extents went with it */
		}
		int64_t r = move_batch(fs, ino, cls, parts, np, total, urgent);

		if (r == -ETIMEDOUT || r == -EDEADLK) {
			skipped += total;
			while (i < npcs && pcs[i].ino == ino)	/* skip the file */
				skipped += pcs[i++].len;
		} else if (r < 0) {
			ret = (int)r;
		} else {
			moved += (uint64_t)r;
		}
		if (urgent && !gc_urgent(fs))
			urgent = false;
		else if (!urgent && gc_urgent(fs))
			urgent = true;
	}
	gc->moved += moved;
	gc->skipped += skipped;
	{
		struct zalloc_zone_info zi;

		zalloc_gc_done_backoff(fs->za, v.zone, skipped ? GC_BACKOFF_NS
						       : ret == -ENOSPC ? GC_NOROOM_BACKOFF_NS : 0);
		if (zalloc_zone_info(fs->za, v.zone, &zi) == 0 && zi.valid_bytes == 0)
			gc->freed++;
		zf_dbg("gc: zone %u (%s, %llu valid, score %.3g): moved %llu, skipped %llu, valid now %llu",
		       v.zone, lifetime_class_name(v.cls), (unsigned long long)v.valid_bytes,
		       v.score, (unsigned long long)moved, (unsigned long long)skipped,
		       (unsigned long long)zi.valid_bytes);
	}
	free(parts);
	free(pcs);
	free(spcs);
	if (ret == -ENOSPC) {
		uint64_t now = zf_now_ns();

		gc->noroom++;
		if (now - gc->noroom_warned_ns > 10000000000ull) {
			gc->noroom_warned_ns = now;
			zf_warn("gc: no room to move zone %u's data (%llu times so far)",
				v.zone, (unsigned long long)gc->noroom);
		}
		return 0;
	}
	return ret ? ret : 1;
}

/* Work while there is a reason to (see the header).  Returns false when
 * it had a reason but could not do anything (no victim, no room). */
static bool gc_round(struct fs *fs)
{
	struct fs_gc *gc = fs->gc;
	bool active = false, stuck = false;

	while (!gc->stop) {
		struct zalloc_stats zs;
		uint64_t need;
		bool urgent, bg;
		int r;

		zalloc_get_stats(fs->za, &zs);
		need = fs->buffered + zs.space_need_bytes;
		urgent = zs.space_waiters > 0 || zs.gc_waiters > 0 ||
			 zalloc_waiters(fs->za) > 0 || zs.free_zones <= gc->reserve;
		bg = zs.free_zones < (active ? gc->high : gc->low) || zs.free_bytes < need;
		if (!urgent && !bg)
			break;
		if (zs.pending_resets) {
			/* zones that only wait for a commit: free, no copying */
			fs_commit(fs);
			zalloc_get_stats(fs->za, &zs);
			if (zs.free_zones > gc->reserve &&
			    zs.free_zones >= (active ? gc->high : gc->low) &&
			    zs.free_bytes >= need)
				break;
		}
		r = collect_one(fs, urgent);
		if (r <= 0) {
			if (r < 0)
				zf_warn("gc: %s", strerror(-r));
			stuck = true;
			break;
		}
		active = true;
		fs_commit(fs);	/* the victim resets after the commit */
	}
	return !stuck;
}

static void gc_report(struct fs *fs, const char *what)
{
	struct fs_gc *gc = fs->gc;
	struct zalloc_stats zs;

	zalloc_get_stats(fs->za, &zs);
	zf_log(strcmp(what, "gc: status") ? ZF_LOG_INFO : ZF_LOG_DEBUG,
	       "%s: %llu victims (%llu emptied), %llu MB moved, %llu MB skipped (busy files), "
	       "%llu without room; free zones %u, valid %llu%%, writer waits %llu (%llu ms), "
	       "reserve taken %llu (after %llu waits)",
	       what, (unsigned long long)gc->runs, (unsigned long long)gc->freed,
	       (unsigned long long)(gc->moved / 1000000), (unsigned long long)(gc->skipped / 1000000),
	       (unsigned long long)gc->noroom, zs.free_zones,
	       (unsigned long long)(zs.capacity_bytes ? zs.valid_bytes * 100 / zs.capacity_bytes : 0),
	       (unsigned long long)zs.gc_waits,
	       (unsigned long long)(zs.gc_wait_ns / 1000000),
	       (unsigned long long)zs.gc_reserve_taken, (unsigned long long)zs.gc_reserve_grants);
}

/* Not GC: read what the LSM stores appended to their MANIFESTs (exact
 * levels, fs_lifetime.c).  It runs on the collector's tick until it moves
 * to the commit thread; nothing else here depends on it. */
static void manifest_tick(struct fs *fs)
{
	fs_lifetime_tail_manifests(fs);
}

static void *gc_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_gc *gc = fs->gc;

	pthread_mutex_lock(&gc->mu);
	while (!gc->stop) {
		if (zf_now_ns() - gc->report_ns > 10000000000ull) {
			gc->report_ns = zf_now_ns();
			pthread_mutex_unlock(&gc->mu);
			gc_report(fs, "gc: status");
			pthread_mutex_lock(&gc->mu);
		}
		if (!gc->kick) {
			struct timespec ts =
				zf_ns_to_timespec((int64_t)(zf_now_ns() + GC_TICK_MS * 1000000ull));
			pthread_cond_timedwait(&gc->cv, &gc->mu, &ts);
		}
		gc->kick = false;
		if (gc->stop)
			break;
		pthread_mutex_unlock(&gc->mu);
		manifest_tick(fs);
		if (!gc_round(fs))	/* do not spin on kicks it cannot serve */
			zf_sleep_until_ns(zf_now_ns() + GC_IDLE_NS);
		pthread_mutex_lock(&gc->mu);
	}
	pthread_mutex_unlock(&gc->mu);
	return NULL;
}

void fs_gc_kick(struct fs *fs)
{
	struct fs_gc *gc = fs->gc;

	if (!gc)
		return;
	pthread_mutex_lock(&gc->mu);
	gc->kick = true;
	pthread_cond_signal(&gc->cv);
	pthread_mutex_unlock(&gc->mu);
}

static void kick_cb(void *arg)
{
	fs_gc_kick(arg);
}

/* zalloc's classes are the lifetime classes, one to one; its default class
 * (zones nobody adopted at mount) is the default lifetime. */
_Static_assert(ZALLOC_NR_CLASSES == LIFETIME_NR, "a zalloc class per lifetime class");
_Static_assert(ZALLOC_DEFAULT_CLASS == LIFETIME_MEDIUM, "the default lifetime");

/* Tell the victim policy which class holds the WAL: its young zones are
 * left to die in the background (gc/gc_policy.h). */
static void mark_wal_class(struct fs *fs)
{
	zalloc_set_stream_flags(fs->za, LIFETIME_SHORT, ZALLOC_STREAM_DEFER_YOUNG);
}

int fs_gc_start(struct fs *fs)
{
	struct zalloc_stats zs;
	struct fs_gc *gc;
	pthread_condattr_t ca;
	int r;

	if (fs->read_only || fs->gc)
		return 0;
	gc = calloc(1, sizeof(*gc));
	if (!gc)
		return -ENOMEM;
	zalloc_get_stats(fs->za, &zs);
	gc->buf = zdev_buf_alloc(GC_BATCH);
	gc->skip_words = (zs.nr_zones + 63) / 64;
	gc->skip = calloc(gc->skip_words, sizeof(*gc->skip));
	if (!gc->buf || !gc->skip) {
		zdev_buf_free(gc->buf);
		free(gc->skip);
		free(gc);
		return -ENOMEM;
	}
	gc->reserve = GC_RESERVE;
	gc->low = gc->reserve + ZF_MAX(2u, zs.nr_zones / 32);
	gc->high = gc->low + ZF_MAX(2u, zs.nr_zones / 64);
	gc->rate = (uint64_t)fs->opts.gc_mbps * 1000000ull;
	pthread_mutex_init(&gc->mu, NULL);
	pthread_condattr_init(&ca);	/* deadlines come from zf_now_ns() */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&gc->cv, &ca);
	pthread_condattr_destroy(&ca);
	fs->gc = gc;
	r = -pthread_create(&gc->th, NULL, gc_main, fs);
	if (r) {
		fs->gc = NULL;
		zdev_buf_free(gc->buf);
		free(gc->skip);
		free(gc);
		return r;
	}
	mark_wal_class(fs);
	zalloc_set_gc(fs->za, gc->reserve, kick_cb, fs);
	zf_dbg("gc: started (reserve %u, low %u, high %u zones of %u; %u MB/s in the background)",
	       gc->reserve, gc->low, gc->high, zs.nr_zones, fs->opts.gc_mbps);
	return 0;
}

void fs_gc_stop(struct fs *fs)
{
	struct fs_gc *gc = fs->gc;

	if (!gc)
		return;
	gc_report(fs, "gc: at unmount");
	zalloc_set_gc(fs->za, 0, NULL, NULL);
	pthread_mutex_lock(&gc->mu);
	gc->stop = true;
	pthread_cond_signal(&gc->cv);
	pthread_mutex_unlock(&gc->mu);
	pthread_join(gc->th, NULL);
	/* writers still in zalloc_wait_room() (none should be left at
	 * unmount) may be about to kick: GC is off, they leave at once */
	while (zalloc_space_waiters(fs->za))
		zf_sleep_until_ns(zf_now_ns() + 1000000ull);
	fs->gc = NULL;
	pthread_cond_destroy(&gc->cv);
	pthread_mutex_destroy(&gc->mu);
	zdev_buf_free(gc->buf);
	free(gc->skip);
	free(gc);
}

int fs_gc_run_once(struct fs *fs)
{
	struct fs_gc tmp, *saved = fs->gc;
	int r;

	if (saved)
		return -EBUSY;	/* the thread does it */
	/* no thread: a temporary collector state on the stack */
	memset(&tmp, 0, sizeof(tmp));
	tmp.buf = zdev_buf_alloc(GC_BATCH);
	if (!tmp.buf)
		return -ENOMEM;
	pthread_mutex_init(&tmp.mu, NULL);
	pthread_cond_init(&tmp.cv, NULL);
	fs->gc = &tmp;
	mark_wal_class(fs);
	r = collect_one(fs, true);
	fs->gc = NULL;
	if (r > 0) {
		int c = fs_commit(fs);

		if (c)
			r = c;
	}
	pthread_cond_destroy(&tmp.cv);
	pthread_mutex_destroy(&tmp.mu);
	zdev_buf_free(tmp.buf);
	return r;
}

static uint64_t buffered_bytes(void *arg)
{
	return ((struct fs *)arg)->buffered;
}

static int commit_now(void *arg)
{
	return fs_commit(arg);
}

/* Room for `bytes` more of buffered data: zalloc_wait_room(), the
 * allocator's one wait for space, with this file system's write buffers
 * and commit. */
int fs_gc_wait_space(struct fs *fs, uint64_t bytes, uint64_t keep)
{
	struct zalloc_room r = {
		.bytes = bytes, .keep = keep, .buffered = buffered_bytes,
		.commit = commit_now, .arg = fs,
	};

	return zalloc_wait_room(fs->za, &r);
}

void fs_gc_room_done(struct fs *fs, uint64_t bytes)
{
	zalloc_room_done(fs->za, bytes);
}

void fs_gc_fill_stats(struct fs *fs, struct fs_stats *st)
{
	struct zalloc_stats zs;
	struct fs_gc *gc = fs->gc;
	uint64_t dev;

	zalloc_get_stats(fs->za, &zs);
	st->gc_bytes_written = zs.gc_bytes_written;
	st->gc_runs = zs.gc_runs;
	st->gc_waits = zs.gc_waits;
	st->gc_wait_ms = zs.gc_wait_ns / 1000000ull;
	if (gc) {
		st->gc_zones_freed = gc->freed;
		st->gc_skipped_busy = gc->skipped;
	}
	st->zone_resets = zs.zone_resets;
	st->zone_finishes = zs.zone_finishes;
	st->free_zones = zs.free_zones;
	for (int c = 0; c < LIFETIME_NR; c++) {
		st->class_user_bytes_written[c] = fs->class_user_bytes[c];
		st->class_bytes_written[c] = zs.class_bytes_written[c];
		st->class_gc_bytes_written[c] = zs.gc_class_bytes_written[c];
		st->class_zone_resets[c] = zs.class_zone_resets[c];
		st->class_zone_finishes[c] = zs.class_zone_finishes[c];
	}
	fs_share_fill_stats(fs, st);
	dev = st->data_bytes_written + st->gc_bytes_written + st->meta_bytes_written;
	st->write_amp_milli = st->user_bytes_written
				      ? dev * 1000 / st->user_bytes_written : 0;
	fs_lifetime_fill_stats(fs, st);
}
