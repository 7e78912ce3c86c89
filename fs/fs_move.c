/* fs_move.c — the fs's side of the collector's moves (contract: fs_move.h):
 * the owners of a zone's bytes, re-pointing them to their copy, the
 * collector's registration.
 *
 * Locking: as fs_move.h says; [L] marks code that runs with fs->lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"
#include "fs/fs_move.h"

#define MOVE_LOCK_WAIT_MS 50		/* one try for a file's rw lock */
#define MOVE_LOCK_TRIES 4
#define MOVE_MAX_SHARERS 64		/* files re-pointed by one REMAP */

void fs_move_info(struct fs *fs, struct fs_move_info *out)
{
	*out = (struct fs_move_info){
		.dev = fs->dev, .za = fs->za, .bs = fs->bs,
		.data_first = fs->sb.data_first, .data_count = fs->sb.data_count,
		.gc_mbps = fs->opts.gc_mbps, .read_only = fs->read_only,
	};
}

uint64_t fs_move_buffered(struct fs *fs)
{
	return fs->buffered;
}

void fs_move_tick(struct fs *fs)
{
	fs_lifetime_tail_manifests(fs);
}

void fs_set_collector(struct fs *fs, const struct fs_collector *c)
{
	fs->collector = c;
}

const struct fs_collector *fs_get_collector(struct fs *fs)
{
	return fs->collector;
}

static int piece_cmp(const void *a, const void *b)
{
	const struct fs_move_piece *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

int fs_move_owners(struct fs *fs, uint64_t start, uint64_t zsize,
		   struct fs_move_piece **out, size_t *nout)
{
	struct fs_move_piece *v = NULL;
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
			struct fs_move_piece *nv = zf_grow(v, &cap, n + 1, sizeof(*nv), 64);
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
			v[n++] = (struct fs_move_piece){ in->ino, e->off + (a - e->dev),
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

static int timed_wrlock(pthread_rwlock_t *rw)
{
	for (int t = 0; t < MOVE_LOCK_TRIES; t++) {
		struct timespec ts = zf_realtime_after(MOVE_LOCK_WAIT_MS * 1000000ull);
		int r = pthread_rwlock_timedwrlock(rw, &ts);
		if (r == 0)
			return 0;
		if (r != ETIMEDOUT)
			return -r;
	}
	return -ETIMEDOUT;
}

int64_t fs_move_repoint(struct fs *fs, uint64_t ino, struct fs_move_part *parts,
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
		struct fs_move_part *p = &parts[k];
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
static uint32_t claim_shared(const struct fs_move_piece *sp, size_t np, struct fs_inode **locked,
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

int64_t fs_move_repoint_shared(struct fs *fs, const struct fs_move_piece *sp,
			       size_t np, uint64_t pos, uint64_t w, uint64_t nd)
{
	uint64_t inos[MOVE_MAX_SHARERS];
	struct fs_inode *in[MOVE_MAX_SHARERS];
	size_t ni = 0, locked = 0;
	struct fs_cext *v = malloc(FS_REMAP_MAX_RUNS * sizeof(*v));
	uint32_t n = 0;
	int64_t moved = 0;
	int r = 0;

	if (!v) {
		zalloc_discard(fs->za, nd, w);
		return -ENOMEM;
	}
	for (size_t k = 0; k < np && ni < MOVE_MAX_SHARERS; k++) {
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

/* The try-lock under fs->lock never blocks, so the lock order is kept. */
void fs_move_busy_zones(struct fs *fs, uint64_t *skip, size_t words)
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

/* Where moved data goes: into zones of its file's class as it is now (not
 * the victim's class, and not one class up: survivors of a zone do not
 * live much longer than their zone-mates, docs/placement.md). */
int fs_move_class(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in;
	int cls;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, ino);
	cls = in ? (int)in->cls : -ENOENT;
	pthread_mutex_unlock(&fs->lock);
	return cls;
}
