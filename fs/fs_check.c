/* fs_check — fsck: replay the metadata read-only and check the invariants
 * the file system relies on:
 *   - every extent lies in a data zone, below that zone's write pointer and
 *     within its capacity, not in a zone the metadata log holds, and is
 *     block-aligned;
 *   - device bytes several extents reference (copies share them) are
 *     counted right: the share table holds, for every block, the number of
 *     references beyond the first that the extent maps make, and every data
 *     zone's valid bytes are the bytes the maps reference, each once;
 *   - every name points at an existing inode; link counts match names
 *     (files: number of names; directories: 2 + subdirectories);
 *   - every inode except the root has a name;
 *   - a file's extents end within its size (rounded up to the block).
 * Before them, the mount makes the repairs of fs_repair.c in memory and
 * counts each as a problem (a damaged log, names, reachability, link
 * counts, extents); the checks here then find what those do not fix.
 * Nothing is written.  fs_check returns the number of problems, or -errno
 * when the file system cannot be read at all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"

struct dext { uint64_t dev, len, ino; };

static void quiet_report(void *arg, const char *fmt, ...)
{
	(void)arg;
	(void)fmt;
}

/* One fsck run: the mounted (read-only) file system and what was found. */
struct check {
	struct fs *fs;
	const struct zdev_geometry *g;
	struct zdev_zone *zones;	/* every zone's report */
	bool *logz;			/* zones the metadata log holds */
	struct dext *all;		/* every extent, by device offset */
	size_t nall, cap;
	uint64_t files, dirs, bytes, extents;
	int problems;
	fs_report_fn report;
	void *arg;
};

#define PROBLEM(ck, ...) do { (ck)->problems++; (ck)->report((ck)->arg, __VA_ARGS__); } while (0)

static int load_zones(struct check *ck)
{
	uint32_t nz = ck->g->nr_zones;

	ck->zones = calloc(nz, sizeof(*ck->zones));
	ck->logz = calloc(nz, sizeof(*ck->logz));
	uint32_t nlog = mlog_borrowed_zones(ck->fs->mlog, NULL, 0);
	uint32_t *lz = calloc(nlog + 1, sizeof(*lz));
	if (!ck->zones || !ck->logz || !lz) {
		free(lz);
		return -ENOMEM;
	}
	nlog = mlog_borrowed_zones(ck->fs->mlog, lz, nlog);
	for (uint32_t i = 0; i < nlog; i++)
		if (lz[i] < nz)
			ck->logz[lz[i]] = true;
	free(lz);
	int ret = zdev_report_zones(ck->fs->dev, 0, nz, ck->zones);
	return ret < 0 ? ret : 0;
}

/* Remember an extent for the reference counts. */
static int remember(struct check *ck, const struct fs_inode *in, const struct extmap_ext *e)
{
	if (ck->nall == ck->cap) {
		size_t cap = ck->cap;
		struct dext *n = zf_grow(ck->all, &cap, ck->nall + 1, sizeof(*n), 1024);
		if (!n)
			return -ENOMEM;
		ck->all = n;
		ck->cap = cap;
	}
	ck->all[ck->nall++] = (struct dext){ e->dev, e->len, in->ino };
	return 0;
}

/* One extent of `in`: where it lies; remembered for the reference counts. */
static int check_extent(struct check *ck, const struct fs_inode *in,
			const struct extmap_ext *e, uint64_t limit)
{
	const struct fs *fs = ck->fs;
	uint32_t z = (uint32_t)(e->dev / ck->g->zone_size);
	unsigned long long ino = in->ino;

	ck->extents++;
	ck->bytes += e->len;
	if (e->off % fs->bs || e->len % fs->bs || e->dev % fs->bs)
		PROBLEM(ck, "inode %llu: extent %llu+%llu is not block-aligned", ino,
			(unsigned long long)e->off, (unsigned long long)e->len);
	if (z < fs->sb.data_first || z >= fs->sb.data_first + fs->sb.data_count) {
		PROBLEM(ck, "inode %llu: extent at device offset %llu is outside the data zones",
			ino, (unsigned long long)e->dev);
		return 0;
	}
	if (ck->logz[z])
		PROBLEM(ck, "inode %llu: extent at device offset %llu lies in zone %u, "
			"which holds the metadata log", ino, (unsigned long long)e->dev, z);
	const struct zdev_zone *zz = &ck->zones[z];
	if (e->dev + e->len > zz->wp || e->dev + e->len > zz->start + zz->capacity)
		PROBLEM(ck, "inode %llu: extent %llu+%llu in zone %u ends beyond the write pointer (%llu)",
			ino, (unsigned long long)e->off, (unsigned long long)e->len, z,
			(unsigned long long)(zz->wp - zz->start));
	if (e->off + e->len > limit)
		PROBLEM(ck, "inode %llu: extent %llu+%llu lies beyond the file size %llu", ino,
			(unsigned long long)e->off, (unsigned long long)e->len,
			(unsigned long long)in->size);
	return remember(ck, in, e);
}

/* A boundary of a reference: +1 where an extent starts, -1 where it ends. */
struct edge { uint64_t at; int d; };

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;
	return x->at < y->at ? -1 : x->at > y->at;
}

#define MAX_REF_REPORTS 8

/* Reference counts: sweep the extents' boundaries in device order; each
 * stretch [p, q) is referenced c times.  The share table must say c - 1
 * for its blocks, each zone's valid bytes are its stretches with c > 0, and
 * no block outside them may be in the table. */
static int check_refs(struct check *ck)
{
	struct fs *fs = ck->fs;
	uint32_t nz = ck->g->nr_zones;
	uint64_t zsz = ck->g->zone_size;
	struct edge *ev = malloc((2 * ck->nall + 1) * sizeof(*ev));
	uint64_t *used = calloc(nz, sizeof(*used));
	uint32_t *shared = calloc(nz, sizeof(*shared));
	int reports = 0, ret = 0;

	if (!ev || !used || !shared) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ck->nall; i++) {
		ev[2 * i] = (struct edge){ ck->all[i].dev, 1 };
		ev[2 * i + 1] = (struct edge){ ck->all[i].dev + ck->all[i].len, -1 };
	}
	if (ck->nall)	/* qsort(NULL, 0) is undefined (UBSan, found by fuzz_mount) */
		qsort(ev, 2 * ck->nall, sizeof(*ev), cmp_edge);
	int64_t c = 0;
	for (size_t i = 0; i + 1 < 2 * ck->nall; i++) {
		c += ev[i].d;
		uint64_t p = ev[i].at, q = ev[i + 1].at;
		if (p >= q || c <= 0)
			continue;
		uint64_t z = p / zsz;
		if (z < nz)
			used[z] += q - p;
		if (c == 1 && (z >= fs->share.nzones || !fs->share.refs[z]))
			continue;	/* unshared, no table: nothing to compare */
		for (uint64_t b = p - p % fs->bs; b < q; b += fs->bs) {
			uint32_t have = fs_share_refs(fs, b);
			if (have == (uint64_t)(c - 1))
				continue;
			if (reports++ < MAX_REF_REPORTS)
				PROBLEM(ck, "device block at %llu: %lld references, the share "
					"table counts %u", (unsigned long long)b, (long long)c,
					have + 1);
			else
				ck->problems++;
		}
		if (c > 1 && z < nz)
			shared[z] += (uint32_t)((q - p + fs->bs - 1) / fs->bs);
	}
	for (uint32_t z = 0; z < nz; z++) {
		uint32_t counted, claimed = fs_share_zone_count(fs, z, &counted);
		if (counted != shared[z] || claimed != counted)
			PROBLEM(ck, "zone %u: %u shared blocks, the share table holds %u "
				"(and says %u)", z, shared[z], counted, claimed);
		struct zalloc_zone_info zi;
		if (z < fs->sb.data_first || ck->logz[z] ||
		    zalloc_zone_info(fs->za, z, &zi) || zi.lent)
			continue;
		if (zi.valid_bytes != used[z])
			PROBLEM(ck, "zone %u: %llu valid bytes counted, the extents reference %llu",
				z, (unsigned long long)zi.valid_bytes, (unsigned long long)used[z]);
	}
out:
	free(ev);
	free(used);
	free(shared);
	return ret;
}

static int check_extents(struct check *ck)
{
	struct fs *fs = ck->fs;

	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in)) {
		if (in->dir)
			ck->dirs++;
		else if (S_ISREG(in->mode))
			ck->files++;
		uint64_t limit = ZF_ALIGN_UP(in->size, fs->bs);
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c)) {
			int ret = check_extent(ck, in, e, limit);
			if (ret)
				return ret;
		}
	}
	return check_refs(ck);
}

/* The link count `in` should have, given its names. */
static void check_links(struct check *ck, struct fs_inode *in, uint32_t names)
{
	if (!in->dir) {
		if (names != in->nlink)
			PROBLEM(ck, "inode %llu: link count %u but %u name(s)",
				(unsigned long long)in->ino, in->nlink, names);
		return;
	}
	/* removed while open (a snapshot wrote it held): the mount frees it,
	 * as it frees files unlinked while open */
	if (in->nlink == 0 && names == 0)
		return;
	uint32_t subdirs = 0;
	for (size_t i = 0; i < in->dir->n; i++) {
		struct fs_dirent *d = in->dir->ents[i];
		struct fs_inode *c = d ? fs_inode_get(ck->fs, d->ino) : NULL;
		if (c && c->dir)
			subdirs++;
	}
	if (in->nlink != 2 + subdirs)
		PROBLEM(ck, "directory %llu: link count %u, expected %u",
			(unsigned long long)in->ino, in->nlink, 2 + subdirs);
	if (in->ino != FS_ROOT_INO && names != 1)
		PROBLEM(ck, "directory %llu has %u names", (unsigned long long)in->ino, names);
}

/* Names and link counts: every name once from the name table; the names
 * of an inode are its run in the sorted targets. */
static int check_names(struct check *ck)
{
	struct fs *fs = ck->fs;
	uint64_t *targets = malloc((fs->ndirents + 1) * sizeof(*targets));
	size_t n = 0;

	if (!targets)
		return -ENOMEM;
	for (size_t b = 0; b < fs->dtab_size; b++) {
		for (struct fs_dirent *d = fs->dtab[b]; d; d = d->hnext) {
			if (!fs_inode_get(fs, d->ino))
				PROBLEM(ck, "directory %llu: name '%s' points at missing inode %llu",
					(unsigned long long)d->parent, d->name,
					(unsigned long long)d->ino);
			else if (n <= fs->ndirents)
				targets[n++] = d->ino;
		}
	}
	if (n)
		qsort(targets, n, sizeof(*targets), fs_cmp_u64);
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in))
		check_links(ck, in, fs_count_sorted(targets, n, in->ino));
	free(targets);
	return 0;
}

static void summary(struct check *ck)
{
	struct zalloc_stats zs;
	char b1[32], b2[32];

	zalloc_get_stats(ck->fs->za, &zs);
	ck->report(ck->arg, "%llu files, %llu directories, %llu extents, %s of file data",
		   (unsigned long long)ck->files, (unsigned long long)ck->dirs,
		   (unsigned long long)ck->extents, zf_fmt_bytes(ck->bytes, b1, sizeof(b1)));
	ck->report(ck->arg, "data zones: %u, free %u; valid %s, reclaimable %s",
		   zs.nr_zones, zs.free_zones, zf_fmt_bytes(zs.valid_bytes, b1, sizeof(b1)),
		   zf_fmt_bytes(zs.reclaimable_bytes, b2, sizeof(b2)));
	ck->report(ck->arg, "shared by copies: %s of device data, %s of file data not written again",
		   zf_fmt_bytes(ck->fs->share.shared_blocks * ck->fs->bs, b1, sizeof(b1)),
		   zf_fmt_bytes(ck->fs->share.extra_refs * ck->fs->bs, b2, sizeof(b2)));
}

int fs_check_shares(struct fs *fs, fs_report_fn report, void *arg)
{
	struct check ck = { .fs = fs, .g = zdev_geometry(fs->dev), .report = report, .arg = arg };

	pthread_mutex_lock(&fs->lock);
	int ret = load_zones(&ck);
	for (struct fs_inode *in = fs_inode_first(fs); in && !ret; in = fs_inode_next(fs, in)) {
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e && !ret;
		     e = extmap_next(&in->map, &c))
			ret = remember(&ck, in, e);
	}
	if (!ret)
		ret = check_refs(&ck);
	pthread_mutex_unlock(&fs->lock);
	free(ck.all);
	free(ck.logz);
	free(ck.zones);
	return ret ? ret : ck.problems;
}

int fs_check_pass(struct zdev *dev, struct fs_repair *r, bool verbose)
{
	struct check ck = { .g = zdev_geometry(dev), .report = r->report, .arg = r->arg };
	struct fs_opts o;
	int ret;

	fs_opts_default(&o);
	o.read_only = true;
	o.commit_interval_ms = 0;
	/* Nothing is written: a stripe unit that fits any supported zone
	 * (capacity >= 128 KiB, blocks <= 64 KiB), or small-zone devices
	 * could not be checked at all. */
	o.stripe_unit = 64u << 10;
	/* the repairs are made in memory and counted (fs_repair.c); the
	 * checks below then see the state a repair would write */
	ret = fs_mount_repair(dev, &o, r, &ck.fs);
	if (ret)
		return ret;
	if (verbose && (ck.fs->cut.cut || ck.fs->cut.salvaged || r->found))
		r->report(r->arg, "replay: %llu record(s) not applied%s; %d repair(s) in memory",
			  (unsigned long long)ck.fs->cut.skipped,
			  ck.fs->cut.salvaged ? ", newest snapshot incomplete" : "", r->found);
	if (!ck.report)
		ck.report = quiet_report;
	ret = load_zones(&ck);
	if (!ret)
		ret = check_extents(&ck);
	if (!ret)
		ret = check_names(&ck);
	/* the allocator's incremental space figures against a recount */
	if (!ret && zalloc_check(ck.fs->za))
		PROBLEM(&ck, "zone allocator: space counters differ from a recount");
	if (!ret && verbose)
		summary(&ck);
	r->found += ck.problems;
	r->count[FS_PR_CHECK] += (uint64_t)ck.problems;
	free(ck.all);
	free(ck.logz);
	free(ck.zones);
	fs_unmount(ck.fs);
	return ret;
}

int fs_check(struct zdev *dev, bool verbose, fs_report_fn report, void *arg)
{
	struct fs_repair r = { .mode = FS_FSCK_CHECK, .report = report, .arg = arg };
	int ret = fs_check_pass(dev, &r, verbose);
	return ret < 0 ? ret : r.found;
}
