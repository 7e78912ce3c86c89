/* test_gc — unit tests of the garbage collector through the fs core on the
 * emulator: live data moved out of partly dead zones, which are reset.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "lsm/lifetime.h"
#include "testlib.h"

static struct tl_dev td;

/* A formatted emulated device (32 x 4 MiB zones). */
static void fs_dev_make(void)
{
	tl_dev_make(&td, "gc", 32, 4ull << 20, 8);
}

static struct fs *fs_up(struct zdev **dev, const char *hints, bool off)
{
	return tl_mount_placement(&td, dev, hints, off);
}

static void fs_down(struct fs *fs, struct zdev *dev)
{
	tl_unmount_close(fs, dev);
}

static uint64_t mk(struct fs *fs, uint64_t parent, const char *name, uint32_t tid)
{
	struct fs_ctx ctx = { 0, 0, tid };
	struct stat st;

	ck_assert_int_eq(fs_mknod(fs, parent, name, S_IFREG | 0644, 0, &ctx, &st), 0);
	return st.st_ino;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (uint8_t)(seed >> 16);
	}
}

/* Three files written side by side share zones; one dies; the collector
 * moves the others' data out of a partly dead zone, which is reset; the
 * data reads back, also after a remount, and fsck is clean. */
START_TEST(fs_gc_moves_live_data)
{
	enum { GNF = 3, GSZ = 3 << 20, GPIECE = 64 << 10 };
	struct zdev *dev;
	struct fs *fs;
	struct fs_stats st0, st1;
	uint64_t ino[GNF];
	uint8_t *want[GNF], *got = malloc(GSZ);
	int r, runs = 0;

	fs_dev_make();
	fs = fs_up(&dev, NULL, false);
	for (int i = 0; i < GNF; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d.bin", i);
		ino[i] = mk(fs, FS_ROOT_INO, name, 1);
		ck_assert_int_eq(fs_open(fs, ino[i], O_RDWR), 0);
		want[i] = malloc(GSZ);
		fill(want[i], GSZ, (uint32_t)i + 7);
	}
	for (size_t off = 0; off < GSZ; off += GPIECE)
		for (int i = 0; i < GNF; i++) {
			ck_assert_int_eq(fs_write(fs, ino[i], off, want[i] + off, GPIECE, false), GPIECE);
			ck_assert_int_eq(fs_flush(fs, ino[i]), 0);	/* interleave in zones */
		}
	for (int i = 0; i < GNF; i++) {
		ck_assert_int_eq(fs_fsync(fs, ino[i], false), 0);
		ck_assert_int_eq(fs_release(fs, ino[i]), 0);
	}
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "g1.bin"), 0);
	fs_forget(fs, ino[1], 1);
	ck_assert_int_eq(fs_commit(fs), 0);
	fs_get_stats(fs, &st0);
	while ((r = fs_gc_run_once(fs)) > 0 && runs < 10)
		runs++;
	ck_assert_int_ge(r, 0);
	ck_assert_int_gt(runs, 0);
	fs_get_stats(fs, &st1);
	ck_assert_uint_gt(st1.gc_bytes_written, 0);
	ck_assert_uint_gt(st1.zone_resets, st0.zone_resets);
	ck_assert_uint_gt(st1.gc_runs, 0);
	ck_assert_uint_gt(st1.write_amp_milli, 1000);
	ck_assert_uint_eq(st1.class_gc_bytes_written[LIFETIME_MEDIUM], st1.gc_bytes_written);
	for (int i = 0; i < GNF; i += 2) {
		ck_assert_int_eq(fs_read(fs, ino[i], 0, GSZ, got), GSZ);
		ck_assert(memcmp(got, want[i], GSZ) == 0);
	}
	fs_down(fs, dev);
	{
		struct zdev *d;

		tl_dev_open(&td, &d);
		ck_assert_int_eq(fs_check(d, false, tl_fsck_print, NULL), 0);
		zdev_close(d);
	}
	fs = fs_up(&dev, NULL, false);
	for (int i = 0; i < GNF; i += 2) {
		ck_assert_int_eq(fs_read(fs, ino[i], 0, GSZ, got), GSZ);
		ck_assert(memcmp(got, want[i], GSZ) == 0);
	}
	fs_down(fs, dev);
	for (int i = 0; i < GNF; i++)
		free(want[i]);
	free(got);
	tl_dev_remove(&td);
}
END_TEST

static Suite *gc_suite(void)
{
	Suite *s = suite_create("gc");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, fs_gc_moves_live_data);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(gc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
