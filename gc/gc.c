/* gc.c — the garbage collector: the collector thread and the data mover
 * (contract: gc.h).
 *
 * Purpose: frees zones whose data is partly dead by moving their live
 * extents to zones of the same class.  zalloc keeps space for the
 * collector and pins victims (zonealloc/zalloc.h, "garbage collection");
 * zonealloc/zalloc_victim.h says which zone to take; writers wait for
 * space in zonealloc/zalloc_space.c.  The fs says which file each live
 * byte belongs to and records the moves (fs/fs_move.h); this file reads
 * and writes the bytes and decides when to run.
 *
 * When it runs (one thread, started by fs_start() and stopped by
 * fs_unmount() through the hook gc_attach() registers; it wakes every
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
 * Each tick, and after each victim of a round, it also runs fs_move_tick()
 * (the LSM MANIFEST tailing, which is not GC and is to move to the commit
 * thread).
 *
 * One victim (collect_one):
 *   1. zalloc_gc_pick(): the policy's victim, pinned (its bytes stay
 *      readable until zalloc_gc_done());
 *   2. fs_move_owners(): every extent piece that lies in it: (ino, off,
 *      len, dev), sorted by (ino, off) so each file's data lands in order;
 *   3. per file, in batches of <= GC_BATCH bytes: read the pieces from the
 *      victim (no file lock: the zone is pinned), write them sequentially
 *      through zalloc_acquire_gc() leases of the file's class (its class
 *      now, fs_move_class(): inference corrections apply), release the
 *      leases; then fs_move_repoint() re-points every sub-range that still
 *      maps to the bytes read, in the order of an ordinary write, and
 *      discards the new bytes not used (fs/fs_move.h);
 *   Shared bytes (several extents reference them: copies) are moved once:
 *   pieces whose device ranges overlap form a cluster, whose bytes are
 *   read and written once; then fs_move_repoint_shared() re-points all
 *   the sharers in one REMAP record;
 *   4. zalloc_gc_done(), then a commit: the victim is reset after it.
 * A file whose lock cannot be had keeps its extents there; the victim is
 * then left alone for GC_BACKOFF_NS (zalloc_gc_done_backoff()).
 *
 * Invariants: the collector never writes data a file does not reference
 * afterwards without discarding it; a victim is unpinned exactly once.
 * Thread safety and lock order: struct gc is the collector thread's,
 * except mu/cv/kick/stop (gc->mu, a leaf: held only to sleep and to kick)
 * and the _Atomic counters its reports read.  The collector holds no fs
 * lock of its own; fs_move.h's functions take at most one file's rw lock
 * (or several, in inode order), then fs->lock, then zalloc's; device I/O
 * is done without any of them.  kick_cb() is called with no lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/zf_common.h"
#include "fs/fs_move.h"
#include "gc/gc.h"
#include "lsm/lifetime.h"
#include "zonealloc/zalloc.h"
#include "zoned/zdev.h"

#define GC_TICK_MS 20		/* also fs_move_tick()'s period */
#define GC_RESERVE 2			/* zones only the collector may take */
#define GC_BATCH (4u << 20)		/* bytes read+written per step */
#define GC_BACKOFF_NS (2ull * 1000000000ull)
#define GC_NOROOM_BACKOFF_NS (1000000000ull)
#define GC_IDLE_NS (20000000ull)	/* after a round that achieved nothing */

struct gc {
	/* the fs served (gc_init; constant) */
	struct fs *fs;
	struct zdev *dev;
	struct zalloc *za;
	uint32_t bs;			/* bytes: file system block */
	uint32_t gc_mbps;		/* fs_opts.gc_mbps */
	bool read_only;
	struct fs_collector hook;	/* registered with the fs (gc_attach) */
	bool running;			/* the thread runs (gc_start..gc_stop);
					 * changed by the thread that calls
					 * fs_start/fs_unmount */

	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* the collector sleeps here */
	_Atomic bool stop;
	bool kick;
	uint32_t reserve, low, high;	/* zones */
	uint64_t rate;			/* bytes/s, 0 = unbounded */
	uint64_t tb_next_ns;		/* token bucket: next copy allowed */
	uint8_t *buf;			/* GC_BATCH bytes, aligned */
	uint64_t *skip;			/* bitmap over data zones (fs_move_busy_zones) */
	size_t skip_words;
	/* the thread's counters, for its reports (the stats come from zalloc) */
	_Atomic uint64_t runs, freed, moved, skipped, discarded, noroom;
	/* misplaced: bytes moved of files whose class is no longer their
	 * victim's (a level corrected after the data was written); mixed_*:
	 * the victims that held any such bytes, and all they moved */
	_Atomic uint64_t misplaced, mixed_victims, mixed_moved;
	uint64_t noroom_warned_ns;
	uint64_t report_ns;		/* last periodic debug report */
};

static bool gc_urgent(struct gc *gc)
{
	return zalloc_space_waiters(gc->za) > 0 || zalloc_waiters(gc->za) > 0;
}

/* Background rate limit: wait until n more bytes may be copied. */
static void throttle(struct gc *gc, uint64_t n)
{
	uint64_t now = zf_now_ns(), at;

	if (!gc->rate)
		return;
	at = ZF_MAX(gc->tb_next_ns, now);
	gc->tb_next_ns = at + n * 1000000000ull / gc->rate;
	/* sleep in small steps so urgency (a waiting writer) cuts it short */
	while (now < at && !gc_urgent(gc) && !gc->stop) {
		zf_sleep_until_ns(ZF_MIN(at, now + 10000000ull));
		now = zf_now_ns();
	}
}

/* Move one batch of one file: read parts (from the victim), write them to
 * leases of cls, re-point.  Returns bytes moved or -errno. */
static int64_t move_batch(struct gc *gc, uint64_t ino, enum lifetime_class cls,
			  struct fs_move_part *parts, size_t np, uint64_t total,
			  bool urgent)
{
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
		int r = zdev_io_batch(gc->dev, rq, n);

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
		throttle(gc, total);
	/* write, sequentially, lease by lease */
	while (pos < total) {
		struct zalloc_lease l;
		uint64_t n;

		ret = zalloc_acquire_gc(gc->za, cls, total - pos, &l);
		if (ret)
			break;
		n = ZF_MIN(l.len, total - pos);
		ssize_t w = zdev_write(gc->dev, l.offset, gc->buf + pos, n);

		if (w != (ssize_t)n) {
			ret = w < 0 ? (int)w : -EIO;
			zalloc_release(gc->za, &l, 0, ret);
			zf_err("gc: writing %llu bytes at %llu: %s", (unsigned long long)n,
			       (unsigned long long)l.offset, strerror(-ret));
			break;
		}
		zalloc_release(gc->za, &l, n, 0);	/* unclaimed until re-pointed */
		/* parts lying in [pos, pos + n) got their new place; a part cut
		 * by the lease end is split into two parts */
		for (size_t k = 0; k < np; k++) {
			struct fs_move_part *p = &parts[k];

			if (p->new || p->buf_off < pos || p->buf_off >= pos + n)
				continue;
			if (p->buf_off + p->len > pos + n) {
				/* caller sized parts[] with room for splits */
				uint64_t head = pos + n - p->buf_off;

				parts[np] = (struct fs_move_part){ p->off + head, p->len - head,
							      p->old + head, 0,
							      p->buf_off + head };
				np++;
				p->len = head;
			}
			p->new = l.offset + (p->buf_off - pos);
		}
		pos += n;
	}
	moved = fs_move_repoint(gc->fs, ino, parts, np);
	if (moved < 0)
		return moved;
	return ret ? ret : moved;
}

static int piece_dev_cmp(const void *a, const void *b)
{
	const struct fs_move_piece *x = a, *y = b;

	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* Move the pieces out of pcs[0..*n) whose device ranges overlap another's
 * (shared bytes) into *shared, sorted by device offset; pcs keeps its
 * order.  0 or -ENOMEM. */
static int split_shared(struct fs_move_piece *pcs, size_t *n, struct fs_move_piece **shared,
			size_t *nshared)
{
	struct fs_move_piece *byd = malloc((*n ? *n : 1) * sizeof(*byd));
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

/* Move the shared pieces sp[0..n) (sorted by dev): each cluster's bytes
 * once, batch by batch.  Bytes moved or -errno; *skipped: bytes left
 * because a sharer stayed locked. */
static int64_t move_shared(struct gc *gc, struct fs_move_piece *sp, size_t n, bool urgent,
			   uint64_t *skipped)
{
	int64_t moved = 0;

	for (size_t i = 0; i < n && !gc->stop;) {
		size_t j = i + 1;
		uint64_t lo = sp[i].dev, hi = sp[i].dev + sp[i].len;
		while (j < n && sp[j].dev < hi) {
			hi = ZF_MAX(hi, sp[j].dev + sp[j].len);
			j++;
		}
		int c = fs_move_class(gc->fs, sp[i].ino);
		enum lifetime_class cls = c < 0 ? LIFETIME_MEDIUM : (enum lifetime_class)c;
		for (uint64_t pos = lo; pos < hi && !gc->stop;) {
			uint64_t len = ZF_MIN(hi - pos, (uint64_t)GC_BATCH);
			struct zalloc_lease l;
			ssize_t rd = zdev_read(gc->dev, pos, gc->buf, len);

			if (rd != (ssize_t)len) {
				int e = rd < 0 ? (int)rd : -EIO;
				zf_err("gc: reading shared bytes at %llu from the victim: %s",
				       (unsigned long long)pos, strerror(-e));
				return e;
			}
			if (!urgent)
				throttle(gc, len);
			int r = zalloc_acquire_gc(gc->za, cls, len, &l);
			if (r)
				return moved ? moved : r;
			uint64_t w = ZF_MIN(l.len, len);
			ssize_t wr = zdev_write(gc->dev, l.offset, gc->buf, w);
			if (wr != (ssize_t)w) {
				r = wr < 0 ? (int)wr : -EIO;
				zalloc_release(gc->za, &l, 0, r);
				zf_err("gc: writing %llu shared bytes at %llu: %s",
				       (unsigned long long)w, (unsigned long long)l.offset,
				       strerror(-r));
				return r;
			}
			zalloc_release(gc->za, &l, w, 0);	/* unclaimed until re-pointed */
			int64_t m = fs_move_repoint_shared(gc->fs, sp + i, j - i, pos, w, l.offset);
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

/* Collect one victim.  1: one collected (moved or not), 0: no victim,
 * -errno. */
static int collect_one(struct gc *gc, bool urgent)
{
	const struct zdev_geometry *g = zdev_geometry(gc->dev);
	struct zalloc_gc_victim v;
	struct fs_move_piece *pcs = NULL, *spcs = NULL;
	struct fs_move_part *parts = NULL;
	size_t npcs = 0, nspcs = 0, maxparts;
	uint64_t moved = 0, skipped = 0, misplaced = 0;
	int ret;

	if (gc->skip)
		fs_move_busy_zones(gc->fs, gc->skip, gc->skip_words);
	ret = zalloc_gc_pick(gc->za, urgent, gc->skip, &v);
	if (ret == -ENOENT && gc->skip)	/* only busy files' zones: try them */
		ret = zalloc_gc_pick(gc->za, urgent, NULL, &v);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	gc->runs++;
	ret = fs_move_owners(gc->fs, v.start, g->zone_size, &pcs, &npcs);
	if (!ret)
		ret = split_shared(pcs, &npcs, &spcs, &nspcs);
	if (!ret && nspcs) {
		int64_t m = move_shared(gc, spcs, nspcs, urgent, &skipped);
		if (m < 0)
			ret = (int)m;
		else
			moved += (uint64_t)m;
	}
	/* parts of one batch: pieces cut to GC_BATCH, plus one split per lease */
	maxparts = 2 * (GC_BATCH / gc->bs) + 2;
	if (!ret && npcs && !(parts = calloc(maxparts, sizeof(*parts))))
		ret = -ENOMEM;
	for (size_t i = 0; !ret && i < npcs && !gc->stop;) {
		uint64_t ino = pcs[i].ino, total = 0;
		size_t np = 0;
		int cls = fs_move_class(gc->fs, ino);

		/* one batch: this file's pieces up to GC_BATCH bytes, a piece
		 * larger than what is left of the batch is cut */
		while (i < npcs && pcs[i].ino == ino && total < GC_BATCH &&
		       np < maxparts / 2) {
			struct fs_move_piece *p = &pcs[i];
			uint64_t n = ZF_MIN(p->len, GC_BATCH - total);

			parts[np++] = (struct fs_move_part){ p->off, n, p->dev, 0, total };
			total += n;
			p->off += n;
			p->dev += n;
			p->len -= n;
			if (!p->len)
				i++;
		}
		if (cls < 0)
			continue;	/* file gone: its extents went with it */
		int64_t r = move_batch(gc, ino, (enum lifetime_class)cls, parts, np, total, urgent);

		if (r == -ETIMEDOUT || r == -EDEADLK) {
			skipped += total;
			while (i < npcs && pcs[i].ino == ino)	/* skip the file */
				skipped += pcs[i++].len;
		} else if (r < 0) {
			ret = (int)r;
		} else {
			moved += (uint64_t)r;
			if (cls != (int)v.cls)
				misplaced += (uint64_t)r;
		}
		if (urgent && !gc_urgent(gc))
			urgent = false;
		else if (!urgent && gc_urgent(gc))
			urgent = true;
	}
	gc->moved += moved;
	gc->skipped += skipped;
	if (misplaced) {
		gc->misplaced += misplaced;
		gc->mixed_victims++;
		gc->mixed_moved += moved;
	}
	if (skipped)
		zalloc_gc_skipped(gc->za, skipped);
	{
		struct zalloc_zone_info zi;

		zalloc_gc_done_backoff(gc->za, v.zone, skipped ? GC_BACKOFF_NS
						       : ret == -ENOSPC ? GC_NOROOM_BACKOFF_NS : 0);
		if (zalloc_zone_info(gc->za, v.zone, &zi) == 0 && zi.valid_bytes == 0)
			gc->freed++;
		zf_dbg("gc: zone %u (%s, %llu valid, score %.3g): moved %llu, skipped %llu, valid now %llu, misplaced %llu",
		       v.zone, lifetime_class_name(v.cls), (unsigned long long)v.valid_bytes,
		       v.score, (unsigned long long)moved, (unsigned long long)skipped,
		       (unsigned long long)zi.valid_bytes, (unsigned long long)misplaced);
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
static void gc_report(struct gc *gc, const char *what);

/* The debug status line, every 10 s: from the idle loop and after each
 * victim (near full a round may never end).  The collector thread. */
static void gc_status_tick(struct gc *gc)
{
	uint64_t now = zf_now_ns();

	if (now - gc->report_ns > 10000000000ull) {
		gc->report_ns = now;
		gc_report(gc, "gc: status");
	}
}

static bool gc_round(struct gc *gc)
{
	bool active = false, stuck = false;

	while (!gc->stop) {
		struct zalloc_stats zs;
		uint64_t need;
		bool urgent, bg;
		int r;

		zalloc_get_stats(gc->za, &zs);
		need = fs_move_buffered(gc->fs) + zs.space_need_bytes;
		urgent = zs.space_waiters > 0 || zs.gc_waiters > 0 ||
			 zalloc_waiters(gc->za) > 0 || zs.free_zones <= gc->reserve;
		bg = zs.free_zones < (active ? gc->high : gc->low) || zs.free_bytes < need;
		if (!urgent && !bg)
			break;
		if (zs.pending_resets) {
			/* zones that only wait for a commit: free, no copying */
			fs_commit(gc->fs);
			zalloc_get_stats(gc->za, &zs);
			if (zs.free_zones > gc->reserve &&
			    zs.free_zones >= (active ? gc->high : gc->low) &&
			    zs.free_bytes >= need)
				break;
		}
		r = collect_one(gc, urgent);
		if (r <= 0) {
			if (r < 0)
				zf_warn("gc: %s", strerror(-r));
			stuck = true;
			break;
		}
		active = true;
		fs_commit(gc->fs);	/* the victim resets after the commit */
		/* The MANIFEST tailing must not wait for the round to end:
		 * when the fs stays near full a round never ends, and without
		 * exact levels the inferred ones drift deeper job after job. */
		fs_move_tick(gc->fs);
		gc_status_tick(gc);
	}
	return !stuck;
}

static void gc_report(struct gc *gc, const char *what)
{
	struct zalloc_stats zs;

	zalloc_get_stats(gc->za, &zs);
	zf_log(strcmp(what, "gc: status") ? ZF_LOG_INFO : ZF_LOG_DEBUG,
	       "%s: %llu victims (%llu emptied), %llu MB moved, %llu MB skipped (busy files), "
	       "%llu without room; free zones %u, valid %llu%%, writer waits %llu (%llu ms), "
	       "reserve taken %llu (after %llu waits); misplaced %llu MB of files now of another "
	       "class, in %llu victims that moved %llu MB",
	       what, (unsigned long long)gc->runs, (unsigned long long)gc->freed,
	       (unsigned long long)(gc->moved / 1000000), (unsigned long long)(gc->skipped / 1000000),
	       (unsigned long long)gc->noroom, zs.free_zones,
	       (unsigned long long)(zs.capacity_bytes ? zs.valid_bytes * 100 / zs.capacity_bytes : 0),
	       (unsigned long long)zs.gc_waits,
	       (unsigned long long)(zs.gc_wait_ns / 1000000),
	       (unsigned long long)zs.gc_reserve_taken, (unsigned long long)zs.gc_reserve_grants,
	       (unsigned long long)(gc->misplaced / 1000000),
	       (unsigned long long)gc->mixed_victims,
	       (unsigned long long)(gc->mixed_moved / 1000000));
}

static void *gc_main(void *arg)
{
	struct gc *gc = arg;

	pthread_mutex_lock(&gc->mu);
	while (!gc->stop) {
		pthread_mutex_unlock(&gc->mu);
		gc_status_tick(gc);
		pthread_mutex_lock(&gc->mu);
		if (!gc->kick) {
			struct timespec ts =
				zf_ns_to_timespec((int64_t)(zf_now_ns() + GC_TICK_MS * 1000000ull));
			pthread_cond_timedwait(&gc->cv, &gc->mu, &ts);
		}
		gc->kick = false;
		if (gc->stop)
			break;
		pthread_mutex_unlock(&gc->mu);
		fs_move_tick(gc->fs);	/* not GC: the MANIFESTs (fs_move.h) */
		if (!gc_round(gc))	/* do not spin on kicks it cannot serve */
			zf_sleep_until_ns(zf_now_ns() + GC_IDLE_NS);
		pthread_mutex_lock(&gc->mu);
	}
	pthread_mutex_unlock(&gc->mu);
	return NULL;
}

/* zalloc's kick (zalloc_set_gc): wake the collector; any thread, called
 * with no lock held. */
static void kick_cb(void *arg)
{
	struct gc *gc = arg;

	pthread_mutex_lock(&gc->mu);
	gc->kick = true;
	pthread_cond_signal(&gc->cv);
	pthread_mutex_unlock(&gc->mu);
}

/* zalloc's classes are the lifetime classes, one to one; its default class
 * (zones nobody adopted at mount) is the default lifetime. */
_Static_assert(ZALLOC_NR_CLASSES == LIFETIME_NR, "a zalloc class per lifetime class");
_Static_assert(ZALLOC_DEFAULT_CLASS == LIFETIME_MEDIUM, "the default lifetime");

/* Tell the victim policy which class holds the WAL: its young zones are
 * left to die in the background (zonealloc/zalloc_victim.h). */
static void mark_wal_class(struct gc *gc)
{
	zalloc_set_stream_flags(gc->za, LIFETIME_SHORT, ZALLOC_STREAM_DEFER_YOUNG);
}

/* What the collector knows of the fs it serves. */
static void gc_init(struct gc *gc, struct fs *fs)
{
	struct fs_move_info fi;

	fs_move_info(fs, &fi);
	gc->fs = fs;
	gc->dev = fi.dev;
	gc->za = fi.za;
	gc->bs = fi.bs;
	gc->gc_mbps = fi.gc_mbps;
	gc->read_only = fi.read_only;
}

/* fs_collector.start (fs_start): the thread, unless read-only. */
static int gc_start(void *arg)
{
	struct gc *gc = arg;
	struct zalloc_stats zs;
	pthread_condattr_t ca;
	int r;

	if (gc->read_only || gc->running)
		return 0;
	zalloc_get_stats(gc->za, &zs);
	gc->buf = zdev_buf_alloc(GC_BATCH);
	gc->skip_words = (zs.nr_zones + 63) / 64;
	gc->skip = calloc(gc->skip_words, sizeof(*gc->skip));
	if (!gc->buf || !gc->skip) {
		zdev_buf_free(gc->buf);
		free(gc->skip);
		gc->buf = NULL;
		gc->skip = NULL;
		return -ENOMEM;
	}
	gc->reserve = GC_RESERVE;
	gc->low = gc->reserve + ZF_MAX(2u, zs.nr_zones / 32);
	gc->high = gc->low + ZF_MAX(2u, zs.nr_zones / 64);
	gc->rate = (uint64_t)gc->gc_mbps * 1000000ull;
	pthread_mutex_init(&gc->mu, NULL);
	pthread_condattr_init(&ca);	/* deadlines come from zf_now_ns() */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&gc->cv, &ca);
	pthread_condattr_destroy(&ca);
	r = -pthread_create(&gc->th, NULL, gc_main, gc);
	if (r) {
		pthread_cond_destroy(&gc->cv);
		pthread_mutex_destroy(&gc->mu);
		zdev_buf_free(gc->buf);
		free(gc->skip);
		gc->buf = NULL;
		gc->skip = NULL;
		return r;
	}
	gc->running = true;
	mark_wal_class(gc);
	zalloc_set_gc(gc->za, gc->reserve, kick_cb, gc);
	zf_dbg("gc: started (reserve %u, low %u, high %u zones of %u; %u MB/s in the background)",
	       gc->reserve, gc->low, gc->high, zs.nr_zones, gc->gc_mbps);
	return 0;
}

/* fs_collector.stop (fs_unmount, first): the thread, then the state. */
static void gc_stop(void *arg)
{
	struct gc *gc = arg;

	if (gc->running) {
		gc_report(gc, "gc: at unmount");
		zalloc_set_gc(gc->za, 0, NULL, NULL);
		pthread_mutex_lock(&gc->mu);
		gc->stop = true;
		pthread_cond_signal(&gc->cv);
		pthread_mutex_unlock(&gc->mu);
		pthread_join(gc->th, NULL);
		/* writers still in zalloc_wait_room() (none should be left at
		 * unmount) may be about to kick: GC is off, they leave at once */
		while (zalloc_space_waiters(gc->za))
			zf_sleep_until_ns(zf_now_ns() + 1000000ull);
		gc->running = false;
		pthread_cond_destroy(&gc->cv);
		pthread_mutex_destroy(&gc->mu);
	}
	zdev_buf_free(gc->buf);
	free(gc->skip);
	free(gc);
}

int gc_attach(struct fs *fs)
{
	struct gc *gc;

	if (fs_get_collector(fs))
		return -EBUSY;
	gc = calloc(1, sizeof(*gc));
	if (!gc)
		return -ENOMEM;
	gc_init(gc, fs);
	gc->hook = (struct fs_collector){ .start = gc_start, .stop = gc_stop, .arg = gc };
	fs_set_collector(fs, &gc->hook);
	return 0;
}

int gc_run_once(struct fs *fs)
{
	const struct fs_collector *c = fs_get_collector(fs);
	struct gc tmp;
	int r;

	if (c && c->start == gc_start && ((struct gc *)c->arg)->running)
		return -EBUSY;	/* the thread does it */
	/* no thread: a temporary collector state on the stack */
	memset(&tmp, 0, sizeof(tmp));
	gc_init(&tmp, fs);
	tmp.buf = zdev_buf_alloc(GC_BATCH);
	if (!tmp.buf)
		return -ENOMEM;
	pthread_mutex_init(&tmp.mu, NULL);
	pthread_cond_init(&tmp.cv, NULL);
	mark_wal_class(&tmp);
	r = collect_one(&tmp, true);
	if (r > 0) {
		int cr = fs_commit(fs);

		if (cr)
			r = cr;
	}
	pthread_cond_destroy(&tmp.cv);
	pthread_mutex_destroy(&tmp.mu);
	zdev_buf_free(tmp.buf);
	return r;
}
