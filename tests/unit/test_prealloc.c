/* fallocate reserves: the space it promises is held (fs_prealloc.c).
 *   - fallocating more than is free fails with ENOSPC and holds nothing;
 *   - what it holds shows in st_blocks and df, and other writers cannot
 *     take it: a write into the range succeeds on a device that is
 *     otherwise full;
 *   - writes, truncates, punches and unlink give it back;
 *   - it survives an unmount, a crash (the log replayed) and a snapshot.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void setup(void)
{
	tl_dev_make(&td, "pa", 24, 4u << 20, 8);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(tl_mount(dev, 16ull << 20, false, &fs), 0);
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void remount(bool crash)
{
	if (crash) {
		tl_power_cycle(&td, &dev, &fs, 16ull << 20);
		return;
	}
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	tl_fsck_clean(dev);
	ck_assert_int_eq(tl_mount(dev, 16ull << 20, false, &fs), 0);
}

static uint64_t avail(void)
{
	struct statvfs sv;
	ck_assert_int_eq(fs_statfs(fs, &sv), 0);
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

static uint64_t blocks_of(uint64_t ino)
{
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

static uint64_t held(void)
{
	return fs->pa_bytes;
}

/* Fill the device with another file until ENOSPC; its size. */
static uint64_t fill_rest(uint64_t ino)
{
	uint8_t *buf = malloc(1 << 20);
	uint64_t off = 0;
	memset(buf, 0x33, 1 << 20);
	for (;;) {
		ssize_t w = fs_write(fs, ino, off, buf, 1 << 20, 0);
		if (w < 0) {
			ck_assert_int_eq(w, -ENOSPC);
			break;
		}
		off += (uint64_t)w;
		int r = fs_fsync(fs, ino, false);
		if (r) {
			ck_assert_int_eq(r, -ENOSPC);
			break;
		}
	}
	free(buf);
	return off;
}

START_TEST(fallocate_holds_space)
{
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	uint64_t g = tl_mk(fs, FS_ROOT_INO, "g", S_IFREG | 0644);
	uint64_t free0 = avail();

	/* more than is free: refused, nothing held */
	ck_assert_int_eq(fs_fallocate(fs, f, 0, 0, 2 * free0), -ENOSPC);
	ck_assert_uint_eq(held(), 0);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_size, 0);

	/* 8 MiB kept beyond the size, 4 MiB within it */
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, 0, 8 << 20), 0);
	ck_assert_int_eq(fs_fallocate(fs, g, 0, 0, 4 << 20), 0);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(fs_getattr(fs, g, &st), 0);
	ck_assert_int_eq(st.st_size, 4 << 20);
	ck_assert_uint_eq(blocks_of(f), 8 << 20);
	ck_assert_uint_eq(blocks_of(g), 4 << 20);
	ck_assert_uint_eq(held(), 12 << 20);
	ck_assert_uint_eq(avail() + (12 << 20), free0);
	/* the same range again holds nothing more */
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, 4096, 1 << 20), 0);
	ck_assert_uint_eq(held(), 12 << 20);

	remount(false);
	ck_assert_uint_eq(held(), 12 << 20);
	ck_assert_uint_eq(blocks_of(f), 8 << 20);
	ck_assert_int_eq(fs_sync(fs), 0);
	remount(true);
	ck_assert_uint_eq(held(), 12 << 20);

	/* Another file fills everything else: f's range can still be written. */
	uint64_t h = tl_mk(fs, FS_ROOT_INO, "h", S_IFREG | 0644);
	fill_rest(h);
	uint8_t *buf = malloc(1 << 20);
	memset(buf, 0x44, 1 << 20);
	for (int i = 0; i < 8; i++) {
		ssize_t w = fs_write(fs, f, (uint64_t)i << 20, buf, 1 << 20, 0);
		ck_assert_msg(w == 1 << 20, "write %d into the range: %zd", i, w);
	}
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	ck_assert_uint_eq(held(), 4 << 20);	/* g's only */
	ck_assert_uint_eq(blocks_of(f), 8 << 20);
	/* past the range, f is as full as everyone */
	ck_assert_int_eq(fs_write(fs, f, 8 << 20, buf, 1 << 20, 0), -ENOSPC);
	free(buf);

	/* truncate, punch and unlink give it back */
	ck_assert_int_eq(fs_fallocate(fs, g, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      1 << 20, 1 << 20), 0);
	ck_assert_uint_eq(held(), 3 << 20);
	struct stat attr = { .st_size = 1 << 20 };
	ck_assert_int_eq(fs_setattr(fs, g, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_uint_eq(held(), 1 << 20);
	ck_assert_int_eq(fs_sync(fs), 0);
	remount(true);
	ck_assert_uint_eq(held(), 1 << 20);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "g"), 0);
	ck_assert_uint_eq(held(), 0);
	remount(false);
	ck_assert_uint_eq(held(), 0);
}
END_TEST

/* A truncate to the size the file has gives back what was fallocated past
 * its end, as on ext4: RocksDB trims each table's preallocated tail with an
 * ftruncate to its size (and punches only where st_blocks shows it).  The
 * modification time is stamped as by any truncate (Linux's ftruncate
 * stamps it whether or not the size changes); it never goes back. */
START_TEST(same_size_truncate_gives_tail_back)
{
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, 0, 3 << 20), 0);
	ck_assert_uint_eq(held(), 3 << 20);
	uint8_t *buf = malloc(1 << 20);
	memset(buf, 0x55, 1 << 20);
	ck_assert_int_eq(fs_write(fs, f, 0, buf, 1 << 20, 0), 1 << 20);
	free(buf);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	ck_assert_uint_eq(held(), 2 << 20);
	struct stat before, st, attr = { .st_size = 1 << 20 };
	ck_assert_int_eq(fs_getattr(fs, f, &before), 0);
	ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_uint_eq(held(), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	ck_assert_uint_eq(blocks_of(f), 1 << 20);
	ck_assert(st.st_mtim.tv_sec > before.st_mtim.tv_sec ||
		  (st.st_mtim.tv_sec == before.st_mtim.tv_sec &&
		   st.st_mtim.tv_nsec >= before.st_mtim.tv_nsec));
	/* nothing past the end now: the same truncate again is a no-op */
	ck_assert_int_eq(fs_setattr(fs, f, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	remount(true);
	ck_assert_uint_eq(held(), 0);
	ck_assert_int_eq(fs_getattr(fs, f, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
}
END_TEST

/* The ranges' own invariants under a mix of holds and releases. */
START_TEST(ranges_merge_and_split)
{
	uint64_t f = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	uint8_t blk[4096];
	memset(blk, 1, sizeof(blk));
	ck_assert_int_eq(fs_write(fs, f, 64 << 10, blk, sizeof(blk), 0), 4096);
	ck_assert_int_eq(fs_fsync(fs, f, false), 0);	/* a mapped block in the middle */
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, 0, 128 << 10), 0);
	ck_assert_uint_eq(held(), (128 << 10) - 4096);
	struct fs_inode *in = fs_inode_get(fs, f);
	ck_assert_uint_eq(in->npa, 2);
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      16 << 10, 8 << 10), 0);
	ck_assert_uint_eq(in->npa, 3);
	ck_assert_uint_eq(held(), (120 << 10) - 4096);
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, 0, 128 << 10), 0);
	ck_assert_uint_eq(in->npa, 2);
	ck_assert_uint_eq(held(), (128 << 10) - 4096);
	/* an unaligned fallocate holds whole blocks */
	ck_assert_int_eq(fs_fallocate(fs, f, FALLOC_FL_KEEP_SIZE, (256 << 10) + 100, 10), 0);
	ck_assert_uint_eq(held(), (132 << 10) - 4096);
	ck_assert_int_eq(fs_fallocate(fs, f, 0, 0, 1ull << 51), -EFBIG);
	remount(false);
	in = fs_inode_get(fs, f);
	ck_assert_uint_eq(in->npa, 3);
	ck_assert_uint_eq(held(), (132 << 10) - 4096);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("prealloc");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, fallocate_holds_space);
	tcase_add_test(tc, ranges_merge_and_split);
	tcase_add_test(tc, same_size_truncate_gives_tail_back);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
