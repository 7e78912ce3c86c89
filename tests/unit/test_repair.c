/* Unit tests of the repairing fsck (fs_fsck, fs/fs_repair.c) and of the
 * mount's read-only fallback, on the emulated device (no FUSE, no root):
 *   - a clean file system is clean for -n, -p and -y, and nothing is written;
 *   - a damaged record in the log tail: the plain mount comes up read-only
 *     with the state before it and says so in one line; -p refuses and
 *     writes nothing; -y repairs, keeps the valid records after the damage
 *     and leaves a writable, clean file system;
 *   - a lost zone header: mounted (read-only), and -y makes it whole;
 *   - a wrong link count and an inode with no name: -n reports them, -p
 *     repairs them (the file into /lost+found with its bytes);
 *   - an extent beyond its zone's write pointer: only -y drops it, and says
 *     how many bytes.
 */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/zf_common.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"	/* damage a state in memory, then snapshot it */
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void setup(void)
{
	tl_dev_make(&td, "repair", 16, 1u << 20, 0);
	tl_dev_open(&td, &dev);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)((i * 2654435761u + seed * 7919u) >> 10);
}

static uint64_t mkfile(struct fs *f, uint64_t parent, const char *name, size_t len, uint32_t seed)
{
	uint8_t *b = malloc(len + 1);
	uint64_t ino = tl_mk(f, parent, name, S_IFREG | 0644);
	fill(b, len, seed);
	ck_assert_int_eq(fs_write(f, ino, 0, b, len, false), (ssize_t)len);
	free(b);
	return ino;
}

static bool has_content(struct fs *f, uint64_t parent, const char *name, size_t len, uint32_t seed)
{
	struct stat st;
	if (fs_lookup(f, parent, name, &st))
		return false;
	fs_forget(f, st.st_ino, 1);
	uint8_t *got = malloc(len + 1), *want = malloc(len + 1);
	fill(want, len, seed);
	bool ok = (size_t)st.st_size == len && fs_read(f, st.st_ino, 0, len, got) == (ssize_t)len &&
		  memcmp(got, want, len) == 0;
	free(got);
	free(want);
	return ok;
}

static int nlines;
static char lines[16][700];

static void collect(void *arg, const char *fmt, ...)
{
	va_list ap;
	(void)arg;
	if (nlines < 16) {
		va_start(ap, fmt);
		vsnprintf(lines[nlines], sizeof(lines[0]), fmt, ap);
		va_end(ap);
	}
	nlines++;
}

static bool reported(const char *what)
{
	for (int i = 0; i < nlines && i < 16; i++)
		if (strstr(lines[i], what))
			return true;
	return false;
}

static struct fs_fsck_result fsck(enum fs_fsck_mode mode)
{
	struct fs_fsck_result r;
	nlines = 0;
	ck_assert_int_eq(fs_fsck(dev, mode, false, collect, NULL, &r), 0);
	return r;
}

/* Close the fs without the unmount snapshot (a crash after the fsyncs). */
static void crash(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);
	fs = NULL;
	zdev_close(dev);
	tl_dev_open(&td, &dev);
}

/* The open meta zone and its write pointer (bytes, absolute). */
static uint64_t log_tail(uint32_t *zone)
{
	struct zdev_zone z[4];
	ck_assert_int_eq(zdev_report_zones(dev, 0, 4, z), 4);
	for (uint32_t i = 0; i < 4; i++)
		if (zdev_zone_open_cond(&z[i]) || z[i].cond == ZDEV_COND_CLOSED) {
			*zone = i;
			return z[i].wp;
		}
	ck_abort_msg("no open meta zone");
	return 0;
}

/* Zero the block at device offset `at` (its zone rewritten around it). */
static void zero_block(uint64_t at)
{
	const struct zdev_geometry *g = zdev_geometry(dev);
	uint32_t zi = (uint32_t)(at / g->zone_size);
	struct zdev_zone z;
	ck_assert_int_eq(zdev_report_zones(dev, zi, 1, &z), 1);
	uint64_t len = zdev_zone_full(&z) ? z.capacity : z.wp - z.start;
	uint8_t *b = zdev_buf_alloc(g->zone_size);
	ck_assert_int_eq(zdev_read(dev, z.start, b, len), (ssize_t)len);
	memset(b + (at - z.start), 0, 4096);
	ck_assert_int_eq(zdev_zone_reset(dev, zi), 0);
	ck_assert_int_eq(zdev_write(dev, z.start, b, len), (ssize_t)len);
	if (zdev_zone_full(&z))
		ck_assert_int_eq(zdev_zone_finish(dev, zi), 0);
	ck_assert_int_eq(zdev_flush(dev), 0);
	zdev_buf_free(b);
}

static bool writable(struct fs *f)
{
	struct stat st;
	int ret = fs_mknod(f, FS_ROOT_INO, "probe", S_IFREG | 0644, 0, NULL, &st);
	if (ret == 0) {
		fs_forget(f, st.st_ino, 1);
		ck_assert_int_eq(fs_unlink(f, FS_ROOT_INO, "probe"), 0);
		return true;
	}
	ck_assert_int_eq(ret, -EROFS);
	return false;
}

START_TEST(clean_is_clean)
{
	mkfile(fs, FS_ROOT_INO, "a", 10000, 1);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	struct zdev_stats before, after;
	zdev_get_stats(dev, &before);
	for (int m = FS_FSCK_CHECK; m <= FS_FSCK_YES; m++) {
		struct fs_fsck_result r = fsck((enum fs_fsck_mode)m);
		ck_assert_int_eq(r.found, 0);
		ck_assert_int_eq(r.fixed, 0);
		ck_assert_int_eq(nlines, 0);
	}
	zdev_get_stats(dev, &after);
	ck_assert_uint_eq(after.bytes_written, before.bytes_written);
	ck_assert_uint_eq(after.resets, before.resets);
}
END_TEST

static int log_errors;
static char log_line[1024];

static int log_hook(enum zf_log_level lvl, const char *msg, void *arg)
{
	(void)arg;
	if (lvl == ZF_LOG_ERROR && strstr(msg, "READ-ONLY")) {
		log_errors++;
		snprintf(log_line, sizeof(log_line), "%s", msg);
	}
	return 0;
}

START_TEST(damaged_record_readonly_then_yes)
{
	uint32_t z;
	char name[16];
	uint64_t start = log_tail(&z);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		uint64_t ino = mkfile(fs, FS_ROOT_INO, name, 5000 + (size_t)i * 100, (uint32_t)i);
		ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	}
	crash();
	/* every fsync is one block: the fourth holds f3's records */
	zero_block(start + 3 * 4096);

	zf_log_set_hook(log_hook, NULL);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	zf_log_set_hook(NULL, NULL);
	ck_assert_int_eq(log_errors, 1);
	ck_assert_ptr_nonnull(strstr(log_line, "fsck.zonefuse -y"));
	ck_assert(!writable(fs));
	ck_assert(has_content(fs, FS_ROOT_INO, "f2", 5200, 2));
	ck_assert(!has_content(fs, FS_ROOT_INO, "f4", 5400, 4));	/* after the damage */
	fs_unmount(fs);
	fs = NULL;

	struct fs_fsck_result r = fsck(FS_FSCK_CHECK);
	ck_assert_int_gt(r.found, 0);
	ck_assert(reported("[log-damaged]"));
	struct zdev_stats before, after;
	zdev_get_stats(dev, &before);
	r = fsck(FS_FSCK_PREEN);
	ck_assert(r.needs_yes);
	ck_assert_int_eq(r.fixed, 0);
	zdev_get_stats(dev, &after);
	ck_assert_uint_eq(after.bytes_written, before.bytes_written);

	r = fsck(FS_FSCK_YES);
	ck_assert_int_gt(r.fixed, 0);
	ck_assert_int_eq(r.left, 0);
	ck_assert_int_eq(fsck(FS_FSCK_CHECK).found, 0);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	ck_assert(writable(fs));
	/* the valid records after the damage are kept */
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		if (i != 3)
			ck_assert_msg(has_content(fs, FS_ROOT_INO, name, 5000 + (size_t)i * 100,
						  (uint32_t)i), "%s", name);
	}
}
END_TEST

START_TEST(lost_header_rebuilt)
{
	for (int i = 0; i < 5; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g%d", i);
		mkfile(fs, FS_ROOT_INO, name, 3000, (uint32_t)(40 + i));
	}
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	uint32_t z;
	uint64_t wp = log_tail(&z);
	(void)wp;
	zero_block((uint64_t)z * zdev_geometry(dev)->zone_size);	/* the zone header */
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	ck_assert(!writable(fs));
	ck_assert(has_content(fs, FS_ROOT_INO, "g4", 3000, 44));
	fs_unmount(fs);
	fs = NULL;
	struct fs_fsck_result r = fsck(FS_FSCK_YES);
	ck_assert_int_gt(r.fixed, 0);
	ck_assert(!r.recreated);
	ck_assert_int_eq(fsck(FS_FSCK_CHECK).found, 0);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	ck_assert(writable(fs));
	for (int i = 0; i < 5; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g%d", i);
		ck_assert(has_content(fs, FS_ROOT_INO, name, 3000, (uint32_t)(40 + i)));
	}
}
END_TEST

START_TEST(preen_fixes_links_and_orphans)
{
	uint64_t d = tl_mk(fs, FS_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t a = mkfile(fs, d, "a", 7000, 5);
	uint64_t b = mkfile(fs, d, "b", 9000, 6);
	ck_assert_int_eq(fs_sync(fs), 0);
	/* a state the live code never makes, snapshotted by the unmount */
	pthread_mutex_lock(&fs->lock);
	fs_inode_get(fs, a)->nlink = 3;
	fs_dirent_remove(fs, fs_inode_get(fs, d), fs_dirent_find(fs, d, "b"));
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;

	struct fs_fsck_result r = fsck(FS_FSCK_CHECK);
	ck_assert_int_ge(r.found, 2);
	ck_assert(reported("[link-count] file /d/a: link count 3, 1 expected"));
	ck_assert(reported("[unreachable]"));
	r = fsck(FS_FSCK_PREEN);
	ck_assert(!r.needs_yes);
	ck_assert_int_eq(r.fixed, r.found);
	ck_assert_int_eq(r.left, 0);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, a, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 1);
	uint64_t lf = 0;
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "lost+found", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	lf = st.st_ino;
	char name[32];
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)b);
	ck_assert(has_content(fs, lf, name, 9000, 6));
	ck_assert(has_content(fs, d, "a", 7000, 5));
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, tl_fsck_print, NULL), 0);
}
END_TEST

/* A directory removed while the kernel still holds it (an open handle, a
 * cwd) keeps its inode with no link until released; a crash then leaves
 * it in the log.  That is a state the live file system makes and the
 * mount frees, so fsck finds nothing: no link count to "fix" (which would
 * keep an unnamed directory for good). */
START_TEST(directory_removed_while_open_is_no_problem)
{
	struct stat st;
	uint64_t d = tl_mk(fs, FS_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t f = mkfile(fs, FS_ROOT_INO, "f", 5000, 3);

	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "d", &st), 0);	/* held */
	ck_assert_uint_eq(st.st_ino, d);
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "f", &st), 0);
	ck_assert_int_eq(fs_rmdir(fs, FS_ROOT_INO, "d"), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "f"), 0);
	ck_assert_int_eq(fs_sync(fs), 0);
	/* a snapshot now writes both held inodes, with no link */
	pthread_mutex_lock(&fs->lock);
	ck_assert_int_eq(mlog_snapshot(fs->mlog, fs_emit_snapshot, fs), 0);
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_sync(fs), 0);
	crash();

	struct fs_fsck_result r = fsck(FS_FSCK_CHECK);
	ck_assert_msg(r.found == 0, "%d problem(s), first: %s", r.found, nlines ? lines[0] : "");
	r = fsck(FS_FSCK_PREEN);
	ck_assert_int_eq(r.found, 0);
	ck_assert_int_eq(fs_check(dev, false, tl_fsck_print, NULL), 0);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	ck_assert_int_eq(fs_getattr(fs, d, &st), -ENOENT);	/* freed by the mount */
	ck_assert_int_eq(fs_getattr(fs, f, &st), -ENOENT);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
}
END_TEST

/* A file unlinked while the kernel still holds it keeps its inode until
 * the last reference goes; then its extents are dropped with no record of
 * their own and its zones reset at the next commit.  A crash before the
 * next snapshot replays one taken while it was held: an inode with no link
 * whose extents lie in zones since reset.  The mount frees it without reading them, so fsck finds
 * nothing (it used to report them as bad extents and lost bytes). */
START_TEST(file_freed_after_unlink_is_no_problem)
{
	struct stat st;
	uint64_t f = mkfile(fs, FS_ROOT_INO, "f", 3u << 20, 4);

	ck_assert_int_eq(fs_fsync(fs, f, false), 0);
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "f", &st), 0);	/* held */
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "f"), 0);
	/* a snapshot now writes the held inode, with no link and its extents */
	pthread_mutex_lock(&fs->lock);
	ck_assert_int_eq(mlog_snapshot(fs->mlog, fs_emit_snapshot, fs), 0);
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_sync(fs), 0);
	uint64_t resets = tl_stats(fs).zone_resets;
	fs_forget(fs, f, 1);			/* the last reference: freed */
	ck_assert_int_eq(fs_sync(fs), 0);	/* its full zones reset */
	ck_assert_uint_gt(tl_stats(fs).zone_resets, resets);
	crash();

	struct fs_fsck_result r = fsck(FS_FSCK_CHECK);
	ck_assert_msg(r.found == 0, "%d problem(s), first: %s", r.found, nlines ? lines[0] : "");
	ck_assert_uint_eq(r.lost_bytes, 0);
	ck_assert_int_eq(fs_check(dev, false, tl_fsck_print, NULL), 0);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	ck_assert_int_eq(fs_getattr(fs, f, &st), -ENOENT);	/* freed by the mount */
	ck_assert(writable(fs));
}
END_TEST

START_TEST(bad_extent_needs_yes)
{
	uint64_t a = mkfile(fs, FS_ROOT_INO, "a", 8192, 9);
	ck_assert_int_eq(fs_sync(fs), 0);
	/* a second extent past the write pointer of the first one's zone */
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, a);
	struct extmap_cur c;
	const struct extmap_ext *e = extmap_seek(&in->map, 0, &c);
	ck_assert_ptr_nonnull(e);
	uint64_t dev_end = e->dev + e->len + 64 * 4096;
	ck_assert_int_eq(extmap_set(&in->map, 8192, 8192, dev_end, NULL, NULL), 0);
	in->size = 16384;
	pthread_mutex_unlock(&fs->lock);
	fs->valid_counted = false;	/* the allocator never saw it: do not uncount it */
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;

	struct fs_fsck_result r = fsck(FS_FSCK_PREEN);
	ck_assert(r.needs_yes);
	ck_assert(reported("[bad-extent] file /a: bytes 8192-16384"));	/* by path */
	/* and why: the zone's write pointer against the extent's place */
	char why[96];
	uint64_t zsz = zdev_geometry(dev)->zone_size;
	snprintf(why, sizeof(why), "written up to +%llu, the extent at +%llu)",
		 (unsigned long long)((dev_end - 64 * 4096) % zsz),
		 (unsigned long long)(dev_end % zsz));
	ck_assert_msg(reported(why), "want \"%s\" in: %s", why, nlines ? lines[0] : "");
	r = fsck(FS_FSCK_YES);
	ck_assert_uint_eq(r.lost_bytes, 8192);
	ck_assert_int_eq(r.left, 0);
	ck_assert_int_eq(tl_mount(dev, 16u << 20, false, &fs), 0);
	ck_assert(writable(fs));
	uint8_t buf[16384], want[8192];
	fill(want, sizeof(want), 9);
	ck_assert_int_eq(fs_read(fs, a, 0, sizeof(buf), buf), 16384);
	ck_assert_int_eq(memcmp(buf, want, 8192), 0);
	for (size_t i = 8192; i < sizeof(buf); i++)
		ck_assert_int_eq(buf[i], 0);	/* a hole now */
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("repair");
	TCase *tc = tcase_create("fsck");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, clean_is_clean);
	tcase_add_test(tc, damaged_record_readonly_then_yes);
	tcase_add_test(tc, lost_header_rebuilt);
	tcase_add_test(tc, preen_fixes_links_and_orphans);
	tcase_add_test(tc, directory_removed_while_open_is_no_problem);
	tcase_add_test(tc, file_freed_after_unlink_is_no_problem);
	tcase_add_test(tc, bad_extent_needs_yes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tl_run(suite());
}
