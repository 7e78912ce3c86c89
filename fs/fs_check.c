/* fs_check — fsck: replay the metadata read-only and check the invariants
 * the file system relies on:
 *   - every extent lies in a data zone, below that zone's write pointer and
 *     within its capacity, and is block-aligned;
 *   - no device byte belongs to two extents (two files, or twice in one);
 *   - every name points at an existing inode; link counts match names
 *     (files: number of names; directories: 2 + subdirectories);
 *   - every inode except the root has a name;
 *   - a file's extents end within its size (rounded up to the block).
 * Nothing is written.  Returns the number of problems, or -errno when the
 * file system cannot be read at all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

struct dext { uint64_t dev, len, ino; };

static int cmp_dext(const void *a, const void *b)
{
	const struct dext *x = a, *y = b;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* How often ino appears in the sorted t[0..n). */
static uint32_t names_of(const uint64_t *t, size_t n, uint64_t ino)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t[mid] < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	uint32_t c = 0;
	while (lo < n && t[lo] == ino) {
		c++;
		lo++;
	}
	return c;
}

int fs_check(struct zdev *dev, bool verbose, fs_report_fn report, void *arg)
{
	struct fs_opts o;
	struct fs *fs;
	const struct zdev_geometry *g = zdev_geometry(dev);
	struct zdev_zone *zones = NULL;
	struct dext *all = NULL;
	bool *logz = NULL;
	uint64_t *targets = NULL;
	size_t nall = 0, cap = 0;
	uint64_t files = 0, dirs = 0, bytes = 0, extents = 0;
	int problems = 0, ret;

	fs_opts_default(&o);
	o.read_only = true;
	o.commit_interval_ms = 0;
	/* Nothing is written: a stripe unit that fits any supported zone
	 * (capacity >= 128 KiB, blocks <= 64 KiB), or small-zone devices
	 * could not be checked at all. */
	o.stripe_unit = 64u << 10;
	ret = fs_mount(dev, &o, &fs);
	if (ret)
		return ret;
	zones = calloc(g->nr_zones, sizeof(*zones));
	if (!zones) {
		ret = -ENOMEM;
		goto out;
	}
	ret = zdev_report_zones(dev, 0, g->nr_zones, zones);
	if (ret < 0)
		goto out;
	ret = 0;
#define PROBLEM(...) do { problems++; report(arg, __VA_ARGS__); } while (0)
	/* Data zones the metadata log holds: no extent may point into them. */
	logz = calloc(g->nr_zones, sizeof(*logz));
	uint32_t nlog = mlog_borrowed_zones(fs->mlog, NULL, 0);
	uint32_t *lz = calloc(nlog + 1, sizeof(*lz));
	if (!logz || !lz) {
		free(lz);
		ret = -ENOMEM;
		goto out;
	}
	nlog = mlog_borrowed_zones(fs->mlog, lz, nlog);
	for (uint32_t i = 0; i < nlog; i++)
		if (lz[i] < g->nr_zones)
			logz[lz[i]] = true;
	free(lz);

	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in)) {
		if (in->dir)
			dirs++;
		else if (S_ISREG(in->mode))
			files++;
		uint64_t limit = ZF_ALIGN_UP(in->size, fs->bs);
		for (size_t i = 0; i < in->map.n; i++) {
			const struct extmap_ext *e = &in->map.v[i];
			uint32_t z = (uint32_t)(e->dev / g->zone_size);
			extents++;
			bytes += e->len;
			if (e->off % fs->bs || e->len % fs->bs || e->dev % fs->bs)
				PROBLEM("inode %llu: extent %llu+%llu is not block-aligned",
					(unsigned long long)in->ino,
					(unsigned long long)e->off, (unsigned long long)e->len);
			if (z < fs->sb.data_first || z >= fs->sb.data_first + fs->sb.data_count) {
				PROBLEM("inode %llu: extent at device offset %llu is outside the data zones",
					(unsigned long long)in->ino, (unsigned long long)e->dev);
				continue;
			}
			if (logz[z])
				PROBLEM("inode %llu: extent at device offset %llu lies in zone %u, "
					"which holds the metadata log",
					(unsigned long long)in->ino, (unsigned long long)e->dev, z);
			const struct zdev_zone *zz = &zones[z];
			if (e->dev + e->len > zz->wp || e->dev + e->len > zz->start + zz->capacity)
				PROBLEM("inode %llu: extent %llu+%llu in zone %u ends beyond the write pointer (%llu)",
					(unsigned long long)in->ino, (unsigned long long)e->off,
					(unsigned long long)e->len, z,
					(unsigned long long)(zz->wp - zz->start));
			if (e->off + e->len > limit)
				PROBLEM("inode %llu: extent %llu+%llu lies beyond the file size %llu",
					(unsigned long long)in->ino, (unsigned long long)e->off,
					(unsigned long long)e->len, (unsigned long long)in->size);
			if (nall == cap) {
				cap = cap ? cap * 2 : 1024;
				struct dext *n = realloc(all, cap * sizeof(*n));
				if (!n) {
					ret = -ENOMEM;
					goto out;
				}
				all = n;
			}
			all[nall++] = (struct dext){ e->dev, e->len, in->ino };
		}
	}
	if (nall)	/* qsort(NULL, 0) is undefined (UBSan, found by fuzz_mount) */
		qsort(all, nall, sizeof(*all), cmp_dext);
	for (size_t i = 1; i < nall; i++)
		if (all[i - 1].dev + all[i - 1].len > all[i].dev)
			PROBLEM("device bytes at %llu belong to inode %llu and inode %llu",
				(unsigned long long)all[i].dev, (unsigned long long)all[i - 1].ino,
				(unsigned long long)all[i].ino);

	/* Names and link counts: every name once from the name table; the
	 * names of an inode are its run in the sorted targets. */
	targets = malloc((fs->ndirents + 1) * sizeof(*targets));
	if (!targets) {
		ret = -ENOMEM;
		goto out;
	}
	size_t ntargets = 0;
	for (size_t b = 0; b < fs->dtab_size; b++) {
		for (struct fs_dirent *d = fs->dtab[b]; d; d = d->hnext) {
			if (!fs_inode_get(fs, d->ino))
				PROBLEM("directory %llu: name '%s' points at missing inode %llu",
					(unsigned long long)d->parent, d->name,
					(unsigned long long)d->ino);
			else if (ntargets <= fs->ndirents)
				targets[ntargets++] = d->ino;
		}
	}
	if (ntargets)
		qsort(targets, ntargets, sizeof(*targets), cmp_u64);
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in)) {
		uint32_t names = names_of(targets, ntargets, in->ino);
		if (in->dir) {
			uint32_t subdirs = 0;
			for (size_t i = 0; i < in->dir->n; i++) {
				struct fs_dirent *d = in->dir->ents[i];
				struct fs_inode *c = d ? fs_inode_get(fs, d->ino) : NULL;
				if (c && c->dir)
					subdirs++;
			}
			if (in->nlink != 2 + subdirs)
				PROBLEM("directory %llu: link count %u, expected %u",
					(unsigned long long)in->ino, in->nlink, 2 + subdirs);
			if (in->ino != FS_ROOT_INO && names != 1)
				PROBLEM("directory %llu has %u names",
					(unsigned long long)in->ino, names);
		} else if (names != in->nlink) {
			PROBLEM("inode %llu: link count %u but %u name(s)",
				(unsigned long long)in->ino, in->nlink, names);
		}
	}
	if (verbose) {
		struct zalloc_stats zs;
		char b1[32], b2[32];
		zalloc_get_stats(fs->za, &zs);
		report(arg, "%llu files, %llu directories, %llu extents, %s of file data",
		       (unsigned long long)files, (unsigned long long)dirs,
		       (unsigned long long)extents, zf_fmt_bytes(bytes, b1, sizeof(b1)));
		report(arg, "data zones: %u, free %u; valid %s, reclaimable %s",
		       zs.nr_zones, zs.free_zones, zf_fmt_bytes(zs.valid_bytes, b1, sizeof(b1)),
		       zf_fmt_bytes(zs.reclaimable_bytes, b2, sizeof(b2)));
	}
	ret = problems;
out:
	free(all);
	free(logz);
	free(targets);
	free(zones);
	fs_unmount(fs);
	return ret;
}
