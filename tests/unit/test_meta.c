/* test_meta: the metadata log grows with the file system.
 *
 * A log that lived in the meta zones alone wedged once the state no longer
 * fitted half of them: every fsync, then every create, unlink and unmount
 * failed with ENOSPC, and the file system never mounted read-write again.
 * These tests fill small devices far beyond their meta zones with names,
 * crash, remount, delete everything, and check that nothing fails.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "mlog/mlog.h"
#include "testlib.h"

#define MiB (1024ull * 1024ull)

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void setup_dev(uint32_t zones, uint64_t zone_size, uint32_t meta_zones)
{
	struct fs_mkfs_opts mo = { .meta_zones = meta_zones };

	tl_dev_create(&td, "meta", zones, zone_size, 8);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(fs_mkfs(dev, &mo), 0);
	ck_assert_int_eq(tl_mount(dev, 8 * MiB, false, &fs), 0);
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void remount(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(tl_mount(dev, 8 * MiB, false, &fs), 0);
}

/* The daemon dies: nothing is unmounted or flushed; the device keeps what
 * reached it (and, with power_loss, what a flush covered). */
static void crash(bool power_loss)
{
	/* After the power loss every device call fails: the unmount only
	 * frees memory, as a killed daemon's exit would. */
	ck_assert_int_eq(zdev_emu_power_loss(dev, power_loss ? 0 : 1), 0);
	long errs = zf_log_error_count();
	fs_unmount(fs);
	fs = NULL;
	(void)errs;
	zdev_close(dev);
	dev = NULL;
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(tl_mount(dev, 8 * MiB, false, &fs), 0);
}

static uint64_t mkdir_n(uint64_t parent, const char *name)
{
	struct stat st;
	struct fs_ctx ctx = { 0 };

	ck_assert_int_eq(fs_mkdir(fs, parent, name, 0755, &ctx, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static int create_n(uint64_t parent, const char *name)
{
	struct stat st;
	struct fs_ctx ctx = { 0 };
	int rc = fs_mknod(fs, parent, name, S_IFREG | 0644, 0, &ctx, &st);

	if (!rc)
		fs_forget(fs, st.st_ino, 1);
	return rc;
}

static bool exists(uint64_t parent, const char *name, uint64_t *ino)
{
	struct stat st;
	int rc = fs_lookup(fs, parent, name, &st);

	if (rc)
		return false;
	fs_forget(fs, st.st_ino, 1);
	if (ino)
		*ino = st.st_ino;
	return true;
}

static struct mlog_stats log_stats(void)
{
	struct mlog_stats ms;

	mlog_get_stats(fs->mlog, &ms);
	return ms;
}

static void fsck_clean(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, tl_fsck_print, NULL), 0);
	ck_assert_int_eq(tl_mount(dev, 8 * MiB, false, &fs), 0);
}

static void root_empty(void)
{
	struct fs_inode *root = fs_inode_get(fs, FS_ROOT_INO);

	ck_assert_ptr_nonnull(root);
	ck_assert_uint_eq(root->dir->live, 0);
	ck_assert_uint_eq(fs->ninodes, 1);
}

/* Names far beyond what the meta zones hold: 3 meta zones of 1 MiB, about
 * 6 MiB of state.  The log borrows data zones, gives them back after its
 * snapshots, and a crash in the middle loses nothing committed. */
START_TEST(names_beyond_meta_zones)
{
	enum { DIRS = 40, PER = 1000 };
	char name[64];
	uint64_t dirs[DIRS];

	setup_dev(64, MiB, 3);
	for (int d = 0; d < DIRS; d++) {
		snprintf(name, sizeof(name), "d%03d", d);
		dirs[d] = mkdir_n(FS_ROOT_INO, name);
	}
	uint32_t max_borrowed = 0;
	for (int i = 0; i < DIRS * PER; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%07d", i);
		ck_assert_int_eq(create_n(dirs[i % DIRS], name), 0);
		if (i % 200 == 199)
			ck_assert_int_eq(fs_commit(fs), 0);
		uint32_t b = log_stats().zones_borrowed;
		max_borrowed = ZF_MAX(max_borrowed, b);
		if (i == DIRS * PER / 2) {
			ck_assert_int_eq(fs_commit(fs), 0);
			crash(true);
			for (int d = 0; d < DIRS; d++) {
				snprintf(name, sizeof(name), "d%03d", d);
				ck_assert(exists(FS_ROOT_INO, name, &dirs[d]));
			}
		}
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	struct mlog_stats ms = log_stats();
	ck_assert_uint_gt(max_borrowed, 0);
	ck_assert_uint_gt(ms.snapshots, 0);
	remount();
	for (int i = 0; i < DIRS * PER; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%07d", i);
		ck_assert_msg(exists(dirs[i % DIRS], name, NULL), "%s lost", name);
	}
	fsck_clean();
	for (int i = 0; i < DIRS * PER; i++) {
		snprintf(name, sizeof(name), "file-with-a-longish-name-%07d", i);
		ck_assert_int_eq(fs_unlink(fs, dirs[i % DIRS], name), 0);
	}
	for (int d = 0; d < DIRS; d++) {
		snprintf(name, sizeof(name), "d%03d", d);
		ck_assert_int_eq(fs_rmdir(fs, FS_ROOT_INO, name), 0);
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	fsck_clean();
	root_empty();
	/* With the state small again the borrowed zones went back. */
	ck_assert_uint_eq(log_stats().zones_borrowed, 0);
}
END_TEST

/* Names until the device is full of metadata: creates end with ENOSPC
 * (never a wedge), then every unlink succeeds, and unmount and remount
 * work. */
START_TEST(fill_with_names_then_delete)
{
	char name[64];
	int n = 0, rc = 0;

	setup_dev(16, MiB, 3);
	for (;;) {
		snprintf(name, sizeof(name), "a-name-to-fill-the-log-%08d", n);
		rc = create_n(FS_ROOT_INO, name);
		if (rc)
			break;
		n++;
		if (n % 500 == 0 && (rc = fs_commit(fs)) != 0)
			break;
		ck_assert_int_lt(n, 1000000);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_gt(n, 20000);	/* 16 MiB hold far more than 3 meta zones */
	/* What was created is durable: fsync still works. */
	ck_assert_int_eq(fs_commit(fs), 0);
	remount();
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "a-name-to-fill-the-log-%08d", i);
		ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
		if (i % 1000 == 999)
			ck_assert_int_eq(fs_commit(fs), 0);
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	fsck_clean();
	root_empty();
	/* And the space is there again. */
	ck_assert_int_eq(create_n(FS_ROOT_INO, "again"), 0);
}
END_TEST


/* Device write errors while the log grows and snapshots: calls may fail,
 * but once the device works again the next commit succeeds (a snapshot
 * repairs a broken log while mounted), nothing acknowledged is lost, and
 * the file system unmounts, checks clean and mounts again. */
START_TEST(write_faults_during_growth_and_snapshots)
{
	enum { ROUNDS = 24, PER = 700 };
	char name[64];
	static bool made[ROUNDS * PER];
	int failed_calls = 0;

	setup_dev(48, MiB, 3);
	memset(made, 0, sizeof(made));
	for (int r = 0; r < ROUNDS; r++) {
		/* a fault somewhere in the next few dozen writes */
		ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE,
						       (uint32_t)(r * 7 % 40), 1 + r % 3,
						       -EIO), 0);
		for (int i = r * PER; i < (r + 1) * PER; i++) {
			snprintf(name, sizeof(name), "faulty-growth-%07d", i);
			int rc = create_n(FS_ROOT_INO, name);
			ck_assert_msg(rc == 0 || rc == -EIO || rc == -ENOSPC,
				      "create: %d", rc);
			made[i] = rc == 0;
			failed_calls += rc != 0;
			if (i % 100 == 99 && fs_commit(fs))
				failed_calls++;
		}
		ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 0, 0, 0), 0);
		/* the device works again: the log is usable at once */
		ck_assert_int_eq(fs_commit(fs), 0);
		snprintf(name, sizeof(name), "after-round-%d", r);
		ck_assert_int_eq(create_n(FS_ROOT_INO, name), 0);
		ck_assert_int_eq(fs_commit(fs), 0);
	}
	ck_assert_int_gt(failed_calls, 0);
	ck_assert_uint_gt(log_stats().snapshots, 0);
	crash(true);	/* everything acknowledged was committed after its create */
	for (int i = 0; i < ROUNDS * PER; i++) {
		snprintf(name, sizeof(name), "faulty-growth-%07d", i);
		if (made[i])
			ck_assert_msg(exists(FS_ROOT_INO, name, NULL), "%s lost", name);
	}
	fsck_clean();
}
END_TEST


/* The log's zone no longer matches its layout (a write landed that the log
 * did not make): the log is broken.  The commit that finds it fails; the
 * next ones succeed, because a snapshot writes the state into a new epoch
 * while mounted.  Never EIO for good. */
START_TEST(broken_log_repaired_while_mounted)
{
	setup_dev(16, MiB, 4);
	ck_assert_int_eq(create_n(FS_ROOT_INO, "before"), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	tl_write_behind_log(dev, fs->sb.meta_first, fs->sb.meta_count);
	ck_assert_int_eq(create_n(FS_ROOT_INO, "during"), 0);
	ck_assert_int_eq(fs_commit(fs), -EIO);
	/* the device is fine: the file system is usable again */
	ck_assert_int_eq(fs_commit(fs), 0);
	ck_assert_int_eq(create_n(FS_ROOT_INO, "after"), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	crash(true);
	ck_assert(exists(FS_ROOT_INO, "before", NULL));
	ck_assert(exists(FS_ROOT_INO, "during", NULL));
	ck_assert(exists(FS_ROOT_INO, "after", NULL));
	fsck_clean();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("meta");
	TCase *tc = tcase_create("grow");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, names_beyond_meta_zones);
	tcase_add_test(tc, fill_with_names_then_delete);
	tcase_add_test(tc, write_faults_during_growth_and_snapshots);
	tcase_add_test(tc, broken_log_repaired_while_mounted);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tl_run(suite());
}
