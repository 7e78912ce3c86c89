/* Record / replay edge cases of the fs core, on the emulated device:
 *   - every record type replayed from the log TAIL (after a crash, before
 *     any snapshot) gives the state that was fsync'ed;
 *   - malformed and inconsistent records fed straight to fs_replay_record
 *     are rejected (-EUCLEAN) or ignored, never crash;
 *   - corrupted metadata on the device (bit flips, wrong CRC, truncated log,
 *     a zeroed header): mount and fsck fail cleanly or fall back, never
 *     crash;
 *   - every operation is one record, appended before memory changes: an
 *     in-line snapshot, a group commit or a failed append never leaves
 *     memory and log apart;
 *   - regression tests for what the crash loop and the fuzzers found.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "testlib.h"
#include "fs/fs_internal.h"
#include "mlog/mlog.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void make_dev(uint32_t zones, uint64_t zone_size)
{
	tl_dev_create(&td, "rec", zones, zone_size, 8);
}

static void open_dev(void)
{
	tl_dev_open(&td, &dev);
}

static int try_mount(bool ro)
{
	return tl_mount(dev, 32ull << 20, ro, &fs);
}

static void do_mount(void)
{
	ck_assert_int_eq(try_mount(false), 0);
}

static void setup(void)
{
	make_dev(24, 4u << 20);
	open_dev();
	ck_assert_int_eq(fs_mkfs(dev, NULL), 0);
	do_mount();
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static int nproblems;
static void count_report(void *arg, const char *fmt, ...)
{
	va_list ap;
	(void)arg;
	nproblems++;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The daemon dies without unmounting: only what was committed survives
 * (power loss drops the device cache too). */
/* Errors logged before the last remount: the dead device's unmount logs
 * write and commit failures on purpose; the mount must log none. */
static uint64_t errors_before_mount;

static void crash_and_remount(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);		/* fails (-EIO): the device is dead; frees */
	fs = NULL;
	zdev_close(dev);
	open_dev();
	nproblems = 0;
	ck_assert_int_eq(fs_check(dev, false, count_report, NULL), 0);
	errors_before_mount = zf_log_error_count();
	do_mount();
}

static void clean_remount(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, count_report, NULL), 0);
	do_mount();
}

static uint64_t mk(uint64_t parent, const char *name, mode_t mode)
{
	return tl_mk(fs, parent, name, mode);
}

static uint64_t lookup(uint64_t parent, const char *name)
{
	struct stat st;
	if (fs_lookup(fs, parent, name, &st))
		return 0;
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static uint64_t size_of(uint64_t ino)
{
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	return (uint64_t)st.st_size;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 2654435761u + seed) >> 11);
}

static void write_fill(uint64_t ino, uint64_t off, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n);
	fill(b, n, seed);
	ck_assert_int_eq(fs_write(fs, ino, off, b, n, false), (ssize_t)n);
	free(b);
}

static void expect_fill(uint64_t ino, uint64_t off, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n), *w = malloc(n);
	fill(w, n, seed);
	ck_assert_int_eq(fs_read(fs, ino, off, n, b), (ssize_t)n);
	ck_assert_int_eq(memcmp(b, w, n), 0);
	free(b);
	free(w);
}

static void expect_zero(uint64_t ino, uint64_t off, size_t n)
{
	uint8_t *b = malloc(n);
	ck_assert_int_eq(fs_read(fs, ino, off, n, b), (ssize_t)n);
	for (size_t i = 0; i < n; i++)
		if (b[i])
			ck_abort_msg("byte %zu is 0x%02x, expected 0", (size_t)off + i, b[i]);
	free(b);
}

/* ---- every record type replayed from the log tail --------------------- */

/* Regression (found by the crash loop): a TRUNCATE record (or an INODE
 * record shrinking a file) in the log tail crashed replay with SIGFPE
 * because the block size was still 0 while replaying. */
START_TEST(tail_truncate_down)
{
	uint64_t a = mk(FS_ROOT_INO, "a", S_IFREG | 0644);
	write_fill(a, 0, 300000, 1);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	struct stat attr = { .st_size = 5000 }, st;
	ck_assert_int_eq(fs_setattr(fs, a, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	crash_and_remount();
	ck_assert_uint_eq(size_of(a), 5000);
	expect_fill(a, 0, 5000, 1);
	attr.st_size = 100000;	/* grows: the cut bytes come back as zeros */
	ck_assert_int_eq(fs_setattr(fs, a, &attr, FS_SET_SIZE, &st), 0);
	expect_zero(a, 5000, 95000);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	crash_and_remount();
	ck_assert_uint_eq(size_of(a), 100000);
	expect_fill(a, 0, 5000, 1);
	expect_zero(a, 5000, 95000);
}
END_TEST

START_TEST(tail_punch_hole)
{
	uint64_t a = mk(FS_ROOT_INO, "p", S_IFREG | 0644);
	write_fill(a, 0, 3 << 20, 2);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	ck_assert_int_eq(fs_fallocate(fs, a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      100000, 1500000), 0);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	crash_and_remount();
	ck_assert_uint_eq(size_of(a), 3 << 20);
	expect_fill(a, 0, 100000, 2);
	expect_zero(a, 100000, 1500000);
	uint8_t *w = malloc(3 << 20), *b = malloc(3 << 20);
	fill(w, 3 << 20, 2);
	ck_assert_int_eq(fs_read(fs, a, 1600000, (3 << 20) - 1600000, b),
			 (ssize_t)((3 << 20) - 1600000));
	ck_assert_int_eq(memcmp(b, w + 1600000, (3 << 20) - 1600000), 0);
	free(w);
	free(b);
}
END_TEST

START_TEST(tail_namespace)
{
	uint64_t d = mk(FS_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t e = mk(d, "e", S_IFDIR | 0700);
	uint64_t x = mk(d, "x", S_IFREG | 0600);
	uint64_t y = mk(FS_ROOT_INO, "y", S_IFREG | 0644);
	uint64_t z = mk(FS_ROOT_INO, "z", S_IFREG | 0644);
	uint64_t gone = mk(FS_ROOT_INO, "gone", S_IFREG | 0644);
	struct stat st;
	write_fill(x, 0, 10000, 3);
	write_fill(y, 0, 20000, 4);
	ck_assert_int_eq(fs_link(fs, x, e, "x-link", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "y", d, "y2", 0), 0);
	ck_assert_int_eq(fs_rename(fs, d, "y2", FS_ROOT_INO, "z", 0), 0);	/* replaces z */
	ck_assert_int_eq(fs_rename(fs, d, "x", e, "x-link", RENAME_EXCHANGE), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "gone"), 0);
	ck_assert_int_eq(fs_symlink(fs, d, "sl", "../z", NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	uint64_t sl = st.st_ino;
	ck_assert_int_eq(fs_setxattr(fs, x, "user.k1", "v1", 2, 0), 0);
	ck_assert_int_eq(fs_setxattr(fs, x, "user.k2", "v2", 2, 0), 0);
	ck_assert_int_eq(fs_removexattr(fs, x, "user.k1"), 0);
	uint64_t r = mk(FS_ROOT_INO, "rmd", S_IFDIR | 0755);
	ck_assert_int_eq(fs_rmdir(fs, FS_ROOT_INO, "rmd"), 0);
	ck_assert_int_eq(fs_fsync(fs, x, false), 0);
	ck_assert_int_eq(fs_fsync(fs, y, false), 0);
	crash_and_remount();
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "d"), d);
	ck_assert_uint_eq(lookup(d, "e"), e);
	ck_assert_uint_eq(lookup(d, "x"), x);		/* exchanged: same inode */
	ck_assert_uint_eq(lookup(e, "x-link"), x);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "z"), y);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "y"), 0);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "gone"), 0);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "rmd"), 0);
	ck_assert_int_eq(fs_getattr(fs, z, &st), -ENOENT);	/* replaced, freed */
	ck_assert_int_eq(fs_getattr(fs, gone, &st), -ENOENT);
	ck_assert_int_eq(fs_getattr(fs, r, &st), -ENOENT);
	ck_assert_int_eq(fs_getattr(fs, x, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 2);
	ck_assert_int_eq(fs_getattr(fs, d, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 3);
	char buf[64];
	ck_assert_int_eq(fs_readlink(fs, sl, buf, sizeof(buf)), 4);
	ck_assert_int_eq(memcmp(buf, "../z", 4), 0);
	ck_assert_int_eq(fs_getxattr(fs, x, "user.k1", buf, sizeof(buf)), -ENODATA);
	ck_assert_int_eq(fs_getxattr(fs, x, "user.k2", buf, sizeof(buf)), 2);
	expect_fill(x, 0, 10000, 3);
	expect_fill(y, 0, 20000, 4);
	clean_remount();
	ck_assert_uint_eq(lookup(e, "x-link"), x);
}
END_TEST

/* A file unlinked while open keeps its data until release; after a crash
 * it is gone and its space is reclaimed, nothing else changes. */
START_TEST(tail_unlinked_open)
{
	uint64_t a = mk(FS_ROOT_INO, "open", S_IFREG | 0644);
	uint64_t b = mk(FS_ROOT_INO, "keep", S_IFREG | 0644);
	ck_assert_int_eq(fs_open(fs, a, O_RDWR), 0);
	write_fill(a, 0, 2 << 20, 5);
	write_fill(b, 0, 1 << 20, 6);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "open"), 0);
	write_fill(a, 2 << 20, 1 << 20, 7);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	ck_assert_int_eq(fs_fsync(fs, b, false), 0);
	crash_and_remount();
	/* Destroying the orphan at mount must not upset the accounting. */
	ck_assert_uint_eq(zf_log_error_count(), errors_before_mount);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, a, &st), -ENOENT);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "keep"), b);
	expect_fill(b, 0, 1 << 20, 6);
}
END_TEST

/* Many crashes in a row, each after a different mix, on the same device:
 * the log is replayed, snapshotted at mount, and grows again. */
START_TEST(repeated_crashes)
{
	uint64_t f = mk(FS_ROOT_INO, "f", S_IFREG | 0644);
	uint64_t size = 0;
	for (int round = 0; round < 12; round++) {
		write_fill(f, size, 70000 + (size_t)round * 1000, (uint32_t)round);
		size += 70000 + (uint64_t)round * 1000;
		if (round % 3 == 1) {
			struct stat attr = { .st_size = (off_t)(size - 12345) }, st;
			ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_SIZE, &st), 0);
			size -= 12345;
		}
		ck_assert_int_eq(fs_fsync(fs, f, round & 1), 0);
		write_fill(f, size, 5000, 99);	/* not synced: may or may not survive */
		crash_and_remount();
		uint64_t got = size_of(f);
		ck_assert(got == size || got == size + 5000);
		size = got;
	}
}
END_TEST

/* ---- one record per operation, logged before memory changes ----------- */

static uint64_t nrecords(void)
{
	struct mlog_stats ms;
	mlog_get_stats(fs->mlog, &ms);
	return ms.records;
}

static uint64_t nsnapshots(void)
{
	struct mlog_stats ms;
	mlog_get_stats(fs->mlog, &ms);
	return ms.snapshots;
}

static bool exists(uint64_t parent, const char *name)
{
	return lookup(parent, name) != 0;
}

/* A small metadata log: 3 meta zones of 1 MiB (a snapshot must fit in the
 * one zone kept empty). */
static void small_log_setup(void)
{
	teardown();
	make_dev(16, 1u << 20);
	open_dev();
	struct fs_mkfs_opts mo = { .meta_zones = 3 };
	ck_assert_int_eq(fs_mkfs(dev, &mo), 0);
	do_mount();
}

/* Bug: make_node added the name before it logged CREATE; when that append
 * found the log full, the in-line snapshot already held the new name and
 * inode, and the CREATE after it made replay fail (EUCLEAN): the file
 * system did not mount again.  Creates and unlinks (the state stays small)
 * until a create is the append that snapshots, then a crash. */
START_TEST(inline_snapshot_on_create)
{
	small_log_setup();
	char name[32];
	uint64_t snaps = nsnapshots();
	int last = -1;
	for (int i = 0; i < 400000 && last < 0; i++) {
		snprintf(name, sizeof(name), "f%06d", i);
		mk(FS_ROOT_INO, name, S_IFREG | 0644);
		if (nsnapshots() != snaps) {
			last = i;	/* this CREATE's append wrote the snapshot */
			break;
		}
		if (i % 64 != 0)
			ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
		snaps = nsnapshots();
	}
	ck_assert_int_ge(last, 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	crash_and_remount();
	for (int i = 0; i <= last; i++) {
		snprintf(name, sizeof(name), "f%06d", i);
		bool want = i % 64 == 0 || i == last;
		ck_assert_msg(exists(FS_ROOT_INO, name) == want, "%s: %s", name,
			      want ? "lost" : "back");
	}
	clean_remount();
	snprintf(name, sizeof(name), "f%06d", last);
	ck_assert(exists(FS_ROOT_INO, name));
}
END_TEST

static void lifetime_is(uint64_t ino, const char *want)
{
	char v[64];
	int n = fs_getxattr(fs, ino, FS_XATTR_LIFETIME, v, sizeof(v) - 1);
	ck_assert_int_gt(n, 0);
	v[n] = 0;
	ck_assert_msg(strcmp(v, want) == 0, "ino %llu: '%s', want '%s'",
		      (unsigned long long)ino, v, want);
}

/* Each operation is one record, so no group commit and no crash can split
 * it: a symlink was CREATE + SYMLINK (a crash between them left a symlink
 * without target), setting user.zonefuse.lifetime was XATTR_SET + INODE (a
 * crash between them left the value without its class). */
START_TEST(one_record_per_operation)
{
	struct stat st;
	uint64_t n0;
	char buf[64];

	n0 = nrecords();
	ck_assert_int_eq(fs_symlink(fs, FS_ROOT_INO, "sl", "a/b/target", NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	uint64_t sl = st.st_ino;
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	uint64_t d = mk(FS_ROOT_INO, "d", S_IFDIR | 0755);
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	uint64_t f = mk(d, "f", S_IFREG | 0644);
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	ck_assert_int_eq(fs_setxattr(fs, f, FS_XATTR_LIFETIME, "long", 4, 0), 0);
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	ck_assert_int_eq(fs_setxattr(fs, d, FS_XATTR_LIFETIME, "short", 5, 0), 0);
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	ck_assert_int_eq(fs_link(fs, f, FS_ROOT_INO, "f2", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "f2", d, "f3", 0), 0);
	ck_assert_uint_eq(nrecords() - n0, 1);
	n0 = nrecords();
	struct stat attr = { .st_mode = 0600 };
	ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_MODE, &st), 0);
	ck_assert_uint_eq(nrecords() - n0, 1);
	uint64_t g = mk(d, "g", S_IFREG | 0644);	/* class from the dir's xattr */
	/* a commit (the committer thread) may come right after any record */
	ck_assert_int_eq(fs_commit(fs), 0);
	crash_and_remount();
	ck_assert_int_eq(fs_readlink(fs, sl, buf, sizeof(buf)), 10);
	ck_assert_int_eq(memcmp(buf, "a/b/target", 10), 0);
	lifetime_is(f, "long xattr\n");
	lifetime_is(d, "short xattr\n");
	lifetime_is(g, "short dir-xattr\n");
	ck_assert_uint_eq(lookup(d, "f3"), f);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0600);
	ck_assert_uint_eq(st.st_nlink, 2);
}
END_TEST

/* A CREATE carries the new inode's initial xattrs (the encoder writes what
 * the prepared inode holds). */
START_TEST(create_with_initial_xattrs)
{
	struct fs_attr a = { .mode = S_IFREG | 0640, .nlink = 1, .atime = 1, .mtime = 2,
			     .ctime = 3, .cls = LIFETIME_LONG, .src = LIFETIME_SRC_XATTR };
	struct fs_inode *in = NULL, *root;
	struct fs_dirent *d;
	char buf[64];

	pthread_mutex_lock(&fs->lock);
	root = fs_inode_get(fs, FS_ROOT_INO);
	a.ino = fs->next_ino;
	ck_assert_int_eq(fs_inode_prepare(fs, &a, FS_ROOT_INO, NULL, &in), 0);
	ck_assert_int_eq(fs_xattr_set_raw(in, FS_XATTR_LIFETIME, "long", 4), 0);
	ck_assert_int_eq(fs_xattr_set_raw(in, "user.empty", "", 0), 0);
	ck_assert_ptr_nonnull(d = fs_dirent_alloc(fs, root, "born", a.ino));
	uint64_t n0 = nrecords();
	ck_assert_int_eq(fs_log_create(fs, in, FS_ROOT_INO, "born"), 0);
	ck_assert_uint_eq(nrecords() - n0, 1);
	fs_apply_create(fs, root, in, d);
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_commit(fs), 0);
	crash_and_remount();
	uint64_t ino = lookup(FS_ROOT_INO, "born");
	ck_assert_uint_eq(ino, a.ino);
	lifetime_is(ino, "long xattr\n");
	ck_assert_int_eq(fs_getxattr(fs, ino, "user.empty", buf, sizeof(buf)), 0);
	ck_assert_int_eq(fs_getxattr(fs, ino, FS_XATTR_LIFETIME, buf, sizeof(buf)), 11);
	clean_remount();
	lifetime_is(ino, "long xattr\n");
}
END_TEST

/* When an append fails (here: the log is full and the state does not fit
 * a snapshot), the operation returns the error and memory is as before. */
START_TEST(failed_append_changes_nothing)
{
	small_log_setup();
	char name[64], val[1500];
	struct stat st;
	int err = 0, n = 0;
	memset(val, 'v', sizeof(val));
	uint64_t f = mk(FS_ROOT_INO, "victim", S_IFREG | 0644);
	uint64_t d = mk(FS_ROOT_INO, "dir", S_IFDIR | 0755);
	mk(FS_ROOT_INO, "spare", S_IFREG | 0644);
	ck_assert_int_eq(fs_setxattr(fs, f, "user.k", "old", 3, 0), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	for (n = 0; n < 20000 && !err; n++) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", n);
		err = fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st);
		if (err)
			break;
		fs_forget(fs, st.st_ino, 1);
		err = fs_setxattr(fs, st.st_ino, "user.pad", val, sizeof(val), 0);
	}
	ck_assert_msg(err == -ENOSPC || err == -E2BIG, "error %d", err);
	/* An existing inode's attributes can still change (the snapshot does
	 * not grow); every operation that grows the state fails, and leaves
	 * memory alone. */
	struct stat attr = { .st_mode = 0600, .st_uid = 7 };
	ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_MODE | FS_SET_UID, &st), 0);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0600);
	ck_assert_uint_eq(st.st_uid, 7);
	ck_assert_int_lt(fs_symlink(fs, FS_ROOT_INO, "sl", "t", NULL, &st), 0);
	ck_assert(!exists(FS_ROOT_INO, "sl"));
	ck_assert_int_lt(fs_mkdir(fs, d, "sub", 0755, NULL, &st), 0);
	ck_assert(!exists(d, "sub"));
	ck_assert_int_eq(fs_getattr(fs, d, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 2);
	ck_assert_int_lt(fs_link(fs, f, d, "l", &st), 0);
	ck_assert(!exists(d, "l"));
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 1);
	char buf[16];
	ck_assert_int_lt(fs_setxattr(fs, f, "user.k", "new", 3, 0), 0);
	ck_assert_int_eq(fs_getxattr(fs, f, "user.k", buf, sizeof(buf)), 3);
	ck_assert_int_eq(memcmp(buf, "old", 3), 0);
	ck_assert_int_lt(fs_setxattr(fs, f, FS_XATTR_LIFETIME, "short", 5, 0), 0);
	lifetime_is(f, "medium default\n");
	/* A rename frees nothing in the log: it fails too.  Records that
	 * free space may use the room kept for appending: deleting still
	 * works (and so would removing the xattr; the spare file goes). */
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "spare", d, "moved", 0), -ENOSPC);
	ck_assert(exists(FS_ROOT_INO, "spare"));
	ck_assert(!exists(d, "moved"));
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "spare"), 0);
	ck_assert(!exists(FS_ROOT_INO, "spare"));
	ck_assert_int_eq(fs_commit(fs), 0);
	/* the log replays to the same state, and the room kept for the
	 * next snapshot lets it mount read-write */
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);
	fs = NULL;
	zdev_close(dev);
	open_dev();
	ck_assert_int_eq(fs_check(dev, false, count_report, NULL), 0);
	ck_assert_int_eq(try_mount(false), 0);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "victim"), f);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_uint_eq(st.st_mode, S_IFREG | 0600);
	ck_assert(!exists(FS_ROOT_INO, "sl"));
	ck_assert(!exists(d, "sub"));
	ck_assert(!exists(FS_ROOT_INO, "spare"));
	ck_assert(!exists(d, "moved"));
}
END_TEST

/* ---- regressions from the fsx model test -------------------------------- */

/* Bug (fs_data.c / fs_prefetch.c, found by fsx.sh seed 5): a prefetch
 * window filled while some of its pages were still buffered holds the OLD
 * device bytes for them (the buffered pages are overlaid at read time).
 * Writing the buffer out (fs_flush, release, fsync, memory pressure) moves
 * those pages to the device without invalidating the window, so the next
 * read served from the window returns the old bytes. */
START_TEST(prefetch_after_flush)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	struct fs_opts o;
	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.prefetch_bytes = 1 << 20;
	ck_assert_int_eq(fs_mount(dev, &o, &fs), 0);
	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);
	uint64_t f = mk(FS_ROOT_INO, "seq", S_IFREG | 0644);
	const size_t size = 6 << 20, off = (4 << 20) + 4096;
	write_fill(f, 0, size, 1);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	write_fill(f, off, 8192, 2);		/* buffered: newer than the device */
	uint8_t *buf = malloc(128 << 10), *want = malloc(8192);
	fill(want, 8192, 2);
	for (uint64_t pos = 0; pos < (4 << 20); pos += 128 << 10)	/* sequential reader */
		ck_assert_int_eq(fs_read(fs, f, pos, 128 << 10, buf), 128 << 10);
	ck_assert_int_eq(fs_read(fs, f, off, 8192, buf), 8192);
	ck_assert_int_eq(memcmp(buf, want, 8192), 0);	/* overlay from the buffer */
	ck_assert_int_eq(fs_flush(fs, f), 0);		/* the pages go to the device */
	ck_assert_int_eq(fs_read(fs, f, 4 << 20, 128 << 10, buf), 128 << 10);
	ck_assert_int_eq(memcmp(buf + 4096, want, 8192), 0);
	free(buf);
	free(want);
}
END_TEST

/* ---- malformed records straight into fs_replay_record ----------------- */

struct rec { uint8_t b[8192]; size_t n; };
static void r_u8(struct rec *r, uint8_t v) { r->b[r->n++] = v; }
static void r_u16(struct rec *r, uint16_t v) { memcpy(r->b + r->n, &v, 2); r->n += 2; }
static void r_u32(struct rec *r, uint32_t v) { memcpy(r->b + r->n, &v, 4); r->n += 4; }
static void r_u64(struct rec *r, uint64_t v) { memcpy(r->b + r->n, &v, 8); r->n += 8; }
static void r_name(struct rec *r, const char *s)
{
	r_u16(r, (uint16_t)strlen(s));
	memcpy(r->b + r->n, s, strlen(s));
	r->n += strlen(s);
}
static void r_attr(struct rec *r, uint64_t ino, uint32_t mode, uint32_t nlink, uint64_t size)
{
	r_u64(r, ino); r_u32(r, mode); r_u32(r, 0); r_u32(r, 0); r_u32(r, nlink);
	r_u64(r, 0); r_u64(r, size); r_u64(r, 1); r_u64(r, 2); r_u64(r, 3);
	r_u8(r, 1); r_u8(r, 0);
}

static int replay(uint16_t type, const struct rec *r)
{
	/* as at mount: applied, not appended, device bytes not accounted */
	fs->applying_log = true;
	fs->valid_counted = false;
	int ret = fs_replay_record(fs, type, r->b, (uint32_t)r->n, 1000);
	fs->applying_log = false;
	fs->valid_counted = true;
	return ret;
}

static void ro_setup(void)
{
	setup();
	/* some state to refer to: /d (dir), /d/f (file with data), /s (symlink) */
	uint64_t d = mk(FS_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t f = mk(d, "f", S_IFREG | 0644);
	struct stat st;
	write_fill(f, 0, 50000, 9);
	ck_assert_int_eq(fs_symlink(fs, FS_ROOT_INO, "s", "d/f", NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(try_mount(true), 0);	/* read-only: replay only */
}

/* Every prefix of every well-formed record: rejected or applied, no crash. */
START_TEST(truncated_payloads)
{
	uint64_t d = lookup(FS_ROOT_INO, "d"), f = lookup(d, "f");
	struct rec recs[16];
	uint16_t types[16];
	int n = 0;
	memset(recs, 0, sizeof(recs));
	types[n] = FS_REC_STATE; r_u64(&recs[n++], 5000);
	types[n] = FS_REC_INODE; r_attr(&recs[n++], f, S_IFREG | 0600, 1, 40000);
	types[n] = FS_REC_CREATE; r_attr(&recs[n], 9001, S_IFREG | 0644, 1, 0);
	r_u64(&recs[n], d); r_name(&recs[n++], "new");
	types[n] = FS_REC_DIRENT; r_u64(&recs[n], FS_ROOT_INO); r_u64(&recs[n], f); r_name(&recs[n++], "dn");
	types[n] = FS_REC_LINK; r_u64(&recs[n], FS_ROOT_INO); r_u64(&recs[n], f); r_name(&recs[n++], "ln");
	types[n] = FS_REC_UNLINK; r_u64(&recs[n], d); r_name(&recs[n++], "f");
	types[n] = FS_REC_RENAME; r_u64(&recs[n], FS_ROOT_INO); r_u64(&recs[n], d); r_u32(&recs[n], 0);
	r_name(&recs[n], "s"); r_name(&recs[n++], "s2");
	types[n] = FS_REC_EXTENT; r_u64(&recs[n], f); r_u64(&recs[n], 0); r_u64(&recs[n], 4096);
	r_u64(&recs[n], 10ull << 20); r_u64(&recs[n++], 4096);
	types[n] = FS_REC_EXTENTS; r_u64(&recs[n], f); r_u32(&recs[n], 2);
	for (int k = 0; k < 2; k++) { r_u64(&recs[n], (uint64_t)k * 4096); r_u64(&recs[n], 4096); r_u64(&recs[n], (20ull << 20) + (uint64_t)k * 4096); }
	n++;
	types[n] = FS_REC_TRUNCATE; r_u64(&recs[n], f); r_u64(&recs[n++], 7777);
	types[n] = FS_REC_PUNCH; r_u64(&recs[n], f); r_u64(&recs[n], 4096); r_u64(&recs[n++], 8192);
	types[n] = FS_REC_XATTR_SET; r_u64(&recs[n], f); r_name(&recs[n], "user.a"); r_u32(&recs[n], 3);
	memcpy(recs[n].b + recs[n].n, "xyz", 3); recs[n].n += 3; n++;
	types[n] = FS_REC_XATTR_DEL; r_u64(&recs[n], f); r_name(&recs[n++], "user.a");
	types[n] = FS_REC_SYMLINK; r_u64(&recs[n], f); r_name(&recs[n++], "target");
	for (int i = 0; i < n; i++) {
		for (size_t len = 0; len < recs[i].n; len++) {
			struct rec cut = recs[i];
			cut.n = len;
			int ret = replay(types[i], &cut);
			ck_assert_msg(ret == -EUCLEAN || (types[i] == FS_REC_XATTR_SET && ret == -EUCLEAN),
				      "type %u cut to %zu of %zu bytes: %d", types[i], len, recs[i].n, ret);
		}
		/* with trailing garbage: never a crash (most types ignore it) */
		struct rec more = recs[i];
		memset(more.b + more.n, 0xEE, 64);
		more.n += 64;
		(void)replay(types[i], &more);
	}
	/* unknown types are skipped */
	ck_assert_int_eq(replay(200, &recs[0]), 0);
}
END_TEST

START_TEST(bad_names_and_fields)
{
	uint64_t d = lookup(FS_ROOT_INO, "d"), f = lookup(d, "f");
	struct rec r;
	char longname[300];
	memset(longname, 'n', 256);
	longname[256] = 0;
	const char *bad[] = { "", "a/b", "/", longname };
	for (size_t i = 0; i < ZF_ARRAY_SIZE(bad); i++) {
		memset(&r, 0, sizeof(r));
		r_u64(&r, FS_ROOT_INO); r_u64(&r, f); r_name(&r, bad[i]);
		ck_assert_int_eq(replay(FS_REC_LINK, &r), -EUCLEAN);
		memset(&r, 0, sizeof(r));
		r_u64(&r, FS_ROOT_INO); r_name(&r, bad[i]);
		ck_assert_int_eq(replay(FS_REC_UNLINK, &r), -EUCLEAN);
	}
	/* a name with an embedded NUL */
	memset(&r, 0, sizeof(r));
	r_u64(&r, FS_ROOT_INO); r_u64(&r, f); r_u16(&r, 3);
	memcpy(r.b + r.n, "a\0b", 3); r.n += 3;
	ck_assert_int_eq(replay(FS_REC_LINK, &r), -EUCLEAN);
	/* inode 0, unknown file type, lifetime class out of range */
	memset(&r, 0, sizeof(r));
	r_attr(&r, 0, S_IFREG | 0644, 1, 0);
	ck_assert_int_eq(replay(FS_REC_INODE, &r), -EUCLEAN);
	memset(&r, 0, sizeof(r));
	r_attr(&r, 777, 0170000, 1, 0);
	ck_assert_int_eq(replay(FS_REC_INODE, &r), -EUCLEAN);
	memset(&r, 0, sizeof(r));
	r_attr(&r, 777, S_IFREG, 1, 0);
	r.b[r.n - 2] = 200;
	ck_assert_int_eq(replay(FS_REC_INODE, &r), -EUCLEAN);
	/* changing an inode's type */
	memset(&r, 0, sizeof(r));
	r_attr(&r, f, S_IFDIR | 0755, 2, 0);
	ck_assert_int_eq(replay(FS_REC_INODE, &r), -EUCLEAN);
	/* CREATE into a non-directory, of an existing name, of an existing inode */
	memset(&r, 0, sizeof(r));
	r_attr(&r, 800, S_IFREG | 0644, 1, 0); r_u64(&r, f); r_name(&r, "x");
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), -EUCLEAN);
	memset(&r, 0, sizeof(r));
	r_attr(&r, 801, S_IFREG | 0644, 1, 0); r_u64(&r, d); r_name(&r, "f");
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), -EUCLEAN);
	memset(&r, 0, sizeof(r));
	r_attr(&r, f, S_IFREG | 0644, 1, 0); r_u64(&r, d); r_name(&r, "g");
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), -EUCLEAN);
	/* LINK to a missing inode / into a missing directory */
	memset(&r, 0, sizeof(r));
	r_u64(&r, FS_ROOT_INO); r_u64(&r, 123456); r_name(&r, "m");
	ck_assert_int_eq(replay(FS_REC_LINK, &r), -EUCLEAN);
	memset(&r, 0, sizeof(r));
	r_u64(&r, 123456); r_u64(&r, f); r_name(&r, "m");
	ck_assert_int_eq(replay(FS_REC_LINK, &r), -EUCLEAN);
	/* EXTENT: zero length, offset overflow, device overflow */
	/* ... and (found by fuzz_replay: a huge extent made the zone listing of
	 * user.zonefuse.zones loop for minutes) beyond the device end, or
	 * across a zone boundary */
	uint64_t ext[][3] = { { 0, 0, 1 << 20 }, { UINT64_MAX - 10, 4096, 1 << 20 },
			      { 0, 4096, UINT64_MAX - 100 }, { 0, 1ull << 60, 16ull << 20 },
			      { 0, 8192, (96ull << 20) - 4096 }, { 0, 8192, (8ull << 20) - 4096 } };
	for (size_t i = 0; i < ZF_ARRAY_SIZE(ext); i++) {
		memset(&r, 0, sizeof(r));
		r_u64(&r, f); r_u64(&r, ext[i][0]); r_u64(&r, ext[i][1]); r_u64(&r, ext[i][2]); r_u64(&r, 0);
		ck_assert_int_eq(replay(FS_REC_EXTENT, &r), -EUCLEAN);
	}
	/* EXTENTS: count that does not match the payload */
	memset(&r, 0, sizeof(r));
	r_u64(&r, f); r_u32(&r, 0x40000000u); r_u64(&r, 0); r_u64(&r, 4096); r_u64(&r, 1 << 20);
	ck_assert_int_eq(replay(FS_REC_EXTENTS, &r), -EUCLEAN);
	/* XATTR_SET: value length beyond the payload */
	memset(&r, 0, sizeof(r));
	r_u64(&r, f); r_name(&r, "user.v"); r_u32(&r, 0xFFFFFFFFu);
	ck_assert_int_eq(replay(FS_REC_XATTR_SET, &r), -EUCLEAN);
	/* records for inodes that do not exist are ignored (freed later in the log) */
	memset(&r, 0, sizeof(r));
	r_u64(&r, 424242); r_u64(&r, 100);
	ck_assert_int_eq(replay(FS_REC_TRUNCATE, &r), 0);
	memset(&r, 0, sizeof(r));
	r_u64(&r, 424242); r_u64(&r, 0); r_u64(&r, 4096);
	ck_assert_int_eq(replay(FS_REC_PUNCH, &r), 0);
	/* huge sizes and ranges: no overflow trouble */
	memset(&r, 0, sizeof(r));
	r_u64(&r, f); r_u64(&r, UINT64_MAX);
	(void)replay(FS_REC_TRUNCATE, &r);
	memset(&r, 0, sizeof(r));
	r_u64(&r, f); r_u64(&r, UINT64_MAX - 5); r_u64(&r, UINT64_MAX);
	(void)replay(FS_REC_PUNCH, &r);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
}
END_TEST

/* Well-formed records describing operations the live code never logs. */
START_TEST(inconsistent_namespace)
{
	uint64_t d = lookup(FS_ROOT_INO, "d"), f = lookup(d, "f");
	struct rec r;
	struct stat st;
	/* a second name for a directory */
	memset(&r, 0, sizeof(r));
	r_u64(&r, FS_ROOT_INO); r_u64(&r, d); r_name(&r, "d2");
	ck_assert_int_eq(replay(FS_REC_LINK, &r), -EUCLEAN);
	/* removing a non-empty directory */
	memset(&r, 0, sizeof(r));
	r_u64(&r, FS_ROOT_INO); r_name(&r, "d");
	ck_assert_int_eq(replay(FS_REC_UNLINK, &r), -EUCLEAN);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	/* moving a directory below itself */
	uint64_t e = 0;
	memset(&r, 0, sizeof(r));
	r_attr(&r, 5555, S_IFDIR | 0755, 2, 0); r_u64(&r, d); r_name(&r, "e");
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), 0);
	e = lookup(d, "e");
	ck_assert_uint_eq(e, 5555);
	memset(&r, 0, sizeof(r));
	r_u64(&r, FS_ROOT_INO); r_u64(&r, e); r_u32(&r, 0); r_name(&r, "d"); r_name(&r, "loop");
	ck_assert_int_eq(replay(FS_REC_RENAME, &r), -EUCLEAN);
	memset(&r, 0, sizeof(r));
	r_u64(&r, d); r_u64(&r, FS_ROOT_INO); r_u32(&r, RENAME_EXCHANGE); r_name(&r, "e"); r_name(&r, "d");
	ck_assert_int_eq(replay(FS_REC_RENAME, &r), -EUCLEAN);
	/* replacing a non-empty directory / a directory by a file */
	memset(&r, 0, sizeof(r));
	r_u64(&r, d); r_u64(&r, FS_ROOT_INO); r_u32(&r, 0); r_name(&r, "f"); r_name(&r, "d");
	ck_assert_int_eq(replay(FS_REC_RENAME, &r), -EUCLEAN);
	/* unknown rename flags */
	memset(&r, 0, sizeof(r));
	r_u64(&r, d); r_u64(&r, d); r_u32(&r, 0x80); r_name(&r, "f"); r_name(&r, "g");
	ck_assert_int_eq(replay(FS_REC_RENAME, &r), -EUCLEAN);
	ck_assert_uint_eq(lookup(d, "f"), f);
	/* the tree is intact: fs_check-like walk */
	ck_assert_int_eq(fs_getattr(fs, d, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 3);
}
END_TEST

/* CREATE with its tail (target, initial xattrs), the older forms (CREATE
 * then SYMLINK; XATTR_SET of the lifetime then INODE), and damaged tails. */
START_TEST(create_tail_forms)
{
	uint64_t d = lookup(FS_ROOT_INO, "d"), f = lookup(d, "f");
	struct rec r;
	struct stat st;
	char buf[64];

	/* new form: symlink with its target and an xattr */
	memset(&r, 0, sizeof(r));
	r_attr(&r, 7001, S_IFLNK | 0777, 1, 0); r_u64(&r, d); r_name(&r, "ln1");
	r_name(&r, "../t1"); r_u16(&r, 1);
	r_name(&r, "user.x"); r_u32(&r, 2); r_u8(&r, 'h'); r_u8(&r, 'i');
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), 0);
	ck_assert_uint_eq(lookup(d, "ln1"), 7001);
	ck_assert_int_eq(fs_readlink(fs, 7001, buf, sizeof(buf)), 5);
	ck_assert_int_eq(memcmp(buf, "../t1", 5), 0);
	ck_assert_int_eq(fs_getxattr(fs, 7001, "user.x", buf, sizeof(buf)), 2);
	/* a regular file created with the lifetime xattr (the class is in the
	 * attributes, the value is stored as given) */
	memset(&r, 0, sizeof(r));
	r_attr(&r, 7002, S_IFREG | 0644, 1, 0);
	r.b[r.n - 2] = LIFETIME_EXTREME; r.b[r.n - 1] = LIFETIME_SRC_XATTR;
	r_u64(&r, d); r_name(&r, "withx");
	r_name(&r, ""); r_u16(&r, 1);
	r_name(&r, FS_XATTR_LIFETIME); r_u32(&r, 7);
	memcpy(r.b + r.n, "extreme", 7); r.n += 7;
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), 0);
	lifetime_is(7002, "extreme xattr\n");
	struct fs_xattr *x = fs_xattr_find(fs_inode_get(fs, 7002), FS_XATTR_LIFETIME);
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->size, 7);
	/* old form: CREATE without the tail, then SYMLINK */
	memset(&r, 0, sizeof(r));
	r_attr(&r, 7003, S_IFLNK | 0777, 1, 0); r_u64(&r, d); r_name(&r, "ln2");
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), 0);
	memset(&r, 0, sizeof(r));
	r_u64(&r, 7003); r_name(&r, "old/target");
	ck_assert_int_eq(replay(FS_REC_SYMLINK, &r), 0);
	ck_assert_int_eq(fs_readlink(fs, 7003, buf, sizeof(buf)), 10);
	/* old form: XATTR_SET of the lifetime, then INODE with the class */
	memset(&r, 0, sizeof(r));
	r_u64(&r, f); r_name(&r, FS_XATTR_LIFETIME); r_u32(&r, 5);
	memcpy(r.b + r.n, "short", 5); r.n += 5;
	ck_assert_int_eq(replay(FS_REC_XATTR_SET, &r), 0);
	lifetime_is(f, "short xattr\n");
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	memset(&r, 0, sizeof(r));
	r_attr(&r, f, S_IFREG | 0644, 1, (uint64_t)st.st_size);
	r.b[r.n - 2] = LIFETIME_SHORT; r.b[r.n - 1] = LIFETIME_SRC_XATTR;
	ck_assert_int_eq(replay(FS_REC_INODE, &r), 0);
	lifetime_is(f, "short xattr\n");
	/* damaged tails: nothing is created */
	struct { const char *what; uint32_t mode; const char *target; int nx; int vlen;
		 bool dup; int extra; } bad[] = {
		{ "target on a file", S_IFREG | 0644, "t", 0, 0, false, 0 },
		{ "xattr count past the end", S_IFLNK | 0777, "t", 3, 1, false, 0 },
		{ "value past the end", S_IFLNK | 0777, "t", 1, 100, false, 0 },
		{ "same xattr twice", S_IFLNK | 0777, "t", 2, 1, true, 0 },
		{ "bytes after the tail", S_IFLNK | 0777, "t", 1, 1, false, 5 },
	};
	for (size_t i = 0; i < ZF_ARRAY_SIZE(bad); i++) {
		memset(&r, 0, sizeof(r));
		r_attr(&r, 7100 + i, bad[i].mode, 1, 0); r_u64(&r, d); r_name(&r, "bad");
		r_name(&r, bad[i].target); r_u16(&r, (uint16_t)bad[i].nx);
		int have = bad[i].nx > 2 ? 1 : bad[i].nx;
		for (int k = 0; k < have; k++) {
			r_name(&r, bad[i].dup || k == 0 ? "user.a" : "user.b");
			r_u32(&r, (uint32_t)bad[i].vlen);
			if (bad[i].vlen < 10) {
				memset(r.b + r.n, 'v', (size_t)bad[i].vlen);
				r.n += (size_t)bad[i].vlen;
			}
		}
		memset(r.b + r.n, 0, (size_t)bad[i].extra);
		r.n += (size_t)bad[i].extra;
		ck_assert_msg(replay(FS_REC_CREATE, &r) == -EUCLEAN, "%s", bad[i].what);
		ck_assert_msg(!exists(d, "bad"), "%s", bad[i].what);
		ck_assert_int_eq(fs_getattr(fs, 7100 + i, &st), -ENOENT);
	}
	/* every cut of a CREATE with a tail: rejected, or (cut right after
	 * the name) the older form without a tail */
	memset(&r, 0, sizeof(r));
	r_attr(&r, 7200, S_IFLNK | 0777, 1, 0); r_u64(&r, d); r_name(&r, "cut");
	size_t base = r.n;
	r_name(&r, "tgt"); r_u16(&r, 1); r_name(&r, "user.c"); r_u32(&r, 1); r_u8(&r, 'c');
	for (size_t len = 0; len < r.n; len++) {
		struct rec cut = r;
		cut.n = len;
		int ret = replay(FS_REC_CREATE, &cut);
		if (len == base) {
			ck_assert_int_eq(ret, 0);
			memset(&cut, 0, sizeof(cut));
			r_u64(&cut, d); r_name(&cut, "cut");
			ck_assert_int_eq(replay(FS_REC_UNLINK, &cut), 0);
		} else {
			ck_assert_msg(ret == -EUCLEAN, "cut to %zu of %zu: %d", len, r.n, ret);
		}
		ck_assert(!exists(d, "cut"));
	}
	ck_assert_int_eq(replay(FS_REC_CREATE, &r), 0);
	ck_assert_int_eq(fs_readlink(fs, 7200, buf, sizeof(buf)), 3);
}
END_TEST

/* Found by fuzz_mount: a damaged log can leave a name whose inode mount
 * drops (link count 0); the snapshot written next must not contain that
 * name, or the file system never mounts again. */
START_TEST(snapshot_skips_dangling_names)
{
	uint64_t a = mk(FS_ROOT_INO, "dangling", S_IFREG | 0644);
	uint64_t b = mk(FS_ROOT_INO, "fine", S_IFREG | 0644);
	struct rec r;
	memset(&r, 0, sizeof(r));
	r_attr(&r, a, S_IFREG | 0644, 0, 0);	/* as a damaged INODE record would */
	pthread_mutex_lock(&fs->lock);
	fs->applying_log = true;
	ck_assert_int_eq(fs_replay_record(fs, FS_REC_INODE, r.b, (uint32_t)r.n, 1), 0);
	fs->applying_log = false;
	struct fs_inode *in = fs_inode_get(fs, a);
	ck_assert_ptr_nonnull(in);
	fs_inode_maybe_free(fs, in);		/* what mount does to nlink 0 */
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_unmount(fs), 0);	/* writes the snapshot */
	fs = NULL;
	do_mount();
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "dangling"), 0);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "fine"), b);
	clean_remount();
}
END_TEST

/* fsck on a device with zones smaller than the default stripe unit (it
 * used to fail with EINVAL before looking at anything). */
START_TEST(fsck_small_zones)
{
	teardown();
	make_dev(10, 256u << 10);
	open_dev();
	ck_assert_int_eq(fs_mkfs(dev, NULL), 0);
	nproblems = 0;
	ck_assert_int_eq(fs_check(dev, true, count_report, NULL), 0);
}
END_TEST

/* ---- corrupted metadata on the device ---------------------------------- */

/* Rewrite a sequential zone with (possibly changed) content: reset, then
 * write `len` bytes; finish it when it was full. */
static void rewrite_zone(uint32_t z, const uint8_t *buf, uint64_t len, bool finish)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	ck_assert_int_eq(zdev_zone_reset(dev, z), 0);
	if (len)
		ck_assert_int_eq(zdev_write(dev, (uint64_t)z * g->zone_size, buf, len), (ssize_t)len);
	if (finish)
		ck_assert_int_eq(zdev_zone_finish(dev, z), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
}

struct zimg { uint32_t z; uint64_t len; bool full; uint8_t *buf; };

/* Copy the written part of every zone (meta zones first: *nmeta of them),
 * so a test can mutate metadata and put the whole device back after each
 * try (a read-write mount of a damaged log may reset and reuse zones). */
static int save_zones(struct zimg *out, uint32_t max, int *nmeta)
{
	struct mlog_sb sb;
	ck_assert_int_eq(mlog_probe(dev, &sb), 0);
	const struct zdev_geometry *g = zdev_geometry(dev);
	int n = 0;
	*nmeta = (int)sb.meta_count;
	for (uint32_t z = sb.meta_first; z < g->nr_zones && (uint32_t)n < max; z++) {
		struct zdev_zone zz;
		ck_assert_int_eq(zdev_report_zones(dev, z, 1, &zz), 1);
		out[n].z = z;
		out[n].len = zz.wp - zz.start;
		out[n].full = zdev_zone_full(&zz);
		if (out[n].full)
			out[n].len = zz.capacity;
		out[n].buf = zdev_buf_alloc(ZF_MAX(out[n].len, 4096u));
		memset(out[n].buf, 0, ZF_MAX(out[n].len, 4096u));
		if (out[n].len)
			ck_assert_int_eq(zdev_read(dev, zz.start, out[n].buf, out[n].len), (ssize_t)out[n].len);
		n++;
	}
	return n;
}

static void restore_zones(struct zimg *im, int n)
{
	for (int i = 0; i < n; i++)
		rewrite_zone(im[i].z, im[i].buf, im[i].len, im[i].full);
}

/* Mount (read-only and read-write) and fsck must not crash; returns the
 * read-write mount result. */
static int probe_all(void)
{
	int ret;
	nproblems = 0;
	(void)fs_check(dev, false, count_report, NULL);
	ret = try_mount(true);
	if (ret == 0) {
		fs_unmount(fs);
		fs = NULL;
	}
	ret = try_mount(false);
	if (ret == 0) {
		/* the fs keeps working */
		struct stat st;
		if (fs_mknod(fs, FS_ROOT_INO, "after", S_IFREG | 0644, 0, NULL, &st) == 0) {
			fs_forget(fs, st.st_ino, 1);
			ck_assert_int_eq(fs_write(fs, st.st_ino, 0, "hello", 5, false), 5);
			ck_assert_int_eq(fs_fsync(fs, st.st_ino, false), 0);
		}
		ck_assert_int_eq(fs_unmount(fs), 0);
		fs = NULL;
		/* what a successful read-write mount wrote mounts again */
		ck_assert_int_eq(try_mount(true), 0);
		fs_unmount(fs);
		fs = NULL;
	}
	return ret;
}

static void populate(int files)
{
	char name[32];
	for (int i = 0; i < files; i++) {
		snprintf(name, sizeof(name), "file%03d", i);
		uint64_t ino = mk(FS_ROOT_INO, name, S_IFREG | 0644);
		write_fill(ino, 0, 5000 + (size_t)i * 3000, (uint32_t)i);
		if (i % 4 == 0)
			ck_assert_int_eq(fs_setxattr(fs, ino, "user.tag", name, strlen(name), 0), 0);
		if (i % 5 == 0)
			ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
	}
}

START_TEST(meta_bit_flips)
{
	populate(40);
	ck_assert_int_eq(fs_sync(fs), 0);
	/* leave records in the log tail too: crash without the unmount snapshot */
	uint64_t t = mk(FS_ROOT_INO, "tail", S_IFREG | 0644);
	write_fill(t, 0, 70000, 77);
	ck_assert_int_eq(fs_fsync(fs, t, false), 0);
	crash_and_remount();
	uint64_t t2 = mk(FS_ROOT_INO, "tail2", S_IFREG | 0644);
	write_fill(t2, 0, 10000, 78);
	ck_assert_int_eq(fs_fsync(fs, t2, false), 0);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);
	fs = NULL;
	zdev_close(dev);
	open_dev();

	struct zimg im[64];
	int nmeta, n = save_zones(im, 64, &nmeta);
	uint64_t seed = 12345;
	int mounted = 0, refused = 0;
	for (int iter = 0; iter < 160; iter++) {
		int k = -1;
		for (int tries = 0; tries < 32 && k < 0; tries++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			int c = (int)((seed >> 33) % (uint64_t)nmeta);
			if (im[c].len)
				k = c;
		}
		ck_assert_int_ge(k, 0);
		uint8_t *save = malloc(im[k].len);
		memcpy(save, im[k].buf, im[k].len);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t pos;
		switch (iter % 4) {
		case 0:	/* the zone header */
			pos = (seed >> 20) % 4096;
			break;
		case 1:	/* a record header near the start of the log */
			pos = 4096 + (seed >> 20) % 256;
			break;
		default:
			pos = (seed >> 20) % im[k].len;
			break;
		}
		int flips = 1 + (int)((seed >> 10) % 3);
		for (int i = 0; i < flips; i++)
			im[k].buf[(pos + (uint64_t)i * 37) % im[k].len] ^= (uint8_t)(1u << ((seed >> (4 + i)) & 7));
		restore_zones(im, n);
		if (probe_all() == 0)
			mounted++;
		else
			refused++;
		memcpy(im[k].buf, save, im[k].len);
		free(save);
	}
	restore_zones(im, n);
	ck_assert_int_eq(probe_all(), 0);
	fprintf(stderr, "meta_bit_flips: %d mounted (an older state or the flip was harmless), "
		"%d refused\n", mounted, refused);
	for (int i = 0; i < n; i++)
		zdev_buf_free(im[i].buf);
}
END_TEST

/* Truncated log (every block boundary of the live zone), wrong CRCs and a
 * zeroed header: mount falls back to what is intact or refuses; fsck too. */
START_TEST(meta_truncation_and_crc)
{
	populate(25);
	ck_assert_int_eq(fs_sync(fs), 0);
	uint64_t t = mk(FS_ROOT_INO, "tail", S_IFREG | 0644);
	write_fill(t, 0, 30000, 5);
	ck_assert_int_eq(fs_fsync(fs, t, false), 0);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);
	fs = NULL;
	zdev_close(dev);
	open_dev();
	struct zimg im[64];
	int nmeta, n = save_zones(im, 64, &nmeta);
	for (int k = 0; k < nmeta; k++) {
		if (!im[k].len)
			continue;
		/* truncation at every block (no finish: as if the tail was lost) */
		for (uint64_t len = 0; len < im[k].len; len += 4096) {
			restore_zones(im, n);
			rewrite_zone(im[k].z, im[k].buf, len, false);
			probe_all();
		}
		/* header CRC wrong */
		restore_zones(im, n);
		uint8_t *b = zdev_buf_alloc(im[k].len);
		memcpy(b, im[k].buf, im[k].len);
		b[208] ^= 0xFF;
		rewrite_zone(im[k].z, b, im[k].len, im[k].full);
		probe_all();
		/* first record's CRC wrong */
		memcpy(b, im[k].buf, im[k].len);
		if (im[k].len > 4096 + 24)
			b[4096 + 16] ^= 0x01;
		rewrite_zone(im[k].z, b, im[k].len, im[k].full);
		probe_all();
		/* header zeroed */
		memcpy(b, im[k].buf, im[k].len);
		memset(b, 0, 4096);
		rewrite_zone(im[k].z, b, im[k].len, im[k].full);
		probe_all();
		zdev_buf_free(b);
	}
	/* every meta zone empty: not a zonefuse file system */
	for (int k = 0; k < nmeta; k++)
		rewrite_zone(im[k].z, NULL, 0, false);
	ck_assert_int_eq(try_mount(true), -ENODATA);
	ck_assert_int_lt(fs_check(dev, false, count_report, NULL), 0);
	restore_zones(im, n);
	ck_assert_int_eq(probe_all(), 0);
	for (int i = 0; i < n; i++)
		zdev_buf_free(im[i].buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("records");
	TCase *tc = tcase_create("tail");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, tail_truncate_down);
	tcase_add_test(tc, tail_punch_hole);
	tcase_add_test(tc, tail_namespace);
	tcase_add_test(tc, tail_unlinked_open);
	tcase_add_test(tc, repeated_crashes);
	tcase_add_test(tc, prefetch_after_flush);
	tcase_add_test(tc, snapshot_skips_dangling_names);
	tcase_add_test(tc, fsck_small_zones);
	tcase_add_test(tc, inline_snapshot_on_create);
	tcase_add_test(tc, one_record_per_operation);
	tcase_add_test(tc, create_with_initial_xattrs);
	tcase_add_test(tc, failed_append_changes_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("malformed");
	tcase_add_checked_fixture(tc, ro_setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, truncated_payloads);
	tcase_add_test(tc, bad_names_and_fields);
	tcase_add_test(tc, inconsistent_namespace);
	tcase_add_test(tc, create_tail_forms);
	suite_add_tcase(s, tc);

	tc = tcase_create("corrupt");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, meta_bit_flips);
	tcase_add_test(tc, meta_truncation_and_crc);
	suite_add_tcase(s, tc);

	return tl_run(s);
}
