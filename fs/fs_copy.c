/* fs_copy — shared extents and copy_file_range.
 *
 * The share table (struct fs_share, fs_copy.h): for every data zone
 * that holds blocks referenced by more than one extent, one counter per
 * block of the references beyond the first.  Zones without such blocks
 * have no table, so unshared data costs nothing but a NULL test.  The
 * allocator knows nothing of sharing: its valid bytes count each physical
 * block once; a block's bytes are added with its first reference (the
 * write, or the collector's copy) and subtracted when the last reference
 * goes (fs_share_unref, the extent maps' drop callback).  The counters are
 * not in the log: the mount rebuilds them from the extent maps.
 *
 * A copy (fs_copy_file_range):
 *   1. src's buffered bytes are written out first (they are written some
 *      day anyway: then they can be shared);
 *   2. with both files' rw locks (ascending inode order; src shared, dst
 *      exclusive) and no write-out of dst in flight, the block-aligned
 *      middle (and src's partial last block when the copy ends both files)
 *      becomes dst's, in records of at most FS_COPY_MAX_RUNS runs: room in
 *      dst's map and in the share table first, then the COPY record, then
 *      fs_apply_copy (references added, dst's old range dropped, dst's
 *      buffered pages of the range forgotten);
 *   3. the unaligned edges (and whole copies whose offsets are not
 *      congruent modulo the block size, or whose blocks have 65,535
 *      references already) go through fs_read + fs_write.
 * Nobody waits for a write-out while holding two rw locks: a copy that
 * finds one in flight lets go of both, waits with one, and tries again.
 *
 * Thread safety: the table is [L] (fs->lock); the counters are atomics.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_copy.h"
#include "fs/fs_internal.h"

#define SHARE_MAX UINT16_MAX
#define COPY_TRIES 16			/* lock rounds before copying by buffer */
#define COPY_CHUNK (1u << 20)		/* bytes per buffered copy step */

/* ---- the share table [L] ---- */

static int share_setup(struct fs *fs)
{
	struct fs_share *sh = &fs->share;
	const struct zdev_geometry *g = zdev_geometry(fs->dev);

	if (sh->nzones)
		return 0;
	sh->refs = calloc(g->nr_zones, sizeof(*sh->refs));
	sh->nshared = calloc(g->nr_zones, sizeof(*sh->nshared));
	if (!sh->refs || !sh->nshared) {
		free(sh->refs);
		free(sh->nshared);
		sh->refs = NULL;
		sh->nshared = NULL;
		return -ENOMEM;
	}
	sh->zone_size = g->zone_size;
	sh->zone_blocks = (uint32_t)((g->zone_size + fs->bs - 1) / fs->bs);
	sh->nzones = g->nr_zones;
	return 0;
}

void fs_share_fini(struct fs *fs)
{
	struct fs_share *sh = &fs->share;

	for (uint32_t z = 0; z < sh->nzones; z++)
		free(sh->refs[z]);
	free(sh->refs);
	free(sh->nshared);
	sh->refs = NULL;
	sh->nshared = NULL;
	sh->nzones = 0;
	sh->shared_blocks = sh->extra_refs = 0;
}

/* The body runs once per zone that [dev, dev+len) touches, with z the
 * zone, [s, e) the bytes in it and [b0, b1) the blocks (of bs bytes)
 * they touch, counted from the zone's start. */
#define FOR_ZONE_PARTS(sh, bs, dev, len, z, b0, b1, s, e)                       \
	for (uint64_t s = (dev), e, _end = (dev) + (len), z, b0, b1;               \
	     s < _end && (z = s / (sh)->zone_size,                                 \
			  e = ZF_MIN(_end, (z + 1) * (sh)->zone_size),             \
			  b0 = (s - z * (sh)->zone_size) / (bs),                   \
			  b1 = (e - z * (sh)->zone_size + (bs) - 1) / (bs), 1);     \
	     s = e)

static void zone_free_if_unused(struct fs_share *sh, uint64_t z)
{
	if (z < sh->nzones && sh->refs[z] && sh->nshared[z] == 0) {
		free(sh->refs[z]);
		sh->refs[z] = NULL;
	}
}

void fs_share_unref(struct fs *fs, uint64_t dev, uint64_t len)
{
	struct fs_share *sh = &fs->share;

	if (!sh->nzones) {
		zalloc_valid_sub(fs->za, dev, len);
		return;
	}
	FOR_ZONE_PARTS(sh, fs->bs, dev, len, z, b0, b1, s, e) {
		uint16_t *r = z < sh->nzones ? sh->refs[z] : NULL;
		if (!r) {
			zalloc_valid_sub(fs->za, s, e - s);
			continue;
		}
		uint64_t zs = z * sh->zone_size;
		for (uint64_t b = b0; b < b1; b++) {
			if (r[b]) {
				r[b]--;
				sh->extra_refs--;
				if (!r[b]) {
					sh->nshared[z]--;
					sh->shared_blocks--;
				}
				continue;
			}
			/* the last reference: the block's bytes inside the range */
			uint64_t bs0 = ZF_MAX(s, zs + b * fs->bs);
			uint64_t bs1 = ZF_MIN(e, zs + (b + 1) * fs->bs);
			zalloc_valid_sub(fs->za, bs0, bs1 - bs0);
		}
		zone_free_if_unused(sh, z);
	}
}

/* Make the table of zone z exist. */
static int zone_table(struct fs *fs, uint64_t z)
{
	struct fs_share *sh = &fs->share;

	if (z >= sh->nzones)
		return -EUCLEAN;
	if (!sh->refs[z] && !(sh->refs[z] = calloc(sh->zone_blocks, sizeof(uint16_t))))
		return -ENOMEM;
	return 0;
}

/* One more reference to the blocks of [dev, dev+len); their tables exist. */
static int ref_range(struct fs *fs, uint64_t dev, uint64_t len, bool alloc)
{
	struct fs_share *sh = &fs->share;

	FOR_ZONE_PARTS(sh, fs->bs, dev, len, z, b0, b1, s, e) {
		int ret = alloc || z >= sh->nzones || !sh->refs[z] ? zone_table(fs, z) : 0;
		if (ret)
			return ret;
		uint16_t *r = sh->refs[z];
		for (uint64_t b = b0; b < b1; b++) {
			if (r[b] == SHARE_MAX)
				return -EUCLEAN;
			if (!r[b]++) {
				sh->nshared[z]++;
				sh->shared_blocks++;
			}
			sh->extra_refs++;
		}
		(void)s;
		(void)e;
	}
	return 0;
}

void fs_share_ref(struct fs *fs, uint64_t dev, uint64_t len)
{
	int ret = ref_range(fs, dev, len, false);
	if (ret)	/* fs_share_prepare was not called: a bug */
		zf_err("share table: reference to %llu+%llu not counted: %s",
		       (unsigned long long)dev, (unsigned long long)len, strerror(-ret));
}

int fs_share_prepare(struct fs *fs, const struct fs_cext *v, size_t n)
{
	struct fs_share *sh = &fs->share;
	int ret = share_setup(fs);

	for (size_t i = 0; i < n && !ret; i++) {
		FOR_ZONE_PARTS(sh, fs->bs, v[i].dev, v[i].len, z, b0, b1, s, e) {
			ret = zone_table(fs, z);
			if (ret)
				break;
			const uint16_t *r = sh->refs[z];
			for (uint64_t b = b0; b < b1 && !ret; b++)
				if (r[b] > SHARE_MAX - n)
					ret = -EMLINK;
			(void)s;
			(void)e;
		}
	}
	if (ret)
		fs_share_unprepare(fs, v, n);
	return ret;
}

void fs_share_unprepare(struct fs *fs, const struct fs_cext *v, size_t n)
{
	struct fs_share *sh = &fs->share;

	for (size_t i = 0; i < n && sh->nzones; i++)
		FOR_ZONE_PARTS(sh, fs->bs, v[i].dev, v[i].len, z, b0, b1, s, e) {
			zone_free_if_unused(sh, z);
			(void)b0;
			(void)b1;
			(void)s;
			(void)e;
		}
}

static int cmp_dev(const void *a, const void *b)
{
	const struct fs_cext *x = a, *y = b;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* v (sorted by dev) are references to bytes nobody else references: the
 * first reference to a byte adds it to the valid bytes, the others count
 * in the table. */
static int count_new(struct fs *fs, const struct fs_cext *v, size_t n, bool alloc)
{
	uint64_t hi = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t s = v[i].dev, e = v[i].dev + v[i].len;
		if (s < hi) {
			int ret = ref_range(fs, s, ZF_MIN(e, hi) - s, alloc);
			if (ret)
				return ret;
		}
		if (e > hi) {
			uint64_t a = ZF_MAX(s, hi);
			zalloc_valid_add(fs->za, a, e - a);
			hi = e;
		}
	}
	return 0;
}

int fs_share_add_new(struct fs *fs, const struct fs_cext *v, size_t n)
{
	return count_new(fs, v, n, false);
}

void fs_share_fill_stats(struct fs *fs, struct fs_stats *st)
{
	struct fs_share *sh = &fs->share;

	pthread_mutex_lock(&fs->lock);
	st->shared_bytes = sh->shared_blocks * fs->bs;
	st->shared_saved_bytes = sh->extra_refs * fs->bs;
	pthread_mutex_unlock(&fs->lock);
	st->copies = sh->copies;
	st->copy_shared_bytes = sh->copy_shared_bytes;
	st->copy_written_bytes = sh->copy_written_bytes;
	st->gc_shared_moves = sh->gc_shared_moves;
}

int fs_share_rebuild(struct fs *fs)
{
	struct fs_cext *v = NULL;
	size_t n = 0, cap = 0;
	int ret = share_setup(fs);

	for (struct fs_inode *in = fs_inode_first(fs); in && !ret; in = fs_inode_next(fs, in)) {
		struct fs_cext *nv = zf_grow(v, &cap, n + extmap_count(&in->map), sizeof(*nv), 64);
		if (!nv) {
			ret = -ENOMEM;
			break;
		}
		v = nv;
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c))
			v[n++] = (struct fs_cext){ in->ino, e->off, e->len, e->dev };
	}
	if (!ret && n) {
		qsort(v, n, sizeof(*v), cmp_dev);
		ret = count_new(fs, v, n, true);
		if (ret == -EUCLEAN)
			zf_err("a device block is referenced more than %u times", SHARE_MAX + 1);
	}
	free(v);
	return ret;
}

uint32_t fs_share_refs(const struct fs *fs, uint64_t dev)
{
	const struct fs_share *sh = &fs->share;
	if (!sh->nzones || !sh->zone_size)
		return 0;
	uint64_t z = dev / sh->zone_size;
	if (z >= sh->nzones || !sh->refs[z])
		return 0;
	return sh->refs[z][(dev - z * sh->zone_size) / fs->bs];
}

uint32_t fs_share_zone_count(const struct fs *fs, uint32_t z, uint32_t *counted)
{
	const struct fs_share *sh = &fs->share;
	uint32_t c = 0;

	if (z < sh->nzones && sh->refs[z])
		for (uint32_t b = 0; b < sh->zone_blocks; b++)
			c += sh->refs[z][b] != 0;
	*counted = c;
	return z < sh->nzones ? sh->nshared[z] : 0;
}

uint64_t fs_share_file_bytes(const struct fs *fs, const struct fs_inode *in)
{
	const struct fs_share *sh = &fs->share;
	uint64_t bytes = 0;

	if (!sh->shared_blocks)
		return 0;
	struct extmap_cur c;
	for (const struct extmap_ext *x = extmap_seek(&in->map, 0, &c); x;
	     x = extmap_next(&in->map, &c)) {
		FOR_ZONE_PARTS(sh, fs->bs, x->dev, x->len, z, b0, b1, s, e) {
			const uint16_t *r = z < sh->nzones ? sh->refs[z] : NULL;
			for (uint64_t b = b0; r && b < b1; b++)
				if (r[b])
					bytes += ZF_MIN(e, z * sh->zone_size + (b + 1) * fs->bs) -
						 ZF_MAX(s, z * sh->zone_size + b * fs->bs);
		}
	}
	return bytes;
}

/* ---- copy_file_range ---- */

/* Copy through the buffer: fs_read, then fs_write.  Bytes copied or
 * -errno (nothing copied).  No locks held. */
static ssize_t copy_bytes(struct fs *fs, uint64_t src, uint64_t soff, uint64_t dst,
			  uint64_t doff, uint64_t len)
{
	uint8_t *buf = len ? malloc(ZF_MIN(len, (uint64_t)COPY_CHUNK)) : NULL;
	uint64_t done = 0;
	ssize_t ret = 0;

	if (len && !buf)
		return -ENOMEM;
	while (done < len) {
		size_t n = (size_t)ZF_MIN(len - done, (uint64_t)COPY_CHUNK);
		ssize_t r = fs_read(fs, src, soff + done, n, buf);
		if (r <= 0) {
			ret = r;
			break;
		}
		ssize_t w = fs_write(fs, dst, doff + done, buf, (size_t)r, false);
		if (w < 0) {
			ret = w;
			break;
		}
		done += (uint64_t)w;
		if (w < r)
			break;
	}
	free(buf);
	fs->share.copy_written_bytes += done;
	return done ? (ssize_t)done : ret;
}

static void lock_pair(struct fs_inode *src, struct fs_inode *dst)
{
	if (src == dst) {
		pthread_rwlock_wrlock(&dst->rw);
	} else if (src->ino < dst->ino) {
		pthread_rwlock_rdlock(&src->rw);
		pthread_rwlock_wrlock(&dst->rw);
	} else {
		pthread_rwlock_wrlock(&dst->rw);
		pthread_rwlock_rdlock(&src->rw);
	}
}

static void unlock_pair(struct fs_inode *src, struct fs_inode *dst)
{
	pthread_rwlock_unlock(&dst->rw);
	if (src != dst)
		pthread_rwlock_unlock(&src->rw);
}

/* The runs of src's map in [a, b) as dst runs at a + delta (at most max);
 * *end: where the runs stop covering (b, or the end of the last run when
 * max was reached). */
static uint32_t collect_runs(const struct fs_inode *src, uint64_t a, uint64_t b,
			     int64_t delta, struct fs_cext *v, uint32_t max, uint64_t *end)
{
	uint32_t n = 0;

	*end = b;
	struct extmap_cur c;
	for (const struct extmap_ext *e = extmap_seek(&src->map, a, &c); e;
	     e = extmap_next(&src->map, &c)) {
		if (e->off >= b)
			break;
		if (n == max) {
			*end = ZF_MAX(a, e->off);
			break;
		}
		uint64_t s = ZF_MAX(a, e->off), t = ZF_MIN(b, e->off + e->len);
		v[n++] = (struct fs_cext){ 0, (uint64_t)((int64_t)s + delta), t - s,
					   e->dev + (s - e->off) };
	}
	return n;
}

/* One COPY record: dst [a + delta, end + delta) from src's runs.  [L+RW]
 * taken here (fs->lock).  Returns the src offset reached or -errno. */
static int64_t share_step(struct fs *fs, struct fs_inode *src, struct fs_inode *dst,
			  uint64_t a, uint64_t b, int64_t delta, uint64_t size_after,
			  struct fs_cext *v)
{
	uint64_t end;
	int ret;

	pthread_mutex_lock(&fs->lock);
	uint32_t n = collect_runs(src, a, b, delta, v, FS_COPY_MAX_RUNS, &end);
	uint64_t da = (uint64_t)((int64_t)a + delta), dlen = end - a;
	uint64_t size = ZF_MAX(dst->size, ZF_MIN(size_after, da + dlen));
	/* the copy takes the source's lifetime unless dst's was set */
	bool inherit = dst->cls_src < LIFETIME_SRC_RULE;
	uint8_t cls = inherit ? src->cls : dst->cls;
	uint8_t csrc = inherit ? src->cls_src : dst->cls_src;

	ret = extmap_reserve(&dst->map, n + 2);
	if (!ret)
		ret = fs_share_prepare(fs, v, n);
	if (!ret) {
		ret = fs_log_copy(fs, src->ino, dst->ino, da, dlen, size, cls, csrc, v, n);
		if (ret)
			fs_share_unprepare(fs, v, n);
	}
	if (!ret) {
		fs_apply_copy(fs, dst, da, dlen, size, cls, csrc, v, n);	/* prepared */
		dst->mtime = dst->ctime = fs_now();
		dst->attr_dirty = true;
		fs_mark_dirty(fs, dst);
	}
	pthread_mutex_unlock(&fs->lock);
	if (ret)
		return ret;
	fs_data_drop_range(fs, dst, da, da + dlen);
	uint64_t shared = 0;
	for (uint32_t i = 0; i < n; i++)
		shared += v[i].len;
	fs->share.copy_shared_bytes += shared;
	return (int64_t)end;
}

/* Share src [a, *b) with dst at a + delta.  *b past send (the copy's end
 * in src) shares src's partial last block: it is cut back to the block
 * boundary unless the copy still ends both files there (src's size is
 * send, dst's at most dend).  0, 1 (the files did not stay quiet: copy by
 * buffer) or -errno. */
static int share_range(struct fs *fs, struct fs_inode *src, struct fs_inode *dst,
		       uint64_t a, uint64_t *b, int64_t delta, uint64_t send, uint64_t dend)
{
	struct fs_cext *v = malloc(FS_COPY_MAX_RUNS * sizeof(*v));
	int ret = 1;

	if (!v)
		return -ENOMEM;
	for (int t = 0; t < COPY_TRIES && ret == 1; t++) {
		/* src's bytes on the device, so that they can be shared */
		pthread_rwlock_wrlock(&src->rw);
		ret = fs_data_buffered(fs, src, a, *b) ? fs_data_writeout(fs, src, true) : 0;
		pthread_rwlock_unlock(&src->rw);
		if (ret)
			break;
		pthread_rwlock_wrlock(&dst->rw);
		fs_data_wait_writeout(dst);	/* its extents would come after ours */
		pthread_rwlock_unlock(&dst->rw);
		lock_pair(src, dst);
		if (dst->wb_busy || fs_data_buffered(fs, src, a, *b)) {
			unlock_pair(src, dst);
			ret = 1;	/* a writer came in between: again */
			continue;
		}
		pthread_mutex_lock(&fs->lock);
		if (*b > send && (src->size != send || dst->size > dend))
			*b = ZF_ALIGN_DOWN(send, fs->bs);
		bool grows = (uint64_t)((int64_t)a + delta) > dst->size;
		pthread_mutex_unlock(&fs->lock);
		fs_pf_invalidate(fs, dst);
		/* The gap between dst's end and the copy reads as zeros. */
		ret = grows ? fs_data_zero_tail(fs, dst) : 0;
		if (ret) {
			unlock_pair(src, dst);
			break;
		}
		for (uint64_t pos = a; pos < *b;) {
			int64_t r = share_step(fs, src, dst, pos, *b, delta, dend, v);
			if (r < 0) {
				ret = (int)r;
				break;
			}
			pos = (uint64_t)r;
		}
		unlock_pair(src, dst);
	}
	free(v);
	return ret;
}

ssize_t fs_copy_file_range(struct fs *fs, uint64_t src_ino, uint64_t soff, uint64_t dst_ino,
			   uint64_t doff, uint64_t len, unsigned int flags)
{
	struct fs_inode *src, *dst;
	ssize_t ret = 0;

	if (flags)
		return -EINVAL;
	if (fs->read_only)
		return -EROFS;
	if (soff + len < soff || doff + len < doff)
		return -EINVAL;
	src = fs_inode_pin(fs, src_ino);
	dst = src ? fs_inode_pin(fs, dst_ino) : NULL;
	if (!src || !dst) {
		ret = -ENOENT;
		goto out;
	}
	if (S_ISDIR(src->mode) || S_ISDIR(dst->mode)) {
		ret = -EISDIR;
		goto out;
	}
	if (!S_ISREG(src->mode) || !S_ISREG(dst->mode)) {
		ret = -EINVAL;
		goto out;
	}
	pthread_mutex_lock(&fs->lock);
	uint64_t ssize = src->size, dsize = dst->size;
	pthread_mutex_unlock(&fs->lock);
	if (soff >= ssize || len == 0)
		goto out;
	len = ZF_MIN(len, ssize - soff);
	if (doff + len > (1ull << 50)) {
		ret = -EFBIG;
		goto out;
	}
	if (src == dst && soff < doff + len && doff < soff + len) {
		ret = -EINVAL;	/* overlapping ranges of one file */
		goto out;
	}
	uint64_t bs = fs->bs, send = soff + len, dend = doff + len;
	int64_t delta = (int64_t)doff - (int64_t)soff;
	uint64_t a = ZF_ALIGN_UP(soff, bs), b = ZF_ALIGN_DOWN(send, bs);
	/* src's partial last block is shared too when the copy ends both
	 * files there: its bytes past src's end are zero on the device, as
	 * dst's past its new end must be. */
	if (send == ssize && send % bs && dend >= dsize)
		b = ZF_ALIGN_UP(send, bs);
	if (soff % bs != doff % bs || a >= b) {	/* nothing to share */
		ret = copy_bytes(fs, src_ino, soff, dst_ino, doff, len);
		goto done;
	}
	uint64_t done = 0;
	if (a > soff) {	/* the head edge */
		ret = copy_bytes(fs, src_ino, soff, dst_ino, doff, a - soff);
		if (ret < (ssize_t)(a - soff))
			goto done;
		done = a - soff;
	}
	int r = share_range(fs, src, dst, a, &b, delta, send, dend);
	/* the files stayed busy, or a block has all the references it can
	 * count: copy the (rest of the) middle instead */
	if (r == -EMLINK)
		r = 1;
	if (r == 1) {
		b = ZF_MIN(b, send);
		ret = copy_bytes(fs, src_ino, a, dst_ino, (uint64_t)((int64_t)a + delta), b - a);
		if (ret < (ssize_t)(b - a)) {
			ret = ret > 0 || done ? (ssize_t)done + ZF_MAX(ret, 0) : ret;
			goto done;
		}
	} else if (r < 0) {
		ret = done ? (ssize_t)done : r;
		goto done;
	}
	done += ZF_MIN(b, send) - a;
	if (b < send) {	/* the tail edge */
		ret = copy_bytes(fs, src_ino, b, dst_ino, (uint64_t)((int64_t)b + delta), send - b);
		if (ret < 0 && !done)
			goto done;
		done += ret > 0 ? (uint64_t)ret : 0;
	}
	ret = (ssize_t)done;
done:
	if (ret > 0)
		fs->share.copies++;
out:
	if (dst)
		fs_inode_unpin(fs, dst);
	if (src)
		fs_inode_unpin(fs, src);
	return ret;
}
