/* fs_prealloc — space that fallocate(2) promised: the ranges of a file that
 * were fallocated and are not written yet, per inode (struct fs_inode's pa),
 * and their sum (fs->pa_bytes).
 *
 * Zones cannot be preallocated, but space can: a fallocated range is held
 * out of what other writers may take (write admission keeps fs->pa_bytes
 * free, less what the writer writes into its own ranges), counted in df
 * and st_blocks, so that a later write into it cannot fail for space.
 *
 * Invariants: a file's ranges are sorted, disjoint, block-aligned, and
 * never cover a mapped or buffered block: a write takes the blocks it
 * buffers out (the write buffer counts them from then on), and an extent
 * recorded into a range takes that part out, live and at replay, so the
 * PREALLOC record needs no record of its consumption; pa_bytes is their
 * sum.  (A snapshot taken while written bytes are only buffered records
 * the ranges without them: a crash then loses those bytes and their
 * room, no more.)  A PREALLOC record adds the
 * holes of its range; truncates, punches, extents and copies take ranges
 * away; the inode's destruction frees them.  Replay applies the same
 * functions in the same order, so the ranges survive remounts and crashes
 * as the log does.
 *
 * Locking: the ranges are [L+RW] (changed with fs->lock and in->rw, read
 * under either); fs->pa_bytes is atomic.  Growth of the array can fail:
 * fs_pa_room is called before a record is appended, so that applying it
 * cannot; a split that finds no room keeps the whole range (the space
 * stays held, which only costs room, until the file is truncated or
 * deleted).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"
#include "fs/fs_prealloc.h"

int fs_pa_room(struct fs_inode *in, uint32_t extra)
{
	if (in->npa + extra <= in->pacap)
		return 0;
	uint32_t cap = ZF_MAX(in->pacap * 2, in->npa + extra);
	struct fs_pa *n = realloc(in->pa, (size_t)cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	in->pa = n;
	in->pacap = cap;
	return 0;
}

static void pa_count(struct fs *fs, struct fs_inode *in, int64_t delta)
{
	in->pa_bytes += (uint64_t)delta;
	fs->pa_bytes += (uint64_t)delta;
}

/* Insert [off, off+len) (disjoint from every range) at its place, merging
 * with neighbours.  Room for one more range must exist. */
static void pa_insert(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	uint32_t i = 0;

	while (i < in->npa && in->pa[i].off < off)
		i++;
	bool left = i > 0 && in->pa[i - 1].off + in->pa[i - 1].len == off;
	bool right = i < in->npa && off + len == in->pa[i].off;
	if (left && right) {
		in->pa[i - 1].len += len + in->pa[i].len;
		for (uint32_t k = i; k + 1 < in->npa; k++)
			in->pa[k] = in->pa[k + 1];
		in->npa--;
	} else if (left) {
		in->pa[i - 1].len += len;
	} else if (right) {
		in->pa[i].off = off;
		in->pa[i].len += len;
	} else {
		for (uint32_t k = in->npa; k > i; k--)
			in->pa[k] = in->pa[k - 1];
		in->pa[i] = (struct fs_pa){ off, len };
		in->npa++;
	}
	pa_count(fs, in, (int64_t)len);
}

uint32_t fs_pa_holes(const struct fs_inode *in, uint64_t off, uint64_t len)
{
	struct extmap_cur c;
	uint32_t n = 1;

	for (const struct extmap_ext *e = extmap_seek(&in->map, off, &c);
	     e && e->off < off + len; e = extmap_next(&in->map, &c))
		n++;
	return n;
}

/* Add the parts of [a, b) that no range covers yet; the bytes added. */
static uint64_t pa_fill(struct fs *fs, struct fs_inode *in, uint64_t a, uint64_t b)
{
	uint64_t added = 0;

	while (a < b) {
		uint32_t i = 0;
		while (i < in->npa && in->pa[i].off + in->pa[i].len <= a)
			i++;
		if (i < in->npa && in->pa[i].off <= a) {	/* held already */
			a = in->pa[i].off + in->pa[i].len;
			continue;
		}
		uint64_t stop = i < in->npa ? ZF_MIN(b, in->pa[i].off) : b;
		if (fs_pa_room(in, 1))
			break;	/* fs_pa_room was called before: not reached */
		pa_insert(fs, in, a, stop - a);
		added += stop - a;
		a = stop;
	}
	return added;
}

uint64_t fs_pa_add(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, pos = off, added = 0;
	struct extmap_cur c;

	for (const struct extmap_ext *e = extmap_seek(&in->map, off, &c); e && e->off < end;
	     e = extmap_next(&in->map, &c)) {
		if (e->off > pos)
			added += pa_fill(fs, in, pos, e->off);
		pos = ZF_MAX(pos, e->off + e->len);
	}
	if (pos < end)
		added += pa_fill(fs, in, pos, end);
	return added;
}

void fs_pa_sub(struct fs *fs, struct fs_inode *in, uint64_t off, uint64_t len)
{
	uint64_t end = len > UINT64_MAX - off ? UINT64_MAX : off + len;

	for (uint32_t i = 0; i < in->npa;) {
		struct fs_pa *p = &in->pa[i];
		uint64_t pe = p->off + p->len;
		if (pe <= off || p->off >= end) {
			i++;
			continue;
		}
		if (p->off < off && pe > end) {	/* split in two */
			if (fs_pa_room(in, 1)) {
				i++;	/* no memory: the whole range stays held */
				continue;
			}
			p = &in->pa[i];
			for (uint32_t k = in->npa; k > i + 1; k--)
				in->pa[k] = in->pa[k - 1];
			in->pa[i + 1] = (struct fs_pa){ end, pe - end };
			p->len = off - p->off;
			in->npa++;
			pa_count(fs, in, -(int64_t)(end - off));
			return;
		}
		if (p->off < off) {		/* its tail goes */
			pa_count(fs, in, -(int64_t)(pe - off));
			p->len = off - p->off;
			i++;
		} else if (pe > end) {		/* its head goes */
			pa_count(fs, in, -(int64_t)(end - p->off));
			p->len = pe - end;
			p->off = end;
			i++;
		} else {			/* all of it goes */
			pa_count(fs, in, -(int64_t)p->len);
			for (uint32_t k = i; k + 1 < in->npa; k++)
				in->pa[k] = in->pa[k + 1];
			in->npa--;
		}
	}
}

uint64_t fs_pa_overlap(const struct fs_inode *in, uint64_t off, uint64_t len)
{
	uint64_t end = off + len, n = 0;

	for (uint32_t i = 0; i < in->npa; i++) {
		uint64_t a = ZF_MAX(off, in->pa[i].off);
		uint64_t b = ZF_MIN(end, in->pa[i].off + in->pa[i].len);
		if (a < b)
			n += b - a;
	}
	return n;
}

void fs_pa_free(struct fs *fs, struct fs_inode *in)
{
	fs->pa_bytes -= in->pa_bytes;
	in->pa_bytes = 0;
	free(in->pa);
	in->pa = NULL;
	in->npa = in->pacap = 0;
}
