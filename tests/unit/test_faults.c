/* Fault injection against the fs core through the emulator
 * (zdev_emu_inject_fault): failing data and metadata writes, failing
 * flushes, failing zone resets, failing reads, at every point of a small
 * workload in turn.  What must hold each time:
 *   - the error reaches the caller (a write, fsync or sync returns < 0 when
 *     its I/O failed; nothing reports success for data that is not there);
 *   - the file system keeps serving: once the device works again, new
 *     writes and fsyncs succeed and unmount is clean;
 *   - fsck finds nothing wrong, and after a remount every file fsync'ed
 *     successfully holds its data; files whose fsync failed hold only bytes
 *     that were written to them (or zeros).
 * Also: ENOSPC on a full device and on full metadata zones; log first:
 * a truncate, punch, set-id drop or extent whose record cannot be appended
 * (log full, no memory) changes nothing, and what memory shows is what a
 * replay of the log shows (the out-of-memory cases use failalloc.h).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/zf_common.h"
#include "failalloc.h"
#include "fs/fs.h"
#include "fs/fs_internal.h"
#include "testlib.h"

static struct tl_dev td;
static struct zdev *dev;
static struct fs *fs;

static void make_dev(uint32_t zones, uint64_t zone_size, uint32_t max_active)
{
	tl_dev_create(&td, "faults", zones, zone_size, max_active);
}

static void open_dev(void)
{
	tl_dev_open(&td, &dev);
}

static int try_mount(void)
{
	return tl_mount(dev, 32ull << 20, false, &fs);
}

static void setup(void)
{
	make_dev(24, 4u << 20, 8);
	open_dev();
	ck_assert_int_eq(fs_mkfs(dev, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
}

static void teardown(void)
{
	tl_teardown(&td, &dev, &fs);
}

static void report(void *arg, const char *fmt, ...)
{
	va_list ap;
	(void)arg;
	va_start(ap, fmt);
	fprintf(stderr, "fsck: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void clear_faults(void)
{
	for (int k = 0; k < ZDEV_FAULT_NR; k++)
		ck_assert_int_eq(zdev_emu_inject_fault(dev, (enum zdev_fault_kind)k, 0, 0, 0), 0);
}

static uint8_t byte_at(uint32_t seed, uint64_t off)
{
	return (uint8_t)(((off * 2654435761u) >> 9) + seed * 77 + 1);
}

static void fill(uint8_t *b, size_t n, uint64_t off, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = byte_at(seed, off + i);
}

/* ---- the workload and its model -------------------------------------- */

#define NF 8
struct mfile {
	char name[32];
	uint64_t ino;
	uint32_t seed;
	uint64_t size;		/* bytes written */
	bool exists;		/* has its name (as far as we asked) */
	bool acked;		/* an fsync after the last write returned 0 */
	bool touched_after;	/* written, renamed or unlinked after that */
};
static struct mfile mf[NF];
static int nerrors;	/* calls that returned an error */

static int note(int ret)
{
	if (ret < 0)
		nerrors++;
	return ret;
}

/* Create, write, fsync, rename, unlink, sync: every call may fail while a
 * fault is armed; the model records what was acknowledged. */
static void workload(int round)
{
	uint8_t *buf = malloc(1 << 20);
	for (int i = 0; i < NF; i++) {
		struct mfile *m = &mf[i];
		struct stat st;
		if (!m->exists) {
			snprintf(m->name, sizeof(m->name), "w%d_%d", round, i);
			if (note(fs_mknod(fs, FS_ROOT_INO, m->name, S_IFREG | 0644, 0, NULL, &st)))
				continue;
			fs_forget(fs, st.st_ino, 1);
			m->ino = st.st_ino;
			m->seed = (uint32_t)(round * 100 + i + 1);
			m->size = 0;
			m->exists = true;
			m->acked = false;
			m->touched_after = false;
		}
		size_t n = (size_t)(i % 3 == 0 ? (300 << 10) - 5 : 30000 + i * 4099);
		fill(buf, n, m->size, m->seed);
		ssize_t w = fs_write(fs, m->ino, m->size, buf, n, false);
		note((int)ZF_MIN(w, 0));
		if (w > 0) {
			m->size += (uint64_t)w;
			if (m->acked)
				m->touched_after = true;
		}
		if (i % 2 == 0) {
			int r = note(fs_fsync(fs, m->ino, i % 4 == 2));
			if (r == 0 && w == (ssize_t)n) {
				m->acked = true;
				m->touched_after = false;
			}
		}
	}
	/* names: rename one, unlink one */
	char nn[24];
	snprintf(nn, sizeof(nn), "r%d", round);
	if (mf[1].exists && note(fs_rename(fs, FS_ROOT_INO, mf[1].name, FS_ROOT_INO, nn, 0)) == 0) {
		snprintf(mf[1].name, sizeof(mf[1].name), "%s", nn);
		mf[1].touched_after = true;
	}
	if (mf[3].exists && note(fs_unlink(fs, FS_ROOT_INO, mf[3].name)) == 0)
		mf[3].exists = false;
	note(fs_sync(fs));
	free(buf);
}

/* After the faults: unmount clean, fsck clean, remount, check the model. */
static void check_after(void)
{
	uint8_t *buf = malloc(4 << 20);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	zdev_close(dev);
	open_dev();
	ck_assert_int_eq(try_mount(), 0);
	struct stat st;
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "base", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_read(fs, st.st_ino, 0, 300000, buf), 300000);
	uint8_t *want = malloc(4 << 20);
	fill(want, 300000, 0, 999);
	ck_assert(memcmp(buf, want, 300000) == 0);
	for (int i = 0; i < NF; i++) {
		struct mfile *m = &mf[i];
		if (!m->exists)
			continue;
		int r = fs_lookup(fs, FS_ROOT_INO, m->name, &st);
		if (r) {
			ck_assert_msg(!(m->acked && !m->touched_after),
				      "%s: fsync'ed file lost its name", m->name);
			continue;
		}
		fs_forget(fs, st.st_ino, 1);
		ck_assert_uint_eq(st.st_ino, m->ino);
		uint64_t size = (uint64_t)st.st_size;
		if (m->acked && !m->touched_after)
			ck_assert_uint_eq(size, m->size);
		ck_assert_uint_le(size, m->size);
		ssize_t got = fs_read(fs, m->ino, 0, (size_t)size, buf);
		ck_assert_int_eq(got, (ssize_t)size);
		fill(want, (size_t)size, 0, m->seed);
		if (memcmp(buf, want, (size_t)size) == 0)
			continue;
		for (uint64_t k = 0; k < size; k++) {
			if (buf[k] == want[k])
				continue;
			/* zeros only where an unacknowledged write did not land */
			if (buf[k] == 0 && !(m->acked && !m->touched_after))
				continue;
			ck_abort_msg("%s: byte %llu is 0x%02x, written 0x%02x (acked %d)", m->name,
				     (unsigned long long)k, buf[k], want[k], m->acked);
		}
	}
	free(want);
	free(buf);
}

static void base_file(void)
{
	uint8_t *buf = malloc(300000);
	struct stat st;
	fill(buf, 300000, 0, 999);
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, "base", S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_write(fs, st.st_ino, 0, buf, 300000, false), 300000);
	ck_assert_int_eq(fs_fsync(fs, st.st_ino, false), 0);
	free(buf);
	memset(mf, 0, sizeof(mf));
	nerrors = 0;
}

/* The device works again: the fs must take new work, and the first round
 * of it may still report what failed before (at most one error per call
 * kind); a second round must be clean. */
static void keeps_serving(void)
{
	clear_faults();
	workload(90);
	nerrors = 0;
	workload(91);
	ck_assert_msg(nerrors == 0, "%d calls still fail after the faults were cleared", nerrors);
}

static void sweep(enum zdev_fault_kind kind, int skip, int count, int err)
{
	base_file();
	ck_assert_int_eq(zdev_emu_inject_fault(dev, kind, (uint32_t)skip, (uint32_t)count, err), 0);
	workload(1);
	workload(2);
	int errs = nerrors;
	keeps_serving();
	check_after();
	/* the very first write or flush failed: some caller must have been
	 * told (reset failures happen in reclaim, no caller waits for them) */
	if (skip == 0 && kind != ZDEV_FAULT_RESET)
		ck_assert_msg(errs > 0, "an injected fault was not reported to any caller");
}

START_TEST(write_fault_sweep)
{
	sweep(ZDEV_FAULT_WRITE, _i * 3, 1, -EIO);
}
END_TEST

START_TEST(write_fault_burst)
{
	sweep(ZDEV_FAULT_WRITE, _i * 7, 6, -EIO);
}
END_TEST

START_TEST(flush_fault_sweep)
{
	sweep(ZDEV_FAULT_FLUSH, _i, 1, -EIO);
}
END_TEST

START_TEST(reset_fault_sweep)
{
	/* resets happen when zones are reclaimed: delete data first */
	sweep(ZDEV_FAULT_RESET, _i, 2, -EIO);
}
END_TEST

START_TEST(nospace_write_fault)
{
	sweep(ZDEV_FAULT_WRITE, _i * 5 + 1, 1, -ENOSPC);
}
END_TEST

/* Every fsync whose data write failed must report it: fail every data write
 * for a while and check nothing was acknowledged. */
START_TEST(fsync_reports_write_errors)
{
	base_file();
	uint8_t *buf = malloc(1 << 20);
	struct stat st;
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, "x", S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	fill(buf, 1 << 20, 0, 5);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 0, 1000000, -EIO), 0);
	ssize_t w = fs_write(fs, st.st_ino, 0, buf, 1 << 20, false);
	int r = fs_fsync(fs, st.st_ino, false);
	ck_assert_msg(w < 0 || r < 0, "write %zd + fsync %d succeeded with every device write failing", w, r);
	/* a second fsync must not claim success for the data that was lost */
	r = fs_fsync(fs, st.st_ino, false);
	uint64_t errs = zf_log_error_count();
	clear_faults();
	if (r == 0) {
		/* acceptable only if the data is really there now */
		ck_assert_int_eq(fs_read(fs, st.st_ino, 0, 1 << 20, buf), 1 << 20);
		uint8_t *want = malloc(1 << 20);
		fill(want, 1 << 20, 0, 5);
		ck_assert(memcmp(buf, want, 1 << 20) == 0);
		free(want);
	}
	(void)errs;
	memset(mf, 0, sizeof(mf));
	keeps_serving();
	check_after();
	free(buf);
}
END_TEST

/* kill -9 leaves the log ending in records the daemon wrote but never
 * flushed, and the next mount acts on what it replayed: it resets the
 * zones whose data those records freed.  A power loss during that mount
 * must not bring a file back into a reset zone: the mount makes the
 * replayed records durable before it resets anything. */
START_TEST(mount_flushes_what_it_replayed_before_resets)
{
	struct stat st;
	uint8_t *buf = malloc(1 << 20), *got = malloc(1 << 20);
	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(got);
	fill(buf, 1 << 20, 0, 11);
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, "a", S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_write(fs, st.st_ino, 0, buf, 1 << 20, false), 1 << 20);
	ck_assert_int_eq(fs_fsync(fs, st.st_ino, false), 0);

	/* the unlink's record written, the flush after it failing, then the
	 * daemon gone without a power loss (nothing works on this handle) */
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "a"), 0);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_FLUSH, 1, 1000000, -EIO), 0);
	ck_assert_int_lt(fs_sync(fs), 0);
	for (int k = 0; k < ZDEV_FAULT_NR; k++)
		ck_assert_int_eq(zdev_emu_inject_fault(dev, (enum zdev_fault_kind)k, 0,
						       1000000, -EIO), 0);
	fs_unmount(fs);		/* fails: every I/O does; frees */
	fs = NULL;
	zdev_close(dev);

	/* a mount whose flushes fail, then the power lost */
	open_dev();
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_FLUSH, 0, 1000000, -EIO), 0);
	ck_assert_int_lt(try_mount(), 0);
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	zdev_close(dev);

	/* the unlink was never durable: "a" is back, whole */
	open_dev();
	tl_fsck_clean(dev);
	ck_assert_int_eq(try_mount(), 0);
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "a", &st), 0);
	ck_assert_int_eq(fs_read(fs, st.st_ino, 0, 1 << 20, got), 1 << 20);
	ck_assert(memcmp(buf, got, 1 << 20) == 0);
	free(buf);
	free(got);
}
END_TEST

/* Reads failing: reads report it, mount fails cleanly, nothing leaks. */
START_TEST(read_faults)
{
	base_file();
	uint8_t *buf = malloc(300000);
	struct stat st;
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "base", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	/* mount with the n-th read failing: an error or a good mount */
	for (int skip = 0; skip < 12; skip++) {
		ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, (uint32_t)skip, 1, -EIO), 0);
		int r = try_mount();
		if (r == 0) {
			ssize_t n = fs_read(fs, st.st_ino, 0, 300000, buf);
			ck_assert(n == 300000 || n == -EIO);
			fs_unmount(fs);
			fs = NULL;
		} else {
			ck_assert_int_lt(r, 0);
		}
		clear_faults();
	}
	ck_assert_int_eq(try_mount(), 0);
	/* The file-range path (spliced READ replies) declines while a read
	 * fault is armed, so the copy path meets the fault and reports it. */
	struct fs_rbuf rb;
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 1, -EIO), 0);
	ck_assert_int_eq(fs_read_buf(fs, st.st_ino, 4096, 8192, FS_READ_FD, &rb), -EIO);
	ck_assert(!rb.at_fd);
	fs_rbuf_put(&rb);
	clear_faults();
	ck_assert_int_eq(fs_read_buf(fs, st.st_ino, 4096, 8192, FS_READ_FD, &rb), 8192);
	ck_assert(rb.at_fd);
	fs_rbuf_put(&rb);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 1, -EIO), 0);
	ck_assert_int_eq(fs_read(fs, st.st_ino, 0, 300000, buf), -EIO);
	clear_faults();
	ck_assert_int_eq(fs_read(fs, st.st_ino, 0, 300000, buf), 300000);
	uint8_t *want = malloc(300000);
	fill(want, 300000, 0, 999);
	ck_assert(memcmp(buf, want, 300000) == 0);
	free(want);
	free(buf);
	check_after();
}
END_TEST

/* mkfs with failing resets or writes: an error, never a half-formatted
 * device that mounts. */
START_TEST(mkfs_faults)
{
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	struct fs_mkfs_opts o = { .force = true };
	for (int kind = 0; kind < ZDEV_FAULT_NR; kind++) {
		for (int skip = 0; skip < 6; skip++) {
			ck_assert_int_eq(zdev_emu_inject_fault(dev, (enum zdev_fault_kind)kind,
							       (uint32_t)skip, 1, -EIO), 0);
			int r = fs_mkfs(dev, &o);
			clear_faults();
			if (r == 0) {
				ck_assert_int_eq(try_mount(), 0);
				ck_assert_int_eq(fs_unmount(fs), 0);
				fs = NULL;
			}
		}
	}
	ck_assert_int_eq(fs_mkfs(dev, &o), 0);
	ck_assert_int_eq(try_mount(), 0);
}
END_TEST

/* The device fills up: ENOSPC to the caller, fsck clean, space comes back
 * after deleting. */
START_TEST(device_full)
{
	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);	/* as the daemon: GC, committer */
	uint8_t *buf = malloc(1 << 20);
	memset(buf, 0x3C, 1 << 20);
	struct stat st;
	char name[32];
	int files = 0;
	ssize_t w = 0;
	for (int i = 0; i < 200 && w >= 0; i++) {
		snprintf(name, sizeof(name), "big%d", i);
		if (fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st))
			break;
		fs_forget(fs, st.st_ino, 1);
		files++;
		for (int k = 0; k < 8 && w >= 0; k++)
			w = fs_write(fs, st.st_ino, (uint64_t)k << 20, buf, 1 << 20, false);
		if (w >= 0 && fs_fsync(fs, st.st_ino, false) < 0)
			break;
	}
	ck_assert_msg(w == -ENOSPC || w >= 0, "write failed with %zd, not ENOSPC", w);
	fs_sync(fs);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);
	for (int i = 0; i < files; i += 2) {
		snprintf(name, sizeof(name), "big%d", i);
		fs_unlink(fs, FS_ROOT_INO, name);
	}
	ck_assert_int_eq(fs_sync(fs), 0);
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, "again", S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	/* Half the data is dead, spread over every zone: new writes need the
	 * collector.  Give it up to 5 s (a writer should wait for it). */
	ssize_t r = 0;
	for (int k = 0, tries = 0; k < 8; ) {
		r = fs_write(fs, st.st_ino, (uint64_t)k << 20, buf, 1 << 20, false);
		if (r == -ENOSPC && ++tries < 50) {
			usleep(100000);
			continue;
		}
		if (r != 1 << 20)
			break;
		k++;
	}
	/* The writer waited for the collector (zalloc keeps a FREE floor zone
	 * for it even when the device filled with valid data). */
	ck_assert_int_eq(r, 1 << 20);
	ck_assert_int_eq(fs_fsync(fs, st.st_ino, false), 0);
	free(buf);
	memset(mf, 0, sizeof(mf));
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
}
END_TEST

/* Metadata zones full: the smallest meta zones and a state that does not
 * fit a snapshot; the caller gets an error (ENOSPC or E2BIG), the fs stays
 * consistent and what was acknowledged survives. */
START_TEST(meta_full)
{
	teardown();
	make_dev(12, 1u << 20, 8);	/* 1 MiB zones: a metadata log of 3 MiB */
	open_dev();
	struct fs_mkfs_opts mo = { .meta_zones = 3 };
	ck_assert_int_eq(fs_mkfs(dev, &mo), 0);
	ck_assert_int_eq(try_mount(), 0);
	char name[64], val[1500];
	memset(val, 'v', sizeof(val));
	int ok = 0, err = 0, acked = 0;
	struct stat st;
	for (int i = 0; i < 20000 && err == 0; i++) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", i);
		err = fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st);
		if (err)
			break;
		fs_forget(fs, st.st_ino, 1);
		err = fs_setxattr(fs, st.st_ino, "user.pad", val, sizeof(val), 0);
		if (err)
			break;
		ok++;
		if (i % 50 == 49) {
			err = fs_sync(fs);
			if (!err)
				acked = ok;
		}
	}
	ck_assert_msg(err == -ENOSPC || err == -E2BIG || err == -EIO,
		      "metadata full: error %d (%s), wanted ENOSPC", err, strerror(-err));
	/* still serving reads and deletes */
	snprintf(name, sizeof(name), "file-with-a-long-name-%06d", 0);
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, name, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	for (int i = 0; i < ok; i += 2) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", i);
		fs_unlink(fs, FS_ROOT_INO, name);
	}
	fs_sync(fs);
	int r = fs_unmount(fs);
	fs = NULL;
	(void)r;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
	/* every file synced before the error is still there (odd ones were
	 * not deleted; even ones may be, depending on whether that committed) */
	for (int i = 1; i < acked; i += 2) {
		snprintf(name, sizeof(name), "file-with-a-long-name-%06d", i);
		ck_assert_msg(fs_lookup(fs, FS_ROOT_INO, name, &st) == 0, "%s lost", name);
		fs_forget(fs, st.st_ino, 1);
	}
	fprintf(stderr, "meta_full: %d files with xattrs, %d acknowledged, then %s\n", ok,
		acked, strerror(-err));
}
END_TEST

/* ---- log first: a change whose record fails changes nothing ----------- */

#define BS 4096u

static uint64_t mkfile(const char *name)
{
	struct stat st;
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, name, S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	return st.st_ino;
}

static void put(uint64_t ino, uint64_t off, size_t n, uint32_t seed)
{
	uint8_t *b = malloc(n);
	fill(b, n, off, seed);
	ck_assert_int_eq(fs_write(fs, ino, off, b, n, false), (ssize_t)n);
	free(b);
}

/* The file reads as `size` bytes, byte_at(seed) in [from, to), zeros
 * elsewhere. */
static void expect(uint64_t ino, uint64_t size, uint64_t from, uint64_t to, uint32_t seed)
{
	struct stat st;
	uint8_t *b = malloc(size + 1);
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, size);
	ck_assert_int_eq(fs_read(fs, ino, 0, size + 1, b), (ssize_t)size);
	for (uint64_t k = 0; k < size; k++) {
		uint8_t want = k >= from && k < to ? byte_at(seed, k) : 0;
		ck_assert_msg(b[k] == want, "byte %llu is 0x%02x, want 0x%02x",
			      (unsigned long long)k, b[k], want);
	}
	free(b);
}

/* A log that takes no record: its tail zone no longer matches its layout
 * (blocks written behind its back at the write pointer), so the next commit
 * finds it broken, and every device write failing from then on, the
 * snapshot that would repair it fails too.  Every append then fails (-EIO),
 * whatever its size or kind (a full log no longer refuses deletes and
 * truncates: they may use the room kept for the next snapshot). */
static void fill_meta_log(void)
{
	uint64_t spare = mkfile("spare");
	ck_assert_int_eq(fs_sync(fs), 0);
	tl_write_behind_log(dev, fs->sb.meta_first, fs->sb.meta_count);
	struct stat st;
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, "breaks", S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	/* the commit's first write finds the zone changed; every later one
	 * (the repairing snapshot's) fails */
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 1, 1u << 30, -EIO), 0);
	ck_assert_int_lt(fs_commit(fs), 0);
	memset(&st, 0, sizeof(st));
	st.st_size = BS;
	ck_assert_int_eq(fs_setattr(fs, spare, &st, FS_SET_SIZE, NULL), -EIO);
}

/* A set-id file (mode 06775) with DIRTY bytes in the write buffer only
 * (3 blocks and a part), then the metadata log made full. */
#define DIRTY (3 * BS + 1000)
/* Bytes admitted by the space check of writes (zalloc_wait_room) that no
 * write has given back: 0 whenever no write is in flight. */
static uint64_t room_held(void)
{
	struct zalloc_stats zs;
	zalloc_get_stats(fs->za, &zs);
	return zs.room_held_bytes;
}

static uint64_t buffered_file_log_full(void)
{
	teardown();
	make_dev(12, 1u << 20, 8);	/* 1 MiB zones: a metadata log of 3 MiB */
	open_dev();
	struct fs_mkfs_opts mo = { .meta_zones = 3 };
	ck_assert_int_eq(fs_mkfs(dev, &mo), 0);
	ck_assert_int_eq(try_mount(), 0);
	struct stat st;
	ck_assert_int_eq(fs_mknod(fs, FS_ROOT_INO, "dirty", S_IFREG | 06775, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	uint64_t ino = st.st_ino;
	ck_assert_int_eq(fs_sync(fs), 0);
	fill_meta_log();
	put(ino, 0, DIRTY, 7);	/* no record: a partial chunk stays buffered */
	expect(ino, DIRTY, 0, DIRTY, 7);
	return ino;
}

/* A truncate whose TRUNCATE record cannot be appended fails and leaves the
 * buffered bytes as they were (nothing is dropped or zeroed before the
 * record is in the log). */
START_TEST(failed_truncate_keeps_buffered_data)
{
	uint64_t ino = buffered_file_log_full();
	struct stat a;
	memset(&a, 0, sizeof(a));
	/* into the middle of a block (its tail would be zeroed), then to a
	 * block boundary (whole pages would be dropped), then to 0 */
	const uint64_t sizes[] = { BS + 904, 2 * BS, 0 };
	for (unsigned k = 0; k < 3; k++) {
		a.st_size = (off_t)sizes[k];
		int r = fs_setattr(fs, ino, &a, FS_SET_SIZE, NULL);
		ck_assert_msg(r < 0, "truncate to %llu with a full log: %d",
			      (unsigned long long)sizes[k], r);
		expect(ino, DIRTY, 0, DIRTY, 7);
	}
}
END_TEST

/* The same for a hole punch: partial edge blocks, whole blocks. */
START_TEST(failed_punch_keeps_buffered_data)
{
	uint64_t ino = buffered_file_log_full();
	const int pm = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	/* [1000, 9000): partial block, one whole block, partial block */
	int r = fs_fallocate(fs, ino, pm, 1000, 8000);
	ck_assert_msg(r < 0, "punch with a full log: %d", r);
	expect(ino, DIRTY, 0, DIRTY, 7);
	r = fs_fallocate(fs, ino, pm, BS, 2 * BS);	/* whole blocks only */
	ck_assert_msg(r < 0, "punch with a full log: %d", r);
	expect(ino, DIRTY, 0, DIRTY, 7);
}
END_TEST

/* A write that has to drop the set-id bits fails when the INODE record
 * with the new mode cannot be appended, and changes neither the mode nor
 * the data. */
START_TEST(failed_setid_drop_keeps_mode_and_data)
{
	uint64_t ino = buffered_file_log_full();
	uint8_t b[100];
	struct stat st;
	memset(b, 0x5A, sizeof(b));
	ssize_t r = fs_write(fs, ino, 100, b, sizeof(b), true);
	ck_assert_msg(r < 0, "write dropping set-id bits with a full log: %zd", r);
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 06775);
	expect(ino, DIRTY, 0, DIRTY, 7);
	ck_assert_uint_eq(room_held(), 0);	/* the failed write's admission ended */
}
END_TEST

/* An fsync whose INODE record cannot be appended fails and leaves the
 * attributes dirty: a later fsync (once the log takes records again) must
 * log them, not report success without them.  (With the log still full
 * that later fsync fails in the commit anyway, so the flag is checked.) */
START_TEST(failed_fsync_attr_stays_dirty)
{
	buffered_file_log_full();
	struct stat st, a;
	ck_assert_int_eq(fs_lookup(fs, FS_ROOT_INO, "spare", &st), 0);
	fs_forget(fs, st.st_ino, 1);
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(fs_setattr(fs, st.st_ino, &a, FS_SET_MTIME_NOW, NULL), 0);
	int r = fs_fsync(fs, st.st_ino, false);
	ck_assert_msg(r < 0, "fsync with a full log: %d", r);
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, st.st_ino);
	bool dirty = in && in->attr_dirty;
	pthread_mutex_unlock(&fs->lock);
	ck_assert_msg(dirty, "attributes not logged but no longer dirty");
}
END_TEST

/* Device byte + 1 of each of the first nblk blocks of ino as the in-memory
 * extent map has it (0 = hole). */
static void map_of(uint64_t ino, uint64_t *dev_of, size_t nblk)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	ck_assert_ptr_nonnull(in);
	for (size_t b = 0; b < nblk; b++) {
		uint64_t off = (uint64_t)b * BS;
		struct extmap_cur c;
		const struct extmap_ext *e = extmap_seek(&in->map, off, &c);
		dev_of[b] = e && e->off <= off ? e->dev + (off - e->off) + 1 : 0;
	}
	pthread_mutex_unlock(&fs->lock);
}

/* Make the next growth of ino's extent map fail; the map's one block must
 * be full (its next set needs a bigger block), so that the growth happens. */
static void arm_map(uint64_t ino, size_t want_n)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	ck_assert_ptr_nonnull(in);
	ck_assert_uint_eq(extmap_count(&in->map), want_n);
	ck_assert_uint_eq(in->map.nblk, 1);
	ck_assert_uint_le(in->map.idxcap, 1);
	ck_assert_uint_gt(want_n + 2, in->map.one.blk->cap);
	failalloc_arm(in->map.one.blk);
	pthread_mutex_unlock(&fs->lock);
}

/* The daemon dies: only what was committed survives; fsck is clean. */
static void crash_remount(void)
{
	ck_assert_int_eq(zdev_emu_power_loss(dev, 0), 0);
	fs_unmount(fs);		/* fails (-EIO): the device is dead; frees */
	fs = NULL;
	zdev_close(dev);
	open_dev();
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
}

/* What memory maps now, with the log committed, is what a replay of the
 * log maps after a crash. */
#define MAPBLK 64
static void log_matches_memory(uint64_t ino)
{
	uint64_t live[MAPBLK], replayed[MAPBLK];
	map_of(ino, live, MAPBLK);
	ck_assert_int_eq(fs_commit(fs), 0);
	crash_remount();
	map_of(ino, replayed, MAPBLK);
	for (unsigned b = 0; b < MAPBLK; b++)
		ck_assert_msg(live[b] == replayed[b],
			      "block %u: memory maps device %llu, the log %llu (+1, 0 = hole)", b,
			      (unsigned long long)live[b], (unsigned long long)replayed[b]);
}

/* The first block of each of the seven extents of a one-block
 * seven_extents() file reads as written. */
static void expect_seven_blocks(uint64_t ino)
{
	for (unsigned k = 0; k < 7; k++) {
		uint8_t b[BS];
		ck_assert_int_eq(fs_read(fs, ino, (uint64_t)k * 2 * BS, BS, b), BS);
		for (unsigned i = 0; i < BS; i++)
			ck_assert_uint_eq(b[i], byte_at(11, (uint64_t)k * 2 * BS + i));
	}
}

/* Seven extents of `blocks` blocks, `blocks` apart (they cannot merge),
 * each written and logged: the map holds 7 entries in an array of 8. */
static uint64_t seven_extents(const char *name, uint32_t blocks)
{
	uint64_t ino = mkfile(name);
	for (unsigned k = 0; k < 7; k++) {
		put(ino, (uint64_t)k * 2 * blocks * BS, blocks * BS, 11);
		ck_assert_int_eq(fs_flush(fs, ino), 0);
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	return ino;
}

/* Bytes ino holds preallocated, and its number of ranges. */
static uint64_t pa_of(uint64_t ino, uint32_t *npa)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	ck_assert_ptr_nonnull(in);
	uint64_t b = in->pa_bytes;
	*npa = in->npa;
	pthread_mutex_unlock(&fs->lock);
	return b;
}

/* fallocate that needs one more preallocated range and finds no memory
 * for it fails with -ENOMEM before its record: nothing is held beyond
 * what was, in memory and after a replay of the log. */
START_TEST(enomem_prealloc_range_log_first)
{
	uint64_t ino = mkfile("pa");
	uint32_t n;
	ck_assert_int_eq(fs_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 0, BS), 0);
	ck_assert_uint_eq(pa_of(ino, &n), BS);
	ck_assert_uint_eq(n, 1);
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	ck_assert_uint_eq(in->pacap, 1);	/* the next range needs a realloc */
	failalloc_arm(in->pa);
	pthread_mutex_unlock(&fs->lock);
	uint64_t held = fs->pa_bytes;
	int r = fs_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 4 * BS, 2 * BS);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(r, -ENOMEM);
	ck_assert_uint_eq(pa_of(ino, &n), BS);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(fs->pa_bytes, held);
	ck_assert_int_eq(fs_commit(fs), 0);
	crash_remount();
	ck_assert_uint_eq(pa_of(ino, &n), BS);
	ck_assert_uint_eq(n, 1);
	/* with memory, the same call works */
	ck_assert_int_eq(fs_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 4 * BS, 2 * BS), 0);
	ck_assert_uint_eq(pa_of(ino, &n), 3 * BS);
	ck_assert_uint_eq(n, 2);
}
END_TEST

/* An fsync whose write-out's extent finds no memory (armed) fails with
 * -ENOMEM; what the log holds is what memory maps. */
static void fsync_enomem_log_agrees(uint64_t ino)
{
	int r = fs_fsync(fs, ino, false);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(r, -ENOMEM);
	log_matches_memory(ino);
	expect_seven_blocks(ino);
}

/* No memory for the extent map when a write-out records its extent: no
 * EXTENT record may reach the log that memory does not apply (its bytes
 * would not count as valid, the zone could be reset under the record). */
START_TEST(enomem_write_extent_log_agrees)
{
	uint64_t ino = seven_extents("x", 1);
	put(ino, 14 * BS, BS, 11);
	arm_map(ino, 7);
	fsync_enomem_log_agrees(ino);
}
END_TEST

/* No memory for a new block of the extent map, when a write-out's extent
 * would split a full one: as above, nothing is logged that memory does
 * not apply, and the write succeeds once memory is back. */
START_TEST(enomem_write_extent_block_split)
{
	uint64_t ino = mkfile("x");
	for (unsigned k = 0; k < EXTMAP_BLK; k++) {	/* one full block of extents */
		put(ino, (uint64_t)k * 2 * BS, BS, 11);
		ck_assert_int_eq(fs_flush(fs, ino), 0);
	}
	ck_assert_int_eq(fs_commit(fs), 0);
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	ck_assert_uint_eq(extmap_count(&in->map), EXTMAP_BLK);
	ck_assert_uint_eq(in->map.nblk, 1);
	ck_assert_int_eq(extmap_reserve(&in->map, 0), 0);	/* no spare block left */
	ck_assert_uint_eq(in->map.nspare, 0);
	pthread_mutex_unlock(&fs->lock);
	put(ino, 3 * BS, BS, 11);	/* a hole between two extents */
	failalloc_arm_calloc(1, EXTMAP_BLK_BYTES);
	fsync_enomem_log_agrees(ino);
	put(ino, 3 * BS, BS, 11);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	log_matches_memory(ino);
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, ino);
	ck_assert_uint_eq(extmap_count(&in->map), EXTMAP_BLK + 1);
	ck_assert_uint_eq(in->map.nblk, 2);
	pthread_mutex_unlock(&fs->lock);
	uint8_t b[BS];
	ck_assert_int_eq(fs_read(fs, ino, 3 * BS, BS, b), BS);
	for (unsigned i = 0; i < BS; i++)
		ck_assert_uint_eq(b[i], byte_at(11, 3 * BS + i));
}
END_TEST

static int count_fn(void *arg, const char *name, const struct stat *st, uint64_t off)
{
	(void)name, (void)st, (void)off;
	++*(int *)arg;
	return 0;
}

/* Entries of directory d, '.' and '..' included. */
static int dir_count(uint64_t d)
{
	int n = 0;
	ck_assert_int_eq(fs_readdir(fs, d, 0, false, count_fn, &n), 0);
	return n;
}

/* No memory for a directory's cookie array when its slots grow: the
 * create fails before anything is logged, the directory lists what it
 * had (the slot array grew, the cookies did not), and the next create,
 * with memory, succeeds. */
START_TEST(enomem_dir_cookies)
{
	struct stat st;
	char name[16];
	ck_assert_int_eq(fs_mkdir(fs, FS_ROOT_INO, "d", 0755, NULL, &st), 0);
	uint64_t d = st.st_ino;
	for (int i = 0; i < 16; i++) {	/* the first 16 slots, full */
		snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(fs_mknod(fs, d, name, S_IFREG | 0644, 0, NULL, &st), 0);
		fs_forget(fs, st.st_ino, 1);
	}
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *di = fs_inode_get(fs, d);
	ck_assert_uint_eq(di->dir->n, di->dir->cap);
	failalloc_arm(di->dir->cookies);
	pthread_mutex_unlock(&fs->lock);
	ck_assert_int_eq(fs_mknod(fs, d, "g", S_IFREG | 0644, 0, NULL, &st), -ENOMEM);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(dir_count(d), 2 + 16);
	ck_assert_int_eq(fs_mknod(fs, d, "g", S_IFREG | 0644, 0, NULL, &st), 0);
	fs_forget(fs, st.st_ino, 1);
	ck_assert_int_eq(dir_count(d), 2 + 17);
	ck_assert_int_eq(fs_commit(fs), 0);
	crash_remount();
	ck_assert_int_eq(dir_count(d), 2 + 17);
}
END_TEST

/* No memory for the extent map when a hole punch splits an extent: the
 * punch either is logged and applied or neither (memory must not keep
 * serving bytes the log has punched). */
START_TEST(enomem_punch_log_agrees)
{
	uint64_t ino = seven_extents("p", 3);	/* blocks [6k, 6k + 3) */
	const int pm = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	/* the middle block of extent 0: a split, 8 entries of 8 */
	ck_assert_int_eq(fs_fallocate(fs, ino, pm, BS, BS), 0);
	arm_map(ino, 8);
	int r = fs_fallocate(fs, ino, pm, 7 * BS, BS);	/* splits extent 1 */
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_msg(r == 0 || r == -ENOMEM, "punch: %d", r);
	uint8_t live[BS], after[BS];
	ck_assert_int_eq(fs_read(fs, ino, 7 * BS, BS, live), BS);
	log_matches_memory(ino);
	ck_assert_int_eq(fs_read(fs, ino, 7 * BS, BS, after), BS);
	ck_assert(memcmp(live, after, BS) == 0);
}
END_TEST

/* No memory for the extent map when the collector re-points a moved
 * extent: as for a write, the EXTENT record and memory agree. */
START_TEST(enomem_gc_repoint_log_agrees)
{
	/* one zone at a time, so that the data below fills one zone */
	struct fs_opts o;
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs_opts_default(&o);
	o.commit_interval_ms = 0;
	o.buffer_bytes = 32ull << 20;
	o.stripe_width = 1;
	ck_assert_int_eq(fs_mount(dev, &o, &fs), 0);
	uint64_t ino = seven_extents("g", 1);
	/* the rest of the (4 MiB) zone: another file's data, then dead */
	uint64_t other = mkfile("other");
	put(other, 0, (4u << 20) - 7 * BS, 3);
	ck_assert_int_eq(fs_fsync(fs, other, false), 0);
	ck_assert_int_eq(fs_unlink(fs, FS_ROOT_INO, "other"), 0);
	ck_assert_int_eq(fs_commit(fs), 0);
	arm_map(ino, 7);
	int r = gc_run_once(fs);
	failalloc_disarm();
	ck_assert_int_ge(r, 0);
	ck_assert_uint_eq(failalloc_failed(), 1);
	log_matches_memory(ino);
	expect_seven_blocks(ino);
}
END_TEST

/* A copy whose COPY record cannot be appended fails and shares nothing:
 * dst stays empty, no block gains a reference, and after a crash the log
 * agrees (fsck checks the reference counts). */
START_TEST(failed_copy_shares_nothing)
{
	uint64_t src = mkfile("src"), dst = mkfile("dst");
	put(src, 0, 4 * BS, 11);
	ck_assert_int_eq(fs_fsync(fs, src, false), 0);
	fill_meta_log();
	ssize_t r = fs_copy_file_range(fs, src, 0, dst, 0, 4 * BS, 0);
	ck_assert_msg(r < 0, "copy with a log that takes no record: %zd", r);
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, dst, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(fs_check_shares(fs, tl_fsck_print, NULL), 0);
	crash_remount();
	ck_assert_int_eq(fs_getattr(fs, dst, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	uint8_t b[BS];
	ck_assert_int_eq(fs_read(fs, src, 3 * BS, BS, b), BS);
	for (unsigned i = 0; i < BS; i++)
		ck_assert_uint_eq(b[i], byte_at(11, 3 * BS + i));
}
END_TEST

/* No memory for dst's extent map when a copy shares a block into it: no
 * COPY record may reach the log that memory does not apply. */
START_TEST(enomem_copy_log_agrees)
{
	uint64_t src = mkfile("src");
	put(src, 0, BS, 11);
	ck_assert_int_eq(fs_fsync(fs, src, false), 0);
	uint64_t dst = seven_extents("x", 1);
	arm_map(dst, 7);
	ssize_t r = fs_copy_file_range(fs, src, 0, dst, 13 * BS, BS, 0);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(r, -ENOMEM);
	ck_assert_int_eq(fs_check_shares(fs, tl_fsck_print, NULL), 0);
	log_matches_memory(dst);
	expect_seven_blocks(dst);
}
END_TEST

/* With no FLUSH, a closed file's buffered bytes are written out by its
 * RELEASE or the write-behind, whose errors the application never sees.
 * After such a failed write-out the bytes (of `seed`) are still buffered:
 * an fsync while the device still fails reports the error, the next one
 * writes them, and they survive a power loss. */
#define CLOSED (3 * BS + 100)
static void failed_writeout_stays_for_fsync(uint64_t ino, uint32_t seed)
{
	expect(ino, CLOSED, 0, CLOSED, seed);
	ck_assert_int_lt(fs_fsync(fs, ino, false), 0);
	clear_faults();
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	crash_remount();
	expect(ino, CLOSED, 0, CLOSED, seed);
}

START_TEST(release_write_error_reaches_fsync)
{
	uint64_t ino = mkfile("closed");
	ck_assert_int_eq(fs_open(fs, ino, O_WRONLY), 0);
	put(ino, 0, CLOSED, 23);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 0, 1000000, -EIO), 0);
	ck_assert_int_lt(fs_release(fs, ino), 0);
	failed_writeout_stays_for_fsync(ino, 23);
}
END_TEST

/* The same with the write-behind (the daemon's default): the close leaves
 * the bytes buffered, the write-behind's write-out fails on the device,
 * and the bytes stay for the fsync, which reports the error, then
 * succeeds once the device works. */
START_TEST(write_behind_error_reaches_fsync)
{
	struct fs_opts o;
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs_opts_default(&o);
	o.buffer_bytes = 32ull << 20;
	o.write_behind_ms = 100;
	ck_assert_int_eq(fs_mount(dev, &o, &fs), 0);
	ck_assert_int_eq(gc_attach(fs), 0);	/* the collector, as the daemon */
	ck_assert_int_eq(fs_start(fs), 0);	/* the committer runs the write-behind */
	uint64_t ino = mkfile("behind");
	ck_assert_int_eq(fs_open(fs, ino, O_WRONLY), 0);
	put(ino, 0, CLOSED, 24);
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_WRITE, 0, 1000000, -EIO), 0);
	ck_assert_int_eq(fs_release(fs, ino), 0);	/* nothing written yet */
	usleep(500000);					/* the write-behind tried and failed */
	failed_writeout_stays_for_fsync(ino, 24);
}
END_TEST

/* No memory for the collector's copy buffer when fs_start starts it: the
 * start fails with -ENOMEM and no thread runs (gc_run_once works); the
 * unmount stops and frees the collector all the same (ASan: no leak, no
 * double free); the next mount starts it. */
START_TEST(enomem_collector_start)
{
	ck_assert_int_eq(gc_attach(fs), 0);
	ck_assert_int_eq(gc_attach(fs), -EBUSY);	/* one per mount */
	failalloc_arm_memalign(4u << 20);		/* GC_BATCH */
	int r = fs_start(fs);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(r, -ENOMEM);
	ck_assert_int_ge(gc_run_once(fs), 0);		/* no thread */
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(try_mount(), 0);
	ck_assert_int_eq(gc_attach(fs), 0);
	ck_assert_int_eq(fs_start(fs), 0);
	ck_assert_int_eq(gc_run_once(fs), -EBUSY);	/* the thread does it */
}
END_TEST

/* No memory for the chunk a donated WRITE payload would become: the write
 * reports -ENOMEM, keeps no reference to the payload and leaves the file
 * as it was; with memory back the same payload is taken and kept. */
START_TEST(enomem_donated_write)
{
	const uint64_t su = fs->opts.stripe_unit;
	uint64_t ino = mkfile("donated");
	uint8_t *got = malloc(su);
	struct fs_donor *d = fs_donor_new(su);
	struct stat st;
	ck_assert_ptr_nonnull(d);
	fill(d->base, su, 0, 21);
	failalloc_arm_calloc(1, sizeof(struct fs_chunk));
	ssize_t r = fs_write_donated(fs, ino, 0, d, su, false);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert_int_eq(r, -ENOMEM);
	ck_assert_uint_eq(atomic_load(&d->refs), 1);
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	ck_assert_int_eq(fs_write_donated(fs, ino, 0, d, su, false), (ssize_t)su);
	ck_assert_uint_eq(atomic_load(&d->refs), 2);
	memcpy(got, d->base, su);
	fs_donor_put(d);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	/* and after a remount, from the device */
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
	uint8_t *back = malloc(su);
	ck_assert_int_eq(fs_read(fs, ino, 0, su, back), (ssize_t)su);
	ck_assert_int_eq(memcmp(back, got, su), 0);
	free(back);
	free(got);
}
END_TEST

/* The first byte of ino's [0, size) that is not byte_at(31) where a page
 * in pages[] was written, or zero elsewhere; size if none. */
static uint64_t first_wrong(uint64_t ino, uint64_t size, const uint64_t *pages, unsigned n)
{
	uint8_t *b = calloc(1, size + 1), *want = calloc(1, size);
	for (unsigned i = 0; i < n; i++)
		fill(want + pages[i], BS, pages[i], 31);
	ck_assert_int_eq(fs_read(fs, ino, 0, size + 1, b), (ssize_t)size);
	uint64_t k = 0;
	while (k < size && b[k] == want[k])
		k++;
	free(b);
	free(want);
	return k;
}

/* No memory to grow a file's array of buffered chunks: a write that
 * reaches a new chunk stops there (a short count, or -ENOMEM when it
 * buffered nothing), the chunks already buffered stay consistent, and the
 * next write, with memory, is buffered; all of it reaches the device. */
START_TEST(enomem_write_chunk_array)
{
	const uint64_t su = fs->opts.stripe_unit;
	uint64_t ino = mkfile("chunks"), pages[64];
	unsigned k = 0;
	struct fs_inode *in;
	uint32_t nchunks, cap;
	ck_assert_uint_gt(su, 2 * BS);
	do {	/* one page at the start of each chunk, until the array is full */
		pages[k] = k * su;
		put(ino, pages[k++], BS, 31);
		pthread_mutex_lock(&fs->lock);
		in = fs_inode_get(fs, ino);
		pthread_mutex_unlock(&fs->lock);
		pthread_rwlock_rdlock(&in->rw);
		nchunks = in->nchunks;
		cap = in->chunks_cap;
		pthread_rwlock_unlock(&in->rw);
	} while (nchunks < cap && k < 60);
	ck_assert_uint_eq(nchunks, cap);
	uint8_t b[2 * BS];
	fill(b, sizeof(b), k * su - BS, 31);
	failalloc_arm(in->chunks);	/* the last page of chunk k-1, then chunk k */
	ck_assert_int_eq(fs_write(fs, ino, k * su - BS, b, 2 * BS, false), BS);
	ck_assert_uint_eq(failalloc_failed(), 1);
	pages[k] = k * su - BS;
	failalloc_arm(in->chunks);	/* only chunk k */
	ck_assert_int_eq(fs_write(fs, ino, k * su, b + BS, BS, false), -ENOMEM);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 2);
	ck_assert_uint_eq(room_held(), 0);	/* short and failed writes gave theirs back */
	struct stat st;
	ck_assert_int_eq(fs_getattr(fs, ino, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, k * su);
	pthread_rwlock_rdlock(&in->rw);
	ck_assert_int_eq(fs_data_check(fs, in), 0);
	ck_assert_uint_eq(in->nchunks, k);
	pthread_rwlock_unlock(&in->rw);
	ck_assert_uint_eq(first_wrong(ino, k * su, pages, k + 1), k * su);
	ck_assert_int_eq(fs_write(fs, ino, k * su, b + BS, BS, false), BS);
	pages[k + 1] = k * su;
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
	ck_assert_uint_eq(first_wrong(ino, k * su + BS, pages, k + 2), k * su + BS);
}
END_TEST

/* ---- read-ahead without memory (fs_prefetch.c) ---------------------- */

#define PF_WIN (64u << 10)

/* Remount with read-ahead windows of PF_WIN bytes (and its threads). */
static void pf_mount(void)
{
	tl_remount_prefetch(dev, 32ull << 20, PF_WIN, &fs);
}

/* A file of `size` bytes (byte_at(seed)), on the device. */
static uint64_t pf_put(const char *name, uint64_t size, uint32_t seed)
{
	uint64_t ino = mkfile(name);
	put(ino, 0, size, seed);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	return ino;
}

/* Read ino's [off, off+n) and compare it with byte_at(seed). */
static void pf_expect(uint64_t ino, uint64_t off, uint64_t n, uint32_t seed)
{
	uint8_t *got = malloc(n), *want = malloc(n);
	fill(want, n, off, seed);
	ck_assert_int_eq(fs_read(fs, ino, off, n, got), (ssize_t)n);
	ck_assert_msg(memcmp(got, want, n) == 0, "ino %llu at %llu", (unsigned long long)ino,
		      (unsigned long long)off);
	free(got);
	free(want);
}

static bool pf_state_of(uint64_t ino)
{
	pthread_mutex_lock(&fs->lock);
	struct fs_inode *in = fs_inode_get(fs, ino);
	ck_assert_ptr_nonnull(in);
	bool has = in->pf != NULL;
	pthread_mutex_unlock(&fs->lock);
	return has;
}

/* No memory for a file's read-ahead state, or for a window's buffer: the
 * read is served from the device (right bytes, no error) and the next
 * sequential read gets its windows; with spare buffers kept, windows take
 * those first, and a new buffer that cannot be had only skips that window.
 * Nothing leaks (the ASan run) and the windows' bytes are all accounted
 * for once they end. */
START_TEST(enomem_prefetch)
{
	const uint64_t K = 1024, size = 1024 * K, step = 16 * K;
	pf_mount();
	uint64_t a = pf_put("pf-a", size, 41), b = pf_put("pf-b", size, 42),
		 c = pf_put("pf-c", size, 43);

	/* The file's read-ahead state. */
	failalloc_arm_calloc(1, sizeof(struct fs_prefetch));
	pf_expect(a, 0, step, 41);
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 1);
	ck_assert(!pf_state_of(a));

	/* The first window's buffer (no spare exists yet). */
	ck_assert_uint_eq(tl_stats(fs).prefetch_spare_bytes, 0);
	uint64_t fills = tl_stats(fs).prefetch_fills;
	failalloc_arm_memalign(PF_WIN);
	pf_expect(a, 0, step, 41);
	ck_assert(pf_state_of(a));
	pf_expect(a, step, step, 41);	/* sequential: its windows fail */
	ck_assert_uint_eq(failalloc_failed(), 2);
	ck_assert_uint_eq(tl_stats(fs).prefetch_fills, fills);
	failalloc_disarm();
	uint64_t hits = tl_stats(fs).prefetch_hits;
	for (uint64_t pos = 2 * step; pos < size; pos += step)
		pf_expect(a, pos, step, 41);
	ck_assert_uint_gt(tl_stats(fs).prefetch_fills, fills);
	ck_assert_uint_gt(tl_stats(fs).prefetch_hits, hits);
	ck_assert_uint_gt(tl_stats(fs).prefetch_spare_bytes, 0);

	/* With spares: b and c read in turn want more windows than there are
	 * spares, so new buffers are asked for, and the first fails. */
	hits = tl_stats(fs).prefetch_hits;
	failalloc_arm_memalign(PF_WIN);
	for (uint64_t pos = 0; pos < size; pos += step) {
		pf_expect(b, pos, step, 42);
		pf_expect(c, pos, step, 43);
	}
	failalloc_disarm();
	ck_assert_uint_eq(failalloc_failed(), 3);
	ck_assert_uint_gt(tl_stats(fs).prefetch_hits, hits);

	/* Writes drop the three files' windows: once the fills in flight end,
	 * no window's bytes are counted, and the spares are within bound. */
	put(b, 0, BS, 44);
	put(a, 0, BS, 44);
	put(c, 0, BS, 44);
	for (int i = 0; i < 200 && tl_stats(fs).prefetch_bytes > 0; i++)
		usleep(5000);
	ck_assert_uint_eq(tl_stats(fs).prefetch_bytes, 0);
	ck_assert_uint_le(tl_stats(fs).prefetch_spare_bytes, FS_PF_SPARE * PF_WIN);
}
END_TEST

/* A write, truncate or punch that must read a block's bytes from the
 * device to change part of it fails with the device's error when that
 * read fails (not with -ENOMEM, and not by changing anything); once the
 * device reads again, the same calls work and reach the device. */
START_TEST(read_fault_partial_block_is_eio)
{
	const uint64_t size = 3 * BS - 100;
	uint64_t ino = mkfile("rmw");
	put(ino, 0, size, 51);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	ck_assert_int_eq(fs_unmount(fs), 0);	/* nothing of it buffered */
	fs = NULL;
	ck_assert_int_eq(try_mount(), 0);

	uint8_t b[BS];
	fill(b, sizeof(b), 0, 52);
	const int pm = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	struct stat a = { .st_size = (off_t)(2 * BS + 5) };
	ck_assert_int_eq(zdev_emu_inject_fault(dev, ZDEV_FAULT_READ, 0, 100, -EIO), 0);
	ck_assert_int_eq(fs_write(fs, ino, BS + 10, b, 100, false), -EIO);
	ck_assert_int_eq(fs_write(fs, ino, 10 * BS, b, BS, false), -EIO);	/* tail */
	ck_assert_int_eq(fs_setattr(fs, ino, &a, FS_SET_SIZE, NULL), -EIO);
	ck_assert_int_eq(fs_fallocate(fs, ino, pm, 1000, 100), -EIO);
	/* Whole blocks first: those are taken, the count says how many. */
	ck_assert_int_eq(fs_write(fs, ino, 0, b, BS + 10, false), BS);
	clear_faults();
	put(ino, 0, BS, 51);			/* as it was */
	expect(ino, size, 0, size, 51);
	struct fs_inode *in;
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	pthread_rwlock_rdlock(&in->rw);
	ck_assert_int_eq(fs_data_check(fs, in), 0);
	pthread_rwlock_unlock(&in->rw);

	ck_assert_int_eq(fs_write(fs, ino, BS + 10, b, 100, false), 100);
	ck_assert_int_eq(fs_setattr(fs, ino, &a, FS_SET_SIZE, NULL), 0);
	ck_assert_int_eq(fs_fsync(fs, ino, false), 0);
	ck_assert_int_eq(fs_unmount(fs), 0);
	fs = NULL;
	ck_assert_int_eq(fs_check(dev, false, report, NULL), 0);
	ck_assert_int_eq(try_mount(), 0);
	uint8_t want[2 * BS + 5], got[2 * BS + 6];
	fill(want, sizeof(want), 0, 51);
	memcpy(want + BS + 10, b, 100);
	ck_assert_int_eq(fs_read(fs, ino, 0, sizeof(got), got), (ssize_t)sizeof(want));
	ck_assert(memcmp(got, want, sizeof(want)) == 0);
}
END_TEST

int main(void)
{
	/* ZF_FAULT_POINTS: fault positions per sweep (default 16; the long
	 * run uses more).  Each position is a separate fork. */
	int pts = getenv("ZF_FAULT_POINTS") ? atoi(getenv("ZF_FAULT_POINTS")) : 16;
	if (pts < 1)
		pts = 1;
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("sweep");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, write_fault_sweep, 0, pts);
	tcase_add_loop_test(tc, write_fault_burst, 0, (pts + 2) / 3);
	tcase_add_loop_test(tc, flush_fault_sweep, 0, (pts + 1) / 2);
	tcase_add_loop_test(tc, reset_fault_sweep, 0, (pts + 2) / 3);
	tcase_add_loop_test(tc, nospace_write_fault, 0, (pts + 3) / 4);
	tcase_add_test(tc, fsync_reports_write_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("other");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, read_faults);
	tcase_add_test(tc, mount_flushes_what_it_replayed_before_resets);
	tcase_add_test(tc, read_fault_partial_block_is_eio);
	tcase_add_test(tc, mkfs_faults);
	tcase_add_test(tc, device_full);
	tcase_add_test(tc, meta_full);
	suite_add_tcase(s, tc);
	tc = tcase_create("log_first");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, failed_truncate_keeps_buffered_data);
	tcase_add_test(tc, failed_punch_keeps_buffered_data);
	tcase_add_test(tc, failed_setid_drop_keeps_mode_and_data);
	tcase_add_test(tc, failed_fsync_attr_stays_dirty);
	tcase_add_test(tc, enomem_write_extent_log_agrees);
	tcase_add_test(tc, enomem_prealloc_range_log_first);
	tcase_add_test(tc, enomem_write_extent_block_split);
	tcase_add_test(tc, enomem_punch_log_agrees);
	tcase_add_test(tc, enomem_gc_repoint_log_agrees);
	tcase_add_test(tc, failed_copy_shares_nothing);
	tcase_add_test(tc, enomem_copy_log_agrees);
	tcase_add_test(tc, enomem_donated_write);
	tcase_add_test(tc, enomem_collector_start);
	tcase_add_test(tc, enomem_write_chunk_array);
	tcase_add_test(tc, enomem_dir_cookies);
	tcase_add_test(tc, enomem_prefetch);
	tcase_add_test(tc, release_write_error_reaches_fsync);
	tcase_add_test(tc, write_behind_error_reaches_fsync);
	suite_add_tcase(s, tc);
	return tl_run(s);
}
