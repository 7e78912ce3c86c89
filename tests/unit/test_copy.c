/* test_copy — copy_file_range and shared extents through the fs core on the
 * emulator: a copy shares the source's blocks (no data written), each
 * device byte counts once in the valid bytes, and overwrite, truncate,
 * punch, unlink, garbage collection, remount and crash replay never change
 * the other sharer's bytes.  After every step the share table and the
 * zones' valid bytes are checked against the extent maps
 * (fs_check_shares).
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
#include "testlib.h"

#define MiB (1024ull * 1024ull)
#define BS 4096u

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void up(void)
{
	tl_dev_make(&td, "copy", 32, 4 * MiB, 8);
	fs = tl_mount_placement(&td, &dev, NULL, false);
}

static void down(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void remount(void)
{
	tl_unmount_close(fs, dev);
	fs = tl_mount_placement(&td, &dev, NULL, false);
}

/* The daemon dies after its last commit: the device keeps what a flush
 * covered; the next mount replays the log (no unmount snapshot). */
static void crash(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);
	zdev_close(dev);
	fs = tl_mount_placement(&td, &dev, NULL, false);
}

static void shares_ok(void)
{
	ck_assert_int_eq(fs_check_shares(fs, tl_fsck_print, NULL), 0);
}

static void fsck_ok(void)
{
	struct zdev *d;

	tl_unmount_close(fs, dev);
	tl_dev_open(&td, &d);
	ck_assert_int_eq(fs_check(d, false, tl_fsck_print, NULL), 0);
	zdev_close(d);
	fs = tl_mount_placement(&td, &dev, NULL, false);
}

static uint64_t mk(const char *name)
{
	struct fs_ctx ctx = { 0, 0, 1 };
	struct stat st;

	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, &ctx, &st), 0);
	ck_assert_int_eq(fs_open(fs, st.st_ino, O_RDWR), 0);
	return st.st_ino;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = (uint8_t)(seed >> 16);
	}
}

/* A file of n bytes of pattern seed, written and fsync'ed; its bytes. */
static uint8_t *make_file(uint64_t ino, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n);

	fill(b, n, seed);
	ck_assert_int_eq(fs_write(fs, ino, 0, b, n, false), (ssize_t)n);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	return b;
}

static void same(uint64_t ino, uint64_t off, const uint8_t *want, size_t n)
{
	uint8_t *got = malloc(n);
	ck_assert_int_eq(fs_read(fs, ino, off, n, got), (ssize_t)n);
	ck_assert(memcmp(got, want, n) == 0);
	free(got);
}

/* Both files read want, then the share table checks out. */
static void both_same(uint64_t a, uint64_t b, const uint8_t *want, size_t n)
{
	same(a, 0, want, n);
	same(b, 0, want, n);
	shares_ok();
}

static uint64_t size_of(uint64_t ino)
{
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	return (uint64_t)st.st_size;
}

static uint64_t valid_bytes(void)
{
	struct zalloc_stats zs;
	zalloc_get_stats(fs->za, &zs);
	return zs.valid_bytes;
}

/* A whole-file copy shares everything, the partial last block included:
 * no data byte written, valid bytes unchanged, the copy reads the same. */
START_TEST(copy_shares_whole_file)
{
	const size_t n = 3 * MiB + 1234;
	up();
	uint64_t a = mk("a"), b = mk("b");
	uint8_t *want = make_file(a, n, 1);
	struct fs_stats s0 = tl_stats(fs);
	uint64_t v0 = valid_bytes();

	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, n + 4096, 0), (ssize_t)n);
	struct fs_stats s1 = tl_stats(fs);
	ck_assert_uint_eq(s1.data_bytes_written, s0.data_bytes_written);
	ck_assert_uint_eq(s1.copy_written_bytes, 0);
	ck_assert_uint_eq(s1.copy_shared_bytes, ZF_ALIGN_UP(n, BS));
	ck_assert_uint_eq(s1.shared_bytes, ZF_ALIGN_UP(n, BS));
	ck_assert_uint_eq(s1.copies, 1);
	ck_assert_uint_eq(valid_bytes(), v0);
	ck_assert_uint_eq(size_of(b), n);
	same(b, 0, want, n);
	shares_ok();
	/* the stats say so: per file and for the mount */
	char buf[4096];
	int len = fs_getxattr(fs, b, "user.zonefuse.file", buf, sizeof(buf) - 1);
	ck_assert_int_gt(len, 0);
	buf[len] = 0;
	char want_line[64];
	snprintf(want_line, sizeof(want_line), "\nshared_bytes=%llu\n",
		 (unsigned long long)ZF_ALIGN_UP(n, BS));
	ck_assert_ptr_nonnull(strstr(buf, want_line));
	len = fs_getxattr(fs, FS_ROOT_INO, "user.zonefuse.stats", NULL, 0);
	char *all = malloc((size_t)len + 1);
	len = fs_getxattr(fs, FS_ROOT_INO, "user.zonefuse.stats", all, (size_t)len);
	ck_assert_int_gt(len, 0);
	all[len] = 0;
	ck_assert_ptr_nonnull(strstr(all, want_line));
	ck_assert_ptr_nonnull(strstr(all, "\ncopies=1\n"));
	free(all);
	/* past the end: nothing */
	ck_assert_int_eq(fs_copy_file_range(fs, a, n, b, 0, 10, 0), 0);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, 10, 1), -EINVAL);
	free(want);
	down();
}
END_TEST

/* Overwrite, truncate and punch of one sharer leave the other's bytes;
 * unlinking both gives every byte back. */
START_TEST(copy_unshare_on_change)
{
	const size_t n = 2 * MiB;
	up();
	uint64_t a = mk("a"), b = mk("b");
	uint64_t v_empty = valid_bytes();
	uint8_t *want = make_file(a, n, 2);
	uint8_t *orig = malloc(n);
	memcpy(orig, want, n);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, n, 0), (ssize_t)n);
	uint64_t v1 = valid_bytes();

	/* overwrite the middle of a: b keeps the old bytes */
	uint8_t patch[3 * BS];
	fill(patch, sizeof(patch), 99);
	ck_assert_int_eq(fs_write(fs, a, 100 * BS + 17, patch, sizeof(patch), false),
			 (ssize_t)sizeof(patch));
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	memcpy(want + 100 * BS + 17, patch, sizeof(patch));
	same(a, 0, want, n);
	same(b, 0, orig, n);
	shares_ok();
	/* the rewritten blocks are a's own now: more valid bytes */
	ck_assert_uint_gt(valid_bytes(), v1);

	/* truncate b: a keeps its tail */
	struct stat sa = { .st_size = (off_t)(n / 2 + 5) };
	ck_assert_int_eq(fs_setattr(fs, b, &sa, FS_SET_SIZE, NULL), 0);
	same(a, 0, want, n);
	same(b, 0, orig, n / 2 + 5);
	shares_ok();

	/* punch a hole in a: b keeps those bytes */
	ck_assert_int_eq(fs_fallocate(fs, a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      8 * BS, 16 * BS), 0);
	memset(want + 8 * BS, 0, 16 * BS);
	same(a, 0, want, n);
	same(b, 0, orig, n / 2 + 5);
	shares_ok();

	/* unlink a: b reads the same, its blocks stay valid */
	ck_assert_int_eq(fs_release(fs, a), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "a"), 0);
	fs_forget(fs, a, 1);
	same(b, 0, orig, n / 2 + 5);
	shares_ok();
	ck_assert_uint_eq(tl_stats(fs).shared_bytes, 0);
	ck_assert_uint_eq(valid_bytes() - v_empty, ZF_ALIGN_UP(n / 2 + 5, BS));
	ck_assert_int_eq(fs_release(fs, b), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "b"), 0);
	fs_forget(fs, b, 1);
	ck_assert_uint_eq(valid_bytes(), v_empty);
	shares_ok();
	free(want);
	free(orig);
	down();
}
END_TEST

/* Unaligned edges go through the buffer; offsets that are not congruent
 * modulo the block size copy everything by buffer; same-file copies. */
START_TEST(copy_edges_and_unaligned)
{
	const size_t n = MiB + 3 * BS;
	up();
	uint64_t a = mk("a"), b = mk("b"), c = mk("c");
	uint8_t *want = make_file(a, n, 3);

	/* head and tail edges: 1000 + k*BS .. */
	ck_assert_int_eq(fs_copy_file_range(fs, a, 1000, b, 1000 + 8 * BS, n - 3000, 0),
			 (ssize_t)(n - 3000));
	struct fs_stats s = tl_stats(fs);
	ck_assert_uint_gt(s.copy_shared_bytes, 0);
	ck_assert_uint_eq(s.copy_written_bytes, (BS - 1000) + ((n - 2000) % BS));
	same(b, 1000 + 8 * BS, want + 1000, n - 3000);
	uint8_t zero[1000 + 8 * BS];
	memset(zero, 0, sizeof(zero));
	uint8_t *got = malloc(n);
	ck_assert_int_eq(fs_read(fs, b, 0, sizeof(zero), got), (ssize_t)sizeof(zero));
	ck_assert(memcmp(got, zero, sizeof(zero)) == 0);
	free(got);
	shares_ok();

	/* not congruent: all by buffer */
	uint64_t w0 = tl_stats(fs).copy_written_bytes;
	ck_assert_int_eq(fs_copy_file_range(fs, a, 5, c, 6, 20000, 0), 20000);
	ck_assert_uint_eq(tl_stats(fs).copy_written_bytes - w0, 20000);
	same(c, 6, want + 5, 20000);

	/* same file, not overlapping; overlapping is refused */
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, a, 2 * MiB, 64 * BS, 0), 64 * BS);
	same(a, 2 * MiB, want, 64 * BS);
	same(a, 0, want, n);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, a, 4 * BS, 64 * BS, 0), -EINVAL);
	shares_ok();
	free(want);
	down();
}
END_TEST

/* Bytes still in the source's write buffer are written out and shared;
 * the destination's buffered pages in the range are replaced. */
START_TEST(copy_buffered_bytes)
{
	const size_t n = 512 * 1024;
	up();
	uint64_t a = mk("a"), b = mk("b");
	uint8_t *want = malloc(n), *old = malloc(n);
	fill(want, n, 4);
	fill(old, n, 5);
	ck_assert_int_eq(fs_write(fs, a, 0, want, n, false), (ssize_t)n);	/* buffered */
	ck_assert_int_eq(fs_write(fs, b, 0, old, n, false), (ssize_t)n);	/* buffered */
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, n, 0), (ssize_t)n);
	same(b, 0, want, n);
	ck_assert_uint_eq(tl_stats(fs).copy_written_bytes, 0);
	ck_assert_int_eq(fs_fsync(fs, b, false), 0);
	same(b, 0, want, n);
	shares_ok();
	remount();
	both_same(a, b, want, n);
	free(want);
	free(old);
	down();
}
END_TEST

/* A copy survives a remount (snapshot) and a crash (the COPY record
 * replayed), also after its source was unlinked; fsck is clean. */
START_TEST(copy_remount_and_replay)
{
	const size_t n = 2 * MiB + 100;
	up();
	uint64_t a = mk("a"), b = mk("b"), c = mk("c");
	uint8_t *want = make_file(a, n, 6);

	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, n, 0), (ssize_t)n);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, c, MiB, n, 0), (ssize_t)n);
	ck_assert_int_eq(fs_fsync(fs, b, false), 0);
	ck_assert_int_eq(fs_fsync(fs, c, false), 0);
	uint64_t v = valid_bytes(), sh = tl_stats(fs).shared_bytes;
	crash();
	same(b, 0, want, n);
	same(c, MiB, want, n);
	ck_assert_uint_eq(valid_bytes(), v);
	ck_assert_uint_eq(tl_stats(fs).shared_bytes, sh);
	shares_ok();
	fsck_ok();
	/* the source goes; a crash replays the unlink */
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "a"), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	crash();
	same(b, 0, want, n);
	same(c, MiB, want, n);
	shares_ok();
	remount();
	same(b, 0, want, n);
	shares_ok();
	fsck_ok();
	free(want);
	down();
}
END_TEST

/* The collector moves a shared extent once and re-points both files: the
 * victim's shared bytes are copied once, the files still share, and the
 * data reads back, also after a remount. */
START_TEST(copy_gc_moves_shared_once)
{
	const size_t n = 3 * MiB, piece = 64 * 1024;
	up();
	uint64_t a = mk("a"), f = mk("f"), b = mk("b");
	uint8_t *want = malloc(n), *junk = malloc(piece);
	fill(want, n, 7);
	fill(junk, piece, 8);
	for (size_t off = 0; off < n; off += piece) {	/* a and f share zones */
		ck_assert_int_eq(fs_write(fs, a, off, want + off, piece, false), (ssize_t)piece);
		ck_assert_int_eq(fs_flush(fs, a), 0);
		ck_assert_int_eq(fs_write(fs, f, off, junk, piece, false), (ssize_t)piece);
		ck_assert_int_eq(fs_flush(fs, f), 0);
	}
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, n, 0), (ssize_t)n);
	ck_assert_int_eq(fs_release(fs, f), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "f"), 0);
	fs_forget(fs, f, 1);
	ck_assert_int_eq(fs_commit(fs), 0);
	struct fs_stats s0 = tl_stats(fs);
	int r, runs = 0;
	while ((r = gc_run_once(fs)) > 0 && runs < 10)
		runs++;
	ck_assert_int_ge(r, 0);
	ck_assert_int_gt(runs, 0);
	struct fs_stats s1 = tl_stats(fs);
	uint64_t moved = s1.gc_bytes_written - s0.gc_bytes_written;
	ck_assert_uint_gt(moved, 0);
	ck_assert_uint_gt(s1.zone_resets, s0.zone_resets);
	ck_assert_uint_gt(s1.gc_shared_moves, 0);
	/* moved once: both files still map the same bytes, counted once */
	ck_assert_uint_eq(s1.shared_bytes, n);
	ck_assert_uint_eq(valid_bytes(), n);
	pthread_mutex_lock(&fs->lock);
	const struct extmap *ma = &fs_inode_get(fs, a)->map, *mb = &fs_inode_get(fs, b)->map;
	ck_assert_uint_eq(extmap_count(ma), extmap_count(mb));
	struct extmap_cur ca, cb;
	for (const struct extmap_ext *x = extmap_seek(ma, 0, &ca), *y = extmap_seek(mb, 0, &cb);
	     x; x = extmap_next(ma, &ca), y = extmap_next(mb, &cb))
		ck_assert(memcmp(x, y, sizeof(*x)) == 0);
	pthread_mutex_unlock(&fs->lock);
	both_same(a, b, want, n);
	remount();
	both_same(a, b, want, n);
	fsck_ok();
	free(want);
	free(junk);
	down();
}
END_TEST

/* Sharers that reference parts of the moved bytes, one of them changed
 * since the copy: every one reads its own bytes after the collector ran. */
START_TEST(copy_gc_partial_sharers)
{
	const size_t n = 3 * MiB, piece = 64 * 1024;
	up();
	uint64_t a = mk("a"), f = mk("f"), b = mk("b"), c = mk("c");
	uint8_t *want = malloc(n), *junk = malloc(piece), *wc = malloc(n);
	fill(want, n, 12);
	fill(junk, piece, 13);
	for (size_t off = 0; off < n; off += piece) {
		ck_assert_int_eq(fs_write(fs, a, off, want + off, piece, false), (ssize_t)piece);
		ck_assert_int_eq(fs_flush(fs, a), 0);
		ck_assert_int_eq(fs_write(fs, f, off, junk, piece, false), (ssize_t)piece);
		ck_assert_int_eq(fs_flush(fs, f), 0);
	}
	ck_assert_int_eq(fs_fsync(fs, a, false), 0);
	/* b: a's middle MiB (from 96 KiB on) at 5 MiB; c: all of a, then
	 * 256 KiB of it rewritten */
	ck_assert_int_eq(fs_copy_file_range(fs, a, 96 * 1024, b, 5 * MiB, MiB, 0), (ssize_t)MiB);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, c, 0, n, 0), (ssize_t)n);
	memcpy(wc, want, n);
	fill(wc + MiB, 256 * 1024, 14);
	ck_assert_int_eq(fs_write(fs, c, MiB, wc + MiB, 256 * 1024, false), 256 * 1024);
	ck_assert_int_eq(fs_fsync(fs, c, false), 0);
	ck_assert_int_eq(fs_release(fs, f), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "f"), 0);
	fs_forget(fs, f, 1);
	ck_assert_int_eq(fs_commit(fs), 0);
	int r, runs = 0;
	while ((r = gc_run_once(fs)) > 0 && runs < 10)
		runs++;
	ck_assert_int_ge(r, 0);
	ck_assert_uint_gt(tl_stats(fs).gc_shared_moves, 0);
	same(a, 0, want, n);
	same(b, 5 * MiB, want + 96 * 1024, MiB);
	same(c, 0, wc, n);
	shares_ok();
	crash();
	same(a, 0, want, n);
	same(b, 5 * MiB, want + 96 * 1024, MiB);
	same(c, 0, wc, n);
	shares_ok();
	fsck_ok();
	free(want);
	free(junk);
	free(wc);
	down();
}
END_TEST

/* The copy takes the source's lifetime class unless its own was set. */
START_TEST(copy_inherits_class)
{
	up();
	uint64_t a = mk("a"), b = mk("b"), c = mk("c");
	const char *lt = "long";
	ck_assert_int_eq(fs_setxattr(fs, a, FS_XATTR_LIFETIME, lt, strlen(lt), 0), 0);
	ck_assert_int_eq(fs_setxattr(fs, c, FS_XATTR_LIFETIME, "short", 5, 0), 0);
	uint8_t *want = make_file(a, 64 * 1024, 9);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, 0, 64 * 1024, 0), 64 * 1024);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, c, 0, 64 * 1024, 0), 64 * 1024);
	pthread_mutex_lock(&fs->lock);
	ck_assert_uint_eq(fs_inode_get(fs, b)->cls, LIFETIME_LONG);
	ck_assert_uint_eq(fs_inode_get(fs, c)->cls, LIFETIME_SHORT);
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_fsync(fs, b, false), 0);
	crash();
	pthread_mutex_lock(&fs->lock);
	ck_assert_uint_eq(fs_inode_get(fs, b)->cls, LIFETIME_LONG);
	pthread_mutex_unlock(&fs->lock);
	free(want);
	down();
}
END_TEST

/* A replayed COPY with runs out of order or outside its range is
 * malformed. */
START_TEST(copy_record_validation)
{
	up();
	uint64_t a = mk("a");
	uint8_t *want = make_file(a, 64 * 1024, 10);
	uint64_t dev0;
	struct extmap_cur cur;
	pthread_mutex_lock(&fs->lock);
	dev0 = extmap_nth(&fs_inode_get(fs, a)->map, 0, &cur)->dev;
	pthread_mutex_unlock(&fs->lock);
	struct { uint64_t src, dst, off, len, size; uint8_t cls, csrc; uint32_t n;
		 uint64_t r[2][3]; } __attribute__((packed)) rec = {
		a, a, 0, 8192, 8192, 2, 0, 2, { { 4096, 4096, dev0 }, { 0, 4096, dev0 } } };
	fs->applying_log = true;
	ck_assert_int_eq(fs_replay_record(fs, FS_REC_COPY, &rec, sizeof(rec), 1), -EUCLEAN);
	rec.r[1][0] = 8192;	/* in order, but past the range */
	ck_assert_int_eq(fs_replay_record(fs, FS_REC_COPY, &rec, sizeof(rec), 1), -EUCLEAN);
	ck_assert_int_eq(fs_replay_record(fs, FS_REC_COPY, &rec, sizeof(rec) - 1, 1), -EUCLEAN);
	uint32_t bad = 5;
	ck_assert_int_eq(fs_replay_record(fs, FS_REC_REMAP, &bad, sizeof(bad), 1), -EUCLEAN);
	fs->applying_log = false;
	free(want);
	down();
}
END_TEST

/* A block counts at most 65,535 extra references: the copy that would
 * need one more copies by buffer instead. */
START_TEST(copy_reference_limit)
{
	up();
	uint64_t a = mk("a"), b = mk("b");
	uint8_t *want = make_file(a, BS, 11);
	const uint32_t max = 65535;
	for (uint32_t k = 0; k < max; k++)
		ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, (uint64_t)k * BS, BS, 0), BS);
	ck_assert_uint_eq(tl_stats(fs).copy_written_bytes, 0);
	ck_assert_uint_eq(tl_stats(fs).shared_saved_bytes, (uint64_t)max * BS);
	ck_assert_int_eq(fs_copy_file_range(fs, a, 0, b, (uint64_t)max * BS, BS, 0), BS);
	ck_assert_uint_eq(tl_stats(fs).copy_written_bytes, BS);
	same(b, (uint64_t)max * BS, want, BS);
	same(b, 1234 * BS, want, BS);
	shares_ok();
	free(want);
	down();
}
END_TEST

static Suite *copy_suite(void)
{
	Suite *s = suite_create("copy");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, copy_shares_whole_file);
	tcase_add_test(tc, copy_unshare_on_change);
	tcase_add_test(tc, copy_edges_and_unaligned);
	tcase_add_test(tc, copy_buffered_bytes);
	tcase_add_test(tc, copy_remount_and_replay);
	tcase_add_test(tc, copy_gc_moves_shared_once);
	tcase_add_test(tc, copy_gc_partial_sharers);
	tcase_add_test(tc, copy_inherits_class);
	tcase_add_test(tc, copy_record_validation);
	tcase_add_test(tc, copy_reference_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tl_run(copy_suite());
}
