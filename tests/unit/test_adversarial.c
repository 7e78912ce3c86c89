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

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "fs/mlog.h"
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void quiet_report(void *arg, const char *fmt, ...)
{
	va_list ap;
	(*(int *)arg)++;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

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
	int problems = 0;
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, quiet_report, &problems), 0);
	ck_assert_int_eq(problems, 0);
	ck_assert_int_eq(tl_mount(dev, 16ull << 20, false, &fs), 0);
}

/* kill -9 and power loss: only what was committed survives. */
static void crash_remount(void)
{
	int problems = 0;
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);		/* fails: the device is dead; frees */
	fs = NULL;
	zdev_close(dev);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(fs_check(dev, false, quiet_report, &problems), 0);
	ck_assert_int_eq(problems, 0);
	ck_assert_int_eq(tl_mount(dev, 16ull << 20, false, &fs), 0);
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

int main(void)
{
	Suite *s = suite_create("adversarial");
	TCase *tc = tcase_create("shapes");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, deep_tree);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
