/* fs_seek — SEEK_DATA / SEEK_HOLE (fs_lseek): a file's data is what its
 * extent map maps plus the pages its write buffer holds; everything else
 * below the size is a hole, and so is the end of the file.  Answers are at
 * block granularity (both kinds of data come in whole blocks).  Reads
 * in->map and the write buffer under in->rw shared (fs.h lock order). */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

/* The first buffered page ending after pos: its start (bytes), or
 * UINT64_MAX.  O(pages of the chunks looked at). [RW] */
static uint64_t next_buffered(const struct fs *fs, const struct fs_inode *in, uint64_t pos)
{
	uint64_t su = fs->opts.stripe_unit, bs = fs->bs;
	for (uint32_t k = fs_data_chunk_pos(in, pos / su); k < in->nchunks; k++) {
		const struct fs_chunk *c = in->chunks[k];
		uint64_t base = c->idx * su;
		uint64_t i = pos > base ? (pos - base) / bs : 0;
		for (; i < fs->pages_per_chunk; i++)
			if (fs_data_page_present(c, (uint32_t)i))
				return ZF_MAX(base + i * bs, pos);
	}
	return UINT64_MAX;
}

/* The end of the run of buffered pages holding pos (pos if none does). [RW] */
static uint64_t buffered_run_end(const struct fs *fs, const struct fs_inode *in, uint64_t pos)
{
	uint64_t su = fs->opts.stripe_unit, bs = fs->bs;
	uint32_t k = fs_data_chunk_pos(in, pos / su);
	for (; k < in->nchunks && in->chunks[k]->idx * su <= pos; k++) {
		const struct fs_chunk *c = in->chunks[k];
		uint64_t base = c->idx * su, i = (pos - base) / bs;
		while (i < fs->pages_per_chunk && fs_data_page_present(c, (uint32_t)i))
			i++;
		if (base + i * bs <= pos)
			return pos;
		pos = base + i * bs;	/* the run may go on in the next chunk */
	}
	return pos;
}

/* The first data byte at or after pos, or UINT64_MAX. [RW] */
static uint64_t next_data(const struct fs *fs, const struct fs_inode *in, uint64_t pos)
{
	struct extmap_cur c;
	const struct extmap_ext *e = extmap_seek(&in->map, pos, &c);
	uint64_t ext = e ? ZF_MAX(e->off, pos) : UINT64_MAX;
	return ZF_MIN(ext, next_buffered(fs, in, pos));
}

/* The first hole byte at or after pos (data at pos or not). [RW] */
static uint64_t next_hole(const struct fs *fs, const struct fs_inode *in, uint64_t pos)
{
	for (;;) {
		struct extmap_cur c;
		const struct extmap_ext *e = extmap_seek(&in->map, pos, &c);
		uint64_t end = pos;
		/* extents touching each other end to end are one run */
		while (e && e->off <= end) {
			end = e->off + e->len;
			e = extmap_next(&in->map, &c);
		}
		end = buffered_run_end(fs, in, end);
		if (end == pos)
			return pos;
		pos = end;
	}
}

int64_t fs_lseek(struct fs *fs, uint64_t ino, int64_t off, int whence)
{
	int64_t ret;
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	struct fs_inode *in = fs_inode_pin(fs, ino);
	if (!in)
		return -ENOENT;
	if (!S_ISREG(in->mode)) {
		fs_inode_unpin(fs, in);
		return S_ISDIR(in->mode) ? -EISDIR : -EINVAL;
	}
	pthread_rwlock_rdlock(&in->rw);
	uint64_t size = in->size;
	if (off < 0 || (uint64_t)off >= size) {
		ret = -ENXIO;
	} else if (whence == SEEK_DATA) {
		uint64_t d = next_data(fs, in, (uint64_t)off);
		ret = d >= size ? -ENXIO : (int64_t)d;
	} else {
		ret = (int64_t)ZF_MIN(next_hole(fs, in, (uint64_t)off), size);
	}
	pthread_rwlock_unlock(&in->rw);
	fs_inode_unpin(fs, in);
	return ret;
}
