/* fs_mount — the file system as a whole: default options, the on-disk
 * layout and mkfs, mount (replay, reconcile with the allocator, the log's
 * zone source) and unmount, statfs and the counters. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs_internal.h"
#include "fs/fs_move.h"

#define DEFAULT_META_ZONES 4
#define ACTIVE_RESERVED 2	/* meta log: current zone + a snapshot's */

void fs_opts_default(struct fs_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->buffer_bytes = 256ull << 20;
	o->stripe_unit = 1u << 20;
	o->stripe_width = 4;
	o->commit_interval_ms = 5000;
	o->write_behind_ms = 1000;
	o->reorder_chunks = 8;
	o->prefetch_bytes = UINT64_MAX;	/* default: derived from the stripe */
	o->prefetch_limit = 256ull << 20;
	o->gc_mbps = 128;	/* lifetime GC (fs_gc.c) */
}

int fs_statfs(struct fs *fs, struct statvfs *st)
{
	struct zalloc_stats zs;
	zalloc_get_stats(fs->za, &zs);
	memset(st, 0, sizeof(*st));
	st->f_bsize = fs->bs;
	st->f_frsize = fs->bs;
	/* the collector's floor zone never holds user data */
	uint64_t floor = zs.gc_reserve_zones && zs.nr_zones ?
			 ZALLOC_GC_FLOOR * (zs.capacity_bytes / zs.nr_zones) : 0;
	/* nor do the metadata log's zones and the reserve kept for it; the
	 * zones lent to the log are in log_bytes, not in capacity_bytes */
	uint64_t all = zs.capacity_bytes + zs.log_lent_bytes;
	uint64_t cap = all - ZF_MIN(all, floor + zs.log_bytes);
	st->f_blocks = cap / fs->bs;
	uint64_t used = zs.valid_bytes + fs->buffered + fs->pa_bytes;
	uint64_t avail = cap > used ? cap - used : 0;
	st->f_bfree = avail / fs->bs;
	st->f_bavail = st->f_bfree;
	pthread_mutex_lock(&fs->lock);
	st->f_files = fs->ninodes + (1u << 20);
	st->f_ffree = 1u << 20;
	pthread_mutex_unlock(&fs->lock);
	st->f_favail = st->f_ffree;
	st->f_namemax = FS_NAME_MAX;
	st->f_fsid = 0x7a66;
	return 0;
}

/* The allocator's figures (GC, placement, zones), the share table's and
 * the lifetime inference's, and the write amplification. */
static void fill_zone_stats(struct fs *fs, struct fs_stats *st)
{
	struct zalloc_stats zs;
	uint64_t dev;

	zalloc_get_stats(fs->za, &zs);
	st->gc_bytes_written = zs.gc_bytes_written;
	st->gc_runs = zs.gc_runs;
	st->gc_waits = zs.gc_waits;
	st->gc_wait_ms = zs.gc_wait_ns / 1000000ull;
	st->gc_zones_freed = zs.gc_zones_emptied;
	st->gc_skipped_busy = zs.gc_skipped_bytes;
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

void fs_get_stats(struct fs *fs, struct fs_stats *st)
{
	struct mlog_stats ms;
	mlog_get_stats(fs->mlog, &ms);
	memset(st, 0, sizeof(*st));
	st->user_bytes_written = fs->user_bytes;
	st->zero_copy_write_bytes = fs->zc_write_bytes;
	st->zero_copy_read_bytes = fs->zc_read_bytes;
	st->data_bytes_written = fs->data_bytes;
	st->write_behind_dropped_bytes = fs->behind_dropped;
	st->meta_bytes_written = ms.bytes_written;
	st->buffer_bytes = fs->buffered;
	st->buffer_limit = fs->opts.buffer_bytes;
	st->prefetch_bytes = fs->pf.bytes;
	st->prefetch_spare_bytes = fs_pf_spare_bytes(fs);
	st->prefetch_hits = fs->pf.hits;
	st->prefetch_fills = fs->pf.fills;
	st->prefetch_fill_errors = fs->pf.fill_errors;
	st->commits = fs->commits;
	st->snapshots = ms.snapshots;
	pthread_mutex_lock(&fs->lock);
	st->inodes = fs->ninodes;
	pthread_mutex_unlock(&fs->lock);
	fill_zone_stats(fs, st);	/* GC, placement, WA */
}

/* ---- mkfs, mount, unmount ---- */

int fs_layout(struct zdev *dev, uint32_t meta_zones, struct mlog_sb *sb)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	uint32_t first = g->nr_conv_zones;	/* conventional zones are not used */

	if (meta_zones == 0) {
		/* About 256 MiB of log space, at least 4 zones and at most
		 * 1/16 of the device: a snapshot must fit in half of them. */
		uint64_t want = (256ull << 20) / ZF_MAX(g->zone_capacity, 1);
		meta_zones = (uint32_t)ZF_MAX((uint64_t)DEFAULT_META_ZONES,
					      ZF_MIN(want, (uint64_t)g->nr_zones / 16));
	}
	if (meta_zones < 3) {
		zf_err("at least 3 metadata zones are needed");
		return -EINVAL;
	}
	if (g->nr_zones < first + meta_zones + 2) {
		zf_err("device too small: %u sequential zones, need at least %u",
		       g->nr_zones - first, meta_zones + 2);
		return -ENOSPC;
	}
	if (g->zone_capacity < 128 * 1024) {
		zf_err("zone capacity %llu bytes is too small (minimum 128 KiB)",
		       (unsigned long long)g->zone_capacity);
		return -EINVAL;
	}
	if (g->max_active && g->max_active < ACTIVE_RESERVED + 2) {
		zf_err("device allows only %u active zones; zonefuse needs at least %u",
		       g->max_active, ACTIVE_RESERVED + 2);
		return -EINVAL;
	}
	memset(sb, 0, sizeof(*sb));
	sb->version = MLOG_SB_VERSION;
	sb->block_size = ZF_MAX(4096u, g->block_size);
	sb->zone_size = g->zone_size;
	sb->zone_capacity = g->zone_capacity;
	sb->nr_zones = g->nr_zones;
	sb->meta_first = first;
	sb->meta_count = meta_zones;
	sb->data_first = first + meta_zones;
	sb->data_count = g->nr_zones - sb->data_first;
	sb->created_sec = (uint64_t)time(NULL);
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, sb->uuid, sizeof(sb->uuid)) != (ssize_t)sizeof(sb->uuid)) {
		uint64_t t = zf_now_ns() ^ (uint64_t)getpid();
		memcpy(sb->uuid, &t, sizeof(t));
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

static struct fs *fs_alloc(struct zdev *dev, const struct fs_opts *o)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return NULL;
	fs->dev = dev;
	if (o)
		fs->opts = *o;
	else
		fs_opts_default(&fs->opts);
	fs->dirty_reserve = UINT64_MAX;
	fs->dirty_keep = UINT64_MAX;
	fs->itab_size = 1024;
	fs->dtab_size = 1024;
	fs->itab = calloc(fs->itab_size, sizeof(*fs->itab));
	fs->dtab = calloc(fs->dtab_size, sizeof(*fs->dtab));
	if (!fs->itab || !fs->dtab) {
		free(fs->itab);
		free(fs->dtab);
		free(fs);
		return NULL;
	}
	fs->next_ino = FS_ROOT_INO + 1;
	pthread_mutex_init(&fs->lock, NULL);
	pthread_mutex_init(&fs->cmt.lock, NULL);
	pthread_cond_init(&fs->cmt.cond, NULL);
	return fs;
}

static void fs_free(struct fs *fs)
{
	fs->valid_counted = false;	/* tearing down frees no device bytes */
	for (struct fs_inode *in = fs_inode_first(fs), *next; in; in = next) {
		next = fs_inode_next(fs, in);
		fs_inode_destroy(fs, in);
	}
	for (size_t b = 0; b < fs->dtab_size; b++) {
		struct fs_dirent *d = fs->dtab[b];
		while (d) {
			struct fs_dirent *next = d->hnext;
			free(d);
			d = next;
		}
	}
	free(fs->itab);
	free(fs->dtab);
	free(fs->mount_note);
	fs_lifetime_fini(fs);	/* lifetime state (fs_lifetime.c) */
	fs_share_fini(fs);	/* shared extents (fs_copy.c) */
	pthread_mutex_destroy(&fs->lock);
	pthread_mutex_destroy(&fs->cmt.lock);
	pthread_cond_destroy(&fs->cmt.cond);
	free(fs);
}

static int make_root(struct fs *fs)
{
	struct fs_inode *root = fs_inode_new(fs, FS_ROOT_INO);
	if (!root)
		return -ENOMEM;
	root->mode = S_IFDIR | 0755;
	root->nlink = 2;
	root->atime = root->mtime = root->ctime = fs_now();
	root->cls = LIFETIME_MEDIUM;
	root->dir = calloc(1, sizeof(*root->dir));
	if (!root->dir)
		return -ENOMEM;
	root->dir->next_cookie = 3;
	root->dir->parent = FS_ROOT_INO;
	return 0;
}

int fs_mkfs(struct zdev *dev, const struct fs_mkfs_opts *o)
{
	struct mlog_sb sb, old;
	struct mlog *m = NULL;
	struct fs *fs = NULL;
	int ret;

	if (mlog_probe(dev, &old) == 0 && !(o && o->force)) {
		zf_err("%s already holds a zonefuse file system (use --force to overwrite)",
		       zdev_path(dev));
		return -EEXIST;
	}
	ret = fs_layout(dev, o ? o->meta_zones : 0, &sb);
	if (ret)
		return ret;
	if (o && o->label)
		snprintf(sb.label, sizeof(sb.label), "%s", o->label);
	ret = zdev_reset_all(dev);
	if (ret) {
		zf_err("resetting zones: %s", strerror(-ret));
		return ret;
	}
	ret = mlog_format(dev, &sb);
	if (ret) {
		zf_err("writing the metadata log: %s", strerror(-ret));
		return ret;
	}
	fs = fs_alloc(dev, NULL);
	if (!fs)
		return -ENOMEM;
	fs->bs = sb.block_size;
	fs->applying_log = true;
	ret = mlog_open(dev, 0, fs_replay_record, fs, &sb, &m);
	fs->applying_log = false;
	if (ret)
		goto out;
	fs->mlog = m;
	fs->bs = sb.block_size;
	ret = make_root(fs);
	if (!ret)
		ret = mlog_snapshot(m, fs_emit_snapshot, fs);
	if (!ret)
		ret = zdev_flush(dev);
out:
	if (m)
		mlog_close(m);
	fs_free(fs);
	return ret;
}

/* The metadata log borrows EMPTY data zones from zalloc when its meta zones
 * are not enough (mlog.h, zalloc.h); the callbacks run with mlog's lock
 * held and take only zalloc's leaf lock. */
static int log_borrow(void *arg, uint32_t keep, uint32_t *zone)
{
	struct fs *fs = arg;
	return zalloc_lend(fs->za, keep, zone);
}

static void log_give_back(void *arg, uint32_t zone)
{
	struct fs *fs = arg;
	zalloc_lend_return(fs->za, zone);
}

static void log_reserve(void *arg, uint32_t zones)
{
	struct fs *fs = arg;
	zalloc_set_log_reserve(fs->za, zones);
}

static uint32_t log_avail(void *arg)
{
	struct fs *fs = arg;
	return zalloc_free_zones(fs->za);
}

static const struct mlog_zone_source log_zone_source = {
	.borrow = log_borrow, .give_back = log_give_back, .reserve = log_reserve,
	.avail = log_avail,
};

/* Before zalloc_mount_done: the data zones the replayed log holds are the
 * log's (mount_done would reset them: no extent references them). */
static int adopt_log_zones(struct fs *fs)
{
	uint32_t n = mlog_borrowed_zones(fs->mlog, NULL, 0);
	if (!n)
		return 0;
	uint32_t *z = calloc(n, sizeof(*z));
	if (!z)
		return -ENOMEM;
	n = mlog_borrowed_zones(fs->mlog, z, n);
	int ret = 0;
	for (uint32_t i = 0; i < n && !ret; i++) {
		ret = zalloc_lend_adopt(fs->za, z[i]);
		if (ret)
			zf_err("metadata log zone %u is not a data zone", z[i]);
	}
	free(z);
	return ret ? -EUCLEAN : 0;
}

/* After replay: free orphans, account valid bytes per zone, tell zalloc
 * each zone's class. */
static int mount_reconcile(struct fs *fs)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);
	uint64_t data_start = (uint64_t)fs->sb.data_first * g->zone_size;
	uint64_t data_end = (uint64_t)(fs->sb.data_first + fs->sb.data_count) * g->zone_size;

	/* valid bytes are not counted yet: orphans go first */
	for (struct fs_inode *in = fs_inode_first(fs), *next; in; in = next) {
		next = fs_inode_next(fs, in);
		if (in->nlink == 0 && in->ino != FS_ROOT_INO)
			fs_inode_destroy(fs, in);	/* orphan: unlinked while open */
	}
	for (struct fs_inode *in = fs_inode_first(fs); in; in = fs_inode_next(fs, in)) {
		struct extmap_cur c;
		for (const struct extmap_ext *e = extmap_seek(&in->map, 0, &c); e;
		     e = extmap_next(&in->map, &c)) {
			if (e->dev < data_start || e->dev + e->len > data_end ||
			    e->dev / g->zone_size != (e->dev + e->len - 1) / g->zone_size) {
				zf_err("inode %llu: extent at device offset %llu is outside the data zones",
				       (unsigned long long)in->ino, (unsigned long long)e->dev);
				return -EUCLEAN;
			}
			zalloc_zone_adopt(fs->za, (uint32_t)(e->dev / g->zone_size),
					  (enum lifetime_class)in->cls);
		}
	}
	/* valid bytes: each device byte once, however many extents share it */
	int ret = fs_share_rebuild(fs);
	if (ret)
		return ret;
	fs->valid_counted = true;
	return 0;
}

/* The superblock (replay needs the block size before the log is read),
 * then the log replayed into memory. */
static int mount_replay(struct fs *fs)
{
	struct zdev *dev = fs->dev;
	int ret = mlog_probe(dev, &fs->sb);
	const char *what = "superblock";

	/* every zone header lost: a repair (or the fallback) tries mkfs's
	 * layout, for the records that may survive (fs_repair.c) */
	if (ret && ret != -ENOMEM && (fs->repair || fs->repair_fallback))
		ret = fs_layout(dev, 0, &fs->sb);

	if (ret == 0 && (fs->sb.block_size < 512 || (fs->sb.block_size & (fs->sb.block_size - 1))))
		ret = -EUCLEAN;
	if (!ret) {
		fs->bs = fs->sb.block_size;
		fs->applying_log = true;
		ret = fs_repair_open_log(fs, fs->read_only ? MLOG_OPEN_READ_ONLY : 0);
		fs->applying_log = false;
		what = "metadata log";
	}
	if (!ret)
		ret = fs_repair_after_replay(fs);	/* fs_repair.c */
	/* a repair (fsck) says it in its own words; the fallback's retry
	 * would say it a second time */
	if (fs->repair || fs->repair_fallback)
		;
	else if (ret == -ENODATA)
		zf_err("%s holds no zonefuse file system (run mkfs.zonefuse)", zdev_path(dev));
	else if (ret)
		zf_err("reading the %s of %s: %s", what, zdev_path(dev), strerror(-ret));
	return ret;
}

/* What was replayed fits the device and the options. */
static int mount_check(struct fs *fs)
{
	const struct zdev_geometry *g = zdev_geometry(fs->dev);

	if (fs->sb.zone_size != g->zone_size || fs->sb.nr_zones != g->nr_zones ||
	    fs->sb.block_size % g->block_size || fs->sb.block_size < 4096 ||
	    fs->sb.data_first + fs->sb.data_count > g->nr_zones) {
		zf_err("superblock geometry does not match the device");
		return -EUCLEAN;
	}
	fs->bs = fs->sb.block_size;
	if (fs->opts.stripe_unit < fs->bs || fs->opts.stripe_unit % fs->bs ||
	    fs->opts.stripe_unit > g->zone_capacity) {
		zf_err("stripe_unit must be a multiple of %u bytes and at most the zone capacity", fs->bs);
		return -EINVAL;
	}
	fs->pages_per_chunk = fs->opts.stripe_unit / fs->bs;
	if (!fs_inode_get(fs, FS_ROOT_INO)) {
		zf_err("metadata has no root directory");
		return -EUCLEAN;
	}
	return 0;
}

/* The zone allocator, told which zones the log holds and every extent. */
static int mount_zones(struct fs *fs)
{
	struct zalloc_params zp = {
		.first_zone = fs->sb.data_first,
		.nr_zones = fs->sb.data_count,
		.reserved_active = ACTIVE_RESERVED,
		.reserved_open = ACTIVE_RESERVED,
		.max_stripe_width = ZF_MAX(1u, fs->opts.stripe_width),
	};
	int ret = zalloc_create(fs->dev, &zp, &fs->za);

	if (ret) {
		zf_err("zone allocator: %s", strerror(-ret));
		return ret;
	}
	zalloc_set_need_space_cb(fs->za, fs_commit_need_space, fs);
	ret = adopt_log_zones(fs);
	if (!ret)
		ret = mount_reconcile(fs);
	return ret;
}

/* Read-write: zones nothing references are reset, the log may borrow
 * zones, and a snapshot starts a new epoch (cutting off any torn tail).
 * The device is flushed first: after a kill -9 the replayed log may end in
 * records the dead daemon wrote but never flushed, and the resets act on
 * them (a power loss after a reset and before any flush would bring back
 * a file whose unlink freed the zone). */
static int mount_writable(struct fs *fs)
{
	int ret = zdev_flush(fs->dev);

	if (ret < 0) {
		zf_err("flushing the device before the mount writes: %s", strerror(-ret));
		return ret;
	}
	ret = zalloc_mount_done(fs->za);
	if (ret < 0) {
		zf_err("mount-time zone cleanup: %s", strerror(-ret));
		return ret;
	}
	mlog_set_state_bytes(fs->mlog, fs_snap_state_bytes, fs);
	mlog_set_zone_source(fs->mlog, &log_zone_source, fs);
	pthread_mutex_lock(&fs->lock);
	ret = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
	pthread_mutex_unlock(&fs->lock);
	if (ret)
		zf_err("writing the mount snapshot: %s", strerror(-ret));
	return ret;
}

/* r: the fsck run this mount serves, or NULL; fallback: a damaged log is
 * mounted read-only with the repairs in memory (fs_repair.h). */
static int mount_once(struct zdev *dev, const struct fs_opts *o, struct fs_repair *r,
		      bool fallback, struct fs **out)
{
	struct fs *fs = fs_alloc(dev, o);
	int ret;

	if (!fs)
		return -ENOMEM;
	fs->repair = r;
	fs->repair_fallback = fallback;
	fs->read_only = fs->opts.read_only;
	ret = mount_replay(fs);
	if (!ret)
		ret = mount_check(fs);
	if (!ret)
		ret = mount_zones(fs);
	if (!ret)
		ret = fs_lifetime_init(fs);	/* rules file, inference (fs_lifetime.c) */
	if (!ret && !fs->read_only)
		ret = mount_writable(fs);
	if (!ret) {
		fs->repair = NULL;
		*out = fs;
		return 0;
	}
	if (fs->mlog)
		mlog_set_zone_source(fs->mlog, NULL, NULL);
	if (fs->za)
		zalloc_destroy(fs->za);
	if (fs->mlog)
		mlog_close(fs->mlog);
	fs->za = NULL;
	fs_free(fs);
	return ret;
}

int fs_mount(struct zdev *dev, const struct fs_opts *o, struct fs **out)
{
	int ret = mount_once(dev, o, NULL, false, out);
	/* damaged metadata: read-only with what can be read (fs_repair.c) */
	if ((ret == -EUCLEAN || ret == -ENODATA) && mount_once(dev, o, NULL, true, out) == 0)
		ret = 0;
	return ret;
}

int fs_mount_repair(struct zdev *dev, const struct fs_opts *o, struct fs_repair *r,
		    struct fs **out)
{
	return mount_once(dev, o, r, false, out);
}

int fs_start(struct fs *fs)
{
	int ret = fs_pf_start(fs);
	if (!ret && fs->collector)	/* the collector (fs_move.h) */
		ret = fs->collector->start(fs->collector->arg);
	if (!ret)
		ret = fs_committer_start(fs);
	return ret;
}

int fs_unmount(struct fs *fs)
{
	int ret = 0;
	uint64_t t0 = zf_now_ns(), t1, t2 = 0, t3 = 0;

	if (fs->collector)	/* first: it commits, and moves data (fs_move.h) */
		fs->collector->stop(fs->collector->arg);
	fs->collector = NULL;
	fs_committer_stop(fs);
	fs_pf_stop(fs);
	t1 = zf_now_ns();
	if (!fs->read_only) {
		ret = fs_sync(fs);
		t2 = t3 = zf_now_ns();
		if (ret) {
			zf_err("unmount: final commit failed: %s", strerror(-ret));
		} else {
			/* Everything is durable: the snapshot only shortens the
			 * next mount's replay. */
			pthread_mutex_lock(&fs->lock);
			int r = mlog_snapshot(fs->mlog, fs_emit_snapshot, fs);
			pthread_mutex_unlock(&fs->lock);
			t3 = zf_now_ns();
			if (r)
				zf_warn("unmount: final snapshot failed (%s); the log "
					"is replayed at the next mount", strerror(-r));
		}
		/* Where a slow unmount's time goes (the daemon logs the total). */
		zf_info("unmount: background work stopped in %.2f s (the collector, the "
			"committer with its write-behind, prefetch), write-out and final "
			"commit %.2f s, snapshot %.2f s", (double)(t1 - t0) / 1e9,
			(double)(t2 - t1) / 1e9, (double)(t3 - t2) / 1e9);
	}
	mlog_set_zone_source(fs->mlog, NULL, NULL);
	zalloc_destroy(fs->za);
	fs->za = NULL;
	mlog_close(fs->mlog);
	fs_free(fs);
	return ret;
}
