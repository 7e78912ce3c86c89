/* Unit tests for the fs core on the emulated device (no FUSE, no root):
 * data round trips, namespace operations, truncate, persistence across
 * remount, power loss after fsync, ENOSPC and recovery, many files, fsck. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"	/* struct fs_inode: the lock a file range holds, a directory's slots */
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void make_dev(uint32_t zones, const char *zone_size, uint32_t max_active)
{
	uint64_t zs;

	ck_assert_int_eq(zf_parse_size(zone_size, &zs), 0);
	tl_dev_create(&td, "fs", zones, zs, max_active);
}

static void open_dev(void)
{
	tl_dev_open(&td, &dev);
}

static void do_mount(void)
{
	ck_assert_int_eq(tl_mount(dev, 64ull << 20, false, &fs), 0);
}

static void setup(void)
{
	make_dev(32, "4M", 8);
	open_dev();
	ck_assert_int_eq(fs_mkfs(dev, NULL), 0);
	do_mount();
}

static void remount(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	zdev_close(dev);
	open_dev();
	do_mount();
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

/* Unmount, run fsck, expect it clean, mount again. */
static void check_clean(void)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, tl_fsck_print, NULL), 0);
	do_mount();
}

static uint64_t create(uint64_t parent, const char *name)
{
	struct stat st;
	ck_assert_int_eq(fs_mknod(fs, parent, name, S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static uint64_t lookup(uint64_t parent, const char *name)
{
	struct stat st;
	int ret = fs_lookup(fs, parent, name, &st);
	if (ret)
		return 0;
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static void fill(uint8_t *buf, size_t len, uint64_t off, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(((off + i) * 2654435761u + seed) >> 13);
}

static void check_content(uint64_t ino, uint64_t size, uint32_t seed)
{
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, size);
	uint8_t *got = malloc(size + 1), *want = malloc(size + 1);
	ck_assert_int_eq(fs_read(fs, ino, 0, size + 100, got), (ssize_t)size);
	fill(want, size, 0, seed);
	ck_assert_int_eq(memcmp(got, want, size), 0);
	free(got);
	free(want);
}

START_TEST(write_read_remount)
{
	uint64_t ino = create(FS_ROOT_INO, "data");
	const size_t size = 3 * 1024 * 1024 + 777;
	uint8_t *buf = malloc(size);
	fill(buf, size, 0, 7);
	/* Written out of order, in odd pieces, with re-sent ranges. */
	size_t pieces[][2] = { { 1 << 20, 1 << 20 }, { 0, 1 << 20 }, { 3 << 20, size - (3 << 20) },
			       { 2 << 20, 1 << 20 }, { 4096 + 13, 9000 }, { 100, 5 } };
	for (size_t i = 0; i < ZF_ARRAY_SIZE(pieces); i++)
		ck_assert_int_eq(fs_write(fs, ino, pieces[i][0], buf + pieces[i][0],
					  pieces[i][1], false), (ssize_t)pieces[i][1]);
	check_content(ino, size, 7);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	check_content(ino, size, 7);
	remount();
	check_content(ino, size, 7);
	check_clean();
	free(buf);
}
END_TEST

START_TEST(small_appends_and_overwrites)
{
	uint64_t ino = create(FS_ROOT_INO, "wal.log");
	uint8_t buf[5000];
	uint64_t size = 0;
	for (int i = 0; i < 200; i++) {
		size_t n = 1 + (size_t)(i * 37) % sizeof(buf);
		fill(buf, n, size, 3);
		ck_assert_int_eq(fs_write(fs, ino, size, buf, n, false), (ssize_t)n);
		size += n;
		if (i % 17 == 0)
			ck_assert_int_eq(fs_fsync(fs, ino, true), 0);
	}
	check_content(ino, size, 3);
	remount();
	check_content(ino, size, 3);
	char lt[64];
	int n = fs_getxattr(fs, ino, "user.zonefuse.lifetime", lt, sizeof(lt));
	ck_assert_int_gt(n, 0);
	lt[n] = 0;
	ck_assert_str_eq(lt, "short preset\n");
}
END_TEST

START_TEST(truncate_and_holes)
{
	uint64_t ino = create(FS_ROOT_INO, "t");
	uint8_t buf[10000], out[20000];
	struct stat st, attr = { 0 };
	memset(buf, 0xAB, sizeof(buf));
	ck_assert_int_eq(fs_write(fs, ino, 0, buf, sizeof(buf), false), sizeof(buf));
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	attr.st_size = 5000;	/* down, unaligned */
	ck_assert_int_eq(fs_setattr(fs, ino, &attr, FS_SET_SIZE, &st), 0);
	attr.st_size = 20000;	/* up: the cut bytes must come back as zeros */
	ck_assert_int_eq(fs_setattr(fs, ino, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_read(fs, ino, 0, sizeof(out), out), 20000);
	for (int i = 0; i < 20000; i++)
		ck_assert_uint_eq(out[i], i < 5000 ? 0xAB : 0);
	/* A write far beyond the end leaves a hole of zeros. */
	ck_assert_int_eq(fs_write(fs, ino, 10 << 20, buf, 10, false), 10);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	remount();
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_int_eq(st.st_size, (10 << 20) + 10);
	ck_assert_int_eq(fs_read(fs, ino, 0, sizeof(out), out), sizeof(out));
	for (int i = 0; i < 20000; i++)
		ck_assert_uint_eq(out[i], i < 5000 ? 0xAB : 0);
	ck_assert_int_eq(fs_read(fs, ino, 5 << 20, 100, out), 100);
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(out[i], 0);
	/* Punch a hole in the middle of written data. */
	ck_assert_int_eq(fs_fallocate(fs, ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 3000), 0);
	ck_assert_int_eq(fs_read(fs, ino, 0, 5000, out), 5000);
	for (int i = 0; i < 5000; i++)
		ck_assert_uint_eq(out[i], (i >= 1000 && i < 4000) ? 0 : 0xAB);
	check_clean();
}
END_TEST

START_TEST(namespace_ops)
{
	struct stat st;
	char longname[300];
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "d", 0755, NULL, &st), 0);
	uint64_t d = st.st_ino;
	uint64_t a = create(d, "a");
	uint64_t b = create(d, "b");
	ck_assert_int_eq(fs_mknod(fs, d, "a", S_IFREG | 0644, 0, NULL, &st), -EEXIST);
	ck_assert_int_eq(fs_write(fs, a, 0, "AAAA", 4, false), 4);
	ck_assert_int_eq(fs_write(fs, b, 0, "BB", 2, false), 2);
	/* rename over an existing file is atomic replacement */
	ck_assert_int_eq(fs_rename(fs, d, "a", d, "b", 0), 0);
	ck_assert_uint_eq(lookup(d, "b"), a);
	ck_assert_uint_eq(lookup(d, "a"), 0);
	ck_assert_int_eq(fs_rename(fs, d, "b", FS_ROOT_INO, "d", RENAME_NOREPLACE), -EEXIST);
	ck_assert_int_eq(fs_link(fs, a, FS_ROOT_INO, "hard", &st), 0);
	fs_forget(fs, a, 1);
	ck_assert_uint_eq(st.st_nlink, 2);
	ck_assert_int_eq(fs_symlink(fs, FS_ROOT_INO, "sym", "d/b", NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	memset(longname, 'x', 255);
	longname[255] = 0;
	create(FS_ROOT_INO, longname);
	longname[255] = 'y';
	longname[256] = 0;
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, longname, S_IFREG | 0644, 0, NULL, &st), -ENAMETOOLONG);
	ck_assert_int_eq(fs_rmdir(fs, FS_ROOT_INO, "d"), -ENOTEMPTY);
	ck_assert_int_eq(fs_mkdir(fs, d, "sub", 0755, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "d", d, "sub2", 0), -EINVAL);
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "hard", d, "sub", RENAME_EXCHANGE), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	remount();
	ck_assert_uint_eq(lookup(d, "sub"), a);
	ck_assert_int_ne(lookup(FS_ROOT_INO, "hard"), 0);
	char buf[16];
	ck_assert_int_eq(fs_read(fs, a, 0, sizeof(buf), buf), 4);
	ck_assert_int_eq(memcmp(buf, "AAAA", 4), 0);
	ck_assert_int_eq(fs_readlink(fs, lookup(FS_ROOT_INO, "sym"), buf, sizeof(buf)), 3);
	ck_assert_int_eq(fs_unlink(fs, d, "b"), 0);
	ck_assert_int_eq(fs_unlink(fs, d, "sub"), 0);
	ck_assert_int_eq(fs_rmdir(fs, FS_ROOT_INO, "hard"), 0);
	ck_assert_int_eq(fs_rmdir(fs, FS_ROOT_INO, "d"), 0);
	ck_assert_int_eq(fs_getattr(fs, FS_ROOT_INO, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 2);
	check_clean();
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "d"), 0);
}
END_TEST

START_TEST(power_loss_keeps_fsynced)
{
	uint64_t a = create(FS_ROOT_INO, "synced");
	uint64_t b = create(FS_ROOT_INO, "unsynced");
	const size_t size = 1500 * 1000;
	uint8_t *buf = malloc(size);
	fill(buf, size, 0, 11);
	ck_assert_int_eq(fs_write(fs, a, 0, buf, size, false), (ssize_t)size);
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	ck_assert_int_eq(fs_write(fs, b, 0, buf, size, false), (ssize_t)size);
	ck_assert_int_eq(fs_rename(fs, FS_ROOT_INO, "unsynced", FS_ROOT_INO, "renamed", 0), 0);
	/* The daemon dies: no unmount, and the device loses its cache. */
	ck_assert_int_eq(zdev_emu_power_loss(dev, _i), 0);
	/* Unmounting a dead device fails (-EIO) but must free everything. */
	ck_assert_int_lt(fs_unmount(fs), 0);
	fs = NULL;
	zdev_close(dev);
	open_dev();
	do_mount();
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "synced"), a);
	check_content(a, size, 11);
	check_clean();
	free(buf);
}
END_TEST

START_TEST(enospc_then_recover)
{
	uint64_t ino = create(FS_ROOT_INO, "big");
	const size_t chunk = 1 << 20;
	uint8_t *buf = malloc(chunk);
	uint64_t off = 0;
	ssize_t r = 0;
	memset(buf, 0x5A, chunk);
	for (int i = 0; i < 1000; i++) {
		r = fs_write(fs, ino, off, buf, chunk, false);
		if (r < 0)
			break;
		off += (uint64_t)r;
	}
	ck_assert_int_eq(r, -ENOSPC);
	ck_assert_int_gt(off, 64 << 20);	/* most of the 26 data zones x 4 MiB */
	fs_fsync(fs, ino, false);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "big"), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	uint64_t ino2 = create(FS_ROOT_INO, "again");
	for (uint64_t o = 0; o < (32u << 20); o += chunk)
		ck_assert_int_eq(fs_write(fs, ino2, o, buf, chunk, false), (ssize_t)chunk);
	ck_assert_int_eq(fs_fsync(fs, ino2, false), 0);
	check_clean();
	free(buf);
}
END_TEST

START_TEST(many_files_roll_the_log)
{
	char name[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "f%05d", i);
		uint64_t ino = create(FS_ROOT_INO, name);
		ck_assert_int_eq(fs_write(fs, ino, 0, name, strlen(name), false), (ssize_t)strlen(name));
		if (i % 3 == 0)
			ck_assert_int_eq(fs_release(fs, ino), 0);	/* writes it out */
		if (i % 100 == 0)
			ck_assert_int_eq(fs_sync(fs), 0);
	}
	for (int i = 0; i < 3000; i += 2) {
		snprintf(name, sizeof(name), "f%05d", i);
		ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, name), 0);
	}
	remount();
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "f%05d", i);
		uint64_t ino = lookup(FS_ROOT_INO, name);
		if (i % 2 == 0) {
			ck_assert_uint_eq(ino, 0);
			continue;
		}
		ck_assert_uint_ne(ino, 0);
		char got[32] = { 0 };
		ck_assert_int_eq(fs_read(fs, ino, 0, sizeof(got), got), (ssize_t)strlen(name));
		ck_assert_str_eq(got, name);
	}
	check_clean();
}
END_TEST

START_TEST(mkfs_refuses_existing)
{
	struct fs_mkfs_opts o = { 0 };
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_mkfs(dev, &o), -EEXIST);
	o.force = true;
	ck_assert_int_eq(fs_mkfs(dev, &o), 0);
	do_mount();
}
END_TEST

/* ---- read-ahead windows (fs_prefetch.c) ---- */

static void pf_mount(uint64_t window)
{
	tl_remount_prefetch(dev, 64ull << 20, window, &fs);
}

/* Remount with 64 KiB windows and write a file of `size` bytes (seed) to
 * the device; *data gets its bytes (malloc'ed). */
static uint64_t pf_file(const char *name, uint64_t size, uint32_t seed, uint8_t **data)
{
	pf_mount(64 << 10);
	uint64_t ino = create(FS_ROOT_INO, name);
	*data = malloc(size);
	fill(*data, size, 0, seed);
	ck_assert_int_eq(fs_write(fs, ino, 0, *data, size, false), (ssize_t)size);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	return ino;
}

static uint64_t pf_bytes(void)
{
	return tl_stats(fs).prefetch_bytes;
}

/* Windows are zeroed only where no extent covers them: holes inside a
 * window, and the part of the file after its last extent, still read as
 * zeros, also from memory that held another window's bytes before. */
START_TEST(prefetch_windows_with_holes)
{
	const uint64_t K = 1024, size = 300 * K;
	pf_mount(64 * K);
	uint64_t ino = create(FS_ROOT_INO, "holes");
	uint8_t *want = calloc(1, size), *got = malloc(size);
	fill(want, 96 * K, 0, 7);			/* data [0, 96K) */
	fill(want + 160 * K, 40 * K, 160 * K, 7);	/* hole, data [160K, 200K) */
	ck_assert_int_eq(fs_write(fs, ino, 0, want, 96 * K, false), 96 * K);
	ck_assert_int_eq(fs_write(fs, ino, 160 * K, want + 160 * K, 40 * K, false), 40 * K);
	struct stat st, attr = { .st_size = (off_t)size };	/* hole up to EOF */
	ck_assert_int_eq(fs_setattr(fs, ino, &attr, FS_SET_SIZE, &st), 0);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	uint64_t hits0 = 0;
	for (int pass = 0; pass < 3; pass++) {
		memset(got, 0xEE, size);
		for (uint64_t pos = 0; pos < size; pos += 16 * K) {
			uint64_t n = ZF_MIN(16 * K, size - pos);
			ck_assert_int_eq(fs_read(fs, ino, pos, 16 * K, got + pos), n);
		}
		ck_assert_int_eq(memcmp(got, want, size), 0);
		struct fs_stats fst;
		fs_get_stats(fs, &fst);
		ck_assert_uint_gt(fst.prefetch_hits, hits0);	/* served by windows */
		hits0 = fst.prefetch_hits;
	}
	free(want);
	free(got);
}
END_TEST

/* Device reads failing under a sequential reader, for a while (3 reads:
 * a failed fill is dropped and the reader reads again itself) or for good
 * (every read from the skip-th on): a read returns the file's bytes or
 * -EIO, never bytes of a failed fill; once the device reads again every
 * read returns the right bytes, also where a fill had failed.  Failed
 * fills are counted (prefetch_fill_errors). */
START_TEST(prefetch_read_fault)
{
	const uint64_t K = 1024, size = 2048 * K;
	uint8_t *a, *got = malloc(16 * K);
	uint64_t ino = pf_file("pf-fault", size, 5, &a);
	uint64_t fill_errors = tl_stats(fs).prefetch_fill_errors;
	for (uint32_t t = 0; t < 16; t++) {
		uint32_t skip = t / 2, count = t % 2 ? 3 : 100000;
		int errors = 0;
		ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, skip, count, -EIO), 0);
		for (uint64_t pos = 0; pos < size; pos += 16 * K) {
			memset(got, 0xEE, 16 * K);
			ssize_t n = fs_read(fs, ino, pos, 16 * K, got);
			ck_assert_msg(n == 16 * K || n == -EIO, "read at %llu: %zd",
				      (unsigned long long)pos, n);
			if (n < 0)
				errors++;
			else
				ck_assert_msg(memcmp(got, a + pos, 16 * K) == 0,
					      "bytes at %llu (%u reads fail after %u)",
					      (unsigned long long)pos, count, skip);
		}
		if (count > 3) {
			ck_assert_int_gt(errors, 0);
			/* The fills failed as well, and the stats say so (a fill
			 * in flight counts when its batch ends). */
			for (int i = 0; i < 200 && tl_stats(fs).prefetch_fill_errors <= fill_errors; i++)
				usleep(5000);
			ck_assert_uint_gt(tl_stats(fs).prefetch_fill_errors, fill_errors);
		}
		ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 0, 0), 0);
		fill_errors = tl_stats(fs).prefetch_fill_errors;
		for (uint64_t pos = 0; pos < size; pos += 16 * K) {
			ck_assert_int_eq(fs_read(fs, ino, pos, 16 * K, got), 16 * K);
			ck_assert(memcmp(got, a + pos, 16 * K) == 0);
		}
	}
	free(a);
	free(got);
}
END_TEST

/* A window's buffer that no window uses any more is kept for the next
 * window, at most FS_PF_SPARE of them: two files read one after the other
 * each get their own bytes, the spares stay within FS_PF_SPARE windows
 * while windows are dropped in bulk, and the unmount frees them (the
 * sanitizer build checks for leaks). */
START_TEST(prefetch_spares_reused)
{
	const uint64_t K = 1024, size = 1024 * K, bound = FS_PF_SPARE * 64 * K;
	uint8_t *a, *b = malloc(size), *got = malloc(16 * K);
	uint64_t ia = pf_file("spare-a", size, 11, &a);
	uint64_t ib = create(FS_ROOT_INO, "spare-b");
	fill(b, size, 0, 12);
	ck_assert_int_eq(fs_write(fs, ib, 0, b, size, false), (ssize_t)size);
	ck_assert_int_eq(fs_fsync(fs, ib, false), 0);
	ck_assert_uint_eq(tl_stats(fs).prefetch_spare_bytes, 0);
	for (int f = 0; f < 2; f++) {
		uint64_t ino = f ? ib : ia;
		const uint8_t *want = f ? b : a;
		for (uint64_t pos = 0; pos < size; pos += 16 * K) {
			ck_assert_int_eq(fs_read(fs, ino, pos, 16 * K, got), 16 * K);
			ck_assert_msg(memcmp(got, want + pos, 16 * K) == 0, "file %d at %llu", f,
				      (unsigned long long)pos);
		}
		uint64_t spare = tl_stats(fs).prefetch_spare_bytes;
		ck_assert_uint_gt(spare, 0);	/* windows the reader passed */
		ck_assert_uint_le(spare, bound);
	}
	/* Writes drop both files' windows at once. */
	ck_assert_int_eq(fs_write(fs, ia, 0, b, 4 * K, false), 4 * K);
	ck_assert_int_eq(fs_write(fs, ib, 0, a, 4 * K, false), 4 * K);
	for (int i = 0; i < 200 && pf_bytes() > 0; i++)	/* fills in flight end */
		usleep(5000);
	ck_assert_uint_eq(pf_bytes(), 0);
	ck_assert_uint_le(tl_stats(fs).prefetch_spare_bytes, bound);
	ck_assert_uint_gt(tl_stats(fs).prefetch_spare_bytes, 0);
	free(a);
	free(b);
	free(got);
}
END_TEST

/* A READ reply served from a window refers to the window's bytes instead
 * of a copy; the window may be dropped (a write invalidates it) while the
 * reply still holds them: the bytes stay valid and unchanged until the
 * reply releases them, and their memory is counted until then.  A read
 * over buffered pages gets a copy of its own with the pages laid over. */
START_TEST(read_buf_outlives_window)
{
	const uint64_t K = 1024, size = 1024 * K;
	uint8_t *a, *b = malloc(size), *got = malloc(size);
	uint64_t ino = pf_file("ref", size, 1, &a);
	fill(b, size, 0, 2);
	for (uint64_t pos = 0; pos < 256 * K; pos += 16 * K)	/* a sequential reader */
		ck_assert_int_eq(fs_read(fs, ino, pos, 16 * K, got), 16 * K);
	struct fs_rbuf rb;
	ck_assert_int_eq(fs_read_buf(fs, ino, 256 * K + 100, 16 * K, 0, &rb), 16 * K);
	ck_assert_ptr_nonnull(rb.ref);			/* from a window */
	ck_assert_ptr_null(rb.own);
	ck_assert_int_eq(memcmp(rb.p, a + 256 * K + 100, 16 * K), 0);
	/* The write drops every window; the reply's bytes live on. */
	ck_assert_int_eq(fs_write(fs, ino, 256 * K, b + 256 * K, 64 * K, false), 64 * K);
	ck_assert_uint_ge(pf_bytes(), 64 * K);
	ck_assert_int_eq(memcmp(rb.p, a + 256 * K + 100, 16 * K), 0);
	fs_rbuf_put(&rb);
	fs_rbuf_put(&rb);				/* a released one is empty */
	for (int i = 0; i < 200 && pf_bytes() > 0; i++)	/* fills in flight end */
		usleep(5000);
	ck_assert_uint_eq(pf_bytes(), 0);
	/* Over buffered pages: a copy with the new bytes. */
	ck_assert_int_eq(fs_read_buf(fs, ino, 256 * K, 64 * K, 0, &rb), 64 * K);
	ck_assert_ptr_nonnull(rb.own);
	ck_assert_ptr_null(rb.ref);
	ck_assert_int_eq(memcmp(rb.p, b + 256 * K, 64 * K), 0);
	fs_rbuf_put(&rb);
	/* Nothing read past the end; an empty one is released as well. */
	ck_assert_int_eq(fs_read_buf(fs, ino, size, 4096, 0, &rb), 0);
	fs_rbuf_put(&rb);
	free(a);
	free(b);
	free(got);
}
END_TEST

/* FS_READ_FD: a read inside one written-out extent is handed back as a
 * range of the device's file, whose bytes are the file's, with the file
 * read-locked until the release; over buffered pages, past the end of an
 * extent or without the flag it is a copy as before. */
START_TEST(read_buf_at_fd)
{
	const uint64_t K = 1024, size = 1024 * K;
	uint8_t *a, *b = malloc(64 * K), *got = malloc(size);
	uint64_t ino = pf_file("fd", size, 3, &a);
	struct fs_rbuf rb;

	ck_assert_int_eq(fs_read_buf(fs, ino, 4096 + 7, 200 * K, FS_READ_FD, &rb), 200 * K);
	ck_assert(rb.at_fd);
	ck_assert_ptr_null(rb.p);
	ck_assert_ptr_nonnull(rb.held);
	ck_assert_int_eq(pread(rb.fd, got, 200 * K, (off_t)rb.fd_off), (ssize_t)(200 * K));
	ck_assert_int_eq(memcmp(got, a + 4096 + 7, 200 * K), 0);
	/* the lock is held: a writer would wait; none may change the bytes */
	ck_assert_int_ne(pthread_rwlock_trywrlock(&rb.held->rw), 0);
	fs_rbuf_put(&rb);
	ck_assert(!rb.at_fd);
	/* trimmed at the end of the file, like any read */
	ck_assert_int_eq(fs_read_buf(fs, ino, size - 100, 4096, FS_READ_FD, &rb), 100);
	ck_assert(rb.at_fd);
	ck_assert_int_eq(pread(rb.fd, got, 100, (off_t)rb.fd_off), 100);
	ck_assert_int_eq(memcmp(got, a + size - 100, 100), 0);
	fs_rbuf_put(&rb);
	/* buffered pages are newer than the device: a copy with them */
	fill(b, 64 * K, 0, 4);
	ck_assert_int_eq(fs_write(fs, ino, 128 * K, b, 64 * K, false), 64 * K);
	ck_assert_int_eq(fs_read_buf(fs, ino, 100 * K, 64 * K, FS_READ_FD, &rb), 64 * K);
	ck_assert(!rb.at_fd);
	ck_assert_ptr_null(rb.held);
	ck_assert_int_eq(memcmp(rb.p, a + 100 * K, 28 * K), 0);
	ck_assert_int_eq(memcmp(rb.p + 28 * K, b, 36 * K), 0);
	fs_rbuf_put(&rb);
	/* once written out, the new bytes are in another extent: a read over
	 * both is a copy, one inside the new extent a file range again */
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	ck_assert_int_eq(fs_read_buf(fs, ino, 100 * K, 64 * K, FS_READ_FD, &rb), 64 * K);
	ck_assert(!rb.at_fd);
	ck_assert_int_eq(memcmp(rb.p + 28 * K, b, 36 * K), 0);
	fs_rbuf_put(&rb);
	ck_assert_int_eq(fs_read_buf(fs, ino, 128 * K, 64 * K, FS_READ_FD, &rb), 64 * K);
	ck_assert(rb.at_fd);
	ck_assert_int_eq(pread(rb.fd, got, 64 * K, (off_t)rb.fd_off), (ssize_t)(64 * K));
	ck_assert_int_eq(memcmp(got, b, 64 * K), 0);
	fs_rbuf_put(&rb);
	/* without the flag, never */
	ck_assert_int_eq(fs_read_buf(fs, ino, 4096, 4096, 0, &rb), 4096);
	ck_assert(!rb.at_fd);
	fs_rbuf_put(&rb);
	free(a);
	free(b);
	free(got);
}
END_TEST

/* A sequential reader starting in the middle of a file gets read-ahead
 * (each READ counts once towards "sequential", hit or miss). */
/* fs_write_donated: a whole chunk's worth of payload at a chunk boundary
 * becomes the write buffer's chunk in place (the donor is kept until the
 * chunk is written out); anything else is copied.  The bytes read back,
 * survive overwrites, truncates and a remount either way. */
START_TEST(write_donated_chunks)
{
	const uint64_t su = fs->opts.stripe_unit, bs = 4096;
	uint64_t ino = create(FS_ROOT_INO, "donated");
	uint8_t *want = calloc(1, 4 * su), *got = malloc(4 * su);
	struct fs_donor *d = fs_donor_new(su);
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->len, su);

	/* chunk 1, whole: kept */
	fill(d->base, su, su, 5);
	memcpy(want + su, d->base, su);
	ck_assert_int_eq(fs_write_donated(fs, ino, su, d, su, false), (ssize_t)su);
	ck_assert_uint_eq(atomic_load(&d->refs), 2);
	ck_assert_int_eq(fs_read(fs, ino, 0, 2 * su, got), (ssize_t)(2 * su));
	ck_assert_int_eq(memcmp(got, want, 2 * su), 0);
	/* the caller's reference goes; the chunk still holds the bytes, and a
	 * plain write over part of it changes them in place */
	fs_donor_put(d);
	fill(want + su + 3 * bs, bs, su + 3 * bs, 6);
	ck_assert_int_eq(fs_write(fs, ino, su + 3 * bs, want + su + 3 * bs, bs, false), (ssize_t)bs);
	/* misaligned: copied, not kept */
	d = fs_donor_new(su);
	ck_assert_ptr_nonnull(d);
	fill(d->base, su, 2 * su + bs, 7);
	memcpy(want + 2 * su + bs, d->base, su);
	ck_assert_int_eq(fs_write_donated(fs, ino, 2 * su + bs, d, su, false), (ssize_t)su);
	ck_assert_uint_eq(atomic_load(&d->refs), 1);
	/* over a chunk already buffered (chunk 2 has pages now): copied */
	fill(d->base, su, 2 * su, 8);
	memcpy(want + 2 * su, d->base, su);
	ck_assert_int_eq(fs_write_donated(fs, ino, 2 * su, d, su, false), (ssize_t)su);
	ck_assert_uint_eq(atomic_load(&d->refs), 1);
	ck_assert_int_eq(fs_read(fs, ino, 0, 4 * su, got), (ssize_t)(3 * su + bs));
	ck_assert_int_eq(memcmp(got, want, 3 * su + bs), 0);
	/* a truncate into a donated chunk drops its tail pages; adding them
	 * back compacts the chunk into a buffer of its own */
	fill(d->base, su, 0, 9);
	memcpy(want, d->base, su);
	ck_assert_int_eq(fs_write_donated(fs, ino, 0, d, su, false), (ssize_t)su);
	ck_assert_uint_eq(atomic_load(&d->refs), 2);
	struct stat attr = { .st_size = (off_t)(su / 2) }, st;
	ck_assert_int_eq(fs_setattr(fs, ino, &attr, FS_SET_SIZE, &st), 0);
	memset(want + su / 2, 0, 4 * su - su / 2);
	fill(want + su / 2 + bs, bs, su / 2 + bs, 10);
	ck_assert_int_eq(fs_write(fs, ino, su / 2 + bs, want + su / 2 + bs, bs, false), (ssize_t)bs);
	ck_assert_int_eq(fs_read(fs, ino, 0, su, got), (ssize_t)(su / 2 + 2 * bs));
	ck_assert_int_eq(memcmp(got, want, su / 2 + 2 * bs), 0);
	/* written out: every chunk's reference to the donor is gone */
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	ck_assert_uint_eq(atomic_load(&d->refs), 1);
	fs_donor_put(d);
	remount();
	ck_assert_int_eq(fs_read(fs, ino, 0, su, got), (ssize_t)(su / 2 + 2 * bs));
	ck_assert_int_eq(memcmp(got, want, su / 2 + 2 * bs), 0);
	free(want);
	free(got);
}
END_TEST

/* A write writes out the full stripe it completes before it returns (the
 * FUSE WRITE is answered after that), donated or copied, and the donors'
 * references go with the write-out. */
static uint64_t data_written(void)
{
	return tl_stats(fs).data_bytes_written;
}

START_TEST(write_donated_stripe_goes_out)
{
	const uint64_t su = fs->opts.stripe_unit;
	const unsigned n = fs->opts.stripe_width ? fs->opts.stripe_width : 1;
	uint64_t ino = create(FS_ROOT_INO, "stripe");
	uint8_t *got = malloc(2 * n * su), *want = malloc(2 * n * su);
	struct fs_donor *d[16];
	ck_assert_uint_le(n, 16);

	uint64_t w0 = data_written();
	for (unsigned i = 0; i < n; i++) {
		d[i] = fs_donor_new(su);
		ck_assert_ptr_nonnull(d[i]);
		fill(d[i]->base, su, i * su, 11);
		memcpy(want + i * su, d[i]->base, su);
		ck_assert_int_eq(fs_write_donated(fs, ino, i * su, d[i], su, false), (ssize_t)su);
	}
	uint64_t w1 = data_written();
	ck_assert_uint_eq(w1, w0 + n * su);		/* the stripe went out */
	for (unsigned i = 0; i < n; i++)
		ck_assert_uint_eq(atomic_load(&d[i]->refs), 1);

	fill(want + n * su, n * su, n * su, 12);
	ck_assert_int_eq(fs_write(fs, ino, n * su, want + n * su, n * su, false), (ssize_t)(n * su));
	ck_assert_uint_eq(data_written(), w1 + n * su);
	ck_assert_int_eq(fs_read(fs, ino, 0, 2 * n * su, got), (ssize_t)(2 * n * su));
	ck_assert_int_eq(memcmp(got, want, 2 * n * su), 0);
	for (unsigned i = 0; i < n; i++)
		fs_donor_put(d[i]);
	free(got);
	free(want);
}
END_TEST

/* ---- the write-behind (fs_release, fs_commit.c) ---- */

/* Remount with the commit thread running and the given write-behind. */
static void behind_mount(uint32_t ms)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	struct fs_opts o;
	fs_opts_default(&o);
	o.buffer_bytes = 64ull << 20;
	o.write_behind_ms = ms;
	ck_assert_int_eq(fs_mount(dev, &o, &fs), 0);
	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);
}

/* A file of `len` bytes (seed), written and closed. */
static uint64_t closed_file(const char *name, uint8_t *data, size_t len, uint32_t seed)
{
	uint64_t ino = create(FS_ROOT_INO, name);
	ck_assert_int_eq(fs_open(fs, ino, O_WRONLY), 0);
	fill(data, len, 0, seed);
	ck_assert_int_eq(fs_write(fs, ino, 0, data, len, false), (ssize_t)len);
	ck_assert_int_eq(fs_release(fs, ino), 0);
	return ino;
}

static uint64_t behind_dropped(void)
{
	return tl_stats(fs).write_behind_dropped_bytes;
}

/* A closed file's bytes stay buffered at the close and reach the device
 * within the write-behind delay (and about no sooner), with no fsync. */
START_TEST(write_behind_writes_closed_file)
{
	enum { LEN = 96 << 10 };
	static uint8_t want[LEN], got[LEN];
	behind_mount(200);
	uint64_t w0 = data_written(), t0 = zf_now_ns();
	uint64_t ino = closed_file("closed", want, LEN, 21);
	ck_assert_uint_eq(data_written(), w0);		/* not at the close */
	ck_assert_int_eq(fs_read(fs, ino, 0, LEN, got), LEN);
	ck_assert_int_eq(memcmp(got, want, LEN), 0);
	while (data_written() == w0 && zf_now_ns() - t0 < 3000000000ull)
		usleep(10000);
	uint64_t took_ms = (zf_now_ns() - t0) / 1000000;
	ck_assert_uint_ge(data_written(), w0 + LEN);	/* written within the delay */
	ck_assert_uint_ge(took_ms, 150);
	ck_assert_uint_le(took_ms, 1500);
	ck_assert_uint_eq(behind_dropped(), 0);
	remount();
	ck_assert_int_eq(fs_read(fs, ino, 0, LEN, got), LEN);
	ck_assert_int_eq(memcmp(got, want, LEN), 0);
}
END_TEST

/* A file deleted before the write-behind reached it is never written; a
 * file opened again meanwhile waits for its next close. */
START_TEST(write_behind_unlinked_is_never_written)
{
	enum { LEN = 96 << 10 };
	static uint8_t a[LEN], b[LEN], got[LEN];
	behind_mount(300);
	uint64_t w0 = data_written();
	closed_file("log", a, LEN, 22);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "log"), 0);
	ck_assert_uint_ge(behind_dropped(), LEN);
	uint64_t ino = closed_file("reopened", b, LEN, 23);
	ck_assert_int_eq(fs_open(fs, ino, O_RDONLY), 0);	/* open again, past the delay */
	usleep(700000);
	ck_assert_uint_eq(data_written(), w0);
	ck_assert_int_eq(fs_release(fs, ino), 0);	/* its close starts the delay again */
	uint64_t t0 = zf_now_ns();
	while (data_written() == w0 && zf_now_ns() - t0 < 3000000000ull)
		usleep(10000);
	ck_assert_uint_eq(data_written(), w0 + LEN);	/* only the file that lives */
	remount();
	ck_assert_int_eq(fs_read(fs, ino, 0, LEN, got), LEN);
	ck_assert_int_eq(memcmp(got, b, LEN), 0);
	ck_assert_uint_eq(lookup(FS_ROOT_INO, "log"), 0);
}
END_TEST

/* data[0, len) written at offset 0 in 1 MiB writes, as the kernel's
 * write-back sends them (each WRITE decides its own write-out). */
static void write_in_mib(uint64_t ino, const uint8_t *data, size_t len)
{
	for (size_t off = 0; off < len; off += 1u << 20) {
		size_t n = ZF_MIN(len - off, (size_t)1 << 20);
		ck_assert_int_eq(fs_write(fs, ino, off, data + off, n, false), (ssize_t)n);
	}
}

/* With the write-behind on, a small file keeps even its complete stripes
 * buffered (a log unlinked after its close never reaches the device); a
 * file past the hold (an eighth of this 64 MiB buffer) writes them out as
 * they complete. */
START_TEST(write_behind_holds_small_file_stripes)
{
	const size_t mib = 1u << 20, small = 6 * mib, big = 16 * mib;
	uint8_t *a = malloc(big), *got = malloc(big);
	behind_mount(300);
	uint64_t w0 = data_written();
	uint64_t ino = create(FS_ROOT_INO, "log");
	ck_assert_int_eq(fs_open(fs, ino, O_WRONLY), 0);
	fill(a, small, 0, 25);
	write_in_mib(ino, a, small);
	ck_assert_uint_eq(data_written(), w0);		/* a full stripe, held */
	ck_assert_int_eq(fs_release(fs, ino), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "log"), 0);
	ck_assert_uint_ge(behind_dropped(), small);
	ck_assert_uint_eq(data_written(), w0);

	ino = create(FS_ROOT_INO, "big");
	ck_assert_int_eq(fs_open(fs, ino, O_WRONLY), 0);
	fill(a, big, 0, 26);
	write_in_mib(ino, a, big);
	ck_assert_uint_ge(data_written(), w0 + 8 * mib);	/* past the hold: out */
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	ck_assert_int_eq(fs_release(fs, ino), 0);
	remount();
	ck_assert_int_eq(fs_read(fs, ino, 0, big, got), (ssize_t)big);
	ck_assert_int_eq(memcmp(got, a, big), 0);
	free(a);
	free(got);
}
END_TEST

/* The hold ends while the buffer is a quarter full (16 MiB of this 64 MiB
 * one): two small files held, the third writes its stripe out. */
START_TEST(write_behind_hold_ends_when_buffer_fills)
{
	const size_t mib = 1u << 20, len = 6 * mib;
	uint8_t *a = malloc(len), *got = malloc(len);
	uint64_t ino[3];
	behind_mount(300);
	uint64_t w0 = data_written();
	for (int f = 0; f < 3; f++) {
		char name[8] = { 'f', (char)('0' + f), 0 };
		ino[f] = create(FS_ROOT_INO, name);
		ck_assert_int_eq(fs_open(fs, ino[f], O_WRONLY), 0);
		fill(a, len, 0, 30 + f);
		write_in_mib(ino[f], a, len);
		if (f == 1)
			ck_assert_uint_eq(data_written(), w0);	/* 12 MiB held */
	}
	ck_assert_uint_ge(data_written(), w0 + 4 * mib);	/* the third's stripe */
	for (int f = 0; f < 3; f++) {
		ck_assert_int_eq(fs_fsync(fs, ino[f], false), 0);
		ck_assert_int_eq(fs_release(fs, ino[f]), 0);
	}
	remount();
	fill(a, len, 0, 32);
	ck_assert_int_eq(fs_read(fs, ino[2], 0, len, got), (ssize_t)len);
	ck_assert_int_eq(memcmp(got, a, len), 0);
	free(a);
	free(got);
}
END_TEST

/* write_behind_ms=0: the close writes the file out. */
START_TEST(write_behind_off_writes_at_close)
{
	enum { LEN = 96 << 10 };
	static uint8_t a[LEN];
	behind_mount(0);
	uint64_t w0 = data_written();
	closed_file("now", a, LEN, 24);
	ck_assert_uint_ge(data_written(), w0 + LEN);
}
END_TEST

START_TEST(prefetch_from_mid_file)
{
	const uint64_t K = 1024, size = 2048 * K;
	uint8_t *a, *got = malloc(16 * K);
	uint64_t ino = pf_file("mid", size, 3, &a);
	for (uint64_t pos = 1024 * K; pos < 1536 * K; pos += 16 * K) {
		ck_assert_int_eq(fs_read(fs, ino, pos, 16 * K, got), 16 * K);
		ck_assert_int_eq(memcmp(got, a + pos, 16 * K), 0);
	}
	struct fs_stats st;
	fs_get_stats(fs, &st);
	ck_assert_uint_gt(st.prefetch_hits, 16);
	free(a);
	free(got);
}
END_TEST

/* readdir in steps of `per` entries from cookie `off`; appends the names
 * seen to got (a bitmap over f<i>) and returns the next offset, 0 at the
 * end. */
struct rd_step { unsigned char *seen; int per, n, dups; uint64_t next; };
static int rd_fn(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
	struct rd_step *r = arg;
	(void)st;
	if (r->n == r->per)
		return 1;
	r->n++;
	r->next = next_off;
	if (name[0] == 'f') {
		int i = atoi(name + 1);
		r->dups += r->seen[i];
		r->seen[i] = 1;
	}
	return 0;
}

/* readdir of d from cookie off to the end in steps of r->per entries;
 * the number of steps that returned entries. */
static int rd_to_end(uint64_t d, uint64_t off, struct rd_step *r)
{
	for (int steps = 0;; steps++) {
		r->n = 0;
		ck_assert_int_eq(fs_readdir(fs, d, off, false, rd_fn, r), 0);
		if (r->n == 0)
			return steps;
		off = r->next;
	}
}

/* A new directory under the root holding f0 .. f<n-1>; its inode. */
static uint64_t dir_of_n(const char *dname, int n)
{
	struct stat st;
	char name[32];

	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, dname, 0755, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		create(st.st_ino, name);
	}
	return st.st_ino;
}

/* A large directory whose names are removed in creation order (what an
 * mdtest unlink phase or a log cleaner does): each remove finds its slot at
 * once, the slots are compacted as they empty, and a readdir resumed from
 * a cookie taken before the compaction goes on where it was: every live
 * name once, no removed one. */
START_TEST(dir_remove_in_creation_order)
{
	const int N = 3000;
	char name[32];
	unsigned char *seen = calloc(N, 1);
	uint64_t d = dir_of_n("big", N);
	/* half a listing, then remove the first 2,000 (past it), then the rest */
	struct rd_step r = { .seen = seen, .per = 1000 };
	ck_assert_int_eq(fs_readdir(fs, d, 0, false, rd_fn, &r), 0);
	uint64_t off = r.next;
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(fs_unlink(fs, d, name), 0);
	}
	/* the removed slots did not pile up in front of the live ones */
	struct fs_inode *di = fs_inode_pin(fs, d);
	ck_assert_ptr_nonnull(di);
	ck_assert_uint_eq(di->dir->live, (size_t)(N - 2000));
	ck_assert_uint_le(di->dir->n, 2 * di->dir->live);
	fs_inode_unpin(fs, di);
	rd_to_end(d, off, &r);
	ck_assert_int_eq(r.dups, 0);
	/* f0..f997 came in the first step (after . and ..); 998..1999 were
	 * removed before the rest was read; 2000.. all came */
	for (int i = 0; i < N; i++)
		ck_assert_msg(seen[i] == (i < 998 || i >= 2000), "f%d seen %d", i, seen[i]);
	for (int i = 2000; i < N; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_uint_ne(lookup(d, name), 0);
	}
	check_clean();
	memset(seen, 0, N);
	r = (struct rd_step){ .seen = seen, .per = N };
	ck_assert_int_eq(fs_readdir(fs, d, 0, false, rd_fn, &r), 0);
	ck_assert_int_eq(r.n, 2 + N - 2000);
	free(seen);
}
END_TEST

/* A run of removed slots in the middle of a large directory, just short of
 * the half that compacts it: a listing resumed at every step, before and
 * after the run, returns every live name once and no removed one. */
START_TEST(dir_resume_across_removed_run)
{
	const int N = 4000, A = 1000, B = 2900;	/* f1000..f2899 go */
	char name[32];
	unsigned char *seen = calloc(N, 1);
	uint64_t d = dir_of_n("mid", N);
	for (int i = A; i < B; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(fs_unlink(fs, d, name), 0);
	}
	struct fs_inode *di = fs_inode_pin(fs, d);
	ck_assert_ptr_nonnull(di);
	ck_assert_uint_eq(di->dir->n, (size_t)N);	/* not compacted */
	fs_inode_unpin(fs, di);
	for (int per = 1; per <= 64; per *= 4) {
		struct rd_step r = { .seen = seen, .per = per };

		memset(seen, 0, N);
		int steps = rd_to_end(d, 0, &r);
		ck_assert_int_eq(r.dups, 0);
		ck_assert_int_eq(steps, (N - (B - A) + 2 + per - 1) / per);
		for (int i = 0; i < N; i++)
			ck_assert_msg(seen[i] == (i < A || i >= B), "f%d seen %d", i, seen[i]);
	}
	check_clean();
	free(seen);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fs");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, write_read_remount);
	tcase_add_test(tc, dir_remove_in_creation_order);
	tcase_add_test(tc, dir_resume_across_removed_run);
	tcase_add_test(tc, small_appends_and_overwrites);
	tcase_add_test(tc, truncate_and_holes);
	tcase_add_test(tc, namespace_ops);
	tcase_add_loop_test(tc, power_loss_keeps_fsynced, 0, 3);
	tcase_add_test(tc, enospc_then_recover);
	tcase_add_test(tc, many_files_roll_the_log);
	tcase_add_test(tc, mkfs_refuses_existing);
	tcase_add_test(tc, prefetch_windows_with_holes);
	tcase_add_test(tc, prefetch_read_fault);
	tcase_add_test(tc, prefetch_spares_reused);
	tcase_add_test(tc, read_buf_outlives_window);
	tcase_add_test(tc, read_buf_at_fd);
	tcase_add_test(tc, write_donated_chunks);
	tcase_add_test(tc, write_donated_stripe_goes_out);
	tcase_add_test(tc, write_behind_writes_closed_file);
	tcase_add_test(tc, write_behind_unlinked_is_never_written);
	tcase_add_test(tc, write_behind_holds_small_file_stripes);
	tcase_add_test(tc, write_behind_hold_ends_when_buffer_fills);
	tcase_add_test(tc, write_behind_off_writes_at_close);
	tcase_add_test(tc, prefetch_from_mid_file);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
