/* Unit tests for the answer to a FUSE WRITE (fusefs/fusefs.c), served as
 * the zf loop serves it (fusefs_write_direct) on a mounted emulated device,
 * the reply read from a socket standing in for /dev/fuse.  The kernel does
 * not read the count in the reply to a WRITE of its write-back: when the fs
 * takes only part of one (memory for a chunk ran out, or a block's bytes
 * could not be read to change part of it), the rest is tried again, and
 * if that fails too the reply is its error, which is noted for the writer's
 * next write(); a WRITE from write() (O_DIRECT) gets the short count. */
#include <check.h>
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "failalloc.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "fusefs/fusefs.h"
#include "testlib.h"
#include "zoned/zdev.h"

#define BS 4096u

static struct tl_dev t;
static struct zdev *dev;
static struct fs *fs;
static struct fusefs ff;
static int sv[2];

static void setup(void)
{
	tl_dev_make(&t, "fusefs-write", 16, 16u << 20, 8);
	tl_dev_open(&t, &dev);
	ck_assert_int_eq(tl_mount(dev, 64u << 20, false, &fs), 0);
	ff = (struct fusefs){ .fs = fs };
	pthread_mutex_init(&ff.wb.lock, NULL);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	fusefs_io_set_thread_fd(sv[0]);
}

static void teardown(void)
{
	failalloc_disarm();
	fusefs_io_set_thread_fd(-1);
	close(sv[0]);
	close(sv[1]);
	tl_teardown(&t, &dev, &fs);
}

/* Serve a WRITE of n bytes at off to ino with write_flags; the reply's
 * error and count. */
static void serve_write(uint64_t ino, uint64_t off, uint32_t n, uint32_t flags,
			int *err, uint32_t *count)
{
	struct fusefs_rx rx = { .flat = calloc(1, FUSEFS_RX_FLAT),
				.donor = fs_donor_new(FUSEFS_RX_PAYLOAD), .is_write = true };
	ck_assert_ptr_nonnull(rx.flat);
	ck_assert_ptr_nonnull(rx.donor);
	struct fuse_in_header *h = (void *)rx.flat;
	struct fuse_write_in *w = (void *)(h + 1);
	*h = (struct fuse_in_header){ .len = (uint32_t)(sizeof(*h) + sizeof(*w) + n),
				      .opcode = FUSE_WRITE, .unique = 9, .nodeid = ino };
	*w = (struct fuse_write_in){ .offset = off, .size = n, .write_flags = flags };
	memset(rx.donor->base, 0x5a, n);
	rx.n = h->len;
	fusefs_write_direct(&ff, &rx);

	char b[256];
	ssize_t r = recv(sv[1], b, sizeof(b), 0);
	const struct fuse_out_header *oh = (const void *)b;
	ck_assert_int_ge(r, (ssize_t)sizeof(*oh));
	ck_assert_uint_eq(oh->unique, 9);
	*err = oh->error;
	*count = 0;
	if (!oh->error) {
		ck_assert_int_eq(r, (ssize_t)(sizeof(*oh) + sizeof(struct fuse_write_out)));
		*count = ((const struct fuse_write_out *)(oh + 1))->size;
	}
	fs_donor_put(rx.donor);
	free(rx.flat);
}

/* Two pages: the last of chunk 0 (buffered already) and the first of
 * chunk 1, whose chunk cannot be had once. */
START_TEST(writeback_write_taken_in_part_is_retried)
{
	const uint64_t su = fs->opts.stripe_unit;
	uint64_t ino = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	uint8_t page[BS];
	int err;
	uint32_t count;

	ck_assert_uint_gt(su, BS);
	memset(page, 1, BS);
	ck_assert_int_eq(fs_write(fs, ino, 0, page, BS, false), BS);

	failalloc_arm_calloc(1, sizeof(struct fs_chunk));	/* from write() */
	serve_write(ino, su - BS, 2 * BS, 0, &err, &count);
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(count, BS);
	ck_assert_uint_eq(atomic_load(&ff.wb.n), 0);

	failalloc_arm_calloc(1, sizeof(struct fs_chunk));	/* the write-back */
	serve_write(ino, su - BS, 2 * BS, FUSE_WRITE_CACHE, &err, &count);
	ck_assert_uint_eq(failalloc_failed(), 2);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(count, 2 * BS);
	ck_assert_uint_eq(atomic_load(&ff.wb.n), 0);
}
END_TEST

/* A whole page of chunk 0, then part of the first page of chunk 1, whose
 * bytes are on the device and cannot be read: the write-back's reply is
 * the device's error, and that error is noted. */
START_TEST(writeback_write_refused_by_device_is_an_error)
{
	const uint64_t su = fs->opts.stripe_unit;
	uint64_t ino = tl_mk(fs, FS_ROOT_INO, "f", S_IFREG | 0644);
	uint8_t page[BS];
	int err;
	uint32_t count;

	memset(page, 1, BS);
	ck_assert_int_eq(fs_write(fs, ino, su, page, BS, false), BS);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);

	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 100, -EIO), 0);
	serve_write(ino, su - BS, BS + 100, 0, &err, &count);	/* from write() */
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(count, BS);
	ck_assert_uint_eq(atomic_load(&ff.wb.n), 0);

	serve_write(ino, su - BS, BS + 100, FUSE_WRITE_CACHE, &err, &count);
	ck_assert_int_eq(err, -EIO);
	ck_assert_uint_eq(atomic_load(&ff.wb.n), 1);
	ck_assert_uint_eq(ff.wb.e[0].ino, ino);
	ck_assert_int_eq(ff.wb.e[0].err, -EIO);

	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 0, 0), 0);
	/* Until a writer closes the file, its write-back at or past the
	 * refusal is refused too (no hole in what is stored), not before it,
	 * and a write() is served. */
	serve_write(ino, su, BS, FUSE_WRITE_CACHE, &err, &count);
	ck_assert_int_eq(err, -EIO);
	serve_write(ino, 0, BS, FUSE_WRITE_CACHE, &err, &count);
	ck_assert_int_eq(err, 0);
	serve_write(ino, su - BS, BS + 100, 0, &err, &count);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(count, BS + 100);
	atomic_store(&ff.wb.n, 0);	/* what a writer's close does */
	ck_assert_int_eq(fs_release(fs, ino), 0);
	serve_write(ino, su - BS, BS + 100, FUSE_WRITE_CACHE, &err, &count);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(count, BS + 100);
}
END_TEST

/* The table of unseen errors holds one per inode, the first; when full, a
 * further inode's error is not noted (it reaches its writer at fsync() or
 * close()) and the table keeps what it has. */
START_TEST(wb_error_table_full)
{
	for (uint64_t i = 0; i < FUSEFS_WB_ERRORS; i++) {
		fusefs_wb_error_note(&ff, 100 + i, 0, -ENOSPC);
		fusefs_wb_error_note(&ff, 100 + i, 0, -EIO);
	}
	ck_assert_uint_eq(atomic_load(&ff.wb.n), FUSEFS_WB_ERRORS);
	fusefs_wb_error_note(&ff, 100 + FUSEFS_WB_ERRORS, 0, -EIO);
	ck_assert_uint_eq(atomic_load(&ff.wb.n), FUSEFS_WB_ERRORS);
	for (unsigned i = 0; i < FUSEFS_WB_ERRORS; i++) {
		ck_assert_uint_eq(ff.wb.e[i].ino, 100 + i);
		ck_assert_int_eq(ff.wb.e[i].err, -ENOSPC);
	}
}
END_TEST

/* The room kept for the kernel's dirty pages (fusefs_space_check): none
 * while no handle may dirty the cache (or the write-back cache is off),
 * all of the reserve while one may, the lower cap once space has been low
 * under it for the kernel's write-back time (never when that is unknown
 * or the cap could not be set). */
START_TEST(dirty_keep_follows_the_cache_writers)
{
	const uint64_t cap = 16u << 20, drain = 36000000000ull;
	struct fusefs_keep_in k = { .wbc = true, .drain_ns = drain, .low_cap = cap };
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), 0);
	k.cached_writers = 2;
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), UINT64_MAX);
	k.low_capped = true;
	k.low_for_ns = drain - 1;
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), UINT64_MAX);
	k.low_for_ns = drain;
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), cap);
	k.drain_ns = 0;
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), UINT64_MAX);
	k.drain_ns = drain;
	k.low_capped = false;
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), UINT64_MAX);
	k.wbc = false;
	ck_assert_uint_eq(fusefs_dirty_keep_rule(&k), 0);

	/* applied to the fs by the check, from the handles counted */
	atomic_store(&fs->dirty_reserve, 8u << 20);
	ff.wbc = true;
	fusefs_space_check(&ff);
	ck_assert_uint_eq(fs_dirty_keep(fs), 0);
	atomic_store(&ff.cached_writers, 1);
	fusefs_space_check(&ff);
	ck_assert_uint_eq(fs_dirty_keep(fs), 8u << 20);
	atomic_store(&ff.cached_writers, 0);
	fusefs_space_check(&ff);
	ck_assert_uint_eq(fs_dirty_keep(fs), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fusefs_write");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, writeback_write_taken_in_part_is_retried);
	tcase_add_test(tc, writeback_write_refused_by_device_is_an_error);
	tcase_add_test(tc, wb_error_table_full);
	tcase_add_test(tc, dirty_keep_follows_the_cache_writers);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
