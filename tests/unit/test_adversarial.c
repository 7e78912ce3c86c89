/* What an unprivileged user (or a full device) can do to the file system,
 * through the fs API on the emulated device.  Each test is one shape that
 * once took the file system away; after each, the file system must mount
 * read-write again, pass fsck and hold what was made durable:
 *   - a tree far deeper than any loop bound (live rename, snapshot, replay);
 *   - metadata that fills the device: renames, deletes, the reserve for the
 *     next snapshot, the free space after deleting everything;
 *   - write-outs whose record is refused (their bytes are not leaked);
 *   - set-id bits and every kind of data change by another user;
 *   - bytes cut by a truncate never coming back, whatever extends the file.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/statvfs.h>
#include <pthread.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "gc/gc.h"
#include "mlog/mlog.h"
#include "zonealloc/zalloc.h"
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void make(uint32_t zones, uint64_t zone_size, uint32_t meta_zones)
{
	tl_dev_create(&td, "adv", zones, zone_size, 8);
	tl_dev_open(&td, &dev);
	struct fs_mkfs_opts mo = { .meta_zones = meta_zones };
	ck_assert_int_eq(fs_mkfs(dev, &mo), 0);
	ck_assert_int_eq(tl_mount(dev, 16ull << 20, false, &fs), 0);
}

static void setup(void)
{
	make(32, 4u << 20, 0);
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

/* Unmount, fsck (no finding), mount read-write. */
static void remount(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	tl_fsck_clean(dev);
	ck_assert_int_eq(tl_mount(dev, 16ull << 20, false, &fs), 0);
}

/* kill -9 and power loss: only what was committed survives. */
static void crash_remount(void)
{
	tl_power_cycle(&td, &dev, &fs, 16ull << 20);
}

static uint64_t lookup(uint64_t parent, const char *name)
{
	struct stat st;
	if (fs_lookup(fs, parent, name, &st))
		return 0;
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

/* ---- a deep tree ------------------------------------------------------ */

#define DEEP 12000

static uint64_t make_chain(uint64_t top, int depth, uint64_t *mid, int mid_at)
{
	uint64_t d = top;
	for (int i = 0; i < depth; i++) {
		d = tl_mk(fs, d, "d", S_IFDIR | 0755);
		ck_assert_uint_ne(d, 0);
		if (i == mid_at && mid)
			*mid = d;
	}
	return d;
}

static uint64_t walk_chain(int depth)
{
	uint64_t d = FS_ROOT_INO;
	for (int i = 0; i < depth; i++) {
		d = lookup(d, i ? "d" : "top");
		ck_assert_msg(d != 0, "level %d missing", i);
	}
	return d;
}

/* mkdir + chdir 12,000 times (no path is ever long): the snapshot and its
 * replay, the log tail's replay and renames deep inside all accept it, as
 * ext4 and tmpfs do; a directory still cannot move below itself. */
START_TEST(deep_tree)
{
	uint64_t top = tl_mk(fs, FS_ROOT_INO, "top", S_IFDIR | 0755), mid = 0;
	uint64_t bottom = make_chain(top, DEEP - 1, &mid, DEEP / 2);
	ck_assert_uint_ne(tl_mk(fs, bottom, "leaf", S_IFREG | 0644), 0);
	ck_assert_int_eq(fs_sync(fs), 0);

	remount();	/* the unmount's snapshot, replayed */
	ck_assert_uint_eq(walk_chain(DEEP), bottom);
	ck_assert_uint_ne(lookup(bottom, "leaf"), 0);

	/* Live: a rename deep down, and one that would close a loop. */
	ck_assert_int_eq(fs_rename(fs, bottom, "leaf", mid, "moved", 0), 0);
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "top", bottom, "loop", 0), -EINVAL);
	ck_assert_int_eq(fs_rename(fs, mid, "d", FS_ROOT_INO, "cut", 0), 0);
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "cut", mid, "d", 0), 0);
	ck_assert_int_eq(fs_sync(fs), 0);

	crash_remount();	/* the tail (CREATE, RENAME records) replayed */
	ck_assert_uint_eq(walk_chain(DEEP), bottom);
	ck_assert_uint_ne(lookup(mid, "moved"), 0);
	ck_assert_uint_eq(lookup(bottom, "leaf"), 0);
	remount();
	ck_assert_uint_eq(walk_chain(DEEP), bottom);
}
END_TEST


/* ---- metadata that fills the device ------------------------------------ */

/* 16 zones of 1 MiB, 3 of them meta zones: the log borrows data zones. */
static void small_setup(void)
{
	make(16, 1u << 20, 3);
}

static uint64_t free_bytes(void)
{
	struct statvfs sv;
	ck_assert_int_eq(fs_statfs(fs, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

static bool log_full(void)
{
	struct mlog_stats ms;
	mlog_get_stats(fs->mlog, &ms);
	return ms.state_full;
}

/* Files with a 1,500-byte xattr each until the metadata fills the device;
 * returns how many were made. */
static int fill_metadata_nosync(void)
{
	char name[64], val[1500];
	struct stat st;
	int n, err = 0;

	memset(val, 'v', sizeof(val));
	for (n = 0; n < 100000; n++) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", n);
		err = fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st);
		if (err)
			break;
		fs_forget(fs, st.st_ino, 1);
		err = fs_setxattr(fs, st.st_ino, "user.pad", val, sizeof(val), 0);
		if (err) {
			n++;	/* made, without its xattr */
			break;
		}
	}
	ck_assert_msg(err == -ENOSPC, "filling stopped with %d after %d files", err, n);
	ck_assert(log_full());
	return n;
}

static int fill_metadata(void)
{
	int n = fill_metadata_nosync();
	ck_assert_int_eq(fs_sync(fs), 0);
	ck_assert(log_full());
	return n;
}

/* Renaming one file back and forth on a full log (a sync every 1,000):
 * a rename frees nothing, so it may fail with ENOSPC but never takes the
 * room kept for the next snapshot.  The unmount's snapshot and the next
 * read-write mount both find their room. */
START_TEST(rename_storm_on_full_log)
{
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "a", S_IFREG | 0644);
	fill_metadata();
	int ok = 0, nospc = 0;
	for (int i = 0; i < 6000; i++) {
		int r = i % 2 ? fs_rename(fs, FS_ROOT_INO, "b", FS_ROOT_INO, "a", 0)
			      : fs_rename(fs, FS_ROOT_INO, "a", FS_ROOT_INO, "b", 0);
		if (r == 0)
			ok++;
		else if (r == -ENOSPC)
			nospc++, i++;	/* the name did not move */
		else
			ck_abort_msg("rename %d: %d", i, r);
		if (i % 1000 == 999)
			ck_assert_int_eq(fs_sync(fs), 0);
	}
	fprintf(stderr, "rename storm: %d renamed, %d refused (ENOSPC)\n", ok, nospc);
	ck_assert_int_gt(nospc, 0);
	uint64_t errors = zf_log_error_count();
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, lookup(FS_ROOT_INO, "a") ? "a" : "b"), 0);
	remount();
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "a") + lookup(FS_ROOT_INO, "b"), 0);
	(void)f;
	/* Still room for the records that free space, and a clean remount. */
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "file-with-a-long-name-000000"), 0);
	remount();
	ck_assert_uint_eq(zf_log_error_count() - errors, 0);
	crash_remount();
}
END_TEST

/* Deleting everything on a full log gives back all the space at once: no
 * ENOSPC for the next create, and the free space an empty file system has
 * (within one zone), without a remount. */
START_TEST(delete_all_on_full_log)
{
	uint64_t empty = free_bytes();
	char name[64];
	int n = fill_metadata();
	ck_assert_uint_lt(free_bytes(), empty / 2);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", i);
		ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
	}
	ck_assert_int_eq(fs_sync(fs), 0);
	ck_assert(!log_full());
	ck_assert_uint_ne(tl_mk(fs, FS_ROOT_INO, "new", S_IFREG | 0644), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	uint64_t now = free_bytes();
	struct mlog_stats ms;
	mlog_get_stats(fs->mlog, &ms);
	fprintf(stderr, "free: empty %llu, after deleting %d files %llu, log zones borrowed %u\n",
		(unsigned long long)empty, n, (unsigned long long)now, ms.zones_borrowed);
	ck_assert_uint_ge(now + (1u << 20), empty);
	ck_assert_uint_eq(ms.zones_borrowed, 0);
	remount();
	ck_assert_uint_ne(lookup(FS_ROOT_INO, "new"), 0);
}
END_TEST

/* With a state of the same size, the free space statfs shows stays level
 * (within a zone) through the log's epochs: the chain's growth until its
 * next snapshot is kept from the start of each epoch, and a zone lent to
 * the log counts once, whether the log holds it or keeps it in reserve.
 * Else what a drain gives back depends on where in its epoch the log
 * happens to be, and data written early in an epoch takes the zones the
 * chain grows into. */
START_TEST(free_space_level_through_epochs)
{
	char name[64], val[1500];
	struct mlog_stats ms;
	int n = 6000;

	memset(val, 'v', sizeof(val));
	for (int i = 0; i < n; i++) {	/* about two log zones of state */
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", i);
		uint64_t f = tl_mk(fs, FS_ROOT_INO, name, S_IFREG | 0644);
		ck_assert_int_eq(fs_setxattr(fs, f, "user.pad", val, sizeof(val), 0), 0);
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	mlog_get_stats(fs->mlog, &ms);
	uint64_t epoch0 = ms.epoch, lo = UINT64_MAX, hi = 0;
	uint32_t borrowed = 0;
	int churn;
	for (churn = 0; churn < 100000 && ms.epoch < epoch0 + 4; churn++) {
		snprintf(name, sizeof(name), "churn-%06d", churn % 64);
		uint64_t f = tl_mk(fs, FS_ROOT_INO, name, S_IFREG | 0644);
		ck_assert_int_eq(fs_setxattr(fs, f, "user.pad", val, sizeof(val), 0), 0);
		ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
		if (churn % 100 == 99)
			ck_assert_int_eq(fs_commit(fs), 0);
		if (churn % 10 != 9)
			continue;
		uint64_t fr = free_bytes();
		lo = ZF_MIN(lo, fr);
		hi = ZF_MAX(hi, fr);
		mlog_get_stats(fs->mlog, &ms);
		borrowed = ZF_MAX(borrowed, ms.zones_borrowed);
	}
	fprintf(stderr, "%d churns over %llu epochs (up to %u log zones borrowed): "
		"free between %llu and %llu\n", churn, (unsigned long long)(ms.epoch - epoch0),
		borrowed, (unsigned long long)lo, (unsigned long long)hi);
	ck_assert_uint_ge(ms.epoch, epoch0 + 4);
	ck_assert_uint_gt(borrowed, 0);
	ck_assert_uint_lt(hi - lo, 4u << 20);	/* less than a zone */
	remount();
}
END_TEST

/* Mount again with a dirty reserve (bytes), no periodic commit and a
 * 16 MiB write buffer. */
static void remount_reserve(uint64_t reserve)
{
	struct fs_opts o;
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.buffer_bytes = 16ull << 20;
	o.dirty_reserve = reserve;
	ck_assert_int_eq(fs_mount(dev, &o, &fs), 0);
}

/* A device kept nearly full of garbage, as a busy database keeps it, is
 * not short of space while the collector can reclaim it: files opened for
 * writing keep the page cache (fs_space_low is false), and writers that
 * find no free zone wait for the collector.  Two files written in turns
 * share every zone; deleting one leaves each zone half dead. */
START_TEST(garbage_is_room_for_the_page_cache)
{
	remount_reserve(4ull << 20);
	ck_assert_int_eq(gc_attach(fs), 0);	/* attached, not started: no GC runs */
	uint64_t a = tl_mk(fs, FS_ROOT_INO, "a", S_IFREG | 0644);
	uint64_t b = tl_mk(fs, FS_ROOT_INO, "b", S_IFREG | 0644);
	static uint8_t buf[256 << 10];
	memset(buf, 0x5a, sizeof(buf));
	uint64_t off;
	for (off = 0;; off += sizeof(buf)) {
		ssize_t r = fs_write(fs, a, off, buf, sizeof(buf), false);
		if (r == -ENOSPC)
			break;
		ck_assert_int_eq(r, (ssize_t)sizeof(buf));
		ck_assert_int_eq(fs_flush(fs, a), 0);
		r = fs_write(fs, b, off, buf, sizeof(buf), false);
		if (r == -ENOSPC)
			break;
		ck_assert_int_eq(r, (ssize_t)sizeof(buf));
		ck_assert_int_eq(fs_flush(fs, b), 0);
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	ck_assert(fs_space_low(fs, 2));		/* full of valid data: low */
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "b"), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	struct zalloc_stats zs;
	zalloc_get_stats(fs->za, &zs);
	fprintf(stderr, "garbage: %llu MiB written in turns, free %llu KiB, the collector could "
		"reclaim %llu KiB now\n", (unsigned long long)(2 * off >> 20),
		(unsigned long long)(zs.free_bytes >> 10),
		(unsigned long long)(zs.gc_reclaimable_bytes >> 10));
	ck_assert_uint_lt(zs.free_bytes, 8ull << 20);
	ck_assert_uint_gt(zs.gc_reclaimable_bytes, 16ull << 20);
	ck_assert(!fs_space_low(fs, 2));
}
END_TEST

/* Direct writes (not the page cache's write-back) until ENOSPC; bytes. */
static uint64_t fill_direct(uint64_t f, uint64_t off)
{
	static uint8_t buf[256 << 10];
	memset(buf, 0x3c, sizeof(buf));
	for (;; off += sizeof(buf)) {
		ssize_t r = fs_write(fs, f, off, buf, sizeof(buf), 0);
		if (r == -ENOSPC)
			return off;
		ck_assert_int_eq(r, (ssize_t)sizeof(buf));
		ck_assert_int_eq(fs_flush(fs, f), 0);
	}
}

/* Writes other than the page cache's write-back leave the room kept for
 * the kernel's dirty pages free only as far as the mount's owner says the
 * kernel may still hold some (fs_set_dirty_keep): with all of the reserve
 * kept, ENOSPC comes a reserve early; with none (no file open through the
 * cache), when the device is full but for the collector's zones. */
START_TEST(direct_writes_keep_only_what_the_cache_may_hold)
{
	remount_reserve(8ull << 20);
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	const uint64_t R = fs_dirty_reserve(fs);	/* 8 MiB, or 1/16 of the data */
	ck_assert_uint_ge(R, 4ull << 20);
	ck_assert_uint_eq(fs_dirty_keep(fs), R);	/* the default: all */
	uint64_t a = fill_direct(f, 0);
	struct zalloc_stats zs;
	ck_assert_int_eq(fs_commit(fs), 0);
	zalloc_get_stats(fs->za, &zs);
	uint64_t free_a = zs.free_bytes;
	ck_assert_uint_ge(free_a, R);
	fs_set_dirty_keep(fs, R / 2);
	ck_assert_uint_eq(fs_dirty_keep(fs), R / 2);
	uint64_t b = fill_direct(f, a);
	fs_set_dirty_keep(fs, 0);
	uint64_t c = fill_direct(f, b);
	ck_assert_int_eq(fs_commit(fs), 0);
	zalloc_get_stats(fs->za, &zs);
	fprintf(stderr, "direct writes: %llu MiB with the reserve kept (free %llu KiB), "
		"+%llu KiB with half of it, +%llu KiB with none (free %llu KiB of %llu MiB)\n",
		(unsigned long long)(a >> 20), (unsigned long long)(free_a >> 10),
		(unsigned long long)((b - a) >> 10), (unsigned long long)((c - b) >> 10),
		(unsigned long long)(zs.free_bytes >> 10),
		(unsigned long long)(zs.capacity_bytes >> 20));
	ck_assert_uint_ge(b - a, R / 2 - (256 << 10));
	ck_assert_uint_ge(c - b, R / 2 - (256 << 10));
	ck_assert_uint_lt(zs.free_bytes, free_a - R + (1 << 20));
	ck_assert_uint_eq(fs_dirty_keep(fs), 0);
	fs_set_dirty_keep(fs, UINT64_MAX);
	ck_assert_uint_eq(fs_dirty_keep(fs), R);	/* at most the reserve */
	remount();
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, c);
}
END_TEST

/* Names of 2 to 206 bytes. */
static void var_name(char name[256], int i)
{
	int n = snprintf(name, 256, "f%d-", i);
	memset(name + n, 'x', (size_t)(i % 200));
	name[n + i % 200] = 0;
}

/* The log's size of its next snapshot is the snapshot's: what mlog wrote
 * for it is those records plus zone headers and the epoch's own records. */
START_TEST(snapshot_size_is_counted)
{
	uint64_t d = tl_mk(fs, FS_ROOT_INO, "dir", S_IFDIR | 0755);
	uint8_t buf[8192];
	memset(buf, 7, sizeof(buf));
	for (int i = 0; i < 300; i++) {
		char name[256];
		var_name(name, i);
		uint64_t f = tl_mk(fs, i % 2 ? d : FS_ROOT_INO, name, S_IFREG | 0644);
		if (i % 3 == 0)
			ck_assert_int_eq(fs_setxattr(fs, f, "user.x", buf, (size_t)i * 7, 0), 0);
		for (int k = 0; k < i % 5; k++)	/* extents apart: several each */
			ck_assert_int_eq(fs_write(fs, f, (uint64_t)k * 65536, buf, 4096, false), 4096);
		if (i % 7 == 0) {
			struct stat st;
			name[0] = 's';
			ck_assert_int_eq(fs_symlink(fs, d, name, "some/target", NULL, &st), 0);
		}
	}
	ck_assert_int_eq(fs_sync(fs), 0);
	for (int round = 0; round < 2; round++) {
		uint64_t counted = fs_snap_state_bytes(fs);
		pthread_mutex_lock(&fs->lock);
		ck_assert_int_eq(mlog_snapshot(fs->mlog, fs_emit_snapshot, fs), 0);
		pthread_mutex_unlock(&fs->lock);
		struct mlog_stats ms;
		mlog_get_stats(fs->mlog, &ms);
		fprintf(stderr, "snapshot: counted %llu, written %llu\n",
			(unsigned long long)counted, (unsigned long long)ms.last_snapshot_bytes);
		ck_assert_uint_le(counted, ms.last_snapshot_bytes);
		ck_assert_uint_le(ms.last_snapshot_bytes, counted + 4 * 4096 + 512);
		/* deletes shrink it by exactly what they drop */
		for (int i = 0; i < 300; i += 4) {
			char name[256];
			var_name(name, i);
			fs_unlink(fs, i % 2 ? d : FS_ROOT_INO, name);
		}
	}
	remount();
}
END_TEST

static uint32_t free_zones(void)
{
	struct zalloc_stats zs;
	zalloc_get_stats(fs->za, &zs);
	return zs.free_zones;
}

/* A write-out whose extent record the full log refuses has written its
 * bytes already: they are given up, so that once every file is deleted
 * every data zone is free again (no zone leaks until a remount). */
START_TEST(refused_writeout_leaks_no_zone)
{
	uint32_t empty = free_zones();
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "data", S_IFREG | 0644);
	/* A zone of the file's class is open with room; more bytes are
	 * buffered while there is room, and written out into that zone once
	 * the log is full. */
	uint8_t *buf = malloc(256 << 10);
	memset(buf, 0x5a, 256 << 10);
	ck_assert_int_eq(fs_write(fs, f, 0, buf, 256 << 10, false), 256 << 10);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	ck_assert_int_eq(fs_write(fs, f, 256 << 10, buf, 256 << 10, false), 256 << 10);
	free(buf);
	int n = fill_metadata_nosync();
	int refused = 0;
	for (int i = 0; i < 3; i++)
		refused += fs_fsync(fs, f, false) == -ENOSPC;
	fprintf(stderr, "write-outs refused: %d\n", refused);
	ck_assert_int_gt(refused, 0);
	char name[64];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", i);
		ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
	}
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "data"), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	ck_assert_uint_eq(free_zones(), empty);
	remount();
	ck_assert_uint_eq(free_zones(), empty);
}
END_TEST

/* ---- bytes a truncate cut off ------------------------------------------- */

/* Truncate into the middle of a block, make it durable through another
 * file's fsync (the zeroed tail page is still only in the buffer), lose
 * power: the block on the device still holds the old bytes past the size.
 * Growing the file by copy_file_range (shared blocks past a gap) must not
 * bring them back; neither may a write, a truncate up or fallocate. */
START_TEST(truncated_bytes_stay_gone)
{
	enum { GROW_COPY, GROW_WRITE, GROW_TRUNCATE, GROW_FALLOCATE, NGROW };
	uint8_t old[8192], blk[4096];
	memset(old, 0xab, sizeof(old));
	memset(blk, 0x11, sizeof(blk));
	uint64_t src = tl_mk(fs, FS_ROOT_INO, "src", S_IFREG | 0644);
	ck_assert_int_eq(fs_write(fs, src, 0, blk, sizeof(blk), 0), (ssize_t)sizeof(blk));
	ck_assert_int_eq(fs_fsync(fs, src, false), 0);
	for (int how = 0; how < NGROW; how++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", how);
		uint64_t f = tl_mk(fs, FS_ROOT_INO, name, S_IFREG | 0644);
		ck_assert_int_eq(fs_write(fs, f, 0, old, sizeof(old), 0), (ssize_t)sizeof(old));
		ck_assert_int_eq(fs_fsync(fs, f, false), 0);
		struct stat attr = { .st_size = 6000 }, st;
		ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_SIZE, &st), 0);
		ck_assert_int_eq(fs_fsync(fs, src, false), 0);	/* commits the TRUNCATE */
		crash_remount();
		ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
		ck_assert_int_eq(st.st_size, 6000);
		switch (how) {
		case GROW_COPY:
			ck_assert_int_eq(fs_copy_file_range(fs, src, 0, f, 16384, 4096, 0), 4096);
			break;
		case GROW_WRITE:
			ck_assert_int_eq(fs_write(fs, f, 16384, blk, 4096, 0), 4096);
			break;
		case GROW_TRUNCATE:
			attr.st_size = 20480;
			ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_SIZE, &st), 0);
			break;
		case GROW_FALLOCATE:
			ck_assert_int_eq(fs_fallocate(fs, f, 0, 0, 20480), 0);
			break;
		}
		uint8_t got[8192 - 6000];
		ck_assert_int_eq(fs_read(fs, f, 6000, sizeof(got), got), (ssize_t)sizeof(got));
		for (size_t i = 0; i < sizeof(got); i++)
			ck_assert_msg(got[i] == 0, "%s: byte %zu is 0x%02x after growing",
				      name, 6000 + i, got[i]);
		ck_assert_int_eq(fs_sync(fs), 0);
		remount();
		ck_assert_int_eq(fs_read(fs, f, 6000, sizeof(got), got), (ssize_t)sizeof(got));
		for (size_t i = 0; i < sizeof(got); i++)
			ck_assert_msg(got[i] == 0, "%s: byte %zu is 0x%02x after a remount",
				      name, 6000 + i, got[i]);
	}
}
END_TEST

/* ---- a refused write-back --------------------------------------------- */

/* Write-back refused at 1 MiB while write-back past it was taken (served
 * out of order): what only the buffer holds past the refusal is dropped
 * (no hole), later write-back past it is refused until a truncate to it or
 * the last close, other writes are served. */
START_TEST(refused_writeback_cuts_the_file)
{
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	uint8_t *buf = malloc(1 << 20);
	memset(buf, 0x21, 1 << 20);
	ck_assert_int_eq(fs_open(fs, f, O_RDWR), 0);
	ck_assert_int_eq(fs_write(fs, f, 0, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	ck_assert_int_eq(fs_write(fs, f, 2 << 20, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_writeback_refused(fs, f, 1 << 20, -ENOSPC), 0);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	ck_assert_int_eq(fs_write(fs, f, 3 << 20, buf, 4096, FS_WRITE_PAGECACHE), -ENOSPC);
	ck_assert_int_eq(fs_write(fs, f, 0, buf, 4096, FS_WRITE_PAGECACHE), 4096);
	ck_assert_int_eq(fs_write(fs, f, 3 << 20, buf, 4096, 0), 4096);	/* not write-back */
	struct stat attr = { .st_size = 1 << 20 };
	ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_write(fs, f, 1 << 20, buf, 4096, FS_WRITE_PAGECACHE), 4096);
	ck_assert_int_eq(fs_writeback_refused(fs, f, 2 << 20, -ENOSPC), 0);
	ck_assert_int_eq(fs_write(fs, f, 2 << 20, buf, 4096, FS_WRITE_PAGECACHE), -ENOSPC);
	ck_assert_int_eq(fs_release(fs, f), 0);	/* the last close */
	ck_assert_int_eq(fs_write(fs, f, 2 << 20, buf, 4096, FS_WRITE_PAGECACHE), 4096);
	free(buf);
	ck_assert_int_eq(fs_sync(fs), 0);
	remount();
}
END_TEST

/* WRITEs served out of order near full: write-back past the refusal was
 * taken and already written out when the refused one came (the CI run
 * of integ_adversarial that read a hole).  The bytes that grew the file
 * past the refusal are dropped, so the stored file is a prefix of what
 * was written; bytes fsync'ed before, and a refused rewrite's old bytes,
 * stay. */
START_TEST(refused_writeback_after_written_out_leaves_no_hole)
{
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	uint8_t *buf = malloc(1 << 20), *got = malloc(1 << 20);
	struct stat st;
	memset(buf, 0x21, 1 << 20);
	ck_assert_int_eq(fs_open(fs, f, O_RDWR), 0);
	ck_assert_int_eq(fs_write(fs, f, 0, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_write(fs, f, 2 << 20, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_flush(fs, f), 0);	/* written out, not fsync'ed */
	ck_assert_int_eq(fs_writeback_refused(fs, f, 1 << 20, -ENOSPC), 0);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	ck_assert_int_eq(fs_release(fs, f), 0);

	/* fsync'ed bytes past a hole the writer made stay */
	uint64_t g = tl_mk(fs, FS_ROOT_INO, "g", S_IFREG | 0644);
	ck_assert_int_eq(fs_open(fs, g, O_RDWR), 0);
	ck_assert_int_eq(fs_write(fs, g, 2 << 20, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_fsync(fs, g, false), 0);
	ck_assert_int_eq(fs_writeback_refused(fs, g, 0, -ENOSPC), 0);
	ck_assert_int_eq(fs_getattr(fs, g, &st), 0);
	ck_assert_int_eq(st.st_size, 3 << 20);
	ck_assert_int_eq(fs_release(fs, g), 0);

	/* a refused rewrite keeps the old bytes and what was appended */
	uint64_t h = tl_mk(fs, FS_ROOT_INO, "h", S_IFREG | 0644);
	ck_assert_int_eq(fs_open(fs, h, O_RDWR), 0);
	ck_assert_int_eq(fs_write(fs, h, 0, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_fsync(fs, h, false), 0);
	ck_assert_int_eq(fs_write(fs, h, 1 << 20, buf, 1 << 20, FS_WRITE_PAGECACHE), 1 << 20);
	ck_assert_int_eq(fs_flush(fs, h), 0);
	ck_assert_int_eq(fs_writeback_refused(fs, h, 4096, -ENOSPC), 0);
	ck_assert_int_eq(fs_getattr(fs, h, &st), 0);
	ck_assert_int_eq(st.st_size, 2 << 20);
	ck_assert_int_eq(fs_read(fs, h, 1 << 20, 1 << 20, got), 1 << 20);
	ck_assert(memcmp(got, buf, 1 << 20) == 0);
	ck_assert_int_eq(fs_release(fs, h), 0);
	free(buf);
	free(got);
	ck_assert_int_eq(fs_sync(fs), 0);
	remount();
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("adversarial");
	TCase *tc = tcase_create("shapes");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, deep_tree);
	tcase_add_test(tc, snapshot_size_is_counted);
	tcase_add_test(tc, truncated_bytes_stay_gone);
	tcase_add_test(tc, refused_writeback_cuts_the_file);
	tcase_add_test(tc, refused_writeback_after_written_out_leaves_no_hole);
	tcase_add_test(tc, free_space_level_through_epochs);
	tcase_add_test(tc, garbage_is_room_for_the_page_cache);
	tcase_add_test(tc, direct_writes_keep_only_what_the_cache_may_hold);
	suite_add_tcase(s, tc);
	tc = tcase_create("full_log");
	tcase_add_checked_fixture(tc, small_setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, rename_storm_on_full_log);
	tcase_add_test(tc, delete_all_on_full_log);
	tcase_add_test(tc, refused_writeout_leaks_no_zone);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
