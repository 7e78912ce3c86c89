/* test_gc — unit tests of the garbage collector through the fs core on the
 * emulator: live data moved out of partly dead zones, which are reset.
 */
#include <check.h>
#include <errno.h>
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
#include "zoned/zdev.h"

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

/* Three files written side by side share zones; g1.bin dies, so the
 * zones are partly dead.  want[i]: file i's bytes. */
enum { GNF = 3, GSZ = 3 << 20, GPIECE = 64 << 10 };
struct gc_files {
	struct zdev *dev;
	struct fs *fs;
	uint64_t ino[GNF];
	uint8_t *want[GNF];
};

static void gc_files_make(struct gc_files *g, uint32_t seed)
{
	fs_dev_make();
	g->fs = fs_up(&g->dev, NULL, false);
	for (int i = 0; i < GNF; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d.bin", i);
		g->ino[i] = mk(g->fs, FS_ROOT_INO, name, 1);
		ck_assert_int_eq(fs_open(g->fs, g->ino[i], O_RDWR), 0);
		g->want[i] = malloc(GSZ);
		fill(g->want[i], GSZ, (uint32_t)i + seed);
	}
	for (size_t off = 0; off < GSZ; off += GPIECE)
		for (int i = 0; i < GNF; i++) {
			ck_assert_int_eq(fs_write(g->fs, g->ino[i], off, g->want[i] + off, GPIECE,
						  false), GPIECE);
			ck_assert_int_eq(fs_flush(g->fs, g->ino[i]), 0);	/* interleave in zones */
		}
	for (int i = 0; i < GNF; i++) {
		ck_assert_int_eq(fs_fsync(g->fs, g->ino[i], false), 0);
		ck_assert_int_eq(fs_release(g->fs, g->ino[i]), 0);
	}
	ck_assert_int_eq(fs_unlink(g->fs, FS_ROOT_INO, "g1.bin"), 0);
	fs_forget(g->fs, g->ino[1], 1);
	ck_assert_int_eq(fs_commit(g->fs), 0);
}

/* The live files read back whole; why: for the message. */
static void gc_files_check(struct gc_files *g, const char *why)
{
	uint8_t *got = malloc(GSZ);
	for (int i = 0; i < GNF; i += 2) {
		ck_assert_int_eq(fs_read(g->fs, g->ino[i], 0, GSZ, got), GSZ);
		ck_assert_msg(memcmp(got, g->want[i], GSZ) == 0, "g%d.bin differs %s", i, why);
	}
	free(got);
}

/* fsck is clean, the live files read back after a remount; all freed. */
static void gc_files_finish(struct gc_files *g)
{
	struct zdev *d;

	fs_down(g->fs, g->dev);
	tl_dev_open(&td, &d);
	ck_assert_int_eq(fs_check(d, false, tl_fsck_print, NULL), 0);
	zdev_close(d);
	g->fs = fs_up(&g->dev, NULL, false);
	gc_files_check(g, "after a remount");
	fs_down(g->fs, g->dev);
	for (int i = 0; i < GNF; i++)
		free(g->want[i]);
	tl_dev_remove(&td);
}

/* The collector moves the live data out of a partly dead zone, which is
 * reset; the data reads back, also after a remount, and fsck is clean. */
START_TEST(fs_gc_moves_live_data)
{
	struct gc_files g;
	struct fs_stats st0, st1;
	int r, runs = 0;

	gc_files_make(&g, 7);
	fs_get_stats(g.fs, &st0);
	while ((r = gc_run_once(g.fs)) > 0 && runs < 10)
		runs++;
	ck_assert_int_ge(r, 0);
	ck_assert_int_gt(runs, 0);
	fs_get_stats(g.fs, &st1);
	ck_assert_uint_gt(st1.gc_bytes_written, 0);
	ck_assert_uint_gt(st1.zone_resets, st0.zone_resets);
	ck_assert_uint_gt(st1.gc_runs, 0);
	ck_assert_uint_gt(st1.gc_zones_freed, 0);	/* the allocator counts them */
	ck_assert_uint_le(st1.gc_zones_freed, st1.gc_runs);
	ck_assert_uint_gt(st1.write_amp_milli, 1000);
	ck_assert_uint_eq(st1.class_gc_bytes_written[LIFETIME_MEDIUM], st1.gc_bytes_written);
	gc_files_check(&g, "after the collection");
	gc_files_finish(&g);
}
END_TEST

/* The collector meets a failing device: reads of its victim, writes of
 * the moved data, or zone resets.  Whatever it returns, no file loses a
 * byte (the victim is not reset while its data is still needed); with the
 * device back, the collector finishes the job, and the data survives a
 * remount and fsck. */
static void gc_fault(enum zdev_fault_kind kind)
{
	struct gc_files g;
	int r, runs = 0, errors = 0;

	gc_files_make(&g, 17);
	/* two operations of the kind fail, after 0-5 good ones */
	for (uint32_t skip = 0; skip < 6; skip++) {
		ck_assert_int_eq(zdev_emu_inject_fault(g.dev, kind, skip, 2, -EIO), 0);
		r = gc_run_once(g.fs);
		errors += r < 0;
		ck_assert_int_eq(zdev_emu_inject_fault(g.dev, kind, 0, 0, 0), 0);
		gc_files_check(&g, "after a collection that met a fault");
	}
	ck_assert_int_gt(errors, 0);
	while ((r = gc_run_once(g.fs)) > 0 && runs < 20)
		runs++;
	ck_assert_int_eq(r, 0);
	gc_files_check(&g, "after the collection");
	gc_files_finish(&g);
}

START_TEST(fs_gc_read_fault)
{
	gc_fault(ZDEV_FAULT_READ);
}
END_TEST

START_TEST(fs_gc_write_fault)
{
	gc_fault(ZDEV_FAULT_WRITE);
}
END_TEST

START_TEST(fs_gc_reset_fault)
{
	gc_fault(ZDEV_FAULT_RESET);
}
END_TEST

static Suite *gc_suite(void)
{
	Suite *s = suite_create("gc");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, fs_gc_moves_live_data);
	tcase_add_test(tc, fs_gc_read_fault);
	tcase_add_test(tc, fs_gc_write_fault);
	tcase_add_test(tc, fs_gc_reset_fault);
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
